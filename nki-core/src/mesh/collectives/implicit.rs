//! The ring permutes of NKI 0.7 whose peers are implicit: `collective_permute_implicit` (each
//! rank of a rank-list sends to its successor in the list's ring order and receives from its
//! predecessor), `collective_permute_implicit_reduce` (each rank sends `op(src0, src1)`,
//! reduced by the DMA engines, to its successor) and
//! `collective_permute_implicit_current_processing_rank_id` (the rank whose data a rank
//! holds after `k` ring steps).
//!
//! From the 0.7 pages: the outer lists are channels, each with exactly one source and one
//! destination tensor (no coalescing); at most 4 channels for a replica group holding every
//! device of its node, 2 otherwise; channel ids are distinct. Operands are HBM views of the
//! running device (as `collective_permute`, whose page rules out SBUF). Each channel is its
//! own transfer, so channels overlap on the links; the call pays the collective fixed cost
//! once (the reducing one for the reducing form), and a rank sends only once its successor
//! has entered the call (the ranks' handshake, so a ring loop's ping-pong buffers are not
//! overwritten while the successor still reads them).

use super::kind::{reducing, ReduceOp};
use super::{at_rank, check_local, check_scaled, Call, CollectiveKind, SLOTS};
use crate::context;
use crate::error::{ErrorKind, NkiError, Result, SourceLoc};
use crate::isa::NkiScalar;
use crate::mesh::device::with_device;
use crate::mesh::dma::signal;
use crate::mesh::links::Topology;
use crate::mesh::sharding::MeshView;
use crate::mesh::topology::ReplicaGroups;

/// Scratch key of a channel's reduced buffer (the reducing form).
const REDUCED: u32 = 9 * SLOTS;

/// Semaphore slot of the successor's "entered" signal (channel `i` uses slots `2i`, `2i + 1`).
const READY: u32 = 8;

/// The most channels a group may use: 4 for a group holding every device of its node, 2
/// otherwise (the 0.7 pages).
fn max_channels(links: &Topology, group: &[usize]) -> usize {
    let spec = links.spec();
    let per_node = spec.devices_per_chip * spec.chips_per_node;
    let node = |d: usize| links.chip(d) / spec.chips_per_node;
    if group.len() == per_node && group.iter().all(|&d| node(d) == node(group[0])) {
        4
    } else {
        2
    }
}

/// The one tensor of channel `i`'s list.
fn one<'v>(op: &'static str, what: &str, i: usize, list: &'v [MeshView]) -> Result<&'v MeshView> {
    match list {
        [v] => Ok(v),
        _ => Err(NkiError::new(
            ErrorKind::InvalidArgument,
            op,
            format!(
                "channel {i} of {what} must hold exactly one tensor (coalesced collectives are not supported), got {}",
                list.len()
            ),
        )),
    }
}

/// Checks the channel lists and ids and returns, per channel, (src0, src1, dst).
fn channels(
    op: &'static str,
    srcs0: &[Vec<MeshView>],
    srcs1: Option<&[Vec<MeshView>]>,
    dsts: &[Vec<MeshView>],
    ids: &[usize],
) -> Result<Vec<(MeshView, Option<MeshView>, MeshView)>> {
    let n = ids.len();
    let lens = [srcs0.len(), srcs1.map_or(n, <[_]>::len), dsts.len()];
    if n == 0 || lens.iter().any(|&l| l != n) {
        return Err(NkiError::new(
            ErrorKind::InvalidArgument,
            op,
            format!("channel_ids {ids:?} must name one channel per entry of the source and destination lists, got lists of {lens:?}"),
        ));
    }
    for (i, id) in ids.iter().enumerate() {
        if ids[..i].contains(id) {
            return Err(NkiError::new(
                ErrorKind::InvalidArgument,
                op,
                format!("channel id {id} is repeated in channel_ids {ids:?}"),
            ));
        }
    }
    let (s0, d) = ("srcs_by_channel", "dsts_by_channel");
    (0..n)
        .map(|i| {
            let a = one(op, s0, i, &srcs0[i])?.clone();
            let b = match srcs1 {
                Some(l) => Some(one(op, "srcs1_by_channel", i, &l[i])?.clone()),
                None => None,
            };
            let dst = one(op, d, i, &dsts[i])?.clone();
            let (a_name, d_name) = (format!("{s0}[{i}]"), format!("{d}[{i}]"));
            check_scaled(op, (&a_name, &a), (&d_name, &dst), 0, 1)?;
            if let Some(b) = &b {
                check_scaled(
                    op,
                    (&a_name, &a),
                    (&format!("srcs1_by_channel[{i}]"), b),
                    0,
                    1,
                )?;
            }
            Ok((a, b, dst))
        })
        .collect()
}

