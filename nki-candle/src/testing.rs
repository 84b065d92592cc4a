//! Deterministic inputs, candle-native references and the command line of the bridge's tests
//! and examples.

use candle_core::{DType, Device, Tensor, D};
use nki_core::prelude::Target;
use nki_kernels::testing::random_vec;
use std::process::ExitCode;

/// A `[rows, cols]` CPU tensor of `dtype` with values uniform in [-1, 1), deterministic in
/// `seed` (the stream of `nki_kernels::testing::random_vec`).
pub fn random_tensor(
    rows: usize,
    cols: usize,
    seed: u64,
    dtype: DType,
) -> candle_core::Result<Tensor> {
    let v: Vec<f32> = random_vec(rows * cols, seed)
        .into_iter()
        .map(|x| 2.0 * x - 1.0)
        .collect();
    Tensor::from_vec(v, (rows, cols), &Device::Cpu)?.to_dtype(dtype)
}

/// RMSNorm in candle's own ops: `x / sqrt(mean(x^2, last axis) + eps) * gain` (the all-candle
/// counterpart of [`crate::ops::rmsnorm`]).
pub fn rmsnorm_reference(x: &Tensor, gain: &Tensor, eps: f32) -> candle_core::Result<Tensor> {
    let mean_square = x.sqr()?.mean_keepdim(D::Minus1)?;
    let inverse_rms = (mean_square + eps as f64)?.sqrt()?.recip()?;
    x.broadcast_mul(&inverse_rms)?.broadcast_mul(gain)
}

/// The `main` of an example: reads the target from the first argument (`trn1`, `trn2`,
/// `trn3`; default trn2), runs `run` on it and prints `matched` when it returns `Ok(true)`.
/// Mismatches and errors are reported on stderr with a failing exit code.
pub fn example_main(
    matched: &str,
    run: impl FnOnce(Target) -> candle_core::Result<bool>,
) -> ExitCode {
    let arg = std::env::args().nth(1);
    let Some(target) = arg.as_deref().map_or(Some(Target::Trn2), Target::parse) else {
        eprintln!(
            "unknown target {:?}: use trn1, trn2 or trn3",
            arg.unwrap_or_default()
        );
        return ExitCode::FAILURE;
    };
    match run(target) {
        Ok(true) => {
            println!("\n{matched}");
            ExitCode::SUCCESS
        }
        Ok(false) => {
            eprintln!("\nMISMATCH: the NKI op and candle differ beyond the tolerance");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
