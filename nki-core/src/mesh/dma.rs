//! Remote DMA and semaphores: Pallas' `make_async_remote_copy` / `make_async_copy` and
//! `semaphore_signal` / `semaphore_wait`, on the HBM shards of a mesh.
//!
//! A copy moves its values when it starts (the source is read then, the destination written)
//! and signals its send semaphore (here) and receive semaphore (at the destination) at once;
//! whether anything touches those elements unordered with the copy is decided by
//! happens-before ([`super::order`]), as if the data landed when the receive wait completes.
//! Every op is handed to the timing replay ([`super::replay`]), which decides when the bytes
//! leave and land; a wait blocks the device thread until the replay completed it, and consumes
//! the increments the replay consumed (the earliest landings); a semaphore read returns what
//! the replay read at the device's modelled clock. The device threads otherwise interleave as
//! the host runs them.

use super::deadlock::{Blocked, InCollective};
use super::device::with_device;
use super::operand::Operand;
use super::replay::Step;
use super::sem::SemKey;
use super::sharding::MeshView;
use super::sync::{CopyState, WaitFail};
use super::topology::DeviceRef;
use crate::context;
use crate::error::{ErrorKind, NkiError, Result, SourceLoc};
use std::cell::Cell;

/// A DMA semaphore, allocated symmetrically on every device (the n-th semaphore a kernel
/// allocates is the same semaphore on every device, as scratch semaphores of a Pallas kernel).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Semaphore {
    key: SemKey,
}

/// Allocates the next semaphore of the running device, named `name` in error messages.
#[track_caller]
pub fn semaphore(name: &str) -> Semaphore {
    let loc = SourceLoc::caller();
    let (id, shared, key) = with_device("mesh.semaphore", loc, |d| {
        let key = SemKey::User(d.next_sem);
        d.next_sem += 1;
        (d.id, d.shared.clone(), key)
    });
    shared.sync.name(id, key, name, loc);
    Semaphore { key }
}

impl Semaphore {
    /// Adds `inc` to this semaphore on the running device.
    #[track_caller]
    pub fn signal(&self, inc: u32) {
        let loc = SourceLoc::caller();
        let id = with_device("semaphore_signal", loc, |d| d.id);
        signal(id, self.key, inc, loc);
    }

    /// Adds `inc` to this semaphore on another device (a remote signal crosses the links).
    #[track_caller]
    pub fn signal_device(&self, device: impl Into<DeviceRef>, inc: u32) {
        let loc = SourceLoc::caller();
        let d = with_device("semaphore_signal", loc, |d| {
            d.shared.mesh.resolve(&device.into())
        });
        signal(context::check(d, loc), self.key, inc, loc);
    }

    /// Waits until this semaphore on the running device holds `value`, then subtracts it.
    #[track_caller]
    pub fn wait(&self, value: u32) {
        wait(self.key, value, SourceLoc::caller());
    }

    /// The current value on the running device, as the timing replay reads it: the
    /// increments of this semaphore that have landed by the device's modelled clock and were
    /// not consumed by its waits — the same whatever order the host ran the devices in (an
    /// increment still in flight at that modelled time is not counted, even if its signal ran
    /// on the host already). The call is a step of the device's timeline: its kernel code so
    /// far is modelled first (as for `wait` and `signal`), the device thread blocks until the
    /// replay reached the read, and the read occupies the device for one sequencer
    /// instruction (one `MIN_II` of the Sync engine; no source gives a semaphore-read cost). So a loop polling `value()` until a peer's signal lands
    /// advances modelled time and ends, even when that peer first waits on the polling device.
    /// A loop polling for a signal that never comes spins for ever, as on the hardware;
    /// [`Semaphore::wait`] says what to wait for and reports a deadlock instead.
    #[track_caller]
    pub fn value(&self) -> u32 {
        let loc = SourceLoc::caller();
        let (id, shared) = with_device("semaphore_read", loc, |d| {
            d.flush();
            (d.id, d.shared.clone())
        });
        let label = sem_name(&shared.sync.lock(), id, self.key);
        let step = Step::Read {
            key: self.key,
            ns: read_ns(shared.target),
            label,
            loc,
        };
        let v = outcome(shared.sync.read(id, step), loc);
        u32::try_from(v).unwrap_or(u32::MAX)
    }
}

