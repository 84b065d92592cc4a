//! Flash attention forward, causal, with the log-sum-exp (nki-samples `flash_fwd`):
//! `out[b, h] = softmax(q^T k / sqrt(d), causal) @ v` for `q`, `k[B, H, d, S]` and
//! `v[B, H, S, d]`, and `lse[b, h, p, t] = max_j s_ij + ln(sum_j exp(s_ij - max_j s_ij))` for
//! query `i = t * 128 + p` (the samples' `[B, H, 128, S / 128]` layout). Grouped-query
//! attention: `k` and `v` may have fewer heads (`H` a multiple of theirs); query head `h` uses
//! key/value head `h / (H / H_kv)`.
//!
//! Launch on grid `[B, H]`: each program instance computes one (batch, head).
//!
//! Tiling: the instance loads `k[d, S]` and the `S / 128` tiles `v[128, d]` once. For each
//! 128-query tile `q^T[d, 128]` (queries on partitions after the matmul), the online softmax
//! walks the key blocks of 512 up to the diagonal (blocks above it are skipped, the block on it
//! is masked with a GpSimd `affine_select` to -9984): scores in one `[128, 512]` PSUM bank, the
//! running max `m` and sum `l` in `[128, 1]` tiles, exponentials with their row sums from one
//! ScalarE `activation_reduce`, the probabilities transposed on TensorE in `[128, 128]` blocks
//! and multiplied by `v` into a `[128, d]` PSUM bank, and the output accumulator rescaled by
//! `exp(m_old - m_new)` on VectorE.
//!
//! [`flash_attention_fwd_07`](fn@flash_attention_fwd_07) is its NKI 0.7 twin: 0.7 has no
//! multi-dimensional grid, so one core (`kernel[1]`) walks the (batch, head) pairs in the
//! order the Beta-1 grid numbers them, issuing the same instructions, written into
//! destinations given first, and returns `out` and `lse`.
//!
//! Bottleneck (modelled, `flash_attention` example): TensorE is the busiest engine at the
//! samples' `[1, 1, 128, 4096]` fp32 case (36 % busy on trn1, 0.88 ms): the causal half of the
//! `S^2 d` score and output products plus as many transposes, at the fp32 quarter rate. It is
//! not saturated because each key block is a dependent chain (matmul, max, exp, transpose,
//! matmul, rescale) of about ten instructions across four engines.

use crate::checks::{expect_rank, expect_shape, require};
use crate::sd_attention::load_v_tiles;
use nki_core::prelude::*;
// The Beta-1 instruction forms (allocating, `_into` twins): the seeds' dialect.
use nki_core::nisa::classic as nisa;

const OP: &str = "flash_attention_fwd";
const PMAX: usize = nl::tile_size::PMAX;
/// Keys per block of the online softmax (one PSUM bank of fp32 scores).
pub const KEY_BLOCK: usize = nl::tile_size::GEMM_MOVING_FMAX;
/// The value masked scores take (as in nki-samples).
pub const MASK_VALUE: f32 = -9984.0;

/// Checks the operands; returns `(heads per kv head, d, S)`.
#[track_caller]
fn dims(
    q: &[usize],
    k: &[usize],
    v: &[usize],
    out: &[usize],
    lse: &[usize],
) -> (usize, usize, usize) {
    let qs = expect_rank(OP, "q", q, 4);
    let (b, h, d, s) = (qs[0], qs[1], qs[2], qs[3]);
    let ks = expect_rank(OP, "k", k, 4);
    let hkv = ks[1];
    require(OP, hkv > 0 && h % hkv == 0, || {
        format!("q{qs:?} has {h} heads, not a multiple of k{ks:?}'s {hkv}")
    });
    expect_shape(OP, "k", ks, &[b, hkv, d, s]);
    expect_shape(OP, "v", v, &[b, hkv, s, d]);
    expect_shape(OP, "out", out, &[b, h, s, d]);
    require(OP, s % PMAX == 0 && s > 0 && d <= PMAX, || {
        format!("q{qs:?}: the sequence length must be a positive multiple of 128 and d at most 128")
    });
    expect_shape(OP, "lse", lse, &[b, h, PMAX, s / PMAX]);
    (h / hkv, d, s)
}

