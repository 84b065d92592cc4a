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

/// `rmsnorm(hidden[0]) @ W` into `out[1, S, dh]`, one instance (grid `[1]`). `D` must be a
/// multiple of 128.
#[nki_kernel]
pub fn rmsnorm_qkv<T: Element>(hidden: &Hbm<T>, w: &Hbm<T>, out: &mut Hbm<T>) {
    let hs = expect_rank(OP, "hidden", hidden.shape(), 3);
    let (rows, d) = (hs[1], hs[2]);
    let ws = expect_rank(OP, "W", w.shape(), 2);
    let dh = ws[1];
    require(OP, hs[0] == 1 && d % PMAX == 0 && ws[0] == d, || {
        format!("hidden{hs:?} must be [1, S, D] with D a multiple of 128 and W{ws:?} [D, dh]")
    });
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
