//! Happens-before for mesh launches: which accesses of a shard are ordered, decided by the
//! program's synchronisation, never by how the device threads happened to interleave.
//!
//! Every device carries a vector clock ([`Clock`]): one counter per device, plus the copies
//! whose source it knows was read (`sent`) and whose data it knows landed (`landed`). A
//! semaphore increment carries the clock of what signalled it (a device's clock at the
//! signal; for a copy's receive semaphore, the clock of the device that started it plus
//! "this copy landed"; for its send semaphore, plus "this copy's source was read"), and a wait
//! joins the clocks of the increments it consumes — the ones the timing replay consumed, the
//! earliest modelled landings ([`super::sync`]), not the oldest in host order. Then, per shard
//! ([`Region`]):
//!
//! - a local load or store (`nl`/`nisa` on the device's shard) overlapping a copy into those
//!   elements is ordered only when the device knows the copy landed; a store overlapping a
//!   copy's source only when it knows the source was read;
//! - a copy is ordered after earlier local accesses of its destination (and stores into its
//!   source) only when their device's counter in the copy's clock covers them, and after
//!   earlier copies writing (or reading) the same elements only when it knows they landed (or
//!   were read).
//!
//! Each access is checked against the records of the other side that exist when it runs, so
//! a conflicting pair is found whichever of the two the host ran first. Findings are kept,
//! not raised, and the launch reports one chosen by a key that does not depend on the host
//! order ([`Finding`]): the lowest device, then the copy, then the device's latest access.
//! Values therefore never decide the outcome: a copy's data is written when it starts, which
//! a program without findings cannot tell from writing it when its receive wait completes.
//!
//! Shards also carry which of their elements were ever written ([`Written`]): shards made by
//! `ShardedHbm::zeros` or `shape_only` start unwritten, and a shard a launch writes must be
//! written in full by the end of it (by this launch or earlier ones). Reads of such shards stay
//! allowed: `zeros` holds zeros, and estimate-mode launches read `shape_only` inputs.

use crate::access::Ap;
use crate::error::{ErrorKind, NkiError, SourceLoc};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

/// The copies of one source device a clock knows about: every sequence number below `water`,
/// and the ones in `extra` (copies complete out of order).
#[derive(Clone, Debug, Default)]
pub(crate) struct Seen {
    water: u64,
    extra: BTreeSet<u64>,
}

impl Seen {
    fn contains(&self, k: u64) -> bool {
        k < self.water || self.extra.contains(&k)
    }

    fn insert(&mut self, k: u64) {
        if k < self.water {
            return;
        }
        self.extra.insert(k);
        self.compact();
    }

    fn join(&mut self, o: &Seen) {
        self.water = self.water.max(o.water);
        self.extra.extend(o.extra.iter().copied());
        self.compact();
    }

    fn compact(&mut self) {
        while self.extra.remove(&self.water) {
            self.water += 1;
        }
        let w = self.water;
        self.extra.retain(|&k| k >= w);
    }
}

/// A vector clock over the devices and the copies they started.
#[derive(Clone, Debug)]
pub(crate) struct Clock {
    dev: Vec<u32>,
    /// Per source device: copies whose source was read.
    sent: Vec<Seen>,
    /// Per source device: copies whose data landed.
    landed: Vec<Seen>,
}

impl Clock {
    fn new(n: usize) -> Clock {
        Clock {
            dev: vec![0; n],
            sent: vec![Seen::default(); n],
            landed: vec![Seen::default(); n],
        }
    }

    fn join(&mut self, o: &Clock) {
        for (a, b) in self.dev.iter_mut().zip(&o.dev) {
            *a = (*a).max(*b);
        }
        for (a, b) in self.sent.iter_mut().zip(&o.sent) {
            a.join(b);
        }
        for (a, b) in self.landed.iter_mut().zip(&o.landed) {
            a.join(b);
        }
    }

    fn knows_landed(&self, c: CopyId) -> bool {
        self.landed[c.src].contains(c.seq)
    }

    fn knows_sent(&self, c: CopyId) -> bool {
        self.sent[c.src].contains(c.seq) || self.knows_landed(c)
    }
}

/// A copy: the device that started it and its number among that device's copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct CopyId {
    pub(crate) src: usize,
    pub(crate) seq: u64,
}

