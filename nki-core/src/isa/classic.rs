//! The Beta-1 (`neuronxcc.nki`) spelling of the instructions: each returns a new tile (with an
//! optional output `dtype`) instead of writing a `dst`, plus the `_into(dst, ...)` twins the
//! seeds' kernels use. Every function here is a thin wrapper over the same builder as the
//! dst-first instruction of [`crate::nisa`], so both spellings check the same rules and leave
//! the same instruction record; a program written against this module records exactly what it
//! recorded before the dst-first surface became primary.
//!
//! Use it by importing it under the usual name:
//!
//! ```
//! # use nki_core::nisa::AluOp;
//! # use nki_core::prelude::*;
//! use nki_core::nisa::classic as nisa;
//! # let x = Hbm::from_vec(&[1, 2], vec![1.0f32, 2.0]).unwrap();
//! # Launch::new(1).run(|| {
//! # let (a, b) = (nl::load(&x), nl::load(&x));
//! let y = nisa::tensor_tensor(&a, &b, AluOp::Add, None); // Beta 1: a new tile
//! # assert_eq!(y.values(), [2.0, 4.0]);
//! # }).unwrap();
//! ```
//!
//! instead of the 0.7 form `nisa::tensor_tensor(&y, &a, &b, AluOp::Add, None)` (see
//! [`crate::nisa`]).

use super::base::Dst;
use super::gpsimd::{affine_select_to, iota_to, tensor_partition_reduce_to};
use super::opts::MatmulOpts;
use super::scalar::activate;
use super::scalar_tensor_tensor::{scalar_tensor_tensor_to, SttOpts};
use super::tensor::{check_identity, matmul_new, nc_transpose_to};
use super::vector::{
    bn_aggr_to, bn_stats_to, memset_to, reciprocal_to, tensor_copy_to, tensor_reduce_to,
    tensor_scalar_to, tensor_tensor_scan_to, tensor_tensor_to, ReduceKind,
};
use crate::builder::instruction;
use crate::dtype::DType;
use crate::tile::{Tile, TileRef};

pub use super::dma::{DmaEndpoint, DmaSource, DmaTarget};
pub use super::gpsimd::AffineExpr;
pub use super::max8::{max8, nc_find_index8, nc_match_replace8, MAX8_MAX_ELEMENTS};
pub use super::scalar::ActivationOpts;
pub use super::vector::{ScanOpts, TensorScalarOpts};
// The former names, deprecated aliases of the `*Opts` names.
pub use super::Operand;
#[allow(deprecated)]
pub use super::{ActivationArgs, ScanArgs, TensorScalarArgs};
pub use crate::math::{ActFn, AluOp};
pub use crate::record::Engine;

