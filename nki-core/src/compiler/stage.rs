//! The `compiler` stage: what the Beta-1 NKI compiler does to a kernel's program between
//! tracing and running it, applied to an instance's records before they are costed. Each
//! transformation is switchable ([`CompilerStage`]). Every one of them runs by default on a
//! Beta-1 kernel (neuronx-cc always ran them); with all of them off ([`CompilerStage::OFF`],
//! or a launch's `CompileConfig::as_written()`) the records are costed exactly as the kernel
//! wrote them, and this module runs nothing.
//!
//! What the evidence says, transformation by transformation:
//!
//! - **Duplicate removal and hoisting.** An instruction that recomputes what an earlier one
//!   already produced — a load of the same HBM bytes with no write to them in between, a
//!   TensorE transpose of the same unchanged tile, the PSUM-to-SBUF copy of such a transpose —
//!   is removed and its readers read the earlier result, provided the tile holding that
//!   result is still in use at that point of the program as written (so reusing it keeps no
//!   tile in SBUF longer than the kernel already did). When the two copies lie in different
//!   iterations of one `affine_range` loop the instruction is loop-invariant: the compiler
//!   runs it once (hoisted out of the loop). Evidence: the NKIBench swiglu baseline
//!   (`zhang677/AccelOpt NKIBench/kernels/swiglu_M4096_N3072_K1024_0.py`) loads its input `v1`
//!   and transposes it in every iteration of its outermost `affine_range(3)` loop and again in
//!   a second loop nest (6 loads of 16.8 MB), yet the profiler counts 141.6 MB of HBM reads
//!   for it (calibration.md section 5): its 37.7 MB of weights, 83.9 MB of spill reloads and
//!   one load of the input, not six. `affine_range` tells the compiler the iterations are
//!   independent (nki.language.affine_range: "iterations ... can be executed in parallel"
//!   with no loop-carried dependency), which is what allows moving such an instruction out.
//!   Counter-evidence, why the held-tile condition: the matmul tutorial's "tiled" version (calibration.md section 1) runs 20 %
//!   slower than its hand-hoisted version on trn1, so the compiler of that measurement did
//!   not hoist the lhsT loads out of its `n` loop (each iteration's tile is dropped before the
//!   next iteration loads it again); the NKIBench matmul baseline's HBM read counter
//!   (12 x lhs) shows its lhs loads repeated per N block, likewise not hoisted. Without the
//!   held-tile condition the stage took the tutorial's "tiled" version from 51.8 ms to
//!   7.1 ms.
//! - **Buffer renaming (multi-buffering).** A tile allocated outside an `affine_range` loop
//!   and rewritten by every iteration carries no value from one iteration to the next
//!   (checked: each iteration's reads of it lie inside what the same iteration wrote first).
//!   Its anti-dependences (an iteration's DMA into the tile waiting for the previous
//!   iteration's matmuls to finish reading it) are an artefact of reusing one buffer; the
//!   compiler allocates a buffer per in-flight iteration (the Beta-1 allocation API exposes
//!   the same mechanism as `mod_alloc(..., num_free_tiles=...)`, and the NKIBench mamba
//!   baseline's counters, spill = 7.5 x its output, show the space it takes). Here each
//!   iteration gets its own buffer id; the space is not charged (see "Limits").
//!
//! - **A zero-filled PSUM accumulator.** `nl.zeros(.., buffer=nl.psum)` followed by
//!   `psum += nl.matmul(..)` (the Beta-1 tutorials' accumulation pattern) is a VectorE memset
//!   the kernel as written queues behind other VectorE work, with TensorE waiting for it. The
//!   hardware needs no such step: a matmul either overwrites its PSUM destination or
//!   accumulates onto it (NKI 0.7 makes the choice explicit, `nc_matmul(.., accumulate=)`),
//!   so the compiler starts the accumulation with an overwriting first matmul and drops the
//!   fill (the reading of public profiles: the accumulation starts with the first
//!   matmul, no memset before it). Folded here when the next access to the zeroed region is a
//!   TensorE matmul writing all of it (a region read or partly written first keeps its fill).
//!
//! - **Private-HBM scratch is spill traffic.** A DMA from a tile to a tensor the instance
//!   allocated in private HBM (`nl::private_hbm`, Beta 1's `nl.hbm`), or back, is counted as
//!   a spill save or reload in the profile ([`crate::profile::SpillStats`]; the DMAs run as
//!   written). Evidence: the compiler-emitted NKIBench swiglu program stores its `[M, N]`
//!   product to `_spill_163` (`buffer=nl.hbm`) and loads it back as `_reload_166`, and the
//!   profiler's counters (calibration.md section 5) count those bytes as spill: HBM write
//!   (83.9 MB) is its 16.8 MB output plus the spill save counter (67.1 MB) exactly, which
//!   holds the product's 50.3 MB.
//!
//! - **Loop fusion** (`compiler::fuse`, after the interchange) and **chains of
//!   transposes**: a TensorE transpose's result has a value in the `hoist_compute` walk,
//!   copies and transposes (no immediates) are valued without their source line, the
//!   transposes and loads only removed copies read go with them, and a loop keeps its
//!   hoisted values only when they fit in SBUF (NKIBench matmul's lhs 12 x in its HBM read
//!   counter: its 640 KiB per partition of lhs^T was not hoisted; swiglu's 128 KiB x^T was,
//!   one load of x).
//!
//! - **A value kept across a loop is spilled whole** (`loop_spill`, applied by the capacity
//!   resolution, `compiler::spill` rule 5): a computed tile kept across an `affine_range`
//!   loop's iterations that has to leave SBUF is saved once and re-loaded whole in each later
//!   iteration that reads it. Evidence: NKIBench swiglu's counters hold its hoisted x^T
//!   (16.8 MB) saved once and re-loaded whole in each of the two later N blocks.
//!
//! - **Loop interchange** (`interchange`, `compiler::interchange`, runs first): an
//!   `affine_range` loop whose every iteration runs a sequential loop is moved inside it
//!   (distributed over its body, one step of the sequential loop for all iterations at a
//!   time) where the hoisting then keeps a loop-invariant computation of that step within
//!   SBUF. Evidence: NKIBench lora's counters (its K-chunk x^T computed once, saved once and
//!   re-loaded per N block; every N block's accumulators saved and re-loaded per K chunk).
//!
//! Limits: renamed copies are not seen by the capacity resolution (`compiler::spill`), so
//! multi-buffering never causes spill here; an instance with device loops or an LNC=2 pair
//! is left as written (their record indices are referenced elsewhere); HBM regions are
//! bounding byte ranges, so two loads are taken as the same bytes when their ranges, byte
//! counts, run lengths and tile shapes all agree.

use crate::error::SourceLoc;
use crate::profile::compiler::{CompilerKind, CompilerLine, CompilerStats};
use crate::profile::spills::{SpillKind, SpillStats};
use crate::record::{BufId, Engine, Instr, MemKind, Opcode, Region};
use crate::timing::fast_hash::Map;
use std::cell::Cell;
use std::hash::{Hash, Hasher};

