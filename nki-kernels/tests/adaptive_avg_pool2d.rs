//! adaptive_avg_pool2d against a plain-loop reference with PyTorch's windows, on the
//! nki-samples unit-test cases (those too large for a quick execute run are modelled in
//! estimate mode only).

use ndarray::Array4;
use nki_core::prelude::*;
use nki_kernels::adaptive_avg_pool2d::adaptive_avg_pool2d;
use nki_kernels::reference::adaptive_avg_pool2d as reference;
use nki_kernels::testing::{check_modes, random_range};

fn check<T: Element>(dims: [usize; 4], out: (usize, usize), tol: f32) {
    let [n, c, h, w] = dims;
    let vals = random_range(n * c * h * w, -2.0, 2.0, (c * h + out.0) as u64);
    let x = Array4::from_shape_vec(dims, vals.into_iter().map(T::from_f32).collect()).unwrap();
    let want = reference(&x, out.0, out.1);
    let input = Hbm::from_array(&x).unwrap();
    check_modes(
        &format!("adaptive_avg_pool2d {dims:?} -> {out:?}"),
        &want,
        tol,
        tol,
        |launch| {
            let mut o = Hbm::<T>::zeros([n, c, out.0, out.1]);
            let r = adaptive_avg_pool2d::run(launch, &input, &mut o)?;
            Ok((o.to_array()?, r))
        },
    );
}

#[test]
fn sample_cases_fp32() {
    check::<f32>([1, 64, 56, 56], (7, 7), 1e-5);
    check::<f32>([2, 128, 28, 28], (14, 14), 1e-5);
    check::<f32>([1, 512, 7, 7], (1, 1), 1e-5);
    check::<f32>([2, 192, 16, 16], (4, 2), 1e-5);
    check::<f32>([1, 256, 13, 13], (6, 6), 1e-5);
    check::<f32>([1, 1, 1, 1], (1, 1), 1e-5);
    check::<f32>([1, 128, 7, 7], (7, 7), 1e-5);
    check::<f32>([4, 512, 7, 7], (1, 1), 1e-5);
}

#[test]
fn sample_cases_half_precision() {
    check::<f16>([1, 64, 32, 32], (8, 8), 1e-2);
    check::<bf16>([3, 96, 24, 24], (6, 6), 1e-2);
    check::<bf16>([1, 256, 14, 14], (7, 7), 1e-2);
    check::<f16>([2, 128, 28, 28], (7, 7), 1e-2);
}

#[test]
fn large_window_is_chunked() {
    // 256 x 256 pooled to 1 x 1: four 64-row chunks per window.
    check::<f32>([1, 8, 256, 256], (1, 1), 1e-5);
}

#[test]
fn large_sample_cases_estimate() {
    for (dims, o) in [
        ([2usize, 64, 256, 256], (1usize, 1usize)),
        ([2, 2048, 32, 32], (3, 3)),
        ([4, 64, 56, 56], (7, 7)),
    ] {
        let x = Hbm::<f32>::shape_only(dims);
        let mut out = Hbm::<f32>::shape_only([dims[0], dims[1], o.0, o.1]);
        let p = adaptive_avg_pool2d::estimate(1, Target::Trn2, &x, &mut out).unwrap();
        assert!(p.latency_ns > 0.0);
    }
}
