//! Placement: the speed machinery that turns the record streams of a launch into start/end
//! times by applying the hardware rules of the files beside it to every record:
//! [`order`](super::order) (dependencies, program order and the reorder window),
//! [`tensor`](super::tensor) (LoadStationary/MultiplyMoving overlap, throttling) and
//! [`dma`](super::dma) (DMA queues, engine shares, the HBM stack), with each record's cost from
//! [`cost`](super::cost) (prepared ahead in [`Prepared`]). Nothing here decides a modelled
//! number that those files do not.
//!
//! The simulation is event-free: compute records are placed as soon as they are at the head of
//! their engine and all their dependencies are placed; DMAs wait in a queue ordered by ready
//! time and are placed when nothing else can be placed (every record not yet placed depends,
//! directly or through its engine's order, on a queued DMA, so it cannot be ready earlier).
//! Engines in one state given equal shares of a DMA are placed once, as one run ([`Piece`]).

use super::cost;
use super::deps::DepPass;
use super::dma;
use super::order::{self, Edge, Timeline, WINDOW};
use super::prepare::{Costs, PlanScratch, Prepared};
use super::priority;
use super::scratch::{RecState, SimScratch};
use super::tensor::TensorE;
use crate::compiler::config::SchedulingHeuristic;
use crate::record::CoreStream;
use crate::record::{Engine, Instr};
use crate::target::TargetSpec;
use std::collections::BinaryHeap;

/// The shares of a DMA record served by consecutive DMA engines over one interval: engines
/// `engine..engine + engines` each serve their share from `start` to `end`. A DMA's shares are
/// runs of these (most DMAs give every engine, all in one state, an equal share: one run).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Piece {
    /// Global record index.
    pub rec: u32,
    /// First DMA engine.
    pub engine: u16,
    /// Number of DMA engines (at least 1).
    pub engines: u16,
    /// Start, ns.
    pub start: f64,
    /// End, ns.
    pub end: f64,
}

/// The modelled times of every record of a launch, in global order (core 0's stream, then
/// core 1's, ...).
pub(crate) struct Schedule<'a> {
    /// The records.
    pub recs: Vec<&'a Instr>,
    /// NeuronCore of each record.
    pub core: Vec<u16>,
    /// Start (first activity) in ns.
    pub start: Vec<f64>,
    /// End (result available) in ns.
    pub end: Vec<f64>,
    /// TensorE only: end of LoadStationary and start of MultiplyMoving.
    pub ls_end: Vec<f64>,
    /// TensorE only: start of MultiplyMoving.
    pub mm_start: Vec<f64>,
    /// DMA engine shares.
    pub pieces: Vec<Piece>,
    /// What decided each record's start (see [`Cause`]).
    pub cause: Vec<Cause>,
    /// DMAs only: the record's own time is bandwidth-bound (see
    /// [`dma::bandwidth_bound`](super::dma::bandwidth_bound)).
    pub bandwidth_bound: Vec<bool>,
}

/// What decided when a record started: the critical-path link the profile walks back along.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Cause {
    /// Nothing: it started at time 0 (plus, for a DMA, the trigger latency).
    Start,
    /// It waited for the result of (or for) record `.0`: a dependency stall.
    Data(u32),
    /// Its engine (or, for a DMA, a DMA engine) was still busy with record `.0`.
    Engine(u32),
}

/// A record and a time for the ready queues, ordered as one integer: the earliest time first
/// (in `f64::total_cmp` order), then the lowest record index. Greater is earlier, since
/// [`BinaryHeap`] is a max-heap.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Key(u128);

impl Key {
    #[inline]
    fn new(t: f64, rec: u32) -> Key {
        // `total_cmp`'s order as unsigned integers: a negative time flips every bit, any other
        // the sign bit. Complemented, so that the earliest (then the lowest index) is greatest.
        let b = t.to_bits();
        let ord = if b >> 63 == 1 { !b } else { b | 1 << 63 };
        Key(!((ord as u128) << 32 | rec as u128))
    }

    /// The time (bit-identical to the one given).
    #[inline]
    fn time(self) -> f64 {
        let ord = (!self.0 >> 32) as u64;
        f64::from_bits(if ord >> 63 == 1 {
            ord & !(1 << 63)
        } else {
            !ord
        })
    }

    /// The record.
    #[inline]
    fn rec(self) -> u32 {
        !self.0 as u32
    }
}