/// Causal flash attention forward with LSE, one (batch, head) per instance: launch on grid
/// `[B, H]`. `scale` multiplies the scores (`1 / sqrt(d)` in the samples).
#[nki_kernel]
pub fn flash_attention_fwd<T: Element>(
    q: &Hbm<T>,
    k: &Hbm<T>,
    v: &Hbm<T>,
    out: &mut Hbm<T>,
    lse: &mut Hbm<f32>,
    scale: f32,
) {
    let (group, d, seq) = dims(q.shape(), k.shape(), v.shape(), out.shape(), lse.shape());
    let (b, h) = (nl::program_id(0), nl::program_id(1));
    let kv = h / group;
    let k_all = nl::load_as(k.slice((b, kv, .., ..)), DType::F32);
    let v_tiles = load_v_tiles(&v.slice((b, kv, .., ..)));
    for i in nl::affine_range(seq / PMAX) {
        let q0 = i * PMAX;
        let q_t = nl::load_as(q.slice((b, h, .., q0..q0 + PMAX)), DType::F32);
        // The running max alternates between two blocks (the previous and the new one).
        let m_buf = nl::ndarray_blocks(2, &[PMAX, 1], DType::F32, nl::SBUF);
        nisa::memset_into(m_buf.block(0), f32::MIN);
        let l = nisa::memset(&[PMAX, 1], 0.0, DType::F32, nisa::Engine::Vector);
        let o = nisa::memset(&[PMAX, d], 0.0, DType::F32, nisa::Engine::Vector);
        // Key blocks up to and including the one holding the diagonal.
        let blocks = (q0 + PMAX).div_ceil(KEY_BLOCK);
        for kb in nl::sequential_range(blocks) {
            let (m, m_new) = (m_buf.block(kb % 2), m_buf.block((kb + 1) % 2));
            let keys = nl::tile_range(kb, KEY_BLOCK, (q0 + PMAX).min(seq));
            let k0 = keys.start;
            let ps = nisa::nc_matmul(&q_t, k_all.slice((.., keys.clone())));
            let mut s = nisa::activation(
                nl::ActFn::Copy,
                &ps,
                nisa::ActivationOpts::new().scale(scale),
            );
            drop(ps);
            if keys.end > q0 + 1 {
                // Keep key j of query p where (q0 + p) - (k0 + j) >= 0.
                let causal = nisa::AffineExpr::new(PMAX, 1)
                    .free(-1, keys.len())
                    .offset(q0 as i32 - k0 as i32);
                s = nisa::affine_select(&causal, nl::AluOp::GreaterEqual, &s, MASK_VALUE, None);
            }
            let block_max = nisa::tensor_reduce(nl::AluOp::Maximum, &s, &[1], true, false, None);
            nisa::tensor_tensor_into(m_new, m, &block_max, nl::AluOp::Maximum);
            let neg_m = nisa::tensor_scalar(m_new, nl::AluOp::Multiply, -1.0, Default::default());
            let (p, row_sum) = nisa::activation_reduce(
                nl::ActFn::Exp,
                &s,
                nisa::ActivationOpts::new().bias(&neg_m),
            );
            let alpha =
                nisa::activation(nl::ActFn::Exp, m, nisa::ActivationOpts::new().bias(&neg_m));
            // l = l * alpha + row_sum and o = o * alpha + p @ v, in place.
            let then_add = nisa::TensorScalarOpts::new().then(nl::AluOp::Add, &row_sum);
            nisa::tensor_scalar_into(&l, &l, nl::AluOp::Multiply, &alpha, then_add);
            let pv = nl::ndarray(&[PMAX, d], DType::F32, nl::PSUM);
            for j in nl::affine_range(keys.len() / PMAX) {
                let p_t = nisa::nc_transpose(
                    p.slice((.., j * PMAX..(j + 1) * PMAX)),
                    nisa::Engine::Tensor,
                );
                let p_t = nl::copy(&p_t, None);
                nisa::nc_matmul_acc(&pv, &p_t, v_tiles.block(k0 / PMAX + j));
            }
            nisa::tensor_scalar_into(&o, &o, nl::AluOp::Multiply, &alpha, Default::default());
            nisa::tensor_tensor_into(&o, &o, &pv, nl::AluOp::Add);
        }
        let m = m_buf.block(blocks % 2);
        let inv_l = nisa::reciprocal(&l, None);
        let y = nisa::tensor_scalar(
            &o,
            nl::AluOp::Multiply,
            &inv_l,
            nisa::TensorScalarOpts::new().dtype(out.dtype()),
        );
        nl::store(out.slice((b, h, q0..q0 + PMAX, ..)), &y);
        let log_l = nisa::activation(nl::ActFn::Log, &l, Default::default());
        let lse_t = nisa::tensor_tensor(&log_l, m, nl::AluOp::Add, None);
        nl::store(lse.slice((b, h, .., i..i + 1)), &lse_t);
    }
}

