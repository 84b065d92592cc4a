//! Adaptive average pooling (nki-samples `adaptive_avg_pool2d_kernel`), in Rust, in NKI Beta 1
//! and in NKI 0.7.
//!
//! `input[N, C, H, W]` is averaged over PyTorch's adaptive windows
//! (`floor(i*H/OH) .. ceil((i+1)*H/OH)`, likewise for columns) into `out[N, C, OH, OW]`
//! (`nki_kernels::adaptive_avg_pool2d`). Channels go to partitions; each output row's window
//! rows are loaded in chunks that fit SBUF, and every window is one VectorE reduce over rows and
//! columns, scaled and accumulated. `adaptive_avg_pool2d_07` is its NKI 0.7 twin (tensors from
//! `nl::ndarray`, `nisa::dma_copy`, instructions writing into a destination given first, the
//! output returned). The example
//!
//! 1. checks both on three of the samples' cases (divisible, non-divisible `13 -> 6`, global pooling
//!    of `256 x 256`) against a plain-loop reference ("match");
//! 2. models both on `[1, 64, 56, 56] -> 7 x 7` (many small windows: bounded by the per-instruction cost
//!    on VectorE) and `[2, 64, 256, 256] -> 1` (few huge windows: bounded by moving the image)
//!    on trn1 and trn2.
//!
//! ```text
//! cargo run --release --example adaptive_avg_pool2d
//! ```

use ndarray::Array4;
use nki_core::prelude::*;
use nki_kernels::adaptive_avg_pool2d::{adaptive_avg_pool2d, adaptive_avg_pool2d_07};
use nki_kernels::reference;
use nki_kernels::report::{finish, print_check, print_profiles, Version};
use nki_kernels::testing::{allclose, random_range};
use std::process::ExitCode;

fn check(dims: [usize; 4], oh: usize, ow: usize) -> Result<bool, NkiError> {
    let [n, c, h, w] = dims;
    let x = Array4::from_shape_vec(dims, random_range(n * c * h * w, -2.0, 2.0, 7)).expect("shape");
    let input = Hbm::from_array(&x)?;
    let mut out = Hbm::<f32>::zeros([n, c, oh, ow]);
    adaptive_avg_pool2d::launch(1, &input, &mut out)?;
    let want = reference::adaptive_avg_pool2d(&x, oh, ow);
    let label = format!("{dims:?} -> {oh} x {ow} fp32");
    let ok = print_check(&label, allclose(&out.to_array()?, &want, 1e-5, 1e-5));
    // NKI 0.7's kernel[1]: one core; the kernel returns its output.
    let (out_07, _report) = adaptive_avg_pool2d_07::launch(1, &input, oh, ow)?;
    let close = allclose(&out_07.to_array()?, &want, 1e-5, 1e-5);
    Ok(ok & print_check(&format!("{label}, NKI 0.7"), close))
}

fn run() -> Result<bool, NkiError> {
    println!("adaptive_avg_pool2d against PyTorch's adaptive windows:");
    let mut ok = check([1, 64, 56, 56], 7, 7)?;
    ok &= check([1, 256, 13, 13], 6, 6)?;
    ok &= check([1, 16, 256, 256], 1, 1)?;
    let model = |dims: [usize; 4], o: usize| {
        move |t: Target| {
            let mut out = Hbm::<f32>::shape_only([dims[0], dims[1], o, o]);
            adaptive_avg_pool2d::estimate(1, t, &Hbm::<f32>::shape_only(dims), &mut out)
        }
    };
    // A returning kernel's estimate gives (output, profile).
    let model_07 = |dims: [usize; 4], o: usize| {
        move |t: Target| {
            let input = Hbm::<f32>::shape_only(dims);
            adaptive_avg_pool2d_07::estimate(1, t, &input, o, o).map(|(_, p)| p)
        }
    };
    for (label, dims, o) in [
        ("[1, 64, 56, 56] -> 7 x 7 fp32", [1, 64, 56, 56], 7),
        ("[2, 64, 256, 256] -> 1 x 1 fp32", [2, 64, 256, 256], 1),
    ] {
        print_profiles(
            label,
            &[
                Version::new("adaptive_avg_pool2d", &model(dims, o)),
                Version::new("adaptive_avg_pool2d_07", &model_07(dims, o)),
            ],
        )?;
    }
    Ok(ok)
}

fn main() -> ExitCode {
    finish(run())
}
