//! Semaphore identities, the same on every device of a mesh launch.

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
