//! The scheduler: turns the record streams of a launch into start/end times.
//!
//! - Dependencies: a record waits for the earlier records (of its NeuronCore's concatenated
//!   stream) whose regions it depends on: read-after-write (plus the consumer's dependency
//!   latency), write-after-read and write-after-write. Two DMA writes to one HBM tensor are
//!   only kept in order (the second starts no earlier than the first): HBM regions are bounding
//!   byte ranges, so tiles of one output tensor look overlapping when they are not.
//! - Compute engines (TensorE, VectorE, ScalarE, GpSimdE, Sync) run their records in program
//!   order, except that records in different iterations of one `affine_range` loop are
//!   independent by contract and interleave as the compiler schedules them: VectorE, ScalarE,
//!   GpSimdE and Sync look up to [`WINDOW`] records ahead in their queue for one that is ready
//!   and independent of the records it passes, and place it in the earliest idle gap of the
//!   engine's recent timeline (list scheduling); `sequential_range` and straight-line code keep
//!   their order. TensorE keeps program order: it runs LoadStationary then MultiplyMoving,
//!   and the next LoadStationary overlaps the current MultiplyMoving (background weight load).
//! - DMAs start `dma_fixed_latency_ns` after their inputs are ready and are served in that
//!   order (first come, first served) by the 16 DMA engines: each engine is busy with its
//!   share of the bytes at its bandwidth, and with every DMA for at least `dma_engine_min_ns`
//!   (so tiny DMAs serialise); the HBM stack the core shares with its neighbours bounds the
//!   bytes too. A single DMA takes at least `dma_min_transfer_ns` (latency, not occupancy).
//! - TensorE throttling (trn2/trn3): after an idle period the MultiplyMoving rate starts at
//!   `pe_throttle_start` of its maximum and ramps to full over `pe_throttle_ramp_ns`.
//!
//! The simulation is event-free: compute records are placed as soon as they are at the head of
//! their engine and all their dependencies are placed; DMAs wait in a queue ordered by ready
//! time and are placed when nothing else can be placed (every record not yet placed depends,
//! directly or through its engine's order, on a queued DMA, so it cannot be ready earlier).

use super::cost::{self, DmaPlan};
use super::fast_hash;
use super::prepare::{Costs, Prepared};
use crate::record::CoreStream;
use crate::record::{BufId, Engine, Instr, Region};
use crate::slots::SlotVec;
use crate::target::TargetSpec;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// Most accesses remembered per buffer and kind (reads / writes). Older ones are forgotten
/// (they are far back in program order and have long completed in any realistic schedule).
const ACCESS_CAP: usize = 64;

/// How a dependency constrains its successor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Read after write: after the producer ends, plus the consumer's dependency latency.
    Raw,
    /// Write after read / write after write: after the earlier record ends.
    After,
    /// Kept in order only: no earlier than the earlier record starts.
    Order,
}

#[derive(Clone, Copy, Debug)]
struct Edge {
    succ: u32,
    kind: Kind,
    /// For TensorE successors: the constraint applies to the MultiplyMoving phase.
    late: bool,
}

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
    /// [`critical::bandwidth_bound`](super::critical::bandwidth_bound)).
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

/// No node (end of an access list).
const NIL: u32 = u32::MAX;

/// One remembered access: the region, the record and the next (younger) access of its list.
struct Node {
    reg: Region,
    rec: u32,
    next: u32,
}

/// A list of accesses of one buffer and kind, oldest first, in the table's node arena.
#[derive(Clone, Copy)]
struct List {
    head: u32,
    tail: u32,
    len: u32,
}

impl Default for List {
    fn default() -> List {
        List {
            head: NIL,
            tail: NIL,
            len: 0,
        }
    }
}

/// The remembered accesses of one buffer, at most [`ACCESS_CAP`] of each kind.
#[derive(Default, Clone, Copy)]
struct Accesses {
    reads: List,
    writes: List,
}

fn covers(a: &Region, b: &Region) -> bool {
    a.buf == b.buf && a.p0 <= b.p0 && a.p1 >= b.p1 && a.lo <= b.lo && a.hi >= b.hi
}

/// The accesses of every buffer one core's records touch: a table indexed by a dense buffer
/// slot (one hash lookup per region finds the slot), whose lists share one node arena with a
/// free list, so remembering an access allocates nothing per buffer.
///
/// Tile ids come from one process-wide counter, so the tiles of one launch have nearly
/// consecutive ids: a tile finds its slot in a vector indexed by its id's offset from the
/// first tile seen (a hash lookup per region missed the cache on large kernels). Buffers
/// outside that range (HBM tensors, tiles older than the first one seen or far beyond the
/// range, e.g. when other threads' launches took ids in between) use the map.
#[derive(Default)]
struct AccessTable {
    slots: fast_hash::Map<BufId, u32>,
    /// Id of the first tile seen (meaningful when `tile_slots` is not empty).
    tile_base: u64,
    /// Slot of tile `tile_base + k` at `k` ([`NIL`]: not seen yet).
    tile_slots: Vec<u32>,
    bufs: Vec<Accesses>,
    nodes: SlotVec<Node>,
}

