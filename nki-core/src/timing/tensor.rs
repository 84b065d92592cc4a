//! TensorE over time (docs/reference/hardware.md §2.2): how consecutive matmuls and
//! transposes share the engine. Each record's two phases cost what
//! [`tensor_cost`](super::cost::tensor_cost) says; this file says when they run.
//!
//! - **Program order**: TensorE runs its records in program order.
//! - **Background LoadStationary** [E S1]: a record's LoadStationary (which waits for its
//!   stationary operand) may start once the previous record's MultiplyMoving has started, and
//!   after the previous LoadStationary; its MultiplyMoving starts after its own LoadStationary,
//!   after the previous MultiplyMoving and once its other operands (moving, accumulator) are
//!   ready. So throughput is bounded by the longer of the two streams.
//! - **Throttling** [E S16] (trn2/trn3): "the TensorE starts at ~50 % of maximum
//!   utilization and ramps to full over ~3 µs; if utilization drops below 50 % over any
//!   ~3 µs window, the limit re-engages". The MultiplyMoving rate is limited to
//!   `pe_throttle_start` of its maximum when the engine first multiplies and whenever its
//!   utilisation over the `pe_throttle_ramp_ns` window before a MultiplyMoving starts (the
//!   MultiplyMovings' full-rate time in the window, over the window; the window begins no
//!   earlier than the engine's first MultiplyMoving) is below `pe_throttle_start`, and ramps
//!   linearly to full over `pe_throttle_ramp_ns` from there. A stream of matmuls that waits
//!   for its operands so long that the engine stays below half its rate therefore runs
//!   throttled throughout, as the profiler's "TE underutil" shows such streams do.

use super::cost::TensorCost;
use crate::target::TargetSpec;
use std::collections::VecDeque;

/// TensorE's state on one NeuronCore between its records.
pub(super) struct TensorE {
    /// End of the last LoadStationary.
    ls_free: f64,
    /// Start of the last MultiplyMoving.
    prev_mm_start: f64,
    /// End of the last MultiplyMoving (when the engine can multiply again).
    mm_free: f64,
    /// Start of the current throttle ramp.
    pe_warm: f64,
    /// Start of the engine's first MultiplyMoving (none yet: NaN), where the utilisation
    /// window begins at the latest.
    pe_first_start: f64,
    /// The MultiplyMovings that may still fall in the utilisation window, oldest first:
    /// start, end and full-rate duration (ns).
    pe_recent: VecDeque<(f64, f64, f64)>,
    /// Sum of the full-rate durations in `pe_recent`.
    pe_recent_work: f64,
}

/// When the two phases of one TensorE record run, ns.
pub(super) struct TensorTimes {
    /// LoadStationary start (the record's start).
    pub ls_start: f64,
    /// LoadStationary end.
    pub ls_end: f64,
    /// MultiplyMoving start.
    pub mm_start: f64,
    /// MultiplyMoving end (the record's end).
    pub mm_end: f64,
    /// The previous MultiplyMoving, not the record's own LoadStationary or operands, was the
    /// last thing its MultiplyMoving waited for.
    pub engine_bound: bool,
}

impl TensorE {
    /// An idle engine.
    pub fn new() -> TensorE {
        TensorE {
            ls_free: 0.0,
            prev_mm_start: 0.0,
            mm_free: 0.0,
            pe_warm: 0.0,
            pe_first_start: f64::NAN,
            pe_recent: VecDeque::new(),
            pe_recent_work: 0.0,
        }
    }

    /// Places the next record in program order, costing `cost`, whose stationary operand is
    /// ready at `ready` and whose other operands are ready at `ready_late`.
    pub fn place(
        &mut self,
        spec: &TargetSpec,
        cost: TensorCost,
        ready: f64,
        ready_late: f64,
    ) -> TensorTimes {
        let ls_start = ready.max(self.ls_free).max(self.prev_mm_start);
        let ls_end = ls_start + cost.ls_ns;
        let mm_start = ls_end.max(self.mm_free).max(ready_late);
        let engine_bound = self.mm_free >= ls_end && self.mm_free > ready_late;
        let mm_end = mm_start + self.throttled(spec, mm_start, cost.mm_ns);
        if spec.pe_throttle_start < 1.0 {
            self.pe_recent.push_back((mm_start, mm_end, cost.mm_ns));
            self.pe_recent_work += cost.mm_ns;
        }
        self.ls_free = ls_end;
        self.prev_mm_start = mm_start;
        self.mm_free = mm_end;
        TensorTimes {
            ls_start,
            ls_end,
            mm_start,
            mm_end,
            engine_bound,
        }
    }

    /// MultiplyMoving duration under the utilisation limit, for a MultiplyMoving of `mm_ns`
    /// at full rate starting at `mm_start` (restarts the ramp when the engine's utilisation
    /// over the window before `mm_start` is below the limit's start).
    fn throttled(&mut self, spec: &TargetSpec, mm_start: f64, mm_ns: f64) -> f64 {
        if spec.pe_throttle_start >= 1.0 || spec.pe_throttle_ramp_ns <= 0.0 {
            return mm_ns;
        }
        if self.pe_first_start.is_nan() {
            self.pe_first_start = mm_start;
            self.pe_warm = mm_start;
        } else if self.utilisation_is_low(spec, mm_start) {
            self.pe_warm = mm_start;
        }
        let progress = ((mm_start - self.pe_warm) / spec.pe_throttle_ramp_ns).clamp(0.0, 1.0);
        mm_ns / (spec.pe_throttle_start + (1.0 - spec.pe_throttle_start) * progress)
    }

    /// True when the MultiplyMovings' full-rate time in the window of `pe_throttle_ramp_ns`
    /// before `t` (from the first MultiplyMoving at the earliest) is below
    /// `pe_throttle_start` of the window. Drops the MultiplyMovings that ended before it.
    fn utilisation_is_low(&mut self, spec: &TargetSpec, t: f64) -> bool {
        let from = (t - spec.pe_throttle_ramp_ns).max(self.pe_first_start);
        while let Some(&(_, end, work)) = self.pe_recent.front() {
            if end > from {
                break;
            }
            self.pe_recent.pop_front();
            self.pe_recent_work -= work;
        }
        if self.pe_recent.is_empty() {
            // Exactly zero again (no rounding left over from the sums).
            self.pe_recent_work = 0.0;
        }
        let span = t - from;
        if span <= 0.0 {
            return false;
        }
        // MultiplyMovings run one after another, so only the oldest can start before the
        // window: its share outside the window does not count.
        let outside = match self.pe_recent.front() {
            Some(&(start, end, work)) if start < from => work * (from - start) / (end - start),
            _ => 0.0,
        };
        // A stream held at exactly the limit is not below it (rounding aside).
        self.pe_recent_work - outside < spec.pe_throttle_start * span * (1.0 - 1e-9)
    }
}
