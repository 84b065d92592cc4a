//! The engines' accumulator registers (NKI `reduce_regs`) and `nisa.reduce_cmd`: one fp32
//! register per partition on ScalarE (shared by `activation`, `activate2`) and on VectorE
//! (shared by `exponential`, `range_select`, `select_reduce`, `tensor_scalar_reduce`,
//! `tensor_scalar_cumulative`). An instruction may reset, load or reduce into them, and a
//! later instruction may keep reducing ("chaining") and read them out into `reduce_res`.
//!
//! The registers are part of the program instance's state, indexed by absolute partition
//! (a view starting at partition 32 uses registers 32..). The docs leave a register's value
//! undefined until it is reset or loaded, and say a VectorE instruction run with
//! `reduce_cmd=idle` may modify it ("always use reset_reduce after ... idle"): reducing onto
//! (`reduce`) or reading out such a register is an error naming the instruction. That check
//! follows the instruction stream only, so it behaves the same in every launch mode.

use super::accum_regs::Accumulators;
use super::base::{per_partition_shape, short, Site};
use super::op::Op;
use super::op::PerPartition;
use super::{AluOp, Operand};
use crate::builder::setters;
use crate::dtype::DType;
use crate::error::ErrorKind;
use crate::record::{Engine, MemKind};
use crate::tile::TileRef;
use std::ops::Range;

/// What an instruction does with its engine's accumulator registers (NKI `nisa.reduce_cmd`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceCmd {
    /// Leaves the registers alone (`idle`).
    Idle,
    /// Resets the registers to the reduction's identity, without reducing (`reset`).
    Reset,
    /// Reduces this instruction's results onto the current registers (`reduce`).
    Reduce,
    /// Resets the registers, then reduces this instruction's results into them
    /// (`reset_reduce`).
    ResetReduce,
    /// Loads a given value into the registers, then reduces this instruction's results
    /// onto it (`load_reduce`).
    LoadReduce,
}

impl ReduceCmd {
    /// NKI's name (`reset_reduce`, ...).
    pub fn name(self) -> &'static str {
        match self {
            ReduceCmd::Idle => "idle",
            ReduceCmd::Reset => "reset",
            ReduceCmd::Reduce => "reduce",
            ReduceCmd::ResetReduce => "reset_reduce",
            ReduceCmd::LoadReduce => "load_reduce",
        }
    }

    /// True when the instruction's results are reduced into the registers.
    pub fn reduces(self) -> bool {
        matches!(
            self,
            ReduceCmd::Reduce | ReduceCmd::ResetReduce | ReduceCmd::LoadReduce
        )
    }
}

/// The identity of reduction `op` (what `reset` loads): 0 for add/subtract, 1 for multiply,
/// -inf for max, +inf for min, 0 for abs_max, +inf for abs_min.
pub(crate) fn identity(op: AluOp) -> f32 {
    match op {
        AluOp::Multiply => 1.0,
        AluOp::Maximum => f32::NEG_INFINITY,
        AluOp::Minimum | AluOp::AbsMin => f32::INFINITY,
        _ => 0.0,
    }
}

/// `reg op v` for a reduction operator (max/min propagate NaN, as the ALU does).
pub(crate) fn combine(op: AluOp, reg: f32, v: f32) -> f32 {
    op.eval(reg, v)
}

/// One instruction's use of the registers of `engine`, checked against the stream so far.
/// `rows` are the absolute partitions the instruction covers. Returns the registers' values
/// for those rows before this instruction's reduction (after a reset or load), when values
/// are computed.
pub(crate) struct AccumUse {
    pub(crate) engine: Engine,
    pub(crate) cmd: ReduceCmd,
    pub(crate) op: AluOp,
    pub(crate) rows: Range<usize>,
    /// Whether the instruction reads the registers out into `reduce_res`.
    pub(crate) reads_out: bool,
}

impl AccumUse {
    /// Applies the command's reset/load and the definedness rules; returns the registers'
    /// starting values for this instruction's rows (`load` gives `load_reduce`'s values).
    pub(crate) fn begin(&self, ins: &Op, load: Option<&[f32]>) -> Vec<f32> {
        self.start(ins, load, |regs| regs.to_vec())
    }

