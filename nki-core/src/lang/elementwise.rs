//! Element-wise ops: the shared binary machinery (broadcasting, promotion, engine choice,
//! records) and the `nl` binary arithmetic ops. Comparisons, logical and bitwise ops build on
//! [`alu_binary`]; unary math lives in `unary.rs`.

use super::checks;
use crate::context::{check, env, issue, raise};
use crate::dtype::DType;
use crate::error::{ErrorKind, NkiError, SourceLoc};
use crate::exec;
use crate::isa::out_tile;
use crate::math::AluOp;
use crate::record::{Engine, Instr, MemKind, Opcode};
use crate::tile::{Tile, TileRef};

/// An element-wise operand: a tile view or a scalar.
#[derive(Clone, Copy, Debug)]
pub enum Operand<'a> {
    /// A tile (or view).
    Tile(TileRef<'a>),
    /// A scalar; `float` tells NKI's weak-type promotion whether it was a float literal.
    Scalar {
        /// The value.
        value: f32,
        /// True for floats (promotes ints to fp32), false for ints.
        float: bool,
    },
}

impl From<f32> for Operand<'_> {
    fn from(v: f32) -> Self {
        Operand::Scalar {
            value: v,
            float: true,
        }
    }
}
impl From<f64> for Operand<'_> {
    fn from(v: f64) -> Self {
        Operand::Scalar {
            value: v as f32,
            float: true,
        }
    }
}
impl From<i32> for Operand<'_> {
    fn from(v: i32) -> Self {
        Operand::Scalar {
            value: v as f32,
            float: false,
        }
    }
}
impl<'a> From<&'a Tile> for Operand<'a> {
    fn from(t: &'a Tile) -> Self {
        Operand::Tile(t.view())
    }
}
impl<'a> From<TileRef<'a>> for Operand<'a> {
    fn from(t: TileRef<'a>) -> Self {
        Operand::Tile(t)
    }
}
impl<'a> From<&'a TileRef<'a>> for Operand<'a> {
    fn from(t: &'a TileRef<'a>) -> Self {
        Operand::Tile(*t)
    }
}

/// How an element-wise op is lowered: engine, opcode and the NKI name.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Lowering {
    pub(crate) engine: Engine,
    pub(crate) opcode: Opcode,
    pub(crate) api: &'static str,
    pub(crate) alu: Option<AluOp>,
}

/// Result dtype of a binary op under NKI promotion (or the explicit `dtype`).
pub(crate) fn result_dtype(x: &Operand, y: &Operand, dtype: Option<DType>) -> DType {
    if let Some(d) = dtype {
        return d;
    }
    match (x, y) {
        (Operand::Tile(a), Operand::Tile(b)) => DType::promote(a.dtype(), b.dtype()),
        (Operand::Tile(a), Operand::Scalar { float, .. })
        | (Operand::Scalar { float, .. }, Operand::Tile(a)) => {
            DType::promote_scalar(a.dtype(), *float)
        }
        _ => DType::F32,
    }
}

/// The shared binary element-wise op: checks operands (on-chip, partition rule, broadcast
/// compatibility; `partition_broadcast` allows a 1-partition operand), computes in f32, rounds
/// to the result dtype, writes a new SBUF tile and records one instruction.
#[track_caller]
pub(crate) fn binary_op(
    low: Lowering,
    x: Operand,
    y: Operand,
    dtype: Option<DType>,
    partition_broadcast: bool,
    f: impl Fn(f32, f32) -> f32,
    loc: SourceLoc,
) -> Tile {
    let op = low.api;
    let e = env(op, loc);
    let out_dtype = result_dtype(&x, &y, dtype);
    let tiles: Vec<(&str, TileRef)> = [("x", x), ("y", y)]
        .into_iter()
        .filter_map(|(n, o)| match o {
            Operand::Tile(t) => Some((n, t)),
            Operand::Scalar { .. } => None,
        })
        .collect();
    for (n, t) in &tiles {
        check(checks::operand(op, n, t), loc);
    }
    let out_dims: Vec<usize> = match (&x, &y) {
        (Operand::Tile(a), Operand::Tile(b)) => {
            if a.partitions() != b.partitions()
                && !(partition_broadcast && (a.partitions() == 1 || b.partitions() == 1))
            {
                check(checks::same_partitions(op, ("x", a), ("y", b)), loc);
            }
            match exec::broadcast_shape(a.shape(), b.shape()) {
                Some(s) => s,
                None => raise(
                    NkiError::new(
                        ErrorKind::ShapeMismatch,
                        op,
                        format!(
                            "operand shapes x{:?} and y{:?} of '{op}' do not match and cannot be broadcast",
                            a.shape(),
                            b.shape()
                        ),
                    ),
                    loc,
                ),
            }
        }
        (Operand::Tile(a), _) | (_, Operand::Tile(a)) => a.shape().to_vec(),
        _ => raise(
            NkiError::new(
                ErrorKind::InvalidArgument,
                op,
                "at least one operand must be a tile",
            ),
            loc,
        ),
    };
    let out = out_tile(op, MemKind::Sbuf, out_dtype, &out_dims, loc);
    let ov = out.view();
    issue(
        e,
        || {
            // Inputs are read in place; the output tile is fresh, so results go straight
            // into it.
            match (&x, &y) {
                (Operand::Tile(a), Operand::Tile(b)) if a.shape() == b.shape() => {
                    a.with_values(op, loc, |va| {
                        b.with_values(op, loc, |vb| {
                            ov.write_with(false, |o| {
                                o.extend(va.iter().zip(vb).map(|(&p, &q)| f(p, q)))
                            })
                        })
                    })
                }
                (Operand::Tile(a), Operand::Tile(b)) => {
                    let (va, vb) = (a.gather(op, loc), b.gather(op, loc));
                    ov.scatter(exec::binary(&va, a.shape(), &vb, b.shape(), &out_dims, &f))
                }
                (Operand::Tile(a), Operand::Scalar { value, .. }) => a.with_values(op, loc, |va| {
                    ov.write_with(false, |o| o.extend(va.iter().map(|&v| f(v, *value))))
                }),
                (Operand::Scalar { value, .. }, Operand::Tile(b)) => b.with_values(op, loc, |vb| {
                    ov.write_with(false, |o| o.extend(vb.iter().map(|&v| f(*value, v))))
                }),
                _ => unreachable!("checked above"),
            }
        },
        || {
            let first = tiles[0].1;
            Instr {
                partitions: out_dims[0] as u32,
                free: ov.free_size() as u32,
                inputs: tiles.len() as u8,
                in_dtype: first.dtype(),
                out_dtype,
                psum: tiles.iter().any(|(_, t)| t.mem() == MemKind::Psum),
                contiguous: tiles.iter().all(|(_, t)| t.ap.inner_stride() == 1),
                reads: tiles.iter().map(|(_, t)| t.region()).collect(),
                writes: vec![ov.region()],
                alu: low.alu,
                ..Instr::new(low.engine, low.opcode, op, loc)
            }
        },
    );
    if !e.executes {
        ov.mark_written();
    }
    out
}

