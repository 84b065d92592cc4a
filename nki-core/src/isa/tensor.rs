//! TensorE instructions: `nc_matmul`, `nc_matmul_acc`, and `nc_transpose` (TensorE, or
//! VectorE for blocks up to 32x32).

use super::{engine_in, fail, issue_op, memory, operand, out_tile, Engine, Site};
use crate::context::{check, env};
use crate::dtype::DType;
use crate::error::{ErrorKind, SourceLoc};
use crate::exec;
use crate::lang;
use crate::record::{MemKind, Opcode};
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

/// Transposes a 2-D tile `data[P, F]` to `[F, P]` (NKI `nisa.nc_transpose`).
///
/// * `Engine::Tensor`: P, F <= 128; reads SBUF, writes a new fp32 PSUM tile (a matmul against
///   the identity).
/// * `Engine::Vector`: P, F <= 32; reads SBUF or PSUM, writes a new SBUF tile of `data`'s dtype.
#[track_caller]
pub fn nc_transpose<'a>(data: impl Into<TileRef<'a>>, engine: Engine) -> Tile {
    const API: &str = "nisa.nc_transpose";
    let loc = SourceLoc::caller();
    let x: TileRef = data.into();
    engine_in(API, engine, &[Engine::Tensor, Engine::Vector], loc);
    if engine == Engine::Tensor {
        memory(API, "data", &x, &[MemKind::Sbuf], loc);
        return lang::transpose_to(x, MemKind::Psum, API, loc);
    }
    let e = env(API, loc);
    operand(API, "data", &x, loc);
    if x.shape().len() > 2 {
        fail(
            ErrorKind::InvalidArgument,
            API,
            format!(
                "parameter 'data{:?}' of 'nc_transpose' exceeds max supported number of dimensions of 2",
                x.shape()
            ),
            loc,
        );
    }
    let (p, f) = (x.partitions(), x.free_size());
    for (dim, size) in [(0, p), (1, f)] {
        if size > 32 {
            fail(
                ErrorKind::InvalidArgument,
                API,
                format!(
                    "size of dimension {dim} in 'data{:?}' of 'nc_transpose' exceeds the Vector Engine limitation of 32 (use engine=Tensor for up to 128x128)",
                    x.shape()
                ),
                loc,
            );
        }
    }
    let out = out_tile(API, MemKind::Sbuf, x.dtype(), &[f, p], loc);
    let ov = out.view();
    let site = Site::new(Engine::Vector, Opcode::VectorTranspose, API, loc);
    issue_op(e, site, &[&x], &[], &[&ov], x.dtype(), || {
        ov.scatter(exec::transpose2d(&x.gather(API, loc), p, f))
    });
    out
}