/// The NKI 0.7 twin of [`flash_attention_fwd`](fn@flash_attention_fwd): causal flash
/// attention forward with LSE for every (batch, head), returned as `(out, lse)` (shapes as
/// the Beta-1 kernel's outputs), on one core (launch it on `[1]`). The Beta-1 grid `[B, H]`
/// becomes a loop over the (batch, head) pairs in program-id order; each pair issues the Beta-1
/// instance's instructions in 0.7's form: tensors from `nl::ndarray` (the `v` tiles and the two
/// running-max buffers as lists of tensors), `nisa::dma_copy`, every `nisa` instruction
/// writing into a destination given first. It computes the same values as the Beta-1 kernel.
#[nki_kernel(nki = "0.7")]
pub fn flash_attention_fwd_07<T: Element>(
    q: &Hbm<T>,
    k: &Hbm<T>,
    v: &Hbm<T>,
    scale: f32,
) -> (Hbm<T>, Hbm<f32>) {
    let (qs, ks, vs) = (q.shape(), k.shape(), v.shape());
    let (outs, lses) = match qs {
        &[b, h, d, s] => (vec![b, h, s, d], vec![b, h, PMAX, s / PMAX]),
        _ => (Vec::new(), Vec::new()),
    };
    let (group, _, _) = dims(qs, ks, vs, &outs, &lses);
    let out = nl::ndarray(&outs, q.dtype(), nl::shared_hbm);
    let lse = nl::ndarray(&lses, DType::F32, nl::shared_hbm);
    for b in 0..qs[0] {
        for h in 0..qs[1] {
            let head = Head {
                b,
                h,
                kv: h / group,
            };
            head_07(q, k, v, (&out, &lse), head, scale);
        }
    }
    (out, lse)
}

/// One (batch, head) of [`flash_attention_fwd_07`]: its indices and its key/value head.
#[derive(Clone, Copy)]
struct Head {
    b: usize,
    h: usize,
    kv: usize,
}

