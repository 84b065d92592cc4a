//! TensorE instructions: `nc_matmul` (also accumulating into PSUM), and `nc_transpose`
//! (TensorE, or VectorE for blocks up to 32x32). `nl.matmul` / `nl.transpose` lower onto the
//! builders here.

use super::base::{memory, operand, Dst, Output, Rec, Site};
use super::op::Op;
use super::opts::{MatmulOpts, MatmulPerfMode, Opts};
use super::Engine;
use crate::builder::instruction;
use crate::dtype::DType;
use crate::emit::trace::{Arg, Call};
use crate::error::{ErrorKind, NkiError, Result};
use crate::exec;
use crate::record::{Instr, MatmulDims, MemKind, Opcode, Regions};
use crate::target::Target;
use crate::tile::{Tile, TileRef};

instruction! {
    /// `dst (+)= stationary[K, M]^T @ moving[K, N]` on TensorE (NKI `nisa.nc_matmul(dst,
    /// stationary, moving, accumulate=..., is_transpose=...)`): `dst` is a PSUM tile or view of
    /// shape `[M, N]`; PSUM accumulates in fp32. With `opts` `None` the first matmul into an
    /// unwritten `dst` overwrites it and later ones accumulate (an accumulation group), see
    /// [`MatmulOpts`]. With `is_transpose`, `moving` must be a `[K, K]` identity and `dst`
    /// (`[M, K]`) receives `stationary` transposed (costed as a transpose).
    ///
    /// `tile_position`/`tile_size` (see [`MatmulOpts::tile`]) place the matmul on a row/column
    /// tile of the 128 x 128 PE array; `perf_mode=double_row` (NeuronCore-v3+) takes fp8
    /// `stationary[K, 2, M]` / `moving[K, 2, N]` and contracts over both rows of each partition
    /// at the cost of one `K`-row matmul.
    pub fn nc_matmul<'d, 'a, 'b>(
        dst: into TileRef<'d>, stationary: into TileRef<'a>, moving: into TileRef<'b>,
        opts: into Option<MatmulOpts>,
    ) as ins = "nisa.nc_matmul" {
        let opts = opts.unwrap_or_default();
        ins.trace(|| {
            use super::trace_args as ta;
            let flag = |on: bool| on.then_some(Arg::Bool(true));
            let pair = |p: Option<(usize, usize)>| {
                p.map(|(a, b)| Arg::Const(format!("({a}, {b})")))
            };
            let perf = match opts.perf_mode {
                MatmulPerfMode::None => None,
                MatmulPerfMode::DoubleRow => {
                    Some(Arg::Const("nisa.matmul_perf_mode.double_row".to_string()))
                }
            };
            Call::new("nisa.nc_matmul")
                .arg("dst", ta::tile(&dst))
                .arg("stationary", ta::tile(&stationary))
                .arg("moving", ta::tile(&moving))
                .opt("is_stationary_onezero", flag(opts.is_stationary_onezero))
                .opt("is_moving_onezero", flag(opts.is_moving_onezero))
                .opt("is_transpose", flag(opts.is_transpose))
                .opt("tile_position", pair(opts.tile_position))
                .opt("tile_size", pair(opts.tile_size))
                .opt("perf_mode", perf)
                .opt("accumulate", opts.accumulate.map(Arg::Bool))
        });
        matmul_opts(&ins, dst, stationary, moving, opts);
    }
}

/// [`nc_matmul`] on its converted operands.
#[inline]
#[track_caller]
fn matmul_opts(ins: &Op, dst: TileRef, s: TileRef, m: TileRef, opts: MatmulOpts) {
    if opts.is_transpose {
        if opts.accumulate == Some(true) {
            ins.fail(
                ErrorKind::InvalidArgument,
                "'nc_matmul' with is_transpose=True cannot accumulate".to_string(),
            );
        }
        check_identity(ins, &s, &m);
        nc_transpose_to(ins, Dst::Into(dst), s, Engine::Tensor);
        return;
    }
    check_tiling(ins, &opts, &s);
    let acc = opts.accumulate.unwrap_or_else(|| dst.is_written());
    let rows = match opts.perf_mode {
        MatmulPerfMode::None => 1,
        MatmulPerfMode::DoubleRow => {
            check_double_row(ins, &s, &m);
            2
        }
    };
    let onezero = [
        ("stationary", &s, opts.is_stationary_onezero),
        ("moving", &m, opts.is_moving_onezero),
    ]
    .into_iter()
    .filter(|&(what, t, hint)| hint && onezero_operand(ins, what, t))
    .count() as u8;
    matmul_into(ins, &dst, &s, &m, acc, (rows, onezero));
}

