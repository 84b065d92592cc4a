//! VectorE instructions (some also on ScalarE / GpSimdE through an `engine` argument):
//! `tensor_tensor`, `tensor_scalar`, `tensor_reduce`, `tensor_copy`, `tensor_tensor_scan`,
//! `reciprocal`, `memset`, `bn_stats`, `bn_aggr`.
//!
//! Math is fp32 on the values (already rounded to their dtypes); the result is rounded once to
//! the output dtype. Additive reductions (`tensor_reduce` with add, the batch-norm statistics)
//! accumulate in f64 and round once, i.e. they return the correctly rounded fp32 result; the
//! hardware's own summation order is not public.

use super::{
    engine_in, fail, gpsimd_sbuf, issue_op, not_both_psum, operand, out_tile, same_free,
    same_partitions, short, AluOp, Engine, Operand, PerPartition, Site,
};
use crate::context::env;
use crate::dtype::DType;
use crate::error::{ErrorKind, SourceLoc};
use crate::record::{MemKind, Opcode};
use crate::target::Target;
use crate::tile::{Tile, TileRef};

/// Bitvec operators need integer operands.
pub(super) fn bitvec_needs_ints(
    api: &'static str,
    op: AluOp,
    dtypes: &[(&str, DType)],
    loc: SourceLoc,
) {
    if !op.is_bitvec() {
        return;
    }
    for (what, d) in dtypes {
        if !d.is_int() {
            fail(
                ErrorKind::DType,
                api,
                format!(
                    "bitvec operator '{op}' of '{}' works on integer bit patterns, but operand '{what}' has dtype {d}",
                    short(api)
                ),
                loc,
            );
        }
    }
}

/// Bitvec operators run on VectorE only.
fn bitvec_on_vector(api: &'static str, ops: &[AluOp], engine: Engine, loc: SourceLoc) {
    if engine != Engine::Vector {
        if let Some(op) = ops.iter().find(|o| o.is_bitvec()) {
            fail(
                ErrorKind::InvalidArgument,
                api,
                format!(
                    "bitvec operator '{op}' of '{}' is only supported on the Vector Engine, not {}",
                    short(api),
                    engine.name()
                ),
                loc,
            );
        }
    }
}

/// The engine a `tensor_tensor` runs on: GpSimd for `power` and for 32-bit integer
/// add/subtract/multiply, VectorE otherwise (NKI's engine table).
fn tensor_tensor_engine(op: AluOp, a: DType, b: DType) -> Engine {
    let int32 = |d: DType| matches!(d, DType::I32 | DType::U32);
    let int_arith = matches!(op, AluOp::Add | AluOp::Subtract | AluOp::Multiply);
    if op == AluOp::Power || (int_arith && int32(a) && int32(b)) {
        Engine::GpSimd
    } else {
        Engine::Vector
    }
}

/// Element-wise `data1 op data2` (NKI `nisa.tensor_tensor`).
///
/// Both tiles need the same partition count and the same number of elements per partition,
/// and cannot both be in PSUM. The output (SBUF, `data1`'s shape) has `dtype`, or the promoted
/// input dtype. Runs on VectorE, or on GpSimdE for `power` and 32-bit integer
/// add/subtract/multiply (then neither input may be in PSUM).
#[track_caller]
pub fn tensor_tensor<'a, 'b>(
    data1: impl Into<TileRef<'a>>,
    data2: impl Into<TileRef<'b>>,
    op: AluOp,
    dtype: Option<DType>,
) -> Tile {
    const API: &str = "nisa.tensor_tensor";
    let loc = SourceLoc::caller();
    let e = env(API, loc);
    let (a, b): (TileRef, TileRef) = (data1.into(), data2.into());
    operand(API, "data1", &a, loc);
    operand(API, "data2", &b, loc);
    same_partitions(API, ("data1", &a), ("data2", &b), loc);
    same_free(API, ("data1", &a), ("data2", &b), loc);
    not_both_psum(API, ("data1", &a), ("data2", &b), loc);
    bitvec_needs_ints(API, op, &[("data1", a.dtype()), ("data2", b.dtype())], loc);
    let engine = tensor_tensor_engine(op, a.dtype(), b.dtype());
    if engine == Engine::GpSimd {
        gpsimd_sbuf(API, "data1", &a, loc);
        gpsimd_sbuf(API, "data2", &b, loc);
    }
    let in_dtype = DType::promote(a.dtype(), b.dtype());
    let out_dtype = dtype.unwrap_or(in_dtype);
    let out = out_tile(API, MemKind::Sbuf, out_dtype, a.shape(), loc);
    let ov = out.view();
    let site = Site::new(engine, Opcode::TensorTensor, API, loc).with_alu(op);
    issue_op(e, site, &[&a, &b], &[], &[&ov], out_dtype, || {
        let (x, y) = (a.gather(API, loc), b.gather(API, loc));
        let r = x
            .iter()
            .zip(&y)
            .map(|(&p, &q)| op.eval_typed(p, q, in_dtype))
            .collect();
        ov.scatter(r);
    });
    out
}

