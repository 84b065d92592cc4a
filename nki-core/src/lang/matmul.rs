//! `nl.matmul` and `nl.transpose`: TensorE operations into PSUM.

use super::checks;
use super::data::shape;
use crate::context::{check, env, issue, raise};
use crate::dtype::DType;
use crate::error::{ErrorKind, NkiError, Result, SourceLoc};
use crate::exec;
use crate::record::{Engine, Instr, MatmulDims, MemKind, Opcode};
use crate::tile::{Tile, TileRef};

/// Validates `stationary[K, M]` and `moving[K, N]` for one TensorE matmul; returns (K, M, N).
pub(crate) fn check_matmul(
    op: &'static str,
    s: &TileRef,
    m: &TileRef,
) -> Result<(usize, usize, usize)> {
    checks::memory(op, "stationary", s, &[MemKind::Sbuf])?;
    checks::memory(op, "moving", m, &[MemKind::Sbuf])?;
    checks::operand(op, "stationary", s)?;
    checks::operand(op, "moving", m)?;
    let (k, mm) = (s.partitions(), s.free_size());
    let (k2, n) = (m.partitions(), m.free_size());
    if k != k2 {
        return Err(NkiError::new(
            ErrorKind::ContractionMismatch,
            op,
            format!(
                "contraction (partition) dimensions differ: stationary{:?} has K={k}, moving{:?} has K={k2}",
                s.shape(),
                m.shape()
            ),
        ));
    }
    if mm > 128 {
        return Err(NkiError::new(
            ErrorKind::MatmulLimit,
            op,
            format!(
                "stationary{:?} free size {mm} exceeds gemm_stationary_fmax of 128",
                s.shape()
            ),
        ));
    }
    if n > 512 {
        return Err(NkiError::new(
            ErrorKind::MatmulLimit,
            op,
            format!(
                "moving{:?} free size {n} exceeds gemm_moving_fmax of 512",
                m.shape()
            ),
        ));
    }
    let f32ish = |d: DType| d == DType::F32;
    if f32ish(s.dtype()) != f32ish(m.dtype()) {
        return Err(NkiError::new(
            ErrorKind::DType,
            op,
            format!(
                "if one matmul input is float32 both must be: stationary is {}, moving is {}",
                s.dtype(),
                m.dtype()
            ),
        ));
    }
    for (w, t) in [("stationary", s), ("moving", m)] {
        if !t.dtype().is_float() {
            return Err(NkiError::new(
                ErrorKind::DType,
                op,
                format!(
                    "matmul operand '{w}' has dtype {}; TensorE takes fp8/bf16/fp16/fp32",
                    t.dtype()
                ),
            ));
        }
    }
    Ok((k, mm, n))
}

/// The matmul record.
pub(crate) fn matmul_record(
    api: &'static str,
    s: &TileRef,
    m: &TileRef,
    out: &TileRef,
    acc: bool,
    loc: SourceLoc,
) -> Instr {
    let mut reads = vec![s.region(), m.region()];
    if acc {
        reads.push(out.region());
    }
    Instr {
        partitions: s.partitions() as u32,
        free: m.free_size() as u32,
        inputs: 2,
        in_dtype: m.dtype(),
        out_dtype: out.dtype(),
        psum: true,
        matmul: Some(MatmulDims {
            k: s.partitions() as u32,
            m: s.free_size() as u32,
            n: m.free_size() as u32,
            fp32: m.dtype() == DType::F32,
        }),
        reads,
        writes: vec![out.region()],
        ..Instr::new(Engine::Tensor, Opcode::Matmul, api, loc)
    }
}

/// `out (+)= stationary^T @ moving` into the PSUM view `out` (one TensorE instruction).
pub(crate) fn matmul_into(
    api: &'static str,
    s: TileRef,
    m: TileRef,
    out: TileRef,
    acc: bool,
    loc: SourceLoc,
) {
    let e = env(api, loc);
    let (k, mm, n) = check(check_matmul(api, &s, &m), loc);
    check(checks::memory(api, "dst", &out, &[MemKind::Psum]), loc);
    if out.shape() != [mm, n] {
        raise(
            NkiError::new(
                ErrorKind::ShapeMismatch,
                api,
                format!(
                    "accumulator {} must have shape [{mm}, {n}] for stationary{:?} and moving{:?}",
                    out.describe(),
                    s.shape(),
                    m.shape()
                ),
            ),
            loc,
        );
    }
    issue(
        e,
        || exec::matmul_tiles(api, loc, (k, mm, n), (&s, &m, &out), acc),
        || matmul_record(api, &s, &m, &out, acc, loc),
    );
    if !e.executes {
        out.mark_written();
    }
}