/// Which elements of a shard were ever written, as sorted disjoint runs `[start, end)`.
#[derive(Debug, Default)]
pub(crate) struct Written {
    runs: BTreeMap<usize, usize>,
}

impl Written {
    /// All `n` elements written (a shard made from values).
    pub(crate) fn full(n: usize) -> Written {
        let mut w = Written::default();
        w.add(0, n);
        w
    }

    fn add(&mut self, start: usize, end: usize) {
        if start >= end {
            return;
        }
        let (mut s, mut e) = (start, end);
        if let Some((&ps, &pe)) = self.runs.range(..=s).next_back() {
            if pe >= s {
                s = ps;
                e = e.max(pe);
            }
        }
        let covered: Vec<usize> = self.runs.range(s..=e).map(|(&k, _)| k).collect();
        for k in covered {
            let ke = self.runs.remove(&k).expect("listed above");
            e = e.max(ke);
        }
        self.runs.insert(s, e);
    }

    /// The first element of `[start, end)` not written.
    fn first_gap(&self, start: usize, end: usize) -> Option<usize> {
        if start >= end {
            return None;
        }
        // Runs are disjoint and never adjacent (merged), so the end of the run holding
        // `start` is unwritten.
        match self.runs.range(..=start).next_back() {
            Some((_, &pe)) if pe > start => (pe < end).then_some(pe),
            _ => Some(start),
        }
    }
}

/// One shard's written elements, shared by the tensor and the launches that touch it.
pub(crate) type Marks = Arc<Mutex<Written>>;

/// The element runs `(offset, len)` of view `ap`, sorted (inner stride expanded).
pub(crate) fn runs_of(ap: &Ap) -> Vec<(usize, usize)> {
    let s = ap.inner_stride();
    let mut v = Vec::new();
    ap.for_each_row(|off, n| {
        if s == 1 {
            v.push((off, n));
        } else {
            v.extend((0..n).map(|j| ((off as isize + j as isize * s) as usize, 1)));
        }
    });
    v.sort_unstable();
    v
}

/// The first element two sorted lists of element runs share.
pub(crate) fn first_common(a: &[(usize, usize)], b: &[(usize, usize)]) -> Option<usize> {
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        let (sa, ea) = (a[i].0, a[i].0 + a[i].1);
        let (sb, eb) = (b[j].0, b[j].0 + b[j].1);
        if sa < eb && sb < ea {
            return Some(sa.max(sb));
        }
        if ea <= eb {
            i += 1;
        } else {
            j += 1;
        }
    }
    None
}

/// A local load or store of a shard by a device.
#[derive(Clone, Debug)]
struct Local {
    dev: usize,
    /// The device's own counter at the access.
    clock: u32,
    /// The access's number among the device's tracked accesses (program order).
    seq: u64,
    writes: bool,
    runs: Vec<(usize, usize)>,
    op: &'static str,
    loc: SourceLoc,
    /// The program id of the device's instance that made the access.
    pid: Arc<[usize]>,
}

/// A copy's access of a shard: its destination (written) or its source (read).
#[derive(Clone, Debug)]
struct CopyRec {
    id: CopyId,
    dst: usize,
    writes: bool,
    runs: Vec<(usize, usize)>,
    loc: SourceLoc,
    /// The program id of the starting device's instance.
    pid: Arc<[usize]>,
}

/// The copies of `copies` that an access (`writes`, elements `runs`) of a device with clock
/// `clock` conflicts with: at least one side writes, the elements overlap, and the clock does
/// not order the copy before the access (a copy's write must have landed, its read been sent).
/// `skip` is the accessing copy itself. Each comes with the first element both touch.
fn unordered_copies<'a>(
    copies: &'a [CopyRec],
    clock: &'a Clock,
    writes: bool,
    runs: &'a [(usize, usize)],
    skip: Option<CopyId>,
) -> impl Iterator<Item = (Side, usize)> + 'a {
    copies.iter().filter_map(move |c| {
        if !(c.writes || writes) || Some(c.id) == skip {
            return None;
        }
        let ordered = if c.writes {
            clock.knows_landed(c.id)
        } else {
            clock.knows_sent(c.id)
        };
        if ordered {
            return None;
        }
        first_common(&c.runs, runs).map(|e| (Side::Copy(c.clone()), e))
    })
}

