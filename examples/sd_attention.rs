//! The NKI `sd_attention` tutorial (fused self-attention for Stable Diffusion's small head
//! size), re-told in Rust: two versions side by side, each in NKI Beta 1 and in NKI 0.7.
//!
//! `out = softmax(0.125 * q @ k^T) @ v` for `q`, `k`, `v[4096, 64]` fp32
//! (`nki_kernels::sd_attention`). Queries go to partitions 128 at a time; the scores of a
//! query tile are computed in `[128, 512]` PSUM banks (`q^T` stationary, `k^T` moving), the
//! probabilities transposed on TensorE in `[128, 128]` blocks and multiplied by `v`, accumulated
//! over the key tiles in one `[128, 64]` PSUM bank.
//!
//! - v1 is the direct form: each query tile re-loads `q^T`, `k^T` (an element-wise DMA
//!   transpose) and `v`, and normalises the whole `[128, 4096]` probability tile.
//! - v2 is the fused form: `k^T` and `v` are loaded once, the exponentials come with their row
//!   sums from one ScalarE instruction, and the division is deferred to the `[128, 64]` output.
//!
//! `sd_attention_v1_07` and `sd_attention_v2_07` are their NKI 0.7 twins (`nisa::dma_transpose`
//! for the transposed loads, lists of tensors for the `v` tiles, instructions writing into a
//! destination given first, the output returned). The example checks all four at the
//! tutorial's shape against an f64 reference (atol 1e-5, rtol 1e-3: "match") and models them
//! on trn1 and trn2.
//!
//! ```text
//! cargo run --release --example sd_attention
//! ```

use nki_core::prelude::*;
use nki_kernels::reference;
use nki_kernels::report::{finish, print_check, print_profiles, Version};
use nki_kernels::sd_attention::{
    sd_attention_v1, sd_attention_v1_07, sd_attention_v2, sd_attention_v2_07, SD_SCALE,
};
use nki_kernels::testing::{allclose, random_f32};
use std::process::ExitCode;

/// Runs v1 or v2 with `launch`.
fn run_version(
    v2: bool,
    launch: Launch,
    [q, k, v]: [&Hbm<f32>; 3],
    out: &mut Hbm<f32>,
) -> Result<LaunchReport, NkiError> {
    if v2 {
        sd_attention_v2::run(launch, q, k, v, out, SD_SCALE)
    } else {
        sd_attention_v1::run(launch, q, k, v, out, SD_SCALE)
    }
}

fn run() -> Result<bool, NkiError> {
    let (s, d) = (4096, 64);
    let (q, k, v) = (
        random_f32(s, d, 1),
        random_f32(s, d, 2),
        random_f32(s, d, 3),
    );
    let want = reference::attention(&q, &k, &v, SD_SCALE);
    let (qh, kh, vh) = (
        Hbm::from_array(&q)?,
        Hbm::from_array(&k)?,
        Hbm::from_array(&v)?,
    );
    println!("sd_attention [{s}, {d}] fp32, U[0, 1) inputs, against an f64 reference:");
    let mut ok = true;
    for (name, v2) in [("v1 (direct)", false), ("v2 (fused)", true)] {
        let mut out = Hbm::<f32>::zeros([s, d]);
        run_version(v2, Launch::new(1), [&qh, &kh, &vh], &mut out)?;
        ok &= print_check(name, allclose(&out.to_array()?, &want, 1e-5, 1e-3));
    }
    // NKI 0.7's kernel[1]: one core; the kernels return their output.
    let (out, _report) = sd_attention_v1_07::launch(1, &qh, &kh, &vh, SD_SCALE)?;
    let close = allclose(&out.to_array()?, &want, 1e-5, 1e-3);
    ok &= print_check("v1, NKI 0.7", close);
    let (out, _report) = sd_attention_v2_07::launch(1, &qh, &kh, &vh, SD_SCALE)?;
    let close = allclose(&out.to_array()?, &want, 1e-5, 1e-3);
    ok &= print_check("v2, NKI 0.7", close);
    let t = &Hbm::<f32>::shape_only([s, d]);
    let model = |v2: bool| {
        move |tg: Target| {
            let launch = Launch::new(1).target(tg).mode(Mode::Estimate);
            let mut out = Hbm::<f32>::shape_only([s, d]);
            let r = run_version(v2, launch, [t, t, t], &mut out)?;
            Ok(r.profile.expect("estimate mode records a profile"))
        }
    };
    // A returning kernel's estimate gives (output, profile).
    let model_07_v1 = |tg: Target| sd_attention_v1_07::estimate(1, tg, t, t, t, SD_SCALE);
    let model_07_v1 = move |tg: Target| model_07_v1(tg).map(|(_, p)| p);
    let model_07_v2 = |tg: Target| sd_attention_v2_07::estimate(1, tg, t, t, t, SD_SCALE);
    let model_07_v2 = move |tg: Target| model_07_v2(tg).map(|(_, p)| p);
    print_profiles(
        "[4096, 64] fp32",
        &[
            Version::new("sd_attention v1", &model(false)),
            Version::new("sd_attention v2", &model(true)),
            Version::new("sd_attention v1 (0.7)", &model_07_v1),
            Version::new("sd_attention v2 (0.7)", &model_07_v2),
        ],
    )?;
    Ok(ok)
}

fn main() -> ExitCode {
    finish(run())
}