/// Room the tile vector may grow to beyond the buffers seen, as a multiple of them (plus a
/// fixed allowance): bounds its memory when ids run far ahead.
const TILE_SPAN_PER_BUFFER: usize = 4;
const TILE_SPAN_ALLOWANCE: usize = 4096;

impl AccessTable {
    /// The slot of `buf`, created empty on first use.
    fn slot(&mut self, buf: BufId) -> usize {
        let next = self.bufs.len() as u32;
        let s = match buf {
            BufId::Tile(id) => {
                if self.tile_slots.is_empty() {
                    self.tile_base = id;
                }
                let limit = TILE_SPAN_PER_BUFFER * (self.bufs.len() + TILE_SPAN_ALLOWANCE);
                match id.checked_sub(self.tile_base).map(|k| k as usize) {
                    Some(k) if k < self.tile_slots.len() => {
                        let s = &mut self.tile_slots[k];
                        if *s == NIL {
                            *s = next;
                        }
                        *s
                    }
                    Some(k) if k < limit => {
                        self.tile_slots.resize(k + 1, NIL);
                        self.tile_slots[k] = next;
                        next
                    }
                    _ => *self.slots.entry(buf).or_insert(next),
                }
            }
            BufId::Hbm(_) => *self.slots.entry(buf).or_insert(next),
        };
        if s == next {
            self.bufs.push(Accesses::default());
        }
        s as usize
    }

    /// The accesses of `list`, oldest first.
    fn iter(&self, list: List) -> impl Iterator<Item = (&Region, u32)> + '_ {
        let mut at = list.head;
        std::iter::from_fn(move || {
            let n = self.nodes.get(at)?;
            at = n.next;
            Some((&n.reg, n.rec))
        })
    }

    /// Appends `(reg, rec)` to `list`, forgetting its oldest access when it holds
    /// [`ACCESS_CAP`] already.
    fn push_capped(&mut self, list: &mut List, reg: Region, rec: u32) {
        if list.len as usize >= ACCESS_CAP {
            let old = list.head;
            list.head = self.nodes[old].next;
            list.len -= 1;
            self.nodes.release(old);
        }
        let node = Node {
            reg,
            rec,
            next: NIL,
        };
        let id = self.nodes.insert(node);
        if list.len == 0 {
            list.head = id;
        } else {
            self.nodes[list.tail].next = id;
        }
        list.tail = id;
        list.len += 1;
    }

    /// Forgets the accesses of `list` whose region `w` covers.
    fn forget_covered(&mut self, list: &mut List, w: &Region) {
        let (mut prev, mut at) = (NIL, list.head);
        while at != NIL {
            let next = self.nodes[at].next;
            if covers(w, &self.nodes[at].reg) {
                if prev == NIL {
                    list.head = next;
                } else {
                    self.nodes[prev].next = next;
                }
                if list.tail == at {
                    list.tail = prev;
                }
                list.len -= 1;
                self.nodes.release(at);
            } else {
                prev = at;
            }
            at = next;
        }
    }
}

/// Dependencies of the records `base..base + recs.len()` of one core, as (pred, edge) pairs.
#[cfg(test)]
fn dependencies(recs: &[&Instr], base: u32, out: &mut Vec<(u32, Edge)>) {
    let mut pass = DepPass::new(base);
    pass.edges = std::mem::take(out);
    pass.engines.reserve(recs.len());
    for r in recs {
        pass.add(r.engine, &r.reads, &r.writes);
    }
    *out = pass.edges;
}

/// Regions per record and kind whose buffer slots [`DepPass::add`] remembers between its
/// checks and its updates (more are looked up again).
const KEEP: usize = 4;

/// The dependency pass over one core's records, fed one record at a time in program order
/// (it needs only earlier records, so it can run while the kernel still records: see
/// [`RecordFeed`](super::feed::RecordFeed)).
pub(crate) struct DepPass {
    table: AccessTable,
    /// Engine of every record fed so far.
    engines: Vec<Engine>,
    /// Global index of the first record.
    base: u32,
    /// The dependencies found so far, as (pred, edge) pairs.
    edges: Vec<(u32, Edge)>,
}

impl DepPass {
    /// A pass whose first record has global index `base`.
    pub(crate) fn new(base: u32) -> DepPass {
        DepPass {
            table: AccessTable::default(),
            engines: Vec::new(),
            base,
            edges: Vec::new(),
        }
    }

    /// The pass emptied for records from global index `base` on, keeping its room.
    pub(crate) fn reset(&mut self, base: u32) {
        self.table.slots.clear();
        self.table.tile_slots.clear();
        self.table.bufs.clear();
        self.table.nodes = SlotVec::default();
        self.engines.clear();
        self.edges.clear();
        self.base = base;
    }

    /// Bytes held by its record-sized vectors and buffer tables.
    pub(super) fn capacity_bytes(&self) -> usize {
        use std::mem::size_of;
        self.engines.capacity()
            + self.edges.capacity() * size_of::<(u32, Edge)>()
            + self.table.slots.capacity() * (size_of::<(BufId, u32)>() + 1)
            + self.table.tile_slots.capacity() * size_of::<u32>()
            + self.table.bufs.capacity() * size_of::<Accesses>()
    }

