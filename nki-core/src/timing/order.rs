//! Scheduling rules: when a record may start relative to the records before it
//! (docs/reference/hardware.md §2.1: in-order engines synchronised by semaphores).
//!
//! - **Dependencies** ([`Kind`], [`ready_after`]): a record that reads what an earlier one
//!   wrote (RAW) starts after the producer ends plus the consumer's dependency latency
//!   ([`dependency_latency_ns`](super::cost::dependency_latency_ns): pipeline drain and
//!   semaphore); a DMA consumer and TensorE after TensorE pay none (the DMA's trigger latency
//!   is charged when it is queued, [`TargetSpec::dma_fixed_latency_ns`]; TensorE forwards
//!   within its own pipeline). A write after a read or a write (WAR, WAW) starts after the
//!   earlier record ends. Two DMA writes to one HBM tensor are only kept in order
//!   ([`write_after_write`]).
//! - **Program order and the reorder window** ([`may_reorder`], [`WINDOW`], [`Timeline`]): an
//!   engine runs its records in program order, except that records in different iterations
//!   of one `affine_range` loop are independent by contract and may be interleaved as the
//!   compiler schedules them. VectorE, ScalarE, GpSimdE and Sync look up to [`WINDOW`] records
//!   ahead for one that is ready and place it in the earliest idle gap of their recent
//!   timeline (list scheduling). TensorE keeps program order (see [`tensor`](super::tensor)).
//!
//! [`TargetSpec::dma_fixed_latency_ns`]: crate::target::TargetSpec::dma_fixed_latency_ns

use crate::record::{Engine, Instr};

/// How a dependency constrains its successor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// Read after write: after the producer ends, plus the consumer's dependency latency.
    Raw,
    /// Write after read / write after write: after the earlier record ends.
    After,
    /// Kept in order only: no earlier than the earlier record starts.
    Order,
}

/// One dependency: the later record (`succ`) and how the earlier one constrains it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Edge {
    /// Global index of the later record.
    pub succ: u32,
    /// How it is constrained.
    pub kind: Kind,
    /// For TensorE successors: the constraint applies to the MultiplyMoving phase (only the
    /// first operand read, the stationary, gates LoadStationary).
    pub late: bool,
}

/// The kind of dependency a write by `engine` has on an earlier overlapping write by `earlier`
/// to the same buffer: [`Kind::Order`] for two DMA writes to an HBM tensor (HBM regions are
/// bounding byte ranges, so the tiles of one output tensor look overlapping when they are
/// not; the DMA queues keep them in order), else [`Kind::After`].
pub(super) fn write_after_write(hbm: bool, engine: Engine, earlier: Engine) -> Kind {
    if hbm && engine == Engine::Dma && earlier == Engine::Dma {
        Kind::Order
    } else {
        Kind::After
    }
}

/// The earliest time a dependency of kind `kind` lets its successor (on `succ`) start, given
/// its predecessor (on `pred`) started at `start` and ended at `end`; `latency_ns[e]` is the
/// dependency latency of a consumer on engine `e`.
#[inline]
pub(super) fn ready_after(
    kind: Kind,
    pred: Engine,
    succ: Engine,
    start: f64,
    end: f64,
    latency_ns: &[f64; Engine::COUNT],
) -> f64 {
    match kind {
        Kind::Raw => {
            let lat = if succ == Engine::Dma || (succ == Engine::Tensor && pred == Engine::Tensor) {
                0.0
            } else {
                latency_ns[succ.index()]
            };
            end + lat
        }
        Kind::After => end,
        Kind::Order => start,
    }
}

/// True when record `a` (of instance `ia`) may run before or beside record `b` (of instance
/// `ib`) on one engine although `b` comes first in program order: both are of one program
/// instance and lie in different iterations of a common `affine_range` loop.
#[inline]
pub(super) fn may_reorder(ia: u32, a: &Instr, ib: u32, b: &Instr) -> bool {
    ia == ib && a.independent_of(b)
}

/// How far ahead in its queue an engine looks for a ready, independent record, and how many
/// of its recent busy intervals stay open for such records to fill. A modelling choice (the
/// compiler's scheduling window is not public); it bounds the work per record.
pub(crate) const WINDOW: usize = 32;

/// The recent timeline of one compute engine: busy intervals `(start, end, record)` sorted by
/// start, at most [`WINDOW`] of them; everything before `closed` is no longer fillable.
#[derive(Default)]
pub(super) struct Timeline {
    /// The open busy intervals, by start.
    pub busy: Vec<(f64, f64, u32)>,
    closed: f64,
}

impl Timeline {
    /// Earliest start `>= lo` of a `dur`-long interval that overlaps no busy interval.
    pub fn fit(&self, lo: f64, dur: f64) -> f64 {
        let mut t = lo.max(self.closed);
        for &(s, e, _) in &self.busy {
            if e <= t {
                continue;
            }
            if s >= t + dur {
                break;
            }
            t = e;
        }
        t
    }

    /// When the engine is free of every interval placed so far: the latest end (0 when none).
    pub fn free_at(&self) -> f64 {
        self.busy
            .iter()
            .map(|&(_, e, _)| e)
            .fold(self.closed, f64::max)
    }

    /// Records that `rec` occupies the engine from `s` to `e`; the oldest interval beyond
    /// [`WINDOW`] closes.
    pub fn insert(&mut self, s: f64, e: f64, rec: u32) {
        let pos = self.busy.partition_point(|x| x.0 <= s);
        self.busy.insert(pos, (s, e, rec));
        if self.busy.len() > WINDOW {
            let (_, old_end, _) = self.busy.remove(0);
            self.closed = self.closed.max(old_end);
        }
    }

    /// The record whose interval ends last at or before `t` (what held the engine until `t`).
    pub fn holder(&self, t: f64) -> u32 {
        // The last of the latest ends (as `Iterator::max_by` picks; ends are never NaN).
        let (lim, mut end, mut rec) = (t + 1e-9, f64::NEG_INFINITY, u32::MAX);
        for &(_, e, r) in &self.busy {
            if e <= lim && e >= end {
                (end, rec) = (e, r);
            }
        }
        rec
    }
}
