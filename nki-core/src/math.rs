//! Scalar math shared by `nl` and `nisa`: the ScalarE activation table ([`ActFn`]) and the
//! VectorE/GpSimd ALU operators ([`AluOp`]), each evaluated on one `f32` element.
//!
//! Engines compute in fp32; the caller rounds the result to the output dtype. Transcendental
//! functions are evaluated in f64 and rounded once to f32, so they are within half an ulp of
//! the exact value (the reference NumPy float32 results are within a few ulps of it). `erf` is
//! implemented here (Taylor series for small |x|, a continued fraction for the tail), accurate
//! to about 1e-15 in f64.

use crate::dtype::DType;
use std::f64::consts::{FRAC_2_SQRT_PI, PI, SQRT_2};

/// 1 / sqrt(2 pi).
const INV_SQRT_2PI: f64 = 0.398_942_280_401_432_7;
/// sqrt(2 / pi), the constant of the tanh GELU approximation.
const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;
/// The sigmoid GELU approximation's slope: gelu(x) ~ x * sigmoid(1.702 x).
const GELU_SIGMOID_K: f64 = 1.702;

/// The error function in f64 (Taylor series for |x| < 2.5, Lentz continued fraction for the
/// complementary function above; relative error ~1e-15).
pub fn erf64(x: f64) -> f64 {
    if x.is_nan() {
        return f64::NAN;
    }
    let a = x.abs();
    let r = if a < 2.5 {
        // erf(x) = 2/sqrt(pi) * sum_n (-1)^n x^(2n+1) / (n! (2n+1))
        let x2 = a * a;
        let mut term = a; // (-1)^n x^(2n+1) / n!
        let mut sum = a;
        for k in 1..200 {
            let n = k as f64;
            term *= -x2 / n;
            let add = term / (2.0 * n + 1.0);
            sum += add;
            if add.abs() <= 1e-17 * sum.abs() {
                break;
            }
        }
        FRAC_2_SQRT_PI * sum
    } else if a < 6.0 {
        1.0 - erfc_tail(a)
    } else {
        1.0
    };
    r.copysign(x)
}

/// erfc(a) for a >= 2.5 by the continued fraction
/// erfc(a) = exp(-a^2)/sqrt(pi) * 1/(a + (1/2)/(a + 1/(a + (3/2)/(a + 2/(a + ...))))),
/// evaluated with the modified Lentz algorithm.
fn erfc_tail(a: f64) -> f64 {
    let tiny = 1e-300;
    let mut f = a;
    let mut c = a;
    let mut d = 0.0f64;
    for k in 1..200 {
        let an = k as f64 * 0.5;
        d = a + an * d;
        if d.abs() < tiny {
            d = tiny;
        }
        c = a + an / c;
        if c.abs() < tiny {
            c = tiny;
        }
        d = 1.0 / d;
        let delta = c * d;
        f *= delta;
        if (delta - 1.0).abs() < 1e-16 {
            break;
        }
    }
    (-a * a).exp() / (PI.sqrt() * f)
}

fn sigmoid64(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

fn softplus64(x: f64) -> f64 {
    // log(1 + e^x) = max(x, 0) + log1p(e^-|x|)
    x.max(0.0) + (-x.abs()).exp().ln_1p()
}

/// A ScalarE activation function (NKI's activation table, `nl.<name>` / `nisa.activation(op=...)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ActFn {
    /// Identity (`nl.copy`; the activation `copy`/`identity`).
    Copy,
    /// e^x.
    Exp,
    /// Natural logarithm.
    Log,
    /// Square root.
    Sqrt,
    /// 1 / sqrt(x).
    Rsqrt,
    /// 1 / x.
    Reciprocal,
    /// Hyperbolic tangent.
    Tanh,
    /// 1 / (1 + e^-x).
    Sigmoid,
    /// max(x, 0).
    Relu,
    /// Exact GELU: x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)).
    Gelu,
    /// Derivative of the exact GELU: Phi(x) + x phi(x).
    GeluDx,
    /// tanh-approximated GELU: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
    GeluApprxTanh,
    /// sigmoid-approximated GELU: x * sigmoid(1.702 x).
    GeluApprxSigmoid,
    /// Derivative of the sigmoid-approximated GELU.
    GeluApprxSigmoidDx,
    /// SiLU / swish: x * sigmoid(x).
    Silu,
    /// Derivative of SiLU: s (1 + x (1 - s)) with s = sigmoid(x).
    SiluDx,
    /// The error function.
    Erf,
    /// Derivative of erf: 2/sqrt(pi) e^(-x^2).
    ErfDx,
    /// log(1 + e^x).
    Softplus,
    /// x * tanh(softplus(x)).
    Mish,
    /// x^2.
    Square,
    /// |x|.
    Abs,
    /// -x.
    Negative,
    /// -1, 0 or 1 (NaN stays NaN).
    Sign,
    /// Sine.
    Sin,
    /// Cosine.
    Cos,
    /// Tangent.
    Tan,
    /// Arc tangent.
    Arctan,
    /// Round toward -inf.
    Floor,
    /// Round toward +inf.
    Ceil,
    /// Round toward zero.
    Trunc,
    /// Parametric ReLU: `x` for `x >= 0`, `alpha * x` below (NKI 0.7 `nl.prelu`, an `op` of
    /// `nisa.activate2`, whose `relu_param` is `alpha`; [`ActFn::eval`] takes `alpha = 0`,
    /// `relu_param`'s default). See [`ActFn::eval_param`].
    Prelu,
}

