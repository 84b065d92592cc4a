//! The state behind device loops that a running instance keeps (kept apart from
//! `lang::control`, which drives the loops): the launch's estimate [`TripCounts`], the runs
//! of each loop so far and the finished runs.

use crate::error::SourceLoc;
use crate::record::LoopLog;
use std::collections::HashMap;
use std::sync::Arc;

/// Most iterations one run of a device loop may take in nki-rs before the launch fails (a
/// `while_loop` whose condition never becomes zero would otherwise hang the host), unless the
/// launch sets its own ([`Launch::max_loop_iterations`](crate::spmd::Launch::max_loop_iterations)).
/// A limit of the simulator, not of the hardware.
pub const MAX_DEVICE_LOOP_ITERATIONS: u64 = 1 << 24;

/// Trip counts of device loops for estimate mode, where no values exist to decide them: per
/// loop line, one count for every run of the loop or a list consumed one per run (the
/// tokens routed to each expert, say), and optionally a count for every other loop.
///
/// ```
/// use nki_core::nl::TripCounts;
/// let trips = TripCounts::new().line(42, 16).runs(57, [3, 0, 9, 4]).all(1);
/// assert_eq!(trips.count_for(42, 0), Some(16));
/// assert_eq!(trips.count_for(57, 2), Some(9));
/// assert_eq!(trips.count_for(99, 0), Some(1));
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TripCounts {
    lines: Vec<(u32, Vec<u64>, bool)>,
    all: Option<u64>,
    /// The run-time values of dynamic access patterns, per call line: one list for every run
    /// (`true`) or one list per run (`false`).
    values: Vec<(u32, Vec<Vec<i64>>, bool)>,
}

impl TripCounts {
    /// No trip counts: every loop whose trip count is not known fails the estimate.
    pub fn new() -> TripCounts {
        TripCounts::default()
    }

    /// Every run of the device loop at source line `line` takes `n` iterations.
    pub fn line(mut self, line: u32, n: u64) -> TripCounts {
        self.lines.retain(|l| l.0 != line);
        self.lines.push((line, vec![n], true));
        self
    }

    /// The `k`-th run of the device loop at `line` (in each instance) takes `counts[k]`
    /// iterations; a run past the list's end has no trip count.
    pub fn runs(mut self, line: u32, counts: impl IntoIterator<Item = u64>) -> TripCounts {
        self.lines.retain(|l| l.0 != line);
        self.lines.push((line, counts.into_iter().collect(), false));
        self
    }

    /// Every device loop not named by [`line`](Self::line) or [`runs`](Self::runs) takes `n`
    /// iterations.
    pub fn all(mut self, n: u64) -> TripCounts {
        self.all = Some(n);
        self
    }

    /// Every run of the dynamic access pattern at source line `line`
    /// ([`HbmView::ap_dynamic`](crate::hbm::HbmView::ap_dynamic)) reads `values`: its
    /// run-time strides and counts, in the pattern's order (outermost pair first, stride
    /// before count). Estimate mode has no values to read them from.
    pub fn values(mut self, line: u32, values: impl IntoIterator<Item = i64>) -> TripCounts {
        self.values.retain(|l| l.0 != line);
        self.values
            .push((line, vec![values.into_iter().collect()], true));
        self
    }

    /// The `k`-th run of the dynamic access pattern at `line` (in each instance) reads
    /// `runs[k]` (see [`values`](Self::values)); a run past the list's end has none given.
    pub fn values_runs(
        mut self,
        line: u32,
        runs: impl IntoIterator<Item = Vec<i64>>,
    ) -> TripCounts {
        self.values.retain(|l| l.0 != line);
        self.values.push((line, runs.into_iter().collect(), false));
        self
    }

    /// The run-time values of run `run` (0-based, per instance) of the dynamic access
    /// pattern at `line`, if given.
    pub fn values_for(&self, line: u32, run: usize) -> Option<&[i64]> {
        match self.values.iter().find(|l| l.0 == line) {
            Some((_, v, true)) => v.first().map(Vec::as_slice),
            Some((_, v, false)) => v.get(run).map(Vec::as_slice),
            None => None,
        }
    }

    /// The trip count of run `run` (0-based, per instance) of the loop at `line`, if given.
    pub fn count_for(&self, line: u32, run: usize) -> Option<u64> {
        match self.lines.iter().find(|l| l.0 == line) {
            Some((_, v, true)) => v.first().copied(),
            Some((_, v, false)) => v.get(run).copied(),
            None => self.all,
        }
    }
}

/// The device-loop state of a running instance (held by its context's
/// [`InstanceState`](crate::context::InstanceState); the ids of the tiles its loop bodies
/// allocate are the context's `loop_tiles`).
pub(crate) struct Loops {
    /// The launch's trip counts for estimate mode.
    pub(crate) trips: Option<Arc<TripCounts>>,
    /// The most iterations one run of a device loop may take
    /// ([`crate::spmd::Launch::max_loop_iterations`]).
    pub(crate) max_iterations: u64,
    /// The active device loops, outermost first: api, line and the iteration running (what a
    /// budget error names).
    pub(crate) active: Vec<(&'static str, SourceLoc, u64)>,
    /// Runs of each loop line so far (the index into [`TripCounts::runs`]).
    pub(crate) runs: HashMap<SourceLoc, usize>,
    /// Every finished loop run, for the profile.
    pub(crate) log: Vec<LoopLog>,
}

impl Default for Loops {
    fn default() -> Loops {
        Loops {
            trips: None,
            max_iterations: MAX_DEVICE_LOOP_ITERATIONS,
            active: Vec::new(),
            runs: HashMap::new(),
            log: Vec::new(),
        }
    }
}

/// What tracing a branch the launch does not take changes here: the runs of each loop line
/// (so the taken path reads its trip counts by the same run indices), the finished runs the
/// profile lists and the active loops (a branch whose tracing ended inside one).
impl crate::shadow::StateValue for Loops {
    fn checkpoint(&self) -> Box<dyn std::any::Any + Send> {
        Box::new((self.runs.clone(), self.log.len(), self.active.clone()))
    }

    fn rollback(&mut self, saved: Box<dyn std::any::Any + Send>) {
        type Saved = (
            HashMap<SourceLoc, usize>,
            usize,
            Vec<(&'static str, SourceLoc, u64)>,
        );
        if let Ok(s) = saved.downcast::<Saved>() {
            let (runs, log, active) = *s;
            self.runs = runs;
            self.log.truncate(log);
            self.active = active;
        }
    }
}
