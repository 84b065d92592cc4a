//! Loop fusion, a transformation of the `compiler` stage (`CompilerStage::fuse`): two
//! sibling `affine_range` loops with the same trip count, where the second consumes on chip
//! what the first produces and every dependence between them stays inside one iteration,
//! become one loop whose iteration `j` runs iteration `j` of the first, then iteration `j` of
//! the second. The records between the two loops move before the first when they touch
//! nothing it touches. Applied outermost first, then again inside the fused bodies. Two
//! activations of one loop statement are not fused (see [`find_pair`]): without that rule the
//! tutorial's fully blocked matmul had its `mb` loops of successive `sequential_range`
//! iterations merged (the K loop moved inside), which kept every rhs tile live and took its
//! HBM reads from 1.5 GB to 9.4 GB.
//!
//! Evidence: the NKIBench swiglu program (calibration.md section 5) computes its gate
//! projection for all of `[N, M]` (48 MiB, 384 KiB per partition, twice SBUF) in a first loop
//! nest and consumes it in a second nest with the same trip counts (3 x 8 x 8), iteration
//! `(j, m, t)` of the second reading only the gate tile iteration `(j, m, t)` of the first
//! wrote. Run as written, the gate cannot stay in SBUF; the profiler's counters show none of
//! it spilled (spill save = the program's `_spill_163` product + one transposed input, both
//! accounted for without the gate), so the compiler consumed each gate tile in the
//! iteration that made it. `affine_range` declares the iterations of each loop independent,
//! which is what makes the check below (no dependence across iterations of the two loops)
//! enough.

use crate::error::SourceLoc;
use crate::profile::compiler::{CompilerKind, CompilerLine, CompilerStats};
use crate::record::{AffinePos, BufId, Instr, Region};
use crate::timing::fast_hash::Map;

/// One `affine_range` activation in the records: its depth, the records it spans (a loop
/// runs to its end before the next statement, so they are contiguous) and its iterations.
#[derive(Clone, Copy, PartialEq, Debug)]
pub(crate) struct Act {
    id: u32,
    depth: usize,
    start: usize,
    end: usize,
    iters: u32,
    distinct: u32,
}

impl Act {
    /// The activation, its depth in the records' positions, its first record and one past
    /// its last, its iterations (the highest seen plus one) and its runs of consecutive
    /// records of one iteration (equal to the iterations when each iteration's records are
    /// contiguous and in order).
    pub(crate) fn parts(&self) -> (u32, usize, usize, usize, u32, u32) {
        (
            self.id,
            self.depth,
            self.start,
            self.end,
            self.iters,
            self.distinct,
        )
    }
}

/// The activations of `records`, in order of their first record.
pub(crate) fn activations(records: &[Instr]) -> Vec<Act> {
    activations_in(records, 0..records.len(), 0..usize::MAX)
}

/// The activations at a depth in `depths` whose records lie in `records[range]`, in order of
/// their first record (ties: shallowest first). Exact when no activation at those depths has
/// records both inside and outside `range`.
fn activations_in(
    records: &[Instr],
    range: std::ops::Range<usize>,
    depths: std::ops::Range<usize>,
) -> Vec<Act> {
    let mut at: Map<u32, usize> = Map::default();
    let mut acts: Vec<Act> = Vec::new();
    let mut last_iter: Vec<u32> = Vec::new();
    // Per depth, the activation of the previous record there and its index in `acts` (a
    // record is most often in the activations of the one before it).
    let mut previous: Vec<Option<(u32, usize)>> = Vec::new();
    // The frames of the previous record, within `depths`.
    let mut before: &[(u32, u32)] = &[];
    for (i, r) in records.iter().enumerate().take(range.end).skip(range.start) {
        let frames = r.affine.frames();
        let frames = &frames[..frames.len().min(depths.end)];
        // Neighbours at different positions mostly differ in their innermost frame: that
        // is compared first.
        let same = !before.is_empty() && frames.last() == before.last() && frames == before;
        if same {
            // The previous record's position (most records share one with a neighbour):
            // the same activations and iterations, which now end here.
            let here = frames.len().saturating_sub(depths.start);
            for p in previous.iter().skip(depths.start).take(here) {
                if let Some((_, k)) = *p {
                    acts[k].end = i + 1;
                }
            }
            continue;
        }
        before = frames;
        if previous.len() < frames.len() {
            previous.resize(frames.len(), None);
        }
        for (d, &(a, it)) in frames.iter().enumerate().skip(depths.start) {
            let known = match previous[d] {
                Some((p, k)) if p == a => Some(k),
                _ => at.get(&a).copied(),
            };
            previous[d] = Some((a, known.unwrap_or(acts.len())));
            match known {
                Some(k) => {
                    acts[k].end = i + 1;
                    acts[k].iters = acts[k].iters.max(it + 1);
                    if last_iter[k] != it {
                        last_iter[k] = it;
                        acts[k].distinct += 1;
                    }
                }
                None => {
                    at.insert(a, acts.len());
                    acts.push(Act {
                        id: a,
                        depth: d,
                        start: i,
                        end: i + 1,
                        iters: it + 1,
                        distinct: 1,
                    });
                    last_iter.push(it);
                }
            }
        }
    }
    acts
}