instruction! {
    /// Element-wise `data1 op data2` into a new SBUF tile of `data1`'s shape (Beta-1
    /// `nisa.tensor_tensor`): `dtype`, or the promoted input dtype. See
    /// [`crate::isa::tensor_tensor`].
    pub fn tensor_tensor<'a, 'b>(
        data1: into TileRef<'a>, data2: into TileRef<'b>, op: AluOp, dtype: Option<DType>,
    ) -> Tile as ins = "nisa.tensor_tensor" {
        tensor_tensor_to(&ins, Dst::New(dtype), data1, data2, op, None).tile()
    }

    /// [`tensor_tensor`] writing into `dst` (NKI's `dst[...] = nisa.tensor_tensor(...)`; `acc +=
    /// x` as `tensor_tensor_into(acc, acc, x, AluOp::Add)`). The 0.7 form without options.
    pub fn tensor_tensor_into<'d, 'a, 'b>(
        dst: into TileRef<'d>, data1: into TileRef<'a>, data2: into TileRef<'b>, op: AluOp,
    ) as ins = "nisa.tensor_tensor" {
        tensor_tensor_to(&ins, Dst::Into(dst), data1, data2, op, None);
    }

    /// `(data op0 operand0) op1 operand1` into a new SBUF tile (Beta-1 `nisa.tensor_scalar`):
    /// `args.dtype` or `data`'s dtype. See [`crate::isa::tensor_scalar`].
    pub fn tensor_scalar<'a>(
        data: into TileRef<'a>, op0: AluOp, operand0: into Operand<'a>, args: TensorScalarOpts<'a>,
    ) -> Tile as ins = "nisa.tensor_scalar" {
        tensor_scalar_to(&ins, Dst::New(args.dtype), data, op0, operand0, args).tile()
    }

    /// [`tensor_scalar`] writing into `dst` (the result is rounded to its dtype; `args.dtype` is
    /// not used).
    pub fn tensor_scalar_into<'d, 'a>(
        dst: into TileRef<'d>, data: into TileRef<'a>, op0: AluOp, operand0: into Operand<'a>,
        args: TensorScalarOpts<'a>,
    ) as ins = "nisa.tensor_scalar" {
        tensor_scalar_to(&ins, Dst::Into(dst), data, op0, operand0, args);
    }

    /// Reduces `data` along its trailing free `axes` with `op` into a new SBUF tile (Beta-1
    /// `nisa.tensor_reduce`): `keepdims` keeps the reduced axes as size 1 (a result with no free
    /// axis left is `[P, 1]`), `negate` multiplies by -1; `dtype` or `data`'s dtype. See
    /// [`crate::isa::tensor_reduce`].
    pub fn tensor_reduce<'a>(
        op: AluOp, data: into TileRef<'a>, axes: &[usize], keepdims: bool, negate: bool,
        dtype: Option<DType>,
    ) -> Tile as ins = "nisa.tensor_reduce" {
        tensor_reduce_to(&ins, Dst::New(dtype), ReduceKind::Alu(op), data, (axes, keepdims, negate)).tile()
    }

    /// [`tensor_reduce`] writing into `dst` (a view with the result's partitions and elements
    /// per partition).
    pub fn tensor_reduce_into<'d, 'a>(
        dst: into TileRef<'d>, op: AluOp, data: into TileRef<'a>, axes: &[usize], keepdims: bool,
        negate: bool,
    ) as ins = "nisa.tensor_reduce" {
        tensor_reduce_to(&ins, Dst::Into(dst), ReduceKind::Alu(op), data, (axes, keepdims, negate));
    }

    /// Copies (and casts) `src` into a new SBUF tile of `dtype` (default `src`'s) on `engine`
    /// (Beta-1 `nisa.tensor_copy`). See [`crate::isa::tensor_copy`].
    pub fn tensor_copy<'a>(src: into TileRef<'a>, dtype: Option<DType>, engine: Engine) -> Tile
    as ins = "nisa.tensor_copy" {
        tensor_copy_to(&ins, Dst::New(dtype), src, Some(engine)).tile()
    }

    /// [`tensor_copy`] writing (and casting) into `dst`.
    pub fn tensor_copy_into<'d, 'a>(dst: into TileRef<'d>, src: into TileRef<'a>, engine: Engine)
    as ins = "nisa.tensor_copy" {
        tensor_copy_to(&ins, Dst::Into(dst), src, Some(engine));
    }

    /// Scan along the free dimension into a new SBUF tile of `args.dtype`, by default the
    /// wider (higher-precision) dtype of `data0` and `data1`, as the Beta-1
    /// `nki.isa.tensor_tensor_scan` page sets it ("whichever input type has the highest
    /// precision"; the 0.7 form writes `dst`'s dtype). See [`crate::isa::tensor_tensor_scan`].
    pub fn tensor_tensor_scan<'a, 'b>(
        data0: into TileRef<'a>, data1: into TileRef<'b>, initial: into Operand<'a>, op0: AluOp,
        op1: AluOp, args: ScanOpts,
    ) -> Tile as ins = "nisa.tensor_tensor_scan" {
        let wider = DType::promote(data0.dtype(), data1.dtype());
        let dst = Dst::New(Some(args.dtype.unwrap_or(wider)));
        tensor_tensor_scan_to(&ins, dst, (data0, data1), initial, (op0, op1), args).tile()
    }

    /// `1 / data` into a new SBUF tile of `dtype` (default `data`'s) (Beta-1 `nisa.reciprocal`).
    pub fn reciprocal<'a>(data: into TileRef<'a>, dtype: Option<DType>) -> Tile
    as ins = "nisa.reciprocal" {
        reciprocal_to(&ins, Dst::New(dtype), data).tile()
    }

    /// A new SBUF tile of `shape` filled with `value` rounded to `dtype`, on VectorE or GpSimdE
    /// (Beta-1 `nisa.memset`). See [`crate::isa::memset`].
    pub fn memset(shape: &[usize], value: f32, dtype: DType, engine: Engine) -> Tile
    as ins = "nisa.memset" {
        memset_to(&ins, Dst::New(Some(dtype)), shape, value, Some(engine)).tile()
    }
}

