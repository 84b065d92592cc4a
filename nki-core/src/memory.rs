//! On-chip capacity accounting for one program instance: live SBUF tiles against the target's
//! usable bytes per partition, live PSUM tiles packed into 2 KiB banks, and the peaks of both.
//!
//! What is an error here is what the compiler rejects: one tile larger than a partition's SBUF,
//! a PSUM tile over its banks, PSUM banks exhausted. Allocated SBUF tiles that together exceed
//! SBUF are not an error: the compiler shortens live ranges, re-loads kernel inputs and spills
//! computed tiles to make them fit (shared/reference/calibration.md section 5: such kernels
//! compile and run). The tracker then *over-commits*: it remembers from which record on and
//! which SBUF tiles were involved ([`Overcommit`]), and `compiler::spill` resolves the records
//! into the traffic the compiler adds.

use crate::access::Shape;
use crate::dialect::Dialect;
use crate::dtype::DType;
use crate::error::{ErrorKind, NkiError, Result, SourceLoc};
use crate::record::MemKind;
use crate::slots::SlotVec;
use crate::target::TargetSpec;
use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashMap;

/// A live on-chip tile, as the tracker sees it.
#[derive(Clone, Debug)]
struct LiveTile {
    /// The tile's id (tiles are numbered in allocation order).
    id: u64,
    mem: MemKind,
    bytes: usize,
    /// First PSUM bank (PSUM tiles only).
    bank: usize,
    /// PSUM banks held: 1, or the whole banks of a tile larger than one bank (NC-v4).
    nbanks: usize,
    desc: TileDesc,
}

/// A tile as messages and the profile name it: dtype, shape, where it was allocated and its
/// name (`nl::ndarray(.., nl::sbuf.name(..))`), if it has one.
#[derive(Clone, Debug)]
pub(crate) struct TileDesc {
    pub(crate) dtype: DType,
    pub(crate) shape: Shape,
    pub(crate) loc: SourceLoc,
    pub(crate) name: Option<Cow<'static, str>>,
}

impl std::fmt::Display for TileDesc {
    /// `'name' float32[128, 512]` (no name: `float32[128, 512]`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(n) = &self.name {
            write!(f, "'{n}' ")?;
        }
        write!(f, "{}{}", self.dtype, self.shape)
    }
}

/// Peak on-chip usage of an instance (or a launch: the max over instances).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct MemoryPeak {
    /// Peak SBUF bytes per partition held by live tiles.
    pub sbuf_bytes_per_partition: usize,
    /// Peak PSUM bytes per partition held by live tiles.
    pub psum_bytes_per_partition: usize,
    /// Peak number of PSUM banks in use.
    pub psum_banks: usize,
}

impl MemoryPeak {
    /// Element-wise maximum of two peaks.
    pub fn max(self, o: MemoryPeak) -> MemoryPeak {
        MemoryPeak {
            sbuf_bytes_per_partition: self
                .sbuf_bytes_per_partition
                .max(o.sbuf_bytes_per_partition),
            psum_bytes_per_partition: self
                .psum_bytes_per_partition
                .max(o.psum_bytes_per_partition),
            psum_banks: self.psum_banks.max(o.psum_banks),
        }
    }
}