/// A priority queue of [`Key`]s (the greatest, i.e. earliest, first) that takes keys pushed
/// in order cheaply: a key no earlier than the last one of the sorted run goes to the run's
/// end, any other into a heap; `pop` takes the greater of the two heads. Records are released
/// mostly in time order (all records without dependencies at once, in index order), so most
/// keys never enter the heap. Keys are distinct (one per record), so the order is exactly a
/// single heap's.
#[derive(Default)]
struct ReadyQueue {
    /// The sorted run: its keys from `head` on (the ones before were popped).
    run: Vec<Key>,
    head: usize,
    heap: BinaryHeap<Key>,
}

impl ReadyQueue {
    #[inline]
    fn push(&mut self, k: Key) {
        if self.head == self.run.len() {
            // The run is empty: start it afresh (its room is reused).
            self.run.clear();
            self.head = 0;
        }
        match self.run.last() {
            Some(last) if *last < k => self.heap.push(k),
            _ => self.run.push(k),
        }
    }

    /// The key `pop` would take, left in the queue.
    #[inline]
    fn peek(&self) -> Option<Key> {
        match (self.run.get(self.head), self.heap.peek()) {
            (Some(r), Some(h)) => Some(if h > r { *h } else { *r }),
            (Some(r), None) => Some(*r),
            (None, h) => h.copied(),
        }
    }

    #[inline]
    fn pop(&mut self) -> Option<Key> {
        match (self.run.get(self.head), self.heap.peek()) {
            (Some(r), Some(h)) if h > r => self.heap.pop(),
            (Some(&r), _) => {
                self.head += 1;
                Some(r)
            }
            (None, _) => self.heap.pop(),
        }
    }
}

const ENGINES: usize = Engine::COUNT;

/// DMA engines from the previous run's `to` (or 0) up to `to`: each free from `free` on, and
/// last serving record `held` (`u32::MAX`: none). A core's DMA engines are kept as maximal
/// runs of engines in one state (all of them, most of the time: one run).
#[derive(Clone, Copy)]
struct EngineRun {
    to: u16,
    free: f64,
    held: u32,
}

struct CoreState {
    queues: [Vec<u32>; ENGINES],
    heads: [usize; ENGINES],
    timelines: [Timeline; ENGINES],
    tensor: TensorE,
    /// The DMA engines' state, as runs.
    dma: Vec<EngineRun>,
    /// Last record placed on each engine slot.
    last: [u32; ENGINES],
    stack: usize,
}

