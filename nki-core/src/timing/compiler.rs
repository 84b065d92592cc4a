//! The `compiler` stage: what the Beta-1 NKI compiler does to a kernel's program between
//! tracing and running it, applied to an instance's records before they are costed. Each
//! transformation is switchable ([`CompilerStage`]); with all of them off (the default) the
//! records are costed exactly as the kernel wrote them, and this module runs nothing.
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
//!   Counter-evidence, why the held-tile condition and why this is a switch, off by
//!   default: the matmul tutorial's "tiled" version (calibration.md section 1) runs 20 %
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
//! Limits: renamed copies are not seen by the capacity resolution (`timing::spill`), so
//! multi-buffering never causes spill here; an instance with device loops or an LNC=2 pair
//! is left as written (their record indices are referenced elsewhere); HBM regions are
//! bounding byte ranges, so two loads are taken as the same bytes when their ranges, byte
//! counts, run lengths and tile shapes all agree.

use crate::error::SourceLoc;
use crate::profile::compiler::{CompilerKind, CompilerLine, CompilerStats};
use crate::record::{BufId, Engine, Instr, MemKind, Opcode, Region};
use crate::timing::fast_hash::Map;
use std::cell::Cell;

/// Which transformations of the `compiler` stage run before a launch is costed (see the
/// module `timing::compiler` and docs/timing-model.md). [`CompilerStage::OFF`] (the default)
/// costs every kernel exactly as written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CompilerStage {
    /// Remove an instruction (load, TensorE transpose, its PSUM copy) that recomputes what an
    /// earlier one of the same loop iteration, of straight-line code or of another loop
    /// produced.
    pub dedup: bool,
    /// Run a loop-invariant instruction of an `affine_range` loop once (its copies in the
    /// later iterations removed).
    pub hoist: bool,
    /// Give a tile rewritten by every iteration of an `affine_range` loop one buffer per
    /// iteration.
    pub multi_buffer: bool,
}

impl CompilerStage {
    /// Nothing transformed: the kernel is costed as written.
    pub const OFF: CompilerStage = CompilerStage {
        dedup: false,
        hoist: false,
        multi_buffer: false,
    };

    /// Every transformation the Beta-1 compiler is modelled doing.
    pub const BETA1: CompilerStage = CompilerStage {
        dedup: true,
        hoist: true,
        multi_buffer: true,
    };

    /// True when no transformation runs.
    pub fn is_off(&self) -> bool {
        *self == Self::OFF
    }
}

