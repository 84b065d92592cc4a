//! Element-wise ops: the shared binary machinery (broadcasting, promotion, engine choice,
//! records) and the `nl` binary arithmetic ops. Comparisons, logical and bitwise ops build on
//! [`alu_binary`]; unary math lives in `unary.rs`.

use crate::dtype::DType;
use crate::error::ErrorKind;
use crate::exec;
use crate::isa::base::{alu_engine, result_dtype, same_partitions, Dst, UnnamedOps};
use crate::isa::op::Op;
use crate::isa::vector::tensor_tensor_to;
use crate::isa::Operand;
use crate::math::AluOp;
use crate::record::{Engine, MemKind, Opcode};
use crate::tile::{Tile, TileRef};

/// How an element-wise op is lowered: engine, opcode and ALU operator.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Lowering {
    pub(crate) engine: Engine,
    pub(crate) opcode: Opcode,
    pub(crate) alu: Option<AluOp>,
    /// The dtype the ALU operator computes at when it computes in integers (its width and
    /// signedness); `None`: the promotion of the operands.
    pub(crate) int_width: Option<DType>,
    /// A `tensor_scalar` on VectorE by default: its operator, for the compiler's engine
    /// choice ([`Rec::unnamed_engine`](crate::isa::base::Rec::unnamed_engine)).
    pub(crate) unnamed: UnnamedOps,
}

/// The shared binary element-wise op: checks operands (on-chip, partition rule, broadcast
/// compatibility; `partition_broadcast` allows a 1-partition operand), computes in f32, rounds
/// to the result dtype, writes a new SBUF tile and records one instruction. When the
/// lowering's ALU operator computes in native integer arithmetic on its engine
/// ([`AluOp::is_integer_on`]), it does so exactly ([`exec::int_op`]) instead of calling `f`.
#[track_caller]
pub(crate) fn binary_op(
    ins: &Op,
    low: Lowering,
    x: Operand,
    y: Operand,
    dtype: Option<DType>,
    partition_broadcast: bool,
    f: impl Fn(f32, f32) -> f32,
) -> Tile {
    let (op, _loc) = (ins.api, ins.loc);
    let out_dtype = result_dtype(&x, &y, dtype);
    let tiles: Vec<(&str, TileRef)> = [("x", x), ("y", y)]
        .into_iter()
        .filter_map(|(n, o)| match o {
            Operand::Tile(t) => Some((n, t)),
            Operand::Scalar { .. } => None,
        })
        .collect();
    for (n, t) in &tiles {
        ins.operand(n, t);
    }
    let out_dims: Vec<usize> = match (&x, &y) {
        (Operand::Tile(a), Operand::Tile(b)) => {
            if a.partitions() != b.partitions()
                && !(partition_broadcast && (a.partitions() == 1 || b.partitions() == 1))
            {
                ins.check(same_partitions(op, ("x", a), ("y", b)));
            }
            match exec::broadcast_shape(a.shape(), b.shape()) {
                Some(s) => s,
                None => ins.fail(
                    ErrorKind::ShapeMismatch,
                    format!(
                        "operand shapes x{:?} and y{:?} of '{op}' do not match and cannot be broadcast",
                        a.shape(),
                        b.shape()
                    ),
                ),
            }
        }
        (Operand::Tile(a), _) | (_, Operand::Tile(a)) => a.shape().to_vec(),
        _ => ins.fail(
            ErrorKind::InvalidArgument,
            "at least one operand must be a tile",
        ),
    };
    if let (Operand::Tile(a), Operand::Tile(b), Some(op)) = (x, y, low.alu) {
        // Two tiles of one shape: the tensor_tensor instruction itself (the builder picks the
        // engine). Left on the path below: two PSUM operands (the instruction takes one), and
        // a PSUM operand of an operator the instruction's table puts on GpSimdE, which
        // cannot read PSUM (nl keeps it on VectorE).
        let one_shape = a.shape() == b.shape() && low.int_width.is_none();
        let psum = [a, b].iter().filter(|t| t.mem() == MemKind::Psum).count();
        let table = alu_engine(op, DType::promote(a.dtype(), b.dtype()), false);
        if one_shape && (psum == 0 || (psum == 1 && table == Engine::Vector)) {
            return tensor_tensor_to(ins, Dst::New(Some(out_dtype)), a, b, op, None).tile();
        }
    }
    let out = ins.alloc(MemKind::Sbuf, out_dtype, &out_dims);
    let ov = out.view();
    let compute = low.int_width.unwrap_or(result_dtype(&x, &y, None));
    let integer = low.alu.filter(|a| a.is_integer_on(low.engine, compute));
    ins.issue(
        &[&ov],
        || match integer {
            Some(alu) => {
                let g = exec::int_op(alu, x.int_dtype(), y.int_dtype(), compute, out_dtype);
                execute(ins, (&x, &y), &ov, &out_dims, true, g)
            }
            None => execute(ins, (&x, &y), &ov, &out_dims, false, &f),
        },
        || {
            let first = tiles[0].1;
            ins.record_as(op, low.engine, low.opcode)
                .size(out_dims[0] as u32, ov.free_size() as u32)
                .inputs(tiles.len() as u8)
                .dtypes(first.dtype(), out_dtype)
                .over(tiles.iter().map(|(_, t)| t), &ov)
                .alu(low.alu)
                .unnamed_engine(ins.target(), low.unnamed)
                .done()
        },
    );
    out
}

