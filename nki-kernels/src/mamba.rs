//! The NKI fused Mamba tutorial: the selective scan of a Mamba layer, two versions.
//!
//! For `delta`, `u[B, C, L]`, `A[C, N]` (negative) and `Bm`, `Cm[B, N, L]`:
//! `dA = exp(delta * A[c, n])`, `dBu = delta * u * Bm[b, n]`, the scan
//! `h[t] = dA[t] * h[t-1] + dBu[t]` along `L` (from `h[-1] = 0`), and
//! `y[b, c, t] = sum_n Cm[b, n, t] * h[b, c, n, t]`.
//!
//! Tiling (both): channels go to partitions, 128 per tile; the sequence is the free dimension
//! and the scan runs along it on VectorE (`tensor_tensor_scan`, multiply then add).
//! `exp(delta * A)` is one ScalarE `activation` with `A`'s column as the per-partition scale. `Bm[b, n]`
//! and `Cm[b, n]` are `[1, L]` rows, each read into every partition by one DMA through a
//! broadcast view. Per-state contributions are added into the accumulator in place.
//!
//! - [`mamba_v1`](fn@mamba_v1): loops batch, state, channel tile; every step reloads its
//!   `delta` and `u` tiles and recomputes `delta * u`, and the per-channel-tile results
//!   accumulate in SBUF across the state loop.
//! - [`mamba_v2`](fn@mamba_v2): loops batch, channel tile, state; `delta`, `u` and
//!   `delta * u` are loaded / computed once per channel tile and reused by all `N` states.
//!
//! [`mamba_v1_07`](fn@mamba_v1_07) and [`mamba_v2_07`](fn@mamba_v2_07) are their NKI 0.7
//! twins: the same instructions on tensors from `nl::ndarray` (v1's accumulators a list of
//! tensors), data moved by `nisa::dma_copy`, every instruction writing into a destination
//! given first, the output returned.
//!
//! Bottleneck (modelled, `fused_mamba` example, `[1, 256, 512, 16]` and Autocomp's
//! `L = 2048`): on trn1 DMA (99-100 % busy): the broadcast rows of `Bm` and `Cm` reach every
//! partition (`128 * L` elements per row), and v1 adds the `delta`/`u` reloads, so v2 is
//! 1.85x faster. On trn2, with faster DMA, VectorE bounds both (85-95 %): per (channel tile,
//! state) the scan, the `dBu` and `Cm * h` products and the accumulation are four `L`-long
//! passes against one ScalarE exponential; v1's extra `delta * u` pass makes v2 1.22x faster.

use crate::checks::{expect_rank, expect_shape};
use nki_core::prelude::*;
// The Beta-1 instruction forms (allocating, `_into` twins): the seeds' dialect.
use nki_core::nisa::classic as nisa;

const PMAX: usize = nl::tile_size::PMAX;

/// Checks the operands; returns `(batch, channels, state, length)`.
#[track_caller]
fn dims(
    op: &'static str,
    [delta, u, a, bm, cm, out]: [&[usize]; 6],
) -> (usize, usize, usize, usize) {
    let s = expect_rank(op, "delta", delta, 3);
    let (b, c, l) = (s[0], s[1], s[2]);
    let n = expect_rank(op, "A", a, 2)[1];
    expect_shape(op, "u", u, s);
    expect_shape(op, "A", a, &[c, n]);
    expect_shape(op, "B", bm, &[b, n, l]);
    expect_shape(op, "C", cm, &[b, n, l]);
    expect_shape(op, "out", out, s);
    (b, c, n, l)
}

/// `Bm[b, n, :]` broadcast to `rows` partitions (fp32).
#[track_caller]
fn broadcast_row<T: Element>(m: &Hbm<T>, b: usize, n: usize, rows: usize) -> Tile {
    // One DMA reads the row into every partition (a partition-stride-0 view).
    nl::load_as(m.slice((b, n..n + 1, ..)).broadcast(0, rows), DType::F32)
}

