//! The MX (OCP Microscaling) instructions of NeuronCore-v4: `quantize_mx` (VectorE) and
//! `nc_matmul_mx` (TensorE).
//!
//! Definitions (SDK `nki.isa.quantize_mx`, `nki.isa.nc_matmul_mx`, trn3 architecture guide):
//! a scaling group is 32 values, 8 partitions x the 4 values of one packed x4 element; its
//! scale is one e8m0 code (`2^(code - 127)`), stored as `uint8` or `float8_e8m0fnu`. Scale
//! tiles follow the quadrant layout: the data's partitions `8b..8b+8` have their scales on
//! row `32 (b / 4) + b % 4` of the scale tile, which has 4 partitions for data of one
//! quadrant (32 partitions) and the data's partition count otherwise; the other rows are
//! neither written nor read.
//!
//! `quantize_mx`: the scale of a group whose largest biased fp32 exponent field is `E` is
//! `E - emax + 1` (clamped to 0..=254; `emax` = 8 for e4m3fn, 15 for e5m2): the doc's block
//! scale "two times larger" than the OCP sample algorithm's `2^(floor(log2 amax) - emax)`, so
//! the largest value rounds without saturating. Each value is divided by the scale and
//! rounded to nearest-even in the element format. A group holding a NaN or an infinity gets
//! the NaN scale (255) and NaN elements \[A: the docs and the OCP spec leave this to the
//! implementation\].
//!
//! `nc_matmul_mx`: `dst[i, j] (+)= sum over p, q of S[p, i, q] * s_scale(p, i) *
//! M[p, j, q] * m_scale(p, j)`, with `S[p, i, q]` value `q` of packed element `(p, i)`; the
//! dequantised operands are fp32 and the products are summed in fp32 (as in the NKI
//! library's reference) \[A: the PE array's internal precision is not documented\].
//!
//! Costs: `quantize_mx` runs "4 elements/partition/cycle" \[E ARCH3\] (`timing/cost.rs`);
//! `nc_matmul_mx` is recorded as one TensorE matmul of `K` partitions, `M`, `N`: the cycles
//! of a bf16 matmul of the same moving size while contracting `4 K` values per row, the
//! documented "4x BF16 throughput" \[E ARCH3\].

use super::base::Site;
use super::op::Op;
use super::opts::{MatmulOpts, MatmulPerfMode, Opts};
use super::tensor::{check_tiling, matmul_record};
use crate::builder::instruction;
use crate::dtype::DType;
use crate::error::ErrorKind;
use crate::exec;
use crate::mx;
use crate::record::{Engine, MemKind, Opcode};
use crate::tile::TileRef;

instruction! {
    /// Quantises `src` (fp16/bf16 `[P, F]`, SBUF) to MXFP8 on VectorE (NKI 0.7
    /// `nisa.quantize_mx(dst, src, dst_scale)`; NeuronCore-v4 only): `dst` (`[P, F / 4]`,
    /// `float8_e4m3fn_x4` or `float8_e5m2_x4`) receives the packed values and `dst_scale`
    /// (`uint8` or `float8_e8m0fnu`, `[4, F / 4]` for `P` = 32, else `[P, F / 4]`) one scale per
    /// group in the quadrant layout (see the module docs). `P` is 32, 64, 96 or 128; `F` a
    /// multiple of 4. `opts` takes only the engine (VectorE).
    pub fn quantize_mx<'d, 'a, 's>(
        dst: into TileRef<'d>, src: into TileRef<'a>, dst_scale: into TileRef<'s>,
        opts: into Option<Opts>,
    ) as ins = "nisa.quantize_mx" {
        quantize_mx_on(&ins, [dst, src, dst_scale], Opts::engine_or(opts, Engine::Vector));
    }
}

