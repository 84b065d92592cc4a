//! VectorE tensor-scalar instructions that feed the accumulator registers:
//! `tensor_scalar_reduce` (`dst = data op0 operand0`, plus a per-partition reduction of the
//! results into the registers and optionally `reduce_res`) and `tensor_scalar_cumulative`
//! (the running reduction itself written out: `dst[i] = reg = op1(op0(src[i], imm0), reg)`).
//!
//! Definitions (NKI 0.7 `nki.isa.tensor_scalar_reduce`, `nki.isa.tensor_scalar_cumulative`):
//! math in fp32, results rounded to `dst`'s dtype; the reduction uses the fp32 results (before
//! that rounding). `reduce_cmd` defaults to `reset_reduce` for both; `reset` loads the
//! operator's identity (0 for add/subtract, 1 for multiply, -inf for max, +inf for min),
//! `load_reduce` loads `reduce_init` (`imm1` in NKI's `tensor_scalar_cumulative`).
//! `tensor_scalar_cumulative` applies the documented pseudocode literally: `reg = op1(v, reg)`
//! (for subtract: `v - reg`).
//!
//! Where the docs are silent: a row's add/multiply reduction is computed exactly and rounded
//! once to fp32, then combined with the register in fp32 (the hardware's order is not public).
//!
//! Cost: `tensor_scalar_reduce` is a `tensor_scalar` (`max(MIN_II, N)` VectorE cycles with the
//! perf modes) plus `MIN_II` for the accumulator read-out when `reduce_res` is given \[E S13\];
//! `tensor_scalar_cumulative` has no published figure: one pass, `max(MIN_II, N)`, no perf
//! mode (the running value serialises the elements) \[A\].

use super::accum::{Accum, AccumOpts, AccumRule, Extra, ReduceCmd, ACCUMULATING_CMDS};
use super::base::{short, Site};
use super::op::Op;
use super::{AluOp, Operand};
use crate::builder::instruction;
use crate::dtype::DType;
use crate::error::ErrorKind;
use crate::record::{Engine, MemKind, Opcode};
use crate::tile::TileRef;

/// `tensor_scalar_reduce`'s registers: the accumulating commands (`reset_reduce` by default)
/// and `reduce_res_negate`.
const TENSOR_SCALAR_REDUCE: AccumRule = AccumRule {
    cmds: ACCUMULATING_CMDS,
    default: ReduceCmd::ResetReduce,
    extra: Extra::Negate,
};

/// `tensor_scalar_cumulative`'s registers: the accumulating commands, `reset_reduce` by
/// default.
const CUMULATIVE: AccumRule = AccumRule {
    cmds: ACCUMULATING_CMDS,
    default: ReduceCmd::ResetReduce,
    extra: Extra::None,
};

/// True for the arithmetic ALU operators (no comparisons, logical or bitvec operators).
pub(crate) fn is_arithmetic(op: AluOp) -> bool {
    matches!(
        op,
        AluOp::Bypass
            | AluOp::Add
            | AluOp::Subtract
            | AluOp::Multiply
            | AluOp::Divide
            | AluOp::Maximum
            | AluOp::Minimum
            | AluOp::Power
            | AluOp::Mod
            | AluOp::Fmod
            | AluOp::AbsMax
            | AluOp::AbsMin
            | AluOp::Abs
            | AluOp::Square
            | AluOp::Relu
            | AluOp::Rsqrt
            | AluOp::Reciprocal
    )
}

/// The checks of a VectorE data operand and its destination: on chip, legal start
/// partitions, equal partitions and elements per partition.
fn data_and_dst(ins: &Op, (dn, d): (&str, &TileRef), dst: &TileRef) {
    ins.operand(dn, d);
    ins.operand("dst", dst);
    ins.memory(dn, d, &[MemKind::Sbuf, MemKind::Psum]);
    ins.memory("dst", dst, &[MemKind::Sbuf, MemKind::Psum]);
    ins.same_partitions((dn, d), ("dst", dst));
    ins.same_free((dn, d), ("dst", dst));
}

/// `op0` must be arithmetic.
fn arithmetic(ins: &Op, what: &str, op: AluOp) {
    if !is_arithmetic(op) {
        ins.fail(
            ErrorKind::InvalidArgument,
            format!(
                "{what} '{op}' of '{}' must be an arithmetic operator (add, subtract, multiply, max, min, ...)",
                short(ins.api)
            ),
        );
    }
}

instruction! {
    /// `dst = data op0 operand0` on VectorE, reducing each partition's fp32 results with
    /// `reduce_op` (add, multiply, max or min) into the VectorE accumulator registers (NKI 0.7
    /// `nisa.tensor_scalar_reduce(dst, data, op0, operand0, reduce_op, reduce_res, reduce_cmd,
    /// reduce_init, reduce_res_negate)`). `operand0` is a scalar or a `[P, 1]` tile; `args`
    /// takes `reduce_res` (`[P, 1]`, receives the registers, negated with `negate()`),
    /// `reduce_cmd` (`reset_reduce` by default, `reduce`, `load_reduce`) and `reduce_init`.
    pub fn tensor_scalar_reduce<'d, 'a>(
        dst: into TileRef<'d>, data: into TileRef<'a>, op0: AluOp, operand0: into Operand<'a>,
        reduce_op: AluOp, args: into Option<AccumOpts<'a>>,
    ) as ins = "nisa.tensor_scalar_reduce" {
        let args = args.unwrap_or_default();
        scalar_reduce(&ins, [dst, data], (op0, operand0), reduce_op, args);
    }
}

