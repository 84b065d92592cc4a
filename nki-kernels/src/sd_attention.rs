//! Fused self-attention for Stable Diffusion's small head size (nki-samples
//! `fused_self_attn_for_SD_small_head_size`, the `sd_attention` tutorial):
//! `out = softmax(scale * q @ k^T) @ v` for `q`, `k`, `v[S, d]` (`d <= 128`), softmax along
//! the key axis. Two versions:
//!
//! - [`sd_attention_v1`](fn@sd_attention_v1): the direct form. For each 128-query tile it
//!   loads `q^T`, `k^T` and all of `v` again, builds the `[128, S]` score tile, normalises the
//!   whole probability tile (`S` multiplies per row), transposes it in `[128, 128]` blocks and
//!   multiplies by `v`.
//! - [`sd_attention_v2`](fn@sd_attention_v2): the fused form. `k^T` and the `v` tiles are
//!   loaded once for all query tiles; the exponentials come with their row sums from one
//!   ScalarE `activation_reduce`, and the division by the row sum is deferred to the `[128, d]`
//!   output (`d` multiplies per row instead of `S`).
//!
//! Tiling (both): queries go to partitions 128 at a time; `q^T[d, 128]` is the stationary
//! operand of `q k^T`, computed in `[128, 512]` PSUM banks against `k^T[d, 512]` slices; the
//! probabilities are transposed on TensorE into `[128 keys, 128 queries]` blocks, the
//! stationary operand of `p @ v`, which accumulates over the `S / 128` key tiles in one
//! `[128, d]` PSUM bank.
//!
//! [`sd_attention_v1_07`](fn@sd_attention_v1_07) and [`sd_attention_v2_07`](fn@sd_attention_v2_07)
//! are their NKI 0.7 twins: the transposed loads are `nisa::dma_transpose`, the `v` tiles a list
//! of tensors, every `nisa` instruction writes into a destination given first, and the output
//! is returned.
//!
//! Bottleneck (modelled, `sd_attention` example, `[4096, 64]` fp32): v1 is DMA-bound on trn1
//! (98 % busy, 1.68 ms: it re-reads `k` and `v` for each of the 32 query tiles, the `k^T` load
//! an element-wise DMA transpose); v2 reads them once and is bounded by TensorE (44 % busy;
//! fp32 matmuls at a quarter rate, and the 32 transposes per query tile cost as much as the
//! products) with ScalarE's exponentials and the dependencies between them: 1.19 ms on trn1
//! (1.41x faster), 1.17 ms on trn2 (1.24x).

use crate::checks::{expect_rank, expect_shape, require};
use nki_core::nl::BlockTile;
use nki_core::prelude::*;
// The Beta-1 instruction forms (allocating, `_into` twins): the seeds' dialect.
use nki_core::nisa::classic as nisa;

/// The softmax scale of the SD tutorial (`1 / sqrt(64)`).
pub const SD_SCALE: f32 = 0.125;

const PMAX: usize = nl::tile_size::PMAX;
const BANK: usize = nl::tile_size::GEMM_MOVING_FMAX;

/// Checks `q`, `k`, `v`, `out` (all `[S, d]`, `S` a multiple of 128, `d <= 128`); returns
/// `(S, d)`.
#[track_caller]
fn dims(op: &'static str, [q, k, v, out]: [&[usize]; 4]) -> (usize, usize) {
    let s = expect_rank(op, "q", q, 2);
    for (what, shape) in [("k", k), ("v", v), ("out", out)] {
        expect_shape(op, what, shape, s);
    }
    let (seq, d) = (s[0], s[1]);
    require(op, seq % PMAX == 0 && seq > 0 && d <= PMAX && d > 0, || {
        format!("q{s:?}: the sequence length must be a positive multiple of 128 and d at most 128")
    });
    (seq, d)
}

