//! The access tracker of an HBM tensor: which program instance stored, updated or loaded
//! which elements during the running launch, kept as rectangles ([`super::rect`]), one or a
//! few per access, so its cost follows the number of accesses, not the tensor's size.
//!
//! Every tracked access (a store, `atomic_rmw` or `dma_copy` into a kernel output, a load of
//! one) is checked against the earlier accesses it overlaps: two accesses of one element at
//! unordered positions (different instances, or different iterations of one affine_range)
//! are an output-dependency error unless both are loads or both atomic updates
//! ([`Writers::conflicts`]). A load also finds the first element no write of its own
//! instance or of an earlier one (in launch order) covers: an uninitialised read.
//!
//! Race reports do not depend on the host order. The error of a conflicting pair belongs to
//! the later of the two in launch order (the one that would meet the other when instances
//! run one after another), at that access: whichever of the two comes second on the host
//! finds it, and [`Conflict::key`] orders the reports so the launch keeps the same one
//! whatever the order (see `abort::Cancellation::report`).
//!
//! The tracker also orders value copies: an access waits while an overlapping access is
//! still copying values, unless both are loads ([`Tracker::begin`] / [`Tracker::end`]), so
//! instances write disjoint parts of an output at the same time without a tensor-wide lock.

use super::rect::{Prog, Rect};
use super::writers::Writers;
use crate::abort::FailureKey;
use crate::access::Ap;
use crate::error::SourceLoc;
use std::cell::Cell;
use std::collections::HashMap;

/// Rows per bucket of the claim index.
const BUCKET_ROWS: u64 = 128;
/// Columns per bucket of the claim index.
const BUCKET_COLS: u64 = 4096;

thread_local! {
    /// Tracked accesses made so far by the instance running on this thread.
    static ACCESSES: Cell<u32> = const { Cell::new(0) };
}

/// Starts counting the tracked accesses of a new instance on this thread; returns the count
/// of the instance it replaces (to restore with [`restore_accesses`]).
pub(crate) fn reset_accesses() -> u32 {
    ACCESSES.with(|a| a.replace(0))
}

/// Restores the access count saved by [`reset_accesses`].
pub(crate) fn restore_accesses(n: u32) {
    ACCESSES.with(|a| a.set(n));
}

/// Tracked accesses the instance on this thread made so far.
pub(crate) fn accesses_so_far() -> u32 {
    ACCESSES.with(Cell::get)
}

/// What an access does to the elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A store (`nl.store`, `nisa.dma_copy`).
    Store,
    /// An `nl.atomic_rmw` update.
    Atomic,
    /// A load of a kernel output.
    Load,
}

/// One tracked access.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Access {
    /// Its writer (or reader) id in the launch's [`Writers`].
    pub(crate) writer: u32,
    /// Linear program id of its instance.
    pub(crate) instance: u64,
    /// Its position among its instance's tracked accesses.
    pub(crate) seq: u32,
    pub(crate) kind: Kind,
    /// The meetings with the other core its instance had passed (see
    /// [`Writer::meetings`](super::writers::Writer)): 0 until set by the caller.
    pub(crate) meetings: u32,
    /// The operation and the view, for messages.
    pub(crate) op: &'static str,
    pub(crate) ap: Ap,
    pub(crate) loc: SourceLoc,
}

impl Access {
    /// A new access by the instance on this thread (`instance`), numbered in its order.
    pub(crate) fn next(
        writer: u32,
        instance: u64,
        kind: Kind,
        op: &'static str,
        ap: Ap,
        loc: SourceLoc,
    ) -> Access {
        let seq = ACCESSES.with(|a| {
            let s = a.get();
            a.set(s.saturating_add(1));
            s
        });
        Access {
            writer,
            instance,
            seq,
            kind,
            meetings: 0,
            op,
            ap,
            loc,
        }
    }

    /// Launch order of accesses: instance, then program order.
    fn order(&self) -> (u64, u32) {
        (self.instance, self.seq)
    }
}

/// Two accesses of one element at unordered positions.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Conflict {
    /// The access first in launch order.
    pub(crate) first: Access,
    /// The access the error belongs to (later in launch order).
    pub(crate) second: Access,
    /// The first element (flat index) both touch.
    pub(crate) element: u64,
}

impl Conflict {
    /// The order of this report among the launch's failures: by the failing instance and
    /// its access, then the element and the other access.
    pub(crate) fn key(&self) -> FailureKey {
        FailureKey {
            index: self.second.instance,
            seq: self.second.seq,
            rank: (0, self.element, self.first.instance, self.first.seq),
        }
    }
}

