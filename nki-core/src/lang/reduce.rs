//! Free-axis reductions: `nl.sum`, `nl.max`, `nl.min`, `nl.prod`, `nl.mean`, `nl.var`,
//! `nl.all` (and the general [`reduce`]).
//!
//! NKI reduces along free axes only, any set of them (`[1]`, `[1, 2]`, or `[2, 4]` of a 5-D
//! view as the programming guide's 2-D pooling does: the access pattern reads the reduced
//! axes innermost); reducing the partition axis 0 is an error (transpose first, or use
//! a matmul against ones / `nisa.tensor_partition_reduce`). Each reduction lowers onto the
//! `nisa.tensor_reduce` builder: one VectorE `TensorReduce` instruction (`var`: two, mean then
//! squared deviations). Sums and products accumulate in double precision and round once (the
//! hardware's fp32 accumulator is within the public tolerances of that); `mean` and `var` use
//! fp32 (or wider) intermediates.

use crate::access::MAX_DIMS;
use crate::dtype::DType;
use crate::error::ErrorKind;
use crate::isa::base::Dst;
use crate::isa::op::Op;
use crate::isa::vector::tensor_reduce_to;
pub(crate) use crate::isa::vector::ReduceKind;
use crate::isa::{reduced_shape, trailing_axes};
use crate::math::AluOp;
use crate::record::MemKind;
use crate::tile::{Tile, TileRef};

/// Checks `axes` against NKI's rule (free axes only, each within the tile) and returns them
/// sorted without repeats. Any set of free axes may be reduced: an access pattern lists the
/// reduced axes innermost whatever their place in the view (the NKI programming guide's 2-D
/// pooling reduces axes `[2, 4]` of a 5-D view).
fn check_axes(ins: &Op, x: &TileRef, axes: &[usize]) -> Vec<usize> {
    let api = ins.api;
    let nd = x.shape().len();
    let mut sorted = axes.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    if sorted.first() == Some(&0) {
        ins.fail(ErrorKind::PartitionReduction, format!(
                    "reduction on partition axis is not supported: axis 0 of x{:?} in '{}' is the partition axis; \
                     transpose first (nl.transpose / nc_transpose), multiply by a ones vector with nc_matmul, \
                     or use nisa.tensor_partition_reduce",
                    x.shape(),
                    short(api)
                ));
    }
    if sorted.is_empty() || sorted.iter().any(|&a| a >= nd) {
        ins.fail(
            ErrorKind::InvalidArgument,
            format!(
                "invalid axis {axes:?} for x{:?} in '{}': reduction axes are free dimensions \
                 1..{nd} of x (e.g. [{}])",
                x.shape(),
                short(api),
                nd - 1
            ),
        );
    }
    sorted
}

/// `x` with its reduced `axes` (sorted, free) moved innermost in their order, the kept axes
/// first in theirs: the access pattern a reduction over non-trailing axes reads (the same
/// elements, so the same regions and cost). Trailing axes leave `x` as it is.
fn reduced_innermost<'a>(ins: &Op, x: TileRef<'a>, axes: &[usize]) -> TileRef<'a> {
    let nd = x.shape().len();
    if trailing_axes(axes, nd) {
        return x;
    }
    let perm: Vec<usize> = (0..nd)
        .filter(|d| !axes.contains(d))
        .chain(axes.iter().copied())
        .collect();
    match crate::view::permute(&x.ap, &perm, "x") {
        Ok(ap) if x.ind.is_none() => TileRef { ap, ..x },
        Ok(_) => ins.fail(
            ErrorKind::InvalidArgument,
            format!(
                "'{}' reduces an indirect view {} over its last free axes only, not {axes:?}",
                short(ins.api),
                x.describe()
            ),
        ),
        Err(e) => ins.fail(e.kind(), e.message().to_string()),
    }
}

/// The result shape of reducing `shape` over the sorted free `axes` (`keepdims` keeps them
/// as 1; a result with no free axis left is `[P, 1]`).
fn reduced_dims(shape: &[usize], axes: &[usize], keepdims: bool) -> Vec<usize> {
    if trailing_axes(axes, shape.len()) {
        let (dims, len, _) = reduced_shape(shape, axes[0], keepdims);
        return dims[..len].to_vec();
    }
    let mut dims = Vec::with_capacity(shape.len());
    for (d, &n) in shape.iter().enumerate() {
        if !axes.contains(&d) {
            dims.push(n);
        } else if keepdims {
            dims.push(1);
        }
    }
    if dims.len() == 1 {
        dims.push(1);
    }
    dims
}

