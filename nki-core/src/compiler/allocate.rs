//! Addresses for on-chip tiles, as the compiler's allocator gives them
//! ([`CompileConfig`]: NKI 0.8 `Allocation`, `AllocationMode`, `address_rotation`), and the
//! waits an address brings: a write into an address waits for the last accesses of the tile
//! that held it before (an anti-dependency). Dependencies come from addresses, not from which
//! Rust variable or `nl.ndarray` call made a tile.
//!
//! One pass over an instance's records, in three steps, each linear in its records:
//!
//! 1. **Values** (address rotation on, for tiles not placed by hand). Walking back over the
//!    records, a write to a tile starts a new value when nothing read later, before being
//!    written again, is left outside it (the bytes read later are kept as one bounding box per
//!    tile; a write that covers the box, by an instruction that does not also read the tile,
//!    ends the value before it). Each value after a tile's first is renamed (a buffer of its
//!    own), so a kernel that loads every iteration into one tile allocated outside the loop
//!    is the program that allocates inside the loop. With rotation off, and for a tile placed
//!    by hand (`address=`), a tile keeps one buffer for all its values, as written.
//! 2. **Live ranges**: each buffer from its first access to its last.
//! 3. **Addresses** (`Allocation::Linear`): in program order, a buffer gets an address at its
//!    first access and gives it back after its last (linear scan), SBUF in bytes of each
//!    partition, PSUM in whole 2 KiB banks: next fit from where the last buffer went (RING),
//!    best fit (FAST) or the lowest address that fits (MAX_REUSE). A tile placed by hand keeps
//!    its address (in every flow). The writes that fill a buffer (those before its first read)
//!    then wait for the last access, on each engine, of every earlier buffer that held any of
//!    its bytes. The colouring flow (`Allocation::Coloring`, the default) keeps the
//!    allocator's buffers apart: no buffer waits for another's bytes (evidence in
//!    docs/timing-model.md: the matmul tutorial's fully optimized stage overlaps its loads
//!    and matmuls on hardware where a linear scan's reuse would serialise them).
//!
//! Limits: an address is a byte range of every partition (two buffers on disjoint partitions
//! but the same bytes are taken to share them); a buffer that finds no free room (an
//! instance whose tiles over-commit SBUF, resolved by `compiler::spill`) gets no address and
//! waits only for its own tile's accesses; tiles placed by hand are taken to share no byte
//! with the allocator's; the compiler stage's per-iteration buffers (`multi_buffer`) keep one
//! value each.

use crate::compiler::config::{Allocation, AllocationMode, CompileConfig};
use crate::memory::AllocatedTile;
use crate::record::{BufId, Engine, Instr, MemKind, Region};
use crate::target::TargetSpec;
use crate::timing::fast_hash::Map;
use std::collections::{BTreeMap, BinaryHeap};

/// Bit marking a buffer the allocator renamed (a later value of a tile): the compiler stage's
/// renamed ids use bit 62, spill scratch bit 63 of HBM ids.
const VALUE: u64 = 1 << 61;
/// Tile ids keep their low 40 bits in a renamed id; the value's number goes above them.
const ID_BITS: u32 = 40;
/// Most values of one tile told apart (later ones stay in the last).
const MAX_VALUES: u64 = (1 << (61 - ID_BITS)) - 1;
/// The compiler stage's bit for its per-iteration buffers (see `compiler::stage`).
const STAGE_RENAMED: u64 = 1 << 62;
/// Most filling writes of a buffer given anti-dependencies.
const FILLS: usize = 8;

/// What the allocation did to an instance: the anti-dependencies its addresses bring.
#[derive(Debug, Default)]
pub(crate) struct Allocated {
    /// True when some tile's later values were renamed (the records changed).
    pub(crate) renamed: bool,
    /// `(earlier, later)` record indices: the later one (a write) starts after the earlier
    /// one ends.
    pub(crate) waits: Vec<(u32, u32)>,
    /// Buffers that found no free room (left without an address).
    pub(crate) unplaced: usize,
}

/// One buffer: a tile, or one value of it, with its live range.
struct Buffer {
    /// Index of the tile in the allocated tiles.
    tile: u32,
    /// First and last record accessing it.
    first: u32,
    last: u32,
    /// The last record accessing it on each engine (`u32::MAX`: none).
    last_on: [u32; Engine::COUNT],
    /// The records writing it before its first read (at most [`FILLS`]).
    fills: Vec<u32>,
    /// True once it was read.
    read: bool,
}