/// Tracks live tiles of one instance.
pub(crate) struct MemoryTracker {
    sbuf_cap: usize,
    bank_bytes: usize,
    banks: Vec<usize>,
    /// Most banks one PSUM tile may span: [`TargetSpec::psum_tile_max_banks`] for a Beta-1
    /// kernel, every bank for an NKI 0.7 one (see [`MemoryTracker::set_dialect`]).
    max_tile_banks: usize,
    /// [`TargetSpec::psum_tile_max_banks`].
    beta1_tile_banks: usize,
    sbuf_used: usize,
    /// The live tiles by slot (a tile keeps its slot; freed slots are reused, so the table
    /// stays as long as the most tiles live at once).
    live: SlotVec<Option<LiveTile>>,
    /// The live tiles placed by hand (`address=`), checked against each other for overlap.
    placed: Vec<Placed>,
    pub(crate) peak: MemoryPeak,
    /// Set once the allocated SBUF tiles exceed SBUF (see the module doc).
    pub(crate) over: Option<Overcommit>,
    /// When kept (`Some`: a launch whose `compiler` stage may lengthen live ranges, so that
    /// tiles dropped before the over-commit point take part in the capacity resolution):
    /// every SBUF tile allocated, in allocation order.
    pub(crate) all: Option<Vec<SpillTile>>,
    /// Every on-chip tile allocated, in allocation order: what the address allocator
    /// (`compiler::allocate`) places.
    pub(crate) allocated: Vec<AllocatedTile>,
}

/// An on-chip tile as the address allocator (`compiler::allocate`) sees it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AllocatedTile {
    /// The tile's id (its `BufId::Tile`).
    pub(crate) id: u64,
    /// SBUF or PSUM.
    pub(crate) mem: MemKind,
    /// Bytes per partition.
    pub(crate) bytes: u32,
    /// The byte of each partition it was placed at by hand (NKI `address=`), if it was.
    pub(crate) placed: Option<u32>,
    /// Keeps one buffer for all its values, address rotation or not (a stream buffer's slot,
    /// `nl::alloc_stream_buffers`: the kernel chose how many slots rotate).
    pub(crate) keeps_buffer: bool,
}

/// An SBUF tile the capacity resolution (`compiler::spill`) may move out of SBUF.
#[derive(Clone, Debug)]
pub(crate) struct SpillTile {
    /// The tile's id (its `BufId::Tile`).
    pub(crate) id: u64,
    /// Bytes per partition.
    pub(crate) bytes: usize,
    /// Shape and dtype (for the spill DMAs), site and name (for the profile's lines).
    pub(crate) desc: TileDesc,
}

/// What the tracker knows once allocated SBUF tiles exceeded SBUF: the index of the first
/// record issued after the over-committing allocation (every record before it ran with all
/// its tiles resident) and every SBUF tile live at that point or allocated after it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Overcommit {
    /// Record index at the first over-committing allocation.
    pub(crate) start: usize,
    /// Peak SBUF bytes per partition before it (when every tile was resident).
    pub(crate) peak_before: usize,
    /// The SBUF tiles live then or allocated later, in allocation order.
    pub(crate) tiles: Vec<SpillTile>,
}

/// A tile placed by hand (NKI `nl.ndarray(..., address=(partition, byte))`): the partitions
/// and bytes per partition it occupies.
#[derive(Clone, Debug)]
struct Placed {
    id: u64,
    mem: MemKind,
    what: String,
    partitions: std::ops::Range<usize>,
    bytes: std::ops::Range<usize>,
    loc: SourceLoc,
}

/// What [`MemoryTracker::checkpoint`] saves.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MemCheckpoint {
    peak: MemoryPeak,
    over: Option<usize>,
    all: Option<usize>,
    allocated: usize,
}

/// The slot of a tile the tracker does not hold (an HBM buffer).
pub(crate) const NO_SLOT: u32 = u32::MAX;

impl MemoryTracker {
    pub(crate) fn new(spec: &TargetSpec) -> Self {
        MemoryTracker {
            sbuf_cap: spec.sbuf_bytes_per_partition,
            bank_bytes: spec.psum_bank_bytes,
            banks: vec![0; spec.psum_banks],
            max_tile_banks: spec.psum_tile_max_banks,
            beta1_tile_banks: spec.psum_tile_max_banks,
            sbuf_used: 0,
            live: SlotVec::default(),
            placed: Vec::new(),
            peak: MemoryPeak::default(),
            over: None,
            all: None,
            allocated: Vec::new(),
        }
    }

