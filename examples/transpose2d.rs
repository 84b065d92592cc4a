//! The NKI `transpose2d` tutorial, re-told in Rust, in NKI Beta 1 and in NKI 0.7.
//!
//! Each row of `input[P, X * Y]` holds an `X x Y` matrix; the kernel writes each row's
//! transpose (`nki_kernels::transpose2d`). Rows go to partitions and every matrix stays inside
//! its partition, so the transpose is a free-dimension permutation VectorE does with strided
//! copies: nothing crosses partitions. `transpose2d` is the kernel in NKI Beta 1 (`nl::load`,
//! `nl::assign`, the output a `&mut Hbm` parameter); `transpose2d_07` the same instructions in
//! NKI 0.7 (SBUF tensors from `nl::ndarray`, `nisa::dma_copy`, `nisa::tensor_copy` into a
//! destination given first, the output allocated in HBM and returned). The example
//!
//! 1. runs the tutorial's int8 `[5, 3 * 4]` case with both and prints input, output and
//!    "match" against a plain-loop reference;
//! 2. models both on trn1 and trn2 at the tutorial shape (bounded by the fixed latency of its
//!    two DMAs) and at `[4096, 64 * 64]` (DMA-bound: every byte in and out once, no
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
use nki_kernels::transpose2d::{transpose2d, transpose2d_07};
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
    let want = reference::transpose2d(&a, x, y);
    let label = format!("[{p}, {x} x {y}] int8 vs loops");
    let ok = print_check(&label, allclose(&got, &want, 0.0, 0.0));
    // NKI 0.7's kernel[1]: one core; the kernel returns its output.
    let (out_07, _report) = transpose2d_07::launch(1, &input, x, y)?;
    let ok_07 = print_check(
        &format!("{label}, NKI 0.7"),
        allclose(&out_07.to_array()?, &want, 0.0, 0.0),
    );

    let tutorial = |t: Target| {
        let mut o = Hbm::<i8>::shape_only([p, x * y]);
        transpose2d::estimate(1, t, &Hbm::<i8>::shape_only([p, x * y]), &mut o, x, y)
    };
    // A returning kernel's estimate gives (output, profile).
    let tutorial_07 = |t: Target| {
        let input = Hbm::<i8>::shape_only([p, x * y]);
        transpose2d_07::estimate(1, t, &input, x, y).map(|(_, p)| p)
    };
    print_profiles(
        "the tutorial's [5, 3 * 4] int8",
        &[
            Version::new("transpose2d", &tutorial),
            Version::new("transpose2d_07 (0.7)", &tutorial_07),
        ],
    )?;
    let large = |t: Target| {
        let s = [4096, 64 * 64];
        let mut o = Hbm::<f32>::shape_only(s);
        transpose2d::estimate(1, t, &Hbm::<f32>::shape_only(s), &mut o, 64, 64)
    };
    let large_07 = |t: Target| {
        let input = Hbm::<f32>::shape_only([4096, 64 * 64]);
        transpose2d_07::estimate(1, t, &input, 64, 64).map(|(_, p)| p)
    };
    print_profiles(
        "[4096, 64 * 64] fp32",
        &[
            Version::new("transpose2d", &large),
            Version::new("transpose2d_07 (0.7)", &large_07),
        ],
    )?;
    Ok(ok && ok_07)
}

fn main() -> ExitCode {
    finish(run())
}