/// The keyword arguments of [`tensor_scalar`]: the optional second operator, the operand
/// order flags, the output dtype and the engine (default VectorE).
///
/// ```ignore
/// // (x * f) + 2.5, with f a [P, 1] tile
/// nisa::tensor_scalar(&x, AluOp::Multiply, &f, TensorScalarArgs::new().then(AluOp::Add, 2.5));
/// // 1 - x
/// nisa::tensor_scalar(&x, AluOp::Subtract, 1.0, TensorScalarArgs::new().reverse0());
/// ```
#[derive(Clone, Copy, Debug)]
pub struct TensorScalarArgs<'a> {
    /// Computes `operand0 op0 data` instead of `data op0 operand0`.
    pub reverse0: bool,
    /// The second operator and its operand (scalar or `[P, 1]` tile).
    pub op1: Option<(AluOp, Operand<'a>)>,
    /// Computes `operand1 op1 t` instead of `t op1 operand1`.
    pub reverse1: bool,
    /// Output dtype (default: `data`'s dtype).
    pub dtype: Option<DType>,
    /// Engine: Vector (default), Scalar or GpSimd.
    pub engine: Engine,
}

impl Default for TensorScalarArgs<'_> {
    fn default() -> Self {
        TensorScalarArgs {
            reverse0: false,
            op1: None,
            reverse1: false,
            dtype: None,
            engine: Engine::Vector,
        }
    }
}

impl<'a> TensorScalarArgs<'a> {
    /// The defaults: one operator, VectorE, `data`'s dtype.
    pub fn new() -> Self {
        Self::default()
    }
    /// Reverses the operands of the first operator (`operand0 op0 data`).
    pub fn reverse0(mut self) -> Self {
        self.reverse0 = true;
        self
    }
    /// Adds the second operator: `(...) op1 operand1`.
    pub fn then(mut self, op1: AluOp, operand1: impl Into<Operand<'a>>) -> Self {
        self.op1 = Some((op1, operand1.into()));
        self
    }
    /// Reverses the operands of the second operator (`operand1 op1 t`).
    pub fn reverse1(mut self) -> Self {
        self.reverse1 = true;
        self
    }
    /// Sets the output dtype.
    pub fn dtype(mut self, dtype: DType) -> Self {
        self.dtype = Some(dtype);
        self
    }
    /// Sets the engine.
    pub fn engine(mut self, engine: Engine) -> Self {
        self.engine = engine;
        self
    }
}

