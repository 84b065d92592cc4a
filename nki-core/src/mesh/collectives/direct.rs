//! Direct ("mesh") algorithms: one step in which every rank sends to every other rank at once
//! (O(1) steps, links over-subscribed), plus the pairwise all-to-all and the permute.
//! Reductions sum the received buffers in rank order, so every rank computes the same sum.

use super::{block, Call, SLOTS};
use crate::mesh::sharding::MeshView;

/// Sends `src(q)` to `dst(q)` on every other rank q (slot `slot`), waits for the sends and for
/// r-1 arrivals.
fn exchange(c: &Call, src: impl Fn(usize) -> MeshView, dst: impl Fn(usize) -> MeshView, slot: u32) {
    let r = c.size();
    let ids: Vec<u64> = (1..r)
        .map(|q| {
            let rank = (c.rank + q) % r;
            c.send(&src(rank), &dst(rank).on(c.peer(rank)), slot)
        })
        .collect();
    c.wait_sent(&ids, slot);
    c.wait_received(r - 1, slot);
}

/// Direct all-gather.
pub(super) fn all_gather(c: &Call, src: &MeshView, dst: &MeshView, dim: usize, phase: u32) {
    let (r, base) = (c.size(), phase * SLOTS);
    let mine = block(dst, dim, c.rank, r);
    c.local_copy(src, &mine, base);
    exchange(c, |_| src.clone(), |_| mine.clone(), base + 2);
}

/// Sums `own` and the blocks of `inbox` along `dim` (block q from rank q) in rank order
/// into `dst`.
fn sum_in_rank_order(c: &Call, own: &MeshView, inbox: &MeshView, dim: usize, dst: &MeshView) {
    let r = c.size();
    let mut acc = vec![0.0f32; if c.executes() { dst.numel() } else { 0 }];
    for q in 0..r {
        let v = if q == c.rank {
            own.clone()
        } else {
            block(inbox, dim, q, r)
        };
        let vals = c.read(&v);
        // The first buffer starts the sum: only the r - 1 others are DMA reductions.
        c.accumulate(&mut acc, &vals, if q == 0 { 0 } else { dst.numel() });
    }
    c.write(dst, acc);
}

/// Direct reduce-scatter: block q of every rank goes to block (sender's rank) of rank q's
/// inbox, which sums them.
pub(super) fn reduce_scatter(c: &Call, src: &MeshView, dst: &MeshView, dim: usize, phase: u32) {
    let (r, base) = (c.size(), phase * SLOTS);
    let inbox = c.scratch(base, src.shape());
    let mine = block(&inbox, dim, c.rank, r);
    exchange(c, |q| block(src, dim, q, r), |_| mine.clone(), base + 2);
    sum_in_rank_order(c, &block(src, dim, c.rank, r), &inbox, dim, dst);
}

/// Direct all-reduce: every rank's whole buffer goes to every other rank.
pub(super) fn all_reduce(c: &Call, src: &MeshView, dst: &MeshView) {
    let r = c.size();
    let mut shape = src.shape().to_vec();
    shape[0] *= r;
    let inbox = c.scratch(0, &shape);
    let mine = block(&inbox, 0, c.rank, r);
    exchange(c, |_| src.clone(), |_| mine.clone(), 2);
    sum_in_rank_order(c, src, &inbox, 0, dst);
}

/// All-to-all: block j of rank i to block i of rank j; `pairwise` sends one block per step
/// (to rank+s at step s), otherwise all at once.
pub(super) fn all_to_all(c: &Call, src: &MeshView, dst: &MeshView, dim: usize, pairwise: bool) {
    let r = c.size();
    let mine = block(dst, dim, c.rank, r);
    c.local_copy(&block(src, dim, c.rank, r), &mine, 0);
    if !pairwise {
        exchange(c, |q| block(src, dim, q, r), |_| mine.clone(), 2);
        return;
    }
    for s in 1..r {
        let to = (c.rank + s) % r;
        let slot = 2 * s as u32;
        let id = c.send(&block(src, dim, to, r), &mine.on(c.peer(to)), slot);
        c.wait_sent(&[id], slot);
        c.wait_received(1, slot);
    }
}

/// collective_permute: rank a sends `src` to rank b's `dst` for each pair (a, b).
pub(super) fn permute(c: &Call, src: &MeshView, dst: &MeshView, pairs: &[(usize, usize)]) {
    if let Some(&(_, b)) = pairs.iter().find(|p| p.0 == c.rank) {
        let id = c.send(src, &dst.on(c.peer(b)), 2);
        c.wait_sent(&[id], 2);
    }
    if pairs.iter().any(|p| p.1 == c.rank) {
        c.wait_received(1, 2);
    }
}