/// The accesses of some records, grouped by buffer, writes before reads, in one vector (a
/// fusion check looks up a few hundred accesses; a map of vectors cost an allocation per
/// buffer, sorting the vector and a binary search per lookup cost a fifth of a fused
/// kernel's estimate): a map finds a buffer's group.
struct Accesses {
    /// Each access's iteration at the loop's depth and its region, by group.
    all: Vec<(u32, Region)>,
    /// Per buffer: its group's index in `bounds`.
    group: Map<BufId, u32>,
    /// Per group: where its writes start, where its reads start, where it ends, in `all`.
    bounds: Vec<[u32; 3]>,
}

impl Accesses {
    /// The accesses of `records[range]`, with their iterations at `depth`.
    fn of(records: &[Instr], range: std::ops::Range<usize>, depth: usize) -> Accesses {
        let records = &records[range];
        let mut group: Map<BufId, u32> = Map::default();
        // First the number of writes and reads of each buffer, and each access's group ...
        let mut counts: Vec<[u32; 2]> = Vec::new();
        let mut of_access: Vec<u32> = Vec::new();
        let mut count = |b: BufId, k: usize| {
            let next = counts.len() as u32;
            let g = *group.entry(b).or_insert(next);
            if g == next {
                counts.push([0, 0]);
            }
            counts[g as usize][k] += 1;
            of_access.push(g);
        };
        for r in records {
            r.writes.iter().for_each(|w| count(w.buf, 0));
            r.reads.iter().for_each(|g| count(g.buf, 1));
        }
        // ... then each access placed in its group's part (cursors start at the bounds).
        let mut at = 0u32;
        let bounds: Vec<[u32; 3]> = counts
            .iter()
            .map(|&[w, r]| {
                let b = [at, at + w, at + w + r];
                at += w + r;
                b
            })
            .collect();
        let mut cursor: Vec<[u32; 2]> = bounds.iter().map(|b| [b[0], b[1]]).collect();
        // Every slot is written below (the counts are exact).
        let filler = Region {
            buf: BufId::Hbm(0),
            p0: 0,
            p1: 0,
            lo: 0,
            hi: 0,
        };
        let mut all = vec![(0u32, filler); at as usize];
        let mut groups = of_access.iter();
        for r in records {
            let it = r.affine.frames().get(depth).map_or(u32::MAX, |f| f.1);
            let kinds = r
                .writes
                .iter()
                .map(|w| (w, 0))
                .chain(r.reads.iter().map(|g| (g, 1)));
            for ((g, k), &n) in kinds.zip(groups.by_ref()) {
                let c = &mut cursor[n as usize][k];
                all[*c as usize] = (it, *g);
                *c += 1;
            }
        }
        Accesses { all, group, bounds }
    }

    /// The accesses that conflict with an access of `g` (a write when `writes`): the writes
    /// to its buffer, and the reads too when it writes; as (iteration, region, written).
    fn against(&self, g: &Region, writes: bool) -> impl Iterator<Item = (u32, Region, bool)> + '_ {
        let [w, r, end] = self
            .group
            .get(&g.buf)
            .map_or([0; 3], |&k| self.bounds[k as usize]);
        let end = if writes { end } else { r };
        let g = *g;
        self.all[w as usize..end as usize]
            .iter()
            .enumerate()
            .filter(move |(_, x)| x.1.overlaps(&g))
            .map(move |(k, x)| (x.0, x.1, (w as usize + k) < r as usize))
    }
}