/// `scale * q_t^T @ k_t` for one query tile into a `[128, S]` SBUF tile, one `[128, 512]`
/// PSUM bank at a time.
#[track_caller]
fn scores(q_t: &Tile, k_t: &Tile, seq: usize, scale: f32) -> Tile {
    let s = nl::ndarray(&[q_t.shape()[1], seq], DType::F32, nl::SBUF);
    for c in nl::affine_range(seq.div_ceil(BANK)) {
        let cols = nl::tile_range(c, BANK, seq);
        let ps = nisa::nc_matmul(q_t, k_t.slice((.., cols.clone())));
        // ScalarE evacuates PSUM straight into `s[:, cols]`, applying the scale.
        let args = nisa::ActivationOpts::new().scale(scale);
        nisa::activation_into(s.slice((.., cols)), nl::ActFn::Copy, &ps, args);
    }
    s
}

/// `p @ v` for one query tile: `p[128, S]` is transposed block by block on TensorE and each
/// `[128 keys, 128 queries]` block multiplies its `v` tile, accumulating in one PSUM bank.
#[track_caller]
fn probs_times_v(p: &Tile, v_tiles: &BlockTile, d: usize) -> Tile {
    let acc = nl::ndarray(&[p.shape()[0], d], DType::F32, nl::PSUM);
    for (j, v_j) in v_tiles.iter().enumerate() {
        let p_t = nisa::nc_transpose(
            p.slice((.., j * PMAX..(j + 1) * PMAX)),
            nisa::Engine::Tensor,
        );
        let p_t = nl::copy(&p_t, None);
        nisa::nc_matmul_acc(&acc, &p_t, v_j);
    }
    acc
}

/// Loads the `S / 128` key tiles of `v[S, d]` (fp32) into one
/// `[S / 128, par_dim(128), d]` block tile, one DMA per block.
#[track_caller]
pub(crate) fn load_v_tiles(v: &HbmView) -> BlockTile {
    let (seq, d) = (v.shape()[0], v.shape()[1]);
    let tiles = nl::ndarray_blocks(seq / PMAX, &[PMAX, d], DType::F32, nl::SBUF);
    for j in nl::affine_range(seq / PMAX) {
        nisa::dma_copy(tiles.block(j), v.slice((j * PMAX..(j + 1) * PMAX, ..)));
    }
    tiles
}

/// Attention v1 (direct): `out = softmax(scale * q @ k^T) @ v`, one instance (grid `[1]`).
#[nki_kernel]
pub fn sd_attention_v1<T: Element>(
    q: &Hbm<T>,
    k: &Hbm<T>,
    v: &Hbm<T>,
    out: &mut Hbm<T>,
    scale: f32,
) {
    let (seq, d) = dims(
        "sd_attention_v1",
        [q.shape(), k.shape(), v.shape(), out.shape()],
    );
    for i in nl::affine_range(seq / PMAX) {
        let rows = i * PMAX..(i + 1) * PMAX;
        let q_t = nl::load_transpose2d(q.slice((rows.clone(), ..)));
        let k_t = nl::load_transpose2d(k.view());
        let v_tiles = load_v_tiles(&v.view());
        let s = scores(&q_t, &k_t, seq, scale);
        let p = nl::softmax(&s, 1);
        drop(s);
        let acc = probs_times_v(&p, &v_tiles, d);
        let o = nl::copy(&acc, Some(out.dtype()));
        nl::store(out.slice((rows, ..)), &o);
    }
}

