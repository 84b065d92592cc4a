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
//! Bottleneck (modelled, `rotary` example): DMA at the tutorial's sweep shapes: every
//! `[128, 128]` fp32 tile moves 64 KiB in and 64 KiB out against four short VectorE
//! instructions; `[8, 32, 512, 128]` takes 1.28 ms on trn1 (DMA 100 % busy) and 1.04 ms on trn2
//! (DMA 88 %).

use crate::checks::{expect_rank, expect_shape, require};
use nki_core::prelude::*;
// The Beta-1 instruction forms (allocating, `_into` twins): the seeds' dialect.
use nki_core::nisa::classic as nisa;

const OP: &str = "rotary";

/// `out = x * cos + rotate_half(x) * sin` for `x[B, H, S, D]`, `cos`/`sin[S, D]`, one
/// instance (grid `[1]`). `D` must be even.
#[nki_kernel]
pub fn rotary<T: Element>(x: &Hbm<T>, cos: &Hbm<T>, sin: &Hbm<T>, out: &mut Hbm<T>) {
    let s = expect_rank(OP, "x", x.shape(), 4);
    let (batch, heads, seq, d) = (s[0], s[1], s[2], s[3]);
    require(OP, d % 2 == 0, || {
        format!("head dimension {d} of x{s:?} must be even")
    });
    expect_shape(OP, "cos", cos.shape(), &[seq, d]);
    expect_shape(OP, "sin", sin.shape(), &[seq, d]);
    expect_shape(OP, "out", out.shape(), s);
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