impl ActFn {
    /// Every activation function, in declaration order.
    pub const ALL: [ActFn; 32] = [
        ActFn::Copy,
        ActFn::Exp,
        ActFn::Log,
        ActFn::Sqrt,
        ActFn::Rsqrt,
        ActFn::Reciprocal,
        ActFn::Tanh,
        ActFn::Sigmoid,
        ActFn::Relu,
        ActFn::Gelu,
        ActFn::GeluDx,
        ActFn::GeluApprxTanh,
        ActFn::GeluApprxSigmoid,
        ActFn::GeluApprxSigmoidDx,
        ActFn::Silu,
        ActFn::SiluDx,
        ActFn::Erf,
        ActFn::ErfDx,
        ActFn::Softplus,
        ActFn::Mish,
        ActFn::Square,
        ActFn::Abs,
        ActFn::Negative,
        ActFn::Sign,
        ActFn::Sin,
        ActFn::Cos,
        ActFn::Tan,
        ActFn::Arctan,
        ActFn::Floor,
        ActFn::Ceil,
        ActFn::Trunc,
        ActFn::Prelu,
    ];

    /// Evaluates the function with its parameter `alpha` (`relu_param`): `prelu` is `x` for
    /// `x >= 0` (and NaN) and `alpha * x` below; every other function ignores `alpha`.
    pub fn eval_param(self, x: f32, alpha: f32) -> f32 {
        match self {
            ActFn::Prelu if x < 0.0 => alpha * x,
            ActFn::Prelu => x,
            _ => self.eval(x),
        }
    }

    /// Evaluates the function on one element (fp32 in and out; internal math in f64, rounded
    /// once).
    pub fn eval(self, x: f32) -> f32 {
        let d = x as f64;
        let r: f64 = match self {
            ActFn::Copy => return x,
            ActFn::Negative => return -x,
            ActFn::Abs => return x.abs(),
            ActFn::Floor => return x.floor(),
            ActFn::Ceil => return x.ceil(),
            ActFn::Trunc => return x.trunc(),
            ActFn::Relu => return if x > 0.0 || x.is_nan() { x } else { 0.0 },
            ActFn::Prelu => return self.eval_param(x, 0.0),
            ActFn::Sign => {
                return if x.is_nan() {
                    x
                } else if x > 0.0 {
                    1.0
                } else if x < 0.0 {
                    -1.0
                } else {
                    0.0
                }
            }
            ActFn::Square => d * d,
            ActFn::Exp => d.exp(),
            ActFn::Log => d.ln(),
            ActFn::Sqrt => d.sqrt(),
            ActFn::Rsqrt => 1.0 / d.sqrt(),
            ActFn::Reciprocal => 1.0 / d,
            ActFn::Tanh => d.tanh(),
            ActFn::Sigmoid => sigmoid64(d),
            ActFn::Gelu => 0.5 * d * (1.0 + erf64(d / SQRT_2)),
            ActFn::GeluDx => {
                0.5 * (1.0 + erf64(d / SQRT_2)) + d * INV_SQRT_2PI * (-0.5 * d * d).exp()
            }
            ActFn::GeluApprxTanh => {
                0.5 * d * (1.0 + (SQRT_2_OVER_PI * (d + 0.044715 * d * d * d)).tanh())
            }
            ActFn::GeluApprxSigmoid => d * sigmoid64(GELU_SIGMOID_K * d),
            ActFn::GeluApprxSigmoidDx => {
                let s = sigmoid64(GELU_SIGMOID_K * d);
                s + GELU_SIGMOID_K * d * s * (1.0 - s)
            }
            ActFn::Silu => d * sigmoid64(d),
            ActFn::SiluDx => {
                let s = sigmoid64(d);
                s * (1.0 + d * (1.0 - s))
            }
            ActFn::Erf => erf64(d),
            ActFn::ErfDx => FRAC_2_SQRT_PI * (-d * d).exp(),
            ActFn::Softplus => softplus64(d),
            ActFn::Mish => d * softplus64(d).tanh(),
            ActFn::Sin => d.sin(),
            ActFn::Cos => d.cos(),
            ActFn::Tan => d.tan(),
            ActFn::Arctan => d.atan(),
        };
        r as f32
    }

