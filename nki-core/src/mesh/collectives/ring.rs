//! Ring algorithms: r-1 steps, each rank sending to the next rank of the group and receiving
//! from the previous one. All-gather forwards the block it received last; reduce-scatter
//! forwards a running f32 partial sum, so rank i ends with the full sum of block i.

use super::{block, Call, SLOTS};
use crate::mesh::sharding::MeshView;

/// Ring all-gather of `src` into `dst` along `dim`.
pub(super) fn all_gather(c: &Call, src: &MeshView, dst: &MeshView, dim: usize, phase: u32) {
    let (r, base) = (c.size(), phase * SLOTS);
    c.local_copy(src, &block(dst, dim, c.rank, r), base);
    let right = c.peer(c.rank + 1);
    for s in 0..r - 1 {
        let v = block(dst, dim, (c.rank + r - s) % r, r);
        let slot = base + 2 + 2 * s as u32;
        let id = c.send(&v, &v.on(right), slot);
        c.wait_sent(&[id], slot);
        c.wait_received(1, slot);
    }
}

/// Ring reduce-scatter of `src` into `dst` along `dim`.
pub(super) fn reduce_scatter(c: &Call, src: &MeshView, dst: &MeshView, dim: usize, phase: u32) {
    let (r, base) = (c.size(), phase * SLOTS);
    if r == 1 {
        c.local_copy(src, dst, base);
        return;
    }
    let shape = dst.shape().to_vec();
    let partial = c.scratch(base, &shape);
    let right = c.peer(c.rank + 1);
    for s in 0..r - 1 {
        let send_block = (c.rank + 2 * r - s - 1) % r;
        let from = if s == 0 {
            block(src, dim, send_block, r)
        } else {
            partial.clone()
        };
        let inbox = c.scratch(base + 1 + s as u32, &shape);
        let slot = base + 2 * s as u32;
        let id = c.send(&from, &inbox.on(right), slot);
        c.wait_sent(&[id], slot);
        c.wait_received(1, slot);
        let mut acc = c.read(&inbox);
        let own = c.read(&block(src, dim, (c.rank + 2 * r - s - 2) % r, r));
        c.accumulate(&mut acc, &own, dst.numel());
        c.write(if s == r - 2 { dst } else { &partial }, acc);
    }
}
