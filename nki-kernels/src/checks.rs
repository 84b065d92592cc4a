//! Argument checks shared by the kernels: a failed check fails the launch with an
//! [`NkiError`] naming the kernel and the offending shapes, at the kernel's call site.

use nki_core::prelude::*;

/// Fails the launch with an `InvalidArgument` error from `op` unless `ok`.
#[track_caller]
pub(crate) fn require(op: &'static str, ok: bool, message: impl FnOnce() -> String) {
    nl::require(ok, op, message);
}

/// Fails the launch with a `ShapeMismatch` error from `op` unless `what`'s shape is `want`.
#[track_caller]
pub(crate) fn expect_shape(op: &'static str, what: &str, got: &[usize], want: &[usize]) {
    if got != want {
        nl::fail(NkiError::new(
            ErrorKind::ShapeMismatch,
            op,
            format!("{what} has shape {got:?}, expected {want:?}"),
        ));
    }
}

/// Fails the launch unless `shape` has `rank` dimensions; returns it.
#[track_caller]
pub(crate) fn expect_rank<'a>(
    op: &'static str,
    what: &str,
    shape: &'a [usize],
    rank: usize,
) -> &'a [usize] {
    require(op, shape.len() == rank, || {
        format!("{what} must be {rank}-D, got shape {shape:?}")
    });
    shape
}