/// A ring permute over `channel_ids` (see the module doc); `srcs1` and `op` make it the
/// reducing form.
#[allow(clippy::too_many_arguments)]
pub(crate) fn permute(
    srcs0: &[Vec<MeshView>],
    srcs1: Option<&[Vec<MeshView>]>,
    dsts: &[Vec<MeshView>],
    group: &ReplicaGroups,
    op: ReduceOp,
    channel_ids: &[usize],
    loc: SourceLoc,
) {
    let (kind, name) = match srcs1 {
        None => (
            CollectiveKind::PermuteImplicit,
            "collective_permute_implicit",
        ),
        Some(_) => (
            CollectiveKind::PermuteImplicitReduce,
            "collective_permute_implicit_reduce",
        ),
    };
    let chans = channels(name, srcs0, srcs1, dsts, channel_ids).map_err(|e| {
        // The rank at fault, when the running device is in the group.
        let me = with_device(name, loc, |d| d.id);
        match group.find(me) {
            Some((g, rank)) => at_rank(e, rank, g),
            None => e,
        }
    });
    let chans = context::check(chans, loc);
    let shapes: Vec<_> = chans
        .iter()
        .map(|(a, _, d)| (a.shape(), d.shape()))
        .collect();
    let sig = format!("{name} of {shapes:?} on channels {channel_ids:?} ({op:?})");
    let Some(mut c) = Call::open(kind, None, group, sig, loc, false) else {
        return;
    };
    // The ranks' handshake: each rank tells its predecessor it has entered (so its earlier
    // reads of its destinations are done) before the fixed cost, and a rank sends only to a
    // successor that has entered.
    let n = c.size();
    if n > 1 {
        c.name_slots(READY);
        signal(c.peer(c.rank + n - 1), c.sem(READY), 1, loc);
    }
    c.fixed_cost(kind, false);
    let most = max_channels(&c.shared.links, &c.group);
    if let Some(&id) = channel_ids.iter().find(|&&id| id >= most) {
        let e = NkiError::new(
            ErrorKind::InvalidArgument,
            name,
            format!("channel_ids: channel id {id} is beyond the {most} channels a group of {} ranks has here (4 for a group holding every device of its node, 2 otherwise)", c.size()),
        );
        context::raise(c.at_rank(e), loc);
    }
    for (i, (a, b, d)) in chans.iter().enumerate() {
        check_local(&c, name, a, &format!("srcs_by_channel[{i}]"));
        if let Some(b) = b {
            check_local(&c, name, b, &format!("srcs1_by_channel[{i}]"));
        }
        check_local(&c, name, d, &format!("dsts_by_channel[{i}]"));
    }
    c.elem_bytes = chans[0].0.storage().dtype.size();
    c.set_bytes(chans.iter().map(|(a, _, d)| a.bytes().max(d.bytes())).sum());
    let next = c.peer(c.rank + 1);
    if n > 1 {
        c.wait_received(1, READY);
    }
    let mut sends = Vec::with_capacity(chans.len());
    for (i, (a, b, d)) in chans.iter().enumerate() {
        let slot = 2 * i as u32; // below READY: at most 4 channels
        let from = match b {
            None => a.clone(),
            Some(b) => {
                // op(src0, src1) into a buffer of the destination's dtype, by the DMA engines.
                let buf = c.scratch_of(REDUCED + i as u32, a.shape(), d.storage().dtype);
                let mut acc = c.read(a);
                reducing(op, || c.accumulate(&mut acc, &c.read(b), a.numel()));
                c.write(&buf, acc);
                buf
            }
        };
        if c.size() == 1 {
            c.local_copy(&from, d, slot);
        } else {
            sends.push((c.send(&from, &d.on(next), slot), slot));
        }
    }
    for (id, slot) in sends {
        c.wait_sent(&[id], slot);
        c.wait_received(1, slot);
    }
    c.finish();
}

/// The rank whose data this rank holds after `iteration` ring steps: its own at 0, then its
/// predecessors' going back around the ring (`channel_id` must be a channel the group has).
pub(crate) fn processing_rank(
    iteration: usize,
    group: &ReplicaGroups,
    channel_id: usize,
    loc: SourceLoc,
) -> NkiScalar {
    let op = "collective_permute_implicit_current_processing_rank_id";
    let (me, links) = with_device(op, loc, |d| (d.id, d.shared.links.clone()));
    let Some((ring, pos)) = group.find(me) else {
        context::raise(
            NkiError::new(
                ErrorKind::InvalidDevice,
                op,
                format!(
                    "device {me} is in no rank-list of the replica group {:?}",
                    group.groups()
                ),
            ),
            loc,
        );
    };
    let most = max_channels(&links, ring);
    if channel_id >= most {
        context::raise(
            NkiError::new(
                ErrorKind::InvalidArgument,
                op,
                format!("channel id {channel_id} is beyond the {most} channels a group of {} ranks has here", ring.len()),
            ),
            loc,
        );
    }
    let n = ring.len();
    let rank = ring[(pos + n - iteration % n) % n];
    NkiScalar::known(rank as i32)
}
