//! NKIBench baselines (zhang677/AccelOpt `NKIBench/kernels/`) whose tiles exceed SBUF if all
//! stay live: shared/reference/calibration.md section 5 lists the profiler's HBM and spill
//! byte counters of their runs on trn1. Written after the compiler-emitted Beta-1 programs
//! (loops, tiles and instructions as there; ours in Rust), fp32 throughout.
//!
//! `mamba_M7168_C256_S16`'s NKIBench file is its source program, not a compiler-emitted one:
//! [`mamba_baseline`](fn@mamba_baseline) follows that source.
//!
//! What differs from the Python:
//! - A multi-dimensional SBUF tensor whose leading (block) indices all follow the loops
//!   becomes one tile per iteration of the loop that allocates it; a block of tiles the
//!   program reads as one buffer (the rhs block of [`matmul_baseline`](fn@matmul_baseline)) is one tile with the
//!   blocks side by side in every partition, as NKI lays them out.
//! - `nl.loop_reduce` (a running max or sum over loop iterations) is a copy in the first
//!   iteration and a `tensor_tensor` with the running value after.
//! - `nisa.nc_matmul(.., is_transpose=True)` against the identity is
//!   [`nisa::nc_matmul_transpose`]; `nl.copy` is a VectorE `tensor_copy`.

use crate::checks::{expect_rank, expect_shape, require};
use nki_core::nisa::classic as nisa;
use nki_core::prelude::*;
use nki_core::{with_compiler_stage, CompilerStage};

/// Partitions per tile (128).
const P: usize = nl::tile_size::PMAX;
/// Columns of one moving operand (512).
const FMAX: usize = nl::tile_size::GEMM_MOVING_FMAX;
/// Columns of an rhs block and rows of an M block (the baselines' 1024).
const BLOCK: usize = 2 * FMAX;

/// NKIBench `matmul_M4096_N12288_K5120` baseline: `out[M, N] = lhs[M, K] @ rhs[K, N]`. For
/// each block of 1024 columns of N the whole K column of rhs is loaded into one SBUF buffer;
/// for each M tile of 128 rows, lhs is loaded 1024 columns at a time and transposed on
/// TensorE (against `identity`, a `[128, 128]` identity in HBM) into lhsT tiles, then two
/// `[128, 512]` PSUM accumulators collect K / 128 matmuls each, are copied to SBUF and the
/// `[128, 1024]` result stored.
///
/// Needs M a multiple of 128, K and N of 1024.
#[nki_kernel]
pub fn matmul_baseline(lhs: &Hbm<f32>, rhs: &Hbm<f32>, identity: &Hbm<f32>, out: &mut Hbm<f32>) {
    let op = "matmul_baseline";
    let ls = expect_rank(op, "lhs", lhs.shape(), 2);
    let (m, k) = (ls[0], ls[1]);
    let n = expect_rank(op, "rhs", rhs.shape(), 2)[1];
    expect_shape(op, "rhs", rhs.shape(), &[k, n]);
    expect_shape(op, "identity", identity.shape(), &[P, P]);
    expect_shape(op, "out", out.shape(), &[m, n]);
    require(
        op,
        m.is_multiple_of(P) && k.is_multiple_of(BLOCK) && n.is_multiple_of(BLOCK),
        || format!("expected M = {m} a multiple of {P}, K = {k} and N = {n} multiples of {BLOCK}"),
    );
    let id = nl::load(identity.view());
    let (k_tiles, k_blocks) = (k / P, k / BLOCK);
    let per_block = BLOCK / P;
    for j in nl::affine_range(n / BLOCK) {
        let cols = j * BLOCK..(j + 1) * BLOCK;
        // The K column of rhs for this N block: K / 128 blocks of [128, 1024] in one buffer.
        let rhs_block = nl::ndarray(&[P, k_tiles * BLOCK], DType::F32, nl::SBUF);
        for t in nl::affine_range(k_tiles) {
            nisa::dma_copy(
                rhs_block.slice((.., t * BLOCK..(t + 1) * BLOCK)),
                rhs.slice((t * P..(t + 1) * P, cols.clone())),
            );
        }
        for i in nl::affine_range(m / P) {
            let rows = i * P..(i + 1) * P;
            // lhsT of this M tile: per K block, 8 transposed [128, 128] tiles side by side.
            let mut lhs_t = Vec::with_capacity(k_blocks);
            for kb in nl::affine_range(k_blocks) {
                let lhs_tile = nl::load(lhs.slice((rows.clone(), kb * BLOCK..(kb + 1) * BLOCK)));
                let lhs_t_tile = nl::ndarray(&[P, BLOCK], DType::F32, nl::SBUF);
                for t in nl::affine_range(per_block) {
                    let tr =
                        nisa::nc_matmul_transpose(lhs_tile.slice((.., t * P..(t + 1) * P)), &id);
                    nisa::tensor_copy_into(
                        lhs_t_tile.slice((.., t * P..(t + 1) * P)),
                        &tr,
                        nisa::Engine::Vector,
                    );
                }
                lhs_t.push(lhs_t_tile);
            }
            let result = nl::ndarray(&[P, BLOCK], DType::F32, nl::SBUF);
            for h in nl::affine_range(BLOCK / FMAX) {
                let acc = nl::ndarray(&[P, FMAX], DType::F32, nl::PSUM);
                for kb in nl::affine_range(k_blocks) {
                    for t in nl::affine_range(per_block) {
                        let c0 = (kb * per_block + t) * BLOCK + h * FMAX;
                        nisa::nc_matmul_acc(
                            &acc,
                            lhs_t[kb].slice((.., t * P..(t + 1) * P)),
                            rhs_block.slice((.., c0..c0 + FMAX)),
                        );
                    }
                }
                nisa::tensor_copy_into(
                    result.slice((.., h * FMAX..(h + 1) * FMAX)),
                    &acc,
                    nisa::Engine::Vector,
                );
            }
            nl::store(out.slice((rows, cols.clone())), &result);
        }
    }
}

