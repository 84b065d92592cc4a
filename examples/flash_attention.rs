//! Flash attention forward (nki-samples `flash_fwd`), causal, with the log-sum-exp, in Rust,
//! in NKI Beta 1 and in NKI 0.7.
//!
//! `out = softmax(q^T k / sqrt(d), causal) @ v` and `lse` in the samples' `[B, H, 128, S/128]`
//! layout (`nki_kernels::flash_attention`), one (batch, head) per program instance on grid
//! `[B, H]`. Per 128-query tile the online softmax walks 512-key blocks up to the diagonal:
//! blocks above it are skipped, the diagonal block is masked by a GpSimd `affine_select`; the
//! running max and sum rescale the output accumulator; probabilities are transposed on TensorE
//! and multiplied by `v`.
//!
//! `flash_attention_fwd_07` is its NKI 0.7 twin: 0.7 has no multi-dimensional grid, so one
//! core (`kernel[1]`) loops over the (batch, head) pairs, each issuing the Beta-1 instance's
//! instructions written destination first, and returns `out` and `lse`. The example
//!
//! 1. checks `out` and `lse` of both against an f64 reference for `[1, 4, 64, 512]` with
//!    grouped-query heads (2 key/value heads), atol 1e-2 ("match");
//! 2. models both on the samples' `[1, 1, 128, 4096]` case and the GQA training case
//!    (`6` query heads over `3` key/value heads, `S = 4096`) on trn1 and trn2.
//!
//! ```text
//! cargo run --release --example flash_attention
//! ```

use ndarray::Array4;
use nki_core::prelude::*;
use nki_kernels::flash_attention::{flash_attention_fwd, flash_attention_fwd_07};
use nki_kernels::reference;
use nki_kernels::report::{finish, print_check, print_profiles, Version};
use nki_kernels::testing::{allclose, random_range};
use std::process::ExitCode;

fn run() -> Result<bool, NkiError> {
    let (b, h, hkv, d, s) = (1, 4, 2, 64, 512);
    let arr = |heads: usize, shape: (usize, usize), seed| {
        Array4::from_shape_vec(
            (b, heads, shape.0, shape.1),
            random_range(b * heads * d * s, -1.0, 1.0, seed),
        )
        .expect("shape")
    };
    let (q, k, v) = (arr(h, (d, s), 1), arr(hkv, (d, s), 2), arr(hkv, (s, d), 3));
    let scale = 1.0 / (d as f32).sqrt();
    let (qh, kh, vh) = (
        Hbm::from_array(&q)?,
        Hbm::from_array(&k)?,
        Hbm::from_array(&v)?,
    );
    let mut out = Hbm::<f32>::zeros([b, h, s, d]);
    let mut lse = Hbm::<f32>::zeros([b, h, 128, s / 128]);
    flash_attention_fwd::launch([b, h], &qh, &kh, &vh, &mut out, &mut lse, scale)?;
    let (want_o, want_l) = reference::causal_attention(&q, &k, &v, scale as f64);
    println!("flash_attention_fwd [B, H, d, S] = [{b}, {h}, {d}, {s}], {hkv} kv heads, causal:");
    let mut ok = print_check(
        "out vs f64 reference",
        allclose(&out.to_array()?, &want_o, 1e-2, 0.0),
    );
    ok &= print_check(
        "lse vs f64 reference",
        allclose(&lse.to_array()?, &want_l, 1e-2, 0.0),
    );
    // NKI 0.7's kernel[1]: one core walks the (batch, head) pairs; the kernel returns both.
    let ((out, lse), _report) = flash_attention_fwd_07::launch(1, &qh, &kh, &vh, scale)?;
    let close = allclose(&out.to_array()?, &want_o, 1e-2, 0.0);
    ok &= print_check("out vs f64 reference, NKI 0.7", close);
    let close = allclose(&lse.to_array()?, &want_l, 1e-2, 0.0);
    ok &= print_check("lse vs f64 reference, NKI 0.7", close);

    for (h, hkv) in [(1, 1), (6, 3)] {
        let (d, s) = (128, 4096);
        let q = Hbm::<f32>::shape_only([1, h, d, s]);
        let k = Hbm::<f32>::shape_only([1, hkv, d, s]);
        let v = Hbm::<f32>::shape_only([1, hkv, s, d]);
        let model = |t: Target| {
            let mut out = Hbm::<f32>::shape_only([1, h, s, d]);
            let mut lse = Hbm::<f32>::shape_only([1, h, 128, s / 128]);
            flash_attention_fwd::estimate(
                [1, h],
                t,
                &q,
                &k,
                &v,
                &mut out,
                &mut lse,
                1.0 / (d as f32).sqrt(),
            )
        };
        // A returning kernel's estimate gives (outputs, profile).
        let scale = 1.0 / (d as f32).sqrt();
        let model_07 =
            |t: Target| flash_attention_fwd_07::estimate(1, t, &q, &k, &v, scale).map(|(_, p)| p);
        print_profiles(
            &format!("[1, {h}, {d}, {s}] fp32, {hkv} kv heads, grid [1, {h}] / kernel[1]"),
            &[
                Version::new("flash_attention_fwd", &model),
                Version::new("flash_attention_fwd_07", &model_07),
            ],
        )?;
    }
    Ok(ok)
}

fn main() -> ExitCode {
    finish(run())
}