/// Whether the one/zero hint on operand `t` counts (NKI `is_*_onezero`: "no impact for
/// non-float32" operands): true for an fp32 tile. Its values, when computed, must be 0 or 1
/// (an error naming the first other value: the docs do not say what the hardware computes
/// for a wrong hint).
fn onezero_operand(ins: &Op, what: &str, t: &TileRef) -> bool {
    if t.dtype() != DType::F32 {
        return false;
    }
    if ins.executes() {
        let v = ins.read(t);
        let f = t.free_size().max(1);
        if let Some(i) = v.iter().position(|&x| x != 0.0 && x != 1.0) {
            ins.fail(
                ErrorKind::InvalidArgument,
                format!(
                    "is_{what}_onezero is set but {what} {} holds {} at partition {}, element {} (the hint promises only ones and zeros)",
                    t.describe(),
                    v[i],
                    i / f,
                    i % f
                ),
            );
        }
    }
    true
}

/// The PE-array tiling options (SDK `nki.isa.nc_matmul`, "Tiling mode"): `tile_position` and
/// `tile_size` set together; sizes 128, 64 or (NeuronCore-v3+) 32; each start a multiple of
/// its size inside the 128 x 128 array; the stationary operand within the tile (K rows, M
/// columns); no column tiling with `double_row`. Tiling places the matmul on part of the
/// array; the values are the same. The model runs tiled matmuls one after another on TensorE
/// (the hardware may overlap matmuls on disjoint tiles) \[A\].
pub(crate) fn check_tiling(ins: &Op, opts: &MatmulOpts, s: &TileRef) {
    let (pos, size) = match (opts.tile_position, opts.tile_size) {
        (None, None) => return,
        (Some(p), Some(z)) => (p, z),
        _ => ins.fail(
            ErrorKind::InvalidArgument,
            "tile_position and tile_size of 'nc_matmul' must be set together".to_string(),
        ),
    };
    let sizes: &[usize] = if ins.target().spec().nc_version >= 3 {
        &[32, 64, 128]
    } else {
        &[64, 128]
    };
    for (what, start, z) in [("row", pos.0, size.0), ("column", pos.1, size.1)] {
        if !sizes.contains(&z) || start % z != 0 || start + z > 128 {
            ins.fail(
                ErrorKind::MatmulLimit,
                format!(
                    "tile {what} start {start} / size {z} of 'nc_matmul' on {}: the size must be one of {sizes:?} and the start a multiple of it inside the 128-wide PE array",
                    ins.target()
                ),
            );
        }
    }
    let (k, mm) = match opts.perf_mode {
        MatmulPerfMode::DoubleRow => (s.partitions(), s.shape().last().copied().unwrap_or(1)),
        MatmulPerfMode::None => (s.partitions(), s.free_size()),
    };
    if k > size.0 || mm > size.1 {
        ins.fail(
            ErrorKind::MatmulLimit,
            format!(
                "stationary{:?} ({k} rows, {mm} columns) does not fit tile_size {size:?} of 'nc_matmul'",
                s.shape()
            ),
        );
    }
    if opts.perf_mode == MatmulPerfMode::DoubleRow && size.1 != 128 {
        ins.fail(
            ErrorKind::InvalidArgument,
            "perf_mode=double_row cannot be combined with column tiling (column size must be 128)"
                .to_string(),
        );
    }
}

