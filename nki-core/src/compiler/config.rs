//! What a kernel asks of the compiler: NKI 0.8's `nki.compiler.CompileConfig`
//! (`@nki.jit(compile_config=CompileConfig(...))`), as [`CompileConfig`] on a
//! [`Launch`](crate::Launch) ([`Launch::compile_config`](crate::Launch::compile_config)) or on
//! the kernel (`#[nki_kernel(compile_config = ...)]`).
//!
//! NKI 0.8 documents the knobs (the `nki-compile-config` deep dive, "why DMA loads wait for
//! compute"): how on-chip tiles get addresses ([`Allocation`], [`AllocationMode`]), whether a
//! tile rewritten again and again gets a fresh address each time ([`AddressRotation`]) and
//! which ready instruction an engine runs first ([`SchedulingHeuristic`]). The timing model
//! applies them in `compiler::allocate` (addresses, and the waits a reused address brings) and
//! in `timing` (the scheduler); see docs/timing-model.md.
//!
//! Defaults are the compiler's for each dialect ([`CompileConfig::for_dialect`]): NKI 0.7/0.8
//! kernels take `CompileConfig()`'s defaults (colouring, address rotation on where allowed,
//! ASAP), and Beta-1 kernels what neuronx-cc did, which is the same allocation flow with
//! address rotation (a public report: manual `address=` placement "skips address rotation"
//! in the same compiler) plus the Beta-1 program transformations.

use crate::dialect::Dialect;

/// How the compiler gives on-chip tiles their addresses (NKI 0.8 `Allocation`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Allocation {
    /// `Allocation.COLORING`, the default flow: graph colouring after tracing, which colours
    /// the buffers apart while they fit (no buffer waits for another one's bytes; a tile
    /// placed by hand keeps its address). With address rotation each new value of a tile is
    /// a buffer of its own.
    #[default]
    Coloring,
    /// `Allocation.LINEAR`: linear scan, which "assigns an address to a tile at its first
    /// write and releases the address after its last read", placing by [`AllocationMode`].
    Linear(AllocationMode),
    /// Not an NKI mode: every tile the kernel allocates keeps a buffer of its own that no
    /// other tile ever takes, so a tile waits only for the accesses of the tile itself (the
    /// program as written, and the model before addresses were modelled).
    AsWritten,
}

/// Where [`Allocation::Linear`] places a tile (NKI 0.8 `AllocationMode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize)]
pub enum AllocationMode {
    /// `RING`: a fresh address per tile, reused after wrap-around ("a DMA into a new tile
    /// seldom waits for compute that reads an earlier tile"; in PSUM it rotates through the
    /// 8 banks): next fit from where the last tile was placed.
    #[default]
    Ring,
    /// `FAST`: stack and best fit: the smallest free block that holds the tile, the most
    /// recently freed first ("a DMA into it waits for the compute that reads the earlier
    /// tile").
    Fast,
    /// `MAX_REUSE`: least memory (and least overlap of loads and compute): the lowest free
    /// address that holds the tile.
    MaxReuse,
}

/// Whether a tile written anew gets a fresh address (NKI 0.8 `address_rotation`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize)]
pub enum AddressRotation {
    /// `AUTO` (the default): the compiler rotates every tile that has no manual address
    /// (`address=`; a public report: manual placement "skips address rotation").
    #[default]
    Auto,
    /// `ENABLE`: rotation on; a tile placed by hand keeps its address (the model honours the
    /// placement, so this acts as `AUTO`).
    Enable,
    /// `DISABLE`: a tile keeps one address for all its values, as written: a write that starts
    /// a new value waits for the reads of the value before it.
    Disable,
}

impl AddressRotation {
    /// True when tiles without a manual address rotate.
    pub fn rotates(self) -> bool {
        self != AddressRotation::Disable
    }
}

/// Which ready instruction an engine runs first (NKI 0.8 `SchedulingHeuristic`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize)]
pub enum SchedulingHeuristic {
    /// `ASAP` (the default): "select the instruction that can start first".
    #[default]
    Asap,
    /// `CRITICAL_PATH` ("prefer the instruction on the longest path to the kernel's
    /// outputs"): among the instructions a DMA queue or an engine may run, the one with the
    /// longest chain of work after it first.
    CriticalPath,
    /// `DMA_PREFETCH` ("prefer a DMA to an instruction that is not a DMA"): on an engine
    /// queue, the instruction that starts a DMA goes before compute instructions; among the
    /// DMAs, loads into on-chip memory go before stores and other copies.
    DmaPrefetch,
    /// `TRIVIAL`: program order on every engine and DMA queue.
    Trivial,
}

