//! Semaphores of all devices of a mesh launch, blocking waits, the registry of remote copies
//! (for the never-waited check at kernel end) and the happens-before state of the launch
//! ([`super::order`]).
//!
//! Every signal, copy start, wait and kernel segment is handed, under the same lock, to the
//! timing replay ([`super::replay::Replayer`]), which runs as far as the steps handed in allow.
//! A wait for `v` returns once the replay completed it, and consumes the `v` increments the
//! replay consumed — the earliest modelled landings, not the oldest in host order — joining
//! the clocks they carry. So the happens-before checks use the edges the timed replay used,
//! whatever order the host ran the devices in. A semaphore read blocks likewise until the
//! replay took it, and returns the replay's value. A wait that cannot be satisfied blocks its
//! device thread; [`super::deadlock`] decides, under the same lock, when no device can ever
//! signal again.

use super::deadlock::{self, Blocked};
use super::links::Topology;
use super::order::{Clock, CopyId, Marks, Order};
use super::replay::{Replay, Replayer, Step};
use super::sem::{Inc, SemKey};
use crate::access::Ap;
use crate::error::{NkiError, SourceLoc};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// One increment of a semaphore: its identity, the copy that signalled it, the clock it
/// carries, and who signalled it where.
#[derive(Clone, Debug)]
struct Unit {
    id: Inc,
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

