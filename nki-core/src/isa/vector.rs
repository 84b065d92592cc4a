//! VectorE instructions (some also on ScalarE / GpSimdE through an `engine` argument):
//! `tensor_tensor`, `tensor_scalar`, `tensor_reduce`, `tensor_copy`, `tensor_tensor_scan`,
//! `reciprocal`, `memset`, `bn_stats`, `bn_aggr`.
//!
//! Math is fp32 on the values (already rounded to their dtypes); the result is rounded once to
//! the output dtype. Additive reductions (`tensor_reduce` with add, the batch-norm statistics)
//! accumulate in f64 and round once, i.e. they return the correctly rounded fp32 result; the
//! hardware's own summation order is not public.

use super::base::{alu_engine, copy_engine, fill_engine, short, Dst, Output, Site};
use super::op::Op;
use super::opts::{Opts, ReduceOpts};
use super::{AluOp, Engine, Operand};
use crate::access::MAX_DIMS;
use crate::builder::{instruction, setters};
use crate::dtype::DType;
use crate::emit::trace::{Arg, Call};
use crate::error::ErrorKind;
use crate::exec;
use crate::record::{MemKind, Opcode};
use crate::target::Target;
use crate::tile::TileRef;

/// Bitvec operators need integer operands.
pub(super) fn bitvec_needs_ints(ins: &Op, op: AluOp, dtypes: &[(&str, DType)]) {
    if !op.is_bitvec() {
        return;
    }
    for (what, d) in dtypes {
        if !d.is_int() {
            ins.fail(ErrorKind::DType, format!(
                    "bitvec operator '{op}' of '{}' works on integer bit patterns, but operand '{what}' has dtype {d}",
                    short(ins.api)
                ));
        }
    }
}

/// Bitvec operators run on VectorE only.
fn bitvec_on_vector(ins: &Op, ops: &[AluOp], engine: Engine) {
    if engine != Engine::Vector {
        if let Some(op) = ops.iter().find(|o| o.is_bitvec()) {
            ins.fail(
                ErrorKind::InvalidArgument,
                format!(
                    "bitvec operator '{op}' of '{}' is only supported on the Vector Engine, not {}",
                    short(ins.api),
                    engine.name()
                ),
            );
        }
    }
}

instruction! {
    /// Element-wise `dst = data1 op data2` (NKI `nisa.tensor_tensor(dst, data1, data2, op)`).
    ///
    /// Both inputs need `dst`'s partition count and elements per partition, and cannot both be in
    /// PSUM; the fp32 result is rounded to `dst`'s dtype. The engine is VectorE, or GpSimdE for
    /// `power` and 32-bit integer add/subtract/multiply (NKI's table; then nothing may be in PSUM);
    /// `opts.engine` picks VectorE or GpSimdE explicitly (bitvec operators run on VectorE only).
    pub fn tensor_tensor<'d, 'a, 'b>(
        dst: into TileRef<'d>, data1: into TileRef<'a>, data2: into TileRef<'b>, op: AluOp,
        opts: into Option<Opts>,
    ) as ins = "nisa.tensor_tensor" {
        let engine = opts.unwrap_or_default().engine;
        ins.trace(|| {
            use super::trace_args as ta;
            Call::new("nisa.tensor_tensor")
                .arg("dst", ta::tile(&dst))
                .arg("data1", ta::tile(&data1))
                .arg("data2", ta::tile(&data2))
                .arg("op", ta::alu(op))
                .opt("engine", engine.map(ta::engine))
        });
        tensor_tensor_to(&ins, Dst::Into(dst), data1, data2, op, engine);
    }
}

/// The `tensor_tensor` builder.
pub(crate) fn tensor_tensor_to<'d>(
    ins: &Op,
    dst: Dst<'d>,
    a: TileRef,
    b: TileRef,
    op: AluOp,
    engine: Option<Engine>,
) -> Output<'d> {
    let api = ins.api;
    ins.data_pair(("data1", &a), ("data2", &b));
    bitvec_needs_ints(ins, op, &[("data1", a.dtype()), ("data2", b.dtype())]);
    super::alu_rules::binary(ins, "op", op);
    let in_dtype = DType::promote(a.dtype(), b.dtype());
    // The instruction runs where the table (or the caller) puts it; a PSUM operand is an
    // error on GpSimdE.
    let engine = engine.unwrap_or_else(|| alu_engine(op, in_dtype, false));
    ins.engine_in(engine, &[Engine::Vector, Engine::GpSimd]);
    bitvec_on_vector(ins, &[op], engine);
    if engine == Engine::GpSimd {
        ins.gpsimd_sbuf("data1", &a);
        ins.gpsimd_sbuf("data2", &b);
    }
    let out = ins.output(
        dst,
        MemKind::Sbuf,
        in_dtype,
        a.shape(),
        engine != Engine::GpSimd,
    );
    let ov = out.view();
    let site = Site::new(engine, Opcode::TensorTensor).with_alu(op);
    let fresh = matches!(out, Output::New(_));
    ins.compute(site, &[&a, &b], &[], &[&ov], || {
        let integer = op.is_integer_on(engine, in_dtype);
        if fresh {
            // A new tile: written from the operands' rows (one per partition), which are read
            // in place (a tile loaded from a kernel input keeps sharing its rows).
            if integer {
                let f = exec::int_op(op, a.dtype(), b.dtype(), in_dtype, ov.dtype());
                return a.with_slot_rows(api, ins.loc, |ra| {
                    b.with_slot_rows(api, ins.loc, |rb| {
                        ov.write_slots(|o| zip_rows(ra, rb, o, f))
                    })
                });
            }
            return a.with_rows(api, ins.loc, |ra| {
                b.with_rows(api, ins.loc, |rb| {
                    ov.write_with(false, |o| match op {
                        // The common operators get their own monomorphic loop (it vectorises).
                        AluOp::Add => zip_rows(ra, rb, o, |p, q| p + q),
                        AluOp::Subtract => zip_rows(ra, rb, o, |p, q| p - q),
                        AluOp::Multiply => zip_rows(ra, rb, o, |p, q| p * q),
                        _ => zip_rows(ra, rb, o, |p, q| op.eval_typed(p, q, in_dtype)),
                    })
                })
            });
        }
        if integer {
            // Native integer arithmetic on the slots (exact for 32-bit integers).
            let f = exec::int_op(op, a.dtype(), b.dtype(), in_dtype, ov.dtype());
            let (x, y) = (a.gather_slots(api, ins.loc), b.gather_slots(api, ins.loc));
            ov.scatter_slots(x.iter().zip(&y).map(|(&p, &q)| f(p, q)).collect());
        } else {
            let (x, y) = (a.gather(api, ins.loc), b.gather(api, ins.loc));
            let r = x
                .iter()
                .zip(&y)
                .map(|(&p, &q)| op.eval_typed(p, q, in_dtype))
                .collect();
            ov.scatter(r);
        }
    });
    out
}

