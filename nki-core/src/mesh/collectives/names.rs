//! `nki.collectives` by its NKI 0.7 names: [`all_reduce`], [`all_gather`], [`reduce_scatter`],
//! [`all_to_all`], [`collective_permute`], [`rank_id`] and [`ReplicaGroup`], each a thin call
//! into the mesh collectives beside this file, with the reducing operator of the reducing
//! collectives as a parameter ([`ReduceOp`]: add, max or min; 0.7's `op=`). The algorithm is
//! the runtime's choice ([`Algorithm::Runtime`]).
//!
//! The variable-length forms [`all_gather_v`] and [`all_to_all_v`] take flat HBM buffers and a
//! uint32 metadata tensor of counts and displacements, plain or split into
//! `_prepare` / `_trigger` ([`PreparedCollective`]); see `variable.rs` for their rules.
//!
//! The ring permutes [`collective_permute_implicit`], [`collective_permute_implicit_reduce`]
//! and [`collective_permute_implicit_current_processing_rank_id`] take per-channel lists of HBM
//! views; see `implicit.rs` for their rules.

use super::implicit;
use super::kind::reducing;
use super::variable::{self, Form};
use super::{Algorithm, Operand};
use crate::builder::instruction;
use crate::error::SourceLoc;
use crate::isa::NkiScalar;
use crate::mesh::sharding::MeshView;
use crate::mesh::topology::ReplicaGroups;

pub use super::kind::ReduceOp;
pub use super::variable::{PreparedCollective, VFlags};

/// NKI's `ReplicaGroup`: the groups of ranks a collective runs within (the mesh layer's
/// [`ReplicaGroups`]).
pub type ReplicaGroup = ReplicaGroups;

/// The rank of the device running the kernel over the whole mesh (`nki.collectives.rank_id`).
#[track_caller]
pub fn rank_id() -> usize {
    crate::mesh::device::device_id()
}

/// The position of the device running the kernel within its group of `group` (NKI 0.8
/// `nki.collectives.self_index_in_replica_group`): its rank within the collectives that
/// group runs. A device in no group of `group` is an error naming the call and its line.
#[track_caller]
pub fn self_index_in_replica_group(group: &ReplicaGroup) -> usize {
    let loc = SourceLoc::caller();
    let me = crate::mesh::device::device_id();
    match group.find(me) {
        Some((_, index)) => index,
        None => crate::context::raise(
            crate::error::NkiError::new(
                crate::error::ErrorKind::InvalidArgument,
                "nki.collectives.self_index_in_replica_group",
                format!(
                    "device {me} is in no group of the replica groups {:?}",
                    group.groups()
                ),
            ),
            loc,
        ),
    }
}

instruction! {
    /// `dst = op over the group of every rank's src` (`nki.collectives.all_reduce`).
    pub fn all_reduce<'a>(
        src: into Operand<'a>, dst: into Operand<'a>, op: ReduceOp, group: &ReplicaGroup,
    ) {
        reducing(op, || super::all_reduce(src, dst, group, Algorithm::Runtime));
    }
}

/// The collectives along one dimension that take no operator, declared once: each calls the
/// mesh collective of its name with the runtime's algorithm.
macro_rules! by_runtime_along_dim {
    ($($(#[$doc:meta])* $name:ident;)*) => {$(
        $(#[$doc])*
        #[track_caller]
        pub fn $name<'a>(src: impl Into<Operand<'a>>, dst: impl Into<Operand<'a>>, dim: usize, group: &ReplicaGroup) {
            super::$name(src, dst, dim, group, Algorithm::Runtime);
        }
    )*};
}

by_runtime_along_dim! {
    /// `dst` = every rank's `src` concatenated along `dim`, in rank order
    /// (`nki.collectives.all_gather`).
    all_gather;
    /// Block `j` (along `dim`) of this rank's `src` goes to rank `j`, block `i` of `dst` comes
    /// from rank `i` (`nki.collectives.all_to_all`).
    all_to_all;
}

instruction! {
    /// `dst` = this rank's block (along `dim`) of `op` over every rank's `src`
    /// (`nki.collectives.reduce_scatter`).
    pub fn reduce_scatter<'a>(
        src: into Operand<'a>, dst: into Operand<'a>, dim: usize, op: ReduceOp,
        group: &ReplicaGroup,
    ) {
        reducing(op, || super::reduce_scatter(src, dst, dim, group, Algorithm::Runtime));
    }
}

instruction! {
    /// Each `(from, to)` rank pair sends `src` of rank `from` into `dst` of rank `to`
    /// (`nki.collectives.collective_permute`).
    pub fn collective_permute<'a>(
        src: impl Into<Operand<'a>>, dst: impl Into<Operand<'a>>, pairs: &[(usize, usize)],
        group: &ReplicaGroup,
    ) {
        super::collective_permute(src, dst, pairs, group);
    }
}