/// `(data op0 operand0) op1 operand1` with scalar or per-partition `[P, 1]` operands broadcast
/// along the free dimension (NKI `nisa.tensor_scalar`). The second operator and the `reverse`
/// flags come from `args`.
///
/// Both operators are arithmetic, or both bitvec (integer data, VectorE only). ScalarE needs
/// trn2 or later and supports only `multiply`, `add` and `multiply` then `add`; GpSimdE cannot
/// access PSUM.
#[track_caller]
pub fn tensor_scalar<'a>(
    data: impl Into<TileRef<'a>>,
    op0: AluOp,
    operand0: impl Into<Operand<'a>>,
    args: TensorScalarArgs<'a>,
) -> Tile {
    const API: &str = "nisa.tensor_scalar";
    let loc = SourceLoc::caller();
    let e = env(API, loc);
    let x: TileRef = data.into();
    let engine = args.engine;
    engine_in(
        API,
        engine,
        &[Engine::Vector, Engine::Scalar, Engine::GpSimd],
        loc,
    );
    operand(API, "data", &x, loc);
    if engine == Engine::GpSimd {
        gpsimd_sbuf(API, "data", &x, loc);
    }
    let op1 = args.op1.map(|(o, _)| o);
    if let Some(o1) = op1 {
        if o1.is_bitvec() != op0.is_bitvec() {
            fail(
                ErrorKind::InvalidArgument,
                API,
                format!(
                    "operators '{op0}' and '{o1}' of 'tensor_scalar' must both be arithmetic or both be bitvec operators"
                ),
                loc,
            );
        }
    }
    let ops: Vec<AluOp> = std::iter::once(op0).chain(op1).collect();
    bitvec_on_vector(API, &ops, engine, loc);
    bitvec_needs_ints(API, op0, &[("data", x.dtype())], loc);
    if engine == Engine::Scalar && e.target == Target::Trn1 {
        fail(
            ErrorKind::InvalidArgument,
            API,
            "'tensor_scalar' on the Scalar Engine needs NeuronCore-v3 or later (trn2+); use the Vector Engine or activation(copy) with scale/bias on trn1".to_string(),
            loc,
        );
    }
    if engine == Engine::Scalar {
        let ok = matches!(
            (op0, op1),
            (AluOp::Multiply, Some(AluOp::Add)) | (AluOp::Multiply, None) | (AluOp::Add, None)
        );
        if !ok {
            let second = op1.map(|o| o.name()).unwrap_or("None");
            fail(
                ErrorKind::InvalidArgument,
                API,
                format!(
                    "Scalar Engine supports only (multiply, add), (multiply, None) and (add, None) in 'tensor_scalar', got ({op0}, {second})"
                ),
                loc,
            );
        }
    }
    let p = x.partitions();
    let s0 = PerPartition::new(API, "operand0", operand0.into(), p, loc);
    let s1 = args
        .op1
        .map(|(_, o)| PerPartition::new(API, "operand1", o, p, loc));
    let in_dtype = x.dtype();
    let out_dtype = args.dtype.unwrap_or(in_dtype);
    let out = out_tile(API, MemKind::Sbuf, out_dtype, x.shape(), loc);
    let ov = out.view();
    let (rev0, rev1) = (args.reverse0, args.reverse1);
    let site = Site::new(engine, Opcode::TensorScalar, API, loc);
    let extra: Vec<&TileRef> = [s0.tile(), s1.as_ref().and_then(|s| s.tile())]
        .into_iter()
        .flatten()
        .collect();
    issue_op(e, site, &[&x], &extra, &[&ov], out_dtype, || {
        let v = x.gather(API, loc);
        let c0 = s0.values(API, p, loc);
        let c1 = s1.map(|s| s.values(API, p, loc));
        let f = x.free_size();
        let apply = |o: AluOp, t: f32, c: f32, rev: bool| {
            if rev {
                o.eval_typed(c, t, in_dtype)
            } else {
                o.eval_typed(t, c, in_dtype)
            }
        };
        let mut r = Vec::with_capacity(v.len());
        for (i, &t) in v.iter().enumerate() {
            let part = i / f.max(1);
            let mut t = apply(op0, t, c0[part], rev0);
            if let (Some(o1), Some(c1)) = (op1, &c1) {
                t = apply(o1, t, c1[part], rev1);
            }
            r.push(t);
        }
        ov.scatter(r);
    });
    out
}