    /// Sets the PSUM rule of the kernel's dialect. Beta 1 documents that a PSUM tile fits one
    /// 2 KiB bank (`tile_size.psum_fmax`, "a PSUM tile cannot cross a bank"; NeuronCore-v4:
    /// [`TargetSpec::psum_tile_max_banks`]). NKI 0.7 places PSUM tensors at bank starts
    /// (`address=(0, bank * 2048)`) and tuned trn2 matmul kernels that run on hardware keep
    /// accumulators of several banks in one PSUM tensor, each matmul writing within one bank
    /// (that rule is the matmul's, `isa::tensor`): a 0.7 PSUM tensor may take any number of
    /// whole, consecutive banks.
    pub(crate) fn set_dialect(&mut self, dialect: Dialect) {
        self.max_tile_banks = match dialect {
            Dialect::Beta1 => self.beta1_tile_banks,
            Dialect::Nki07 | Dialect::Nki08 => self.banks.len(),
        };
    }

    /// Registers a new tile, allocated before record `at` of the instance; returns its slot
    /// (for [`MemoryTracker::free`]) or an error when the compiler would reject it: an SBUF
    /// tile larger than a partition's SBUF, a PSUM tile over its banks or no PSUM bank left.
    /// SBUF tiles that fit one by one but not together over-commit (see the module doc).
    #[inline]
    pub(crate) fn alloc(
        &mut self,
        id: u64,
        mem: MemKind,
        shape: Shape,
        dtype: DType,
        loc: SourceLoc,
        at: usize,
    ) -> Result<u32> {
        let bytes = shape.free() * dtype.size();
        let desc = TileDesc {
            dtype,
            shape,
            loc,
            name: None,
        };
        let mut bank = usize::MAX;
        let mut nbanks = 1;
        match mem {
            MemKind::Sbuf => {
                if bytes > self.sbuf_cap {
                    return Err(self.full_error("SBUF", bytes, shape, dtype, self.sbuf_cap));
                }
                if self.over.is_none() && self.sbuf_used + bytes > self.sbuf_cap {
                    self.over = Some(self.overcommit(at));
                }
                let tile = || SpillTile {
                    id,
                    bytes,
                    desc: desc.clone(),
                };
                if let Some(o) = &mut self.over {
                    o.tiles.push(tile());
                }
                if let Some(all) = &mut self.all {
                    all.push(tile());
                }
                self.sbuf_used += bytes;
            }
            MemKind::Psum if bytes > self.bank_bytes && self.max_tile_banks > 1 => {
                // A tile over one bank (NC-v4, or an NKI 0.7 kernel) takes whole, consecutive,
                // empty banks.
                let k = bytes.div_ceil(self.bank_bytes);
                if k > self.max_tile_banks {
                    let rule = format!(
                        "spans at most {} banks of {} bytes",
                        self.max_tile_banks, self.bank_bytes
                    );
                    return Err(psum_bank_error(bytes, shape, dtype, rule));
                }
                match (0..=self.banks.len().saturating_sub(k))
                    .find(|&b| self.banks[b..b + k].iter().all(|&u| u == 0))
                {
                    Some(b) => {
                        self.banks[b..b + k].fill(self.bank_bytes);
                        bank = b;
                        nbanks = k;
                    }
                    None => {
                        let cap = self.banks.len() * self.bank_bytes;
                        return Err(self.full_error("PSUM", bytes, shape, dtype, cap));
                    }
                }
            }
            MemKind::Psum => {
                if bytes > self.bank_bytes {
                    let rule = format!(
                        "must fit one {}-byte bank (at most {} fp32 elements per partition)",
                        self.bank_bytes,
                        self.bank_bytes / 4
                    );
                    return Err(psum_bank_error(bytes, shape, dtype, rule));
                }
                match self
                    .banks
                    .iter()
                    .position(|&u| u + bytes <= self.bank_bytes)
                {
                    Some(b) => {
                        self.banks[b] += bytes;
                        bank = b;
                    }
                    None => {
                        let cap = self.banks.len() * self.bank_bytes;
                        return Err(self.full_error("PSUM", bytes, shape, dtype, cap));
                    }
                }
            }
            MemKind::Hbm => return Ok(NO_SLOT),
        }
        self.allocated.push(AllocatedTile {
            id,
            mem,
            bytes: bytes as u32,
            placed: None,
            keeps_buffer: false,
        });
        let tile = Some(LiveTile {
            id,
            mem,
            bytes,
            bank,
            nbanks,
            desc,
        });
        let slot = self.live.insert(tile);
        // Only the usage of `mem` grew (the other's is at most its peak already).
        let peak = &mut self.peak;
        if mem == MemKind::Sbuf {
            peak.sbuf_bytes_per_partition = peak.sbuf_bytes_per_partition.max(self.sbuf_used);
        } else {
            let psum_bytes: usize = self.banks.iter().sum();
            let psum_banks = self.banks.iter().filter(|&&u| u > 0).count();
            peak.psum_bytes_per_partition = peak.psum_bytes_per_partition.max(psum_bytes);
            peak.psum_banks = peak.psum_banks.max(psum_banks);
        }
        Ok(slot)
    }

