//! Rotary position embedding (the nki-samples `rotary` tutorial, HF `apply_rotary_pos_emb`):
//! `out = x * cos + rotate_half(x) * sin` with `rotate_half(x) = [-x2, x1]` (the two halves
//! of the head dimension swapped, the first negated), for `x[B, H, S, D]` and `cos`,
//! `sin[S, D]`.
//!
//! Tiling: sequence positions go to partitions, 128 per tile (the last may be partial), the
//! head dimension is the free dimension. For each sequence tile, `cos` and a sign-folded
//! `sin' = [-sin1, sin2]` (negated in place) are loaded once and reused by every (batch,
//! head); per (batch, head): one load, the two half products `x2 * sin'1` and `x1 * sin'2`
//! written straight into the two halves of the rotated tile, `x * cos` on VectorE added into
//! it in place, one store.
//!
//! [`rotary_07`](fn@rotary_07) is its NKI 0.7 twin: the same instructions, on tensors from
//! `nl::ndarray`, data moved by `nisa::dma_copy`, every instruction writing into a destination
//! given first, the output returned.
//!
//! Bottleneck (modelled, `rotary` example): DMA at the tutorial's sweep shapes: every
//! `[128, 128]` fp32 tile moves 64 KiB in and 64 KiB out against four short VectorE
//! instructions; `[8, 32, 512, 128]` takes 1.28 ms on trn1 (DMA 100 % busy) and 1.04 ms on trn2
//! (DMA 88 %).

use crate::checks::{expect_rank, expect_shape, require};
use nki_core::prelude::*;
// The Beta-1 instruction forms (allocating, `_into` twins): the seeds' dialect.
use nki_core::nisa::classic as nisa;

const OP: &str = "rotary";

/// Checks `x[B, H, S, D]` (D even) and `cos`, `sin[S, D]`; returns `[B, H, S, D]`.
#[track_caller]
fn dims(op: &'static str, x: &[usize], cos: &[usize], sin: &[usize]) -> [usize; 4] {
    let s = expect_rank(op, "x", x, 4);
    let (seq, d) = (s[2], s[3]);
    require(op, d % 2 == 0, || {
        format!("head dimension {d} of x{s:?} must be even")
    });
    expect_shape(op, "cos", cos, &[seq, d]);
    expect_shape(op, "sin", sin, &[seq, d]);
    [s[0], s[1], seq, d]
}

/// `out = x * cos + rotate_half(x) * sin` for `x[B, H, S, D]`, `cos`/`sin[S, D]`, one
/// instance (grid `[1]`). `D` must be even.
#[nki_kernel]
pub fn rotary<T: Element>(x: &Hbm<T>, cos: &Hbm<T>, sin: &Hbm<T>, out: &mut Hbm<T>) {
    let [batch, heads, seq, d] = dims(OP, x.shape(), cos.shape(), sin.shape());
    expect_shape(OP, "out", out.shape(), x.shape());
    let half = d / 2;
    let pmax = nl::tile_size::PMAX;
    for t in nl::affine_range(nl::num_tiles(seq, pmax)) {
        let r = nl::tile_range(t, pmax, seq);
        let cos_t = nl::load_as(cos.slice((r.clone(), ..)), DType::F32);
        let sin_t = nl::load_as(sin.slice((r.clone(), ..)), DType::F32);
        // sin' = [-sin1, sin2] (negated in place), so that
        // rotate_half(x) * sin = [x2 * sin'1, x1 * sin'2].
        let signed = sin_t.slice((.., ..half));
        nisa::tensor_scalar_into(
            signed,
            signed,
            nl::AluOp::Multiply,
            -1.0,
            Default::default(),
        );
        for b in nl::affine_range(batch) {
            for h in nl::affine_range(heads) {
                let xt = nl::load_as(x.slice((b, h, r.clone(), ..)), DType::F32);
                let rotated = nl::ndarray(&[r.len(), d], DType::F32, nl::SBUF);
                let mul = nl::AluOp::Multiply;
                let (lo, hi) = (rotated.slice((.., ..half)), rotated.slice((.., half..)));
                nisa::tensor_tensor_into(
                    lo,
                    xt.slice((.., half..)),
                    sin_t.slice((.., ..half)),
                    mul,
                );
                nisa::tensor_tensor_into(
                    hi,
                    xt.slice((.., ..half)),
                    sin_t.slice((.., half..)),
                    mul,
                );
                let x_cos = nisa::tensor_tensor(&xt, &cos_t, mul, None);
                nisa::tensor_tensor_into(&rotated, &rotated, &x_cos, nl::AluOp::Add);
                nl::store(out.slice((b, h, r.clone(), ..)), &rotated);
            }
        }
    }
}