    /// The registers' state change of this instruction when no values are computed (estimate
    /// mode): the command's reset and the definedness rules ([`AccumUse::begin`], then
    /// [`AccumUse::finish`] without values), copying nothing.
    pub(crate) fn without_values(&self, ins: &Op) {
        self.start(ins, None, |_| ());
        self.finish(ins, None);
    }

    /// [`AccumUse::begin`], handing the registers' starting values to `read`.
    fn start<R>(&self, ins: &Op, load: Option<&[f32]>, read: impl FnOnce(&[f32]) -> R) -> R {
        let (rows, engine, cmd, op) = (self.rows.clone(), self.engine, self.cmd, self.op);
        let (p, reads_out) = (rows.len(), self.reads_out);
        ins.with_ctx(|c| {
            let (regs, defined) = c.state.get::<Accumulators>().regs(engine);
            match cmd {
                ReduceCmd::Reset | ReduceCmd::ResetReduce => {
                    regs[rows.clone()].fill(identity(op));
                    *defined = true;
                }
                ReduceCmd::LoadReduce => {
                    if let Some(l) = load {
                        regs[rows.clone()].copy_from_slice(&l[..p]);
                    }
                    *defined = true;
                }
                ReduceCmd::Reduce | ReduceCmd::Idle => {
                    if (cmd == ReduceCmd::Reduce || reads_out) && !*defined {
                        return Err(());
                    }
                }
            }
            Ok(read(&regs[rows]))
        })
        .unwrap_or_else(|()| {
            ins.fail(
                ErrorKind::InvalidArgument,
                format!(
                    "'{}' with reduce_cmd={}{} uses the {} accumulator registers, which hold no \
                     defined value: reset them first (reduce_cmd=reset_reduce, reset or load_reduce)",
                    short(ins.api),
                    cmd.name(),
                    if reads_out { " and reduce_res" } else { "" },
                    engine.name()
                ),
            )
        })
    }

    /// Stores the registers' new values for this instruction's rows (`vals`, when values are
    /// computed) and applies VectorE's `idle` rule (the registers become undefined).
    pub(crate) fn finish(&self, ins: &Op, vals: Option<&[f32]>) {
        let (rows, engine, cmd) = (self.rows.clone(), self.engine, self.cmd);
        ins.with_ctx(|c| {
            let (regs, defined) = c.state.get::<Accumulators>().regs(engine);
            if let Some(v) = vals {
                if cmd.reduces() {
                    let p = rows.len();
                    regs[rows].copy_from_slice(&v[..p]);
                }
            }
            if cmd == ReduceCmd::Idle && engine == Engine::Vector {
                *defined = false;
            }
        });
    }
}

/// The accumulator keywords of the VectorE/ScalarE instructions that reduce into the engine's
/// registers: `reduce_res` (a `[P, 1]` tile that receives the registers after the
/// instruction; `None` keeps them in the engine for a later instruction), `reduce_cmd`
/// (`None`: the instruction's own default), `reduce_init` (`load_reduce`'s value: a scalar
/// or a `[P, 1]` fp32 tile), `reduce_res_negate` (`tensor_scalar_reduce` only),
/// `reverse_pred` (`select_reduce` only) and `range_start` (`range_select` only). Each
/// instruction names the keywords it takes; setting another is an error.
///
/// ```
/// use nki_core::nisa::{AluOp, AccumOpts, ReduceCmd};
/// use nki_core::prelude::*;
///
/// let x = Hbm::from_vec(&[2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
/// let mut sums = Hbm::<f32>::zeros([2, 1]);
/// let out = sums.as_output();
/// Launch::new(1)
///     .run(|| {
///         let t = nl::load(&x);
///         let y = nl::ndarray(&[2, 3], DType::F32, MemKind::Sbuf);
///         let s = nl::ndarray(&[2, 1], DType::F32, MemKind::Sbuf);
///         // y = 2x, each partition's sum of y left in the registers (reset first) ...
///         let args = AccumOpts::new().cmd(ReduceCmd::ResetReduce);
///         nisa::tensor_scalar_reduce(&y, &t, AluOp::Multiply, 2.0, AluOp::Add, args);
///         // ... then x + 1 summed on top of them and read out into `s`.
///         let args = AccumOpts::new().cmd(ReduceCmd::Reduce).reduce_res(&s);
///         nisa::tensor_scalar_reduce(&y, &t, AluOp::Add, 1.0, AluOp::Add, args);
///         nl::store(&out, &s);
///     })
///     .unwrap();
/// assert_eq!(sums.to_vec().unwrap(), [12.0 + 9.0, 30.0 + 18.0]);
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct AccumOpts<'a> {
    /// The `[P, 1]` tile the registers are read out into, if any.
    pub reduce_res: Option<TileRef<'a>>,
    /// The register command (`None`: the instruction's default).
    pub reduce_cmd: Option<ReduceCmd>,
    /// The value `load_reduce` loads.
    pub reduce_init: Option<Operand<'a>>,
    /// Negates what is written to `reduce_res` (not the registers).
    pub reduce_res_negate: bool,
    /// Selects where the predicate is false instead.
    pub reverse_pred: bool,
    /// The index of the first free element (`range_select`).
    pub range_start: i64,
}