    /// NKI's name for the function (`exp`, `gelu_apprx_tanh`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            ActFn::Copy => "copy",
            ActFn::Exp => "exp",
            ActFn::Log => "log",
            ActFn::Sqrt => "sqrt",
            ActFn::Rsqrt => "rsqrt",
            ActFn::Reciprocal => "reciprocal",
            ActFn::Tanh => "tanh",
            ActFn::Sigmoid => "sigmoid",
            ActFn::Relu => "relu",
            ActFn::Gelu => "gelu",
            ActFn::GeluDx => "gelu_dx",
            ActFn::GeluApprxTanh => "gelu_apprx_tanh",
            ActFn::GeluApprxSigmoid => "gelu_apprx_sigmoid",
            ActFn::GeluApprxSigmoidDx => "gelu_apprx_sigmoid_dx",
            ActFn::Silu => "silu",
            ActFn::SiluDx => "silu_dx",
            ActFn::Erf => "erf",
            ActFn::ErfDx => "erf_dx",
            ActFn::Softplus => "softplus",
            ActFn::Mish => "mish",
            ActFn::Square => "square",
            ActFn::Abs => "abs",
            ActFn::Negative => "negative",
            ActFn::Sign => "sign",
            ActFn::Sin => "sin",
            ActFn::Cos => "cos",
            ActFn::Tan => "tan",
            ActFn::Arctan => "arctan",
            ActFn::Floor => "floor",
            ActFn::Ceil => "ceil",
            ActFn::Trunc => "trunc",
            ActFn::Prelu => "prelu",
        }
    }

    /// Looks a function up by its NKI name (`identity` is accepted for `copy`).
    pub fn from_name(name: &str) -> Option<ActFn> {
        if name == "identity" {
            return Some(ActFn::Copy);
        }
        ActFn::ALL.into_iter().find(|f| f.name() == name)
    }

    /// True if ScalarE's activation table implements the function (the rest — `negative`,
    /// `floor`, `ceil`, `trunc`, `cos`, `tan` — are VectorE/ALU-style ops in `nl`).
    pub const fn in_activation_table(self) -> bool {
        !matches!(
            self,
            ActFn::Negative | ActFn::Floor | ActFn::Ceil | ActFn::Trunc | ActFn::Cos | ActFn::Tan
        )
    }

    /// The input range on which ScalarE's piecewise approximation is valid (NKI activation
    /// table), or `None` for the whole real line.
    pub fn valid_range(self) -> Option<(f32, f32)> {
        match self {
            ActFn::Log => Some((2f32.powi(-64), 2f32.powi(64))),
            ActFn::Sin => Some((-std::f32::consts::PI, std::f32::consts::PI)),
            ActFn::Arctan => Some((-std::f32::consts::FRAC_PI_2, std::f32::consts::FRAC_PI_2)),
            ActFn::Sqrt => Some((2f32.powi(-116), 2f32.powi(118))),
            ActFn::Rsqrt => Some((2f32.powi(-87), 2f32.powi(97))),
            _ => None,
        }
    }
}

impl std::fmt::Display for ActFn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// An ALU operator of VectorE / GpSimd / ScalarE (`nl.add`, `np.subtract`, `nl.bitwise_and`, ...).
///
/// Arithmetic operators work on the fp32 value; comparisons and logical operators return 1.0
/// or 0.0; bitvec operators (`bitwise_*`, shifts) work on the integer value (see
/// [`AluOp::eval_typed`] for width-exact results).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[non_exhaustive]
pub enum AluOp {
    /// Passes the first operand through (NKI `bypass`).
    Bypass,
    /// a + b.
    Add,
    /// a - b.
    Subtract,
    /// a * b.
    Multiply,
    /// a / b.
    Divide,
    /// max(a, b).
    Maximum,
    /// min(a, b).
    Minimum,
    /// a ^ b.
    Power,
    /// a == b.
    Equal,
    /// a != b.
    NotEqual,
    /// a > b.
    Greater,
    /// a >= b.
    GreaterEqual,
    /// a < b.
    Less,
    /// a <= b.
    LessEqual,
    /// Both non-zero.
    LogicalAnd,
    /// Either non-zero.
    LogicalOr,
    /// Exactly one non-zero.
    LogicalXor,
    /// Bitwise AND of the integer values.
    BitwiseAnd,
    /// Bitwise OR of the integer values.
    BitwiseOr,
    /// Bitwise XOR of the integer values.
    BitwiseXor,
    /// a << b.
    LeftShift,
    /// Logical a >> b.
    RightShift,
    /// Floored modulo (NumPy `mod`: the result has the sign of b).
    Mod,
    /// Truncated modulo (C `fmod`: the result has the sign of a).
    Fmod,
    /// Whichever of `a`, `b` has the larger magnitude, with its sign (`b` on a tie; NKI 0.7
    /// `nl.abs_max`, NeuronCore-v4).
    AbsMax,
    /// Whichever of `a`, `b` has the smaller magnitude, with its sign (`b` on a tie; NKI 0.7
    /// `nl.abs_min`, NeuronCore-v4).
    AbsMin,
    /// |a| (unary: the second operand is ignored; NKI's "arithmetic unary" `nl.abs`).
    Abs,
    /// a * a (unary; `nl.square` as a `tensor_scalar` `op0`, NeuronCore-v4).
    Square,
    /// max(a, 0) (unary; `nl.relu` as a `tensor_scalar` `op0`, NeuronCore-v4).
    Relu,
    /// 1 / sqrt(a) (unary; `nl.rsqrt`, the one operator `tensor_scalar` runs on GpSimdE).
    Rsqrt,
    /// 1 / a (unary; `nl.reciprocal`).
    Reciprocal,
}

fn truth(x: f32) -> bool {
    x != 0.0 && !x.is_nan()
}

fn b2f(b: bool) -> f32 {
    if b {
        1.0
    } else {
        0.0
    }
}