/// Schedules every record of `streams` on `spec`, given their record-only facts `prep`
/// (whose core and instance tables move into the schedule).
///
/// `cross` holds dependencies between records of different cores (LNC=2 synchronisation),
/// placed like the per-core ones; `heuristic` picks which ready instruction goes first
/// ([`priority`](super::priority)).
pub(crate) fn schedule<'a>(
    streams: &'a [CoreStream],
    spec: &TargetSpec,
    prep: &mut Prepared,
    cross: &[(u32, Edge)],
    heuristic: SchedulingHeuristic,
) -> Schedule<'a> {
    let total = prep.records();
    let mut recs: Vec<&Instr> = Vec::with_capacity(total);
    for s in streams {
        for (_, rs) in &s.instances {
            recs.extend(rs);
        }
    }
    for f in &mut prep.cores {
        f.deps.index_successors();
    }
    let core = std::mem::take(&mut prep.core);
    let per_stack = spec.ncs_per_hbm_stack.max(1);
    let mut cores: Vec<CoreState> = Vec::with_capacity(prep.cores.len());
    for facts in &mut prep.cores {
        cores.push(CoreState {
            queues: std::mem::take(&mut facts.queues),
            heads: [0; ENGINES],
            timelines: Default::default(),
            tensor: TensorE::new(),
            dma: vec![EngineRun {
                to: spec.dma_engines.clamp(1, u16::MAX as usize) as u16,
                free: 0.0,
                held: u32::MAX,
            }],
            last: [u32::MAX; ENGINES],
            stack: facts.nc / per_stack,
        });
    }
    let n = recs.len();
    // Each record's dependencies still to place: as the dependency passes counted them, plus
    // those between cores; the latter listed by predecessor (the former are per core).
    let mut scr = std::mem::take(&mut prep.scratch);
    let preds = prep.cores.iter().flat_map(|f| f.deps.preds.iter().copied());
    scr.reset(&prep.engine, preds);
    scr.cross.extend_from_slice(cross);
    scr.cross.sort_by_key(|&(p, _)| p);
    for (_, e) in cross {
        scr.recs[e.succ as usize].pending += 1;
    }
    let stacks = streams.iter().map(|s| s.nc / per_stack).max().unwrap_or(0) + 1;
    let mut sim = Sim {
        spec,
        out: Schedule {
            recs,
            core,
            start: vec![0.0; n],
            end: vec![0.0; n],
            ls_end: vec![0.0; n],
            mm_start: vec![0.0; n],
            // A DMA leaves at most one piece per DMA engine (most leave one, see [`Piece`]):
            // room for the most is reserved once, never regrown, and the untouched part is
            // never paged in. (Reserving only the typical count was measured to page-fault
            // more: 36k -> 135k faults over 20 tiled estimates, as glibc then keeps fewer
            // freed pages for reuse.)
            pieces: Vec::with_capacity(prep.dmas * spec.dma_engines.max(1)),
            cause: vec![Cause::Start; n],
            bandwidth_bound: vec![false; n],
        },
        costs: &prep.costs,
        deps: prep.cores.iter().map(|f| &f.deps).collect(),
        s: scr,
        instance: &prep.instance,
        cores,
        hbm_free: vec![0.0; stacks],
        work: ReadyQueue::default(),
        dmas: ReadyQueue::default(),
        lat: Engine::ALL.map(|e| cost::dependency_latency_ns(spec, e)),
        placed: 0,
        plan: PlanScratch::default(),
        dma_next: Vec::new(),
        heuristic,
        bottom: Vec::new(),
        candidates: Vec::new(),
    };
    if heuristic == SchedulingHeuristic::CriticalPath {
        sim.bottom = sim.bottom_levels();
    }
    // The records without dependencies, found in the dependency passes' counts (an eighth of
    // the bytes of the placement state, which was just written: scanning it again cost
    // ~0.2 ms of a hoist_load estimate); one with a dependency on another core still waits.
    let mut i = 0;
    for f in &prep.cores {
        for &p in &f.deps.preds {
            if p == 0 && sim.s.recs[i as usize].pending == 0 {
                sim.ready(i);
            }
            i += 1;
        }
    }
    loop {
        while let Some(k) = sim.work.pop() {
            let k = sim.weigh_compute(k);
            sim.release(k.rec());
        }
        match sim.next_dma() {
            Some(k) => sim.place_dma(k.rec(), k.time()),
            None => break,
        }
    }
    // Dependencies and engine order only point backwards, so everything gets placed.
    debug_assert_eq!(sim.placed, n, "every record is placed");
    let Sim { out, cores, s, .. } = sim;
    // Kept for the next launch: the scratch vectors and the engine queues.
    prep.scratch = s;
    for (f, st) in prep.cores.iter_mut().zip(cores) {
        f.queues = st.queues;
    }
    out
}

struct Sim<'s, 'a> {
    spec: &'s TargetSpec,
    /// The schedule being made: the records, their cores and what is placed so far.
    out: Schedule<'a>,
    /// The records' engine costs, prepared from the records alone.
    costs: &'s Costs,
    /// Per core: its dependencies, with each record's successors.
    deps: Vec<&'s DepPass>,
    /// Each record's placement state (engine, dependencies, ready times), kept from launch to
    /// launch. The engine is read there, without touching the record (one of tens of
    /// megabytes of them: a cache miss per placed record).
    s: SimScratch,
    /// Instance (within its core) of each record.
    instance: &'s [u32],
    cores: Vec<CoreState>,
    hbm_free: Vec<f64>,
    /// Records whose dependencies are all placed, earliest ready first: releasing them in
    /// time order lets engines that look ahead fill their idle gaps in time order.
    work: ReadyQueue,
    dmas: ReadyQueue,
    lat: [f64; ENGINES],
    placed: usize,
    /// Where the plan of a DMA not prepared ahead is made.
    plan: PlanScratch,
    /// The DMA engines' next state while a DMA is placed.
    dma_next: Vec<EngineRun>,
    /// Which ready instruction goes first.
    heuristic: SchedulingHeuristic,
    /// CRITICAL_PATH: each record's bottom level (see `priority::bottom_levels`).
    bottom: Vec<f64>,
    /// The DMAs weighed by [`Sim::next_dma`].
    candidates: Vec<Key>,
}

