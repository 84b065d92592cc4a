//! Comparisons, logical and bitwise ops, `fmod`/`mod`, `where`, and the general
//! [`binary`] ALU op.
//!
//! Comparisons and logical ops produce 1/0 and default to a `bool` result; bitwise ops and
//! shifts work on integer bit patterns and reject float operands (VectorE bitvec ops).

use super::elementwise::{alu_binary, alu_lowering, binary_op};
use crate::dtype::DType;
use crate::error::ErrorKind;
use crate::exec;
use crate::isa::base::result_dtype;
use crate::isa::op::Op;
use crate::isa::Operand;
use crate::math::AluOp;
use crate::record::{Engine, MemKind, Opcode};
use crate::tile::{Tile, TileRef};

/// Raises a DType error when a bitvec op gets a float operand.
fn ints_only(ins: &Op, op: AluOp, ops: &[(&str, &Operand)]) {
    let api = ins.api;
    for (name, o) in ops {
        let bad = match o {
            Operand::Tile(t) => t.dtype().is_float().then(|| t.dtype().to_string()),
            Operand::Scalar { float: true, .. } => Some("float scalar".to_string()),
            Operand::Scalar { .. } => None,
        };
        if let Some(d) = bad {
            ins.fail(ErrorKind::DType, format!(
                        "'{op}' is a bitvec operator on integer bit patterns; operand '{name}' of '{}' is {d} (cast with astype or use an integer dtype)",
                        api.strip_prefix("nl.").unwrap_or(api)
                    ));
        }
    }
}

/// Applies ALU operator `op` element-wise with NKI broadcasting (partition broadcast allowed)
/// and type promotion; `dtype` overrides the result dtype (default: bool for comparisons and
/// logical ops, the promoted dtype otherwise). Bitvec ops need integer operands.
#[track_caller]
pub fn binary<'a>(
    op: AluOp,
    x: impl Into<Operand<'a>>,
    y: impl Into<Operand<'a>>,
    dtype: Option<DType>,
) -> Tile {
    binary_at(&Op::begin("nl.binary"), op, x.into(), y.into(), dtype)
}

/// The `nl` binary ALU op `op` as op `ins`: bitvec operators need integer operands;
/// predicates default to a bool result.
fn binary_at(ins: &Op, op: AluOp, x: Operand, y: Operand, dtype: Option<DType>) -> Tile {
    crate::isa::alu_rules::binary(ins, "op", op);
    if op.is_bitvec() {
        ints_only(ins, op, &[("x", &x), ("y", &y)]);
    }
    let dtype = dtype.or(op.is_predicate().then_some(DType::Bool));
    alu_binary(ins, op, x, y, dtype, true)
}

