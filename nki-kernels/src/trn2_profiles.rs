//! The kernels behind the trn2 profiles of shared/reference/calibration.md §6: AWS's worked
//! examples of profile analysis (aws-neuron/neuron-agentic-development, the
//! `neuron-nki-profile-querying` skill: `references/example-bounds-analysis.md` and
//! `investigations/{te_inefficiency,dma_efficiency}.md`), written in the NKI 0.7 surface as
//! those files describe them (destination-first `nisa` calls, tiles from `nl::ndarray`).
//!
//! - [`ladder_tiled`](fn@ladder_tiled) and [`ladder_blocked`](fn@ladder_blocked): the
//!   4096³ bf16 matmul ladder V0 (tiled), V1 (free dimensions blocked) and V2 (V1 with row
//!   loads), §6a.
//! - [`te_tile_sizes`](fn@te_tile_sizes): 2,048 `nc_matmul`s on one resident stationary and
//!   one moving tile, in reduced or full tiles, §6b.
//! - [`dma_descriptors`](fn@dma_descriptors): tile loads and stores over the DGE modes, whose
//!   descriptor length is the tile's row, §6c.
//!
//! The PSUM read-outs use `nisa.tensor_copy` without an engine, as the profiled kernels do
//! (their VectorE active time is the read-outs': the compiler left them on VectorE).

use crate::checks::require;
use nki_core::nisa::{DgeMode, DmaOpts};
use nki_core::prelude::*;

/// Rows of a result tile (the stationary free size).
pub const TILE_M: usize = 128;
/// Contraction rows per tile (the partitions).
pub const TILE_K: usize = 128;
/// Columns of a result tile (the moving free size, one PSUM bank of fp32).
pub const TILE_N: usize = 512;

/// Checks `lhsT[K, M]` and `rhs[K, N]` for a ladder kernel whose M must be a multiple of
/// `mult_m`, N of `mult_n` and K of 128; returns `(K, M, N)`.
#[track_caller]
fn dims(
    op: &'static str,
    lhs_t: &[usize],
    rhs: &[usize],
    mult_m: usize,
    mult_n: usize,
) -> [usize; 3] {
    require(
        op,
        lhs_t.len() == 2 && rhs.len() == 2 && lhs_t[0] == rhs[0],
        || {
            format!(
                "expected lhsT[K, M] and rhs[K, N] with one K, got lhsT{lhs_t:?} and rhs{rhs:?}"
            )
        },
    );
    let (k, m, n) = (lhs_t[0], lhs_t[1], rhs[1]);
    for (what, size, mult) in [("M", m, mult_m), ("N", n, mult_n), ("K", k, TILE_K)] {
        require(op, mult > 0 && size > 0 && size % mult == 0, || {
            format!("expected {what} = {size} to be a positive multiple of {mult}")
        });
    }
    [k, m, n]
}

/// Copies the fp32 PSUM accumulator `acc` (`[128, 512]`) to SBUF in `result`'s dtype with a
/// `tensor_copy` whose engine the compiler picks, and stores it at rows `r0..`, columns `c0..`.
fn read_out(result: &Tensor, acc: &Tensor, (r0, c0): (usize, usize)) {
    let tmp = nl::ndarray(&[TILE_M, TILE_N], result.dtype(), nl::sbuf);
    nisa::tensor_copy(&tmp, acc, None);
    nisa::dma_copy(result.slice((r0..r0 + TILE_M, c0..c0 + TILE_N)), &tmp, None);
}

