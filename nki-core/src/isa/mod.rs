//! `nisa`: engine-level instructions, in NKI 0.7's spelling. Each call is exactly one
//! instruction record on one engine (see [`crate::record`]), with the hardware's numerics (f32
//! engine math, rounding to the output dtype) and the compiler's operand rules as errors.
//!
//! **Destination first.** As in NKI 0.7, every instruction writes into an existing tile or view
//! given first (`nisa.tensor_tensor(dst=out, data1=a, data2=b, op=nl.add)` is
//! `nisa::tensor_tensor(&out, &a, &b, AluOp::Add, None)`) and returns nothing; the result is
//! rounded to `dst`'s dtype, and `dst` must have the result's partitions and elements per
//! partition and live where the engine can write. NKI's keyword arguments are the last
//! argument: `None` for the defaults, or a small options struct built with its methods
//! ([`Opts`] for `engine`, [`TensorScalarOpts`], [`ActivationOpts`], [`ReduceOpts`],
//! [`MatmulOpts`], [`ScanOpts`], [`SttOpts`], [`DmaOpts`]); `name=` is [`named`]`(name, || ...)`
//! around the call. Scalars-or-vectors (`scale`,
//! `operand0`, `initial`) take any [`Operand`]: an `f32` or a `[P, 1]` tile.
//!
//! | engine | instructions |
//! |---|---|
//! | TensorE | [`nc_matmul`] (accumulating, or a transpose with `is_transpose`), [`nc_transpose`] (also VectorE for <= 32x32) |
//! | ScalarE | [`activation`] (with accumulator chaining), [`activation_reduce`], [`activate2`] (trn3) |
//! | VectorE | [`tensor_tensor`], [`tensor_scalar`], [`scalar_tensor_tensor`], [`tensor_reduce`], [`tensor_copy`], [`tensor_tensor_scan`], [`reciprocal`], [`memset`], [`bn_stats`], [`bn_aggr`] |
//! | VectorE top-8 | [`max8`], [`nc_find_index8`], [`nc_match_replace8`] (GpSimdE [`topk`] for K of a 16-partition snake) |
//! | VectorE accumulators ([`AccumOpts`], [`ReduceCmd`]) | [`tensor_scalar_reduce`], [`tensor_scalar_cumulative`], [`select_reduce`], [`range_select`], [`exponential`] (trn3) |
//! | VectorE predicated copy | [`tensor_copy_predicated`] |
//! | VectorE cross-partition | [`nc_stream_shuffle`] (within 32-partition quadrants) |
//! | random numbers (VectorE / GpSimdE XORWOW) | [`rng`], [`rand2`] (trn3), [`rand_set_state`], [`rand_get_state`], [`set_rng_seed`] |
//! | trace-time queries | [`get_nc_version`], [`get_nc_sub_version`] |
//! | GpSimdE | [`iota`], [`affine_select`], [`tensor_partition_reduce`], [`nonzero_with_count`], [`sequence_bounds`], [`nc_n_gather`], [`local_gather`] |
//! | DMA | [`dma_copy`], [`dma_compute`], [`dma_transpose`] |
//!
//! ```
//! # use nki_core::prelude::*;
//! use nki_core::nisa::{ActFn, ActivationOpts, AluOp};
//! # let h = Hbm::from_vec(&[128, 512], vec![0.5f32; 128 * 512]).unwrap();
//! # let hb = Hbm::from_vec(&[128, 1], vec![1.0f32; 128]).unwrap();
//! # Launch::new(1).run(|| {
//! # let (a, b, bias) = (nl::load(&h), nl::load(&h), nl::load(&hb));
//! let out = nl::ndarray(&[128, 512], DType::BF16, MemKind::Sbuf);
//! nisa::tensor_tensor(&out, &a, &b, AluOp::Add, None);
//! nisa::activation(&out, ActFn::Exp, &out, ActivationOpts::new().bias(&bias).scale(0.5));
//! let stats = nl::ndarray(&[128, 12], DType::F32, MemKind::Sbuf);
//! for i in 0..2 {
//!     nisa::bn_stats(stats.slice((0..128, 6 * i..6 * (i + 1))), &out, None);
//! }
//! # }).unwrap();
//! ```
//!
//! **Beta 1.** The forms that return a new tile (`y = nisa.tensor_tensor(a, b, op, dtype)`)
//! and their `_into` twins live in [`classic`]; each is a thin wrapper over the same builder,
//! so both spellings leave the same records. Each instruction is one private `*_to(op, Dst,
//! ...)` builder that both call.

pub(crate) mod accum;
pub(crate) mod accum_regs;
mod activate2;
pub(crate) mod alu_rules;
pub(crate) mod base;
pub mod classic;
mod dma;
mod dma_indirect;
#[cfg(test)]
mod dma_tests;
mod dynamic_ap;
mod exponential;
pub(crate) mod gather;
mod gpsimd;
pub(crate) mod lnc;
pub(crate) mod lnc08;
pub(crate) mod lnc_state;
mod max8;
mod mx;
mod named;
pub(crate) mod nki_scalar;
mod nonzero;
pub(crate) mod op;
mod opts;
mod register;
mod rng;
pub(crate) mod rng_state;
#[cfg(test)]
mod same_records;
pub(crate) mod scalar;
mod scalar_alu;
mod scalar_tensor_tensor;
mod select;
mod sequence_bounds;
mod shuffle;
pub(crate) mod tensor;
mod tensor_scalar_reduce;
#[cfg(test)]
mod tests;
mod topk;
pub(crate) mod trace_args;
pub(crate) mod vector;
mod version;