/// Appends `g(p, q)` of the elements of rows `ra` and `rb`, row by row, to `o`.
fn zip_rows(
    ra: crate::tile::Rows,
    rb: crate::tile::Rows,
    o: &mut Vec<f32>,
    g: impl Fn(f32, f32) -> f32,
) {
    for (x, y) in ra.iter().zip(rb.iter()) {
        o.extend(x.iter().zip(y).map(|(&p, &q)| g(p, q)));
    }
}

/// The keyword arguments of [`tensor_scalar`]: the optional second operator, the operand
/// order flags, the output dtype and the engine (default: none named, the compiler's choice).
///
/// ```
/// use nki_core::nisa::{AluOp, TensorScalarOpts};
/// use nki_core::prelude::*;
///
/// let x = Hbm::from_vec(&[2, 2], vec![1.0f32, 2.0, 3.0, 4.0]).unwrap();
/// let f = Hbm::from_vec(&[2, 1], vec![10.0f32, -1.0]).unwrap();
/// let (mut a, mut b) = (Hbm::<f32>::zeros([2, 2]), Hbm::<f32>::zeros([2, 2]));
/// let (oa, ob) = (a.as_output(), b.as_output());
/// Launch::new(1)
///     .run(|| {
///         let (t, col) = (nl::load(&x), nl::load(&f));
///         let d = nl::ndarray(&[2, 2], DType::F32, MemKind::Sbuf);
///         // (x * f) + 2.5, with f a [P, 1] tile: one value per partition
///         let args = TensorScalarOpts::new().then(AluOp::Add, 2.5);
///         nisa::tensor_scalar(&d, &t, AluOp::Multiply, &col, args);
///         nl::store(&oa, &d);
///         // 1 - x
///         let args = TensorScalarOpts::new().reverse0();
///         nisa::tensor_scalar(&d, &t, AluOp::Subtract, 1.0, args);
///         nl::store(&ob, &d);
///     })
///     .unwrap();
/// assert_eq!(a.to_vec().unwrap(), [12.5, 22.5, -0.5, -1.5]);
/// assert_eq!(b.to_vec().unwrap(), [0.0, -1.0, -2.0, -3.0]);
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct TensorScalarOpts<'a> {
    /// Computes `operand0 op0 data` instead of `data op0 operand0`.
    pub reverse0: bool,
    /// The second operator and its operand (scalar or `[P, 1]` tile).
    pub op1: Option<(AluOp, Operand<'a>)>,
    /// Computes `operand1 op1 t` instead of `t op1 operand1`.
    pub reverse1: bool,
    /// Output dtype (default: `data`'s dtype).
    pub dtype: Option<DType>,
    /// Engine: Vector, Scalar or GpSimd; `None` (the default, NKI's `engine.unknown`): the
    /// compiler picks VectorE or ScalarE by the instruction's cost (see `nisa::tensor_scalar`).
    pub engine: Option<Engine>,
}

/// The former name of [`TensorScalarOpts`], kept so code written against it still compiles:
/// every `nisa` option struct is named `*Opts`.
#[deprecated(
    since = "0.1.0",
    note = "renamed `TensorScalarOpts`: every nisa option struct is named `*Opts`"
)]
pub type TensorScalarArgs<'a> = TensorScalarOpts<'a>;

