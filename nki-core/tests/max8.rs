//! `nisa::max8` and `nisa::nc_find_index8` against independent references written from the
//! NKI 0.7 definitions (repeated selection of the largest remaining value; a linear search for
//! the first equal element), with ties, NaN, infinities, absent values and the operand rules;
//! and their cost (`N` VectorE cycles).

use nki_core::prelude::*;
use nki_core::Target;

mod common;
use common::{fails_with, hbm, run_into, Rng};

/// The 8 largest values of `row` by repeated selection: each step takes the largest remaining
/// value (NaN counts as largest; among equals the earliest), and removes that one element.
fn reference_top8(row: &[f32]) -> Vec<f32> {
    let mut left: Vec<f32> = row.to_vec();
    let mut out = Vec::new();
    for _ in 0..8 {
        let mut best = 0;
        for (i, &v) in left.iter().enumerate() {
            let b = left[best];
            let better = if b.is_nan() {
                false
            } else {
                v.is_nan() || v > b
            };
            if better {
                best = i;
            }
        }
        out.push(left.remove(best));
    }
    out
}

/// For each column `j` of `vals`: if `vals[j]` already appeared `m` times in columns before
/// `j`, the position of its `(m + 1)`-th equal element of `row`, else `sentinel`.
fn reference_find(row: &[f32], vals: &[f32], sentinel: f32) -> Vec<f32> {
    let mut out = Vec::new();
    for j in 0..vals.len() {
        let mut skip = 0;
        for u in &vals[..j] {
            if *u == vals[j] {
                skip += 1;
            }
        }
        let mut found = sentinel;
        for (i, &x) in row.iter().enumerate() {
            if x == vals[j] {
                if skip == 0 {
                    found = i as f32;
                    break;
                }
                skip -= 1;
            }
        }
        out.push(found);
    }
    out
}

/// The documented `nc_match_replace8`: columns from 7 down to 0, each replacing the first
/// element equal to its value that no earlier-processed column took.
fn reference_match_replace(
    row: &[f32],
    vals: &[f32],
    imm: f32,
    sentinel: f32,
) -> (Vec<f32>, Vec<f32>) {
    let mut taken: Vec<usize> = Vec::new();
    let mut idx = vec![sentinel; 8];
    for j in (0..8).rev() {
        for (i, &x) in row.iter().enumerate() {
            if x == vals[j] && !taken.contains(&i) {
                taken.push(i);
                idx[j] = i as f32;
                break;
            }
        }
    }
    let out = row
        .iter()
        .enumerate()
        .map(|(i, &x)| if taken.contains(&i) { imm } else { x })
        .collect();
    (out, idx)
}

/// Runs max8 over `xs` as `[p, f]` and returns the `[p, 8]` result (f32 dst).
fn run_max8(p: usize, f: usize, xs: &[f32]) -> Vec<f32> {
    let a = hbm(&[p, f], xs.to_vec());
    run_into(Hbm::<f32>::zeros([p, 8]), |o| {
        let x = nl::load(&a);
        let top = nl::ndarray(&[p, 8], DType::F32, MemKind::Sbuf);
        nisa::max8(&top, &x);
        nl::store(o, &top);
    })
    .unwrap()
}

fn bits_eq(got: &[f32], want: &[f32]) -> bool {
    got.len() == want.len()
        && got
            .iter()
            .zip(want)
            .all(|(g, w)| (g.is_nan() && w.is_nan()) || g.to_bits() == w.to_bits())
}

#[test]
fn max8_random_rows_match_repeated_selection() {
    // The SDK example: [32, 128] of random values; plus a full [128, 1000] tile.
    for (p, f, seed) in [(32, 128, 1), (128, 1000, 2)] {
        let xs = Rng(seed).vec(p * f, -100.0, 100.0);
        let got = run_max8(p, f, &xs);
        let want: Vec<f32> = xs.chunks(f).flat_map(reference_top8).collect();
        assert!(bits_eq(&got, &want), "[{p}, {f}]");
    }
}