macro_rules! alu_fns {
    ($($(#[$doc:meta])* $name:ident => $api:literal, $op:expr;)*) => {$(
        $(#[$doc])*
        #[track_caller]
        pub fn $name<'a>(x: impl Into<Operand<'a>>, y: impl Into<Operand<'a>>) -> Tile {
            binary_at(&Op::begin($api), $op, x.into(), y.into(), None)
        }
    )*};
}

alu_fns! {
    /// Element-wise `x + y` with NKI broadcasting (NKI `nl.add`).
    add => "nl.add", AluOp::Add;
    /// Element-wise `x - y` (NKI `nl.subtract`).
    subtract => "nl.subtract", AluOp::Subtract;
    /// Element-wise `x * y` (NKI `nl.multiply`).
    multiply => "nl.multiply", AluOp::Multiply;
    /// Element-wise `x / y` (NKI `nl.divide`).
    divide => "nl.divide", AluOp::Divide;
    /// Element-wise maximum; NaN propagates (NKI `nl.maximum`).
    maximum => "nl.maximum", AluOp::Maximum;
    /// Element-wise minimum; NaN propagates (NKI `nl.minimum`).
    minimum => "nl.minimum", AluOp::Minimum;
    /// The element of larger magnitude, with its sign (`y` on a tie) (NKI 0.7 `nl.abs_max`;
    /// NeuronCore-v4 only, VectorE).
    abs_max => "nl.abs_max", AluOp::AbsMax;
    /// The element of smaller magnitude, with its sign (`y` on a tie) (NKI 0.7 `nl.abs_min`;
    /// NeuronCore-v4 only, VectorE).
    abs_min => "nl.abs_min", AluOp::AbsMin;
    /// Element-wise `x ** y` (NKI `nl.power`; GpSimd on hardware).
    power => "nl.power", AluOp::Power;
    /// `x == y` element-wise, as a bool tile (NKI `nl.equal`).
    equal => "nl.equal", AluOp::Equal;
    /// `x != y` element-wise, as a bool tile (NKI `nl.not_equal`).
    not_equal => "nl.not_equal", AluOp::NotEqual;
    /// `x > y` element-wise, as a bool tile (NKI `nl.greater`).
    greater => "nl.greater", AluOp::Greater;
    /// `x >= y` element-wise, as a bool tile (NKI `nl.greater_equal`).
    greater_equal => "nl.greater_equal", AluOp::GreaterEqual;
    /// `x < y` element-wise, as a bool tile (NKI `nl.less`).
    less => "nl.less", AluOp::Less;
    /// `x <= y` element-wise, as a bool tile (NKI `nl.less_equal`).
    less_equal => "nl.less_equal", AluOp::LessEqual;
    /// Both non-zero, as a bool tile (NKI `nl.logical_and`).
    logical_and => "nl.logical_and", AluOp::LogicalAnd;
    /// Either non-zero, as a bool tile (NKI `nl.logical_or`).
    logical_or => "nl.logical_or", AluOp::LogicalOr;
    /// Exactly one non-zero, as a bool tile (NKI `nl.logical_xor`).
    logical_xor => "nl.logical_xor", AluOp::LogicalXor;
    /// Bitwise AND of integer tiles (NKI `nl.bitwise_and`).
    bitwise_and => "nl.bitwise_and", AluOp::BitwiseAnd;
    /// Bitwise OR of integer tiles (NKI `nl.bitwise_or`).
    bitwise_or => "nl.bitwise_or", AluOp::BitwiseOr;
    /// Bitwise XOR of integer tiles (NKI `nl.bitwise_xor`).
    bitwise_xor => "nl.bitwise_xor", AluOp::BitwiseXor;
    /// `x << y` on integer tiles, wrapping at the dtype's width (NKI `nl.left_shift`).
    left_shift => "nl.left_shift", AluOp::LeftShift;
    /// Logical `x >> y` on integer tiles (NKI `nl.right_shift`; no arithmetic shift exists).
    right_shift => "nl.right_shift", AluOp::RightShift;
    /// Truncated remainder, the sign of `x` (NKI `nl.fmod`).
    fmod => "nl.fmod", AluOp::Fmod;
    /// Floored remainder, the sign of `y` (NKI `nl.mod`, NumPy `mod`).
    mod_ => "nl.mod", AluOp::Mod;
}

/// Logical NOT: 1 where `x` is zero (NKI `nl.logical_not`; bool result).
#[track_caller]
pub fn logical_not<'a>(x: impl Into<TileRef<'a>>) -> Tile {
    alu_binary(
        &Op::begin("nl.logical_not"),
        AluOp::Equal,
        Operand::Tile(x.into()),
        Operand::Scalar {
            value: 0.0,
            float: false,
        },
        Some(DType::Bool),
        true,
    )
}

/// Bitwise NOT of an integer tile (NKI `nl.invert`): XOR with all ones at the dtype's width.
#[track_caller]
pub fn invert<'a>(x: impl Into<TileRef<'a>>) -> Tile {
    let ins = Op::begin("nl.invert");
    let x = Operand::Tile(x.into());
    let ones = Operand::Scalar {
        value: -1.0,
        float: false,
    };
    ints_only(&ins, AluOp::BitwiseXor, &[("x", &x)]);
    let dt = match x {
        Operand::Tile(t) => t.dtype(),
        Operand::Scalar { .. } => unreachable!("x is a tile"),
    };
    // XOR with all ones at x's own width (not the int32 a weak scalar would promote to).
    let mut low = alu_lowering(AluOp::BitwiseXor, &x, &ones);
    low.int_width = Some(dt);
    binary_op(&ins, low, x, ones, Some(dt), true, move |a, _| {
        AluOp::BitwiseXor.eval_typed(a, -1.0, dt)
    })
}