/// Writes the running reduction `acc = op(acc, x)` of a loop, or `acc = x` in its first
/// iteration (NKI's `nl.loop_reduce`).
#[track_caller]
fn loop_reduce(acc: &Tile, x: &Tile, op: nl::AluOp, first: bool) {
    if first {
        nisa::tensor_copy_into(acc, x, nisa::Engine::Vector);
    } else {
        nisa::tensor_tensor_into(acc, acc, x, op);
    }
}

/// `exp(s + bias)` of one `[128, F]` score tile on ScalarE, its row sums added into the
/// running `sum` (`first`: the reduction loop's first iteration), as both softmax baselines
/// do.
fn exp_and_sum(s: &Tile, bias: &Tile, sum: &Tile, first: bool) -> Tile {
    let e = nisa::activation(nl::ActFn::Exp, s, nisa::ActivationOpts::new().bias(bias));
    let part = nisa::tensor_reduce(nl::AluOp::Add, &e, &[1], true, false, None);
    loop_reduce(sum, &part, nl::AluOp::Add, first);
    e
}

/// NKIBench `bmm_softmax_B16_K64_M4096_N4096` baseline: `out[b] = softmax(lhs[b] @ rhs[b])`
/// along N, for `lhs[B, M, K]` and `rhs[B, K, N]` with K <= 128. Per batch, a first pass
/// computes every `[128, 512]` score tile (lhs tiles transposed on TensorE against
/// `identity`, `[128, 128]` in HBM) and the running row maxima; a second pass exponentiates
/// the scores (bias: the negated maximum), sums them, and scales by the reciprocal before
/// storing 1024 columns at a time. The scores of a batch are kept between the passes: four
/// times N fp32 bytes per partition per M block of 128 rows, far beyond SBUF at N = 4096.
///
/// Needs M and N multiples of 1024.
#[nki_kernel]
pub fn bmm_softmax_baseline(
    lhs: &Hbm<f32>,
    rhs: &Hbm<f32>,
    identity: &Hbm<f32>,
    out: &mut Hbm<f32>,
) {
    let op = "bmm_softmax_baseline";
    let ls = expect_rank(op, "lhs", lhs.shape(), 3);
    let (b, m, k) = (ls[0], ls[1], ls[2]);
    let n = expect_rank(op, "rhs", rhs.shape(), 3)[2];
    expect_shape(op, "rhs", rhs.shape(), &[b, k, n]);
    expect_shape(op, "identity", identity.shape(), &[P, P]);
    expect_shape(op, "out", out.shape(), &[b, m, n]);
    require(
        op,
        k <= P && m.is_multiple_of(BLOCK) && n.is_multiple_of(BLOCK),
        || format!("expected K = {k} <= {P}, M = {m} and N = {n} multiples of {BLOCK}"),
    );
    let id = nl::load(identity.view());
    let (mb, nb, per_block, halves) = (m / BLOCK, n / BLOCK, BLOCK / P, BLOCK / FMAX);
    // Index of a score tile: (M block, M tile in it, N block, half of the N block).
    let at =
        |i2: usize, i4: usize, i1: usize, i5: usize| ((i2 * per_block + i4) * nb + i1) * 2 + i5;
    for bi in nl::affine_range(b) {
        let mut scores: Vec<Option<Tile>> =
            (0..mb * per_block * nb * halves).map(|_| None).collect();
        let row_max: Vec<Tile> = (0..mb * per_block)
            .map(|_| nl::ndarray(&[P, 1], DType::F32, nl::SBUF))
            .collect();
        for i1 in nl::affine_range(nb) {
            let rhs_tile = nl::load(rhs.slice((bi, .., i1 * BLOCK..(i1 + 1) * BLOCK)));
            for i2 in nl::affine_range(mb) {
                let lhs_t = nl::ndarray(&[k, BLOCK], DType::F32, nl::SBUF);
                for i3 in nl::affine_range(per_block) {
                    let r0 = i2 * BLOCK + i3 * P;
                    let lhs_tile = nl::load(lhs.slice((bi, r0..r0 + P, ..)));
                    let tr = nisa::nc_matmul_transpose(&lhs_tile, &id);
                    nisa::tensor_copy_into(
                        lhs_t.slice((.., i3 * P..(i3 + 1) * P)),
                        &tr,
                        nisa::Engine::Vector,
                    );
                }
                for i4 in nl::affine_range(per_block) {
                    for i5 in nl::affine_range(halves) {
                        let acc = nl::ndarray(&[P, FMAX], DType::F32, nl::PSUM);
                        nisa::nc_matmul_into(
                            &acc,
                            lhs_t.slice((.., i4 * P..(i4 + 1) * P)),
                            rhs_tile.slice((.., i5 * FMAX..(i5 + 1) * FMAX)),
                        );
                        let s = nisa::tensor_copy(&acc, None, nisa::Engine::Vector);
                        let mx =
                            nisa::tensor_reduce(nl::AluOp::Maximum, &s, &[1], true, false, None);
                        let first = i1 == 0 && i5 == 0;
                        loop_reduce(
                            &row_max[i2 * per_block + i4],
                            &mx,
                            nl::AluOp::Maximum,
                            first,
                        );
                        scores[at(i2, i4, i1, i5)] = Some(s);
                    }
                }
            }
        }
        for i6 in nl::affine_range(mb) {
            for i7 in nl::affine_range(per_block) {
                let neg_max = nisa::tensor_scalar(
                    &row_max[i6 * per_block + i7],
                    nl::AluOp::Maximum,
                    f32::MIN,
                    nisa::TensorScalarOpts::new().then(nl::AluOp::Multiply, -1.0f32),
                );
                let sum = nl::ndarray(&[P, 1], DType::F32, nl::SBUF);
                let mut exps = Vec::with_capacity(nb * halves);
                for i8 in nl::affine_range(nb) {
                    for i9 in nl::affine_range(halves) {
                        let s = scores[at(i6, i7, i8, i9)].take();
                        let Some(s) = s else { continue };
                        exps.push(exp_and_sum(&s, &neg_max, &sum, i8 == 0 && i9 == 0));
                    }
                }
                let inv = nisa::reciprocal(&sum, None);
                for i10 in nl::affine_range(nb) {
                    let probs = nl::ndarray(&[P, BLOCK], DType::F32, nl::SBUF);
                    for i11 in nl::affine_range(halves) {
                        nisa::tensor_scalar_into(
                            probs.slice((.., i11 * FMAX..(i11 + 1) * FMAX)),
                            &exps[i10 * halves + i11],
                            nl::AluOp::Multiply,
                            &inv,
                            nisa::TensorScalarOpts::new(),
                        );
                    }
                    let r0 = i6 * BLOCK + i7 * P;
                    nl::store(
                        out.slice((bi, r0..r0 + P, i10 * BLOCK..(i10 + 1) * BLOCK)),
                        &probs,
                    );
                }
            }
        }
    }
}