/// One state's contribution for one channel tile: `Cm * scan(exp(delta * A), delta_u * Bm)`.
#[track_caller]
fn state_term(delta: &Tile, delta_u: &Tile, a_col: TileRef, b_row: &Tile, c_row: &Tile) -> Tile {
    let d_a = nisa::activation(
        nl::ActFn::Exp,
        delta,
        nisa::ActivationOpts::new().scale(a_col),
    );
    let d_bu = nisa::tensor_tensor(delta_u, b_row, nl::AluOp::Multiply, None);
    let h = nisa::tensor_tensor_scan(
        &d_a,
        &d_bu,
        0.0,
        nl::AluOp::Multiply,
        nl::AluOp::Add,
        Default::default(),
    );
    nisa::tensor_tensor(c_row, &h, nl::AluOp::Multiply, None)
}

/// Mamba selective scan v1 (state loop outside the channel tiles), one instance (grid `[1]`).
#[nki_kernel]
pub fn mamba_v1<T: Element>(
    delta: &Hbm<T>,
    u: &Hbm<T>,
    a: &Hbm<T>,
    bm: &Hbm<T>,
    cm: &Hbm<T>,
    out: &mut Hbm<T>,
) {
    let (batch, chans, states, len) = dims(
        "mamba_v1",
        [
            delta.shape(),
            u.shape(),
            a.shape(),
            bm.shape(),
            cm.shape(),
            out.shape(),
        ],
    );
    let tiles = nl::num_tiles(chans, PMAX);
    for b in nl::affine_range(batch) {
        // The accumulators of all channel tiles: one `[tiles, par_dim(128), L]` block tile.
        let acc = nl::ndarray_blocks(tiles, &[PMAX.min(chans), len], DType::F32, nl::SBUF);
        for t in nl::affine_range(tiles) {
            nisa::memset_into(acc.block(t), 0.0);
        }
        for n in nl::sequential_range(states) {
            for t in nl::sequential_range(tiles) {
                let ch = nl::tile_range(t, PMAX, chans);
                let rows = ch.len();
                let d_t = nl::load_as(delta.slice((b, ch.clone(), ..)), DType::F32);
                let u_t = nl::load_as(u.slice((b, ch.clone(), ..)), DType::F32);
                let a_col = nl::load_as(a.slice((ch.clone(), n..n + 1)), DType::F32);
                let b_row = broadcast_row(bm, b, n, rows);
                let c_row = broadcast_row(cm, b, n, rows);
                let d_u = nisa::tensor_tensor(&d_t, &u_t, nl::AluOp::Multiply, None);
                let term = state_term(&d_t, &d_u, a_col.view(), &b_row, &c_row);
                let acc_t = acc.block(t).slice((0..rows, ..));
                nisa::tensor_tensor_into(acc_t, acc_t, &term, nl::AluOp::Add);
            }
        }
        for t in nl::affine_range(tiles) {
            let ch = nl::tile_range(t, PMAX, chans);
            let rows = ch.len();
            nl::store(out.slice((b, ch, ..)), acc.block(t).slice((0..rows, ..)));
        }
    }
}

