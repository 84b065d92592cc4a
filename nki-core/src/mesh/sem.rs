//! Semaphore identities, the same on every device of a mesh launch, and the identities of
//! their increments.

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
    /// The n-th `nki::lnc::core_barrier` of the device at LNC=1 (signalled by the other core
    /// of its HBM stack).
    CoreBarrier(u32),
}

/// One semaphore increment's identity, the same in the checks and in the timing replay: the
/// device that signalled it, the number of that signalling operation among the device's
/// signals and copy starts (program order), and the increment's index in it (a copy's receive
/// increment is 0, its send increment 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Inc {
    /// The signalling device.
    pub(crate) from: usize,
    /// The signalling operation's number on that device.
    pub(crate) ev: u64,
    /// The increment's index inside the operation.
    pub(crate) i: u32,
}