/// Which transformations of the `compiler` stage run before a launch is costed (see the
/// module `compiler::stage` and docs/timing-model.md). [`CompilerStage::BETA1`] is what a
/// launch takes unless set; [`CompilerStage::OFF`] costs every kernel exactly as written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CompilerStage {
    /// Remove an instruction (load, TensorE transpose, its PSUM copy) that recomputes what an
    /// earlier one of the same loop iteration, of straight-line code or of another loop
    /// produced.
    pub dedup: bool,
    /// Run a loop-invariant instruction of an `affine_range` loop once (its copies in the
    /// later iterations removed).
    pub hoist: bool,
    /// Run a loop-invariant computation of an `affine_range` loop (an element-wise, reduce,
    /// scan or copy instruction whose inputs hold the same values in every iteration) once,
    /// keeping its result for the later iterations, and drop the loads and TensorE
    /// transposes that only fed its removed copies. Only for a loop whose kept results fit
    /// in SBUF; with `dedup`, also a copy repeating one outside a common loop while the first
    /// result is still in use (see docs/timing-model.md, "The compiler stage").
    pub hoist_compute: bool,
    /// Give a tile rewritten by every iteration of an `affine_range` loop one buffer per
    /// iteration.
    pub multi_buffer: bool,
    /// Drop the zero fill of a PSUM tile whose next access is a matmul writing all of it
    /// (the matmul starts the accumulation).
    pub psum_zero_fold: bool,
    /// Count the DMAs between tiles and the instance's private-HBM tensors (`nl::private_hbm`,
    /// the compiler-emitted programs' `_spill_*` buffers) as spill save and reload traffic in
    /// the profile (what runs is unchanged).
    pub scratch_spill: bool,
    /// Fuse two sibling `affine_range` loops with the same trip count whose second consumes,
    /// iteration by iteration, the tiles the first produces (`compiler::fuse`).
    pub fuse: bool,
    /// Spill a computed SBUF tile kept across the iterations of an `affine_range` loop, when
    /// the loop's tiles do not fit beside it, as a whole: saved once after its definition,
    /// re-loaded whole in each later iteration that reads it (`compiler::spill`, rule 5).
    pub loop_spill: bool,
    /// Move an `affine_range` loop inside the sequential loop every one of its iterations
    /// runs (one step of it for all iterations at a time), where the hoisting
    /// (`hoist_compute`) then keeps a loop-invariant computation of that sequential body that
    /// fits in SBUF (`compiler::interchange`).
    pub interchange: bool,
}

impl CompilerStage {
    /// Nothing transformed: the kernel is costed as written.
    pub const OFF: CompilerStage = CompilerStage {
        dedup: false,
        hoist: false,
        hoist_compute: false,
        multi_buffer: false,
        psum_zero_fold: false,
        scratch_spill: false,
        fuse: false,
        loop_spill: false,
        interchange: false,
    };

    /// Every transformation the Beta-1 compiler is modelled doing.
    pub const BETA1: CompilerStage = CompilerStage {
        dedup: true,
        hoist: true,
        hoist_compute: true,
        multi_buffer: true,
        psum_zero_fold: true,
        scratch_spill: true,
        fuse: true,
        loop_spill: true,
        interchange: true,
    };

    /// True when no transformation runs.
    pub fn is_off(&self) -> bool {
        *self == Self::OFF
    }
}

thread_local! {
    /// The stage new launches of this thread take (see [`with_compiler_stage`]): every
    /// transformation unless set.
    static STAGE: Cell<CompilerStage> = const { Cell::new(CompilerStage::BETA1) };
}

/// Runs `f` with `stage` as the compiler stage of every launch it builds on this thread
/// (`Launch::new`, hence every `k::simulate` / `k::estimate` / `launch!`), then restores the
/// previous setting (also when `f` unwinds). [`Launch::compiler`](crate::Launch::compiler)
/// sets it for one launch.
pub fn with_compiler_stage<R>(stage: CompilerStage, f: impl FnOnce() -> R) -> R {
    struct Restore(CompilerStage);
    impl Drop for Restore {
        fn drop(&mut self) {
            STAGE.with(|s| s.set(self.0));
        }
    }
    let _restore = Restore(STAGE.with(|s| s.replace(stage)));
    f()
}

/// The stage a launch built on this thread now takes.
pub(crate) fn current() -> CompilerStage {
    STAGE.with(Cell::get)
}

/// Bit marking a renamed tile id (real tile ids come from a process-wide counter that never
/// reaches it; spill scratch ids use bit 63 of HBM ids).
const RENAMED: u64 = 1 << 62;
/// Tile ids keep their low 40 bits in a renamed id; the iteration goes above them.
const ID_BITS: u32 = 40;

/// What makes two instructions compute the same thing: everything of the record but its
/// destination's place, with every read region after renaming and the number of writes its
/// buffer had received.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Key {
    opcode: Opcode,
    engine: Engine,
    api: &'static str,
    sizes: (u32, u32, u8),
    dtypes: (crate::dtype::DType, crate::dtype::DType),
    flags: (bool, bool),
    matmul: Option<(u32, u32, u32, bool)>,
    dma: Option<(MemKind, MemKind, u64, u32, u64)>,
    reads: [(BufId, u32, u32, u64, u64, u32); MAX_READS],
    write: (u32, u64),
}

/// Most source regions of an instruction the stage may remove (a transpose reads its data
/// and the identity).
const MAX_READS: usize = 3;

/// The filler of a key's unused read slots.
const NO_READ: (BufId, u32, u32, u64, u64, u32) = (BufId::Hbm(u64::MAX), 0, 0, 0, 0, 0);

/// True for the instructions the stage may remove: a load from HBM into a tile, a TensorE
/// transpose, a copy out of PSUM; each writing one tile region it does not read.
fn removable(r: &Instr) -> bool {
    let kind = match r.opcode {
        Opcode::DmaCopy | Opcode::DmaTranspose => {
            matches!(r.dma, Some(d) if d.src == MemKind::Hbm && d.dst != MemKind::Hbm)
        }
        Opcode::Transpose => true,
        Opcode::TensorCopy => r.psum,
        _ => false,
    };
    kind && !r.accumulate
        && r.writes.len() == 1
        && !r.reads.is_empty()
        && r.reads.len() <= MAX_READS
        && matches!(r.writes[0].buf, BufId::Tile(_))
        && !r.reads.iter().any(|x| x.overlaps(&r.writes[0]))
}

/// The key of `r`, its reads versioned by `version`.
fn key(r: &Instr, version: impl Fn(BufId) -> u32) -> Key {
    let w = r.writes[0];
    Key {
        opcode: r.opcode,
        engine: r.engine,
        api: r.api,
        sizes: (r.partitions, r.free, r.inputs),
        dtypes: (r.in_dtype, r.out_dtype),
        flags: (r.psum, r.contiguous),
        matmul: r.matmul.map(|m| (m.k, m.m, m.n, m.fp32)),
        dma: r
            .dma
            .map(|d| (d.src, d.dst, d.bytes, d.partitions, d.chunk_bytes)),
        reads: std::array::from_fn(|k| {
            r.reads
                .get(k)
                .map_or(NO_READ, |g| (g.buf, g.p0, g.p1, g.lo, g.hi, version(g.buf)))
        }),
        write: (w.p1 - w.p0, w.hi - w.lo),
    }
}