    /// The device and line of the first increment not consumed (lowest device, then its
    /// first signal: not the host's order).
    pub(crate) fn first_signal(&self) -> Option<(usize, SourceLoc)> {
        self.units
            .iter()
            .min_by_key(|u| u.id)
            .map(|u| (u.from, u.loc))
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
    /// The timing replay, fed as the devices run; it decides which increments each wait
    /// consumes.
    replay: Replayer,
    /// Per device: the number of its next signal or copy start (the [`Inc::ev`] of its
    /// increments).
    next_event: Vec<u64>,
    names: Vec<String>,
}

/// Why a wait ended without being satisfied: it is part of a deadlock (devices that wait for
/// a device that failed or ended included).
pub(crate) struct WaitFail(pub(crate) NkiError);

/// The semaphores of a mesh launch and the condition variables blocked devices sleep on (one
/// per device: a device is woken when the replay completed its wait, not by every step).
pub(crate) struct MeshSync {
    state: Mutex<SyncState>,
    cvs: Vec<Condvar>,
}

impl MeshSync {
    /// The state of a launch over devices named `names`, timed on `topology`.
    pub(crate) fn new(names: Vec<String>, topology: Topology) -> MeshSync {
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
                replay: Replayer::new(devices, topology),
                next_event: vec![0; devices],
                names,
            }),
            cvs: (0..devices).map(|_| Condvar::new()).collect(),
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
        let ev = g.event(from);
        let clock = g.order.release(from);
        let inc = |i| Inc { from, ev, i };
        g.signal(device, key, (0..n).map(inc), None, clock, loc);
        let step = Step::Signal {
            ev,
            dst: device,
            key,
            n,
        };
        self.push(g, from, step);
    }

    /// Hands device `device`'s next step (not a signal, copy or wait) to the timing replay.
    pub(crate) fn log(&self, device: usize, step: Step) {
        self.push(self.lock(), device, step);
    }

    /// Hands `step` of `device` to the replay and wakes the devices whose wait it completed.
    fn push(&self, mut g: MutexGuard<'_, SyncState>, device: usize, step: Step) {
        g.replay.push(device, step);
        let woken = g.replay.take_woken();
        drop(g);
        for d in woken {
            self.cvs[d].notify_one();
        }
    }

    /// Wakes every blocked device (a deadlock, a failure or a finished device).
    fn wake_everyone(&self) {
        for cv in &self.cvs {
            cv.notify_all();
        }
    }

    /// The replayed timelines, after every device finished (see [`Replayer::result`]).
    pub(crate) fn timeline(&self, overhead_ns: f64) -> Replay {
        self.lock().replay.result(overhead_ns)
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

    /// Device `d` starts its instance of program id `pid`: the accesses it makes from now on
    /// carry it (a race names the program id, as every error does).
    pub(crate) fn enter_instance(&self, d: usize, pid: &[usize]) {
        self.lock().order.enter_instance(d, pid);
    }

    /// The launch's happens-before verdict (see [`Order::verdict`]).
    pub(crate) fn verdict(&self) -> Option<NkiError> {
        self.lock().order.verdict()
    }

    /// Blocks until the timing replay took `device`'s semaphore read `step`
    /// ([`Step::Read`]), and returns the value it read: the increments landed by the device's
    /// modelled clock and not consumed, whatever order the host ran the devices in.
    pub(crate) fn read(&self, device: usize, step: Step) -> std::result::Result<usize, WaitFail> {
        self.run_step(device, step, |g| g.replay.take_read(device), |_| None)
    }

    /// Blocks until the timing replay completed `device`'s wait `step` on its semaphore
    /// `key`, then consumes the increments the replay consumed (the earliest modelled
    /// landings).
    pub(crate) fn wait(
        &self,
        device: usize,
        key: SemKey,
        step: Step,
        describe: impl Fn(&SyncState) -> Blocked,
    ) -> std::result::Result<(), WaitFail> {
        let done = |g: &mut SyncState| {
            let incs = g.replay.take_decided(device)?;
            g.blocked.remove(&device);
            g.consume(device, key, &incs);
            Some(())
        };
        let park = |g: &mut SyncState| {
            let b = describe(g);
            g.blocked.insert(device, b);
            g.detect()
        };
        self.run_step(device, step, done, park)
    }

    /// Hands `device`'s `step` to the replay and blocks until `done` finds its outcome. Each
    /// time it is not there yet, `park` records why the device sleeps and returns the
    /// deadlock that makes, if any.
    fn run_step<T>(
        &self,
        device: usize,
        step: Step,
        mut done: impl FnMut(&mut SyncState) -> Option<T>,
        mut park: impl FnMut(&mut SyncState) -> Option<NkiError>,
    ) -> std::result::Result<T, WaitFail> {
        // Inside the front end's wait hook as a whole: the sync's lock is free again before
        // a front end takes its interpreter lock back.
        crate::blocking::wait(|| self.run_step_locked(device, step, &mut done, &mut park))
    }

    /// [`MeshSync::run_step`] itself.
    fn run_step_locked<T>(
        &self,
        device: usize,
        step: Step,
        done: &mut impl FnMut(&mut SyncState) -> Option<T>,
        park: &mut impl FnMut(&mut SyncState) -> Option<NkiError>,
    ) -> std::result::Result<T, WaitFail> {
        let mut g = self.lock();
        g.replay.push(device, step);
        // The replay may have completed other devices' steps too.
        for d in g.replay.take_woken() {
            self.cvs[d].notify_one();
        }
        loop {
            if let Some(e) = &g.deadlock {
                return Err(WaitFail(e.clone()));
            }
            if let Some(out) = done(&mut g) {
                return Ok(out);
            }
            if let Some(e) = park(&mut g) {
                g.deadlock = Some(e.clone());
                drop(g);
                self.wake_everyone();
                return Err(WaitFail(e));
            }
            // Every change a wait depends on notifies under the lock; the timeout is a
            // safety net only.
            g = self.cvs[device]
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
        g.replay.finish(device);
        if g.deadlock.is_none() {
            if let Some(e) = g.detect() {
                g.deadlock = Some(e);
            }
        }
        drop(g);
        self.wake_everyone();
    }

    /// Registers a copy started by device `c.src` from the elements `from` of a shard (`None`:
    /// a tile) into the elements `to` of shard `dst_id`, checks it against the accesses it is
    /// not ordered with ([`Order::copy`]), signals its receive semaphore `recv` on the
    /// destination and its send semaphore `send` here, and hands the transfer of `size` bytes
    /// to the timing replay. Returns its registry id.
    pub(crate) fn start_copy(
        &self,
        c: CopyState,
        from: Option<(u64, Vec<(usize, usize)>)>,
        (dst_id, to): (u64, Vec<(usize, usize)>),
        (send, recv): (Option<SemKey>, SemKey),
        size: u64,
    ) -> u64 {
        let mut g = self.lock();
        let (src, dst, loc) = (c.src, c.dst, c.loc);
        let id = g.next_copy;
        g.next_copy += 1;
        g.copies.insert(id, c);
        let ev = g.event(src);
        let inc = |i| Inc { from: src, ev, i };
        let clock = g.order.release(src);
        let copy: CopyId = g.order.copy(src, &clock, from, dst_id, dst, to, loc);
        let landed = Order::copy_clock(&clock, copy, true);
        g.signal(dst, recv, [inc(0)], Some(id), landed, loc);
        if let Some(s) = send {
            let sent = Order::copy_clock(&clock, copy, false);
            g.signal(src, s, [inc(1)], None, sent, loc);
        }
        let step = Step::Send {
            ev,
            dst,
            bytes: size,
            send,
            recv,
            loc,
        };
        self.push(g, src, step);
        id
    }

    /// Marks the send side of copy `id` as waited.
    pub(crate) fn copy_waited(&self, id: u64) {
        self.lock().copy_side_done(id, CopySide::SendWaited);
    }
}

impl SyncState {
    /// The number of device `d`'s next signalling operation.
    fn event(&mut self, d: usize) -> u64 {
        let ev = self.next_event[d];
        self.next_event[d] += 1;
        ev
    }

    /// Adds the increments `incs` (carrying `clock`, of copy `copy` if any, signalled at `loc`)
    /// to semaphore `key` of `device`.
    fn signal(
        &mut self,
        device: usize,
        key: SemKey,
        incs: impl IntoIterator<Item = Inc>,
        copy: Option<u64>,
        clock: Clock,
        loc: SourceLoc,
    ) {
        let s = self.sems[device].entry(key).or_default();
        s.units.extend(incs.into_iter().map(|id| Unit {
            id,
            copy,
            clock: clock.clone(),
            from: id.from,
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

    /// Takes the increments `incs` (the ones the timing replay's wait consumed, all signalled
    /// already); a copy whose increment is taken is delivered.
    fn consume(&mut self, device: usize, key: SemKey, incs: &[Inc]) {
        if incs.is_empty() {
            return;
        }
        let s = self.sems[device]
            .get_mut(&key)
            .expect("the replay consumed increments of this semaphore");
        let mut taken = Vec::with_capacity(incs.len());
        for id in incs {
            let at = s.units.iter().position(|u| u.id == *id);
            taken.push(
                s.units
                    .remove(at.expect("the replay's increments were signalled")),
            );
        }
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
        let topo = Topology::of(crate::target::Target::Trn2);
        let sync = MeshSync::new(vec!["device 0".into()], topo);
        let k = SemKey::User(0);
        let loc = SourceLoc::caller();
        sync.signal(0, 0, k, 3, loc);
        let step = Step::Wait {
            key: k,
            value: 2,
            label: "k".into(),
            loc,
        };
        assert!(sync.wait(0, k, step, |_| unreachable!()).is_ok());
        let read = Step::Read {
            key: k,
            ns: 1.0,
            label: "k".into(),
            loc,
        };
        assert_eq!(sync.read(0, read).ok(), Some(1));
        assert_eq!(sync.lock().sems[0][&k].value(), 1);
    }
}
