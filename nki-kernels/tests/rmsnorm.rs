//! rmsnorm against an ndarray reference at the tutorial's shapes (`[128, 512]` numpy driver,
//! `[250, 512]` torch driver) and edge shapes.

use ndarray::Array1;
use nki_core::prelude::*;
use nki_kernels::reference::rmsnorm as reference;
use nki_kernels::rmsnorm::rmsnorm;
use nki_kernels::testing::{check_modes, random_f32, random_vec};

fn check(rows: usize, d: usize, atol: f32, rtol: f32) {
    let a = random_f32(rows, d, rows as u64);
    let g = Array1::from(random_vec(d, 99));
    let want = reference(&a, &g);
    let (ah, gh) = (Hbm::from_array(&a).unwrap(), Hbm::from_array(&g).unwrap());
    check_modes(
        &format!("rmsnorm [{rows}, {d}]"),
        &want,
        atol,
        rtol,
        |launch| {
            let mut out = Hbm::<f32>::zeros([rows, d]);
            let r = rmsnorm::run(launch, &ah, &gh, &mut out)?;
            Ok((out.to_array()?, r))
        },
    );
}

#[test]
fn tutorial_shapes() {
    check(128, 512, 1e-4, 1e-2);
    check(250, 512, 1e-5, 1e-3);
}

#[test]
fn edge_shapes() {
    check(1, 512, 1e-5, 1e-3);
    check(300, 96, 1e-5, 1e-3);
    check(128, 4096, 1e-5, 1e-3);
}

#[test]
fn autocomp_shape_estimates() {
    let a = Hbm::<f32>::shape_only([512, 4096]);
    let g = Hbm::<f32>::shape_only([4096]);
    let mut out = Hbm::<f32>::shape_only([512, 4096]);
    let p = rmsnorm::estimate(1, Target::Trn1, &a, &g, &mut out).unwrap();
    assert!(p.latency_ns > 0.0);
}

#[test]
fn wrong_gain_length_is_an_error() {
    let a = Hbm::<f32>::zeros([4, 8]);
    let g = Hbm::<f32>::zeros([7]);
    let mut out = Hbm::<f32>::zeros([4, 8]);
    let e = rmsnorm::launch(1, &a, &g, &mut out).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ShapeMismatch, "{e}");
}
