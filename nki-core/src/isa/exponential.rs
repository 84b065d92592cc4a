//! VectorE `exponential` (NeuronCore-v4 only): `dst = exp(src - max_value)` with an optional
//! running sum in the VectorE accumulator registers: the softmax numerator and denominator in
//! one instruction.
//!
//! Definition (NKI 0.7 `nki.isa.exponential`): fp32 math, the result rounded to `dst`'s dtype;
//! `max_value` is an fp32 scalar or `[P, 1]` vector; `reduce_cmd` is `idle` (default),
//! `reset_reduce`, `reduce` or `load_reduce` (`reduce_init`); the sum adds the fp32 results.
//! `src` and `dst` have up to 4 dimensions.
//!
//! Cost: "4x ScalarE `activation(exp)`" \[E ARCH3\]: `N / exponential_elems_per_cycle` VectorE
//! cycles (trn3: N/4), with the MIN_II floor, `+ MIN_II` when `reduce_res` is read out.

use super::accum::{Accum, AccumOpts, AccumRule, Extra, ReduceCmd, VECTOR_CMDS};
use super::base::Site;
use super::op::Op;
use super::op::PerPartition;
use super::{AluOp, Operand};
use crate::dtype::DType;
use crate::error::ErrorKind;
use crate::record::{Engine, MemKind, Opcode};
use crate::tile::TileRef;

/// `exponential`'s registers: every VectorE command, `idle` by default.
const EXPONENTIAL: AccumRule = AccumRule {
    cmds: VECTOR_CMDS,
    default: ReduceCmd::Idle,
    extra: Extra::None,
};

/// `dst = exp(src - max_value)` on VectorE, optionally summing each partition's results into
/// the VectorE accumulator registers (NKI 0.7 `nisa.exponential(dst, src, max_value,
/// reduce_res, reduce_cmd, reduce_init)`; NeuronCore-v4 only, an error on trn1/trn2).
/// `max_value` is a scalar or a `[P, 1]` fp32 tile; `dst` (SBUF or PSUM) has `src`'s
/// partitions and elements per partition; `args` takes `reduce_res`, `reduce_cmd` (`idle` by
/// default) and `reduce_init` (with `load_reduce`).
#[track_caller]
pub fn exponential<'d, 'a>(
    dst: impl Into<TileRef<'d>>,
    src: impl Into<TileRef<'a>>,
    max_value: impl Into<Operand<'a>>,
    args: impl Into<Option<AccumOpts<'a>>>,
) {
    let ins = Op::begin("nisa.exponential");
    let (dst, x): (TileRef, TileRef) = (dst.into(), src.into());
    let args = args.into().unwrap_or_default();
    if ins.target().spec().exponential_elems_per_cycle == 0 {
        ins.fail(
            ErrorKind::InvalidArgument,
            format!(
                "'exponential' is available only on NeuronCore-v4 (trn3), not on {}; use activation(exp) on ScalarE",
                ins.target()
            ),
        );
    }
    for (what, t) in [("src", &x), ("dst", &dst)] {
        ins.operand(what, t);
        ins.memory(what, t, &[MemKind::Sbuf, MemKind::Psum]);
        if t.shape().len() > 4 {
            ins.fail(
                ErrorKind::InvalidArgument,
                format!(
                    "{what} {} of 'exponential' has more than 4 dimensions",
                    t.describe()
                ),
            );
        }
    }
    ins.same_partitions(("src", &x), ("dst", &dst));
    ins.same_free(("src", &x), ("dst", &dst));
    if matches!(dst.dtype(), DType::U32) {
        ins.fail(
            ErrorKind::DType,
            format!("dst {} of 'exponential' cannot be uint32", dst.describe()),
        );
    }
    let p = x.partitions();
    let max = ins.per_partition("max_value", max_value.into(), p);
    if let PerPartition::Vector(t) = &max {
        if t.dtype() != DType::F32 {
            ins.fail(
                ErrorKind::DType,
                format!(
                    "max_value {} of 'exponential' must be float32",
                    t.describe()
                ),
            );
        }
    }
    let acc = Accum::vector(&ins, AluOp::Add, &args, &x, EXPONENTIAL);
    let site = Site::new(Engine::Vector, Opcode::Exponential);
    acc.compute_over(&ins, site, (&x, &dst), &max, |v, m| {
        let f = x.free_size().max(1);
        acc.map_rows(&ins, &dst, v, f, |r, _, d| (d - m[r]).exp());
    });
}
