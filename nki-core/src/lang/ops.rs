//! Operator overloads on run-time-shaped tiles: `+ - * /` and unary `-` for [`Tile`] (owned or
//! borrowed) and [`TileRef`] (owned or borrowed), with tiles or scalars on either side
//! (`&x + &y`, `&x * 2.0`, `1.0 - &x`, `-&x`): `f32`/`f64`/`i32` on the right, `f32`/`i32` on
//! the left (so unsuffixed literals infer). Float scalars are fp32 and integer scalars int32
//! under NKI's weak-scalar promotion.
//!
//! As in NKI, operators follow `nl.add` & co. (promotion, free-axis broadcasting of size-1
//! dims) but do **not** broadcast along partitions: a `[1, F]` operand with a `[P, F]` one is a
//! partition-mismatch error (use `nl::add`, which allows it, or `nl::broadcast_to`).

use super::elementwise::alu_binary;
use super::unary::{default_dtype, lower};
use crate::isa::op::Op;
use crate::isa::Operand;
use crate::math::{ActFn, AluOp};
use crate::tile::{Tile, TileRef};
use std::ops::{Add, Div, Mul, Neg, Sub};

mod sealed {
    pub trait Sealed {}
}

/// Anything that can be an operand of a tile operator: tiles and views (owned or borrowed) and
/// `f32` / `f64` / `i32` scalars. Sealed; implemented by nki-core only.
pub trait TileArith: sealed::Sealed + Sized {
    /// Calls `f` with the value as an element-wise operand.
    #[doc(hidden)]
    fn with_operand<R>(self, f: impl FnOnce(Operand<'_>) -> R) -> R;
}

macro_rules! arith_tile {
    ($([$($g:tt)*] $t:ty => |$s:ident| $e:expr;)*) => {$(
        impl<$($g)*> sealed::Sealed for $t {}
        impl<$($g)*> TileArith for $t {
            fn with_operand<R>(self, f: impl FnOnce(Operand<'_>) -> R) -> R {
                let $s = self;
                f($e)
            }
        }
    )*};
}

arith_tile! {
    [] Tile => |t| Operand::Tile(t.view());
    ['a] &'a Tile => |t| Operand::Tile(t.view());
    ['a] TileRef<'a> => |t| Operand::Tile(t);
    ['a, 'b] &'b TileRef<'a> => |t| Operand::Tile(*t);
    [] f32 => |v| Operand::from(v);
    [] f64 => |v| Operand::from(v);
    [] i32 => |v| Operand::from(v);
}

#[track_caller]
fn apply(op: AluOp, api: &'static str, x: impl TileArith, y: impl TileArith) -> Tile {
    let ins = Op::begin(api);
    x.with_operand(|a| y.with_operand(|b| alu_binary(&ins, op, a, b, None, false)))
}

/// THE lowering of a tile operator (`&x + &y`, `Sbuf + Sbuf`, `x * 2.0`): op `api` is
/// `nl`'s ALU operator `op` (the same promotion, engine choice and exact 32-bit integer
/// arithmetic as the `nl` call) without broadcasting along partitions.
#[track_caller]
pub(crate) fn operator(op: AluOp, api: &'static str, x: Operand, y: Operand) -> Tile {
    alu_binary(&Op::begin(api), op, x, y, None, false)
}

#[track_caller]
fn negate(x: impl TileArith) -> Tile {
    let ins = Op::begin("nl.negative");
    x.with_operand(|a| match a {
        Operand::Tile(t) => {
            let f = ActFn::Negative;
            lower(&ins, f, t, default_dtype(f, t.dtype()))
        }
        Operand::Scalar { .. } => unreachable!("only tiles implement Neg"),
    })
}

macro_rules! tile_lhs {
    ($([$($g:tt)*] $t:ty;)*) => {$(
        tile_lhs!(@bin [$($g)*] $t; Add add Add "nl.add");
        tile_lhs!(@bin [$($g)*] $t; Sub sub Subtract "nl.subtract");
        tile_lhs!(@bin [$($g)*] $t; Mul mul Multiply "nl.multiply");
        tile_lhs!(@bin [$($g)*] $t; Div div Divide "nl.divide");
        impl<$($g)*> Neg for $t {
            type Output = Tile;
            #[track_caller]
            fn neg(self) -> Tile {
                negate(self)
            }
        }
    )*};
    (@bin [$($g:tt)*] $t:ty; $tr:ident $m:ident $op:ident $api:literal) => {
        impl<$($g)* R: TileArith> $tr<R> for $t {
            type Output = Tile;
            #[track_caller]
            fn $m(self, rhs: R) -> Tile {
                apply(AluOp::$op, $api, self, rhs)
            }
        }
    };
}

tile_lhs! {
    [] Tile;
    ['a,] &'a Tile;
    ['a,] TileRef<'a>;
    ['a, 'b,] &'b TileRef<'a>;
}

macro_rules! scalar_lhs {
    ($s:ty: $([$($g:tt)*] $t:ty;)*) => {$(
        scalar_lhs!(@bin $s, [$($g)*] $t; Add add Add "nl.add");
        scalar_lhs!(@bin $s, [$($g)*] $t; Sub sub Subtract "nl.subtract");
        scalar_lhs!(@bin $s, [$($g)*] $t; Mul mul Multiply "nl.multiply");
        scalar_lhs!(@bin $s, [$($g)*] $t; Div div Divide "nl.divide");
    )*};
    (@bin $s:ty, [$($g:tt)*] $t:ty; $tr:ident $m:ident $op:ident $api:literal) => {
        impl<$($g)*> $tr<$t> for $s {
            type Output = Tile;
            #[track_caller]
            fn $m(self, rhs: $t) -> Tile {
                apply(AluOp::$op, $api, self, rhs)
            }
        }
    };
}

scalar_lhs! { f32:
    [] Tile;
    ['a] &'a Tile;
    ['a] TileRef<'a>;
    ['a, 'b] &'b TileRef<'a>;
}

scalar_lhs! { i32:
    [] Tile;
    ['a] &'a Tile;
    ['a] TileRef<'a>;
    ['a, 'b] &'b TileRef<'a>;
}