/// Checks the operands of an FP8 double-row matmul (`perf_mode=double_row`, NeuronCore-v3+):
/// `stationary[K, 2, M]` and `moving[K, 2, N]` in fp8 (float8_e4m3 / float8_e5m2). The pair
/// of free rows doubles the contraction: `dst[M, N] (+)= sum over (p, j) of
/// stationary[p, j, M] * moving[p, j, N]`, at the cycles of a `K <= 128` matmul.
fn check_double_row(ins: &Op, s: &TileRef, m: &TileRef) {
    super::alu_rules::needs_nc(ins, 3, |target| {
        format!("perf_mode=double_row needs NeuronCore-v3 or newer, not {target}")
    });
    for (what, t) in [("stationary", s), ("moving", m)] {
        if !matches!(t.dtype(), DType::F8E4M3 | DType::F8E5M2) {
            ins.fail(
                ErrorKind::DType,
                format!(
                    "perf_mode=double_row needs fp8 (float8_e4m3 / float8_e5m2) operands; {what} {} is {}",
                    t.describe(),
                    t.dtype()
                ),
            );
        }
        if t.shape().len() != 3 || t.shape()[1] != 2 {
            ins.fail(
                ErrorKind::ShapeMismatch,
                format!(
                    "perf_mode=double_row splits the contraction over the partitions and a first free dimension of 2: {what} must be [K, 2, F], got {}",
                    t.describe()
                ),
            );
        }
    }
}

/// `moving` of a transposing matmul must be a `[P, P]` identity for `data`'s `P` partitions
/// (its values are checked when values are computed: anything else would not transpose).
pub(crate) fn check_identity(ins: &Op, x: &TileRef, id: &TileRef) {
    ins.operand("identity", id);
    let p = x.partitions();
    if id.shape() != [p, p] {
        ins.fail(
            ErrorKind::ShapeMismatch,
            format!(
                "is_transpose needs a [{p}, {p}] identity as moving operand for data{:?}, got {}",
                x.shape(),
                id.describe()
            ),
        );
    }
    if ins.executes() {
        let v = ins.read(id);
        let off = (0..p * p).find(|&i| v[i] != if i / p == i % p { 1.0 } else { 0.0 });
        if let Some(i) = off {
            ins.fail(
                ErrorKind::InvalidArgument,
                format!(
                    "is_transpose needs an identity as moving operand: {} holds {} at [{}, {}]",
                    id.describe(),
                    v[i],
                    i / p,
                    i % p
                ),
            );
        }
    }
}

instruction! {
    /// Transposes `data[P, F]` into `dst[F, P]` (NKI `nisa.nc_transpose(dst, data,
    /// engine=...)`); a `data` with several free axes is flattened to `[P, F]` first, as the SDK
    /// documents (`F` = elements per partition).
    ///
    /// * `Engine::Tensor` (the default): P, F <= 128; reads SBUF, writes PSUM (a matmul against
    ///   the identity).
    /// * `Engine::Vector`: P, F <= 32; reads SBUF or PSUM, writes SBUF or PSUM.
    ///
    /// The result is rounded to `dst`'s dtype.
    pub fn nc_transpose<'d, 'a>(
        dst: into TileRef<'d>, data: into TileRef<'a>, opts: into Option<Opts>,
    ) as ins = "nisa.nc_transpose" {
        let explicit = opts.and_then(|o| o.engine);
        let engine = Opts::engine_or(opts, Engine::Tensor);
        ins.trace(|| {
            use super::trace_args as ta;
            Call::new("nisa.nc_transpose")
                .arg("dst", ta::tile(&dst))
                .arg("data", ta::tile(&data))
                .opt("engine", explicit.map(ta::engine))
        });
        nc_transpose_to(&ins, Dst::Into(dst), data, engine);
    }
}

/// The `nc_transpose` builder.
pub(crate) fn nc_transpose_to<'d>(
    ins: &Op,
    dst: Dst<'d>,
    x: TileRef,
    engine: Engine,
) -> Output<'d> {
    const API: &str = "nisa.nc_transpose";
    ins.engine_in(engine, &[Engine::Tensor, Engine::Vector]);
    if engine == Engine::Tensor {
        ins.memory("data", &x, &[MemKind::Sbuf]);
        return transpose_to(ins, dst, x, MemKind::Psum, true);
    }
    ins.operand("data", &x);
    let (p, f) = (x.partitions(), x.free_size());
    for (dim, size) in [(0, p), (1, f)] {
        if size > 32 {
            ins.fail(ErrorKind::InvalidArgument, format!(
                    "size of dimension {dim} in 'data{:?}' of 'nc_transpose' exceeds the Vector Engine limitation of 32 (use engine=Tensor for up to 128x128)",
                    x.shape()
                ));
        }
    }
    let out = ins.output(dst, MemKind::Sbuf, x.dtype(), &[f, p], true);
    let ov = out.view();
    let site = Site::new(Engine::Vector, Opcode::VectorTranspose);
    ins.compute(site, &[&x], &[], &[&ov], || {
        ov.scatter(exec::transpose2d(&x.gather(API, ins.loc), p, f))
    });
    out
}

