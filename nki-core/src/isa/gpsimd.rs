//! GpSimdE instructions: `iota`, `affine_select` (causal masks) and `tensor_partition_reduce`.
//! GpSimd cannot access PSUM.

use super::base::{short, Dst, Output, Site};
use super::op::Op;
use super::opts::Opts;
use super::vector::{bitvec_needs_ints, fold, only_engine};
use super::{AluOp, Engine};
use crate::access::MAX_DIMS;
use crate::dtype::DType;
use crate::emit::trace::{Arg, Call};
use crate::error::ErrorKind;
use crate::record::{MemKind, Opcode};
use crate::tile::TileRef;

/// An affine index expression over a `[partitions, num_1, ..., num_k]` iteration space (NKI's
/// `iota` pattern / `affine_select` predicate):
/// `value[p, i_1, ..., i_k] = offset + p * channel_multiplier + sum_k step_k * i_k`,
/// evaluated in int32 arithmetic.
///
/// ```
/// use nki_core::nisa::AffineExpr;
/// use nki_core::prelude::*;
///
/// // 0, 1, ..., 511 on one partition
/// let ramp = AffineExpr::new(1, 0).free(1, 512);
/// // causal mask over [128 queries, 128 keys]: p - j (keep where >= 0)
/// let causal = AffineExpr::new(128, 1).free(-1, 128);
/// let (mut a, mut b) = (Hbm::<i32>::zeros([1, 512]), Hbm::<i32>::zeros([128, 128]));
/// let (oa, ob) = (a.as_output(), b.as_output());
/// Launch::new(1)
///     .run(|| {
///         let t = nl::ndarray(&[1, 512], DType::I32, MemKind::Sbuf);
///         nisa::iota(&t, &ramp, None);
///         nl::store(&oa, &t);
///         let m = nl::ndarray(&[128, 128], DType::I32, MemKind::Sbuf);
///         nisa::iota(&m, &causal, None);
///         nl::store(&ob, &m);
///     })
///     .unwrap();
/// assert_eq!(a.to_vec().unwrap()[511], 511);
/// let m = b.to_vec().unwrap();
/// assert_eq!((m[5 * 128 + 2], m[2 * 128 + 5]), (3, -3));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AffineExpr {
    /// Number of partitions (dimension 0 of the generated tile).
    pub partitions: usize,
    /// Coefficient of the partition index.
    pub channel_multiplier: i32,
    /// Constant term.
    pub offset: i32,
    /// `(step, num)` of each free dimension, outermost first (at most 4).
    pub pattern: Vec<(i32, usize)>,
}

impl AffineExpr {
    /// `p * channel_multiplier` over `partitions` partitions, with no free dimension yet.
    pub fn new(partitions: usize, channel_multiplier: i32) -> AffineExpr {
        AffineExpr {
            partitions,
            channel_multiplier,
            offset: 0,
            pattern: Vec::new(),
        }
    }

    /// Appends a free dimension of `num` indices with coefficient `step`.
    pub fn free(mut self, step: i32, num: usize) -> AffineExpr {
        self.pattern.push((step, num));
        self
    }

    /// Sets the constant term.
    pub fn offset(mut self, offset: i32) -> AffineExpr {
        self.offset = offset;
        self
    }

    /// The shape of the iteration space: `[partitions, num_1, ...]` (`[partitions, 1]` without
    /// free dimensions).
    pub fn shape(&self) -> Vec<usize> {
        let mut s = vec![self.partitions];
        s.extend(self.pattern.iter().map(|d| d.1));
        if s.len() == 1 {
            s.push(1);
        }
        s
    }

    /// The int32 values in row-major order over [`shape`](Self::shape).
    pub fn values(&self) -> Vec<i32> {
        let free: usize = self.pattern.iter().map(|d| d.1).product();
        let mut out = Vec::with_capacity(self.partitions * free);
        let mut idx = vec![0usize; self.pattern.len()];
        for p in 0..self.partitions {
            let base = self.offset as i64 + p as i64 * self.channel_multiplier as i64;
            idx.iter_mut().for_each(|i| *i = 0);
            for _ in 0..free {
                let v = self
                    .pattern
                    .iter()
                    .zip(&idx)
                    .fold(base, |acc, (&(step, _), &i)| acc + step as i64 * i as i64);
                out.push(v as i32);
                for d in (0..idx.len()).rev() {
                    idx[d] += 1;
                    if idx[d] < self.pattern[d].1 {
                        break;
                    }
                    idx[d] = 0;
                }
            }
        }
        out
    }

    fn validate(&self, ins: &Op) {
        if self.pattern.len() > MAX_DIMS - 1 {
            ins.fail(
                ErrorKind::InvalidArgument,
                format!(
                    "affine pattern of '{}' has {} free dimensions; at most {} are supported",
                    short(ins.api),
                    self.pattern.len(),
                    MAX_DIMS - 1
                ),
            );
        }
        if self.partitions == 0 || self.pattern.iter().any(|d| d.1 == 0) {
            ins.fail(
                ErrorKind::InvalidArgument,
                format!(
                    "affine pattern of '{}' has an empty dimension (shape {:?})",
                    short(ins.api),
                    self.shape()
                ),
            );
        }
    }
}

