//! Capacity as the compiler resolves it: the records of an instance whose SBUF tiles, kept
//! from allocation to drop, exceed SBUF, rewritten with the traffic the compiler adds to make
//! them fit (shared/reference/calibration.md section 5: such kernels compile and run).
//!
//! What the documentation says: NKI tensors are allocated by the compiler, which "may
//! spill" SBUF tensors to HBM and re-load them when SBUF is over-subscribed (nki.language
//! memory-hierarchy notes; the NKIBench baselines' profiles count "spill save" and "spill
//! reload" bytes, and the compiler-emitted programs name `_spill_*` HBM and `_reload_*` SBUF
//! buffers). The algorithm it uses is not documented. What this model assumes, each choice
//! a mechanism (nothing is keyed to a kernel):
//!
//! 1. **Live ranges.** A tile occupies SBUF from its first write to its last access, not from
//!    allocation to drop (a Rust `Vec` of tiles keeps every tile allocated to the end of its
//!    scope; the compiler sees the accesses).
//! 2. **Who leaves.** When the tiles an instruction writes first (or re-loads) do not fit
//!    beside the resident ones, tiles the instruction does not touch leave SBUF until there is
//!    room, chosen as a register allocator chooses what to spill: the lowest spill cost per
//!    unit of freed live range. The freed range is the distance (in instructions) to the
//!    tile's next access (Belady's furthest-next-use, available to a compiler that sees the
//!    whole static program); the cost per byte freed is 1 for a tile holding a kernel input
//!    (every write so far a DMA from HBM: it is only re-read) and 2 for a computed tile (saved,
//!    then re-read). So a tile leaves first when its next use is furthest after halving the
//!    distance of computed tiles; among equals an input before a computed tile. Assumed,
//!    checked against section 5's counters: NKIBench matmul re-reads its rhs block per M tile
//!    with no spill (the block, next read by the same matmuls as the transposed lhs tiles,
//!    leaves rather than those), and bmm_softmax saves about 70 % of its score matrix (what
//!    does not fit beside the rest, the scores read last leaving first, while the identity
//!    and the rhs tile, read again within a few instructions, stay).
//! 3. **What a tile out of SBUF costs.** A computed tile is saved once, whole, when it
//!    leaves. Afterwards an instruction that reads a part of it not in SBUF re-loads that
//!    part (a kernel input from its HBM source, a computed tile from the scratch), and the
//!    part stays in SBUF for the reads after it until room is needed again, when it leaves
//!    without a save (the scratch or the input holds it); a write to the tile is saved back
//!    at once. The tile does not come back whole. This is how the compiler-emitted NKIBench
//!    programs read a spilled tensor: a `_reload_*` tile of the accessed block, re-loaded
//!    once and read by the instructions of the loop body that use it. Evidence for keeping
//!    the part: NKIBench gqa's spill reload counter (1,127.2 MB, calibration.md section 5)
//!    is its score matrix once (1,073.7 MB) plus 53.5 MB, about twice the 25.7 MB it saved
//!    beyond the scores (transposed q and k tiles, read by every matmul of their head and
//!    half of the keys), where a re-load per read re-reads those for every matmul (the
//!    model then re-loaded 1,741 MB, +54 %); and mamba's reload counter equals its save
//!    counter (55.05 MB), one re-load per saved accumulation.
//! 5. **A value kept across a loop** (with [`CompilerStage::loop_spill`]). A computed tile
//!    written in one iteration of an `affine_range` loop (or before the loop, in the same
//!    enclosing iteration) and read in later iterations of it is kept live across the
//!    loop's iterations; typically the one copy a hoisted loop-invariant computation keeps
//!    (`compiler::stage`). When such a tile must leave SBUF (the loop's own tiles do not fit
//!    beside everything kept across it), the compiler spills every computed tile kept across
//!    that loop as a whole: each is saved once, whole, after its definition (a tile in use
//!    when the decision falls stays until its last access of the iteration), and re-loaded
//!    whole at its first read in each later iteration that reads it, staying for the rest
//!    of that iteration and leaving unsaved after its last read there. The allocator spills
//!    the live range across the loop, not the bytes that do not fit. Evidence: the NKIBench
//!    swiglu baseline (calibration.md section 5) keeps its hoisted `x^T` (8 tiles of
//!    16 KiB per partition, 128 KiB, one per block of 512 rows) across its fused N-block
//!    loop, whose weights take 64 KiB per iteration (192 KiB > trn1's 176 KiB). Its
//!    counters decompose as spill save = the 50.3 MB product + 16.8 MB = all of `x^T` once,
//!    and spill reload = the product + 2 x 16.8 MB = all of `x^T` in each of the two later
//!    N blocks; moving only the bytes that do not fit (rules 2-3) saves 4.2 MB and re-loads
//!    1.1 MB. Tiles holding kernel inputs (re-read from HBM) and constant fills
//!    (rematerialised) keep rules 2-3, and a tile whose whole re-load cannot fit beside an
//!    instruction's tiles is re-loaded by parts.
//! 6. **Errors.** Only an instruction whose own tiles cannot fit at once is rejected: the
//!    compiler cannot spill the operands of the instruction it places.
//!
//! The spill DMAs go into the record stream right before the instruction that needs them (a
//! save after a write to a tile out of SBUF goes right after it), at its source line and loop
//! position, so they are costed and scheduled as the DMAs they are; the profile lists them
//! ([`crate::profile::SpillStats`]). Only over-committed instances come here: a kernel whose
//! tiles fit is modelled exactly as recorded.