    /// What tracing a branch the launch does not take may change here, saved before it (the
    /// branch's tiles free their space when they drop; what it added to the peak and the
    /// allocation lists is put back by [`MemoryTracker::rollback`]).
    pub(crate) fn checkpoint(&self) -> MemCheckpoint {
        MemCheckpoint {
            peak: self.peak,
            over: self.over.as_ref().map(|o| o.tiles.len()),
            all: self.all.as_ref().map(Vec::len),
            allocated: self.allocated.len(),
        }
    }

    /// Puts back the peak and the allocation lists saved by [`MemoryTracker::checkpoint`]: the
    /// untaken branch's tiles are not allocated by the kernel that runs.
    pub(crate) fn rollback(&mut self, cp: MemCheckpoint) {
        self.peak = cp.peak;
        match cp.over {
            None => self.over = None,
            Some(n) => {
                if let Some(o) = &mut self.over {
                    o.tiles.truncate(n);
                }
            }
        }
        if let (Some(all), Some(n)) = (&mut self.all, cp.all) {
            all.truncate(n);
        }
        self.allocated.truncate(cp.allocated);
    }

    /// The over-commit record of the live SBUF tiles, made when an allocation before record
    /// `at` first exceeds SBUF.
    fn overcommit(&self, at: usize) -> Overcommit {
        let mut tiles: Vec<SpillTile> = self
            .live
            .iter()
            .flatten()
            .filter(|t| t.mem == MemKind::Sbuf)
            .map(|t| SpillTile {
                id: t.id,
                bytes: t.bytes,
                desc: t.desc.clone(),
            })
            .collect();
        tiles.sort_by_key(|t| t.id);
        Overcommit {
            start: at,
            peak_before: self.peak.sbuf_bytes_per_partition,
            tiles,
        }
    }

    /// Names the live tile `id` held in `slot` (for the capacity error's list of live tiles).
    /// (`name` is a `&Cow`, not a `&str`: cloned, a borrowed name stays borrowed.)
    #[inline]
    #[allow(clippy::ptr_arg)]
    pub(crate) fn set_name(&mut self, slot: u32, id: u64, name: &Cow<'static, str>) {
        let Some(Some(t)) = self.live.get_mut(slot) else {
            return;
        };
        if t.id != id {
            return;
        }
        t.desc.name = Some(name.clone());
        // The spill lists hold SBUF tiles only, a tile just allocated last.
        if t.mem == MemKind::Sbuf && (self.over.is_some() || self.all.is_some()) {
            self.name_listed(id, name);
        }
    }

