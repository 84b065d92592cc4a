//! The nki-samples rotary-embedding tutorial, re-told in Rust, in NKI Beta 1 and in NKI 0.7.
//!
//! HF `apply_rotary_pos_emb`: `out = x * cos + rotate_half(x) * sin` for `x[B, H, S, D]`
//! (`nki_kernels::rotary`). Sequence positions go to partitions, the head dimension is the
//! free dimension; `cos` and a sign-folded `sin` are loaded once per sequence tile and reused
//! by every (batch, head), whose tile takes two half-width products, one full-width product and
//! an add on VectorE.
//!
//! The example checks `[2, 16, 128, 64]` and `[2, 16, 256, 128]` against a plain-loop
//! reference (rtol = atol = 1e-5: "match") and models the tutorial's smallest and largest
//! sweep points on trn1 and trn2.
//!
//! ```text
//! cargo run --release --example rotary
//! ```

use ndarray::{Array2, Array4};
use nki_core::prelude::*;
use nki_kernels::reference;
use nki_kernels::report::{finish, print_check, print_profiles, Version};
use nki_kernels::rotary::{rotary, rotary_07};
use nki_kernels::testing::{allclose, random_range};
use std::process::ExitCode;

fn check(b: usize, h: usize, s: usize, d: usize) -> Result<bool, NkiError> {
    let x = Array4::from_shape_vec((b, h, s, d), random_range(b * h * s * d, -1.0, 1.0, 1))
        .expect("shape");
    let angle =
        |p: usize, j: usize| p as f32 / 10000f32.powf((2 * (j % (d / 2))) as f32 / d as f32);
    let cos = Array2::from_shape_fn((s, d), |(p, j)| angle(p, j).cos());
    let sin = Array2::from_shape_fn((s, d), |(p, j)| angle(p, j).sin());
    let (xh, cos_h, sin_h) = (
        Hbm::from_array(&x)?,
        Hbm::from_array(&cos)?,
        Hbm::from_array(&sin)?,
    );
    let want = reference::rotary(&x, &cos, &sin);
    let label = format!("[{b}, {h}, {s}, {d}] fp32");
    let mut out = Hbm::<f32>::zeros([b, h, s, d]);
    rotary::launch(1, &xh, &cos_h, &sin_h, &mut out)?;
    let ok = print_check(&label, allclose(&out.to_array()?, &want, 1e-5, 1e-5));
    // NKI 0.7's kernel[1]: one core; the kernel returns its output.
    let (out_07, _report) = rotary_07::launch(1, &xh, &cos_h, &sin_h)?;
    let close = allclose(&out_07.to_array()?, &want, 1e-5, 1e-5);
    Ok(ok & print_check(&format!("{label}, NKI 0.7"), close))
}

fn run() -> Result<bool, NkiError> {
    println!("rotary embedding against HF apply_rotary_pos_emb:");
    let ok = check(2, 16, 128, 64)? & check(2, 16, 256, 128)?;
    for [b, h, s, d] in [[2, 16, 128, 64], [8, 32, 512, 128]] {
        let x = Hbm::<f32>::shape_only([b, h, s, d]);
        let (cos, sin) = (
            Hbm::<f32>::shape_only([s, d]),
            Hbm::<f32>::shape_only([s, d]),
        );
        let model = |t: Target| {
            let mut out = Hbm::<f32>::shape_only([b, h, s, d]);
            rotary::estimate(1, t, &x, &cos, &sin, &mut out)
        };
        // A returning kernel's estimate gives (output, profile).
        let model_07 = |t: Target| rotary_07::estimate(1, t, &x, &cos, &sin).map(|(_, p)| p);
        print_profiles(
            &format!("[{b}, {h}, {s}, {d}] fp32"),
            &[
                Version::new("rotary", &model),
                Version::new("rotary_07 (0.7)", &model_07),
            ],
        )?;
    }
    Ok(ok)
}

fn main() -> ExitCode {
    finish(run())
}