/// Validates `stationary[K, M]` and `moving[K, N]` for one TensorE matmul on `target` writing
/// a `dst_dtype` result; returns (K, M, N).
///
/// The moving free size is limited per target and result dtype (SDK `nki.isa.nc_matmul`,
/// "Tile size"): 512 on NC-v2/v3 (one PSUM bank of fp32), 4096 for an fp32 `dst` and 8192
/// for a bf16 `dst` on NC-v4 (all 8 PSUM banks); `dst` must be float32 before NC-v4.
///
/// `rows` is 1, or 2 for the FP8 double-row mode (`[K, 2, M]` / `[K, 2, N]` operands: the free
/// sizes are halved).
pub(crate) fn check_matmul(
    op: &'static str,
    target: Target,
    s: &TileRef,
    m: &TileRef,
    dst_dtype: DType,
    rows: usize,
) -> Result<(usize, usize, usize)> {
    let spec = target.spec();
    memory(op, "stationary", s, &[MemKind::Sbuf])?;
    memory(op, "moving", m, &[MemKind::Sbuf])?;
    operand(op, "stationary", s)?;
    operand(op, "moving", m)?;
    // Free sizes per row; no division in the common single-row case (two divisions per
    // matmul on the estimate hot path otherwise).
    let per_row = |free: usize| if rows == 1 { free } else { free / rows };
    let (k, mm) = (s.partitions(), per_row(s.free_size()));
    let (k2, n) = (m.partitions(), per_row(m.free_size()));
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
    let moving_max = match dst_dtype {
        DType::F32 => spec.matmul_moving_fmax_fp32_dst,
        DType::BF16 => match spec.matmul_moving_fmax_bf16_dst {
            Some(max) => max,
            None => return Err(bf16_dst_error(op, target)),
        },
        d => {
            return Err(NkiError::new(
                ErrorKind::DType,
                op,
                format!(
                    "matmul dst dtype {d} is not supported: dst must be float32{} on {target}",
                    if spec.matmul_moving_fmax_bf16_dst.is_some() {
                        " or bfloat16"
                    } else {
                        ""
                    }
                ),
            ))
        }
    };
    if mm > spec.gemm_stationary_fmax {
        return Err(NkiError::new(
            ErrorKind::MatmulLimit,
            op,
            format!(
                "stationary{:?} free size {mm} exceeds gemm_stationary_fmax of {}",
                s.shape(),
                spec.gemm_stationary_fmax
            ),
        ));
    }
    if n > moving_max {
        return Err(NkiError::new(
            ErrorKind::MatmulLimit,
            op,
            format!(
                "moving{:?} free size {n} exceeds the moving free size limit of {moving_max} \
                 for a {dst_dtype} dst on {target} (NeuronCore-v{}: {})",
                m.shape(),
                spec.nc_version,
                if spec.nc_version >= 4 {
                    "4096 for a float32 dst, 8192 for a bfloat16 dst"
                } else {
                    "gemm_moving_fmax of 512, one PSUM bank of float32"
                }
            ),
        ));
    }
    let f32ish = |d: DType| matches!(d, DType::F32 | DType::TF32);
    if f32ish(s.dtype()) != f32ish(m.dtype()) {
        return Err(NkiError::new(
            ErrorKind::DType,
            op,
            format!(
                "if one matmul input is tfloat32/float32 both must be: stationary is {}, moving is {}",
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
                    "matmul operand '{w}' has dtype {}; TensorE takes fp8/bf16/fp16/tfloat32/fp32",
                    t.dtype()
                ),
            ));
        }
    }
    Ok((k, mm, n))
}