impl<'a> TensorScalarOpts<'a> {
    /// The defaults: one operator, no engine named (the compiler's choice), `data`'s dtype.
    pub fn new() -> Self {
        Self::default()
    }
    setters! {
        /// Reverses the operands of the first operator (`operand0 op0 data`).
        reverse0() => reverse0 = true;
        /// Adds the second operator: `(...) op1 operand1`.
        then(op1: AluOp, operand1: impl Into<Operand<'a>>) => op1 = Some((op1, operand1.into()));
        /// Reverses the operands of the second operator (`operand1 op1 t`).
        reverse1() => reverse1 = true;
        /// Sets the output dtype.
        dtype(dtype: DType) => dtype = Some(dtype);
        /// Sets the engine.
        engine(engine: Engine) => engine = Some(engine);
    }
}

instruction! {
    /// `dst = (data op0 operand0) op1 operand1` with scalar or per-partition `[P, 1]` operands
    /// broadcast along the free dimension (NKI `nisa.tensor_scalar(dst, data, op0, operand0,
    /// ...)`). The second operator, the `reverse` flags and the engine come from `args` (`None`:
    /// one operator, no engine named). With no engine named (NKI's `engine.unknown`) the
    /// compiler picks: the instruction runs on VectorE or, where ScalarE may run it and costs
    /// less for this tile's shape and dtypes, on ScalarE (`isa::base::unnamed_tensor_scalar_engine`).
    ///
    /// Both operators are arithmetic, or both bitvec (integer data, VectorE only). ScalarE needs
    /// trn2 or later and supports only `multiply`, `add` and `multiply` then `add`; GpSimdE runs
    /// only `op0` rsqrt (NKI 0.7; the Beta-1 `classic` form runs any operator there) and cannot
    /// access PSUM. `dst` has `data`'s partitions and elements per partition; the result is
    /// rounded to its dtype (`args.dtype`, the classic form's output dtype, must be unset or
    /// `dst`'s).
    pub fn tensor_scalar<'d, 'a>(
        dst: into TileRef<'d>, data: impl Into<TileRef<'a>>, op0: AluOp,
        operand0: impl Into<Operand<'a>>, args: into Option<TensorScalarOpts<'a>>,
    ) as ins = "nisa.tensor_scalar" {
        let args = args.unwrap_or_default();
        let (data, operand0) = (data.into(), operand0.into());
        ins.trace(|| {
            use super::trace_args as ta;
            let flag = |on: bool| on.then_some(Arg::Bool(true));
            Call::new("nisa.tensor_scalar")
                .arg("dst", ta::tile(&dst))
                .arg("data", ta::tile(&data))
                .arg("op0", ta::alu(op0))
                .arg("operand0", ta::operand(&operand0))
                .opt("reverse0", flag(args.reverse0))
                .opt("op1", args.op1.as_ref().map(|o| ta::alu(o.0)))
                .opt("operand1", args.op1.as_ref().map(|o| ta::operand(&o.1)))
                .opt("reverse1", flag(args.reverse1))
                .opt("engine", args.engine.map(ta::engine))
        });
        dtype_is_dst(&ins, args.dtype, &dst);
        super::alu_rules::gpsimd_rsqrt_only(&ins, op0, args.engine.unwrap_or(Engine::Vector));
        tensor_scalar_to(&ins, Dst::Into(dst), data, op0, operand0, args);
    }
}

/// The classic forms' output `dtype`, when a dst-first call passes one, must be `dst`'s.
pub(super) fn dtype_is_dst(ins: &Op, dtype: Option<DType>, dst: &TileRef) {
    if let Some(d) = dtype {
        if d != dst.dtype() {
            ins.fail(
                ErrorKind::DType,
                format!(
                    "'{}' writes dst {} in its dtype {}; the args' dtype {d} is only for the classic form that allocates its output",
                    short(ins.api),
                    dst.describe(),
                    dst.dtype()
                ),
            );
        }
    }
}

/// The `tensor_scalar` builder.
pub(crate) fn tensor_scalar_to<'d, 'a>(
    ins: &Op,
    dst: Dst<'d>,
    x: TileRef<'a>,
    op0: AluOp,
    operand0: Operand<'a>,
    args: TensorScalarOpts<'a>,
) -> Output<'d> {
    let api = ins.api;
    // No engine named: checked as VectorE, recorded on the compiler's choice (`unnamed`).
    let engine = args.engine.unwrap_or(Engine::Vector);
    ins.engine_in(engine, &[Engine::Vector, Engine::Scalar, Engine::GpSimd]);
    ins.operand_on(engine, "data", &x);
    super::alu_rules::op0(ins, op0, &operand0, engine);
    let op1 = args.op1.map(|(o, _)| o);
    if let Some(o1) = op1 {
        super::alu_rules::binary(ins, "op1", o1);
    }
    if let Some(o1) = op1 {
        if o1.is_bitvec() != op0.is_bitvec() {
            ins.fail(ErrorKind::InvalidArgument, format!(
                    "operators '{op0}' and '{o1}' of 'tensor_scalar' must both be arithmetic or both be bitvec operators"
                ));
        }
    }
    // The operators, on the stack (no allocation per instruction on the estimate path).
    let ops_buf = [op0, op1.unwrap_or(op0)];
    let ops = &ops_buf[..1 + usize::from(op1.is_some())];
    bitvec_on_vector(ins, ops, engine);
    bitvec_needs_ints(ins, op0, &[("data", x.dtype())]);
    if engine == Engine::Scalar && ins.target() == Target::Trn1 {
        ins.fail(ErrorKind::InvalidArgument, "'tensor_scalar' on the Scalar Engine needs NeuronCore-v3 or later (trn2+); use the Vector Engine or activation(copy) with scale/bias on trn1".to_string());
    }
    if engine == Engine::Scalar {
        let ok = matches!(
            (op0, op1),
            (AluOp::Multiply, Some(AluOp::Add)) | (AluOp::Multiply, None) | (AluOp::Add, None)
        );
        if !ok {
            let second = op1.map(|o| o.name()).unwrap_or("None");
            ins.fail(ErrorKind::InvalidArgument, format!(
                    "Scalar Engine supports only (multiply, add), (multiply, None) and (add, None) in 'tensor_scalar', got ({op0}, {second})"
                ));
        }
    }
    let p = x.partitions();
    let s0 = ins.per_partition("operand0", operand0, p);
    let s1 = args.op1.map(|(_, o)| ins.per_partition("operand1", o, p));
    let in_dtype = x.dtype();
    let to_psum = engine != Engine::GpSimd;
    let out = ins.output(dst, MemKind::Sbuf, in_dtype, x.shape(), to_psum);
    let ov = out.view();
    // A unary op0 reads `data` alone: `reverse0` has nothing to swap [A].
    let (rev0, rev1) = (args.reverse0 && !op0.is_unary(), args.reverse1);
    let unnamed = args.engine.is_none().then_some((op0, op1));
    let site = Site::new(engine, Opcode::TensorScalar).unnamed(unnamed);
    let extra: Vec<&TileRef> = [s0.tile(), s1.as_ref().and_then(|s| s.tile())]
        .into_iter()
        .flatten()
        .collect();
    let integer = ops.iter().all(|o| o.is_integer_on(engine, in_dtype));
    ins.compute(site, &[&x], &extra, &[&ov], || {
        let f = x.free_size();
        if integer {
            // Native integer arithmetic on the data's slots and the operands' exact integers
            // (exact for 32-bit integers).
            let c0 = s0.ints(ins, p);
            let c1 = s1.map(|s| s.ints(ins, p));
            let apply = |o: AluOp, t: i64, c: i64, rev: bool| {
                let (a, b) = if rev { (c, t) } else { (t, c) };
                o.eval_int(a, b, in_dtype)
                    .expect("checked by is_integer_on")
            };
            let v = x.gather_slots(api, ins.loc);
            let out = ov.dtype();
            let r = v.iter().enumerate().map(|(i, &s)| {
                let part = i / f.max(1);
                let mut t = apply(op0, in_dtype.int(s), c0[part], rev0);
                if let (Some(o1), Some(c1)) = (op1, &c1) {
                    t = apply(o1, t, c1[part], rev1);
                }
                out.slot_of_int(t)
            });
            ov.scatter_slots(r.collect());
            return;
        }
        let c0 = s0.values(ins, p);
        let c1 = s1.map(|s| s.values(ins, p));
        let v = x.gather(api, ins.loc);
        let apply = |o: AluOp, t: f32, c: f32, rev: bool| {
            if rev {
                o.eval_typed(c, t, in_dtype)
            } else {
                o.eval_typed(t, c, in_dtype)
            }
        };
        let mut r = Vec::with_capacity(v.len());
        for (i, &t) in v.iter().enumerate() {
            let part = i / f.max(1);
            let mut t = apply(op0, t, c0[part], rev0);
            if let (Some(o1), Some(c1)) = (op1, &c1) {
                t = apply(o1, t, c1[part], rev1);
            }
            r.push(t);
        }
        ov.scatter(r);
    });
    out
}