/// The plain form, `_prepare` and `_trigger` of one variable-length collective (the three
/// differ between the two collectives only in their names, docs and [`Form`]).
macro_rules! variable_length {
    ($form:expr, $plain:ident, $prepare:ident, $trigger:ident, $what:literal) => {
        #[doc = concat!("Variable-length ", $what, " (`nki.collectives.", stringify!($plain), "`). `srcs` and `dsts` hold exactly one HBM tensor each, read as flat buffers; `metadata` is uint32 `[2-4, group]` (send counts, send displacements, recv counts, recv displacements). Not available in estimate mode (the counts are run-time values).")]
        #[track_caller]
        pub fn $plain<'a>(
            srcs: &[MeshView],
            dsts: &[MeshView],
            group: &ReplicaGroup,
            metadata: impl Into<Operand<'a>>,
            flags: VFlags,
        ) {
            let loc = SourceLoc::caller();
            let p = variable::prepare($form, false, srcs, dsts, group, metadata.into(), flags, loc);
            variable::trigger($form, p, false, loc);
        }

        #[doc = concat!("The first half of a split [`", stringify!($plain), "`] (`nki.collectives.", stringify!($prepare), "`): reads the metadata and starts the collective's fixed cost, which overlaps the kernel's work until [`", stringify!($trigger), "`]. A second prepare before the trigger is an error.")]
        #[track_caller]
        pub fn $prepare<'a>(
            srcs: &[MeshView],
            dsts: &[MeshView],
            group: &ReplicaGroup,
            metadata: impl Into<Operand<'a>>,
            flags: VFlags,
        ) -> PreparedCollective {
            let loc = SourceLoc::caller();
            variable::prepare($form, true, srcs, dsts, group, metadata.into(), flags, loc)
        }

        #[doc = concat!("Moves the data of a prepared [`", stringify!($plain), "`] (`nki.collectives.", stringify!($trigger), "`).")]
        #[track_caller]
        pub fn $trigger(prepared: PreparedCollective) {
            variable::trigger($form, prepared, true, SourceLoc::caller());
        }
    };
}

variable_length!(
    Form::Gather,
    all_gather_v,
    all_gather_v_prepare,
    all_gather_v_trigger,
    "all-gather: each rank's one chunk `src[sd .. sd + sc]` (metadata rows 0/1, column 0) lands in every rank's `dst`, at slot `rank * dst.numel / group` or, with `flags.has_rdispls`, at the receiver's row 3."
);

variable_length!(
    Form::ToAll,
    all_to_all_v,
    all_to_all_v_prepare,
    all_to_all_v_trigger,
    "all-to-all: rank `i` sends `src[sd[j] .. sd[j] + sc[j]]` (metadata rows 0/1, column `j`) to rank `j`, where it lands at slot `i * dst.numel / group` or, with `flags.has_rdispls`, at rank `j`'s row 3, column `i`."
);

/// Each rank of a rank-list sends its channel `i` source to its successor in the list (the
/// ring) and receives its predecessor's into its channel `i` destination
/// (`nki.collectives.collective_permute_implicit`). One HBM view per channel list entry;
/// `channel_ids` names each entry's channel (0.7's default is `&[0]`).
#[track_caller]
pub fn collective_permute_implicit(
    srcs_by_channel: &[Vec<MeshView>],
    dsts_by_channel: &[Vec<MeshView>],
    group: &ReplicaGroup,
    channel_ids: &[usize],
) {
    let (s, d, loc) = (srcs_by_channel, dsts_by_channel, SourceLoc::caller());
    implicit::permute(s, None, d, group, ReduceOp::Add, channel_ids, loc);
}

/// [`collective_permute_implicit`] of `op(srcs0[i], srcs1[i])`, reduced by the DMA engines in
/// f32 and rounded to the destination dtype (`nki.collectives.collective_permute_implicit_reduce`).
#[track_caller]
pub fn collective_permute_implicit_reduce(
    srcs0_by_channel: &[Vec<MeshView>],
    srcs1_by_channel: &[Vec<MeshView>],
    dsts_by_channel: &[Vec<MeshView>],
    group: &ReplicaGroup,
    op: ReduceOp,
    channel_ids: &[usize],
) {
    let (a, b, d) = (srcs0_by_channel, srcs1_by_channel, dsts_by_channel);
    implicit::permute(a, Some(b), d, group, op, channel_ids, SourceLoc::caller());
}

/// The rank (a mesh device id, as [`rank_id`]) whose data this rank holds after
/// `iteration_id` steps of a ring permute: its own at 0, then its predecessors' in the ring
/// order of its rank-list, as a scalar
/// (`nki.collectives.collective_permute_implicit_current_processing_rank_id`). The channel
/// does not change the ring order (an assumption: the page does not say it does).
#[track_caller]
pub fn collective_permute_implicit_current_processing_rank_id(
    iteration_id: usize,
    group: &ReplicaGroup,
    channel_id: usize,
) -> NkiScalar {
    implicit::processing_rank(iteration_id, group, channel_id, SourceLoc::caller())
}
