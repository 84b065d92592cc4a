//! `nisa::nonzero_with_count` against a plain-Rust reference of the NKI 0.7 definition (the
//! indices of the non-zero elements plus an offset, padding, the count; only partitions 0,
//! 16, ..., 112 served), with NaN, -0.0, all-zero and all-non-zero rows, and its rules.

use nki_core::prelude::*;

mod common;
use common::{fails_with, hbm, run_into, Rng};

fn reference(row: &[f32], offset: i64, pad: i64) -> Vec<f32> {
    let mut out = Vec::new();
    for (i, &x) in row.iter().enumerate() {
        if x != 0.0 {
            out.push((i as i64 + offset) as f32);
        }
    }
    let n = out.len();
    while out.len() < row.len() {
        out.push(pad as f32);
    }
    out.push(n as f32);
    out
}

#[test]
fn nonzero_with_count_serves_every_sixteenth_partition() {
    let (p, t) = (128, 40);
    let mut rng = Rng(29);
    let mut xs: Vec<f32> = rng
        .int_f32s(p * t, -2, 2)
        .into_iter()
        .map(|v| if v.abs() == 2.0 { 0.0 } else { v })
        .collect();
    // Edge rows: NaN counts as non-zero, -0.0 as zero; an all-zero and an all-one row.
    xs[16 * t] = f32::NAN;
    xs[16 * t + 1] = -0.0;
    xs[32 * t..33 * t].fill(0.0);
    xs[48 * t..49 * t].fill(1.0);
    let xh = hbm(&[p, t], xs.clone());
    let got = run_into(Hbm::<i32>::zeros([p, t + 1]), |o| {
        let x = nl::load(&xh);
        let d = nl::ndarray(&[p, t + 1], DType::I32, MemKind::Sbuf);
        nisa::memset(&d, -7.0, None);
        nisa::nonzero_with_count(&d, &x, 100, -1);
        nl::store(o, &d);
    })
    .unwrap();
    for r in 0..p {
        let g = &got[r * (t + 1)..(r + 1) * (t + 1)];
        if r % 16 == 0 {
            assert_eq!(g, reference(&xs[r * t..(r + 1) * t], 100, -1), "row {r}");
        } else {
            assert!(g.iter().all(|&v| v == -7.0), "row {r} is not served");
        }
    }
    assert_eq!(got[33 * (t + 1) - 1], 0.0, "all-zero row count");
    assert_eq!(got[49 * (t + 1) - 1], t as f32, "all-one row count");
}

#[test]
fn nonzero_with_count_records_the_served_rows() {
    // Estimate mode (records only): the 8 served rows are read and written, nothing else.
    let report = Launch::new(1)
        .mode(Mode::Estimate)
        .run(|| {
            let x = nl::ndarray(&[128, 64], DType::F32, MemKind::Sbuf);
            let d = nl::ndarray(&[128, 65], DType::I32, MemKind::Sbuf);
            nisa::memset(&x, 0.0, None);
            nisa::nonzero_with_count(&d, &x, 0, -1);
            // Partitions 32..64 hold served rows 32 and 48 and 30 rows never written.
            let r = nl::ndarray(&[32, 65], DType::I32, MemKind::Sbuf);
            nisa::tensor_copy(&r, d.slice((32..64, ..)), None);
        })
        .expect_err("rows 33..48 are never written");
    assert_eq!(report.kind(), ErrorKind::UninitializedRead, "{report}");
}

#[test]
fn nonzero_with_count_rules() {
    let e = fails_with(ErrorKind::ShapeMismatch, || {
        let x = nl::ndarray(&[16, 8], DType::F32, MemKind::Sbuf);
        let d = nl::ndarray(&[16, 8], DType::I32, MemKind::Sbuf);
        nisa::memset(&x, 0.0, None);
        nisa::nonzero_with_count(&d, &x, 0, -1);
    });
    assert!(e.to_string().contains("one more element"), "{e}");
    let e = fails_with(ErrorKind::DType, || {
        let x = nl::ndarray(&[16, 8], DType::F32, MemKind::Sbuf);
        let d = nl::ndarray(&[16, 9], DType::F32, MemKind::Sbuf);
        nisa::memset(&x, 0.0, None);
        nisa::nonzero_with_count(&d, &x, 0, -1);
    });
    assert!(e.to_string().contains("int32"), "{e}");
    let e = Launch::new(1)
        .target(Target::Trn1)
        .run(|| {
            let x = nl::ndarray(&[16, 8], DType::F32, MemKind::Sbuf);
            let d = nl::ndarray(&[16, 9], DType::I32, MemKind::Sbuf);
            nisa::memset(&x, 0.0, None);
            nisa::nonzero_with_count(&d, &x, 0, -1);
        })
        .expect_err("trn1");
    assert!(e.to_string().contains("NeuronCore-v3"), "{e}");
}
