//! Collectives over replica groups (`nki.collectives`): all_gather, reduce_scatter,
//! all_reduce, all_to_all, collective_permute and a barrier, each built on the remote-DMA layer
//! (`mesh::dma`) with a selectable [`Algorithm`]: ring (`ring.rs`), recursive doubling /
//! halving (`recursive.rs`), or direct sends to every peer (`direct.rs`). Reductions accumulate
//! in f32 and round once to the destination dtype.
//!
//! Every device calls the same collectives in the same order (SPMD); the n-th collective of a
//! device meets the n-th of its peers. A device outside every group skips the call. Buffers a
//! collective needs (f32 receive slots) are allocated symmetrically on all devices and freed
//! when the last device leaves the collective.

mod direct;
mod implicit;
pub(crate) mod kind;
pub mod names;
mod recursive;
mod ring;
pub(crate) mod variable;

pub use super::operand::Operand;
pub(crate) use kind::CollectiveEntry;
pub use kind::{Algorithm, CollectiveKind};

use super::deadlock::InCollective;
use super::device::with_device;
use super::dma::{start_copy, wait_in, write_values};
use super::replay::Step;
use super::sem::SemKey;
use super::sharding::MeshView;
use super::shared::MeshShared;
use super::topology::ReplicaGroups;
use crate::access::{Ap, Shape};
use crate::context;
use crate::dtype::DType;
use crate::error::{ErrorKind, NkiError, Result, SourceLoc};
use crate::hbm::HbmStorage;
use std::collections::HashMap;
use std::sync::Arc;

/// Semaphore slots (and scratch keys) reserved for each phase of a collective.
pub(crate) const SLOTS: u32 = 1 << 16;

/// One device's part in one collective call.
pub(crate) struct Call {
    shared: Arc<MeshShared>,
    seq: u32,
    pub(crate) me: usize,
    pub(crate) group: Vec<usize>,
    pub(crate) rank: usize,
    pub(crate) loc: SourceLoc,
    /// Bytes per element of the collective's data (its source operand's dtype): what its
    /// DMA reductions are priced by.
    pub(crate) elem_bytes: usize,
}

impl Call {
    /// Enters collective `kind`: takes the device's next sequence number, checks the call
    /// matches its peers', and returns `None` for a device outside every group.
    fn begin(
        kind: CollectiveKind,
        algorithm: Option<Algorithm>,
        groups: &ReplicaGroups,
        signature: String,
        loc: SourceLoc,
    ) -> Option<Call> {
        let c = Call::open(kind, algorithm, groups, signature, loc, false)?;
        c.fixed_cost(kind, false);
        Some(c)
    }

    /// [`Call::begin`] without the fixed cost ([`Call::fixed_cost`]); a `prepared` call (the
    /// `_prepare` half of a split collective) enters the collective at its trigger.
    fn open(
        kind: CollectiveKind,
        algorithm: Option<Algorithm>,
        groups: &ReplicaGroups,
        signature: String,
        loc: SourceLoc,
        prepared: bool,
    ) -> Option<Call> {
        let (shared, me, seq) = with_device(kind.name(), loc, |d| {
            d.flush();
            let seq = d.next_collective;
            d.next_collective += 1;
            if !prepared {
                d.log(Step::Begin { seq });
            }
            (d.shared.clone(), d.id, seq)
        });
        let participants: usize = groups.groups().iter().map(Vec::len).sum();
        let (group, rank) = match groups.find(me) {
            Some((g, r)) => (g.to_vec(), r),
            None => return None,
        };
        shared.sync.joined(seq, me);
        {
            let mut reg = shared.collectives();
            let e = reg.entry(seq).or_insert_with(|| CollectiveEntry {
                kind,
                algorithm,
                signature: signature.clone(),
                first: (me, loc),
                ranks: group.len(),
                bytes: 0,
                finished: 0,
                participants,
                scratch: HashMap::new(),
                metadata: HashMap::new(),
            });
            if e.signature != signature {
                let msg = format!(
                    "{} calls {signature} at {loc} as its collective #{seq}, but {} called {} at {}: every device must call the same collectives in the same order",
                    shared.mesh.describe_device(me),
                    shared.mesh.describe_device(e.first.0),
                    e.signature,
                    e.first.1
                );
                drop(reg);
                context::raise(
                    NkiError::new(ErrorKind::Synchronization, kind.name(), msg),
                    loc,
                );
            }
        }
        Some(Call {
            shared,
            seq,
            me,
            group,
            rank,
            loc,
            elem_bytes: 4,
        })
    }

