//! The pipeline from the records of a launch's instances to its profile, in the order the
//! Neuron compiler and the hardware take a kernel: the compiler rewrites each instance's
//! program ([`crate::compiler::stage`]), the allocator fits its tiles in SBUF
//! ([`crate::compiler::spill`]), the timing model schedules the programs on the NeuronCores
//! ([`crate::timing::schedule`]) and summarises the timeline as a [`Profile`]
//! ([`crate::timing::profile`]). The launcher (`spmd`) runs the instances and hands them over
//! to [`run`].

use crate::compiler::spill;
use crate::compiler::stage::{self, CompilerStage};
use crate::dialect::Dialect;
use crate::error::{Result, SourceLoc};
use crate::memory::{AllocatedTile, MemoryPeak, Overcommit, SpillTile};
use crate::profile::{CompilerStats, Profile, SpillStats};
use crate::record::LoopLog;
use crate::record::{CoreStream, Instr};
use crate::target::Target;
use crate::timing::RecordFeed;

/// One program instance that ran to its end: its records and what the launch learnt of it.
pub(crate) struct Program {
    /// Its program id.
    pub(crate) pid: Vec<usize>,
    /// The NeuronCore it is placed on.
    pub(crate) core: usize,
    /// The modelling thread that followed its records, if any (it reads them in place:
    /// declared, so dropped, before them).
    pub(crate) feed: Option<RecordFeed>,
    /// Its instruction records, in program order.
    pub(crate) records: Vec<Instr>,
    /// Its peak on-chip usage.
    pub(crate) peak: MemoryPeak,
    /// Set when its SBUF tiles over-committed SBUF (resolved by the allocation).
    pub(crate) over: Option<Overcommit>,
    /// Its device loops' runs.
    pub(crate) loops: Vec<LoopLog>,
    /// Where each of its `affine_range` activations began.
    pub(crate) loop_lines: Vec<SourceLoc>,
    /// Its private-HBM tensors: id and name (see `InstanceCtx::private_hbm`).
    pub(crate) private_hbm: Vec<(u64, String)>,
    /// Every SBUF tile it allocated, when its tracker kept them (see `MemoryTracker::all`).
    pub(crate) all_tiles: Vec<SpillTile>,
    /// Every on-chip tile it allocated, for the address allocator.
    pub(crate) tiles: Vec<AllocatedTile>,
    /// The waits its tiles' addresses bring, as `(earlier, later)` record indices (set by
    /// the address allocation).
    pub(crate) waits: Vec<(u32, u32)>,
}

/// A record of a launch: its core and its index within the core's stream.
pub(crate) type RecordAt = (usize, usize);

/// What the launch asks of the pipeline.
pub(crate) struct Plan {
    /// The target modelled.
    pub(crate) target: Target,
    /// The dialect of the kernel (the compiler stage transforms Beta-1 kernels only: an NKI
    /// 0.7 kernel says what runs, the 0.7 compiler documents none of these transformations).
    pub(crate) dialect: Dialect,
    /// The compiler stage's transformations.
    pub(crate) stage: CompilerStage,
    /// What the kernel asks of the compiler (allocation, scheduling; see
    /// [`CompileConfig`](crate::CompileConfig)).
    pub(crate) config: crate::compiler::config::CompileConfig,
    /// True when the records are modelled (simulate and estimate modes).
    pub(crate) models: bool,
    /// The number of NeuronCores of the launch.
    pub(crate) cores: usize,
    /// True when the profile keeps the records for its instruction dump ([`Profile::ir`]).
    pub(crate) keep_records: bool,
    /// The cross-core edges of an LNC=2 pair (`None` for any other launch), as (earlier,
    /// later) pairs of `(core, index in its stream)`.
    pub(crate) pair: Option<Vec<(RecordAt, RecordAt)>>,
}

/// What the compiler and the allocator did to one instance.
#[derive(Default)]
struct Done {
    compiler: CompilerStats,
    spills: SpillStats,
}

/// The launch's programs, placed on their NeuronCores.
struct Placed {
    streams: Vec<CoreStream>,
    /// The peak on-chip usage over all instances.
    memory: MemoryPeak,
    /// The first feed still valid (it followed the only instance of the first core).
    feed: Option<RecordFeed>,
    /// Each instance's device loops, with its core and the index of its first record within
    /// its core's stream.
    loops: Vec<(usize, usize, LoopLog)>,
    /// The waits of the allocation: `(core, earlier, later)`, indices within the core's
    /// stream.
    waits: Vec<(usize, usize, usize)>,
}

