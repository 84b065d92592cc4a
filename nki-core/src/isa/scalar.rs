//! ScalarE instructions: `activation` and `activation_reduce` (`f(data * scale + bias)`, with
//! an optional per-partition add-reduction of the result).

use super::accum::{scalar_accum, AccumUse, ReduceCmd};
use super::base::{per_partition_shape, short, Dst, Output, Site};
use super::op::Op;
use super::vector::dtype_is_dst;
use super::{ActFn, AluOp, Operand};
use crate::builder::{instruction, setters};
use crate::dtype::DType;
use crate::emit::trace::Call;
use crate::error::ErrorKind;
use crate::record::{Engine, MemKind, Opcode};
use crate::target::Target;
use crate::tile::TileRef;

/// The keyword arguments of [`activation`] / [`activation_reduce`]: `bias` (a `[P, 1]`
/// fp32/fp16/bf16 tile, or a scalar on NeuronCore-v3+), `scale` (an fp32 scalar or a `[P, 1]`
/// fp32 tile; default 1.0), the output `dtype` (default: `data`'s), and the accumulator
/// keywords `reduce_op`/`reduce_cmd` ([`ActivationOpts::reduce`]) and `reduce_res`.
///
/// ```
/// use nki_core::nisa::{ActFn, ActivationOpts};
/// use nki_core::prelude::*;
///
/// let x = Hbm::from_vec(&[2, 2], vec![0.0f32, 2.0, 4.0, 6.0]).unwrap();
/// let b = Hbm::from_vec(&[2, 1], vec![1.0f32, -1.0]).unwrap();
/// let mut y = Hbm::<f32>::zeros([2, 2]);
/// let out = y.as_output();
/// Launch::new(1)
///     .run(|| {
///         let (t, bias) = (nl::load(&x), nl::load(&b));
///         let d = nl::ndarray(&[2, 2], DType::F32, MemKind::Sbuf);
///         // d = copy(0.5 * x + bias), the bias one value per partition
///         let args = ActivationOpts::new().bias(&bias).scale(0.5);
///         nisa::activation(&d, ActFn::Copy, &t, args);
///         nl::store(&out, &d);
///     })
///     .unwrap();
/// assert_eq!(y.to_vec().unwrap(), [1.0, 2.0, 1.0, 2.0]);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct ActivationOpts<'a> {
    /// Bias added after scaling: a `[P, 1]` tile, or (NeuronCore-v3 and newer) a scalar.
    pub bias: Option<Operand<'a>>,
    /// Scalar or per-partition multiplier applied first.
    pub scale: Operand<'a>,
    /// Output dtype.
    pub dtype: Option<DType>,
    /// The reduction of the activated values into ScalarE's accumulator registers
    /// (`reduce_op`, only `add`), and the register command (`reduce_cmd`, `idle` by default).
    pub reduce: Option<(AluOp, ReduceCmd)>,
    /// The `[P, 1]` tile the registers are read out into after the instruction.
    pub reduce_res: Option<TileRef<'a>>,
    /// The engine (NKI 0.8 `engine=`): ScalarE (`None`, the default) or GpSimdE
    /// (NeuronCore-v3 and newer, SBUF operands only).
    pub engine: Option<Engine>,
}

/// The former name of [`ActivationOpts`], kept so code written against it still compiles:
/// every `nisa` option struct is named `*Opts`.
#[deprecated(
    since = "0.1.0",
    note = "renamed `ActivationOpts`: every nisa option struct is named `*Opts`"
)]
pub type ActivationArgs<'a> = ActivationOpts<'a>;

impl Default for ActivationOpts<'_> {
    fn default() -> Self {
        ActivationOpts {
            bias: None,
            scale: Operand::Scalar {
                value: 1.0,
                float: true,
            },
            dtype: None,
            reduce: None,
            reduce_res: None,
            engine: None,
        }
    }
}

