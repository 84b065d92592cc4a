//! Row softmax, `out[i, j] = exp(x[i, j] - max_i) / sum_j exp(x[i, j] - max_i)` (the NKI
//! softmax example, written with the fused ISA ops).
//!
//! Tiling: rows go to partitions, 128 per tile (the last tile may be partial); a whole row
//! stays in one partition's free dimension. Per tile: the row maximum on VectorE, one ScalarE
//! `activation_reduce` computing `exp(x - max)` and its row sum together, the reciprocal of
//! the sum and one multiply on VectorE, then the store.
//!
//! Bottleneck (modelled, `softmax` example): DMA at `[4096, 8192]` fp32 (100 % busy on trn1,
//! 2.56 ms; 90 % on trn2, 0.81 ms): the three passes over each element (max and the final
//! multiply on VectorE, exp on ScalarE) overlap with moving the bytes. The tutorial's `[2, 5]`
//! logits are bounded by the fixed DMA latency.

use crate::checks::expect_rank;
use nki_core::prelude::*;
// The Beta-1 instruction forms (allocating, `_into` twins): the seeds' dialect.
use nki_core::nisa::classic as nisa;

const OP: &str = "softmax";

/// Softmax along the last axis of a 2-D `x[N, D]` into `out[N, D]`, one instance (grid `[1]`).
#[nki_kernel]
pub fn softmax<T: Element>(x: &Hbm<T>, out: &mut Hbm<T>) {
    let shape = expect_rank(OP, "x", x.shape(), 2);
    crate::checks::expect_shape(OP, "out", out.shape(), shape);
    let rows = shape[0];
    for t in nl::affine_range(nl::num_tiles(rows, nl::tile_size::PMAX)) {
        let r = nl::tile_range(t, nl::tile_size::PMAX, rows);
        let xt = nl::load_as(x.slice((r.clone(), ..)), DType::F32);
        let neg_max = nisa::tensor_reduce(nl::AluOp::Maximum, &xt, &[1], true, true, None);
        let (e, sum) = nisa::activation_reduce(
            nl::ActFn::Exp,
            &xt,
            nisa::ActivationOpts::new().bias(&neg_max),
        );
        let inv = nisa::reciprocal(&sum, None);
        let y = nisa::tensor_scalar(
            &e,
            nl::AluOp::Multiply,
            &inv,
            nisa::TensorScalarOpts::new().dtype(out.dtype()),
        );
        nl::store(out.slice((r, ..)), &y);
    }
}

/// The NKI 0.7 twin of [`softmax`](fn@softmax): the softmax of `x[N, D]` along its last axis,
/// returned, on one core (launch it on `[1]`). The same tiles and the same five instructions
/// per tile, written in 0.7's form: SBUF tensors allocated with `nl::ndarray`, data moved by
/// `nisa::dma_copy` (the load casting to fp32), each instruction writing into a destination
/// given first. It computes the same values as the Beta-1 kernel.
#[nki_kernel(nki = "0.7")]
pub fn softmax_07<T: Element>(x: &Hbm<T>) -> Hbm<T> {
    // This file's `nisa` is Beta 1's allocating forms; the twin uses NKI 0.7's.
    use nki_core::nisa;
    let shape = expect_rank(OP, "x", x.shape(), 2);
    let (rows, d) = (shape[0], shape[1]);
    let out = nl::ndarray(shape, x.dtype(), nl::shared_hbm);
    for t in nl::affine_range(nl::num_tiles(rows, nl::tile_size::PMAX)) {
        let r = nl::tile_range(t, nl::tile_size::PMAX, rows);
        let n = r.len();
        let xt = nl::ndarray(&[n, d], DType::F32, nl::sbuf);
        nisa::dma_copy(&xt, x.slice((r.clone(), ..)), None);
        let neg_max = nl::ndarray(&[n, 1], DType::F32, nl::sbuf);
        let negate = nisa::ReduceOpts::new().negate();
        nisa::tensor_reduce(&neg_max, nl::AluOp::Maximum, &xt, &[1], negate);
        let (e, sum) = (
            nl::ndarray(&[n, d], DType::F32, nl::sbuf),
            nl::ndarray(&[n, 1], DType::F32, nl::sbuf),
        );
        let bias = nisa::ActivationOpts::new().bias(&neg_max);
        nisa::activation_reduce(&e, nl::ActFn::Exp, &xt, nl::AluOp::Add, &sum, bias);
        let inv = nl::ndarray(&[n, 1], DType::F32, nl::sbuf);
        nisa::reciprocal(&inv, &sum, None);
        let y = nl::ndarray(&[n, d], x.dtype(), nl::sbuf);
        nisa::tensor_scalar(&y, &e, nl::AluOp::Multiply, &inv, None);
        nisa::dma_copy(out.slice((r, ..)), &y, None);
    }
    out
}