/// [`tensor_scalar_reduce`] on its converted operands.
#[track_caller]
fn scalar_reduce(
    ins: &Op,
    [dst, x]: [TileRef; 2],
    (op0, operand0): (AluOp, Operand),
    reduce_op: AluOp,
    args: AccumOpts,
) {
    data_and_dst(ins, ("data", &x), &dst);
    arithmetic(ins, "op0", op0);
    if op0.is_bitvec() {
        ins.fail(
            ErrorKind::InvalidArgument,
            "bitvec operators are not supported by 'tensor_scalar_reduce'".to_string(),
        );
    }
    ins.require_alu(
        "reduce_op",
        reduce_op,
        &[AluOp::Add, AluOp::Multiply, AluOp::Maximum, AluOp::Minimum],
    );
    super::alu_rules::op0(ins, op0, &operand0, Engine::Vector);
    let p = x.partitions();
    let operand = ins.per_partition("operand0", operand0, p);
    let acc = Accum::vector(ins, reduce_op, &args, &x, TENSOR_SCALAR_REDUCE);
    let site = Site::new(Engine::Vector, Opcode::TensorScalar).with_alu(op0);
    acc.compute_over(ins, site, (&x, &dst), &operand, |v, ops| {
        let f = x.free_size().max(1);
        acc.map_rows(ins, &dst, v, f, |r, _, d| op0.eval(d, ops[r]));
    });
}

instruction! {
    /// The running reduction of `op0(src, imm0)` along each partition, written element by
    /// element (NKI 0.7 `nisa.tensor_scalar_cumulative(dst, src, op0, op1, imm0, imm1,
    /// reduce_cmd)`): for each element in order, `reg = op1(src[i] op0 imm0, reg)` and `dst[i] =
    /// reg`. `op1` is add, subtract, multiply, max or min; `imm0` a scalar or `[P, 1]` tile;
    /// `args` takes `reduce_cmd` (`reset_reduce` by default: the identity of `op1`; `reduce`: the
    /// registers as earlier VectorE accumulations left them; `load_reduce`: `reduce_init`, NKI's
    /// `imm1`) and `reduce_res`. Input and output dtypes exclude int32/uint32 (ISA limit).
    pub fn tensor_scalar_cumulative<'d, 'a>(
        dst: into TileRef<'d>, src: into TileRef<'a>, op0: AluOp, op1: AluOp,
        imm0: into Operand<'a>, args: into Option<AccumOpts<'a>>,
    ) as ins = "nisa.tensor_scalar_cumulative" {
        cumulative(&ins, [dst, src], (op0, op1), imm0, args.unwrap_or_default());
    }
}

/// [`tensor_scalar_cumulative`] on its converted operands.
#[track_caller]
fn cumulative(
    ins: &Op,
    [dst, x]: [TileRef; 2],
    (op0, op1): (AluOp, AluOp),
    imm0: Operand,
    args: AccumOpts,
) {
    data_and_dst(ins, ("src", &x), &dst);
    arithmetic(ins, "op0", op0);
    ins.require_alu(
        "op1",
        op1,
        &[
            AluOp::Add,
            AluOp::Subtract,
            AluOp::Multiply,
            AluOp::Maximum,
            AluOp::Minimum,
        ],
    );
    for (what, t) in [("src", &x), ("dst", &dst)] {
        ins.dtype_rule(
            t,
            |d| !matches!(d, DType::I32 | DType::U32),
            |t| format!("{what} {t} of 'tensor_scalar_cumulative' cannot be int32/uint32 (ISA limitation)"),
        );
    }
    let p = x.partitions();
    let imm = ins.per_partition("imm0", imm0, p);
    let acc = Accum::vector(ins, op1, &args, &x, CUMULATIVE);
    let site = Site::new(Engine::Vector, Opcode::TensorScalarCumulative).with_alu(op1);
    acc.compute_over(ins, site, (&x, &dst), &imm, |v, imms| {
        let load = acc.init.as_ref().map(|i| i.values(ins, p));
        let regs0 = acc.use_.begin(ins, load.as_deref());
        let f = x.free_size().max(1);
        let mut out = Vec::with_capacity(v.len());
        let mut regs = Vec::with_capacity(p);
        for (r, row) in v.chunks(f).enumerate() {
            let mut reg = regs0[r];
            for &d in row {
                reg = op1.eval(op0.eval(d, imms[r]), reg);
                out.push(reg);
            }
            regs.push(reg);
        }
        dst.scatter(out);
        acc.use_.finish(ins, Some(&regs));
        if let Some(res) = &acc.res {
            res.scatter(regs);
        }
    });
}
