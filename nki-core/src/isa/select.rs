//! VectorE predicated selection: `tensor_copy_predicated` (copy where a predicate holds, keep
//! `dst` elsewhere), `select_reduce` (`where(predicate, on_true, on_false)` with an optional
//! max-reduction into the accumulator registers) and `range_select` (keep the elements whose
//! free index lies in a per-partition range, `FP32_MIN` elsewhere, with a max-reduction: the
//! causal/sliding-window mask of attention kernels).
//!
//! Definitions (NKI 0.7 `nki.isa.tensor_copy_predicated`, `select_reduce`, `range_select`):
//! a predicate element is true when non-zero (integer predicates); `reverse_pred` flips it.
//! `range_select` compares `range_start + i` (i the flattened free index) with `bound0` and
//! `bound1` in fp32 using `comp_op0` / `comp_op1` and writes `-3.4028235e38` (`FP32_MIN`, the
//! only fill the hardware takes) where either comparison is false; rounded to a 16-bit or fp8
//! `dst` that fill becomes -inf, as the docs describe. Reductions use the fp32 values before
//! rounding to `dst`'s dtype.
//!
//! Cost (no published figures for these three \[A\]): `select_reduce` and
//! `tensor_copy_predicated` read two tensors like `nl.where` (`SELECT`: N cycles with a PSUM
//! operand, 2N otherwise); `range_select` reads one tensor, `max(MIN_II, N)`; `+ MIN_II` when
//! the registers are read out into `reduce_res` \[E S13, as `tensor_scalar_reduce`\].

use super::accum::{Accum, AccumOpts, AccumRule, Extra, ReduceCmd, VECTOR_CMDS};
use super::base::{short, Site};
use super::op::Op;
use super::op::PerPartition;
use super::{AluOp, Operand};
use crate::builder::{instruction, setters};
use crate::dtype::DType;
use crate::error::ErrorKind;
use crate::record::{Engine, MemKind, Opcode};
use crate::tile::TileRef;

/// `select_reduce`'s registers: `idle` (the default), `reset_reduce` or `reduce`, and
/// `reverse_pred`.
const SELECT_REDUCE: AccumRule = AccumRule {
    cmds: &[ReduceCmd::Idle, ReduceCmd::ResetReduce, ReduceCmd::Reduce],
    default: ReduceCmd::Idle,
    extra: Extra::ReversePred,
};

/// `range_select`'s registers: every VectorE command (`reset_reduce` by default) and
/// `range_start`.
const RANGE_SELECT: AccumRule = AccumRule {
    cmds: VECTOR_CMDS,
    default: ReduceCmd::ResetReduce,
    extra: Extra::RangeStart,
};

/// The fill of `range_select` where the range test fails: the most negative fp32.
pub const FP32_MIN: f32 = f32::MIN;

/// The options of [`tensor_copy_predicated`]: `reverse_pred` copies where the predicate is
/// false instead.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PredicateOpts {
    /// Reverses the predicate.
    pub reverse_pred: bool,
}

impl PredicateOpts {
    /// NKI's defaults (`reverse_pred=False`).
    pub fn new() -> Self {
        Self::default()
    }
    setters! {
        /// Copies where the predicate is false.
        reverse_pred() => reverse_pred = true;
    }
}

/// A tile operand on chip, legal start, `dst`'s partitions and elements per partition.
fn like_dst(ins: &Op, what: &str, t: &TileRef, dst: &TileRef) {
    ins.operand(what, t);
    ins.memory(what, t, &[MemKind::Sbuf, MemKind::Psum]);
    ins.same_partitions(("dst", dst), (what, t));
    ins.same_free(("dst", dst), (what, t));
}

/// The predicate's dtype must be one of `allowed` integer dtypes.
fn predicate_dtype(ins: &Op, pred: &TileRef, allowed: &[DType]) {
    ins.one_of(
        ErrorKind::DType,
        &pred.dtype(),
        allowed,
        |d| *d,
        |list| {
            format!(
                "predicate {} of '{}' must be one of {list}",
                pred.describe(),
                short(ins.api)
            )
        },
    );
}

instruction! {
    /// Copies `src` (a tile, or a scalar broadcast to every element) into `dst` where
    /// `predicate` is non-zero and leaves `dst` unchanged elsewhere (NKI 0.7
    /// `nisa.tensor_copy_predicated(dst, src, predicate, reverse_pred)`). `dst`, `predicate` (and
    /// a tile `src`) have the same partitions and elements per partition; `predicate` is uint8,
    /// uint16 or uint32; `src` and `dst` share a dtype; `src` and `predicate` are not both in
    /// PSUM. `dst` keeps its values where nothing is copied, so it must hold values. One VectorE
    /// instruction.
    pub fn tensor_copy_predicated<'d, 's, 'p>(
        dst: into TileRef<'d>, src: into Operand<'s>, predicate: into TileRef<'p>,
        opts: into Option<PredicateOpts>,
    ) as ins = "nisa.tensor_copy_predicated" {
        let reverse = opts.unwrap_or_default().reverse_pred;
        copy_predicated(&ins, dst, src, predicate, reverse);
    }
}