/// NKI 0.7 `abs_max` (`larger`) / `abs_min`: `a` when its magnitude `ma` is larger / smaller
/// than `b`'s `mb`, else `b` (so `b` on a tie).
fn by_magnitude<T: PartialOrd>(a: T, b: T, (ma, mb): (T, T), larger: bool) -> T {
    let pick_a = if larger { ma > mb } else { ma < mb };
    if pick_a {
        a
    } else {
        b
    }
}

/// Bit width and signedness of an integer dtype (bool and floats are treated as 32-bit signed).
fn int_layout(dtype: DType) -> (u32, bool) {
    match dtype {
        DType::I8 => (8, true),
        DType::U8 | DType::Bool => (8, false),
        DType::I16 => (16, true),
        DType::U16 => (16, false),
        DType::U32 => (32, false),
        _ => (32, true),
    }
}

/// Interprets the low `bits` of `v` as a signed or unsigned integer.
fn wrap(v: i64, bits: u32, signed: bool) -> i64 {
    let mask = (1i64 << bits) - 1;
    let u = v & mask;
    if signed && u >> (bits - 1) != 0 {
        u - (1i64 << bits)
    } else {
        u
    }
}

impl AluOp {
    /// Every operator, in declaration order.
    pub const ALL: [AluOp; 31] = [
        AluOp::Bypass,
        AluOp::Add,
        AluOp::Subtract,
        AluOp::Multiply,
        AluOp::Divide,
        AluOp::Maximum,
        AluOp::Minimum,
        AluOp::Power,
        AluOp::Equal,
        AluOp::NotEqual,
        AluOp::Greater,
        AluOp::GreaterEqual,
        AluOp::Less,
        AluOp::LessEqual,
        AluOp::LogicalAnd,
        AluOp::LogicalOr,
        AluOp::LogicalXor,
        AluOp::BitwiseAnd,
        AluOp::BitwiseOr,
        AluOp::BitwiseXor,
        AluOp::LeftShift,
        AluOp::RightShift,
        AluOp::Mod,
        AluOp::Fmod,
        AluOp::AbsMax,
        AluOp::AbsMin,
        AluOp::Abs,
        AluOp::Square,
        AluOp::Relu,
        AluOp::Rsqrt,
        AluOp::Reciprocal,
    ];

    /// The function a unary operator applies to its first operand (`None` for the binary
    /// operators). The unary operators compute what the activation function of the same
    /// name computes ([`ActFn::eval`]), in fp32.
    pub const fn unary_fn(self) -> Option<ActFn> {
        match self {
            AluOp::Abs => Some(ActFn::Abs),
            AluOp::Square => Some(ActFn::Square),
            AluOp::Relu => Some(ActFn::Relu),
            AluOp::Rsqrt => Some(ActFn::Rsqrt),
            AluOp::Reciprocal => Some(ActFn::Reciprocal),
            _ => None,
        }
    }

    /// True for the "arithmetic unary" operators of NKI's operator table (`abs`, `square`,
    /// `relu`, `rsqrt`, `reciprocal`): `tensor_scalar` takes them as `op0` with `operand0`
    /// `None` or 0.
    pub const fn is_unary(self) -> bool {
        self.unary_fn().is_some()
    }

    /// True for the operators that exist only on NeuronCore-v4 (trn3): `abs_max`, `abs_min`
    /// (NKI 0.4 release notes) and the `square` / `relu` opcodes (same notes: "accepted as
    /// op0 on trn3").
    pub const fn needs_nc_v4(self) -> bool {
        matches!(
            self,
            AluOp::AbsMax | AluOp::AbsMin | AluOp::Square | AluOp::Relu
        )
    }

    /// Evaluates `a op b` on fp32 values. Bitvec operators use the 32-bit two's-complement
    /// integer value of their operands (`right_shift` is logical on 32 bits).
    pub fn eval(self, a: f32, b: f32) -> f32 {
        self.eval_typed(a, b, DType::I32)
    }

    /// Like [`eval`](Self::eval), but bitvec operators work at the width and signedness of
    /// `dtype` (e.g. an int8 `left_shift` wraps at 8 bits, a uint16 `right_shift` shifts in
    /// zeros at bit 15). Non-bitvec operators ignore `dtype`.
    pub fn eval_typed(self, a: f32, b: f32, dtype: DType) -> f32 {
        match self {
            AluOp::Bypass => a,
            AluOp::Add => a + b,
            AluOp::Subtract => a - b,
            AluOp::Multiply => a * b,
            AluOp::Divide => a / b,
            AluOp::Maximum => {
                if a.is_nan() || b.is_nan() {
                    f32::NAN
                } else {
                    a.max(b)
                }
            }
            AluOp::Minimum => {
                if a.is_nan() || b.is_nan() {
                    f32::NAN
                } else {
                    a.min(b)
                }
            }
            AluOp::Power => (a as f64).powf(b as f64) as f32,
            AluOp::Equal => b2f(a == b),
            AluOp::NotEqual => b2f(a != b),
            AluOp::Greater => b2f(a > b),
            AluOp::GreaterEqual => b2f(a >= b),
            AluOp::Less => b2f(a < b),
            AluOp::LessEqual => b2f(a <= b),
            AluOp::LogicalAnd => b2f(truth(a) && truth(b)),
            AluOp::LogicalOr => b2f(truth(a) || truth(b)),
            AluOp::LogicalXor => b2f(truth(a) != truth(b)),
            AluOp::Mod => {
                if b == 0.0 {
                    return f32::NAN;
                }
                let r = ((a as f64) % (b as f64)) as f32;
                if r != 0.0 && (r < 0.0) != (b < 0.0) {
                    r + b
                } else {
                    r
                }
            }
            AluOp::Fmod => a % b,
            // "x if |x| > |y| else y": a NaN x gives y, a NaN y gives NaN.
            AluOp::AbsMax => by_magnitude(a, b, (a.abs(), b.abs()), true),
            AluOp::AbsMin => by_magnitude(a, b, (a.abs(), b.abs()), false),
            AluOp::Abs | AluOp::Square | AluOp::Relu | AluOp::Rsqrt | AluOp::Reciprocal => {
                match self.unary_fn() {
                    Some(f) => f.eval(a),
                    None => a,
                }
            }
            AluOp::BitwiseAnd
            | AluOp::BitwiseOr
            | AluOp::BitwiseXor
            | AluOp::LeftShift
            | AluOp::RightShift => self.bitvec(a as i64, b as i64, dtype) as f32,
        }
    }

