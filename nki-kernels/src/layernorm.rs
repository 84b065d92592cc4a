//! The NKI LayerNorm tutorial, two versions:
//! `out[i, :] = (x[i, :] - mean_i) / sqrt(var_i + eps) * gamma + beta` with the biased
//! variance.
//!
//! Tiling (both): rows go to partitions, 128 per tile (the last tile may be partial); a row
//! stays in one partition. Intermediates are dropped as soon as they are used, so a
//! `[128, 8192]` fp32 row tile and its temporaries fit SBUF. `gamma[D]` and `beta[D]` are loaded once and broadcast across the
//! partitions once, before the row loop.
//!
//! - [`layernorm_v1`](fn@layernorm_v1) uses `nl` ops only: mean, subtract, square, mean,
//!   `rsqrt(var + eps)`, multiply, multiply by gamma, add beta: six full VectorE passes over
//!   each row tile plus ScalarE's square.
//! - [`layernorm_v2`](fn@layernorm_v2) gets mean and variance from VectorE's `bn_stats` (on
//!   512-element pieces) and one `bn_aggr`, and normalises with one two-operator
//!   `tensor_scalar` (`(x - mean) * rstd`): three full passes instead of six.
//!
//! [`layernorm_v1_07`](fn@layernorm_v1_07) and [`layernorm_v2_07`](fn@layernorm_v2_07) are
//! their NKI 0.7 twins: the same per-tile instructions, the tensors from `nl::ndarray`, data
//! moved by `nisa::dma_copy`, the output allocated in HBM and returned.
//!
//! Bottleneck (modelled, `layernorm` example): at the tutorial's `[300, 1000]` v1 is
//! VectorE-bound (67-73 % busy) and v2 is 1.47x (trn1) / 1.53x (trn2) faster. At the torch
//! driver's `[4096, 8192]` trn2 stays VectorE-bound (v2 1.76x faster), while on trn1 both
//! versions hit the DMA bound (96-100 % busy), so v2's saved VectorE passes buy only 1.04x.

use crate::checks::{expect_rank, expect_shape};
use nki_core::nisa::Operand;
use nki_core::prelude::*;
// The Beta-1 instruction forms (allocating, `_into` twins): the seeds' dialect.
use nki_core::nisa::classic as nisa;

const EPS: f32 = 1e-5;
const PMAX: usize = nl::tile_size::PMAX;

/// Checks the operands and returns `(rows, cols)`.
#[track_caller]
fn dims(op: &'static str, [x, gamma, beta, out]: [&[usize]; 4]) -> (usize, usize) {
    let s = expect_rank(op, "x", x, 2);
    expect_shape(op, "gamma", gamma, &[s[1]]);
    expect_shape(op, "beta", beta, &[s[1]]);
    expect_shape(op, "out", out, s);
    (s[0], s[1])
}

/// Loads a `[D]` vector and broadcasts it across `rows` partitions (fp32).
#[track_caller]
fn broadcast_row<T: Element>(v: &Hbm<T>, rows: usize) -> Tile {
    let row = nl::load_as(v.view(), DType::F32);
    nl::broadcast_to(&row, &[rows, v.shape()[0]])
}

/// `normed * gamma + beta` for a row tile, `gamma` and `beta` its rows of the broadcast
/// vectors (two VectorE passes; `normed`, a tile or a tensor, is freed between them).
#[track_caller]
fn scale_shift<'v, N>(
    normed: N,
    gamma: impl Into<Operand<'v>>,
    beta: impl Into<Operand<'v>>,
) -> Tile
where
    for<'a> &'a N: Into<Operand<'a>>,
{
    let scaled = {
        let (normed, gamma): (Operand, Operand) = ((&normed).into(), gamma.into());
        nl::multiply(normed, gamma)
    };
    drop(normed);
    let beta: Operand = beta.into();
    nl::add(Operand::from(&scaled), beta)
}

/// Checks the operands of a 0.7 twin (which returns its output) and returns `(rows, cols)`.
#[track_caller]
fn dims_07(op: &'static str, [x, gamma, beta]: [&[usize]; 3]) -> (usize, usize) {
    dims(op, [x, gamma, beta, x])
}