/// Whether loop `b` may be fused into the earlier loop `a` (siblings of one parent position,
/// same trip count), moving the records between them before `a`: every dependence between
/// the two lies in one iteration, at least one is `b` reading a tile `a` wrote, and nothing
/// between them conflicts with `a`.
fn fusable(records: &[Instr], a: &Act, b: &Act) -> bool {
    let of_a = Accesses::of(records, a.start..a.end, a.depth);
    let mut feeds = false;
    for r in &records[b.start..b.end] {
        let it = r.affine.frames()[b.depth].1;
        let regions = r.reads.iter().map(|g| (g, false));
        for (g, w) in regions.chain(r.writes.iter().map(|g| (g, true))) {
            for (ai, _, aw) in of_a.against(g, w) {
                if ai != it {
                    return false;
                }
                feeds |= aw && !w && matches!(g.buf, BufId::Tile(_));
            }
        }
    }
    feeds
        && records[a.end..b.start].iter().all(|r| {
            let regions = r.reads.iter().map(|g| (g, false));
            regions
                .chain(r.writes.iter().map(|g| (g, true)))
                .all(|(g, w)| of_a.against(g, w).next().is_none())
        })
}

/// For each record `i`, the first index of the run of records up to `i` whose positions all
/// share record `i`'s enclosing frames at `depth` (`frames()[..depth]`); `i` itself when it
/// has fewer frames. Records `j..i` all lie in record `i`'s parent position at `depth` exactly
/// when `runs[i] <= j`.
fn parent_runs(records: &[Instr], depth: usize) -> Vec<usize> {
    let mut runs = Vec::with_capacity(records.len());
    let mut prev: Option<&[(u32, u32)]> = None;
    for (i, r) in records.iter().enumerate() {
        let here = r.affine.frames().get(..depth);
        let start = match (prev, here) {
            (Some(p), Some(h)) if p == h => runs[i - 1],
            _ => i,
        };
        runs.push(start);
        prev = here;
    }
    runs
}

/// The first fusable pair of sibling loops among `level` (the activations at one depth, in
/// order; `runs` from [`parent_runs`] at that depth): `b` in order, each `a` an earlier
/// sibling, nearest first. Returns the
/// indices of `a` and `b` in `level`. Two activations of one loop statement (`loops[a]`,
/// where it began) are never paired: they are iterations of an enclosing loop the kernel
/// runs in order (`sequential_range`, a host loop), and merging them would reorder that loop
/// rather than fuse two loop nests.
///
/// `known` keeps the result of [`fusable`] by both loops' ids and bounds: the check reads
/// only the records in `a.start..b.end`, by their regions and their iterations at the two
/// loops' depth, in any order; a fusion changes those records (without changing the
/// bounds) only by reordering them or renaming a loop id, so the result stays valid.
fn find_pair(
    records: &[Instr],
    level: &[Act],
    runs: &[usize],
    loops: &[SourceLoc],
    known: &mut Map<PairKey, bool>,
) -> Option<(usize, usize)> {
    let line = |x: &Act| loops.get(x.id as usize).copied();
    let parent = |a: &Act| &records[a.start].affine.frames()[..a.depth];
    for (k, b) in level.iter().enumerate() {
        // The candidates: earlier siblings, nearest first, every record between them and
        // `b` inside the same parent position.
        for (j, a) in level[..k].iter().enumerate().rev() {
            if a.end < runs[b.start] || parent(a) != parent(b) {
                break;
            }
            let same_trips = a.iters == b.iters && a.distinct == b.distinct;
            let two_nests = line(a).is_some() && line(a) != line(b);
            if two_nests && same_trips && a.distinct == a.iters && {
                let key = (a.id, a.start, a.end, b.id, b.start, b.end);
                *known.entry(key).or_insert_with(|| fusable(records, a, b))
            } {
                return Some((j, k));
            }
        }
    }
    None
}

