//! What a collective is: its kind, the algorithm moving its data, and the registry entry the
//! n-th collective of every device shares (a leaf: the launch state and the report hold
//! entries without depending on the collectives themselves).

use crate::error::SourceLoc;
use crate::hbm::HbmStorage;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

/// How a collective moves its data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// r-1 steps, each to the next rank: full link use, O(r) latency.
    Ring,
    /// log2(r) steps exchanging with rank xor 2^k (doubling for gathers, halving for
    /// reductions; all_reduce is halving then doubling). Needs a power-of-two group.
    RecursiveDoubling,
    /// One step: every rank sends to every other rank (the "mesh" algorithm).
    Direct,
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Algorithm::Ring => "ring",
            Algorithm::RecursiveDoubling => "recursive-doubling",
            Algorithm::Direct => "direct",
        })
    }
}

/// A collective's kind, with nccom-test's bus-bandwidth factor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CollectiveKind {
    /// all_gather.
    AllGather,
    /// reduce_scatter.
    ReduceScatter,
    /// all_reduce.
    AllReduce,
    /// all_to_all.
    AllToAll,
    /// collective_permute.
    Permute,
    /// barrier.
    Barrier,
}

impl CollectiveKind {
    /// The NKI name.
    pub fn name(self) -> &'static str {
        match self {
            CollectiveKind::AllGather => "all_gather",
            CollectiveKind::ReduceScatter => "reduce_scatter",
            CollectiveKind::AllReduce => "all_reduce",
            CollectiveKind::AllToAll => "all_to_all",
            CollectiveKind::Permute => "collective_permute",
            CollectiveKind::Barrier => "barrier",
        }
    }

    /// busbw / algbw for `r` ranks, as nccom-test reports it [E S20]: all_reduce 2(r-1)/r;
    /// all_gather, reduce_scatter, all_to_all (r-1)/r; permute 1.
    pub fn bus_factor(self, r: usize) -> f64 {
        let r = r.max(1) as f64;
        match self {
            CollectiveKind::AllReduce => 2.0 * (r - 1.0) / r,
            CollectiveKind::AllGather
            | CollectiveKind::ReduceScatter
            | CollectiveKind::AllToAll => (r - 1.0) / r,
            CollectiveKind::Permute | CollectiveKind::Barrier => 1.0,
        }
    }
}

/// The registry entry of the n-th collective of every device.
pub(crate) struct CollectiveEntry {
    pub(crate) kind: CollectiveKind,
    pub(crate) algorithm: Option<Algorithm>,
    pub(crate) signature: String,
    pub(crate) first: (usize, SourceLoc),
    pub(crate) ranks: usize,
    /// Bytes per rank: max(input, output), as the profiler's algorithm bandwidth counts.
    pub(crate) bytes: u64,
    /// Devices that left it.
    pub(crate) finished: usize,
    pub(crate) participants: usize,
    pub(crate) scratch: HashMap<u32, Arc<[Arc<HbmStorage>]>>,
}