/// [`memset`] writing into `dst`, on VectorE (the 0.7 call without options).
#[track_caller]
pub fn memset_into<'d>(dst: impl Into<TileRef<'d>>, value: f32) {
    super::memset(dst, value, None);
}

instruction! {
    /// Batch-norm statistics into a new `[P, 6]` SBUF tile of `dtype` (default `data`'s)
    /// (Beta-1 `nisa.bn_stats`). See [`crate::isa::bn_stats`].
    pub fn bn_stats<'a>(data: into TileRef<'a>, dtype: Option<DType>) -> Tile
    as ins = "nisa.bn_stats" {
        bn_stats_to(&ins, Dst::New(dtype), data).tile()
    }

    /// [`bn_stats`] writing into `dst` (six elements per partition).
    pub fn bn_stats_into<'d, 'a>(dst: into TileRef<'d>, data: into TileRef<'a>)
    as ins = "nisa.bn_stats" {
        bn_stats_to(&ins, Dst::Into(dst), data);
    }

    /// (mean, variance) into a new `[P, 2]` SBUF tile of `dtype` (default `data`'s) (Beta-1
    /// `nisa.bn_aggr`). See [`crate::isa::bn_aggr`].
    pub fn bn_aggr<'a>(data: into TileRef<'a>, dtype: Option<DType>) -> Tile
    as ins = "nisa.bn_aggr" {
        bn_aggr_to(&ins, Dst::New(dtype), data).tile()
    }

    /// `op(data * scale + bias)` on ScalarE into a new SBUF tile of `args.dtype` (default
    /// `data`'s) (Beta-1 `nisa.activation`). See [`crate::isa::activation`].
    pub fn activation<'a>(op: ActFn, data: into TileRef<'a>, args: ActivationOpts<'a>) -> Tile
    as ins = "nisa.activation" {
        activate(&ins, Dst::New(args.dtype), op, data, args, None::<Dst>).0.tile()
    }

    /// [`activation`] writing into `dst` (the result is rounded to its dtype; `args.dtype` is
    /// not used).
    pub fn activation_into<'d, 'a>(
        dst: into TileRef<'d>, op: ActFn, data: into TileRef<'a>, args: ActivationOpts<'a>,
    ) as ins = "nisa.activation" {
        activate(&ins, Dst::Into(dst), op, data, args, None::<Dst>);
    }

    /// [`activation`] plus the per-partition add-reduction of the fp32 results: returns
    /// `(out, reduce_res)` with `reduce_res` a new `[P, 1]` fp32 SBUF tile (Beta-1
    /// `nisa.activation_reduce`). See [`crate::isa::activation_reduce`].
    pub fn activation_reduce<'a>(op: ActFn, data: into TileRef<'a>, args: ActivationOpts<'a>)
        -> (Tile, Tile) as ins = "nisa.activation_reduce" {
        let dst = Dst::New(args.dtype);
        let (out, red) = activate(&ins, dst, op, data, args, Some(Dst::New(None)));
        (out.tile(), red.expect("reduce requested").tile())
    }

    /// `stationary[K, M]^T @ moving[K, N]` into a new fp32 PSUM tile `[M, N]` (Beta-1
    /// `nisa.nc_matmul`). See [`crate::isa::nc_matmul`].
    pub fn nc_matmul<'a, 'b>(stationary: into TileRef<'a>, moving: into TileRef<'b>) -> Tile
    as ins = "nisa.nc_matmul" {
        matmul_new(&ins, stationary, moving)
    }
}

/// `dst = stationary^T @ moving` into the PSUM view `dst` `[M, N]`: one matmul that
/// overwrites `dst` (`accumulate=False`).
#[track_caller]
pub fn nc_matmul_into<'d, 'a, 'b>(
    dst: impl Into<TileRef<'d>>,
    stationary: impl Into<TileRef<'a>>,
    moving: impl Into<TileRef<'b>>,
) {
    super::nc_matmul(dst, stationary, moving, MatmulOpts::new().accumulate(false));
}