/// §6a V0: `result = lhsT^T @ rhs` with loops m (M / 128), n (N / 512) and k (K / 128), all
/// `affine_range`; every k iteration copies a `[128, 128]` lhsT tile and a `[128, 512]` rhs
/// tile to SBUF (`dma_copy`) and accumulates their `nc_matmul` in a `[128, 512]` fp32 PSUM
/// tensor, which is copied out (`tensor_copy`) and stored after the k loop. `result` has
/// the input dtype.
///
/// Needs M and K multiples of 128, N of 512.
#[nki_kernel(nki = "0.7")]
pub fn ladder_tiled<T: Element>(lhs_t: &Hbm<T>, rhs: &Hbm<T>) -> Hbm<T> {
    let [k, m, n] = dims("ladder_tiled", lhs_t.shape(), rhs.shape(), TILE_M, TILE_N);
    let result = nl::ndarray(&[m, n], lhs_t.dtype(), nl::shared_hbm);
    for mi in nl::affine_range(m / TILE_M) {
        for ni in nl::affine_range(n / TILE_N) {
            let acc = nl::ndarray(&[TILE_M, TILE_N], DType::F32, nl::psum);
            for ki in nl::affine_range(k / TILE_K) {
                let kr = ki * TILE_K..(ki + 1) * TILE_K;
                let lhs_tile = nl::ndarray(&[TILE_K, TILE_M], lhs_t.dtype(), nl::sbuf);
                let rhs_tile = nl::ndarray(&[TILE_K, TILE_N], rhs.dtype(), nl::sbuf);
                let (mc, nc) = (
                    mi * TILE_M..(mi + 1) * TILE_M,
                    ni * TILE_N..(ni + 1) * TILE_N,
                );
                nisa::dma_copy(&lhs_tile, lhs_t.slice((kr.clone(), mc)), None);
                nisa::dma_copy(&rhs_tile, rhs.slice((kr, nc)), None);
                nisa::nc_matmul(&acc, &lhs_tile, &rhs_tile, None);
            }
            read_out(&result, &acc, (mi * TILE_M, ni * TILE_N));
        }
    }
    result
}

/// §6a V1 (`row_loads` false) and V2 (`row_loads` true): M in blocks of `bm` tiles, N in
/// blocks of `bn` tiles. For each M block its lhsT tiles are copied once and kept; for each N
/// block of it the block's rhs tiles are copied; then every (m tile, n tile) pair
/// accumulates over K in a `[128, 512]` PSUM tensor, is copied out and stored. V1 copies
/// lhsT and rhs tile by tile (`[128, 128]` and `[128, 512]`: one DMA per tile and K row);
/// V2 copies one row per K tile and block (`[128, 128 bm]` of lhsT, `[128, 512 bn]` of rhs)
/// and the matmuls slice the rows in SBUF: the same bytes in fewer, longer transfers.
///
/// Needs M a multiple of `128 bm`, N of `512 bn`, K of 128.
#[nki_kernel(nki = "0.7")]
pub fn ladder_blocked<T: Element>(
    lhs_t: &Hbm<T>,
    rhs: &Hbm<T>,
    bm: usize,
    bn: usize,
    row_loads: bool,
) -> Hbm<T> {
    let (block_m, block_n) = (TILE_M * bm, TILE_N * bn);
    let [k, m, n] = dims(
        "ladder_blocked",
        lhs_t.shape(),
        rhs.shape(),
        block_m,
        block_n,
    );
    let result = nl::ndarray(&[m, n], lhs_t.dtype(), nl::shared_hbm);
    let k_tiles = k / TILE_K;
    // Rows `ki` of a block: one `[128, width]` tensor per K tile, its columns `c0..c0 + width`
    // of `src`, copied whole (row loads) or `tile` columns at a time.
    let load_rows = |src: &Hbm<T>, c0: usize, width: usize, tile: usize| -> Vec<Tensor> {
        let mut rows = Vec::with_capacity(k_tiles);
        for ki in nl::affine_range(k_tiles) {
            let kr = ki * TILE_K..(ki + 1) * TILE_K;
            let row = nl::ndarray(&[TILE_K, width], src.dtype(), nl::sbuf);
            let step = if row_loads { width } else { tile };
            for t in nl::affine_range(width / step) {
                let cols = t * step..(t + 1) * step;
                let dst_cols = cols.clone();
                let at = c0 + cols.start..c0 + cols.end;
                nisa::dma_copy(row.slice((.., dst_cols)), src.slice((kr.clone(), at)), None);
            }
            rows.push(row);
        }
        rows
    };
    for mb in nl::affine_range(m / block_m) {
        let lhs_rows = load_rows(lhs_t, mb * block_m, block_m, TILE_M);
        for nb in nl::affine_range(n / block_n) {
            let rhs_rows = load_rows(rhs, nb * block_n, block_n, TILE_N);
            for i in nl::affine_range(bm) {
                for j in nl::affine_range(bn) {
                    let acc = nl::ndarray(&[TILE_M, TILE_N], DType::F32, nl::psum);
                    for ki in nl::affine_range(k_tiles) {
                        nisa::nc_matmul(
                            &acc,
                            lhs_rows[ki].slice((.., i * TILE_M..(i + 1) * TILE_M)),
                            rhs_rows[ki].slice((.., j * TILE_N..(j + 1) * TILE_N)),
                            None,
                        );
                    }
                    let at = (mb * block_m + i * TILE_M, nb * block_n + j * TILE_N);
                    read_out(&result, &acc, at);
                }
            }
        }
    }
    result
}

