//! The NKI LayerNorm tutorial, re-told in Rust: two versions side by side, each in NKI Beta 1
//! and in NKI 0.7.
//!
//! `out = (x - mean) / sqrt(var + 1e-5) * gamma + beta` per row (`nki_kernels::layernorm`),
//! rows on partitions, 128 per tile, gamma and beta broadcast across partitions once.
//!
//! - v1 writes it with `nl` ops: mean, subtract, square, mean, rsqrt, multiply, multiply,
//!   add: six full VectorE passes per row tile.
//! - v2 gets mean and variance from `bn_stats` on 512-element pieces and one `bn_aggr`, then
//!   normalises with one two-operator `tensor_scalar`: three full passes.
//!
//! `layernorm_v1_07` and `layernorm_v2_07` are their NKI 0.7 twins: the same per-tile
//! instructions on tensors from `nl::ndarray`, data moved by `nisa::dma_copy`, the output
//! allocated in HBM and returned (the same instructions, so the same modelled latency).
//!
//! The example checks all four at the tutorial's `[300, 1000]` against an f64 reference
//! ("match") and models them at `[300, 1000]` and at the torch driver's `[4096, 8192]` on trn1
//! and trn2: both versions are VectorE-bound, and v2, with half the passes, is faster.
//!
//! ```text
//! cargo run --release --example layernorm
//! ```

use ndarray::Array1;
use nki_core::prelude::*;
use nki_kernels::layernorm::{layernorm_v1, layernorm_v1_07, layernorm_v2, layernorm_v2_07};
use nki_kernels::reference;
use nki_kernels::report::{finish, print_check, print_profiles, Version};
use nki_kernels::testing::{allclose, random_f32, random_vec};
use std::process::ExitCode;

fn run() -> Result<bool, NkiError> {
    let (rows, d) = (300, 1000);
    let x = random_f32(rows, d, 1);
    let (g, b) = (
        Array1::from(random_vec(d, 2)),
        Array1::from(random_vec(d, 3)),
    );
    let want = reference::layernorm(&x, &g, &b);
    let (xh, gh, bh) = (
        Hbm::from_array(&x)?,
        Hbm::from_array(&g)?,
        Hbm::from_array(&b)?,
    );
    println!("layernorm [{rows}, {d}] fp32 against an f64 reference (atol 1e-3, rtol 1e-2):");
    let mut out = Hbm::<f32>::zeros([rows, d]);
    layernorm_v1::launch(1, &xh, &gh, &bh, &mut out)?;
    let mut ok = print_check("v1 (nl ops)", allclose(&out.to_array()?, &want, 1e-3, 1e-2));
    let mut out = Hbm::<f32>::zeros([rows, d]);
    layernorm_v2::launch(1, &xh, &gh, &bh, &mut out)?;
    ok &= print_check(
        "v2 (bn_stats / bn_aggr)",
        allclose(&out.to_array()?, &want, 1e-3, 1e-2),
    );
    // NKI 0.7's kernel[1]: one core; the kernels return their output.
    let (out, _report) = layernorm_v1_07::launch(1, &xh, &gh, &bh)?;
    let close = allclose(&out.to_array()?, &want, 1e-3, 1e-2);
    ok &= print_check("v1, NKI 0.7", close);
    let (out, _report) = layernorm_v2_07::launch(1, &xh, &gh, &bh)?;
    let close = allclose(&out.to_array()?, &want, 1e-3, 1e-2);
    ok &= print_check("v2, NKI 0.7", close);

    for (rows, d) in [(300, 1000), (4096, 8192)] {
        let x = Hbm::<f32>::shape_only([rows, d]);
        let v = Hbm::<f32>::shape_only([d]);
        let v1 = |t: Target| {
            layernorm_v1::estimate(1, t, &x, &v, &v, &mut Hbm::<f32>::shape_only([rows, d]))
        };
        let v2 = |t: Target| {
            layernorm_v2::estimate(1, t, &x, &v, &v, &mut Hbm::<f32>::shape_only([rows, d]))
        };
        // A returning kernel's estimate gives (output, profile).
        let v1_07 = |t: Target| layernorm_v1_07::estimate(1, t, &x, &v, &v).map(|(_, p)| p);
        let v2_07 = |t: Target| layernorm_v2_07::estimate(1, t, &x, &v, &v).map(|(_, p)| p);
        print_profiles(
            &format!("[{rows}, {d}] fp32"),
            &[
                Version::new("layernorm v1", &v1),
                Version::new("layernorm v2", &v2),
                Version::new("layernorm v1 (0.7)", &v1_07),
                Version::new("layernorm v2 (0.7)", &v2_07),
            ],
        )?;
    }
    Ok(ok)
}

fn main() -> ExitCode {
    finish(run())
}