/// The NKI 0.7 twin of [`rotary`](fn@rotary): `x * cos + rotate_half(x) * sin` for
/// `x[B, H, S, D]`, returned, on one core (launch it on `[1]`). The same tiles and instructions
/// in 0.7's form: tensors from `nl::ndarray`, data moved (and cast to fp32) by
/// `nisa::dma_copy`, each `nisa` instruction writing into a destination given first. It
/// computes the same values as the Beta-1 kernel.
#[nki_kernel(nki = "0.7")]
pub fn rotary_07<T: Element>(x: &Hbm<T>, cos: &Hbm<T>, sin: &Hbm<T>) -> Hbm<T> {
    // This file's `nisa` is Beta 1's allocating forms; the twin uses NKI 0.7's.
    use nki_core::nisa;
    let [batch, heads, seq, d] = dims("rotary_07", x.shape(), cos.shape(), sin.shape());
    let out = nl::ndarray(x.shape(), x.dtype(), nl::shared_hbm);
    let (half, pmax, mul) = (d / 2, nl::tile_size::PMAX, nl::AluOp::Multiply);
    for t in nl::affine_range(nl::num_tiles(seq, pmax)) {
        let r = nl::tile_range(t, pmax, seq);
        let n = r.len();
        let (cos_t, sin_t) = (
            nl::ndarray(&[n, d], DType::F32, nl::sbuf),
            nl::ndarray(&[n, d], DType::F32, nl::sbuf),
        );
        nisa::dma_copy(&cos_t, cos.slice((r.clone(), ..)), None);
        nisa::dma_copy(&sin_t, sin.slice((r.clone(), ..)), None);
        // sin' = [-sin1, sin2] (negated in place), so that
        // rotate_half(x) * sin = [x2 * sin'1, x1 * sin'2].
        let signed = sin_t.slice((.., ..half));
        nisa::tensor_scalar(&signed, &signed, mul, -1.0, None);
        for b in nl::affine_range(batch) {
            for h in nl::affine_range(heads) {
                let xt = nl::ndarray(&[n, d], DType::F32, nl::sbuf);
                nisa::dma_copy(&xt, x.slice((b, h, r.clone(), ..)), None);
                let rotated = nl::ndarray(&[n, d], DType::F32, nl::sbuf);
                let (lo, hi) = (rotated.slice((.., ..half)), rotated.slice((.., half..)));
                let (x1, x2) = (xt.slice((.., ..half)), xt.slice((.., half..)));
                nisa::tensor_tensor(lo, x2, sin_t.slice((.., ..half)), mul, None);
                nisa::tensor_tensor(hi, x1, sin_t.slice((.., half..)), mul, None);
                let x_cos = nl::ndarray(&[n, d], DType::F32, nl::sbuf);
                nisa::tensor_tensor(&x_cos, &xt, &cos_t, mul, None);
                nisa::tensor_tensor(&rotated, &rotated, &x_cos, nl::AluOp::Add, None);
                nisa::dma_copy(out.slice((b, h, r.clone(), ..)), &rotated, None);
            }
        }
    }
    out
}
