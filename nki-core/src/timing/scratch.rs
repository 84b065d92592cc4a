//! The per-record vectors placement needs only while it places (speed machinery): kept from
//! launch to launch in [`Prepared`](super::prepare::Prepared) so placing touches no fresh pages.

use super::order::Edge;

/// The per-record vectors a schedule needs only while placing, kept from launch to launch (see
/// [`Prepared`](super::prepare::Prepared)) so placing touches no fresh pages.
#[derive(Default)]
pub(super) struct SimScratch {
    /// Per record: dependencies not yet placed.
    pub pending: Vec<u32>,
    /// The dependencies between cores as (pred, edge) pairs, by predecessor (the per-core ones
    /// are listed by the dependency pass, see [`DepPass`](super::deps::DepPass)).
    pub cross: Vec<(u32, Edge)>,
    /// Per record: when its dependencies let it (its LoadStationary, on TensorE) start.
    pub ready: Vec<f64>,
    /// Per record: when its dependencies let a TensorE MultiplyMoving start.
    pub ready_late: Vec<f64>,
    /// Per record: all its dependencies are placed.
    pub released: Vec<bool>,
    /// Per record: placed.
    pub done: Vec<bool>,
    /// Per record: the record whose end set its ready time, if any (`u32::MAX`: none).
    pub ready_pred: Vec<u32>,
}

impl SimScratch {
    /// Every per-record vector at its initial values for `n` records (`pending` and `cross`
    /// are filled by the caller).
    pub fn reset(&mut self, n: usize) {
        fn fill<T: Clone>(v: &mut Vec<T>, n: usize, x: T) {
            v.clear();
            v.resize(n, x);
        }
        self.pending.clear();
        self.cross.clear();
        fill(&mut self.ready, n, 0.0);
        fill(&mut self.ready_late, n, 0.0);
        fill(&mut self.released, n, false);
        fill(&mut self.done, n, false);
        fill(&mut self.ready_pred, n, u32::MAX);
    }

    /// Bytes held.
    pub(super) fn capacity_bytes(&self) -> usize {
        let words = self.pending.capacity() + self.ready_pred.capacity();
        4 * words
            + std::mem::size_of::<(u32, Edge)>() * self.cross.capacity()
            + 8 * (self.ready.capacity() + self.ready_late.capacity())
            + self.released.capacity()
            + self.done.capacity()
    }
}