#[cfg(doc)]
use crate::compiler::stage::CompilerStage;
use crate::error::{ErrorKind, NkiError, SourceLoc};
use crate::memory::{Overcommit, SpillTile};
use crate::profile::compiler::{CompilerKind, CompilerLine, CompilerStats};
use crate::profile::spills::{SpillKind, SpillStats};
use crate::record::{
    AffinePos, BufId, CostFacts, DmaDims, Engine, Instr, MemKind, Opcode, Region, Regions,
};
use crate::timing::fast_hash::Map;

/// HBM ids of spill scratch buffers: the tile id with the top bit set (real HBM tensors are
/// numbered from 0 by a process-wide counter and never reach it).
const SCRATCH_BIT: u64 = 1 << 63;

/// Where a tracked tile is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    /// Not written yet (or dead): holds no SBUF.
    Absent,
    /// In SBUF.
    Resident,
    /// Out of SBUF: accesses go through HBM.
    Out,
}

/// A tracked tile's state during the walk.
struct State {
    place: Place,
    /// True once a write that is not a DMA from HBM reached it.
    dirty: bool,
    /// True once it was saved whole to its scratch.
    saved: bool,
    /// True while every write it received is a constant fill (a memset): out of SBUF it is
    /// not saved, and a read runs the fill again.
    fill_only: bool,
    /// The output index of its last fill (the instruction a refill repeats).
    fill_at: usize,
    /// The DMA loads from HBM that wrote it (the sources of an input re-load).
    loads: Vec<usize>,
    /// Record indices (from the over-commit point on) that access it, and the next one.
    uses: Vec<u32>,
    next: usize,
    /// Out of SBUF: the regions re-loaded (or refilled) that are in SBUF again, kept there
    /// for the reads after the one that re-loaded them (the compiler's `_reload_*` tiles),
    /// and their bytes per partition. Always a copy of what the scratch or the input holds
    /// (a write to a tile out of SBUF is saved back at once), so they leave without a save.
    back: Vec<Region>,
    back_bytes: usize,
    /// Kept across the iterations of an affine loop (rule 5): the loop's activation, and
    /// per entry of `uses` the iteration of that loop it lies in (`u32::MAX` outside it).
    across: Option<u32>,
    iters: Vec<u32>,
    /// Spilled whole across its loop (rule 5).
    whole: bool,
}

impl State {
    /// The next access at or after record `i` (`u32::MAX` when none is left).
    fn next_use(&self) -> u32 {
        self.uses.get(self.next).copied().unwrap_or(u32::MAX)
    }
}

/// The result of resolving one instance.
pub(crate) struct Resolved {
    /// The records with the spill traffic in place.
    pub(crate) records: Vec<Instr>,
    /// What was added, by line.
    pub(crate) stats: SpillStats,
    /// The tiles spilled whole across a loop (rule 5), by line.
    pub(crate) compiler: CompilerStats,
}

/// Aggregation key of the added traffic: kind, the line that needed it, the tile's index.
type Key = (SpillKind, SourceLoc, usize);

/// The walk over an instance's records.
struct Walk<'a> {
    cap: usize,
    tiles: &'a [SpillTile],
    state: Vec<State>,
    /// The tiles in SBUF (a short list: SBUF holds few tiles at once).
    res: Vec<usize>,
    /// The tiles out of SBUF with re-loaded regions in SBUF.
    backed: Vec<usize>,
    resident: usize,
    peak: usize,
    out: Vec<Instr>,
    added: Map<Key, (usize, u64)>,
    /// Rule 5 on: the instance's loop lines by activation; the loops whose kept tiles were
    /// spilled whole.
    loops: Option<&'a [SourceLoc]>,
    spilled: Vec<u32>,
}

/// One access of a tracked tile (rule 5's classification): record index, write or read,
/// whether the write is a DMA from HBM or a constant fill, and the loop position.
struct Access {
    at: u32,
    write: bool,
    load: bool,
    fill: bool,
    pos: AffinePos,
}

/// The affine loop activation across whose iterations the tile with accesses `acc` (in
/// program order) is kept (rule 5), and the depth of that loop in the positions: reads in
/// two or more iterations of it, every write (some computing, not all constant fills) in one
/// iteration of it or just outside it, before every read of another iteration.
fn across_loop(acc: &[Access]) -> Option<(u32, usize)> {
    let mut reads = acc.iter().filter(|a| !a.write);
    let first = reads.next()?.pos.frames();
    let d = reads.fold(first.len(), |d, a| {
        let f = a.pos.frames();
        d.min(first.iter().zip(f).take_while(|(x, y)| x == y).count())
    });
    // All reads share `first[..d]`; they differ at `d` (or some read is outside the loop).
    let (l, _) = *first.get(d)?;
    let iter_of = |f: &[(u32, u32)]| match f.get(d) {
        Some(&(act, it)) if act == l => Some(it),
        _ => None,
    };
    if acc
        .iter()
        .any(|a| !a.write && iter_of(a.pos.frames()).is_none())
    {
        return None;
    }
    let mut defined: Option<Option<u32>> = None;
    let (mut computed, mut last_write) = (false, 0);
    for a in acc.iter().filter(|a| a.write) {
        let f = a.pos.frames();
        if f.len() < d || f[..d] != first[..d] {
            return None;
        }
        let it = match f.get(d) {
            None => None,
            Some(_) => Some(iter_of(f)?),
        };
        if defined.is_some_and(|w| w != it) {
            return None;
        }
        defined = Some(it);
        computed |= !a.load && !a.fill;
        last_write = a.at;
    }
    let w = defined?;
    let later = acc
        .iter()
        .filter(|a| !a.write && iter_of(a.pos.frames()) != w);
    let mut later = later.peekable();
    (computed && later.peek().is_some() && later.all(|a| a.at > last_write)).then_some((l, d))
}