/// The Beta-1 kernel's instance for `head`, in NKI 0.7's form, writing `outputs` (out, lse).
#[track_caller]
fn head_07<T: Element>(
    q: &Hbm<T>,
    k: &Hbm<T>,
    v: &Hbm<T>,
    (out, lse): (&Tensor, &Tensor),
    Head { b, h, kv }: Head,
    scale: f32,
) {
    // This file's `nisa` is Beta 1's allocating forms; the twin uses NKI 0.7's.
    use nki_core::nisa;
    let (d, seq) = (q.shape()[2], q.shape()[3]);
    let f32_tensor = |shape: &[usize], buffer| nl::ndarray(shape, DType::F32, buffer);
    let k_all = f32_tensor(&[d, seq], nl::sbuf);
    nisa::dma_copy(&k_all, k.slice((b, kv, .., ..)), None);
    let v_tiles: Vec<Tensor> = nl::affine_range(seq / PMAX)
        .map(|j| {
            let t = f32_tensor(&[PMAX, d], nl::sbuf);
            nisa::dma_copy(&t, v.slice((b, kv, j * PMAX..(j + 1) * PMAX, ..)), None);
            t
        })
        .collect();
    let vector = Some(nisa::Opts::new().engine(nisa::Engine::Vector));
    for i in nl::affine_range(seq / PMAX) {
        let q0 = i * PMAX;
        let q_t = f32_tensor(&[d, PMAX], nl::sbuf);
        nisa::dma_copy(&q_t, q.slice((b, h, .., q0..q0 + PMAX)), None);
        // The running max alternates between two tensors (the previous and the new one).
        let m_buf = [0, 1].map(|_| f32_tensor(&[PMAX, 1], nl::sbuf));
        nisa::memset(&m_buf[0], f32::MIN, None);
        let (l, o) = (
            f32_tensor(&[PMAX, 1], nl::sbuf),
            f32_tensor(&[PMAX, d], nl::sbuf),
        );
        nisa::memset(&l, 0.0, vector);
        nisa::memset(&o, 0.0, vector);
        // Key blocks up to and including the one holding the diagonal.
        let blocks = (q0 + PMAX).div_ceil(KEY_BLOCK);
        for kb in nl::sequential_range(blocks) {
            let (m, m_new) = (&m_buf[kb % 2], &m_buf[(kb + 1) % 2]);
            let keys = nl::tile_range(kb, KEY_BLOCK, (q0 + PMAX).min(seq));
            let (k0, nk) = (keys.start, keys.len());
            let ps = f32_tensor(&[PMAX, nk], nl::psum);
            nisa::nc_matmul(&ps, &q_t, k_all.slice((.., keys.clone())), None);
            let mut s = f32_tensor(&[PMAX, nk], nl::sbuf);
            let scaled = nisa::ActivationOpts::new().scale(scale);
            nisa::activation(&s, nl::ActFn::Copy, &ps, scaled);
            drop(ps);
            if keys.end > q0 + 1 {
                // Keep key j of query p where (q0 + p) - (k0 + j) >= 0.
                let causal = nisa::AffineExpr::new(PMAX, 1)
                    .free(-1, nk)
                    .offset(q0 as i32 - k0 as i32);
                let masked = f32_tensor(&[PMAX, nk], nl::sbuf);
                let ge = nl::AluOp::GreaterEqual;
                nisa::affine_select(&masked, &causal, ge, &s, MASK_VALUE, None);
                s = masked;
            }
            let block_max = f32_tensor(&[PMAX, 1], nl::sbuf);
            nisa::tensor_reduce(&block_max, nl::AluOp::Maximum, &s, &[1], None);
            nisa::tensor_tensor(m_new, m, &block_max, nl::AluOp::Maximum, None);
            let neg_m = f32_tensor(&[PMAX, 1], nl::sbuf);
            nisa::tensor_scalar(&neg_m, m_new, nl::AluOp::Multiply, -1.0, None);
            let (p, row_sum) = (
                f32_tensor(&[PMAX, nk], nl::sbuf),
                f32_tensor(&[PMAX, 1], nl::sbuf),
            );
            let bias = nisa::ActivationOpts::new().bias(&neg_m);
            nisa::activation_reduce(&p, nl::ActFn::Exp, &s, nl::AluOp::Add, &row_sum, bias);
            let alpha = f32_tensor(&[PMAX, 1], nl::sbuf);
            let bias = nisa::ActivationOpts::new().bias(&neg_m);
            nisa::activation(&alpha, nl::ActFn::Exp, m, bias);
            // l = l * alpha + row_sum and o = o * alpha + p @ v, in place.
            let then_add = nisa::TensorScalarOpts::new().then(nl::AluOp::Add, &row_sum);
            nisa::tensor_scalar(&l, &l, nl::AluOp::Multiply, &alpha, then_add);
            let pv = f32_tensor(&[PMAX, d], nl::psum);
            for j in nl::affine_range(nk / PMAX) {
                let p_ps = f32_tensor(&[PMAX, PMAX], nl::psum);
                nisa::nc_transpose(&p_ps, p.slice((.., j * PMAX..(j + 1) * PMAX)), None);
                // nl.copy: out of PSUM on the engine the compiler picks (ScalarE).
                let p_t = nl::copy(&p_ps, None);
                nisa::nc_matmul(&pv, &p_t, &v_tiles[k0 / PMAX + j], None);
            }
            nisa::tensor_scalar(&o, &o, nl::AluOp::Multiply, &alpha, None);
            nisa::tensor_tensor(&o, &o, &pv, nl::AluOp::Add, None);
        }
        let m = &m_buf[blocks % 2];
        let inv_l = f32_tensor(&[PMAX, 1], nl::sbuf);
        nisa::reciprocal(&inv_l, &l, None);
        let y = nl::ndarray(&[PMAX, d], q.dtype(), nl::sbuf);
        nisa::tensor_scalar(&y, &o, nl::AluOp::Multiply, &inv_l, None);
        nisa::dma_copy(out.slice((b, h, q0..q0 + PMAX, ..)), &y, None);
        let log_l = f32_tensor(&[PMAX, 1], nl::sbuf);
        nisa::activation(&log_l, nl::ActFn::Log, &l, None);
        let lse_t = f32_tensor(&[PMAX, 1], nl::sbuf);
        nisa::tensor_tensor(&lse_t, &log_l, m, nl::AluOp::Add, None);
        nisa::dma_copy(lse.slice((b, h, .., i..i + 1)), &lse_t, None);
    }
}