    /// A bitvec operator on integers `a`, `b` at the width and signedness of `dtype`.
    fn bitvec(self, a: i64, y: i64, dtype: DType) -> i64 {
        let (bits, signed) = int_layout(dtype);
        let x = wrap(a, bits, signed);
        let mask = (1i64 << bits) - 1;
        let r = match self {
            AluOp::BitwiseAnd => x & wrap(y, bits, signed),
            AluOp::BitwiseOr => x | wrap(y, bits, signed),
            AluOp::BitwiseXor => x ^ wrap(y, bits, signed),
            AluOp::LeftShift if (0..bits as i64).contains(&y) => x << y,
            AluOp::RightShift if (0..bits as i64).contains(&y) => (x & mask) >> y,
            _ => 0,
        };
        wrap(r, bits, signed)
    }

    /// Evaluates `a op b` in native integer arithmetic of `dtype`'s width and signedness (what
    /// GpSimdE does for 32-bit integers, and the bitvec operators do on bit patterns): the
    /// result wraps around (two's complement), comparisons and logical operators give 1 or 0.
    /// `None` for the operators without an integer form (divide, power, mod, fmod).
    pub fn eval_int(self, a: i64, b: i64, dtype: DType) -> Option<i64> {
        if self.is_bitvec() {
            return Some(self.bitvec(a, b, dtype));
        }
        let (bits, signed) = int_layout(dtype);
        let r = match self {
            AluOp::Bypass => a,
            AluOp::Add => a.wrapping_add(b),
            AluOp::Subtract => a.wrapping_sub(b),
            AluOp::Multiply => a.wrapping_mul(b),
            AluOp::Maximum => a.max(b),
            AluOp::Minimum => a.min(b),
            AluOp::Equal => (a == b) as i64,
            AluOp::NotEqual => (a != b) as i64,
            AluOp::Greater => (a > b) as i64,
            AluOp::GreaterEqual => (a >= b) as i64,
            AluOp::Less => (a < b) as i64,
            AluOp::LessEqual => (a <= b) as i64,
            AluOp::LogicalAnd => (a != 0 && b != 0) as i64,
            AluOp::LogicalOr => (a != 0 || b != 0) as i64,
            AluOp::LogicalXor => ((a != 0) != (b != 0)) as i64,
            AluOp::AbsMax => by_magnitude(a, b, (a.abs(), b.abs()), true),
            AluOp::AbsMin => by_magnitude(a, b, (a.abs(), b.abs()), false),
            // Divide, power, mod, fmod and the unary operators (computed in fp32; bitvec
            // operators are done above).
            _ => return None,
        };
        Some(wrap(r, bits, signed))
    }

    /// True when the operator computes in native integer arithmetic ([`eval_int`]) rather
    /// than fp32 on `engine` for `compute` operands: the bitvec operators always (bit
    /// patterns), and operators with an integer form on GpSimdE for 32-bit integers (NKI:
    /// "when all input/output tiles are int32 or uint32, the operation defaults to GpSimd
    /// Engine, which uses native integer arithmetic"; VectorE and ScalarE compute in fp32).
    ///
    /// [`eval_int`]: AluOp::eval_int
    pub(crate) fn is_integer_on(self, engine: crate::engine::Engine, compute: DType) -> bool {
        let native = engine == crate::engine::Engine::GpSimd && compute.holds_bits();
        (self.is_bitvec() && compute.is_int()) || (native && self.eval_int(0, 0, compute).is_some())
    }

