//! Forward and backward kernels for use inside a framework's autograd graph (see the
//! `nki-candle` bridge):
//!
//! - [`tensor_add_tile`](fn@tensor_add_tile): the tensor addition of NKI's "framework custom
//!   operator" guide, one `[128, 512]` tile per program instance on a `[rows / 128, cols / 512]`
//!   grid. Its backward needs no kernel: both gradients are the output gradient itself (the
//!   guide's `return dy, dy`).
//! - [`rmsnorm_fwd`](fn@rmsnorm_fwd) / [`rmsnorm_bwd`](fn@rmsnorm_bwd): RMS normalisation over
//!   the last dimension with a learnt per-column gain, and its gradients with respect to the
//!   input and the gain.
//!
//! All arithmetic runs in fp32 on chip (inputs are loaded as fp32), and results are rounded to
//! the tensors' dtype when stored.

use nki_core::prelude::*;
// The Beta-1 instruction forms (allocating, `_into` twins): the seeds' dialect.
use nki_core::nisa::classic as nisa;

/// Rows of one tile of [`tensor_add_tile`](fn@tensor_add_tile) (the partition dimension).
pub const ADD_TILE_ROWS: usize = nl::tile_size::PMAX;

/// Columns of one tile of [`tensor_add_tile`](fn@tensor_add_tile).
pub const ADD_TILE_COLS: usize = 512;

/// The `eps` of [`rmsnorm_fwd`](fn@rmsnorm_fwd) and [`rmsnorm_bwd`](fn@rmsnorm_bwd) callers
/// usually pass (the value common in transformer models).
pub const RMSNORM_EPS: f32 = 1e-6;

/// `c = a + b` on one `[128, 512]` tile per program instance: instance `(i, j)` adds rows
/// `128 i ..` and columns `512 j ..` (NKI's `nki_tensor_add_kernel_`). Launch it on grid
/// `[rows / 128, cols / 512]`; a tile reaching past the tensor fails the launch with an
/// out-of-bounds error naming the kernel line.
#[nki_kernel]
pub fn tensor_add_tile<T: Element>(a: &Hbm<T>, b: &Hbm<T>, c: &mut Hbm<T>) {
    let i = nl::program_id(0) * ADD_TILE_ROWS;
    let j = nl::program_id(1) * ADD_TILE_COLS;
    let (rows, cols) = (i..i + ADD_TILE_ROWS, j..j + ADD_TILE_COLS);
    let x = nl::load(a.slice((rows.clone(), cols.clone())));
    let y = nl::load(b.slice((rows.clone(), cols.clone())));
    nl::store(c.slice((rows, cols)), &(&x + &y));
}

/// Checks the `[n, d]` input and `[1, d]` gain of the RMSNorm kernels; returns `(n, d)`.
fn rmsnorm_shapes(
    op: &'static str,
    x: &[usize],
    gain: &[usize],
) -> Result<(usize, usize), NkiError> {
    let [n, d] = *x else {
        return Err(NkiError::new(
            ErrorKind::InvalidArgument,
            op,
            format!("expected a 2-D input [rows, features], got x{x:?}"),
        ));
    };
    if gain != [1, d] {
        return Err(NkiError::new(
            ErrorKind::ShapeMismatch,
            op,
            format!("the gain must be [1, {d}] for x{x:?}, got gain{gain:?}"),
        ));
    }
    Ok((n, d))
}

/// The shape checks of the RMSNorm kernels, raised as a kernel error on failure.
#[track_caller]
fn checked_rmsnorm_shapes(
    op: &'static str,
    x: &[usize],
    gain: &[usize],
    others: &[&[usize]],
) -> usize {
    let (_, d) = nl::check(rmsnorm_shapes(op, x, gain));
    if let Some(bad) = others.iter().find(|s| **s != x) {
        let e = NkiError::new(
            ErrorKind::ShapeMismatch,
            op,
            format!("every [rows, features] operand must match x{x:?}, got {bad:?}"),
        );
        nl::fail(e);
    }
    d
}

