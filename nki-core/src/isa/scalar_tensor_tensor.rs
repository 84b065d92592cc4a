//! `nisa.scalar_tensor_tensor`: `(data op0 operand0) op1 data1` in one VectorE instruction.
//!
//! The instruction is the fused form of a `tensor_scalar` step followed by a `tensor_tensor`
//! step (e.g. `(x * scale) + residual`): the intermediate stays in the engine's fp32 datapath
//! and only the final result is rounded to the output dtype. Its cost class is
//! [`Opcode::ScalarTensorTensor`] (hardware.md §2.3).

use super::base::{Dst, Output, Site};
use super::op::Op;
use super::vector::bitvec_needs_ints;
use super::{AluOp, Engine, Operand};
use crate::builder::setters;
use crate::dtype::DType;
use crate::emit::trace::{Arg, Call};
use crate::error::ErrorKind;
use crate::record::{MemKind, Opcode};
use crate::tile::TileRef;

/// The operand-order options of [`scalar_tensor_tensor`] (NKI `reverse0`, `reverse1`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SttOpts {
    /// Computes `operand0 op0 data` instead of `data op0 operand0`.
    pub reverse0: bool,
    /// Computes `data1 op1 t` instead of `t op1 data1`.
    pub reverse1: bool,
}

impl SttOpts {
    /// NKI's defaults (no reversal).
    pub fn new() -> Self {
        Self::default()
    }
    setters! {
        /// Reverses the operands of the first operator.
        reverse0() => reverse0 = true;
        /// Reverses the operands of the second operator.
        reverse1() => reverse1 = true;
    }
}

/// `dst = (data op0 operand0) op1 data1` element-wise (NKI `nisa.scalar_tensor_tensor(dst,
/// data, op0, operand0, op1, data1, reverse0, reverse1)`), with `operand0` a scalar or a
/// per-partition `[P, 1]` tile broadcast along the free dimension.
///
/// `data` and `data1` need `dst`'s partition count and elements per partition and cannot
/// both be in PSUM; both operators are arithmetic, or both bitvec (integer inputs). The
/// intermediate `data op0 operand0` is kept in fp32; the result is rounded once to `dst`'s
/// dtype. Runs on VectorE. `opts` (`None`: no reversal) reverses either operator's operands.
#[track_caller]
pub fn scalar_tensor_tensor<'d, 'a, 'b>(
    dst: impl Into<TileRef<'d>>,
    data: impl Into<TileRef<'a>>,
    op0: AluOp,
    operand0: impl Into<Operand<'a>>,
    op1: AluOp,
    data1: impl Into<TileRef<'b>>,
    opts: impl Into<Option<SttOpts>>,
) {
    let ins = Op::begin("nisa.scalar_tensor_tensor");
    let opts = opts.into().unwrap_or_default();
    let (dst, data, data1): (TileRef, TileRef, TileRef) = (dst.into(), data.into(), data1.into());
    let operand0: Operand = operand0.into();
    ins.trace(|| {
        use super::trace_args as ta;
        Call::new("nisa.scalar_tensor_tensor")
            .arg("dst", ta::tile(&dst))
            .arg("data", ta::tile(&data))
            .arg("op0", ta::alu(op0))
            .arg("operand0", ta::operand(&operand0))
            .arg("op1", ta::alu(op1))
            .arg("operand1", ta::tile(&data1))
            .opt("reverse0", opts.reverse0.then_some(Arg::Bool(true)))
            .opt("reverse1", opts.reverse1.then_some(Arg::Bool(true)))
    });
    let first = (op0, operand0);
    scalar_tensor_tensor_to(&ins, Dst::Into(dst), data, first, (op1, data1), opts);
}

/// The `scalar_tensor_tensor` builder.
pub(crate) fn scalar_tensor_tensor_to<'d, 'a>(
    ins: &Op,
    dst: Dst<'d>,
    x: TileRef<'a>,
    (op0, operand0): (AluOp, Operand<'a>),
    (op1, y): (AluOp, TileRef),
    opts: SttOpts,
) -> Output<'d> {
    ins.data_pair(("data", &x), ("data1", &y));
    if op0.is_bitvec() != op1.is_bitvec() {
        ins.fail(
            ErrorKind::InvalidArgument,
            format!("operators '{op0}' and '{op1}' of 'scalar_tensor_tensor' must both be arithmetic or both be bitvec operators"),
        );
    }
    let dtypes = [("data", x.dtype()), ("data1", y.dtype())];
    bitvec_needs_ints(ins, op0, &dtypes);
    let p = x.partitions();
    let s0 = ins.per_partition("operand0", operand0, p);
    let in_dtype = DType::promote(x.dtype(), y.dtype());
    let out = ins.output(dst, MemKind::Sbuf, in_dtype, x.shape(), true);
    let ov = out.view();
    let site = Site::new(Engine::Vector, Opcode::ScalarTensorTensor).with_alu(op1);
    let extra: Vec<&TileRef> = s0.tile().into_iter().collect();
    ins.compute(site, &[&x, &y], &extra, &[&ov], || {
        let (a, b) = (ins.read(&x), ins.read(&y));
        let c0 = s0.values(ins, p);
        let f = x.free_size().max(1);
        let r = a
            .iter()
            .zip(&b)
            .enumerate()
            .map(|(i, (&a, &b))| {
                let c = c0[i / f];
                let t = if opts.reverse0 {
                    op0.eval_typed(c, a, in_dtype)
                } else {
                    op0.eval_typed(a, c, in_dtype)
                };
                if opts.reverse1 {
                    op1.eval_typed(b, t, in_dtype)
                } else {
                    op1.eval_typed(t, b, in_dtype)
                }
            })
            .collect();
        ov.scatter(r);
    });
    out
}
