//! The engines of a NeuronCore: the one engine table every layer above names.

/// The engine an instruction runs on. This is the one engine table: [`Engine::ALL`] gives the
/// display order and [`Engine::index`] the slot every per-engine array uses; clocks come from
/// [`TargetSpec::engine_ghz`](crate::target::TargetSpec::engine_ghz).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub enum Engine {
    /// TensorE (PE array): matmul and transpose.
    Tensor,
    /// VectorE.
    Vector,
    /// ScalarE (activation engine).
    Scalar,
    /// GpSimdE.
    GpSimd,
    /// Sync engine (sequencer only; triggers DMAs).
    Sync,
    /// The DMA engines of the NeuronCore.
    Dma,
}

impl Engine {
    /// Number of engines (the length of every per-engine array).
    pub const COUNT: usize = 6;

    /// All engines in display order (`ALL[e.index()] == e`).
    pub const ALL: [Engine; Engine::COUNT] = [
        Engine::Tensor,
        Engine::Vector,
        Engine::Scalar,
        Engine::GpSimd,
        Engine::Sync,
        Engine::Dma,
    ];

    /// Slot of the engine in per-engine arrays (its position in [`Engine::ALL`]).
    pub const fn index(self) -> usize {
        self as usize
    }

    /// Profiler-style name.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Tensor => "TensorE",
            Engine::Vector => "VectorE",
            Engine::Scalar => "ScalarE",
            Engine::GpSimd => "GpSimdE",
            Engine::Sync => "SyncE",
            Engine::Dma => "DMA",
        }
    }
}