/// Folds `xs` with `op` (add and multiply are computed exactly in f64 and rounded once, as
/// the accumulator registers do; other operators fold left in fp32 from the first element,
/// like NumPy's `ufunc.reduce`).
pub(super) fn fold(op: AluOp, xs: impl Iterator<Item = f32>, dtype: DType) -> f32 {
    match op {
        AluOp::Add => return xs.map(|v| v as f64).sum::<f64>() as f32,
        AluOp::Multiply => return xs.map(|v| v as f64).product::<f64>() as f32,
        _ => {}
    }
    let mut it = xs;
    let first = it.next().unwrap_or(op.reduce_identity().unwrap_or(0.0));
    it.fold(first, |acc, v| op.eval_typed(acc, v, dtype))
}

/// What a `tensor_reduce` makes of each row it folds: the instruction's reduce operator, or
/// one of the statistics the compiler computes with it for an `nl` reduction (`nl.mean`,
/// `nl.var`, `nl.all`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReduceKind {
    /// A fold with a reducible ALU operator.
    Alu(AluOp),
    /// The arithmetic mean (in f64, rounded once).
    Mean,
    /// The biased variance (divides by the element count; in f64, rounded once): two
    /// instructions, the mean into the output, then the squared deviations from it.
    Var,
    /// 1 if every element is non-zero (and not NaN), else 0.
    All,
}

impl ReduceKind {
    /// The value of one row (`dtype`: the data's, for the ALU operators).
    fn of(self, row: &[f32], dtype: DType) -> f32 {
        let n = row.len().max(1) as f64;
        let mean = || row.iter().map(|&v| v as f64).sum::<f64>() / n;
        match self {
            ReduceKind::Alu(op) => fold(op, row.iter().copied(), dtype),
            ReduceKind::Mean => mean() as f32,
            ReduceKind::Var => {
                let m = mean();
                (row.iter().map(|&v| (v as f64 - m).powi(2)).sum::<f64>() / n) as f32
            }
            ReduceKind::All => {
                if row.iter().all(|&v| v != 0.0 && !v.is_nan()) {
                    1.0
                } else {
                    0.0
                }
            }
        }
    }
}

/// True when `axes` are the last dimensions of a rank-`nd` shape, each once and in increasing
/// order (`[nd - 1]`, `[nd - 2, nd - 1]`, ...): the free-axis reductions NKI supports.
pub(crate) fn trailing_axes(axes: &[usize], nd: usize) -> bool {
    !axes.is_empty()
        && axes.iter().all(|&a| a < nd)
        && axes.windows(2).all(|w| w[1] == w[0] + 1)
        && axes.last() == Some(&(nd - 1))
}

/// The result shape of reducing `shape` over its axes `first..` (`keepdims` keeps them as 1; a
/// result with no free axis left is `[P, 1]`): its dimensions, the first `len` of an array
/// (no allocation: every `nl` reduction passes here on the estimate path), `len`, and the
/// number of elements folded into each result element.
pub(crate) fn reduced_shape(
    shape: &[usize],
    first: usize,
    keepdims: bool,
) -> ([usize; MAX_DIMS], usize, usize) {
    let mut dims = [1; MAX_DIMS];
    dims[..first].copy_from_slice(&shape[..first]);
    let len = if keepdims { shape.len() } else { first.max(2) };
    (dims, len, shape[first..].iter().product())
}

