//! mamba v1 and v2 against a plain-loop selective scan: the tutorial's all-ones toy
//! `[1, 256, 512, 16]`, random inputs, and edge shapes (one channel, 130 channels).

use ndarray::{Array2, Array3};
use nki_core::prelude::*;
use nki_kernels::mamba::{mamba_v1, mamba_v2};
use nki_kernels::reference::{selective_scan as reference, ScanInputs};
use nki_kernels::testing::{check_modes, random_range};

fn random(batch: usize, chans: usize, len: usize, states: usize) -> ScanInputs {
    let r3 = |d0, d1, lo, hi, seed| {
        Array3::from_shape_vec((d0, d1, len), random_range(d0 * d1 * len, lo, hi, seed)).unwrap()
    };
    ScanInputs {
        delta: r3(batch, chans, 0.0, 0.2, 1),
        u: r3(batch, chans, -1.0, 1.0, 2),
        a: Array2::from_shape_vec((chans, states), random_range(chans * states, -1.0, -0.1, 3))
            .unwrap(),
        b: r3(batch, states, -1.0, 1.0, 4),
        c: r3(batch, states, -1.0, 1.0, 5),
    }
}

fn check(x: &ScanInputs, tol: f32) {
    let want = reference(x);
    let h = |a: &Array3<f32>| Hbm::from_array(a).unwrap();
    let (d, u, a, b, c) = (
        h(&x.delta),
        h(&x.u),
        Hbm::from_array(&x.a).unwrap(),
        h(&x.b),
        h(&x.c),
    );
    let dims = x.delta.dim();
    let label = format!("{dims:?} N={}", x.a.dim().1);
    check_modes(&format!("mamba_v1 {label}"), &want, tol, tol, |launch| {
        let mut out = Hbm::<f32>::zeros([dims.0, dims.1, dims.2]);
        let r = mamba_v1::run(launch, &d, &u, &a, &b, &c, &mut out)?;
        Ok((out.to_array()?, r))
    });
    check_modes(&format!("mamba_v2 {label}"), &want, tol, tol, |launch| {
        let mut out = Hbm::<f32>::zeros([dims.0, dims.1, dims.2]);
        let r = mamba_v2::run(launch, &d, &u, &a, &b, &c, &mut out)?;
        Ok((out.to_array()?, r))
    });
}

#[test]
fn tutorial_toy_all_ones() {
    let (batch, chans, len, states) = (1, 256, 512, 16);
    let ones3 = |d1| Array3::from_elem((batch, d1, len), 1.0f32);
    let x = ScanInputs {
        delta: ones3(chans),
        u: ones3(chans),
        a: Array2::from_elem((chans, states), -1.0),
        b: ones3(states),
        c: ones3(states),
    };
    check(&x, 1e-2);
}

#[test]
fn random_inputs() {
    check(&random(2, 256, 512, 16), 1e-2);
}

#[test]
fn edge_shapes() {
    check(&random(1, 1, 64, 4), 1e-2);
    check(&random(1, 130, 100, 3), 1e-2);
}

#[test]
fn v2_models_faster_at_the_autocomp_shape() {
    let s3 = |d1| Hbm::<f32>::shape_only([1, d1, 2048]);
    let (d, a, b) = (s3(256), Hbm::<f32>::shape_only([256, 16]), s3(16));
    for target in [Target::Trn1, Target::Trn2] {
        let mut out = s3(256);
        let v1 = mamba_v1::estimate(1, target, &d, &d, &a, &b, &b, &mut out).unwrap();
        let v2 = mamba_v2::estimate(1, target, &d, &d, &a, &b, &b, &mut out).unwrap();
        assert!(
            v2.latency_ns < v1.latency_ns,
            "{target}: v2 {} vs v1 {}",
            v2.latency_ns,
            v1.latency_ns
        );
    }
}
