//! Fused RMSNorm + QKV projection (nki-samples `allocated_fused_rms_norm_qkv`):
//! `out[0, i, :] = (x[i, :] / (sqrt(mean_j x[i, j]^2) + 1e-6)) @ W` for `hidden[1, S, D]` and
//! `W[D, dh]` (no gain, as in the sample).
//!
//! Tiling: rows of the hidden state go to partitions, 128 per tile (the last may be partial).
//! `W` is loaded once as `D / 128` tiles of `[128, dh]` (the moving operands). Per row tile:
//! ScalarE squares and sums the rows in one `activation_reduce`, takes the root of the mean in
//! a second; VectorE adds the epsilon and inverts. TensorE transposes the input tile in
//! `[rows, 128]` blocks (the stationary operands, contraction on partitions) and accumulates
//! `x @ W` over the `D / 128` blocks in `[rows, 512]` PSUM banks. The row scale
//! `1 / (rms + eps)` commutes with the matmul, so VectorE applies it while evacuating PSUM:
//! no separate normalisation pass, and the matmul sees the exact inputs instead of a rounded
//! normalised copy.
//!
//! [`rmsnorm_qkv_07`](fn@rmsnorm_qkv_07) is its NKI 0.7 twin: the same instructions, `W` and
//! the transposed blocks as lists of `[128, ..]` tensors (0.7 has no block dimensions), every
//! instruction writing into a destination given first, the output returned.
//!
//! Bottleneck (modelled, `rmsnorm_qkv` example, `[1, 1024, 8192] @ [8192, 512]` bf16): DMA on
//! trn1 (95 % busy, 263 us: `W` and the hidden state are 24 MiB) and TensorE on trn2 (79 %,
//! 174 us: per row tile 64 transposes and 64 matmuls).

use crate::checks::{expect_rank, expect_shape, require};
use nki_core::prelude::*;
// The Beta-1 instruction forms (allocating, `_into` twins): the seeds' dialect.
use nki_core::nisa::classic as nisa;

const OP: &str = "rmsnorm_qkv";
const PMAX: usize = nl::tile_size::PMAX;
const BANK: usize = nl::tile_size::GEMM_MOVING_FMAX;
/// The epsilon added to the root mean square.
pub const EPS: f32 = 1e-6;

/// Checks `hidden[1, S, D]` (D a multiple of 128) and `W[D, dh]`; returns `[S, D, dh]`.
#[track_caller]
fn dims(op: &'static str, hidden: &[usize], w: &[usize]) -> [usize; 3] {
    let hs = expect_rank(op, "hidden", hidden, 3);
    let (rows, d) = (hs[1], hs[2]);
    let ws = expect_rank(op, "W", w, 2);
    require(op, hs[0] == 1 && d % PMAX == 0 && ws[0] == d, || {
        format!("hidden{hs:?} must be [1, S, D] with D a multiple of 128 and W{ws:?} [D, dh]")
    });
    [rows, d, ws[1]]
}

/// `rmsnorm(hidden[0]) @ W` into `out[1, S, dh]`, one instance (grid `[1]`). `D` must be a
/// multiple of 128.
#[nki_kernel]
pub fn rmsnorm_qkv<T: Element>(hidden: &Hbm<T>, w: &Hbm<T>, out: &mut Hbm<T>) {
    let [rows, d, dh] = dims(OP, hidden.shape(), w.shape());
    expect_shape(OP, "out", out.shape(), &[1, rows, dh]);
    let blocks = d / PMAX;
    // W as one `[D / 128, par_dim(128), dh]` block tile.
    let w_tiles = nl::ndarray_blocks(blocks, &[PMAX, dh], w.dtype(), nl::SBUF);
    for j in nl::affine_range(blocks) {
        nisa::dma_copy(w_tiles.block(j), w.slice((j * PMAX..(j + 1) * PMAX, ..)));
    }
    for t in nl::affine_range(nl::num_tiles(rows, PMAX)) {
        let r = nl::tile_range(t, PMAX, rows);
        let x = nl::load(hidden.slice((0, r.clone(), ..)));
        let (_, sum_sq) = nisa::activation_reduce(
            nl::ActFn::Square,
            &x,
            nisa::ActivationOpts::new().dtype(DType::F32),
        );
        let rms = nisa::activation(
            nl::ActFn::Sqrt,
            &sum_sq,
            nisa::ActivationOpts::new().scale(1.0 / d as f32),
        );
        let inv = nisa::tensor_scalar(&rms, nl::AluOp::Add, EPS, Default::default());
        let inv = nisa::reciprocal(&inv, None);
        // The transposed blocks: one `[D / 128, par_dim(128), rows]` block tile.
        let x_t = nl::ndarray_blocks(blocks, &[PMAX, r.len()], x.dtype(), nl::SBUF);
        for j in nl::affine_range(blocks) {
            let pt = nisa::nc_transpose(
                x.slice((.., j * PMAX..(j + 1) * PMAX)),
                nisa::Engine::Tensor,
            );
            nisa::tensor_copy_into(x_t.block(j), &pt, nisa::Engine::Vector);
        }
        drop(x);
        for c in nl::affine_range(dh.div_ceil(BANK)) {
            let cols = nl::tile_range(c, BANK, dh);
            let acc = nl::ndarray(&[r.len(), cols.len()], DType::F32, nl::PSUM);
            for j in nl::affine_range(blocks) {
                nisa::nc_matmul_acc(
                    &acc,
                    x_t.block(j),
                    w_tiles.block(j).slice((.., cols.clone())),
                );
            }
            // The row scale 1 / (rms + eps) commutes with the matmul: applied here, while
            // VectorE evacuates PSUM, it costs no pass of its own.
            let y = nisa::tensor_scalar(
                &acc,
                nl::AluOp::Multiply,
                &inv,
                nisa::TensorScalarOpts::new().dtype(out.dtype()),
            );
            nl::store(out.slice((0, r.clone(), cols)), &y);
        }
    }
}

