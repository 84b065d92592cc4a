//! Unary math and activations (`nl.exp`, `nl.gelu`, `nl.abs`, ...) and the composite ops built
//! on them (`nl.softmax`, `nl.rms_norm`).
//!
//! Lowering follows NKI's engine table, onto the instruction builders: functions of ScalarE's
//! activation table are one `activation`; `abs` and `negative` are VectorE `tensor_scalar`s
//! (`abs`, `multiply` by -1); `reciprocal` is VectorE's precise `reciprocal`. `floor`, `ceil`,
//! `trunc` (no ALU operator or activation computes them) and `sin`/`cos`/`tan` (a VectorE
//! range reduction followed by a ScalarE activation, whose fp32 composition the docs do not
//! give) are recorded as those instructions around the exact function ([`steps`]). All math
//! is fp32 (see [`crate::math`]), and the result is rounded once to the output dtype.

use super::elementwise::alu_binary;
use super::reduce::{reduce_impl, resolve_axes, ReduceKind, SoftmaxAxes};
use crate::builder::instruction;
use crate::dtype::DType;
use crate::error::ErrorKind;
use crate::isa::base::Dst;
use crate::isa::op::Op;
use crate::isa::scalar::activate;
use crate::isa::vector::{reciprocal_to, tensor_scalar_to};
use crate::isa::{ActivationOpts, Operand, TensorScalarOpts};
use crate::math::{ActFn, AluOp};
use crate::record::{Engine, MemKind, Opcode, Regions};
use crate::tile::{Tile, TileRef};

/// The instructions recorded for a unary function no single builder computes: `floor`,
/// `ceil`, `trunc` (one VectorE ALU pass) and the trigonometric functions (a VectorE range
/// reduction, then the ScalarE activation).
fn steps(f: ActFn) -> &'static [(Engine, Opcode)] {
    const ALU: &[(Engine, Opcode)] = &[(Engine::Vector, Opcode::TensorScalar)];
    const TRIG: &[(Engine, Opcode)] = &[
        (Engine::Vector, Opcode::TensorScalar),
        (Engine::Scalar, Opcode::Activation),
    ];
    match f {
        ActFn::Sin | ActFn::Cos | ActFn::Tan => TRIG,
        _ => ALU,
    }
}

/// `nl`'s unary function `f` of `x` into a new SBUF tile of `dtype`, lowered onto the
/// instruction builders (see the module docs); op `ins` names the records and errors.
pub(crate) fn lower(ins: &Op, f: ActFn, x: TileRef, dtype: DType) -> Tile {
    let new = Dst::New(Some(dtype));
    // The VectorE ALU forms run where NKI's table puts them: on VectorE.
    let on_vector = |op0: AluOp, operand0: f32| {
        let args = TensorScalarOpts::new().engine(Engine::Vector);
        tensor_scalar_to(ins, new, x, op0, operand0.into(), args).tile()
    };
    match f {
        ActFn::Abs => on_vector(AluOp::Abs, 0.0),
        ActFn::Negative => on_vector(AluOp::Multiply, -1.0),
        ActFn::Reciprocal => reciprocal_to(ins, new, x).tile(),
        ActFn::Floor | ActFn::Ceil | ActFn::Trunc | ActFn::Sin | ActFn::Cos | ActFn::Tan => {
            map_impl(ins, steps(f), move |v| f.eval(v), x, dtype)
        }
        _ => activate(ins, new, f, x, ActivationOpts::new(), None)
            .0
            .tile(),
    }
}

/// Default output dtype of `f` on input dtype `d`: the input's dtype for floats; for integer
/// inputs the sign/rounding/abs family keeps the integer type, everything else gives fp32.
pub(crate) fn default_dtype(f: ActFn, d: DType) -> DType {
    if d.is_float() {
        return d;
    }
    match f {
        ActFn::Copy
        | ActFn::Abs
        | ActFn::Negative
        | ActFn::Sign
        | ActFn::Floor
        | ActFn::Ceil
        | ActFn::Trunc
        | ActFn::Relu
        | ActFn::Square => {
            if d == DType::Bool {
                DType::U8
            } else {
                d
            }
        }
        _ => DType::F32,
    }
}