/// Element-wise select: `x` where `cond` is non-zero, else `y` (NKI `nl.where`). `x` and `y`
/// are tiles or scalars; all three broadcast (NumPy rules, partition broadcast allowed). The
/// result dtype is the promotion of `x` and `y`. One VectorE `Select` instruction.
#[track_caller]
pub fn where_<'a, 'c>(
    cond: impl Into<TileRef<'c>>,
    x: impl Into<Operand<'a>>,
    y: impl Into<Operand<'a>>,
) -> Tile {
    const API: &str = "nl.where";
    let ins = Op::begin(API);
    let cond: TileRef = cond.into();
    let (x, y) = (x.into(), y.into());
    let out_dtype = result_dtype(&x, &y, None);
    let mut tiles: Vec<(&str, TileRef)> = vec![("condition", cond)];
    for (n, o) in [("x", &x), ("y", &y)] {
        if let Operand::Tile(t) = o {
            tiles.push((n, *t));
        }
    }
    for (n, t) in &tiles {
        ins.operand(n, t);
    }
    let mut out_dims = cond.shape().to_vec();
    for (n, t) in &tiles[1..] {
        if t.partitions() != cond.partitions() && t.partitions() != 1 && cond.partitions() != 1 {
            ins.same_partitions(("condition", &cond), (n, t));
        }
        out_dims = match exec::broadcast_shape(&out_dims, t.shape()) {
            Some(s) => s,
            None => ins.fail(ErrorKind::ShapeMismatch, format!(
                        "operand shapes condition{:?} and {n}{:?} of 'where' do not match and cannot be broadcast",
                        cond.shape(),
                        t.shape()
                    )),
        };
    }
    let out = ins.alloc(MemKind::Sbuf, out_dtype, &out_dims);
    let ov = out.view();
    ins.issue(
        &[&ov],
        || {
            // Selecting moves values: when the result holds bit patterns (int32/uint32) and
            // every selected tile has its dtype, slots are selected, so values stay exact.
            let slots =
                out_dtype.holds_bits() && tiles[1..].iter().all(|(_, t)| t.dtype() == out_dtype);
            let expand = |t: &TileRef, slots: bool| {
                let v = if slots {
                    t.gather_slots(API, ins.loc)
                } else {
                    ins.read(t)
                };
                if t.shape() == out_dims.as_slice() {
                    v
                } else {
                    let zeros = vec![0.0; out_dims.iter().product()];
                    exec::binary(&zeros, &out_dims, &v, t.shape(), &out_dims, |_, b| b)
                }
            };
            let c = expand(&cond, false);
            let pick = |o: &Operand| match o {
                Operand::Tile(t) => expand(t, slots),
                Operand::Scalar { value, .. } if slots => {
                    vec![out_dtype.slot_of_int(*value as i64); c.len()]
                }
                Operand::Scalar { value, .. } => vec![*value as f32; c.len()],
            };
            let (xv, yv) = (pick(&x), pick(&y));
            let vals = c
                .iter()
                .zip(xv.iter().zip(&yv))
                .map(|(&c, (&a, &b))| if c != 0.0 && !c.is_nan() { a } else { b })
                .collect();
            if slots {
                ov.scatter_slots(vals)
            } else {
                ov.scatter(vals)
            }
        },
        || {
            ins.record_as(API, Engine::Vector, Opcode::Select)
                .size(out_dims[0] as u32, ov.free_size() as u32)
                .inputs(tiles.len().min(2) as u8)
                .dtypes(out_dtype, out_dtype)
                .over(tiles.iter().map(|(_, t)| t), &ov)
                .done()
        },
    );
    out
}
