//! Adaptive average pooling (nki-samples `adaptive_avg_pool2d_kernel`, PyTorch
//! `adaptive_avg_pool2d`): `input[N, C, H, W]` to `out[N, C, OH, OW]`, where output `(i, j)` is
//! the mean over rows `floor(i*H/OH) .. ceil((i+1)*H/OH)` and columns
//! `floor(j*W/OW) .. ceil((j+1)*W/OW)`. Windows may overlap and differ in size when `H` is not
//! a multiple of `OH`.
//!
//! Tiling: channels go to partitions (128 per tile), images are taken one at a time. For each
//! output row the window's input rows are loaded in chunks of at most [`CHUNK_ELEMS`] elements
//! per partition (so a 256 x 256 image pooled to 1 x 1 still fits SBUF); each output column's
//! window is summed on VectorE (one `tensor_reduce` over rows and columns), scaled by the
//! window's inverse size and added into that output row's fp32 accumulator.
//!
//! [`adaptive_avg_pool2d_07`](fn@adaptive_avg_pool2d_07) is its NKI 0.7 twin: the same
//! instructions on tensors from `nl::ndarray`, data moved by `nisa::dma_copy`, each
//! instruction writing into a destination given first, the output allocated in HBM and
//! returned.
//!
//! Bottleneck (modelled, `adaptive_avg_pool2d` example): few big windows are DMA-bound
//! (`[2, 64, 256, 256] -> 1`: DMA 95 % busy on trn1, 90 % on trn2); many small windows are
//! bounded by the latency of short dependent instruction chains rather than by any engine's
//! throughput (`[1, 64, 56, 56] -> 7 x 7` issues 147 small VectorE instructions against 7
//! loads; 19 us on trn1, where DMA is the busiest engine at 71 %).

use crate::checks::{expect_rank, expect_shape, require};
use nki_core::prelude::*;
// The Beta-1 instruction forms (allocating, `_into` twins): the seeds' dialect.
use nki_core::nisa::classic as nisa;

const OP: &str = "adaptive_avg_pool2d";

/// The most input elements per partition loaded at once (64 KiB of fp32).
pub const CHUNK_ELEMS: usize = 16 * 1024;

/// PyTorch's adaptive pooling window along one axis: `floor(i*n/out) .. ceil((i+1)*n/out)`.
pub fn window(i: usize, n: usize, out: usize) -> std::ops::Range<usize> {
    (i * n / out)..((i + 1) * n).div_ceil(out)
}

/// Checks `input[N, C, H, W]` against the output size `oh x ow`; returns `[N, C, H, W]`.
#[track_caller]
fn dims(op: &'static str, input: &[usize], oh: usize, ow: usize) -> [usize; 4] {
    let s = expect_rank(op, "input", input, 4);
    let (h, w) = (s[2], s[3]);
    require(op, oh > 0 && ow > 0 && oh <= h && ow <= w, || {
        format!("output size {oh} x {ow} must be between 1 and the input size {h} x {w}")
    });
    [s[0], s[1], h, w]
}

