//! Semaphores of all devices of a mesh launch, blocking waits, the registry of remote copies
//! (for the never-waited check at kernel end) and the happens-before state of the launch
//! ([`super::order`]).
//!
//! A wait for `v` consumes `v` increments (their modelled times are replayed afterwards, see
//! [`super::replay`]) and joins the clocks they carry. A wait that cannot be satisfied blocks
//! its device thread; [`super::deadlock`] decides, under the same lock, when no device can
//! ever signal again.

use super::deadlock::{self, Blocked};
use super::order::{Clock, CopyId, Marks, Order};
use super::sem::SemKey;
use crate::access::Ap;
use crate::context::LaunchShared;
use crate::error::{NkiError, SourceLoc};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// One increment of a semaphore: the copy that signalled it, the clock it carries, and who
/// signalled it where.
#[derive(Clone, Debug)]
struct Unit {
    copy: Option<u64>,
    clock: Clock,
    from: usize,
    loc: SourceLoc,
}

/// A semaphore on one device.
#[derive(Debug, Default)]
pub(crate) struct Sem {
    pub(crate) name: String,
    pub(crate) loc: Option<SourceLoc>,
    units: Vec<Unit>,
}

impl Sem {
    /// Current value.
    pub(crate) fn value(&self) -> usize {
        self.units.len()
    }

    /// The device and line of the oldest increment not consumed.
    pub(crate) fn first_signal(&self) -> Option<(usize, SourceLoc)> {
        self.units.first().map(|u| (u.from, u.loc))
    }
}

/// A remote or local async copy between its start and its completion being observed.
#[derive(Clone, Debug)]
pub(crate) struct CopyState {
    pub(crate) src: usize,
    pub(crate) dst: usize,
    pub(crate) loc: SourceLoc,
    send_waited: bool,
    delivered: bool,
}

impl CopyState {
    /// A copy from device `src` to device `dst` started at `loc`: neither its send nor its
    /// delivery observed yet.
    pub(crate) fn new(src: usize, dst: usize, loc: SourceLoc) -> CopyState {
        CopyState {
            src,
            dst,
            loc,
            send_waited: false,
            delivered: false,
        }
    }
}

/// The two events a remote copy waits for before it leaves the registry.
#[derive(Clone, Copy, Debug)]
enum CopySide {
    /// The sender waited for the copy's send semaphore.
    SendWaited,
    /// The receiver took the copy's increment.
    Delivered,
}

/// Everything under the mesh's one synchronisation lock.
pub(crate) struct SyncState {
    pub(crate) sems: Vec<HashMap<SemKey, Sem>>,
    /// Devices whose kernel is still running.
    pub(crate) live: usize,
    /// Devices blocked in a wait, and on what.
    pub(crate) blocked: BTreeMap<usize, Blocked>,
    /// The deadlock found, reported to every blocked device.
    pub(crate) deadlock: Option<NkiError>,
    copies: HashMap<u64, CopyState>,
    next_copy: u64,
    /// The devices that entered each collective, by sequence number.
    joined: BTreeMap<u32, BTreeSet<usize>>,
    /// Happens-before: clocks, shard accesses, findings.
    pub(crate) order: Order,
    names: Vec<String>,
}

/// Why a wait ended without being satisfied.
pub(crate) enum WaitFail {
    /// Another device failed: unwind quietly.
    Cancelled,
    /// This wait is part of a deadlock (or another mesh error).
    Error(NkiError),
}

/// The semaphores of a mesh launch and the condition variable blocked devices sleep on.
pub(crate) struct MeshSync {
    state: Mutex<SyncState>,
    cv: Condvar,
    launch: Arc<LaunchShared>,
}