/// Resolves `records` (one instance, program id `pid`) whose SBUF tiles over-committed as
/// `over` says, against `cap` usable SBUF bytes per partition. An error when one
/// instruction's own tiles do not fit.
///
/// `loops` (the instance's loop lines by activation) turns rule 5 on.
pub(crate) fn resolve(
    records: Vec<Instr>,
    over: &Overcommit,
    cap: usize,
    pid: &[usize],
    loops: Option<&[SourceLoc]>,
) -> Result<Resolved, NkiError> {
    let tiles = &over.tiles[..];
    let mut index: Map<u64, usize> = Map::default();
    for (k, t) in tiles.iter().enumerate() {
        index.insert(t.id, k);
    }
    let mut w = Walk {
        cap,
        tiles,
        state: tiles
            .iter()
            .map(|_| State {
                place: Place::Absent,
                dirty: false,
                saved: false,
                fill_only: false,
                fill_at: 0,
                loads: Vec::new(),
                uses: Vec::new(),
                next: 0,
                back: Vec::new(),
                back_bytes: 0,
                across: None,
                iters: Vec::new(),
                whole: false,
            })
            .collect(),
        res: Vec::new(),
        backed: Vec::new(),
        resident: 0,
        peak: 0,
        out: Vec::with_capacity(records.len() + records.len() / 8),
        added: Map::default(),
        loops,
        spilled: Vec::new(),
    };
    let mut acc: Vec<Vec<Access>> = Vec::new();
    if loops.is_some() {
        acc.resize_with(tiles.len(), Vec::new);
    }
    let tracked = |reg: &Region| match reg.buf {
        BufId::Tile(id) => index.get(&id).copied(),
        BufId::Hbm(_) => None,
    };
    // Accesses, and what the records before the over-commit point left each tile holding.
    for (i, r) in records.iter().enumerate() {
        let nr = r.reads.len();
        for (j, reg) in r.reads.iter().chain(r.writes.iter()).enumerate() {
            if let Some(k) = tracked(reg) {
                let s = &mut w.state[k];
                if i >= over.start && s.uses.last() != Some(&(i as u32)) {
                    s.uses.push(i as u32);
                }
                if let Some(a) = acc.get_mut(k) {
                    a.push(Access {
                        at: i as u32,
                        write: j >= nr,
                        load: from_hbm(r),
                        fill: r.opcode == Opcode::Memset,
                        pos: r.affine.clone(),
                    });
                }
            }
        }
        if i < over.start {
            w.note_writes(i, r, &tracked);
        }
    }
    for (k, (s, t)) in w.state.iter_mut().zip(tiles).enumerate() {
        if s.place == Place::Resident && s.uses.is_empty() {
            s.place = Place::Absent;
        } else if s.place == Place::Resident {
            w.resident += t.bytes;
            w.res.push(k);
        }
    }
    for (k, a) in acc.iter().enumerate() {
        if let Some((l, d)) = across_loop(a) {
            let s = &mut w.state[k];
            s.across = Some(l);
            s.iters = a
                .iter()
                .filter(|x| x.at as usize >= over.start)
                .map(|x| (x.at, x.pos.frames().get(d)))
                .fold(Vec::new(), |mut v: Vec<(u32, u32)>, (at, f)| {
                    if v.last().map(|p| p.0) != Some(at) {
                        v.push((at, f.filter(|f| f.0 == l).map_or(u32::MAX, |f| f.1)));
                    }
                    v
                })
                .into_iter()
                .map(|(_, it)| it)
                .collect();
        }
    }
    w.peak = w.resident;
    let mut records = records.into_iter().enumerate();
    for (i, r) in records.by_ref() {
        if i >= over.start {
            break_into(&mut w, i, r, &tracked, pid)?;
        } else {
            w.out.push(r);
        }
    }
    Ok(w.finish())
}