impl Buffer {
    fn new(tile: u32, at: u32) -> Buffer {
        Buffer {
            tile,
            first: at,
            last: at,
            last_on: [u32::MAX; Engine::COUNT],
            fills: Vec::new(),
            read: false,
        }
    }

    fn access(&mut self, at: u32, engine: Engine, write: bool) {
        self.last = at;
        self.last_on[engine.index()] = at;
        if write && !self.read && self.fills.len() < FILLS && self.fills.last() != Some(&at) {
            self.fills.push(at);
        }
        self.read |= !write;
    }
}

/// Gives the on-chip tiles of one instance's `records` addresses by `config` on `spec`
/// (`tiles`: every tile the instance allocated, in allocation order) and returns the waits
/// they bring. With rotation, later values of a tile are renamed in `records`.
pub(crate) fn allocate(
    records: &mut [Instr],
    tiles: &[AllocatedTile],
    config: CompileConfig,
    spec: &TargetSpec,
) -> Allocated {
    let mut out = Allocated::default();
    if config.allocates_as_written() || tiles.is_empty() || records.is_empty() {
        return out;
    }
    let lookup = TileLookup::new(tiles);
    let (starts, repeated) = if config.address_rotation.rotates() {
        value_starts(records, tiles, &lookup)
    } else {
        (Vec::new(), false)
    };
    let policy = placement(config);
    // Addresses to give: the linear scan's, or tiles placed by hand (their waits).
    let track = policy.is_some() || tiles.iter().any(|t| t.placed.is_some());
    if !track && !repeated {
        return out;
    }
    let buffers = live_ranges(records, &lookup, &starts, &mut out.renamed, track);
    if !track {
        return out;
    }
    let sbuf = Space::new(spec.sbuf_bytes_per_partition as u64, 1);
    let psum = Space::new(spec.psum_banks as u64, spec.psum_bank_bytes as u64);
    let mut spaces = [sbuf, psum];
    // Placed-by-hand tiles: only their occupancy history (one per memory).
    let mut placed_history = [History::default(), History::default()];
    // Buffers holding an address, by last record (earliest first).
    let mut live: BinaryHeap<std::cmp::Reverse<(u32, u32)>> = BinaryHeap::new();
    let mut held: Vec<Option<(u64, u64)>> = vec![None; buffers.len()];
    for (b, buf) in buffers.iter().enumerate() {
        while let Some(&std::cmp::Reverse((end, o))) = live.peek() {
            if end >= buf.first {
                break;
            }
            live.pop();
            let t = &tiles[buffers[o as usize].tile as usize];
            if let (Some((a, z)), Some(s)) = (held[o as usize], space_of(t.mem)) {
                spaces[s].free.release(a, z);
            }
        }
        let t = &tiles[buf.tile as usize];
        let Some(s) = space_of(t.mem) else { continue };
        let units = spaces[s].units(t.bytes as u64);
        let (range, history) = match t.placed {
            Some(byte) => {
                let a = byte as u64 / spaces[s].unit;
                (Some((a, a + units)), &mut placed_history[s])
            }
            None => {
                // The colouring flow keeps the allocator's buffers apart.
                let Some(policy) = policy else { continue };
                let at = spaces[s].take(units, policy);
                if at.is_none() {
                    out.unplaced += 1;
                }
                let sp = &mut spaces[s];
                (at.map(|a| (a, a + units)), &mut sp.history)
            }
        };
        let Some((a, z)) = range else { continue };
        if t.placed.is_none() {
            held[b] = Some((a, z));
            live.push(std::cmp::Reverse((buf.last, b as u32)));
        }
        for before in history.occupy(a, z, b as u32) {
            let earlier = &buffers[before as usize];
            for &fill in &buf.fills {
                for &rec in earlier.last_on.iter().filter(|&&r| r != u32::MAX) {
                    if rec < fill {
                        out.waits.push((rec, fill));
                    }
                }
            }
        }
    }
    out.waits.sort_unstable();
    out.waits.dedup();
    out
}

