//! average_pool2d against a plain-loop reference: the tutorial's bf16 `arange` `[2, 6, 6]`
//! with pool 2 (exact), and edge shapes (one channel, 130 channels, odd image sizes).

use ndarray::Array3;
use nki_core::prelude::*;
use nki_kernels::average_pool2d::average_pool2d;
use nki_kernels::reference::average_pool2d as reference;
use nki_kernels::testing::{check_modes, random_vec};

fn check<T: Element>(x: Array3<T>, p: usize, tol: f32) {
    let (c, h, w) = x.dim();
    let want = reference(x.view(), p);
    let input = Hbm::from_array(&x).unwrap();
    check_modes(
        &format!("average_pool2d [{c}, {h}, {w}] / {p}"),
        &want,
        tol,
        tol,
        |launch| {
            let mut out = Hbm::<T>::zeros([c, h / p, w / p]);
            let r = average_pool2d::run(launch, &input, &mut out, p)?;
            Ok((out.to_array()?, r))
        },
    );
}

#[test]
fn tutorial_arange_bf16_is_exact() {
    let x = Array3::from_shape_fn((2, 6, 6), |(c, i, j)| {
        bf16::from_f32((c * 36 + i * 6 + j) as f32)
    });
    check(x, 2, 0.0);
}

#[test]
fn edge_shapes() {
    let rand = |c: usize, h: usize, w: usize| {
        Array3::from_shape_vec((c, h, w), random_vec(c * h * w, (c * h) as u64)).unwrap()
    };
    check(rand(1, 4, 4), 2, 1e-6);
    check(rand(130, 9, 7), 3, 1e-6);
    check(rand(128, 32, 32), 4, 1e-6);
    // Two bands of 128 output rows (64 KiB of input rows each).
    check(rand(3, 256, 128), 2, 1e-6);
}