/// Adaptive average pooling of `input[N, C, H, W]` into `out[N, C, OH, OW]`, one instance
/// (grid `[1]`).
#[nki_kernel]
pub fn adaptive_avg_pool2d<T: Element>(input: &Hbm<T>, out: &mut Hbm<T>) {
    let o = expect_rank(OP, "out", out.shape(), 4);
    let (oh, ow) = (o[2], o[3]);
    let [n, c, h, w] = dims(OP, input.shape(), oh, ow);
    expect_shape(OP, "out", o, &[n, c, oh, ow]);
    let pmax = nl::tile_size::PMAX;
    let chunk_rows = (CHUNK_ELEMS / w).max(1);
    for b in nl::affine_range(n) {
        for t in nl::affine_range(nl::num_tiles(c, pmax)) {
            let ch = nl::tile_range(t, pmax, c);
            for i in nl::affine_range(oh) {
                let rows = window(i, h, oh);
                let acc = nl::ndarray(&[ch.len(), ow], DType::F32, nl::SBUF);
                for k in nl::sequential_range(rows.len().div_ceil(chunk_rows)) {
                    let r0 = rows.start + k * chunk_rows;
                    let r = r0..(r0 + chunk_rows).min(rows.end);
                    let x = nl::load_as(input.slice((b, ch.clone(), r, ..)), DType::F32);
                    for j in nl::affine_range(ow) {
                        let cols = window(j, w, ow);
                        let inv = 1.0 / (rows.len() * cols.len()) as f32;
                        let sum = nisa::tensor_reduce(
                            nl::AluOp::Add,
                            x.slice((.., .., cols)),
                            &[1, 2],
                            false,
                            false,
                            None,
                        );
                        let col = acc.slice((.., j..j + 1));
                        // `acc[:, j] = sum * inv` for the first chunk, `+=` for the others.
                        let args = if k == 0 {
                            nisa::TensorScalarOpts::new()
                        } else {
                            nisa::TensorScalarOpts::new().then(nl::AluOp::Add, col)
                        };
                        nisa::tensor_scalar_into(col, &sum, nl::AluOp::Multiply, inv, args);
                    }
                }
                nl::store(out.slice((b, ch.clone(), i, ..)), &acc);
            }
        }
    }
}

/// The NKI 0.7 twin of [`adaptive_avg_pool2d`](fn@adaptive_avg_pool2d): `input[N, C, H, W]`
/// pooled to `[N, C, oh, ow]`, returned, on one core (launch it on `[1]`). The same tiles and
/// instructions in 0.7's form: tensors from `nl::ndarray`, data moved (and cast to fp32) by
/// `nisa::dma_copy`, `nisa::tensor_reduce` and `nisa::tensor_scalar` writing into
/// destinations given first. It computes the same values as the Beta-1 kernel.
#[nki_kernel(nki = "0.7")]
pub fn adaptive_avg_pool2d_07<T: Element>(input: &Hbm<T>, oh: usize, ow: usize) -> Hbm<T> {
    // This file's `nisa` is Beta 1's allocating forms; the twin uses NKI 0.7's.
    use nki_core::nisa;
    let [n, c, h, w] = dims("adaptive_avg_pool2d_07", input.shape(), oh, ow);
    let out = nl::ndarray(&[n, c, oh, ow], input.dtype(), nl::shared_hbm);
    let pmax = nl::tile_size::PMAX;
    let chunk_rows = (CHUNK_ELEMS / w).max(1);
    for b in nl::affine_range(n) {
        for t in nl::affine_range(nl::num_tiles(c, pmax)) {
            let ch = nl::tile_range(t, pmax, c);
            let nch = ch.len();
            for i in nl::affine_range(oh) {
                let rows = window(i, h, oh);
                let acc = nl::ndarray(&[nch, ow], DType::F32, nl::sbuf);
                for k in nl::sequential_range(rows.len().div_ceil(chunk_rows)) {
                    let r0 = rows.start + k * chunk_rows;
                    let r = r0..(r0 + chunk_rows).min(rows.end);
                    let x = nl::ndarray(&[nch, r.len(), w], DType::F32, nl::sbuf);
                    nisa::dma_copy(&x, input.slice((b, ch.clone(), r, ..)), None);
                    for j in nl::affine_range(ow) {
                        let cols = window(j, w, ow);
                        let inv = 1.0 / (rows.len() * cols.len()) as f32;
                        let sum = nl::ndarray(&[nch, 1], DType::F32, nl::sbuf);
                        let window_x = x.slice((.., .., cols));
                        nisa::tensor_reduce(&sum, nl::AluOp::Add, &window_x, &[1, 2], None);
                        let col = acc.slice((.., j..j + 1));
                        // `acc[:, j] = sum * inv` for the first chunk, `+=` for the others.
                        let opts = if k == 0 {
                            nisa::TensorScalarOpts::new()
                        } else {
                            nisa::TensorScalarOpts::new().then(nl::AluOp::Add, &col)
                        };
                        nisa::tensor_scalar(&col, &sum, nl::AluOp::Multiply, inv, opts);
                    }
                }
                nisa::dma_copy(out.slice((b, ch.clone(), i, ..)), &acc, None);
            }
        }
    }
    out
}