/// [`quantize_mx`] on its converted operands.
#[track_caller]
fn quantize_mx_on(ins: &Op, [dst, x, scale]: [TileRef; 3], engine: Engine) {
    ins.engine_in(engine, &[Engine::Vector]);
    super::alu_rules::v4_instruction(ins);
    for (what, t) in [("src", &x), ("dst", &dst), ("dst_scale", &scale)] {
        ins.operand(what, t);
        ins.memory(what, t, &[MemKind::Sbuf]);
    }
    dtype_in(ins, "src", &x, &[DType::BF16, DType::F16]);
    dtype_in(ins, "dst", &dst, &[DType::F8E4M3FNx4, DType::F8E5M2x4]);
    dtype_in(ins, "dst_scale", &scale, &[DType::U8, DType::F8E8M0]);
    let (p, f) = (x.partitions(), x.free_size());
    quadrants(ins, "src", &x);
    if !f.is_multiple_of(4) {
        ins.fail(
            ErrorKind::ShapeMismatch,
            format!(
                "src {} of 'quantize_mx' must hold a multiple of 4 elements per partition (groups of 8 partitions x 4 elements), not {f}",
                x.describe()
            ),
        );
    }
    expect_shape(ins, "dst", &dst, [p, f / 4]);
    check_scale(ins, "dst_scale", &scale, p, f / 4);
    let site = Site::new(Engine::Vector, Opcode::QuantizeMx);
    ins.compute(site, &[&x], &[], &[&dst, &scale], || {
        let v = ins.read(&x);
        let (packed, codes) = quantize(dst.dtype(), &v, p, f);
        dst.scatter_slots(packed);
        for (q, view) in scale_views(&scale, p).iter().enumerate() {
            let rows = &codes[q * 4 * (f / 4)..][..view.partitions() * (f / 4)];
            view.scatter_slots(rows.iter().map(|&c| scale_slot(scale.dtype(), c)).collect());
        }
    });
}

instruction! {
    /// `dst (+)= stationary^T @ moving` of MX-quantised operands with their scales applied, on
    /// TensorE (NKI 0.7 `nisa.nc_matmul_mx(dst, stationary, moving, stationary_scale,
    /// moving_scale, tile_position, tile_size)`; NeuronCore-v4 only). `stationary` `[K, M]` and
    /// `moving` `[K, N]` are `float8_e4m3fn_x4`, `float8_e5m2_x4` or `float4_e2m1fn_x4` in SBUF
    /// (K = 32, 64, 96 or 128 partitions, each element 4 contraction values; M even, <= 128;
    /// N <= 512 for an fp32 `dst`, 1024 for bf16); the scales are `uint8`/`float8_e8m0fnu` in
    /// the quadrant layout of [`quantize_mx`]; `dst` is `[M, N]` in PSUM, fp32 or bf16 (rounded
    /// after each matmul). `opts` takes `accumulate` (as `nc_matmul`) and row tiling (column
    /// size 128, start column 0); no transpose, no performance mode.
    pub fn nc_matmul_mx<'d, 'a, 'b, 's, 't>(
        dst: into TileRef<'d>, stationary: into TileRef<'a>, moving: into TileRef<'b>,
        stationary_scale: into TileRef<'s>, moving_scale: into TileRef<'t>,
        opts: into Option<MatmulOpts>,
    ) as ins = "nisa.nc_matmul_mx" {
        let tiles = [dst, stationary, moving, stationary_scale, moving_scale];
        matmul_mx(&ins, tiles, opts.unwrap_or_default());
    }
}