fn short(api: &'static str) -> &'static str {
    api.strip_prefix("nl.").unwrap_or(api)
}

/// The reduction of every `nl` reduce op, lowered onto the `tensor_reduce` builder: checks
/// `x` and `axes` (any free axes), allocates the result (`keepdims` keeps reduced axes as 1; a
/// result with no free axis left is `[P, 1]`) and reduces the view of `x` that reads the
/// reduced axes innermost over its trailing axes into it. `negate` negates the result (the
/// instruction's flag).
#[allow(clippy::too_many_arguments)]
pub(crate) fn reduce_impl(
    ins: &Op,
    kind: ReduceKind,
    x: TileRef,
    axes: &[usize],
    keepdims: bool,
    dtype: Option<DType>,
    negate: bool,
) -> Tile {
    ins.operand("x", &x);
    if let ReduceKind::Alu(op) = kind {
        if !op.is_reducible() {
            ins.fail(
                ErrorKind::InvalidArgument,
                format!("'{op}' is not a reduce operator"),
            );
        }
        if op.is_bitvec() && (x.dtype().is_float()) {
            ins.fail(
                ErrorKind::DType,
                format!(
                    "'{op}' reduces integer bit patterns; x{:?} has float dtype {}",
                    x.shape(),
                    x.dtype()
                ),
            );
        }
    }
    let axes = check_axes(ins, &x, axes);
    let dims = reduced_dims(x.shape(), &axes, keepdims);
    let x = reduced_innermost(ins, x, &axes);
    let in_dtype = x.dtype();
    let out_dtype = dtype.unwrap_or(match kind {
        ReduceKind::All => DType::Bool,
        ReduceKind::Mean | ReduceKind::Var if !in_dtype.is_float() => DType::F32,
        _ => in_dtype,
    });
    let out = ins.alloc(MemKind::Sbuf, out_dtype, &dims);
    let (nd, every): (usize, [usize; MAX_DIMS]) = (x.shape().len(), std::array::from_fn(|i| i));
    let trailing = &every[nd - axes.len()..nd];
    tensor_reduce_to(
        ins,
        Dst::Into(out.view()),
        kind,
        x,
        (trailing, false, negate),
    );
    out
}

/// Reduces `x` along free `axes` with a reducible ALU operator (add, subtract, multiply,
/// maximum, minimum, logical and/or/xor, bitwise and/or/xor on integers), keeping the reduced
/// axes as size 1 with `keepdims`. `dtype` overrides the output dtype (default: `x`'s).
#[track_caller]
pub fn reduce<'a>(
    op: AluOp,
    x: impl Into<TileRef<'a>>,
    axes: &[usize],
    keepdims: bool,
    dtype: Option<DType>,
) -> Tile {
    reduce_impl(
        &Op::begin("nl.reduce"),
        ReduceKind::Alu(op),
        x.into(),
        axes,
        keepdims,
        dtype,
        false,
    )
}

macro_rules! reduce_fns {
    ($($(#[$doc:meta])* $name:ident => $api:literal, $kind:expr;)*) => {$(
        $(#[$doc])*
        #[track_caller]
        pub fn $name<'a>(x: impl Into<TileRef<'a>>, axes: &[usize], keepdims: bool) -> Tile {
            reduce_impl(&Op::begin($api), $kind, x.into(), axes, keepdims, None, false)
        }
    )*};
}

reduce_fns! {
    /// Sum along free `axes` (NKI `nl.sum`); e.g. `nl::sum(&x, &[1], true)` gives `[P, 1]`.
    sum => "nl.sum", ReduceKind::Alu(AluOp::Add);
    /// Maximum along free `axes` (NKI `nl.max`).
    max => "nl.max", ReduceKind::Alu(AluOp::Maximum);
    /// Minimum along free `axes` (NKI `nl.min`).
    min => "nl.min", ReduceKind::Alu(AluOp::Minimum);
    /// Product along free `axes` (NKI `nl.prod`).
    prod => "nl.prod", ReduceKind::Alu(AluOp::Multiply);
    /// Arithmetic mean along free `axes` with fp32 intermediates (NKI `nl.mean`; the result
    /// has `x`'s float dtype, fp32 for integer inputs).
    mean => "nl.mean", ReduceKind::Mean;
    /// 1 where every element along free `axes` is non-zero (NKI `nl.all`; bool result).
    all => "nl.all", ReduceKind::All;
}

/// Biased variance (divides by the element count) along free `axes` (NKI `nl.var`). As in
/// NKI, the result keeps the reduced axes as size 1.
#[track_caller]
pub fn var<'a>(x: impl Into<TileRef<'a>>, axes: &[usize]) -> Tile {
    reduce_impl(
        &Op::begin("nl.var"),
        ReduceKind::Var,
        x.into(),
        axes,
        true,
        None,
        false,
    )
}

/// The axis or axes of `nl::softmax` (NKI's `axis=1`, `axis=-1` or `axis=[2, 4]`): one axis
/// or a list of them, as `usize` or `i32` (a negative axis counts from the last dimension).
pub trait SoftmaxAxes {
    /// The axes, as written (negative ones not yet resolved).
    fn axes(&self) -> Vec<i64>;
}

impl SoftmaxAxes for usize {
    fn axes(&self) -> Vec<i64> {
        vec![*self as i64]
    }
}
impl SoftmaxAxes for i32 {
    fn axes(&self) -> Vec<i64> {
        vec![*self as i64]
    }
}
impl<const N: usize> SoftmaxAxes for [usize; N] {
    fn axes(&self) -> Vec<i64> {
        self.iter().map(|&a| a as i64).collect()
    }
}
impl<const N: usize> SoftmaxAxes for [i32; N] {
    fn axes(&self) -> Vec<i64> {
        self.iter().map(|&a| a as i64).collect()
    }
}
impl<const N: usize> SoftmaxAxes for &[usize; N] {
    fn axes(&self) -> Vec<i64> {
        (*self).axes()
    }
}
impl<const N: usize> SoftmaxAxes for &[i32; N] {
    fn axes(&self) -> Vec<i64> {
        (*self).axes()
    }
}
impl SoftmaxAxes for &[usize] {
    fn axes(&self) -> Vec<i64> {
        self.iter().map(|&a| a as i64).collect()
    }
}

/// `axes` of a rank-`nd` tile resolved (a negative axis counts from the end), or the error
/// naming an axis outside `-nd..nd`.
pub(crate) fn resolve_axes(ins: &Op, axes: &[i64], shape: &[usize]) -> Vec<usize> {
    let nd = shape.len() as i64;
    axes.iter()
        .map(|&a| {
            let r = if a < 0 { a + nd } else { a };
            if !(0..nd).contains(&r) {
                ins.fail(
                    ErrorKind::InvalidArgument,
                    format!(
                        "invalid axis {a} for x{shape:?} in '{}': the tile has {nd} dimensions",
                        short(ins.api)
                    ),
                );
            }
            r as usize
        })
        .collect()
}