/// The NKI 0.7 twin of [`rmsnorm_qkv`](fn@rmsnorm_qkv): `rmsnorm(hidden[0]) @ W`, returned as
/// `[1, S, dh]`, on one core (launch it on `[1]`). The same instructions written in 0.7's form:
/// tensors from `nl::ndarray` (`W` and the transposed row blocks as lists of `[128, ..]`
/// tensors, where Beta 1 uses block dimensions), data moved by `nisa::dma_copy`, each
/// instruction writing into a destination given first. It computes the same values as the
/// Beta-1 kernel.
#[nki_kernel(nki = "0.7")]
pub fn rmsnorm_qkv_07<T: Element>(hidden: &Hbm<T>, w: &Hbm<T>) -> Hbm<T> {
    // This file's `nisa` is Beta 1's allocating forms; the twin uses NKI 0.7's.
    use nki_core::nisa;
    let [rows, d, dh] = dims("rmsnorm_qkv_07", hidden.shape(), w.shape());
    let (dtype, blocks) = (hidden.dtype(), d / PMAX);
    let out = nl::ndarray(&[1, rows, dh], dtype, nl::shared_hbm);
    let block = |j: usize| j * PMAX..(j + 1) * PMAX;
    let w_tiles: Vec<Tensor> = nl::affine_range(blocks)
        .map(|j| {
            let t = nl::ndarray(&[PMAX, dh], w.dtype(), nl::sbuf);
            nisa::dma_copy(&t, w.slice((block(j), ..)), None);
            t
        })
        .collect();
    for t in nl::affine_range(nl::num_tiles(rows, PMAX)) {
        let r = nl::tile_range(t, PMAX, rows);
        let n = r.len();
        let x = nl::ndarray(&[n, d], dtype, nl::sbuf);
        nisa::dma_copy(&x, hidden.slice((0, r.clone(), ..)), None);
        let (squares, sum_sq) = (
            nl::ndarray(&[n, d], DType::F32, nl::sbuf),
            nl::ndarray(&[n, 1], DType::F32, nl::sbuf),
        );
        let square = nl::ActFn::Square;
        nisa::activation_reduce(&squares, square, &x, nl::AluOp::Add, &sum_sq, None);
        drop(squares);
        let rms = nl::ndarray(&[n, 1], DType::F32, nl::sbuf);
        let mean = nisa::ActivationOpts::new().scale(1.0 / d as f32);
        nisa::activation(&rms, nl::ActFn::Sqrt, &sum_sq, mean);
        let (plus_eps, inv) = (
            nl::ndarray(&[n, 1], DType::F32, nl::sbuf),
            nl::ndarray(&[n, 1], DType::F32, nl::sbuf),
        );
        nisa::tensor_scalar(&plus_eps, &rms, nl::AluOp::Add, EPS, None);
        nisa::reciprocal(&inv, &plus_eps, None);
        // The transposed blocks, each through PSUM.
        let x_t: Vec<Tensor> = nl::affine_range(blocks)
            .map(|j| {
                let pt = nl::ndarray(&[PMAX, n], DType::F32, nl::psum);
                nisa::nc_transpose(&pt, x.slice((.., block(j))), None);
                let xt = nl::ndarray(&[PMAX, n], dtype, nl::sbuf);
                nisa::tensor_copy(&xt, &pt, nisa::Opts::new().engine(nisa::Engine::Vector));
                xt
            })
            .collect();
        drop(x);
        for c in nl::affine_range(dh.div_ceil(BANK)) {
            let cols = nl::tile_range(c, BANK, dh);
            let acc = nl::ndarray(&[n, cols.len()], DType::F32, nl::psum);
            for j in nl::affine_range(blocks) {
                let moving = w_tiles[j].slice((.., cols.clone()));
                nisa::nc_matmul(&acc, &x_t[j], moving, None);
            }
            // The row scale 1 / (rms + eps), applied while VectorE evacuates PSUM.
            let y = nl::ndarray(&[n, cols.len()], dtype, nl::sbuf);
            nisa::tensor_scalar(&y, &acc, nl::AluOp::Multiply, &inv, None);
            nisa::dma_copy(out.slice((0, r.clone(), cols)), &y, None);
        }
    }
    out
}
