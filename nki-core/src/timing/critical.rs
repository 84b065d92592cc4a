//! What bounds a kernel: the critical path through a schedule, split into what its time went
//! to (an engine computing, DMA bandwidth, DMA fixed costs, dependency stalls), plus the launch
//! pre/postamble; and the stall intervals the trace draws.
//!
//! The path starts at the record that ends last and walks back along each record's
//! [`Cause`]: the dependency that made it ready last, or the record that held its engine (or
//! DMA engine). A record's own time is attributed to its engine, or for a DMA to bandwidth when
//! its bytes take longer than its fixed costs, else to DMA fixed cost. The gap before a
//! record that waited for a dependency is a dependency stall (for a DMA: its trigger latency).

use super::schedule::{Cause, Schedule};
use crate::profile::{Bound, BoundShare};
use crate::record::Engine;

/// Kinds of [`Bound`]: one per engine and four more.
const BOUNDS: usize = Engine::COUNT + 4;

/// Accumulated critical-path time per [`Bound`], in the order the bounds first got time (the
/// order equal shares keep). A sum per kind of bound, found by index: the walk adds to it at
/// nearly every record of a launch (a search of the bounds so far, comparing them, was a
/// third of the walk).
struct Tally {
    ns: [f64; BOUNDS],
    /// The bounds with time, in the order they first got it.
    order: Vec<Bound>,
}

impl Tally {
    fn new() -> Tally {
        Tally {
            ns: [0.0; BOUNDS],
            order: Vec::with_capacity(BOUNDS),
        }
    }

    fn slot(bound: Bound) -> usize {
        match bound {
            Bound::Engine(e) => e.index(),
            Bound::DmaBandwidth => Engine::COUNT,
            Bound::DmaLatency => Engine::COUNT + 1,
            Bound::DependencyStall => Engine::COUNT + 2,
            Bound::LaunchOverhead => Engine::COUNT + 3,
        }
    }

    #[inline]
    fn add(&mut self, bound: Bound, ns: f64) {
        if ns <= 0.0 {
            return;
        }
        let k = Tally::slot(bound);
        if self.ns[k] == 0.0 {
            // Its first time (every time added is positive).
            self.order.push(bound);
        }
        self.ns[k] += ns;
    }

    /// Every bound with time, as its share of `total` ns, largest first (equal shares in the
    /// order they first got time).
    fn shares_of(&self, total: f64) -> Vec<BoundShare> {
        let mut shares: Vec<BoundShare> = self
            .order
            .iter()
            .map(|&bound| {
                let ns = self.ns[Tally::slot(bound)];
                BoundShare {
                    bound,
                    ns,
                    percent: if total > 0.0 { 100.0 * ns / total } else { 0.0 },
                }
            })
            .collect();
        shares.sort_by(|a, b| b.ns.total_cmp(&a.ns));
        shares
    }
}

/// One step of a walk back along a critical path (see [`walk`]).
struct Step {
    /// The record.
    i: usize,
    /// What its own time went to, and how long the path spends in it.
    own: Bound,
    own_ns: f64,
    /// What the gap before it went to (a stall, or a DMA's trigger latency), and its length.
    gap: Bound,
    gap_ns: f64,
    /// The record whose end decided its start, and whether through an engine the two share
    /// (else through a result).
    next: Option<(usize, bool)>,
}

/// Walks back from record `from`, whose part of the path ends at `t`, along each record's
/// [`Cause`], handing each step to `visit`. A record's own time is attributed to its engine,
/// or for a DMA to bandwidth when its bytes take longer than its fixed costs, else to DMA
/// fixed cost; the gap before it to a dependency stall (for a DMA: its trigger latency).
fn walk(
    sch: &Schedule<'_>,
    engine: &[Engine],
    from: Option<usize>,
    mut t: f64,
    mut visit: impl FnMut(&Step),
) {
    let mut cur = from;
    let mut steps = 0usize;
    while let Some(i) = cur {
        steps += 1;
        if steps > sch.end.len() {
            break; // causes point backwards in time; this is a guard, not a case
        }
        let eng = engine[i];
        let start = sch.start[i].min(t);
        let own = match eng {
            Engine::Dma if sch.bandwidth_bound[i] => Bound::DmaBandwidth,
            Engine::Dma => Bound::DmaLatency,
            e => Bound::Engine(e),
        };
        let own_ns = t - start;
        t = start;
        let next = match sch.cause[i] {
            Cause::Start => None,
            Cause::Engine(p) => Some((p as usize, true)),
            Cause::Data(p) => Some((p as usize, false)),
        };
        let until = next.map_or(0.0, |(p, _)| sch.end[p].min(t));
        let gap = if eng == Engine::Dma {
            Bound::DmaLatency
        } else {
            Bound::DependencyStall
        };
        visit(&Step {
            i,
            own,
            own_ns,
            gap,
            gap_ns: t - until,
            next,
        });
        t = until;
        cur = next.map(|(p, _)| p);
    }
}