/// NKIBench `mamba_M7168_C256_S16` baseline (the source program, not a compiler-emitted one):
/// the selective scan over `delta`, `u` `[C, M]`, `a` `[C, S]`, `b`, `c` `[S, M]`. For each
/// state and each tile of 128 channels: `exp(delta * a[:, s])` on ScalarE, `delta * u *
/// b[s]` and the scan on VectorE, `c[s] * scan` added into the channel tile's `[128, M]`
/// accumulator, which stays in SBUF over the states. `b[s]` and `c[s]` are `[1, M]` rows
/// loaded once per step and broadcast across the partitions on chip (`nl.broadcast_to`).
///
/// Needs C a multiple of 128.
///
/// At the NKIBench problem on trn1 it runs through the modelled Beta-1 compiler
/// ([`CompilerStage::BETA1`]), as its source program does on hardware. The counters' HBM reads
/// decompose exactly into 32 `delta` tiles, only 2 `u` tiles (one per channel tile), the
/// `a`, `b` and `c` steps and the spill reloads: the compiler hoisted the loop-invariant
/// `delta * u` (and its `u` load) out of the state loop, which the stage's `hoist_compute`
/// does; the accumulators then no longer fit beside each step's temporaries, and one of them
/// lives in HBM (saved after every accumulation, re-loaded before the next).
#[nki_kernel]
pub fn mamba_baseline(
    delta: &Hbm<f32>,
    u: &Hbm<f32>,
    a: &Hbm<f32>,
    b: &Hbm<f32>,
    c: &Hbm<f32>,
    out: &mut Hbm<f32>,
) {
    let op = "mamba_baseline";
    let ds = expect_rank(op, "delta", delta.shape(), 2);
    let (chans, len) = (ds[0], ds[1]);
    let states = expect_rank(op, "a", a.shape(), 2)[1];
    expect_shape(op, "u", u.shape(), &[chans, len]);
    expect_shape(op, "a", a.shape(), &[chans, states]);
    expect_shape(op, "b", b.shape(), &[states, len]);
    expect_shape(op, "c", c.shape(), &[states, len]);
    expect_shape(op, "out", out.shape(), &[chans, len]);
    require(op, chans.is_multiple_of(P), || {
        format!("expected C = {chans} a multiple of {P}")
    });
    let tiles = chans / P;
    let acc: Vec<Tile> = (0..tiles)
        .map(|_| nl::zeros(&[P, len], DType::F32, nl::SBUF))
        .collect();
    for s in nl::affine_range(states) {
        for t in nl::affine_range(tiles) {
            let rows = t * P..(t + 1) * P;
            let delta_t = nl::load(delta.slice((rows.clone(), ..)));
            let a_col = nl::load(a.slice((rows.clone(), s..s + 1)));
            let delta_a = nisa::activation(
                nl::ActFn::Exp,
                &delta_t,
                nisa::ActivationOpts::new().scale(a_col.view()),
            );
            let u_t = nl::load(u.slice((rows, ..)));
            let b_row = nl::load(b.slice((s..s + 1, ..)));
            let delta_u = nisa::tensor_tensor(&delta_t, &u_t, nl::AluOp::Multiply, None);
            let b_all = nl::broadcast_to(&b_row, &[P, len]);
            let delta_bu = nisa::tensor_tensor(&delta_u, &b_all, nl::AluOp::Multiply, None);
            let scan = nisa::tensor_tensor_scan(
                &delta_a,
                &delta_bu,
                0.0,
                nl::AluOp::Multiply,
                nl::AluOp::Add,
                Default::default(),
            );
            let c_row = nl::load(c.slice((s..s + 1, ..)));
            let c_all = nl::broadcast_to(&c_row, &[P, len]);
            let scan_c = nisa::tensor_tensor(&scan, &c_all, nl::AluOp::Multiply, None);
            nisa::tensor_tensor_into(&acc[t], &acc[t], &scan_c, nl::AluOp::Add);
        }
    }
    for (t, acc_t) in acc.iter().enumerate() {
        nl::store(out.slice((t * P..(t + 1) * P, ..)), acc_t);
    }
}

