//! The per-record state placement needs only while it places (speed machinery): one
//! [`RecState`] per record, kept from launch to launch in
//! [`Prepared`](super::prepare::Prepared) so placing touches no fresh pages.

use super::order::Edge;
use crate::record::Engine;

/// What placement knows of one record while it places: its engine, how many of its
/// dependencies are still unplaced, when the placed ones let it start, and whether it is
/// released and placed. One value per record, so that following a dependency reads and writes
/// one place (they were five vectors: five cache lines per dependency followed).
#[derive(Clone, Copy)]
pub(super) struct RecState {
    /// When its dependencies let it (its LoadStationary, on TensorE) start.
    pub ready: f64,
    /// When its dependencies let a TensorE MultiplyMoving start.
    pub ready_late: f64,
    /// Dependencies not yet placed.
    pub pending: u32,
    /// The record whose end set its ready time, if any (`u32::MAX`: none).
    pub ready_pred: u32,
    /// Its engine.
    pub engine: Engine,
    /// All its dependencies are placed.
    pub released: bool,
    /// Placed.
    pub done: bool,
}

impl RecState {
    /// The latest of its two ready times (all its dependencies, whatever phase they gate).
    #[inline]
    pub fn ready_all(&self) -> f64 {
        self.ready.max(self.ready_late)
    }
}

/// The per-record state a schedule needs only while placing, kept from launch to launch (see
/// [`Prepared`](super::prepare::Prepared)) so placing touches no fresh pages.
#[derive(Default)]
pub(super) struct SimScratch {
    /// Per record, in global order.
    pub recs: Vec<RecState>,
    /// The dependencies between cores as (pred, edge) pairs, by predecessor (the per-core ones
    /// are listed by the dependency pass, see [`DepPass`](super::deps::DepPass)).
    pub cross: Vec<(u32, Edge)>,
}

impl SimScratch {
    /// The state of records on `engine` (one per record) with `pending` unplaced
    /// dependencies each (one per record, in the same order), nothing ready or placed; no
    /// dependencies between cores (the caller adds them).
    pub fn reset(&mut self, engine: &[Engine], pending: impl Iterator<Item = u32>) {
        self.cross.clear();
        self.recs.clear();
        self.recs.extend(
            engine
                .iter()
                .zip(pending)
                .map(|(&engine, pending)| RecState {
                    ready: 0.0,
                    ready_late: 0.0,
                    pending,
                    ready_pred: u32::MAX,
                    engine,
                    released: false,
                    done: false,
                }),
        );
        debug_assert_eq!(self.recs.len(), engine.len(), "a count per record");
    }

    /// Bytes held.
    pub(super) fn capacity_bytes(&self) -> usize {
        std::mem::size_of::<RecState>() * self.recs.capacity()
            + std::mem::size_of::<(u32, Edge)>() * self.cross.capacity()
    }
}
