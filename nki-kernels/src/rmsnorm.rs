//! The NKI RMSNorm tutorial: `out[i, :] = a[i, :] / sqrt(mean_j a[i, j]^2) * g` (no epsilon,
//! as in the tutorial).
//!
//! Tiling: rows go to partitions, 128 per tile (the last tile may be partial: 250 rows are
//! one full and one 122-row tile); a row stays in one partition. The gain `g[D]` is loaded
//! once as a `[1, D]` tile and broadcast across the 128 partitions once, before the row loop.
//! Per tile: one ScalarE `activation_reduce(square)` gives the row sums of squares, one ScalarE
//! `rsqrt` with scale `1/D` turns them into `1/rms`, and VectorE applies `x * (1/rms)` then
//! `* g`.
//!
//! Bottleneck (modelled, `rmsnorm` example): at the tutorial's `[128, 512]` / `[250, 512]` the
//! fixed DMA latency of a few loads and stores dominates; at `[4096, 8192]` fp32 DMA bounds
//! trn1 (100 % busy, 2.56 ms) and VectorE's two passes bound trn2 (96 %, 0.86 ms), whose DMA
//! is faster.

use crate::checks::{expect_rank, expect_shape};
use nki_core::prelude::*;
// The Beta-1 instruction forms (allocating, `_into` twins): the seeds' dialect.
use nki_core::nisa::classic as nisa;

const OP: &str = "rmsnorm";

/// RMSNorm of the rows of `a[N, D]` with gain `g[D]` into `out[N, D]`, one instance (grid `[1]`).
#[nki_kernel]
pub fn rmsnorm<T: Element>(a: &Hbm<T>, g: &Hbm<T>, out: &mut Hbm<T>) {
    let shape = expect_rank(OP, "a", a.shape(), 2);
    let (rows, d) = (shape[0], shape[1]);
    expect_shape(OP, "g", g.shape(), &[d]);
    expect_shape(OP, "out", out.shape(), shape);
    let pmax = nl::tile_size::PMAX;
    let g_row = nl::load_as(g.view(), DType::F32);
    let g_all = nl::broadcast_to(&g_row, &[pmax.min(rows), d]);
    for t in nl::affine_range(nl::num_tiles(rows, pmax)) {
        let r = nl::tile_range(t, pmax, rows);
        let n = r.len();
        let x = nl::load_as(a.slice((r.clone(), ..)), DType::F32);
        let (_, sum_sq) = nisa::activation_reduce(nl::ActFn::Square, &x, Default::default());
        let inv_rms = nisa::activation(
            nl::ActFn::Rsqrt,
            &sum_sq,
            nisa::ActivationOpts::new().scale(1.0 / d as f32),
        );
        let normed = nisa::tensor_scalar(&x, nl::AluOp::Multiply, &inv_rms, Default::default());
        let y = nisa::tensor_tensor(
            &normed,
            g_all.slice((0..n, ..)),
            nl::AluOp::Multiply,
            Some(out.dtype()),
        );
        nl::store(out.slice((r, ..)), &y);
    }
}

/// The NKI 0.7 twin of [`rmsnorm`](fn@rmsnorm): RMSNorm of the rows of `a[N, D]` with gain
/// `g[D]`, returned, on one core (launch it on `[1]`). Written in 0.7's form: SBUF tensors
/// allocated with `nl::ndarray`, data moved by `nisa::dma_copy`, each instruction writing into
/// a destination given first. The gain is read once, broadcast across the partitions by the
/// DMA itself (an access pattern whose partition step is 0), where the Beta-1 kernel loads one
/// row and broadcasts it with `nl::broadcast_to`; per tile the same four instructions. It
/// computes the same values as the Beta-1 kernel.
#[nki_kernel(nki = "0.7")]
pub fn rmsnorm_07<T: Element>(a: &Hbm<T>, g: &Hbm<T>) -> Hbm<T> {
    // This file's `nisa` is Beta 1's allocating forms; the twin uses NKI 0.7's.
    use nki_core::nisa;
    let shape = expect_rank(OP, "a", a.shape(), 2);
    let (rows, d) = (shape[0], shape[1]);
    expect_shape(OP, "g", g.shape(), &[d]);
    let out = nl::ndarray(shape, a.dtype(), nl::shared_hbm);
    let pmax = nl::tile_size::PMAX;
    let g_all = nl::ndarray(&[pmax.min(rows), d], DType::F32, nl::sbuf);
    nisa::dma_copy(&g_all, g.view().ap(&[[0, pmax.min(rows)], [1, d]], 0), None);
    for t in nl::affine_range(nl::num_tiles(rows, pmax)) {
        let r = nl::tile_range(t, pmax, rows);
        let n = r.len();
        let x = nl::ndarray(&[n, d], DType::F32, nl::sbuf);
        nisa::dma_copy(&x, a.slice((r.clone(), ..)), None);
        let (squares, sum_sq) = (
            nl::ndarray(&[n, d], DType::F32, nl::sbuf),
            nl::ndarray(&[n, 1], DType::F32, nl::sbuf),
        );
        let square = nl::ActFn::Square;
        nisa::activation_reduce(&squares, square, &x, nl::AluOp::Add, &sum_sq, None);
        let inv_rms = nl::ndarray(&[n, 1], DType::F32, nl::sbuf);
        let scale = nisa::ActivationOpts::new().scale(1.0 / d as f32);
        nisa::activation(&inv_rms, nl::ActFn::Rsqrt, &sum_sq, scale);
        let normed = nl::ndarray(&[n, d], DType::F32, nl::sbuf);
        nisa::tensor_scalar(&normed, &x, nl::AluOp::Multiply, &inv_rms, None);
        let y = nl::ndarray(&[n, d], a.dtype(), nl::sbuf);
        let gain = g_all.slice((0..n, ..));
        nisa::tensor_tensor(&y, &normed, gain, nl::AluOp::Multiply, None);
        nisa::dma_copy(out.slice((r, ..)), &y, None);
    }
    out
}
