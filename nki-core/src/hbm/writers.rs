//! Who wrote an HBM element, and which pairs of writers conflict.
//!
//! A [`Writer`] is one program instance at one affine_range position, doing one kind of access
//! (plain stores, `atomic_rmw` updates or loads). The [`Writers`] table of a launch interns
//! writers as `u32` ids, which the access tracker ([`super::track`]) keeps per access; ids are
//! global and increasing, so ids of earlier launches (and 0, "never written") are below the
//! launch's [`Writers::base`] and never conflict. Two writers conflict (NKI's "unexpected
//! output dependencies") when they access at unordered positions — different instances, or
//! one instance in different iterations of one affine_range — unless both are atomic updates
//! or both loads.

use crate::error::SourceLoc;
use crate::timing::fast_hash::Map;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

static NEXT_WRITER: AtomicU32 = AtomicU32::new(1);

/// What kind of HBM write a writer performs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum WriterKind {
    /// Plain stores (`nl.store`, `nisa.dma_copy`).
    Store,
    /// Atomic updates (`nl.atomic_rmw`): they may overlap other atomic updates.
    Atomic,
    /// Loads from a kernel output (`nl.load`, `nisa.dma_copy` from HBM): they may overlap
    /// other loads, but not a write at an unordered position (a read-write race).
    Read,
}

/// Who performed an HBM write: the program instance and its stack of affine_range frames
/// `(loop activation, iteration)`, and the kind of write.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Writer {
    pub(crate) instance: u64,
    pub(crate) frames: Vec<(u32, u32)>,
    pub(crate) kind: WriterKind,
    /// How many meetings with the other core of its logical NeuronCore (`core_barrier`,
    /// `sendrecv`) its instance had passed: 0 outside LNC=2 launches.
    pub(crate) meetings: u32,
}

impl Writer {
    /// True when writes by `self` and `other` happen at unordered positions: different
    /// instances between the same two meetings of their cores (instances that never meet
    /// have 0 meetings), or the same instance in different iterations of one affine_range.
    /// A meeting of the two cores orders what each did before it before what each does after.
    fn unordered(&self, other: &Writer) -> bool {
        if self.instance != other.instance {
            return self.meetings == other.meetings;
        }
        for (fa, fb) in self.frames.iter().zip(&other.frames) {
            if fa.0 != fb.0 {
                return false;
            }
            if fa.1 != fb.1 {
                return true;
            }
        }
        false
    }
}

/// A writer as the table keeps it: the writer, its program id and the first source line it
/// wrote from.
struct Entry {
    writer: Writer,
    program_id: Vec<usize>,
    loc: SourceLoc,
}

/// The interned writers of one launch: writer -> id, and id -> entry.
#[derive(Default)]
struct Table {
    ids: Map<Writer, u32>,
    entries: Map<u32, Entry>,
}

impl Table {
    /// The id of `w`, interning it (with `program_id` and `loc`) on first sight.
    fn intern(&mut self, w: Writer, program_id: &[usize], loc: SourceLoc) -> u32 {
        if let Some(&id) = self.ids.get(&w) {
            return id;
        }
        let id = NEXT_WRITER.fetch_add(1, Ordering::SeqCst);
        self.ids.insert(w.clone(), id);
        let program_id = program_id.to_vec();
        self.entries.insert(
            id,
            Entry {
                writer: w,
                program_id,
                loc,
            },
        );
        id
    }

    fn describe(&self, id: u32) -> String {
        let Some(Entry {
            writer: w,
            program_id,
            loc,
        }) = self.entries.get(&id)
        else {
            return format!("writer #{id}");
        };
        let mut s = format!("program id {program_id:?}");
        if !w.frames.is_empty() {
            let its: Vec<String> = w.frames.iter().map(|f| f.1.to_string()).collect();
            s.push_str(&format!(" in affine_range iteration ({})", its.join(", ")));
        }
        match w.kind {
            WriterKind::Atomic => s.push_str(" (atomic_rmw)"),
            WriterKind::Read => s.push_str(" (load)"),
            _ => {}
        }
        s.push_str(&format!(" at {loc}"));
        s
    }

    fn conflicts(&self, old: u32, new: u32) -> bool {
        let (Some(a), Some(b)) = (self.entries.get(&old), self.entries.get(&new)) else {
            return false;
        };
        match (a.writer.kind, b.writer.kind) {
            (WriterKind::Atomic, WriterKind::Atomic) | (WriterKind::Read, WriterKind::Read) => {
                false
            }
            _ => a.writer.unordered(&b.writer),
        }
    }
}

/// The writer table of one launch, shared by all its instances.
pub(crate) struct Writers {
    /// First writer id of this launch: ids below are from earlier launches.
    base: u32,
    table: Mutex<Table>,
}