/// The function `f` of `x` recorded as the instruction sequence `steps` (see [`steps`]):
/// checks `x`, allocates the output, computes `f(x)` (fp32) rounded to `dtype`; the first
/// step reads `x`, later ones work in place on the output.
fn map_impl(
    ins: &Op,
    steps: &[(Engine, Opcode)],
    f: impl Fn(f32) -> f32,
    x: TileRef,
    dtype: DType,
) -> Tile {
    let api = ins.api;
    ins.operand("x", &x);
    let out = ins.alloc(MemKind::Sbuf, dtype, x.shape());
    let ov = out.view();
    ins.issue(
        &[&ov],
        || {
            let mut res: Vec<f32> = ins.read(&x).into_iter().map(&f).collect();
            dtype.round_slice(&mut res);
            ov.scatter(res);
        },
        || {
            // Records of all but the last step are pushed here; the last is returned.
            let n = steps.len();
            let mut last = None;
            for (i, &(engine, opcode)) in steps.iter().enumerate() {
                let first = i == 0;
                let read = if first { x.region() } else { ov.region() };
                let r = ins
                    .record_as(api, engine, opcode)
                    .size(x.partitions() as u32, x.free_size() as u32)
                    .inputs(1)
                    .dtypes(if first { x.dtype() } else { dtype }, dtype)
                    .psum(first && x.mem() == MemKind::Psum)
                    .contiguous(!first || x.ap.inner_stride() == 1)
                    .reads(Regions::from([read]))
                    .writes(Regions::from([ov.region()]))
                    .done();
                if i + 1 == n {
                    last = Some(r);
                } else {
                    crate::context::try_with_ctx(|c| c.push_record(r));
                }
            }
            last.expect("at least one step")
        },
    );
    out
}

/// Applies activation / math function `f` element-wise to `x` (the general form of
/// `nl.exp`, `nl.gelu`, ...). `dtype` overrides the output dtype (default: `x`'s float dtype;
/// fp32 for integer inputs, except `abs`/`negative`/`sign`/rounding/`relu`/`square`/`copy`
/// which keep integer types).
#[track_caller]
pub fn unary<'a>(f: ActFn, x: impl Into<TileRef<'a>>, dtype: Option<DType>) -> Tile {
    let ins = Op::begin(api_name(f));
    let x: TileRef = x.into();
    let dt = dtype.unwrap_or_else(|| default_dtype(f, x.dtype()));
    lower(&ins, f, x, dt)
}

fn api_name(f: ActFn) -> &'static str {
    match f {
        ActFn::Copy => "nl.copy",
        ActFn::Exp => "nl.exp",
        ActFn::Log => "nl.log",
        ActFn::Sqrt => "nl.sqrt",
        ActFn::Rsqrt => "nl.rsqrt",
        ActFn::Reciprocal => "nl.reciprocal",
        ActFn::Tanh => "nl.tanh",
        ActFn::Sigmoid => "nl.sigmoid",
        ActFn::Relu => "nl.relu",
        ActFn::Gelu => "nl.gelu",
        ActFn::GeluDx => "nl.gelu_dx",
        ActFn::GeluApprxTanh => "nl.gelu_apprx_tanh",
        ActFn::GeluApprxSigmoid => "nl.gelu_apprx_sigmoid",
        ActFn::GeluApprxSigmoidDx => "nl.gelu_apprx_sigmoid_dx",
        ActFn::Silu => "nl.silu",
        ActFn::SiluDx => "nl.silu_dx",
        ActFn::Erf => "nl.erf",
        ActFn::ErfDx => "nl.erf_dx",
        ActFn::Softplus => "nl.softplus",
        ActFn::Mish => "nl.mish",
        ActFn::Square => "nl.square",
        ActFn::Abs => "nl.abs",
        ActFn::Negative => "nl.negative",
        ActFn::Sign => "nl.sign",
        ActFn::Sin => "nl.sin",
        ActFn::Cos => "nl.cos",
        ActFn::Tan => "nl.tan",
        ActFn::Arctan => "nl.arctan",
        ActFn::Floor => "nl.floor",
        ActFn::Ceil => "nl.ceil",
        ActFn::Trunc => "nl.trunc",
        ActFn::Prelu => "nl.prelu",
    }
}