/// A hash of [`key`]`(r, version)` made from the record's fields without building the key
/// (equal keys hash equal; the walks hash every load, and building and hashing the whole key
/// cost them more than the rest of their work on a load).
fn key_hash(r: &Instr, version: impl Fn(BufId) -> u32) -> u64 {
    let mut h = crate::timing::fast_hash::FastHasher::default();
    let w = r.writes[0];
    (r.opcode, r.engine, r.in_dtype, r.out_dtype).hash(&mut h);
    h.write_u64(api_word(r.api));
    h.write_u64(u64::from(r.partitions) | u64::from(r.free) << 32);
    let flags = u64::from(r.inputs) | u64::from(r.psum) << 8 | u64::from(r.contiguous) << 9;
    h.write_u64(flags | u64::from(w.p1 - w.p0) << 32);
    h.write_u64(w.hi - w.lo);
    if let Some(m) = r.matmul {
        h.write_u64(u64::from(m.k) | u64::from(m.m) << 32);
        h.write_u64(u64::from(m.n) | u64::from(m.fp32) << 32);
    }
    if let Some(d) = r.dma {
        (d.src, d.dst).hash(&mut h);
        h.write_u64(d.bytes);
        h.write_u64(u64::from(d.partitions) | d.chunk_bytes << 32);
    }
    h.write_usize(r.reads.len());
    for g in r.reads.iter() {
        g.buf.hash(&mut h);
        h.write_u64(u64::from(g.p0) | u64::from(g.p1) << 32);
        h.write_u64(g.lo);
        h.write_u64(g.hi);
        h.write_u32(version(g.buf));
    }
    h.finish()
}

/// The length and up to the last eight bytes of an API name, as one word.
fn api_word(api: &str) -> u64 {
    let b = api.as_bytes();
    let n = b.len().min(8);
    let mut w = [0u8; 8];
    w[..n].copy_from_slice(&b[b.len() - n..]);
    u64::from_le_bytes(w) ^ (b.len() as u64) << 56
}

/// `reg` (a read of the region `from` held) moved onto region `to`, clipped to it.
fn translate(reg: &Region, from: &Region, to: &Region) -> Region {
    let p0 = (reg.p0.max(from.p0) - from.p0 + to.p0).min(to.p1);
    let p1 = (reg.p1.min(from.p1) - from.p0 + to.p0).min(to.p1);
    let lo = (reg.lo.max(from.lo) - from.lo + to.lo).min(to.hi);
    let hi = (reg.hi.min(from.hi) - from.lo + to.lo).min(to.hi);
    Region {
        buf: to.buf,
        p0,
        p1,
        lo,
        hi,
    }
}

/// The loop that separates records `a` (earlier) and `b` when they lie in different
/// iterations of one `affine_range` activation: that activation.
fn separating_loop(a: &Instr, b: &Instr) -> Option<u32> {
    let (fa, fb) = (a.affine.frames(), b.affine.frames());
    let k = fa.iter().zip(fb).position(|(x, y)| x != y)?;
    (fa[k].0 == fb[k].0).then_some(fa[k].0)
}

/// Applies `stage` to `records` (one program instance), whose `affine_range` activation `a`
/// began at `loops[a]`, on a target with `cap` usable SBUF bytes per partition. Record indices in `marks` are moved to the index of the first kept
/// record at or after them. `changing` is called before the records are first changed (and
/// may be called again): until then they are only read. Returns what was done (empty when
/// nothing was).
pub(crate) fn run(
    records: &mut Vec<Instr>,
    stage: CompilerStage,
    loops: &mut Vec<SourceLoc>,
    marks: &mut [usize],
    cap: usize,
    changing: &mut dyn FnMut(),
) -> CompilerStats {
    let mut stats = CompilerStats::default();
    // The passes below keep the tile ids (only `multi_buffer`, last, makes new ones).
    let ids = TileIds::of(records);
    let interchanges = stage.interchange && stage.hoist_compute;
    // The loop activations, made once for the interchange and the fusion while the records
    // stay as they are.
    let mut acts =
        (interchanges || stage.fuse).then(|| crate::compiler::fuse::activations(records));
    if interchanges {
        let all = acts.as_deref().unwrap_or_default();
        if interchange(
            records, all, stage, loops, &mut stats, marks, cap, ids, changing,
        ) {
            acts = None;
        }
    }
    if stage.fuse {
        let acts = acts.as_deref();
        crate::compiler::fuse::fuse(records, acts, loops, &mut stats, marks, changing);
    }
    if stage.psum_zero_fold {
        let folded = fold_psum_zeros(records, &mut stats);
        if !folded.is_empty() {
            changing();
        }
        remove(records, &folded, marks);
    }
    let loops = &loops[..];
    // Every buffer's last accesses in the records as they are (`None`: changed since).
    let mut accesses = None;
    if stage.dedup || stage.hoist {
        let info = last_accesses(records, ids);
        let removed = dedup(records, stage, loops, &mut stats, info.clone(), changing);
        if removed.is_empty() {
            accesses = Some(info);
        }
        remove(records, &removed, marks);
    }
    if stage.hoist_compute {
        let removed = hoist_invariant_compute(
            records,
            stage,
            loops,
            &mut stats,
            marks,
            cap,
            (ids, accesses.as_ref()),
            changing,
        );
        remove(records, &removed, marks);
    }
    if stage.multi_buffer {
        multi_buffer(records, loops, &mut stats, ids, changing);
    }
    stats.sort();
    stats
}

/// Interchanges the `affine_range` loops of `records` whose iterations each run a sequential
/// loop (`compiler::interchange`) where, on a trial, the hoisting of loop-invariant
/// computations then keeps results out of the interchanged loop that fit in `cap` bytes per
/// partition. New activations' lines are appended to `loops`. `acts`: the activations of
/// `records`; `ids`: their tile ids. Returns true when something was interchanged.
#[allow(clippy::too_many_arguments)]
fn interchange(
    records: &mut Vec<Instr>,
    acts: &[crate::compiler::fuse::Act],
    stage: CompilerStage,
    loops: &mut Vec<SourceLoc>,
    stats: &mut CompilerStats,
    marks: &mut [usize],
    cap: usize,
    ids: TileIds,
    changing: &mut dyn FnMut(),
) -> bool {
    use crate::compiler::interchange as ic;
    let worth = |r: &Instr| pure_compute(r) || (r.opcode == Opcode::Transpose && removable(r));
    let plans = ic::plans(records, acts, loops, worth);
    if plans.is_empty() {
        return false;
    }
    let mut trial = records.clone();
    let mut trial_loops = loops.clone();
    let made = ic::apply(&mut trial, &plans, &mut trial_loops, &mut []);
    let tried = invariant_walk(
        &trial,
        stage,
        &trial_loops,
        &mut CompilerStats::default(),
        &[],
        (ids, None),
    );
    drop(trial);
    let fits = |a: &u32| {
        tried
            .kept_bytes
            .get(a)
            .is_some_and(|&b| b > 0 && b <= cap as u64)
    };
    let chosen: Vec<ic::Plan> = plans
        .into_iter()
        .zip(&made)
        .filter(|(_, ids)| ids.iter().any(fits))
        .map(|(p, _)| p)
        .collect();
    if chosen.is_empty() {
        return false;
    }
    for p in &chosen {
        let (line, body) = p.lines(loops);
        stats.add(CompilerLine {
            kind: CompilerKind::Interchanged,
            line: line.unwrap_or(body),
            api: "nl.affine_range",
            kept: None,
            loop_line: Some(body),
            count: p.steps,
            bytes: 0,
        });
    }
    changing();
    ic::apply(records, &chosen, loops, marks);
    true
}