pub use crate::math::{ActFn, AluOp};
pub use crate::record::Engine;
pub use accum::{AccumOpts, ReduceCmd};
pub use activate2::{activate2, Activate2Opts};
pub use base::Operand;
pub(crate) use dma::tile_endpoints;
pub use dma::{
    dma_compute, dma_copy, dma_transpose, DgeMode, DmaEndpoint, DmaOpts, DmaSource, DmaTarget,
    IndirectAp, OobMode,
};
pub use dynamic_ap::ApTerm;
pub use exponential::exponential;
pub use gather::{local_gather, nc_n_gather, LOCAL_GATHER_ELEMS, LOCAL_GATHER_MAX_INDICES};
pub use gpsimd::{affine_select, iota, tensor_partition_reduce, AffineExpr};
#[allow(deprecated)]
pub use lnc::{core_barrier, sendrecv, sendrecv_on, BarrierData, DmaEngine};
pub use max8::{max8, nc_find_index8, nc_match_replace8, MAX8_MAX_ELEMENTS};
pub use mx::{nc_matmul_mx, quantize_mx};
pub use named::named;
pub use nki_scalar::{
    scalar_load, scalar_load_i64, scalar_load_on, scalar_store, scalar_store_on, NkiScalar,
    ScalarType,
};
pub use nonzero::{nonzero_with_count, NONZERO_PARTITION_STEP};
pub use opts::{MatmulOpts, MatmulPerfMode, Opts, ReduceOpts};
#[allow(deprecated)]
pub use register::{register_alloc, register_load, register_move, register_store, VirtualRegister};
pub use rng::{rand2, rand_get_state, rand_set_state, rng, set_rng_seed};
pub use scalar::{activation, activation_reduce, ActivationOpts};
pub use scalar_alu::scalar_alu;
pub use scalar_tensor_tensor::{scalar_tensor_tensor, SttOpts};
pub use select::{range_select, select_reduce, tensor_copy_predicated, PredicateOpts, FP32_MIN};
pub use sequence_bounds::sequence_bounds;
pub use shuffle::{nc_stream_shuffle, QUADRANT, SHUFFLE_KEEP};
pub use tensor::{nc_matmul, nc_transpose};
pub use tensor_scalar_reduce::{tensor_scalar_cumulative, tensor_scalar_reduce};
pub use topk::{topk, TOPK_MAX_K, TOPK_MAX_N};
// The option structs' former names (`*Args`), deprecated aliases of the `*Opts` names.
#[allow(deprecated)]
pub use accum::ReduceArgs;
#[allow(deprecated)]
pub use activate2::Activate2Args;
#[allow(deprecated)]
pub use scalar::ActivationArgs;
pub use vector::{
    bn_aggr, bn_stats, memset, reciprocal, tensor_copy, tensor_reduce, tensor_scalar,
    tensor_tensor, tensor_tensor_scan, ScanOpts, TensorScalarOpts,
};
pub(crate) use vector::{reduced_shape, trailing_axes};
#[allow(deprecated)]
pub use vector::{ScanArgs, TensorScalarArgs};
pub use version::{get_nc_sub_version, get_nc_version, NcVersion};

#[cfg(test)]
pub(crate) mod trace {
    //! Runs a closure as one simulated program instance and returns its records or error.

    use crate::abort::Stop;
    use crate::context::run_instance;
    use crate::context::{InstanceCtx, LaunchShared, Mode};
    use crate::error::{ErrorKind, NkiError};
    use crate::record::Instr;
    use crate::target::Target;

    /// Runs `f` in a fresh instance context with `mode` on the default target; returns the
    /// records it left.
    pub(crate) fn run(mode: Mode, f: impl FnOnce()) -> Result<Vec<Instr>, NkiError> {
        run_on(Target::default(), mode, f)
    }

    /// [`run`] on `target`.
    pub(crate) fn run_on(
        target: Target,
        mode: Mode,
        f: impl FnOnce(),
    ) -> Result<Vec<Instr>, NkiError> {
        let ctx = InstanceCtx::new(vec![0], vec![1], 0u32, 0, mode, target, LaunchShared::new());
        match run_instance(ctx, f) {
            (ctx, Ok(())) => Ok(ctx.records),
            // A test's own assertion failing inside `f` stays a panic.
            (_, Err(Stop::Failed(e))) if e.kind() == ErrorKind::KernelPanic => panic!("{e}"),
            (_, Err(Stop::Failed(e))) => Err(e),
            (_, Err(Stop::Cancelled)) => unreachable!("a lone instance is never cancelled"),
        }
    }
}