impl Sim<'_, '_> {
    /// The next DMA to place: the first queued, or under a heuristic that weighs them
    /// ([`priority::weighs_dmas`]), the one of highest priority among the queued DMAs ready
    /// by the time the DMA engines could start the first (at most [`WINDOW`] of them).
    fn next_dma(&mut self) -> Option<Key> {
        let first = self.dmas.pop()?;
        if !priority::weighs_dmas(self.heuristic) {
            return Some(first);
        }
        let c = self.out.core[first.rec() as usize] as usize;
        let free = self.cores[c]
            .dma
            .iter()
            .map(|r| r.free)
            .fold(f64::INFINITY, f64::min);
        let by = first.time().max(free);
        self.candidates.clear();
        self.candidates.push(first);
        while self.candidates.len() < WINDOW {
            match self.dmas.peek() {
                Some(k) if k.time() <= by => {
                    self.dmas.pop();
                    self.candidates.push(k);
                }
                _ => break,
            }
        }
        let (bottom, recs, h) = (&self.bottom, &self.out.recs, self.heuristic);
        let chosen = take_best(&mut self.candidates, &mut self.dmas, |i| {
            priority::dma_priority(h, recs[i], bottom.get(i).copied().unwrap_or(0.0))
        });
        Some(chosen)
    }

    /// The next compute record to release, given the earliest ready one `first`: itself, or
    /// under a heuristic that weighs compute records ([`priority::weighs_compute`]) on an
    /// engine that looks ahead (not TensorE, which keeps program order), the one of highest
    /// priority among the ready records of its engine and core ready by the time the engine
    /// could start `first` (at most [`WINDOW`] of them; ties go to the one ready first). The
    /// ready records of other engines met on the way are released in their order; the
    /// candidates not chosen go back to the work queue. The chosen record still passes only
    /// records it may pass ([`order::may_reorder`]).
    fn weigh_compute(&mut self, first: Key) -> Key {
        if !priority::weighs_compute(self.heuristic) {
            return first;
        }
        let i = first.rec() as usize;
        let engine = self.s.recs[i].engine;
        if engine == Engine::Tensor {
            return first;
        }
        let c = self.out.core[i] as usize;
        let by = first
            .time()
            .max(self.cores[c].timelines[engine.index()].free_at());
        self.candidates.clear();
        self.candidates.push(first);
        while self.candidates.len() < WINDOW {
            match self.work.peek() {
                Some(k) if k.time() <= by => {
                    self.work.pop();
                    let j = k.rec() as usize;
                    if self.s.recs[j].engine == engine && self.out.core[j] as usize == c {
                        self.candidates.push(k);
                    } else {
                        self.release(k.rec());
                    }
                }
                _ => break,
            }
        }
        if self.candidates.len() == 1 {
            return first;
        }
        let (bottom, recs, h) = (&self.bottom, &self.out.recs, self.heuristic);
        take_best(&mut self.candidates, &mut self.work, |i| {
            priority::compute_priority(h, recs[i], bottom.get(i).copied().unwrap_or(0.0))
        })
    }

    /// Every record's bottom level: its engine time plus the longest chain of records that
    /// depend on it (CRITICAL_PATH's priority).
    fn bottom_levels(&mut self) -> Vec<f64> {
        let n = self.out.recs.len();
        let mut own = vec![0.0f64; n];
        for (i, o) in own.iter_mut().enumerate() {
            let r = self.out.recs[i];
            *o = match self.s.recs[i].engine {
                Engine::Tensor => {
                    let t = self.costs.tensor(self.spec, i, r);
                    t.ls_ns + t.mm_ns
                }
                Engine::Dma => {
                    let (plan, _) = self.costs.dma_plan(self.spec, i, r, &mut self.plan);
                    plan.busiest_ns.max(plan.floor_ns)
                }
                _ => self.costs.compute_ns(self.spec, i, r),
            };
        }
        let deps = &self.deps;
        let core = &self.out.core;
        let engine = |i: usize| self.s.recs[i].engine;
        // How long past a record's end its successor waits: a DMA its trigger latency, a RAW
        // consumer its dependency latency (as the placement charges them).
        let wait = |i: usize, e: &Edge| {
            let succ = engine(e.succ as usize);
            if succ == Engine::Dma {
                self.spec.dma_fixed_latency_ns
            } else {
                order::ready_after(e.kind, engine(i), succ, 0.0, 0.0, &self.lat)
            }
        };
        priority::bottom_levels(
            n,
            |i| own[i],
            wait,
            |i| deps[core[i] as usize].successors(i),
        )
    }

