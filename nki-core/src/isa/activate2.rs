//! ScalarE `activate2` (NeuronCore-v4 only): a tensor-scalar stage `(data op0 imm0) op1 imm1`,
//! an activation function, and an optional reduction into ScalarE's accumulator registers
//! (shared with `activation`), in one instruction.
//!
//! Definition (NKI 0.7 `nki.isa.activate2`): per element, `v = data[i]`; unless `op0` is
//! bypass, `v = v op0 imm0` (`imm0 op0 v` with `reverse0`); unless `op1` is bypass, `v = v op1
//! imm1` (`imm1 op1 v` with `reverse1`); `dst[i] = op(v)`; with `reduce_cmd` `reset_reduce`
//! or `reduce`, the register accumulates `reduce_op(acc, dst[i])` (add, max, min, abs_max,
//! abs_min; `reset` loads the operator's identity). Math is fp32, the result rounded to `dst`'s
//! dtype; the reduction uses the fp32 results. `(op0, op1)` is one of (multiply, add),
//! (multiply, subtract), (multiply, bypass), (add, bypass), (subtract, bypass), (bypass,
//! bypass). `relu_param` (a scalar or `[P, 1]` vector, default 0) is the slope of `prelu`
//! below zero ([`ActFn::eval_param`]); the other functions ignore it.
//!
//! Cost: one ScalarE activation (`max(MIN_II, N)` cycles, `+ MIN_II` when `reduce_res` is
//! read out) \[E S13, as `activation`\].

use super::accum::{scalar_accum, ReduceCmd};
use super::base::Site;
use super::op::Op;
use super::op::PerPartition;
use super::{ActFn, AluOp, Operand};
use crate::builder::setters;
use crate::error::ErrorKind;
use crate::record::{Engine, MemKind, Opcode};
use crate::target::Target;
use crate::tile::TileRef;

/// The keywords of [`activate2`]: `reverse0`, `reverse1`, the reduction (`reduce_op`,
/// `reduce_cmd`) and `reduce_res`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Activate2Opts<'a> {
    /// Computes `imm0 op0 data` instead of `data op0 imm0`.
    pub reverse0: bool,
    /// Computes `imm1 op1 v` instead of `v op1 imm1`.
    pub reverse1: bool,
    /// The reduction into ScalarE's registers and its command (`idle` when `None`).
    pub reduce: Option<(AluOp, ReduceCmd)>,
    /// The `[P, 1]` tile the registers are read out into.
    pub reduce_res: Option<TileRef<'a>>,
    /// `relu_param`: the parameter of a parameterised function (`prelu`'s slope below zero);
    /// `None` is NKI's default 0.0.
    pub relu_param: Option<Operand<'a>>,
    /// The engine (NKI 0.8 `engine=`): ScalarE (`None`) or GpSimdE (SBUF operands only).
    pub engine: Option<Engine>,
}

/// The former name of [`Activate2Opts`], kept so code written against it still compiles:
/// every `nisa` option struct is named `*Opts`.
#[deprecated(
    since = "0.1.0",
    note = "renamed `Activate2Opts`: every nisa option struct is named `*Opts`"
)]
pub type Activate2Args<'a> = Activate2Opts<'a>;

