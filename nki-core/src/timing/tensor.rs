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
//! - **Throttling** [E S16] (trn2/trn3): the MultiplyMoving rate is limited to
//!   `pe_throttle_start` of its maximum after the engine was idle for more than half the
//!   `pe_throttle_ramp_ns` window (utilisation below 50 % over it), and ramps linearly to full
//!   over `pe_throttle_ramp_ns`.

use super::cost::TensorCost;
use crate::target::TargetSpec;

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
    /// End of the last MultiplyMoving, for the throttle (none yet: minus infinity).
    pe_last_end: f64,
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
            pe_last_end: f64::NEG_INFINITY,
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
        self.pe_last_end = mm_end;
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
    /// at full rate starting at `mm_start` (restarts the ramp after an idle stretch).
    fn throttled(&mut self, spec: &TargetSpec, mm_start: f64, mm_ns: f64) -> f64 {
        if spec.pe_throttle_start >= 1.0 || spec.pe_throttle_ramp_ns <= 0.0 {
            return mm_ns;
        }
        if mm_start - self.pe_last_end > spec.pe_throttle_ramp_ns / 2.0 {
            self.pe_warm = mm_start;
        }
        let progress = ((mm_start - self.pe_warm) / spec.pe_throttle_ramp_ns).clamp(0.0, 1.0);
        mm_ns / (spec.pe_throttle_start + (1.0 - spec.pe_throttle_start) * progress)
    }
}
