//! `nisa`: engine-level instructions. Each call is exactly one instruction record on one engine
//! (see [`crate::record`]), with the hardware's numerics (f32 engine math, rounding to the
//! output dtype) and the compiler's operand rules as errors.
//!
//! | module | instructions |
//! |---|---|
//! | TensorE | [`nc_matmul`], [`nc_matmul_acc`], [`nc_transpose`] (also VectorE for <= 32x32) |
//! | ScalarE | [`activation`], [`activation_reduce`] |
//! | VectorE | [`tensor_tensor`], [`tensor_scalar`], [`tensor_reduce`], [`tensor_copy`], [`tensor_tensor_scan`], [`reciprocal`], [`memset`], [`bn_stats`], [`bn_aggr`] |
//! | VectorE top-8 | [`max8`], [`nc_find_index8`] (destination first) |
//! | GpSimdE | [`iota`], [`affine_select`], [`tensor_partition_reduce`] |
//! | DMA | [`dma_copy`] |
//!
//! Classic NKI keyword arguments map to positional `Option`s, or to an args struct with
//! `Default` and builder methods where an instruction has several ([`ActivationArgs`],
//! [`TensorScalarArgs`], [`ScanArgs`]). Scalars-or-vectors (`scale`, `operand0`, `initial`)
//! take any [`Operand`]: an `f32` or a `[P, 1]` tile.
//!
//! **Destination form.** Where NKI writes an instruction's result into part of an existing
//! tile (`out[:, a:b] = nisa.bn_stats(...)`, `nisa.x(dst=...)`, `acc[...] += x`), the builder
//! has an `_into` twin taking the destination view first: `x_into(dst, <same operands>)`,
//! with `dst` any tile or view whose partitions and elements per partition match the result;
//! the result is rounded to `dst`'s dtype (the `dtype` argument of the allocating form is not
//! taken). It is one instruction, the same record as the allocating form with `dst`'s region
//! as the write. Available: [`tensor_tensor_into`], [`tensor_scalar_into`],
//! [`activation_into`], [`tensor_copy_into`], [`tensor_reduce_into`], [`bn_stats_into`],
//! [`nc_matmul_into`], [`nc_transpose_into`] (and [`nc_matmul_acc`], which accumulates).
//! Each builder is one private `*_to(op, Dst, ...)` function; both forms call it.
//!
//! ```ignore
//! nisa::bn_stats_into(stats.slice((0..128, 6 * i..6 * (i + 1))), x.slice((0..128, 512 * i..512 * (i + 1))));
//! ```

pub(crate) mod base;
mod dma;
mod gpsimd;
mod max8;
mod scalar;
mod scalar_tensor_tensor;
pub(crate) mod tensor;
#[cfg(test)]
mod tests;
mod vector;

pub use crate::math::{ActFn, AluOp};
pub use crate::record::Engine;
pub use base::Operand;
pub use dma::{dma_copy, DmaEndpoint, DmaSource, DmaTarget};
pub use gpsimd::{affine_select, iota, tensor_partition_reduce, AffineExpr};
pub use max8::{max8, nc_find_index8, MAX8_MAX_ELEMENTS};
pub use scalar::{activation, activation_into, activation_reduce, ActivationArgs};
pub use scalar_tensor_tensor::scalar_tensor_tensor;
pub use tensor::{
    nc_matmul, nc_matmul_acc, nc_matmul_into, nc_matmul_transpose, nc_transpose, nc_transpose_into,
};
pub use vector::{
    bn_aggr, bn_stats, bn_stats_into, memset, memset_into, reciprocal, tensor_copy,
    tensor_copy_into, tensor_reduce, tensor_reduce_into, tensor_scalar, tensor_scalar_into,
    tensor_tensor, tensor_tensor_into, tensor_tensor_scan, ScanArgs, TensorScalarArgs,
};
pub(crate) use vector::{reduced_shape, trailing_axes};

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