/// NKIBench `gqa_full_B1_N4096_QH16_KH8_D128` baseline: grouped-query attention, `out[h] =
/// softmax(q_h k_g^T / sqrt(D)) v_g` for every query head `h` and its key/value head `g = h /
/// (QH / KH)`, with `q` `[N, QH * D]`, `k` and `v` `[N, KH * D]` (NKIBench's `[B = 1, N, heads,
/// D]`, the same bytes) and `out` `[QH, N, D]`; D = 128, two query heads per key/value head.
///
/// As the compiler-emitted program: every q tile and, per half of the keys, every k tile is
/// transposed on TensorE against `identity` (`[128, 128]` in HBM); for each half the scaled
/// `[128, 512]` score tiles of every head and query tile are computed and their row maxima
/// reduced, so all `QH * N * N` scores exist before the softmax (1 GiB at the NKIBench
/// problem, far beyond SBUF). `v` is then loaded whole; per head and query tile the
/// scores are exponentiated (bias: the negated maximum), summed, scaled by the reciprocal,
/// transposed and multiplied with `v` into a `[128, 128]` PSUM accumulator over the keys.
///
/// Needs N a multiple of 1024, QH a multiple of 8 and twice KH, D = 128.
#[nki_kernel]
pub fn gqa_baseline(
    q: &Hbm<f32>,
    k: &Hbm<f32>,
    v: &Hbm<f32>,
    identity: &Hbm<f32>,
    out: &mut Hbm<f32>,
) {
    let op = "gqa_baseline";
    let os = expect_rank(op, "out", out.shape(), 3);
    let (qh, n, d) = (os[0], os[1], os[2]);
    let kh = qh / 2;
    expect_shape(op, "q", q.shape(), &[n, qh * d]);
    expect_shape(op, "k", k.shape(), &[n, kh * d]);
    expect_shape(op, "v", v.shape(), &[n, kh * d]);
    expect_shape(op, "identity", identity.shape(), &[P, P]);
    require(
        op,
        d == P && n.is_multiple_of(BLOCK) && qh.is_multiple_of(8) && qh > 0,
        || {
            format!(
                "expected D = {d} = {P}, N = {n} a multiple of {BLOCK}, QH = {qh} a multiple of 8"
            )
        },
    );
    const HEADS_PER_LOAD: usize = 8;
    const HALVES: usize = 2;
    let rep = qh / kh;
    // Key blocks of 512 (FMAX), half of them per half of the keys.
    let (n_tiles, blocks) = (n / P, n / FMAX);
    let id = nl::load(identity.view());
    // q^T: per group of 8 heads and query tile, the 8 heads' [D, 128] tiles side by side.
    let mut q_t: Vec<Tile> = Vec::with_capacity(qh / HEADS_PER_LOAD * n_tiles);
    for i0 in nl::affine_range(n_tiles) {
        for i1 in nl::affine_range(qh / HEADS_PER_LOAD) {
            let c0 = i1 * HEADS_PER_LOAD * d;
            let q_tile = nl::load(q.slice((i0 * P..(i0 + 1) * P, c0..c0 + HEADS_PER_LOAD * d)));
            let t = nl::ndarray(&[P, HEADS_PER_LOAD * P], DType::F32, nl::SBUF);
            for i2 in nl::affine_range(HEADS_PER_LOAD) {
                let tr = nisa::nc_matmul_transpose(q_tile.slice((.., i2 * P..(i2 + 1) * P)), &id);
                nisa::tensor_copy_into(
                    t.slice((.., i2 * P..(i2 + 1) * P)),
                    &tr,
                    nisa::Engine::Vector,
                );
            }
            q_t.push(t);
        }
    }
    let q_t_of = |h: usize, i: usize| {
        let t = &q_t[i * (qh / HEADS_PER_LOAD) + h / HEADS_PER_LOAD];
        t.slice((.., (h % HEADS_PER_LOAD) * P..(h % HEADS_PER_LOAD + 1) * P))
    };
    // Scores per (key/value head, repeat, query tile, half, block): [128, 512] tiles.
    let per_half = blocks / HALVES;
    let at = |g: usize, r: usize, i: usize, half: usize, b: usize| {
        (((g * rep + r) * n_tiles + i) * HALVES + half) * per_half + b
    };
    let mut scores: Vec<Option<Tile>> = (0..kh * rep * n_tiles * blocks).map(|_| None).collect();
    let row_max: Vec<Tile> = (0..kh * rep * n_tiles)
        .map(|_| nl::ndarray(&[P, 1], DType::F32, nl::SBUF))
        .collect();
    let scale = 1.0 / (d as f32).sqrt();
    for i3 in nl::affine_range(HALVES) {
        // k^T of this half: per block of 512 keys, every key/value head's [D, 512] side by side.
        let mut k_t = Vec::with_capacity(per_half);
        for i4 in nl::affine_range(per_half) {
            let t = nl::ndarray(&[P, kh * FMAX], DType::F32, nl::SBUF);
            for i5 in nl::affine_range(FMAX / P) {
                let r0 = (i3 * per_half + i4) * FMAX + i5 * P;
                let k_tile = nl::load(k.slice((r0..r0 + P, ..)));
                for i6 in nl::affine_range(kh) {
                    let tr =
                        nisa::nc_matmul_transpose(k_tile.slice((.., i6 * P..(i6 + 1) * P)), &id);
                    let c0 = i6 * FMAX + i5 * P;
                    nisa::tensor_copy_into(t.slice((.., c0..c0 + P)), &tr, nisa::Engine::Vector);
                }
            }
            k_t.push(t);
        }
        for g in nl::affine_range(kh) {
            for i9 in nl::affine_range(per_half) {
                for r in nl::affine_range(rep) {
                    for i11 in nl::affine_range(n_tiles) {
                        let acc = nl::ndarray(&[P, FMAX], DType::F32, nl::PSUM);
                        nisa::nc_matmul_into(
                            &acc,
                            q_t_of(g * rep + r, i11),
                            k_t[i9].slice((.., g * FMAX..(g + 1) * FMAX)),
                        );
                        let s = nisa::tensor_scalar(
                            &acc,
                            nl::AluOp::Multiply,
                            scale,
                            Default::default(),
                        );
                        let mx =
                            nisa::tensor_reduce(nl::AluOp::Maximum, &s, &[1], true, false, None);
                        let first = i3 == 0 && i9 == 0;
                        loop_reduce(
                            &row_max[(g * rep + r) * n_tiles + i11],
                            &mx,
                            nl::AluOp::Maximum,
                            first,
                        );
                        scores[at(g, r, i11, i3, i9)] = Some(s);
                    }
                }
            }
        }
    }
    // v, whole: one [128, KH * D] tile per 128 keys.
    let mut v_tiles: Vec<Tile> = Vec::with_capacity(n_tiles);
    for t in nl::affine_range(n_tiles) {
        v_tiles.push(nl::load(v.slice((t * P..(t + 1) * P, ..))));
    }
    for r in nl::affine_range(rep) {
        for g in nl::affine_range(kh) {
            for i17 in nl::affine_range(n_tiles) {
                let neg_max = nisa::tensor_scalar(
                    &row_max[(g * rep + r) * n_tiles + i17],
                    nl::AluOp::Maximum,
                    f32::MIN,
                    nisa::TensorScalarOpts::new().then(nl::AluOp::Multiply, -1.0f32),
                );
                let sum = nl::ndarray(&[P, 1], DType::F32, nl::SBUF);
                let mut exps = Vec::with_capacity(blocks);
                for i18 in nl::affine_range(HALVES) {
                    for i19 in nl::affine_range(per_half) {
                        let Some(s) = scores[at(g, r, i17, i18, i19)].take() else {
                            continue;
                        };
                        exps.push(exp_and_sum(&s, &neg_max, &sum, i18 == 0 && i19 == 0));
                    }
                }
                let inv = nisa::reciprocal(&sum, None);
                // The probabilities, transposed: [128 keys, 128 queries] per key tile.
                let mut p_t = Vec::with_capacity(n_tiles);
                for e in &exps {
                    let probs = nisa::tensor_scalar(
                        e,
                        nl::AluOp::Multiply,
                        &inv,
                        nisa::TensorScalarOpts::new(),
                    );
                    for i22 in nl::affine_range(FMAX / P) {
                        let tr = nisa::nc_matmul_transpose(
                            probs.slice((.., i22 * P..(i22 + 1) * P)),
                            &id,
                        );
                        let t = nl::ndarray(&[P, P], DType::F32, nl::SBUF);
                        nisa::tensor_copy_into(&t, &tr, nisa::Engine::Vector);
                        p_t.push(t);
                    }
                }
                let acc = nl::ndarray(&[P, P], DType::F32, nl::PSUM);
                for (t, pt) in p_t.iter().enumerate() {
                    nisa::nc_matmul_acc(&acc, pt, v_tiles[t].slice((.., g * P..(g + 1) * P)));
                }
                let o = nl::ndarray(&[P, P], DType::F32, nl::SBUF);
                nisa::tensor_copy_into(&o, &acc, nisa::Engine::Vector);
                nl::store(out.slice((g * rep + r, i17 * P..(i17 + 1) * P, ..)), &o);
            }
        }
    }
}