/// What the launch knows about one shard.
struct Region {
    name: String,
    shape: crate::access::Shape,
    /// The device whose shard it is.
    device: usize,
    marks: Marks,
    locals: Vec<Local>,
    copies: Vec<CopyRec>,
    /// Written by this launch.
    touched: bool,
}

/// A side of a finding.
#[derive(Clone, Debug)]
enum Side {
    Local(Local),
    Copy(CopyRec),
}

/// A check that failed, with the key that orders findings whatever the host order.
#[derive(Clone, Debug)]
pub(crate) struct Finding {
    key: (usize, CopyId, usize, Reverse<u64>, Option<CopyId>),
    error: NkiError,
}

/// The happens-before state of a mesh launch (under the mesh's synchronisation lock).
pub(crate) struct Order {
    names: Vec<String>,
    pub(crate) clocks: Vec<Clock>,
    next_copy: Vec<u64>,
    next_access: Vec<u64>,
    regions: HashMap<u64, Region>,
    findings: Vec<Finding>,
    /// The program id of the instance each device runs (its accesses carry it).
    pids: Vec<Arc<[usize]>>,
}

impl Order {
    /// The state of a launch over devices named `names` (`device 1 (x=0, y=1)`).
    pub(crate) fn new(names: Vec<String>) -> Order {
        let n = names.len();
        // Each device's own counter starts at 1, so that its first accesses are not covered
        // by the clocks of devices that never heard from it (which hold 0 for it).
        let clocks = (0..n)
            .map(|d| {
                let mut c = Clock::new(n);
                c.dev[d] = 1;
                c
            })
            .collect();
        Order {
            names,
            clocks,
            next_copy: vec![0; n],
            next_access: vec![0; n],
            regions: HashMap::new(),
            findings: Vec::new(),
            pids: vec![Arc::from(&[0][..]); n],
        }
    }

    /// Registers shard `id` (named `name`, of `shape`) of `device` with its written marks.
    pub(crate) fn register(
        &mut self,
        id: u64,
        name: &str,
        shape: crate::access::Shape,
        device: usize,
        marks: &Marks,
    ) {
        self.regions.entry(id).or_insert_with(|| Region {
            name: name.to_string(),
            shape,
            device,
            marks: marks.clone(),
            locals: Vec::new(),
            copies: Vec::new(),
            touched: false,
        });
    }

    /// Device `d` starts running its instance of program id `pid`.
    pub(crate) fn enter_instance(&mut self, d: usize, pid: &[usize]) {
        self.pids[d] = Arc::from(pid);
    }

    /// True when shard `id` is registered.
    pub(crate) fn knows(&self, id: u64) -> bool {
        self.regions.contains_key(&id)
    }

    /// The clock a signal of device `d` carries; `d`'s later accesses are not covered by it.
    pub(crate) fn release(&mut self, d: usize) -> Clock {
        let c = self.clocks[d].clone();
        self.clocks[d].dev[d] += 1;
        c
    }

    /// Device `d` consumed an increment carrying `c`.
    pub(crate) fn acquire(&mut self, d: usize, c: &Clock) {
        self.clocks[d].join(c);
    }

    /// A local load (`writes` false) or store of the elements `ap` of shard `id` by device
    /// `d`, operation `op` at `loc`.
    pub(crate) fn local(
        &mut self,
        d: usize,
        id: u64,
        ap: &Ap,
        writes: bool,
        op: &'static str,
        loc: SourceLoc,
    ) {
        let Some(r) = self.regions.get_mut(&id) else {
            return;
        };
        let seq = self.next_access[d];
        self.next_access[d] += 1;
        let me = Local {
            dev: d,
            clock: self.clocks[d].dev[d],
            seq,
            writes,
            runs: runs_of(ap),
            op,
            loc,
            pid: self.pids[d].clone(),
        };
        let clock = &self.clocks[d];
        let mut found = Vec::new();
        found.extend(unordered_copies(&r.copies, clock, writes, &me.runs, None));
        if writes {
            let mut m = r.marks.lock().unwrap_or_else(|p| p.into_inner());
            for &(s, n) in &me.runs {
                m.add(s, s + n);
            }
            r.touched = true;
        }
        // A later access of the same elements by the same device stands for an earlier one:
        // whatever is unordered with the earlier is unordered with it too.
        r.locals
            .retain(|l| !(l.dev == d && l.runs == me.runs && (writes || !l.writes)));
        r.locals.push(me.clone());
        for (other, e) in found {
            let f = self.race(id, e, other, Side::Local(me.clone()));
            self.findings.push(f);
        }
    }

