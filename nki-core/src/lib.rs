//! # nki-core
//!
//! NKI — AWS Neuron's tile-level kernel language for Trainium — as a Rust crate that runs on any
//! CPU. Write a kernel with [`#[nki_kernel]`](macro@nki_kernel), launch it on an SPMD grid, and
//! get the values the hardware would compute, the rules the Neuron compiler enforces (as
//! compile errors or as an [`NkiError`] naming your kernel's line) and a
//! modelled NeuronCore timeline ([`Profile`]).
//!
//! ```
//! use nki_core::prelude::*;
//!
//! /// `c = a + b`, one [128, 512] tile per program instance.
//! #[nki_kernel]
//! fn tensor_add(a: &Hbm<bf16>, b: &Hbm<bf16>, c: &mut Hbm<bf16>) {
//!     let i = nl::program_id(0) * 128;
//!     let j = nl::program_id(1) * 512;
//!     let x = nl::load(a.slice((i..i + 128, j..j + 512))); // HBM -> SBUF
//!     let y = nl::load(b.slice((i..i + 128, j..j + 512)));
//!     nl::store(c.slice((i..i + 128, j..j + 512)), &(&x + &y)); // VectorE add, SBUF -> HBM
//! }
//!
//! let a = Hbm::<bf16>::full([256, 1024], bf16::from_f32(1.5));
//! let b = Hbm::<bf16>::full([256, 1024], bf16::from_f32(2.0));
//! let mut c = Hbm::<bf16>::zeros([256, 1024]);
//!
//! // Execute: NKI's `tensor_add[2, 2](a, b, c)`.
//! launch!(tensor_add[2, 2](&a, &b, &mut c))?;
//! assert_eq!(c.to_f32_vec()?[0], 3.5);
//!
//! // Simulate: the values and the modelled timeline on a Trainium2 NeuronCore.
//! let profile = tensor_add::simulate([2, 2], Target::Trn2, &a, &b, &mut c)?;
//! println!("{profile}"); // latency, what bounds it, engines, DMA, top source lines
//!
//! // Estimate: the timeline only, on tensors that hold no values.
//! let shape = Hbm::<bf16>::shape_only([256, 1024]);
//! let mut out = Hbm::<bf16>::shape_only([256, 1024]);
//! let est = tensor_add::estimate([2, 2], Target::Trn2, &shape, &shape, &mut out)?;
//! assert!(est.latency_ns > 0.0);
//!
//! // Mistakes are errors naming the op, the shapes, the program id and the kernel line.
//! let small = Hbm::<bf16>::zeros([128, 1024]);
//! let err = tensor_add::launch([2, 2], &small, &b, &mut c).err().expect("rows 128.. are out of bounds");
//! assert!(err.to_string().contains("program id"), "{err}");
//! # Ok::<(), NkiError>(())
//! ```
//!
//! ## Where to look
//!
//! - [`example`]: a documented kernel and the launchers `#[nki_kernel]` generates
//!   (`launch`, `simulate`, `estimate`, `run`).
//! - [`nl`] and [`nisa`]: the language and the engine instructions; [`prelude`] brings in
//!   everything a kernel needs.
//! - The crate root: device-memory tensors ([`Hbm`], shape-only tensors for estimates), tiles
//!   ([`Tile`], [`Tensor`]), grids and launches ([`Grid`], `nc(2)`, the [`Launch`] builder),
//!   the targets ([`Target`]: trn1 / trn2 / trn3), errors ([`NkiError`]), the instruction
//!   records the timing model reads ([`Instr`]) and what a modelled launch reports
//!   ([`Profile`], its Chrome trace and HTML page).
//! - [`typed`]: tiles whose shape is checked at compile time.
//! - [`sweep`]: parameter sweeps on modelled time (and, with the `criterion` feature, a
//!   criterion measurement of modelled time).
//! - [`mesh`]: multi-device meshes with sharded tensors, remote DMA and collectives.
//! - [`frontend`]: what a front end in another language (the `nki_rs` Python package) runs
//!   kernels through.
//! - [`ndarray`] and [`half`]: the versions of those crates this API takes, re-exported.

