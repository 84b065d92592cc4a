//! layernorm v1 and v2 against an ndarray reference (biased variance, eps 1e-5) at the
//! tutorial's perf shape `[300, 1000]`, edge shapes and, in estimate mode, the torch driver's
//! `[4096, 8192]`, where v2 must model faster than v1.

use ndarray::Array1;
use nki_core::prelude::*;
use nki_kernels::layernorm::{layernorm_v1, layernorm_v2};
use nki_kernels::reference::layernorm as reference;
use nki_kernels::testing::{check_modes, random_f32, random_vec};

fn check(rows: usize, d: usize) {
    let x = random_f32(rows, d, rows as u64 + 1);
    let g = Array1::from(random_vec(d, 5));
    let b = Array1::from(random_vec(d, 6));
    let want = reference(&x, &g, &b);
    let (xh, gh, bh) = (
        Hbm::from_array(&x).unwrap(),
        Hbm::from_array(&g).unwrap(),
        Hbm::from_array(&b).unwrap(),
    );
    check_modes(
        &format!("layernorm_v1 [{rows}, {d}]"),
        &want,
        1e-3,
        1e-2,
        |launch| {
            let mut out = Hbm::<f32>::zeros([rows, d]);
            let r = layernorm_v1::run(launch, &xh, &gh, &bh, &mut out)?;
            Ok((out.to_array()?, r))
        },
    );
    check_modes(
        &format!("layernorm_v2 [{rows}, {d}]"),
        &want,
        1e-3,
        1e-2,
        |launch| {
            let mut out = Hbm::<f32>::zeros([rows, d]);
            let r = layernorm_v2::run(launch, &xh, &gh, &bh, &mut out)?;
            Ok((out.to_array()?, r))
        },
    );
}

#[test]
fn tutorial_perf_shape() {
    check(300, 1000);
}

#[test]
fn edge_shapes() {
    check(1, 1000);
    check(128, 512);
    check(200, 2048);
}

#[test]
fn v2_models_faster_at_the_driver_shape() {
    let x = Hbm::<f32>::shape_only([4096, 8192]);
    let g = Hbm::<f32>::shape_only([8192]);
    let b = Hbm::<f32>::shape_only([8192]);
    for target in [Target::Trn1, Target::Trn2] {
        let mut out = Hbm::<f32>::shape_only([4096, 8192]);
        let v1 = layernorm_v1::estimate(1, target, &x, &g, &b, &mut out).unwrap();
        let v2 = layernorm_v2::estimate(1, target, &x, &g, &b, &mut out).unwrap();
        assert!(
            v2.latency_ns < v1.latency_ns,
            "{target}: v2 {} ns vs v1 {} ns",
            v2.latency_ns,
            v1.latency_ns
        );
    }
}
