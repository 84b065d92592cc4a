//! `nisa`: engine-level instructions (`nc_matmul`, `activation`, `tensor_tensor`, ...). Each
//! call is exactly one instruction record.

use crate::context::check;
use crate::dtype::DType;
use crate::error::SourceLoc;
use crate::lang;
use crate::record::MemKind;
use crate::tile::{Tile, TileRef};

/// `stationary[K, M]^T @ moving[K, N]` into a new fp32 PSUM tile [M, N] (NKI `nisa.nc_matmul`).
#[track_caller]
pub fn nc_matmul<'a, 'b>(
    stationary: impl Into<TileRef<'a>>,
    moving: impl Into<TileRef<'b>>,
) -> Tile {
    let loc = SourceLoc::caller();
    let (s, m) = (stationary.into(), moving.into());
    let (_, mm, n) = check(lang::check_matmul("nisa.nc_matmul", &s, &m), loc);
    let out = Tile::alloc(
        "nisa.nc_matmul",
        MemKind::Psum,
        DType::F32,
        lang::shape("nisa.nc_matmul", &[mm, n], loc),
        None,
        loc,
    );
    lang::matmul_into("nisa.nc_matmul", s, m, out.view(), false, loc);
    out
}

/// `acc += stationary^T @ moving` in PSUM: one accumulating TensorE instruction (NKI's
/// `psum += nisa.nc_matmul(...)`). The first matmul into an unwritten accumulator overwrites it
/// (it opens the accumulation group).
#[track_caller]
pub fn nc_matmul_acc<'a, 'b, 'c>(
    acc: impl Into<TileRef<'c>>,
    stationary: impl Into<TileRef<'a>>,
    moving: impl Into<TileRef<'b>>,
) {
    let loc = SourceLoc::caller();
    let acc = acc.into();
    let first = !acc.tile().init.get();
    lang::matmul_into(
        "nisa.nc_matmul",
        stationary.into(),
        moving.into(),
        acc,
        !first,
        loc,
    );
}
