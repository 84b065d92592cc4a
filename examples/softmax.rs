//! The NKI softmax example, re-told in Rust.
//!
//! Row softmax `exp(x - max) / sum(exp(x - max))` (`nki_kernels::softmax`): rows on
//! partitions, 128 per tile; per tile the row max (VectorE), one ScalarE `activation_reduce`
//! giving `exp(x - max)` and its row sum together, a reciprocal and one multiply (VectorE). The
//! example
//!
//! 1. checks the tutorial's logits `[[1..5], [5..1]]` and a masked `[250, 512]` case ("match");
//! 2. models `[4096, 8192]` fp32 on trn1 and trn2: three passes over every element on the two
//!    compute engines against one round trip of the bytes through DMA.
//!
//! ```text
//! cargo run --release --example softmax
//! ```

use ndarray::{array, Array2};
use nki_core::prelude::*;
use nki_kernels::reference;
use nki_kernels::report::{finish, print_check, print_profiles, Version};
use nki_kernels::softmax::softmax;
use nki_kernels::testing::{allclose, random_range};
use std::process::ExitCode;

fn check(label: &str, x: Array2<f32>) -> Result<bool, NkiError> {
    let mut out = Hbm::<f32>::zeros([x.nrows(), x.ncols()]);
    softmax::launch(1, &Hbm::from_array(&x)?, &mut out)?;
    let got = out.to_array()?;
    if x.nrows() == 2 {
        println!("softmax of the tutorial's logits:\n{:.4}", got);
    }
    Ok(print_check(
        label,
        allclose(&got, &reference::softmax(&x), 1e-5, 1e-5),
    ))
}

fn run() -> Result<bool, NkiError> {
    let mut ok = check(
        "logits [2, 5]",
        array![[1.0, 2.0, 3.0, 4.0, 5.0], [5.0, 4.0, 3.0, 2.0, 1.0]],
    )?;
    let x =
        Array2::from_shape_vec((250, 512), random_range(250 * 512, -4.0, 4.0, 3)).expect("shape");
    ok &= check("[250, 512] fp32 (a partial last tile)", x)?;
    let model = |t: Target| {
        let mut out = Hbm::<f32>::shape_only([4096, 8192]);
        softmax::estimate(1, t, &Hbm::<f32>::shape_only([4096, 8192]), &mut out)
    };
    print_profiles("[4096, 8192] fp32", &[Version::new("softmax", &model)])?;
    Ok(ok)
}

fn main() -> ExitCode {
    finish(run())
}