/// Attention v2 (fused): `out = softmax(scale * q @ k^T) @ v`, one instance (grid `[1]`).
#[nki_kernel]
pub fn sd_attention_v2<T: Element>(
    q: &Hbm<T>,
    k: &Hbm<T>,
    v: &Hbm<T>,
    out: &mut Hbm<T>,
    scale: f32,
) {
    let (seq, d) = dims(
        "sd_attention_v2",
        [q.shape(), k.shape(), v.shape(), out.shape()],
    );
    let k_t = nl::load_transpose2d(k.view());
    let v_tiles = load_v_tiles(&v.view());
    for i in nl::affine_range(seq / PMAX) {
        let rows = i * PMAX..(i + 1) * PMAX;
        let q_t = nl::load_transpose2d(q.slice((rows.clone(), ..)));
        let s = scores(&q_t, &k_t, seq, scale);
        let neg_max = nisa::tensor_reduce(nl::AluOp::Maximum, &s, &[1], true, true, None);
        let (e, sum) = nisa::activation_reduce(
            nl::ActFn::Exp,
            &s,
            nisa::ActivationOpts::new().bias(&neg_max),
        );
        drop(s);
        let inv = nisa::reciprocal(&sum, None);
        let acc = probs_times_v(&e, &v_tiles, d);
        let o = nisa::tensor_scalar(
            &acc,
            nl::AluOp::Multiply,
            &inv,
            nisa::TensorScalarOpts::new().dtype(out.dtype()),
        );
        nl::store(out.slice((rows, ..)), &o);
    }
}

/// `src[R, C]` transposed into a new `[C, R]` SBUF tensor by one `nisa::dma_transpose`.
#[track_caller]
fn transposed_07(src: HbmView) -> Tensor {
    let (r, c) = (src.shape()[0], src.shape()[1]);
    let t = nl::ndarray(&[c, r], src.dtype(), nl::sbuf);
    nki_core::nisa::dma_transpose(&t, src, &[1, 0], None);
    t
}

/// The `S / 128` key tiles of `v[S, d]` as a list of fp32 `[128, d]` tensors, one DMA each.
#[track_caller]
fn v_tiles_07<T: Element>(v: &Hbm<T>) -> Vec<Tensor> {
    let (seq, d) = (v.shape()[0], v.shape()[1]);
    nl::affine_range(seq / PMAX)
        .map(|j| {
            let t = nl::ndarray(&[PMAX, d], DType::F32, nl::sbuf);
            nki_core::nisa::dma_copy(&t, v.slice((j * PMAX..(j + 1) * PMAX, ..)), None);
            t
        })
        .collect()
}

/// [`scores`] in NKI 0.7's form: `scale * q_t^T @ k_t` into a `[128, S]` SBUF tensor.
#[track_caller]
fn scores_07(q_t: &Tensor, k_t: &Tensor, seq: usize, scale: f32) -> Tensor {
    use nki_core::nisa;
    let s = nl::ndarray(&[q_t.shape()[1], seq], DType::F32, nl::sbuf);
    for c in nl::affine_range(seq.div_ceil(BANK)) {
        let cols = nl::tile_range(c, BANK, seq);
        let ps = nl::ndarray(&[q_t.shape()[1], cols.len()], DType::F32, nl::psum);
        nisa::nc_matmul(&ps, q_t, k_t.slice((.., cols.clone())), None);
        // ScalarE evacuates PSUM straight into `s[:, cols]`, applying the scale.
        let args = nisa::ActivationOpts::new().scale(scale);
        nisa::activation(s.slice((.., cols)), nl::ActFn::Copy, &ps, args);
    }
    s
}

/// [`probs_times_v`] in NKI 0.7's form: `p @ v` for one query tile into a PSUM tensor.
#[track_caller]
fn probs_times_v_07<'p>(p: impl Into<TileRef<'p>>, v_tiles: &[Tensor], d: usize) -> Tensor {
    use nki_core::nisa;
    let p: TileRef = p.into();
    let acc = nl::ndarray(&[p.shape()[0], d], DType::F32, nl::psum);
    for (j, v_j) in v_tiles.iter().enumerate() {
        let p_ps = nl::ndarray(&[PMAX, p.shape()[0]], DType::F32, nl::psum);
        nisa::nc_transpose(&p_ps, p.slice((.., j * PMAX..(j + 1) * PMAX)), None);
        // nl.copy: out of PSUM on the engine the compiler picks (ScalarE).
        let p_t = nl::copy(&p_ps, None);
        nisa::nc_matmul(&acc, &p_t, v_j, None);
    }
    acc
}

