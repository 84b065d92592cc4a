//! The state behind device loops that a running instance's context holds (kept apart from
//! `lang::control`, which drives the loops through the context): the launch's estimate
//! [`TripCounts`], the active loops, their body tiles' ids and the finished runs.

use crate::error::SourceLoc;
use std::collections::HashMap;
use std::sync::Arc;

/// One run of a device loop by one instance: the records (indices into the instance's record
/// stream) of each iteration.
#[derive(Clone, Debug)]
pub(crate) struct LoopLog {
    /// `nl.fori_loop` or `nl.while_loop`.
    pub(crate) api: &'static str,
    /// The loop's line.
    pub(crate) loc: SourceLoc,
    /// Per iteration: its first record, the first of its loop-branch records, and the end of
    /// its records (`start..branch` is the body, `branch..end` the loop's own branches).
    pub(crate) iterations: Vec<(usize, usize, usize)>,
}

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

    /// The trip count of run `run` (0-based, per instance) of the loop at `line`, if given.
    pub fn count_for(&self, line: u32, run: usize) -> Option<u64> {
        match self.lines.iter().find(|l| l.0 == line) {
            Some((_, v, true)) => v.first().copied(),
            Some((_, v, false)) => v.get(run).copied(),
            None => self.all,
        }
    }
}

/// One active device loop of an instance.
pub(crate) struct Frame {
    pub(crate) loc: SourceLoc,
    /// Allocations per line in the current iteration (the key of a body tile is its line and
    /// how many tiles that line allocated before it in the iteration).
    pub(crate) seen: HashMap<SourceLoc, u32>,
}

/// The device-loop state of a running instance (held by its context).
#[derive(Default)]
pub(crate) struct Loops {
    /// The launch's trip counts for estimate mode.
    pub(crate) trips: Option<Arc<TripCounts>>,
    /// Runs of each loop line so far (the index into [`TripCounts::runs`]).
    pub(crate) runs: HashMap<SourceLoc, usize>,
    pub(crate) stack: Vec<Frame>,
    /// The tile id of each body allocation (loop nest, line, occurrence), kept while the
    /// outermost device loop runs.
    pub(crate) ids: HashMap<(Vec<SourceLoc>, SourceLoc, u32), u64>,
    /// Every finished loop run, for the profile.
    pub(crate) log: Vec<LoopLog>,
}

impl Loops {
    /// The id of a tile allocated at `loc`: inside a device loop, the same id for the same
    /// allocation in every iteration (`fresh` gives a new one the first time); `None`
    /// outside device loops.
    #[inline]
    pub(crate) fn tile_id(&mut self, loc: SourceLoc, fresh: impl FnOnce() -> u64) -> Option<u64> {
        if self.stack.is_empty() {
            return None; // outside device loops (the common case: no lookup)
        }
        self.loop_tile_id(loc, fresh)
    }

    /// [`Loops::tile_id`] inside a device loop.
    fn loop_tile_id(&mut self, loc: SourceLoc, fresh: impl FnOnce() -> u64) -> Option<u64> {
        let top = self.stack.last_mut()?;
        let n = top.seen.entry(loc).or_insert(0);
        let occurrence = *n;
        *n += 1;
        let nest: Vec<SourceLoc> = self.stack.iter().map(|f| f.loc).collect();
        Some(
            *self
                .ids
                .entry((nest, loc, occurrence))
                .or_insert_with(fresh),
        )
    }
}