macro_rules! unary_fns {
    ($($(#[$doc:meta])* $name:ident => $f:expr;)*) => {$(
        $(#[$doc])*
        #[track_caller]
        pub fn $name<'a>(x: impl Into<TileRef<'a>>) -> Tile {
            let f: ActFn = $f;
            let ins = Op::begin(api_name(f));
            let x: TileRef = x.into();
            lower(&ins, f, x, default_dtype(f, x.dtype()))
        }
    )*};
}

unary_fns! {
    /// e^x element-wise (NKI `nl.exp`; ScalarE activation).
    exp => ActFn::Exp;
    /// Natural logarithm (NKI `nl.log`; ScalarE).
    log => ActFn::Log;
    /// Square root (NKI `nl.sqrt`; ScalarE).
    sqrt => ActFn::Sqrt;
    /// 1 / sqrt(x) (NKI `nl.rsqrt`; ScalarE).
    rsqrt => ActFn::Rsqrt;
    /// 1 / x (NKI `nl.reciprocal`; VectorE's precise reciprocal).
    reciprocal => ActFn::Reciprocal;
    /// Hyperbolic tangent (NKI `nl.tanh`; ScalarE).
    tanh => ActFn::Tanh;
    /// Logistic sigmoid (NKI `nl.sigmoid`; ScalarE).
    sigmoid => ActFn::Sigmoid;
    /// max(x, 0) (NKI `nl.relu`; ScalarE).
    relu => ActFn::Relu;
    /// Exact (erf) GELU (NKI `nl.gelu`; ScalarE).
    gelu => ActFn::Gelu;
    /// Derivative of the exact GELU (NKI `nl.gelu_dx`; ScalarE).
    gelu_dx => ActFn::GeluDx;
    /// tanh-approximated GELU (NKI `nl.gelu_apprx_tanh`; ScalarE).
    gelu_apprx_tanh => ActFn::GeluApprxTanh;
    /// sigmoid-approximated GELU, x * sigmoid(1.702 x) (NKI `nl.gelu_apprx_sigmoid`; ScalarE).
    gelu_apprx_sigmoid => ActFn::GeluApprxSigmoid;
    /// Derivative of the sigmoid-approximated GELU (NKI `gelu_apprx_sigmoid_dx`; ScalarE).
    gelu_apprx_sigmoid_dx => ActFn::GeluApprxSigmoidDx;
    /// x * sigmoid(x) (NKI `nl.silu`; ScalarE).
    silu => ActFn::Silu;
    /// Derivative of SiLU (NKI `nl.silu_dx`; ScalarE).
    silu_dx => ActFn::SiluDx;
    /// The error function (NKI `nl.erf`; ScalarE).
    erf => ActFn::Erf;
    /// Derivative of erf, 2/sqrt(pi) e^(-x^2) (NKI `nl.erf_dx`; ScalarE).
    erf_dx => ActFn::ErfDx;
    /// log(1 + e^x) (NKI `nl.softplus`; ScalarE).
    softplus => ActFn::Softplus;
    /// x * tanh(softplus(x)) (NKI `nl.mish`; ScalarE).
    mish => ActFn::Mish;
    /// x^2 (NKI `nl.square`; ScalarE).
    square => ActFn::Square;
    /// |x| (NKI `nl.abs`; VectorE).
    abs => ActFn::Abs;
    /// -x (NKI `nl.negative`; VectorE).
    negative => ActFn::Negative;
    /// -1, 0 or 1 (NKI `nl.sign`; ScalarE).
    sign => ActFn::Sign;
    /// Sine with range reduction (NKI `nl.sin`; VectorE range reduction + ScalarE).
    sin => ActFn::Sin;
    /// Cosine (NKI `nl.cos`; VectorE range reduction + ScalarE).
    cos => ActFn::Cos;
    /// Tangent (NKI `nl.tan`; VectorE range reduction + ScalarE).
    tan => ActFn::Tan;
    /// Arc tangent (NKI `nl.arctan`; ScalarE).
    arctan => ActFn::Arctan;
    /// Round toward -inf (NKI `nl.floor`; VectorE).
    floor => ActFn::Floor;
    /// Round toward +inf (NKI `nl.ceil`; VectorE).
    ceil => ActFn::Ceil;
    /// Round toward zero (NKI `nl.trunc`; VectorE).
    trunc => ActFn::Trunc;
}

/// Checks that `axis` is the last dimension of `x` (the free axis the composite ops work on).
fn last_axis(ins: &Op, x: &TileRef, axis: usize) {
    let api = ins.api;
    let nd = x.shape().len();
    if axis == 0 {
        ins.fail(ErrorKind::PartitionReduction, format!(
                    "reduction on partition axis is not supported: axis 0 of x{:?} in '{api}' is the partition axis; transpose first",
                    x.shape()
                ));
    }
    if axis != nd - 1 {
        ins.fail(ErrorKind::InvalidArgument, format!(
                    "invalid axis {axis} for x{:?} in '{api}': only the last free axis ({}) is supported",
                    x.shape(),
                    nd - 1
                ));
    }
}

/// Softmax along free axis `axis` (NKI `nl.softmax`): `exp(x - max) / sum(exp(x - max))`
/// over the axis, or over a list of free axes together (`&[2, 4]`; any free axes, in the
/// reduction's access-pattern order), computed in fp32 and rounded to `x`'s dtype (fp32 for
/// integer inputs). A negative axis counts from the last dimension.
///
/// Lowered like the hardware does it: a negated max reduce (VectorE), one exp activation with
/// the negated max as bias and a running sum (ScalarE), a reciprocal of the sums (VectorE) and
/// a multiply by it (VectorE). When the axes are not the one free axis of a 2-D tile, the
/// shift, exp and sum are separate instructions (the activation's accumulator sums a whole
/// partition).
#[track_caller]
pub fn softmax<'a>(x: impl Into<TileRef<'a>>, axis: impl SoftmaxAxes) -> Tile {
    const API: &str = "nl.softmax";
    let ins = Op::begin(API);
    let _loc = ins.loc;
    let x: TileRef = x.into();
    ins.operand("x", &x);
    let axes = resolve_axes(&ins, &axis.axes(), x.shape());
    if axes.contains(&0) {
        ins.fail(ErrorKind::PartitionReduction, format!(
                    "reduction on partition axis is not supported: axis 0 of x{:?} in '{API}' is the partition axis; transpose first",
                    x.shape()
                ));
    }
    let out_dtype = if x.dtype().is_float() {
        x.dtype()
    } else {
        DType::F32
    };
    let nd = x.shape().len();
    let neg_max = reduce_impl(
        &ins,
        ReduceKind::Alu(AluOp::Maximum),
        x,
        &axes,
        true,
        Some(DType::F32),
        true,
    );
    let f32_tile = Dst::New(Some(DType::F32));
    let (e, sums) = if nd == 2 && axes == [1] {
        // exp(x - max) with its running sum: one accumulating activation.
        let args = ActivationOpts::new().bias(neg_max.view());
        let (e, sums) = activate(&ins, f32_tile, ActFn::Exp, x, args, Some(f32_tile));
        let sums = sums.expect("the activation sums");
        (e.tile(), sums.tile())
    } else {
        // Several free dims: the accumulator sums a whole partition, so reduce per row instead.
        let shifted = alu_binary(
            &ins,
            AluOp::Add,
            Operand::Tile(x),
            Operand::Tile(neg_max.view()),
            Some(DType::F32),
            false,
        );
        let args = ActivationOpts::new();
        let ex = activate(&ins, f32_tile, ActFn::Exp, shifted.view(), args, None).0;
        let ex = ex.tile();
        let s = reduce_impl(
            &ins,
            ReduceKind::Alu(AluOp::Add),
            ex.view(),
            &axes,
            true,
            Some(DType::F32),
            false,
        );
        (ex, s)
    };
    let recip = reciprocal_to(&ins, f32_tile, sums.view()).tile();
    alu_binary(
        &ins,
        AluOp::Multiply,
        Operand::Tile(e.view()),
        Operand::Tile(recip.view()),
        Some(out_dtype),
        false,
    )
}