    /// Logs the collective's fixed cost (runtime setup, the ranks' handshake) before any byte
    /// moves [F calibration.md §4, see `links`]; `ahead`: started by a `_prepare`, running
    /// beside the device's next steps until the trigger ([`Step::Prepare`]).
    fn fixed_cost(&self, kind: CollectiveKind, ahead: bool) {
        let spec = self.shared.links.spec();
        let ns = if kind.reduces() {
            spec.reduction_fixed_ns
        } else {
            spec.collective_fixed_ns
        };
        if self.shared.mode.records() && self.size() > 1 {
            let (name, seq, loc) = (kind.name(), self.seq, self.loc);
            with_device(name, loc, |d| {
                d.log(if ahead {
                    Step::Prepare { seq, ns, name, loc }
                } else {
                    Step::Setup { ns, name, loc }
                })
            });
        }
    }

    /// Records the bytes per rank (max of input and output) of this collective.
    fn set_bytes(&self, bytes: u64) {
        if let Some(e) = self.shared.collectives().get_mut(&self.seq) {
            e.bytes = e.bytes.max(bytes);
        }
    }

    /// `e`, a rule of this collective the running device's operands break, with the device's
    /// rank and its group named (the device itself is named by the launch).
    pub(crate) fn at_rank(&self, e: NkiError) -> NkiError {
        at_rank(e, self.rank, &self.group)
    }

    /// Group size.
    pub(crate) fn size(&self) -> usize {
        self.group.len()
    }

    /// The device of group rank `r` (modulo the group size).
    pub(crate) fn peer(&self, r: usize) -> usize {
        self.group[r % self.group.len()]
    }

    /// The semaphore of slot `slot` of this collective.
    pub(crate) fn sem(&self, slot: u32) -> SemKey {
        SemKey::Collective {
            seq: self.seq,
            slot,
        }
    }

    /// True when values are computed (not an estimate).
    pub(crate) fn executes(&self) -> bool {
        self.shared.mode.executes()
    }

    /// Starts a copy of `src` (local) into `dst` (on any device), signalling receive slot
    /// `slot` there and send slot `slot + 1` here. Returns the copy id.
    pub(crate) fn send(&self, src: &MeshView, dst: &MeshView, slot: u32) -> u64 {
        self.name_slots(slot);
        start_copy(src, dst, Some(self.sem(slot + 1)), self.sem(slot), self.loc)
    }

    /// This collective, for deadlock reports.
    fn within(&self) -> Option<InCollective> {
        Some(InCollective {
            name: self.name(),
            seq: self.seq,
            group: self.group.clone(),
        })
    }

    /// Waits until the copies `ids` (started with [`Call::send`] on `slot`) left this device.
    pub(crate) fn wait_sent(&self, ids: &[u64], slot: u32) {
        if ids.is_empty() {
            return;
        }
        wait_in(
            self.sem(slot + 1),
            ids.len() as u32,
            self.loc,
            self.within(),
        );
        for &id in ids {
            self.shared.sync.copy_waited(id);
        }
    }

    /// Waits until `n` copies landed in receive slot `slot` of this device.
    pub(crate) fn wait_received(&self, n: usize, slot: u32) {
        self.name_slots(slot);
        wait_in(self.sem(slot), n as u32, self.loc, self.within());
    }

    /// A local copy `src` -> `dst`, waited on.
    pub(crate) fn local_copy(&self, src: &MeshView, dst: &MeshView, slot: u32) {
        if Arc::ptr_eq(src.storage(), dst.storage()) && src.ap == dst.ap {
            return;
        }
        let id = self.send(src, dst, slot);
        self.wait_sent(&[id], slot);
        self.wait_received(1, slot);
    }