/// Runs the pipeline on the launch's `programs` (in launch order): compiler, allocation,
/// schedule, profile. Returns the launch's peak on-chip usage and, when the records are
/// modelled, its profile.
pub(crate) fn run(
    plan: &Plan,
    mut programs: Vec<Program>,
) -> Result<(MemoryPeak, Option<Profile>)> {
    let mut done: Vec<Done> = programs.iter().map(|_| Done::default()).collect();
    compile(plan, &mut programs, &mut done);
    allocate(plan, &mut programs, &mut done)?;
    if plan.models {
        address(plan, &mut programs);
    }
    let Placed {
        streams,
        memory,
        feed,
        loops,
        waits,
    } = place(programs, plan.cores);
    if !plan.models {
        return Ok((memory, None));
    }
    // A launch that held a spare CPU for its modelling drops its records there too.
    let apart = feed.is_some();
    let cross = cross_edges(plan, &streams);
    let waits = global_waits(&streams, waits);
    let timeline = crate::timing::schedule(
        &streams,
        plan.target,
        feed,
        &cross,
        &waits,
        plan.config.scheduling_heuristic,
    );
    let mut profile = with_compiler(
        crate::timing::profile(timeline, memory),
        done,
        loops,
        &streams,
    );
    if plan.keep_records {
        profile.kept_records =
            crate::profile::kept::KeptRecords(Some(std::sync::Arc::new(streams)));
    } else if apart {
        crate::record::recycle_apart(streams);
    } else {
        crate::record::recycle(streams);
    }
    Ok((memory, Some(profile)))
}

/// The compiler: the stage's transformations of each Beta-1 program (on instances whose
/// record indices nothing else refers to: device loops and LNC=2 pairs are left as written),
/// and its count of private-HBM scratch traffic as spills.
fn compile(plan: &Plan, programs: &mut [Program], done: &mut [Done]) {
    let beta1 = plan.dialect == Dialect::Beta1 && plan.models;
    for (p, d) in programs.iter_mut().zip(done.iter_mut()) {
        if beta1 && !plan.stage.is_off() && p.loops.is_empty() && plan.pair.is_none() {
            transform(plan, p, d);
        }
        if beta1 && plan.stage.scratch_spill && !p.private_hbm.is_empty() {
            let mut stats = CompilerStats::default();
            stage::count_scratch(&p.records, &p.private_hbm, &mut d.spills, &mut stats);
            d.compiler.merge(stats);
        }
        if let Some(fd) = &mut p.feed {
            // A deferred feed the stage did not start (it did not run on this program).
            // SAFETY: the records stay in place and unchanged until the feed is synced
            // (`address`), discarded (`allocate`) or finished (`timing::schedule`).
            unsafe { fd.start_all(&p.records) };
        }
    }
}

/// The stage's transformations of one program.
fn transform(plan: &Plan, p: &mut Program, d: &mut Done) {
    let mut marks = [p.over.as_ref().map_or(0, |o| o.start)];
    // The feed reads the records in place: it is done with them before they change.
    if let Some(fd) = &mut p.feed {
        fd.sync();
    }
    let cap = plan.target.spec().sbuf_bytes_per_partition;
    let feed = &mut p.feed;
    if let Some(fd) = feed.as_mut() {
        // A deferred feed prepares the records as recorded beside the stage (used when it
        // changes nothing).
        // SAFETY: the stage only reads the records until it calls `changing`, which stops
        // the feed's thread first.
        unsafe { fd.start_all(&p.records) };
    }
    let mut changing = || {
        if let Some(fd) = feed.as_mut() {
            fd.discard();
        }
    };
    let stats = stage::run(
        &mut p.records,
        plan.stage,
        &mut p.loop_lines,
        &mut marks,
        cap,
        &mut changing,
    );
    if stats.is_empty() {
        return;
    }
    // The feed saw the records as recorded (the CPU it held still serves the modelling).
    if let Some(fd) = &mut p.feed {
        fd.discard();
    }
    if let Some(o) = &mut p.over {
        o.start = marks[0];
        if !p.all_tiles.is_empty() {
            // Tiles dropped before the over-commit point may now live past it: the
            // resolution walks every tile from the first record.
            o.start = 0;
            o.tiles = std::mem::take(&mut p.all_tiles);
        }
    }
    d.compiler.merge(stats);
}

