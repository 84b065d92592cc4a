//! Deterministic inputs and candle-native references for the bridge's tests and examples.

use candle_core::{DType, Device, Tensor, D};
use nki_kernels::testing::random_vec;

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