    /// All of `i`'s dependencies are placed: a DMA joins the DMA queue (when it is queued), any
    /// other record the work queue (when its dependencies let it start).
    #[inline]
    fn ready(&mut self, i: u32) {
        let r = &self.s.recs[i as usize];
        let ready = r.ready_all();
        if r.engine == Engine::Dma {
            self.dmas
                .push(Key::new(dma::queued_at(self.spec, ready), i));
        } else {
            self.work.push(Key::new(ready, i));
        }
    }

    /// Compute record `i`, whose dependencies are all placed, is taken from the work queue:
    /// it is placed with every record of its engine it let through.
    fn release(&mut self, i: u32) {
        let r = &mut self.s.recs[i as usize];
        let engine = r.engine;
        debug_assert!(engine != Engine::Dma, "DMAs wait in their own queue");
        r.released = true;
        let c = self.out.core[i as usize] as usize;
        let slot = engine.index();
        if engine == Engine::Tensor {
            // TensorE: program order.
            loop {
                let st = &self.cores[c];
                let Some(&head) = st.queues[slot].get(st.heads[slot]) else {
                    break;
                };
                if !self.s.recs[head as usize].released {
                    break;
                }
                self.cores[c].heads[slot] += 1;
                self.place_compute(head, c, slot);
            }
            return;
        }
        self.place_window(c, slot);
    }

    /// Places, in queue order, every released record of an engine's queue that is independent
    /// of all unplaced records before it, until [`WINDOW`] records had to be left unplaced.
    fn place_window(&mut self, c: usize, slot: usize) {
        let mut k = self.cores[c].heads[slot];
        let mut seen = 0;
        while seen < WINDOW {
            let Some(&j) = self.cores[c].queues[slot].get(k) else {
                break;
            };
            if self.s.recs[j as usize].done {
                if k == self.cores[c].heads[slot] {
                    self.cores[c].heads[slot] += 1;
                }
                k += 1;
                continue;
            }
            if self.s.recs[j as usize].released && self.may_pass(c, slot, k) {
                self.place_compute(j, c, slot);
                if k == self.cores[c].heads[slot] {
                    self.cores[c].heads[slot] += 1;
                }
            } else {
                seen += 1;
            }
            k += 1;
        }
    }

    /// True when the record at queue position `k` is independent of every unplaced record
    /// between the engine's head and `k`.
    fn may_pass(&self, c: usize, slot: usize, k: usize) -> bool {
        if self.heuristic == SchedulingHeuristic::Trivial && k != self.cores[c].heads[slot] {
            return false;
        }
        let q = &self.cores[c].queues[slot];
        let j = q[k] as usize;
        q[self.cores[c].heads[slot]..k].iter().all(|&i| {
            let i = i as usize;
            self.s.recs[i].done
                || order::may_reorder(
                    self.instance[j],
                    self.out.recs[j],
                    self.instance[i],
                    self.out.recs[i],
                )
        })
    }

    fn place_compute(&mut self, i: u32, c: usize, slot: usize) {
        let iu = i as usize;
        let r = self.out.recs[iu];
        let st = &mut self.cores[c];
        let rs = self.s.recs[iu];
        if rs.engine == Engine::Tensor {
            let tc = self.costs.tensor(self.spec, iu, r);
            let t = st.tensor.place(self.spec, tc, rs.ready, rs.ready_late);
            let prev = std::mem::replace(&mut st.last[slot], i);
            self.out.cause[iu] = cause_of(&rs, t.engine_bound, prev);
            self.out.start[iu] = t.ls_start;
            self.out.ls_end[iu] = t.ls_end;
            self.out.mm_start[iu] = t.mm_start;
            self.out.end[iu] = t.mm_end;
        } else {
            let ready = rs.ready_all();
            let trivial = self.heuristic == SchedulingHeuristic::Trivial;
            // Records it may not pass (same iteration, or outside affine loops; any under
            // TRIVIAL) finish first.
            let tl = &st.timelines[slot];
            // The latest end among them; an interval ending no later than the latest so far
            // cannot change it, so only later ones are tested (latest starts first: they tend
            // to end last).
            let mut order = 0.0f64;
            for &(_, e, o) in tl.busy.iter().rev() {
                let o = o as usize;
                if e > order
                    && (trivial
                        || !order::may_reorder(
                            self.instance[iu],
                            r,
                            self.instance[o],
                            self.out.recs[o],
                        ))
                {
                    order = e;
                }
            }
            let dur = self.costs.compute_ns(self.spec, iu, r);
            let s = tl.fit(ready.max(order), dur);
            let e = s + dur;
            let prev = tl.holder(s);
            st.timelines[slot].insert(s, e, i);
            st.last[slot] = i;
            self.out.start[iu] = s;
            self.out.end[iu] = e;
            self.out.cause[iu] = cause_of(&rs, s > ready, prev);
        }
        self.propagate(i);
    }