/// A `[D]` vector copied in as one fp32 row (`dma_copy`) and broadcast across `rows`
/// partitions (`nl.broadcast_to`, on TensorE as in Beta 1).
#[track_caller]
fn broadcast_row_07<T: Element>(v: &Hbm<T>, rows: usize) -> Tile {
    let d = v.shape()[0];
    let row = nl::ndarray(&[1, d], DType::F32, nl::sbuf);
    nki_core::nisa::dma_copy(&row, v.view().reshape(&[1, d]), None);
    nl::broadcast_to(&row, &[rows, d])
}

/// A row tile of `x` (rows `r`) in an SBUF fp32 tensor (a casting `dma_copy`).
#[track_caller]
fn load_rows_07<T: Element>(x: &Hbm<T>, r: std::ops::Range<usize>) -> Tensor {
    let xt = nl::ndarray(&[r.len(), x.shape()[1]], DType::F32, nl::sbuf);
    nki_core::nisa::dma_copy(&xt, x.slice((r, ..)), None);
    xt
}

/// LayerNorm v1 (nl ops) of `x[N, D]` into `out[N, D]`, one instance (grid `[1]`).
#[nki_kernel]
pub fn layernorm_v1<T: Element>(x: &Hbm<T>, gamma: &Hbm<T>, beta: &Hbm<T>, out: &mut Hbm<T>) {
    let (rows, _) = dims(
        "layernorm_v1",
        [x.shape(), gamma.shape(), beta.shape(), out.shape()],
    );
    let g = broadcast_row(gamma, PMAX.min(rows));
    let b = broadcast_row(beta, PMAX.min(rows));
    for t in nl::affine_range(nl::num_tiles(rows, PMAX)) {
        let r = nl::tile_range(t, PMAX, rows);
        let xt = nl::load_as(x.slice((r.clone(), ..)), DType::F32);
        let centred = nl::subtract(&xt, &nl::mean(&xt, &[1], true));
        drop(xt);
        let var = nl::mean(&nl::square(&centred), &[1], true);
        let rstd = nl::rsqrt(&nl::add(&var, EPS));
        let normed = nl::multiply(&centred, &rstd);
        drop(centred);
        let n = r.len();
        let y = scale_shift(normed, g.slice((0..n, ..)), b.slice((0..n, ..)));
        nl::store(out.slice((r, ..)), &y);
    }
}

/// LayerNorm v2 (`bn_stats`/`bn_aggr` and a fused `tensor_scalar`) of `x[N, D]` into
/// `out[N, D]`, one instance (grid `[1]`).
#[nki_kernel]
pub fn layernorm_v2<T: Element>(x: &Hbm<T>, gamma: &Hbm<T>, beta: &Hbm<T>, out: &mut Hbm<T>) {
    let (rows, d) = dims(
        "layernorm_v2",
        [x.shape(), gamma.shape(), beta.shape(), out.shape()],
    );
    let g = broadcast_row(gamma, PMAX.min(rows));
    let b = broadcast_row(beta, PMAX.min(rows));
    let fmax = nl::tile_size::BN_STATS_FMAX;
    let pieces = d.div_ceil(fmax);
    for t in nl::affine_range(nl::num_tiles(rows, PMAX)) {
        let r = nl::tile_range(t, PMAX, rows);
        let n = r.len();
        let xt = nl::load_as(x.slice((r.clone(), ..)), DType::F32);
        let stats = nl::ndarray(&[n, 6 * pieces], DType::F32, nl::SBUF);
        for j in nl::affine_range(pieces) {
            let piece = nl::tile_range(j, fmax, d);
            nisa::bn_stats_into(stats.slice((.., 6 * j..6 * j + 6)), xt.slice((.., piece)));
        }
        let mean_var = nisa::bn_aggr(&stats, None);
        let rstd = nl::rsqrt(&nl::add(mean_var.slice((.., 1..2)), EPS));
        let normed = nisa::tensor_scalar(
            &xt,
            nl::AluOp::Subtract,
            mean_var.slice((.., 0..1)),
            nisa::TensorScalarOpts::new().then(nl::AluOp::Multiply, &rstd),
        );
        drop(xt);
        let y = scale_shift(normed, g.slice((0..n, ..)), b.slice((0..n, ..)));
        nl::store(out.slice((r, ..)), &y);
    }
}