#![warn(missing_docs)]

// The crate's modules are private: what a user names is re-exported below (the root), in the
// language namespaces `nl` and `nisa`, and in the small public modules `typed`, `mesh`,
// `sweep` and `example`. Inside the crate, modules depend on each other in one order (see
// tests/module_cycles.rs).
mod abort;
mod access;
mod binding;
mod blocking;
mod builder;
mod compiler;
mod context;
mod dialect;
mod dtype;
pub mod emit;
mod engine;
mod error;
pub mod example;
mod exec;
mod execute;
mod files;
pub mod frontend;
mod hbm;
mod isa;
mod lang;
mod launcher;
mod math;
mod memory;
pub mod mesh;
mod mx;
mod names;
mod pipeline;
mod profile;
mod record;
mod reinterpret;
mod shadow;
mod slots;
mod spmd;
pub mod sweep;
mod target;
mod tensor;
mod tile;
mod timing;
pub mod typed;
mod values;
mod view;
mod written;

pub use nki_macros::nki_kernel;

/// The `ndarray` crate, at the version nki-core's API takes (`Hbm::from_array`,
/// `Hbm::to_array`, ...): use `nki_core::ndarray` instead of adding `ndarray` yourself, so the
/// versions always match.
pub use ndarray;

/// The `half` crate (`bf16`, `f16`), at the version nki-core's API takes.
pub use half;

extern crate self as nki_core;

// Shapes, indices and access patterns.
pub use crate::access::{ds, stepped, Ap, IntoIndex, Ix, Shape, MAX_DIMS, MAX_ELEMENTS};
// Element types.
pub use crate::dtype::{DType, Element, F8E4M3, F8E4M3FN, F8E5M2};
// Errors.
pub use crate::abort::user_closure as call_user_closure;
pub use crate::error::{ErrorKind, NkiError, Result, SourceLoc};
// Device memory (HBM) tensors and the views kernels read and write.
pub use crate::hbm::{with_borrowed, Hbm, HbmDest, HbmOut, HbmSource, HbmView, HbmViewMut, Lender};
// On-chip tiles and tensors.
pub use crate::tensor::{Alloc, Buffer, Placement, Tensor, TensorLike, TensorRef};
pub use crate::tile::{Tile, TileRef};
pub use crate::view::{SelectAt, SelectIndex};
// Launching: grids, launch modes and what a launch reports.
pub use crate::context::Mode;
pub use crate::spmd::{
    host_threads, nc, spmd_dim, Dialect, Factor, Grid, GridDim, InstanceInfo, Launch, LaunchReport,
    MAX_LOGICAL_CORES,
};
// The hardware targets.
pub use crate::target::{with_target_specs, Target, TargetSpec};
// The compiler stage between recording and costing.
pub use crate::compiler::stage::{with_compiler_stage, CompilerStage};
// What a kernel asks of the compiler (NKI 0.8 `CompileConfig`).
pub use crate::compiler::config::{
    with_compile_config, AddressRotation, Allocation, AllocationMode, CompileConfig,
    SchedulingHeuristic,
};
// Instruction records: what the timing model reads (one stream per NeuronCore).
pub use crate::math::{ActFn, AluOp};
pub use crate::names::InstrName;
pub use crate::record::{
    AffinePos, BufId, CoreStream, CostFacts, DmaDims, Engine, Instr, MatmulDims, MemKind, Opcode,
    Region, Regions, DEFAULT_MAX_RECORDS,
};
// Profiles of modelled launches.
pub use crate::profile::{Advice, AdviceKind};
pub use crate::profile::{
    Bound, BoundShare, CoreProfile, DmaStats, EngineStat, LineStat, LoopStat, OpInfo, Profile,
    Span, Spans, SpillKind, SpillLine, SpillStats, Track,
};
pub use crate::profile::{BoundRow, Finding, FindingKind, IrDump, PerformanceBounds};
pub use crate::profile::{CompilerKind, CompilerLine, CompilerStats};