/// [`tensor_copy_predicated`] on its converted operands.
#[track_caller]
fn copy_predicated(ins: &Op, dst: TileRef, src: Operand, pred: TileRef, reverse: bool) {
    ins.operand("dst", &dst);
    ins.memory("dst", &dst, &[MemKind::Sbuf, MemKind::Psum]);
    like_dst(ins, "predicate", &pred, &dst);
    predicate_dtype(ins, &pred, &[DType::U8, DType::U16, DType::U32]);
    if let Operand::Tile(s) = &src {
        like_dst(ins, "src", s, &dst);
        ins.not_both_psum(("src", s), ("predicate", &pred));
        if s.dtype() != dst.dtype() {
            ins.fail(
                ErrorKind::DType,
                format!(
                    "src {} and dst {} of 'tensor_copy_predicated' must share a dtype",
                    s.describe(),
                    dst.describe()
                ),
            );
        }
    }
    let site = Site::new(Engine::Vector, Opcode::Select);
    let data: Vec<&TileRef> = match &src {
        Operand::Tile(s) => vec![s, &pred, &dst],
        Operand::Scalar { .. } => vec![&pred, &dst],
    };
    ins.compute(site, &data, &[], &[&dst], || {
        let keep = ins.read(&dst);
        let p = pred.gather_slots(ins.api, ins.loc);
        let pd = pred.dtype();
        let s = match &src {
            Operand::Tile(s) => ins.read(s),
            Operand::Scalar { value, .. } => vec![*value as f32; keep.len()],
        };
        let out = keep
            .iter()
            .zip(&s)
            .zip(&p)
            .map(|((&k, &v), &q)| if (pd.int(q) != 0) != reverse { v } else { k })
            .collect();
        dst.scatter(out);
    });
}

instruction! {
    /// `dst = where(predicate, on_true, on_false)` on VectorE, reducing each partition's
    /// results by max into the VectorE accumulator registers (NKI 0.7 `nisa.select_reduce(dst,
    /// predicate, on_true, on_false, reduce_res, reduce_cmd, reduce_op=max, reverse_pred)`).
    /// `predicate` (int8/uint8/int16/uint16, non-zero = true) and `on_true` have `dst`'s
    /// partitions and elements per partition and are not both in PSUM; `on_false` is an fp32
    /// scalar or a `[P, 1]` tile; `on_true` is not tfloat32/int32/uint32. `args` takes
    /// `reduce_res`, `reduce_cmd` (`idle` by default, `reset_reduce`, `reduce`) and
    /// `reverse_pred`. `reduce_op` must be max.
    pub fn select_reduce<'d, 'p, 'a>(
        dst: into TileRef<'d>, predicate: into TileRef<'p>, on_true: into TileRef<'a>,
        on_false: into Operand<'a>, reduce_op: AluOp, args: into Option<AccumOpts<'a>>,
    ) as ins = "nisa.select_reduce" {
        let args = args.unwrap_or_default();
        select_reduce_on(&ins, [dst, predicate, on_true], on_false, reduce_op, args);
    }
}

/// [`select_reduce`] on its converted operands.
#[track_caller]
fn select_reduce_on(
    ins: &Op,
    [dst, pred, t]: [TileRef; 3],
    on_false: Operand,
    reduce_op: AluOp,
    args: AccumOpts,
) {
    ins.operand("dst", &dst);
    ins.memory("dst", &dst, &[MemKind::Sbuf, MemKind::Psum]);
    like_dst(ins, "on_true", &t, &dst);
    like_dst(ins, "predicate", &pred, &dst);
    ins.not_both_psum(("on_true", &t), ("predicate", &pred));
    predicate_dtype(ins, &pred, &[DType::I8, DType::U8, DType::I16, DType::U16]);
    if matches!(t.dtype(), DType::I32 | DType::U32) {
        ins.fail(
            ErrorKind::DType,
            format!(
                "on_true {} of 'select_reduce' cannot be int32/uint32",
                t.describe()
            ),
        );
    }
    if reduce_op != AluOp::Maximum {
        ins.fail(
            ErrorKind::InvalidArgument,
            format!("reduce_op '{reduce_op}' of 'select_reduce' is not supported; only max"),
        );
    }
    let p = t.partitions();
    let on_false = ins.per_partition("on_false", on_false, p);
    if let PerPartition::Vector(f) = &on_false {
        ins.memory("on_false", f, &[MemKind::Sbuf, MemKind::Psum]);
    }
    let reverse = args.reverse_pred;
    let acc = Accum::vector(ins, AluOp::Maximum, &args, &t, SELECT_REDUCE);
    let site = Site::new(Engine::Vector, Opcode::Select).accumulating(acc.costs());
    let extra: Vec<&TileRef> = on_false.tile().into_iter().collect();
    let outs = acc.outputs(&dst);
    ins.compute(site, &[&t, &pred], &extra, &outs, || {
        let v = ins.read(&t);
        let q = pred.gather_slots(ins.api, ins.loc);
        let pd = pred.dtype();
        let f_vals = on_false.values(ins, p);
        let f = t.free_size().max(1);
        acc.map_rows(ins, &dst, &v, f, |r, i, x| {
            if (pd.int(q[r * f + i]) != 0) != reverse {
                x
            } else {
                f_vals[r]
            }
        });
    });
    acc.trace(ins);
}