/// What the compiler is asked to do with a kernel (NKI 0.8 `nki.compiler.CompileConfig`), on
/// a [`Launch`](crate::Launch) or on the kernel (`#[nki_kernel(compile_config = ...)]`).
///
/// ```
/// use nki_core::{AllocationMode, CompileConfig, SchedulingHeuristic};
/// let ring = CompileConfig::default()
///     .linear(AllocationMode::Ring)
///     .scheduling(SchedulingHeuristic::DmaPrefetch);
/// assert_ne!(ring, CompileConfig::default());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub struct CompileConfig {
    /// How tiles get addresses (default [`Allocation::Coloring`]).
    pub allocation: Allocation,
    /// Whether tiles rotate through addresses (default [`AddressRotation::Auto`]).
    pub address_rotation: AddressRotation,
    /// Which ready instruction runs first (default [`SchedulingHeuristic::Asap`]).
    pub scheduling_heuristic: SchedulingHeuristic,
    /// Whether the compiler's program transformations run (Beta 1: the launch's
    /// [`CompilerStage`](crate::CompilerStage); NKI 0.7/0.8 document none). `false`: the
    /// program as written.
    pub transformations: bool,
}

impl Default for CompileConfig {
    /// NKI 0.8's `CompileConfig()`: colouring, address rotation `AUTO`, `ASAP`, the
    /// compiler's transformations.
    fn default() -> Self {
        CompileConfig {
            allocation: Allocation::Coloring,
            address_rotation: AddressRotation::Auto,
            scheduling_heuristic: SchedulingHeuristic::Asap,
            transformations: true,
        }
    }
}

impl CompileConfig {
    /// The compiler's configuration for a kernel of `dialect` that sets none: NKI 0.7/0.8,
    /// `CompileConfig()`'s defaults; Beta 1, what neuronx-cc did: the same colouring flow with
    /// address rotation and its program transformations.
    pub fn for_dialect(dialect: Dialect) -> CompileConfig {
        match dialect {
            Dialect::Beta1 | Dialect::Nki07 | Dialect::Nki08 => CompileConfig::default(),
        }
    }

    /// The program as written: no transformation, every tile a buffer of its own
    /// ([`Allocation::AsWritten`]), no rotation, `ASAP`.
    pub fn as_written() -> CompileConfig {
        CompileConfig {
            allocation: Allocation::AsWritten,
            address_rotation: AddressRotation::Disable,
            scheduling_heuristic: SchedulingHeuristic::Asap,
            transformations: false,
        }
    }

    /// Sets the allocation flow.
    pub fn allocation(mut self, a: Allocation) -> Self {
        self.allocation = a;
        self
    }

    /// Linear-scan allocation (`Allocation.LINEAR`) in `mode`.
    pub fn linear(mut self, mode: AllocationMode) -> Self {
        self.allocation = Allocation::Linear(mode);
        self
    }

    /// Sets address rotation.
    pub fn address_rotation(mut self, r: AddressRotation) -> Self {
        self.address_rotation = r;
        self
    }

    /// Sets the scheduling heuristic.
    pub fn scheduling(mut self, h: SchedulingHeuristic) -> Self {
        self.scheduling_heuristic = h;
        self
    }

    /// Sets whether the compiler's program transformations run.
    pub fn transformations(mut self, on: bool) -> Self {
        self.transformations = on;
        self
    }

    /// True when this is [`CompileConfig::as_written`]'s allocation: every tile its own
    /// buffer (nothing for the allocator to do).
    pub fn allocates_as_written(&self) -> bool {
        self.allocation == Allocation::AsWritten
    }
}

thread_local! {
    /// The configuration new launches of this thread take (see [`with_compile_config`]).
    static CONFIG: std::cell::Cell<Option<CompileConfig>> = const { std::cell::Cell::new(None) };
}

/// Runs `f` with `config` as the compile configuration of every launch it builds on this
/// thread (`Launch::new`, hence every `k::simulate` / `k::estimate` / `launch!`; it overrides
/// the kernels' own, as [`Launch::compile_config`](crate::Launch::compile_config) does), then
/// restores the previous setting (also when `f` unwinds).
pub fn with_compile_config<R>(config: CompileConfig, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<CompileConfig>);
    impl Drop for Restore {
        fn drop(&mut self) {
            CONFIG.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(CONFIG.with(|c| c.replace(Some(config))));
    f()
}

/// The configuration a launch built on this thread now takes (`None`: none set).
pub(crate) fn current() -> Option<CompileConfig> {
    CONFIG.with(std::cell::Cell::get)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dialect_defaults_to_the_compilers_flow() {
        for d in [Dialect::Beta1, Dialect::Nki07, Dialect::Nki08] {
            let c = CompileConfig::for_dialect(d);
            assert_eq!(c.allocation, Allocation::Coloring);
            assert!(c.address_rotation.rotates());
            assert_eq!(c.scheduling_heuristic, SchedulingHeuristic::Asap);
        }
        let w = CompileConfig::as_written();
        assert!(w.allocates_as_written() && !w.transformations);
        assert!(!w.address_rotation.rotates());
    }
}
