//! What a collective is: its kind, the algorithm moving its data, its reducing operator, and
//! the registry entry the n-th collective of every device shares (a leaf: the launch state and
//! the report hold entries without depending on the collectives themselves).

use crate::error::SourceLoc;
use crate::hbm::HbmStorage;
use std::cell::Cell;
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
    /// The algorithm the Neuron runtime picks for the message size (bytes per rank,
    /// max(input, output)) [E S18, hardware.md §5]: Mesh (here [`Algorithm::Direct`]) below
    /// 1 MB, recursive doubling-halving from 1 MB to 56 MB (on a power-of-two group, else
    /// ring), KangaRing above 56 MB (modelled as [`Algorithm::Ring`]: its duplicated writes
    /// are not modelled). A ring or RDH all_reduce whose dimension 0 does not split over the
    /// group falls back to direct.
    Runtime,
}

/// Message sizes where the runtime changes algorithm [E S18, hardware.md §5]: Mesh below
/// 1 MB, RDH up to 56 MB, KangaRing above.
const MESH_BELOW: u64 = 1_000_000;
const RDH_UP_TO: u64 = 56_000_000;

impl Algorithm {
    /// The algorithm that runs: `self`, or for [`Algorithm::Runtime`] the runtime's pick for
    /// a `kind` collective of `bytes` per rank over `ranks` ranks (`splits`: whether the
    /// ring and RDH forms of the call are possible).
    pub(crate) fn resolve(
        self,
        kind: CollectiveKind,
        ranks: usize,
        bytes: u64,
        splits: bool,
    ) -> Algorithm {
        if self != Algorithm::Runtime {
            return self;
        }
        if bytes < MESH_BELOW || !splits {
            Algorithm::Direct
        } else if bytes <= RDH_UP_TO && ranks.is_power_of_two() && kind != CollectiveKind::AllToAll
        {
            Algorithm::RecursiveDoubling
        } else {
            Algorithm::Ring
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Algorithm::Ring => "ring",
            Algorithm::RecursiveDoubling => "recursive-doubling",
            Algorithm::Direct => "direct",
            Algorithm::Runtime => "runtime's choice",
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
    /// all_gather_v (variable length, flat buffers).
    AllGatherV,
    /// all_to_all_v (variable length, flat buffers).
    AllToAllV,
    /// collective_permute_implicit (to the ring successor).
    PermuteImplicit,
    /// collective_permute_implicit_reduce (op(src0, src1) to the ring successor).
    PermuteImplicitReduce,
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
            CollectiveKind::AllGatherV => "all_gather_v",
            CollectiveKind::AllToAllV => "all_to_all_v",
            CollectiveKind::PermuteImplicit => "collective_permute_implicit",
            CollectiveKind::PermuteImplicitReduce => "collective_permute_implicit_reduce",
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
            | CollectiveKind::AllToAll
            | CollectiveKind::AllGatherV
            | CollectiveKind::AllToAllV => (r - 1.0) / r,
            CollectiveKind::Permute
            | CollectiveKind::PermuteImplicit
            | CollectiveKind::PermuteImplicitReduce
            | CollectiveKind::Barrier => 1.0,
        }
    }

    /// Whether the collective reduces (sums) what it receives.
    pub fn reduces(self) -> bool {
        matches!(
            self,
            CollectiveKind::AllReduce
                | CollectiveKind::ReduceScatter
                | CollectiveKind::PermuteImplicitReduce
        )
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
    /// The metadata rows each group rank published (the `_v` collectives: counts and
    /// displacements, row-major `[rows, group]`).
    pub(crate) metadata: HashMap<usize, Vec<u64>>,
}

/// The reducing operator of a reducing collective (0.7 `op=nl.add / nl.maximum / nl.minimum`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReduceOp {
    /// Sum (in f32, rounded once to the destination dtype).
    #[default]
    Add,
    /// Element-wise maximum.
    Max,
    /// Element-wise minimum.
    Min,
}

impl ReduceOp {
    /// `a op x`.
    pub(crate) fn apply(self, a: f32, x: f32) -> f32 {
        match self {
            ReduceOp::Add => a + x,
            ReduceOp::Max => a.max(x),
            ReduceOp::Min => a.min(x),
        }
    }
}

thread_local! {
    /// The reducing operator of the collective this device thread is running.
    static REDUCE: Cell<ReduceOp> = const { Cell::new(ReduceOp::Add) };
}

/// The reducing operator of the collective running on this thread (add outside these calls).
pub(crate) fn current_reduce() -> ReduceOp {
    REDUCE.with(Cell::get)
}

/// Runs `f` with `op` as this thread's reducing operator (add again afterwards, also when `f`
/// unwinds).
pub(crate) fn reducing<R>(op: ReduceOp, f: impl FnOnce() -> R) -> R {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            REDUCE.with(|r| r.set(ReduceOp::Add));
        }
    }
    REDUCE.with(|r| r.set(op));
    let _reset = Reset;
    f()
}