/// The index of each memory's [`Space`] (`None`: HBM).
fn space_of(mem: MemKind) -> Option<usize> {
    match mem {
        MemKind::Sbuf => Some(0),
        MemKind::Psum => Some(1),
        MemKind::Hbm => None,
    }
}

/// Finds a tile's index among the instance's allocated tiles by its buffer id.
struct TileLookup {
    /// Id of the first tile; tile `first + k` is at `dense[k]` (`u32::MAX`: none).
    first: u64,
    dense: Vec<u32>,
    other: Map<u64, u32>,
    tiles: usize,
}

impl TileLookup {
    /// The number of tiles.
    fn len(&self) -> usize {
        self.tiles
    }

    fn new(tiles: &[AllocatedTile]) -> TileLookup {
        let first = tiles.iter().map(|t| t.id).min().unwrap_or(0);
        let (mut dense, mut other) = (Vec::new(), Map::default());
        // Ids are nearly consecutive (one process-wide counter): a dense table, bounded.
        let limit = 4 * tiles.len() + 4096;
        for (k, t) in tiles.iter().enumerate() {
            let off = (t.id - first) as usize;
            if off < limit {
                if dense.len() <= off {
                    dense.resize(off + 1, u32::MAX);
                }
                dense[off] = k as u32;
            } else {
                other.insert(t.id, k as u32);
            }
        }
        TileLookup {
            first,
            dense,
            other,
            tiles: tiles.len(),
        }
    }

    /// The tile of buffer id `id` (a tile's own id, or one the compiler stage renamed).
    #[inline]
    fn get(&self, id: u64) -> Option<u32> {
        let id = if id & STAGE_RENAMED != 0 {
            id & ((1 << ID_BITS) - 1)
        } else {
            id
        };
        let k = id.checked_sub(self.first).map(|k| k as usize);
        match k.and_then(|k| self.dense.get(k)) {
            Some(&t) if t != u32::MAX => Some(t),
            _ => self.other.get(&id).copied(),
        }
    }
}

/// The smallest region holding both.
fn union(a: Region, b: &Region) -> Region {
    Region {
        buf: a.buf,
        p0: a.p0.min(b.p0),
        p1: a.p1.max(b.p1),
        lo: a.lo.min(b.lo),
        hi: a.hi.max(b.hi),
    }
}

/// The `(record, write index)` pairs, in program order, whose write starts a new value of a
/// rotating tile (see the module doc, step 1), and whether some tile has two values or more
/// (else nothing is renamed).
fn value_starts(
    records: &[Instr],
    tiles: &[AllocatedTile],
    lookup: &TileLookup,
) -> (Vec<(u32, u8)>, bool) {
    // Per tile: the bounding box of what is read later before being written again, and how
    // many values it has (up to 2).
    let mut later: Vec<Option<Region>> = vec![None; tiles.len()];
    let mut values: Vec<u8> = vec![0; tiles.len()];
    let mut starts = Vec::new();
    let rotating = |id: u64| {
        if id & (STAGE_RENAMED | VALUE) != 0 {
            return None;
        }
        lookup
            .get(id)
            .filter(|&t| tiles[t as usize].placed.is_none() && !tiles[t as usize].keeps_buffer)
    };
    for (i, r) in records.iter().enumerate().rev() {
        for (wi, w) in r.writes.iter().enumerate() {
            let BufId::Tile(id) = w.buf else { continue };
            let Some(t) = rotating(id) else { continue };
            let reads_it = r.reads.iter().any(|g| g.buf == w.buf);
            let box_ = &mut later[t as usize];
            let ends = match box_ {
                Some(b) if w.covers(b) => {
                    *box_ = None;
                    true
                }
                Some(_) => false,
                // Nothing read later: a value of its own (a dead store starts one too).
                None => true,
            };
            if ends && !reads_it && wi < u8::MAX as usize {
                starts.push((i as u32, wi as u8));
                let v = &mut values[t as usize];
                *v = (*v + 1).min(2);
            }
        }
        for g in r.reads.iter() {
            let BufId::Tile(id) = g.buf else { continue };
            let Some(t) = rotating(id) else { continue };
            let box_ = &mut later[t as usize];
            *box_ = Some(match *box_ {
                Some(b) => union(b, g),
                None => *g,
            });
        }
    }
    starts.reverse();
    let repeated = values.iter().any(|&v| v >= 2);
    (starts, repeated)
}