/// The former name of [`AccumOpts`] (it collided with `tensor_reduce`'s `ReduceOpts`), kept so code written against it still compiles:
/// every `nisa` option struct is named `*Opts`.
#[deprecated(
    since = "0.1.0",
    note = "renamed `AccumOpts`: every nisa option struct is named `*Opts`"
)]
pub type ReduceArgs<'a> = AccumOpts<'a>;

impl<'a> AccumOpts<'a> {
    /// NKI's defaults: no `reduce_res`, the instruction's default command.
    pub fn new() -> Self {
        Self::default()
    }
    setters! {
        /// Reads the registers out into the `[P, 1]` tile `t` after the instruction.
        reduce_res(t: impl Into<TileRef<'a>>) => reduce_res = Some(t.into());
        /// Sets the register command.
        cmd(cmd: ReduceCmd) => reduce_cmd = Some(cmd);
        /// Sets `load_reduce`'s value (a scalar or a `[P, 1]` fp32 tile).
        init(v: impl Into<Operand<'a>>) => reduce_init = Some(v.into());
        /// Negates the value written to `reduce_res`.
        negate() => reduce_res_negate = true;
        /// Reverses the predicate.
        reverse_pred() => reverse_pred = true;
        /// Sets the index of the first free element.
        range_start(start: i64) => range_start = start;
    }
}

/// The keywords an instruction accepts besides `reduce_res`, `reduce_cmd`, `reduce_init`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Extra {
    None,
    Negate,
    ReversePred,
    RangeStart,
}

/// Every VectorE register command: `idle`, `reset_reduce`, `reduce`, `load_reduce`.
pub(crate) const VECTOR_CMDS: &[ReduceCmd] = &[
    ReduceCmd::Idle,
    ReduceCmd::ResetReduce,
    ReduceCmd::Reduce,
    ReduceCmd::LoadReduce,
];

/// The VectorE register commands that accumulate: [`VECTOR_CMDS`] but `idle`.
pub(crate) const ACCUMULATING_CMDS: &[ReduceCmd] = &[
    ReduceCmd::ResetReduce,
    ReduceCmd::Reduce,
    ReduceCmd::LoadReduce,
];

/// What an instruction accepts of the accumulator keywords: the commands (`cmds`), the
/// command when none is given (`default`) and the one extra keyword it takes (`extra`).
pub(crate) struct AccumRule {
    pub(crate) cmds: &'static [ReduceCmd],
    pub(crate) default: ReduceCmd,
    pub(crate) extra: Extra,
}

/// A checked accumulator use: the registers' engine, command and operator, the `reduce_res`
/// view and the `load_reduce` operand.
pub(crate) struct Accum<'a> {
    pub(crate) use_: AccumUse,
    pub(crate) res: Option<TileRef<'a>>,
    pub(crate) init: Option<PerPartition<'a>>,
    pub(crate) negate: bool,
}