/// Counts the DMAs of `records` (one instance) between a tile and one of the instance's
/// private-HBM tensors (`private`: id and the profile's name of each) as spill traffic: a
/// store to one is a spill save, a load from one a spill reload, added to `spills` with a
/// [`CompilerKind::ScratchSpill`] line per DMA line in `stats` (see the module doc). The
/// records are not changed.
pub(crate) fn count_scratch(
    records: &[Instr],
    private: &[(u64, String)],
    spills: &mut SpillStats,
    stats: &mut CompilerStats,
) {
    let scratch = |g: &Region| match g.buf {
        BufId::Hbm(id) => private.iter().find(|p| p.0 == id),
        BufId::Tile(_) => None,
    };
    for r in records {
        let Some(d) = r.dma.filter(|_| r.engine == Engine::Dma) else {
            continue;
        };
        let (kind, tensor) = match (d.src, d.dst) {
            (MemKind::Hbm, MemKind::Sbuf | MemKind::Psum) => {
                (SpillKind::Reload, r.reads.iter().find_map(scratch))
            }
            (MemKind::Sbuf | MemKind::Psum, MemKind::Hbm) => {
                (SpillKind::Save, r.writes.iter().find_map(scratch))
            }
            _ => continue,
        };
        let Some((_, name)) = tensor else { continue };
        spills.add(kind, r.loc, name, 1, d.bytes);
        stats.add(CompilerLine {
            kind: CompilerKind::ScratchSpill,
            line: r.loc,
            api: r.api,
            kept: None,
            loop_line: None,
            count: 1,
            bytes: d.bytes,
        });
    }
}

/// Removes the records at indices `removed` (ascending) and moves the indices in `marks` to
/// the first kept record at or after them.
fn remove(records: &mut Vec<Instr>, removed: &[usize], marks: &mut [usize]) {
    if removed.is_empty() {
        return;
    }
    for m in marks.iter_mut() {
        *m -= removed.partition_point(|&i| i < *m);
    }
    let mut k = 0;
    let mut next = removed.iter().peekable();
    records.retain(|_| {
        let drop = next.peek() == Some(&&k);
        if drop {
            next.next();
        }
        k += 1;
        !drop
    });
}

/// True for the zero fill of a PSUM tile (`nl.zeros` in PSUM): one written region.
fn psum_zero_fill(r: &Instr) -> bool {
    r.opcode == Opcode::Memset && r.psum && r.api == "nl.zeros" && r.writes.len() == 1
}

/// Finds the PSUM zero fills whose next access is a TensorE matmul writing all of the
/// zeroed region, and returns their indices (ascending).
fn fold_psum_zeros(records: &[Instr], stats: &mut CompilerStats) -> Vec<usize> {
    if !records.iter().any(psum_zero_fill) {
        return Vec::new();
    }
    // Fills not yet followed by an access: buffer -> (record, zeroed region).
    let mut open: Map<BufId, (usize, Region)> = Map::default();
    let mut folded = Vec::new();
    for (i, r) in records.iter().enumerate() {
        if !open.is_empty() {
            for g in r.reads.iter().chain(r.writes.iter()) {
                let Some(&(f, zeroed)) = open.get(&g.buf) else {
                    continue;
                };
                if !zeroed.overlaps(g) {
                    continue;
                }
                open.remove(&g.buf);
                let starts = r.engine == Engine::Tensor
                    && r.opcode == Opcode::Matmul
                    && r.writes.iter().any(|w| w.covers(&zeroed));
                if starts {
                    folded.push(f);
                    stats.removed += 1;
                    stats.add(CompilerLine {
                        kind: CompilerKind::PsumZeroFolded,
                        line: records[f].loc,
                        api: records[f].api,
                        kept: Some(r.loc),
                        loop_line: None,
                        count: 1,
                        bytes: 0,
                    });
                }
            }
        }
        if psum_zero_fill(r) {
            open.insert(r.writes[0].buf, (i, r.writes[0]));
        }
    }
    folded.sort_unstable();
    folded
}

/// Finds the removable duplicates of `records`, renames their readers onto the kept
/// instruction's result, and returns their indices (ascending). `info`: every buffer's last
/// access and last write in `records` ([`last_accesses`]); the walk counts its writes.
fn dedup(
    records: &mut [Instr],
    stage: CompilerStage,
    loops: &[SourceLoc],
    stats: &mut CompilerStats,
    mut info: BufTable<Info>,
    changing: &mut dyn FnMut(),
) -> Vec<usize> {
    // A cheap first look: does a removable instruction repeat an earlier one (unversioned
    // key, by hash) whose tile is still in use? Kernels without such repeats (the tutorial's
    // tiled matmul drops each tile before loading it again) stop here.
    let mut seen: Map<u64, BufId> = Map::default();
    let candidate = records
        .iter()
        .enumerate()
        .filter(|(_, r)| removable(r))
        .any(|(i, r)| match seen.entry(key_hash(r, |_| 0)) {
            std::collections::hash_map::Entry::Occupied(e) => {
                let held = info.get(*e.get()).is_some_and(|x| x.last as usize >= i);
                *e.into_mut() = r.writes[0].buf;
                held
            }
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(r.writes[0].buf);
                false
            }
        });
    if !candidate {
        return Vec::new();
    }
    drop(seen);
    // The earlier instruction of each versioned key (by hash; a hit is checked against the
    // unversioned key).
    let mut table: Map<u64, (usize, Region)> = Map::default();
    // Regions of removed instructions' tiles and the kept results their readers now read.
    let mut renames: Map<BufId, Vec<(Region, Region)>> = Map::default();
    let mut removed = Vec::new();
    for i in 0..records.len() {
        rename_reads(&mut records[i], &renames);
        let r = &records[i];
        if removable(r) {
            let k = key_hash(r, |b| info.get(b).map_or(0, |e| e.writes));
            let hit = table
                .get(&k)
                .copied()
                .filter(|&(o, _)| key(&records[o], |_| 0) == key(r, |_| 0));
            if let Some((o, kept)) = hit {
                let w = r.writes[0];
                let kept_info = info.get(kept.buf).copied().unwrap_or_default();
                let hoisted = separating_loop(&records[o], r);
                let allowed = if hoisted.is_some() {
                    stage.hoist
                } else {
                    stage.dedup
                };
                // The kept result must still be held (read or written at or after this
                // point in the program as written): reusing it then adds no SBUF residency.
                let held = kept_info.last as usize >= i;
                // Nothing overwrites the kept result after it (so none before the
                // removed instruction's readers are done with it).
                let intact = kept_info.last_write as usize <= o;
                if allowed && held && intact && w.buf != kept.buf {
                    // The readers of its result after it are renamed as the walk goes on.
                    changing();
                    removed.push(i);
                    renames.entry(w.buf).or_default().push((w, kept));
                    stats.removed += 1;
                    let bytes = r.dma.map_or(0, |d| d.bytes);
                    stats.removed_hbm_bytes += bytes;
                    stats.add(CompilerLine {
                        kind: if hoisted.is_some() {
                            CompilerKind::Hoisted
                        } else {
                            CompilerKind::Duplicate
                        },
                        line: r.loc,
                        api: r.api,
                        kept: Some(records[o].loc),
                        loop_line: hoisted.and_then(|a| loops.get(a as usize).copied()),
                        count: 1,
                        bytes,
                    });
                    continue;
                }
            } else {
                table.insert(k, (i, r.writes[0]));
            }
        }
        for w in &records[i].writes {
            info.entry(w.buf).writes += 1;
            end_renames(&mut renames, w);
        }
    }
    removed
}