/// The error of a bfloat16 matmul `dst` before NeuronCore-v4.
#[cold]
fn bf16_dst_error(op: &'static str, target: Target) -> NkiError {
    NkiError::new(
        ErrorKind::DType,
        op,
        format!(
            "matmul dst must be float32 on {target} (NeuronCore-v{}); a bfloat16 PSUM dst needs NeuronCore-v4 (trn3)",
            target.spec().nc_version
        ),
    )
}

/// The TensorE matmul builder of the allocating forms: `stationary^T @ moving` (one
/// instruction) into a new fp32 PSUM tile [M, N].
pub(crate) fn matmul_new(ins: &Op, s: TileRef, m: TileRef) -> Tile {
    let (k, mm, n) = checked_dims(ins, &s, &m, None, 1);
    let out = ins.alloc_result(MemKind::Psum, DType::F32, &[mm, n]);
    matmul_issue(ins, (k, mm, n), (&s, &m, &out.view()), false, (1, 0));
    out
}

/// The TensorE matmul builder of the destination-first forms: `out (+)= stationary^T @
/// moving` (one instruction) into the PSUM view `out` ([M, N]; `acc` accumulates onto it) over `rows` free rows per partition: 1, or 2 for the FP8 double-row mode (checked
/// by `check_double_row`), which contracts over `2 K` rows at the recorded cost of a `K`-row
/// matmul (2x FP8 throughput, SDK `nki.isa.matmul_perf_mode.double_row`); `onezero` fp32
/// operands carry the one/zero hint ([`MatmulDims::onezero`]).
pub(crate) fn matmul_into(
    ins: &Op,
    out: &TileRef,
    s: &TileRef,
    m: &TileRef,
    acc: bool,
    (rows, onezero): (usize, u8),
) {
    let (k, mm, n) = checked_dims(ins, s, m, Some(out), rows);
    ins.memory("dst", out, &[MemKind::Psum]);
    psum_dst_banks(ins, out);
    if out.shape() != [mm, n] {
        ins.fail(
            ErrorKind::ShapeMismatch,
            format!(
                "accumulator {} must have shape [{mm}, {n}] for stationary{:?} and moving{:?}",
                out.describe(),
                s.shape(),
                m.shape()
            ),
        );
    }
    matmul_issue(ins, (k, mm, n), (s, m, out), acc, (rows, onezero));
}

/// THE bank rule of a TensorE result in PSUM: one matmul or transpose writes within
/// [`TargetSpec::psum_tile_max_banks`](crate::target::TargetSpec::psum_tile_max_banks)
/// consecutive 2 KiB banks of each partition (one bank before NeuronCore-v4: an accumulation
/// group lives in one bank, SDK `nki.isa.nc_matmul`), counted from the start of its PSUM tile,
/// which a tile of several banks takes at a bank start. A PSUM tensor of several banks (NKI
/// 0.7) is fine; a destination slice that crosses a bank boundary is the error.
#[inline]
fn psum_dst_banks(ins: &Op, out: &TileRef) {
    let spec = ins.target().spec();
    let bank = spec.psum_bank_bytes as u64;
    let tile = out.tile;
    if (tile.shape.free() * tile.dtype.size()) as u64 <= bank {
        return; // a tile of one bank (no view of it leaves the bank)
    }
    let r = out.region();
    if r.hi <= bank {
        return; // within the first bank (every tile of one bank)
    }
    let (first, last) = (r.lo / bank, (r.hi.max(r.lo + 1) - 1) / bank);
    if (last - first + 1) as usize > spec.psum_tile_max_banks {
        psum_banks_error(ins, out, (r.lo, r.hi), (first, last));
    }
}

/// Fails `ins` for a PSUM destination over bytes `lo..hi` of each partition that spans banks
/// `first..=last` (see [`psum_dst_banks`]).
#[cold]
fn psum_banks_error(ins: &Op, out: &TileRef, (lo, hi): (u64, u64), (first, last): (u64, u64)) -> ! {
    let spec = ins.target().spec();
    ins.fail(
        ErrorKind::PsumBankLimit,
        format!(
            "destination {} covers bytes {lo}..{hi} of each partition, PSUM banks {first} to \
             {last} of its tile; one TensorE instruction writes within {} {}-byte bank{} on {} \
             (NeuronCore-v{})",
            out.describe(),
            spec.psum_tile_max_banks,
            spec.psum_bank_bytes,
            if spec.psum_tile_max_banks == 1 {
                ""
            } else {
                "s"
            },
            ins.target(),
            spec.nc_version
        ),
    );
}

