//! Semaphores of all devices of a mesh launch, blocking waits, and the registry of remote
//! copies (for the unordered-write check and the never-waited check at kernel end).
//!
//! A wait for `v` consumes `v` increments (their modelled times are replayed afterwards, see
//! [`super::replay`]). A wait that cannot be satisfied blocks its device thread; [`super::deadlock`] decides, under
//! the same lock, when no device can ever signal again.

use super::deadlock::{self, Blocked};
use crate::context::LaunchShared;
use crate::error::{ErrorKind, NkiError, Result, SourceLoc};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// A semaphore's identity, the same on every device (semaphores are allocated symmetrically).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum SemKey {
    /// The n-th semaphore the kernel allocated with `mesh::semaphore`.
    User(u32),
    /// Semaphore `slot` of the device's `seq`-th collective.
    Collective {
        /// Collective sequence number on the device.
        seq: u32,
        /// Slot inside the collective.
        slot: u32,
    },
}

/// One increment of a semaphore, and the copy that signalled it.
#[derive(Clone, Copy, Debug)]
struct Unit {
    copy: Option<u64>,
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
}

/// A remote or local async copy between its start and its completion being observed.
#[derive(Clone, Debug)]
pub(crate) struct CopyState {
    pub(crate) src: usize,
    pub(crate) dst: usize,
    pub(crate) loc: SourceLoc,
    pub(crate) storage: u64,
    pub(crate) runs: Vec<(usize, usize)>,
    pub(crate) send_waited: bool,
    pub(crate) delivered: bool,
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
    pub(crate) copies: HashMap<u64, CopyState>,
    next_copy: u64,
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
    pub(crate) fn new(devices: usize, launch: Arc<LaunchShared>) -> MeshSync {
        MeshSync {
            state: Mutex::new(SyncState {
                sems: (0..devices).map(|_| HashMap::new()).collect(),
                live: devices,
                blocked: BTreeMap::new(),
                deadlock: None,
                copies: HashMap::new(),
                next_copy: 0,
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

    /// Adds `n` increments to semaphore `key` of `device`.
    pub(crate) fn signal(&self, device: usize, key: SemKey, n: u32, copy: Option<u64>) {
        let mut g = self.lock();
        g.signal(device, key, n, copy);
        drop(g);
        self.cv.notify_all();
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
            if self.launch.cancelled.load(Ordering::SeqCst) {
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
            if let Some(e) = deadlock::detect(&g) {
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
            if let Some(e) = deadlock::detect(&g) {
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

    /// Registers a started copy; an overlapping copy into the same buffer that is still in
    /// flight (its completion not yet observed by a wait) is an unordered-write error.
    pub(crate) fn start_copy(
        &self,
        c: CopyState,
        describe: impl Fn(usize) -> String,
    ) -> Result<u64> {
        let mut g = self.lock();
        if let Some(o) = g
            .copies
            .values()
            .find(|o| !o.delivered && o.storage == c.storage && runs_overlap(&o.runs, &c.runs))
        {
            return Err(NkiError::new(
                ErrorKind::OutputDependency,
                "remote_copy",
                format!(
                    "{} (copy started at {}) and {} (copy started at {}) write overlapping elements of a buffer on {} without ordering: wait for the first copy's receive semaphore before starting the second",
                    describe(o.src),
                    o.loc,
                    describe(c.src),
                    c.loc,
                    describe(c.dst)
                ),
            ));
        }
        let id = g.next_copy;
        g.next_copy += 1;
        g.copies.insert(id, c);
        Ok(id)
    }

    /// Marks the send side of copy `id` as waited.
    pub(crate) fn copy_waited(&self, id: u64) {
        let mut g = self.lock();
        let done = match g.copies.get_mut(&id) {
            Some(c) => {
                c.send_waited = true;
                c.delivered
            }
            None => false,
        };
        if done {
            g.copies.remove(&id);
        }
    }
}

impl SyncState {
    fn signal(&mut self, device: usize, key: SemKey, n: u32, copy: Option<u64>) {
        let s = self.sems[device].entry(key).or_default();
        s.units.extend((0..n).map(|_| Unit { copy }));
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
            let Some(id) = u.copy else { continue };
            let done = match self.copies.get_mut(&id) {
                Some(c) => {
                    c.delivered = true;
                    c.send_waited
                }
                None => false,
            };
            if done {
                self.copies.remove(&id);
            }
        }
    }
}

/// True when two sorted lists of element runs share an element.
fn runs_overlap(a: &[(usize, usize)], b: &[(usize, usize)]) -> bool {
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        let (sa, ea) = (a[i].0, a[i].0 + a[i].1);
        let (sb, eb) = (b[j].0, b[j].0 + b[j].1);
        if sa < eb && sb < ea {
            return true;
        }
        if ea <= eb {
            i += 1;
        } else {
            j += 1;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_overlap_is_exact_for_interleaved_columns() {
        // Two column halves of a 4x4 row-major buffer interleave but never share an element.
        let left = vec![(0, 2), (4, 2), (8, 2), (12, 2)];
        let right = vec![(2, 2), (6, 2), (10, 2), (14, 2)];
        assert!(!runs_overlap(&left, &right));
        assert!(runs_overlap(&left, &[(5, 1)]));
    }

    #[test]
    fn waits_consume_what_they_wait_for() {
        let sync = MeshSync::new(1, LaunchShared::new());
        let k = SemKey::User(0);
        sync.signal(0, k, 3, None);
        assert!(sync.wait(0, k, 2, |_| unreachable!()).is_ok());
        assert_eq!(sync.value(0, k), 1);
    }
}