/// The modelled time of a semaphore read, in ns. No source gives a semaphore-read cost
/// (hardware.md §7 lists "semaphore and cross-engine sync latency" and the Sync Engine's
/// costs among the gaps). Its nearest documented kin is a register read (`Opcode::ScalarLoad`
/// in `timing::cost`), which the model charges the sequencer floor of every non-TensorE
/// instruction, one `MIN_II` (64 cycles \[E S13\]); taken here on the clock of the Sync
/// Engine, the sequencer-only engine that triggers DMAs (hardware.md §2.1) \[A\].
pub(crate) fn read_ns(target: crate::target::Target) -> f64 {
    let spec = target.spec();
    spec.min_ii as f64 / spec.engine_ghz(crate::engine::Engine::Sync)
}

/// The outcome of a blocking wait or read: a deadlock fails its kernel at `loc`.
fn outcome<T>(r: std::result::Result<T, WaitFail>, loc: SourceLoc) -> T {
    r.unwrap_or_else(|WaitFail(e)| context::raise(e, loc))
}

/// The name of semaphore `key` of device `id` in messages and trace spans.
fn sem_name(s: &super::sync::SyncState, id: usize, key: SemKey) -> String {
    s.sems[id]
        .get(&key)
        .map(|x| x.name.clone())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| default_name(key))
}

/// Signals semaphore `key` of device `target` from the running device.
pub(crate) fn signal(target: usize, key: SemKey, inc: u32, loc: SourceLoc) {
    let (shared, me) = with_device("semaphore_signal", loc, |d| {
        d.flush();
        (d.shared.clone(), d.id)
    });
    shared.sync.signal(me, target, key, inc, loc);
}

/// Blocks the running device until semaphore `key` holds `value` and subtracts it. A
/// deadlock fails the kernel.
pub(crate) fn wait(key: SemKey, value: u32, loc: SourceLoc) {
    wait_in(key, value, loc, None)
}

/// [`wait`] inside collective `collective` (a deadlock then names the devices of its group
/// that never called it).
pub(crate) fn wait_in(key: SemKey, value: u32, loc: SourceLoc, collective: Option<InCollective>) {
    let (id, shared) = with_device("semaphore_wait", loc, |d| {
        d.flush();
        (d.id, d.shared.clone())
    });
    let label = sem_name(&shared.sync.lock(), id, key);
    let step = Step::Wait {
        key,
        value,
        label,
        loc,
    };
    let r = shared.sync.wait(id, key, step, |s| Blocked {
        sem: sem_name(s, id, key),
        key,
        value,
        loc,
        collective: collective.clone(),
    });
    outcome(r, loc)
}

fn default_name(key: SemKey) -> String {
    match key {
        SemKey::User(n) => format!("semaphore #{n}"),
        SemKey::Collective { seq, slot } => format!("collective #{seq} slot {slot}"),
        SemKey::CoreBarrier(n) => format!("core barrier #{n}"),
    }
}

/// An async copy (remote or local) made by [`remote_copy`] or [`async_copy`]: `start` it,
/// later `wait` on it. A copy started and never waited on is an error at kernel end.
pub struct AsyncCopy<'a> {
    src: Operand<'a>,
    dst: MeshView,
    send: Option<SemKey>,
    recv: SemKey,
    made_at: SourceLoc,
    id: Cell<Option<u64>>,
    send_waited: Cell<bool>,
}

impl std::fmt::Debug for AsyncCopy<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AsyncCopy to {:?} made at {}", self.dst, self.made_at)
    }
}

