//! The launch a kernel instance belongs to, as the HBM layer sees it: the state its instances
//! share ([`LaunchShared`]: cancellation, HBM writers, outputs, launch id) and which instance
//! runs on this thread ([`current_instance`]).

use super::writers::Writers;
use crate::abort::Cancellation;
use std::cell::Cell;
use std::sync::atomic::Ordering;
use std::sync::Arc;

thread_local! {
    /// The (launch, program instance) running on this thread (`(0, 0)` when none): what a
    /// tile's owner check and the HBM access tracker read, without borrowing the context.
    static CURRENT: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

/// Records that instance `key.1` of launch `key.0` runs on this thread from now on (`(0, 0)`:
/// none).
pub(crate) fn set_current(key: (u64, u64)) {
    CURRENT.with(|k| k.set(key));
}

/// The (launch id, instance) of the kernel instance running on this thread, if any.
#[inline]
pub(crate) fn current_instance() -> Option<(u64, u64)> {
    let k = CURRENT.try_with(Cell::get).unwrap_or((0, 0));
    // Launch ids start at 1.
    (k.0 != 0).then_some(k)
}

/// State shared by all instances of one launch.
pub(crate) struct LaunchShared {
    pub(crate) cancelled: Cancellation,
    /// The launch's HBM writers (the output-dependency check of HBM writes).
    pub(crate) writers: Writers,
    /// The launch's kernel outputs (see `Hbm::as_output`).
    pub(crate) outputs: Vec<Arc<super::storage::HbmStorage>>,
    /// The tensors the kernel allocates in shared HBM (`nl::ndarray(.., nl::shared_hbm)`, its
    /// returned outputs), in allocation order: every instance's `k`-th such allocation is
    /// the launch's `k`-th tensor (see `crate::tensor`).
    pub(crate) kernel_outputs: std::sync::Mutex<Vec<Arc<super::storage::HbmStorage>>>,
    /// A number no other launch of the process has (tiles remember the launch they belong to).
    pub(crate) id: u64,
}

impl LaunchShared {
    /// The shared state of a launch that checks no outputs (mesh launches, unit tests): the
    /// tensors borrowed as outputs on this thread so far are let go, so that no later launch
    /// takes them for its own.
    pub(crate) fn new() -> Arc<LaunchShared> {
        drop(super::storage::take_pending_outputs());
        Self::with_outputs(Vec::new())
    }

    /// The shared state of a launch whose kernel outputs are `outputs`.
    pub(crate) fn with_outputs(outputs: Vec<Arc<super::storage::HbmStorage>>) -> Arc<LaunchShared> {
        static NEXT_LAUNCH: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let id = NEXT_LAUNCH.fetch_add(1, Ordering::Relaxed);
        for s in &outputs {
            s.output_of.store(id, Ordering::Relaxed);
        }
        Arc::new(LaunchShared {
            cancelled: Cancellation::new(),
            writers: Writers::new(),
            outputs,
            kernel_outputs: Default::default(),
            id,
        })
    }

    /// True when the tensor with storage id `id` is an output of this launch.
    pub(crate) fn is_output(&self, id: u64) -> bool {
        self.outputs.iter().any(|s| s.id == id)
    }
}