fn vector(x: &Operand, y: &Operand, api: &'static str) -> Lowering {
    let both = matches!((x, y), (Operand::Tile(_), Operand::Tile(_)));
    Lowering {
        engine: Engine::Vector,
        opcode: if both {
            Opcode::TensorTensor
        } else {
            Opcode::TensorScalar
        },
        api,
        alu: None,
    }
}

/// The engine NKI's classic engine table picks for ALU operator `op` on operands `x`, `y`
/// producing `out` (nki.api.shared "supported math operators"): `power` and 32-bit integer
/// add/subtract/multiply run on GpSimdE, everything else on VectorE. GpSimdE cannot read
/// PSUM, so a PSUM operand keeps the op on VectorE.
pub(crate) fn alu_lowering(
    op: AluOp,
    x: &Operand,
    y: &Operand,
    out: DType,
    api: &'static str,
) -> Lowering {
    let mut low = vector(x, y, api);
    low.alu = Some(op);
    let in_psum = [x, y]
        .iter()
        .any(|o| matches!(o, Operand::Tile(t) if t.mem() == MemKind::Psum));
    let int32 = matches!(out, DType::I32 | DType::U32)
        && matches!(op, AluOp::Add | AluOp::Subtract | AluOp::Multiply);
    if (op == AluOp::Power || int32) && !in_psum {
        low.engine = Engine::GpSimd;
    }
    low
}

/// An `nl` binary ALU op with NKI broadcasting (partition broadcast allowed): promotion (or
/// `dtype`), engine choice ([`alu_lowering`]), bitvec ops at the operand width.
#[track_caller]
pub(crate) fn alu_binary(
    op: AluOp,
    api: &'static str,
    x: Operand,
    y: Operand,
    dtype: Option<DType>,
    partition_broadcast: bool,
    loc: SourceLoc,
) -> Tile {
    let promoted = result_dtype(&x, &y, None);
    let out = dtype.unwrap_or(promoted);
    let low = alu_lowering(op, &x, &y, out, api);
    // The common arithmetic ops get their own monomorphic loop (it vectorises); the rest go
    // through the generic evaluator.
    let pb = partition_broadcast;
    match op {
        AluOp::Add => binary_op(low, x, y, Some(out), pb, |a, b| a + b, loc),
        AluOp::Subtract => binary_op(low, x, y, Some(out), pb, |a, b| a - b, loc),
        AluOp::Multiply => binary_op(low, x, y, Some(out), pb, |a, b| a * b, loc),
        _ => binary_op(
            low,
            x,
            y,
            Some(out),
            pb,
            move |a, b| op.eval_typed(a, b, promoted),
            loc,
        ),
    }
}

macro_rules! binary_fns {
    ($($(#[$doc:meta])* $name:ident => $api:literal, $op:expr;)*) => {$(
        $(#[$doc])*
        #[track_caller]
        pub fn $name<'a>(x: impl Into<Operand<'a>>, y: impl Into<Operand<'a>>) -> Tile {
            alu_binary($op, $api, x.into(), y.into(), None, true, SourceLoc::caller())
        }
    )*};
}

binary_fns! {
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
    /// Element-wise `x ** y` (NKI `nl.power`; GpSimd on hardware).
    power => "nl.power", AluOp::Power;
}

/// Operator form of binary ops: same as the `nl` function but NKI's operators do not
/// broadcast along partitions.
#[track_caller]
pub(crate) fn operator<'a>(
    api: &'static str,
    x: Operand<'a>,
    y: Operand<'a>,
    f: fn(f32, f32) -> f32,
) -> Tile {
    binary_op(
        vector(&x, &y, api),
        x,
        y,
        None,
        false,
        f,
        SourceLoc::caller(),
    )
}
