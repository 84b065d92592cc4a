//! `nisa::scalar_alu` (NKI 0.8 `nki.isa.scalar_alu(data1, data2, op)`): one binary integer
//! operation on two scalars in the sequencers' registers, and the operators of [`NkiScalar`]
//! that are the same call (`a + b` is `scalar_alu(a, b, AluOp::Add)`).
//!
//! The rules, from NKI 0.8's `scalar_alu` and `NkiScalar` pages:
//! - arithmetic (`Add`, `Subtract`, `Multiply`, `Divide` rounded toward zero, `Fmod` with the
//!   sign of `data1`, `Maximum`, `Minimum`) keeps the operands' dtype and wraps at its width;
//! - comparisons (`Less`, `LessEqual`, `Greater`, `GreaterEqual`, `Equal`, `NotEqual`) give an
//!   int32 scalar holding 1 or 0 (unsigned for uint32 operands);
//! - int64 scalars take only `Add`, `Subtract` and `Multiply`;
//! - the operands have one dtype (an integer operand takes the scalar's); two integers are
//!   combined while tracing (no device operation), as two Python ints are;
//! - any other operator is an error listing the supported ones.
//!
//! A divisor of zero (in `Divide` or `Fmod`) is an error naming the call and its line when
//! the value is known [A: the documentation gives no result for it]. The operation leaves no
//! record of its own (see [`NkiScalar`]: register arithmetic is folded into the instruction
//! that takes the value); the result derives from both operands' registers, so what takes it
//! waits for the loads both came from.

use super::nki_scalar::{IntoScalar, NkiScalar, ScalarType};
use crate::context::raise;
use crate::error::{ErrorKind, NkiError, SourceLoc};
use crate::math::AluOp;

/// The arithmetic operators `scalar_alu` takes.
const ARITHMETIC: [AluOp; 7] = [
    AluOp::Add,
    AluOp::Subtract,
    AluOp::Multiply,
    AluOp::Divide,
    AluOp::Fmod,
    AluOp::Maximum,
    AluOp::Minimum,
];

/// The comparisons `scalar_alu` takes (an int32 0/1 result).
const COMPARISONS: [AluOp; 6] = [
    AluOp::Less,
    AluOp::LessEqual,
    AluOp::Greater,
    AluOp::GreaterEqual,
    AluOp::Equal,
    AluOp::NotEqual,
];

/// The operators an int64 scalar takes.
const INT64_OPS: [AluOp; 3] = [AluOp::Add, AluOp::Subtract, AluOp::Multiply];

/// `op(data1, data2)` on two scalars (NKI 0.8 `nisa.scalar_alu(data1, data2, op)`; see the
/// module docs for the operators and dtypes). Each operand is an [`NkiScalar`] or an integer.
///
/// ```
/// use nki_core::nisa::{scalar_alu, NkiScalar};
/// use nki_core::nl::AluOp;
/// let a = NkiScalar::from(-17);
/// assert_eq!(scalar_alu(a, 4, AluOp::Divide).value(), Some(-4));
/// assert_eq!(scalar_alu(a, 4, AluOp::Fmod).value(), Some(-1));
/// assert_eq!(scalar_alu(a, 4, AluOp::Less).value(), Some(1));
/// ```
#[track_caller]
pub fn scalar_alu(data1: impl IntoScalar, data2: impl IntoScalar, op: AluOp) -> NkiScalar {
    let loc = SourceLoc::caller();
    alu_at(
        "nisa.scalar_alu",
        loc,
        data1.into_scalar(loc),
        data2.into_scalar(loc),
        op,
    )
}

/// [`scalar_alu`] at `loc` under the name `api` (an operator's call names `scalar_alu`).
pub(crate) fn alu_at(
    api: &'static str,
    loc: SourceLoc,
    a: NkiScalar,
    b: NkiScalar,
    op: AluOp,
) -> NkiScalar {
    let fail = |kind: ErrorKind, msg: String| -> ! { raise(NkiError::new(kind, api, msg), loc) };
    let compare = COMPARISONS.contains(&op);
    if !compare && !ARITHMETIC.contains(&op) {
        fail(
            ErrorKind::InvalidArgument,
            format!(
                "op '{op}' is not a scalar operation: scalar_alu takes add, subtract, \
                 multiply, divide, fmod, maximum, minimum and the comparisons less, \
                 less_equal, greater, greater_equal, equal, not_equal"
            ),
        );
    }
    let (a, b, ty, engine) = a.unify(b, api, loc);
    let literal = a.is_literal() && b.is_literal();
    if ty == ScalarType::Int64 && !literal && !INT64_OPS.contains(&op) {
        fail(
            ErrorKind::DType,
            format!(
                "op '{op}' on int64 scalars: int64 scalars take only add, subtract and multiply"
            ),
        );
    }
    let value = match (a.value(), b.value()) {
        (Some(x), Some(y)) => {
            if matches!(op, AluOp::Divide | AluOp::Fmod) && y == 0 {
                fail(
                    ErrorKind::InvalidArgument,
                    format!("op '{op}' of {x} by zero"),
                );
            }
            Some(apply(op, x, y))
        }
        _ => None,
    };
    // Two integers combine at compile time (a Python int's arithmetic: no wrapping); a
    // comparison gives an int32 0/1; device arithmetic wraps at the dtype's width.
    let ty = if literal || compare {
        ScalarType::Int32
    } else {
        ty
    };
    let value = value.map(|v| match literal && !compare {
        true => i64::try_from(v).unwrap_or_else(|_| {
            fail(
                ErrorKind::InvalidArgument,
                format!("op '{op}' of two integers gives {v}, beyond 64 bits"),
            )
        }),
        false => ty.wrap(v),
    });
    NkiScalar::derived(a, b, value, ty, engine)
}

