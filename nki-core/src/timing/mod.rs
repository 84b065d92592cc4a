//! The timing model of a NeuronCore: per-engine instruction costs ([`cost`]) and a
//! dependency-aware scheduler ([`schedule`](self#the-scheduler)) that turn the instruction
//! records of a launch into a modelled timeline, summarised as a [`Profile`].
//!
//! # The scheduler
//! Each engine runs its records in program order; records wait for the records whose regions
//! they depend on (RAW, WAR, WAW); engines overlap otherwise. Instances on one NeuronCore run
//! one after another (their streams are concatenated), NeuronCores side by side, sharing an
//! HBM stack where the target says so. The launch pays the target's fixed pre/postamble on
//! top. The critical path through the result says what bounds the kernel
//! ([`Profile::bounds`]). See `schedule.rs` for the details and the README's "Timing model"
//! section for sources and fitted parameters.

pub mod cost;
mod dma;
mod order;
mod tensor;

mod critical;
mod deps;
pub(crate) mod fast_hash;
mod feed;
mod prepare;
mod priority;
mod rows;
mod schedule;
mod scratch;
mod spans;
#[cfg(test)]
mod test_records;

pub(crate) use feed::RecordFeed;

use crate::memory::MemoryPeak;
use crate::profile::{CoreProfile, EngineStat, LineStat, Profile, Spans};
use crate::record::CoreStream;
use crate::record::Engine;
use crate::target::Target;
use prepare::Prepared;
use rows::{LineKey, RecordRows};

/// Sorts intervals by start (`total_cmp` order). An engine's intervals come in record order:
/// sorted, or nearly (DMAs: a few, such as stores, start after records that follow them). So
/// the intervals that start after a later one are taken out (the rest is sorted), sorted apart
/// and merged back in; when they are many, the general sort does it all.
fn sort_by_start(v: &mut [(f64, f64)]) {
    if v.is_sorted_by(|a, b| a.0.total_cmp(&b.0).is_le()) {
        return;
    }
    // From the end: `kept` (descending) starts no later than any later interval.
    let mut kept: Vec<(f64, f64)> = Vec::with_capacity(v.len());
    let mut late: Vec<(f64, f64)> = Vec::new();
    for &x in v.iter().rev() {
        match kept.last() {
            Some(min) if x.0.total_cmp(&min.0).is_gt() => late.push(x),
            _ => kept.push(x),
        }
        if late.len() > v.len() / 8 {
            v.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
            return;
        }
    }
    late.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
    // Merge from the back: the latest start of either list goes last.
    let (mut k, mut l) = (0, late.len());
    for slot in v.iter_mut().rev() {
        let take_late = match (kept.get(k), l.checked_sub(1).map(|j| &late[j])) {
            (Some(a), Some(b)) => b.0.total_cmp(&a.0).is_gt(),
            (None, Some(_)) => true,
            (_, None) => false,
        };
        if take_late {
            l -= 1;
            *slot = late[l];
        } else if let Some(&a) = kept.get(k) {
            k += 1;
            *slot = a;
        }
    }
}

/// Length of the union of intervals (sorted here).
fn union_len(v: &mut [(f64, f64)]) -> f64 {
    // Intervals with equal starts merge the same way in any order.
    sort_by_start(v);
    let mut total = 0.0;
    let mut cur: Option<(f64, f64)> = None;
    for &(s, e) in v.iter() {
        match cur {
            Some((cs, ce)) if s <= ce => cur = Some((cs, ce.max(e))),
            Some((cs, ce)) => {
                total += ce - cs;
                cur = Some((s, e));
            }
            None => cur = Some((s, e)),
        }
    }
    if let Some((cs, ce)) = cur {
        total += ce - cs;
    }
    total
}

/// Runs `here` on this thread and `side` beside it on a scoped thread named `name` when
/// `apart` (here too when it is not or the thread cannot start); returns both results.
fn side_by_side<A, B: Send>(
    apart: bool,
    name: &str,
    side: impl Fn() -> B + Sync,
    here: impl FnOnce() -> A,
) -> (A, B) {
    std::thread::scope(|scope| {
        let beside = apart
            .then(|| {
                std::thread::Builder::new()
                    .name(name.into())
                    .spawn_scoped(scope, &side)
                    .ok()
            })
            .flatten();
        let a = here();
        let b = match beside {
            Some(h) => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
            None => side(),
        };
        (a, b)
    })
}

/// Models the launch's record streams on `target` and summarises the timeline.
pub fn model(streams: &[CoreStream], target: Target, memory: MemoryPeak) -> Profile {
    let asap = crate::compiler::config::SchedulingHeuristic::Asap;
    profile(schedule(streams, target, None, &[], &[], asap), memory)
}