/// §6b: one stationary `[128, 128]` tile (from `lhs_t`) and one moving `[128, 512]` tile (from
/// `rhs`) copied to SBUF, then 2,048 `nc_matmul`s on them into PSUM. `reduced`: four sections
/// of 512 matmuls with M = 32 (the stationary's first 32 columns), N = 64 (the moving's first
/// 64 columns), K = 32 (the first 32 partitions of both) and the full tiles, each into its own
/// PSUM tensor; otherwise 2,048 full `128 x 128 x 512` matmuls. The results stay in PSUM (the
/// profiled kernels time the matmuls only).
#[nki_kernel(nki = "0.7")]
pub fn te_tile_sizes(lhs_t: &Hbm<bf16>, rhs: &Hbm<bf16>, reduced: bool) {
    let stat = nl::ndarray(&[TILE_K, TILE_M], DType::BF16, nl::sbuf);
    let mov = nl::ndarray(&[TILE_K, TILE_N], DType::BF16, nl::sbuf);
    nisa::dma_copy(&stat, lhs_t.slice((0..TILE_K, 0..TILE_M)), None);
    nisa::dma_copy(&mov, rhs.slice((0..TILE_K, 0..TILE_N)), None);
    if !reduced {
        let out = nl::ndarray(&[TILE_M, TILE_N], DType::F32, nl::psum);
        for _ in nl::affine_range(2048) {
            nisa::nc_matmul(&out, &stat, &mov, None);
        }
        return;
    }
    let out1 = nl::ndarray(&[32, TILE_N], DType::F32, nl::psum);
    for _ in nl::affine_range(512) {
        nisa::nc_matmul(&out1, stat.slice((.., 0..32)), &mov, None);
    }
    let out2 = nl::ndarray(&[TILE_M, 64], DType::F32, nl::psum);
    for _ in nl::affine_range(512) {
        nisa::nc_matmul(&out2, &stat, mov.slice((.., 0..64)), None);
    }
    let out3 = nl::ndarray(&[TILE_M, TILE_N], DType::F32, nl::psum);
    for _ in nl::affine_range(512) {
        nisa::nc_matmul(&out3, stat.slice((0..32, ..)), mov.slice((0..32, ..)), None);
    }
    let out4 = nl::ndarray(&[TILE_M, TILE_N], DType::F32, nl::psum);
    for _ in nl::affine_range(512) {
        nisa::nc_matmul(&out4, &stat, &mov, None);
    }
}

/// The DGE modes §6c's kernel spreads its transfers over, a quarter of the tiles each: none,
/// software, hardware and the compiler's choice.
pub const DGE_MODES: [DgeMode; 4] = [
    DgeMode::None,
    DgeMode::Swdge,
    DgeMode::Hwdge,
    DgeMode::Unknown,
];

/// §6c: `out = input` (`[128, F]` bf16, F a multiple of 16 `tile_cols`) through SBUF in 16
/// tiles of `[128, tile_cols]`: each tile is copied in and out with `dma_copy`, the tiles of
/// each quarter in one of the [`DGE_MODES`]. A tile row is one descriptor of
/// `2 tile_cols` bytes (1 KiB for 512 columns, 4 KiB for 2,048).
#[nki_kernel(nki = "0.7")]
pub fn dma_descriptors(input: &Hbm<bf16>, out: &mut Hbm<bf16>, tile_cols: usize) {
    let cols = input.shape()[1];
    require(
        "dma_descriptors",
        input.shape()[0] == 128 && cols == 16 * tile_cols,
        || {
            format!(
                "expected input[128, 16 x {tile_cols}], got {:?}",
                input.shape()
            )
        },
    );
    for t in nl::affine_range(16) {
        let c = t * tile_cols..(t + 1) * tile_cols;
        let opts = DmaOpts::new().dge_mode(DGE_MODES[t / 4]);
        let tile = nl::ndarray(&[128, tile_cols], DType::BF16, nl::sbuf);
        nisa::dma_copy(&tile, input.slice((.., c.clone())), opts);
        nisa::dma_copy(out.slice((.., c)), &tile, opts);
    }
}