/// Folds `xs` with `op` (an additive fold accumulates in f64 and rounds once; other operators
/// fold left in fp32 from the first element, like NumPy's `ufunc.reduce`).
pub(super) fn fold(op: AluOp, xs: impl Iterator<Item = f32>, dtype: DType) -> f32 {
    if op == AluOp::Add {
        return xs.map(|v| v as f64).sum::<f64>() as f32;
    }
    let mut it = xs;
    let first = it.next().unwrap_or(op.reduce_identity().unwrap_or(0.0));
    it.fold(first, |acc, v| op.eval_typed(acc, v, dtype))
}

/// True when `axes` are the last dimensions of a rank-`nd` shape, each once and in increasing
/// order (`[nd - 1]`, `[nd - 2, nd - 1]`, ...): the free-axis reductions NKI supports.
pub(crate) fn trailing_axes(axes: &[usize], nd: usize) -> bool {
    !axes.is_empty()
        && axes.iter().all(|&a| a < nd)
        && axes.windows(2).all(|w| w[1] == w[0] + 1)
        && axes.last() == Some(&(nd - 1))
}

/// The result shape of reducing `shape` over its axes `first..` (`keepdims` keeps them as 1; a
/// result with no free axis left is `[P, 1]`), and the number of elements folded into each
/// result element.
pub(crate) fn reduced_shape(shape: &[usize], first: usize, keepdims: bool) -> (Vec<usize>, usize) {
    let mut dims: Vec<usize> = shape[..first].to_vec();
    if keepdims {
        dims.extend(std::iter::repeat_n(1, shape.len() - first));
    } else if dims.len() == 1 {
        dims.push(1);
    }
    (dims, shape[first..].iter().product())
}

/// Reduces `data` along free axes `axes` with `op` (NKI `nisa.tensor_reduce`).
///
/// `axes` must be the last dimensions of `data` in order (`[1]`, `[1, 2]`, ...); the partition
/// axis 0 cannot be reduced (use `tensor_partition_reduce` or a matmul). `keepdims` keeps the
/// reduced axes as size 1; when no free axis would remain the result is `[P, 1]` (tiles are at
/// least 2-D). `negate` multiplies the result by -1. Output: SBUF, `dtype` or `data`'s dtype.
#[track_caller]
pub fn tensor_reduce<'a>(
    op: AluOp,
    data: impl Into<TileRef<'a>>,
    axes: &[usize],
    keepdims: bool,
    negate: bool,
    dtype: Option<DType>,
) -> Tile {
    const API: &str = "nisa.tensor_reduce";
    let loc = SourceLoc::caller();
    let e = env(API, loc);
    let x: TileRef = data.into();
    operand(API, "data", &x, loc);
    if !op.is_reducible() {
        fail(
            ErrorKind::InvalidArgument,
            API,
            format!(
                "'{op}' is not a reduce operator; 'tensor_reduce' takes add, subtract, multiply, maximum, minimum, logical or bitwise and/or/xor"
            ),
            loc,
        );
    }
    bitvec_needs_ints(API, op, &[("data", x.dtype())], loc);
    let nd = x.shape().len();
    if axes.contains(&0) {
        fail(
            ErrorKind::PartitionReduction,
            API,
            format!(
                "Reduction on partition axes is not supported: axis 0 of data{:?} in 'tensor_reduce' is the partition axis; reduce free axes, or use tensor_partition_reduce / a matmul against ones",
                x.shape()
            ),
            loc,
        );
    }
    if !trailing_axes(axes, nd) {
        fail(
            ErrorKind::InvalidArgument,
            API,
            format!(
                "invalid axis {axes:?} for data{:?} in 'tensor_reduce': the axes must be the last free dimensions in increasing order (e.g. [{}] or [1..={}])",
                x.shape(),
                nd - 1,
                nd - 1
            ),
            loc,
        );
    }
    let (dims, inner) = reduced_shape(x.shape(), axes[0], keepdims);
    let out_dtype = dtype.unwrap_or(x.dtype());
    let in_dtype = x.dtype();
    let out = out_tile(API, MemKind::Sbuf, out_dtype, &dims, loc);
    let ov = out.view();
    let site = Site::new(Engine::Vector, Opcode::TensorReduce, API, loc);
    issue_op(e, site, &[&x], &[], &[&ov], out_dtype, || {
        let v = x.gather(API, loc);
        let r = v
            .chunks(inner)
            .map(|c| {
                let s = fold(op, c.iter().copied(), in_dtype);
                if negate {
                    -s
                } else {
                    s
                }
            })
            .collect();
        ov.scatter(r);
    });
    out
}

