//! The device context: which device of the mesh the running thread is, its position on the
//! mesh axes (`device_id`, `axis_index`, `axis_size`), and its modelled clock.
//!
//! Each device runs on its own thread and holds a [`DeviceState`] there; what it does is handed
//! to the timing replay ([`super::replay`]) as it goes: the kernel code it ran between two
//! communication ops is modelled by the NeuronCore timing model as one segment.

use super::replay::Step;
use super::shared::MeshShared;
use crate::context;
use crate::error::SourceLoc;
use crate::memory::MemoryPeak;
use crate::spmd::CoreStream;
use std::cell::RefCell;
use std::sync::Arc;

/// The per-device state of a running mesh launch (thread-local on the device's thread).
pub(crate) struct DeviceState {
    pub(crate) id: usize,
    pub(crate) shared: Arc<MeshShared>,
    /// Program id of the instance running now.
    pub(crate) program_id: Vec<usize>,
    /// Next user semaphore id.
    pub(crate) next_sem: u32,
    /// Next collective sequence number.
    pub(crate) next_collective: u32,
    /// Next LNC=1 core barrier number ([`super::stack`]).
    pub(crate) next_core_barrier: u32,
}

thread_local! {
    static DEVICE: RefCell<Option<DeviceState>> = const { RefCell::new(None) };
}

/// Installs the device state on this thread.
pub(crate) fn install(s: DeviceState) {
    DEVICE.with(|d| *d.borrow_mut() = Some(s));
}

/// Removes the device state from this thread.
pub(crate) fn take() -> Option<DeviceState> {
    DEVICE.with(|d| d.borrow_mut().take())
}

/// Runs `f` on this thread's device state; outside a mesh launch, fails with
/// [`ErrorKind::OutsideKernel`](crate::ErrorKind::OutsideKernel).
pub(crate) fn with_device<R>(
    op: &'static str,
    loc: SourceLoc,
    f: impl FnOnce(&mut DeviceState) -> R,
) -> R {
    // A branch the launch does not take acts on no device: its tracing ends here.
    crate::shadow::stop_if_active();
    let outside =
        || format!("{op} called outside of a mesh launch (run the kernel with MeshLaunch)");
    context::with_installed(&DEVICE, op, loc, outside, f)
}

/// The access hook of device threads (see `hbm::observe`): a local load or store of a
/// shard is checked against the copies it is not ordered with ([`super::order`]).
pub(crate) fn observe(
    id: u64,
    ap: &crate::access::Ap,
    writes: bool,
    op: &'static str,
    loc: SourceLoc,
) {
    let Some((d, shared)) = DEVICE.with(|s| {
        s.try_borrow()
            .ok()
            .and_then(|g| g.as_ref().map(|s| (s.id, s.shared.clone())))
    }) else {
        return;
    };
    shared.sync.local(d, id, ap, writes, op, loc);
}

/// The running device's id, if this thread runs a mesh device.
pub(crate) fn try_id() -> Option<usize> {
    DEVICE.with(|d| d.borrow().as_ref().map(|s| s.id))
}

/// The running device's id.
pub(crate) fn current_id(op: &'static str, loc: SourceLoc) -> usize {
    with_device(op, loc, |d| d.id)
}

/// The logical id of the device running the kernel (`nki.collectives.rank_id` over the whole
/// mesh; Pallas' `lax.axis_index` over all axes).
#[track_caller]
pub fn device_id() -> usize {
    current_id("mesh.device_id", SourceLoc::caller())
}

/// Number of devices in the mesh.
#[track_caller]
pub fn num_devices() -> usize {
    with_device("mesh.num_devices", SourceLoc::caller(), |d| {
        d.shared.mesh.num_devices()
    })
}

/// The running device's coordinate along mesh axis `name` (`lax.axis_index(name)`).
#[track_caller]
pub fn axis_index(name: &str) -> usize {
    let loc = SourceLoc::caller();
    let r = with_device("mesh.axis_index", loc, |d| {
        let m = &d.shared.mesh;
        m.axis(name).map(|a| m.coords(d.id)[a])
    });
    context::check(r, loc)
}

/// The number of devices along mesh axis `name` (`lax.axis_size(name)`).
#[track_caller]
pub fn axis_size(name: &str) -> usize {
    let loc = SourceLoc::caller();
    let r = with_device("mesh.axis_size", loc, |d| d.shared.mesh.axis_size(name));
    context::check(r, loc)
}

impl DeviceState {
    /// Models the instruction records left since the last call as one kernel segment (the
    /// NeuronCore timing model, without the launch's pre/postamble) and logs it.
    pub(crate) fn flush(&mut self) {
        if !self.shared.mode.records() {
            return;
        }
        let recs = context::try_with_ctx(|c| c.take_records()).unwrap_or_default();
        if recs.is_empty() {
            return;
        }
        let stream = CoreStream {
            nc: 0,
            instances: vec![(self.program_id.clone(), recs)],
        };
        let p = crate::timing::model(&[stream], self.shared.target, MemoryPeak::default());
        // The segment's instructions only: the launch pays its pre/postamble once, at the end
        // of the replay, not once per stretch between two communication ops.
        let dur = p.active_ns;
        let dma_busy = p.engine("DMA").map_or(0.0, |e| e.active_ns);
        let dma_fraction = if dur > 0.0 {
            (dma_busy / dur).min(1.0)
        } else {
            0.0
        };
        let spans = if self.shared.engine_spans {
            super::report::segment_spans(&p, 0.0).collect()
        } else {
            Vec::new()
        };
        self.log(Step::Compute {
            dur,
            dma_fraction,
            instructions: p.instructions,
            spans,
        });
    }

    /// Hands the device's next step to the timing replay ([`super::sync::MeshSync::log`]).
    pub(crate) fn log(&self, step: Step) {
        self.shared.sync.log(self.id, step);
    }
}