/// Mamba selective scan v2 (channel tile outside the state loop, `delta`/`u` reused), one
/// instance (grid `[1]`).
#[nki_kernel]
pub fn mamba_v2<T: Element>(
    delta: &Hbm<T>,
    u: &Hbm<T>,
    a: &Hbm<T>,
    bm: &Hbm<T>,
    cm: &Hbm<T>,
    out: &mut Hbm<T>,
) {
    let (batch, chans, states, len) = dims(
        "mamba_v2",
        [
            delta.shape(),
            u.shape(),
            a.shape(),
            bm.shape(),
            cm.shape(),
            out.shape(),
        ],
    );
    for b in nl::affine_range(batch) {
        for t in nl::affine_range(nl::num_tiles(chans, PMAX)) {
            let ch = nl::tile_range(t, PMAX, chans);
            let rows = ch.len();
            let d_t = nl::load_as(delta.slice((b, ch.clone(), ..)), DType::F32);
            let u_t = nl::load_as(u.slice((b, ch.clone(), ..)), DType::F32);
            let a_t = nl::load_as(a.slice((ch.clone(), ..)), DType::F32);
            let d_u = nisa::tensor_tensor(&d_t, &u_t, nl::AluOp::Multiply, None);
            let acc = nisa::memset(&[rows, len], 0.0, DType::F32, nisa::Engine::Vector);
            for n in nl::sequential_range(states) {
                let b_row = broadcast_row(bm, b, n, rows);
                let c_row = broadcast_row(cm, b, n, rows);
                let term = state_term(&d_t, &d_u, a_t.slice((.., n..n + 1)), &b_row, &c_row);
                nisa::tensor_tensor_into(&acc, &acc, &term, nl::AluOp::Add);
            }
            nl::store(out.slice((b, ch, ..)), &acc);
        }
    }
}

/// [`dims`] for a 0.7 twin, whose output has `delta`'s shape.
#[track_caller]
fn dims_07<T: Element>(op: &'static str, inputs: [&Hbm<T>; 5]) -> (usize, usize, usize, usize) {
    let [delta, u, a, bm, cm] = inputs.map(Hbm::shape);
    dims(op, [delta, u, a, bm, cm, delta])
}

/// An fp32 SBUF tensor holding `src` (a casting `dma_copy`).
#[track_caller]
fn load_07(src: HbmView) -> Tensor {
    let t = nl::ndarray(src.shape(), DType::F32, nl::sbuf);
    nki_core::nisa::dma_copy(&t, src, None);
    t
}

/// [`broadcast_row`] in NKI 0.7's form: one DMA reading the row into every partition.
#[track_caller]
fn broadcast_row_07<T: Element>(m: &Hbm<T>, b: usize, n: usize, rows: usize) -> Tensor {
    load_07(m.slice((b, n..n + 1, ..)).broadcast(0, rows))
}

/// [`state_term`] in NKI 0.7's form, each instruction into a new tensor given first.
#[track_caller]
fn state_term_07<'a>(
    delta: &Tensor,
    delta_u: &Tensor,
    a_col: impl Into<nki_core::nisa::Operand<'a>>,
    b_row: &Tensor,
    c_row: &Tensor,
) -> Tensor {
    use nki_core::nisa;
    let new = || nl::ndarray(delta.shape(), DType::F32, nl::sbuf);
    let (d_a, d_bu, h, term) = (new(), new(), new(), new());
    let scale = nisa::ActivationOpts::new().scale(a_col);
    nisa::activation(&d_a, nl::ActFn::Exp, delta, scale);
    nisa::tensor_tensor(&d_bu, delta_u, b_row, nl::AluOp::Multiply, None);
    let (mul, add) = (nl::AluOp::Multiply, nl::AluOp::Add);
    nisa::tensor_tensor_scan(&h, &d_a, &d_bu, 0.0, mul, add, None);
    nisa::tensor_tensor(&term, c_row, &h, nl::AluOp::Multiply, None);
    term
}

