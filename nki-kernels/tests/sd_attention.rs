//! sd_attention v1 and v2 against an ndarray reference (`softmax(0.125 q k^T) v` in f64) at
//! the tutorial's `[4096, 64]` fp32 and edge shapes; v2 must model faster than v1.

use nki_core::prelude::*;
use nki_kernels::reference::attention as reference;
use nki_kernels::sd_attention::{sd_attention_v1, sd_attention_v2, SD_SCALE};
use nki_kernels::testing::{check_modes, random_f32};

fn check(seq: usize, d: usize, atol: f32, rtol: f32) {
    let (q, k, v) = (
        random_f32(seq, d, 1),
        random_f32(seq, d, 2),
        random_f32(seq, d, 3),
    );
    let want = reference(&q, &k, &v, SD_SCALE);
    let (qh, kh, vh) = (
        Hbm::from_array(&q).unwrap(),
        Hbm::from_array(&k).unwrap(),
        Hbm::from_array(&v).unwrap(),
    );
    check_modes(
        &format!("sd_attention_v1 [{seq}, {d}]"),
        &want,
        atol,
        rtol,
        |launch| {
            let mut out = Hbm::<f32>::zeros([seq, d]);
            let r = sd_attention_v1::run(launch, &qh, &kh, &vh, &mut out, SD_SCALE)?;
            Ok((out.to_array()?, r))
        },
    );
    check_modes(
        &format!("sd_attention_v2 [{seq}, {d}]"),
        &want,
        atol,
        rtol,
        |launch| {
            let mut out = Hbm::<f32>::zeros([seq, d]);
            let r = sd_attention_v2::run(launch, &qh, &kh, &vh, &mut out, SD_SCALE)?;
            Ok((out.to_array()?, r))
        },
    );
}

#[test]
fn tutorial_shape() {
    check(4096, 64, 1e-5, 1e-3);
}

#[test]
fn edge_shapes() {
    check(128, 64, 1e-5, 1e-3);
    check(384, 128, 1e-5, 1e-3);
    check(256, 1, 1e-5, 1e-3);
}

#[test]
fn v2_models_faster() {
    let t = Hbm::<f32>::shape_only([4096, 64]);
    for target in [Target::Trn1, Target::Trn2] {
        let mut out = Hbm::<f32>::shape_only([4096, 64]);
        let v1 = sd_attention_v1::estimate(1, target, &t, &t, &t, &mut out, SD_SCALE).unwrap();
        let v2 = sd_attention_v2::estimate(1, target, &t, &t, &t, &mut out, SD_SCALE).unwrap();
        assert!(
            v2.latency_ns < v1.latency_ns,
            "{target}: v2 {} vs v1 {}",
            v2.latency_ns,
            v1.latency_ns
        );
    }
}
