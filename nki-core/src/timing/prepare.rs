//! What placement needs of a launch's records that depends only on the records and the target,
//! not on when they are placed: dependencies, engine costs, DMA plans and engine queues. One record at a time, in global record order (core
//! 0's stream, then core 1's, ...), so it can run while a kernel still records (see
//! [`RecordFeed`](super::feed::RecordFeed)); a launch that was not fed prepares its records
//! the same way before placing them ([`Prepared::of_streams`]).

use super::cost::{self, CostFacts, DmaPlan, TensorCost};
use super::deps::DepPass;
use super::scratch::SimScratch;
use crate::record::{CoreStream, Engine, Instr, Region};
use crate::target::TargetSpec;
use std::sync::Mutex;

/// How long a record occupies its engine, as far as the record alone decides.
#[derive(Clone, Copy, Debug)]
enum Cost {
    /// A Vector/Scalar/GpSimd/Sync record: its time on the engine, ns.
    Compute(f64),
    /// A TensorE record: its two phases.
    Tensor(TensorCost),
    /// A DMA: its plan's index in [`Plans`].
    Dma(u32),
    /// A DMA whose plan placement makes when it places it (prepared on the launching thread,
    /// keeping the plan would only add work).
    DmaAtPlacement,
}

/// One DMA plan without its engine times (which are runs in [`Plans::runs`]). Placement reads
/// the public fields; the others are kept so that a kept plan reads back whole.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct PlanHead {
    runs: (u32, u32),
    /// The plan's [`DmaPlan::busiest_ns`].
    pub busiest_ns: f64,
    #[cfg_attr(not(test), allow(dead_code))]
    even: bool,
    #[cfg_attr(not(test), allow(dead_code))]
    bytes: u64,
    /// The plan's [`DmaPlan::hbm_bytes`].
    pub hbm_bytes: u64,
    /// The plan's [`DmaPlan::hbm_ns`].
    pub hbm_ns: f64,
    /// The plan's [`DmaPlan::floor_ns`].
    pub floor_ns: f64,
    #[cfg_attr(not(test), allow(dead_code))]
    efficiency: f64,
}

impl PlanHead {
    /// The head of `plan`, whose engine times are runs `runs` of a run list.
    fn of(plan: &DmaPlan, runs: (u32, u32)) -> PlanHead {
        PlanHead {
            runs,
            busiest_ns: plan.busiest_ns,
            even: plan.even,
            bytes: plan.bytes,
            hbm_bytes: plan.hbm_bytes,
            hbm_ns: plan.hbm_ns,
            floor_ns: plan.floor_ns,
            efficiency: plan.efficiency,
        }
    }
}

/// Where placement makes the plan of a DMA that was not prepared ahead: the plan being made,
/// and the plans made recently (a placement's own, never kept past it).
#[derive(Default)]
pub(super) struct PlanScratch {
    plan: DmaPlan,
    plans: Plans,
}

/// Most plans a [`PlanScratch`] holds before it starts over.
const SCRATCH_PLANS: usize = 256;

/// The DMA plans of a launch, stored compactly: a plan's per-engine times as runs of equal
/// values (most DMAs give every engine, or every engine but the first and last, one share).
#[derive(Default)]
struct Plans {
    heads: Vec<PlanHead>,
    /// `(engine time, engines)` runs, plan after plan.
    runs: Vec<(f64, u32)>,
    /// The cost facts of the last few plans made, with their indices: a plan depends on its
    /// record's cost facts only, and a loop issues the same few DMA shapes over and over, so
    /// a record whose facts match one of these shares its plan.
    recent: [Option<(CostFacts, u32)>; RECENT_PLANS],
    /// Where the next plan made goes in `recent` (round robin).
    next_recent: usize,
}

/// How many recently made DMA plans [`Plans::plan`] compares a record against (a loop body
/// rarely issues more distinct DMA shapes than this).
const RECENT_PLANS: usize = 4;