instruction! {
    /// RMS normalisation along free axis `axis` (NKI `nl.rms_norm`; `axis` must be the last
    /// dimension of a 2-D `x`): `x / sqrt(sum(x^2) / n + epsilon) * w`, where `w` is a `[1, F]` (or
    /// `[P, F]`) weight tile and `n` the element count of the normalised axis (usually `F`).
    /// Computed in fp32 and rounded to `x`'s dtype.
    ///
    /// Lowered as a square activation with a running sum (ScalarE), `sum/n + eps` (VectorE), rsqrt
    /// (ScalarE), `x * rstd` (VectorE) and `* w` (VectorE).
    pub fn rms_norm<'a, 'b>(
        x: into TileRef<'a>, w: into TileRef<'b>, axis: usize, n: usize, epsilon: f32,
    ) -> Tile as ins = "nl.rms_norm" {
        rms_norm_on(&ins, x, w, axis, n, epsilon)
    }
}

/// [`rms_norm`] on its converted operands.
#[track_caller]
fn rms_norm_on(ins: &Op, x: TileRef, w: TileRef, axis: usize, n: usize, epsilon: f32) -> Tile {
    let _loc = ins.loc;
    ins.operand("x", &x);
    ins.operand("w", &w);
    last_axis(ins, &x, axis);
    if x.shape().len() != 2 {
        ins.fail(
            ErrorKind::InvalidArgument,
            format!("'rms_norm' takes a 2-D tile [P, F], got x{:?}", x.shape()),
        );
    }
    if n == 0 {
        ins.fail(ErrorKind::InvalidArgument, "'rms_norm' needs n > 0");
    }
    let out_dtype = if x.dtype().is_float() {
        x.dtype()
    } else {
        DType::F32
    };
    // sum(x^2) per partition: a square activation with its running sum.
    let f32_tile = Dst::New(Some(DType::F32));
    let sq = activate(
        ins,
        f32_tile,
        ActFn::Square,
        x,
        ActivationOpts::new(),
        Some(f32_tile),
    )
    .1;
    let sq = sq.expect("the activation sums").tile();
    // sum / n + epsilon on VectorE, then its rsqrt on ScalarE.
    let inv_n = 1.0 / n as f32;
    let mean_eps = TensorScalarOpts::new()
        .then(AluOp::Add, epsilon)
        .engine(Engine::Vector);
    let ms = tensor_scalar_to(
        ins,
        f32_tile,
        sq.view(),
        AluOp::Multiply,
        inv_n.into(),
        mean_eps,
    );
    let ms = ms.tile();
    let rstd = activate(
        ins,
        f32_tile,
        ActFn::Rsqrt,
        ms.view(),
        ActivationOpts::new(),
        None,
    )
    .0;
    let rstd = rstd.tile();
    let xn = alu_binary(
        ins,
        AluOp::Multiply,
        Operand::Tile(x),
        Operand::Tile(rstd.view()),
        Some(DType::F32),
        false,
    );
    alu_binary(
        ins,
        AluOp::Multiply,
        Operand::Tile(xn.view()),
        Operand::Tile(w),
        Some(out_dtype),
        true,
    )
}

