//! # nki-candle
//!
//! nki-rs kernels as [candle](https://github.com/huggingface/candle) custom ops — the Rust
//! counterpart of calling an NKI kernel from a PyTorch or JAX model.
//!
//! A [`KernelOp`] wraps a forward kernel ([`NkiKernel`], usually written with [`kernel!`]), its
//! launch grid as a function of the input shapes and its outputs (by default one, shaped and
//! typed like the first input; [`KernelOp::outputs`] gives several, each with its own dtype).
//! candle's `cpu_fwd` lends the CPU tensors' storage to the kernel as
//! [`Hbm`](nki_core::Hbm) inputs without copying them (contiguous f32, i32 and u32
//! tensors; strided views are gathered once, 16- and 8-bit types converted once), launches
//! the kernel and moves the output's buffer into candle storage (no copy for f32, i32, u32).
//! With a backward kernel (or the pass-through backward of an addition), `bwd` launches it so
//! `Var` + `backward()` give gradients through the op. A [`Profiler`] makes each call also
//! model its device time on a Trainium target and keeps per-op calls, latency and bottleneck
//! engine. Errors are candle's typed variants (see [`error`]).
//!
//! ```
//! use candle_core::{Device, Tensor};
//! use nki_candle::{kernel, KernelOp};
//! use nki_core::prelude::*;
//! use nki_kernels::autograd::tensor_add_tile;
//!
//! kernel!(AddTile = |launch, [a, b], [c]| tensor_add_tile::run(launch, a, b, c));
//!
//! let add = KernelOp::new("nki_add", AddTile, |s| Grid::new([s[0][0] / 128, s[0][1] / 512]))
//!     .backward_pass_through();
//! let a = Tensor::ones((256, 1024), candle_core::DType::F32, &Device::Cpu)?;
//! let c = add.apply2(&a, &a)?;
//! assert_eq!(c.sum_all()?.to_scalar::<f32>()?, 2.0 * 256.0 * 1024.0);
//! # Ok::<(), candle_core::Error>(())
//! ```

#![warn(missing_docs)]

pub mod error;
mod kernel;
mod op;
pub mod ops;
mod profile;
mod storage;
pub mod testing;

pub use error::{kernel_error, nki_error, KernelError};
pub use kernel::{arity_error, HbmTensor, NkiKernel, NoKernel};
pub use op::{GridFn, KernelOp, OutputShapeFn, OutputsFn};
pub use profile::{OpStats, Profiler};
pub use storage::BridgeElement;

/// Re-exported for [`kernel!`]'s expansion.
pub use nki_core;
