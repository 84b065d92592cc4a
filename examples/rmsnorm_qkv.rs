//! Fused RMSNorm + QKV projection (nki-samples `allocated_fused_rms_norm_qkv`), in Rust, in NKI
//! Beta 1 and in NKI 0.7.
//!
//! `out = (x / (sqrt(mean(x^2)) + 1e-6)) @ W` for `hidden[1, S, D]`, `W[D, dh]`
//! (`nki_kernels::rmsnorm_qkv`). Rows go to partitions; ScalarE computes the row statistics,
//! TensorE transposes each row tile in `[rows, 128]` blocks and accumulates `x @ W` over `D` in
//! PSUM, and the row scale `1 / (rms + eps)` is applied while VectorE evacuates PSUM (it
//! commutes with the matmul).
//!
//! `rmsnorm_qkv` is the kernel in NKI Beta 1 (`nl::load`, allocating `nisa` calls, block
//! dimensions, the output a `&mut Hbm` parameter); `rmsnorm_qkv_07` the same instructions in
//! NKI 0.7 (tensors from `nl::ndarray`, lists of tensors for the blocks, `nisa::dma_copy`, each
//! instruction writing into a destination given first, the output returned).
//!
//! The example checks both on the samples' `[1, 128, 512] @ [512, 512]` fp16 and
//! `[1, 512, 1024] @ [1024, 384]` bf16 cases (atol = rtol = 1e-2: "match") and models both on
//! the largest, `[1, 1024, 8192] @ [8192, 512]` bf16, on trn1 and trn2.
//!
//! ```text
//! cargo run --release --example rmsnorm_qkv
//! ```

use ndarray::{Array2, Array3};
use nki_core::prelude::*;
use nki_kernels::reference;
use nki_kernels::report::{finish, print_check, print_profiles, Version};
use nki_kernels::rmsnorm_qkv::{rmsnorm_qkv, rmsnorm_qkv_07};
use nki_kernels::testing::{allclose, random_range};
use std::process::ExitCode;

fn check<T: Element>(s: usize, d: usize, dh: usize) -> Result<bool, NkiError> {
    let conv = |v: Vec<f32>| v.into_iter().map(T::from_f32).collect::<Vec<T>>();
    let x =
        Array3::from_shape_vec((1, s, d), conv(random_range(s * d, 0.0, 1.0, 1))).expect("shape");
    let w =
        Array2::from_shape_vec((d, dh), conv(random_range(d * dh, 0.0, 1.0, 2))).expect("shape");
    let (xh, wh) = (Hbm::from_array(&x)?, Hbm::from_array(&w)?);
    let want = reference::rmsnorm_qkv(&x, &w);
    let label = format!("[1, {s}, {d}] @ [{d}, {dh}] {}", T::DTYPE);
    let mut out = Hbm::<T>::zeros([1, s, dh]);
    rmsnorm_qkv::launch(1, &xh, &wh, &mut out)?;
    let ok = print_check(&label, allclose(&out.to_array()?, &want, 1e-2, 1e-2));
    // NKI 0.7's kernel[1]: one core; the kernel returns its output.
    let (out_07, _report) = rmsnorm_qkv_07::launch(1, &xh, &wh)?;
    let close = allclose(&out_07.to_array()?, &want, 1e-2, 1e-2);
    Ok(ok & print_check(&format!("{label}, NKI 0.7"), close))
}

fn run() -> Result<bool, NkiError> {
    println!("rmsnorm + QKV projection against an f64 reference:");
    let ok = check::<f16>(128, 512, 512)? & check::<bf16>(512, 1024, 384)?;
    let (s, d, dh) = (1024, 8192, 512);
    let (x, w) = (
        Hbm::<bf16>::shape_only([1, s, d]),
        Hbm::<bf16>::shape_only([d, dh]),
    );
    let model = |t: Target| {
        let mut out = Hbm::<bf16>::shape_only([1, s, dh]);
        rmsnorm_qkv::estimate(1, t, &x, &w, &mut out)
    };
    // A returning kernel's estimate gives (output, profile).
    let model_07 = |t: Target| rmsnorm_qkv_07::estimate(1, t, &x, &w).map(|(_, p)| p);
    print_profiles(
        &format!("[1, {s}, {d}] @ [{d}, {dh}] bf16"),
        &[
            Version::new("rmsnorm_qkv", &model),
            Version::new("rmsnorm_qkv_07 (0.7)", &model_07),
        ],
    )?;
    Ok(ok)
}

fn main() -> ExitCode {
    finish(run())
}