/// A launch's records placed on its modelled NeuronCores ([`schedule`]), what [`profile`]
/// summarises.
pub(crate) struct Timeline<'a> {
    streams: &'a [CoreStream],
    target: Target,
    prep: Prepared,
    sch: schedule::Schedule<'a>,
    rows: RecordRows,
    /// True when the work beside the placement ran on the CPU the feed held (the summary's
    /// side work goes there too).
    apart: bool,
}

/// Places the launch's record streams on `target`'s engines, given the feed that followed
/// the first core's records as they were recorded (its preparation of them is used when it
/// saw all of them; see [`RecordFeed`]) and cross-core edges: each `(a, b)` (global record
/// indices) starts record `b` no earlier than record `a` ends (plus `b`'s engine's
/// dependency latency), as a read-after-write would; the two cores of an LNC=2 launch wait
/// for each other this way at `sendrecv` and `core_barrier` (see `isa::lnc`). `waits` are the
/// anti-dependencies of the allocation's addresses (`compiler::allocate`): each `(a, b)` starts
/// write `b` no earlier than record `a` ends (a TensorE write: its MultiplyMoving phase).
/// `heuristic` picks which ready instruction goes first (see `priority`).
pub(crate) fn schedule<'a>(
    streams: &'a [CoreStream],
    target: Target,
    feed: Option<RecordFeed>,
    cross: &[(usize, usize)],
    waits: &[(usize, usize)],
    heuristic: crate::compiler::config::SchedulingHeuristic,
) -> Timeline<'a> {
    let mut cross: Vec<(u32, order::Edge)> = cross
        .iter()
        .map(|&(a, b)| {
            (
                a as u32,
                order::Edge {
                    succ: b as u32,
                    kind: order::Kind::Raw,
                    late: false,
                },
            )
        })
        .collect();
    if !waits.is_empty() {
        let engine_of = record_engines(streams, waits);
        cross.extend(waits.iter().zip(engine_of).map(|(&(a, b), e)| {
            (
                a as u32,
                order::Edge {
                    succ: b as u32,
                    kind: order::Kind::After,
                    late: e == Engine::Tensor,
                },
            )
        }));
    }
    if heuristic == crate::compiler::config::SchedulingHeuristic::Trivial {
        cross.extend(priority::program_order_edges(streams));
    }
    let spec = target.spec();
    // A feed holds a host CPU for this launch's modelling (see `spmd::HostLoad`).
    let spare_core = feed.is_some();
    // The feed followed the first core's only instance.
    let fed = feed.and_then(|f| match streams.first().map(|s| &s.instances[..]) {
        Some([(_, records)]) => f.finish(records),
        _ => None,
    });
    let mut prep = Prepared::of_streams(streams, spec, fed);
    let n = prep.records();
    // On the CPU the feed held, the rows are built while this thread places the records, and
    // the critical path is walked while it summarises the placement (a launch too small to
    // have fed a chunk does both here).
    let apart = spare_core && n >= feed::CHUNK;
    let (sch, rows) = side_by_side(
        apart,
        "nki-rows",
        || RecordRows::of_streams(streams, spec),
        || schedule::schedule(streams, spec, &mut prep, &cross, heuristic),
    );
    Timeline {
        streams,
        target,
        prep,
        sch,
        rows,
        apart,
    }
}

/// The engine of each wait's later record (`waits` in global record indices).
fn record_engines(streams: &[CoreStream], waits: &[(usize, usize)]) -> Vec<Engine> {
    let all: Vec<&crate::record::Instr> = streams
        .iter()
        .flat_map(|s| s.instances.iter().flat_map(|(_, rs)| rs.iter()))
        .collect();
    waits.iter().map(|&(_, b)| all[b].engine).collect()
}