instruction! {
    /// Reduces `data` along its free axes `axes` with `op` into `dst` (NKI
    /// `nisa.tensor_reduce(dst, op, data, axis, negate=...)`).
    ///
    /// `axes` must be the last dimensions of `data` in order (`[1]`, `[1, 2]`, ...); the partition
    /// axis 0 cannot be reduced (use `tensor_partition_reduce` or a matmul). `dst` holds the
    /// result's partitions and elements per partition (e.g. a `[P, 1]` column); the result is
    /// rounded to its dtype. `opts.negate` multiplies the result by -1.
    pub fn tensor_reduce<'d, 'a>(
        dst: into TileRef<'d>, op: AluOp, data: into TileRef<'a>, axes: &[usize],
        opts: into Option<ReduceOpts>,
    ) as ins = "nisa.tensor_reduce" {
        let negate = opts.unwrap_or_default().negate;
        ins.trace(|| {
            use super::trace_args as ta;
            let axes = axes.iter().map(|a| a.to_string()).collect::<Vec<_>>();
            let axis = match axes.as_slice() {
                [one] => one.clone(),
                _ => format!("({})", axes.join(", ")),
            };
            Call::new("nisa.tensor_reduce")
                .arg("dst", ta::tile(&dst))
                .arg("op", ta::alu(op))
                .arg("data", ta::tile(&data))
                .arg("axis", Arg::Const(axis))
                .opt("negate", negate.then_some(Arg::Bool(true)))
        });
        tensor_reduce_to(&ins, Dst::Into(dst), ReduceKind::Alu(op), data, (axes, false, negate));
    }
}

/// The `tensor_reduce` builder; `how` is `(axes, keepdims, negate)`. `kind` is the
/// instruction's operator, or (an `nl` reduction) a statistic computed by one instruction, two
/// for [`ReduceKind::Var`].
pub(crate) fn tensor_reduce_to<'d>(
    ins: &Op,
    dst: Dst<'d>,
    kind: ReduceKind,
    x: TileRef,
    how: (&[usize], bool, bool),
) -> Output<'d> {
    let (axes, keepdims, negate) = how;
    ins.operand("data", &x);
    if let ReduceKind::Alu(op) = kind {
        if !op.is_reducible() {
            ins.fail(ErrorKind::InvalidArgument, format!(
                "'{op}' is not a reduce operator; 'tensor_reduce' takes add, subtract, multiply, maximum, minimum, logical or bitwise and/or/xor"
            ));
        }
        bitvec_needs_ints(ins, op, &[("data", x.dtype())]);
    }
    let nd = x.shape().len();
    if axes.contains(&0) {
        ins.fail(ErrorKind::PartitionReduction, format!(
                "Reduction on partition axes is not supported: axis 0 of data{:?} in 'tensor_reduce' is the partition axis; reduce free axes, or use tensor_partition_reduce / a matmul against ones",
                x.shape()
            ));
    }
    if !trailing_axes(axes, nd) {
        ins.fail(ErrorKind::InvalidArgument, format!(
                "invalid axis {axes:?} for data{:?} in 'tensor_reduce': the axes must be the last free dimensions in increasing order (e.g. [{}] or [1..={}])",
                x.shape(),
                nd - 1,
                nd - 1
            ));
    }
    let (dims, len, inner) = reduced_shape(x.shape(), axes[0], keepdims);
    let in_dtype = x.dtype();
    let out = ins.output(dst, MemKind::Sbuf, in_dtype, &dims[..len], true);
    let ov = out.view();
    let site = Site::new(Engine::Vector, Opcode::TensorReduce);
    // One pass: `kind` of each row of `x`, also reading `extra`.
    let pass = |kind: ReduceKind, extra: &[&TileRef]| {
        ins.compute(site, &[&x], extra, &[&ov], || {
            let v = x.gather(ins.api, ins.loc);
            let r = v
                .chunks(inner)
                .map(|row| {
                    let s = kind.of(row, in_dtype);
                    if negate {
                        -s
                    } else {
                        s
                    }
                })
                .collect();
            ov.scatter(r);
        })
    };
    if kind == ReduceKind::Var {
        // The mean into the output, then the squared deviations from it.
        pass(ReduceKind::Mean, &[]);
        pass(ReduceKind::Var, &[&ov]);
    } else {
        pass(kind, &[]);
    }
    out
}

instruction! {
    /// Copies (and casts) `src` into `dst` (NKI `nisa.tensor_copy(dst, src, engine=...)`) on
    /// VectorE (the default), ScalarE or GpSimdE (GpSimd cannot access PSUM). `dst` has `src`'s
    /// partitions and elements per partition; values go through fp32 unless the dtypes are equal
    /// (VectorE and GpSimdE then copy bits).
    pub fn tensor_copy<'d, 'a>(
        dst: into TileRef<'d>, src: into TileRef<'a>, opts: into Option<Opts>,
    ) as ins = "nisa.tensor_copy" {
        ins.trace(|| {
            use super::trace_args as ta;
            Call::new("nisa.tensor_copy")
                .arg("dst", ta::tile(&dst))
                .arg("src", ta::tile(&src))
                .opt("engine", opts.and_then(|o| o.engine).map(ta::engine))
        });
        let engine = Opts::engine_or(opts, Engine::Vector);
        tensor_copy_to(&ins, Dst::Into(dst), src, Some(engine));
    }
}