    fn name_slots(&self, slot: u32) {
        let kind = self
            .shared
            .collectives()
            .get(&self.seq)
            .map_or("collective", |e| e.kind.name());
        for (s, what) in [(slot, "recv"), (slot + 1, "send")] {
            self.shared.sync.name(
                self.me,
                self.sem(s),
                &format!("{kind} #{} slot {s} {what}", self.seq),
                self.loc,
            );
        }
    }

    /// A local f32 buffer of `shape` (slot `key`), allocated on every device at first use.
    pub(crate) fn scratch(&self, key: u32, shape: &[usize]) -> MeshView {
        self.scratch_of(key, shape, DType::F32)
    }

    /// A local buffer of `shape` and `dtype` (slot `key`), allocated on every device at first
    /// use.
    pub(crate) fn scratch_of(&self, key: u32, shape: &[usize], dtype: DType) -> MeshView {
        let s = context::check(Shape::new(shape), self.loc);
        let executes = self.executes();
        let n = self.shared.mesh.num_devices();
        let shards = {
            let mut reg = self.shared.collectives();
            let e = reg.get_mut(&self.seq).expect("entered in begin");
            e.scratch
                .entry(key)
                .or_insert_with(|| {
                    (0..n)
                        .map(|_| HbmStorage::new(dtype, s, executes.then(|| vec![0.0; s.numel()])))
                        .collect()
                })
                .clone()
        };
        MeshView {
            shards,
            device: self.me,
            ap: Ap::contiguous(s),
        }
    }

    /// Reads a view's values (as fp32 sees them; none in estimate mode).
    pub(crate) fn read(&self, v: &MeshView) -> Vec<f32> {
        crate::hbm::observe::notify(v.storage().id, &v.ap, false, self.name(), self.loc);
        if !self.executes() {
            return Vec::new();
        }
        let h = v.hbm_view();
        let mut vals = context::check(h.gather(self.name()), self.loc);
        h.dtype().to_values(&mut vals);
        vals
    }

    /// Writes values into a local view (nothing in estimate mode).
    pub(crate) fn write(&self, v: &MeshView, mut vals: Vec<f32>) {
        super::dma::note_written(v.storage());
        crate::hbm::observe::notify(v.storage().id, &v.ap, true, self.name(), self.loc);
        if self.executes() {
            context::check(write_values(v, &mut vals), self.loc);
        }
    }

    /// Reduces `b` into `acc` element-wise in f32 (a sum, or the operator a
    /// [`names`] call chose), logging a DMA reduction of `elems` elements of the collective's
    /// dtype (none when `elems` is 0).
    pub(crate) fn accumulate(&self, acc: &mut [f32], b: &[f32], elems: usize) {
        let op = kind::current_reduce();
        if elems == 0 && op != kind::ReduceOp::Add {
            // The first buffer starts the reduction (the zeros it lands on are no operand).
            for (a, x) in acc.iter_mut().zip(b) {
                *a = *x;
            }
        } else {
            for (a, x) in acc.iter_mut().zip(b) {
                *a = op.apply(*a, *x);
            }
        }
        if elems == 0 {
            return;
        }
        with_device("reduce", self.loc, |d| {
            d.flush();
            d.log(Step::Reduce {
                elems,
                elem_bytes: self.elem_bytes,
                loc: self.loc,
            });
        });
    }

    fn name(&self) -> &'static str {
        self.shared
            .collectives()
            .get(&self.seq)
            .map_or("collective", |e| e.kind.name())
    }

    /// Leaves the collective: logs its end and frees the scratch after the last device.
    fn finish(self) {
        let name = self.name();
        with_device("collective", self.loc, |d| {
            d.flush();
            d.log(Step::End {
                seq: self.seq,
                name,
                loc: self.loc,
            });
        });
        let mut reg = self.shared.collectives();
        if let Some(e) = reg.get_mut(&self.seq) {
            e.finished += 1;
            if e.finished == e.participants {
                e.scratch.clear();
            }
        }
    }
}