/// Walks record `i` (from the over-commit point on): makes room, adds the spill traffic,
/// keeps the record.
fn break_into(
    w: &mut Walk,
    i: usize,
    r: Instr,
    tracked: &impl Fn(&Region) -> Option<usize>,
    pid: &[usize],
) -> Result<(), NkiError> {
    // The tracked tiles the record touches (a record touches a handful).
    let mut touched: Vec<usize> = Vec::new();
    for reg in r.reads.iter().chain(r.writes.iter()) {
        if let Some(k) = tracked(reg) {
            if !touched.contains(&k) {
                touched.push(k);
            }
        }
    }
    if touched.is_empty() {
        w.out.push(r);
        return Ok(());
    }
    // Tiles spilled whole across a loop (rule 5) it reads out of SBUF come back whole,
    // unless that cannot fit (then by parts).
    let mut whole: Vec<usize> = touched
        .iter()
        .copied()
        .filter(|&k| w.state[k].whole && w.state[k].place == Place::Out)
        .collect();
    let (mut need, mut transient) = room(w, &r, &touched, &whole, tracked);
    while w.resident + need + transient > w.cap {
        let victim = w
            .res
            .iter()
            .chain(w.backed.iter())
            .copied()
            .filter(|k| !touched.contains(k))
            .min_by_key(|&k| {
                let s = &w.state[k];
                let dist = u64::from(s.next_use()) - i as u64;
                // Freed range per byte moved: the distance, halved for a tile to be saved
                // (re-loaded regions leave unsaved).
                let unsaved = s.place == Place::Resident && s.dirty && !s.saved;
                let cost = if unsaved { 2 } else { 1 };
                (std::cmp::Reverse(2 * dist / cost), unsaved, k)
            });
        let Some(v) = victim else {
            if !whole.is_empty() {
                whole.clear();
                (need, transient) = room(w, &r, &touched, &whole, tracked);
                continue;
            }
            return Err(too_big(w, &r, &touched, need + transient, pid));
        };
        if w.state[v].place == Place::Out {
            w.drop_back(v);
        } else {
            w.evict(v, r.loc, &r.affine);
        }
        if let Some(l) = w.state[v].across {
            w.spill_across(l, &touched, r.loc, &r.affine);
        }
    }
    for &k in &touched {
        if w.state[k].place == Place::Absent {
            w.state[k].place = Place::Resident;
            w.res.push(k);
            w.resident += w.tiles[k].bytes;
        }
    }
    // Reads of tiles out of SBUF: re-loads before the record of the parts not back in SBUF;
    // they stay.
    for reg in r.reads.iter() {
        if let Some(k) = tracked(reg) {
            let s = &w.state[k];
            if s.place == Place::Out && !s.back.iter().any(|b| b.covers(reg)) {
                let reg = &if whole.contains(&k) {
                    w.drop_back(k);
                    w.tiles[k].whole()
                } else {
                    *reg
                };
                w.reload(k, reg, &r);
                let s = &mut w.state[k];
                let bytes = (reg.hi - reg.lo) as usize;
                s.back.push(*reg);
                s.back_bytes += bytes;
                w.resident += bytes;
                if !w.backed.contains(&k) {
                    w.backed.push(k);
                }
            }
        }
    }
    w.peak = w.peak.max(w.resident + transient);
    let saves: Vec<(usize, Region)> = r
        .writes
        .iter()
        .filter_map(|reg| tracked(reg).map(|k| (k, *reg)))
        .filter(|&(k, _)| w.state[k].place == Place::Out && !from_hbm(&r))
        .collect();
    let at = w.out.len();
    w.note_writes(at, &r, tracked);
    let (loc, affine) = (r.loc, r.affine.clone());
    w.out.push(r);
    for (k, reg) in saves {
        // A write to a tile out of SBUF goes back to its scratch.
        let (bytes, rec) = w.dma(k, reg, MemKind::Sbuf, MemKind::Hbm, loc, &affine);
        w.out.push(rec);
        w.count(SpillKind::Save, loc, k, bytes);
        w.state[k].saved = true;
    }
    // Tiles whose last access this was leave SBUF; so do tiles spilled whole across a loop
    // after their last access of an iteration (rule 5).
    for &k in &touched {
        let s = &mut w.state[k];
        while s.next < s.uses.len() && s.uses[s.next] as usize <= i {
            s.next += 1;
        }
        if s.next == s.uses.len() {
            if s.place == Place::Resident {
                w.resident -= w.tiles[k].bytes;
                w.res.retain(|&x| x != k);
            }
            s.place = Place::Absent;
            w.drop_back(k);
        } else if s.whole && s.next > 0 && s.iters[s.next - 1] != s.iters[s.next] {
            if s.place == Place::Resident {
                w.evict(k, loc, &affine);
            }
            w.drop_back(k);
        }
    }
    Ok(())
}

/// The SBUF bytes per partition record `r` needs beside the resident tiles (tiles written
/// for the first time, the parts of tiles out of SBUF it reads that are not back in SBUF, all
/// of those in `whole`) and the transient buffer for a write to a part of a tile out of SBUF.
fn room(
    w: &Walk,
    r: &Instr,
    touched: &[usize],
    whole: &[usize],
    tracked: &impl Fn(&Region) -> Option<usize>,
) -> (usize, usize) {
    let (mut need, mut transient) = (0usize, 0usize);
    for &k in touched {
        match w.state[k].place {
            Place::Absent => need += w.tiles[k].bytes,
            Place::Out => {
                let s = &w.state[k];
                let missing = |reg: &&Region| {
                    tracked(reg) == Some(k) && !s.back.iter().any(|b| b.covers(reg))
                };
                let parts = r
                    .reads
                    .iter()
                    .filter(missing)
                    .map(|reg| (reg.hi - reg.lo) as usize)
                    .sum::<usize>();
                need += if whole.contains(&k) && parts > 0 {
                    w.tiles[k].bytes - s.back_bytes
                } else {
                    parts
                };
                transient += r
                    .writes
                    .iter()
                    .filter(missing)
                    .map(|reg| (reg.hi - reg.lo) as usize)
                    .max()
                    .unwrap_or(0);
            }
            Place::Resident => {}
        }
    }
    (need, transient)
}

/// True when `r` is a DMA from HBM (its writes leave a tile holding kernel-input bytes).
fn from_hbm(r: &Instr) -> bool {
    r.engine == Engine::Dma && r.dma.is_some_and(|d| d.src == MemKind::Hbm)
}