/// The `tensor_copy` builder: on `engine`, or (`None`: an `nl` copy, which names no engine)
/// where the compiler puts a copy of `x` ([`copy_engine`]: ScalarE for a PSUM source, else
/// VectorE).
pub(crate) fn tensor_copy_to<'d>(
    ins: &Op,
    dst: Dst<'d>,
    x: TileRef,
    engine: Option<Engine>,
) -> Output<'d> {
    let api = ins.api;
    let engine = engine.unwrap_or_else(|| copy_engine(x.mem()));
    ins.engine_in(engine, &[Engine::Vector, Engine::Scalar, Engine::GpSimd]);
    ins.operand_on(engine, "src", &x);
    let to_psum = engine != Engine::GpSimd;
    let out = ins.output(dst, MemKind::Sbuf, x.dtype(), x.shape(), to_psum);
    let ov = out.view();
    let site = Site::new(engine, Opcode::TensorCopy);
    let fresh = matches!(out, Output::New(_));
    ins.compute(site, &[&x], &[], &[&ov], || {
        if fresh {
            // A new tile (no view of the source): written from the source's rows, which are
            // read in place (a tile loaded from a kernel input keeps sharing its rows).
            let (from, to) = (x.dtype(), ov.dtype());
            if engine == Engine::Scalar {
                // ScalarE copies through fp32.
                return x.with_rows(api, ins.loc, |rows| {
                    ov.write_with(from == to, |o| {
                        rows.iter().for_each(|r| o.extend_from_slice(r))
                    })
                });
            }
            return x.with_slot_rows(api, ins.loc, |rows| {
                ov.write_slots(|o| {
                    rows.iter().for_each(|r| o.extend_from_slice(r));
                    from.cast_slots(to, o);
                })
            });
        }
        if engine == Engine::Scalar {
            // ScalarE copies through fp32.
            ov.scatter(x.gather(api, ins.loc))
        } else {
            // VectorE and GpSimdE copy equal dtypes bit-exactly; a cast goes through fp32.
            let mut v = x.gather_slots(api, ins.loc);
            x.dtype().cast_slots(ov.dtype(), &mut v);
            ov.scatter_slots(v)
        }
    });
    out
}

/// The keyword arguments of [`tensor_tensor_scan`].
#[derive(Clone, Copy, Debug, Default)]
pub struct ScanOpts {
    /// Computes `op0(r[i-1], data0[i])` instead of `op0(data0[i], r[i-1])`.
    pub reverse0: bool,
    /// Computes `op1(data1[i], t)` instead of `op1(t, data1[i])`.
    pub reverse1: bool,
    /// Output dtype of the allocating Beta-1 form (default: the wider of `data0`'s and
    /// `data1`'s dtypes); the 0.7 form writes `dst`'s dtype.
    pub dtype: Option<DType>,
}

/// The former name of [`ScanOpts`], kept so code written against it still compiles:
/// every `nisa` option struct is named `*Opts`.
#[deprecated(
    since = "0.1.0",
    note = "renamed `ScanOpts`: every nisa option struct is named `*Opts`"
)]
pub type ScanArgs = ScanOpts;

impl ScanOpts {
    /// NKI's defaults: neither operator reversed, the default dtype.
    pub fn new() -> Self {
        Self::default()
    }
    setters! {
        /// Reverses the operands of the first operator (`op0(r[i-1], data0[i])`).
        reverse0() => reverse0 = true;
        /// Reverses the operands of the second operator (`op1(data1[i], t)`).
        reverse1() => reverse1 = true;
        /// Sets the output dtype of the allocating Beta-1 form.
        dtype(dtype: DType) => dtype = Some(dtype);
    }
}

instruction! {
    /// Scan along the free dimension of each partition into `dst` (NKI
    /// `nisa.tensor_tensor_scan(dst, data0, data1, initial, op0, op1)`):
    /// `r[i] = op1(op0(data0[i], r[i-1]), data1[i])` with `r[-1] = initial` (a scalar or a
    /// `[P, 1]` tile). The running value stays fp32; each output is rounded to `dst`'s dtype.
    /// `data0` and `data1` need the same partitions and free size and cannot both be in PSUM;
    /// `args` (`None`: no reversal) holds the operand-order flags.
    pub fn tensor_tensor_scan<'d, 'a, 'b>(
        dst: into TileRef<'d>, data0: impl Into<TileRef<'a>>, data1: impl Into<TileRef<'b>>,
        initial: impl Into<Operand<'a>>, op0: AluOp, op1: AluOp, args: into Option<ScanOpts>,
    ) as ins = "nisa.tensor_tensor_scan" {
        let args = args.unwrap_or_default();
        dtype_is_dst(&ins, args.dtype, &dst);
        let data: (TileRef, TileRef) = (data0.into(), data1.into());
        let initial: Operand = initial.into();
        ins.trace(|| {
            use super::trace_args as ta;
            Call::new("nisa.tensor_tensor_scan")
                .arg("dst", ta::tile(&dst))
                .arg("data0", ta::tile(&data.0))
                .arg("data1", ta::tile(&data.1))
                .arg("initial", ta::operand(&initial))
                .arg("op0", ta::alu(op0))
                .arg("op1", ta::alu(op1))
                .opt("reverse0", args.reverse0.then_some(Arg::Bool(true)))
                .opt("reverse1", args.reverse1.then_some(Arg::Bool(true)))
        });
        tensor_tensor_scan_to(&ins, Dst::Into(dst), data, initial, (op0, op1), args);
    }
}