/// `e` with the rank at fault named: rank `rank` of the group of devices `group`.
pub(crate) fn at_rank(e: NkiError, rank: usize, group: &[usize]) -> NkiError {
    let msg = format!(
        "{} (rank {rank} of the group of devices {group:?})",
        e.message()
    );
    NkiError::new(e.kind(), e.op(), msg)
}

/// Scratch key of the staging buffer of a source (0) or destination (1) tile.
const STAGING: u32 = 7 * SLOTS;

// Tiles live on their device's thread, so a tile operand is staged: its values are copied
// into a buffer of the tile's dtype allocated symmetrically on every device (peers write into
// the destination's staging buffer as they would into HBM), the collective runs on the
// staging buffers, and the destination tile takes the result when the collective ends.

/// The view the collective works on: the HBM view itself, or the tile's staging buffer
/// (slot 0 for a source, 1 for a destination) holding the tile's current values.
fn stage(op: &Operand, c: &Call, slot: u32) -> MeshView {
    let t = match op {
        Operand::Hbm(v) => {
            check_local(c, c.name(), v, ["src", "dst"][slot as usize]);
            return v.clone();
        }
        Operand::Tile(t) => t,
    };
    let v = c.scratch_of(STAGING + slot, t.shape(), t.dtype());
    if c.executes() && t.tile().init.get() {
        let mut vals = t.gather(c.name(), c.loc);
        context::check(write_values(&v, &mut vals), c.loc);
    }
    v
}

/// Hands a destination tile the result left in its staging buffer `v`.
fn unstage(op: &Operand, c: &Call, v: &MeshView) {
    if let Operand::Tile(t) = op {
        if c.executes() {
            t.scatter(c.read(v));
        } else {
            t.mark_written();
        }
    }
}

/// A view of `len` elements from `start` along `dim` of `v`.
pub(crate) fn sub_view(v: &MeshView, dim: usize, start: usize, len: usize) -> MeshView {
    let mut ap = v.ap;
    let mut dims = v.shape().to_vec();
    dims[dim] = len;
    ap.offset = (ap.offset as isize + start as isize * ap.strides[dim]) as usize;
    ap.shape = Shape::new(&dims).expect("a sub-view of a valid view");
    MeshView {
        shards: v.shards.clone(),
        device: v.device,
        ap,
    }
}

/// Block `i` of `n` equal blocks of `v` along `dim`.
pub(crate) fn block(v: &MeshView, dim: usize, i: usize, n: usize) -> MeshView {
    let len = v.shape()[dim] / n;
    sub_view(v, dim, i * len, len)
}

/// Fails collective `c` (called as `op`) unless its operand `what` (`v`) is on the running
/// device.
fn check_local(c: &Call, op: &'static str, v: &MeshView, what: &str) {
    if v.device != c.me {
        let e = NkiError::new(
            ErrorKind::InvalidDevice,
            op,
            format!(
                "{what} {}: a collective's operands must be on the running device {}",
                v.describe(),
                c.me
            ),
        );
        context::raise(c.at_rank(e), c.loc);
    }
}

/// Checks that `big` is `small` with dimension `dim` multiplied by `r`; each operand comes
/// with the name of the argument it is.
fn check_scaled(
    op: &'static str,
    (small_name, small): (&str, &MeshView),
    (big_name, big): (&str, &MeshView),
    dim: usize,
    r: usize,
) -> Result<()> {
    let (s, b) = (small.shape(), big.shape());
    if dim >= s.len() {
        return Err(NkiError::new(
            ErrorKind::InvalidArgument,
            op,
            format!(
                "dim {dim} is beyond the {} dimensions of {small_name} {}",
                s.len(),
                small.describe()
            ),
        ));
    }
    let ok = s.len() == b.len()
        && (0..s.len()).all(|d| {
            if d == dim {
                b[d] == s[d] * r
            } else {
                b[d] == s[d]
            }
        });
    if ok {
        return Ok(());
    }
    Err(NkiError::new(
        ErrorKind::ShapeMismatch,
        op,
        if r == 1 {
            format!(
                "{small_name} {} and {big_name} {} must have the same shape",
                small.describe(),
                big.describe()
            )
        } else {
            format!(
                "{big_name} {} must be {small_name} {} with dimension {dim} larger by a factor of {r} (the group size)",
                big.describe(),
                small.describe()
            )
        },
    ))
}

