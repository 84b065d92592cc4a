//! `nl.matmul` and `nl.transpose`: lowerings onto the TensorE builders of `nisa`.

use crate::builder::instruction;
use crate::isa::base::Dst;
use crate::isa::op::Op;
use crate::isa::tensor::{matmul_into, matmul_new, transpose_to};
use crate::record::MemKind;
use crate::tile::{Tile, TileRef};

instruction! {
    /// `x @ y` (or `x^T @ y` with `transpose_x`) into a new fp32 PSUM tile (NKI `nl.matmul`).
    /// Without `transpose_x`, x is first transposed on TensorE (an extra instruction, as in
    /// NKI).
    pub fn matmul<'a, 'b>(x: into TileRef<'a>, y: into TileRef<'b>, transpose_x: bool) -> Tile
    as ins = "nl.matmul" {
        let xt = (!transpose_x).then(|| transposed(&ins, x));
        let stationary = xt.as_ref().map_or(x, Tile::view);
        matmul_new(&ins, stationary, y)
    }

    /// `acc += x @ y` (or `x^T @ y`) accumulated in PSUM: NKI's `psum += nl.matmul(...)`
    /// pattern, one TensorE instruction per call.
    pub fn matmul_acc<'a, 'b, 'c>(
        acc: impl Into<TileRef<'c>>, x: into TileRef<'a>, y: into TileRef<'b>, transpose_x: bool,
    ) as ins = "nl.matmul" {
        let acc = acc.into();
        let xt = (!transpose_x).then(|| transposed(&ins, x));
        let stationary = xt.as_ref().map_or(x, Tile::view);
        let first = !acc.is_written();
        matmul_into(&ins, &acc, &stationary, &y, !first, (1, 0));
    }
}

/// `x` transposed on TensorE into a new SBUF tile (the stationary operand of `x @ y`).
fn transposed(ins: &Op, x: TileRef) -> Tile {
    transpose_to(ins, Dst::New(None), x, MemKind::Sbuf, false).tile()
}

/// 2-D transpose of a tile (both dims at most 128) on TensorE into PSUM (NKI `nl.transpose`).
#[track_caller]
pub fn transpose<'a>(x: impl Into<TileRef<'a>>) -> Tile {
    let ins = Op::begin("nl.transpose");
    transpose_to(&ins, Dst::New(None), x.into(), MemKind::Psum, false).tile()
}