/// The transposes `x^T` of columns `cols` (a multiple of 128 wide) of one block of 512 rows
/// of `x` `[M, K]`: one `[128, cols / 128 * 512]` tile whose `[128, 512]` column block `t`
/// holds columns `cols.start + t * 128 ..` of the block transposed (4 loads of
/// `[128, cols]`, each transposed 128 columns at a time on TensorE against `id`).
fn x_block_transposed(x: &Hbm<f32>, block: usize, cols: std::ops::Range<usize>, id: &Tile) -> Tile {
    let k_tiles = cols.len() / P;
    let x_t = nl::ndarray(&[P, k_tiles * FMAX], DType::F32, nl::SBUF);
    for i3 in nl::affine_range(FMAX / P) {
        let r0 = block * FMAX + i3 * P;
        let x_tile = nl::load(x.slice((r0..r0 + P, cols.clone())));
        for i4 in nl::affine_range(k_tiles) {
            let tr = nisa::nc_matmul_transpose(x_tile.slice((.., i4 * P..(i4 + 1) * P)), id);
            let c0 = i4 * FMAX + i3 * P;
            nisa::tensor_copy_into(x_t.slice((.., c0..c0 + P)), &tr, nisa::Engine::Vector);
        }
    }
    x_t
}

/// `w[.., cols]^T @ x^T` of one block of 512 rows into a `[128, 512]` PSUM tile, for the 128
/// columns `n0 ..` of the block of weights `w` (`K / 128` tiles `[128, 1024]` of rows) and
/// the block's transposed rows `x_t` (see [`x_block_transposed`]).
fn project(w: &[Tile], n0: usize, x_t: &Tile) -> Tile {
    let acc = nl::ndarray(&[P, FMAX], DType::F32, nl::PSUM);
    for (i6, w_tile) in w.iter().enumerate() {
        nisa::nc_matmul_acc(
            &acc,
            w_tile.slice((.., n0..n0 + P)),
            x_t.slice((.., i6 * FMAX..(i6 + 1) * FMAX)),
        );
    }
    acc
}