/// The NKI 0.7 twin of [`mamba_v1`](fn@mamba_v1) (state loop outside the channel tiles),
/// returned, on one core (launch it on `[1]`). It computes the same values as the Beta-1
/// kernel.
#[nki_kernel(nki = "0.7")]
pub fn mamba_v1_07<T: Element>(
    delta: &Hbm<T>,
    u: &Hbm<T>,
    a: &Hbm<T>,
    bm: &Hbm<T>,
    cm: &Hbm<T>,
) -> Hbm<T> {
    use nki_core::nisa;
    let (batch, chans, states, len) = dims_07("mamba_v1_07", [delta, u, a, bm, cm]);
    let out = nl::ndarray(delta.shape(), delta.dtype(), nl::shared_hbm);
    let tiles = nl::num_tiles(chans, PMAX);
    for b in nl::affine_range(batch) {
        // The accumulators of all channel tiles: a list of `[128, L]` tensors.
        let acc: Vec<Tensor> = nl::affine_range(tiles)
            .map(|_| nl::ndarray(&[PMAX.min(chans), len], DType::F32, nl::sbuf))
            .collect();
        for acc_t in &acc {
            nisa::memset(acc_t, 0.0, None);
        }
        for n in nl::sequential_range(states) {
            for t in nl::sequential_range(tiles) {
                let ch = nl::tile_range(t, PMAX, chans);
                let rows = ch.len();
                let d_t = load_07(delta.slice((b, ch.clone(), ..)));
                let u_t = load_07(u.slice((b, ch.clone(), ..)));
                let a_col = load_07(a.slice((ch.clone(), n..n + 1)));
                let b_row = broadcast_row_07(bm, b, n, rows);
                let c_row = broadcast_row_07(cm, b, n, rows);
                let d_u = nl::ndarray(&[rows, len], DType::F32, nl::sbuf);
                nisa::tensor_tensor(&d_u, &d_t, &u_t, nl::AluOp::Multiply, None);
                let term = state_term_07(&d_t, &d_u, &a_col, &b_row, &c_row);
                let acc_t = acc[t].slice((0..rows, ..));
                nisa::tensor_tensor(&acc_t, &acc_t, &term, nl::AluOp::Add, None);
            }
        }
        for (t, acc_t) in acc.iter().enumerate() {
            let ch = nl::tile_range(t, PMAX, chans);
            let rows = ch.len();
            nisa::dma_copy(out.slice((b, ch, ..)), acc_t.slice((0..rows, ..)), None);
        }
    }
    out
}

/// The NKI 0.7 twin of [`mamba_v2`](fn@mamba_v2) (channel tile outside the state loop,
/// `delta`/`u` reused), returned, on one core (launch it on `[1]`). It computes the same values
/// as the Beta-1 kernel.
#[nki_kernel(nki = "0.7")]
pub fn mamba_v2_07<T: Element>(
    delta: &Hbm<T>,
    u: &Hbm<T>,
    a: &Hbm<T>,
    bm: &Hbm<T>,
    cm: &Hbm<T>,
) -> Hbm<T> {
    use nki_core::nisa;
    let (batch, chans, states, len) = dims_07("mamba_v2_07", [delta, u, a, bm, cm]);
    let out = nl::ndarray(delta.shape(), delta.dtype(), nl::shared_hbm);
    for b in nl::affine_range(batch) {
        for t in nl::affine_range(nl::num_tiles(chans, PMAX)) {
            let ch = nl::tile_range(t, PMAX, chans);
            let rows = ch.len();
            let d_t = load_07(delta.slice((b, ch.clone(), ..)));
            let u_t = load_07(u.slice((b, ch.clone(), ..)));
            let a_t = load_07(a.slice((ch.clone(), ..)));
            let d_u = nl::ndarray(&[rows, len], DType::F32, nl::sbuf);
            nisa::tensor_tensor(&d_u, &d_t, &u_t, nl::AluOp::Multiply, None);
            let acc = nl::ndarray(&[rows, len], DType::F32, nl::sbuf);
            nisa::memset(&acc, 0.0, nisa::Opts::new().engine(nisa::Engine::Vector));
            for n in nl::sequential_range(states) {
                let b_row = broadcast_row_07(bm, b, n, rows);
                let c_row = broadcast_row_07(cm, b, n, rows);
                let term = state_term_07(&d_t, &d_u, a_t.slice((.., n..n + 1)), &b_row, &c_row);
                nisa::tensor_tensor(&acc, &acc, &term, nl::AluOp::Add, None);
            }
            nisa::dma_copy(out.slice((b, ch, ..)), &acc, None);
        }
    }
    out
}