/// A copy from `src` (an HBM view or a tile of the running device) to `dst` on any device
/// (Pallas' `make_async_remote_copy`): when it completes, `send` is signalled on the running
/// device and `recv` on the destination device.
#[track_caller]
pub fn remote_copy<'a>(
    src: impl Into<Operand<'a>>,
    dst: &MeshView,
    send: &Semaphore,
    recv: &Semaphore,
) -> AsyncCopy<'a> {
    make(
        src.into(),
        dst,
        Some(send.key),
        recv.key,
        SourceLoc::caller(),
    )
}

/// A copy from `src` (an HBM view or a tile) to a view on the running device, signalling `sem`
/// on completion (Pallas' `make_async_copy`).
#[track_caller]
pub fn async_copy<'a>(
    src: impl Into<Operand<'a>>,
    dst: &MeshView,
    sem: &Semaphore,
) -> AsyncCopy<'a> {
    let loc = SourceLoc::caller();
    let me = with_device("async_copy", loc, |d| d.id);
    if dst.device != me {
        context::raise(
            NkiError::new(
                ErrorKind::InvalidDevice,
                "async_copy",
                format!(
                    "a local async copy writes to the running device {me}, but its destination {} is on device {}: use remote_copy",
                    dst.describe(),
                    dst.device
                ),
            ),
            loc,
        );
    }
    make(src.into(), dst, None, sem.key, loc)
}

fn make<'a>(
    src: Operand<'a>,
    dst: &MeshView,
    send: Option<SemKey>,
    recv: SemKey,
    loc: SourceLoc,
) -> AsyncCopy<'a> {
    let me = with_device("remote_copy", loc, |d| d.id);
    let mismatch = |m: String| {
        context::raise(
            NkiError::new(ErrorKind::ShapeMismatch, "remote_copy", m),
            loc,
        )
    };
    match &src {
        Operand::Hbm(v) if v.device != me => context::raise(
            NkiError::new(
                ErrorKind::InvalidDevice,
                "remote_copy",
                format!(
                    "the source {} of a copy started on device {me} must be on that device",
                    v.describe()
                ),
            ),
            loc,
        ),
        Operand::Hbm(v) if v.shape() != dst.shape() => mismatch(format!(
            "source {} and destination {} have different shapes",
            v.describe(),
            dst.describe()
        )),
        Operand::Tile(t) if t.shape() != dst.shape() => mismatch(format!(
            "source tile {:?} and destination {} have different shapes",
            t.shape(),
            dst.describe()
        )),
        _ => {}
    }
    AsyncCopy {
        src,
        dst: dst.clone(),
        send,
        recv,
        made_at: loc,
        id: Cell::new(None),
        send_waited: Cell::new(false),
    }
}

impl AsyncCopy<'_> {
    /// Starts the copy.
    #[track_caller]
    pub fn start(&self) {
        let loc = SourceLoc::caller();
        if self.id.get().is_some() {
            context::raise(
                sync_error(
                    "start",
                    format!("the copy made at {} was started twice", self.made_at),
                ),
                loc,
            );
        }
        let id = match &self.src {
            Operand::Hbm(v) => start_copy(v, &self.dst, self.send, self.recv, loc),
            Operand::Tile(t) => {
                let bytes = (t.shape().iter().product::<usize>() * t.dtype().size()) as u64;
                let to = self.dst.storage().dtype;
                let values = || {
                    let mut slots = t.gather_slots("remote_copy", loc);
                    t.dtype().cast_slots(to, &mut slots);
                    Ok(slots)
                };
                start_copy_from(values, None, bytes, &self.dst, self.send, self.recv, loc)
            }
        };
        self.id.set(Some(id));
    }

    /// Waits until the copy's bytes left the running device (its send semaphore); a local
    /// copy waits for completion.
    #[track_caller]
    pub fn wait_send(&self) {
        let loc = SourceLoc::caller();
        let Some(id) = self.id.get() else {
            context::raise(
                sync_error(
                    "wait",
                    format!(
                        "the copy made at {} is waited on before it was started",
                        self.made_at
                    ),
                ),
                loc,
            );
        };
        if self.send_waited.replace(true) {
            context::raise(
                sync_error(
                    "wait",
                    format!("the copy made at {} is waited on twice", self.made_at),
                ),
                loc,
            );
        }
        wait(self.send.unwrap_or(self.recv), 1, loc);
        let shared = with_device("wait", loc, |d| d.shared.clone());
        shared.sync.copy_waited(id);
    }

    /// Waits until a copy of the same kind landed on the running device (its receive semaphore
    /// here): in SPMD code every device receives what its neighbour sent.
    #[track_caller]
    pub fn wait_recv(&self) {
        if self.send.is_some() {
            wait(self.recv, 1, SourceLoc::caller());
        }
    }

    /// `wait_send` then `wait_recv` (Pallas' `.wait()`).
    #[track_caller]
    pub fn wait(&self) {
        self.wait_send();
        self.wait_recv();
    }
}