/// `x @ y` (or `x^T @ y` with `transpose_x`) into a new fp32 PSUM tile (NKI `nl.matmul`).
/// Without `transpose_x`, x is first transposed on TensorE (an extra instruction, as in NKI).
#[track_caller]
pub fn matmul<'a, 'b>(
    x: impl Into<TileRef<'a>>,
    y: impl Into<TileRef<'b>>,
    transpose_x: bool,
) -> Tile {
    let loc = SourceLoc::caller();
    let (x, y) = (x.into(), y.into());
    let xt_holder;
    let stationary = if transpose_x {
        x
    } else {
        xt_holder = transpose_to(x, MemKind::Sbuf, "nl.matmul", loc);
        xt_holder.view()
    };
    let (_, m, n) = check(check_matmul("nl.matmul", &stationary, &y), loc);
    let out = Tile::alloc(
        "nl.matmul",
        MemKind::Psum,
        DType::F32,
        shape("nl.matmul", &[m, n], loc),
        None,
        loc,
    );
    matmul_into("nl.matmul", stationary, y, out.view(), false, loc);
    out
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
    let loc = SourceLoc::caller();
    let (x, y, acc) = (x.into(), y.into(), acc.into());
    let xt_holder;
    let stationary = if transpose_x {
        x
    } else {
        xt_holder = transpose_to(x, MemKind::Sbuf, "nl.matmul", loc);
        xt_holder.view()
    };
    let first = !acc.tile().init.get();
    matmul_into("nl.matmul", stationary, y, acc, !first, loc);
}

/// 2-D transpose of a tile (both dims at most 128) on TensorE into PSUM (NKI `nl.transpose`).
#[track_caller]
pub fn transpose<'a>(x: impl Into<TileRef<'a>>) -> Tile {
    transpose_to(x.into(), MemKind::Psum, "nl.transpose", SourceLoc::caller())
}

/// Transposes `x` [P, F] to a new [F, P] tile in `mem` (TensorE; recorded as one transpose).
pub(crate) fn transpose_to(x: TileRef, mem: MemKind, api: &'static str, loc: SourceLoc) -> Tile {
    let e = env(api, loc);
    check(checks::memory(api, "x", &x, &[MemKind::Sbuf]), loc);
    check(checks::operand(api, "x", &x), loc);
    let (p, f) = (x.partitions(), x.free_size());
    if x.shape().len() > 2 {
        raise(
            NkiError::new(
                ErrorKind::InvalidArgument,
                api,
                format!("parameter 'x{:?}' of 'transpose' exceeds max supported number of dimensions of 2", x.shape()),
            ),
            loc,
        );
    }
    if f > 128 {
        raise(
            NkiError::new(
                ErrorKind::MatmulLimit,
                api,
                format!("size of dimension 1 in 'x{:?}' of 'transpose' exceeds architecture limitation of 128", x.shape()),
            ),
            loc,
        );
    }
    let dtype = if mem == MemKind::Psum {
        DType::F32
    } else {
        x.dtype()
    };
    let out = Tile::alloc(api, mem, dtype, shape(api, &[f, p], loc), None, loc);
    let ov = out.view();
    issue(
        e,
        || ov.scatter(exec::transpose2d(&x.gather(api, loc), p, f)),
        || Instr {
            partitions: p as u32,
            free: f as u32,
            in_dtype: x.dtype(),
            out_dtype: dtype,
            psum: true,
            matmul: Some(MatmulDims {
                k: p as u32,
                m: p as u32,
                n: f as u32,
                fp32: x.dtype() == DType::F32,
            }),
            reads: vec![x.region()],
            writes: vec![ov.region()],
            ..Instr::new(Engine::Tensor, Opcode::Transpose, api, loc)
        },
    );
    if !e.executes {
        ov.mark_written();
    }
    out
}
