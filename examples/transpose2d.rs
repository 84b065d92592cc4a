//! The NKI `transpose2d` tutorial, re-told in Rust.
//!
//! Each row of `input[P, X * Y]` holds an `X x Y` matrix; the kernel writes each row's
//! transpose (`nki_kernels::transpose2d`). Rows go to partitions and every matrix stays inside
//! its partition, so the transpose is a free-dimension permutation VectorE does with strided
//! copies: nothing crosses partitions. The example
//!
//! 1. runs the tutorial's int8 `[5, 3 * 4]` case and prints input, output and "match" against
//!    a plain-loop reference;
//! 2. models the kernel on trn1 and trn2 at the tutorial shape (bounded by the fixed latency of
//!    its two DMAs) and at `[4096, 64 * 64]` (DMA-bound: every byte in and out once, no
//!    arithmetic).
//!
//! ```text
//! cargo run --release --example transpose2d
//! ```

use ndarray::Array2;
use nki_core::prelude::*;
use nki_kernels::reference;
use nki_kernels::report::{finish, print_check, print_profiles, Version};
use nki_kernels::testing::allclose;
use nki_kernels::transpose2d::transpose2d;
use std::process::ExitCode;

fn run() -> Result<bool, NkiError> {
    let (p, x, y) = (5, 3, 4);
    let a = Array2::from_shape_fn((p, x * y), |(r, c)| (r * 16 + c) as i8);
    let input = Hbm::from_array(&a)?;
    let mut out = Hbm::<i8>::zeros([p, x * y]);
    transpose2d::launch(1, &input, &mut out, x, y)?;
    let got = out.to_array()?;
    println!("transpose2d: each row's {x} x {y} matrix transposed within its partition");
    println!("input row 0:  {:?}", a.row(0).to_vec());
    println!(
        "output row 0: {:?}",
        got.index_axis(ndarray::Axis(0), 0)
            .iter()
            .collect::<Vec<_>>()
    );
    let ok = print_check(
        &format!("[{p}, {x} x {y}] int8 vs loops"),
        allclose(&got, &reference::transpose2d(&a, x, y), 0.0, 0.0),
    );

    let tutorial = |t: Target| {
        let mut o = Hbm::<i8>::shape_only([p, x * y]);
        transpose2d::estimate(1, t, &Hbm::<i8>::shape_only([p, x * y]), &mut o, x, y)
    };
    print_profiles(
        "the tutorial's [5, 3 * 4] int8",
        &[Version::new("transpose2d", &tutorial)],
    )?;
    let large = |t: Target| {
        let s = [4096, 64 * 64];
        let mut o = Hbm::<f32>::shape_only(s);
        transpose2d::estimate(1, t, &Hbm::<f32>::shape_only(s), &mut o, 64, 64)
    };
    print_profiles(
        "[4096, 64 * 64] fp32",
        &[Version::new("transpose2d", &large)],
    )?;
    Ok(ok)
}

fn main() -> ExitCode {
    finish(run())
}