fn sync_error(op: &'static str, m: String) -> NkiError {
    NkiError::new(ErrorKind::Synchronization, op, m)
}

/// Starts a copy from `src` (on the running device) to `dst`: checks it against copies still
/// in flight into the same buffer, moves the values, logs the transfer and signals `send` (on
/// the running device) and `recv` (on the destination). Returns its id.
pub(crate) fn start_copy(
    src: &MeshView,
    dst: &MeshView,
    send: Option<SemKey>,
    recv: SemKey,
    loc: SourceLoc,
) -> u64 {
    let values = || {
        let v = src.hbm_view();
        let mut slots = v.gather("remote_copy")?;
        v.dtype().cast_slots(dst.storage().dtype, &mut slots);
        Ok(slots)
    };
    let from = Some((src.storage().id, src.runs()));
    start_copy_from(values, from, src.bytes(), dst, send, recv, loc)
}

/// [`start_copy`] of the `bytes` whose slots (of `dst`'s dtype: a DMA moves equal dtypes bit
/// for bit) `values` reads (an HBM view, whose shard and element runs are `from`, or a tile).
/// The values are written before the semaphores are signalled, so a wait that consumes the
/// copy's increment sees them; the happens-before checks decide whether anything saw them
/// unordered ([`super::order`]).
fn start_copy_from(
    values: impl FnOnce() -> Result<Vec<f32>>,
    from: Option<(u64, Vec<(usize, usize)>)>,
    bytes: u64,
    dst: &MeshView,
    send: Option<SemKey>,
    recv: SemKey,
    loc: SourceLoc,
) -> u64 {
    let (shared, me) = with_device("remote_copy", loc, |d| (d.shared.clone(), d.id));
    let state = CopyState::new(me, dst.device, loc);
    note_written(dst.storage());
    if shared.mode.executes() {
        context::check(values().and_then(|v| write_slots(dst, &v)), loc);
    }
    with_device("remote_copy", loc, |d| d.flush());
    let to = (dst.storage().id, dst.runs());
    shared.sync.start_copy(state, from, to, (send, recv), bytes)
}

/// Notes `st` written by the running launch (for the unwritten-output check): remote copies
/// and collectives write shards without a store's writer tags, in every mode.
pub(crate) fn note_written(st: &crate::hbm::HbmStorage) {
    if let Some(base) = context::try_with_ctx(|c| c.shared.writers.base()) {
        st.last_writer
            .fetch_max(base, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Writes row-major values `vals` into `dst`, made slots of its dtype first (rounded;
/// int32/uint32 as bit patterns).
pub(crate) fn write_values(dst: &MeshView, vals: &mut [f32]) -> Result<()> {
    dst.storage().dtype.to_slots(vals, false);
    write_slots(dst, vals)
}

/// Writes row-major slots of `dst`'s dtype into `dst` as they are.
fn write_slots(dst: &MeshView, vals: &[f32]) -> Result<()> {
    let st = dst.storage();
    let mut g = st.write();
    let values = g
        .values
        .as_mut()
        .ok_or_else(|| crate::hbm::no_data(st, "remote_copy"))?;
    dst.ap.scatter(values, vals);
    Ok(())
}