/// Regions of removed instructions' results, per buffer, and the kept results their readers
/// read instead.
type Renames = Map<BufId, Vec<(Region, Region)>>;

/// `r`'s reads with those of a removed instruction's result moved onto the kept result, or
/// `None` when none is.
fn renamed_reads(r: &Instr, renames: &Renames) -> Option<crate::record::Regions<3>> {
    if renames.is_empty() || !r.reads.iter().any(|g| renames.contains_key(&g.buf)) {
        return None;
    }
    let mut reads = r.reads.clone();
    for g in reads.iter_mut() {
        if let Some(list) = renames.get(&g.buf) {
            if let Some((from, to)) = list.iter().rev().find(|(f, _)| f.overlaps(g)) {
                *g = translate(g, from, to);
            }
        }
    }
    Some(reads)
}

/// Moves `r`'s reads of a removed instruction's result onto the kept result.
fn rename_reads(r: &mut Instr, renames: &Renames) {
    if let Some(reads) = renamed_reads(r, renames) {
        r.reads = reads;
    }
}

/// A write of `w` ends the renames of the regions it overwrites.
fn end_renames(renames: &mut Renames, w: &Region) {
    if let Some(list) = renames.get_mut(&w.buf) {
        list.retain(|(from, _)| !from.overlaps(w));
    }
}

/// True for an instruction whose result depends only on the values it reads and its own
/// parameters (no accumulator register, random generator, PSUM accumulation or loop state):
/// an element-wise, scan, reduce, select or copy instruction of VectorE, ScalarE or GpSimdE
/// writing one tile region it does not read.
fn pure_compute(r: &Instr) -> bool {
    let kind = matches!(
        r.opcode,
        Opcode::TensorTensor
            | Opcode::TensorScalar
            | Opcode::ScalarTensorTensor
            | Opcode::Activation
            | Opcode::TensorReduce
            | Opcode::TensorCopy
            | Opcode::TensorTensorScan
            | Opcode::Select
            | Opcode::Reciprocal
    ) && matches!(r.engine, Engine::Vector | Engine::Scalar | Engine::GpSimd);
    kind && !r.accumulate
        && r.writes.len() == 1
        && !r.reads.is_empty()
        && matches!(r.writes[0].buf, BufId::Tile(_))
        && !r.reads.iter().any(|x| x.overlaps(&r.writes[0]))
}

/// Loop-invariant code motion of computations (see [`CompilerStage::hoist_compute`]): a
/// value walk over `records` gives each tile region the identity of the value it holds (a
/// load: its HBM bytes at their version; a pure computation: its instruction, source line
/// and the values it read; anything else: the region itself at its buffer's version). A pure
/// computation that repeats an earlier one of another iteration of the same `affine_range`
/// activation, whose result is not overwritten later, is removed and its readers read the
/// earlier result (kept live across the loop, as the compiler's hoisted copy is). A load
/// whose every reader was such a removed copy is removed too. Returns the removed indices
/// (ascending).
///
/// The records carry no immediate operands (a `scale=` constant, a fill value): two copies
/// of one source line reading the same values are taken to compute the same thing, which a
/// loop whose immediates change per iteration would break (an `affine_range` body whose
/// parameters depend on the iteration beyond its indices is rare; the values are computed as
/// written in every case, only the timing assumes the hoist).
#[allow(clippy::too_many_arguments)]
fn hoist_invariant_compute(
    records: &mut Vec<Instr>,
    stage: CompilerStage,
    loops: &[SourceLoc],
    stats: &mut CompilerStats,
    marks: &mut [usize],
    cap: usize,
    known: (TileIds, Option<&BufTable<Info>>),
    changing: &mut dyn FnMut(),
) -> Vec<usize> {
    if !records
        .iter()
        .any(|r| pure_compute(r) && !r.affine.frames().is_empty())
    {
        return Vec::new();
    }
    // A first walk: the bytes per partition each loop would keep live across its iterations.
    // Loops whose hoisted values do not fit in SBUF keep their computations (see
    // `CompilerStage::hoist_compute`); when every loop's fit, the first walk is the result.
    let before = stats.clone();
    let tried = invariant_walk(records, stage, loops, stats, &[], known);
    let banned: Vec<u32> = tried
        .kept_bytes
        .iter()
        .filter(|&(_, &b)| b > cap as u64)
        .map(|(&a, _)| a)
        .collect();
    let walked = if banned.is_empty() {
        tried
    } else {
        *stats = before;
        invariant_walk(records, stage, loops, stats, &banned, known)
    };
    let Walked {
        mut removed,
        hoisted_out,
        unfed,
        renamed,
        ..
    } = walked;
    if removed.is_empty() && hoisted_out.is_empty() && unfed.is_empty() && renamed.is_empty() {
        return removed;
    }
    changing();
    for (i, reads) in renamed {
        records[i].reads = reads;
    }
    drop_unfed_loads(records, &mut removed, &unfed, stats, known.0);
    removed.sort_unstable();
    to_preheaders(records, &hoisted_out, &mut removed, marks);
    removed
}

/// What one walk of [`invariant_walk`] removed and kept.
struct Walked {
    /// The removed computations (not sorted).
    removed: Vec<usize>,
    /// The kept copies, each with the loop activation it is hoisted out of.
    hoisted_out: Vec<(usize, u32)>,
    /// The removed copies' inputs, each with where the copy went.
    unfed: Vec<(BufId, Hoist)>,
    /// Per loop activation, the bytes per partition of the results kept across it.
    kept_bytes: Map<u32, u64>,
    /// The records whose reads now read kept results instead of removed ones: their index
    /// and their new reads (the records themselves are not changed).
    renamed: Vec<(usize, crate::record::Regions<3>)>,
}

