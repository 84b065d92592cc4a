//! Deadlock detection, exact rather than by timeout: a mesh launch is deadlocked when every
//! device whose kernel is still running is blocked in a semaphore wait that its semaphore's
//! current value does not satisfy. Copies complete (and signal) when they start, so no
//! operation is ever in flight that could still signal; nothing else can wake a device.
//!
//! The check runs under the semaphore lock each time a device blocks or finishes, so a
//! deadlock is reported the moment the last device blocks, naming every blocked device, the
//! semaphore, the value it waits for, the value it holds and the kernel source line. A wait
//! inside a collective or barrier names the devices of its group that never called it (those
//! that finished, or wait elsewhere), not the collective's internal semaphores.

use super::sem::SemKey;
use crate::error::{ErrorKind, NkiError, SourceLoc};
use std::collections::{BTreeMap, BTreeSet};

/// The collective a blocked wait belongs to.
#[derive(Clone, Debug)]
pub(crate) struct InCollective {
    /// `all_gather`, `barrier`, ...
    pub(crate) name: &'static str,
    pub(crate) seq: u32,
    /// The devices of the waiting device's group.
    pub(crate) group: Vec<usize>,
}

/// What one blocked device waits for.
#[derive(Clone, Debug)]
pub(crate) struct Blocked {
    /// The semaphore's name (`recv`, `all_gather recv`, ...).
    pub(crate) sem: String,
    pub(crate) key: SemKey,
    /// The value waited for.
    pub(crate) value: u32,
    /// Where the wait was made.
    pub(crate) loc: SourceLoc,
    /// The collective the wait is part of.
    pub(crate) collective: Option<InCollective>,
}

/// What the detector needs to know of the launch.
pub(crate) struct View<'a> {
    /// Devices whose kernel is still running.
    pub(crate) live: usize,
    pub(crate) blocked: &'a BTreeMap<usize, Blocked>,
    /// The devices that entered each collective, by sequence number.
    pub(crate) joined: &'a BTreeMap<u32, BTreeSet<usize>>,
    /// `device 3 (x=1, y=1)`, by id.
    pub(crate) names: &'a [String],
}

/// The deadlock error if every live device is blocked on an unsatisfied wait; `have(d, k)`
/// is the value of semaphore `k` on device `d`.
pub(crate) fn detect(s: &View, have: impl Fn(usize, SemKey) -> usize) -> Option<NkiError> {
    if s.live == 0 || s.blocked.len() < s.live {
        return None;
    }
    if s.blocked
        .iter()
        .any(|(&d, b)| have(d, b.key) >= b.value as usize)
    {
        return None;
    }
    let lines: Vec<String> = s
        .blocked
        .iter()
        .map(|(&d, b)| match &b.collective {
            Some(c) => {
                let empty = BTreeSet::new();
                let joined = s.joined.get(&c.seq).unwrap_or(&empty);
                let missing: Vec<String> = c
                    .group
                    .iter()
                    .filter(|g| !joined.contains(g))
                    .map(|&g| {
                        let why = match s.blocked.get(&g) {
                            Some(o) => format!("waits at {}", o.loc),
                            None => "finished its kernel".to_string(),
                        };
                        format!("{} ({why})", s.names[g])
                    })
                    .collect();
                if missing.is_empty() {
                    format!(
                        "{} waits inside {} #{} at {} for peers that never signal it",
                        s.names[d], c.name, c.seq, b.loc
                    )
                } else {
                    format!(
                        "{} waits in {} #{} at {} for {}, which never called it",
                        s.names[d],
                        c.name,
                        c.seq,
                        b.loc,
                        missing.join(" and ")
                    )
                }
            }
            None => format!(
                "{} waits for semaphore '{}' to reach {} (it holds {}) at {}",
                s.names[d],
                b.sem,
                b.value,
                have(d, b.key),
                b.loc
            ),
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