/// What [`Tracker::begin`] found.
#[derive(Default)]
pub(crate) struct Found {
    /// The conflicts of the access with earlier ones, the canonical one per failing access
    /// (see [`Conflict::key`]).
    pub(crate) conflicts: Vec<Conflict>,
    /// A load's first element (flat) that no visible write covers.
    pub(crate) unwritten: Option<u64>,
    /// The token to pass to [`Tracker::end`] when the access copies values.
    pub(crate) running: Option<u64>,
}

/// An access whose value copy is in progress.
struct Running {
    token: u64,
    rects: Vec<Rect>,
    writes: bool,
}

/// A rectangle an access touched.
#[derive(Clone, Copy)]
struct Claim {
    rect: Rect,
    access: u32,
}

/// The accesses of the running launch to one tensor.
#[derive(Default)]
pub(crate) struct Tracker {
    /// The launch these accesses belong to (0: none yet).
    launch: u64,
    accesses: Vec<Access>,
    claims: Vec<Claim>,
    /// Claims by (row bucket, column bucket) they touch.
    buckets: HashMap<(u64, u64), Vec<u32>>,
    running: Vec<Running>,
    next_token: u64,
    /// Threads waiting in [`Tracker::begin`].
    pub(crate) waiting: usize,
}

impl Tracker {
    /// Forgets the accesses of an earlier launch when `launch` is new; true when it was.
    pub(crate) fn enter(&mut self, launch: u64) -> bool {
        if self.launch == launch {
            return false;
        }
        *self = Tracker {
            launch,
            ..Tracker::default()
        };
        true
    }

    /// True while an access overlapping `rects` copies values and one of the two writes:
    /// the caller waits (on the tensor's condition variable) and asks again.
    pub(crate) fn must_wait(&self, rects: &[Rect], writes: bool) -> bool {
        self.running.iter().any(|r| {
            (writes || r.writes)
                && r.rects
                    .iter()
                    .any(|a| rects.iter().any(|b| a.first_common(b).is_some()))
        })
    }

    /// Checks access `a` over `rects` against the earlier accesses (tensor rows `cols` long),
    /// then records it; `copies` says it will copy values (ended by [`Tracker::end`]).
    pub(crate) fn begin(
        &mut self,
        a: Access,
        rects: Vec<Rect>,
        cols: u64,
        writers: &Writers,
        copies: bool,
    ) -> Found {
        let mut found = Found::default();
        let candidates = self.candidates(&rects);
        let mut ok_writer: Option<u32> = None;
        for &ci in &candidates {
            let c = self.claims[ci as usize];
            let old = self.accesses[c.access as usize];
            if old.writer == a.writer || ok_writer == Some(old.writer) {
                continue;
            }
            let Some(element) = rects.iter().filter_map(|r| r.first_common(&c.rect)).min() else {
                continue;
            };
            if !writers.conflicts(old.writer, a.writer) {
                ok_writer = Some(old.writer);
                continue;
            }
            let (first, second) = if old.order() < a.order() {
                (old, a)
            } else {
                (a, old)
            };
            let conflict = Conflict {
                first,
                second,
                element: element.0 * cols + element.1,
            };
            // Keep the canonical conflict of each failing access.
            match found
                .conflicts
                .iter_mut()
                .find(|k| k.second.order() == second.order())
            {
                Some(k) if conflict.key() < k.key() => *k = conflict,
                Some(_) => {}
                None => found.conflicts.push(conflict),
            }
        }
        if a.kind == Kind::Load {
            found.unwritten = self.first_unwritten(&a, &rects, &candidates, cols);
        }
        let id = self.accesses.len() as u32;
        self.accesses.push(a);
        let claims = self.claims.len();
        for r in &rects {
            self.insert(Claim {
                rect: *r,
                access: id,
            });
        }
        if self.claims.len() == claims {
            // Every rectangle repeats one of the same writer's: the access adds nothing (a
            // store repeated in a loop costs no memory).
            self.accesses.pop();
        }
        if copies {
            self.next_token += 1;
            found.running = Some(self.next_token);
            self.running.push(Running {
                token: self.next_token,
                rects,
                writes: a.kind != Kind::Load,
            });
        }
        found
    }