/// Loads the gain as a `[rows, d]` fp32 tile (one copy per partition).
#[track_caller]
fn load_gain<T: Element>(gain: &Hbm<T>, rows: usize, d: usize) -> Tile {
    nl::broadcast_to(&nl::load_as(gain.view(), DType::F32), &[rows, d])
}

/// `1 / sqrt(mean(x^2) + eps)` per row of `x` (`[rows, 1]`, fp32).
#[track_caller]
fn inverse_rms(x: &Tile, eps: f32) -> Tile {
    let mean_square = nl::mean(&(x * x), &[1], true);
    nl::rsqrt(&(mean_square + eps))
}

/// RMSNorm forward: `y = x / sqrt(mean(x^2, axis=1) + eps) * gain` for `x: [n, d]`,
/// `gain: [1, d]`. Instance `i` of a grid `[ceil(n / 128)]` normalises rows
/// `128 i ..` (the last tile may be partial).
///
/// A rank other than 2, a gain of another width or an output of another shape fails the launch.
#[nki_kernel]
pub fn rmsnorm_fwd<T: Element>(x: &Hbm<T>, gain: &Hbm<T>, y: &mut Hbm<T>, eps: f32) {
    let d = checked_rmsnorm_shapes("rmsnorm_fwd", x.shape(), gain.shape(), &[y.shape()]);
    let rows = nl::tile_range(nl::program_id(0), nl::tile_size::PMAX, x.shape()[0]);
    let xt = nl::load_as(x.slice((rows.clone(), ..)), DType::F32);
    let g = load_gain(gain, rows.len(), d);
    let normed = &xt * &inverse_rms(&xt, eps);
    nl::store(y.slice((rows, ..)), &(&normed * &g));
}

/// RMSNorm backward, as one program instance (launch it on grid `[1]`): given the forward input
/// `x: [n, d]`, the gain and the output gradient `dy: [n, d]`, writes
///
/// - `dx = r * (dy * gain - xhat * mean(dy * gain * xhat, axis=1))`, with `r = 1 /
///   sqrt(mean(x^2) + eps)` and `xhat = x * r`, and
/// - `dgain = sum over rows of dy * xhat` (`[1, d]`, like the gain).
///
/// Row tiles of 128 are walked in a `sequential_range`: each adds its partition-reduced share
/// of `dgain` (GpSimdE `tensor_partition_reduce`) to a running fp32 sum kept on chip.
#[nki_kernel]
pub fn rmsnorm_bwd<T: Element>(
    x: &Hbm<T>,
    gain: &Hbm<T>,
    dy: &Hbm<T>,
    dx: &mut Hbm<T>,
    dgain: &mut Hbm<T>,
    eps: f32,
) {
    let d = checked_rmsnorm_shapes(
        "rmsnorm_bwd",
        x.shape(),
        gain.shape(),
        &[dy.shape(), dx.shape()],
    );
    if dgain.shape() != gain.shape() {
        let e = NkiError::new(
            ErrorKind::ShapeMismatch,
            "rmsnorm_bwd",
            format!(
                "dgain{:?} must have the gain's shape {:?}",
                dgain.shape(),
                gain.shape()
            ),
        );
        nl::fail(e);
    }
    let n = x.shape()[0];
    let mut dgain_sum = nl::zeros(&[1, d], DType::F32, nl::SBUF);
    for t in nl::sequential_range(nl::num_tiles(n, nl::tile_size::PMAX)) {
        let rows = nl::tile_range(t, nl::tile_size::PMAX, n);
        let xt = nl::load_as(x.slice((rows.clone(), ..)), DType::F32);
        let dyt = nl::load_as(dy.slice((rows.clone(), ..)), DType::F32);
        let g = load_gain(gain, rows.len(), d);
        let r = inverse_rms(&xt, eps);
        let xhat = &xt * &r;
        let dy_g = &dyt * &g;
        let proj = nl::mean(&(&dy_g * &xhat), &[1], true);
        let dxt = &(&dy_g - &(&xhat * &proj)) * &r;
        nl::store(dx.slice((rows, ..)), &dxt);
        let share = nisa::tensor_partition_reduce(nl::AluOp::Add, &(&dyt * &xhat), None);
        dgain_sum = &dgain_sum + &share;
    }
    nl::store(dgain.view(), &dgain_sum);
}
