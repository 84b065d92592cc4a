//! The NKI `transpose2d` tutorial: each row of `input[P, X * Y]` holds an `X x Y` matrix
//! (row-major); the kernel writes its transpose, `out[p, y * X + x] = input[p, x * Y + y]`
//! (NumPy `a.reshape(P, X, Y).transpose(0, 2, 1).reshape(P, X * Y)`).
//!
//! Tiling: rows go to partitions, 128 at a time (the last tile may be partial); each row's
//! matrix stays in that partition's free dimension, so the transpose is a free-dimension
//! permutation that VectorE does with strided access patterns, with no data crossing
//! partitions. Per row tile: one load, one VectorE copy from the input viewed as `[rows, X, Y]`
//! with its free dimensions swapped into the output viewed as `[rows, Y, X]`, one store.
//!
//! Bottleneck (modelled, `transpose2d` example): at the tutorial's shape (`[5, 12]`, int8) the
//! fixed latency of the load and the store dominates (4.5 us); the copies are a few short
//! VectorE instructions. At `[4096, 64 * 64]` fp32 it is DMA-bound (100 % busy on trn1 and
//! trn2): it moves every byte in and out and does no arithmetic.

use crate::checks::{expect_rank, expect_shape, require};
use nki_core::prelude::*;

const OP: &str = "transpose2d";

/// `out[p, y * X + x] = input[p, x * Y + y]` for `input[P, X * Y]` (any P), one instance
/// (launch on grid `[1]`).
#[nki_kernel]
pub fn transpose2d<T: Element>(input: &Hbm<T>, out: &mut Hbm<T>, x: usize, y: usize) {
    let shape = expect_rank(OP, "input", input.shape(), 2);
    let rows = shape[0];
    require(OP, x * y == shape[1] && x * y > 0, || {
        format!("input{shape:?} must have X * Y = {x} * {y} columns")
    });
    expect_shape(OP, "out", out.shape(), shape);
    for t in nl::affine_range(nl::num_tiles(rows, nl::tile_size::PMAX)) {
        let r = nl::tile_range(t, nl::tile_size::PMAX, rows);
        let in_tile = nl::load(input.slice((r.clone(), ..)));
        let out_tile = nl::ndarray(&[r.len(), x * y], in_tile.dtype(), nl::SBUF);
        // NKI's `out_tile[i_p, i_y, i_x] = in_tile[i_p, i_x, i_y]`: one copy through views of
        // both tiles as [rows, Y, X] and [rows, X, Y] with the free dimensions swapped.
        let n = r.len();
        nl::assign(
            out_tile.reshape(&[n, y, x]),
            in_tile.reshape(&[n, x, y]).permute(&[0, 2, 1]),
        );
        nl::store(out.slice((r, ..)), &out_tile);
    }
}

/// The NKI 0.7 twin of [`transpose2d`](fn@transpose2d): each row's `X x Y` matrix of
/// `input[P, X * Y]` transposed, returned, on one core (launch it on `[1]`). The same tiles
/// and instructions written in 0.7's form: SBUF tensors allocated with `nl::ndarray`, data
/// moved by `nisa::dma_copy`, and the transpose one `nisa::tensor_copy` from the input tile
/// viewed as `[rows, X, Y]` with its free dimensions swapped into the output tile viewed as
/// `[rows, Y, X]`. It computes the same values as the Beta-1 kernel.
#[nki_kernel(nki = "0.7")]
pub fn transpose2d_07<T: Element>(input: &Hbm<T>, x: usize, y: usize) -> Hbm<T> {
    let shape = expect_rank(OP, "input", input.shape(), 2);
    let rows = shape[0];
    require(OP, x * y == shape[1] && x * y > 0, || {
        format!("input{shape:?} must have X * Y = {x} * {y} columns")
    });
    let out = nl::ndarray(shape, input.dtype(), nl::shared_hbm);
    for t in nl::affine_range(nl::num_tiles(rows, nl::tile_size::PMAX)) {
        let r = nl::tile_range(t, nl::tile_size::PMAX, rows);
        let n = r.len();
        let in_tile = nl::ndarray(&[n, x * y], input.dtype(), nl::sbuf);
        nisa::dma_copy(&in_tile, input.slice((r.clone(), ..)), None);
        let out_tile = nl::ndarray(&[n, x * y], input.dtype(), nl::sbuf);
        let swapped = in_tile.reshape(&[n, x, y]).permute(&[0, 2, 1]);
        nisa::tensor_copy(out_tile.reshape(&[n, y, x]), swapped, None);
        nisa::dma_copy(out.slice((r, ..)), &out_tile, None);
    }
    out
}