/// Summarises a launch's [`Timeline`] (whose peak on-chip usage is `memory`) as its
/// [`Profile`]: latency, engine activity, what bounds it, the lines that cost most.
pub(crate) fn profile(timeline: Timeline, memory: MemoryPeak) -> Profile {
    let (streams, target, apart) = (timeline.streams, timeline.target, timeline.apart);
    let (prep, sch, rows) = (timeline.prep, timeline.sch, timeline.rows);
    let spec = target.spec();
    let n = prep.records();
    let ncores = streams.len().max(1);
    let active = sch.end.iter().copied().fold(0.0f64, f64::max);
    let overhead = spec.launch_overhead_ns;
    let latency = active + overhead;
    let peak_flops_per_ns = 2.0 * spec.pe_array.0 as f64 * spec.pe_array.1 as f64 * spec.tensor_ghz;

    let mut counts = [0usize; Engine::COUNT];
    let mut core_counts = vec![[0usize; Engine::COUNT]; ncores];
    // Per core, per compute engine slot: intervals for the active-time union, reserved
    // exactly (a TensorE record leaves two intervals): no regrowth below. DMA intervals are
    // united beside this thread (`dma_active`).
    let mut intervals: Vec<[Vec<(f64, f64)>; Engine::COUNT]> =
        (0..ncores).map(|_| Default::default()).collect();
    for f in &prep.cores {
        for (k, &m) in f.counts.iter().enumerate() {
            counts[k] += m;
            core_counts[f.pos][k] += m;
            let per = match Engine::ALL[k] {
                Engine::Tensor => 2,
                Engine::Dma => 0,
                _ => 1,
            };
            intervals[f.pos][k].reserve_exact(m * per);
        }
    }
    let RecordRows {
        ops,
        line_of,
        lines,
        core_flops,
        core_dma,
        tr_flops,
        dma,
        bound_facts,
    } = rows;
    let hw_flops: u64 = core_flops.iter().sum();
    let mut dma = dma;
    let mut core_latency = vec![0.0f64; ncores];
    let mut line_time = vec![0.0f64; lines.keys.len()];

    // Per core: the union of its DMAs' intervals.
    let dma_active = || {
        let mut iv: Vec<Vec<(f64, f64)>> = prep
            .cores
            .iter()
            .map(|f| Vec::with_capacity(f.counts[Engine::Dma.index()]))
            .collect();
        iv.resize_with(ncores, Vec::new);
        for i in (0..n).filter(|&i| prep.engine[i] == Engine::Dma) {
            iv[sch.core[i] as usize].push((sch.start[i], sch.end[i]));
        }
        iv.iter_mut().map(|v| union_len(v)).collect::<Vec<f64>>()
    };
    let ((), ((bounds, path), dma_active, core_paths)) = side_by_side(
        apart,
        "nki-critical",
        || {
            (
                critical::bounds(&sch, &prep.engine, active, overhead),
                dma_active(),
                critical::core_paths(&sch, &prep.engine, ncores),
            )
        },
        || {
            for i in 0..n {
                let c = sch.core[i] as usize;
                let (s, e) = (sch.start[i], sch.end[i]);
                let eng = prep.engine[i];
                let k = eng.index();
                core_latency[c] = core_latency[c].max(e);
                let busy = match eng {
                    Engine::Tensor => {
                        intervals[c][k].push((s, sch.ls_end[i]));
                        intervals[c][k].push((sch.mm_start[i], e));
                        e - sch.mm_start[i]
                    }
                    Engine::Dma => e - s,
                    _ => {
                        intervals[c][k].push((s, e));
                        e - s
                    }
                };
                line_time[line_of[i] as usize] += busy;
            }
        },
    );

    let pct = |x: f64, den: f64| if den > 0.0 { 100.0 * x / den } else { 0.0 };
    let mut engines: Vec<EngineStat> = Engine::ALL
        .iter()
        .map(|e| EngineStat {
            engine: e.name().to_string(),
            instructions: 0,
            active_ns: 0.0,
            active_percent: 0.0,
        })
        .collect();
    let mut cores = Vec::with_capacity(ncores);
    for (c, iv) in intervals.iter_mut().enumerate() {
        let mut ce = Vec::new();
        for (k, name) in Engine::ALL.iter().map(|e| e.name()).enumerate() {
            let active = match Engine::ALL[k] {
                Engine::Dma => dma_active[c],
                _ => union_len(&mut iv[k]),
            };
            engines[k].active_ns += active;
            engines[k].instructions += core_counts[c][k];
            ce.push(EngineStat {
                engine: name.to_string(),
                instructions: core_counts[c][k],
                active_ns: active,
                active_percent: pct(active, latency),
            });
        }
        cores.push(CoreProfile {
            nc: streams.get(c).map(|s| s.nc).unwrap_or(c),
            instances: streams.get(c).map(|s| s.instances.len()).unwrap_or(0),
            latency_ns: core_latency[c],
            engines: ce,
            hardware_flops: core_flops[c],
            hfu_percent: pct(core_flops[c] as f64, peak_flops_per_ns * latency),
            dma_bytes: core_dma[c],
            waits_on_shared_engines_ns: core_paths.get(c).map_or(0.0, |p| p.shared_engine_ns),
            waits_on_other_cores_ns: core_paths.get(c).map_or(0.0, |p| p.other_core_ns),
            bounds: core_paths
                .get(c)
                .map_or_else(Vec::new, |p| p.shares.clone()),
        });
    }
    for e in &mut engines {
        e.active_percent = pct(e.active_ns, latency * ncores as f64);
    }
    dma.average_bytes = if dma.count > 0 {
        dma.bytes as f64 / dma.count as f64
    } else {
        0.0
    };
    dma.hbm_gbps = if latency > 0.0 {
        (dma.hbm_read_bytes + dma.hbm_write_bytes) as f64 / latency
    } else {
        0.0
    };
    // Per line: its time on the critical path and DMA-engine time (each DMA's longest engine
    // share: a tiny DMA holds its engines far shorter than a large one, even when both take
    // the small-transfer floor end to end). The DMAs are found in the engine table, not in
    // `ops` (a pass over the rows read a cache line per record: ~0.5 ms of a hoist_load
    // estimate); their bytes per line were summed with the rows.
    let mut line_critical = vec![0.0f64; lines.keys.len()];
    for &(i, ns) in &path {
        line_critical[line_of[i as usize] as usize] += ns;
    }
    let mut line_dma_engine = vec![0.0f64; lines.keys.len()];
    let mut longest_share = vec![0.0f64; n];
    for pc in &sch.pieces {
        let r = pc.rec as usize;
        longest_share[r] = longest_share[r].max(pc.end - pc.start);
    }
    for (i, &e) in prep.engine.iter().enumerate() {
        if e == Engine::Dma {
            line_dma_engine[line_of[i] as usize] += longest_share[i];
        }
    }
    let mut top: Vec<LineStat> = lines
        .keys
        .iter()
        .zip(&lines.counts)
        .zip(line_time)
        .enumerate()
        .map(|(l, ((&(LineKey(loc, api), eng), &cnt), busy))| LineStat {
            location: loc.to_string(),
            api,
            engine: eng.name(),
            instructions: cnt,
            time_ns: line_critical[l],
            percent: pct(line_critical[l], latency),
            busy_ns: busy,
            bytes: lines.dma_bytes[l],
            dma_engine_ns: line_dma_engine[l],
        })
        .collect();
    top.sort_by(|a, b| {
        b.time_ns
            .total_cmp(&a.time_ns)
            .then(b.busy_ns.total_cmp(&a.busy_ns))
            .then(a.location.cmp(&b.location))
            .then(a.api.cmp(b.api))
    });
    top.truncate(10);
    let peak_total = peak_flops_per_ns * latency * ncores as f64;
    let timeline = spans::Timeline::new(sch, prep.engine.clone(), &ops, active, overhead);
    prep.recycle();
    Profile {
        target,
        latency_ns: latency,
        active_ns: active,
        launch_overhead_ns: overhead,
        bounds,
        instructions: n,
        instruction_counts: Engine::ALL
            .iter()
            .zip(counts)
            .map(|(e, c)| (e.name().to_string(), c))
            .collect(),
        engines,
        cores,
        hardware_flops: hw_flops,
        transpose_flops: tr_flops,
        hfu_percent: pct(hw_flops as f64, peak_total),
        mfu_percent: pct((hw_flops - tr_flops) as f64, peak_total),
        dma,
        memory,
        top_lines: top,
        device_loops: Vec::new(),
        spills: Default::default(),
        compiler: Default::default(),
        bound_facts,
        kept_records: Default::default(),
        program_ids: streams
            .iter()
            .map(|s| s.instances.iter().map(|(p, _)| p.clone()).collect())
            .collect(),
        ops,
        spans: Spans::deferred(move || timeline.spans()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn union_len_sorts_nearly_sorted_and_shuffled_intervals() {
        // Nearly sorted (a few intervals early), then shuffled past the insertion budget:
        // both sort by start like the general sort and give the same union.
        let mut x = 99u64;
        let mut next = move || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            x >> 33
        };
        let nearly: Vec<(f64, f64)> = (0..5000)
            .map(|i| {
                let s = if next() % 10 == 0 { i - 1 } else { i } as f64 * 3.0;
                (s, s + (next() % 5) as f64)
            })
            .collect();
        let shuffled: Vec<(f64, f64)> = (0..5000)
            .map(|_| {
                let s = (next() % 20_000) as f64;
                (s, s + (next() % 7) as f64)
            })
            .collect();
        for v in [nearly, shuffled] {
            let mut want = v.clone();
            want.sort_by(|a, b| a.0.total_cmp(&b.0));
            let mut got = v.clone();
            sort_by_start(&mut got);
            let starts = |v: &[(f64, f64)]| v.iter().map(|x| x.0).collect::<Vec<_>>();
            assert_eq!(starts(&got), starts(&want));
            let mut total = 0.0;
            let mut cur: Option<(f64, f64)> = None;
            for &(s, e) in &want {
                cur = match cur {
                    Some((cs, ce)) if s <= ce => Some((cs, ce.max(e))),
                    Some((cs, ce)) => {
                        total += ce - cs;
                        Some((s, e))
                    }
                    None => Some((s, e)),
                };
            }
            total += cur.map_or(0.0, |(cs, ce)| ce - cs);
            assert_eq!(union_len(&mut v.clone()), total);
        }
    }
}