impl MeshSync {
    /// The state of a launch over devices named `names`.
    pub(crate) fn new(names: Vec<String>, launch: Arc<LaunchShared>) -> MeshSync {
        let devices = names.len();
        MeshSync {
            state: Mutex::new(SyncState {
                sems: (0..devices).map(|_| HashMap::new()).collect(),
                live: devices,
                blocked: BTreeMap::new(),
                deadlock: None,
                copies: HashMap::new(),
                next_copy: 0,
                joined: BTreeMap::new(),
                order: Order::new(names.clone()),
                names,
            }),
            cv: Condvar::new(),
            launch,
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, SyncState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Names semaphore `key` of `device` (at its allocation).
    pub(crate) fn name(&self, device: usize, key: SemKey, name: &str, loc: SourceLoc) {
        let mut g = self.lock();
        let s = g.sems[device].entry(key).or_default();
        s.name = name.to_string();
        s.loc = Some(loc);
    }

    /// Adds `n` increments to semaphore `key` of `device`, signalled by device `from` at
    /// `loc` (they carry `from`'s clock).
    pub(crate) fn signal(&self, from: usize, device: usize, key: SemKey, n: u32, loc: SourceLoc) {
        let mut g = self.lock();
        let clock = g.order.release(from);
        g.signal(device, key, n, None, clock, from, loc);
        drop(g);
        self.cv.notify_all();
    }

    /// Registers the shards `ids` (named, shaped, with their written marks; shard `i` on
    /// device `i`) the running kernel addresses.
    pub(crate) fn register(&self, shards: &[(u64, String, crate::access::Shape)], marks: &[Marks]) {
        let mut g = self.lock();
        if shards.first().is_some_and(|s| g.order.knows(s.0)) {
            return;
        }
        for (d, ((id, name, shape), m)) in shards.iter().zip(marks).enumerate() {
            g.order.register(*id, name, *shape, d, m);
        }
    }

    /// A local load (`writes` false) or store of the elements `ap` of shard `id` by `device`.
    pub(crate) fn local(
        &self,
        device: usize,
        id: u64,
        ap: &Ap,
        writes: bool,
        op: &'static str,
        loc: SourceLoc,
    ) {
        let mut g = self.lock();
        if g.order.knows(id) {
            g.order.local(device, id, ap, writes, op, loc);
        }
    }

    /// Device `device` entered collective `seq`.
    pub(crate) fn joined(&self, seq: u32, device: usize) {
        self.lock().joined.entry(seq).or_default().insert(device);
    }

    /// The launch's happens-before verdict (see [`Order::verdict`]).
    pub(crate) fn verdict(&self) -> Option<NkiError> {
        self.lock().order.verdict()
    }

    /// The current value of semaphore `key` on `device`.
    pub(crate) fn value(&self, device: usize, key: SemKey) -> usize {
        self.lock().sems[device].get(&key).map_or(0, Sem::value)
    }

    /// Blocks until semaphore `key` of `device` holds `value`, then consumes that much.
    pub(crate) fn wait(
        &self,
        device: usize,
        key: SemKey,
        value: u32,
        describe: impl Fn(&SyncState) -> Blocked,
    ) -> std::result::Result<(), WaitFail> {
        let mut g = self.lock();
        loop {
            if self.launch.cancelled.any_failed() {
                g.blocked.remove(&device);
                return Err(WaitFail::Cancelled);
            }
            if let Some(e) = &g.deadlock {
                return Err(WaitFail::Error(e.clone()));
            }
            let have = g.sems[device].get(&key).map_or(0, Sem::value);
            if have >= value as usize {
                g.blocked.remove(&device);
                g.consume(device, key, value as usize);
                return Ok(());
            }
            let b = describe(&g);
            g.blocked.insert(device, b);
            if let Some(e) = g.detect() {
                g.deadlock = Some(e.clone());
                drop(g);
                self.cv.notify_all();
                return Err(WaitFail::Error(e));
            }
            // The timeout only re-checks the cancellation flag, which is set outside the lock.
            g = self
                .cv
                .wait_timeout(g, Duration::from_millis(50))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// A device's kernel ended (or failed): it will never signal again.
    pub(crate) fn device_done(&self, device: usize) {
        let mut g = self.lock();
        g.live -= 1;
        g.blocked.remove(&device);
        if g.deadlock.is_none() {
            if let Some(e) = g.detect() {
                g.deadlock = Some(e);
            }
        }
        drop(g);
        self.cv.notify_all();
    }

    /// Wakes every blocked device (after a failure elsewhere).
    pub(crate) fn wake_all(&self) {
        let _g = self.lock();
        self.cv.notify_all();
    }

    /// Registers a copy started by device `c.src` from the elements `from` of a shard (`None`:
    /// a tile) into the elements `to` of shard `dst_id`, checks it against the accesses it is
    /// not ordered with ([`Order::copy`]) and signals its receive semaphore `recv` on the
    /// destination and its send semaphore `send` here. Returns its registry id.
    pub(crate) fn start_copy(
        &self,
        c: CopyState,
        from: Option<(u64, Vec<(usize, usize)>)>,
        (dst_id, to): (u64, Vec<(usize, usize)>),
        (send, recv): (Option<SemKey>, SemKey),
    ) -> u64 {
        let mut g = self.lock();
        let (src, dst, loc) = (c.src, c.dst, c.loc);
        let id = g.next_copy;
        g.next_copy += 1;
        g.copies.insert(id, c);
        let clock = g.order.release(src);
        let copy: CopyId = g.order.copy(src, &clock, from, dst_id, dst, to, loc);
        let landed = Order::copy_clock(&clock, copy, true);
        g.signal(dst, recv, 1, Some(id), landed, src, loc);
        if let Some(s) = send {
            let sent = Order::copy_clock(&clock, copy, false);
            g.signal(src, s, 1, None, sent, src, loc);
        }
        drop(g);
        self.cv.notify_all();
        id
    }

    /// Marks the send side of copy `id` as waited.
    pub(crate) fn copy_waited(&self, id: u64) {
        self.lock().copy_side_done(id, CopySide::SendWaited);
    }
}

impl SyncState {
    #[allow(clippy::too_many_arguments)]
    fn signal(
        &mut self,
        device: usize,
        key: SemKey,
        n: u32,
        copy: Option<u64>,
        clock: Clock,
        from: usize,
        loc: SourceLoc,
    ) {
        let s = self.sems[device].entry(key).or_default();
        s.units.extend((0..n).map(|_| Unit {
            copy,
            clock: clock.clone(),
            from,
            loc,
        }));
    }

    fn detect(&self) -> Option<NkiError> {
        let view = deadlock::View {
            live: self.live,
            blocked: &self.blocked,
            joined: &self.joined,
            names: &self.names,
        };
        deadlock::detect(&view, |d, k| self.sems[d].get(&k).map_or(0, Sem::value))
    }

    /// Takes `n` increments, oldest first; a copy whose increment is taken is delivered.
    fn consume(&mut self, device: usize, key: SemKey, n: usize) {
        if n == 0 {
            return;
        }
        let s = self.sems[device]
            .get_mut(&key)
            .expect("checked by the caller");
        let taken: Vec<Unit> = s.units.drain(..n).collect();
        for u in &taken {
            self.order.acquire(device, &u.clock);
        }
        for u in &taken {
            if let Some(id) = u.copy {
                self.copy_side_done(id, CopySide::Delivered);
            }
        }
    }

    /// The first copy (by source device, line, destination) whose send side was never waited
    /// on, if any.
    pub(crate) fn first_unwaited_copy(&self) -> Option<&CopyState> {
        self.copies
            .values()
            .filter(|c| !c.send_waited)
            .min_by_key(|c| (c.src, c.loc.line, c.dst))
    }

    /// Records one side of copy `id` as done; the copy leaves the registry once both are.
    fn copy_side_done(&mut self, id: u64, side: CopySide) {
        let Some(c) = self.copies.get_mut(&id) else {
            return;
        };
        match side {
            CopySide::SendWaited => c.send_waited = true,
            CopySide::Delivered => c.delivered = true,
        }
        if c.send_waited && c.delivered {
            self.copies.remove(&id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_consume_what_they_wait_for() {
        let sync = MeshSync::new(vec!["device 0".into()], LaunchShared::new());
        let k = SemKey::User(0);
        sync.signal(0, 0, k, 3, SourceLoc::caller());
        assert!(sync.wait(0, k, 2, |_| unreachable!()).is_ok());
        assert_eq!(sync.value(0, k), 1);
    }
}