impl Writers {
    /// An empty table whose ids start after every id handed out so far.
    pub(crate) fn new() -> Writers {
        Writers {
            base: NEXT_WRITER.load(Ordering::SeqCst),
            table: Mutex::new(Table::default()),
        }
    }

    /// First writer id of this launch: tags below it are stale (earlier launches, or 0).
    pub(crate) fn base(&self) -> u32 {
        self.base
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Interns a writer, remembering its program id and the first source line it stored from.
    pub(crate) fn intern(&self, w: Writer, program_id: &[usize], loc: SourceLoc) -> u32 {
        self.lock().intern(w, program_id, loc)
    }

    /// Describes writer `id`: its program id, affine iterations and source line (and whether
    /// it is an `atomic_rmw` writer).
    pub(crate) fn describe(&self, id: u32) -> String {
        self.lock().describe(id)
    }

    /// The core meetings writer `id`'s instance had passed (see [`Writer::meetings`]; 0 if
    /// unknown).
    pub(crate) fn meetings(&self, id: u32) -> u32 {
        self.lock()
            .entries
            .get(&id)
            .map_or(0, |e| e.writer.meetings)
    }

    /// The program id of writer `id` (empty if unknown).
    pub(crate) fn program_id(&self, id: u32) -> Vec<usize> {
        self.lock()
            .entries
            .get(&id)
            .map(|e| e.program_id.clone())
            .unwrap_or_default()
    }

    /// True when writes by `old` and `new` to one location are an output-dependency error:
    /// writes at unordered positions (different instances, or the same instance in different
    /// iterations of one affine_range), unless both are atomic updates.
    pub(crate) fn conflicts(&self, old: u32, new: u32) -> bool {
        if old < self.base || old == new {
            return false;
        }
        self.lock().conflicts(old, new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn writer(instance: u64, frames: &[(u32, u32)], kind: WriterKind) -> Writer {
        Writer {
            instance,
            frames: frames.to_vec(),
            kind,
            meetings: 0,
        }
    }

    #[test]
    fn stores_conflict_at_unordered_positions_only() {
        let t = Writers::new();
        let loc = SourceLoc::caller();
        let id =
            |i, f: &[(u32, u32)]| t.intern(writer(i, f, WriterKind::Store), &[i as usize], loc);
        let a = id(0, &[(0, 0)]);
        assert_eq!(a, id(0, &[(0, 0)]), "a writer is interned once");
        let other_instance = id(1, &[(0, 0)]);
        let other_iteration = id(0, &[(0, 1)]);
        let later_loop = id(0, &[(1, 0)]);
        assert!(t.conflicts(a, other_instance));
        assert!(t.conflicts(a, other_iteration));
        assert!(
            !t.conflicts(a, later_loop),
            "two loops one after the other are ordered"
        );
        assert!(!t.conflicts(a, a));
        let stale = Writers::new();
        assert!(
            !stale.conflicts(a, other_instance),
            "ids of an earlier launch are stale"
        );
        assert!(t
            .describe(other_iteration)
            .starts_with("program id [0] in affine_range iteration (1) at "));
    }

    #[test]
    fn a_meeting_of_the_two_cores_orders_their_writes() {
        let t = Writers::new();
        let loc = SourceLoc::caller();
        let id = |i: u64, meetings| {
            let w = Writer {
                meetings,
                ..writer(i, &[], WriterKind::Store)
            };
            t.intern(w, &[i as usize], loc)
        };
        let (core0, core1) = (id(0, 0), id(1, 0));
        assert!(t.conflicts(core0, core1), "between the same meetings");
        let core1_after = id(1, 1);
        assert!(
            !t.conflicts(core0, core1_after),
            "one before a barrier, one after"
        );
        assert!(t.conflicts(id(0, 1), core1_after));
        assert_eq!(t.meetings(core1_after), 1);
    }

    #[test]
    fn atomic_updates_and_loads_conflict_only_with_unordered_writes() {
        let t = Writers::new();
        let loc = SourceLoc::caller();
        let store0 = t.intern(writer(0, &[], WriterKind::Store), &[0], loc);
        let atomic1 = t.intern(writer(1, &[], WriterKind::Atomic), &[1], loc);
        let atomic2 = t.intern(writer(2, &[], WriterKind::Atomic), &[2], loc);
        let read1 = t.intern(writer(1, &[], WriterKind::Read), &[1], loc);
        let read2 = t.intern(writer(2, &[], WriterKind::Read), &[2], loc);
        assert!(!t.conflicts(atomic1, atomic2));
        assert!(!t.conflicts(read1, read2));
        assert!(t.conflicts(store0, atomic1));
        assert!(t.conflicts(store0, read1));
        assert!(t.conflicts(atomic1, read2));
        assert!(!t.conflicts(atomic1, read1), "one instance, in order");
        assert!(t.describe(atomic1).contains("(atomic_rmw)"));
        assert!(t.describe(read2).contains("(load)"));
        assert_eq!(t.program_id(read2), vec![2]);
    }
}