/// The NKI 0.7 twin of [`sd_attention_v1`](fn@sd_attention_v1): the direct form, returned, on
/// one core (launch it on `[1]`). It computes the same values as the Beta-1 kernel.
#[nki_kernel(nki = "0.7")]
pub fn sd_attention_v1_07<T: Element>(q: &Hbm<T>, k: &Hbm<T>, v: &Hbm<T>, scale: f32) -> Hbm<T> {
    let (qs, ks, vs) = (q.shape(), k.shape(), v.shape());
    let (seq, d) = dims("sd_attention_v1_07", [qs, ks, vs, qs]);
    let out = nl::ndarray(qs, q.dtype(), nl::shared_hbm);
    for i in nl::affine_range(seq / PMAX) {
        let rows = i * PMAX..(i + 1) * PMAX;
        let q_t = transposed_07(q.slice((rows.clone(), ..)));
        let k_t = transposed_07(k.view());
        let v_tiles = v_tiles_07(v);
        let s = scores_07(&q_t, &k_t, seq, scale);
        let p = nl::softmax(&s, 1);
        drop(s);
        let acc = probs_times_v_07(&p, &v_tiles, d);
        let o = nl::copy(&acc, Some(q.dtype()));
        nki_core::nisa::dma_copy(out.slice((rows, ..)), &o, None);
    }
    out
}

/// The NKI 0.7 twin of [`sd_attention_v2`](fn@sd_attention_v2): the fused form, returned, on
/// one core (launch it on `[1]`). It computes the same values as the Beta-1 kernel.
#[nki_kernel(nki = "0.7")]
pub fn sd_attention_v2_07<T: Element>(q: &Hbm<T>, k: &Hbm<T>, v: &Hbm<T>, scale: f32) -> Hbm<T> {
    use nki_core::nisa;
    let (qs, ks, vs) = (q.shape(), k.shape(), v.shape());
    let (seq, d) = dims("sd_attention_v2_07", [qs, ks, vs, qs]);
    let out = nl::ndarray(qs, q.dtype(), nl::shared_hbm);
    let k_t = transposed_07(k.view());
    let v_tiles = v_tiles_07(v);
    for i in nl::affine_range(seq / PMAX) {
        let rows = i * PMAX..(i + 1) * PMAX;
        let q_t = transposed_07(q.slice((rows.clone(), ..)));
        let s = scores_07(&q_t, &k_t, seq, scale);
        let neg_max = nl::ndarray(&[PMAX, 1], DType::F32, nl::sbuf);
        let negate = nisa::ReduceOpts::new().negate();
        nisa::tensor_reduce(&neg_max, nl::AluOp::Maximum, &s, &[1], negate);
        let (e, sum) = (
            nl::ndarray(&[PMAX, seq], DType::F32, nl::sbuf),
            nl::ndarray(&[PMAX, 1], DType::F32, nl::sbuf),
        );
        let bias = nisa::ActivationOpts::new().bias(&neg_max);
        nisa::activation_reduce(&e, nl::ActFn::Exp, &s, nl::AluOp::Add, &sum, bias);
        drop(s);
        let inv = nl::ndarray(&[PMAX, 1], DType::F32, nl::sbuf);
        nisa::reciprocal(&inv, &sum, None);
        let acc = probs_times_v_07(&e, &v_tiles, d);
        let o = nl::ndarray(&[PMAX, d], q.dtype(), nl::sbuf);
        nisa::tensor_scalar(&o, &acc, nl::AluOp::Multiply, &inv, None);
        nisa::dma_copy(out.slice((rows, ..)), &o, None);
    }
    out
}