/// [`nc_matmul_mx`] on its converted operands.
#[track_caller]
fn matmul_mx(ins: &Op, [dst, s, m, ss, ms]: [TileRef; 5], opts: MatmulOpts) {
    if !ins.target().spec().mx_matmul {
        super::alu_rules::v4_instruction(ins);
    }
    if opts.is_transpose || opts.perf_mode != MatmulPerfMode::None {
        ins.fail(
            ErrorKind::InvalidArgument,
            "'nc_matmul_mx' takes no is_transpose and no perf_mode".to_string(),
        );
    }
    if opts.tile_position.is_some_and(|(_, c)| c != 0)
        || opts.tile_size.is_some_and(|(_, c)| c != 128)
    {
        ins.fail(
            ErrorKind::MatmulLimit,
            format!(
                "'nc_matmul_mx' supports only row tiling: tile_position {:?} must start at column 0 and tile_size {:?} have 128 columns",
                opts.tile_position, opts.tile_size
            ),
        );
    }
    check_tiling(ins, &opts, &s);
    let x4 = [DType::F8E4M3FNx4, DType::F8E5M2x4, DType::F4E2M1FNx4];
    for (what, t) in [
        ("stationary", &s),
        ("moving", &m),
        ("stationary_scale", &ss),
        ("moving_scale", &ms),
    ] {
        ins.operand(what, t);
        ins.memory(what, t, &[MemKind::Sbuf]);
    }
    dtype_in(ins, "stationary", &s, &x4);
    dtype_in(ins, "moving", &m, &x4);
    dtype_in(ins, "stationary_scale", &ss, &[DType::U8, DType::F8E8M0]);
    dtype_in(ins, "moving_scale", &ms, &[DType::U8, DType::F8E8M0]);
    ins.memory("dst", &dst, &[MemKind::Psum]);
    dtype_in(ins, "dst", &dst, &[DType::F32, DType::BF16]);
    quadrants(ins, "stationary", &s);
    ins.same_partitions(("stationary", &s), ("moving", &m));
    let (k, mm, n) = (s.partitions(), s.free_size(), m.free_size());
    let n_max = if dst.dtype() == DType::F32 { 512 } else { 1024 };
    if !mm.is_multiple_of(2) || mm > 128 || n > n_max {
        ins.fail(
            ErrorKind::MatmulLimit,
            format!(
                "stationary {} / moving {} of 'nc_matmul_mx': the stationary free size must be even and <= 128, the moving free size <= {n_max} for a {} dst",
                s.describe(),
                m.describe(),
                dst.dtype()
            ),
        );
    }
    check_scale(ins, "stationary_scale", &ss, k, mm);
    check_scale(ins, "moving_scale", &ms, k, n);
    expect_shape(ins, "dst", &dst, [mm, n]);
    let acc = opts.accumulate.unwrap_or_else(|| dst.is_written());
    ins.indirection(Engine::Tensor, &[&s, &m, &dst]);
    ins.issue_in_place(
        &[&dst],
        || {
            let a = dequantize(ins, &s, &ss);
            let b = dequantize(ins, &m, &ms);
            let mut c = if acc {
                ins.read(&dst)
            } else {
                vec![0.0; mm * n]
            };
            exec::gemm_tn(4 * k, mm, n, &a, &b, &mut c, acc);
            dst.scatter(c);
        },
        (ins.api, Engine::Tensor, Opcode::Matmul),
        |r| matmul_record(r, (k, mm, n, 0), (&s, &m), &dst, acc, &[&ss, &ms]),
    );
}

/// The packed slots (`[P, F / 4]`) and the scale codes (`[P / 8, F / 4]`) of the row-major
/// `[P, F]` values `v` quantised to MX type `x4` (see the module docs).
pub(crate) fn quantize(x4: DType, v: &[f32], p: usize, f: usize) -> (Vec<f32>, Vec<u32>) {
    let g = f / 4;
    let emax = mx::emax(x4);
    let mut packed = vec![0.0; p * g];
    let mut codes = vec![0u32; p / 8 * g];
    for b in 0..p / 8 {
        for c in 0..g {
            let group = (8 * b..8 * b + 8).flat_map(|r| v[r * f + 4 * c..][..4].iter().copied());
            let (mut special, mut e_max) = (false, 0i32);
            for x in group {
                special |= !x.is_finite();
                e_max = e_max.max(((x.to_bits() >> 23) & 0xff) as i32);
            }
            let code = if special {
                255
            } else {
                (e_max - emax + 1).clamp(0, 254) as u32
            };
            codes[b * g + c] = code;
            let inv = 1.0 / mx::scale_value(code);
            for r in 8 * b..8 * b + 8 {
                let vals: [f32; 4] = std::array::from_fn(|j| {
                    let x = v[r * f + 4 * c + j];
                    if special {
                        f32::NAN
                    } else {
                        (x as f64 * inv) as f32
                    }
                });
                packed[r * g + c] = mx::pack(x4, vals);
            }
        }
    }
    (packed, codes)
}