/// NKIBench `swiglu_M4096_N3072_K1024` baseline: `out = (silu(x @ w_gate) * (x @ w_up)) @
/// w_down` for `x` `[M, K]`, `w_gate` and `w_up` `[K, N]`, `w_down` `[N, K]`, `out` `[M, K]`.
///
/// As the compiler-emitted program: a first loop nest computes the gate, transposed, per
/// block of 1024 columns of N and block of 512 rows of M (`x` loaded and transposed on
/// TensorE against `identity` in every N block), keeping all of it (`[N, M]`, 48 MiB at the
/// NKIBench problem); a second nest computes the up projection the same way (loading and
/// transposing `x` again), `silu(gate) = gate / (1 + exp(-gate))` times it, and stores the
/// product to a private HBM buffer (the program's `_spill_163`); `w_down` is loaded whole and
/// a last nest re-loads the product per block of M rows (`_reload_166`) and multiplies.
///
/// Needs M a multiple of 512, K a multiple of 512, N a multiple of 1024.
#[nki_kernel]
pub fn swiglu_baseline(
    x: &Hbm<f32>,
    w_up: &Hbm<f32>,
    w_down: &Hbm<f32>,
    w_gate: &Hbm<f32>,
    identity: &Hbm<f32>,
    out: &mut Hbm<f32>,
) {
    let op = "swiglu_baseline";
    let xs = expect_rank(op, "x", x.shape(), 2);
    let (m, k) = (xs[0], xs[1]);
    let n = expect_rank(op, "w_up", w_up.shape(), 2)[1];
    expect_shape(op, "w_up", w_up.shape(), &[k, n]);
    expect_shape(op, "w_gate", w_gate.shape(), &[k, n]);
    expect_shape(op, "w_down", w_down.shape(), &[n, k]);
    expect_shape(op, "identity", identity.shape(), &[P, P]);
    expect_shape(op, "out", out.shape(), &[m, k]);
    require(
        op,
        m.is_multiple_of(FMAX) && k.is_multiple_of(FMAX) && n.is_multiple_of(BLOCK),
        || format!("expected M = {m} and K = {k} multiples of {FMAX}, N = {n} of {BLOCK}"),
    );
    let (n_blocks, m_blocks, k_tiles, per_block) = (n / BLOCK, m / FMAX, k / P, BLOCK / P);
    let zero = nl::zeros(&[P, 1], DType::F32, nl::SBUF);
    let id = nl::load(identity.view());
    let weights = |w: &Hbm<f32>, i: usize| -> Vec<Tile> {
        let mut tiles = Vec::with_capacity(k_tiles);
        for i1 in nl::affine_range(k_tiles) {
            tiles.push(nl::load(
                w.slice((i1 * P..(i1 + 1) * P, i * BLOCK..(i + 1) * BLOCK)),
            ));
        }
        tiles
    };
    // gate^T per (N block, 128 columns of it, M block): [128, 512].
    let mut gate: Vec<Option<Tile>> = (0..n_blocks * per_block * m_blocks).map(|_| None).collect();
    let at = |i: usize, t: usize, j: usize| (i * per_block + t) * m_blocks + j;
    for i0 in nl::affine_range(n_blocks) {
        let wg = weights(w_gate, i0);
        for i2 in nl::affine_range(m_blocks) {
            let x_t = x_block_transposed(x, i2, 0..k, &id);
            for i5 in nl::affine_range(per_block) {
                let acc = project(&wg, i5 * P, &x_t);
                gate[at(i0, i5, i2)] = Some(nisa::tensor_copy(&acc, None, nisa::Engine::Vector));
            }
        }
    }
    let h = nl::ndarray(
        &[n_blocks * per_block * m_blocks * P, FMAX],
        DType::F32,
        nl::private_hbm.name("_spill_163"),
    );
    for i7 in nl::affine_range(n_blocks) {
        let wu = weights(w_up, i7);
        for i9 in nl::affine_range(m_blocks) {
            let x_t = x_block_transposed(x, i9, 0..k, &id);
            for i12 in nl::affine_range(per_block) {
                let up = project(&wu, i12 * P, &x_t);
                let Some(g) = gate[at(i7, i12, i9)].take() else {
                    continue;
                };
                let e = nisa::activation(
                    nl::ActFn::Exp,
                    &g,
                    nisa::ActivationOpts::new().bias(&zero).scale(-1.0),
                );
                let d =
                    nisa::tensor_scalar(&e, nl::AluOp::Add, 1.0f32, nisa::TensorScalarOpts::new());
                let r = nisa::reciprocal(&d, None);
                let silu = nisa::tensor_tensor(&g, &r, nl::AluOp::Multiply, None);
                let prod = nisa::tensor_tensor(&silu, &up, nl::AluOp::Multiply, None);
                let row = at(i7, i12, i9) * P;
                nisa::dma_copy(h.slice((row..row + P, ..)), &prod);
            }
        }
    }
    // w_down, whole: one [128, K] tile per 128 rows.
    let mut wd = Vec::with_capacity(n / P);
    for i15 in nl::affine_range(n / P) {
        wd.push(nl::load(w_down.slice((i15 * P..(i15 + 1) * P, ..))));
    }
    for i16 in nl::affine_range(m_blocks) {
        let mut h_t = Vec::with_capacity(n / P);
        for t in nl::affine_range(n / P) {
            let tile = nl::ndarray(&[P, FMAX], DType::F32, nl::SBUF);
            let row = at(t / per_block, t % per_block, i16) * P;
            nisa::dma_copy(&tile, h.slice((row..row + P, ..)));
            h_t.push(tile);
        }
        for i19 in nl::affine_range(FMAX / P) {
            let o = nl::ndarray(&[P, k], DType::F32, nl::SBUF);
            for i20 in nl::affine_range(k / FMAX) {
                let acc = nl::ndarray(&[P, FMAX], DType::F32, nl::PSUM);
                for (t, h_tile) in h_t.iter().enumerate() {
                    nisa::nc_matmul_acc(
                        &acc,
                        h_tile.slice((.., i19 * P..(i19 + 1) * P)),
                        wd[t].slice((.., i20 * FMAX..(i20 + 1) * FMAX)),
                    );
                }
                nisa::tensor_copy_into(
                    o.slice((.., i20 * FMAX..(i20 + 1) * FMAX)),
                    &acc,
                    nisa::Engine::Vector,
                );
            }
            let r0 = i16 * FMAX + i19 * P;
            nl::store(out.slice((r0..r0 + P, ..)), &o);
        }
    }
}

