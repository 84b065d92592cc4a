//! `nl.matmul` and `nl.transpose`: lowerings onto the TensorE builders of `nisa`.

use crate::context::Op;
use crate::isa::base::Dst;
use crate::isa::tensor::{matmul_to, transpose_to};
use crate::record::MemKind;
use crate::tile::{Tile, TileRef};

/// `x @ y` (or `x^T @ y` with `transpose_x`) into a new fp32 PSUM tile (NKI `nl.matmul`).
/// Without `transpose_x`, x is first transposed on TensorE (an extra instruction, as in NKI).
#[track_caller]
pub fn matmul<'a, 'b>(
    x: impl Into<TileRef<'a>>,
    y: impl Into<TileRef<'b>>,
    transpose_x: bool,
) -> Tile {
    let ins = Op::begin("nl.matmul");
    let (x, y) = (x.into(), y.into());
    let xt_holder;
    let stationary = if transpose_x {
        x
    } else {
        xt_holder = transpose_to(&ins, Dst::New(None), x, MemKind::Sbuf, false).tile();
        xt_holder.view()
    };
    matmul_to(&ins, Dst::New(None), stationary, y, false).tile()
}

/// `acc += x @ y` (or `x^T @ y`) accumulated in PSUM: NKI's `psum += nl.matmul(...)` pattern,
/// one TensorE instruction per call.
#[track_caller]
pub fn matmul_acc<'a, 'b, 'c>(
    acc: impl Into<TileRef<'c>>,
    x: impl Into<TileRef<'a>>,
    y: impl Into<TileRef<'b>>,
    transpose_x: bool,
) {
    let ins = Op::begin("nl.matmul");
    let (x, y, acc) = (x.into(), y.into(), acc.into());
    let xt_holder;
    let stationary = if transpose_x {
        x
    } else {
        xt_holder = transpose_to(&ins, Dst::New(None), x, MemKind::Sbuf, false).tile();
        xt_holder.view()
    };
    let first = !acc.is_written();
    matmul_to(&ins, Dst::Into(acc), stationary, y, !first);
}

/// 2-D transpose of a tile (both dims at most 128) on TensorE into PSUM (NKI `nl.transpose`).
#[track_caller]
pub fn transpose<'a>(x: impl Into<TileRef<'a>>) -> Tile {
    let ins = Op::begin("nl.transpose");
    transpose_to(&ins, Dst::New(None), x.into(), MemKind::Psum, false).tile()
}