/// Copies (and casts) a tile into a new SBUF tile (NKI `nisa.tensor_copy`) on VectorE,
/// ScalarE or GpSimdE (GpSimd cannot read PSUM). Values go through fp32.
#[track_caller]
pub fn tensor_copy<'a>(src: impl Into<TileRef<'a>>, dtype: Option<DType>, engine: Engine) -> Tile {
    const API: &str = "nisa.tensor_copy";
    let loc = SourceLoc::caller();
    let e = env(API, loc);
    let x: TileRef = src.into();
    engine_in(
        API,
        engine,
        &[Engine::Vector, Engine::Scalar, Engine::GpSimd],
        loc,
    );
    operand(API, "src", &x, loc);
    if engine == Engine::GpSimd {
        gpsimd_sbuf(API, "src", &x, loc);
    }
    let out_dtype = dtype.unwrap_or(x.dtype());
    let out = out_tile(API, MemKind::Sbuf, out_dtype, x.shape(), loc);
    let ov = out.view();
    let site = Site::new(engine, Opcode::TensorCopy, API, loc);
    issue_op(e, site, &[&x], &[], &[&ov], out_dtype, || {
        ov.scatter(x.gather(API, loc))
    });
    out
}

/// The keyword arguments of [`tensor_tensor_scan`].
#[derive(Clone, Copy, Debug, Default)]
pub struct ScanArgs {
    /// Computes `op0(r[i-1], data0[i])` instead of `op0(data0[i], r[i-1])`.
    pub reverse0: bool,
    /// Computes `op1(data1[i], t)` instead of `op1(t, data1[i])`.
    pub reverse1: bool,
    /// Output dtype (default: `data0`'s dtype).
    pub dtype: Option<DType>,
}

/// Scan along the free dimension of each partition (NKI `nisa.tensor_tensor_scan`):
/// `r[i] = op1(op0(data0[i], r[i-1]), data1[i])` with `r[-1] = initial` (a scalar or a
/// `[P, 1]` tile). The running value stays fp32; each output is rounded to the dtype.
/// `data0` and `data1` need the same partitions and free size and cannot both be in PSUM.
#[track_caller]
pub fn tensor_tensor_scan<'a, 'b>(
    data0: impl Into<TileRef<'a>>,
    data1: impl Into<TileRef<'b>>,
    initial: impl Into<Operand<'a>>,
    op0: AluOp,
    op1: AluOp,
    args: ScanArgs,
) -> Tile {
    const API: &str = "nisa.tensor_tensor_scan";
    let loc = SourceLoc::caller();
    let e = env(API, loc);
    let (a, b): (TileRef, TileRef) = (data0.into(), data1.into());
    operand(API, "data0", &a, loc);
    operand(API, "data1", &b, loc);
    same_partitions(API, ("data0", &a), ("data1", &b), loc);
    same_free(API, ("data0", &a), ("data1", &b), loc);
    not_both_psum(API, ("data0", &a), ("data1", &b), loc);
    for o in [op0, op1] {
        if o.is_bitvec() {
            fail(
                ErrorKind::InvalidArgument,
                API,
                format!(
                    "'tensor_tensor_scan' takes arithmetic operators, got bitvec operator '{o}'"
                ),
                loc,
            );
        }
    }
    let p = a.partitions();
    let init = PerPartition::new(API, "initial", initial.into(), p, loc);
    let out_dtype = args.dtype.unwrap_or(a.dtype());
    let out = out_tile(API, MemKind::Sbuf, out_dtype, a.shape(), loc);
    let ov = out.view();
    let site = Site::new(Engine::Vector, Opcode::TensorTensorScan, API, loc);
    let extra: Vec<&TileRef> = init.tile().into_iter().collect();
    issue_op(e, site, &[&a, &b], &extra, &[&ov], out_dtype, || {
        let (x, y) = (a.gather(API, loc), b.gather(API, loc));
        let r0 = init.values(API, p, loc);
        let f = a.free_size();
        let mut out = Vec::with_capacity(x.len());
        for (part, (xs, ys)) in x.chunks(f).zip(y.chunks(f)).enumerate() {
            let mut r = r0[part];
            for (&d0, &d1) in xs.iter().zip(ys) {
                let t = if args.reverse0 {
                    op0.eval(r, d0)
                } else {
                    op0.eval(d0, r)
                };
                r = if args.reverse1 {
                    op1.eval(d1, t)
                } else {
                    op1.eval(t, d1)
                };
                out.push(r);
            }
        }
        ov.scatter(out);
    });
    out
}