    /// Registers a load's value copy over `rects` (no claim: the load claimed its elements
    /// when it was issued); returns the token for [`Tracker::end`].
    pub(crate) fn run_load(&mut self, rects: Vec<Rect>) -> u64 {
        self.next_token += 1;
        self.running.push(Running {
            token: self.next_token,
            rects,
            writes: false,
        });
        self.next_token
    }

    /// True when the tracker holds the accesses of launch `launch`.
    pub(crate) fn is_in(&self, launch: u64) -> bool {
        self.launch == launch
    }

    /// Ends the value copy of the access with `token`.
    pub(crate) fn end(&mut self, token: u64) {
        self.running.retain(|r| r.token != token);
    }

    /// The claims in the buckets `rects` touch, each once, in insertion order.
    fn candidates(&self, rects: &[Rect]) -> Vec<u32> {
        let mut out = Vec::new();
        for r in rects {
            for_buckets(r, |b| {
                if let Some(v) = self.buckets.get(&b) {
                    out.extend_from_slice(v);
                }
            });
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    fn insert(&mut self, c: Claim) {
        let id = self.claims.len() as u32;
        // An identical claim of the same writer and kind already stands for this one.
        let dup = |b: &Vec<u32>| {
            b.iter().any(|&o| {
                let o = self.claims[o as usize];
                let (x, y) = (
                    &self.accesses[o.access as usize],
                    &self.accesses[c.access as usize],
                );
                o.rect == c.rect && x.writer == y.writer && x.kind == y.kind
            })
        };
        let mut first_bucket = None;
        for_buckets(&c.rect, |b| {
            first_bucket.get_or_insert(b);
        });
        if let Some(b) = first_bucket.and_then(|b| self.buckets.get(&b)) {
            if dup(b) {
                return;
            }
        }
        self.claims.push(c);
        let buckets = &mut self.buckets;
        for_buckets(&c.rect, |b| buckets.entry(b).or_default().push(id));
    }

    /// The first element (flat) of load `a` over `rects` that no write of its own instance
    /// or of an earlier one covers.
    fn first_unwritten(&self, a: &Access, rects: &[Rect], cand: &[u32], cols: u64) -> Option<u64> {
        let writes = self.writes_among(cand, Some(a));
        rects
            .iter()
            .find_map(|r| first_uncovered_in(r, &writes, cols))
    }

    /// The first element (flat) of a `rows` x `cols` tensor that no write of launch `launch`
    /// covers, when the launch leaves some element unwritten (every element when this
    /// tracker holds another launch's accesses).
    pub(crate) fn first_unwritten_element(&self, launch: u64, rows: u64, cols: u64) -> Option<u64> {
        if rows == 0 || cols == 0 {
            return None;
        }
        if self.launch != launch {
            return Some(0);
        }
        // One band of claim-index rows at a time, so a row is checked against the writes of
        // its own band, not against every write of the launch.
        let mut band = 0;
        while band < rows {
            let n = BUCKET_ROWS.min(rows - band);
            let r = Rect {
                rows: Prog {
                    start: band,
                    n,
                    step: 1,
                },
                cols: Prog {
                    start: 0,
                    n: cols,
                    step: 1,
                },
            };
            let writes = self.writes_among(&self.candidates(&[r]), None);
            if let Some(e) = first_uncovered_in(&r, &writes, cols) {
                return Some(e);
            }
            band += n;
        }
        None
    }

    /// The rectangles of the writes (stores and atomic updates) among claims `cand` that come
    /// before load `load` (all of them when `None`): made before a meeting of the two cores
    /// the load's instance passed, or, between the same meetings, by its own instance or one
    /// before it in launch order.
    fn writes_among(&self, cand: &[u32], load: Option<&Access>) -> Vec<Rect> {
        cand.iter()
            .map(|&c| self.claims[c as usize])
            .filter(|c| {
                let w = &self.accesses[c.access as usize];
                w.kind != Kind::Load
                    && load.is_none_or(|a| match w.meetings.cmp(&a.meetings) {
                        std::cmp::Ordering::Less => true,
                        std::cmp::Ordering::Equal => w.instance <= a.instance,
                        std::cmp::Ordering::Greater => false,
                    })
            })
            .map(|c| c.rect)
            .collect()
    }
}

/// The first element (flat, in a tensor of rows `cols` long) of `r` that none of `writes`
/// covers.
fn first_uncovered_in(r: &Rect, writes: &[Rect], cols: u64) -> Option<u64> {
    (0..r.rows.n).find_map(|i| {
        let row = r.rows.start + i * r.rows.step;
        let in_row: Vec<&Rect> = writes.iter().filter(|w| w.rows.contains(row)).collect();
        first_uncovered(r, &in_row).map(|col| row * cols + col)
    })
}

/// The first column of `r` that none of `cover` holds.
fn first_uncovered(r: &Rect, cover: &[&Rect]) -> Option<u64> {
    if cover.is_empty() {
        return Some(r.cols.start);
    }
    let dense = |p: &super::rect::Prog| p.step <= 1;
    if dense(&r.cols) && cover.iter().all(|w| dense(&w.cols)) {
        let mut spans: Vec<(u64, u64)> = cover
            .iter()
            .map(|w| (w.cols.start, w.cols.last() + 1))
            .collect();
        spans.sort_unstable();
        let (mut at, end) = (r.cols.start, r.cols.last() + 1);
        for (lo, hi) in spans {
            if lo > at {
                break;
            }
            at = at.max(hi);
        }
        return (at < end).then_some(at);
    }
    (0..r.cols.n)
        .map(|j| r.cols.start + j * r.cols.step)
        .find(|&c| !cover.iter().any(|w| w.cols.contains(c)))
}

/// Calls `f` with every bucket of the claim index rectangle `r` touches.
fn for_buckets(r: &Rect, mut f: impl FnMut((u64, u64))) {
    let (c0, c1) = (r.cols.start / BUCKET_COLS, r.cols.last() / BUCKET_COLS);
    let (r0, r1) = (r.rows.start / BUCKET_ROWS, r.rows.last() / BUCKET_ROWS);
    if r.rows.n < r1 - r0 + 1 {
        // Sparse rows: only the buckets of the rows themselves.
        let mut last = None;
        for i in 0..r.rows.n {
            let b = (r.rows.start + i * r.rows.step) / BUCKET_ROWS;
            if last != Some(b) {
                (c0..=c1).for_each(|c| f((b, c)));
                last = Some(b);
            }
        }
    } else {
        for b in r0..=r1 {
            (c0..=c1).for_each(|c| f((b, c)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::{IntoIndex, Shape};
    use crate::hbm::rect::rects_of;
    use crate::hbm::writers::{Writer, WriterKind};

    #[test]
    fn a_tile_store_is_one_claim_whatever_its_size_and_repeats_add_none() {
        let shape = Shape::new(&[4096, 4096]).unwrap();
        let writers = Writers::new();
        let loc = SourceLoc::caller();
        let mut t = Tracker::default();
        t.enter(1);
        for rep in 0..3 {
            for (i, (r, c)) in [(0, 0), (0, 512), (128, 0)].into_iter().enumerate() {
                let w = Writer {
                    instance: i as u64,
                    frames: Vec::new(),
                    kind: WriterKind::Store,
                    meetings: 0,
                };
                let id = writers.intern(w, &[i], loc);
                let ap = Ap::contiguous(shape)
                    .slice(&(r..r + 128, c..c + 512).into_index(), false, "t")
                    .unwrap();
                let a = Access::next(id, i as u64, Kind::Store, "store", ap, loc);
                let found = t.begin(a, rects_of(&ap, 4096), 4096, &writers, false);
                assert!(found.conflicts.is_empty(), "rep {rep}");
            }
        }
        assert_eq!(t.claims.len(), 3, "one claim per distinct tile store");
        assert_eq!(t.accesses.len(), 3, "repeated accesses are not kept");
        // A store overlapping two of them conflicts with both; each conflict belongs to the
        // later instance in launch order.
        let w = Writer {
            instance: 1,
            frames: Vec::new(),
            kind: WriterKind::Store,
            meetings: 0,
        };
        let id = writers.intern(w, &[1], loc);
        let ap = Ap::contiguous(shape)
            .slice(&(100..200, 500..520).into_index(), false, "t")
            .unwrap();
        let a = Access::next(id, 1, Kind::Store, "store", ap, loc);
        let found = t.begin(a, rects_of(&ap, 4096), 4096, &writers, false);
        let mut got: Vec<(u64, u64, u64)> = found
            .conflicts
            .iter()
            .map(|c| (c.first.instance, c.second.instance, c.element))
            .collect();
        got.sort_unstable();
        assert_eq!(
            got,
            vec![(0, 1, 100 * 4096 + 500), (1, 2, 128 * 4096 + 500)],
            "instance 0's tile at [100, 500], instance 2's at [128, 500]"
        );
    }
}
