//! rmsnorm_qkv against an f64 reference (`x / (sqrt(mean(x^2)) + 1e-6) @ W`) at the sample's
//! shapes (fp16 / bf16 inputs uniform in [0, 1), atol = rtol = 1e-2; the largest in estimate
//! mode) and edge shapes.

use ndarray::{Array2, Array3};
use nki_core::prelude::*;
use nki_kernels::reference::rmsnorm_qkv as reference;
use nki_kernels::rmsnorm_qkv::rmsnorm_qkv;
use nki_kernels::testing::{check_modes, random_range};

fn check<T: Element>(s: usize, d: usize, dh: usize) {
    let x = Array3::from_shape_vec(
        (1, s, d),
        random_range(s * d, 0.0, 1.0, 1)
            .into_iter()
            .map(T::from_f32)
            .collect(),
    )
    .unwrap();
    let w = Array2::from_shape_vec(
        (d, dh),
        random_range(d * dh, 0.0, 1.0, 2)
            .into_iter()
            .map(T::from_f32)
            .collect(),
    )
    .unwrap();
    let want = reference(&x, &w);
    let (xh, wh) = (Hbm::from_array(&x).unwrap(), Hbm::from_array(&w).unwrap());
    check_modes(
        &format!("rmsnorm_qkv [1, {s}, {d}] @ [{d}, {dh}]"),
        &want,
        1e-2,
        1e-2,
        |launch| {
            let mut out = Hbm::<T>::zeros([1, s, dh]);
            let r = rmsnorm_qkv::run(launch, &xh, &wh, &mut out)?;
            Ok((out.to_array()?, r))
        },
    );
}

#[test]
fn sample_shapes() {
    check::<f16>(128, 512, 512);
    check::<bf16>(512, 1024, 384);
    check::<bf16>(128, 1024, 512);
}

#[test]
fn edge_shapes() {
    check::<f32>(1, 128, 64);
    check::<bf16>(200, 256, 700);
}

#[test]
fn largest_sample_shape_estimates() {
    let x = Hbm::<bf16>::shape_only([1, 1024, 8192]);
    let w = Hbm::<bf16>::shape_only([8192, 512]);
    let mut out = Hbm::<bf16>::shape_only([1, 1024, 512]);
    let p = rmsnorm_qkv::estimate(1, Target::Trn2, &x, &w, &mut out).unwrap();
    assert!(p.latency_ns > 0.0);
}