    /// A copy started by device `src` (clock `clock`, before its release) from the elements
    /// `from` of shard `src_id` (`None`: a tile) into the elements `to` of shard `dst_id` on
    /// device `dst`, at `loc`. Returns its id.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn copy(
        &mut self,
        src: usize,
        clock: &Clock,
        from: Option<(u64, Vec<(usize, usize)>)>,
        dst_id: u64,
        dst: usize,
        to: Vec<(usize, usize)>,
        loc: SourceLoc,
    ) -> CopyId {
        let id = CopyId {
            src,
            seq: self.next_copy[src],
        };
        self.next_copy[src] += 1;
        let pid = self.pids[src].clone();
        let rec = |writes: bool, runs: Vec<(usize, usize)>| CopyRec {
            id,
            dst,
            writes,
            runs,
            loc,
            pid: pid.clone(),
        };
        if let Some((sid, runs)) = from {
            let me = rec(false, runs);
            self.check_copy(sid, &me, clock);
            if let Some(r) = self.regions.get_mut(&sid) {
                r.copies.push(me);
            }
        }
        let me = rec(true, to);
        self.check_copy(dst_id, &me, clock);
        if let Some(r) = self.regions.get_mut(&dst_id) {
            let mut m = r.marks.lock().unwrap_or_else(|p| p.into_inner());
            for &(s, n) in &me.runs {
                m.add(s, s + n);
            }
            drop(m);
            r.touched = true;
            r.copies.push(me);
        }
        id
    }

    /// Checks copy access `me` (clock `clock`) of shard `id` against the earlier accesses.
    fn check_copy(&mut self, id: u64, me: &CopyRec, clock: &Clock) {
        let Some(r) = self.regions.get(&id) else {
            return;
        };
        let mut found = Vec::new();
        for l in &r.locals {
            if !(l.writes || me.writes) || clock.dev[l.dev] >= l.clock {
                continue;
            }
            if let Some(e) = first_common(&l.runs, &me.runs) {
                found.push((Side::Local(l.clone()), e));
            }
        }
        found.extend(unordered_copies(
            &r.copies,
            clock,
            me.writes,
            &me.runs,
            Some(me.id),
        ));
        for (other, e) in found {
            let f = self.race(id, e, other, Side::Copy(me.clone()));
            self.findings.push(f);
        }
    }

    /// The clock of copy `c`'s receive increment (its data landed) or send increment (its
    /// source was read), from `clock`, the starting device's clock at the start.
    pub(crate) fn copy_clock(clock: &Clock, c: CopyId, landed: bool) -> Clock {
        let mut k = clock.clone();
        k.sent[c.src].insert(c.seq);
        if landed {
            k.landed[c.src].insert(c.seq);
        }
        k
    }

    fn describe(&self, s: &Side) -> String {
        match s {
            Side::Local(l) => format!(
                "{} {} it ({} at {})",
                self.names[l.dev],
                if l.writes { "writes" } else { "reads" },
                l.op,
                l.loc
            ),
            Side::Copy(c) if c.writes => format!(
                "the copy {} started at {} writes it",
                self.names[c.id.src], c.loc
            ),
            Side::Copy(c) => format!(
                "the copy {} started at {} (to {}) reads it",
                self.names[c.id.src], c.loc, self.names[c.dst]
            ),
        }
    }

    /// The finding of unordered accesses `a` (earlier on the host) and `b` of element `e`.
    fn race(&self, id: u64, e: usize, a: Side, b: Side) -> Finding {
        let r = &self.regions[&id];
        let devices = |s: &Side| match s {
            Side::Local(l) => l.dev,
            Side::Copy(c) => c.id.src.min(c.dst),
        };
        let low = devices(&a).min(devices(&b));
        // Canonical roles: the copy side first; of two copies, the lower id first.
        let (x, y) = match (&a, &b) {
            (Side::Local(_), Side::Copy(_)) => (b, a),
            (Side::Copy(p), Side::Copy(q)) if q.id < p.id => (b, a),
            _ => (a, b),
        };
        let (copy, local_dev, local_seq, other) = match (&x, &y) {
            (Side::Copy(c), Side::Local(l)) => (c.id, l.dev, l.seq, None),
            (Side::Copy(c), Side::Copy(o)) => (c.id, usize::MAX, 0, Some(o.id)),
            _ => unreachable!("a race has a copy side"),
        };
        let what = match (&x, &y) {
            (Side::Copy(_), Side::Copy(_)) => "without ordering: wait for the first copy's receive semaphore (or its send semaphore, for its source) before starting the second",
            (Side::Copy(c), _) if c.writes => "without waiting for the copy: wait on its receive semaphore before touching its destination",
            _ => "before the copy read it: wait on the copy's send semaphore before overwriting its source",
        };
        let idx = Ap::unravel(e, &r.shape);
        let (loc, pid) = match &y {
            Side::Local(l) => (l.loc, &l.pid),
            Side::Copy(c) => (c.loc, &c.pid),
        };
        let msg = format!(
            "element {idx:?} of {} on {}: {} and {} {what}",
            r.name,
            self.names[r.device],
            self.describe(&x),
            self.describe(&y),
        );
        Finding {
            key: (low, copy, local_dev, Reverse(local_seq), other),
            error: NkiError::new(ErrorKind::OutputDependency, "mesh", msg)
                .with_loc(loc)
                .with_program_id(pid),
        }
    }

    /// After the launch: the finding with the lowest key, else a shard this launch wrote
    /// only in part (the lowest device's), as an error.
    pub(crate) fn verdict(&self) -> Option<NkiError> {
        if let Some(f) = self.findings.iter().min_by(|a, b| a.key.cmp(&b.key)) {
            return Some(f.error.clone());
        }
        let mut partial: Vec<(usize, u64, usize)> = Vec::new();
        for (&id, r) in &self.regions {
            if !r.touched {
                continue;
            }
            let m = r.marks.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(e) = m.first_gap(0, r.shape.numel()) {
                partial.push((r.device, id, e));
            }
        }
        let &(d, id, e) = partial.iter().min()?;
        let r = &self.regions[&id];
        Some(NkiError::new(
            ErrorKind::OutputNotWritten,
            "MeshLaunch",
            format!(
                "{} of {} on {} is written only in part: element {:?} was never written (shards \
                 made by ShardedHbm::zeros or shape_only start uninitialised; write every element \
                 of a shard the kernel writes)",
                r.name,
                r.shape,
                self.names[d],
                Ap::unravel(e, &r.shape)
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleaved_column_runs_share_no_element() {
        // Two column halves of a 4x4 row-major buffer interleave but never share an element.
        let left = [(0, 2), (4, 2), (8, 2), (12, 2)];
        let right = [(2, 2), (6, 2), (10, 2), (14, 2)];
        assert_eq!(first_common(&left, &right), None);
        assert_eq!(first_common(&left, &[(5, 1)]), Some(5));
        assert_eq!(first_common(&right, &[(3, 4)]), Some(3));
    }

    #[test]
    fn written_runs_merge_and_find_gaps() {
        let mut w = Written::default();
        w.add(4, 8);
        w.add(0, 2);
        assert_eq!(w.first_gap(0, 10), Some(2));
        w.add(2, 4);
        assert_eq!(w.first_gap(0, 8), None);
        assert_eq!(w.first_gap(0, 10), Some(8));
        assert_eq!(w.first_gap(5, 7), None);
        w.add(7, 12);
        assert_eq!(w.runs.len(), 1);
        assert_eq!(Written::full(5).first_gap(0, 5), None);
    }

    #[test]
    fn seen_sets_compact_out_of_order_completions() {
        let mut s = Seen::default();
        s.insert(2);
        assert!(!s.contains(0) && s.contains(2));
        s.insert(0);
        s.insert(1);
        assert_eq!((s.water, s.extra.len()), (3, 0));
        let mut t = Seen::default();
        t.insert(5);
        t.join(&s);
        assert!(t.contains(1) && t.contains(5) && !t.contains(4));
    }
}