/// The `tensor_tensor_scan` builder.
pub(crate) fn tensor_tensor_scan_to<'d>(
    ins: &Op,
    dst: Dst<'d>,
    (a, b): (TileRef, TileRef),
    initial: Operand,
    (op0, op1): (AluOp, AluOp),
    args: ScanOpts,
) -> Output<'d> {
    const API: &str = "nisa.tensor_tensor_scan";
    ins.data_pair(("data0", &a), ("data1", &b));
    for o in [op0, op1] {
        if o.is_bitvec() {
            ins.fail(
                ErrorKind::InvalidArgument,
                format!(
                    "'tensor_tensor_scan' takes arithmetic operators, got bitvec operator '{o}'"
                ),
            );
        }
    }
    let p = a.partitions();
    let init = ins.per_partition("initial", initial, p);
    let dst = match dst {
        Dst::New(None) => Dst::New(args.dtype),
        d => d,
    };
    let out = ins.output(dst, MemKind::Sbuf, a.dtype(), a.shape(), true);
    let ov = out.view();
    let site = Site::new(Engine::Vector, Opcode::TensorTensorScan);
    let extra: Vec<&TileRef> = init.tile().into_iter().collect();
    ins.compute(site, &[&a, &b], &extra, &[&ov], || {
        let (x, y) = (a.gather(API, ins.loc), b.gather(API, ins.loc));
        let r0 = init.values(ins, p);
        let f = a.free_size();
        let mut out = Vec::with_capacity(x.len());
        for (part, (xs, ys)) in x.chunks(f).zip(y.chunks(f)).enumerate() {
            let mut r = r0[part];
            for (&d0, &d1) in xs.iter().zip(ys) {
                let t = if args.reverse0 {
                    op0.eval(r, d0)
                } else {
                    op0.eval(d0, r)
                };
                r = if args.reverse1 {
                    op1.eval(d1, t)
                } else {
                    op1.eval(t, d1)
                };
                out.push(r);
            }
        }
        ov.scatter(out);
    });
    out
}

/// Declares the VectorE-only instructions of one data operand, each `name(dst, data, opts)`:
/// `opts.engine` may only name VectorE; `to` builds the instruction into `dst`.
macro_rules! vector_only {
    ($($(#[$doc:meta])* $name:ident, $api:literal, $to:ident;)*) => {$(
        $(#[$doc])*
        #[track_caller]
        pub fn $name<'d, 'a>(
            dst: impl Into<TileRef<'d>>,
            data: impl Into<TileRef<'a>>,
            opts: impl Into<Option<Opts>>,
        ) {
            let ins = Op::begin($api);
            only_engine(&ins, opts.into(), Engine::Vector);
            let (dst, data): (TileRef, TileRef) = (dst.into(), data.into());
            ins.trace(|| {
                use super::trace_args as ta;
                Call::new($api).arg("dst", ta::tile(&dst)).arg("data", ta::tile(&data))
            });
            $to(&ins, Dst::Into(dst), data);
        }
    )*};
}

vector_only! {
    /// Element-wise `dst = 1 / data` on VectorE at full fp32 precision (NKI
    /// `nisa.reciprocal(dst, data)`; ScalarE's `activation(Reciprocal)` is faster but
    /// approximate on hardware). `opts.engine` may only be VectorE.
    reciprocal, "nisa.reciprocal", reciprocal_to;
    /// Per-partition mean/variance statistics into `dst` (NKI `nisa.bn_stats(dst, data)`): six
    /// values per partition, `(count, mean, variance * count)` of the even-indexed elements then
    /// of the odd-indexed elements of each partition (free dims flattened). At most 512 elements
    /// per partition (`bn_stats_fmax`); `dst` is `[P, 6]` elements per partition (e.g.
    /// `stats[:, 6 * i..6 * (i + 1)]`); feed one or more results to [`bn_aggr`].
    bn_stats, "nisa.bn_stats", bn_stats_to;
    /// Aggregates one or more [`bn_stats`] results per partition into `dst` = (mean, variance)
    /// (NKI `nisa.bn_aggr(dst, data)`). `data` holds `(count, mean, variance * count)` triples
    /// along its free dimension (a multiple of 3 elements per partition); groups with count 0
    /// contribute nothing. The variance is the population variance; `dst` holds two elements per
    /// partition.
    bn_aggr, "nisa.bn_aggr", bn_aggr_to;
}

/// An instruction with one engine takes `opts.engine` only when it names that engine.
pub(super) fn only_engine(ins: &Op, opts: Option<Opts>, engine: Engine) {
    if let Some(e) = opts.and_then(|o| o.engine) {
        ins.engine_in(e, &[engine]);
    }
}

/// The `reciprocal` builder.
pub(crate) fn reciprocal_to<'d>(ins: &Op, dst: Dst<'d>, x: TileRef) -> Output<'d> {
    let api = ins.api;
    ins.operand("data", &x);
    let out = ins.output(dst, MemKind::Sbuf, x.dtype(), x.shape(), true);
    let ov = out.view();
    let site = Site::new(Engine::Vector, Opcode::Reciprocal);
    ins.compute(site, &[&x], &[], &[&ov], || {
        ov.scatter(
            x.gather(api, ins.loc)
                .into_iter()
                .map(|v| 1.0 / v)
                .collect(),
        )
    });
    out
}

instruction! {
    /// Fills `dst` with the compile-time constant `value` rounded to its dtype (NKI
    /// `nisa.memset(dst, value, engine=...)`), on VectorE or GpSimdE. `dst` is an SBUF or
    /// PSUM tile or view (tuned matmul kernels zero their PSUM accumulators this way). With
    /// no engine named it runs where the compiler puts it: GpSimdE for a PSUM `dst`, VectorE
    /// for an SBUF one (see docs/timing-model.md, "Engines the compiler picks").
    pub fn memset<'d>(dst: into TileRef<'d>, value: f32, opts: into Option<Opts>)
    as ins = "nisa.memset" {
        ins.trace(|| {
            use super::trace_args as ta;
            Call::new("nisa.memset")
                .arg("dst", ta::tile(&dst))
                .arg("value", Arg::Float(value.into()))
                .opt("engine", opts.and_then(|o| o.engine).map(ta::engine))
        });
        let shape = dst.shape().to_vec();
        memset_to(&ins, Dst::Into(dst), &shape, value, opts.and_then(|o| o.engine));
    }
}