/// NKIBench `lora_M4096_N12288_K5120_R128` baseline: `out = x @ w + (x @ a) @ b` for `x`
/// `[M, K]`, `w` `[K, N]`, `a` `[K, R]`, `b` `[R, N]` with R = 128, `out` `[M, N]`.
///
/// As the compiler-emitted program: `a` is loaded whole; a low-rank nest computes, per
/// group of (up to) 4 blocks of 512 rows of M, `(x a)^T` (`x` loaded and transposed on
/// TensorE against `identity`, 1024 columns of K at a time), then loads `b` 1024 columns at
/// a time and keeps `((x a) b)^T` for every N block (`[128, 512]` tiles); the main nest, per
/// block of 1024 columns of N, runs a `sequential_range` over chunks of 1280 rows of K,
/// loading those rows of `w` and, per M block, loading and transposing the chunk's columns
/// of `x` again, accumulating `(x w)^T` over the chunks (`nl.loop_reduce`); it then adds the
/// low-rank part, transposes back on TensorE and stores `[128, 128]` tiles.
///
/// Needs R = 128, M a multiple of 512 (of 2048 beyond 2048), K of 5120, N of 1024.
#[nki_kernel]
pub fn lora_baseline(
    x: &Hbm<f32>,
    w: &Hbm<f32>,
    a: &Hbm<f32>,
    b: &Hbm<f32>,
    identity: &Hbm<f32>,
    out: &mut Hbm<f32>,
) {
    let op = "lora_baseline";
    let xs = expect_rank(op, "x", x.shape(), 2);
    let (m, k) = (xs[0], xs[1]);
    let n = expect_rank(op, "w", w.shape(), 2)[1];
    expect_shape(op, "w", w.shape(), &[k, n]);
    expect_shape(op, "a", a.shape(), &[k, P]);
    expect_shape(op, "b", b.shape(), &[P, n]);
    expect_shape(op, "identity", identity.shape(), &[P, P]);
    expect_shape(op, "out", out.shape(), &[m, n]);
    let m_blocks = m / FMAX;
    let group = m_blocks.min(4);
    require(
        op,
        m.is_multiple_of(FMAX)
            && m_blocks > 0
            && m_blocks.is_multiple_of(group)
            && k.is_multiple_of(10 * FMAX)
            && n.is_multiple_of(BLOCK),
        || {
            format!(
                "expected M = {m} a multiple of {FMAX} (of {} beyond it), K = {k} of {}, \
                 N = {n} of {BLOCK}",
                4 * FMAX,
                10 * FMAX
            )
        },
    );
    let (n_blocks, per_block) = (n / BLOCK, BLOCK / P);
    // Rows of K per chunk of the main nest's sequential loop, in halves of 5 tiles.
    let (chunk, half) = (10 * P, 5 * P);
    let id = nl::load(identity.view());
    let mut a_t = Vec::with_capacity(k / P);
    for i1 in nl::affine_range(k / P) {
        a_t.push(nl::load(a.slice((i1 * P..(i1 + 1) * P, ..))));
    }
    // ((x a) b)^T per (N block, 128 columns of it, M block): [128, 512].
    let at = |i: usize, t: usize, j: usize| (i * per_block + t) * m_blocks + j;
    let mut low: Vec<Option<Tile>> = (0..n_blocks * per_block * m_blocks).map(|_| None).collect();
    for i2 in nl::affine_range(m_blocks / group) {
        let mut xa = Vec::with_capacity(group);
        for i3 in nl::affine_range(group) {
            let mb = i2 * group + i3;
            let mut x_t = Vec::with_capacity(k / BLOCK);
            for i4 in nl::affine_range(k / BLOCK) {
                x_t.push(x_block_transposed(x, mb, i4 * BLOCK..(i4 + 1) * BLOCK, &id));
            }
            let acc = nl::ndarray(&[P, FMAX], DType::F32, nl::PSUM);
            for (i7, xt) in x_t.iter().enumerate() {
                for i8 in nl::affine_range(BLOCK / P) {
                    nisa::nc_matmul_acc(
                        &acc,
                        &a_t[i7 * (BLOCK / P) + i8],
                        xt.slice((.., i8 * FMAX..(i8 + 1) * FMAX)),
                    );
                }
            }
            xa.push(nisa::tensor_copy(&acc, None, nisa::Engine::Vector));
        }
        for i9 in nl::affine_range(n_blocks) {
            let b_tile = nl::load(b.slice((.., i9 * BLOCK..(i9 + 1) * BLOCK)));
            for (i10, xa_t) in xa.iter().enumerate() {
                for t in nl::affine_range(per_block) {
                    let acc = nl::ndarray(&[P, FMAX], DType::F32, nl::PSUM);
                    nisa::nc_matmul_acc(&acc, b_tile.slice((.., t * P..(t + 1) * P)), xa_t);
                    low[at(i9, t, i2 * group + i10)] =
                        Some(nisa::tensor_copy(&acc, None, nisa::Engine::Vector));
                }
            }
        }
    }
    for i13 in nl::affine_range(n_blocks) {
        // (x w)^T per (128 columns of the N block, M block): [128, 512].
        let sums: Vec<Tile> = (0..per_block * m_blocks)
            .map(|_| nl::ndarray(&[P, FMAX], DType::F32, nl::SBUF))
            .collect();
        for i14 in nl::sequential_range(k / chunk) {
            let mut w_t = Vec::with_capacity(chunk / P);
            for i16 in nl::affine_range(chunk / P) {
                let r0 = i14 * chunk + i16 * P;
                w_t.push(nl::load(
                    w.slice((r0..r0 + P, i13 * BLOCK..(i13 + 1) * BLOCK)),
                ));
            }
            for mb in nl::affine_range(m_blocks) {
                let mut x_t = Vec::with_capacity(2);
                for i19 in nl::affine_range(2) {
                    let c0 = i14 * chunk + i19 * half;
                    x_t.push(x_block_transposed(x, mb, c0..c0 + half, &id));
                }
                for t in nl::affine_range(per_block) {
                    let acc = nl::ndarray(&[P, FMAX], DType::F32, nl::PSUM);
                    for (i24, xt) in x_t.iter().enumerate() {
                        for i25 in nl::affine_range(half / P) {
                            nisa::nc_matmul_acc(
                                &acc,
                                w_t[i24 * (half / P) + i25].slice((.., t * P..(t + 1) * P)),
                                xt.slice((.., i25 * FMAX..(i25 + 1) * FMAX)),
                            );
                        }
                    }
                    loop_reduce(&sums[t * m_blocks + mb], &acc, nl::AluOp::Add, i14 == 0);
                }
            }
        }
        for mb in nl::affine_range(m_blocks) {
            for t in nl::affine_range(per_block) {
                let Some(l) = low[at(i13, t, mb)].take() else {
                    continue;
                };
                let y = nisa::tensor_tensor(&sums[t * m_blocks + mb], &l, nl::AluOp::Add, None);
                for i31 in nl::affine_range(FMAX / P) {
                    let tr = nisa::nc_matmul_transpose(y.slice((.., i31 * P..(i31 + 1) * P)), &id);
                    let o = nl::ndarray(&[P, P], DType::F32, nl::SBUF);
                    nisa::tensor_copy_into(&o, &tr, nisa::Engine::Vector);
                    let (r0, c0) = (mb * FMAX + i31 * P, (i13 * per_block + t) * P);
                    nl::store(out.slice((r0..r0 + P, c0..c0 + P)), &o);
                }
            }
        }
    }
}

/// The NKIBench kernels of calibration.md section 5 ported here, with their trn1 problem.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Baseline {
    /// [`matmul_baseline`](fn@matmul_baseline) at M = 4096, N = 12288, K = 5120.
    Matmul,
    /// [`bmm_softmax_baseline`](fn@bmm_softmax_baseline) at B = 16, K = 64, M = N = 4096.
    BmmSoftmax,
    /// [`gqa_baseline`](fn@gqa_baseline) at B = 1, N = 4096, QH = 16, KH = 8, D = 128.
    Gqa,
    /// [`mamba_baseline`](fn@mamba_baseline) at M = 7168, C = 256, S = 16.
    Mamba,
    /// [`swiglu_baseline`](fn@swiglu_baseline) at M = 4096, N = 3072, K = 1024.
    Swiglu,
    /// [`lora_baseline`](fn@lora_baseline) at M = 4096, N = 12288, K = 5120, R = 128.
    Lora,
}