thread_local! {
    /// The stage new launches of this thread take (see [`with_compiler_stage`]).
    static STAGE: Cell<CompilerStage> = const { Cell::new(CompilerStage::OFF) };
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
    reads: Vec<(BufId, u32, u32, u64, u64, u32)>,
    write: (u32, u64),
}

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
        reads: r
            .reads
            .iter()
            .map(|g| (g.buf, g.p0, g.p1, g.lo, g.hi, version(g.buf)))
            .collect(),
        write: (w.p1 - w.p0, w.hi - w.lo),
    }
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
/// began at `loops[a]`. Record indices in `marks` are moved to the index of the first kept
/// record at or after them. Returns what was done (empty when nothing was).
pub(crate) fn run(
    records: &mut Vec<Instr>,
    stage: CompilerStage,
    loops: &[SourceLoc],
    marks: &mut [usize],
) -> CompilerStats {
    let mut stats = CompilerStats::default();
    if stage.dedup || stage.hoist {
        let removed = dedup(records, stage, loops, &mut stats);
        if !removed.is_empty() {
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
    }
    if stage.multi_buffer {
        multi_buffer(records, loops, &mut stats);
    }
    stats.sort();
    stats
}

/// Finds the removable duplicates of `records`, renames their readers onto the kept
/// instruction's result, and returns their indices (ascending).
fn dedup(
    records: &mut [Instr],
    stage: CompilerStage,
    loops: &[SourceLoc],
    stats: &mut CompilerStats,
) -> Vec<usize> {
    // A cheap first look: do two removable instructions share their unversioned key at all?
    // (Kernels without repeated loads or transposes stop here.)
    let mut seen: Map<Key, ()> = Map::default();
    let repeated = records
        .iter()
        .filter(|r| removable(r))
        .any(|r| seen.insert(key(r, |_| 0), ()).is_some());
    if !repeated {
        return Vec::new();
    }
    drop(seen);
    // Where each tile is written, and its last access.
    let mut writes_at: Map<BufId, Vec<u32>> = Map::default();
    let mut last: Map<BufId, u32> = Map::default();
    for (i, r) in records.iter().enumerate() {
        for w in &r.writes {
            writes_at.entry(w.buf).or_default().push(i as u32);
        }
        for g in r.reads.iter().chain(r.writes.iter()) {
            last.insert(g.buf, i as u32);
        }
    }
    let next_write = |buf: BufId, after: usize| -> u32 {
        writes_at.get(&buf).map_or(u32::MAX, |v| {
            let k = v.partition_point(|&i| i as usize <= after);
            v.get(k).copied().unwrap_or(u32::MAX)
        })
    };
    let mut version: Map<BufId, u32> = Map::default();
    let mut table: Map<Key, (usize, Region)> = Map::default();
    // Regions of removed instructions' tiles and the kept results their readers now read.
    let mut renames: Map<BufId, Vec<(Region, Region)>> = Map::default();
    let mut removed = Vec::new();
    for i in 0..records.len() {
        if !renames.is_empty() {
            let r = &mut records[i];
            for g in r.reads.iter_mut() {
                if let Some(list) = renames.get(&g.buf) {
                    if let Some((from, to)) = list.iter().rev().find(|(f, _)| f.overlaps(g)) {
                        *g = translate(g, from, to);
                    }
                }
            }
        }
        let r = &records[i];
        if removable(r) {
            let k = key(r, |b| version.get(&b).copied().unwrap_or(0));
            if let Some(&(o, kept)) = table.get(&k) {
                let w = r.writes[0];
                let lives = last.get(&w.buf).copied().unwrap_or(0);
                let hoisted = separating_loop(&records[o], r);
                let allowed = if hoisted.is_some() {
                    stage.hoist
                } else {
                    stage.dedup
                };
                // The kept result must still be held (read or written at or after this
                // point in the program as written): reusing it then adds no SBUF residency.
                let held = last.get(&kept.buf).is_some_and(|&l| l as usize >= i);
                if allowed && held && w.buf != kept.buf && next_write(kept.buf, o) > lives {
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
            *version.entry(w.buf).or_default() += 1;
            if let Some(list) = renames.get_mut(&w.buf) {
                list.retain(|(from, _)| !from.overlaps(w));
            }
        }
    }
    removed
}

/// How one tile is used across an `affine_range` loop's iterations.
struct Use {
    /// The affine frames of its first access.
    first: Vec<(u32, u32)>,
    /// Index of its first access.
    at: usize,
    /// The loop depth whose iterations its accesses differ in (`first.len()`: none).
    level: usize,
    /// False when renaming it per iteration would change what a read sees.
    ok: bool,
    /// The iteration of the access last walked, and the regions that iteration wrote.
    iter: Option<u32>,
    written: Vec<Region>,
}

/// Most writes remembered per iteration of a renamed tile (a tile written in more pieces is
/// left as written).
const WRITES_PER_ITERATION: usize = 64;

/// Renames the tiles of `records` that every iteration of an affine loop rewrites before
/// reading: one buffer per iteration.
fn multi_buffer(records: &mut [Instr], loops: &[SourceLoc], stats: &mut CompilerStats) {
    let mut uses: Map<u64, Use> = Map::default();
    // Pass 1: the loop depth at which each tile's accesses differ.
    for (i, r) in records.iter().enumerate() {
        let frames = r.affine.frames();
        for g in r.reads.iter().chain(r.writes.iter()) {
            let BufId::Tile(id) = g.buf else { continue };
            let u = uses.entry(id).or_insert_with(|| Use {
                first: frames.to_vec(),
                at: i,
                level: frames.len(),
                ok: true,
                iter: None,
                written: Vec::new(),
            });
            let common = u
                .first
                .iter()
                .zip(frames)
                .take_while(|(a, b)| a == b)
                .count();
            u.level = u.level.min(common);
        }
    }
    uses.retain(|_, u| u.level < u.first.len());
    if uses.is_empty() {
        return;
    }
    // Pass 2: every access inside that loop, each iteration reading only what it wrote.
    for r in records.iter() {
        let frames = r.affine.frames();
        let accesses = r
            .reads
            .iter()
            .map(|g| (g, false))
            .chain(r.writes.iter().map(|g| (g, true)));
        for (g, write) in accesses {
            let BufId::Tile(id) = g.buf else { continue };
            let Some(u) = uses.get_mut(&id) else { continue };
            if !u.ok {
                continue;
            }
            let Some(&(act, it)) = frames.get(u.level) else {
                u.ok = false;
                continue;
            };
            if act != u.first[u.level].0 {
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
    uses.retain(|_, u| u.ok);
    if uses.is_empty() {
        return;
    }
    // Pass 3: rename; the iterations each tile was renamed in.
    let mut iterations: Map<u64, Map<u32, ()>> = Map::default();
    for r in records.iter_mut() {
        let frames = r.affine.frames().to_vec();
        let regions = r.reads.iter_mut().chain(r.writes.iter_mut());
        for g in regions {
            let BufId::Tile(id) = g.buf else { continue };
            let Some(u) = uses.get(&id) else { continue };
            let it = frames[u.level].1;
            let low = id & ((1 << ID_BITS) - 1);
            g.buf = BufId::Tile(RENAMED | ((it as u64) << ID_BITS) | low);
            iterations.entry(id).or_default().insert(it, ());
        }
    }
    let mut renamed: Vec<(&u64, &Use)> = uses.iter().collect();
    renamed.sort_unstable_by_key(|(_, u)| u.at);
    for (id, u) in renamed {
        let r = &records[u.at];
        stats.renamed_tiles += 1;
        stats.add(CompilerLine {
            kind: CompilerKind::MultiBuffered,
            line: r.loc,
            api: r.api,
            kept: None,
            loop_line: loops.get(u.first[u.level].0 as usize).copied(),
            count: iterations.get(id).map_or(0, Map::len),
            bytes: 0,
        });
    }
}