/// Appends `plan`'s per-engine times to `runs` as maximal runs of equal (bit-identical)
/// values: one run for an even plan.
fn push_runs(runs: &mut Vec<(f64, u32)>, plan: &DmaPlan) {
    if plan.even && !plan.engine_ns.is_empty() {
        runs.push((plan.engine_ns[0], plan.engine_ns.len() as u32));
        return;
    }
    let from = runs.len();
    for &ns in &plan.engine_ns {
        match runs[from..].last_mut() {
            Some((v, n)) if v.to_bits() == ns.to_bits() => *n += 1,
            _ => runs.push((ns, 1)),
        }
    }
}

impl Plans {
    /// The index of the plan of a DMA with cost facts `r`: a recent plan with the same facts,
    /// or a new one made in `scratch` and kept.
    fn plan(&mut self, spec: &TargetSpec, r: &CostFacts, scratch: &mut DmaPlan) -> u32 {
        if let Some(&(_, k)) = self.recent.iter().flatten().find(|(f, _)| f == r) {
            return k;
        }
        cost::dma_plan_into(spec, *r, scratch);
        let k = self.push(scratch);
        self.recent[self.next_recent] = Some((*r, k));
        self.next_recent = (self.next_recent + 1) % RECENT_PLANS;
        k
    }

    /// Forgets every plan.
    fn clear(&mut self) {
        self.heads.clear();
        self.runs.clear();
        self.recent = [None; RECENT_PLANS];
        self.next_recent = 0;
    }

    /// Keeps `plan`; returns its index.
    fn push(&mut self, plan: &DmaPlan) -> u32 {
        let from = self.runs.len();
        push_runs(&mut self.runs, plan);
        let head = PlanHead::of(plan, (from as u32, self.runs.len() as u32));
        self.heads.push(head);
        self.heads.len() as u32 - 1
    }

    /// Plan `k`: its head and its engine times as runs of equal values.
    #[inline]
    fn get(&self, k: u32) -> (&PlanHead, &[(f64, u32)]) {
        let h = &self.heads[k as usize];
        (h, &self.runs[h.runs.0 as usize..h.runs.1 as usize])
    }
}

/// Writes plan `head` with engine times `runs` into `plan`.
#[cfg(test)]
fn plan_of(head: &PlanHead, runs: &[(f64, u32)], plan: &mut DmaPlan) {
    expand_runs(runs, plan);
    plan.busiest_ns = head.busiest_ns;
    plan.even = head.even;
    plan.bytes = head.bytes;
    plan.hbm_bytes = head.hbm_bytes;
    plan.hbm_ns = head.hbm_ns;
    plan.floor_ns = head.floor_ns;
    plan.efficiency = head.efficiency;
}

/// Writes the engine times of `runs` into `plan.engine_ns`.
#[cfg(test)]
fn expand_runs(runs: &[(f64, u32)], plan: &mut DmaPlan) {
    plan.engine_ns.clear();
    for &(ns, n) in runs {
        let len = plan.engine_ns.len();
        plan.engine_ns.resize(len + n as usize, ns);
    }
}

/// Per-record engine costs of a launch, looked up by global record index.
#[derive(Default)]
pub(super) struct Costs {
    cost: Vec<Cost>,
    plans: Plans,
}

impl Costs {
    /// TensorE cost of record `i` (`r`), as [`cost::tensor_cost`] gives it.
    pub(super) fn tensor(&self, spec: &TargetSpec, i: usize, r: &Instr) -> TensorCost {
        match self.cost[i] {
            Cost::Tensor(c) => c,
            _ => cost::tensor_cost(spec, r),
        }
    }

    /// Time of compute record `i` (`r`) on its engine, as [`cost::compute_ns`] gives it.
    pub(super) fn compute_ns(&self, spec: &TargetSpec, i: usize, r: &Instr) -> f64 {
        match self.cost[i] {
            Cost::Compute(ns) => ns,
            _ => cost::compute_ns(spec, r),
        }
    }