/// Most fusions applied to one instance (each is a pass over its records).
const MAX_FUSIONS: usize = 4096;

/// What [`fusable`]'s result depends on: both loops' ids and bounds.
type PairKey = (u32, usize, usize, u32, usize, usize);

/// Fuses the sibling `affine_range` loops of `records` that the module doc describes, outermost
/// first: the first fusable pair of the shallowest depth that has one, until none is left.
/// `acts`: the activations of `records` ([`activations`]) when known. `loops[a]` is where
/// activation `a` began. The indices in `marks` are moved to the
/// smallest new index of the records at or after them (so every record at or after a mark
/// stays at or after it). `changing` is called before the first change to the records.
/// Returns true when something was fused.
///
/// Depth by depth: a fusion at depth `d` reorders records that all share one position at
/// depth `d` and renames frames at depth `d` only, so it changes nothing a pair of shallower
/// loops is judged by (their activations, their records' enclosing frames, the records
/// between them); no shallower pair becomes fusable, and the parent runs at depth `d` stay
/// valid. Nor does it change a pair at depth `d` of another parent position (a pair lies in
/// one position's run of records), so each run's loops are fused on their own, in order.
pub(crate) fn fuse(
    records: &mut [Instr],
    acts: Option<&[Act]>,
    loops: &[SourceLoc],
    stats: &mut CompilerStats,
    marks: &mut [usize],
    changing: &mut dyn FnMut(),
) -> bool {
    let max_depth = match acts {
        Some(all) => all.iter().map(|a| a.depth + 1).max(),
        None => records.iter().map(|r| r.affine.frames().len()).max(),
    }
    .unwrap_or(0);
    let mut known: Map<PairKey, bool> = Map::default();
    let mut fusions = 0;
    for depth in 0..max_depth {
        // Until the first fusion the records are as `acts` found them.
        let level = match acts.filter(|_| fusions == 0) {
            Some(all) => all.iter().filter(|a| a.depth == depth).copied().collect(),
            None => activations_in(records, 0..records.len(), depth..depth + 1),
        };
        if level.len() < 2 {
            continue;
        }
        let runs = parent_runs(records, depth);
        // Pairs lie in one parent position: the activations of each position's run of
        // records (consecutive in `level`) are fused on their own, so a fusion rescans and
        // splices only its own run's activations (not every activation of the depth).
        let mut fused_level = Vec::with_capacity(level.len());
        for group in level.chunk_by(|x, y| runs[x.start] == runs[y.start]) {
            let mut group = group.to_vec();
            while group.len() >= 2 && fusions < MAX_FUSIONS {
                let Some((j, k)) = find_pair(records, &group, &runs, loops, &mut known) else {
                    break;
                };
                let (a, b) = (group[j], group[k]);
                fusions += 1;
                changing();
                apply(records, &a, &b, marks);
                // Only the activations at this depth between `a` and `b` changed (every
                // record there shares `a`'s parent position): rescan just those.
                let fresh = activations_in(records, a.start..b.end, depth..depth + 1);
                group.splice(j..=k, fresh);
                let line = |x: &Act| loops.get(x.id as usize).copied();
                if let (Some(bl), al) = (line(&b), line(&a)) {
                    stats.add(CompilerLine {
                        kind: CompilerKind::Fused,
                        line: bl,
                        api: "nl.affine_range",
                        kept: None,
                        loop_line: al,
                        count: 1,
                        bytes: 0,
                    });
                }
            }
            fused_level.extend(group);
        }
        debug_assert!(
            fused_level == activations_in(records, 0..records.len(), depth..depth + 1),
            "activations kept in step"
        );
        debug_assert!(runs == parent_runs(records, depth), "parent runs kept");
    }
    fusions > 0
}

