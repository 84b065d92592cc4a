//! The NKI RMSNorm tutorial, re-told in Rust, in NKI Beta 1 and in NKI 0.7.
//!
//! `out = a / sqrt(mean(a^2, axis 1)) * g` (`nki_kernels::rmsnorm`): rows on partitions, 128
//! per tile, the gain loaded and broadcast across partitions once; per tile ScalarE squares
//! and sums the rows in one instruction and takes `rsqrt(sum / D)` in another, VectorE scales
//! by it and by the gain. `rmsnorm` is the kernel in NKI Beta 1 (`nl::load`, allocating
//! instructions, the output a `&mut Hbm` parameter; the gain broadcast by `nl::broadcast_to`,
//! a TensorE matmul); `rmsnorm_07` in NKI 0.7 (SBUF tensors from `nl::ndarray`,
//! `nisa::dma_copy`, each instruction writing into a destination given first, the output
//! allocated in HBM and returned; the gain broadcast by the DMA that reads it, an access
//! pattern whose partition step is 0). The example
//!
//! 1. checks both on the numpy driver's `[128, 512]` and the torch driver's `[250, 512]` (a
//!    partial last tile) against an ndarray reference ("match");
//! 2. models both at the Autocomp shape `[512, 4096]` and at `[4096, 8192]` fp32 on trn1 and
//!    trn2.
//!
//! ```text
//! cargo run --release --example rmsnorm
//! ```

use ndarray::Array1;
use nki_core::prelude::*;
use nki_kernels::reference;
use nki_kernels::report::{finish, print_check, print_profiles, Version};
use nki_kernels::rmsnorm::{rmsnorm, rmsnorm_07};
use nki_kernels::testing::{allclose, random_f32, random_vec};
use std::process::ExitCode;

fn check(rows: usize, d: usize, atol: f32, rtol: f32) -> Result<bool, NkiError> {
    let a = random_f32(rows, d, 1);
    let g = Array1::from(random_vec(d, 2));
    let (a_in, g_in) = (Hbm::from_array(&a)?, Hbm::from_array(&g)?);
    let mut out = Hbm::<f32>::zeros([rows, d]);
    rmsnorm::launch(1, &a_in, &g_in, &mut out)?;
    // NKI 0.7's kernel[1]: one core; the kernel returns its output.
    let (out_07, _report) = rmsnorm_07::launch(1, &a_in, &g_in)?;
    let want = reference::rmsnorm(&a, &g);
    let label = format!("[{rows}, {d}] fp32 (atol {atol}, rtol {rtol})");
    let beta1 = print_check(&label, allclose(&out.to_array()?, &want, atol, rtol));
    let nki07 = print_check(
        &format!("{label}, NKI 0.7"),
        allclose(&out_07.to_array()?, &want, atol, rtol),
    );
    Ok(beta1 && nki07)
}

/// The two versions at `[rows, d]` fp32, modelled on trn1 and trn2.
fn model(shape: &str, rows: usize, d: usize) -> Result<(), NkiError> {
    let (a, g) = (
        Hbm::<f32>::shape_only([rows, d]),
        Hbm::<f32>::shape_only([d]),
    );
    let beta1 = |t: Target| {
        let mut out = Hbm::<f32>::shape_only([rows, d]);
        rmsnorm::estimate(1, t, &a, &g, &mut out)
    };
    // A returning kernel's estimate gives (output, profile).
    let nki07 = |t: Target| rmsnorm_07::estimate(1, t, &a, &g).map(|(_, p)| p);
    print_profiles(
        shape,
        &[
            Version::new("rmsnorm", &beta1),
            Version::new("rmsnorm_07 (NKI 0.7)", &nki07),
        ],
    )?;
    Ok(())
}

fn run() -> Result<bool, NkiError> {
    println!("rmsnorm against ndarray:");
    let ok = check(128, 512, 1e-4, 1e-2)? & check(250, 512, 1e-5, 1e-3)?;
    model("[512, 4096] fp32 (Autocomp)", 512, 4096)?;
    model("[4096, 8192] fp32", 4096, 8192)?;
    Ok(ok)
}

fn main() -> ExitCode {
    finish(run())
}