impl<'a> Accum<'a> {
    /// Validates `args` for a VectorE instruction `ins` whose registers take the rows of
    /// `data` (see [`Accum::check`]).
    pub(crate) fn vector(
        ins: &Op,
        op: AluOp,
        args: &AccumOpts<'a>,
        data: &TileRef,
        rule: AccumRule,
    ) -> Accum<'a> {
        let rows = (data.start_partition(), data.partitions());
        Accum::check(ins, Engine::Vector, op, args, rows, rule)
    }

    /// Validates `args` for instruction `ins` on `engine` over the `p` partitions starting at
    /// `start`, as `rule` says.
    pub(crate) fn check(
        ins: &Op,
        engine: Engine,
        op: AluOp,
        args: &AccumOpts<'a>,
        (start, p): (usize, usize),
        rule: AccumRule,
    ) -> Accum<'a> {
        let AccumRule {
            cmds,
            default,
            extra,
        } = rule;
        let cmd = args.reduce_cmd.unwrap_or(default);
        let api = short(ins.api);
        ins.one_of(
            ErrorKind::InvalidArgument,
            &cmd,
            cmds,
            |c| c.name(),
            |list| {
                format!(
                    "reduce_cmd={} is not supported by '{api}'; supported: {list}",
                    cmd.name()
                )
            },
        );
        let unexpected = [
            (args.reduce_res_negate, Extra::Negate, "reduce_res_negate"),
            (args.reverse_pred, Extra::ReversePred, "reverse_pred"),
            (args.range_start != 0, Extra::RangeStart, "range_start"),
        ];
        for (set, which, name) in unexpected {
            if set && extra != which {
                ins.fail(
                    ErrorKind::InvalidArgument,
                    format!("'{api}' takes no '{name}' argument"),
                );
            }
        }
        let init = match (args.reduce_init, cmd) {
            (Some(v), ReduceCmd::LoadReduce) => Some(ins.per_partition("reduce_init", v, p)),
            (None, ReduceCmd::LoadReduce) => ins.fail(
                ErrorKind::InvalidArgument,
                format!("'{api}' with reduce_cmd=load_reduce needs reduce_init"),
            ),
            (Some(Operand::Scalar { value: 0.0, .. }), _) => None,
            (Some(_), _) => ins.fail(
                ErrorKind::InvalidArgument,
                format!(
                    "reduce_init of '{api}' is only used with reduce_cmd=load_reduce (got {})",
                    cmd.name()
                ),
            ),
            (None, _) => None,
        };
        if let Some(PerPartition::Vector(t)) = &init {
            if t.dtype() != DType::F32 {
                ins.fail(
                    ErrorKind::DType,
                    format!("reduce_init {} of '{api}' must be float32", t.describe()),
                );
            }
        }
        if let Some(r) = &args.reduce_res {
            ins.check(per_partition_shape(ins.api, "reduce_res", r, p));
            ins.operand("reduce_res", r);
            ins.memory("reduce_res", r, &[MemKind::Sbuf, MemKind::Psum]);
        }
        Accum {
            use_: AccumUse {
                engine,
                cmd,
                op,
                rows: start..start + p,
                reads_out: args.reduce_res.is_some(),
            },
            res: args.reduce_res,
            init,
            negate: args.reduce_res_negate,
        }
    }

    /// The tiles the record reads besides its data: `extra` and the `load_reduce` operand's
    /// tile, if it is one.
    pub(crate) fn inputs<'t>(&'t self, mut extra: Vec<&'t TileRef<'t>>) -> Vec<&'t TileRef<'t>> {
        if let Some(PerPartition::Vector(t)) = &self.init {
            extra.push(t);
        }
        extra
    }

    /// The views the record writes: `dst` and `reduce_res`, if given.
    pub(crate) fn outputs<'t>(&'t self, dst: &'t TileRef<'t>) -> Vec<&'t TileRef<'t>> {
        std::iter::once(dst).chain(self.res.iter()).collect()
    }

    /// True when the record also reads out or reduces into the registers (the accumulator
    /// cost of S13: `+ MIN_II`).
    pub(crate) fn costs(&self) -> bool {
        self.res.is_some()
    }

    /// Issues the VectorE accumulating instruction `site` (with the accumulator's cost) that
    /// reads `x` and the per-partition `operand` and writes `dst` (and `reduce_res`): when
    /// values are computed, `exec(x's values, operand's values)`; then the registers' trace.
    pub(crate) fn compute_over(
        &self,
        ins: &Op,
        site: Site,
        (x, dst): (&TileRef, &TileRef),
        operand: &PerPartition,
        exec: impl FnOnce(&[f32], &[f32]),
    ) {
        let extra = self.inputs(operand.tile().into_iter().collect());
        let outs = self.outputs(dst);
        ins.compute(site.accumulating(self.costs()), &[x], &extra, &outs, || {
            exec(&ins.read(x), &operand.values(ins, x.partitions()))
        });
        self.trace(ins);
    }

    /// The registers' state in estimate mode (no values): the definedness rules only.
    pub(crate) fn trace(&self, ins: &Op) {
        if !ins.executes() {
            self.use_.without_values(ins);
        }
    }

    /// Executes the register part of the instruction: `rows(r)` is the reduction of row `r`'s
    /// results (already folded with [`Accum::fold`]); writes `reduce_res`.
    pub(crate) fn run(&self, ins: &Op, row_results: &[f32]) {
        let load = self
            .init
            .as_ref()
            .map(|i| i.values(ins, self.use_.rows.len()));
        let mut regs = self.use_.begin(ins, load.as_deref());
        if self.use_.cmd.reduces() {
            for (r, v) in regs.iter_mut().zip(row_results) {
                *r = combine(self.use_.op, *r, *v);
            }
        }
        self.use_.finish(ins, Some(&regs));
        if let Some(res) = &self.res {
            let sign = if self.negate { -1.0 } else { 1.0 };
            res.scatter(regs.iter().map(|v| v * sign).collect());
        }
    }

    /// Executes an element-wise instruction with a register reduction: element `i` of row `r`
    /// of the result is `value(r, i, x)` for the element `x` of `data` (rows of `f` elements)
    /// there; writes the results to `dst`, reduces each row's results into the registers and
    /// writes `reduce_res`.
    pub(crate) fn map_rows(
        &self,
        ins: &Op,
        dst: &TileRef,
        data: &[f32],
        f: usize,
        mut value: impl FnMut(usize, usize, f32) -> f32,
    ) {
        let mut out = Vec::with_capacity(data.len());
        let mut rows = Vec::with_capacity(self.use_.rows.len());
        for (r, row) in data.chunks(f).enumerate() {
            let first = out.len();
            out.extend(row.iter().enumerate().map(|(i, &x)| value(r, i, x)));
            rows.push(self.fold(&out[first..]));
        }
        dst.scatter(out);
        self.run(ins, &rows);
    }

    /// The reduction of one row of fp32 results by the registers' operator: add and multiply
    /// are computed exactly (f64) and rounded once to fp32; max/min/abs_max/abs_min fold in
    /// order (NaN propagates through max/min).
    pub(crate) fn fold(&self, row: &[f32]) -> f32 {
        fold(self.use_.op, row)
    }
}

