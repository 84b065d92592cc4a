//! Finding the dependencies of a core's records (the speed machinery behind the rules of
//! [`order`](super::order)): which earlier records each record reads after, writes after or is
//! kept in order with, found one record at a time from the regions the records access.

use super::fast_hash;
use super::order::{self, Edge, Kind};
#[cfg(test)]
use crate::record::Instr;
use crate::record::{BufId, Engine, Opcode, Region};
use crate::slots::SlotVec;

/// Most accesses remembered per buffer and kind (reads / writes). Older ones are forgotten
/// (they are far back in program order and have long completed in any realistic schedule).
const ACCESS_CAP: usize = 64;

/// No node (end of an access list).
pub(super) const NIL: u32 = u32::MAX;

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
            if w.covers(&self.nodes[at].reg) {
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
        pass.add(r.engine, r.opcode, &r.reads, &r.writes);
    }
    *out = pass.edges;
}

/// Regions per record and kind whose buffer slots [`DepPass::add`] remembers between its
/// checks and its updates (more are looked up again).
const KEEP: usize = 4;

/// The dependency pass over one core's records, fed one record at a time in program order
/// (it needs only earlier records, so it can run while the kernel still records: see
/// [`RecordFeed`](super::feed::RecordFeed)). Besides the dependencies it keeps what placement
/// walks them by: each record's number of successors and of predecessors, and, once
/// [`DepPass::index_successors`] has run, every record's successors side by side.
pub(crate) struct DepPass {
    table: AccessTable,
    /// Engine of every record fed so far.
    engines: Vec<Engine>,
    /// Global index of the first record.
    pub(super) base: u32,
    /// The dependencies found so far, as (pred, edge) pairs.
    pub(super) edges: Vec<(u32, Edge)>,
    /// Per record fed (index from `base`): its dependencies as a predecessor.
    nsucc: Vec<u32>,
    /// The successors of record `base + r` are `by_pred[first[r]..first[r + 1]]`, newest
    /// first (made by [`DepPass::index_successors`] from `edges`). Placement follows each
    /// placed record's successors: side by side they are read in one sweep, where a list
    /// through `edges` jumped to wherever each successor's dependencies were found (a cache
    /// miss per successor when a tile's readers come long after it, as in the tutorial's
    /// hoisted loads).
    first: Vec<u32>,
    by_pred: Vec<Edge>,
    /// Per record fed (index from `base`): its dependencies as a successor.
    pub(super) preds: Vec<u32>,
    /// The device-loop iteration boundaries fed so far.
    bounds: Boundaries,
    /// The record fed last, when it generated a DMA's descriptors (software or hardware
    /// DGE): the DMA fed right after it is its transfer.
    descriptors: Option<u32>,
}

/// The iteration boundaries of device loops (`nl::fori_loop`, `nl::while_loop`) a pass has
/// seen: each is a scheduling barrier ("`nl.fori_loop` inserts scheduling barriers at
/// iteration boundaries", calibration.md §6d). A boundary is the run of loop-branch records
/// that closes an iteration (one per engine the iteration used): each of them waits for the
/// end of every record fed since the previous boundary (the iteration, and the code before
/// the loop for the first one), and every record fed after the boundary waits for the end of
/// each of them. The branches' own cost is the barrier's (`timing::cost`).
#[derive(Default)]
struct Boundaries {
    /// First record (global index) of the open iteration: the first one after the last
    /// boundary, or the pass's first record.
    since: u32,
    /// First branch of the boundary being fed, while `closing`.
    group: u32,
    /// The branches of the last boundary (or of the one being fed).
    branches: Vec<u32>,
    /// The branches of the boundary before it (while `closing`).
    before: Vec<u32>,
    /// True while the records fed last are a boundary's branches.
    closing: bool,
}

impl Boundaries {
    /// Links record `me` (a loop branch when `boundary`) to the boundary rules (see the
    /// type's doc).
    fn link(&mut self, me: u32, boundary: bool, out: &mut Links<'_>) {
        let after = Edge {
            succ: me,
            kind: Kind::After,
            late: false,
        };
        if boundary {
            if !self.closing {
                self.closing = true;
                self.group = me;
                self.before = std::mem::take(&mut self.branches);
            }
            for j in self.since..self.group {
                out.link(j, after);
            }
            if self.since == self.group {
                // An iteration with no records of its own: after the boundary before it.
                for &j in &self.before {
                    out.link(j, after);
                }
            }
            self.branches.push(me);
        } else {
            if self.closing {
                self.closing = false;
                self.since = me;
            }
            for &j in &self.branches {
                out.link(j, after);
            }
        }
    }
}

/// Where [`DepPass::add`] appends the dependencies it finds: the pass's `edges` and `nsucc`
/// (see there), for records from global index `base` on.
struct Links<'a> {
    edges: &'a mut Vec<(u32, Edge)>,
    nsucc: &'a mut [u32],
    base: u32,
}

impl Links<'_> {
    /// Appends dependency `e` on record `pred` (global index) to the edges and counts it
    /// among `pred`'s successors.
    #[inline]
    fn link(&mut self, pred: u32, e: Edge) {
        self.nsucc[(pred - self.base) as usize] += 1;
        self.edges.push((pred, e));
    }
}