    /// The plan of DMA record `i` (`r`), as [`cost::dma_plan_into`] makes it: its head and
    /// its engine times as maximal runs of equal values (kept, or made now in `scratch`).
    #[inline]
    pub(super) fn dma_plan<'a>(
        &'a self,
        spec: &TargetSpec,
        i: usize,
        r: &Instr,
        scratch: &'a mut PlanScratch,
    ) -> (&'a PlanHead, &'a [(f64, u32)]) {
        match self.cost[i] {
            Cost::Dma(k) => self.plans.get(k),
            _ => {
                let PlanScratch { plan, plans } = scratch;
                if plans.heads.len() >= SCRATCH_PLANS {
                    plans.clear();
                }
                let k = plans.plan(spec, &CostFacts::from(r), plan);
                plans.get(k)
            }
        }
    }

    /// The whole plan of DMA record `i` (`r`) written into `plan`, as
    /// [`cost::dma_plan_into`] writes it.
    #[cfg(test)]
    pub(super) fn dma_plan_into(&self, spec: &TargetSpec, i: usize, r: &Instr, plan: &mut DmaPlan) {
        let mut scratch = PlanScratch::default();
        let (head, runs) = self.dma_plan(spec, i, r, &mut scratch);
        plan_of(head, runs, plan);
    }
}

/// What one NeuronCore's stream needs (its records are a contiguous run of the launch's).
pub(super) struct CoreFacts {
    /// Position of the stream in the launch's streams.
    pub pos: usize,
    /// Logical NeuronCore.
    pub nc: usize,
    /// The dependency pass over its records.
    pub deps: DepPass,
    /// Per compute engine slot: its records (global indices) in program order; DMAs have
    /// no queue.
    pub queues: [Vec<u32>; Engine::COUNT],
    /// Records per engine.
    pub counts: [usize; Engine::COUNT],
}

/// The record-only facts of a launch's records, prepared one record at a time.
pub(crate) struct Prepared {
    spec: &'static TargetSpec,
    /// Per core stream prepared so far, in stream order.
    pub(super) cores: Vec<CoreFacts>,
    /// Per record: engine.
    pub(super) engine: Vec<Engine>,
    /// Per record: position of its core's stream.
    pub(super) core: Vec<u16>,
    /// Per record: index (into its core's `instances`) of the instance that issued it.
    pub(super) instance: Vec<u32>,
    /// Per record: engine costs.
    pub(super) costs: Costs,
    /// DMA records.
    pub(super) dmas: usize,
    /// Whether DMA plans are kept (prepared ahead of placement, on another thread).
    keep_plans: bool,
    /// The DMA plan of the record being prepared.
    plan: DmaPlan,
    /// The placement's scratch vectors (kept here from launch to launch).
    pub(super) scratch: SimScratch,
    /// Emptied core facts of an earlier launch, for reuse.
    idle: Vec<CoreFacts>,
}

/// The emptied tables of a modelled launch, kept for the next one so that preparing and
/// placing its records neither regrows vectors nor touches fresh pages.
/// (One per launch modelled at once: estimates on several host threads each keep theirs.)
static SPARE: Mutex<Vec<Prepared>> = Mutex::new(Vec::new());

/// Most bytes [`SPARE`] keeps, all together: a bound on the memory kept between launches.
const SPARE_BYTES: usize = 64 << 20;

impl Prepared {
    /// Nothing prepared yet, for `spec` (in the tables of an earlier launch when there are
    /// some). `ahead`: prepared ahead of placement on another thread, so DMA plans are kept
    /// (else placement plans each DMA as it places it).
    pub(crate) fn new(spec: &'static TargetSpec, ahead: bool) -> Prepared {
        let spare = SPARE.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let p = spare.unwrap_or_else(|| Prepared::empty(spec));
        Prepared {
            spec,
            keep_plans: ahead,
            ..p
        }
    }

    fn empty(spec: &'static TargetSpec) -> Prepared {
        Prepared {
            spec,
            cores: Vec::new(),
            engine: Vec::new(),
            core: Vec::new(),
            instance: Vec::new(),
            costs: Costs::default(),
            dmas: 0,
            keep_plans: false,
            plan: DmaPlan::default(),
            scratch: SimScratch::default(),
            idle: Vec::new(),
        }
    }