/// The value walk of [`hoist_invariant_compute`], hoisting nothing out of the loop
/// activations in `banned`. `known`: the tile ids of `records` and, when known, every
/// buffer's last accesses in them ([`last_accesses`]).
fn invariant_walk(
    records: &[Instr],
    stage: CompilerStage,
    loops: &[SourceLoc],
    stats: &mut CompilerStats,
    banned: &[u32],
    known: (TileIds, Option<&BufTable<Info>>),
) -> Walked {
    let (ids, accesses) = known;
    let mut kept_bytes: Map<u32, u64> = Map::default();
    // Per buffer: its writes (index, region), to tell whether a kept region is overwritten
    // later; made on the first question (most walks find no repeat and ask none).
    let written: std::cell::OnceCell<Map<BufId, Vec<(u32, Region)>>> = std::cell::OnceCell::new();
    let mut info = match accesses {
        Some(a) => a.clone(),
        None => last_accesses(records, ids),
    };
    // True when nothing after record `o` writes into `kept`.
    let intact = |o: usize, kept: &Region| {
        let written = written.get_or_init(|| {
            let mut m: Map<BufId, Vec<(u32, Region)>> = Map::default();
            for (i, r) in records.iter().enumerate() {
                for w in &r.writes {
                    m.entry(w.buf).or_default().push((i as u32, *w));
                }
            }
            m
        });
        written
            .get(&kept.buf)
            .is_none_or(|l| l.iter().all(|(k, w)| *k as usize <= o || !w.overlaps(kept)))
    };
    // Per buffer: the regions written and the value each holds, latest last.
    let mut values: BufTable<Held> = BufTable::new(ids);
    // The first instruction computing each value, and its result.
    let mut first: Map<u64, (usize, Region)> = Map::default();
    let mut renames = Renames::default();
    let mut removed = Vec::new();
    // The kept copies, each with the loop activation it is hoisted out of.
    let mut hoisted_out: Vec<(usize, u32)> = Vec::new();
    // The removed copies' inputs, each with the line of the kept result and of the loop.
    let mut unfed: Vec<(BufId, Hoist)> = Vec::new();
    let mut renamed = Vec::new();
    // The record being walked, when its reads were renamed.
    let mut moved: Instr;
    for i in 0..records.len() {
        let r = match renamed_reads(&records[i], &renames) {
            Some(reads) => {
                moved = records[i].clone();
                moved.reads = reads.clone();
                renamed.push((i, reads));
                &moved
            }
            None => &records[i],
        };
        let value_of = |g: &Region| {
            let mut h = crate::timing::fast_hash::FastHasher::default();
            let held = values.get(g.buf).and_then(|l| l.latest_overlapping(g));
            match held {
                Some((w, v)) if w.covers(g) => {
                    (v, g.p0 - w.p0, g.p1 - w.p0, g.lo - w.lo, g.hi - w.lo).hash(&mut h)
                }
                _ => {
                    let version = info.get(g.buf).map_or(0, |e| e.writes);
                    (g.buf, g.p0, g.p1, g.lo, g.hi, version).hash(&mut h)
                }
            }
            h.finish()
        };
        let (pure, movable) = (pure_compute(r), removable(r));
        let transpose = r.opcode == Opcode::Transpose && movable;
        let value = if pure || transpose {
            let mut h = crate::timing::fast_hash::FastHasher::default();
            let w = r.writes[0];
            (r.opcode, r.engine, r.api, r.alu).hash(&mut h);
            // The records carry no immediates: the line stands for them, except for the
            // instructions that take none (a copy, a TensorE transpose).
            if !matches!(r.opcode, Opcode::TensorCopy | Opcode::Transpose) {
                r.loc.hash(&mut h);
            }
            (
                r.partitions,
                r.free,
                r.inputs,
                r.in_dtype,
                r.out_dtype,
                r.psum,
            )
                .hash(&mut h);
            (w.p1 - w.p0, w.hi - w.lo).hash(&mut h);
            for g in r.reads.iter() {
                value_of(g).hash(&mut h);
            }
            Some(h.finish())
        } else if movable && r.opcode != Opcode::Transpose && r.opcode != Opcode::TensorCopy {
            Some(key_hash(r, |b| info.get(b).map_or(0, |e| e.writes)))
        } else {
            None
        };
        if let (true, Some(v)) = (pure, value) {
            let w = r.writes[0];
            match first.get(&v).copied() {
                Some((o, kept)) => {
                    let across = separating_loop(&records[o], r);
                    // Outside a common loop (straight-line code, two sibling loops): a
                    // duplicate, removed only while the kept result is still in use, as
                    // `dedup` removes loads.
                    let held = info.get(kept.buf).is_some_and(|e| e.last as usize >= i);
                    let allowed = match across {
                        Some(a) => !banned.contains(&a),
                        None => stage.dedup && held,
                    };
                    if allowed && intact(o, &kept) && w.buf != kept.buf {
                        if let Some(a) = across {
                            if !hoisted_out.iter().any(|&(k, _)| k == o) {
                                hoisted_out.push((o, a));
                                *kept_bytes.entry(a).or_default() += kept.hi - kept.lo;
                            }
                        }
                        removed.push(i);
                        renames.entry(w.buf).or_default().push((w, kept));
                        let how = Hoist {
                            kind: if across.is_some() {
                                CompilerKind::Hoisted
                            } else {
                                CompilerKind::Duplicate
                            },
                            kept: records[o].loc,
                            loop_line: across.and_then(|a| loops.get(a as usize).copied()),
                        };
                        unfed.extend(r.reads.iter().map(|g| (g.buf, how)));
                        how.record(stats, r, 0);
                        continue;
                    }
                }
                None => {
                    first.insert(v, (i, w));
                }
            }
        }
        for w in &r.writes {
            info.entry(w.buf).writes += 1;
            end_renames(&mut renames, w);
            values.entry(w.buf).write(w, value);
        }
    }
    Walked {
        removed,
        hoisted_out,
        unfed,
        kept_bytes,
        renamed,
    }
}

/// The values the written regions of one buffer hold, latest last (most buffers hold one:
/// kept inline).
#[derive(Default)]
enum Held {
    #[default]
    Nothing,
    One(Region, u64),
    Many(Vec<(Region, u64)>),
}

impl Held {
    /// The latest written region that overlaps `g`, with its value.
    fn latest_overlapping(&self, g: &Region) -> Option<(Region, u64)> {
        match self {
            Held::Nothing => None,
            Held::One(w, v) => w.overlaps(g).then_some((*w, *v)),
            Held::Many(l) => l.iter().rev().find(|(w, _)| w.overlaps(g)).copied(),
        }
    }

    /// `w` written, holding `value` (`None`: none known): the regions it overlaps are gone.
    fn write(&mut self, w: &Region, value: Option<u64>) {
        match self {
            Held::Nothing => {
                if let Some(v) = value {
                    *self = Held::One(*w, v);
                }
            }
            Held::One(x, xv) => {
                *self = match (x.overlaps(w), value) {
                    (true, Some(v)) => Held::One(*w, v),
                    (true, None) => Held::Nothing,
                    (false, Some(v)) => Held::Many(vec![(*x, *xv), (*w, v)]),
                    (false, None) => return,
                };
            }
            Held::Many(l) => {
                l.retain(|(x, _)| !x.overlaps(w));
                if let Some(v) = value {
                    l.push((*w, v));
                }
            }
        }
    }
}