/// Generates `expr`'s int32 values into `dst` (NKI `nisa.iota(dst, pattern, offset,
/// channel_multiplier)`; GpSimdE), cast to `dst`'s dtype: exact in int32/uint32 (a negative
/// value saturates to 0 in uint32), rounded to nearest in float dtypes. `dst` (SBUF) has
/// `expr`'s partitions and elements per partition.
#[track_caller]
pub fn iota<'d>(dst: impl Into<TileRef<'d>>, expr: &AffineExpr, opts: impl Into<Option<Opts>>) {
    let ins = Op::begin("nisa.iota");
    only_engine(&ins, opts.into(), Engine::GpSimd);
    let dst: TileRef = dst.into();
    ins.trace(|| {
        use super::trace_args as ta;
        let pattern: Vec<String> = expr
            .pattern
            .iter()
            .map(|(step, num)| format!("[{step}, {num}]"))
            .collect();
        Call::new("nisa.iota")
            .arg("dst", ta::tile(&dst))
            .arg("pattern", Arg::Const(format!("[{}]", pattern.join(", "))))
            .opt(
                "offset",
                (expr.offset != 0).then_some(Arg::Int(expr.offset.into())),
            )
            .opt(
                "channel_multiplier",
                (expr.channel_multiplier != 0).then_some(Arg::Int(expr.channel_multiplier.into())),
            )
    });
    iota_to(&ins, Dst::Into(dst), expr);
}

/// The `iota` builder.
pub(crate) fn iota_to<'d>(ins: &Op, dst: Dst<'d>, expr: &AffineExpr) -> Output<'d> {
    expr.validate(ins);
    let out = ins.output(dst, MemKind::Sbuf, DType::I32, &expr.shape(), false);
    let ov = out.view();
    let dtype = ov.dtype();
    let site = Site::new(Engine::GpSimd, Opcode::Iota);
    ins.compute(site, &[], &[], &[&ov], || {
        let vals = expr.values().into_iter();
        ov.scatter_slots(vals.map(|v| dtype.slot_of_int(v as i64)).collect())
    });
    out
}

fn compare(cmp: AluOp, v: i64) -> bool {
    match cmp {
        AluOp::Equal => v == 0,
        AluOp::NotEqual => v != 0,
        AluOp::Greater => v > 0,
        AluOp::GreaterEqual => v >= 0,
        AluOp::Less => v < 0,
        AluOp::LessEqual => v <= 0,
        _ => unreachable!("checked by affine_select"),
    }
}

/// `dst = cmp(pred, 0) ? on_true : on_false_value` element-wise, with the predicate's affine
/// value computed on the fly (NKI `nisa.affine_select(dst, pattern, channel_multiplier,
/// on_true_tile, on_false_value, cmp_op, offset)`; GpSimdE). `pred`'s iteration space must
/// have `on_true`'s partitions and elements per partition; `cmp` is one of equal, not_equal,
/// greater, greater_equal, less, less_equal. A causal mask:
/// `affine_select(&out, &AffineExpr::new(128, 1).free(-1, 128), AluOp::GreaterEqual, &scores, -9984.0, None)`.
///
/// `on_true` and `dst` (SBUF, `on_true`'s partitions and elements per partition) are floats
/// or 8/16-bit integers; `on_false_value` is fp32.
#[track_caller]
pub fn affine_select<'d, 'a>(
    dst: impl Into<TileRef<'d>>,
    pred: &AffineExpr,
    cmp: AluOp,
    on_true: impl Into<TileRef<'a>>,
    on_false_value: f32,
    opts: impl Into<Option<Opts>>,
) {
    let ins = Op::begin("nisa.affine_select");
    only_engine(&ins, opts.into(), Engine::GpSimd);
    let dst = Dst::Into(dst.into());
    affine_select_to(&ins, dst, pred, cmp, on_true.into(), on_false_value);
}