#[test]
fn max8_edges_ties_nan_infinities_and_bounds() {
    let f = 16;
    let rows: Vec<Vec<f32>> = vec![
        // Ties: the maximum three times, then another pair.
        vec![
            1.0, 5.0, 5.0, 2.0, 5.0, 4.0, 4.0, 0.0, -1.0, 3.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
        ],
        // NaN and infinities.
        {
            let mut r = vec![0.5; f];
            r[3] = f32::NAN;
            r[7] = f32::INFINITY;
            r[9] = f32::NEG_INFINITY;
            r[10] = -0.0;
            r
        },
        // All equal.
        vec![-7.0; f],
        // Exactly 8 distinct values among negatives.
        (0..f).map(|i| -(i as f32)).collect(),
    ];
    let xs: Vec<f32> = rows.concat();
    let got = run_max8(rows.len(), f, &xs);
    let want: Vec<f32> = rows.iter().flat_map(|r| reference_top8(r)).collect();
    assert!(bits_eq(&got, &want), "got {got:?}\nwant {want:?}");
    assert_eq!(&got[..8], &[5.0, 5.0, 5.0, 4.0, 4.0, 3.0, 2.0, 1.0]);
    assert!(got[8].is_nan() && got[9] == f32::INFINITY);

    // bf16 destination: values rounded to bf16 (the source read as fp32).
    let xs: Vec<f32> = (0..8).map(|i| 1.0 + i as f32 * 1e-3).collect();
    let a = hbm(&[1, 8], xs.clone());
    let got = run_into(Hbm::<f32>::zeros([1, 8]), |o| {
        let top = nl::ndarray(&[1, 8], DType::BF16, MemKind::Sbuf);
        nisa::max8(&top, &nl::load(&a));
        nl::store(o, &top);
    })
    .unwrap();
    let mut want: Vec<f32> = xs
        .iter()
        .rev()
        .map(|&v| bf16::from_f32(v).to_f32())
        .collect();
    want.sort_by(|a, b| b.total_cmp(a));
    assert_eq!(got, want);

    // Bounds: fewer than 8 elements per partition, a dst of the wrong shape.
    let small = hbm(&[4, 7], vec![0.0; 28]);
    let e = fails_with(ErrorKind::ShapeMismatch, || {
        let top = nl::ndarray(&[4, 8], DType::F32, MemKind::Sbuf);
        nisa::max8(&top, &nl::load(&small));
    });
    assert!(e.to_string().contains("between 8 and 16384"), "{e}");
    let ok = hbm(&[4, 64], vec![0.0; 256]);
    let e = fails_with(ErrorKind::ShapeMismatch, || {
        let top = nl::ndarray(&[4, 4], DType::F32, MemKind::Sbuf);
        nisa::max8(&top, &nl::load(&ok));
    });
    assert!(e.to_string().contains("[4, 8]"), "{e}");
}

