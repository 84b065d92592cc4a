//! Recursive doubling and halving over a power-of-two group (the RDH family): log2(r) steps,
//! exchanging with the rank that differs in one bit. All-gather doubles the block range each
//! rank holds; reduce-scatter halves the range each rank sums, keeping the half its bit
//! selects, so rank i ends with the full sum of block i.

use super::{block, sub_view, Call, SLOTS};
use crate::mesh::sharding::MeshView;

/// Recursive-doubling all-gather of `src` into `dst` along `dim`.
pub(super) fn all_gather(c: &Call, src: &MeshView, dst: &MeshView, dim: usize, phase: u32) {
    let (r, base) = (c.size(), phase * SLOTS);
    c.local_copy(src, &block(dst, dim, c.rank, r), base);
    let len = dst.shape()[dim] / r;
    let (mut dist, mut k) = (1, 0u32);
    while dist < r {
        let partner = c.peer(c.rank ^ dist);
        let held = sub_view(dst, dim, (c.rank / dist) * dist * len, dist * len);
        let slot = base + 2 + 2 * k;
        let id = c.send(&held, &held.on(partner), slot);
        c.wait_sent(&[id], slot);
        c.wait_received(1, slot);
        dist *= 2;
        k += 1;
    }
}

/// Recursive-halving reduce-scatter of `src` into `dst` along `dim`.
pub(super) fn reduce_scatter(c: &Call, src: &MeshView, dst: &MeshView, dim: usize, phase: u32) {
    let (r, base) = (c.size(), phase * SLOTS);
    if r == 1 {
        c.local_copy(src, dst, base);
        return;
    }
    let len = dst.shape()[dim];
    // Step 0 reads `src` itself; later steps the f32 partial sums in `acc`; the last step
    // (one block left) writes `dst`: no local copies in or out.
    let acc = c.scratch(base, src.shape());
    let (mut lo, mut n, mut mask, mut k) = (0, r, r / 2, 0u32);
    while mask > 0 {
        let from = if k == 0 { src } else { &acc };
        let half = n / 2;
        let partner = c.peer(c.rank ^ mask);
        let (keep, give) = if c.rank & mask == 0 {
            (lo, lo + half)
        } else {
            (lo + half, lo)
        };
        let mut shape = src.shape().to_vec();
        shape[dim] = half * len;
        let inbox = c.scratch(base + 1 + k, &shape);
        let slot = base + 2 + 2 * k;
        let id = c.send(
            &sub_view(from, dim, give * len, half * len),
            &inbox.on(partner),
            slot,
        );
        c.wait_sent(&[id], slot);
        c.wait_received(1, slot);
        let kept = sub_view(from, dim, keep * len, half * len);
        let mut a = c.read(&kept);
        let b = c.read(&inbox);
        c.accumulate(&mut a, &b, kept.numel());
        if mask == 1 {
            c.write(dst, a);
        } else {
            c.write(&sub_view(&acc, dim, keep * len, half * len), a);
        }
        (lo, n, mask, k) = (keep, half, mask / 2, k + 1);
    }
}