    fn place_dma(&mut self, i: u32, t: f64) {
        let iu = i as usize;
        let r = self.out.recs[iu];
        let (plan, runs) = self.costs.dma_plan(self.spec, iu, r, &mut self.plan);
        self.out.bandwidth_bound[iu] =
            dma::bandwidth_bound(self.spec, plan.busiest_ns, plan.floor_ns);
        let c = self.out.core[iu] as usize;
        let st = &mut self.cores[c];
        let mut bound = t;
        if plan.hbm_bytes > 0 {
            let h_end = dma::hbm_transfer(&mut self.hbm_free[st.stack], t, plan.hbm_ns);
            bound = bound.max(h_end);
        }
        let mut first = f64::INFINITY;
        let mut last: f64 = t;
        let mut cause = None;
        let engines: usize = runs.iter().map(|&(_, n)| n as usize).sum();
        let have = st.dma.last().map_or(0, |x| x.to as usize);
        debug_assert_eq!(engines, have, "a DMA plan has one share per DMA engine");
        let n = engines.min(have);
        // Engines in one state (a run of `st.dma`) given one share (a run of the plan's equal
        // shares) end the same: each such stretch is placed once and leaves one piece; it
        // changes neither the cause nor `last` past what its first engine would.
        let next = &mut self.dma_next;
        next.clear();
        let (mut k, mut at) = (0, 0);
        for &(d, count) in runs {
            let end = (k + count as usize).min(n);
            while k < end {
                while (st.dma[at].to as usize) <= k {
                    at += 1;
                }
                let EngineRun { to, free, held } = st.dma[at];
                let to = end.min(to as usize);
                let (s, pe) = dma::engine_share(t, free, d, bound);
                if pe > last || cause.is_none() {
                    cause = Some(if s > t && held != u32::MAX && bound <= s + d {
                        Cause::Engine(held)
                    } else {
                        Cause::Start
                    });
                }
                match next.last_mut() {
                    Some(x) if x.free.to_bits() == pe.to_bits() => x.to = to as u16,
                    _ => next.push(EngineRun {
                        to: to as u16,
                        free: pe,
                        held: i,
                    }),
                }
                self.out.pieces.push(Piece {
                    rec: i,
                    engine: k as u16,
                    engines: (to - k) as u16,
                    start: s,
                    end: pe,
                });
                first = first.min(s);
                last = last.max(pe);
                k = to;
            }
        }
        // Engines the plan has no share for (none: see the assertion) keep their state.
        next.extend(st.dma.iter().filter(|x| x.to as usize > n));
        std::mem::swap(&mut st.dma, next);
        if !first.is_finite() {
            first = t;
        }
        self.out.start[iu] = first;
        self.out.end[iu] = dma::dma_end(first, last, plan.floor_ns);
        self.out.cause[iu] = match cause {
            Some(Cause::Start) | None => cause_of(&self.s.recs[iu], false, u32::MAX),
            Some(c) => c,
        };
        self.propagate(i);
    }

    /// Releases the successors of placed record `i`.
    fn propagate(&mut self, i: u32) {
        let iu = i as usize;
        self.placed += 1;
        let r = &mut self.s.recs[iu];
        r.done = true;
        let pe = r.engine;
        let (start, end) = (self.out.start[iu], self.out.end[iu]);
        let deps: &DepPass = self.deps[self.out.core[iu] as usize];
        for &e in deps.successors(iu) {
            self.follow(i, e, pe, start, end);
        }
        if !self.s.cross.is_empty() {
            let from = self.s.cross.partition_point(|&(p, _)| p < i);
            for k in from..self.s.cross.len() {
                let (p, e) = self.s.cross[k];
                if p != i {
                    break;
                }
                self.follow(i, e, pe, start, end);
            }
        }
    }