/// The NKI 0.7 twin of [`layernorm_v1`](fn@layernorm_v1): LayerNorm with `nl` ops of `x[N, D]`,
/// returned, on one core (launch it on `[1]`). The row tiles are copied in with
/// `nisa::dma_copy` (casting to fp32) and the results copied out the same way. It computes the
/// same values as the Beta-1 kernel, with the same instructions.
#[nki_kernel(nki = "0.7")]
pub fn layernorm_v1_07<T: Element>(x: &Hbm<T>, gamma: &Hbm<T>, beta: &Hbm<T>) -> Hbm<T> {
    let op = "layernorm_v1_07";
    let (rows, _) = dims_07(op, [x.shape(), gamma.shape(), beta.shape()]);
    let out = nl::ndarray(x.shape(), x.dtype(), nl::shared_hbm);
    let g = broadcast_row_07(gamma, PMAX.min(rows));
    let b = broadcast_row_07(beta, PMAX.min(rows));
    for t in nl::affine_range(nl::num_tiles(rows, PMAX)) {
        let r = nl::tile_range(t, PMAX, rows);
        let n = r.len();
        let xt = load_rows_07(x, r.clone());
        let centred = nl::subtract(&xt, &nl::mean(&xt, &[1], true));
        drop(xt);
        let var = nl::mean(&nl::square(&centred), &[1], true);
        let rstd = nl::rsqrt(&nl::add(&var, EPS));
        let normed = nl::multiply(&centred, &rstd);
        drop(centred);
        let y = scale_shift(normed, g.slice((0..n, ..)), b.slice((0..n, ..)));
        nki_core::nisa::dma_copy(out.slice((r, ..)), &y, None);
    }
    out
}

/// The NKI 0.7 twin of [`layernorm_v2`](fn@layernorm_v2): LayerNorm of `x[N, D]` from
/// `nisa::bn_stats` / `nisa::bn_aggr` and one two-operator `nisa::tensor_scalar`, each writing
/// into a destination given first; returned, on one core (launch it on `[1]`). It computes the
/// same values as the Beta-1 kernel.
#[nki_kernel(nki = "0.7")]
pub fn layernorm_v2_07<T: Element>(x: &Hbm<T>, gamma: &Hbm<T>, beta: &Hbm<T>) -> Hbm<T> {
    // This file's `nisa` is Beta 1's allocating forms; the twin uses NKI 0.7's.
    use nki_core::nisa;
    let op = "layernorm_v2_07";
    let (rows, d) = dims_07(op, [x.shape(), gamma.shape(), beta.shape()]);
    let out = nl::ndarray(x.shape(), x.dtype(), nl::shared_hbm);
    let g = broadcast_row_07(gamma, PMAX.min(rows));
    let b = broadcast_row_07(beta, PMAX.min(rows));
    let fmax = nl::tile_size::BN_STATS_FMAX;
    let pieces = d.div_ceil(fmax);
    for t in nl::affine_range(nl::num_tiles(rows, PMAX)) {
        let r = nl::tile_range(t, PMAX, rows);
        let n = r.len();
        let xt = load_rows_07(x, r.clone());
        let stats = nl::ndarray(&[n, 6 * pieces], DType::F32, nl::sbuf);
        for j in nl::affine_range(pieces) {
            let piece = nl::tile_range(j, fmax, d);
            nisa::bn_stats(
                stats.slice((.., 6 * j..6 * j + 6)),
                xt.slice((.., piece)),
                None,
            );
        }
        let mean_var = nl::ndarray(&[n, 2], DType::F32, nl::sbuf);
        nisa::bn_aggr(&mean_var, &stats, None);
        let rstd = nl::rsqrt(&nl::add(mean_var.slice((.., 1..2)), EPS));
        let normed = nl::ndarray(&[n, d], DType::F32, nl::sbuf);
        let then_scale = nisa::TensorScalarOpts::new().then(nl::AluOp::Multiply, &rstd);
        let mean = mean_var.slice((.., 0..1));
        nisa::tensor_scalar(&normed, &xt, nl::AluOp::Subtract, mean, then_scale);
        drop(xt);
        let y = scale_shift(normed, g.slice((0..n, ..)), b.slice((0..n, ..)));
        nisa::dma_copy(out.slice((r, ..)), &y, None);
    }
    out
}