/// The NKI language (`nki.language`, imported as `nl`): loads and stores, element-wise math,
/// activations, reductions, matmul and transpose, iota, the SPMD grid
/// (`program_id`, affine/sequential/static ranges), and [`nl::require`]
/// to reject bad kernel arguments. Each call lowers onto the engine instructions of
/// [`nisa`].
pub mod nl {
    pub use crate::lang::*;
}

/// The engine instructions (`nki.isa`, imported as `nisa`): `nc_matmul`, `activation`,
/// `tensor_tensor`, `tensor_scalar`, `tensor_reduce`, `tensor_copy`, `iota`, `memset`,
/// `dma_copy`, ... with NKI 0.7's destination-first signatures; [`classic`](nisa::classic)
/// holds the older value-returning forms.
pub mod nisa {
    pub use crate::isa::*;
    pub use crate::lang::random::dropout_into as dropout;
}

/// NKI 0.8's `nki.lnc`: data exchange, reduction and synchronisation between the two
/// physical NeuronCores sharing an HBM stack (`core_barrier`, `sendrecv`, `sendrecv_compute`),
/// the successors of the deprecated `nisa::core_barrier` / `nisa::sendrecv`.
pub mod lnc {
    pub use crate::isa::lnc08::{core_barrier, sendrecv, sendrecv_compute, SendRecvOpts};
    pub use crate::isa::DmaEngine;
}

/// Everything a kernel and its launcher need.
pub mod prelude {
    pub use crate::{ds, stepped, Ix};
    pub use crate::{launch, nki_kernel};
    pub use crate::{nc, spmd_dim, Dialect, Grid, Launch, LaunchReport};
    pub use crate::{nisa, nl};
    pub use crate::{DType, Element, F8E4M3, F8E4M3FN, F8E5M2};
    pub use crate::{ErrorKind, NkiError};
    pub use crate::{Hbm, HbmOut, HbmView, HbmViewMut};
    pub use crate::{MemKind, Mode, Profile, Target};
    pub use crate::{Psum, Sbuf};
    pub use crate::{Tensor, TensorRef, Tile, TileRef};
    pub use half::{bf16, f16};
}

pub use crate::typed::{Psum, Sbuf};

/// What `#[nki_kernel]` expansions, the benches and the crate's own tests call; not part of
/// the API (no stability promise).
#[doc(hidden)]
pub mod __private {
    pub use crate::binding::{Binding, NameByBinding, PassBinding};
    pub use crate::execute::{ArrayArg, OutputArrays};
    pub use crate::launcher::{launch, launch_returning, modelled, modelled_returning};
    pub use crate::memory::MemoryPeak;
    pub use crate::tensor::{KernelOutputs, KernelReturn, ReturnSlot, Returned};
    pub use crate::timing::{cost, model};
}

/// Launches a `#[nki_kernel]` function with NKI's grid syntax:
/// `launch!(kernel[2, 2](&a, &b, &mut c))` or `launch!(kernel[spmd_dim(4, nc(2)), 2](...))`.
/// Returns `Result<LaunchReport, NkiError>`.
#[macro_export]
macro_rules! launch {
    ($kernel:ident [ $($g:expr),+ $(,)? ] ( $($arg:expr),* $(,)? )) => {
        $kernel::launch(
            $crate::Grid::from_dims(vec![$($crate::GridDim::from($g)),+]),
            $($arg),*
        )
    };
}

/// The criterion this crate's `criterion` feature is built with: benchmarks on modelled time
/// (`nki_core::sweep::ModelledTime`) take their `Criterion`, `criterion_group!` and
/// `criterion_main!` from here, so that no other criterion version clashes with it.
#[cfg(feature = "criterion")]
pub use criterion;

/// The README's code blocks, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
