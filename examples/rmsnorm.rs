//! The NKI RMSNorm tutorial, re-told in Rust.
//!
//! `out = a / sqrt(mean(a^2, axis 1)) * g` (`nki_kernels::rmsnorm`): rows on partitions, 128
//! per tile, the gain loaded and broadcast across partitions once; per tile ScalarE squares
//! and sums the rows in one instruction and takes `rsqrt(sum / D)` in another, VectorE scales
//! by it and by the gain. The example
//!
//! 1. checks the numpy driver's `[128, 512]` and the torch driver's `[250, 512]` (a partial
//!    last tile) against an ndarray reference ("match");
//! 2. models the Autocomp shape `[512, 4096]` and `[4096, 8192]` fp32 on trn1 and trn2.
//!
//! ```text
//! cargo run --release --example rmsnorm
//! ```

use ndarray::Array1;
use nki_core::prelude::*;
use nki_kernels::reference;
use nki_kernels::report::{finish, print_check, print_profiles, Version};
use nki_kernels::rmsnorm::rmsnorm;
use nki_kernels::testing::{allclose, random_f32, random_vec};
use std::process::ExitCode;

fn check(rows: usize, d: usize, atol: f32, rtol: f32) -> Result<bool, NkiError> {
    let a = random_f32(rows, d, 1);
    let g = Array1::from(random_vec(d, 2));
    let mut out = Hbm::<f32>::zeros([rows, d]);
    rmsnorm::launch(1, &Hbm::from_array(&a)?, &Hbm::from_array(&g)?, &mut out)?;
    Ok(print_check(
        &format!("[{rows}, {d}] fp32 (atol {atol}, rtol {rtol})"),
        allclose(&out.to_array()?, &reference::rmsnorm(&a, &g), atol, rtol),
    ))
}

fn run() -> Result<bool, NkiError> {
    println!("rmsnorm against ndarray:");
    let ok = check(128, 512, 1e-4, 1e-2)? & check(250, 512, 1e-5, 1e-3)?;
    let model = |rows: usize, d: usize| {
        move |t: Target| {
            let mut out = Hbm::<f32>::shape_only([rows, d]);
            rmsnorm::estimate(
                1,
                t,
                &Hbm::<f32>::shape_only([rows, d]),
                &Hbm::<f32>::shape_only([d]),
                &mut out,
            )
        }
    };
    print_profiles(
        "[512, 4096] fp32 (Autocomp)",
        &[Version::new("rmsnorm", &model(512, 4096))],
    )?;
    print_profiles(
        "[4096, 8192] fp32",
        &[Version::new("rmsnorm", &model(4096, 8192))],
    )?;
    Ok(ok)
}

fn main() -> ExitCode {
    finish(run())
}