/// Computes `f` element-wise over operands `x`, `y` (broadcast to `out_dims`) into the fresh
/// output view `ov`: on values rounded to its dtype, or on slots as they are when `slots`
/// (`f` then maps slots to slots, see [`exec::int_op`]). Inputs are read in place, row by
/// row (a tile loaded from a kernel input still in the tensor's rows); the output tile is
/// fresh, so results go straight into it.
fn execute(
    ins: &Op,
    (x, y): (&Operand, &Operand),
    ov: &TileRef,
    out_dims: &[usize],
    slots: bool,
    f: impl Fn(f32, f32) -> f32,
) {
    let (op, loc) = (ins.api, ins.loc);
    let rows = |t: &TileRef, g: &mut dyn FnMut(crate::tile::Rows)| {
        if slots {
            t.with_slot_rows(op, loc, &mut *g)
        } else {
            t.with_rows(op, loc, &mut *g)
        }
    };
    let write = |fill: &mut dyn FnMut(&mut Vec<f32>)| {
        if slots {
            ov.write_slots(|o| fill(o))
        } else {
            ov.write_with(false, |o| fill(o))
        }
    };
    match (x, y) {
        (Operand::Tile(a), Operand::Tile(b)) if a.shape() == b.shape() => rows(a, &mut |ra| {
            rows(b, &mut |rb| {
                write(&mut |o| {
                    for (va, vb) in ra.iter().zip(rb.iter()) {
                        o.extend(va.iter().zip(vb).map(|(&p, &q)| f(p, q)));
                    }
                })
            })
        }),
        (Operand::Tile(a), Operand::Tile(b)) => {
            let read = |t: &TileRef| {
                if slots {
                    t.gather_slots(op, loc)
                } else {
                    ins.read(t)
                }
            };
            let (va, vb) = (read(a), read(b));
            let r = exec::binary(&va, a.shape(), &vb, b.shape(), out_dims, &f);
            if slots {
                ov.scatter_slots(r)
            } else {
                ov.scatter(r)
            }
        }
        (Operand::Tile(a), Operand::Scalar { value, float }) => {
            let c = Operand::scalar_slot(*value, *float, slots);
            rows(a, &mut |ra| {
                write(&mut |o| ra.iter().for_each(|r| o.extend(r.iter().map(|&v| f(v, c)))))
            })
        }
        (Operand::Scalar { value, float }, Operand::Tile(b)) => {
            let c = Operand::scalar_slot(*value, *float, slots);
            rows(b, &mut |rb| {
                write(&mut |o| rb.iter().for_each(|r| o.extend(r.iter().map(|&v| f(c, v)))))
            })
        }
        _ => unreachable!("checked above"),
    }
}

/// VectorE lowering of a binary op: `tensor_tensor` for two full tiles; `tensor_scalar` (one
/// pass over N, hardware.md §2.3) for a scalar operand or a `[P, 1]` tile broadcast along the
/// free dimension, as the compiler lowers it.
fn vector(x: &Operand, y: &Operand) -> Lowering {
    let free_broadcast = |a: &TileRef, b: &TileRef| a.free_size() == 1 && b.free_size() > 1;
    let both = match (x, y) {
        (Operand::Tile(a), Operand::Tile(b)) => !free_broadcast(a, b) && !free_broadcast(b, a),
        _ => false,
    };
    Lowering {
        engine: Engine::Vector,
        opcode: if both {
            Opcode::TensorTensor
        } else {
            Opcode::TensorScalar
        },
        alu: None,
        int_width: None,
        unnamed: None,
    }
}

/// The lowering of ALU operator `op` on operands `x`, `y`: the engine is [`alu_engine`]'s
/// choice for the promoted operand dtype (a PSUM operand keeps the op on VectorE).
pub(crate) fn alu_lowering(op: AluOp, x: &Operand, y: &Operand) -> Lowering {
    let mut low = vector(x, y);
    low.alu = Some(op);
    let in_psum = [x, y]
        .iter()
        .any(|o| matches!(o, Operand::Tile(t) if t.mem() == MemKind::Psum));
    low.engine = alu_engine(op, result_dtype(x, y, None), in_psum);
    // An nl op names no engine: a tensor_scalar the table puts on VectorE goes where the
    // compiler puts it.
    if low.engine == Engine::Vector && low.opcode == Opcode::TensorScalar {
        low.unnamed = Some((op, None));
    }
    low
}

/// An `nl` binary ALU op with NKI broadcasting (partition broadcast allowed): promotion (or
/// `dtype`), engine choice ([`alu_lowering`]), bitvec ops at the operand width.
#[track_caller]
pub(crate) fn alu_binary(
    ins: &Op,
    op: AluOp,
    x: Operand,
    y: Operand,
    dtype: Option<DType>,
    partition_broadcast: bool,
) -> Tile {
    let promoted = result_dtype(&x, &y, None);
    let out = dtype.unwrap_or(promoted);
    let low = alu_lowering(op, &x, &y);
    // The common arithmetic ops get their own monomorphic loop (it vectorises); the rest go
    // through the generic evaluator.
    let pb = partition_broadcast;
    match op {
        AluOp::Add => binary_op(ins, low, x, y, Some(out), pb, |a, b| a + b),
        AluOp::Subtract => binary_op(ins, low, x, y, Some(out), pb, |a, b| a - b),
        AluOp::Multiply => binary_op(ins, low, x, y, Some(out), pb, |a, b| a * b),
        _ => binary_op(ins, low, x, y, Some(out), pb, move |a, b| {
            op.eval_typed(a, b, promoted)
        }),
    }
}