/// `acc += stationary^T @ moving` in PSUM (NKI's `psum += nisa.nc_matmul(...)`); the first
/// matmul into an unwritten accumulator overwrites it. The 0.7 `nc_matmul` with its default
/// `accumulate=None`.
#[track_caller]
pub fn nc_matmul_acc<'a, 'b, 'c>(
    acc: impl Into<TileRef<'c>>,
    stationary: impl Into<TileRef<'a>>,
    moving: impl Into<TileRef<'b>>,
) {
    super::nc_matmul(acc, stationary, moving, None);
}

instruction! {
    /// Transposes `data[P, F]` to a new fp32 PSUM tile `[F, P]` as `nisa.nc_matmul(data,
    /// identity, is_transpose=True)` with `identity` a `[P, P]` identity (checked when values
    /// are computed). Costs what [`nc_transpose`] costs.
    pub fn nc_matmul_transpose<'a, 'b>(data: into TileRef<'a>, identity: into TileRef<'b>)
        -> Tile as ins = "nisa.nc_matmul" {
        check_identity(&ins, &data, &identity);
        nc_transpose_to(&ins, Dst::New(None), data, Engine::Tensor).tile()
    }

    /// Transposes `data[P, F]` to a new `[F, P]` tile on `engine` (Beta-1 `nisa.nc_transpose`):
    /// fp32 PSUM on TensorE, `data`'s dtype in SBUF on VectorE. See
    /// [`crate::isa::nc_transpose`].
    pub fn nc_transpose<'a>(data: into TileRef<'a>, engine: Engine) -> Tile
    as ins = "nisa.nc_transpose" {
        nc_transpose_to(&ins, Dst::New(None), data, engine).tile()
    }

    /// [`nc_transpose`] writing into `dst` (`[F, P]`).
    pub fn nc_transpose_into<'d, 'a>(dst: into TileRef<'d>, data: into TileRef<'a>, engine: Engine)
    as ins = "nisa.nc_transpose" {
        nc_transpose_to(&ins, Dst::Into(dst), data, engine);
    }

    /// `expr`'s values into a new SBUF tile of `expr.shape()` and `dtype` (Beta-1 `nisa.iota`).
    /// See [`crate::isa::iota`].
    pub fn iota(expr: &AffineExpr, dtype: DType) -> Tile as ins = "nisa.iota" {
        iota_to(&ins, Dst::New(Some(dtype)), expr).tile()
    }

    /// `cmp(pred, 0) ? on_true : on_false_value` into a new SBUF tile of `dtype` (default
    /// `on_true`'s) (Beta-1 `nisa.affine_select`). See [`crate::isa::affine_select`].
    pub fn affine_select<'a>(
        pred: &AffineExpr, cmp: AluOp, on_true: into TileRef<'a>, on_false_value: f32,
        dtype: Option<DType>,
    ) -> Tile as ins = "nisa.affine_select" {
        affine_select_to(&ins, Dst::New(dtype), pred, cmp, on_true, on_false_value).tile()
    }

    /// Reduces across partitions into a new `[1, ...]` SBUF tile of `dtype` (default `data`'s)
    /// (Beta-1 `nisa.tensor_partition_reduce`). See [`crate::isa::tensor_partition_reduce`].
    pub fn tensor_partition_reduce<'a>(op: AluOp, data: into TileRef<'a>, dtype: Option<DType>)
        -> Tile as ins = "nisa.tensor_partition_reduce" {
        tensor_partition_reduce_to(&ins, Dst::New(dtype), op, data).tile()
    }

    /// `(data op0 operand0) op1 data1` into a new SBUF tile of `dtype` (default: the promoted
    /// input dtype) (Beta-1 `nisa.scalar_tensor_tensor`, no operand reversal). See
    /// [`crate::isa::scalar_tensor_tensor`].
    pub fn scalar_tensor_tensor<'a, 'b>(
        data: into TileRef<'a>, op0: AluOp, operand0: into Operand<'a>, op1: AluOp,
        data1: into TileRef<'b>, dtype: Option<DType>,
    ) -> Tile as ins = "nisa.scalar_tensor_tensor" {
        let (first, second) = ((op0, operand0), (op1, data1));
        scalar_tensor_tensor_to(&ins, Dst::New(dtype), data, first, second, SttOpts::new()).tile()
    }
}

/// Copies `src` into `dst` with one DMA transfer (the 0.7 `dma_copy` with its default
/// options). See [`crate::isa::dma_copy`].
#[track_caller]
pub fn dma_copy<'a, 'b>(dst: impl DmaTarget<'a>, src: impl DmaSource<'b>) {
    super::dma_copy(dst, src, None);
}