    /// Names SBUF tile `id` in the spill lists (see [`MemoryTracker::set_name`]).
    #[allow(clippy::ptr_arg)]
    fn name_listed(&mut self, id: u64, name: &Cow<'static, str>) {
        let over = self.over.as_mut().map(|o| &mut o.tiles);
        for tiles in over.into_iter().chain(self.all.as_mut()) {
            if let Some(t) = tiles.iter_mut().rev().find(|t| t.id == id) {
                t.desc.name = Some(name.clone());
            }
        }
    }

    /// Tile `id` keeps one buffer for all its values (a stream buffer's slot): the
    /// allocator's address rotation does not rename it.
    pub(crate) fn keep_buffer(&mut self, id: u64) {
        if let Some(a) = self.allocated.iter_mut().rev().find(|a| a.id == id) {
            a.keeps_buffer = true;
        }
    }

    /// Places the live tile `id` (in `slot`, described as `what`) at partition `partition`,
    /// byte `byte` of every partition (NKI `address=`): the tile's partitions and bytes must
    /// lie inside the memory, a PSUM tile must start a bank (its bank is then that one), and
    /// it must not overlap another live placed tile. The error names both tiles.
    pub(crate) fn place(
        &mut self,
        slot: u32,
        id: u64,
        what: String,
        (partition, byte): (usize, usize),
        loc: SourceLoc,
    ) -> Result<()> {
        let Some(Some(t)) = self.live.get_mut(slot) else {
            return Ok(());
        };
        if t.id != id {
            return Ok(());
        }
        let (mem, parts, bytes) = (t.mem, t.desc.shape.partitions(), t.bytes);
        let (cap, mem_name) = match mem {
            MemKind::Sbuf => (self.sbuf_cap, "SBUF"),
            _ => (self.banks.len() * self.bank_bytes, "PSUM"),
        };
        let place = |msg: String| NkiError::new(ErrorKind::AddressOverlap, "ndarray", msg);
        let end = (partition.checked_add(parts), byte.checked_add(bytes));
        let (Some(p1), Some(b1)) = end else {
            return Err(place(format!(
                "address ({partition}, {byte}) of {what} is out of range"
            )));
        };
        if p1 > 128 || b1 > cap {
            return Err(NkiError::new(
                ErrorKind::OutOfBounds,
                "ndarray",
                format!(
                    "address ({partition}, {byte}) places {what} at partitions {partition}..{p1},                      bytes {byte}..{b1} of each partition, outside {mem_name} (128 partitions of                      {cap} bytes)"
                ),
            ));
        }
        if mem == MemKind::Psum {
            if byte % self.bank_bytes != 0 {
                return Err(place(format!(
                    "address ({partition}, {byte}) of PSUM {what} does not start a PSUM bank:                      a PSUM tensor's byte offset must be a multiple of {} (address=(0, bank * {}))",
                    self.bank_bytes, self.bank_bytes
                )));
            }
            let bank = byte / self.bank_bytes;
            if t.nbanks > 1 && bank != t.bank {
                let k = t.nbanks;
                if bank + k > self.banks.len() {
                    return Err(place(format!(
                        "address ({partition}, {byte}) of PSUM {what} needs banks {bank}..{} of {}",
                        bank + k,
                        self.banks.len()
                    )));
                }
                self.banks[t.bank..t.bank + k].fill(0);
                self.banks[bank..bank + k].fill(self.bank_bytes);
                t.bank = bank;
            } else if bank != t.bank {
                self.banks[t.bank] -= bytes;
                self.banks[bank] += bytes;
                t.bank = bank;
            }
        }
        let (partitions, bytes) = (partition..p1, byte..b1);
        let overlaps = |o: &&Placed| {
            o.mem == mem
                && o.partitions.start < partitions.end
                && partitions.start < o.partitions.end
                && o.bytes.start < bytes.end
                && bytes.start < o.bytes.end
        };
        if let Some(o) = self.placed.iter().find(overlaps) {
            return Err(place(format!(
                "{what} placed at partitions {partitions:?}, bytes {bytes:?} overlaps the live {} placed at partitions {:?}, bytes {:?} (allocated at {}): two live tensors cannot share {mem_name} bytes",
                o.what, o.partitions, o.bytes, o.loc
            )));
        }
        if let Some(a) = self.allocated.iter_mut().rev().find(|a| a.id == id) {
            a.placed = Some(byte as u32);
        }
        self.placed.push(Placed {
            id,
            mem,
            what,
            partitions,
            bytes,
            loc,
        });
        Ok(())
    }