fn needs_power_of_two(op: &'static str, r: usize, alg: Algorithm) -> Result<()> {
    if alg == Algorithm::RecursiveDoubling && !r.is_power_of_two() {
        return Err(NkiError::new(
            ErrorKind::InvalidArgument,
            op,
            format!("alg: the recursive-doubling algorithm needs a power-of-two group, got a group of {r} ranks"),
        ));
    }
    Ok(())
}

/// A collective entered by the running device: the call, the views it works on and the
/// algorithm that runs.
struct Entered<'a> {
    c: Call,
    src: MeshView,
    dst: MeshView,
    dst_operand: Operand<'a>,
    alg: Algorithm,
}

impl Entered<'_> {
    /// Hands a destination tile its result and leaves the collective.
    fn finish(self) {
        unstage(&self.dst_operand, &self.c, &self.dst);
        self.c.finish();
    }
}

/// The common entry of a collective on `src` and `dst` (HBM views or tiles of the running
/// device): enters the collective (`None` outside every group), stages tile operands, picks
/// the algorithm ([`Algorithm::resolve`]; `splits(group size, src)`: whether the ring and
/// RDH forms are possible) and checks the views with `check(group size, algorithm, src,
/// dst)`.
#[track_caller]
fn enter<'a>(
    kind: CollectiveKind,
    alg: Option<Algorithm>,
    (src, dst, dim): (Operand<'a>, Operand<'a>, usize),
    groups: &ReplicaGroups,
    splits: impl FnOnce(usize, &MeshView) -> bool,
    check: impl FnOnce(usize, Algorithm, &MeshView, &MeshView) -> Result<()>,
) -> Option<Entered<'a>> {
    let loc = SourceLoc::caller();
    let op = kind.name();
    let how = alg.map_or(String::new(), |a| format!(" ({a})"));
    let sig = format!(
        "{op}{how} of {:?} into {:?} along dim {dim}",
        src.shape(),
        dst.shape()
    );
    let mut c = Call::begin(kind, alg, groups, sig, loc)?;
    let (s, d) = (stage(&src, &c, 0), stage(&dst, &c, 1));
    c.elem_bytes = s.storage().dtype.size();
    let bytes = s.bytes().max(d.bytes());
    let splits = splits(c.size(), &s);
    let alg = alg.map_or(Algorithm::Direct, |a| {
        a.resolve(kind, c.size(), bytes, splits)
    });
    let checked = check(c.size(), alg, &s, &d).map_err(|e| c.at_rank(e));
    context::check(checked, loc);
    c.set_bytes(bytes);
    if let Some(e) = c.shared.collectives().get_mut(&c.seq) {
        if e.algorithm.is_some() {
            e.algorithm = Some(alg);
        }
    }
    Some(Entered {
        c,
        src: s,
        dst: d,
        dst_operand: dst,
        alg,
    })
}