/// Moves each kept copy of a hoisted computation (`hoisted`: its index and the loop
/// activation it is hoisted out of) to the start of that loop, the compiler's pre-header,
/// with the HBM loads of the same iteration that produce its inputs; a copy fed by anything
/// else inside the loop stays where it is. The indices in `removed` and `marks` follow their
/// records.
fn to_preheaders(
    records: &mut Vec<Instr>,
    hoisted: &[(usize, u32)],
    removed: &mut [usize],
    marks: &mut [usize],
) {
    let in_loop = |r: &Instr, a: u32| r.affine.frames().iter().any(|f| f.0 == a);
    // (loop start, record) pairs to move, in program order.
    let mut moves: Vec<(usize, usize)> = Vec::new();
    for &(o, a) in hoisted {
        let Some(start) = records.iter().position(|r| in_loop(r, a)) else {
            continue;
        };
        // Nothing in the loop before record `p` accesses what `p` writes (moving it first
        // then clobbers no one's data).
        let first_to_touch = |p: usize| {
            (start..p).all(|q| {
                let r = &records[q];
                let mut accessed = r.reads.iter().chain(r.writes.iter());
                accessed.all(|x| records[p].writes.iter().all(|w| !w.overlaps(x)))
            })
        };
        let mut feeders = Vec::new();
        let movable = first_to_touch(o)
            && records[o].reads.iter().all(|g| {
                let producer = (start..o)
                    .rev()
                    .find(|&p| records[p].writes.iter().any(|w| w.overlaps(g)));
                match producer {
                    None => true,
                    Some(p) => {
                        let r = &records[p];
                        let load = removable(r) && r.opcode == Opcode::DmaCopy;
                        // Nothing in the loop before the load writes what it reads.
                        let source_intact = (start..p).all(|q| {
                            records[q]
                                .writes
                                .iter()
                                .all(|w| r.reads.iter().all(|x| !x.overlaps(w)))
                        });
                        let ok = load && source_intact && first_to_touch(p);
                        if ok {
                            feeders.push(p);
                        }
                        ok
                    }
                }
            });
        if movable {
            moves.extend(feeders.into_iter().map(|p| (start, p)));
            moves.push((start, o));
        }
    }
    if moves.is_empty() {
        return;
    }
    moves.sort_unstable_by_key(|&(start, p)| (start, p));
    moves.dedup();
    let moved: std::collections::HashSet<usize> = moves.iter().map(|m| m.1).collect();
    let mut order: Vec<usize> = Vec::with_capacity(records.len());
    let mut next = moves.iter().peekable();
    for i in 0..records.len() {
        while let Some(&&(start, p)) = next.peek() {
            if start != i {
                break;
            }
            order.push(p);
            next.next();
        }
        if !moved.contains(&i) {
            order.push(i);
        }
    }
    let new_pos = crate::compiler::fuse::permute(records, &order);
    for i in removed.iter_mut() {
        *i = new_pos[*i];
    }
    removed.sort_unstable();
    for m in marks.iter_mut() {
        if *m < new_pos.len() {
            *m = new_pos[*m];
        }
    }
}

/// Where a hoisted instruction went: the line of the result kept for it and the loop it was
/// hoisted out of.
#[derive(Clone, Copy)]
struct Hoist {
    /// Hoisted out of a loop, or a duplicate outside a common loop.
    kind: CompilerKind,
    kept: SourceLoc,
    loop_line: Option<SourceLoc>,
}

impl Hoist {
    /// Counts the removal of `r` (moving `bytes` from HBM) in `stats`.
    fn record(self, stats: &mut CompilerStats, r: &Instr, bytes: u64) {
        stats.removed += 1;
        stats.removed_hbm_bytes += bytes;
        stats.add(CompilerLine {
            kind: self.kind,
            line: r.loc,
            api: r.api,
            kept: Some(self.kept),
            loop_line: self.loop_line,
            count: 1,
            bytes,
        });
    }
}

/// Removes the instructions (into `removed`) whose tiles only removed instructions read,
/// starting from the inputs of the removed copies of hoisted or duplicate computations
/// (`unfed`, with where each copy went): the loads, and the TensorE transposes with the
/// loads that fed them only. One walk back over the program: a producer comes before its
/// readers. `ids`: the tile ids of `records`.
fn drop_unfed_loads(
    records: &[Instr],
    removed: &mut Vec<usize>,
    unfed: &[(BufId, Hoist)],
    stats: &mut CompilerStats,
    ids: TileIds,
) {
    if unfed.is_empty() {
        return;
    }
    let gone: std::collections::HashSet<usize> = removed.iter().copied().collect();
    let mut readers: BufTable<u32> = BufTable::new(ids);
    for (i, r) in records.iter().enumerate() {
        if !gone.contains(&i) {
            for g in &r.reads {
                *readers.entry(g.buf) += 1;
            }
        }
    }
    let mut fed: Map<BufId, Hoist> = unfed.iter().copied().collect();
    for (j, r) in records.iter().enumerate().rev() {
        let kind = matches!(r.opcode, Opcode::DmaCopy | Opcode::Transpose);
        if gone.contains(&j) || !(removable(r) && kind) {
            continue;
        }
        let Some(&how) = fed.get(&r.writes[0].buf) else {
            continue;
        };
        if readers.get(r.writes[0].buf).copied().unwrap_or(0) == 0 {
            removed.push(j);
            how.record(stats, r, r.dma.map_or(0, |d| d.bytes));
            for g in &r.reads {
                *readers.entry(g.buf) -= 1;
                fed.insert(g.buf, how);
            }
        }
    }
}

/// Per-buffer values: a launch's tiles (nearly consecutive ids) in a vector indexed by id
/// offset, other buffers in a map. The stage looks a buffer up per region; a hash lookup
/// each made it cost a third of an estimate.
#[derive(Clone)]
struct BufTable<T> {
    base: u64,
    dense: Vec<T>,
    other: Map<BufId, T>,
}

/// The tile ids of an instance's records: the ids a [`BufTable`] keeps in its vector (the
/// stage's passes keep the ids, so they are found once).
#[derive(Clone, Copy)]
struct TileIds {
    /// The lowest id and the number of ids kept in a vector (0: none).
    base: u64,
    dense: usize,
}

impl TileIds {
    /// The tile ids of `records`.
    fn of(records: &[Instr]) -> TileIds {
        let (mut lo, mut hi) = (u64::MAX, 0);
        for r in records {
            for g in r.reads.iter().chain(r.writes.iter()) {
                if let BufId::Tile(id) = g.buf {
                    (lo, hi) = (lo.min(id), hi.max(id));
                }
            }
        }
        // Dense when the id range is within a few tiles per record.
        let span = hi.saturating_sub(lo).saturating_add(1);
        let dense = lo <= hi && span <= 4 * records.len() as u64 + 4096;
        TileIds {
            base: lo,
            dense: if dense { span as usize } else { 0 },
        }
    }
}

impl<T: Default> BufTable<T> {
    /// A table for the buffers of records whose tile ids are `ids`.
    fn new(ids: TileIds) -> BufTable<T> {
        BufTable {
            base: ids.base,
            dense: std::iter::repeat_with(T::default).take(ids.dense).collect(),
            other: Map::default(),
        }
    }

    fn slot(&self, b: BufId) -> Option<usize> {
        match b {
            BufId::Tile(id)
                if id >= self.base && ((id - self.base) as usize) < self.dense.len() =>
            {
                Some((id - self.base) as usize)
            }
            _ => None,
        }
    }