    /// Releases tile `id` held in `slot` (no-op when the slot does not hold it: a tile of
    /// another instance).
    #[inline]
    pub(crate) fn free(&mut self, slot: u32, id: u64) {
        if !self.placed.is_empty() {
            self.placed.retain(|p| p.id != id);
        }
        let Some(entry) = self.live.get_mut(slot) else {
            return;
        };
        if entry.as_ref().is_some_and(|t| t.id == id) {
            let t = entry.take().expect("checked above");
            self.live.release(slot);
            match t.mem {
                MemKind::Sbuf => self.sbuf_used -= t.bytes,
                MemKind::Psum if t.nbanks > 1 => self.banks[t.bank..t.bank + t.nbanks].fill(0),
                MemKind::Psum => self.banks[t.bank] -= t.bytes,
                MemKind::Hbm => {}
            }
        }
    }

    /// The error of an SBUF tile larger than a partition's SBUF, or of PSUM with no room
    /// (`what` is "SBUF" or "PSUM"), listing the live tiles of that memory.
    fn full_error(
        &self,
        what: &str,
        bytes: usize,
        shape: Shape,
        dtype: DType,
        cap: usize,
    ) -> NkiError {
        let mem = if what == "SBUF" {
            MemKind::Sbuf
        } else {
            MemKind::Psum
        };
        let mut live: Vec<&LiveTile> = self
            .live
            .iter()
            .flatten()
            .filter(|t| t.mem == mem)
            .collect();
        // Largest first, in allocation order among equals.
        live.sort_by_key(|t| (std::cmp::Reverse(t.bytes), t.id));
        let used: usize = live.iter().map(|t| t.bytes).sum();
        let n = live.len();
        let tiles = if n == 1 { "tile" } else { "tiles" };
        let mut msg = format!(
            "{what} capacity exceeded: a new tile {dtype}{shape} needs {bytes} bytes per partition"
        );
        // The live tiles are listed when there are any (a tile too large on its own meets none).
        msg.push_str(&match (mem, n) {
            (MemKind::Sbuf, 0) => format!(", more than a partition holds ({cap})"),
            (MemKind::Sbuf, _) => format!(
                ", more than a partition holds ({cap}); {used} are held by {n} live {tiles}:"
            ),
            (_, 0) => format!(", more than the {cap} bytes of a partition's banks"),
            _ => format!(" but {used} of {cap} are held by {n} live {tiles}:"),
        });
        for t in live.iter().take(8) {
            msg.push_str(&format!(
                "\n  {} {} B/partition (allocated at {})",
                t.desc, t.bytes, t.desc.loc
            ));
        }
        if live.len() > 8 {
            msg.push_str(&format!("\n  ... and {} more", live.len() - 8));
        }
        NkiError::new(ErrorKind::Capacity, "allocate", msg)
    }
}

/// Most buffers the per-thread pool keeps.
const POOL_MAX_BUFFERS: usize = 32;
/// Most f32 elements the per-thread pool keeps in all (64 MiB).
const POOL_MAX_ELEMS: usize = 16 << 20;

thread_local! {
    /// Recycled tile buffers of this thread (one thread runs one NeuronCore's instances), so a
    /// kernel's tiles reuse memory instead of going through the allocator for every op.
    static POOL: RefCell<(Vec<Vec<f32>>, usize)> = const { RefCell::new((Vec::new(), 0)) };
}