/// The collectives that move blocks along one dimension, declared once: each public function
/// takes its operands as the mesh API does and calls its implementation beside it.
macro_rules! along_dim {
    ($($(#[$doc:meta])* $name:ident => $imp:ident;)*) => {$(
        $(#[$doc])*
        #[track_caller]
        pub fn $name<'a>(src: impl Into<Operand<'a>>, dst: impl Into<Operand<'a>>, dim: usize, groups: &ReplicaGroups, alg: Algorithm) {
            $imp((src.into(), dst.into(), dim), groups, alg);
        }
    )*};
}

along_dim! {
    /// Gathers `src` of every rank of the running device's group into `dst` (concatenated along
    /// `dim` in rank order) on every rank. `dst` is `src` with dimension `dim` times the group
    /// size. Operands are HBM views ([`MeshView`]) or tiles of the running device.
    all_gather => gather_along;
    /// Sums `src` over the ranks of the group (in f32) and leaves block `rank` of the sum (along
    /// `dim`) in `dst` on each rank. `src` is `dst` with dimension `dim` times the group size.
    reduce_scatter => scatter_along;
    /// Block `j` (along `dim`) of `src` on rank `i` goes to block `i` of `dst` on rank `j`.
    /// Ring sends to rank+s at step s; direct sends all at once; recursive doubling is not
    /// offered for all_to_all.
    all_to_all => all_to_all_along;
}

/// The operands of a collective along one dimension: `(src, dst, dim)`.
type AlongDim<'a> = (Operand<'a>, Operand<'a>, usize);

#[track_caller]
fn gather_along(ops: AlongDim<'_>, groups: &ReplicaGroups, alg: Algorithm) {
    scaled_along(CollectiveKind::AllGather, ops, groups, alg);
}

#[track_caller]
fn scatter_along(ops: AlongDim<'_>, groups: &ReplicaGroups, alg: Algorithm) {
    scaled_along(CollectiveKind::ReduceScatter, ops, groups, alg);
}

/// An all-gather (`dst` is `src` scaled by the group size along `dim`) or a reduce-scatter
/// (`src` is `dst` scaled so).
#[track_caller]
fn scaled_along(kind: CollectiveKind, ops: AlongDim<'_>, groups: &ReplicaGroups, alg: Algorithm) {
    let (op, dim, gather) = (kind.name(), ops.2, kind == CollectiveKind::AllGather);
    let check = |r, alg, s: &MeshView, d: &MeshView| {
        let (small, big) = if gather {
            (("src", s), ("dst", d))
        } else {
            (("dst", d), ("src", s))
        };
        check_scaled(op, small, big, dim, r).and(needs_power_of_two(op, r, alg))
    };
    let splits = |_, _: &MeshView| true;
    if let Some(e) = enter(kind, Some(alg), ops, groups, splits, check) {
        let run = if gather { gather_into } else { scatter_into };
        run(&e.c, &e.src, &e.dst, dim, e.alg, 0);
        e.finish();
    }
}

fn gather_into(c: &Call, src: &MeshView, dst: &MeshView, dim: usize, alg: Algorithm, phase: u32) {
    match alg {
        Algorithm::Ring => ring::all_gather(c, src, dst, dim, phase),
        Algorithm::RecursiveDoubling => recursive::all_gather(c, src, dst, dim, phase),
        Algorithm::Direct | Algorithm::Runtime => direct::all_gather(c, src, dst, dim, phase),
    }
}

fn scatter_into(c: &Call, src: &MeshView, dst: &MeshView, dim: usize, alg: Algorithm, phase: u32) {
    match alg {
        Algorithm::Ring => ring::reduce_scatter(c, src, dst, dim, phase),
        Algorithm::RecursiveDoubling => recursive::reduce_scatter(c, src, dst, dim, phase),
        Algorithm::Direct | Algorithm::Runtime => direct::reduce_scatter(c, src, dst, dim, phase),
    }
}

/// Sums `src` over the ranks of the group (in f32) into `dst` (same shape) on every rank.
/// Ring and recursive doubling run a reduce-scatter then an all-gather over dimension 0,
/// which must divide by the group size; direct sends the whole buffer to every rank.
#[track_caller]
pub fn all_reduce<'a>(
    src: impl Into<Operand<'a>>,
    dst: impl Into<Operand<'a>>,
    groups: &ReplicaGroups,
    alg: Algorithm,
) {
    let op = "all_reduce";
    let check = |r: usize, alg, s: &MeshView, d: &MeshView| {
        check_scaled(op, ("src", s), ("dst", d), 0, 1)?;
        needs_power_of_two(op, r, alg)?;
        if alg != Algorithm::Direct && !s.shape()[0].is_multiple_of(r) {
            return Err(NkiError::new(
                ErrorKind::ShapeMismatch,
                op,
                format!(
                    "the {alg} all_reduce splits dimension 0 of src {} over {r} ranks, which does not divide it; use Algorithm::Direct",
                    s.describe()
                ),
            ));
        }
        Ok(())
    };
    let ops = (src.into(), dst.into(), 0);
    let splits = |r: usize, s: &MeshView| s.shape()[0].is_multiple_of(r);
    let kind = CollectiveKind::AllReduce;
    let Some(e) = enter(kind, Some(alg), ops, groups, splits, check) else {
        return;
    };
    let (c, src, dst) = (&e.c, &e.src, &e.dst);
    match e.alg {
        Algorithm::Direct | Algorithm::Runtime => direct::all_reduce(c, src, dst),
        _ => {
            let mine = block(dst, 0, c.rank, c.size());
            scatter_into(c, src, &mine, 0, e.alg, 0);
            gather_into(c, &mine, dst, 0, e.alg, 1);
        }
    }
    e.finish();
}

