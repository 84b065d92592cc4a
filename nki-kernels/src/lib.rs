//! # nki-kernels
//!
//! A kernel library for nki-core: the NKI tutorials' kernels written in Rust, each beside its
//! tests (in `tests/`) against an independent reference.
//!
//! - [`tensor_add`](mod@tensor_add): a streaming element-wise addition with a tunable free-dimension chunk.
//! - [`autograd`]: forward and backward kernels for framework autograd graphs (tensor add,
//!   RMSNorm), used by the `nki-candle` bridge.
//! - [`calibration`]: the public calibration points and their modelled values.
//! - [`cross_validation`]: every fitted constant of the timing model refitted without each
//!   family of calibration points, and the left-out family's error beside its in-sample one.
//! - [`calibration_kernels`]: the small kernels of the public timing measurements.
//! - [`matmul`]: the four matrix-multiplication kernels of the NKI matmul tutorial, from the
//!   plainly tiled one to the fully blocked one.
//! - The NKI tutorials' kernels, one module each: [`transpose2d`](mod@transpose2d),
//!   [`average_pool2d`](mod@average_pool2d), [`adaptive_avg_pool2d`](mod@adaptive_avg_pool2d),
//!   [`softmax`](mod@softmax), [`rmsnorm`](mod@rmsnorm), [`layernorm`] (v1 and v2),
//!   [`rotary`](mod@rotary), [`sd_attention`] (v1 and v2),
//!   [`flash_attention`] (causal forward with LSE), [`mamba`] (v1 and v2),
//!   [`rmsnorm_qkv`](mod@rmsnorm_qkv), [`conv2d`] (conv2d + max-pool, CS149 form).
//!   These are NKI Beta 1; the streaming add, transpose, average pooling, softmax and
//!   RMSNorm also have NKI 0.7 twins beside them, computing the same values:
//!   [`tensor_add_stream_07`](fn@tensor_add::tensor_add_stream_07),
//!   [`transpose2d_07`](fn@transpose2d::transpose2d_07),
//!   [`average_pool2d_07`](fn@average_pool2d::average_pool2d_07),
//!   [`softmax_07`](fn@softmax::softmax_07), [`rmsnorm_07`](fn@rmsnorm::rmsnorm_07).
//! - [`kernel_optimization`]: the SDK's kernel-optimization tutorial (NKI 0.7 surface), all
//!   five matmul versions from a single tile to fully blocked.
//! - [`nki_library`]: ports of NKI Library kernels (cumsum, rmsnorm_quant, layernorm_tkg,
//!   RoPE, QKV, attention_tkg, MLP, MoE router top-k) in the NKI 0.7 surface.
//! - [`lnc2`]: a matmul split over the two cores of a logical NeuronCore (NKI 0.7, `kernel[2]`,
//!   the cores swapping partial products with `sendrecv`).
//! - [`trn2_profiles`]: the kernels of AWS's trn2 profile analyses (the 4096³ bf16 matmul
//!   ladder, TensorE tile sizes, DMA descriptor sizes) behind calibration section 6.
//! - [`reference`](mod@reference): independent plain-loop / ndarray references of every kernel.
//! - [`report`]: the check-and-profile printing the tutorial examples share.
//! - [`testing`]: deterministic random inputs and a NumPy-style `allclose` for the tests and
//!   examples.

#![warn(missing_docs)]

pub mod adaptive_avg_pool2d;
pub mod autograd;
pub mod average_pool2d;
pub mod calibration;
pub mod calibration_kernels;
mod checks;
pub mod conv2d;
pub mod cross_validation;
pub mod emit_examples;
pub mod flash_attention;
pub mod kernel_optimization;
pub mod layernorm;
pub mod lnc2;
pub mod mamba;
pub mod matmul;
pub mod nki_library;
pub mod nkibench;
pub mod reference;
pub mod report;
pub mod rmsnorm;
pub mod rmsnorm_qkv;
pub mod rotary;
pub mod sd_attention;
pub mod softmax;
pub mod tensor_add;
pub mod testing;
pub mod transpose2d;
pub mod trn2_profiles;

pub use tensor_add::{tensor_add, tensor_add_stream};