/// An empty vector with capacity for at least `n` values, recycled when possible.
pub(crate) fn take_buf(n: usize) -> Vec<f32> {
    POOL.try_with(|p| {
        let mut p = p.try_borrow_mut().ok()?;
        let (bufs, total) = &mut *p;
        let best = bufs
            .iter()
            .enumerate()
            .filter(|(_, b)| b.capacity() >= n && b.capacity() <= 4 * n.max(1024))
            .min_by_key(|(_, b)| b.capacity())
            .map(|(i, _)| i)?;
        let mut b = bufs.swap_remove(best);
        *total -= b.capacity();
        b.clear();
        Some(b)
    })
    .ok()
    .flatten()
    .unwrap_or_else(|| Vec::with_capacity(n))
}

/// Returns a buffer to this thread's pool (dropped when the pool is full).
pub(crate) fn give_buf(b: Vec<f32>) {
    let cap = b.capacity();
    if cap == 0 {
        return;
    }
    let _ = POOL.try_with(|p| {
        if let Ok(mut p) = p.try_borrow_mut() {
            let (bufs, total) = &mut *p;
            if bufs.len() < POOL_MAX_BUFFERS && *total + cap <= POOL_MAX_ELEMS {
                *total += cap;
                bufs.push(b);
            }
        }
    });
}