impl Baseline {
    /// Every ported one, in calibration.md's order.
    pub const ALL: [Baseline; 6] = [
        Baseline::Matmul,
        Baseline::BmmSoftmax,
        Baseline::Gqa,
        Baseline::Mamba,
        Baseline::Swiglu,
        Baseline::Lora,
    ];

    /// NKIBench's name of the problem.
    pub fn name(self) -> &'static str {
        match self {
            Baseline::Matmul => "matmul_M4096_N12288_K5120",
            Baseline::BmmSoftmax => "bmm_softmax_B16_K64_M4096_N4096",
            Baseline::Gqa => "gqa_full_B1_N4096_QH16_KH8_D128",
            Baseline::Mamba => "mamba_M7168_C256_S16",
            Baseline::Swiglu => "swiglu_M4096_N3072_K1024",
            Baseline::Lora => "lora_M4096_N12288_K5120_R128",
        }
    }

    /// The profiler's counters of the baseline on trn1 (calibration.md section 5): HBM read,
    /// HBM write, spill save, spill reload, in bytes.
    pub fn counters(self) -> [u64; 4] {
        match self {
            Baseline::Matmul => [9_059_762_176, 201_326_592, 0, 0],
            Baseline::BmmSoftmax => [794_361_856, 1_827_405_824, 753_664_000, 756_547_584],
            Baseline::Gqa => [1_194_393_600, 1_132_986_368, 1_099_431_936, 1_127_219_200],
            Baseline::Mamba => [181_682_176, 62_390_272, 55_050_240, 55_050_240],
            Baseline::Swiglu => [141_623_296, 83_886_080, 67_108_864, 83_886_080],
            Baseline::Lora => [2_341_797_888, 1_269_563_392, 1_068_236_800, 1_907_097_600],
        }
    }

    /// Models the baseline on `target` at its NKIBench problem, shape-only (estimate mode).
    pub fn estimate(self, target: Target) -> Result<Profile, NkiError> {
        let id = Hbm::<f32>::shape_only([P, P]);
        let g = || Grid::new([1]);
        match self {
            Baseline::Matmul => {
                let (m, n, k) = (4096, 12288, 5120);
                let (a, b) = (Hbm::shape_only([m, k]), Hbm::shape_only([k, n]));
                let mut out = Hbm::<f32>::shape_only([m, n]);
                matmul_baseline::estimate(g(), target, &a, &b, &id, &mut out)
            }
            Baseline::BmmSoftmax => {
                let (b, k, m, n) = (16, 64, 4096, 4096);
                let (x, y) = (Hbm::shape_only([b, m, k]), Hbm::shape_only([b, k, n]));
                let mut out = Hbm::<f32>::shape_only([b, m, n]);
                bmm_softmax_baseline::estimate(g(), target, &x, &y, &id, &mut out)
            }
            Baseline::Gqa => {
                let (n, qh, kh, d) = (4096, 16, 8, 128);
                let q = Hbm::shape_only([n, qh * d]);
                let (k, v) = (Hbm::shape_only([n, kh * d]), Hbm::shape_only([n, kh * d]));
                let mut out = Hbm::<f32>::shape_only([qh, n, d]);
                gqa_baseline::estimate(g(), target, &q, &k, &v, &id, &mut out)
            }
            Baseline::Mamba => {
                let (m, c, s) = (7168, 256, 16);
                let (delta, u) = (Hbm::shape_only([c, m]), Hbm::shape_only([c, m]));
                let (a, b, cm) = (
                    Hbm::shape_only([c, s]),
                    Hbm::shape_only([s, m]),
                    Hbm::shape_only([s, m]),
                );
                let mut out = Hbm::<f32>::shape_only([c, m]);
                // The source program goes through the modelled Beta-1 compiler (the other
                // two are compiler-emitted programs, already transformed).
                with_compiler_stage(CompilerStage::BETA1, || {
                    mamba_baseline::estimate(g(), target, &delta, &u, &a, &b, &cm, &mut out)
                })
            }
            Baseline::Swiglu => {
                let (m, n, k) = (4096, 3072, 1024);
                let x = Hbm::shape_only([m, k]);
                let (up, gate) = (Hbm::shape_only([k, n]), Hbm::shape_only([k, n]));
                let down = Hbm::shape_only([n, k]);
                let mut out = Hbm::<f32>::shape_only([m, k]);
                // Through the modelled Beta-1 compiler: the profiler counts the program's
                // private-HBM `_spill_163` traffic as spill (`CompilerStage::scratch_spill`),
                // and the compiler hoists the input's transposes out of the fused N-block
                // loop and spills them whole across it (`CompilerStage::loop_spill`).
                with_compiler_stage(CompilerStage::BETA1, || {
                    swiglu_baseline::estimate(g(), target, &x, &up, &down, &gate, &id, &mut out)
                })
            }
            Baseline::Lora => {
                let (m, n, k, r) = (4096, 12288, 5120, 128);
                let (x, w) = (Hbm::shape_only([m, k]), Hbm::shape_only([k, n]));
                let (a, b) = (Hbm::shape_only([k, r]), Hbm::shape_only([r, n]));
                let mut out = Hbm::<f32>::shape_only([m, n]);
                // Through the modelled Beta-1 compiler, as swiglu: the emitted program still
                // loads and transposes x in every N block. The compiler moves the N-block loop
                // inside the sequential K-chunk loop (`CompilerStage::interchange`), runs each
                // chunk's transposes once (`hoist_compute`) and spills them whole across the
                // N blocks (`loop_spill`); every N block's accumulators then live across the
                // K chunks and are saved and re-loaded per chunk.
                with_compiler_stage(CompilerStage::BETA1, || {
                    lora_baseline::estimate(g(), target, &x, &w, &a, &b, &id, &mut out)
                })
            }
        }
    }
}