    /// Empties the tables and keeps them for a later launch (unless they hold more than
    /// [`SPARE_BYTES`]).
    pub(crate) fn recycle(mut self) {
        for mut f in self.cores.drain(..) {
            f.deps.reset(0);
            f.queues.iter_mut().for_each(Vec::clear);
            self.idle.push(f);
        }
        self.engine.clear();
        self.core.clear();
        self.instance.clear();
        self.costs.cost.clear();
        self.costs.plans.clear();
        self.dmas = 0;
        let bytes = self.capacity_bytes();
        let mut spares = SPARE.lock().unwrap_or_else(|p| p.into_inner());
        let kept: usize = spares.iter().map(Prepared::capacity_bytes).sum();
        if kept + bytes <= SPARE_BYTES {
            spares.push(self);
        }
    }

    /// Bytes held by the record-sized tables.
    fn capacity_bytes(&self) -> usize {
        use std::mem::size_of;
        let per_record = self.engine.capacity() * size_of::<Engine>()
            + self.core.capacity() * 2
            + self.instance.capacity() * 4
            + self.costs.cost.capacity() * size_of::<Cost>();
        let plans = self.costs.plans.heads.capacity() * size_of::<PlanHead>()
            + self.costs.plans.runs.capacity() * size_of::<(f64, u32)>();
        let cores: usize = self
            .idle
            .iter()
            .map(|f| {
                f.deps.capacity_bytes() + f.queues.iter().map(|q| q.capacity() * 4).sum::<usize>()
            })
            .sum();
        per_record + plans + cores + self.scratch.capacity_bytes()
    }

    /// Records prepared.
    pub(crate) fn records(&self) -> usize {
        self.engine.len()
    }

    /// Prepares the records of `streams` (continuing `fed`, the preparation of the first
    /// stream made while it recorded, when it prepared exactly that stream's records).
    pub(crate) fn of_streams(
        streams: &[CoreStream],
        spec: &'static TargetSpec,
        fed: Option<Prepared>,
    ) -> Prepared {
        let fed = fed.filter(|p| {
            let s = streams.first();
            p.cores.len() == 1
                && p.cores[0].pos == 0
                && s.is_some_and(|s| {
                    p.cores[0].nc == s.nc
                        && s.instances.len() == 1
                        && s.instances[0].1.len() == p.records()
                })
        });
        let mut prep = fed.unwrap_or_else(|| Prepared::new(spec, false));
        let total: usize = streams.iter().map(CoreStream::records).sum();
        prep.reserve(total - prep.records());
        for (pos, s) in streams.iter().enumerate().skip(prep.cores.len()) {
            prep.begin_core(pos, s.nc);
            for (ii, (_, rs)) in s.instances.iter().enumerate() {
                for r in rs {
                    prep.add(&r.cost, &r.reads, &r.writes, ii as u32);
                }
            }
        }
        prep
    }

    /// Room for `n` more records.
    fn reserve(&mut self, n: usize) {
        self.engine.reserve_exact(n);
        self.core.reserve_exact(n);
        self.instance.reserve_exact(n);
        self.costs.cost.reserve_exact(n);
    }

    /// Starts the stream at position `pos` (logical NeuronCore `nc`): the records added next
    /// are its records.
    pub(crate) fn begin_core(&mut self, pos: usize, nc: usize) {
        let base = self.records() as u32;
        let facts = match self.idle.pop() {
            Some(mut f) => {
                f.deps.reset(base);
                CoreFacts {
                    pos,
                    nc,
                    counts: [0; Engine::COUNT],
                    ..f
                }
            }
            None => CoreFacts {
                pos,
                nc,
                deps: DepPass::new(base),
                queues: Default::default(),
                counts: [0; Engine::COUNT],
            },
        };
        self.cores.push(facts);
    }