/// The critical path of `sch` (whose last record ends at `active_ns`) plus `overhead_ns` of
/// pre/postamble, as shares of the total, largest first; and the records on the path with the
/// time of their own that the path spends in them (disjoint stretches: they sum to at most
/// the active time). `engine` is each record's engine: the walk reads it there, not from the
/// records (a path can visit most of a launch's records, and each visit to a record in the
/// launch's tens of megabytes of them missed the cache: 6.5-7 ms of the tiled tutorial's
/// ~50 ms estimate on the project's VM, against ~1 ms with the table).
pub(crate) fn bounds(
    sch: &Schedule<'_>,
    engine: &[Engine],
    active_ns: f64,
    overhead_ns: f64,
) -> (Vec<BoundShare>, Vec<(u32, f64)>) {
    let mut path: Vec<(u32, f64)> = Vec::new();
    let mut tally = Tally::new();
    tally.add(Bound::LaunchOverhead, overhead_ns);
    let last = (0..sch.end.len()).max_by(|&a, &b| sch.end[a].total_cmp(&sch.end[b]));
    walk(sch, engine, last, active_ns, |s| {
        tally.add(s.own, s.own_ns);
        if s.own_ns > 0.0 {
            path.push((s.i as u32, s.own_ns));
        }
        tally.add(s.gap, s.gap_ns);
    });
    let total = active_ns + overhead_ns;
    (tally.shares_of(total), path)
}

/// Each core's own critical path (from its last-ending record, followed onto whichever core
/// the causes lead to; none for one core).
pub(crate) struct CorePath {
    /// Time in other cores' records reached through an engine they share with this core (a
    /// DMA engine or queue busy with another core's transfer), and the stalls before them.
    pub shared_engine_ns: f64,
    /// Time in other cores' records reached through their results, and the stalls before.
    pub other_core_ns: f64,
    /// The path's split into [`Bound`]s, largest first (percent of this core's latency).
    pub shares: Vec<BoundShare>,
}

/// [`CorePath`] of each of `ncores` cores (empty for one core).
pub(crate) fn core_paths(sch: &Schedule<'_>, engine: &[Engine], ncores: usize) -> Vec<CorePath> {
    if ncores < 2 {
        return Vec::new();
    }
    let mut last: Vec<Option<usize>> = vec![None; ncores];
    for i in 0..sch.end.len() {
        let c = sch.core[i] as usize;
        if c < ncores && last[c].is_none_or(|l| sch.end[i] > sch.end[l]) {
            last[c] = Some(i);
        }
    }
    let mut out = Vec::with_capacity(ncores);
    for (c, from) in last.into_iter().enumerate() {
        let end = from.map_or(0.0, |i| sch.end[i]);
        let mut tally = Tally::new();
        let (mut shared, mut other) = (0.0, 0.0);
        // How the walk entered another core's records: through a shared engine or a result.
        let mut by_engine = false;
        walk(sch, engine, from, end, |s| {
            tally.add(s.own, s.own_ns);
            tally.add(s.gap, s.gap_ns);
            let on_c = sch.core[s.i] as usize == c;
            let leaves = s.next.filter(|&(p, _)| on_c && sch.core[p] as usize != c);
            if let Some((_, e)) = leaves {
                by_engine = e;
            }
            // Time in another core's record, or waiting on this core for one.
            let away = if !on_c {
                s.own_ns + s.gap_ns
            } else if leaves.is_some() {
                s.gap_ns
            } else {
                0.0
            };
            if by_engine {
                shared += away;
            } else {
                other += away;
            }
        });
        out.push(CorePath {
            shared_engine_ns: shared,
            other_core_ns: other,
            shares: tally.shares_of(end),
        });
    }
    out
}

/// The stall intervals of compute records: `(record, waited-for record, start, end)` for every
/// record whose engine sat idle, from the end of the engine's previous interval (in time)
/// until a dependency of the record was ready. The slices are per record: its core, engine,
/// start, end and cause (as in the schedule).
pub(crate) fn stalls(
    core: &[u16],
    engine: &[Engine],
    start: &[f64],
    end: &[f64],
    cause: &[Cause],
) -> Vec<(u32, u32, f64, f64)> {
    let cores = core.iter().map(|&c| c as usize + 1).max().unwrap_or(0);
    let mut by_engine: Vec<Vec<usize>> = vec![Vec::new(); cores * Engine::COUNT];
    for (i, e) in engine.iter().enumerate() {
        if *e != Engine::Dma {
            by_engine[core[i] as usize * Engine::COUNT + e.index()].push(i);
        }
    }
    let mut out = Vec::new();
    for mut recs in by_engine {
        recs.sort_by(|&a, &b| start[a].total_cmp(&start[b]));
        let mut from = 0.0f64;
        for i in recs {
            if let Cause::Data(p) = cause[i] {
                if start[i] > from + 1e-9 {
                    out.push((i as u32, p, from, start[i]));
                }
            }
            from = from.max(end[i]);
        }
    }
    out.sort_by(|a, b| a.2.total_cmp(&b.2).then(a.0.cmp(&b.0)));
    out
}