    /// The value of `b` (made by `Default` on first use).
    fn entry(&mut self, b: BufId) -> &mut T {
        match self.slot(b) {
            Some(k) => &mut self.dense[k],
            None => self.other.entry(b).or_default(),
        }
    }

    /// The value of `b`, if it has one.
    fn get(&self, b: BufId) -> Option<&T> {
        match self.slot(b) {
            Some(k) => Some(&self.dense[k]),
            None => self.other.get(&b),
        }
    }
}

/// What the duplicate walk knows of one buffer.
#[derive(Clone, Copy, Default)]
struct Info {
    /// Index of its last access, and of its last write, in the program as written.
    last: u32,
    last_write: u32,
    /// Writes it received so far in the walk (its version).
    writes: u32,
}

/// Every buffer's last access and last write in `records` (the program as written; no writes
/// counted yet).
fn last_accesses(records: &[Instr], ids: TileIds) -> BufTable<Info> {
    let mut info: BufTable<Info> = BufTable::new(ids);
    for (i, r) in records.iter().enumerate() {
        let i = i as u32;
        for g in &r.reads {
            info.entry(g.buf).last = i;
        }
        for w in &r.writes {
            let e = info.entry(w.buf);
            (e.last, e.last_write) = (i, i);
        }
    }
    info
}

/// How one tile is used across an `affine_range` loop's iterations.
struct Use {
    /// The affine position of its first access.
    first: crate::record::AffinePos,
    /// Index of its first access.
    at: usize,
    /// The loop depth whose iterations its accesses differ in (`first.len()`: none).
    level: usize,
    /// False when renaming it per iteration would change what a read sees.
    ok: bool,
    /// The iteration of the access last walked, and the regions that iteration wrote.
    iter: Option<u32>,
    written: Vec<Region>,
    /// The iterations it was renamed in.
    iterations: Map<u32, ()>,
}

/// Most writes remembered per iteration of a renamed tile (a tile written in more pieces is
/// left as written).
const WRITES_PER_ITERATION: usize = 64;

/// Renames the tiles of `records` (whose tile ids are `tiles`) that every iteration of an
/// affine loop rewrites before reading: one buffer per iteration.
fn multi_buffer(
    records: &mut [Instr],
    loops: &[SourceLoc],
    stats: &mut CompilerStats,
    tiles: TileIds,
    changing: &mut dyn FnMut(),
) {
    // Pass 1: per tile, its first access (index + 1; 0: none yet) and the loop depth at which
    // its accesses differ.
    let mut first: BufTable<(u32, u32)> = BufTable::new(tiles);
    let mut ids = Vec::new();
    for (i, r) in records.iter().enumerate() {
        let frames = r.affine.frames();
        for g in r.reads.iter().chain(r.writes.iter()) {
            let BufId::Tile(id) = g.buf else { continue };
            let e = first.entry(g.buf);
            if e.0 == 0 {
                *e = (i as u32 + 1, frames.len() as u32);
                if !frames.is_empty() {
                    ids.push(id);
                }
                continue;
            }
            if e.1 == 0 {
                continue;
            }
            let at = records[e.0 as usize - 1].affine.frames();
            let common = at.iter().zip(frames).take_while(|(a, b)| a == b).count();
            e.1 = e.1.min(common as u32);
        }
    }
    // The tiles to look at, and per tile its index in `uses` plus one (0: none).
    let mut uses: Vec<(u64, Use)> = Vec::new();
    let mut slot: BufTable<u32> = BufTable::new(tiles);
    for id in ids {
        let (at1, level) = first.get(BufId::Tile(id)).copied().unwrap_or_default();
        let at = at1 as usize - 1;
        if (level as usize) < records[at].affine.frames().len() {
            let pos = records[at].affine.clone();
            *slot.entry(BufId::Tile(id)) = uses.len() as u32 + 1;
            uses.push((
                id,
                Use {
                    first: pos,
                    at,
                    level: level as usize,
                    ok: true,
                    iter: None,
                    written: Vec::new(),
                    iterations: Map::default(),
                },
            ));
        }
    }
    if uses.is_empty() {
        return;
    }
    drop(first);
    let use_of = |b: BufId| match b {
        BufId::Tile(_) => slot.get(b).map_or(0, |&k| k as usize),
        BufId::Hbm(_) => 0,
    };
    // Pass 2: every access inside that loop, each iteration reading only what it wrote.
    for r in records.iter() {
        let frames = r.affine.frames();
        let accesses = r
            .reads
            .iter()
            .map(|g| (g, false))
            .chain(r.writes.iter().map(|g| (g, true)));
        for (g, write) in accesses {
            let k = use_of(g.buf);
            let Some((_, u)) = k.checked_sub(1).map(|k| &mut uses[k]) else {
                continue;
            };
            if !u.ok {
                continue;
            }
            let Some(&(act, it)) = frames.get(u.level) else {
                u.ok = false;
                continue;
            };
            if act != u.first.frames()[u.level].0 {
                u.ok = false;
                continue;
            }
            if u.iter != Some(it) {
                u.iter = Some(it);
                u.written.clear();
            }
            if write {
                if u.written.len() == WRITES_PER_ITERATION {
                    u.ok = false;
                } else {
                    u.written.push(*g);
                }
            } else if !u.written.iter().any(|w| w.covers(g)) {
                u.ok = false;
            }
        }
    }
    if !uses.iter().any(|(_, u)| u.ok) {
        return;
    }
    for (_, u) in uses.iter_mut() {
        u.iter = None;
    }
    changing();
    // Pass 3: rename; the iterations each tile was renamed in.
    for r in records.iter_mut() {
        if !r
            .reads
            .iter()
            .chain(r.writes.iter())
            .any(|g| use_of(g.buf) != 0)
        {
            continue;
        }
        let pos = r.affine.clone();
        let frames = pos.frames();
        let regions = r.reads.iter_mut().chain(r.writes.iter_mut());
        for g in regions {
            let k = use_of(g.buf);
            let Some((id, u)) = k.checked_sub(1).map(|k| &mut uses[k]) else {
                continue;
            };
            if !u.ok {
                continue;
            }
            let it = frames[u.level].1;
            let low = *id & ((1 << ID_BITS) - 1);
            g.buf = BufId::Tile(RENAMED | ((it as u64) << ID_BITS) | low);
            // Consecutive accesses are mostly of one iteration: counted once.
            if u.iter != Some(it) {
                u.iter = Some(it);
                u.iterations.insert(it, ());
            }
        }
    }
    let mut renamed: Vec<&(u64, Use)> = uses.iter().filter(|(_, u)| u.ok).collect();
    renamed.sort_unstable_by_key(|(id, u)| (u.at, *id));
    for (_, u) in renamed {
        let r = &records[u.at];
        stats.renamed_tiles += 1;
        stats.add(CompilerLine {
            kind: CompilerKind::MultiBuffered,
            line: r.loc,
            api: r.api,
            kept: None,
            loop_line: loops.get(u.first.frames()[u.level].0 as usize).copied(),
            count: u.iterations.len(),
            bytes: 0,
        });
    }
}