/// The dequantised `[4 K, F]` fp32 matrix of the MX operand `t` (`[K, F]` x4) with the scales
/// in `scale`: row `4 p + q`, column `i` holds value `q` of element `(p, i)` times its scale.
fn dequantize(ins: &Op, t: &TileRef, scale: &TileRef) -> Vec<f32> {
    let (k, f) = (t.partitions(), t.free_size());
    let slots = t.gather_slots(ins.api, ins.loc);
    let mut codes = Vec::with_capacity(k / 8 * f);
    for view in scale_views(scale, k) {
        let s = view.gather_slots(ins.api, ins.loc);
        codes.extend(s.iter().map(|&x| scale_code(scale.dtype(), x)));
    }
    let mut out = vec![0.0; 4 * k * f];
    for p in 0..k {
        for i in 0..f {
            let sc = mx::scale_value(codes[p / 8 * f + i]);
            for (q, v) in mx::unpack(t.dtype(), slots[p * f + i])
                .into_iter()
                .enumerate()
            {
                out[(4 * p + q) * f + i] = (v as f64 * sc) as f32;
            }
        }
    }
    out
}

/// The views of the scale rows of data spanning `p` partitions: rows `32 q .. 32 q + 4` of
/// `scale` for each quadrant `q` (the whole 4-partition tile for one quadrant).
fn scale_views<'a>(scale: &TileRef<'a>, p: usize) -> Vec<TileRef<'a>> {
    (0..p.div_ceil(32))
        .map(|q| scale.slice((mx::scale_row(4 * q)..mx::scale_row(4 * q) + 4, ..)))
        .collect()
}

/// The e8m0 code held in slot `s` of a scale tile of `dtype` (`uint8`: the code itself).
fn scale_code(dtype: DType, s: f32) -> u32 {
    match dtype {
        DType::F8E8M0 => mx::e8m0_code(s),
        _ => s as u32,
    }
}

/// The slot of e8m0 code `c` in a scale tile of `dtype`.
fn scale_slot(dtype: DType, c: u32) -> f32 {
    match dtype {
        DType::F8E8M0 => mx::scale_value(c) as f32,
        _ => c as f32,
    }
}

/// Fails unless `t`'s dtype is one of `allowed`.
fn dtype_in(ins: &Op, what: &str, t: &TileRef, allowed: &[DType]) {
    if !allowed.contains(&t.dtype()) {
        let names: Vec<&str> = allowed.iter().map(|d| d.name()).collect();
        ins.fail(
            ErrorKind::DType,
            format!(
                "{what} {} of '{}' must be {}",
                t.describe(),
                ins.api.trim_start_matches("nisa."),
                names.join(" or ")
            ),
        );
    }
}

/// Fails unless `t` spans whole quadrants: 32, 64, 96 or 128 partitions.
fn quadrants(ins: &Op, what: &str, t: &TileRef) {
    let p = t.partitions();
    if p == 0 || !p.is_multiple_of(32) || p > 128 {
        ins.fail(
            ErrorKind::ShapeMismatch,
            format!(
                "{what} {} of '{}' must span a multiple of 32 partitions, at most 128, not {p}",
                t.describe(),
                ins.api.trim_start_matches("nisa.")
            ),
        );
    }
}

/// Fails unless `t` has `[rows, cols]` partitions and elements per partition.
fn expect_shape(ins: &Op, what: &str, t: &TileRef, [rows, cols]: [usize; 2]) {
    if t.partitions() != rows || t.free_size() != cols {
        ins.fail(
            ErrorKind::ShapeMismatch,
            format!(
                "{what} {} of '{}' must have {rows} partitions of {cols} elements",
                t.describe(),
                ins.api.trim_start_matches("nisa.")
            ),
        );
    }
}

/// Fails unless the scale tile `t` fits data of `p` partitions and `cols` x4 elements per
/// partition: `[4, cols]` for one quadrant, `[p, cols]` otherwise, 2-D, starting within the
/// first 16 partitions of its quadrant (SDK `quantize_mx`, "Layout").
fn check_scale(ins: &Op, what: &str, t: &TileRef, p: usize, cols: usize) {
    expect_shape(ins, what, t, [mx::scale_partitions(p), cols]);
    if t.shape().len() != 2 || t.start_partition() % 32 > 12 {
        ins.fail(
            ErrorKind::ShapeMismatch,
            format!(
                "{what} {} of '{}' must be 2-D and start within the first 16 partitions of an SBUF quadrant (start partition {})",
                t.describe(),
                ins.api.trim_start_matches("nisa."),
                t.start_partition()
            ),
        );
    }
}