impl<'a> ActivationOpts<'a> {
    /// No bias, scale 1.0, `data`'s dtype.
    pub fn new() -> Self {
        Self::default()
    }
    setters! {
        /// Sets the bias: a `[P, 1]` tile, or a scalar (NeuronCore-v3 and newer).
        bias(bias: impl Into<Operand<'a>>) => bias = Some(bias.into());
        /// Reduces the activated values of each partition with `op` (`AluOp::Add`) into ScalarE's
        /// accumulator registers as `cmd` says (NKI `reduce_op=`, `reduce_cmd=`).
        reduce(op: AluOp, cmd: ReduceCmd) => reduce = Some((op, cmd));
        /// Reads the accumulator registers out into the `[P, 1]` tile `t` after the instruction
        /// (NKI `reduce_res=`; one extra instruction's cost).
        reduce_res(t: impl Into<TileRef<'a>>) => reduce_res = Some(t.into());
        /// Sets the scale: an `f32` or a `[P, 1]` fp32 tile.
        scale(scale: impl Into<Operand<'a>>) => scale = scale.into();
        /// Sets the output dtype.
        dtype(dtype: DType) => dtype = Some(dtype);
        /// Runs the instruction on `engine` (NKI 0.8 `engine=`: ScalarE or, on NeuronCore-v3
        /// and newer, GpSimdE).
        engine(engine: Engine) => engine = Some(engine);
    }
}

instruction! {
    /// `dst = op(data * scale + bias)` on ScalarE (NKI `nisa.activation(dst, op, data, bias,
    /// scale)`; `args`: `None` for no bias and scale 1.0). All math is fp32 (`data * scale` and
    /// `+ bias` each rounded to fp32, then the function), rounded once to `dst`'s dtype; `dst`
    /// (SBUF or PSUM) has `data`'s partitions and elements per partition.
    ///
    /// Accumulator (NKI 0.7 `reduce_op`, `reduce_res`, `reduce_cmd`, set with
    /// [`ActivationOpts::reduce`] / [`ActivationOpts::reduce_res`]): each partition's fp32
    /// results are added up and, as `reduce_cmd` says, reset into (`reset_reduce`) or added onto
    /// (`reduce`) ScalarE's 128 registers, which persist across `activation` calls; `reset` only
    /// zeroes them, `idle` (the default) leaves them. `reduce_res` receives the registers after
    /// the instruction (`+ MIN_II`). The docs' pseudocode (`result = reduce_op(regs, sum)`, then
    /// `regs += result`) would count the registers twice; nki-rs follows the prose ("stored into
    /// or reduced on top of"): `regs = sum` or `regs += sum`.
    ///
    /// Errors: `op` not in the activation table; `bias` not `[P, 1]` or not fp32/fp16/bf16
    /// (`err_activation_bias_invalid_type`); `scale` not an fp32 scalar or `[P, 1]` fp32 tile
    /// (`err_activation_scale_invalid_type`, `err_activation_scale_scalar_or_vector`); a bias on
    /// `reciprocal` on trn1; `args.dtype` other than `dst`'s.
    pub fn activation<'d, 'a>(
        dst: into TileRef<'d>, op: ActFn, data: impl Into<TileRef<'a>>,
        args: into Option<ActivationOpts<'a>>,
    ) as ins = "nisa.activation" {
        let args = args.unwrap_or_default();
        dtype_is_dst(&ins, args.dtype, &dst);
        let data: TileRef = data.into();
        // The accumulator keywords (reduce_cmd) are not written yet: such a call stays
        // untraced, and the emitter refuses it naming it.
        if args.reduce.is_none() && args.reduce_res.is_none() {
            ins.trace(|| activation_call("nisa.activation", &dst, op, &data, &args, None));
        }
        activate(&ins, Dst::Into(dst), op, data, args, None);
    }
}

instruction! {
    /// [`activation`] plus the add-reduction of the activated values along the free dimension
    /// into `reduce_res` (NKI `nisa.activation_reduce(dst, op, data, reduce_op=nl.add,
    /// reduce_res, bias, scale)`): `reduce_res` is a `[P, 1]` view that receives the sum of each
    /// partition's fp32 results (before rounding to `dst`'s dtype), rounded to its dtype.
    /// `reduce_op` must be `add`. One instruction.
    pub fn activation_reduce<'d, 'r, 'a>(
        dst: impl Into<TileRef<'d>>, op: ActFn, data: impl Into<TileRef<'a>>, reduce_op: AluOp,
        reduce_res: impl Into<TileRef<'r>>, args: into Option<ActivationOpts<'a>>,
    ) as ins = "nisa.activation_reduce" {
        scalar_accumulator_adds(&ins, reduce_op);
        let args = args.unwrap_or_default();
        let dst: TileRef = dst.into();
        dtype_is_dst(&ins, args.dtype, &dst);
        let (data, res): (TileRef, TileRef) = (data.into(), reduce_res.into());
        if args.reduce.is_none() && args.reduce_res.is_none() {
            let reduce = Some((reduce_op, &res));
            ins.trace(|| activation_call(ins.api, &dst, op, &data, &args, reduce));
        }
        activate(&ins, Dst::Into(dst), op, data, args, Some(Dst::Into(res)));
    }
}

/// The emit trace of an `activation` (`reduce`: `activation_reduce`'s operator and result).
fn activation_call(
    api: &'static str,
    dst: &TileRef,
    op: ActFn,
    data: &TileRef,
    args: &ActivationOpts,
    reduce: Option<(AluOp, &TileRef)>,
) -> Call {
    use super::trace_args as ta;
    let unit_scale = matches!(args.scale, Operand::Scalar { value, .. } if value == 1.0);
    let mut c = Call::new(api)
        .arg("dst", ta::tile(dst))
        .arg("op", ta::act(op))
        .arg("data", ta::tile(data));
    if let Some((rop, res)) = reduce {
        c = c
            .arg("reduce_op", ta::alu(rop))
            .arg("reduce_res", ta::tile(res));
    }
    c.opt("bias", args.bias.as_ref().map(ta::operand))
        .opt("scale", (!unit_scale).then(|| ta::operand(&args.scale)))
        .opt("engine", args.engine.map(ta::engine))
}

/// `activation_reduce` adds into ScalarE's accumulator: `reduce_op` must be add.
fn scalar_accumulator_adds(ins: &Op, reduce_op: AluOp) {
    if reduce_op != AluOp::Add {
        ins.fail(
            ErrorKind::InvalidArgument,
            format!("reduce_op '{reduce_op}' of 'activation_reduce' is not supported; the Scalar Engine accumulator adds (nl.add)"),
        );
    }
}

/// The engine of an activation (NKI 0.8 `engine=`): ScalarE by default, or GpSimdE from
/// `gpsimd_from` on (NeuronCore-v3 for `activation`, v4 for `activate2`), whose operands
/// (`operands`, and the output's memory checked by the caller's output) must be in SBUF, as
/// GpSimdE cannot access PSUM. Any other engine is an error.
pub(crate) fn activation_engine(
    ins: &Op,
    engine: Option<Engine>,
    gpsimd_from: Target,
    operands: &[(&str, &TileRef)],
) -> Engine {
    match engine.unwrap_or(Engine::Scalar) {
        Engine::Scalar => Engine::Scalar,
        Engine::GpSimd => {
            let too_old = match gpsimd_from {
                Target::Trn3 => ins.target() != Target::Trn3,
                _ => ins.target() == Target::Trn1,
            };
            if too_old {
                ins.fail(
                    ErrorKind::InvalidArgument,
                    format!(
                        "engine=gpsimd: '{}' runs on GpSimdE from {gpsimd_from:?} on, not on {:?}",
                        short(ins.api),
                        ins.target()
                    ),
                );
            }
            for (what, t) in operands {
                ins.gpsimd_sbuf(what, t);
            }
            Engine::GpSimd
        }
        e => ins.fail(
            ErrorKind::InvalidArgument,
            format!(
                "engine={}: '{}' runs on ScalarE or GpSimdE",
                e.name(),
                short(ins.api)
            ),
        ),
    }
}

/// The `activation` builder (`reduce`: also the per-partition sum into a new `[P, 1]` fp32
/// tile or a `[P, 1]` view).
pub(crate) fn activate<'d, 'r, 'a>(
    ins: &Op,
    dst: Dst<'d>,
    op: ActFn,
    x: TileRef<'a>,
    args: ActivationOpts<'a>,
    reduce: Option<Dst<'r>>,
) -> (Output<'d>, Option<Output<'r>>) {
    let api = ins.api;
    ins.operand("data", &x);
    if !op.in_activation_table() {
        ins.fail(ErrorKind::InvalidArgument, format!(
                "'{op}' is not in the Scalar Engine activation table of '{}'; use the nl function or a Vector Engine instruction",
                short(ins.api)
            ));
    }
    if op == ActFn::Prelu {
        ins.fail(
            ErrorKind::InvalidArgument,
            format!(
                "'prelu' takes its slope from relu_param, which '{}' does not have; use nisa::activate2 with Activate2Opts::relu_param (NeuronCore-v4)",
                short(ins.api)
            ),
        );
    }
    let p = x.partitions();
    let bias = match args.bias {
        None => None,
        Some(Operand::Scalar { value, .. }) => {
            if ins.target() == Target::Trn1 {
                ins.fail(
                    ErrorKind::InvalidArgument,
                    format!(
                        "bias of '{}' must be a [{p}, 1] vector on NeuronCore-v2 (trn1); a scalar bias needs NeuronCore-v3 or newer",
                        short(ins.api)
                    ),
                );
            }
            Some(super::op::PerPartition::Scalar(value))
        }
        Some(Operand::Tile(b)) => {
            ins.check(per_partition_shape(api, "bias", &b, p));
            ins.operand("bias", &b);
            if !matches!(b.dtype(), DType::F32 | DType::F16 | DType::BF16) {
                ins.fail(ErrorKind::DType, format!(
                        "bias {} of '{}' must be float32, float16 or bfloat16 (err_activation_bias_invalid_type)",
                        b.describe(),
                        short(ins.api)
                    ));
            }
            Some(super::op::PerPartition::Vector(b))
        }
    };
    if bias.is_some() && op == ActFn::Reciprocal && ins.target() == Target::Trn1 {
        ins.fail(
            ErrorKind::InvalidArgument,
            format!(
                "activation 'reciprocal' of '{}' cannot take a bias on NeuronCore-v2 (trn1)",
                short(ins.api)
            ),
        );
    }
    // The accumulator keywords (`reduce_op`, `reduce_cmd`, `reduce_res`).
    // The ScalarE accumulator of `activation` adds (`nl.add` is its only reduce_op).
    let engine = activation_engine(ins, args.engine, Target::Trn2, &[("data", &x)]);
    let acc = scalar_accum(
        ins,
        engine,
        args.reduce,
        args.reduce_res,
        &[AluOp::Add],
        (x.start_partition(), p),
    );
    let scale_tile = match args.scale {
        Operand::Scalar { .. } => None,
        Operand::Tile(s) => {
            if s.partitions() != p || s.free_size() != 1 {
                ins.fail(ErrorKind::ShapeMismatch, format!(
                        "scale of '{}' must be a scalar or a vector of shape [{p}, 1], got {} (err_activation_scale_scalar_or_vector)",
                        short(ins.api),
                        s.describe()
                    ));
            }
            ins.operand("scale", &s);
            if s.dtype() != DType::F32 {
                ins.fail(
                    ErrorKind::DType,
                    format!(
                        "scale {} of '{}' must be float32 (err_activation_scale_invalid_type)",
                        s.describe(),
                        short(ins.api)
                    ),
                );
            }
            Some(s)
        }
    };
    let out = ins.output(dst, MemKind::Sbuf, x.dtype(), x.shape(), true);
    let red = reduce.map(|r| ins.output(r, MemKind::Sbuf, DType::F32, &[p, 1], true));
    let ov = out.view();
    let rv = red.as_ref().map(|t| t.view());
    // The per-partition operands and the outputs, on the stack (no allocation per
    // instruction on the estimate path).
    let mut extra_buf = [&ov; 2];
    let extra = packed(
        &mut extra_buf,
        [bias.as_ref().and_then(|b| b.tile()), scale_tile.as_ref()],
    );
    if engine == Engine::GpSimd {
        ins.gpsimd_sbuf("dst", &ov);
        for t in extra {
            ins.gpsimd_sbuf("bias/scale", t);
        }
    }
    let acc_res = acc.as_ref().and_then(|a| a.res.as_ref());
    let mut outs_buf = [&ov; 3];
    let outs = packed(&mut outs_buf, [Some(&ov), rv.as_ref(), acc_res]);
    let reads_out = rv.is_some() || acc.as_ref().is_some_and(|a| a.costs());
    let site = Site::new(engine, Opcode::Activation).accumulating(reads_out);
    // activation_reduce is activation with reduce_cmd=reset_reduce: it leaves its sums in the
    // registers too.
    let reduce_regs = rv.is_some().then_some(AccumUse {
        engine,
        cmd: ReduceCmd::ResetReduce,
        op: AluOp::Add,
        rows: x.start_partition()..x.start_partition() + p,
        reads_out: false,
    });
    ins.compute(site, &[&x], extra, outs, || {
        let v = x.gather(api, ins.loc);
        let scale = match (&args.scale, &scale_tile) {
            (_, Some(s)) => s.gather(api, ins.loc),
            (Operand::Scalar { value, .. }, None) => vec![*value as f32; p],
            (Operand::Tile(_), None) => unreachable!("scale tile resolved above"),
        };
        let bias = match &bias {
            Some(b) => b.values(ins, p),
            None => vec![0.0; p],
        };
        let f = x.free_size().max(1);
        let mut r = Vec::with_capacity(v.len());
        let mut sums = Vec::with_capacity(p);
        for (part, row) in v.chunks(f).enumerate() {
            let mut acc = 0.0f64;
            for &d in row {
                let y = op.eval(d * scale[part] + bias[part]);
                acc += y as f64;
                r.push(y);
            }
            sums.push(acc as f32);
        }
        ov.scatter(r);
        if let Some(u) = &reduce_regs {
            u.begin(ins, None);
            u.finish(ins, Some(&sums));
        }
        if let Some(a) = &acc {
            a.run(ins, &sums);
        }
        if let Some(rv) = &rv {
            rv.scatter(sums);
        }
    });
    if !ins.executes() {
        if let Some(u) = &reduce_regs {
            u.without_values(ins);
        }
    }
    if let Some(a) = &acc {
        a.trace(ins);
    }
    (out, red)
}

/// The present entries of `items`, packed at the front of `buf` (as long as `items`): the
/// slice of them.
fn packed<'b, 't, const N: usize>(
    buf: &'b mut [&'t TileRef<'t>; N],
    items: [Option<&'t TileRef<'t>>; N],
) -> &'b [&'t TileRef<'t>] {
    let mut n = 0;
    for t in items.into_iter().flatten() {
        buf[n] = t;
        n += 1;
    }
    &buf[..n]
}
