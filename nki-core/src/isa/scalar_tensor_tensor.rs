//! `nisa.scalar_tensor_tensor`: `(data op0 operand0) op1 data1` in one VectorE instruction.
//!
//! The instruction is the fused form of a `tensor_scalar` step followed by a `tensor_tensor`
//! step (e.g. `(x * scale) + residual`): the intermediate stays in the engine's fp32 datapath
//! and only the final result is rounded to the output dtype. Its cost class is
//! [`Opcode::ScalarTensorTensor`] (hardware.md §2.3).

use super::base::{Dst, Site};
use super::vector::bitvec_needs_ints;
use super::{AluOp, Engine, Operand};
use crate::context::Op;
use crate::dtype::DType;
use crate::error::ErrorKind;
use crate::record::{MemKind, Opcode};
use crate::tile::{Tile, TileRef};

/// `(data op0 operand0) op1 data1` element-wise (NKI `nisa.scalar_tensor_tensor`), with
/// `operand0` a scalar or a per-partition `[P, 1]` tile broadcast along the free dimension.
///
/// `data` and `data1` need the same partition count and elements per partition and cannot
/// both be in PSUM; both operators are arithmetic, or both bitvec (integer inputs). The
/// intermediate `data op0 operand0` is kept in fp32; the result (SBUF, `data`'s shape) is
/// rounded once to `dtype`, or the promoted input dtype. Runs on VectorE. NKI's
/// `reverse0`/`reverse1` operand-order flags are not taken (write the reversed form with
/// [`super::tensor_scalar`] and [`super::tensor_tensor`]).
#[track_caller]
pub fn scalar_tensor_tensor<'a, 'b>(
    data: impl Into<TileRef<'a>>,
    op0: AluOp,
    operand0: impl Into<Operand<'a>>,
    op1: AluOp,
    data1: impl Into<TileRef<'b>>,
    dtype: Option<DType>,
) -> Tile {
    let ins = Op::begin("nisa.scalar_tensor_tensor");
    let (x, y) = (ins.input("data", data), ins.input("data1", data1));
    ins.same_partitions(("data", &x), ("data1", &y));
    ins.same_free(("data", &x), ("data1", &y));
    ins.not_both_psum(("data", &x), ("data1", &y));
    if op0.is_bitvec() != op1.is_bitvec() {
        ins.fail(
            ErrorKind::InvalidArgument,
            format!("operators '{op0}' and '{op1}' of 'scalar_tensor_tensor' must both be arithmetic or both be bitvec operators"),
        );
    }
    let dtypes = [("data", x.dtype()), ("data1", y.dtype())];
    bitvec_needs_ints(&ins, op0, &dtypes);
    let p = x.partitions();
    let s0 = ins.per_partition("operand0", operand0.into(), p);
    let in_dtype = DType::promote(x.dtype(), y.dtype());
    let out = ins
        .output(Dst::New(dtype), MemKind::Sbuf, in_dtype, x.shape(), true)
        .tile();
    let ov = out.view();
    let site = Site::new(Engine::Vector, Opcode::ScalarTensorTensor).with_alu(op1);
    let extra: Vec<&TileRef> = s0.tile().into_iter().collect();
    ins.compute(site, &[&x, &y], &extra, &[&ov], || {
        let (a, b) = (ins.read(&x), ins.read(&y));
        let c0 = s0.values(&ins, p);
        let f = x.free_size().max(1);
        let r = a
            .iter()
            .zip(&b)
            .enumerate()
            .map(|(i, (&a, &b))| {
                let t = op0.eval_typed(a, c0[i / f], in_dtype);
                op1.eval_typed(t, b, in_dtype)
            })
            .collect();
        ov.scatter(r);
    });
    out
}