/// Element-wise `1 / x` on VectorE at full fp32 precision (NKI `nisa.reciprocal`; ScalarE's
/// `activation(Reciprocal)` is faster but approximate on hardware).
#[track_caller]
pub fn reciprocal<'a>(data: impl Into<TileRef<'a>>, dtype: Option<DType>) -> Tile {
    const API: &str = "nisa.reciprocal";
    let loc = SourceLoc::caller();
    let e = env(API, loc);
    let x: TileRef = data.into();
    operand(API, "data", &x, loc);
    let out_dtype = dtype.unwrap_or(x.dtype());
    let out = out_tile(API, MemKind::Sbuf, out_dtype, x.shape(), loc);
    let ov = out.view();
    let site = Site::new(Engine::Vector, Opcode::Reciprocal, API, loc);
    issue_op(e, site, &[&x], &[], &[&ov], out_dtype, || {
        ov.scatter(x.gather(API, loc).into_iter().map(|v| 1.0 / v).collect())
    });
    out
}

/// A new SBUF tile of `shape` filled with the compile-time constant `value` rounded to
/// `dtype` (NKI `nisa.memset`), on VectorE or GpSimdE.
#[track_caller]
pub fn memset(shape: &[usize], value: f32, dtype: DType, engine: Engine) -> Tile {
    const API: &str = "nisa.memset";
    let loc = SourceLoc::caller();
    let e = env(API, loc);
    engine_in(API, engine, &[Engine::Vector, Engine::GpSimd], loc);
    let out = out_tile(API, MemKind::Sbuf, dtype, shape, loc);
    let ov = out.view();
    let site = Site::new(engine, Opcode::Memset, API, loc);
    issue_op(e, site, &[], &[], &[&ov], dtype, || {
        ov.scatter(vec![value; ov.ap.shape.numel()])
    });
    out
}

/// `nl.tile_size.bn_stats_fmax`.
const BN_STATS_FMAX: usize = 512;

/// (count, mean, sum of squared deviations) of `xs`, in f64.
fn moments(xs: impl Iterator<Item = f32> + Clone) -> (f64, f64, f64) {
    let n = xs.clone().count() as f64;
    if n == 0.0 {
        return (0.0, 0.0, 0.0);
    }
    let mean = xs.clone().map(|v| v as f64).sum::<f64>() / n;
    let m2 = xs.map(|v| (v as f64 - mean).powi(2)).sum::<f64>();
    (n, mean, m2)
}