/// The allocation: the records of each program whose SBUF tiles over-committed SBUF, with
/// the compiler's spill traffic (the feed, which saw the records as made, is dropped).
fn allocate(plan: &Plan, programs: &mut [Program], done: &mut [Done]) -> Result<()> {
    let cap = plan.target.spec().sbuf_bytes_per_partition;
    // The compiler stage's whole spills across loops (Beta 1 only, as in `compile`).
    let whole = plan.stage.loop_spill && plan.dialect == Dialect::Beta1;
    for (p, d) in programs.iter_mut().zip(done.iter_mut()) {
        let Some(over) = p.over.take().filter(|_| plan.models) else {
            continue;
        };
        // Discarded before the records change (it reads them in place).
        if let Some(fd) = &mut p.feed {
            fd.discard();
        }
        let records = std::mem::take(&mut p.records);
        let loops = whole.then_some(&p.loop_lines[..]);
        let r = spill::resolve(records, &over, cap, &p.pid, loops)?;
        p.records = r.records;
        p.peak.sbuf_bytes_per_partition = over.peak_before.max(r.stats.resident_peak_bytes);
        d.spills.merge(r.stats);
        d.compiler.merge(r.compiler);
    }
    Ok(())
}

/// The addresses of each program's tiles (`compiler::allocate`), by the launch's compile
/// configuration: later values of a rotating tile renamed in its records (the feed, which saw
/// them as made, is then dropped) and the waits the addresses bring.
fn address(plan: &Plan, programs: &mut [Program]) {
    let spec = plan.target.spec();
    let mut config = plan.config;
    if plan.pair.is_some() {
        // The two cores of an LNC=2 pair write each other's tiles (`sendrecv`): a tile the
        // other core writes into keeps its address.
        config.address_rotation = crate::compiler::config::AddressRotation::Disable;
    }
    for p in programs.iter_mut() {
        let tiles = std::mem::take(&mut p.tiles);
        if let Some(fd) = &mut p.feed {
            // The allocation may rename in place: the feed is done with the records first.
            fd.sync();
        }
        let a = crate::compiler::allocate::allocate(&mut p.records, &tiles, config, spec);
        if let Some(fd) = p.feed.as_mut().filter(|_| a.renamed) {
            fd.discard();
        }
        p.waits = a.waits;
    }
}

/// Each NeuronCore's record stream: its programs in launch order.
fn place(programs: Vec<Program>, cores: usize) -> Placed {
    let mut placed = Placed {
        streams: (0..cores)
            .map(|nc| CoreStream {
                nc,
                instances: Vec::new(),
            })
            .collect(),
        memory: MemoryPeak::default(),
        feed: None,
        loops: Vec::new(),
        waits: Vec::new(),
    };
    for p in programs {
        placed.feed = placed.feed.or(p.feed);
        let stream = &mut placed.streams[p.core];
        let first = stream.records();
        placed
            .loops
            .extend(p.loops.into_iter().map(|l| (p.core, first, l)));
        let core = p.core;
        placed.waits.extend(
            p.waits
                .iter()
                .map(|&(a, b)| (core, first + a as usize, first + b as usize)),
        );
        stream.instances.push((p.pid, p.records));
        placed.memory = placed.memory.max(p.peak);
    }
    placed
}

/// Global record index of the first record of each core's stream (and the total last).
fn bases(streams: &[CoreStream]) -> Vec<usize> {
    let mut base = vec![0usize; streams.len() + 1];
    for (c, st) in streams.iter().enumerate() {
        base[c + 1] = base[c] + st.records();
    }
    base
}

/// The allocation's waits in global record indices.
fn global_waits(streams: &[CoreStream], waits: Vec<(usize, usize, usize)>) -> Vec<(usize, usize)> {
    if waits.is_empty() {
        return Vec::new();
    }
    let base = bases(streams);
    waits
        .into_iter()
        .map(|(c, a, b)| (base[c] + a, base[c] + b))
        .collect()
}

/// The LNC=2 pair's cross-core edges in global record indices.
fn cross_edges(plan: &Plan, streams: &[CoreStream]) -> Vec<(usize, usize)> {
    let base = bases(streams);
    plan.pair
        .iter()
        .flatten()
        .map(|&((c0, i0), (c1, i1))| (base[c0] + i0, base[c1] + i1))
        .collect()
}

/// `profile` with what the compiler and the allocator did (instance by instance, in launch
/// order) and the statistics of its device loops (`loops`, indexed within `streams`).
fn with_compiler(
    mut profile: Profile,
    done: Vec<Done>,
    mut loops: Vec<(usize, usize, LoopLog)>,
    streams: &[CoreStream],
) -> Profile {
    for d in done {
        profile.compiler.merge(d.compiler);
        profile.spills.merge(d.spills);
    }
    profile.spills.sort();
    profile.compiler.sort();
    let base = bases(streams);
    for l in &mut loops {
        l.1 += base[l.0];
    }
    profile.device_loops = crate::profile::loops::stats(&profile, &loops);
    profile
}