    /// NKI's name for the operator (`add`, `bitwise_and`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            AluOp::Bypass => "bypass",
            AluOp::Add => "add",
            AluOp::Subtract => "subtract",
            AluOp::Multiply => "multiply",
            AluOp::Divide => "divide",
            AluOp::Maximum => "maximum",
            AluOp::Minimum => "minimum",
            AluOp::Power => "power",
            AluOp::Equal => "equal",
            AluOp::NotEqual => "not_equal",
            AluOp::Greater => "greater",
            AluOp::GreaterEqual => "greater_equal",
            AluOp::Less => "less",
            AluOp::LessEqual => "less_equal",
            AluOp::LogicalAnd => "logical_and",
            AluOp::LogicalOr => "logical_or",
            AluOp::LogicalXor => "logical_xor",
            AluOp::BitwiseAnd => "bitwise_and",
            AluOp::BitwiseOr => "bitwise_or",
            AluOp::BitwiseXor => "bitwise_xor",
            AluOp::LeftShift => "left_shift",
            AluOp::RightShift => "right_shift",
            AluOp::Mod => "mod",
            AluOp::Fmod => "fmod",
            AluOp::AbsMax => "abs_max",
            AluOp::AbsMin => "abs_min",
            AluOp::Abs => "abs",
            AluOp::Square => "square",
            AluOp::Relu => "relu",
            AluOp::Rsqrt => "rsqrt",
            AluOp::Reciprocal => "reciprocal",
        }
    }

    /// Looks an operator up by its NKI name.
    pub fn from_name(name: &str) -> Option<AluOp> {
        AluOp::ALL.into_iter().find(|o| o.name() == name)
    }

    /// True if NKI accepts the operator as a reduce op (`tensor_reduce`, accumulation):
    /// add, subtract, multiply, maximum, minimum, the logical ops and the bitwise ops.
    pub const fn is_reducible(self) -> bool {
        matches!(
            self,
            AluOp::Add
                | AluOp::Subtract
                | AluOp::Multiply
                | AluOp::Maximum
                | AluOp::Minimum
                | AluOp::LogicalAnd
                | AluOp::LogicalOr
                | AluOp::LogicalXor
                | AluOp::BitwiseAnd
                | AluOp::BitwiseOr
                | AluOp::BitwiseXor
        )
    }

    /// The value a reduction with this operator starts from (`None` if not reducible).
    /// `bitwise_and` starts from all ones (-1 as a signed integer).
    pub const fn reduce_identity(self) -> Option<f32> {
        match self {
            AluOp::Add
            | AluOp::Subtract
            | AluOp::LogicalOr
            | AluOp::LogicalXor
            | AluOp::BitwiseOr
            | AluOp::BitwiseXor => Some(0.0),
            AluOp::Multiply | AluOp::LogicalAnd => Some(1.0),
            AluOp::Maximum => Some(f32::NEG_INFINITY),
            AluOp::Minimum => Some(f32::INFINITY),
            AluOp::BitwiseAnd => Some(-1.0),
            _ => None,
        }
    }

    /// True for the bitvec operators (integer bit patterns, VectorE only; floats are an error).
    pub const fn is_bitvec(self) -> bool {
        matches!(
            self,
            AluOp::BitwiseAnd
                | AluOp::BitwiseOr
                | AluOp::BitwiseXor
                | AluOp::LeftShift
                | AluOp::RightShift
        )
    }

    /// True for the six comparisons (equal, not_equal, greater(_equal), less(_equal)).
    pub const fn is_comparison(self) -> bool {
        matches!(
            self,
            AluOp::Equal
                | AluOp::NotEqual
                | AluOp::Greater
                | AluOp::GreaterEqual
                | AluOp::Less
                | AluOp::LessEqual
        )
    }

    /// True for comparisons and logical operators (results are 1.0 / 0.0; `nl` defaults
    /// their dtype to bool).
    pub const fn is_predicate(self) -> bool {
        self.is_comparison()
            || matches!(
                self,
                AluOp::LogicalAnd | AluOp::LogicalOr | AluOp::LogicalXor
            )
    }
}