#[track_caller]
fn all_to_all_along(ops: AlongDim<'_>, groups: &ReplicaGroups, alg: Algorithm) {
    let (op, dim) = ("all_to_all", ops.2);
    let check = |r: usize, alg, s: &MeshView, d: &MeshView| {
        check_scaled(op, ("src", s), ("dst", d), dim, 1)?;
        if !s.shape()[dim].is_multiple_of(r) {
            return Err(NkiError::new(
                ErrorKind::ShapeMismatch,
                op,
                format!(
                    "dimension {dim} of src {} does not split into {r} blocks, one per rank of the group",
                    s.describe()
                ),
            ));
        }
        if alg == Algorithm::RecursiveDoubling {
            return Err(NkiError::new(
                ErrorKind::InvalidArgument,
                op,
                "alg: all_to_all runs with Algorithm::Ring or Algorithm::Direct, not RecursiveDoubling",
            ));
        }
        Ok(())
    };
    let splits = |_, _: &MeshView| true;
    if let Some(e) = enter(
        CollectiveKind::AllToAll,
        Some(alg),
        ops,
        groups,
        splits,
        check,
    ) {
        direct::all_to_all(&e.c, &e.src, &e.dst, dim, e.alg == Algorithm::Ring);
        e.finish();
    }
}

/// Sends `src` of group rank `a` to `dst` of group rank `b` for every pair `(a, b)`; each rank
/// sends at most once and receives at most once.
#[track_caller]
pub fn collective_permute<'a>(
    src: impl Into<Operand<'a>>,
    dst: impl Into<Operand<'a>>,
    pairs: &[(usize, usize)],
    groups: &ReplicaGroups,
) {
    let op = "collective_permute";
    let check = |r: usize, _, s: &MeshView, d: &MeshView| {
        check_scaled(op, ("src", s), ("dst", d), 0, 1)?;
        for (i, &(a, b)) in pairs.iter().enumerate() {
            if a >= r || b >= r {
                return Err(NkiError::new(
                    ErrorKind::InvalidDevice,
                    op,
                    format!("pairs: ({a}, {b}) names a rank outside the group of {r} ranks (ranks 0..{r})"),
                ));
            }
            if pairs[..i].iter().any(|&(x, y)| x == a || y == b) {
                return Err(NkiError::new(
                    ErrorKind::InvalidArgument,
                    op,
                    format!("pairs: ({a}, {b}) repeats a source or a destination rank in {pairs:?} (each rank sends at most once and receives at most once)"),
                ));
            }
        }
        Ok(())
    };
    let ops = (src.into(), dst.into(), 0);
    let splits = |_, _: &MeshView| true;
    if let Some(e) = enter(CollectiveKind::Permute, None, ops, groups, splits, check) {
        direct::permute(&e.c, &e.src, &e.dst, pairs);
        e.finish();
    }
}

/// Blocks until every device of the running device's group reached the barrier (each signals
/// every other, then waits for their signals).
#[track_caller]
pub fn barrier(groups: &ReplicaGroups) {
    let loc = SourceLoc::caller();
    let sig = CollectiveKind::Barrier.name().to_string();
    let Some(c) = Call::begin(CollectiveKind::Barrier, None, groups, sig, loc) else {
        return;
    };
    c.name_slots(0);
    for r in 1..c.size() {
        super::dma::signal(c.peer(c.rank + r), c.sem(0), 1, loc);
    }
    c.wait_received(c.size() - 1, 0);
    c.finish();
}
