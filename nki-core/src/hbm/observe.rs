//! A hook on tracked HBM accesses for launches that check more than one program's order: a
//! mesh launch installs it on its device threads (`mesh::order`) to check local loads and
//! stores of shards against the remote copies in flight. Elsewhere no hook is installed and
//! an access costs one thread-local read here.
//!
//! The hook sees plain data (tensor id, access pattern, read or write, op, line), so this
//! module depends on nothing of `hbm` and the mesh on nothing here but the hook's type.

use crate::access::Ap;
use crate::error::SourceLoc;
use std::cell::Cell;

/// The hook: `(tensor id, view, writes, op, line)` of one access by the running thread.
pub(crate) type Hook = fn(u64, &Ap, bool, &'static str, SourceLoc);

thread_local! {
    static HOOK: Cell<Option<Hook>> = const { Cell::new(None) };
}

/// Installs `hook` on this thread (`None` removes it).
pub(crate) fn install(hook: Option<Hook>) {
    HOOK.with(|h| h.set(hook));
}

/// Reports an access of tensor `id` through view `ap` by operation `op` at `loc` to the hook
/// installed on this thread, if any.
#[inline]
pub(crate) fn notify(id: u64, ap: &Ap, writes: bool, op: &'static str, loc: SourceLoc) {
    if let Some(h) = HOOK.with(Cell::get) {
        h(id, ap, writes, op, loc);
    }
}