/// Per-partition mean/variance statistics (NKI `nisa.bn_stats`): a `[P, 6]` tile holding
/// `(count, mean, variance * count)` of the even-indexed elements then of the odd-indexed
/// elements of each partition (free dims flattened). At most 512 elements per partition
/// (`bn_stats_fmax`); feed one or more results to [`bn_aggr`]. Output dtype: `dtype` or
/// `data`'s.
#[track_caller]
pub fn bn_stats<'a>(data: impl Into<TileRef<'a>>, dtype: Option<DType>) -> Tile {
    const API: &str = "nisa.bn_stats";
    let loc = SourceLoc::caller();
    let e = env(API, loc);
    let x: TileRef = data.into();
    operand(API, "data", &x, loc);
    let f = x.free_size();
    if f > BN_STATS_FMAX {
        fail(
            ErrorKind::InvalidArgument,
            API,
            format!(
                "number of elements per partition {f} of data{:?} in 'bn_stats' exceeds architecture limitation of {BN_STATS_FMAX} (nl.tile_size.bn_stats_fmax); call bn_stats on {BN_STATS_FMAX}-element pieces and aggregate them with one bn_aggr",
                x.shape()
            ),
            loc,
        );
    }
    let out_dtype = dtype.unwrap_or(x.dtype());
    let p = x.partitions();
    let out = out_tile(API, MemKind::Sbuf, out_dtype, &[p, 6], loc);
    let ov = out.view();
    let site = Site::new(Engine::Vector, Opcode::BnStats, API, loc);
    issue_op(e, site, &[&x], &[], &[&ov], out_dtype, || {
        let v = x.gather(API, loc);
        let mut r = Vec::with_capacity(p * 6);
        for row in v.chunks(f) {
            for parity in 0..2 {
                let (n, mean, m2) = moments(row.iter().copied().skip(parity).step_by(2));
                r.extend([n as f32, mean as f32, m2 as f32]);
            }
        }
        ov.scatter(r);
    });
    out
}

/// Aggregates one or more [`bn_stats`] results per partition into `[P, 2]` = (mean, variance)
/// (NKI `nisa.bn_aggr`). `data` holds `(count, mean, variance * count)` triples along its free
/// dimension (a multiple of 3 elements per partition); groups with count 0 contribute nothing.
/// The variance is the population variance. Output dtype: `dtype` or `data`'s.
#[track_caller]
pub fn bn_aggr<'a>(data: impl Into<TileRef<'a>>, dtype: Option<DType>) -> Tile {
    const API: &str = "nisa.bn_aggr";
    let loc = SourceLoc::caller();
    let e = env(API, loc);
    let x: TileRef = data.into();
    operand(API, "data", &x, loc);
    let f = x.free_size();
    if !f.is_multiple_of(3) {
        fail(
            ErrorKind::InvalidArgument,
            API,
            format!(
                "data{:?} of 'bn_aggr' must hold (count, mean, variance*count) triples: {f} elements per partition is not a multiple of 3",
                x.shape()
            ),
            loc,
        );
    }
    let out_dtype = dtype.unwrap_or(x.dtype());
    let p = x.partitions();
    let out = out_tile(API, MemKind::Sbuf, out_dtype, &[p, 2], loc);
    let ov = out.view();
    let site = Site::new(Engine::Vector, Opcode::BnAggr, API, loc);
    issue_op(e, site, &[&x], &[], &[&ov], out_dtype, || {
        let v = x.gather(API, loc);
        let mut r = Vec::with_capacity(p * 2);
        for row in v.chunks(f) {
            let groups: Vec<(f64, f64, f64)> = row
                .chunks(3)
                .map(|g| (g[0] as f64, g[1] as f64, g[2] as f64))
                .filter(|g| g.0 > 0.0)
                .collect();
            let n: f64 = groups.iter().map(|g| g.0).sum();
            let mean = groups.iter().map(|g| g.0 * g.1).sum::<f64>() / n;
            let m2: f64 = groups
                .iter()
                .map(|g| g.2 + g.0 * (g.1 - mean).powi(2))
                .sum();
            r.extend([mean as f32, (m2 / n) as f32]);
        }
        ov.scatter(r);
    });
    out
}