    /// Dependency `e` of placed record `i` (on `pe`, from `start` to `end`): its successor's
    /// ready time, and the successor is ready when it was the last dependency.
    #[inline]
    fn follow(&mut self, i: u32, e: Edge, pe: Engine, start: f64, end: f64) {
        let r = &mut self.s.recs[e.succ as usize];
        let c = order::ready_after(e.kind, pe, r.engine, start, end, &self.lat);
        if c >= r.ready_all() {
            r.ready_pred = i;
        }
        if e.late {
            r.ready_late = r.ready_late.max(c);
        } else {
            r.ready = r.ready.max(c);
        }
        r.pending -= 1;
        if r.pending == 0 {
            self.ready(e.succ);
        }
    }
}

/// Takes the key of highest priority (`prio` of its record; ties go to the earliest key) out
/// of `candidates` (not empty) and puts the others back in `queue`.
fn take_best(
    candidates: &mut Vec<Key>,
    queue: &mut ReadyQueue,
    prio: impl Fn(usize) -> f64,
) -> Key {
    let p = |k: &Key| prio(k.rec() as usize);
    // Highest priority, then the earliest (a greater key is earlier).
    let best = (0..candidates.len())
        .max_by(|&a, &b| {
            let (ka, kb) = (&candidates[a], &candidates[b]);
            p(ka).total_cmp(&p(kb)).then(ka.cmp(kb))
        })
        .unwrap_or(0);
    let chosen = candidates.swap_remove(best);
    for k in candidates.drain(..) {
        queue.push(k);
    }
    chosen
}

/// The cause of a record's start, given its placement state `r`: its engine's previous
/// record `prev` when the engine was the later constraint, else the dependency that made it
/// ready last, else none.
fn cause_of(r: &RecState, engine_bound: bool, prev: u32) -> Cause {
    if engine_bound && prev != u32::MAX {
        Cause::Engine(prev)
    } else if r.ready_pred != u32::MAX {
        Cause::Data(r.ready_pred)
    } else {
        Cause::Start
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_order_earliest_time_then_lowest_record_first() {
        // Every pair of keys compares as (time by `total_cmp`, then record) reversed, and a key
        // gives back its time bit for bit.
        let times = [
            f64::NEG_INFINITY,
            -1e300,
            -2.5,
            -f64::MIN_POSITIVE,
            -0.0,
            0.0,
            f64::from_bits(1),
            f64::MIN_POSITIVE,
            1.0,
            1.0 + f64::EPSILON,
            123_456.789,
            1e300,
            f64::INFINITY,
        ];
        let keys: Vec<(f64, u32)> = times
            .iter()
            .flat_map(|&t| [0, 1, 7, u32::MAX - 1, u32::MAX].map(|i| (t, i)))
            .collect();
        for &(t, i) in &keys {
            let k = Key::new(t, i);
            assert_eq!((k.time().to_bits(), k.rec()), (t.to_bits(), i));
            for &(u, j) in &keys {
                let want = u.total_cmp(&t).then(j.cmp(&i));
                assert_eq!(k.cmp(&Key::new(u, j)), want, "({t}, {i}) vs ({u}, {j})");
            }
        }
    }

    #[test]
    fn ready_queue_pops_in_heap_order() {
        // Keys pushed partly in order (the sorted run) and partly not (the heap), popped
        // while pushing: the same sequence as one binary heap.
        let (mut q, mut heap) = (ReadyQueue::default(), BinaryHeap::new());
        let (mut got, mut want) = (Vec::new(), Vec::new());
        let mut x = 12345u64;
        for i in 0..2000u32 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let t = if i % 3 == 0 {
                (x >> 40) as f64
            } else {
                i as f64
            };
            q.push(Key::new(t, i));
            heap.push(Key::new(t, i));
            if x & 3 == 0 {
                got.push(q.pop().map(Key::rec));
                want.push(heap.pop().map(Key::rec));
            }
        }
        while let Some(k) = heap.pop() {
            want.push(Some(k.rec()));
            got.push(q.pop().map(Key::rec));
        }
        assert_eq!(got, want);
        assert!(q.pop().is_none());
    }
}
