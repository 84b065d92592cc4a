//! The device context: which device of the mesh the running thread is, its position on the
//! mesh axes (`device_id`, `axis_index`, `axis_size`), and its modelled clock.
//!
//! Each device runs on its own thread and holds a [`DeviceState`] there. Its clock advances
//! by the modelled time of the kernel code it ran since the last communication op (the
//! instruction records of that stretch, modelled by the NeuronCore timing model as one
//! segment) and jumps forward when a wait completes later than the clock.

use super::launch::MeshShared;
use super::report::MeshSpan;
use crate::context;
use crate::error::{ErrorKind, NkiError, SourceLoc};
use crate::memory::MemoryPeak;
use crate::spmd::CoreStream;
use std::cell::RefCell;
use std::sync::Arc;

/// The per-device state of a running mesh launch (thread-local on the device's thread).
pub(crate) struct DeviceState {
    pub(crate) id: usize,
    pub(crate) shared: Arc<MeshShared>,
    /// Modelled time of the device, in ns.
    pub(crate) clock: f64,
    /// Program id of the instance running now.
    pub(crate) program_id: Vec<usize>,
    /// Next user semaphore id.
    pub(crate) next_sem: u32,
    /// Next collective sequence number.
    pub(crate) next_collective: u32,
    /// Modelled kernel (compute) time.
    pub(crate) compute_ns: f64,
    /// Modelled time spent waiting on semaphores.
    pub(crate) wait_ns: f64,
    /// Bytes this device sent with copies.
    pub(crate) bytes_sent: u64,
    /// Timeline spans (trace).
    pub(crate) spans: Vec<MeshSpan>,
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
/// [`ErrorKind::OutsideKernel`].
pub(crate) fn with_device<R>(
    op: &'static str,
    loc: SourceLoc,
    f: impl FnOnce(&mut DeviceState) -> R,
) -> R {
    match DEVICE.with(|d| d.borrow_mut().as_mut().map(f)) {
        Some(r) => r,
        None => context::raise(
            NkiError::new(
                ErrorKind::OutsideKernel,
                op,
                format!("{op} called outside of a mesh launch (run the kernel with MeshLaunch)"),
            ),
            loc,
        ),
    }
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
    /// Models the instruction records left since the last call as one kernel segment and
    /// advances the clock by its latency, stretched by the DMA time the device's in-flight
    /// transfers take from a DMA-bound segment.
    pub(crate) fn flush(&mut self) {
        if !self.shared.mode.records() {
            return;
        }
        let recs = context::try_with_ctx(|c| std::mem::take(&mut c.records)).unwrap_or_default();
        if recs.is_empty() {
            return;
        }
        let stream = CoreStream {
            nc: 0,
            instances: vec![(self.program_id.clone(), recs)],
        };
        let p = crate::timing::model(&[stream], self.shared.target, MemoryPeak::default());
        let t0 = self.clock;
        let len = p.latency_ns;
        let dma_busy = p.engine("DMA").map_or(0.0, |e| e.active_ns);
        let dma_fraction = if len > 0.0 {
            (dma_busy / len).min(1.0)
        } else {
            0.0
        };
        let stolen = self.shared.wires().dma_share(self.id, t0, t0 + len);
        let total = len + stolen * dma_fraction;
        if self.shared.engine_spans {
            self.spans.extend(super::report::segment_spans(&p, t0));
        }
        self.spans.push(MeshSpan::kernel(t0, total, p.instructions));
        self.clock += total;
        self.compute_ns += total;
    }

    /// Moves the clock to `t` if later (a completed wait), recording the blocked time.
    pub(crate) fn wait_until(&mut self, t: Option<f64>, what: &str, loc: SourceLoc) {
        let Some(t) = t else { return };
        if t > self.clock {
            self.spans
                .push(MeshSpan::wait(self.clock, t - self.clock, what, loc));
            self.wait_ns += t - self.clock;
            self.clock = t;
        }
    }

    /// `device 1 (x=0, y=1)`.
    pub(crate) fn describe(&self) -> String {
        self.shared.mesh.describe_device(self.id)
    }
}
