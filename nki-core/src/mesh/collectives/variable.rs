//! The variable-length collectives of NKI 0.7, `all_gather_v` and `all_to_all_v`, plain or
//! split into a `_prepare` half (reads the metadata and starts the collective's fixed cost
//! ahead, so it overlaps whatever the kernel does before the trigger) and a `_trigger` half
//! (moves the data). Both run on the mesh layer's [`Call`]: direct sends to every peer, timed
//! like the fixed-size collectives (the fixed cost [`Step::Setup`]/[`Step::Prepare`], then one
//! link transfer per non-empty chunk).
//!
//! The rules, from the 0.7 pages `nki.collectives.all_gather_v`, `all_to_all_v` and their
//! `_prepare` / `_trigger`:
//! - `srcs` and `dsts` hold exactly one HBM tensor each, read as a flat row-major buffer of
//!   elements (here: a contiguous view of the running device's shard);
//! - the metadata is a uint32 tensor `[2-4, group]`: row 0 send counts, row 1 send
//!   displacements, row 2 receive counts (`recv_counts_known`), row 3 receive displacements
//!   (`has_rdispls`), all in elements;
//! - `all_gather_v` reads column 0 of rows 0/1 only: one chunk `src[sd .. sd + sc]` goes to
//!   every rank of the group (itself included); `all_to_all_v` sends `src[sd[j] .. sd[j] +
//!   sc[j]]` to rank `j`;
//! - the chunk from rank `s` lands at `dst[s * slot ..]`, `slot = dst.numel / group`
//!   (all_gather_v's page; for all_to_all_v nki-library's `unpermute_a2av` reads it the same
//!   fixed-stride way), or with `has_rdispls` at the receiver's row 3, column `s`;
//! - receive counts, when given, must equal what the sender sends;
//! - each prepare is followed by exactly one trigger, with no other prepare in between (the
//!   prepares share one slot); the split is not supported on NeuronSwitch (trn3) fabrics.
//!
//! Estimate mode has no metadata values, so a `_v` collective there is a clear
//! [`ErrorKind::NoData`] error naming the op and its line (never a guess).

use super::{check_local, Call, CollectiveKind, Operand};
use crate::access::{Ap, Shape};
use crate::context;
use crate::dtype::DType;
use crate::error::{ErrorKind, NkiError, Result, SourceLoc};
use crate::mesh::device::with_device;
use crate::mesh::dma::signal;
use crate::mesh::links::Fabric;
use crate::mesh::replay::Step;
use crate::mesh::sharding::MeshView;
use crate::mesh::topology::ReplicaGroups;
use std::cell::Cell;
use std::marker::PhantomData;

/// Semaphore slots: metadata arrivals, the local copy, the data from the peers.
const META: u32 = 0;
const LOCAL: u32 = 2;
const DATA: u32 = 4;

/// Which variable-length collective.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Form {
    /// `all_gather_v`.
    Gather,
    /// `all_to_all_v`.
    ToAll,
}

impl Form {
    fn kind(self) -> CollectiveKind {
        match self {
            Form::Gather => CollectiveKind::AllGatherV,
            Form::ToAll => CollectiveKind::AllToAllV,
        }
    }