instruction! {
    #[allow(clippy::too_many_arguments)]
    /// Keeps the elements of `on_true` whose free index `range_start + i` satisfies both
    /// `index comp_op0 bound0` and `index comp_op1 bound1` (per-partition fp32 `[P, 1]` bounds,
    /// compared in fp32), writes [`FP32_MIN`] elsewhere, and reduces each partition's results by
    /// max into the VectorE accumulator registers (NKI 0.7 `nisa.range_select(dst, on_true_tile,
    /// comp_op0, comp_op1, bound0, bound1, reduce_cmd, reduce_res, reduce_op=max, range_start,
    /// on_false_value=FP32_MIN)`; NeuronCore-v3 and newer). Comparisons are equal, less,
    /// less_equal, greater or greater_equal; `on_true` is a float dtype; `args` takes
    /// `reduce_res`, `reduce_cmd` (`reset_reduce` by default, `reduce`, `load_reduce`, `idle`)
    /// and `range_start` (`range_start + i` must stay below 2^24).
    pub fn range_select<'d, 'a>(
        dst: into TileRef<'d>, on_true: into TileRef<'a>, comp_op0: AluOp, comp_op1: AluOp,
        bound0: into TileRef<'a>, bound1: into TileRef<'a>, reduce_op: AluOp,
        args: into Option<AccumOpts<'a>>,
    ) as ins = "nisa.range_select" {
        let (tiles, comp) = ([dst, on_true, bound0, bound1], (comp_op0, comp_op1));
        range_select_on(&ins, tiles, comp, reduce_op, args.unwrap_or_default());
    }
}

/// [`range_select`] on its converted operands.
#[track_caller]
fn range_select_on(
    ins: &Op,
    [dst, t, b0, b1]: [TileRef; 4],
    (comp_op0, comp_op1): (AluOp, AluOp),
    reduce_op: AluOp,
    args: AccumOpts,
) {
    super::alu_rules::instruction_since(ins, 3);
    ins.operand("dst", &dst);
    ins.memory("dst", &dst, &[MemKind::Sbuf, MemKind::Psum]);
    like_dst(ins, "on_true_tile", &t, &dst);
    if !t.dtype().is_float() {
        ins.fail(
            ErrorKind::DType,
            format!(
                "on_true_tile {} of 'range_select' must be a float dtype",
                t.describe()
            ),
        );
    }
    for (what, op) in [("comp_op0", comp_op0), ("comp_op1", comp_op1)] {
        ins.require_alu(
            what,
            op,
            &[
                AluOp::Equal,
                AluOp::Less,
                AluOp::LessEqual,
                AluOp::Greater,
                AluOp::GreaterEqual,
            ],
        );
    }
    if reduce_op != AluOp::Maximum {
        ins.fail(
            ErrorKind::InvalidArgument,
            format!("reduce_op '{reduce_op}' of 'range_select' is not supported; only max"),
        );
    }
    let p = t.partitions();
    for (what, b) in [("bound0", &b0), ("bound1", &b1)] {
        ins.per_partition(what, Operand::Tile(*b), p);
        if b.dtype() != DType::F32 {
            ins.fail(
                ErrorKind::DType,
                format!("{what} {} of 'range_select' must be float32", b.describe()),
            );
        }
    }
    let f = t.free_size().max(1);
    let last = args.range_start + f as i64 - 1;
    if args.range_start < 0 || last >= 1 << 24 {
        ins.fail(
            ErrorKind::InvalidArgument,
            format!(
                "range_start {} + free index (up to {last}) of 'range_select' must lie in [0, 2^24)",
                args.range_start
            ),
        );
    }
    let start = args.range_start;
    let acc = Accum::vector(ins, AluOp::Maximum, &args, &t, RANGE_SELECT);
    let site = Site::new(Engine::Vector, Opcode::RangeSelect).accumulating(acc.costs());
    let extra = acc.inputs(vec![&b0, &b1]);
    let outs = acc.outputs(&dst);
    ins.compute(site, &[&t], &extra, &outs, || {
        let v = ins.read(&t);
        let (lo, hi) = (ins.read(&b0), ins.read(&b1));
        acc.map_rows(ins, &dst, &v, f, |r, i, x| {
            let idx = (start + i as i64) as f32;
            let keep = comp_op0.eval(idx, lo[r]) != 0.0 && comp_op1.eval(idx, hi[r]) != 0.0;
            if keep {
                x
            } else {
                FP32_MIN
            }
        });
    });
    acc.trace(ins);
}