/// `op(x, y)` exactly (before wrapping to the dtype's width); `y` is non-zero for divide and
/// fmod, and `op` one of the scalar operators.
fn apply(op: AluOp, x: i64, y: i64) -> i128 {
    let (x, y) = (i128::from(x), i128::from(y));
    match op {
        AluOp::Add => x + y,
        AluOp::Subtract => x - y,
        AluOp::Multiply => x * y,
        // Rust's integer division truncates toward zero and `%` takes the dividend's sign.
        AluOp::Divide => x / y,
        AluOp::Fmod => x % y,
        AluOp::Maximum => x.max(y),
        AluOp::Minimum => x.min(y),
        AluOp::Less => i128::from(x < y),
        AluOp::LessEqual => i128::from(x <= y),
        AluOp::Greater => i128::from(x > y),
        AluOp::GreaterEqual => i128::from(x >= y),
        AluOp::Equal => i128::from(x == y),
        AluOp::NotEqual => i128::from(x != y),
        _ => unreachable!("scalar_alu checked its operator"),
    }
}

macro_rules! scalar_op {
    ($tr:ident, $m:ident, $op:expr) => {
        impl<R: IntoScalar> std::ops::$tr<R> for NkiScalar {
            type Output = NkiScalar;
            #[track_caller]
            fn $m(self, rhs: R) -> NkiScalar {
                let loc = SourceLoc::caller();
                alu_at("nisa.scalar_alu", loc, self, rhs.into_scalar(loc), $op)
            }
        }
        impl<R: IntoScalar> std::ops::$tr<R> for &NkiScalar {
            type Output = NkiScalar;
            #[track_caller]
            fn $m(self, rhs: R) -> NkiScalar {
                let loc = SourceLoc::caller();
                alu_at("nisa.scalar_alu", loc, *self, rhs.into_scalar(loc), $op)
            }
        }
        impl std::ops::$tr<NkiScalar> for i32 {
            type Output = NkiScalar;
            #[track_caller]
            fn $m(self, rhs: NkiScalar) -> NkiScalar {
                let loc = SourceLoc::caller();
                alu_at("nisa.scalar_alu", loc, self.into_scalar(loc), rhs, $op)
            }
        }
    };
}
scalar_op!(Add, add, AluOp::Add);
scalar_op!(Sub, sub, AluOp::Subtract);
scalar_op!(Mul, mul, AluOp::Multiply);
scalar_op!(Div, div, AluOp::Divide);
scalar_op!(Rem, rem, AluOp::Fmod);

impl std::ops::Neg for NkiScalar {
    type Output = NkiScalar;
    /// `0 - self` in the scalar's dtype (wrapping).
    #[track_caller]
    fn neg(self) -> NkiScalar {
        let loc = SourceLoc::caller();
        alu_at(
            "nisa.scalar_alu",
            loc,
            0.into_scalar(loc),
            self,
            AluOp::Subtract,
        )
    }
}

macro_rules! comparison {
    ($($(#[$doc:meta])* $m:ident => $op:expr;)*) => {
        impl NkiScalar {
            $(
                $(#[$doc])*
                #[track_caller]
                pub fn $m(&self, rhs: impl IntoScalar) -> NkiScalar {
                    let loc = SourceLoc::caller();
                    alu_at("nisa.scalar_alu", loc, *self, rhs.into_scalar(loc), $op)
                }
            )*
        }
    };
}
comparison! {
    /// `self < rhs` as an int32 0/1 scalar (`scalar_alu(self, rhs, AluOp::Less)`).
    less => AluOp::Less;
    /// `self <= rhs` as an int32 0/1 scalar.
    less_equal => AluOp::LessEqual;
    /// `self > rhs` as an int32 0/1 scalar.
    greater => AluOp::Greater;
    /// `self >= rhs` as an int32 0/1 scalar.
    greater_equal => AluOp::GreaterEqual;
    /// `self == rhs` as an int32 0/1 scalar.
    equal => AluOp::Equal;
    /// `self != rhs` as an int32 0/1 scalar.
    not_equal => AluOp::NotEqual;
    /// The larger of the two (`scalar_alu(self, rhs, AluOp::Maximum)`).
    maximum => AluOp::Maximum;
    /// The smaller of the two (`scalar_alu(self, rhs, AluOp::Minimum)`).
    minimum => AluOp::Minimum;
}