impl std::fmt::Display for AluOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reference erf values (Abramowitz & Stegun table 7.1 / high-precision tables).
    #[test]
    fn erf_matches_tables() {
        let table = [
            (0.0, 0.0),
            (0.1, 0.112_462_916_018_284_9),
            (0.5, 0.520_499_877_813_046_5),
            (1.0, 0.842_700_792_949_714_9),
            (1.5, 0.966_105_146_475_310_7),
            (2.0, 0.995_322_265_018_952_7),
            (2.5, 0.999_593_047_982_555),
            (3.0, 0.999_977_909_503_001_4),
            (4.0, 0.999_999_984_582_742_1),
        ];
        for (x, want) in table {
            let got = erf64(x);
            assert!((got - want).abs() < 1e-14, "erf({x}) = {got}, want {want}");
            assert!((erf64(-x) + want).abs() < 1e-14);
            assert!((ActFn::Erf.eval(x as f32) as f64 - want).abs() < 1e-7);
        }
        assert_eq!(erf64(10.0), 1.0);
        assert!(erf64(f64::NAN).is_nan());
    }

    #[test]
    fn erf_is_continuous_at_the_switch() {
        let below = erf64(2.5 - 1e-12);
        let above = erf64(2.5 + 1e-12);
        assert!((below - above).abs() < 1e-13);
        // erfc tail agrees with the series where both converge.
        for x in [2.6f64, 3.2, 4.5] {
            let series = {
                let mut term = x;
                let mut sum = x;
                for n in 1..200 {
                    term *= -x * x / n as f64;
                    sum += term / (2 * n + 1) as f64;
                }
                FRAC_2_SQRT_PI * sum
            };
            assert!((series - erf64(x)).abs() < 1e-9, "x={x}");
        }
    }

    #[test]
    fn activations_match_closed_forms() {
        let xs = [-7.5f32, -3.0, -1.25, -0.5, 0.0, 0.3, 1.0, 2.75, 6.0];
        for &x in &xs {
            let d = x as f64;
            let s = 1.0 / (1.0 + (-d).exp());
            let close = |f: ActFn, want: f64| {
                let got = f.eval(x) as f64;
                let tol = 1e-6 * want.abs().max(1.0);
                assert!((got - want).abs() <= tol, "{f}({x}) = {got}, want {want}");
            };
            close(ActFn::Copy, d);
            close(ActFn::Exp, d.exp());
            close(ActFn::Tanh, d.tanh());
            close(ActFn::Sigmoid, s);
            close(ActFn::Relu, d.max(0.0));
            close(ActFn::Silu, d * s);
            close(ActFn::SiluDx, s + d * s * (1.0 - s));
            close(ActFn::Softplus, (1.0 + d.exp()).ln());
            close(ActFn::Mish, d * (1.0 + d.exp()).ln().tanh());
            close(ActFn::Square, d * d);
            close(ActFn::Abs, d.abs());
            close(ActFn::Negative, -d);
            close(ActFn::Sin, d.sin());
            close(ActFn::Cos, d.cos());
            close(ActFn::Arctan, d.atan());
            close(ActFn::Floor, d.floor());
            close(ActFn::Ceil, d.ceil());
            close(ActFn::Trunc, d.trunc());
            close(ActFn::ErfDx, 2.0 / PI.sqrt() * (-d * d).exp());
            close(
                ActFn::GeluApprxTanh,
                0.5 * d * (1.0 + ((2.0 / PI).sqrt() * (d + 0.044715 * d.powi(3))).tanh()),
            );
            close(ActFn::GeluApprxSigmoid, d / (1.0 + (-1.702 * d).exp()));
            if x > 0.0 {
                close(ActFn::Log, d.ln());
                close(ActFn::Sqrt, d.sqrt());
                close(ActFn::Rsqrt, 1.0 / d.sqrt());
            }
            if x != 0.0 {
                close(ActFn::Reciprocal, 1.0 / d);
            }
        }
    }

    #[test]
    fn gelu_and_derivatives() {
        // gelu(1) = 0.8413447460685429 (Phi(1)); gelu(-1) = -0.15865525393145707.
        assert!((ActFn::Gelu.eval(1.0) as f64 - 0.841_344_746_068_542_9).abs() < 1e-7);
        assert!((ActFn::Gelu.eval(-1.0) as f64 + 0.158_655_253_931_457_07).abs() < 1e-7);
        // Derivatives agree with central differences of the functions.
        for (f, df) in [
            (ActFn::Gelu, ActFn::GeluDx),
            (ActFn::Silu, ActFn::SiluDx),
            (ActFn::Erf, ActFn::ErfDx),
            (ActFn::GeluApprxSigmoid, ActFn::GeluApprxSigmoidDx),
        ] {
            for x in [-2.0f32, -0.7, 0.0, 0.4, 1.9] {
                let h = 1e-3f32;
                let num = (f.eval(x + h) as f64 - f.eval(x - h) as f64) / (2.0 * h as f64);
                assert!(
                    (num - df.eval(x) as f64).abs() < 2e-3,
                    "{df}({x}) = {}, numeric {num}",
                    df.eval(x)
                );
            }
        }
    }

    #[test]
    fn activation_edge_values() {
        assert_eq!(ActFn::Sign.eval(-3.0), -1.0);
        assert_eq!(ActFn::Sign.eval(0.0), 0.0);
        assert_eq!(ActFn::Sign.eval(2.0), 1.0);
        assert!(ActFn::Sign.eval(f32::NAN).is_nan());
        assert!(ActFn::Relu.eval(f32::NAN).is_nan());
        assert_eq!(ActFn::Sigmoid.eval(-200.0), 0.0);
        assert_eq!(ActFn::Sigmoid.eval(200.0), 1.0);
        assert_eq!(ActFn::Softplus.eval(100.0), 100.0);
        assert_eq!(ActFn::Softplus.eval(-200.0), 0.0);
        assert_eq!(ActFn::Reciprocal.eval(0.0), f32::INFINITY);
        assert!(ActFn::Log.eval(-1.0).is_nan());
        assert_eq!(ActFn::Exp.eval(f32::NEG_INFINITY), 0.0);
    }

    #[test]
    fn names_round_trip() {
        for f in ActFn::ALL {
            assert_eq!(ActFn::from_name(f.name()), Some(f));
        }
        assert_eq!(ActFn::from_name("identity"), Some(ActFn::Copy));
        assert_eq!(ActFn::from_name("nope"), None);
        for o in AluOp::ALL {
            assert_eq!(AluOp::from_name(o.name()), Some(o));
        }
        assert!(ActFn::Exp.in_activation_table());
        assert!(!ActFn::Floor.in_activation_table());
        assert_eq!(
            ActFn::Log.valid_range(),
            Some((2f32.powi(-64), 2f32.powi(64)))
        );
    }

    #[test]
    fn alu_arithmetic_and_predicates() {
        use AluOp::*;
        assert_eq!(Add.eval(1.5, 2.25), 3.75);
        assert_eq!(Subtract.eval(1.5, 2.25), -0.75);
        assert_eq!(Multiply.eval(-3.0, 0.5), -1.5);
        assert_eq!(Divide.eval(1.0, 4.0), 0.25);
        assert_eq!(Maximum.eval(-1.0, 2.0), 2.0);
        assert_eq!(Minimum.eval(-1.0, 2.0), -1.0);
        assert!(Maximum.eval(f32::NAN, 2.0).is_nan());
        assert_eq!(Power.eval(2.0, 10.0), 1024.0);
        assert_eq!(Bypass.eval(7.0, 3.0), 7.0);
        // NKI 0.7 `nl.abs_max` / `nl.abs_min`: the operand of larger / smaller magnitude, with
        // its sign; `y` on a tie (the doc's examples).
        assert_eq!(AbsMax.eval(-5.0, 3.0), -5.0);
        assert_eq!(AbsMax.eval(1.0, -1.0), -1.0);
        assert_eq!(AbsMin.eval(5.0, -3.0), -3.0);
        assert_eq!(AbsMin.eval(1.0, -1.0), -1.0);
        for (a, b) in [(1.0f32, 2.0f32), (2.0, 2.0), (3.0, 2.0)] {
            assert_eq!(Equal.eval(a, b), b2f(a == b));
            assert_eq!(NotEqual.eval(a, b), b2f(a != b));
            assert_eq!(Greater.eval(a, b), b2f(a > b));
            assert_eq!(GreaterEqual.eval(a, b), b2f(a >= b));
            assert_eq!(Less.eval(a, b), b2f(a < b));
            assert_eq!(LessEqual.eval(a, b), b2f(a <= b));
        }
        for (a, b) in [(0.0f32, 0.0f32), (0.0, 3.0), (-2.0, 0.0), (1.0, 1.0)] {
            let (p, q) = (a != 0.0, b != 0.0);
            assert_eq!(LogicalAnd.eval(a, b), b2f(p && q));
            assert_eq!(LogicalOr.eval(a, b), b2f(p || q));
            assert_eq!(LogicalXor.eval(a, b), b2f(p ^ q));
        }
    }

    #[test]
    fn alu_mod_and_fmod() {
        // NumPy: np.mod(-7, 3) = 2, np.fmod(-7, 3) = -1, np.mod(7, -3) = -2.
        assert_eq!(AluOp::Mod.eval(-7.0, 3.0), 2.0);
        assert_eq!(AluOp::Fmod.eval(-7.0, 3.0), -1.0);
        assert_eq!(AluOp::Mod.eval(7.0, -3.0), -2.0);
        assert_eq!(AluOp::Fmod.eval(7.0, -3.0), 1.0);
        assert_eq!(AluOp::Mod.eval(5.5, 2.0), 1.5);
        assert_eq!(AluOp::Mod.eval(6.0, 3.0), 0.0);
    }

    #[test]
    fn alu_bitvec() {
        use AluOp::*;
        assert_eq!(BitwiseAnd.eval(12.0, 10.0), 8.0);
        assert_eq!(BitwiseOr.eval(12.0, 10.0), 14.0);
        assert_eq!(BitwiseXor.eval(12.0, 10.0), 6.0);
        assert_eq!(BitwiseAnd.eval(-1.0, 255.0), 255.0);
        assert_eq!(LeftShift.eval(3.0, 4.0), 48.0);
        assert_eq!(RightShift.eval(48.0, 4.0), 3.0);
        // Logical shift of a negative int32.
        assert_eq!(
            RightShift.eval(-8.0, 1.0),
            (((-8i32) as u32) >> 1) as i32 as f32
        );
        // Width-exact: int8 wraps, uint8 shifts in zeros.
        assert_eq!(
            LeftShift.eval_typed(127.0, 1.0, DType::I8),
            (127i8 as u8).wrapping_shl(1) as i8 as f32
        );
        assert_eq!(
            RightShift.eval_typed(-2.0, 1.0, DType::I8),
            ((-2i8 as u8) >> 1) as i8 as f32
        );
        assert_eq!(BitwiseXor.eval_typed(200.0, 255.0, DType::U8), 55.0);
        assert!(BitwiseAnd.is_bitvec() && !Add.is_bitvec());
    }

    #[test]
    fn alu_reduce_tables() {
        for op in AluOp::ALL {
            assert_eq!(op.is_reducible(), op.reduce_identity().is_some(), "{op}");
        }
        // The identity is neutral for every reducible operator on a sample of values.
        for op in AluOp::ALL.into_iter().filter(|o| o.is_reducible()) {
            let id = op.reduce_identity().unwrap();
            for x in [0.0f32, 1.0, 5.0, -3.0] {
                let r = op.eval(id, x);
                let want = match op {
                    AluOp::Subtract => -x,
                    AluOp::LogicalAnd | AluOp::LogicalOr | AluOp::LogicalXor => b2f(x != 0.0),
                    _ => x,
                };
                assert_eq!(r, want, "{op} identity with {x}");
            }
        }
        assert!(!AluOp::Power.is_reducible());
        assert!(!AluOp::Equal.is_reducible());
    }
}
