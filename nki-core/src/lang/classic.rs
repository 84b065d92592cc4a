//! The Beta-1 (`neuronxcc.nki`) indexing forms that NKI 0.7 removed: `nl.arange` index
//! vectors. 0.7 kernels address partial tiles with `min()`-clamped slices
//! ([`tile_range`](super::tile_range)) and access patterns (`.ap`); the seeds' programs, which
//! predate that, reach these forms here:
//!
//! ```
//! # use nki_core::prelude::*;
//! use nki_core::nl::classic as beta1;
//! # Launch::new(1).run(|| {
//! let idx = beta1::arange(0, 1, 128, DType::I32);
//! # assert_eq!(idx.shape(), [1, 128]);
//! # }).unwrap();
//! ```
//!
//! Beta 1's `mask=` argument has no counterpart in nki-rs: a masked load or store of rows
//! `i_p < n` is the slice `nl::tile_range(t, 128, n)` of the tensor, in both dialects.

pub use super::layout::arange;
