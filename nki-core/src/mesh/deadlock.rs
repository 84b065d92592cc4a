//! Deadlock detection, exact rather than by timeout: a mesh launch is deadlocked when every
//! device whose kernel is still running is blocked in a semaphore wait that its semaphore's
//! current value does not satisfy. Copies complete (and signal) when they start, so no
//! operation is ever in flight that could still signal; nothing else can wake a device.
//!
//! The check runs under the semaphore lock each time a device blocks or finishes, so a
//! deadlock is reported the moment the last device blocks, naming every blocked device, the
//! semaphore, the value it waits for, the value it holds and the kernel source line.

use super::sync::{Sem, SemKey, SyncState};
use crate::error::{ErrorKind, NkiError, SourceLoc};

/// What one blocked device waits for.
#[derive(Clone, Debug)]
pub(crate) struct Blocked {
    /// `device 1 (x=0, y=1)`.
    pub(crate) device: String,
    /// The semaphore's name (`recv`, `all_gather recv`, ...).
    pub(crate) sem: String,
    pub(crate) key: SemKey,
    /// The value waited for.
    pub(crate) value: u32,
    /// Where the wait was made.
    pub(crate) loc: SourceLoc,
}

/// The deadlock error if every live device is blocked on an unsatisfied wait.
pub(crate) fn detect(s: &SyncState) -> Option<NkiError> {
    if s.live == 0 || s.blocked.len() < s.live {
        return None;
    }
    let have = |d: usize, k: SemKey| s.sems[d].get(&k).map_or(0, Sem::value);
    if s.blocked
        .iter()
        .any(|(&d, b)| have(d, b.key) >= b.value as usize)
    {
        return None;
    }
    let lines: Vec<String> = s
        .blocked
        .iter()
        .map(|(&d, b)| {
            format!(
                "{} waits for semaphore '{}' to reach {} (it holds {}) at {}",
                b.device,
                b.sem,
                b.value,
                have(d, b.key),
                b.loc
            )
        })
        .collect();
    let first = s.blocked.values().next().map(|b| b.loc);
    let mut e = NkiError::new(
        ErrorKind::Deadlock,
        "semaphore_wait",
        format!(
            "deadlock: {} running device(s) wait on semaphores that no pending operation can signal: {}",
            s.live,
            lines.join("; ")
        ),
    );
    if let Some(l) = first {
        e = e.with_loc(l);
    }
    Some(e)
}