impl<'a> Activate2Opts<'a> {
    /// NKI's defaults: no reversal, no reduction.
    pub fn new() -> Self {
        Self::default()
    }
    setters! {
        /// Reverses `op0`'s operands.
        reverse0() => reverse0 = true;
        /// Reverses `op1`'s operands.
        reverse1() => reverse1 = true;
        /// Reduces the results with `op` into the registers as `cmd` says.
        reduce(op: AluOp, cmd: ReduceCmd) => reduce = Some((op, cmd));
        /// Reads the registers out into the `[P, 1]` tile `t`.
        reduce_res(t: impl Into<TileRef<'a>>) => reduce_res = Some(t.into());
        /// Sets `relu_param` (a scalar or a `[P, 1]` tile): `prelu`'s slope below zero.
        relu_param(alpha: impl Into<Operand<'a>>) => relu_param = Some(alpha.into());
        /// Runs the instruction on `engine` (NKI 0.8 `engine=`: ScalarE or GpSimdE).
        engine(engine: Engine) => engine = Some(engine);
    }
}

/// `dst = op((data op0 imm0) op1 imm1)` on ScalarE with an optional reduction into its
/// accumulator registers (NKI 0.7 `nisa.activate2(dst, op, data, imm0, imm1, op0, op1,
/// reverse0, reverse1, reduce_op, reduce_res, reduce_cmd)`; NeuronCore-v4 only). `imm0` and
/// `imm1` are scalars or `[P, 1]` tiles (of one dtype when both are tiles); `dst` (SBUF or
/// PSUM) has `data`'s partitions and elements per partition. See the module docs for the
/// accepted `(op0, op1)` pairs.
#[track_caller]
#[allow(clippy::too_many_arguments)]
pub fn activate2<'d, 'a>(
    dst: impl Into<TileRef<'d>>,
    op: ActFn,
    data: impl Into<TileRef<'a>>,
    imm0: impl Into<Operand<'a>>,
    imm1: impl Into<Operand<'a>>,
    op0: AluOp,
    op1: AluOp,
    args: impl Into<Option<Activate2Opts<'a>>>,
) {
    let ins = Op::begin("nisa.activate2");
    let (dst, x): (TileRef, TileRef) = (dst.into(), data.into());
    let args = args.into().unwrap_or_default();
    super::alu_rules::v4_instruction(&ins);
    if !op.in_activation_table() {
        ins.fail(
            ErrorKind::InvalidArgument,
            format!("'{op}' is not in the Scalar Engine activation table of 'activate2'"),
        );
    }
    use AluOp::{Add, Bypass, Multiply, Subtract};
    let pair_ok = matches!(
        (op0, op1),
        (Multiply, Add)
            | (Multiply, Subtract)
            | (Multiply, Bypass)
            | (Add, Bypass)
            | (Subtract, Bypass)
            | (Bypass, Bypass)
    );
    if !pair_ok {
        ins.fail(
            ErrorKind::InvalidArgument,
            format!(
                "(op0, op1) = ({op0}, {op1}) of 'activate2' is not supported; use (multiply, add), (multiply, subtract), (multiply, bypass), (add, bypass), (subtract, bypass) or (bypass, bypass)"
            ),
        );
    }
    if (args.reverse0 && op0 == Bypass) || (args.reverse1 && op1 == Bypass) {
        ins.fail(
            ErrorKind::InvalidArgument,
            "reverse0/reverse1 of 'activate2' need op0/op1 to be set (not bypass)".to_string(),
        );
    }
    for (what, t) in [("data", &x), ("dst", &dst)] {
        ins.operand(what, t);
        ins.memory(what, t, &[MemKind::Sbuf, MemKind::Psum]);
    }
    ins.same_partitions(("data", &x), ("dst", &dst));
    ins.same_free(("data", &x), ("dst", &dst));
    let p = x.partitions();
    let i0 = ins.per_partition("imm0", imm0.into(), p);
    let i1 = ins.per_partition("imm1", imm1.into(), p);
    let alpha = ins.per_partition(
        "relu_param",
        args.relu_param.unwrap_or(Operand::Scalar {
            value: 0.0,
            float: true,
        }),
        p,
    );
    if let (PerPartition::Vector(a), PerPartition::Vector(b)) = (&i0, &i1) {
        if a.dtype() != b.dtype() {
            ins.fail(
                ErrorKind::DType,
                format!(
                    "imm0 {} and imm1 {} of 'activate2' must have the same dtype",
                    a.describe(),
                    b.describe()
                ),
            );
        }
    }
    let engine = super::scalar::activation_engine(&ins, args.engine, Target::Trn3, &[("data", &x)]);
    let acc = scalar_accum(
        &ins,
        engine,
        args.reduce,
        args.reduce_res,
        &[
            AluOp::Add,
            AluOp::Maximum,
            AluOp::Minimum,
            AluOp::AbsMax,
            AluOp::AbsMin,
        ],
        (x.start_partition(), p),
    );
    if engine == Engine::GpSimd {
        ins.gpsimd_sbuf("dst", &dst);
    }
    let site =
        Site::new(engine, Opcode::Activation).accumulating(acc.as_ref().is_some_and(|a| a.costs()));
    let extra: Vec<&TileRef> = i0
        .tile()
        .into_iter()
        .chain(i1.tile())
        .chain(alpha.tile())
        .collect();
    let outs: Vec<&TileRef> = std::iter::once(&dst)
        .chain(acc.as_ref().and_then(|a| a.res.as_ref()))
        .collect();
    let (r0, r1) = (args.reverse0, args.reverse1);
    ins.compute(site, &[&x], &extra, &outs, || {
        let v = ins.read(&x);
        let (a, b) = (i0.values(&ins, p), i1.values(&ins, p));
        let slope = alpha.values(&ins, p);
        let f = x.free_size().max(1);
        let stage = |o: AluOp, rev: bool, v: f32, imm: f32| match (o, rev) {
            (Bypass, _) => v,
            (_, false) => o.eval(v, imm),
            (_, true) => o.eval(imm, v),
        };
        let mut out = Vec::with_capacity(v.len());
        let mut rows = Vec::with_capacity(p);
        for (r, row) in v.chunks(f).enumerate() {
            let first = out.len();
            out.extend(row.iter().map(|&d| {
                let t = stage(op1, r1, stage(op0, r0, d, a[r]), b[r]);
                op.eval_param(t, slope[r])
            }));
            if let Some(acc) = &acc {
                rows.push(acc.fold(&out[first..]));
            }
        }
        dst.scatter(out);
        if let Some(acc) = &acc {
            acc.run(&ins, &rows);
        }
    });
    if let Some(acc) = &acc {
        acc.trace(&ins);
    }
}
