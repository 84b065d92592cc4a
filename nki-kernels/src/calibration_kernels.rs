//! The small kernels behind the public timing measurements of shared/reference/calibration.md
//! §2 and §3, written as their sources write them (the Stanford CS149 Trainium assignments'
//! `part1/kernels.py` and the NKI performance guide's micro-benchmarks). They exist to be
//! modelled (`estimate`) against the published figures by the `calibration` example and the
//! calibration tests, but each also computes its result and is checked in the tests.
//!
//! Reshapes are free in NKI (`a_vec.reshape(...)` is a view of the same HBM bytes); here the
//! caller hands the kernel the reshaped tensor, which holds the same bytes in the same order.

use nki_core::prelude::*;
// The Beta-1 instruction forms (allocating, `_into` twins): the seeds' dialect.
use nki_core::nisa::classic as nisa;

/// Partitions of a full tile (`nl.tile_size.pmax`).
const PMAX: usize = nl::tile_size::PMAX;

/// `out = a + b` for vectors given as `[n, 1]` columns, `row_chunk` rows at a time: each
/// `affine_range` iteration loads a `(row_chunk, 1)` tile of each input (`nl.load`), adds them
/// (`nl.add`) and stores the sum (`nl.store`): three DMAs per iteration (CS149 fall 2024
/// `vector_add_tiled`). `row_chunk` must divide `n` and be at most 128.
#[nki_kernel]
pub fn vector_add_tiled(a: &Hbm<f32>, b: &Hbm<f32>, out: &mut Hbm<f32>, row_chunk: usize) {
    let n = a.shape()[0];
    for m in nl::affine_range(n / row_chunk.max(1)) {
        let rows = m * row_chunk..(m + 1) * row_chunk;
        let a_tile = nl::load(a.slice(rows.clone()));
        let b_tile = nl::load(b.slice(rows.clone()));
        let res = nl::add(&a_tile, &b_tile);
        nl::store(out.slice(rows), &res);
    }
}

/// `out = a + b` for vectors reshaped to `[n / (128 * free_dim), 128, free_dim]`: one
/// `[128, free_dim]` tile of each input per `affine_range` iteration, loaded with `nl.load`,
/// added with `nl.add` and stored with `nl.store` (CS149 fall 2024 `vector_add_stream`, the trn1
/// rows of calibration §3a).
#[nki_kernel]
pub fn vector_add_stream(a: &Hbm<f32>, b: &Hbm<f32>, out: &mut Hbm<f32>) {
    for m in nl::affine_range(a.shape()[0]) {
        let a_tile = nl::load(a.slice(m));
        let b_tile = nl::load(b.slice(m));
        let res = nl::add(&a_tile, &b_tile);
        nl::store(out.slice(m), &res);
    }
}

/// `out = a + b` for vectors reshaped to `[128, n / 128]`, streamed `free_dim` columns at a
/// time: `nisa.dma_copy` of a `[128, free_dim]` column block of each input, `nisa.tensor_tensor`
/// add, `nisa.dma_copy` back (CS149 2025 `vector_add_stream`, the trn2 rows of calibration §3b).
/// `free_dim` must divide `n / 128`.
#[nki_kernel]
pub fn vector_add_stream_dma(a: &Hbm<f32>, b: &Hbm<f32>, out: &mut Hbm<f32>, free_dim: usize) {
    let cols = a.shape()[1];
    for m in nl::affine_range(cols / free_dim.max(1)) {
        let c = m * free_dim..(m + 1) * free_dim;
        let a_tile = nl::ndarray(&[PMAX, free_dim], DType::F32, MemKind::Sbuf);
        let b_tile = nl::ndarray(&[PMAX, free_dim], DType::F32, MemKind::Sbuf);
        nisa::dma_copy(&a_tile, a.slice((.., c.clone())));
        nisa::dma_copy(&b_tile, b.slice((.., c.clone())));
        let res = nisa::tensor_tensor(&a_tile, &b_tile, nisa::AluOp::Add, None);
        nisa::dma_copy(out.slice((.., c)), &res);
    }
}

/// `out = inᵀ` for a square fp32 matrix whose side is a multiple of 128, one `[128, 128]` tile
/// at a time: `nisa.dma_copy` in, `nisa.nc_transpose` on TensorE into PSUM, `nl.copy` PSUM ->
/// SBUF, `nisa.dma_copy` out to the transposed place (the 1024 x 1024 transpose of
/// calibration §3b).
#[nki_kernel]
pub fn transpose_tiles(input: &Hbm<f32>, out: &mut Hbm<f32>) {
    let tiles = input.shape()[0] / PMAX;
    for i in nl::affine_range(tiles) {
        for j in nl::affine_range(tiles) {
            let (r, c) = (i * PMAX..(i + 1) * PMAX, j * PMAX..(j + 1) * PMAX);
            let tile = nl::ndarray(&[PMAX, PMAX], DType::F32, MemKind::Sbuf);
            nisa::dma_copy(&tile, input.slice((r.clone(), c.clone())));
            let t_psum = nisa::nc_transpose(&tile, nisa::Engine::Tensor);
            let t_sbuf = nl::copy(&t_psum, None);
            nisa::dma_copy(out.slice((c, r)), &t_sbuf);
        }
    }
}

/// `links` back-to-back ScalarE activations (`exp`), each on the previous one's result, on a
/// `[P, F]` tile loaded from `a`; the last result is stored to `out` (the dependent-activation
/// micro-benchmark of calibration §2).
#[nki_kernel]
pub fn activation_chain(a: &Hbm<f32>, out: &mut Hbm<f32>, links: usize) {
    let mut x = nl::load(a);
    for _ in 0..links {
        x = nisa::activation(nisa::ActFn::Exp, &x, nisa::ActivationOpts::new());
    }
    nl::store(out, &x);
}

/// One `nl.load` of all of `a` into SBUF (the single-DMA micro-benchmarks of calibration §2).
#[nki_kernel]
pub fn one_load(a: &Hbm<bf16>) {
    let _tile = nl::load(a);
}
