//! # nki-core
//!
//! NKI — AWS Neuron's tile-level kernel language for Trainium — as a Rust crate that runs on any
//! CPU. Write a kernel with [`#[nki_kernel]`](macro@nki_kernel), launch it on an SPMD grid, and
//! get the values the hardware would compute, the rules the Neuron compiler enforces (as
//! compile errors or as an [`NkiError`](error::NkiError) naming your kernel's line) and a
//! modelled NeuronCore timeline ([`Profile`](profile::Profile)).
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
//! - [`lang`] (`nl`) and [`isa`] (`nisa`): the language and the engine instructions;
//!   [`prelude`] brings in everything a kernel needs.
//! - [`hbm`]: device-memory tensors ([`Hbm`](hbm::Hbm), shape-only tensors for estimates);
//!   [`typed`]: tiles whose shape is checked at compile time.
//! - [`spmd`]: grids, `nc(2)`, the [`Launch`](spmd::Launch) builder.
//! - [`profile`]: what a modelled launch reports, its Chrome trace and HTML page;
//!   [`target`]: the hardware figures of trn1 / trn2 / trn3; [`timing`]: the model.
//! - [`sweep`]: parameter sweeps on modelled time (and, with the `criterion` feature, a
//!   criterion measurement of modelled time).
//! - [`mesh`]: multi-device meshes with sharded tensors, remote DMA and collectives.
//! - [`ndarray`] and [`half`]: the versions of those crates this API takes, re-exported.

#![warn(missing_docs)]

mod abort;
pub mod access;
pub mod context;
pub mod dtype;
mod engine;
pub mod error;
pub mod example;
mod exec;
pub mod hbm;
pub mod isa;
pub mod lang;
pub mod launcher;
pub mod math;
pub mod memory;
pub mod mesh;
mod ops;
pub mod profile;
pub mod record;
mod slots;
pub mod spmd;
pub mod sweep;
pub mod target;
pub mod tensor;
pub mod tile;
pub mod timing;
pub mod typed;
pub mod view;
mod written;

pub use nki_macros::nki_kernel;

/// The `ndarray` crate, at the version nki-core's API takes (`Hbm::from_array`,
/// `Hbm::to_array`, ...): use `nki_core::ndarray` instead of adding `ndarray` yourself, so the
/// versions always match.
pub use ndarray;

/// The `half` crate (`bf16`, `f16`), at the version nki-core's API takes.
pub use half;

extern crate self as nki_core;

/// Everything a kernel and its launcher need.
pub mod prelude {
    pub use crate::access::{ds, stepped, Ix};
    pub use crate::context::Mode;
    pub use crate::dtype::{DType, Element, F8E4M3, F8E5M2};
    pub use crate::error::{ErrorKind, NkiError};
    pub use crate::hbm::{Hbm, HbmOut, HbmView, HbmViewMut};
    pub use crate::isa as nisa;
    pub use crate::lang as nl;
    pub use crate::profile::Profile;
    pub use crate::record::MemKind;
    pub use crate::spmd::{nc, spmd_dim, Grid, Launch, LaunchReport};
    pub use crate::target::Target;
    pub use crate::tensor::{Tensor, TensorRef};
    pub use crate::tile::{Tile, TileRef};
    pub use crate::typed::{Psum, Sbuf};
    pub use crate::{launch, nki_kernel};
    pub use half::{bf16, f16};
}

/// Launches a `#[nki_kernel]` function with NKI's grid syntax:
/// `launch!(kernel[2, 2](&a, &b, &mut c))` or `launch!(kernel[spmd_dim(4, nc(2)), 2](...))`.
/// Returns `Result<LaunchReport, NkiError>`.
#[macro_export]
macro_rules! launch {
    ($kernel:ident [ $($g:expr),+ $(,)? ] ( $($arg:expr),* $(,)? )) => {
        $kernel::launch(
            $crate::spmd::Grid::from_dims(vec![$($crate::spmd::GridDim::from($g)),+]),
            $($arg),*
        )
    };
}

/// The README's code blocks, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