    /// The name of the call: the plain form, or its `_prepare` / `_trigger` half.
    fn op(self, half: Half) -> &'static str {
        match (self, half) {
            (Form::Gather, Half::Plain) => "all_gather_v",
            (Form::Gather, Half::Prepare) => "all_gather_v_prepare",
            (Form::Gather, Half::Trigger) => "all_gather_v_trigger",
            (Form::ToAll, Half::Plain) => "all_to_all_v",
            (Form::ToAll, Half::Prepare) => "all_to_all_v_prepare",
            (Form::ToAll, Half::Trigger) => "all_to_all_v_trigger",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Half {
    Plain,
    Prepare,
    Trigger,
}

/// The metadata flags of a `_v` collective.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VFlags {
    /// The metadata has receive counts (row 2); each must equal what its sender sends.
    pub recv_counts_known: bool,
    /// The metadata has receive displacements (row 3): where each sender's chunk lands.
    pub has_rdispls: bool,
}

impl VFlags {
    /// Rows the metadata needs: row 3 sits after row 2 even when the counts are unknown.
    fn rows(self) -> usize {
        if self.has_rdispls {
            4
        } else if self.recv_counts_known {
            3
        } else {
            2
        }
    }
}

thread_local! {
    /// The prepare of this device thread waiting for its trigger (0.7's single prepare slot).
    static PENDING: Cell<Option<(&'static str, SourceLoc)>> = const { Cell::new(None) };
}

/// A prepared variable-length collective (the `NkiInstruction` 0.7's `_prepare` returns):
/// hand it to the matching `_trigger`. Dropping it untriggered is an error naming the prepare.
#[must_use = "a prepared collective must be passed to its trigger"]
pub struct PreparedCollective {
    state: Option<Prepared>,
    form: Form,
    loc: SourceLoc,
    /// Device-thread bound: the trigger runs on the device that prepared.
    _thread: PhantomData<*const ()>,
}

/// What the prepare read and checked.
struct Prepared {
    c: Call,
    flags: VFlags,
    src: MeshView,
    dst: MeshView,
}

impl Drop for PreparedCollective {
    fn drop(&mut self) {
        if PENDING.get().is_some_and(|p| p.1 == self.loc) {
            PENDING.set(None);
        }
        if self.state.is_some() && !std::thread::panicking() {
            let op = self.form.op(Half::Prepare);
            let trigger = self.form.op(Half::Trigger);
            context::raise(
                NkiError::new(
                    ErrorKind::Synchronization,
                    op,
                    format!("this {op} was never passed to {trigger}: each prepare must be followed by exactly one trigger"),
                ),
                self.loc,
            );
        }
    }
}

fn err(kind: ErrorKind, op: &'static str, msg: String) -> NkiError {
    NkiError::new(kind, op, msg)
}

/// The one tensor of a 0.7 tensor list (`srcs`/`dsts` "must be exactly one").
fn single<'v>(op: &'static str, what: &str, list: &'v [MeshView]) -> Result<&'v MeshView> {
    match list {
        [v] => Ok(v),
        _ => Err(err(
            ErrorKind::InvalidArgument,
            op,
            format!(
                "{what} must hold exactly one HBM tensor, got {}",
                list.len()
            ),
        )),
    }
}

/// `len` elements of the contiguous view `v` from flat element `start`.
fn flat(v: &MeshView, start: usize, len: usize) -> MeshView {
    let mut ap = Ap::contiguous(Shape::new(&[len]).expect("a non-empty chunk"));
    ap.offset = v.ap.offset + start;
    MeshView {
        shards: v.shards.clone(),
        device: v.device,
        ap,
    }
}

/// Reads the metadata (exact integers) of the running device; `None` in estimate mode.
fn read_metadata(c: &Call, op: &'static str, m: &Operand) -> Result<Option<Vec<u64>>> {
    let dtype = match m {
        Operand::Hbm(v) => v.storage().dtype,
        Operand::Tile(t) => t.dtype(),
    };
    if dtype != DType::U32 {
        return Err(err(
            ErrorKind::DType,
            op,
            format!("metadata_tensor must be uint32, got {}", dtype.name()),
        ));
    }
    if !c.executes() {
        return Ok(None);
    }
    let slots = match m {
        Operand::Hbm(v) => {
            check_local(c, op, v, "metadata_tensor");
            crate::hbm::observe::notify(v.storage().id, &v.ap, false, op, c.loc);
            v.hbm_view().gather(op)?
        }
        Operand::Tile(t) => t.gather_slots(op, c.loc),
    };
    Ok(Some(slots.iter().map(|&s| dtype.int(s) as u64).collect()))
}

/// Checks the views and the metadata's shape (`[rows, group]`).
fn check_operands(
    op: &'static str,
    r: usize,
    flags: VFlags,
    src: &MeshView,
    dst: &MeshView,
    meta: &[usize],
) -> Result<()> {
    let need = flags.rows();
    if meta.len() != 2 || !(need..=4).contains(&meta[0]) || meta[1] != r {
        let rows = match need {
            4 => "4".to_string(),
            n => format!("{n}-4"),
        };
        return Err(err(
            ErrorKind::ShapeMismatch,
            op,
            format!("metadata_tensor must be [{rows}, {r}] (rows: send counts, send displacements, recv counts, recv displacements; one column per rank of the group of {r}), got {meta:?}"),
        ));
    }
    for (what, v) in [("srcs", src), ("dsts", dst)] {
        if !v.ap.is_contiguous() {
            return Err(err(
                ErrorKind::InvalidArgument,
                op,
                format!(
                    "{what} tensor {} is not contiguous: {op} reads it as a flat buffer of elements",
                    v.describe()
                ),
            ));
        }
    }
    let (sd, dd) = (src.storage().dtype, dst.storage().dtype);
    if sd != dd {
        return Err(err(
            ErrorKind::DType,
            op,
            format!(
                "srcs is {} but dsts is {}: the chunks move bit for bit",
                sd.name(),
                dd.name()
            ),
        ));
    }
    Ok(())
}

/// Row `row`, column `col` of `r`-column metadata.
fn at(m: &[u64], r: usize, row: usize, col: usize) -> u64 {
    m[row * r + col]
}

/// The chunk a rank whose metadata is `m` sends to group rank `to`: (count, displacement).
fn chunk(form: Form, m: &[u64], r: usize, to: usize) -> (u64, u64) {
    let col = if form == Form::Gather { 0 } else { to };
    (at(m, r, 0, col), at(m, r, 1, col))
}

/// Checks that every chunk rank `rank` sends lies inside its `src` of `n` elements.
fn check_sends(op: &'static str, form: Form, m: &[u64], r: usize, src: &MeshView) -> Result<()> {
    let n = src.numel() as u64;
    let targets = if form == Form::Gather { 1 } else { r };
    for j in 0..targets {
        let (count, displ) = chunk(form, m, r, j);
        if displ + count > n {
            return Err(err(
                ErrorKind::OutOfBounds,
                op,
                format!(
                    "metadata column {j} sends elements {displ}..{} of srcs {}, which has {n} elements",
                    displ + count,
                    src.describe()
                ),
            ));
        }
    }
    Ok(())
}

/// Enters a `_v` collective: checks its operands, reads and checks this rank's metadata,
/// publishes it to the group and starts the fixed cost (ahead, for a `_prepare`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn prepare(
    form: Form,
    split: bool,
    srcs: &[MeshView],
    dsts: &[MeshView],
    group: &ReplicaGroups,
    metadata: Operand,
    flags: VFlags,
    loc: SourceLoc,
) -> PreparedCollective {
    let op = form.op(if split { Half::Prepare } else { Half::Plain });
    let mut handle = PreparedCollective {
        state: None,
        form,
        loc,
        _thread: PhantomData,
    };
    let fabric = with_device(op, loc, |d| d.shared.links.spec().fabric);
    if split {
        if let Some((other, at)) = PENDING.get() {
            context::raise(
                err(
                    ErrorKind::Synchronization,
                    op,
                    format!("the {other} at {at} has not been triggered yet: each prepare must be followed by exactly one trigger, with no other prepare in between"),
                ),
                loc,
            );
        }
        if fabric == Fabric::Switched {
            context::raise(
                err(
                    ErrorKind::InvalidArgument,
                    op,
                    format!("NeuronSwitch fabrics (trn3) do not support the prepare/trigger split: call {} instead", form.op(Half::Plain)),
                ),
                loc,
            );
        }
    }
    let src = context::check(single(op, "srcs", srcs), loc).clone();
    let dst = context::check(single(op, "dsts", dsts), loc).clone();
    let sig = format!(
        "{} of {:?} into {:?} with metadata {:?} ({flags:?})",
        form.kind().name(),
        src.shape(),
        dst.shape(),
        metadata.shape()
    );
    let Some(mut c) = Call::open(form.kind(), None, group, sig, loc, split) else {
        return handle;
    };
    check_local(&c, op, &src, "srcs tensor");
    check_local(&c, op, &dst, "dsts tensor");
    c.elem_bytes = src.storage().dtype.size();
    let r = c.size();
    context::check(
        check_operands(op, r, flags, &src, &dst, &metadata.shape()).map_err(|e| c.at_rank(e)),
        loc,
    );
    let Some(m) = context::check(read_metadata(&c, op, &metadata), loc) else {
        context::raise(
            err(
                ErrorKind::NoData,
                op,
                format!("estimate mode has no metadata values: the counts and displacements of {} come from metadata_tensor at run time; run it in simulate mode", form.kind().name()),
            ),
            loc,
        );
    };
    context::check(check_sends(op, form, &m, r, &src), loc);
    if let Some(e) = c.shared.collectives().get_mut(&c.seq) {
        e.metadata.insert(c.rank, m);
    }
    c.name_slots(META);
    for q in 1..r {
        signal(c.peer(c.rank + q), c.sem(META), 1, loc);
    }
    // The metadata exchange is part of the fixed cost: it is sent before it starts.
    c.fixed_cost(form.kind(), split);
    if split {
        PENDING.set(Some((op, loc)));
    }
    handle.state = Some(Prepared { c, flags, src, dst });
    handle
}

/// Where each rank's chunk lands: (count, source displacement, destination start) of the
/// chunk group rank `from` sends to group rank `to`, checked against the receiver's `dst`
/// (`n` elements) and its receive counts.
#[allow(clippy::too_many_arguments)]
fn landing(
    op: &'static str,
    form: Form,
    flags: VFlags,
    metas: &[Vec<u64>],
    r: usize,
    from: usize,
    to: usize,
    n: u64,
) -> Result<(u64, u64, u64)> {
    let (count, displ) = chunk(form, &metas[from], r, to);
    let slot = n / r as u64;
    let start = if flags.has_rdispls {
        at(&metas[to], r, 3, from)
    } else {
        if count > slot {
            return Err(err(
                ErrorKind::OutOfBounds,
                op,
                format!("rank {from} sends {count} elements to rank {to}, whose dsts slot for it holds {slot} (dsts elements / group size; give has_rdispls to place chunks yourself)"),
            ));
        }
        from as u64 * slot
    };
    if start + count > n {
        return Err(err(
            ErrorKind::OutOfBounds,
            op,
            format!("rank {from}'s {count} elements land at {start}..{} of rank {to}'s dsts, which has {n} elements (row 3, column {from} of rank {to}'s metadata)", start + count),
        ));
    }
    if flags.recv_counts_known {
        let want = at(&metas[to], r, 2, from);
        if want != count {
            return Err(err(
                ErrorKind::InvalidArgument,
                op,
                format!("rank {from} sends {count} elements to rank {to}, but rank {to}'s receive count for it (row 2, column {from}) is {want}"),
            ));
        }
    }
    Ok((count, displ, start))
}

/// With receive displacements: the chunks group rank `to` receives land in ranges of its
/// `dsts` that do not overlap (two senders writing one element would race), else an error
/// naming the collective, the receiving rank, both senders and the metadata cells.
fn check_receives(
    op: &'static str,
    form: Form,
    metas: &[Vec<u64>],
    r: usize,
    to: usize,
) -> Result<()> {
    let mut spans: Vec<(u64, u64, usize)> = (0..r)
        .filter_map(|from| {
            let count = chunk(form, &metas[from], r, to).0;
            let start = at(&metas[to], r, 3, from);
            (count > 0).then_some((start, start + count, from))
        })
        .collect();
    spans.sort_unstable();
    for pair in spans.windows(2) {
        let ((s0, e0, a), (s1, e1, b)) = (pair[0], pair[1]);
        if s1 < e0 {
            return Err(err(
                ErrorKind::InvalidArgument,
                op,
                format!(
                    "the receive displacements of rank {to} overlap: rank {a}'s chunk lands at \
                     {s0}..{e0} and rank {b}'s at {s1}..{e1} of rank {to}'s dsts (row 3, \
                     columns {a} and {b} of rank {to}'s metadata; row 0 of each sender's holds \
                     the counts): each sender's chunk needs a range of its own"
                ),
            ));
        }
    }
    Ok(())
}

/// Runs the data movement of a prepared `_v` collective (its `_trigger`, or the second half
/// of the plain form).
pub(crate) fn trigger(form: Form, mut p: PreparedCollective, split: bool, loc: SourceLoc) {
    let op = form.op(if split { Half::Trigger } else { Half::Plain });
    if p.form != form {
        let (made, at) = (p.form.op(Half::Prepare), p.loc);
        // This error is the one to report, not the handle's drop.
        p.state = None;
        context::raise(
            err(
                ErrorKind::InvalidArgument,
                op,
                format!(
                    "the collective passed in was prepared by {made} at {at}: pass it to {}",
                    p.form.op(Half::Trigger)
                ),
            ),
            loc,
        );
    }
    if PENDING.get().is_some_and(|q| q.1 == p.loc) {
        PENDING.set(None);
    }
    let Some(Prepared {
        mut c,
        flags,
        src,
        dst,
    }) = p.state.take()
    else {
        return;
    };
    c.loc = loc;
    if split {
        let (seq, name) = (c.seq, form.kind().name());
        with_device(op, loc, |d| {
            d.flush();
            d.log(Step::Trigger { seq, name, loc });
            d.log(Step::Begin { seq });
        });
    }
    let r = c.size();
    if r > 1 {
        c.wait_received(r - 1, META);
    }
    let metas: Vec<Vec<u64>> = {
        let reg = c.shared.collectives();
        let e = reg.get(&c.seq).expect("entered in prepare");
        (0..r).map(|q| e.metadata[&q].clone()).collect()
    };
    let n = dst.numel() as u64;
    let plan: Vec<(u64, u64, u64)> = (0..r)
        .map(|to| context::check(landing(op, form, flags, &metas, r, c.rank, to, n), loc))
        .collect();
    if flags.has_rdispls {
        context::check(check_receives(op, form, &metas, r, c.rank), loc);
    }
    let sent: u64 = plan.iter().map(|p| p.0).sum();
    let received: u64 = (0..r)
        .map(|from| chunk(form, &metas[from], r, c.rank).0)
        .sum();
    c.set_bytes(sent.max(received) * c.elem_bytes as u64);
    let part = |v: &MeshView, start: u64, count: u64| flat(v, start as usize, count as usize);
    let (count, displ, start) = plan[c.rank];
    if count > 0 {
        c.local_copy(&part(&src, displ, count), &part(&dst, start, count), LOCAL);
    }
    c.name_slots(DATA);
    let mut ids = Vec::new();
    for q in 1..r {
        let to = (c.rank + q) % r;
        let (count, displ, start) = plan[to];
        if count > 0 {
            let there = part(&dst, start, count).on(c.peer(to));
            ids.push(c.send(&part(&src, displ, count), &there, DATA));
        } else {
            // An empty chunk still tells its receiver it is done.
            signal(c.peer(to), c.sem(DATA), 1, loc);
        }
    }
    c.wait_sent(&ids, DATA);
    if r > 1 {
        c.wait_received(r - 1, DATA);
    }
    c.finish();
}