#[test]
fn find_index8_matches_linear_search_with_sentinels() {
    let (p, f) = (32, 128);
    let xs = Rng(5).vec(p * f, 0.0, 1.0);
    let a = hbm(&[p, f], xs.clone());
    // max8 then nc_find_index8: the SDK example, indices in range.
    let got = run_into(Hbm::<u32>::zeros([p, 8]), |o| {
        let x = nl::load(&a);
        let top = nl::ndarray(&[p, 8], DType::F32, MemKind::Sbuf);
        nisa::max8(&top, &x);
        let idx = nl::ndarray(&[p, 8], DType::U32, MemKind::Sbuf);
        nisa::nc_find_index8(&idx, &x, &top);
        nl::store(o, &idx);
    })
    .unwrap();
    let want: Vec<f32> = xs
        .chunks(f)
        .flat_map(|r| reference_find(r, &reference_top8(r), u32::MAX as f32))
        .collect();
    assert_eq!(got, want);

    // Ties, an absent value, NaN, -0.0 vs 0.0, and uint16 indices.
    let row: Vec<f32> = vec![3.0, 1.0, 3.0, f32::NAN, 0.0, 2.0, 1.0, 9.0, 2.0, 4.0];
    let vals: Vec<f32> = vec![3.0, 3.0, 7.0, f32::NAN, -0.0, 9.0, 1.0, 2.0];
    let (d, v) = (hbm(&[1, 10], row.clone()), hbm(&[1, 8], vals.clone()));
    for (dtype, sentinel) in [(DType::U32, u32::MAX as f32), (DType::U16, u16::MAX as f32)] {
        let got = run_into(Hbm::<u32>::zeros([1, 8]), |o| {
            let idx = nl::ndarray(&[1, 8], dtype, MemKind::Sbuf);
            nisa::nc_find_index8(&idx, &nl::load(&d), &nl::load(&v));
            nl::store(o, &idx);
        })
        .unwrap();
        assert_eq!(got, reference_find(&row, &vals, sentinel), "{dtype}");
        assert_eq!(got, vec![0.0, 2.0, sentinel, sentinel, 4.0, 7.0, 1.0, 5.0]);
    }

    // A float destination is an error; vals must hold 8 values.
    let e = fails_with(ErrorKind::DType, || {
        let idx = nl::ndarray(&[1, 8], DType::F32, MemKind::Sbuf);
        nisa::nc_find_index8(&idx, &nl::load(&d), &nl::load(&v));
    });
    assert!(e.to_string().contains("uint32 or uint16"), "{e}");
    let short = hbm(&[1, 4], vec![0.0; 4]);
    let e = fails_with(ErrorKind::ShapeMismatch, || {
        let idx = nl::ndarray(&[1, 8], DType::U32, MemKind::Sbuf);
        nisa::nc_find_index8(&idx, &nl::load(&d), &nl::load(&short));
    });
    assert!(e.to_string().contains("exactly 8"), "{e}");
}

#[test]
fn find_index8_pairs_tied_maxima_with_distinct_positions() {
    // max8 of a row whose maximum occurs three times: the three copies get positions 1, 2, 4.
    let row: Vec<f32> = vec![1.0, 5.0, 5.0, 2.0, 5.0, 4.0, 4.0, 0.0, -1.0, 3.0];
    let d = hbm(&[1, 10], row.clone());
    let got = run_into(Hbm::<u32>::zeros([1, 8]), |o| {
        let x = nl::load(&d);
        let top = nl::ndarray(&[1, 8], DType::F32, MemKind::Sbuf);
        nisa::max8(&top, &x);
        let idx = nl::ndarray(&[1, 8], DType::U32, MemKind::Sbuf);
        nisa::nc_find_index8(&idx, &x, &top);
        nl::store(o, &idx);
    })
    .unwrap();
    assert_eq!(got, vec![1.0, 2.0, 4.0, 5.0, 6.0, 9.0, 3.0, 0.0]);
}

/// Runs nc_match_replace8 on `[p, f]` data and `[p, 8]` vals; returns (dst, dst_idx).
fn run_match_replace(
    p: usize,
    f: usize,
    data: &[f32],
    vals: &[f32],
    imm: f32,
) -> (Vec<f32>, Vec<f32>) {
    let (d, v) = (hbm(&[p, f], data.to_vec()), hbm(&[p, 8], vals.to_vec()));
    let out = run_into(Hbm::<f32>::zeros([p, f]), |o| {
        let r = nl::ndarray(&[p, f], DType::F32, MemKind::Sbuf);
        nisa::nc_match_replace8(&r, &nl::load(&d), &nl::load(&v), imm, None);
        nl::store(o, &r);
    })
    .unwrap();
    let idx = run_into(Hbm::<u32>::zeros([p, 8]), |o| {
        let r = nl::ndarray(&[p, f], DType::F32, MemKind::Sbuf);
        let i = nl::ndarray(&[p, 8], DType::U32, MemKind::Sbuf);
        nisa::nc_match_replace8(&r, &nl::load(&d), &nl::load(&v), imm, Some(i.view()));
        nl::store(o, &i);
    })
    .unwrap();
    (out, idx)
}

