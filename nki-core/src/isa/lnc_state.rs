//! The meeting point of the two cores of an LNC=2 launch (held by each core's context; the
//! calls that meet there are in `isa::lnc`).

use crate::dtype::DType;
use crate::error::SourceLoc;
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
    /// Per core, per call: the (signal, wait) record indices in its record stream.
    pub(crate) syncs: [Vec<(usize, usize)>; 2],
}

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

    /// The cross-core edges of the launch, as (signal record, wait record) pairs of
    /// `(core, index in its stream)`: each core's wait waits for the other's signal.
    pub(crate) fn edges(&self) -> Vec<((usize, usize), (usize, usize))> {
        let st = self.lock();
        let mut out = Vec::new();
        for c in 0..2 {
            let o = 1 - c;
            for (k, &(_, wait)) in st.syncs[c].iter().enumerate() {
                if let Some(&(signal, _)) = st.syncs[o].get(k) {
                    out.push(((o, signal), (c, wait)));
                }
            }
        }
        out
    }
}
