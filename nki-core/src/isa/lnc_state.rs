//! The meeting point of the two cores of an LNC=2 launch (each core's instance reaches it
//! through its [`InstanceState`](crate::context::InstanceState); the calls that meet there are
//! in `isa::lnc`).

use crate::dtype::DType;
use crate::error::SourceLoc;
use std::cell::Cell;
use std::sync::{Arc, Condvar, Mutex};

/// What a sendrecv hands the other core: its `src` slots.
pub(crate) struct Payload {
    pub(crate) dtype: DType,
    pub(crate) shape: Vec<usize>,
    pub(crate) slots: Vec<f32>,
}

/// One core's arrival at its `k`-th synchronising call.
pub(crate) struct Arrival {
    pub(crate) api: &'static str,
    pub(crate) loc: SourceLoc,
    pub(crate) payload: Option<Payload>,
}

/// What the two cores of a launch share.
#[derive(Default)]
pub(crate) struct PairState {
    /// Per core, its arrivals so far.
    pub(crate) arrivals: [Vec<Arrival>; 2],
    /// Set when a core's kernel ended: `Some(true)` when it ended without error.
    pub(crate) finished: [Option<bool>; 2],
    /// Per core, per call: its record indices in the core's record stream.
    pub(crate) syncs: [Vec<SyncCall>; 2],
}

/// The records of one synchronising call on one core (indices in the core's record stream).
#[derive(Clone, Copy)]
pub(crate) struct SyncCall {
    /// The point after which the other core may write into this core's `dst` (sendrecv
    /// only): it follows this core's earlier reads and writes of `dst`.
    pub(crate) ready: Option<usize>,
    /// What the other core waits for (this core's send, or its barrier signal).
    pub(crate) signal: usize,
    /// This core's wait for the other core's signal.
    pub(crate) wait: usize,
}

/// The meeting point of the LNC=2 launch an instance runs in, `None` in other launches (the
/// launch sets it in the instance's [`InstanceState`](crate::context::InstanceState)).
#[derive(Clone, Default)]
pub(crate) struct Link(pub(crate) Option<Arc<Pair>>);

/// The meeting point of the two cores of an LNC=2 launch.
#[derive(Default)]
pub(crate) struct Pair {
    state: Mutex<PairState>,
    pub(crate) cv: Condvar,
}

impl Pair {
    /// A meeting point for a new LNC=2 launch.
    pub(crate) fn new() -> Arc<Pair> {
        Arc::new(Pair::default())
    }

    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, PairState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Marks core `c`'s kernel as ended (`ok` when without error) and wakes the other.
    pub(crate) fn finish(&self, c: usize, ok: bool) {
        if let Some(f) = self.lock().finished.get_mut(c) {
            *f = Some(ok);
        }
        self.cv.notify_all();
    }

    /// The cross-core edges of the launch, as (earlier record, later record) pairs of
    /// `(core, index in its stream)`: each core's wait waits for the other's signal, and each
    /// core's send into the other's `dst` waits for the other's ready point.
    pub(crate) fn edges(&self) -> Vec<((usize, usize), (usize, usize))> {
        let st = self.lock();
        let mut out = Vec::new();
        for c in 0..2 {
            let o = 1 - c;
            for (mine, theirs) in st.syncs[c].iter().zip(&st.syncs[o]) {
                out.push(((o, theirs.signal), (c, mine.wait)));
                if let Some(ready) = theirs.ready {
                    out.push(((o, ready), (c, mine.signal)));
                }
            }
        }
        out
    }
}

// The launch's meeting point does not change while the instance runs.
crate::shadow::state_value_by_clone!(Link);

/// The barrier of an LNC=1 launch's device with the other core of its HBM stack (op, line),
/// installed on the device's thread by a mesh launch at LNC=1 (the mesh sits above the
/// instructions, so it hands its barrier down instead of being called).
pub(crate) type StackBarrier = fn(&'static str, SourceLoc);

thread_local! {
    static STACK_BARRIER: Cell<Option<StackBarrier>> = const { Cell::new(None) };
}

/// Installs `b` as this thread's LNC=1 core barrier (`None` removes it).
pub(crate) fn install_stack_barrier(b: Option<StackBarrier>) {
    STACK_BARRIER.with(|s| s.set(b));
}

/// This thread's LNC=1 core barrier, if a mesh launch at LNC=1 runs here.
pub(crate) fn stack_barrier() -> Option<StackBarrier> {
    STACK_BARRIER.with(Cell::get)
}