#[cfg(test)]
mod tests {
    use crate::context::Mode;
    use crate::dtype::DType;
    use crate::isa::trace::run;
    use crate::lang;
    use crate::record::{Engine, MemKind, Opcode};
    use crate::target::Target;
    use crate::timing::cost::compute_cycles;

    /// `nl.softmax` and `nl.rms_norm` record their accumulating activation with the
    /// accumulate flag, so its cost has the accumulator's `MIN_II` term, as
    /// `nisa.activation_reduce`'s does.
    #[test]
    fn softmax_and_rms_norm_pay_the_accumulate_term() {
        type Kernel = fn();
        let kernels: [(&str, Kernel); 2] = [
            ("nl.softmax", || {
                let x = lang::full(&[128, 512], 0.5, DType::F32, MemKind::Sbuf);
                lang::softmax(&x, 1);
            }),
            ("nl.rms_norm", || {
                let x = lang::full(&[128, 512], 0.5, DType::F32, MemKind::Sbuf);
                let w = lang::full(&[1, 512], 1.0, DType::F32, MemKind::Sbuf);
                lang::rms_norm(&x, &w, 1, 512, 1e-6);
            }),
        ];
        for (api, kernel) in kernels {
            for mode in [Mode::Simulate, Mode::Estimate] {
                let recs = run(mode, kernel).unwrap();
                let acc: Vec<_> = recs.iter().filter(|r| r.accumulate).collect();
                assert_eq!(acc.len(), 1, "{api} {mode:?}: {recs:#?}");
                let r = acc[0];
                assert_eq!(
                    (r.api, r.engine, r.opcode),
                    (api, Engine::Scalar, Opcode::Activation)
                );
                assert_eq!(r.writes.len(), 2, "the output and the accumulator");
                for target in [Target::Trn1, Target::Trn2] {
                    let spec = target.spec();
                    let mut plain = r.clone();
                    plain.accumulate = false;
                    assert_eq!(
                        compute_cycles(spec, r),
                        compute_cycles(spec, &plain) + spec.min_ii,
                        "{api} on {target:?}"
                    );
                }
            }
        }
    }
}