    /// Feeds the next record: it runs on `engine`, reads `reads` and writes `writes`.
    pub(crate) fn add(&mut self, engine: Engine, reads: &[Region], writes: &[Region]) {
        let me = self.base + self.engines.len() as u32;
        self.engines.push(engine);
        let (table, out) = (&mut self.table, &mut self.edges);
        let tensor = engine == Engine::Tensor;
        // The slots of the first regions, looked up once for the checks and the updates.
        let mut slots = [[0usize; KEEP]; 2];
        for (ri, reg) in reads.iter().enumerate() {
            let late = tensor && ri > 0;
            let b = table.slot(reg.buf);
            if ri < KEEP {
                slots[0][ri] = b;
            }
            for (w, j) in table.iter(table.bufs[b].writes) {
                if j != me && w.overlaps(reg) {
                    out.push((
                        j,
                        Edge {
                            succ: me,
                            kind: Kind::Raw,
                            late,
                        },
                    ));
                }
            }
        }
        for (wi, reg) in writes.iter().enumerate() {
            let hbm = matches!(reg.buf, BufId::Hbm(_));
            let b = table.slot(reg.buf);
            if wi < KEEP {
                slots[1][wi] = b;
            }
            let acc = table.bufs[b];
            for (w, j) in table.iter(acc.writes) {
                if j != me && w.overlaps(reg) {
                    let kind = if hbm
                        && engine == Engine::Dma
                        && self.engines[(j - self.base) as usize] == Engine::Dma
                    {
                        Kind::Order
                    } else {
                        Kind::After
                    };
                    out.push((
                        j,
                        Edge {
                            succ: me,
                            kind,
                            late: tensor,
                        },
                    ));
                }
            }
            for (rd, j) in table.iter(acc.reads) {
                if j != me && rd.overlaps(reg) {
                    out.push((
                        j,
                        Edge {
                            succ: me,
                            kind: Kind::After,
                            late: tensor,
                        },
                    ));
                }
            }
        }
        for (ri, reg) in reads.iter().enumerate() {
            let b = if ri < KEEP {
                slots[0][ri]
            } else {
                table.slot(reg.buf)
            };
            let mut list = table.bufs[b].reads;
            table.push_capped(&mut list, *reg, me);
            table.bufs[b].reads = list;
        }
        for (wi, reg) in writes.iter().enumerate() {
            let b = if wi < KEEP {
                slots[1][wi]
            } else {
                table.slot(reg.buf)
            };
            let Accesses {
                mut reads,
                mut writes,
            } = table.bufs[b];
            table.forget_covered(&mut writes, reg);
            table.forget_covered(&mut reads, reg);
            table.push_capped(&mut writes, *reg, me);
            table.bufs[b] = Accesses { reads, writes };
        }
    }
}

/// f64 ordered for the DMA queue (times are finite).
#[derive(Clone, Copy, PartialEq)]
struct Key(f64, u32);

impl Eq for Key {}