/// The ScalarE accumulator of an activation-family instruction (NKI 0.7 `reduce_op`,
/// `reduce_cmd`, `reduce_res`; `reduce` is `(reduce_op, reduce_cmd)`, `idle` by default):
/// `None` when neither keyword is given, else the checked use, `reduce_op` one of `ops`.
pub(crate) fn scalar_accum<'a>(
    ins: &Op,
    engine: Engine,
    reduce: Option<(AluOp, ReduceCmd)>,
    reduce_res: Option<TileRef<'a>>,
    ops: &[AluOp],
    partitions: (usize, usize),
) -> Option<Accum<'a>> {
    if reduce.is_none() && reduce_res.is_none() {
        return None;
    }
    let (op, cmd) = reduce.unwrap_or((AluOp::Add, ReduceCmd::Idle));
    ins.require_alu("reduce_op", op, ops);
    let mut args = AccumOpts::new().cmd(cmd);
    args.reduce_res = reduce_res;
    Some(Accum::check(
        ins,
        engine,
        op,
        &args,
        partitions,
        AccumRule {
            cmds: &[
                ReduceCmd::Idle,
                ReduceCmd::Reset,
                ReduceCmd::Reduce,
                ReduceCmd::ResetReduce,
            ],
            default: ReduceCmd::Idle,
            extra: Extra::None,
        },
    ))
}

/// See [`Accum::fold`].
pub(crate) fn fold(op: AluOp, row: &[f32]) -> f32 {
    match op {
        AluOp::Add => row.iter().map(|&v| v as f64).sum::<f64>() as f32,
        AluOp::Multiply => row.iter().map(|&v| v as f64).product::<f64>() as f32,
        _ => row.iter().fold(identity(op), |a, &v| op.eval(a, v)),
    }
}