/// The `memset` builder: on `engine`, or (`None`: `nisa.memset` without `engine=`, `nl.zeros`,
/// `nl.full`) where the compiler puts a fill of the destination's memory ([`fill_engine`]).
pub(crate) fn memset_to<'d>(
    ins: &Op,
    dst: Dst<'d>,
    shape: &[usize],
    value: f32,
    engine: Option<Engine>,
) -> Output<'d> {
    let engine = engine.unwrap_or_else(|| {
        fill_engine(match &dst {
            Dst::New(_) => MemKind::Sbuf,
            Dst::Into(t) => t.mem(),
        })
    });
    ins.engine_in(engine, &[Engine::Vector, Engine::GpSimd]);
    let dtype = match &dst {
        Dst::New(d) => d.unwrap_or(DType::F32),
        Dst::Into(t) => t.dtype(),
    };
    // NKI 0.7 `memset`: "For x4 packed types ... only value=0 is supported."
    if dtype.mx_element().is_some() && value != 0.0 {
        ins.fail(
            ErrorKind::InvalidArgument,
            format!(
                "'{}' of a {dtype} dst supports only value 0 (x4 packed types), got {value}",
                short(ins.api)
            ),
        );
    }
    let out = ins.output(dst, MemKind::Sbuf, dtype, shape, true);
    let ov = out.view();
    let site = Site::new(engine, Opcode::Memset);
    ins.compute(site, &[], &[], &[&ov], || {
        ov.scatter(vec![value; ov.ap.shape.numel()])
    });
    out
}

/// `nl.tile_size.bn_stats_fmax`.
const BN_STATS_FMAX: usize = 512;

/// (count, mean, sum of squared deviations) of `xs`, in f64.
fn moments(xs: impl Iterator<Item = f32> + Clone) -> (f64, f64, f64) {
    let n = xs.clone().count() as f64;
    if n == 0.0 {
        return (0.0, 0.0, 0.0);
    }
    let mean = xs.clone().map(|v| v as f64).sum::<f64>() / n;
    let m2 = xs.map(|v| (v as f64 - mean).powi(2)).sum::<f64>();
    (n, mean, m2)
}

/// The frame of the `bn_stats` and `bn_aggr` builders: one VectorE instruction (`opcode`) that
/// turns each partition of `x` into `k` values of `x`'s dtype in `dst` (`[P, k]`);
/// `row_values(row, r)` appends a partition's values to `r`.
fn per_partition_to<'d>(
    ins: &Op,
    dst: Dst<'d>,
    x: TileRef,
    (opcode, k): (Opcode, usize),
    row_values: impl Fn(&[f32], &mut Vec<f32>),
) -> Output<'d> {
    let (p, f) = (x.partitions(), x.free_size());
    let out = ins.output(dst, MemKind::Sbuf, x.dtype(), &[p, k], true);
    let ov = out.view();
    let site = Site::new(Engine::Vector, opcode);
    ins.compute(site, &[&x], &[], &[&ov], || {
        let v = x.gather(ins.api, ins.loc);
        let mut r = Vec::with_capacity(p * k);
        for row in v.chunks(f) {
            row_values(row, &mut r);
        }
        ov.scatter(r);
    });
    out
}

/// The `bn_stats` builder.
pub(crate) fn bn_stats_to<'d>(ins: &Op, dst: Dst<'d>, x: TileRef) -> Output<'d> {
    ins.operand("data", &x);
    let f = x.free_size();
    if f > BN_STATS_FMAX {
        ins.fail(ErrorKind::InvalidArgument, format!(
                "number of elements per partition {f} of data{:?} in 'bn_stats' exceeds architecture limitation of {BN_STATS_FMAX} (nl.tile_size.bn_stats_fmax); call bn_stats on {BN_STATS_FMAX}-element pieces and aggregate them with one bn_aggr",
                x.shape()
            ));
    }
    per_partition_to(ins, dst, x, (Opcode::BnStats, 6), |row, r| {
        for parity in 0..2 {
            let (n, mean, m2) = moments(row.iter().copied().skip(parity).step_by(2));
            r.extend([n as f32, mean as f32, m2 as f32]);
        }
    })
}

/// The `bn_aggr` builder.
pub(crate) fn bn_aggr_to<'d>(ins: &Op, dst: Dst<'d>, x: TileRef) -> Output<'d> {
    ins.operand("data", &x);
    let f = x.free_size();
    if !f.is_multiple_of(3) {
        ins.fail(ErrorKind::InvalidArgument, format!(
                "data{:?} of 'bn_aggr' must hold (count, mean, variance*count) triples: {f} elements per partition is not a multiple of 3",
                x.shape()
            ));
    }
    per_partition_to(ins, dst, x, (Opcode::BnAggr, 2), |row, r| {
        let groups: Vec<(f64, f64, f64)> = row
            .chunks(3)
            .map(|g| (g[0] as f64, g[1] as f64, g[2] as f64))
            .filter(|g| g.0 > 0.0)
            .collect();
        let n: f64 = groups.iter().map(|g| g.0).sum();
        let mean = groups.iter().map(|g| g.0 * g.1).sum::<f64>() / n;
        let m2: f64 = groups
            .iter()
            .map(|g| g.2 + g.0 * (g.1 - mean).powi(2))
            .sum();
        r.extend([mean as f32, (m2 / n) as f32]);
    })
}