impl Walk<'_> {
    /// Notes the writes of record `r`, kept at index `i` of the output: a DMA from HBM is a
    /// source for re-loads, anything else makes the tile computed. A written tile that holds
    /// no SBUF yet becomes resident (before the over-commit point, where every tile fit).
    fn note_writes(&mut self, i: usize, r: &Instr, tracked: &impl Fn(&Region) -> Option<usize>) {
        let load = from_hbm(r);
        for reg in r.writes.iter() {
            if let Some(k) = tracked(reg) {
                let s = &mut self.state[k];
                let fill = r.opcode == Opcode::Memset;
                s.fill_only = fill && (s.fill_only || (!s.dirty && s.loads.is_empty()));
                if fill {
                    s.fill_at = i;
                }
                if load {
                    if s.loads.last() != Some(&i) {
                        s.loads.push(i);
                    }
                } else {
                    s.dirty = true;
                }
                if s.place == Place::Absent {
                    s.place = Place::Resident;
                }
            }
        }
    }

    /// Takes tile `k` out of SBUF to make room for record `r`: a computed tile not saved yet
    /// is saved whole first, unless it holds only a constant fill, which is rematerialised
    /// when read (a register allocator's rematerialisation of constants: re-running the fill
    /// costs one on-chip instruction, saving and re-loading it two DMAs).
    fn evict(&mut self, k: usize, loc: SourceLoc, affine: &AffinePos) {
        let t = &self.tiles[k];
        if self.state[k].dirty && !self.state[k].saved && !self.state[k].fill_only {
            let (bytes, rec) = self.dma(k, t.whole(), MemKind::Sbuf, MemKind::Hbm, loc, affine);
            self.out.push(rec);
            self.count(SpillKind::Save, loc, k, bytes);
            self.state[k].saved = true;
        }
        self.state[k].place = Place::Out;
        self.resident -= t.bytes;
        self.res.retain(|&x| x != k);
    }

    /// Rule 5: tile `v`, kept across the iterations of loop activation `l`, had to leave SBUF
    /// (at the record at `loc`, `affine`, touching `touched`): the first time, every tile
    /// kept across that loop is spilled whole from now on, and those resident between their
    /// iterations (not in use in the current one) leave now.
    fn spill_across(&mut self, l: u32, touched: &[usize], loc: SourceLoc, affine: &AffinePos) {
        if self.loops.is_none() || self.spilled.contains(&l) {
            return;
        }
        self.spilled.push(l);
        for k in 0..self.state.len() {
            let s = &mut self.state[k];
            if s.across != Some(l) {
                continue;
            }
            s.whole = true;
            let between = s.next == 0 || s.iters.get(s.next) != Some(&s.iters[s.next - 1]);
            if s.place == Place::Resident && between && !touched.contains(&k) {
                self.evict(k, loc, affine);
            }
        }
    }

    /// Frees the re-loaded regions of tile `k` (copies of its scratch or input: no save).
    fn drop_back(&mut self, k: usize) {
        let s = &mut self.state[k];
        if s.back.is_empty() {
            return;
        }
        self.resident -= s.back_bytes;
        s.back.clear();
        s.back_bytes = 0;
        self.backed.retain(|&x| x != k);
    }

    /// Re-loads region `reg` of tile `k` (out of SBUF) for record `r`: from its kernel input
    /// when it holds one, else from its scratch.
    fn reload(&mut self, k: usize, reg: &Region, r: &Instr) {
        let s = &self.state[k];
        if s.fill_only {
            self.refill(k, reg, r);
        } else if !s.dirty && !s.loads.is_empty() {
            // The HBM sources of the loads that wrote the part read.
            let mut src: Regions<3> = Regions::new();
            let mut chunk = u64::MAX;
            for &l in &s.loads {
                let load = &self.out[l];
                if load.writes.iter().any(|w| w.overlaps(reg)) {
                    for h in load.reads.iter() {
                        src.push(*h);
                    }
                    if let Some(d) = load.dma {
                        chunk = chunk.min(d.chunk_bytes);
                    }
                }
            }
            let (bytes, mut rec) = self.dma(k, *reg, MemKind::Hbm, MemKind::Sbuf, r.loc, &r.affine);
            if !src.is_empty() {
                rec.reads = src;
            }
            if let Some(d) = &mut rec.dma {
                d.chunk_bytes = d.chunk_bytes.min(chunk);
            }
            rec.api = SpillKind::InputReload.name();
            self.out.push(rec);
            self.count(SpillKind::InputReload, r.loc, k, bytes);
        } else {
            let (bytes, rec) = self.dma(k, *reg, MemKind::Hbm, MemKind::Sbuf, r.loc, &r.affine);
            self.out.push(rec);
            self.count(SpillKind::Reload, r.loc, k, bytes);
        }
    }

    /// Runs the constant fill of tile `k` (out of SBUF, never saved) again over region `reg`,
    /// for record `r`'s read: the fill instruction repeated on the region, at `r`'s line.
    fn refill(&mut self, k: usize, reg: &Region, r: &Instr) {
        let mut rec = self.out[self.state[k].fill_at].clone();
        let esize = self.tiles[k].desc.dtype.size().max(1) as u64;
        rec.partitions = reg.p1.saturating_sub(reg.p0);
        rec.free = (reg.hi.saturating_sub(reg.lo) / esize) as u32;
        rec.writes = Regions::new();
        rec.writes.push(*reg);
        rec.reads = Regions::new();
        rec.api = SpillKind::Refill.name();
        rec.loc = r.loc;
        rec.affine = r.affine.clone();
        rec.name = None;
        self.out.push(rec);
        self.count(SpillKind::Refill, r.loc, k, 0);
    }

    /// A DMA record moving region `reg` of tile `k` between SBUF and its HBM scratch
    /// (`src` to `dst`), at `loc` and `affine`; returns its bytes and the record.
    fn dma(
        &self,
        k: usize,
        reg: Region,
        src: MemKind,
        dst: MemKind,
        loc: SourceLoc,
        affine: &crate::record::AffinePos,
    ) -> (u64, Instr) {
        let t = &self.tiles[k];
        let parts = reg.p1.saturating_sub(reg.p0);
        let row = reg.hi.saturating_sub(reg.lo);
        let bytes = parts as u64 * row;
        let esize = t.desc.dtype.size().max(1) as u64;
        // The scratch holds the tile partition after partition.
        let stride = t.bytes as u64;
        let scratch = Region {
            buf: BufId::Hbm(SCRATCH_BIT | t.id),
            p0: 0,
            p1: 1,
            lo: reg.p0 as u64 * stride + reg.lo,
            hi: (reg.p1.max(1) - 1) as u64 * stride + reg.hi,
        };
        let (kind, reads, writes) = if dst == MemKind::Hbm {
            (SpillKind::Save, scratch, reg)
        } else {
            (SpillKind::Reload, scratch, reg)
        };
        let (read, write) = if dst == MemKind::Hbm {
            (writes, reads)
        } else {
            (reads, writes)
        };
        let mut rec = Instr {
            affine: affine.clone(),
            ..Instr::with_cost(
                CostFacts {
                    partitions: parts,
                    free: (row / esize) as u32,
                    in_dtype: t.desc.dtype,
                    out_dtype: t.desc.dtype,
                    dma: Some(DmaDims {
                        src,
                        dst,
                        bytes,
                        partitions: parts,
                        start_partition: reg.p0,
                        chunk_bytes: row.max(1),
                    }),
                    ..CostFacts::new(Engine::Dma, Opcode::DmaCopy)
                },
                kind.name(),
                loc,
            )
        };
        rec.reads.push(read);
        rec.writes.push(write);
        (bytes, rec)
    }

    /// Counts `bytes` of `kind` for tile `k` at `loc`.
    fn count(&mut self, kind: SpillKind, loc: SourceLoc, k: usize, bytes: u64) {
        let e = self.added.entry((kind, loc, k)).or_insert((0, 0));
        e.0 += 1;
        e.1 += bytes;
    }

    /// The records and the per-line stats (tiles allocated at one line are one line).
    fn finish(self) -> Resolved {
        let mut stats = SpillStats {
            resident_peak_bytes: self.peak,
            ..SpillStats::default()
        };
        let mut added: Vec<(Key, (usize, u64))> = self.added.into_iter().collect();
        added.sort_by_key(|((kind, loc, k), _)| (*kind, loc.file, loc.line, loc.column, *k));
        for ((kind, loc, k), (count, bytes)) in added {
            stats.add(kind, loc, &describe(&self.tiles[k]), count, bytes);
        }
        stats.sort();
        let mut compiler = CompilerStats::default();
        for (s, t) in self.state.iter().zip(self.tiles) {
            if !s.whole || !s.saved {
                continue;
            }
            compiler.add(CompilerLine {
                kind: CompilerKind::SpilledAcrossLoop,
                line: t.desc.loc,
                api: "SBUF tile",
                kept: None,
                loop_line: s
                    .across
                    .and_then(|l| self.loops.and_then(|ls| ls.get(l as usize).copied())),
                count: 1,
                bytes: (t.desc.shape.partitions() * t.bytes) as u64,
            });
        }
        Resolved {
            records: self.out,
            stats,
            compiler,
        }
    }
}