#[test]
fn match_replace8_follows_the_documented_pairing() {
    // The documented example (padded to 16 elements with values that never match).
    let mut row = vec![1.0, 2.0, 3.0, 4.0, 8.0, 8.0, 8.0, 8.0, 8.0, 8.0, 8.0];
    row.resize(16, -5.0);
    let vals = vec![3.0, 8.0, 8.0, 8.0, 8.0, 8.0, 8.0, 8.0];
    let (out, idx) = run_match_replace(1, 16, &row, &vals, -100.0);
    assert_eq!(idx, vec![2.0, 10.0, 9.0, 8.0, 7.0, 6.0, 5.0, 4.0]);
    let (want_out, want_idx) = reference_match_replace(&row, &vals, -100.0, u32::MAX as f32);
    assert_eq!((out, idx), (want_out, want_idx));

    // Random rows with the top 8 as vals (the router's second round), plus an absent value
    // and NaN in a second partition.
    let (p, f) = (4, 64);
    let mut data = Rng(9).vec(p * f, -1.0, 1.0);
    data[f + 3] = f32::NAN;
    let mut vals: Vec<f32> = Vec::new();
    for r in 0..p {
        vals.extend(reference_top8(&data[r * f..(r + 1) * f]));
    }
    vals[8 + 1] = 42.0;
    let (out, idx) = run_match_replace(p, f, &data, &vals, f32::NEG_INFINITY);
    for r in 0..p {
        let (wo, wi) = reference_match_replace(
            &data[r * f..(r + 1) * f],
            &vals[r * 8..(r + 1) * 8],
            f32::NEG_INFINITY,
            u32::MAX as f32,
        );
        assert!(bits_eq(&out[r * f..(r + 1) * f], &wo), "row {r}");
        assert_eq!(&idx[r * 8..(r + 1) * 8], &wi[..], "row {r}");
    }
    assert_eq!(idx[8], u32::MAX as f32, "NaN never matches");
    assert_eq!(idx[9], u32::MAX as f32, "42 is absent");

    // dst must match data's shape.
    let d = hbm(&[1, 16], row.clone());
    let v = hbm(&[1, 8], vals[..8].to_vec());
    let e = fails_with(ErrorKind::ShapeMismatch, || {
        let r = nl::ndarray(&[1, 8], DType::F32, MemKind::Sbuf);
        nisa::nc_match_replace8(&r, &nl::load(&d), &nl::load(&v), 0.0, None);
    });
    assert!(e.to_string().contains("mismatch"), "{e}");
}

#[test]
fn top8_costs_n_vector_cycles() {
    let (p, f) = (128, 4096);
    let a = Hbm::<f32>::shape_only([p, f]);
    for target in [Target::Trn1, Target::Trn2] {
        let mut out = Hbm::<u32>::shape_only([p, 8]);
        let o = out.as_output();
        let report = Launch::new(1)
            .target(target)
            .mode(Mode::Estimate)
            .run(|| {
                let x = nl::load(&a);
                let top = nl::ndarray(&[p, 8], DType::F32, MemKind::Sbuf);
                nisa::max8(&top, &x);
                let idx = nl::ndarray(&[p, 8], DType::U32, MemKind::Sbuf);
                nisa::nc_find_index8(&idx, &x, &top);
                nl::store(&o, &idx);
            })
            .unwrap();
        let prof = report.profile.unwrap();
        let vec = prof.engine("VectorE").unwrap();
        assert_eq!(vec.instructions, 2);
        let want = 2.0 * f as f64 / target.spec().vector_ghz;
        assert!(
            (vec.active_ns - want).abs() < 1.0,
            "{target:?}: {} vs {want}",
            vec.active_ns
        );
    }
}
