//! `nki.collectives` by its NKI 0.7 names: [`all_reduce`], [`all_gather`], [`reduce_scatter`],
//! [`all_to_all`], [`collective_permute`], [`rank_id`] and [`ReplicaGroup`], each a thin call
//! into the mesh collectives beside this file, with the reducing operator of the reducing
//! collectives as a parameter ([`ReduceOp`]: add, max or min; 0.7's `op=`). The algorithm is
//! the runtime's choice ([`Algorithm::Runtime`]).
//!
//! Not provided: the variable-length `_v` forms (`all_gather_v`, `all_to_all_v` and their
//! `_prepare` / `_trigger` split) and the `collective_permute_implicit*` family.

use super::{Algorithm, Operand};
use crate::mesh::topology::ReplicaGroups;
use std::cell::Cell;

/// NKI's `ReplicaGroup`: the groups of ranks a collective runs within (the mesh layer's
/// [`ReplicaGroups`]).
pub type ReplicaGroup = ReplicaGroups;

/// The reducing operator of a reducing collective (0.7 `op=nl.add / nl.maximum / nl.minimum`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReduceOp {
    /// Sum (in f32, rounded once to the destination dtype).
    #[default]
    Add,
    /// Element-wise maximum.
    Max,
    /// Element-wise minimum.
    Min,
}

impl ReduceOp {
    /// `a op x`.
    pub(crate) fn apply(self, a: f32, x: f32) -> f32 {
        match self {
            ReduceOp::Add => a + x,
            ReduceOp::Max => a.max(x),
            ReduceOp::Min => a.min(x),
        }
    }
}

thread_local! {
    /// The reducing operator of the collective this device thread is running.
    static REDUCE: Cell<ReduceOp> = const { Cell::new(ReduceOp::Add) };
}

/// The reducing operator of the collective running on this thread (add outside these calls).
pub(crate) fn current_reduce() -> ReduceOp {
    REDUCE.with(Cell::get)
}

/// Runs `f` with `op` as this thread's reducing operator (add again afterwards, also when `f`
/// unwinds).
fn reducing<R>(op: ReduceOp, f: impl FnOnce() -> R) -> R {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            REDUCE.with(|r| r.set(ReduceOp::Add));
        }
    }
    REDUCE.with(|r| r.set(op));
    let _reset = Reset;
    f()
}

/// The rank of the device running the kernel over the whole mesh (`nki.collectives.rank_id`).
#[track_caller]
pub fn rank_id() -> usize {
    crate::mesh::device::device_id()
}

/// `dst = op over the group of every rank's src` (`nki.collectives.all_reduce`).
#[track_caller]
pub fn all_reduce<'a>(
    src: impl Into<Operand<'a>>,
    dst: impl Into<Operand<'a>>,
    op: ReduceOp,
    group: &ReplicaGroup,
) {
    let (s, d) = (src.into(), dst.into());
    reducing(op, || super::all_reduce(s, d, group, Algorithm::Runtime));
}

/// `dst` = every rank's `src` concatenated along `dim`, in rank order
/// (`nki.collectives.all_gather`).
#[track_caller]
pub fn all_gather<'a>(
    src: impl Into<Operand<'a>>,
    dst: impl Into<Operand<'a>>,
    dim: usize,
    group: &ReplicaGroup,
) {
    super::all_gather(src, dst, dim, group, Algorithm::Runtime);
}

/// `dst` = this rank's block (along `dim`) of `op` over every rank's `src`
/// (`nki.collectives.reduce_scatter`).
#[track_caller]
pub fn reduce_scatter<'a>(
    src: impl Into<Operand<'a>>,
    dst: impl Into<Operand<'a>>,
    dim: usize,
    op: ReduceOp,
    group: &ReplicaGroup,
) {
    let (s, d) = (src.into(), dst.into());
    reducing(op, || {
        super::reduce_scatter(s, d, dim, group, Algorithm::Runtime)
    });
}

/// Block `j` (along `dim`) of this rank's `src` goes to rank `j`, block `i` of `dst` comes
/// from rank `i` (`nki.collectives.all_to_all`).
#[track_caller]
pub fn all_to_all<'a>(
    src: impl Into<Operand<'a>>,
    dst: impl Into<Operand<'a>>,
    dim: usize,
    group: &ReplicaGroup,
) {
    super::all_to_all(src, dst, dim, group, Algorithm::Runtime);
}

/// Each `(from, to)` rank pair sends `src` of rank `from` into `dst` of rank `to`
/// (`nki.collectives.collective_permute`).
#[track_caller]
pub fn collective_permute<'a>(
    src: impl Into<Operand<'a>>,
    dst: impl Into<Operand<'a>>,
    pairs: &[(usize, usize)],
    group: &ReplicaGroup,
) {
    super::collective_permute(src, dst, pairs, group);
}
