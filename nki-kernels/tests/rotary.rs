//! rotary against a plain-loop reference of HF `apply_rotary_pos_emb` at tutorial shapes and
//! edge sequence lengths.

use ndarray::{Array2, Array4};
use nki_core::prelude::*;
use nki_kernels::reference::rotary as reference;
use nki_kernels::rotary::rotary;
use nki_kernels::testing::{check_modes, random_range};

fn check(batch: usize, heads: usize, seq: usize, d: usize) {
    let x = Array4::from_shape_vec(
        (batch, heads, seq, d),
        random_range(batch * heads * seq * d, -1.0, 1.0, seq as u64),
    )
    .unwrap();
    let angle =
        |s: usize, j: usize| s as f32 / 10000f32.powf((2 * (j % (d / 2))) as f32 / d as f32);
    let cos = Array2::from_shape_fn((seq, d), |(s, j)| angle(s, j).cos());
    let sin = Array2::from_shape_fn((seq, d), |(s, j)| angle(s, j).sin());
    let want = reference(&x, &cos, &sin);
    let (xh, ch, sh) = (
        Hbm::from_array(&x).unwrap(),
        Hbm::from_array(&cos).unwrap(),
        Hbm::from_array(&sin).unwrap(),
    );
    check_modes(
        &format!("rotary [{batch}, {heads}, {seq}, {d}]"),
        &want,
        1e-5,
        1e-5,
        |launch| {
            let mut out = Hbm::<f32>::zeros([batch, heads, seq, d]);
            let r = rotary::run(launch, &xh, &ch, &sh, &mut out)?;
            Ok((out.to_array()?, r))
        },
    );
}

#[test]
fn tutorial_shapes() {
    check(2, 16, 128, 64);
    check(2, 16, 256, 128);
    check(4, 32, 512, 64);
}

#[test]
fn edge_shapes() {
    check(1, 1, 1, 2);
    check(2, 3, 200, 128);
}

#[test]
fn largest_tutorial_shape_estimates() {
    let x = Hbm::<f32>::shape_only([8, 32, 512, 128]);
    let cs = Hbm::<f32>::shape_only([512, 128]);
    let mut out = Hbm::<f32>::shape_only([8, 32, 512, 128]);
    let p = rotary::estimate(1, Target::Trn2, &x, &cs, &cs, &mut out).unwrap();
    assert!(p.latency_ns > 0.0);
}