/// Reorders `records`: the records between `a` and `b` first, then iteration `j` of `a`
/// followed by iteration `j` of `b` (renamed into `a`) for every `j`. Only the records in
/// `a.start..b.end` move; the indices in `marks` move as [`reorder`] moves them.
fn apply(records: &mut [Instr], a: &Act, b: &Act, marks: &mut [usize]) {
    let d = a.depth;
    let lo = a.start;
    let iteration = |i: usize| records[i].affine.frames()[d].1;
    let mut order: Vec<usize> = (a.end - lo..b.start - lo).collect();
    let (mut x, mut y) = (a.start, b.start);
    while x < a.end || y < b.end {
        let j = if x < a.end {
            iteration(x)
        } else {
            iteration(y)
        };
        while x < a.end && iteration(x) == j {
            order.push(x - lo);
            x += 1;
        }
        while y < b.end && iteration(y) == j {
            order.push(y - lo);
            y += 1;
        }
    }
    let mut last: Option<(AffinePos, AffinePos)> = None;
    for r in &mut records[b.start..b.end] {
        let f = r.affine.frames()[d];
        r.affine = with_frame(&r.affine, d, (a.id, f.1), &mut last);
    }
    let new_pos = permute_in_place(&mut records[lo..b.end], &order);
    // A mark outside the range keeps its index (the range maps onto itself); one inside
    // moves to the smallest new index of the range's records at or after it.
    for m in marks.iter_mut() {
        if *m > lo && *m < b.end {
            if let Some(p) = new_pos[*m - lo..].iter().min() {
                *m = lo + p;
            }
        }
    }
}

/// `pos` with its frame at `depth` replaced by `frame`. `last` keeps the previous call's
/// position and result: records of one position share the result (a deep position's
/// frames are one allocation, shared).
pub(crate) fn with_frame(
    pos: &AffinePos,
    depth: usize,
    frame: (u32, u32),
    last: &mut Option<(AffinePos, AffinePos)>,
) -> AffinePos {
    let frames = pos.frames();
    if frames.len() <= AffinePos::INLINE {
        // Held in the record: nothing to share (comparing and keeping the last one cost
        // more than making it).
        let mut inline = [(0, 0); AffinePos::INLINE];
        inline[..frames.len()].copy_from_slice(frames);
        inline[depth] = frame;
        return AffinePos::new(&inline[..frames.len()]);
    }
    if let Some((old, new)) = last {
        if old == pos && new.frames()[depth] == frame {
            return new.clone();
        }
    }
    let mut v = frames.to_vec();
    v[depth] = frame;
    let new = AffinePos::new(&v);
    *last = Some((pos.clone(), new.clone()));
    new
}

/// Puts `slice` in the order `order` (a permutation of its indices: the new element `k` is
/// the old element `order[k]`) by swaps along the permutation's cycles, and returns each old
/// element's new index.
fn permute_in_place<T>(slice: &mut [T], order: &[usize]) -> Vec<usize> {
    let mut new_pos = vec![0; slice.len()];
    for (k, &i) in order.iter().enumerate() {
        new_pos[i] = k;
    }
    let mut placed = vec![false; slice.len()];
    for start in 0..slice.len() {
        let mut k = start;
        while !placed[k] {
            placed[k] = true;
            let from = order[k];
            if from == start {
                break;
            }
            // `slice[k]` holds the cycle's first element; `slice[from]` is still unmoved.
            slice.swap(k, from);
            k = from;
        }
    }
    new_pos
}

/// Puts `records` in the order `order` (see [`permute`]) and moves the indices in `marks` to
/// the smallest new index of the records at or after them (so every record at or after a
/// mark stays at or after it).
pub(crate) fn reorder(records: &mut Vec<Instr>, order: &[usize], marks: &mut [usize]) {
    let new_pos = permute(records, order);
    for m in marks.iter_mut() {
        if let Some(p) = new_pos.get(*m..).and_then(|t| t.iter().min()) {
            *m = *p;
        }
    }
}

/// Puts `records` in the order `order` (a permutation of their indices: the new record `k`
/// is the old record `order[k]`) and returns each old record's new index.
pub(crate) fn permute(records: &mut Vec<Instr>, order: &[usize]) -> Vec<usize> {
    let mut new_pos = vec![0; records.len()];
    for (k, &i) in order.iter().enumerate() {
        new_pos[i] = k;
    }
    let mut old: Vec<Option<Instr>> = std::mem::take(records).into_iter().map(Some).collect();
    *records = order
        .iter()
        .map(|&i| old[i].take().expect("each record once"))
        .collect();
    new_pos
}
