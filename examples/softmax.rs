//! The NKI softmax example, re-told in Rust, in NKI Beta 1 and in NKI 0.7.
//!
//! Row softmax `exp(x - max) / sum(exp(x - max))` (`nki_kernels::softmax`): rows on
//! partitions, 128 per tile; per tile the row max (VectorE), one ScalarE `activation_reduce`
//! giving `exp(x - max)` and its row sum together, a reciprocal and one multiply (VectorE).
//! `softmax` is the kernel in NKI Beta 1 (`nl::load`, allocating instructions, the output a
//! `&mut Hbm` parameter); `softmax_07` the same instructions in NKI 0.7 (SBUF tensors from
//! `nl::ndarray`, `nisa::dma_copy`, each instruction writing into a destination given first,
//! the output allocated in HBM and returned). The example
//!
//! 1. checks both kernels on the tutorial's logits `[[1..5], [5..1]]` and a masked
//!    `[250, 512]` case ("match");
//! 2. models both at `[4096, 8192]` fp32 on trn1 and trn2: three passes over every element on
//!    the two compute engines against one round trip of the bytes through DMA.
//!
//! ```text
//! cargo run --release --example softmax
//! ```

use ndarray::{array, Array2};
use nki_core::prelude::*;
use nki_kernels::reference;
use nki_kernels::report::{finish, print_check, print_profiles, Version};
use nki_kernels::softmax::{softmax, softmax_07};
use nki_kernels::testing::{allclose, random_range};
use std::process::ExitCode;

fn check(label: &str, x: Array2<f32>) -> Result<bool, NkiError> {
    let input = Hbm::from_array(&x)?;
    let mut out = Hbm::<f32>::zeros([x.nrows(), x.ncols()]);
    softmax::launch(1, &input, &mut out)?;
    // NKI 0.7's kernel[1]: one core; the kernel returns its output.
    let (out_07, _report) = softmax_07::launch(1, &input)?;
    let (got, got_07) = (out.to_array()?, out_07.to_array()?);
    if x.nrows() == 2 {
        println!("softmax of the tutorial's logits:\n{:.4}", got);
    }
    let want = reference::softmax(&x);
    let beta1 = print_check(label, allclose(&got, &want, 1e-5, 1e-5));
    let nki07 = print_check(
        &format!("{label}, NKI 0.7"),
        allclose(&got_07, &want, 1e-5, 1e-5),
    );
    Ok(beta1 && nki07)
}

fn run() -> Result<bool, NkiError> {
    let mut ok = check(
        "logits [2, 5]",
        array![[1.0, 2.0, 3.0, 4.0, 5.0], [5.0, 4.0, 3.0, 2.0, 1.0]],
    )?;
    let x =
        Array2::from_shape_vec((250, 512), random_range(250 * 512, -4.0, 4.0, 3)).expect("shape");
    ok &= check("[250, 512] fp32 (a partial last tile)", x)?;
    let x = Hbm::<f32>::shape_only([4096, 8192]);
    let model = |t: Target| {
        let mut out = Hbm::<f32>::shape_only([4096, 8192]);
        softmax::estimate(1, t, &x, &mut out)
    };
    // A returning kernel's estimate gives (output, profile).
    let model_07 = |t: Target| softmax_07::estimate(1, t, &x).map(|(_, p)| p);
    print_profiles(
        "[4096, 8192] fp32",
        &[
            Version::new("softmax", &model),
            Version::new("softmax_07 (NKI 0.7)", &model_07),
        ],
    )?;
    Ok(ok)
}

fn main() -> ExitCode {
    finish(run())
}
