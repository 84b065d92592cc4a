//! Profiles: the summary of a modelled timeline. (Placeholder while the model is built.)

use crate::memory::MemoryPeak;
use crate::target::Target;

/// The summary of a modelled launch.
#[derive(Clone, Debug)]
pub struct Profile {
    /// Target modelled.
    pub target: Target,
    /// Modelled latency in ns.
    pub latency_ns: f64,
    /// Instructions recorded.
    pub instructions: usize,
    /// Peak on-chip usage.
    pub memory: MemoryPeak,
}
