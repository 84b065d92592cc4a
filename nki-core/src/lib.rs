//! # nki-core
//!
//! NKI — AWS Neuron's tile-level kernel language for Trainium — as a Rust crate that runs on any
//! CPU: write a kernel with `#[nki_kernel]`, launch it on an SPMD grid, get the values the
//! hardware would compute, every rule the Neuron compiler enforces, and a modelled NeuronCore
//! timeline. `use nki_core::prelude::*;` brings in everything a kernel needs.

#![warn(missing_docs)]

mod abort;
pub mod access;
pub mod context;
pub mod dtype;
mod engine;
pub mod error;
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