/// The error of a PSUM tile of `bytes` per partition that breaks the bank `rule` ("must fit
/// one 2048-byte bank ...").
#[cold]
fn psum_bank_error(bytes: usize, shape: Shape, dtype: DType, rule: String) -> NkiError {
    NkiError::new(
        ErrorKind::PsumBankLimit,
        "psum",
        format!("PSUM tile {dtype}{shape} needs {bytes} bytes per partition; a PSUM tile {rule}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::Target;

    #[test]
    fn slots_are_reused_and_a_foreign_tile_frees_nothing() {
        let mut t = MemoryTracker::new(Target::Trn1.spec());
        let shape = Shape::new(&[128, 512]).unwrap();
        let loc = SourceLoc::caller();
        let a = t
            .alloc(1, MemKind::Sbuf, shape, DType::F32, loc, 0)
            .unwrap();
        let b = t
            .alloc(2, MemKind::Sbuf, shape, DType::F32, loc, 0)
            .unwrap();
        assert_ne!(a, b);
        assert_eq!(t.sbuf_used, 2 * 2048);
        // Slot `a` does not hold tile 3 (a tile of another instance): nothing is freed.
        t.free(a, 3);
        t.free(99, 1);
        assert_eq!(t.sbuf_used, 2 * 2048);
        t.free(a, 1);
        assert_eq!(t.sbuf_used, 2048);
        // Freeing twice frees once; the slot is taken by the next tile.
        t.free(a, 1);
        assert_eq!(t.sbuf_used, 2048);
        assert_eq!(t.alloc(4, MemKind::Sbuf, shape, DType::F32, loc, 0), Ok(a));
        assert_eq!(t.peak.sbuf_bytes_per_partition, 2 * 2048);
        assert!(t.over.is_none());
    }

    #[test]
    fn tiles_over_sbuf_together_overcommit_and_one_tile_over_a_partition_is_an_error() {
        let spec = Target::Trn1.spec();
        let mut t = MemoryTracker::new(spec);
        let loc = SourceLoc::caller();
        // 64 KiB per partition each: the third does not fit beside two on trn1 (176 KiB).
        let shape = Shape::new(&[128, 16384]).unwrap();
        t.alloc(1, MemKind::Sbuf, shape, DType::F32, loc, 0)
            .unwrap();
        t.alloc(2, MemKind::Sbuf, shape, DType::F32, loc, 3)
            .unwrap();
        assert!(t.over.is_none());
        t.alloc(3, MemKind::Sbuf, shape, DType::F32, loc, 7)
            .unwrap();
        let over = t.over.as_ref().expect("over-committed");
        assert_eq!(over.start, 7);
        let ids: Vec<u64> = over.tiles.iter().map(|t| t.id).collect();
        assert_eq!(ids, [1, 2, 3]);
        t.alloc(4, MemKind::Sbuf, shape, DType::F32, loc, 9)
            .unwrap();
        assert_eq!(t.over.as_ref().unwrap().tiles.len(), 4);
        assert_eq!(t.over.as_ref().unwrap().start, 7);
        // One tile larger than a partition's SBUF is what the compiler rejects.
        let huge = Shape::new(&[128, spec.sbuf_bytes_per_partition / 4 + 1]).unwrap();
        let e = t
            .alloc(5, MemKind::Sbuf, huge, DType::F32, loc, 9)
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Capacity);
        assert!(e.message().contains("more than a partition holds"), "{e}");
    }
}

/// The ids of the tiles allocated in device-loop bodies (`nl::fori_loop`, `nl::while_loop`) of
/// one instance: one body allocation is one buffer in every iteration, so it gets the id it
/// got in the loop's earlier iterations. Its key is the loop nest, its line and how many tiles
/// that line allocated before it in the iteration.
#[derive(Default)]
pub(crate) struct LoopTiles {
    /// The active device loops, outermost first: each one's line and its allocations per line
    /// in the current iteration.
    stack: Vec<(SourceLoc, HashMap<SourceLoc, u32>)>,
    /// The tile id of each body allocation (loop nest, line, occurrence), kept while the
    /// outermost device loop runs.
    ids: HashMap<(Vec<SourceLoc>, SourceLoc, u32), u64>,
}

impl LoopTiles {
    /// A device loop at `loc` begins (inside the active ones).
    pub(crate) fn enter(&mut self, loc: SourceLoc) {
        self.stack.push((loc, HashMap::new()));
    }

    /// The innermost device loop begins an iteration.
    pub(crate) fn next_iteration(&mut self) {
        if let Some((_, seen)) = self.stack.last_mut() {
            seen.clear();
        }
    }

    /// The innermost device loop ends (after the outermost, the ids are forgotten).
    pub(crate) fn exit(&mut self) {
        self.stack.pop();
        if self.stack.is_empty() {
            self.ids.clear();
        }
    }

    /// How many device loops are active.
    pub(crate) fn depth(&self) -> usize {
        self.stack.len()
    }

    /// Leaves the device loops entered after depth `depth` (a branch whose tracing ended
    /// inside them); the ids of their allocations stay, so an allocation keeps its buffer
    /// whichever branch a later iteration takes.
    pub(crate) fn unwind_to(&mut self, depth: usize) {
        while self.stack.len() > depth {
            self.exit();
        }
    }

    /// The id of a tile allocated at `loc`: inside a device loop, the same id for the same
    /// allocation in every iteration (`fresh` gives a new one the first time); `None`
    /// outside device loops.
    #[inline]
    pub(crate) fn tile_id(&mut self, loc: SourceLoc, fresh: impl FnOnce() -> u64) -> Option<u64> {
        if self.stack.is_empty() {
            return None; // outside device loops (the common case: no lookup)
        }
        self.loop_tile_id(loc, fresh)
    }

    /// [`LoopTiles::tile_id`] inside a device loop.
    fn loop_tile_id(&mut self, loc: SourceLoc, fresh: impl FnOnce() -> u64) -> Option<u64> {
        let (_, seen) = self.stack.last_mut()?;
        let n = seen.entry(loc).or_insert(0);
        let occurrence = *n;
        *n += 1;
        let nest: Vec<SourceLoc> = self.stack.iter().map(|f| f.0).collect();
        Some(
            *self
                .ids
                .entry((nest, loc, occurrence))
                .or_insert_with(fresh),
        )
    }
}