impl PartialOrd for Key {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

impl Ord for Key {
    fn cmp(&self, o: &Self) -> Ordering {
        // Reversed: BinaryHeap is a max-heap, we want the earliest (then lowest index) first.
        o.0.total_cmp(&self.0).then(o.1.cmp(&self.1))
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

/// How far ahead in its queue an engine looks for a ready, independent record, and how many
/// of its recent busy intervals stay open for such records to fill. A modelling choice (the
/// compiler's scheduling window is not public); it bounds the work per record.
pub(crate) const WINDOW: usize = 32;

/// The recent timeline of one compute engine: busy intervals `(start, end, record)` sorted by
/// start, at most [`WINDOW`] of them; everything before `closed` is no longer fillable.
#[derive(Default)]
struct Timeline {
    busy: Vec<(f64, f64, u32)>,
    closed: f64,
}

impl Timeline {
    /// Earliest start `>= lo` of a `dur`-long interval that overlaps no busy interval.
    fn fit(&self, lo: f64, dur: f64) -> f64 {
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

    fn insert(&mut self, s: f64, e: f64, rec: u32) {
        let pos = self.busy.partition_point(|x| x.0 <= s);
        self.busy.insert(pos, (s, e, rec));
        if self.busy.len() > WINDOW {
            let (_, old_end, _) = self.busy.remove(0);
            self.closed = self.closed.max(old_end);
        }
    }

    /// The record whose interval ends last at or before `t` (what held the engine until `t`).
    fn holder(&self, t: f64) -> u32 {
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

struct CoreState {
    queues: [Vec<u32>; ENGINES],
    heads: [usize; ENGINES],
    timelines: [Timeline; ENGINES],
    free: [f64; ENGINES],
    ls_free: f64,
    prev_mm_start: f64,
    /// Start of the current TensorE throttle ramp.
    pe_warm: f64,
    /// End of the last MultiplyMoving.
    pe_last_end: f64,
    dma_free: Vec<f64>,
    /// Last record placed on each engine slot and on each DMA engine.
    last: [u32; ENGINES],
    dma_last: Vec<u32>,
    stack: usize,
}

/// The per-record vectors a schedule needs only while placing, kept from launch to launch (see
/// [`Prepared`]) so placing touches no fresh pages.
#[derive(Default)]
pub(super) struct SimScratch {
    pending: Vec<u32>,
    first: Vec<u32>,
    fill: Vec<u32>,
    edges: Vec<Edge>,
    ready: Vec<f64>,
    ready_late: Vec<f64>,
    released: Vec<bool>,
    done: Vec<bool>,
    ready_pred: Vec<u32>,
}

impl SimScratch {
    /// Every vector at its initial values for `n` records with `nedges` dependencies.
    fn reset(&mut self, n: usize, nedges: usize) {
        fn fill<T: Clone>(v: &mut Vec<T>, n: usize, x: T) {
            v.clear();
            v.resize(n, x);
        }
        fill(&mut self.pending, n, 0);
        fill(&mut self.first, n + 1, 0);
        self.fill.clear();
        let edge = Edge {
            succ: 0,
            kind: Kind::After,
            late: false,
        };
        fill(&mut self.edges, nedges, edge);
        fill(&mut self.ready, n, 0.0);
        fill(&mut self.ready_late, n, 0.0);
        fill(&mut self.released, n, false);
        fill(&mut self.done, n, false);
        fill(&mut self.ready_pred, n, u32::MAX);
    }

    /// Bytes held.
    pub(super) fn capacity_bytes(&self) -> usize {
        let words = self.pending.capacity()
            + self.first.capacity()
            + self.fill.capacity()
            + self.ready_pred.capacity();
        4 * words
            + std::mem::size_of::<Edge>() * self.edges.capacity()
            + 8 * (self.ready.capacity() + self.ready_late.capacity())
            + self.released.capacity()
            + self.done.capacity()
    }
}

/// Schedules every record of `streams` on `spec`, given their record-only facts `prep`
/// (whose core and instance tables move into the schedule).
pub(crate) fn schedule<'a>(
    streams: &'a [CoreStream],
    spec: &TargetSpec,
    prep: &mut Prepared,
) -> Schedule<'a> {
    let total = prep.records();
    let mut recs: Vec<&Instr> = Vec::with_capacity(total);
    for s in streams {
        for (_, rs) in &s.instances {
            recs.extend(rs);
        }
    }
    let core = std::mem::take(&mut prep.core);
    let per_stack = spec.ncs_per_hbm_stack.max(1);
    let mut cores: Vec<CoreState> = Vec::with_capacity(prep.cores.len());
    for facts in &mut prep.cores {
        cores.push(CoreState {
            queues: std::mem::take(&mut facts.queues),
            heads: [0; ENGINES],
            timelines: Default::default(),
            free: [0.0; ENGINES],
            ls_free: 0.0,
            prev_mm_start: 0.0,
            pe_warm: 0.0,
            pe_last_end: f64::NEG_INFINITY,
            dma_free: vec![0.0; spec.dma_engines.max(1)],
            last: [u32::MAX; ENGINES],
            dma_last: vec![u32::MAX; spec.dma_engines.max(1)],
            stack: facts.nc / per_stack,
        });
    }
    let n = recs.len();
    // Successor lists (CSR), in the scratch vectors of an earlier launch.
    let mut scr = std::mem::take(&mut prep.scratch);
    let nedges = prep.cores.iter().map(|f| f.deps.edges.len()).sum();
    scr.reset(n, nedges);
    let SimScratch {
        pending,
        first,
        fill,
        edges,
        ..
    } = &mut scr;
    let deps = || prep.cores.iter().flat_map(|f| &f.deps.edges);
    for (p, e) in deps() {
        first[*p as usize + 1] += 1;
        pending[e.succ as usize] += 1;
    }
    for i in 0..n {
        first[i + 1] += first[i];
    }
    fill.extend_from_slice(first);
    for &(p, e) in deps() {
        edges[fill[p as usize] as usize] = e;
        fill[p as usize] += 1;
    }
    let stacks = streams.iter().map(|s| s.nc / per_stack).max().unwrap_or(0) + 1;
    let mut sim = Sim {
        spec,
        recs: &recs,
        engine: &prep.engine,
        core: &core,
        costs: &prep.costs,
        pending: std::mem::take(&mut scr.pending),
        first: std::mem::take(&mut scr.first),
        edges: std::mem::take(&mut scr.edges),
        ready: std::mem::take(&mut scr.ready),
        ready_late: std::mem::take(&mut scr.ready_late),
        released: std::mem::take(&mut scr.released),
        done: std::mem::take(&mut scr.done),
        instance: &prep.instance,
        start: vec![0.0; n],
        end: vec![0.0; n],
        ls_end: vec![0.0; n],
        mm_start: vec![0.0; n],
        // A DMA leaves at most one piece per DMA engine (most leave one, see [`Piece`]): room
        // for the most is reserved once, never regrown, and the untouched part is never paged
        // in. (Reserving only the typical count was measured to page-fault more: 36k -> 135k
        // faults over 20 tiled estimates, as glibc then keeps fewer freed pages for reuse.)
        pieces: Vec::with_capacity(prep.dmas * spec.dma_engines.max(1)),
        cores,
        hbm_free: vec![0.0; stacks],
        ready_pred: std::mem::take(&mut scr.ready_pred),
        cause: vec![Cause::Start; n],
        bandwidth_bound: vec![false; n],
        work: ReadyQueue::default(),
        dmas: ReadyQueue::default(),
        lat: Engine::ALL.map(|e| cost::dependency_latency_ns(spec, e)),
        placed: 0,
        plan: DmaPlan::default(),
    };
    for i in 0..n {
        if sim.pending[i] == 0 {
            sim.work.push(Key(0.0, i as u32));
        }
    }
    loop {
        while let Some(Key(_, i)) = sim.work.pop() {
            sim.release(i);
        }
        match sim.dmas.pop() {
            Some(Key(t, i)) => sim.place_dma(i, t),
            None => break,
        }
    }
    // Dependencies and engine order only point backwards, so everything gets placed.
    debug_assert_eq!(sim.placed, n, "every record is placed");
    // Kept for the next launch: the scratch vectors and the engine queues.
    std::mem::swap(&mut scr.pending, &mut sim.pending);
    std::mem::swap(&mut scr.first, &mut sim.first);
    std::mem::swap(&mut scr.edges, &mut sim.edges);
    std::mem::swap(&mut scr.ready, &mut sim.ready);
    std::mem::swap(&mut scr.ready_late, &mut sim.ready_late);
    std::mem::swap(&mut scr.released, &mut sim.released);
    std::mem::swap(&mut scr.done, &mut sim.done);
    std::mem::swap(&mut scr.ready_pred, &mut sim.ready_pred);
    prep.scratch = scr;
    let Sim {
        start,
        end,
        ls_end,
        mm_start,
        pieces,
        cause,
        bandwidth_bound,
        cores,
        ..
    } = sim;
    for (f, st) in prep.cores.iter_mut().zip(cores) {
        f.queues = st.queues;
    }
    Schedule {
        recs,
        core,
        start,
        end,
        ls_end,
        mm_start,
        pieces,
        cause,
        bandwidth_bound,
    }
}

/// MultiplyMoving duration under the TensorE utilisation limit: the limit restarts at
/// `pe_throttle_start` when the engine was idle for more than half the ramp window (utilisation
/// below 50 % over the window) and ramps linearly to 1 over `pe_throttle_ramp_ns`.
fn throttled(spec: &TargetSpec, st: &mut CoreState, mm_start: f64, mm_ns: f64) -> f64 {
    if spec.pe_throttle_start >= 1.0 || spec.pe_throttle_ramp_ns <= 0.0 {
        return mm_ns;
    }
    if mm_start - st.pe_last_end > spec.pe_throttle_ramp_ns / 2.0 {
        st.pe_warm = mm_start;
    }
    let progress = ((mm_start - st.pe_warm) / spec.pe_throttle_ramp_ns).clamp(0.0, 1.0);
    mm_ns / (spec.pe_throttle_start + (1.0 - spec.pe_throttle_start) * progress)
}

struct Sim<'s, 'a> {
    spec: &'s TargetSpec,
    recs: &'s [&'a Instr],
    /// Engine of each record (read without touching the record).
    engine: &'s [Engine],
    core: &'s [u16],
    /// The records' engine costs, prepared from the records alone.
    costs: &'s Costs,
    pending: Vec<u32>,
    first: Vec<u32>,
    edges: Vec<Edge>,
    ready: Vec<f64>,
    ready_late: Vec<f64>,
    released: Vec<bool>,
    /// Record placed.
    done: Vec<bool>,
    /// Instance (within its core) of each record.
    instance: &'s [u32],
    start: Vec<f64>,
    end: Vec<f64>,
    ls_end: Vec<f64>,
    mm_start: Vec<f64>,
    pieces: Vec<Piece>,
    cores: Vec<CoreState>,
    hbm_free: Vec<f64>,
    /// Per record: the record whose end set its `ready` time, if any.
    ready_pred: Vec<u32>,
    cause: Vec<Cause>,
    bandwidth_bound: Vec<bool>,
    /// Records whose dependencies are all placed, earliest ready first: releasing them in
    /// time order lets engines that look ahead fill their idle gaps in time order.
    work: ReadyQueue,
    dmas: ReadyQueue,
    lat: [f64; ENGINES],
    placed: usize,
    /// The DMA plan of the record being placed: one buffer for every DMA record.
    plan: DmaPlan,
}

impl Sim<'_, '_> {
    /// All of `i`'s dependencies are placed.
    fn release(&mut self, i: u32) {
        let engine = self.engine[i as usize];
        if engine == Engine::Dma {
            let t = self.ready[i as usize].max(self.ready_late[i as usize])
                + self.spec.dma_fixed_latency_ns;
            self.dmas.push(Key(t, i));
            return;
        }
        self.released[i as usize] = true;
        let c = self.core[i as usize] as usize;
        let slot = engine.index();
        if engine == Engine::Tensor {
            // TensorE: program order.
            loop {
                let st = &self.cores[c];
                let Some(&head) = st.queues[slot].get(st.heads[slot]) else {
                    break;
                };
                if !self.released[head as usize] {
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
            if self.done[j as usize] {
                if k == self.cores[c].heads[slot] {
                    self.cores[c].heads[slot] += 1;
                }
                k += 1;
                continue;
            }
            if self.released[j as usize] && self.may_pass(c, slot, k) {
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
        let q = &self.cores[c].queues[slot];
        let j = q[k] as usize;
        q[self.cores[c].heads[slot]..k].iter().all(|&i| {
            let i = i as usize;
            self.done[i]
                || (self.instance[i] == self.instance[j]
                    && self.recs[j].independent_of(self.recs[i]))
        })
    }

    fn place_compute(&mut self, i: u32, c: usize, slot: usize) {
        let iu = i as usize;
        let r = self.recs[iu];
        let st = &mut self.cores[c];
        if r.engine == Engine::Tensor {
            let tc = self.costs.tensor(self.spec, iu, r);
            let ls_start = self.ready[iu].max(st.ls_free).max(st.prev_mm_start);
            let ls_end = ls_start + tc.ls_ns;
            let mm_start = ls_end.max(st.free[slot]).max(self.ready_late[iu]);
            let engine_bound = st.free[slot] >= ls_end && st.free[slot] > self.ready_late[iu];
            let prev = st.last[slot];
            self.cause[iu] = self.cause_of(iu, engine_bound, prev);
            let st = &mut self.cores[c];
            st.last[slot] = i;
            let mm_end = mm_start + throttled(self.spec, st, mm_start, tc.mm_ns);
            st.pe_last_end = mm_end;
            st.ls_free = ls_end;
            st.prev_mm_start = mm_start;
            st.free[slot] = mm_end;
            self.start[iu] = ls_start;
            self.ls_end[iu] = ls_end;
            self.mm_start[iu] = mm_start;
            self.end[iu] = mm_end;
        } else {
            let ready = self.ready[iu].max(self.ready_late[iu]);
            // Records it may not pass (same iteration, or outside affine loops) finish first.
            let tl = &st.timelines[slot];
            // The latest end among them; an interval ending no later than the latest so far
            // cannot change it, so only later ones are tested (latest starts first: they tend
            // to end last).
            let mut order = 0.0f64;
            for &(_, e, o) in tl.busy.iter().rev() {
                let o = o as usize;
                if e > order
                    && !(self.instance[o] == self.instance[iu] && r.independent_of(self.recs[o]))
                {
                    order = e;
                }
            }
            let dur = self.costs.compute_ns(self.spec, iu, r);
            let s = tl.fit(ready.max(order), dur);
            let e = s + dur;
            let prev = tl.holder(s);
            st.timelines[slot].insert(s, e, i);
            st.free[slot] = st.free[slot].max(e);
            st.last[slot] = i;
            self.start[iu] = s;
            self.end[iu] = e;
            self.cause[iu] = self.cause_of(iu, s > ready, prev);
        }
        self.propagate(i);
    }

    fn place_dma(&mut self, i: u32, t: f64) {
        let iu = i as usize;
        let r = self.recs[iu];
        self.costs.dma_plan_into(self.spec, iu, r, &mut self.plan);
        let plan = &self.plan;
        self.bandwidth_bound[iu] = super::critical::bandwidth_bound(self.spec, plan);
        let c = self.core[iu] as usize;
        let st = &mut self.cores[c];
        let mut bound = t;
        if plan.hbm_bytes > 0 {
            let h = &mut self.hbm_free[st.stack];
            let h_end = t.max(*h) + plan.hbm_ns;
            *h = h_end;
            bound = bound.max(h_end);
        }
        let mut first = f64::INFINITY;
        let mut last: f64 = t;
        let mut cause = None;
        let (free, held) = (&mut st.dma_free, &mut st.dma_last);
        let ns = &plan.engine_ns[..plan.engine_ns.len().min(free.len()).min(held.len())];
        debug_assert_eq!(
            ns.len(),
            free.len(),
            "a DMA plan has one share per DMA engine"
        );
        let (free, held) = (&mut free[..ns.len()], &mut held[..ns.len()]);
        // When the last DMA placed was this core's and left one piece, every engine is in its
        // state: only the shares can differ.
        let one_state = matches!(self.pieces.last(),
            Some(p) if p.engines as usize == ns.len() && self.core[p.rec as usize] as usize == c);
        // Engines in one state (free time, last record) given one share end the same: each run
        // of such engines is placed once and leaves one piece; it changes neither the cause nor
        // `last` past what its first engine does.
        let mut k = 0;
        while k < ns.len() {
            let (d, f, prev) = (ns[k], free[k], held[k]);
            let mut to = k + 1;
            if one_state && plan.even {
                to = ns.len();
            } else if one_state {
                while to < ns.len() && ns[to].to_bits() == d.to_bits() {
                    to += 1;
                }
            } else {
                while to < ns.len()
                    && ns[to].to_bits() == d.to_bits()
                    && free[to].to_bits() == f.to_bits()
                    && held[to] == prev
                {
                    to += 1;
                }
            }
            let s = t.max(f);
            let pe = (s + d).max(bound);
            if pe > last || cause.is_none() {
                cause = Some(if s > t && prev != u32::MAX && bound <= s + d {
                    Cause::Engine(prev)
                } else {
                    Cause::Start
                });
            }
            free[k..to].fill(pe);
            held[k..to].fill(i);
            self.pieces.push(Piece {
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
        if !first.is_finite() {
            first = t;
        }
        self.start[iu] = first;
        self.end[iu] = last.max(first + plan.floor_ns);
        self.cause[iu] = match cause {
            Some(Cause::Start) | None => self.cause_of(iu, false, u32::MAX),
            Some(c) => c,
        };
        self.propagate(i);
    }

    /// The cause of record `i`'s start: its engine's previous record `prev` when the engine
    /// was the later constraint, else the dependency that made it ready last, else none.
    fn cause_of(&self, i: usize, engine_bound: bool, prev: u32) -> Cause {
        if engine_bound && prev != u32::MAX {
            Cause::Engine(prev)
        } else if self.ready_pred[i] != u32::MAX {
            Cause::Data(self.ready_pred[i])
        } else {
            Cause::Start
        }
    }

    /// Releases the successors of placed record `i`.
    fn propagate(&mut self, i: u32) {
        let iu = i as usize;
        self.placed += 1;
        self.done[iu] = true;
        let (a, b) = (self.first[iu] as usize, self.first[iu + 1] as usize);
        let pe = self.engine[iu];
        let (start, end) = (self.start[iu], self.end[iu]);
        for e in &self.edges[a..b] {
            let s = e.succ as usize;
            let c = match e.kind {
                Kind::Raw => {
                    let se = self.engine[s];
                    let lat = if se == Engine::Dma || (se == Engine::Tensor && pe == Engine::Tensor)
                    {
                        0.0
                    } else {
                        self.lat[se.index()]
                    };
                    end + lat
                }
                Kind::After => end,
                Kind::Order => start,
            };
            if c >= self.ready[s].max(self.ready_late[s]) {
                self.ready_pred[s] = i;
            }
            if e.late {
                self.ready_late[s] = self.ready_late[s].max(c);
            } else {
                self.ready[s] = self.ready[s].max(c);
            }
            self.pending[s] -= 1;
            if self.pending[s] == 0 {
                let ready = self.ready[s].max(self.ready_late[s]);
                self.work.push(Key(ready, e.succ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::SourceLoc;

    fn reg(buf: BufId, p0: u32, p1: u32, lo: u64, hi: u64) -> Region {
        Region {
            buf,
            p0,
            p1,
            lo,
            hi,
        }
    }

    fn rec(engine: Engine, reads: Vec<Region>, writes: Vec<Region>) -> Instr {
        Instr {
            reads: reads.into(),
            writes: writes.into(),
            ..Instr::new(
                engine,
                crate::record::Opcode::TensorCopy,
                "t",
                SourceLoc::caller(),
            )
        }
    }

    fn deps_of(recs: &[Instr]) -> Vec<(u32, u32, Kind, bool)> {
        let refs: Vec<&Instr> = recs.iter().collect();
        let mut out = Vec::new();
        dependencies(&refs, 0, &mut out);
        let mut v: Vec<_> = out
            .into_iter()
            .map(|(p, e)| (p, e.succ, e.kind, e.late))
            .collect();
        v.sort_by_key(|x| (x.1, x.0));
        v.dedup();
        v
    }

    #[test]
    fn a_feed_finds_the_dependencies_of_the_direct_pass() {
        // Enough records for several chunks, over a few tiles and HBM tensors, with reads,
        // writes, TensorE phases and DMA-ordered HBM writes.
        let mut x = 7u64;
        let mut next = move |n: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % n
        };
        let engines = [Engine::Dma, Engine::Tensor, Engine::Vector, Engine::Scalar];
        let region = |next: &mut dyn FnMut(u64) -> u64| {
            let buf = if next(3) == 0 {
                BufId::Hbm(next(2))
            } else {
                BufId::Tile(next(40))
            };
            let lo = next(8) * 64;
            reg(buf, 0, 1 + next(128) as u32, lo, lo + 64 * (1 + next(4)))
        };
        let recs: Vec<Instr> = (0..9000)
            .map(|_| {
                let reads = (0..next(3)).map(|_| region(&mut next)).collect();
                let writes = (0..next(2)).map(|_| region(&mut next)).collect();
                rec(engines[next(4) as usize], reads, writes)
            })
            .collect();
        let mut feed = super::super::feed::RecordFeed::new(crate::target::Target::Trn1, 0);
        for r in &recs {
            feed.push(r);
        }
        let prep = feed
            .finish(recs.len())
            .expect("the feed's thread ran the pass");
        let pass = &prep.cores[0].deps;
        let refs: Vec<&Instr> = recs.iter().collect();
        let mut direct = Vec::new();
        dependencies(&refs, 0, &mut direct);
        let flat = |v: &[(u32, Edge)]| -> Vec<(u32, u32, Kind, bool)> {
            v.iter()
                .map(|(p, e)| (*p, e.succ, e.kind, e.late))
                .collect()
        };
        assert!(direct.len() > 1000, "{} edges", direct.len());
        assert_eq!(flat(&pass.edges), flat(&direct));
    }

    #[test]
    fn raw_war_waw_edges() {
        let t = BufId::Tile(1);
        let u = BufId::Tile(2);
        let recs = vec![
            rec(Engine::Vector, vec![], vec![reg(t, 0, 128, 0, 64)]),
            rec(
                Engine::Scalar,
                vec![reg(t, 0, 128, 0, 8)],
                vec![reg(u, 0, 128, 0, 8)],
            ),
            rec(Engine::GpSimd, vec![], vec![reg(t, 0, 128, 32, 40)]),
            rec(Engine::Vector, vec![], vec![reg(t, 0, 128, 100, 200)]),
        ];
        let d = deps_of(&recs);
        assert_eq!(
            d,
            vec![
                (0, 1, Kind::Raw, false),
                (0, 2, Kind::After, false), // WAW
            ]
        );
        // Record 1 read bytes 0..8; record 2 writes 32..40: no WAR. A write over 0..8 has one.
        let mut recs = recs;
        recs.push(rec(Engine::Vector, vec![], vec![reg(t, 0, 1, 4, 5)]));
        let d = deps_of(&recs);
        assert!(d.contains(&(1, 4, Kind::After, false)), "WAR: {d:?}");
        assert!(d.contains(&(0, 4, Kind::After, false)), "WAW: {d:?}");
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
            q.push(Key(t, i));
            heap.push(Key(t, i));
            if x & 3 == 0 {
                got.push(q.pop().map(|k| k.1));
                want.push(heap.pop().map(|k| k.1));
            }
        }
        while let Some(k) = heap.pop() {
            want.push(Some(k.1));
            got.push(q.pop().map(|k| k.1));
        }
        assert_eq!(got, want);
        assert!(q.pop().is_none());
    }

    #[test]
    fn every_buffer_keeps_one_slot_wherever_its_id_lies() {
        // Tiles after the first one seen (dense), before it and far beyond it (map), and HBM
        // tensors with the same numbers as tiles: the same buffer always finds the same slot,
        // different buffers different slots.
        let mut ids = vec![BufId::Tile(1000), BufId::Tile(999), BufId::Hbm(1000)];
        ids.extend((0..50).map(|k| BufId::Tile(1000 + 3 * k)));
        ids.extend([BufId::Tile(u64::MAX), BufId::Tile(1 << 40), BufId::Hbm(1)]);
        ids.extend((0..50).map(|k| BufId::Tile(1000 + 3 * k)));
        ids.push(BufId::Tile(0));
        let mut table = AccessTable::default();
        let mut seen: std::collections::HashMap<BufId, usize> = Default::default();
        for id in ids {
            let s = table.slot(id);
            let fresh = seen.len();
            assert_eq!(*seen.entry(id).or_insert(s), s, "{id:?}");
            if seen.len() > fresh {
                assert_eq!(s, fresh, "{id:?} gets the next slot");
            }
        }
        assert_eq!(table.bufs.len(), seen.len());
    }

    #[test]
    fn access_lists_forget_the_oldest_beyond_the_cap() {
        // ACCESS_CAP + 1 DMA reads of one HBM tensor, then a write over all of it: the write
        // waits for the reads still remembered, not for the first (forgotten) one.
        let h = BufId::Hbm(3);
        let mut recs: Vec<Instr> = (0..=ACCESS_CAP)
            .map(|_| rec(Engine::Dma, vec![reg(h, 0, 1, 0, 64)], vec![]))
            .collect();
        recs.push(rec(Engine::Vector, vec![], vec![reg(h, 0, 1, 0, 64)]));
        let w = recs.len() as u32 - 1;
        let preds: Vec<u32> = deps_of(&recs)
            .into_iter()
            .filter(|x| x.1 == w)
            .map(|x| x.0)
            .collect();
        assert_eq!(preds, (1..=ACCESS_CAP as u32).collect::<Vec<_>>());
    }

    #[test]
    fn covering_writes_prune_older_accesses() {
        let t = BufId::Tile(1);
        let w = |lo, hi| rec(Engine::Vector, vec![], vec![reg(t, 0, 128, lo, hi)]);
        // 0 and 1 write halves, 2 covers both, 3 reads: only 2 is its producer.
        let recs = vec![
            w(0, 32),
            w(32, 64),
            w(0, 64),
            rec(Engine::Scalar, vec![reg(t, 0, 128, 0, 64)], vec![]),
        ];
        let d = deps_of(&recs);
        let preds_of_3: Vec<u32> = d.iter().filter(|x| x.1 == 3).map(|x| x.0).collect();
        assert_eq!(preds_of_3, vec![2]);
    }

    #[test]
    fn hbm_dma_writes_are_only_ordered_and_tensor_phases_split() {
        let h = BufId::Hbm(9);
        let dma = |lo, hi| rec(Engine::Dma, vec![], vec![reg(h, 0, 1, lo, hi)]);
        let d = deps_of(&[dma(0, 100), dma(50, 150)]);
        assert_eq!(d, vec![(0, 1, Kind::Order, false)]);
        // TensorE: the stationary (first read) gates LoadStationary, the rest MultiplyMoving.
        let (s, m, o) = (BufId::Tile(1), BufId::Tile(2), BufId::Tile(3));
        let full = |b| reg(b, 0, 128, 0, 256);
        let recs = vec![
            rec(Engine::Dma, vec![], vec![full(s)]),
            rec(Engine::Dma, vec![], vec![full(m)]),
            rec(Engine::Tensor, vec![full(s), full(m)], vec![full(o)]),
            rec(
                Engine::Tensor,
                vec![full(s), full(m), full(o)],
                vec![full(o)],
            ),
        ];
        let d = deps_of(&recs);
        assert!(d.contains(&(0, 2, Kind::Raw, false)));
        assert!(d.contains(&(1, 2, Kind::Raw, true)));
        assert!(d.contains(&(2, 3, Kind::Raw, true)));
        assert!(d.contains(&(2, 3, Kind::After, true)));
    }
}
