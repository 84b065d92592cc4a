//! # nki-kernels
//!
//! A kernel library for nki-core: the NKI tutorials' kernels written in Rust, each beside its
//! tests (in `tests/`) against an independent reference.
//!
//! - [`tensor_add`](mod@tensor_add): a streaming element-wise addition with a tunable free-dimension chunk.
//! - [`autograd`]: forward and backward kernels for framework autograd graphs (tensor add,
//!   RMSNorm), used by the `nki-candle` bridge.
//! - [`matmul`]: the four matrix-multiplication kernels of the NKI matmul tutorial, from the
//!   plainly tiled one to the fully blocked one.
//! - [`testing`]: deterministic random inputs and a NumPy-style `allclose` for the tests and
//!   examples.

#![warn(missing_docs)]

pub mod autograd;
pub mod matmul;
pub mod tensor_add;
pub mod testing;

pub use tensor_add::{tensor_add, tensor_add_stream};