/// [`check_matmul`] of a matmul writing `dst` (a new fp32 tile when `None`): (K, M, N), or
/// the instance fails; an error about the dtype of `dst` names that tensor.
fn checked_dims(
    ins: &Op,
    s: &TileRef,
    m: &TileRef,
    dst: Option<&TileRef>,
    rows: usize,
) -> (usize, usize, usize) {
    let dst_dtype = dst.map_or(DType::F32, TileRef::dtype);
    match check_matmul(ins.api, ins.target(), s, m, dst_dtype, rows) {
        Ok(dims) => dims,
        Err(e) => dims_error(ins, e, dst),
    }
}

/// Fails `ins` with the error `e` of [`checked_dims`] (kept out of line: the check's result
/// stays small on the estimate hot path). A dst of a dtype the target's matmul cannot write:
/// the error names that tensor.
#[cold]
fn dims_error(ins: &Op, e: NkiError, dst: Option<&TileRef>) -> ! {
    let e = match dst {
        Some(out) if e.kind() == ErrorKind::DType => NkiError::new(
            e.kind(),
            e.op(),
            format!("{} (dst is {})", e.message(), out.describe()),
        ),
        _ => e,
    };
    match ins.check::<std::convert::Infallible>(Err(e)) {}
}

/// Issues one checked TensorE matmul of `(K, M, N)` from `s`/`m` into `out` (see
/// [`matmul_into`] for `rows` and `onezero`).
fn matmul_issue(
    ins: &Op,
    (k, mm, n): (usize, usize, usize),
    (s, m, out): (&TileRef, &TileRef, &TileRef),
    acc: bool,
    (rows, onezero): (usize, u8),
) {
    ins.indirection(Engine::Tensor, &[s, m, out]);
    ins.issue_in_place(
        &[out],
        || matmul_tiles(ins, (k * rows, mm, n), (s, m, out), acc, rows == 1),
        (ins.api, Engine::Tensor, Opcode::Matmul),
        |r| matmul_record(r, (k, mm, n, onezero), (s, m), out, acc, &[]),
    );
}

/// The record (`r`, a TensorE matmul) of one matmul of `(K, M, N)` (`K` partitions: the cost
/// does not depend on how many values each PE row contracts) from `stationary`/`moving` (and
/// the `extra` reads, e.g. MX scales) into `out`, which it also reads when accumulating.
pub(crate) fn matmul_record(
    r: &mut Rec<&mut Instr>,
    (k, mm, n, onezero): (usize, usize, usize, u8),
    (s, m): (&TileRef, &TileRef),
    out: &TileRef,
    acc: bool,
    extra: &[&TileRef],
) {
    // Built inline from an array in the common cases (no extra reads): this is on the
    // estimate hot path.
    let written = out.region();
    let mut reads: Regions<3> = match (extra, acc) {
        ([], false) => [s.region(), m.region()].into(),
        ([], true) => [s.region(), m.region(), written].into(),
        _ => {
            let mut reads: Regions<3> = [s.region(), m.region()].into_iter().collect();
            reads.extend(extra.iter().map(|t| t.region()));
            if acc {
                reads.extend([written]);
            }
            reads
        }
    };
    if [s, m, out].iter().any(|t| t.ind.is_some()) {
        reads.extend(super::base::ti_index_regions(&[s, m, out]));
    }
    r.size(k as u32, n as u32)
        .inputs(2)
        .dtypes(m.dtype(), out.dtype())
        .psum(true)
        .matmul(MatmulDims {
            k: k as u32,
            m: mm as u32,
            n: n as u32,
            fp32: m.dtype() == DType::F32,
            onezero,
        })
        .reads(reads)
        .writes([written]);
}