/// The buffer id of value `k` (from 1) of tile `id`.
fn value_id(id: u64, k: u64) -> BufId {
    BufId::Tile(VALUE | (k << ID_BITS) | (id & ((1 << ID_BITS) - 1)))
}

/// Walks the records forward: renames each value of a tile after its first (`starts`), and,
/// when `track`, returns the buffers in order of their first access with their live ranges.
fn live_ranges(
    records: &mut [Instr],
    lookup: &TileLookup,
    starts: &[(u32, u8)],
    renamed: &mut bool,
    track: bool,
) -> Vec<Buffer> {
    /// No buffer yet.
    const NONE: u32 = u32::MAX;
    // Per tile (the compiler stage's per-iteration buffers by id): its current buffer index
    // and how many values it had before it.
    let mut current: Vec<(u32, u64)> = vec![(NONE, 0); lookup.len()];
    let mut stage: Map<u64, (u32, u64)> = Map::default();
    let mut buffers: Vec<Buffer> = Vec::new();
    let mut next_start = 0;
    for (i, r) in records.iter_mut().enumerate() {
        let at = i as u32;
        let engine = r.engine;
        let writes = r.writes.iter_mut().map(|g| (g, true));
        let reads = r.reads.iter_mut().map(|g| (g, false));
        // Writes first: a write that starts a value opens its buffer before any access of
        // the record (such a record does not read the tile: see `value_starts`).
        for (wi, (g, write)) in writes.chain(reads).enumerate() {
            let BufId::Tile(id) = g.buf else { continue };
            let Some(tile) = lookup.get(id) else { continue };
            let starts_value = write
                && starts
                    .get(next_start)
                    .is_some_and(|&(si, sw)| si == at && sw as usize == wi);
            if starts_value {
                next_start += 1;
            }
            let e = if id & STAGE_RENAMED != 0 {
                stage.entry(id).or_insert((NONE, 0))
            } else {
                &mut current[tile as usize]
            };
            if e.0 == NONE || (starts_value && e.1 < MAX_VALUES) {
                if e.0 != NONE {
                    e.1 += 1;
                }
                e.0 = buffers.len() as u32;
                if track {
                    buffers.push(Buffer::new(tile, at));
                } else {
                    e.0 = 0;
                }
            }
            if e.1 > 0 {
                g.buf = value_id(id, e.1);
                *renamed = true;
            }
            if track {
                buffers[e.0 as usize].access(at, engine, write);
            }
        }
    }
    buffers
}

/// The linear scan's placement of `config` (`None`: the colouring flow, which keeps the
/// allocator's buffers apart, and the program as written): RING next fit from where the last
/// buffer went, FAST the smallest block that fits (the lowest on ties), MAX_REUSE the lowest.
fn placement(config: CompileConfig) -> Option<AllocationMode> {
    match config.allocation {
        Allocation::Coloring | Allocation::AsWritten => None,
        Allocation::Linear(mode) => Some(mode),
    }
}

/// One memory's address space, in units (SBUF: bytes of a partition; PSUM: banks).
struct Space {
    unit: u64,
    free: FreeBlocks,
    history: History,
    /// Where the last buffer placed ended (next fit starts there).
    cursor: u64,
}

impl Space {
    fn new(units: u64, unit: u64) -> Space {
        let mut free = FreeBlocks::default();
        if units > 0 {
            free.blocks.insert(0, units);
        }
        Space {
            unit,
            free,
            history: History::default(),
            cursor: 0,
        }
    }

    /// Units a tile of `bytes` per partition takes (at least one).
    fn units(&self, bytes: u64) -> u64 {
        bytes.div_ceil(self.unit).max(1)
    }

    /// Takes `units` by `policy`; `None` when no free block holds them.
    fn take(&mut self, units: u64, policy: AllocationMode) -> Option<u64> {
        let at = match policy {
            AllocationMode::Ring => self.free.next_fit(units, self.cursor),
            AllocationMode::Fast => self.free.best_fit(units),
            AllocationMode::MaxReuse => self.free.first_fit(units),
        }?;
        self.free.reserve(at, at + units);
        self.cursor = at + units;
        Some(at)
    }
}

/// The free blocks of a space, `start -> end`, disjoint and coalesced.
#[derive(Default)]
struct FreeBlocks {
    blocks: BTreeMap<u64, u64>,
}