impl SpillTile {
    /// All of the tile, as a region.
    fn whole(&self) -> Region {
        Region {
            buf: BufId::Tile(self.id),
            p0: 0,
            p1: self.desc.shape.partitions() as u32,
            lo: 0,
            hi: self.bytes as u64,
        }
    }
}

/// A tile as the profile names it: `'name' float32[128, 512] (allocated at k.rs:30:9)`.
fn describe(t: &SpillTile) -> String {
    format!("{} (allocated at {})", t.desc, t.desc.loc)
}

/// The error of record `r` whose own tiles `touched` need `need` more bytes per partition
/// than SBUF has left beside them.
fn too_big(w: &Walk, r: &Instr, touched: &[usize], need: usize, pid: &[usize]) -> NkiError {
    let list: Vec<String> = touched
        .iter()
        .map(|&k| format!("{} {} B/partition", describe(&w.tiles[k]), w.tiles[k].bytes))
        .collect();
    NkiError::new(
        ErrorKind::Capacity,
        r.api,
        format!(
            "SBUF capacity exceeded: the tiles of one instruction cannot be in SBUF at once \
             ({} B/partition resident, {need} more needed, {} usable); its tiles:\n  {}",
            w.resident,
            w.cap,
            list.join("\n  ")
        ),
    )
    .with_program_id(pid)
    .with_loc(r.loc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::Shape;
    use crate::dtype::DType;
    use crate::memory::TileDesc;

    fn loc(line: u32) -> SourceLoc {
        SourceLoc {
            file: "k.rs",
            line,
            column: 1,
        }
    }

    fn tile(id: u64, bytes: usize, line: u32) -> SpillTile {
        let desc = TileDesc {
            dtype: DType::F32,
            shape: Shape::new(&[128, bytes / 4]).unwrap(),
            loc: loc(line),
            name: None,
        };
        SpillTile { id, bytes, desc }
    }

    fn whole(id: u64, bytes: usize) -> Region {
        Region {
            buf: BufId::Tile(id),
            p0: 0,
            p1: 128,
            lo: 0,
            hi: bytes as u64,
        }
    }

    fn part(id: u64, lo: usize, hi: usize) -> Region {
        Region {
            lo: lo as u64,
            hi: hi as u64,
            ..whole(id, hi)
        }
    }

    fn load(id: u64, bytes: usize, line: u32) -> Instr {
        let mut r = Instr::with_cost(
            CostFacts {
                partitions: 128,
                dma: Some(DmaDims {
                    src: MemKind::Hbm,
                    dst: MemKind::Sbuf,
                    bytes: 128 * bytes as u64,
                    partitions: 128,
                    start_partition: 0,
                    chunk_bytes: bytes as u64,
                }),
                ..CostFacts::new(Engine::Dma, Opcode::DmaCopy)
            },
            "nl.load",
            loc(line),
        );
        r.reads.push(Region {
            buf: BufId::Hbm(7),
            p0: 0,
            p1: 1,
            lo: 0,
            hi: 128 * bytes as u64,
        });
        r.writes.push(whole(id, bytes));
        r
    }

    fn op(reads: &[(u64, usize)], write: (u64, usize), line: u32) -> Instr {
        let regs: Vec<Region> = reads.iter().map(|&(id, b)| whole(id, b)).collect();
        op_on(&regs, whole(write.0, write.1), line)
    }

    fn op_on(reads: &[Region], write: Region, line: u32) -> Instr {
        let mut r = Instr::new(Engine::Vector, Opcode::TensorTensor, "nl.add", loc(line));
        for &reg in reads {
            r.reads.push(reg);
        }
        r.writes.push(write);
        r
    }

    const KB: usize = 1024;

    /// Two records at lines `line` and `line + 1` that read the first and the second 16 KiB
    /// of tile `split`, each beside one whole 64 KiB tile of `beside`, and write all of the
    /// 64 KiB tile `dst`.
    fn halves(split: u64, beside: [u64; 2], dst: u64, line: u32) -> [Instr; 2] {
        [0, 1].map(|h| {
            let lo = h * 16 * KB;
            op_on(
                &[part(split, lo, lo + 16 * KB), whole(beside[h], 64 * KB)],
                whole(dst, 64 * KB),
                line + h as u32,
            )
        })
    }

    /// Tiles 1, 2, ... of the given KiB per partition, allocated at lines 1, 2, ...
    fn tiles_of(kib: &[usize]) -> Vec<SpillTile> {
        (1..)
            .zip(kib)
            .map(|(k, &b)| tile(k, b * KB, k as u32))
            .collect()
    }

    /// Resolves `recs` over `tiles` (over-committed from the first record) on a 160 KiB SBUF,
    /// as program `[pid]`.
    fn run(tiles: Vec<SpillTile>, recs: Vec<Instr>, pid: usize) -> Result<Resolved, NkiError> {
        let over = Overcommit {
            start: 0,
            peak_before: 0,
            tiles,
        };
        resolve(recs, &over, 160 * KB, &[pid], None)
    }

    #[test]
    fn dead_tiles_free_their_space_and_nothing_moves() {
        // Three 64 KiB tiles allocated at once on a 160 KiB SBUF, but each dies at its
        // first read: live ranges fit.
        let tiles = tiles_of(&[64, 64, 64]);
        let recs = vec![
            load(1, 64 * KB, 10),
            op(&[(1, 64 * KB)], (2, 64 * KB), 11),
            op(&[(2, 64 * KB)], (3, 64 * KB), 12),
        ];
        let r = run(tiles, recs, 0).unwrap();
        assert_eq!(r.records.len(), 3);
        assert!(r.stats.is_empty());
        assert_eq!(r.stats.resident_peak_bytes, 128 * KB);
    }

    #[test]
    fn an_input_tile_leaves_first_and_is_re_read_per_use() {
        // Tile 1 holds an input, tile 2 a computed value, both next read at line 13. Tile 3
        // needs room at line 12: the input leaves (no save), lines 13 and 14 re-read the parts
        // they use.
        let tiles = tiles_of(&[64, 64, 64]);
        let mut recs = vec![
            load(1, 64 * KB, 10),
            op(&[(1, 64 * KB)], (2, 64 * KB), 11),
            load(3, 64 * KB, 12),
        ];
        recs.extend(halves(1, [2, 3], 3, 13));
        let r = run(tiles, recs, 0).unwrap();
        let s = &r.stats;
        assert_eq!(s.save_bytes, 0, "{s:?}");
        assert_eq!(s.input_reload_bytes, 2 * 128 * 16 * KB as u64, "{s:?}");
        assert_eq!(s.reload_bytes, 0);
        assert_eq!(r.records.len(), 5 + 2);
        let lines: Vec<u32> = s.lines.iter().map(|l| l.line.line).collect();
        assert!(lines.contains(&13) && lines.contains(&14), "{s:?}");
        // The re-loads read the input the load read, and come right before their reader.
        let at = r
            .records
            .iter()
            .position(|x| x.api == "input reload")
            .unwrap();
        assert_eq!(r.records[at].reads[0].buf, BufId::Hbm(7));
        assert_eq!(r.records[at + 1].loc.line, 13);
        assert!(s.resident_peak_bytes <= 160 * KB);
    }

    #[test]
    fn a_computed_tile_is_saved_once_and_re_loaded_per_read() {
        let tiles = tiles_of(&[16, 64, 64, 64]);
        let mut recs = vec![
            load(1, 16 * KB, 10),
            op(&[(1, 16 * KB)], (2, 64 * KB), 11),
            op(&[(1, 16 * KB)], (3, 64 * KB), 12),
            op(&[(1, 16 * KB), (3, 64 * KB)], (4, 64 * KB), 13),
            op(&[(4, 64 * KB)], (4, 64 * KB), 14),
        ];
        recs.extend(halves(2, [4, 3], 4, 15));
        let r = run(tiles, recs, 0).unwrap();
        let s = &r.stats;
        // At 13 tile 4 needs room beside 1, 2 and 3 (208 KiB): 1 and 3 are its operands, so
        // the computed tile 2 leaves, saved whole once; 15 and 16 re-load the parts they read.
        assert_eq!(s.save_bytes, 128 * 64 * KB as u64, "{s:?}");
        assert_eq!(s.reload_bytes, 2 * 128 * 16 * KB as u64, "{s:?}");
        assert_eq!(s.input_reload_bytes, 0, "{s:?}");
        assert_eq!(r.records.len(), 7 + 3);
    }

    #[test]
    fn a_re_loaded_part_stays_for_the_next_read_and_leaves_unsaved() {
        let tiles = tiles_of(&[64, 64, 64, 16, 96]);
        let first16 = part(1, 0, 16 * KB);
        let recs = vec![
            load(4, 16 * KB, 9),
            op(&[(4, 16 * KB)], (1, 64 * KB), 10),
            op(&[(4, 16 * KB)], (2, 64 * KB), 11),
            op(&[(4, 16 * KB), (2, 64 * KB)], (3, 64 * KB), 12),
            op_on(&[first16], whole(3, 64 * KB), 13),
            op_on(&[first16], whole(3, 64 * KB), 14),
            op(&[(3, 64 * KB)], (5, 96 * KB), 15),
            op_on(&[first16, whole(5, 96 * KB)], whole(5, 96 * KB), 16),
        ];
        let r = run(tiles, recs, 0).unwrap();
        let s = &r.stats;
        // At 12 the computed tile 1 leaves, saved whole. 13 re-loads the part it reads, which
        // stays: 14 reads it in SBUF. At 15 tile 5 needs room beside 3 and that part: the
        // part leaves without a save (the scratch holds it), and 16 re-loads it.
        assert_eq!(s.save_bytes, 128 * 64 * KB as u64, "{s:?}");
        assert_eq!(s.reload_bytes, 2 * 128 * 16 * KB as u64, "{s:?}");
        let lines: Vec<u32> = s
            .lines
            .iter()
            .filter(|l| l.kind == SpillKind::Reload)
            .map(|l| l.line.line)
            .collect();
        assert_eq!(lines.len(), 2, "{s:?}");
        assert!(lines.contains(&13) && lines.contains(&16), "{s:?}");
        assert_eq!(r.records.len(), 8 + 3);
        assert!(s.resident_peak_bytes <= 160 * KB, "{s:?}");
    }

    /// Three iterations of one affine loop (activation 0, at line 1): iteration 0 computes
    /// the 48 KiB tiles 1 and 2 from the input tile 6; each iteration `it` loads its 96 KiB
    /// tile `3 + it` and reads the first half of 1 and of 2 beside it (writing the 4 KiB tile
    /// 7). 1 and 2 are kept across the loop; with one iteration's 96 KiB they exceed the
    /// 160 KiB SBUF.
    fn kept_across_a_loop(loops: Option<&[SourceLoc]>) -> Resolved {
        let tiles = tiles_of(&[48, 48, 96, 96, 96, 8, 4]);
        let at = |mut r: Instr, it: u32| {
            r.affine = AffinePos::new(&[(0, it)]);
            r
        };
        let mut recs = vec![
            at(load(6, 8 * KB, 10), 0),
            at(op(&[(6, 8 * KB)], (1, 48 * KB), 11), 0),
            at(op(&[(6, 8 * KB)], (2, 48 * KB), 12), 0),
        ];
        for it in 0..3u32 {
            let w = 3 + u64::from(it);
            recs.push(at(load(w, 96 * KB, 13), it));
            for x in [1, 2] {
                let reads = [part(x, 0, 24 * KB), whole(w, 96 * KB)];
                recs.push(at(op_on(&reads, whole(7, 4 * KB), 13 + x as u32), it));
            }
        }
        let over = Overcommit {
            start: 0,
            peak_before: 0,
            tiles,
        };
        resolve(recs, &over, 160 * KB, &[0], loops).unwrap()
    }

    #[test]
    fn tiles_kept_across_a_loop_are_spilled_whole_and_re_loaded_per_iteration() {
        let tile = 128 * 48 * KB as u64;
        let r = kept_across_a_loop(Some(&[loc(1)]));
        let s = &r.stats;
        // Both are saved once; 2 (pushed out in iteration 0) is re-loaded whole there, and
        // both are re-loaded whole once in each of the two later iterations.
        assert_eq!(s.save_bytes, 2 * tile, "{s:?}");
        assert_eq!(s.reload_bytes, 5 * tile, "{s:?}");
        assert_eq!(s.input_reload_bytes, 0, "{s:?}");
        assert!(s.resident_peak_bytes <= 160 * KB, "{s:?}");
        let c = &r.compiler.lines;
        assert_eq!(c.len(), 2, "{c:?}");
        assert!(c.iter().all(|l| l.kind == CompilerKind::SpilledAcrossLoop
            && l.loop_line == Some(loc(1))
            && l.bytes == tile));
        // Switched off, the same program re-loads only the halves it reads, and reports no
        // whole spill.
        let off = kept_across_a_loop(None);
        assert!(off.compiler.is_empty());
        assert!(off.stats.reload_bytes < s.reload_bytes, "{:?}", off.stats);
        assert_eq!(off.stats.reload_bytes % (tile / 2), 0, "{:?}", off.stats);
    }

    #[test]
    fn one_instruction_whose_tiles_cannot_fit_is_an_error_naming_it() {
        let tiles = tiles_of(&[64, 64, 64]);
        let recs = vec![
            load(1, 64 * KB, 10),
            load(2, 64 * KB, 11),
            op(&[(1, 64 * KB), (2, 64 * KB)], (3, 64 * KB), 12),
        ];
        let e = run(tiles, recs, 3).err().expect("too big");
        assert_eq!(e.kind(), ErrorKind::Capacity);
        assert_eq!(e.op(), "nl.add");
        assert_eq!(e.program_id(), Some(&[3usize][..]));
        assert_eq!(e.location().map(|l| l.line), Some(12));
        assert!(e.message().contains("allocated at k.rs:3:1"), "{e}");
    }
}