/// The `affine_select` builder.
pub(crate) fn affine_select_to<'d>(
    ins: &Op,
    dst: Dst<'d>,
    pred: &AffineExpr,
    cmp: AluOp,
    x: TileRef,
    on_false_value: f32,
) -> Output<'d> {
    const API: &str = "nisa.affine_select";
    ins.operand_on(Engine::GpSimd, "on_true_tile", &x);
    pred.validate(ins);
    if !cmp.is_comparison() {
        ins.fail(ErrorKind::InvalidArgument, format!(
                "'{cmp}' is not a comparison operator; 'affine_select' compares the affine value with 0 using equal, not_equal, greater, greater_equal, less or less_equal"
            ));
    }
    let pshape = pred.shape();
    if pred.partitions != x.partitions() {
        ins.fail(ErrorKind::PartitionMismatch, format!(
                "number of partitions (dimension 0 size of a tile) mismatch in parameters (pred{pshape:?}, on_true_tile{:?}) of 'affine_select'",
                x.shape()
            ));
    }
    let pfree: usize = pshape[1..].iter().product();
    if pfree != x.free_size() {
        ins.fail(ErrorKind::ShapeMismatch, format!(
                "predicate pred{pshape:?} and on_true_tile{:?} of 'affine_select' must have the same number of elements per partition",
                x.shape()
            ));
    }
    let out = ins.output(dst, MemKind::Sbuf, x.dtype(), x.shape(), false);
    let ov = out.view();
    for (what, d) in [("on_true_tile", x.dtype()), ("output", ov.dtype())] {
        if matches!(d, DType::I32 | DType::U32) {
            ins.fail(ErrorKind::DType, format!(
                    "{what} dtype {d} of 'affine_select' is not supported: use a float or an 8/16-bit integer type"
                ));
        }
    }
    let site = Site::new(Engine::GpSimd, Opcode::AffineSelect);
    ins.compute(site, &[&x], &[], &[&ov], || {
        let v = x.gather(API, ins.loc);
        let r = v
            .into_iter()
            .zip(pred.values())
            .map(|(t, a)| {
                if compare(cmp, a as i64) {
                    t
                } else {
                    on_false_value
                }
            })
            .collect();
        ov.scatter(r);
    });
    out
}

/// Reduces `data[P, ...]` across its partitions into `dst` (one partition, `data`'s
/// elements per partition; NKI `nisa.tensor_partition_reduce(dst, op, data)`; GpSimdE). `op`
/// is add, maximum, bitwise_or or bitwise_and. The result is rounded to `dst`'s dtype.
#[track_caller]
pub fn tensor_partition_reduce<'d, 'a>(
    dst: impl Into<TileRef<'d>>,
    op: AluOp,
    data: impl Into<TileRef<'a>>,
    opts: impl Into<Option<Opts>>,
) {
    let ins = Op::begin("nisa.tensor_partition_reduce");
    only_engine(&ins, opts.into(), Engine::GpSimd);
    tensor_partition_reduce_to(&ins, Dst::Into(dst.into()), op, data.into());
}

/// The `tensor_partition_reduce` builder.
pub(crate) fn tensor_partition_reduce_to<'d>(
    ins: &Op,
    dst: Dst<'d>,
    op: AluOp,
    x: TileRef,
) -> Output<'d> {
    const API: &str = "nisa.tensor_partition_reduce";
    ins.operand_on(Engine::GpSimd, "data", &x);
    // NKI 0.7 (Neuron 2.33) lists add, mean, max, bitwise_or, bitwise_and and bitwise_xor;
    // nki-rs has no `mean` operator yet.
    if !matches!(
        op,
        AluOp::Add | AluOp::Maximum | AluOp::BitwiseOr | AluOp::BitwiseAnd | AluOp::BitwiseXor
    ) {
        ins.fail(ErrorKind::InvalidArgument, format!(
                "'{op}' is not supported by 'tensor_partition_reduce'; use add, maximum, bitwise_or, bitwise_and or bitwise_xor"
            ));
    }
    bitvec_needs_ints(ins, op, &[("data", x.dtype())]);
    let mut dims = x.shape().to_vec();
    dims[0] = 1;
    let in_dtype = x.dtype();
    let out = ins.output(dst, MemKind::Sbuf, in_dtype, &dims, false);
    let ov = out.view();
    let site = Site::new(Engine::GpSimd, Opcode::PartitionReduce);
    ins.compute(site, &[&x], &[], &[&ov], || {
        let f = x.free_size();
        if in_dtype.is_int() {
            // GpSimdE's native integer arithmetic on the slots: exact for 32-bit integers
            // (add wraps, the bitvec operators work on the bit patterns).
            let v = x.gather_slots(API, ins.loc);
            let r: Vec<i64> = (0..f)
                .map(|j| {
                    let mut it = v.iter().skip(j).step_by(f).map(|&s| in_dtype.int(s));
                    let first = it.next().unwrap_or(0);
                    it.fold(first, |a, b| op.eval_int(a, b, in_dtype).unwrap_or(0))
                })
                .collect();
            let out = ov.dtype();
            if out.is_int() {
                ov.scatter_slots(r.iter().map(|&i| out.slot_of_int(i)).collect());
            } else {
                ov.scatter(r.iter().map(|&i| i as f32).collect());
            }
            return;
        }
        let v = x.gather(API, ins.loc);
        let r = (0..f)
            .map(|j| fold(op, v.iter().skip(j).step_by(f).copied(), in_dtype))
            .collect();
        ov.scatter(r);
    });
    out
}