impl FreeBlocks {
    fn next_fit(&self, units: u64, cursor: u64) -> Option<u64> {
        // The block holding the cursor, from the cursor on.
        if let Some((_, &e)) = self.blocks.range(..=cursor).next_back() {
            if e >= cursor + units {
                return Some(cursor);
            }
        }
        let after = self.blocks.range(cursor + 1..);
        let before = self.blocks.range(..=cursor);
        after
            .chain(before)
            .find(|(&s, &e)| e - s >= units)
            .map(|(&s, _)| s)
    }

    fn best_fit(&self, units: u64) -> Option<u64> {
        self.blocks
            .iter()
            .filter(|(&s, &e)| e - s >= units)
            .min_by_key(|(&s, &e)| (e - s, s))
            .map(|(&s, _)| s)
    }

    fn first_fit(&self, units: u64) -> Option<u64> {
        self.blocks
            .iter()
            .find(|(&s, &e)| e - s >= units)
            .map(|(&s, _)| s)
    }

    /// Marks `a..z` (inside one free block) used.
    fn reserve(&mut self, a: u64, z: u64) {
        let Some((&s, &e)) = self.blocks.range(..=a).next_back() else {
            return;
        };
        debug_assert!(e >= z, "reserved inside one free block");
        self.blocks.remove(&s);
        if s < a {
            self.blocks.insert(s, a);
        }
        if z < e {
            self.blocks.insert(z, e);
        }
    }

    /// Gives `a..z` back, merged with its free neighbours.
    fn release(&mut self, a: u64, z: u64) {
        let (mut a, mut z) = (a, z);
        if let Some((&s, &e)) = self.blocks.range(..a).next_back() {
            if e == a {
                self.blocks.remove(&s);
                a = s;
            }
        }
        if let Some(&e) = self.blocks.get(&z) {
            self.blocks.remove(&z);
            z = e;
        }
        self.blocks.insert(a, z);
    }
}

/// Who held each address last: segments `start -> (end, buffer)`, disjoint.
#[derive(Default)]
struct History {
    segments: BTreeMap<u64, (u64, u32)>,
}

impl History {
    /// Gives `a..z` to buffer `b`; returns the buffers that held any of it before (each once).
    fn occupy(&mut self, a: u64, z: u64, b: u32) -> Vec<u32> {
        let mut before = Vec::new();
        let mut cut = Vec::new();
        for (&s, &(e, o)) in self.segments.range(..z).rev() {
            if e <= a {
                break;
            }
            if !before.contains(&o) {
                before.push(o);
            }
            cut.push((s, e, o));
        }
        for (s, e, o) in cut {
            self.segments.remove(&s);
            if s < a {
                self.segments.insert(s, (a, o));
            }
            if z < e {
                self.segments.insert(z, (e, o));
            }
        }
        self.segments.insert(a, (z, b));
        before
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_blocks_place_by_policy_and_merge_on_release() {
        let mut f = FreeBlocks::default();
        f.blocks.insert(0, 100);
        f.reserve(0, 10);
        f.reserve(10, 40);
        f.reserve(40, 50);
        // Free: 50..100. Give back 10..40 (30 units) and 0..10 (merges with it).
        f.release(10, 40);
        assert_eq!(f.best_fit(20), Some(10));
        assert_eq!(f.first_fit(20), Some(10));
        assert_eq!(f.next_fit(20, 50), Some(50));
        assert_eq!(f.next_fit(60, 50), None);
        f.release(0, 10);
        assert_eq!(f.blocks.get(&0), Some(&40));
        f.release(40, 50);
        assert_eq!(f.blocks.len(), 1);
        assert_eq!(f.blocks.get(&0), Some(&100));
    }

    #[test]
    fn history_names_each_earlier_holder_once() {
        let mut h = History::default();
        assert!(h.occupy(0, 10, 1).is_empty());
        assert!(h.occupy(10, 20, 2).is_empty());
        let mut before = h.occupy(5, 15, 3);
        before.sort();
        assert_eq!(before, vec![1, 2]);
        assert_eq!(h.occupy(0, 5, 4), vec![1]);
        let mut before = h.occupy(14, 20, 5);
        before.sort();
        assert_eq!(before, vec![2, 3]);
    }
}