/// The TensorE transpose builder: `x` [P, F] (both at most 128, SBUF) to [F, P] in a new tile in
/// `mem` (fp32 in PSUM, `x`'s dtype in SBUF) or in `dst`; recorded as one transpose. With
/// `collapse` (`nisa.nc_transpose`) several free axes of `x` are flattened into `F`; without
/// (`nl.transpose`) `x` must be 2-D.
pub(crate) fn transpose_to<'d>(
    ins: &Op,
    dst: Dst<'d>,
    x: TileRef,
    mem: MemKind,
    collapse: bool,
) -> Output<'d> {
    let api = ins.api;
    ins.memory("x", &x, &[MemKind::Sbuf]);
    ins.operand("x", &x);
    let (p, f) = (x.partitions(), x.free_size());
    if x.shape().len() > 2 && !collapse {
        ins.fail(
            ErrorKind::InvalidArgument,
            format!(
                "parameter 'x{:?}' of 'transpose' exceeds max supported number of dimensions of 2",
                x.shape()
            ),
        );
    }
    if f > 128 {
        ins.fail(
            ErrorKind::MatmulLimit,
            format!("size of dimension 1 in 'x{:?}' of 'transpose' exceeds architecture limitation of 128", x.shape()),
        );
    }
    let dtype = if mem == MemKind::Psum {
        DType::F32
    } else {
        x.dtype()
    };
    let out = ins.output(dst, mem, dtype, &[f, p], false);
    let ov = out.view();
    if mem == MemKind::Psum {
        psum_dst_banks(ins, &ov);
    }
    ins.issue(
        &[&ov],
        || ov.scatter(exec::transpose2d(&x.gather(api, ins.loc), p, f)),
        || {
            ins.record_as(api, Engine::Tensor, Opcode::Transpose)
                .size(p as u32, f as u32)
                .dtypes(x.dtype(), ov.dtype())
                .psum(true)
                .matmul(MatmulDims {
                    k: p as u32,
                    m: p as u32,
                    n: f as u32,
                    fp32: x.dtype() == DType::F32,
                    onezero: 0,
                })
                .reads([x.region()])
                .writes([ov.region()])
                .done()
        },
    );
    out
}

/// One TensorE matmul on tile views: `out (+)= s^T @ m` for `s` [K, M], `m` [K, N] and the
/// PSUM view `out` [M, N], reading the operands in place when they are plain strided matrices
/// (copying them otherwise; always with `strided` false, as for the `[K, 2, F]` double-row
/// operands, whose gathered rows are the `2 K` contraction rows). Raises on reads of
/// unwritten tiles.
fn matmul_tiles(
    ins: &Op,
    (k, mm, n): (usize, usize, usize),
    (s, m, out): (&TileRef, &TileRef, &TileRef),
    acc: bool,
    strided: bool,
) {
    let (api, loc) = (ins.api, ins.loc);
    let distinct = strided
        && !std::ptr::eq(s.tile, out.tile)
        && !std::ptr::eq(m.tile, out.tile)
        && [s, m, out]
            .iter()
            .all(|t| t.cast.is_none() && t.ind.is_none());
    if let (true, DType::F32, Some(sa), Some(ma), Some(oa)) = (
        distinct,
        out.dtype(),
        s.ap.as_matrix(),
        m.ap.as_matrix(),
        out.ap.as_matrix(),
    ) {
        s.check_init(api, loc);
        m.check_init(api, loc);
        if acc {
            out.check_init(api, loc);
        }
        let (sd, md) = (s.tile.data(), m.tile.data());
        let mut od = out.tile.data_mut();
        exec::gemm_tn_strided(
            k,
            mm,
            n,
            exec::Strided {
                data: &sd,
                offset: sa.0,
                rs: sa.1,
                cs: sa.2,
            },
            exec::Strided {
                data: &md,
                offset: ma.0,
                rs: ma.1,
                cs: ma.2,
            },
            exec::StridedMut {
                data: &mut od,
                offset: oa.0,
                rs: oa.1,
                cs: oa.2,
            },
            acc,
        );
        drop(od);
        out.mark_written();
        return;
    }
    let (a, b) = (s.gather(api, loc), m.gather(api, loc));
    let mut c = if acc {
        out.gather(api, loc)
    } else {
        vec![0.0; mm * n]
    };
    exec::gemm_tn(k, mm, n, &a, &b, &mut c, acc);
    out.scatter(c);
}
