//! Fused conv2d + max-pool in the CS149 (asst4) form, in Rust.
//!
//! `out = max_pool2d(conv2d(X, W) + bias, pool)`, stride 1, no padding
//! (`nki_kernels::conv2d`). Input channels are the contraction dimension on partitions;
//! output channels are the stationary free dimension; output rows are taken in bands that fill
//! one PSUM bank, and each filter tap is one matmul whose moving operand is a shifted window of
//! the input band (no im2col copy). ScalarE adds the bias while evacuating PSUM; VectorE pools.
//!
//! The example checks two of CS149's correctness cases (`X[4, 128, 32, 16]`, 3x3, with bias,
//! pool 1 and 2) against an f64 reference with NumPy's default `allclose` tolerances ("match")
//! and models the perf case `X[1, 256, 224, 224]`, `W[256, 256, 3, 3]` fp32, pool 1 and 2, on
//! trn1 and trn2.
//!
//! ```text
//! cargo run --release --example conv2d
//! ```

use ndarray::{Array1, Array4};
use nki_core::prelude::*;
use nki_kernels::conv2d::conv2d_maxpool;
use nki_kernels::reference;
use nki_kernels::report::{finish, print_check, print_profiles, Version};
use nki_kernels::testing::{allclose, random_vec};
use std::process::ExitCode;

fn check(pool: usize) -> Result<bool, NkiError> {
    let ([n, cin, h, w], cout) = ([4, 128, 32, 16], 128);
    let x = Array4::from_shape_vec((n, cin, h, w), random_vec(n * cin * h * w, 1)).expect("shape");
    let wt =
        Array4::from_shape_vec((cout, cin, 3, 3), random_vec(cout * cin * 9, 2)).expect("shape");
    let b = Array1::from(random_vec(cout, 3));
    let mut out = Hbm::<f32>::zeros([n, cout, (h - 2) / pool, (w - 2) / pool]);
    conv2d_maxpool::launch(
        1,
        &Hbm::from_array(&x)?,
        &Hbm::from_array(&wt)?,
        &Hbm::from_array(&b)?,
        &mut out,
        pool,
    )?;
    Ok(print_check(
        &format!("X[{n}, {cin}, {h}, {w}], 3x3, bias, pool {pool}"),
        allclose(
            &out.to_array()?,
            &reference::conv2d_maxpool(&x, &wt, &b, pool),
            1e-8,
            1e-5,
        ),
    ))
}

fn run() -> Result<bool, NkiError> {
    println!("conv2d + maxpool against an f64 reference (rtol 1e-5, atol 1e-8):");
    let ok = check(1)? & check(2)?;
    let x = Hbm::<f32>::shape_only([1, 256, 224, 224]);
    let w = Hbm::<f32>::shape_only([256, 256, 3, 3]);
    let b = Hbm::<f32>::shape_only([256]);
    let pool1 = |t: Target| {
        conv2d_maxpool::estimate(
            1,
            t,
            &x,
            &w,
            &b,
            &mut Hbm::<f32>::shape_only([1, 256, 222, 222]),
            1,
        )
    };
    let pool2 = |t: Target| {
        conv2d_maxpool::estimate(
            1,
            t,
            &x,
            &w,
            &b,
            &mut Hbm::<f32>::shape_only([1, 256, 111, 111]),
            2,
        )
    };
    print_profiles(
        "X[1, 256, 224, 224] * W[256, 256, 3, 3] fp32",
        &[
            Version::new("conv2d, pool 1", &pool1),
            Version::new("conv2d + maxpool 2", &pool2),
        ],
    )?;
    Ok(ok)
}

fn main() -> ExitCode {
    finish(run())
}
