//! The timing model: per-engine instruction costs and a dependency-aware scheduler that turns
//! the instruction records of a launch into a modelled NeuronCore timeline.
//! (Placeholder while the model is built: sums nothing.)

use crate::memory::MemoryPeak;
use crate::profile::Profile;
use crate::spmd::CoreStream;
use crate::target::Target;

/// Models the launch's record streams on `target` and summarises the timeline.
pub fn model(streams: &[CoreStream], target: Target, memory: MemoryPeak) -> Profile {
    let n: usize = streams
        .iter()
        .flat_map(|s| s.instances.iter())
        .map(|(_, r)| r.len())
        .sum();
    Profile {
        target,
        latency_ns: 0.0,
        instructions: n,
        memory,
    }
}
