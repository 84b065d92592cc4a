//! Fused RMSNorm + QKV projection (nki-samples `allocated_fused_rms_norm_qkv`), in Rust.
//!
//! `out = (x / (sqrt(mean(x^2)) + 1e-6)) @ W` for `hidden[1, S, D]`, `W[D, dh]`
//! (`nki_kernels::rmsnorm_qkv`). Rows go to partitions; ScalarE computes the row statistics,
//! TensorE transposes each row tile in `[rows, 128]` blocks and accumulates `x @ W` over `D` in
//! PSUM, and the row scale `1 / (rms + eps)` is applied while VectorE evacuates PSUM (it
//! commutes with the matmul).
//!
//! The example checks the samples' `[1, 128, 512] @ [512, 512]` fp16 and
//! `[1, 512, 1024] @ [1024, 384]` bf16 cases (atol = rtol = 1e-2: "match") and models the
//! largest, `[1, 1024, 8192] @ [8192, 512]` bf16, on trn1 and trn2.
//!
//! ```text
//! cargo run --release --example rmsnorm_qkv
//! ```

use ndarray::{Array2, Array3};
use nki_core::prelude::*;
use nki_kernels::reference;
use nki_kernels::report::{finish, print_check, print_profiles, Version};
use nki_kernels::rmsnorm_qkv::rmsnorm_qkv;
use nki_kernels::testing::{allclose, random_range};
use std::process::ExitCode;

fn check<T: Element>(s: usize, d: usize, dh: usize) -> Result<bool, NkiError> {
    let conv = |v: Vec<f32>| v.into_iter().map(T::from_f32).collect::<Vec<T>>();
    let x =
        Array3::from_shape_vec((1, s, d), conv(random_range(s * d, 0.0, 1.0, 1))).expect("shape");
    let w =
        Array2::from_shape_vec((d, dh), conv(random_range(d * dh, 0.0, 1.0, 2))).expect("shape");
    let mut out = Hbm::<T>::zeros([1, s, dh]);
    rmsnorm_qkv::launch(1, &Hbm::from_array(&x)?, &Hbm::from_array(&w)?, &mut out)?;
    Ok(print_check(
        &format!("[1, {s}, {d}] @ [{d}, {dh}] {}", T::DTYPE),
        allclose(
            &out.to_array()?,
            &reference::rmsnorm_qkv(&x, &w),
            1e-2,
            1e-2,
        ),
    ))
}

fn run() -> Result<bool, NkiError> {
    println!("rmsnorm + QKV projection against an f64 reference:");
    let ok = check::<f16>(128, 512, 512)? & check::<bf16>(512, 1024, 384)?;
    let (s, d, dh) = (1024, 8192, 512);
    let model = |t: Target| {
        rmsnorm_qkv::estimate(
            1,
            t,
            &Hbm::<bf16>::shape_only([1, s, d]),
            &Hbm::<bf16>::shape_only([d, dh]),
            &mut Hbm::<bf16>::shape_only([1, s, dh]),
        )
    };
    print_profiles(
        &format!("[1, {s}, {d}] @ [{d}, {dh}] bf16"),
        &[Version::new("rmsnorm_qkv", &model)],
    )?;
    Ok(ok)
}

fn main() -> ExitCode {
    finish(run())
}
