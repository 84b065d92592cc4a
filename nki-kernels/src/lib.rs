//! # nki-kernels
//!
//! A kernel library for nki-core: the NKI tutorials' kernels written in Rust, each beside its
//! tests (in `tests/`) against an independent reference.
//!
//! - [`tensor_add`](mod@tensor_add): a streaming element-wise addition with a tunable free-dimension chunk.
//! - [`calibration`]: the public calibration points and their modelled values.
//! - [`calibration_kernels`]: the small kernels of the public timing measurements.
//! - [`matmul`]: the four matrix-multiplication kernels of the NKI matmul tutorial, from the
//!   plainly tiled one to the fully blocked one.
//! - [`testing`]: deterministic random inputs and a NumPy-style `allclose` for the tests and
//!   examples.

#![warn(missing_docs)]

pub mod calibration;
pub mod calibration_kernels;
pub mod matmul;
pub mod tensor_add;
pub mod testing;

pub use tensor_add::{tensor_add, tensor_add_stream};