    /// Prepares the next record of the current stream, whose cost facts are `r`, issued by
    /// its instance `instance`; it reads `reads` and writes `writes`.
    pub(crate) fn add(
        &mut self,
        r: &CostFacts,
        reads: &[Region],
        writes: &[Region],
        instance: u32,
    ) {
        if self.cores.is_empty() {
            self.begin_core(0, 0);
        }
        let Some(core) = self.cores.last_mut() else {
            return;
        };
        let spec = self.spec;
        let i = self.engine.len() as u32;
        core.deps.add(r.engine, r.opcode, reads, writes);
        core.counts[r.engine.index()] += 1;
        self.engine.push(r.engine);
        self.core.push(core.pos as u16);
        self.instance.push(instance);
        let cost = match r.engine {
            Engine::Dma => {
                self.dmas += 1;
                if self.keep_plans {
                    Cost::Dma(self.costs.plans.plan(spec, r, &mut self.plan))
                } else {
                    Cost::DmaAtPlacement
                }
            }
            Engine::Tensor => {
                core.queues[r.engine.index()].push(i);
                Cost::Tensor(cost::tensor_cost(spec, r))
            }
            e => {
                core.queues[e.index()].push(i);
                Cost::Compute(cost::compute_ns(spec, r))
            }
        };
        self.costs.cost.push(cost);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::MemKind;
    use crate::target::Target;

    fn dma(src: MemKind, dst: MemKind, parts: u32, start: u32, bytes: u64) -> Instr {
        let mut r = super::super::test_records::dma(parts, start, bytes);
        let d = r.dma.as_mut().expect("a DMA record");
        (d.src, d.dst) = (src, dst);
        r
    }

    #[test]
    fn dmas_with_equal_facts_share_a_plan_and_every_dma_reads_back_its_own() {
        let (h, s) = (MemKind::Hbm, MemKind::Sbuf);
        let kinds = [
            dma(h, s, 128, 0, 128 * 1024),
            dma(h, s, 4, 0, 32768),
            dma(s, h, 16, 60, 16 * 10_000),
            dma(h, s, 100, 3, 100 * 999),
            dma(h, h, 128, 0, 1 << 20),
            dma(s, h, 1, 127, 64),
        ];
        // More distinct shapes than are remembered, revisited in an order that evicts some.
        let order = [0, 1, 0, 1, 2, 3, 4, 0, 5, 5, 1, 2, 3, 0, 4];
        let spec = Target::Trn2.spec();
        let mut plans = Plans::default();
        let mut scratch = DmaPlan::default();
        let keys: Vec<u32> = order
            .iter()
            .map(|&i| plans.plan(spec, &CostFacts::from(&kinds[i]), &mut scratch))
            .collect();
        for (&i, &k) in order.iter().zip(&keys) {
            let mut back = DmaPlan::default();
            let (head, runs) = plans.get(k);
            plan_of(head, runs, &mut back);
            assert_eq!(back, cost::dma_plan(spec, &kinds[i]), "dma {i}");
        }
        // The repeats while still remembered (positions 2, 3 and 9) made no plan of their
        // own; every other position did.
        assert_eq!((keys[0], keys[1]), (keys[2], keys[3]));
        assert_eq!(keys[8], keys[9]);
        assert_eq!(plans.heads.len(), order.len() - 3);
        plans.clear();
        assert!(plans.heads.is_empty() && plans.recent.iter().all(Option::is_none));
    }

    #[test]
    fn a_kept_plan_reads_back_as_the_plan_placement_would_make() {
        // Every field, including the summary ones placement and the critical walk read.
        let (h, s) = (MemKind::Hbm, MemKind::Sbuf);
        let cases = [
            dma(h, s, 128, 0, 128 * 1024),
            dma(h, s, 4, 0, 32768),
            dma(s, h, 16, 60, 16 * 10_000),
            dma(h, s, 100, 3, 100 * 999),
            dma(s, h, 1, 127, 64),
            dma(h, s, 128, 0, 0),
            dma(h, h, 128, 0, 1 << 20),
        ];
        for spec in [Target::Trn1.spec(), Target::Trn2.spec()] {
            let mut plans = Plans::default();
            let made: Vec<DmaPlan> = cases.iter().map(|r| cost::dma_plan(spec, r)).collect();
            let keys: Vec<u32> = made.iter().map(|p| plans.push(p)).collect();
            for (p, k) in made.iter().zip(keys) {
                let mut back = DmaPlan::default();
                let (head, runs) = plans.get(k);
                plan_of(head, runs, &mut back);
                assert_eq!(&back, p);
            }
        }
    }
}