impl DepPass {
    /// A pass whose first record has global index `base`.
    pub(crate) fn new(base: u32) -> DepPass {
        DepPass {
            table: AccessTable::default(),
            engines: Vec::new(),
            base,
            edges: Vec::new(),
            nsucc: Vec::new(),
            first: Vec::new(),
            by_pred: Vec::new(),
            preds: Vec::new(),
            bounds: Boundaries {
                since: base,
                ..Boundaries::default()
            },
            descriptors: None,
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
        self.nsucc.clear();
        self.first.clear();
        self.by_pred.clear();
        self.preds.clear();
        self.bounds = Boundaries {
            since: base,
            ..Boundaries::default()
        };
        self.descriptors = None;
        self.base = base;
    }

    /// Bytes held by its record-sized vectors and buffer tables.
    pub(super) fn capacity_bytes(&self) -> usize {
        use std::mem::size_of;
        self.engines.capacity()
            + self.edges.capacity() * size_of::<(u32, Edge)>()
            + self.by_pred.capacity() * size_of::<Edge>()
            + (self.nsucc.capacity() + self.first.capacity() + self.preds.capacity()) * 4
            + self.table.slots.capacity() * (size_of::<(BufId, u32)>() + 1)
            + self.table.tile_slots.capacity() * size_of::<u32>()
            + self.table.bufs.capacity() * size_of::<Accesses>()
    }

    /// Lays every record's successors side by side (see `first`), newest first: once, after
    /// the last record was fed and before placement follows them.
    pub(crate) fn index_successors(&mut self) {
        // A counting sort by predecessor: `first[r]` starts as the end of `r`'s slots and
        // moves down to their start as they fill (`first[n]` stays the total).
        self.first.clear();
        self.first.reserve(self.nsucc.len() + 1);
        let mut at = 0u32;
        for &k in &self.nsucc {
            at += k;
            self.first.push(at);
        }
        self.first.push(at);
        const FILLER: Edge = Edge {
            succ: 0,
            kind: Kind::Order,
            late: false,
        };
        self.by_pred.clear();
        self.by_pred.resize(self.edges.len(), FILLER);
        // Forward over the edges, each record's slots filling from their end: the newest
        // dependency comes first.
        for &(pred, e) in &self.edges {
            let slot = &mut self.first[(pred - self.base) as usize];
            *slot -= 1;
            self.by_pred[*slot as usize] = e;
        }
    }

    /// The successors of record `i` (global index), newest first ([`DepPass::index_successors`]
    /// must have run since the last record was fed).
    #[inline]
    pub(super) fn successors(&self, i: usize) -> &[Edge] {
        let r = i - self.base as usize;
        &self.by_pred[self.first[r] as usize..self.first[r + 1] as usize]
    }

    /// Feeds the next record: it runs on `engine` with `opcode`, reads `reads` and writes
    /// `writes`. A loop branch closes a device loop's iteration (see [`Boundaries`]); a DMA
    /// fed right after the generation of its descriptors (software or hardware DGE) starts
    /// after it, as a read of what it wrote (the transfer moves the descriptors it made,
    /// whatever address the allocation gives the transfer's destination).
    pub(crate) fn add(
        &mut self,
        engine: Engine,
        opcode: Opcode,
        reads: &[Region],
        writes: &[Region],
    ) {
        let boundary = opcode == Opcode::LoopBranch;
        let me = self.base + self.engines.len() as u32;
        self.engines.push(engine);
        self.nsucc.push(0);
        let found = self.edges.len();
        let table = &mut self.table;
        let mut out = Links {
            edges: &mut self.edges,
            nsucc: &mut self.nsucc,
            base: self.base,
        };
        if boundary || !self.bounds.branches.is_empty() {
            self.bounds.link(me, boundary, &mut out);
        }
        if let Some(d) = self.descriptors.take() {
            if engine == Engine::Dma {
                let e = Edge {
                    succ: me,
                    kind: Kind::Raw,
                    late: false,
                };
                out.link(d, e);
            }
        }
        if opcode == Opcode::DmaDescriptors {
            self.descriptors = Some(me);
        }
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
                    let e = Edge {
                        succ: me,
                        kind: Kind::Raw,
                        late,
                    };
                    out.link(j, e);
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
                    let earlier = self.engines[(j - self.base) as usize];
                    let kind = order::write_after_write(hbm, engine, earlier);
                    let e = Edge {
                        succ: me,
                        kind,
                        late: tensor,
                    };
                    out.link(j, e);
                }
            }
            for (rd, j) in table.iter(acc.reads) {
                if j != me && rd.overlaps(reg) {
                    let e = Edge {
                        succ: me,
                        kind: Kind::After,
                        late: tensor,
                    };
                    out.link(j, e);
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
        self.preds.push((self.edges.len() - found) as u32);
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
        for i in 0..recs.len() {
            // SAFETY: `recs` is neither moved nor written until `finish`.
            unsafe { feed.push(recs.as_ptr(), i + 1) };
        }
        let mut prep = feed.finish(&recs).expect("the feed's thread ran the pass");
        let pass = &mut prep.cores[0].deps;
        pass.index_successors();
        let pass = &*pass;
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
        // Each record's successors hold exactly its dependencies as a predecessor,
        // newest first, and its count of predecessors those as a successor.
        for r in 0..recs.len() {
            let walked = flat(
                &pass
                    .successors(r)
                    .iter()
                    .map(|e| (r as u32, *e))
                    .collect::<Vec<_>>(),
            );
            let mut want: Vec<(u32, Edge)> = direct
                .iter()
                .filter(|(p, _)| *p == r as u32)
                .copied()
                .collect();
            want.reverse();
            assert_eq!(walked, flat(&want), "successors of record {r}");
            let preds = direct.iter().filter(|(_, e)| e.succ == r as u32).count();
            assert_eq!(pass.preds[r] as usize, preds, "predecessors of record {r}");
        }
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
