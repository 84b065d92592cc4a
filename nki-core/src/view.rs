//! Views that re-describe the same bytes without moving them: `reshape`, `permute`,
//! `broadcast`, `expand_dim`, `squeeze_dim`, `select`, `rearrange` and raw access patterns (`ap`, NKI 0.7's absolute form), for HBM tensors ([`HbmView`], [`HbmViewMut`],
//! [`Hbm`], [`HbmOut`]) and on-chip tiles ([`TileRef`], [`Tile`]).
//!
//! These are NKI's `tensor.reshape(...)`, `permute(...)`, `broadcast(...)` and `.ap(...)`, and
//! they stand in for classic NKI's `nl.arange` / `nl.mgrid` index expressions: an affine
//! index such as `in_tensor[i_c, p * i_h + i_ph, p * i_w + i_pw]` is
//! `in_tensor.reshape(&[c, h / p, p, w / p, p])`, and a transposed access
//! `out[i_p, i_y, i_x] = in[i_p, i_x, i_y]` is `in.permute(&[0, 2, 1])`. No instruction is
//! issued: the instruction that reads or writes the view sees its access pattern (a DMA
//! through a transposed or broadcast view moves shorter contiguous runs, which the timing model
//! charges for).
//!
//! On-chip views keep the partition dimension first: `reshape` must preserve dimension 0 and
//! `permute` must leave it in place, as in NKI. A view that cannot be expressed as an affine
//! access pattern of the same bytes (e.g. merging dimensions of a strided slice) is an error
//! naming both shapes; copy the data instead.

use crate::access::{Ap, Ix, Shape, MAX_DIMS};
use crate::context::raise;
use crate::dtype::{DType, Element};
use crate::error::{ErrorKind, NkiError, Result, SourceLoc};
use crate::hbm::{Hbm, HbmOut, HbmView, HbmViewMut};
use crate::tile::{Tile, TileRef};

fn err(kind: ErrorKind, op: &'static str, msg: String) -> NkiError {
    NkiError::new(kind, op, msg)
}

/// `ap` viewed with shape `dims` (row-major order of the elements kept), without copying:
/// dimensions may be split freely; merged dimensions must be laid out contiguously relative
/// to each other (NumPy's no-copy reshape rule).
pub(crate) fn reshape(ap: &Ap, dims: &[usize], what: &str) -> Result<Ap> {
    const OP: &str = "reshape";
    // A bad target shape is the reshape's error, not a `shape` constructor's.
    let new = Shape::new(dims).map_err(|e| err(e.kind(), OP, e.message().to_string()))?;
    if new.numel() != ap.shape.numel() {
        return Err(err(
            ErrorKind::ShapeMismatch,
            OP,
            format!(
                "cannot reshape {what} of shape {} ({} elements) into {dims:?} ({} elements)",
                ap.shape,
                ap.shape.numel(),
                new.numel()
            ),
        ));
    }
    let old: Vec<(usize, isize)> = (0..ap.shape.ndim())
        .map(|d| (ap.shape.dims()[d], ap.strides[d]))
        .filter(|&(n, _)| n != 1)
        .collect();
    let mut strides = [0isize; MAX_DIMS];
    let (mut ni, mut oi) = (0, 0);
    while ni < dims.len() {
        if dims[ni] == 1 {
            ni += 1;
            continue;
        }
        let (ni0, oi0) = (ni, oi);
        let (mut np, mut op) = (dims[ni], old[oi].0);
        while np != op {
            if np < op {
                ni += 1;
                np *= dims[ni];
            } else {
                oi += 1;
                op *= old[oi].0;
            }
        }
        for k in oi0..oi {
            if old[k].1 != old[k + 1].1 * old[k + 1].0 as isize {
                return Err(err(
                    ErrorKind::InvalidArgument,
                    OP,
                    format!(
                        "cannot view {what} of shape {} as {dims:?} without a copy: the merged dimensions are not contiguous in memory",
                        ap.shape
                    ),
                ));
            }
        }
        let mut stride = old[oi].1;
        for k in (ni0..=ni).rev() {
            strides[k] = stride;
            stride *= dims[k] as isize;
        }
        ni += 1;
        oi += 1;
    }
    Ok(Ap {
        offset: ap.offset,
        shape: new,
        strides,
    })
}

/// `ap` with its dimensions reordered: dimension `k` of the result is dimension `perm[k]`.
pub(crate) fn permute(ap: &Ap, perm: &[usize], what: &str) -> Result<Ap> {
    let nd = ap.shape.ndim();
    let mut seen = [false; MAX_DIMS];
    let valid = perm.len() == nd
        && perm
            .iter()
            .all(|&d| d < nd && !std::mem::replace(&mut seen[d], true));
    if !valid {
        return Err(err(
            ErrorKind::InvalidArgument,
            "permute",
            format!(
                "{perm:?} is not a permutation of the {nd} dimensions of {what} (shape {})",
                ap.shape
            ),
        ));
    }
    let dims: Vec<usize> = perm.iter().map(|&d| ap.shape.dims()[d]).collect();
    let mut strides = [0isize; MAX_DIMS];
    for (k, &d) in perm.iter().enumerate() {
        strides[k] = ap.strides[d];
    }
    Ok(Ap {
        offset: ap.offset,
        shape: Shape::new(&dims)?,
        strides,
    })
}

/// `ap` with size-1 dimension `dim` repeated `size` times (stride 0).
pub(crate) fn broadcast(ap: &Ap, dim: usize, size: usize, what: &str) -> Result<Ap> {
    if dim >= ap.shape.ndim() || ap.shape.dims()[dim] != 1 || size == 0 {
        return Err(err(
            ErrorKind::ShapeMismatch,
            "broadcast",
            format!(
                "cannot broadcast dimension {dim} of {what} (shape {}) to {size}: only a size-1 dimension can be broadcast, to a positive size",
                ap.shape
            ),
        ));
    }
    let mut dims = ap.shape.dims().to_vec();
    dims[dim] = size;
    let mut strides = ap.strides;
    strides[dim] = 0;
    Ok(Ap {
        offset: ap.offset,
        shape: Shape::new(&dims)?,
        strides,
    })
}

/// `ap` with a new size-1 dimension inserted at position `dim` (`0..=ndim`).
pub(crate) fn expand_dim(ap: &Ap, dim: usize, what: &str) -> Result<Ap> {
    let nd = ap.shape.ndim();
    if dim > nd {
        return Err(err(
            ErrorKind::InvalidArgument,
            "expand_dim",
            format!("cannot insert dimension {dim} into {what} (shape {}): the position must be 0..={nd}", ap.shape),
        ));
    }
    let mut dims = ap.shape.dims().to_vec();
    dims.insert(dim, 1);
    // A size-1 dimension is never stepped: its stride is 0.
    let shape =
        Shape::new(&dims).map_err(|e| err(e.kind(), "expand_dim", e.message().to_string()))?;
    let mut strides = [0isize; MAX_DIMS];
    strides[..dim].copy_from_slice(&ap.strides[..dim]);
    strides[dim + 1..=nd].copy_from_slice(&ap.strides[dim..nd]);
    Ok(Ap {
        offset: ap.offset,
        shape,
        strides,
    })
}

/// `ap` without its size-1 dimension `dim`.
pub(crate) fn squeeze_dim(ap: &Ap, dim: usize, what: &str) -> Result<Ap> {
    let nd = ap.shape.ndim();
    if dim >= nd || ap.shape.dims()[dim] != 1 || nd == 1 {
        return Err(err(
            ErrorKind::InvalidArgument,
            "squeeze_dim",
            format!(
                "cannot remove dimension {dim} of {what} (shape {}): only a size-1 dimension of a view with more than one dimension can be removed",
                ap.shape
            ),
        ));
    }
    let mut dims = ap.shape.dims().to_vec();
    dims.remove(dim);
    let mut strides = [0isize; MAX_DIMS];
    strides[..dim].copy_from_slice(&ap.strides[..dim]);
    strides[dim..nd - 1].copy_from_slice(&ap.strides[dim + 1..nd]);
    Ok(Ap {
        offset: ap.offset,
        shape: Shape::new(&dims)?,
        strides,
    })
}

/// `ap` with dimension `dim` split into `sizes` (NKI `reshape_dim(dim, shape)`): the new
/// dimensions step through the old one row-major, so no layout can fail; one size may be
/// `-1`, inferred from the others.
pub(crate) fn reshape_dim(ap: &Ap, dim: usize, sizes: &[isize], what: &str) -> Result<Ap> {
    const OP: &str = "reshape_dim";
    let nd = ap.shape.ndim();
    let fail = |why: String| {
        Err(err(
            ErrorKind::ShapeMismatch,
            OP,
            format!(
                "cannot split dimension {dim} of {what} (shape {}) into {sizes:?}: {why}",
                ap.shape
            ),
        ))
    };
    if dim >= nd {
        return fail(format!("the view has {nd} dimensions"));
    }
    if sizes.is_empty() || nd - 1 + sizes.len() > MAX_DIMS {
        return fail(format!(
            "the result needs 1 to {MAX_DIMS} dimensions in all"
        ));
    }
    let n = ap.shape.dims()[dim];
    let infer = sizes.iter().filter(|&&s| s == -1).count();
    if infer > 1 || sizes.iter().any(|&s| s == 0 || s < -1) {
        return fail("the sizes must be positive, with at most one -1 to infer".into());
    }
    let known: usize = sizes
        .iter()
        .filter(|&&s| s > 0)
        .map(|&s| s as usize)
        .product();
    let inferred = if infer == 1 {
        if !n.is_multiple_of(known) {
            return fail(format!("{known} does not divide its size {n}"));
        }
        n / known
    } else if known != n {
        return fail(format!("their product {known} is not its size {n}"));
    } else {
        1
    };
    let split: Vec<usize> = sizes
        .iter()
        .map(|&s| if s == -1 { inferred } else { s as usize })
        .collect();
    let mut dims = ap.shape.dims().to_vec();
    dims.splice(dim..=dim, split.iter().copied());
    let mut strides = [0isize; MAX_DIMS];
    strides[..dim].copy_from_slice(&ap.strides[..dim]);
    let mut step = ap.strides[dim];
    for k in (0..split.len()).rev() {
        strides[dim + k] = step;
        step *= split[k] as isize;
    }
    strides[dim + split.len()..dims.len()].copy_from_slice(&ap.strides[dim + 1..nd]);
    Ok(Ap {
        offset: ap.offset,
        shape: Shape::new(&dims).map_err(|e| err(e.kind(), OP, e.message().to_string()))?,
        strides,
    })
}

/// `ap` with dimensions `start..=end` merged into one (NKI `flatten_dims(start_dim,
/// end_dim)`): they must be laid out contiguously relative to each other (size-1 dimensions
/// aside, which are never stepped).
pub(crate) fn flatten_dims(ap: &Ap, start: usize, end: usize, what: &str) -> Result<Ap> {
    const OP: &str = "flatten_dims";
    let nd = ap.shape.ndim();
    if start > end || end >= nd {
        return Err(err(
            ErrorKind::InvalidArgument,
            OP,
            format!(
                "cannot merge dimensions {start}..={end} of {what} (shape {}): they must satisfy \
                 start_dim <= end_dim < {nd}",
                ap.shape
            ),
        ));
    }
    let dims = ap.shape.dims();
    let members: Vec<(usize, isize)> = (start..=end)
        .map(|d| (dims[d], ap.strides[d]))
        .filter(|m| m.0 != 1)
        .collect();
    if let Some(w) = members
        .windows(2)
        .find(|w| w[0].1 != w[1].1 * w[1].0 as isize)
    {
        return Err(err(
            ErrorKind::InvalidArgument,
            OP,
            format!(
                "cannot merge dimensions {start}..={end} of {what} (shape {}, strides {:?}) \
                 without a copy: they are not contiguous in memory (a stride of {} does not \
                 step over {} elements of stride {})",
                ap.shape,
                &ap.strides[..nd],
                w[0].1,
                w[1].0,
                w[1].1
            ),
        ));
    }
    let mut out: Vec<usize> = dims[..start].to_vec();
    out.push(dims[start..=end].iter().product());
    out.extend_from_slice(&dims[end + 1..]);
    let mut strides = [0isize; MAX_DIMS];
    strides[..start].copy_from_slice(&ap.strides[..start]);
    strides[start] = members.last().map_or(0, |m| m.1);
    strides[start + 1..out.len()].copy_from_slice(&ap.strides[end + 1..nd]);
    Ok(Ap {
        offset: ap.offset,
        shape: Shape::new(&out)?,
        strides,
    })
}

/// The index of NKI's `tensor.select(dim, index)`: a position (`usize`, a static select) or
/// a 1x1 int32 SBUF tensor holding it (`&Tile`, `TileRef`, `&Tensor`, `TensorRef`: NKI
/// 0.7's dynamic select, read at run time; see [`HbmView::select`]).
pub trait SelectIndex<'i> {
    /// The index as a position or an index tile.
    #[track_caller]
    fn select_at(self) -> SelectAt<'i>;
}

/// What a [`SelectIndex`] is.
#[derive(Clone, Copy, Debug)]
pub enum SelectAt<'i> {
    /// A position known when the kernel is traced.
    Position(usize),
    /// An SBUF tile holding the position.
    Tensor(TileRef<'i>),
}

impl SelectIndex<'_> for usize {
    fn select_at(self) -> SelectAt<'static> {
        SelectAt::Position(self)
    }
}

/// Implements [`SelectIndex`] for tile-like index tensors (`$t` converts into a `TileRef`).
macro_rules! select_tensors {
    ($([$($gen:tt)*] $t:ty;)*) => {$(
        impl<$($gen)*> $crate::view::SelectIndex<'i> for $t {
            #[track_caller]
            fn select_at(self) -> $crate::view::SelectAt<'i> {
                $crate::view::SelectAt::Tensor(self.into())
            }
        }
    )*};
}
pub(crate) use select_tensors;

impl<'i> SelectIndex<'i> for &TileRef<'i> {
    fn select_at(self) -> SelectAt<'i> {
        SelectAt::Tensor(*self)
    }
}

select_tensors! {
    ['i] &'i Tile;
    ['i] TileRef<'i>;
}

/// The slice expression of NKI's `select(dim, index)` on a view of shape `shape`: `index`
/// on dimension `dim`, whole ranges before it (the slice then drops the dimension, except an
/// on-chip partition dimension, which stays with size 1 as for `t[i]`).
pub(crate) fn select_index(shape: &Shape, dim: usize, index: usize, what: &str) -> Result<Vec<Ix>> {
    if dim >= shape.ndim() {
        return Err(err(
            ErrorKind::InvalidArgument,
            "select",
            format!("{what} (shape {shape}) has no dimension {dim}"),
        ));
    }
    let mut ix = vec![Ix::from(..); dim];
    ix.push(Ix::At(index));
    Ok(ix)
}

/// One side of an einops-style pattern: its groups of axis names, e.g. `p (a b) c` is
/// `[[p], [a, b], [c]]`; a `1` is an empty group (a size-1 dimension).
fn pattern_groups(side: &str, fail: &dyn Fn(String) -> NkiError) -> Result<Vec<Vec<String>>> {
    let mut groups: Vec<Vec<String>> = Vec::new();
    let mut open: Option<Vec<String>> = None;
    for tok in side
        .replace('(', " ( ")
        .replace(')', " ) ")
        .split_whitespace()
    {
        let name_like = tok.chars().all(|c| c.is_alphanumeric() || c == '_')
            && !tok.starts_with(|c: char| c.is_ascii_digit());
        match (tok, open.as_mut()) {
            ("(", None) => open = Some(Vec::new()),
            (")", Some(g)) => groups.push(std::mem::take(g)),
            ("1", None) => groups.push(Vec::new()),
            (name, Some(g)) if name_like => g.push(name.to_string()),
            (name, None) if name_like => groups.push(vec![name.to_string()]),
            ("(", _) | (")", _) => return Err(fail(format!("unbalanced parentheses in '{side}'"))),
            (name, _) => return Err(fail(format!("'{name}' is not an axis name"))),
        }
        if tok == ")" {
            open = None;
        }
    }
    if open.is_some() {
        return Err(fail(format!("unbalanced parentheses in '{side}'")));
    }
    Ok(groups)
}

/// `ap` rearranged by the einops-style `pattern` (`"p (a b) c -> p a (b c)"`): the left
/// side names the view's dimensions (a group splits one; `sizes` gives the sizes of split
/// axes, one per group may be left to infer), the right side orders the axes and merges
/// groups. Splits and reorders always work; a merge needs its axes laid out contiguously
/// relative to each other, as `reshape` does.
pub(crate) fn rearrange(ap: &Ap, pattern: &str, sizes: &[(&str, usize)], what: &str) -> Result<Ap> {
    const OP: &str = "rearrange";
    let fail = |why: String| {
        err(
            ErrorKind::InvalidArgument,
            OP,
            format!("pattern '{pattern}' on {what} (shape {}): {why}", ap.shape),
        )
    };
    let Some((lhs, rhs)) = pattern.split_once("->") else {
        return Err(fail("expected 'input axes -> output axes'".into()));
    };
    let (left, right) = (pattern_groups(lhs, &fail)?, pattern_groups(rhs, &fail)?);
    let dims = ap.shape.dims();
    if left.len() != dims.len() {
        return Err(fail(format!(
            "the left side names {} dimensions, the view has {}",
            left.len(),
            dims.len()
        )));
    }
    // The elementary axes: (name, size, stride), splitting each input dimension.
    let mut axes: Vec<(&str, usize, isize)> = Vec::new();
    for (g, (&n, &stride)) in left.iter().zip(dims.iter().zip(&ap.strides)) {
        let known = |a: &str| sizes.iter().find(|s| s.0 == a).map(|s| s.1);
        let unknown: Vec<&str> = g
            .iter()
            .map(String::as_str)
            .filter(|a| known(a).is_none())
            .collect();
        let product: usize = g.iter().filter_map(|a| known(a.as_str())).product();
        if g.is_empty() && n != 1 {
            return Err(fail(format!("'1' names a dimension of size {n}")));
        }
        let inferred = match unknown.as_slice() {
            [] if product == n => None,
            [a] if product > 0 && n.is_multiple_of(product) => Some((*a, n / product)),
            [] | [_] => {
                return Err(fail(format!(
                    "the sizes of ({}) do not divide dimension size {n}",
                    g.join(" ")
                )))
            }
            _ => {
                return Err(fail(format!(
                    "({}) leaves more than one size to infer: give all but one in the sizes",
                    g.join(" ")
                )))
            }
        };
        let mut step = stride;
        let start = axes.len();
        for a in g.iter().rev() {
            let size = known(a)
                .or_else(|| inferred.filter(|i| i.0 == a).map(|i| i.1))
                .unwrap_or(1);
            axes.insert(start, (a.as_str(), size, step));
            step *= size as isize;
        }
    }
    if let Some((name, _)) = sizes.iter().find(|s| !axes.iter().any(|a| a.0 == s.0)) {
        return Err(fail(format!(
            "size given for '{name}', which is not a split axis on the left"
        )));
    }
    for (k, a) in axes.iter().enumerate() {
        if axes[..k].iter().any(|b| b.0 == a.0) {
            return Err(fail(format!("axis '{}' appears twice on the left", a.0)));
        }
    }
    let flat: Vec<&str> = right.iter().flatten().map(String::as_str).collect();
    let mut used = vec![false; axes.len()];
    for name in &flat {
        match axes.iter().position(|a| a.0 == *name) {
            Some(k) if !used[k] => used[k] = true,
            Some(_) => return Err(fail(format!("axis '{name}' appears twice on the right"))),
            None => return Err(fail(format!("axis '{name}' is not on the left"))),
        }
    }
    if let Some(k) = used.iter().position(|u| !u) {
        return Err(fail(format!(
            "axis '{}' is missing on the right",
            axes[k].0
        )));
    }
    // Each output dimension merges its group: contiguous relative to each other, size-1
    // axes aside (they are never stepped).
    let mut out_dims = Vec::with_capacity(right.len());
    let mut strides = [0isize; MAX_DIMS];
    if right.len() > MAX_DIMS {
        return Err(fail(format!(
            "the result has more than {MAX_DIMS} dimensions"
        )));
    }
    for (d, g) in right.iter().enumerate() {
        let members: Vec<(usize, isize)> = g
            .iter()
            .filter_map(|n| axes.iter().find(|a| a.0 == *n))
            .map(|a| (a.1, a.2))
            .filter(|a| a.0 != 1)
            .collect();
        for w in members.windows(2) {
            if w[0].1 != w[1].1 * w[1].0 as isize {
                return Err(fail(format!(
                    "({}) cannot be merged without a copy: its axes are not contiguous in memory",
                    g.join(" ")
                )));
            }
        }
        out_dims.push(members.iter().map(|a| a.0).product::<usize>());
        strides[d] = members.last().map_or(0, |a| a.1);
    }
    Ok(Ap {
        offset: ap.offset,
        shape: Shape::new(&out_dims).map_err(|e| fail(e.message().to_string()))?,
        strides,
    })
}

/// A raw access pattern `[[stride, count], ...]` starting `offset` elements after `ap`'s
/// first element, checked to stay inside the `len` elements of the underlying buffer.
pub(crate) fn pattern(
    ap: &Ap,
    pairs: &[[usize; 2]],
    offset: usize,
    len: usize,
    what: &str,
) -> Result<Ap> {
    let dims: Vec<usize> = pairs.iter().map(|p| p[1]).collect();
    let shape = Shape::new(&dims).map_err(|e| err(e.kind(), "ap", e.message().to_string()))?;
    let mut strides = [0isize; MAX_DIMS];
    for (k, p) in pairs.iter().enumerate() {
        // A step of a count-1 pair is never taken: one past `isize` is kept as 0.
        strides[k] = isize::try_from(p[0]).unwrap_or(0);
    }
    if shape.numel() == 0 {
        return Err(err(
            ErrorKind::InvalidArgument,
            "ap",
            format!(
                "access pattern {pairs:?} of {what} has a count of 0: every [stride, count] pair \
                 needs a count of at least 1"
            ),
        ));
    }
    // The last element reached, in checked arithmetic: the offset and steps are the user's
    // numbers, and one near `usize::MAX` must not wrap around into the buffer.
    let start = ap.offset.checked_add(offset);
    let last = start.and_then(|s| {
        pairs
            .iter()
            .try_fold(s, |r, p| r.checked_add(p[0].checked_mul(p[1] - 1)?))
    });
    match (start, last) {
        (Some(offset), Some(last)) if last < len => Ok(Ap {
            offset,
            shape,
            strides,
        }),
        _ => Err(err(
            ErrorKind::OutOfBounds,
            "ap",
            format!(
                "access pattern {pairs:?} at offset {offset} of {what} reaches element {} of a buffer of {len}",
                last.map_or("past the address space".to_string(), |l| l.to_string())
            ),
        )),
    }
}

/// Raises `r`'s error at `loc` (the user's call).
fn or_raise<T>(r: Result<T>, loc: SourceLoc) -> T {
    r.unwrap_or_else(|e| raise(e, loc))
}

impl HbmView {
    /// The same elements viewed with shape `dims` (NKI `tensor.reshape`); free, no data moves.
    /// Splitting dimensions always works; merging needs them contiguous in memory.
    #[track_caller]
    pub fn reshape(&self, dims: &[usize]) -> HbmView {
        or_raise(self.try_reshape(dims), SourceLoc::caller())
    }

    /// [`HbmView::reshape`], returning an error instead of failing the kernel.
    pub fn try_reshape(&self, dims: &[usize]) -> Result<HbmView> {
        let ap = reshape(&self.ap, dims, &self.describe())?;
        Ok(self.with_ap(ap))
    }

    /// The view with its dimensions reordered (`perm[k]` becomes dimension `k`; NKI
    /// `tensor.permute`), e.g. `permute(&[1, 0])` for a transposed DMA access.
    #[track_caller]
    pub fn permute(&self, perm: &[usize]) -> HbmView {
        let loc = SourceLoc::caller();
        let ap = or_raise(permute(&self.ap, perm, &self.describe()), loc);
        self.with_ap(ap)
    }

    /// The view with size-1 dimension `dim` repeated `size` times (stride 0; NKI
    /// `tensor.broadcast`), e.g. one row loaded into every partition. Read-only views only.
    #[track_caller]
    pub fn broadcast(&self, dim: usize, size: usize) -> HbmView {
        let loc = SourceLoc::caller();
        let ap = or_raise(broadcast(&self.ap, dim, size, &self.describe()), loc);
        self.with_ap(ap)
    }

    /// A raw access pattern with NKI 0.7's `tensor.ap(pattern, offset)` semantics:
    /// `pattern[k] = [step, num]`, outermost first; element `(i0, i1, ...)` is element
    /// `offset + i0 * step0 + i1 * step1 + ...` of the tensor's row-major storage. It is
    /// absolute: the view it is called on is ignored (`.ap` does not compose). It must stay
    /// inside the tensor ([`ErrorKind::OutOfBounds`] naming it otherwise).
    #[track_caller]
    pub fn ap(&self, pattern: &[[usize; 2]], offset: usize) -> HbmView {
        let loc = SourceLoc::caller();
        let what = format!("tensor {} {}", self.st.name, self.st.shape);
        let len = self.st.shape.numel();
        let ap = or_raise(
            self::pattern(&self.st.whole, pattern, offset, len, &what),
            loc,
        );
        self.with_ap(ap)
    }
}

indirect_methods! {
    impl HbmView {
        /// An access pattern whose rows are chosen at run time (NKI 0.7 `tensor.ap(pattern,
        /// offset, vector_offset=index, indirect_dim=0)`): element `(p, i1, ..)` is element
        /// `offset + index[p] * row_step + i1 * step1 + ..` of the tensor's storage, `row_step`
        /// being the product of the tensor's dimensions after the first (the pattern's leading
        /// step is ignored). `index` is a `[P, 1]` int32/uint32 SBUF tile, `P` the pattern's
        /// first count. The result is a [`dma_copy`](crate::isa::dma_copy) source (a gather; a
        /// scatter needs a writable view) or a [`dma_compute`](crate::isa::dma_compute) operand;
        /// out-of-range indices follow the DMA's `oob_mode`. A pattern reaching outside the
        /// tensor for index 0, or an index tile of the wrong shape, dtype or memory, is an error
        /// naming the tensor.
        fn ap_indirect(pattern: &[[usize; 2]], offset: usize) |v, i|
            crate::isa::IndirectAp::new(v, pattern, offset, i.into(), false);
    }
}

impl HbmView {
    /// This view re-described by `f` (one of the view functions above), raising its error at
    /// `loc`.
    fn viewed(&self, f: impl FnOnce(&Ap, &str) -> Result<Ap>, loc: SourceLoc) -> HbmView {
        self.with_ap(or_raise(f(&self.ap, &self.describe()), loc))
    }

    /// The view with a new size-1 dimension at position `dim` (NKI `tensor.expand_dim`).
    #[track_caller]
    pub fn expand_dim(&self, dim: usize) -> HbmView {
        self.viewed(|ap, what| expand_dim(ap, dim, what), SourceLoc::caller())
    }

    /// The view without its size-1 dimension `dim` (NKI `tensor.squeeze_dim`).
    #[track_caller]
    pub fn squeeze_dim(&self, dim: usize) -> HbmView {
        self.viewed(|ap, what| squeeze_dim(ap, dim, what), SourceLoc::caller())
    }

    /// Position `index` of dimension `dim`, the dimension dropped (NKI `tensor.select(dim,
    /// index)`). A `usize` index is the same as indexing `dim` with an integer. A tensor
    /// index (a 1x1 int32 SBUF tensor, NKI 0.7's dynamic select) is read at run time: one
    /// [`scalar_load`](crate::isa::scalar_load) into a register when the view is made (a
    /// `ScalarLoad` record on the Sync engine, which a DMA of the view waits for, as for
    /// [`HbmView::scalar_offset`]). Its value must be in `0..shape[dim]` (an
    /// [`ErrorKind::OutOfBounds`] error naming the view, the index tensor and the value
    /// otherwise); in estimate mode, with no value, position 0 stands for it (the DMA's size
    /// and cost do not depend on it). As in 0.7, a view takes one dynamic offset only.
    #[track_caller]
    pub fn select<'i>(&self, dim: usize, index: impl SelectIndex<'i>) -> HbmView {
        let loc = SourceLoc::caller();
        match index.select_at() {
            SelectAt::Position(i) => {
                let ix = select_index(&self.ap.shape, dim, i, &self.describe());
                self.slice(or_raise(ix, loc))
            }
            SelectAt::Tensor(t) => or_raise(self.select_dynamic(dim, t), loc),
        }
    }

    /// [`HbmView::select`] with an index tile `index` (its `scalar_load` recorded at the
    /// caller's line).
    #[track_caller]
    fn select_dynamic(&self, dim: usize, index: TileRef) -> Result<HbmView> {
        let what = self.describe();
        let fail = |kind, why: String| {
            Err(err(
                kind,
                "select",
                format!(
                    "select(dim={dim}) of {what} with index tensor {}: {why}",
                    index.describe()
                ),
            ))
        };
        if dim >= self.ap.shape.ndim() {
            return fail(
                ErrorKind::InvalidArgument,
                format!("the view has no dimension {dim}"),
            );
        }
        if index.dtype() != DType::I32
            || index.shape().iter().product::<usize>() != 1
            || index.mem() != crate::record::MemKind::Sbuf
        {
            return fail(
                ErrorKind::InvalidArgument,
                "a dynamic index is a 1x1 int32 SBUF tensor (it is read into a 32-bit register)"
                    .to_string(),
            );
        }
        if self.register().is_some() {
            return fail(
                ErrorKind::InvalidArgument,
                "the view already has a dynamic offset (a dynamic select or scalar_offset); 0.7 \
                 takes one per view"
                    .to_string(),
            );
        }
        let s = crate::isa::scalar_load(index);
        let n = self.ap.shape.dims()[dim];
        let at = match s.value() {
            Some(v) if !(0..n as i64).contains(&v) => {
                return fail(
                    ErrorKind::OutOfBounds,
                    format!("its value {v} is outside 0..{n}, the size of dimension {dim}"),
                )
            }
            Some(v) => v as usize,
            None => 0,
        };
        let ap = self
            .ap
            .slice(&select_index(&self.ap.shape, dim, at, &what)?, false, &what)?;
        Ok(self.with_ap(ap).after_register(s.register()))
    }

    /// The view's access pattern as NKI prints it (`[[step, num], ...]`, outermost first, in
    /// elements of the tensor's row-major storage; NKI `tensor.get_pattern`).
    pub fn get_pattern(&self) -> Vec<[isize; 2]> {
        self.ap.pairs()
    }

    /// The view rearranged by an einops-style pattern (NKI `tensor.rearrange`), e.g.
    /// `rearrange("b (h d) -> h b d", &[("h", 4)])`: the left side names the view's
    /// dimensions (a parenthesised group splits one, `sizes` giving all but one size of each
    /// group), the right side orders the axes and merges parenthesised groups. A merge
    /// needs its axes contiguous relative to each other (as `reshape`); otherwise, and for
    /// a pattern that does not fit the view, the error names the pattern and the view.
    #[track_caller]
    pub fn rearrange(&self, pattern: &str, sizes: &[(&str, usize)]) -> HbmView {
        let loc = SourceLoc::caller();
        self.viewed(|ap, what| rearrange(ap, pattern, sizes, what), loc)
    }
}

impl HbmView {
    /// The view with dimension `dim` split into `shape` (NKI `tensor.reshape_dim(dim,
    /// shape)`), e.g. `reshape_dim(1, &[4, -1])` of a `[8, 24]` view is `[8, 4, 6]`: the
    /// product of `shape` must be the dimension's size, one entry may be `-1` (inferred).
    /// Splitting never needs a copy.
    #[track_caller]
    pub fn reshape_dim(&self, dim: usize, shape: &[isize]) -> HbmView {
        self.viewed(
            |ap, what| reshape_dim(ap, dim, shape, what),
            SourceLoc::caller(),
        )
    }

    /// The view with dimensions `start_dim..=end_dim` merged into one (NKI
    /// `tensor.flatten_dims(start_dim, end_dim)`): they must be contiguous in memory relative
    /// to each other (not permuted or sliced with gaps), or the error names the view.
    #[track_caller]
    pub fn flatten_dims(&self, start_dim: usize, end_dim: usize) -> HbmView {
        let loc = SourceLoc::caller();
        self.viewed(|ap, what| flatten_dims(ap, start_dim, end_dim, what), loc)
    }
}

/// The indirect-view methods of a type (`vector_select`, `ap_indirect`), each declared as
/// `fn name(args) |s, i| body`: `body` makes the indirect view from `self` (bound to `s`), the
/// method's own arguments and its `vector_offset` operand (bound to `i`, unconverted: the body
/// converts it, after any check of `self` that must fail first); its error is raised at the
/// caller's line.
macro_rules! indirect_methods {
    (impl $ty:ty { $(
        $(#[$m:meta])*
        fn $name:ident($($arg:ident: $aty:ty),*) |$s:ident, $i:ident| $body:expr;
    )* }) => {
        impl $ty { $(
            $(#[$m])*
            #[track_caller]
            pub fn $name<'a>(
                &self,
                $($arg: $aty,)*
                vector_offset: impl Into<$crate::tile::TileRef<'a>>,
            ) -> $crate::isa::IndirectAp<'a> {
                let loc = $crate::error::SourceLoc::caller();
                let ($s, $i) = (self, vector_offset);
                $body.unwrap_or_else(|e| $crate::context::raise(e, loc))
            }
        )* }
    };
}
pub(crate) use indirect_methods;

indirect_methods! {
    impl HbmView {
        #[doc = "Per-partition rows chosen at run time (NKI 0.7 `tensor.vector_select(0, vector_offset)`): \
         element `(p, i1, ..)` is element `(index[p], i1, ..)` of this view, `index` being a \
         `[P, 1]` int32/uint32 SBUF tile; the result has shape `[P, ..]` (the view's other \
         dimensions). As in 0.7, `dim` must be 0 and the view in HBM; the result is indirect (a \
         [`dma_copy`](crate::isa::dma_copy) gather source, or a \
         [`dma_compute`](crate::isa::dma_compute) operand) and takes no further views. An index \
         outside `0..shape[0]` follows the DMA's `oob_mode` (see [`HbmView::ap_indirect`]). A \
         view of a kernel input is read-only: scatter through the same method of a writable view \
         or a kernel-allocated tensor."]
        fn vector_select(dim: usize) |v, i|
            crate::isa::IndirectAp::select_rows(v, dim, i.into(), false);
    }
}
indirect_methods! {
    impl HbmViewMut {
        #[doc = "[`HbmView::vector_select`] of a writable view: also a scatter destination."]
        fn vector_select(dim: usize) |v, i|
            crate::isa::IndirectAp::select_rows(&v.0, dim, i.into(), true);
        /// [`HbmView::ap_indirect`] of a writable view: also a scatter destination.
        fn ap_indirect(pattern: &[[usize; 2]], offset: usize) |v, i|
            crate::isa::IndirectAp::new(&v.0, pattern, offset, i.into(), true);
    }
}

impl HbmViewMut {
    /// [`HbmView::reshape_dim`] of a writable view.
    #[track_caller]
    pub fn reshape_dim(&self, dim: usize, shape: &[isize]) -> HbmViewMut {
        HbmViewMut(self.0.reshape_dim(dim, shape))
    }

    /// [`HbmView::flatten_dims`] of a writable view.
    #[track_caller]
    pub fn flatten_dims(&self, start_dim: usize, end_dim: usize) -> HbmViewMut {
        HbmViewMut(self.0.flatten_dims(start_dim, end_dim))
    }

    /// [`HbmView::reshape`] of a writable view.
    #[track_caller]
    pub fn reshape(&self, dims: &[usize]) -> HbmViewMut {
        HbmViewMut(self.0.reshape(dims))
    }

    /// [`HbmView::permute`] of a writable view.
    #[track_caller]
    pub fn permute(&self, perm: &[usize]) -> HbmViewMut {
        HbmViewMut(self.0.permute(perm))
    }

    /// [`HbmView::ap`] of a writable view.
    #[track_caller]
    pub fn ap(&self, pattern: &[[usize; 2]], offset: usize) -> HbmViewMut {
        HbmViewMut(self.0.ap(pattern, offset))
    }

    /// [`HbmView::expand_dim`] of a writable view.
    #[track_caller]
    pub fn expand_dim(&self, dim: usize) -> HbmViewMut {
        HbmViewMut(self.0.expand_dim(dim))
    }

    /// [`HbmView::squeeze_dim`] of a writable view.
    #[track_caller]
    pub fn squeeze_dim(&self, dim: usize) -> HbmViewMut {
        HbmViewMut(self.0.squeeze_dim(dim))
    }

    /// [`HbmView::select`] of a writable view.
    #[track_caller]
    pub fn select<'i>(&self, dim: usize, index: impl SelectIndex<'i>) -> HbmViewMut {
        HbmViewMut(self.0.select(dim, index))
    }

    /// [`HbmView::rearrange`] of a writable view.
    #[track_caller]
    pub fn rearrange(&self, pattern: &str, sizes: &[(&str, usize)]) -> HbmViewMut {
        HbmViewMut(self.0.rearrange(pattern, sizes))
    }
}

impl<T: Element> Hbm<T> {
    /// The whole tensor viewed with shape `dims` (NKI `tensor.reshape`): free.
    #[track_caller]
    pub fn reshape(&self, dims: &[usize]) -> HbmView {
        self.view().reshape(dims)
    }
}

impl<T: Element> HbmOut<'_, T> {
    /// The whole output viewed with shape `dims` (NKI `tensor.reshape`): free.
    #[track_caller]
    pub fn reshape(&self, dims: &[usize]) -> HbmViewMut {
        self.view().reshape(dims)
    }
}

/// Raises unless an on-chip view keeps its partition dimension first with `size` partitions.
fn keep_partitions(before: &Ap, after: &Ap, op: &'static str, what: &str, loc: SourceLoc) {
    if after.shape.ndim() < 2
        || after.shape.partitions() != before.shape.partitions()
        || after.strides[0] != before.strides[0]
    {
        raise(
            err(
                ErrorKind::InvalidArgument,
                op,
                format!(
                    "an on-chip view keeps its partition dimension first: {what} of shape {} cannot become {} (the partition dimension must stay dimension 0 with {} partitions, and at least one free dimension)",
                    before.shape, after.shape, before.shape.partitions()
                ),
            ),
            loc,
        );
    }
}

impl<'a> TileRef<'a> {
    /// The view's free dimensions regrouped: `dims[0]` must be the partition count (NKI
    /// on-chip `reshape`); free, no instruction.
    #[track_caller]
    pub fn reshape(&self, dims: &[usize]) -> TileRef<'a> {
        let loc = SourceLoc::caller();
        self.direct("reshape", loc);
        let what = self.tile.describe();
        let mut ap = or_raise(reshape(&self.ap, dims, &what), loc);
        if ap.shape.ndim() > 1 && ap.shape.partitions() == 1 {
            // A single partition keeps the tile's partition stride (reshape gives size-1 dims 0).
            ap.strides[0] = self.ap.strides[0];
        }
        keep_partitions(&self.ap, &ap, "reshape", &what, loc);
        TileRef {
            tile: self.tile,
            ap,
            cast: self.cast,
            ind: None,
        }
    }

    /// The view's free dimensions reordered (`perm[0]` must be 0; NKI on-chip `permute`).
    #[track_caller]
    pub fn permute(&self, perm: &[usize]) -> TileRef<'a> {
        let loc = SourceLoc::caller();
        self.direct("permute", loc);
        let what = self.tile.describe();
        let ap = or_raise(permute(&self.ap, perm, &what), loc);
        keep_partitions(&self.ap, &ap, "permute", &what, loc);
        TileRef {
            tile: self.tile,
            ap,
            cast: self.cast,
            ind: None,
        }
    }
}

impl<'a> TileRef<'a> {
    /// This view re-described by `f` (one of the view functions above) as NKI operation
    /// `op`: the partition dimension must stay first with its partitions; errors are
    /// raised at `loc`.
    fn viewed(
        &self,
        op: &'static str,
        f: impl FnOnce(&Ap, &str) -> Result<Ap>,
        loc: SourceLoc,
    ) -> TileRef<'a> {
        self.direct(op, loc);
        let what = self.tile.describe();
        let ap = or_raise(f(&self.ap, &what), loc);
        keep_partitions(&self.ap, &ap, op, &what, loc);
        TileRef { ap, ..*self }
    }

    /// The view with a new size-1 free dimension at position `dim` (1 ..= ndim; NKI
    /// on-chip `tensor.expand_dim`).
    #[track_caller]
    pub fn expand_dim(&self, dim: usize) -> TileRef<'a> {
        let loc = SourceLoc::caller();
        self.viewed("expand_dim", |ap, what| expand_dim(ap, dim, what), loc)
    }

    /// The view with free dimension `dim` split into `shape` (NKI on-chip
    /// `tensor.reshape_dim`; see [`HbmView::reshape_dim`]). The partition dimension cannot be
    /// split (only "split" into itself, `reshape_dim(0, &[P])`).
    #[track_caller]
    pub fn reshape_dim(&self, dim: usize, shape: &[isize]) -> TileRef<'a> {
        let loc = SourceLoc::caller();
        self.viewed(
            "reshape_dim",
            |ap, what| reshape_dim(ap, dim, shape, what),
            loc,
        )
    }

    /// The view with free dimensions `start_dim..=end_dim` merged into one (NKI on-chip
    /// `tensor.flatten_dims`; see [`HbmView::flatten_dims`]): `start_dim` must be at least 1
    /// (the partition dimension is not merged).
    #[track_caller]
    pub fn flatten_dims(&self, start_dim: usize, end_dim: usize) -> TileRef<'a> {
        let loc = SourceLoc::caller();
        self.viewed(
            "flatten_dims",
            |ap, what| {
                if start_dim == 0 {
                    return Err(err(
                        ErrorKind::InvalidArgument,
                        "flatten_dims",
                        format!(
                            "cannot merge dimensions 0..={end_dim} of {what} (shape {}): the \
                             partition dimension of an on-chip view is not merged (start_dim \
                             must be at least 1)",
                            ap.shape
                        ),
                    ));
                }
                flatten_dims(ap, start_dim, end_dim, what)
            },
            loc,
        )
    }

    /// The view without its size-1 free dimension `dim` (NKI on-chip `tensor.squeeze_dim`;
    /// the partition dimension stays).
    #[track_caller]
    pub fn squeeze_dim(&self, dim: usize) -> TileRef<'a> {
        let loc = SourceLoc::caller();
        self.viewed("squeeze_dim", |ap, what| squeeze_dim(ap, dim, what), loc)
    }

    /// Position `index` of dimension `dim` (NKI on-chip `tensor.select(dim, index)`, as
    /// indexing with an integer): a free dimension is dropped; on the partition dimension
    /// the one partition stays as a size-1 dimension. A tensor index (0.7's dynamic select)
    /// selects on HBM views only here: on chip it is an [`ErrorKind::InvalidArgument`]
    /// error.
    #[track_caller]
    pub fn select<'i>(&self, dim: usize, index: impl SelectIndex<'i>) -> TileRef<'a> {
        let loc = SourceLoc::caller();
        let what = self.tile.describe();
        let ix = match index.select_at() {
            SelectAt::Position(i) => select_index(&self.ap.shape, dim, i, &what),
            SelectAt::Tensor(t) => Err(err(
                ErrorKind::InvalidArgument,
                "select",
                format!(
                    "select(dim={dim}) of {what} with index tensor {}: a dynamic select of an \
                     on-chip tensor is not supported (select on the HBM tensor before the DMA, \
                     or use a static index)",
                    t.describe()
                ),
            )),
        };
        self.slice(or_raise(ix, loc))
    }

    /// The view's size-1 free dimension `dim` repeated `size` times (stride 0; NKI on-chip
    /// `tensor.broadcast`): an operand read the same values along `dim`. The partition
    /// dimension cannot be broadcast, and an instruction cannot write through a broadcast
    /// view (errors naming the tile).
    #[track_caller]
    pub fn broadcast(&self, dim: usize, size: usize) -> TileRef<'a> {
        let loc = SourceLoc::caller();
        self.viewed("broadcast", |ap, what| broadcast(ap, dim, size, what), loc)
    }

    /// The view read as shape `dims` under NumPy broadcasting (shapes aligned on the right; a
    /// missing leading dimension or a size-1 one repeats, stride 0), as an `nl` op's operand
    /// is read by the instruction it lowers to; `None` when the view does not broadcast to
    /// `dims` (or is an indirect view of another shape). Unlike [`TileRef::broadcast`] this
    /// may repeat the partition dimension (a 1-partition operand read on every partition).
    pub(crate) fn broadcast_as(&self, dims: &[usize]) -> Option<TileRef<'a>> {
        let have = self.ap.shape.dims();
        if have == dims {
            return Some(*self);
        }
        if self.ind.is_some() || dims.len() < have.len() || dims.len() > MAX_DIMS {
            return None;
        }
        let lead = dims.len() - have.len();
        let mut strides = [0isize; MAX_DIMS];
        for (i, &d) in dims.iter().enumerate().skip(lead) {
            let (size, stride) = (have[i - lead], self.ap.strides[i - lead]);
            strides[i] = if size == d {
                stride
            } else if size == 1 {
                0
            } else {
                return None;
            };
        }
        let ap = Ap {
            offset: self.ap.offset,
            shape: Shape::new(dims).ok()?,
            strides,
        };
        Some(TileRef { ap, ..*self })
    }

    /// The view rearranged by an einops-style pattern (NKI on-chip `tensor.rearrange`); see
    /// [`HbmView::rearrange`]. The partition axis stays the first output dimension, alone.
    #[track_caller]
    pub fn rearrange(&self, pattern: &str, sizes: &[(&str, usize)]) -> TileRef<'a> {
        let loc = SourceLoc::caller();
        self.viewed(
            "rearrange",
            |ap, what| rearrange(ap, pattern, sizes, what),
            loc,
        )
    }

    /// The view's access pattern as NKI prints it (`[[step, num], ...]`, outermost first;
    /// NKI `tensor.get_pattern`), over the tile's storage in elements; the first element is
    /// at [`TileRef::offset`].
    pub fn get_pattern(&self) -> Vec<[isize; 2]> {
        self.ap.pairs()
    }

    /// The flat element offset of the view's first element in the tile's storage
    /// (`partition * free_elements + free offset`; NKI `tensor.offset`).
    pub fn offset(&self) -> usize {
        self.ap.offset
    }
}

/// The access pattern `pattern` at `offset` over the storage of on-chip tile `t` (see
/// [`TileRef::ap`]).
pub(crate) fn chip_pattern(
    t: &Tile,
    pattern: &[[usize; 2]],
    offset: usize,
    dtype: DType,
) -> Result<Ap> {
    let what = t.describe();
    let fail = |kind, msg: String| Err(err(kind, "ap", msg));
    let row_bytes = t.free_size() * t.dtype().size();
    if !row_bytes.is_multiple_of(dtype.size()) {
        return fail(
            ErrorKind::DType,
            format!(
                "cannot view {what} as {dtype}: a partition's {row_bytes} bytes are not a whole \
                 number of {dtype} elements"
            ),
        );
    }
    if pattern.len() < 2 || pattern.len() > MAX_DIMS {
        return fail(
            ErrorKind::InvalidArgument,
            format!(
                "access pattern {pattern:?} on {what}: an on-chip pattern has a partition pair \
                 and 1 to 4 free pairs"
            ),
        );
    }
    // Steps and offset count elements of `dtype` (NKI: "in terms of number of elements").
    let free = row_bytes / dtype.size();
    let [pstep, parts] = pattern[0];
    if parts > 1 && pstep != free {
        return fail(
            ErrorKind::PartitionOffset,
            format!(
                "access pattern {pattern:?} on {what}: the partition step must be the tensor's \
                 {free} free elements per partition (partitions are contiguous; got {pstep})"
            ),
        );
    }
    let dims: Vec<usize> = pattern.iter().map(|p| p[1]).collect();
    let shape = Shape::new(&dims)?;
    let mut strides = [0isize; MAX_DIMS];
    strides[0] = free as isize;
    for (k, p) in pattern.iter().enumerate().skip(1) {
        strides[k] = p[0] as isize;
    }
    let (p0, f0) = (offset / free.max(1), offset % free.max(1));
    let reach = pattern[1..].iter().try_fold(0usize, |r, p| {
        r.checked_add(p[0].checked_mul(p[1].saturating_sub(1))?)
    });
    let inside = reach.is_some_and(|r| f0.saturating_add(r) < free);
    if shape.numel() == 0 || p0.saturating_add(parts) > t.partitions() || !inside {
        return fail(
            ErrorKind::OutOfBounds,
            format!(
                "access pattern {pattern:?} at offset {offset} on {what} reaches outside its \
                 storage: partitions {p0}..{} of {}, free elements from {f0} (reaching {}) of \
                 {free} per partition",
                p0.saturating_add(parts),
                t.partitions(),
                reach
                    .and_then(|r| f0.checked_add(r))
                    .map_or("past the address space".to_string(), |r| r.to_string()),
            ),
        );
    }
    Ok(Ap {
        offset,
        shape,
        strides,
    })
}

impl<'a> TileRef<'a> {
    /// An access pattern over the tile's storage with NKI 0.7's `tensor.ap(pattern, offset)`
    /// semantics: `pattern[k] = [step, num]`, outermost first; element `(i0, i1, ...)` is
    /// element `offset + i0 * step0 + i1 * step1 + ...` of the tile's storage (row-major:
    /// partition `p`, free element `f` is `p * free_elements + f`). It is absolute: the view
    /// it is called on is ignored. The first pair is the partition pair: its step must be the
    /// tile's free-element count (partitions are not strided), and every partition's
    /// elements stay within the partition; otherwise an error names the tile.
    #[track_caller]
    pub fn ap(&self, pattern: &[[usize; 2]], offset: usize) -> TileRef<'a> {
        let loc = SourceLoc::caller();
        let ap = or_raise(
            chip_pattern(self.tile, pattern, offset, self.tile.dtype()),
            loc,
        );
        TileRef {
            tile: self.tile,
            ap,
            cast: None,
            ind: None,
        }
    }

    /// [`TileRef::ap`] reading the tile's bytes as `dtype` (NKI 0.7 `tensor.ap(pattern,
    /// offset, dtype=dtype)`, a reinterpret cast): the steps, the counts and the offset count
    /// elements of `dtype`, so an int32 `[128, 256]` tile seen as bfloat16 takes the pattern
    /// `[[512, 128], [1, 512]]`. Every instruction reads and writes the view as `dtype`
    /// (bytes little-endian within an element; a write changes only the bytes it covers).
    /// The partition step must be the partition's size in `dtype` elements; a partition
    /// whose bytes are not a whole number of them is a [`ErrorKind::DType`] error.
    #[track_caller]
    pub fn ap_as(&self, pattern: &[[usize; 2]], offset: usize, dtype: DType) -> TileRef<'a> {
        let loc = SourceLoc::caller();
        let ap = or_raise(chip_pattern(self.tile, pattern, offset, dtype), loc);
        TileRef {
            tile: self.tile,
            ap,
            cast: (dtype != self.tile.dtype()).then_some(dtype),
            ind: None,
        }
    }
}

impl<'a> TileRef<'a> {
    /// The same bytes read as `dtype` (NKI 0.7 `tensor.view(dtype)`, NumPy's `view`): the
    /// last dimension is scaled by the ratio of the element sizes (an int32 `[128, 256]` view
    /// becomes a bfloat16 `[128, 512]` one), the other dimensions keep their extents, and
    /// reads and writes go through the bytes as for [`TileRef::ap_as`]. The last dimension
    /// must have unit stride, and its byte size, the view's byte offset within a partition
    /// and the other dimensions' byte steps must be whole numbers of `dtype` elements;
    /// otherwise a [`ErrorKind::DType`] error names the view.
    #[track_caller]
    pub fn view_as(&self, dtype: DType) -> TileRef<'a> {
        let loc = SourceLoc::caller();
        self.direct("view", loc);
        let (pattern, offset) = or_raise(self.dtype_pattern(dtype), loc);
        self.ap_as(&pattern, offset, dtype)
    }

    /// This view read or written through the free-dimension offsets in `index` (NKI 0.7
    /// `tensor.indirect(index, num_elem)`, NeuronCore-v4 tensor indirection): a view of shape
    /// `[P, num_elem]` whose element `(p, i)` is free element `offset(i)` of partition `p` of
    /// this view (its free dimensions flattened, row-major), as an instruction's input (a
    /// gather) or its `dst` (a scatter; a repeated offset keeps the last value \[A\]).
    /// `offset(i)` is `index[i % G, i // G]`, G being 16 on the Vector, Scalar and GpSimd
    /// Engines and 32 on the Tensor Engine (the instruction's engine), continued over the
    /// next `G` partitions of `index` when it has more \[A\]. `index` is an integer SBUF
    /// tensor `[P, K]` with this view's `P`; `num_elem` (`None`: `index`'s size) is at most
    /// its size. Any other index is an [`ErrorKind::InvalidArgument`] error here; a target
    /// before trn3, a view or index not starting on a multiple of `G` partitions, or an
    /// offset outside this view's free elements (when values are computed) is an error of
    /// the instruction that takes the view. The view is an instruction operand only: slicing
    /// or reshaping it is an error (take views before `.indirect`), and the DMA instructions
    /// do not take it (they have their own gather/scatter, [`HbmView::ap_indirect`]).
    #[track_caller]
    pub fn indirect(
        &self,
        index: impl Into<TileRef<'a>>,
        num_elem: impl Into<Option<usize>>,
    ) -> TileRef<'a> {
        let loc = SourceLoc::caller();
        or_raise(self.indirect_of(index.into(), num_elem.into()), loc)
    }

    /// The `.ap_as` pattern and offset of [`TileRef::view_as`].
    fn dtype_pattern(&self, dtype: DType) -> Result<(Vec<[usize; 2]>, usize)> {
        let (from, to) = (self.dtype().size(), dtype.size());
        let dims = self.ap.shape.dims();
        let row = self.ap.offset / self.row_elems().max(1);
        let fail = |why: &str| {
            Err(err(
                ErrorKind::DType,
                "view",
                format!("cannot view {} as {dtype}: {why}", self.describe()),
            ))
        };
        let n = dims.len();
        if n < 2 || (self.ap.strides[n - 1] != 1 && dims[n - 1] > 1) {
            return fail("its last dimension must be a free dimension of unit stride");
        }
        // Bytes to elements of `dtype`, when whole.
        let conv = |elems: usize| (elems * from).is_multiple_of(to).then(|| elems * from / to);
        let Some(last) = conv(dims[n - 1]) else {
            return fail("the last dimension's bytes are not a whole number of elements");
        };
        let Some(within) = conv(self.ap.offset % self.row_elems().max(1)) else {
            return fail("the view does not start at a whole element");
        };
        let mut pattern = Vec::with_capacity(n);
        let Some(row_to) = conv(self.row_elems().max(1)) else {
            return fail("a partition's bytes are not a whole number of elements");
        };
        pattern.push([row_to, dims[0]]);
        for (&dim, &stride) in dims.iter().zip(&self.ap.strides).take(n - 1).skip(1) {
            match usize::try_from(stride).ok().and_then(conv) {
                Some(step) => pattern.push([step, dim]),
                None => return fail("a step is negative or not a whole number of elements"),
            }
        }
        pattern.push([1, last]);
        Ok((pattern, row * row_to + within))
    }
}

/// Declares methods of a whole tensor type that are the same method of its whole view
/// (`self.view()`), each with its doc comment and arguments, inside an `impl` block:
///
/// ```ignore
/// view_methods! { TileRef;
///     /// [`TileRef::reshape`] of the whole tile.
///     fn reshape(dims: &[usize]);
/// }
/// ```
///
/// expands to `#[track_caller] pub fn reshape(&self, dims: &[usize]) -> TileRef<'_> {
/// self.view().reshape(dims) }`; an entry may name its own return type (`-> T`).
macro_rules! view_methods {
    ($out:ident; $($(#[$attr:meta])* fn $name:ident $(<$lt:lifetime>)? ($($arg:ident: $ty:ty),*)
        $(-> $ret:ty)?;)*) => {$(
        $(#[$attr])*
        #[track_caller]
        pub fn $name $(<$lt>)? (&self, $($arg: $ty),*) -> $crate::view::view_methods!(@ret $out $($ret)?) {
            self.view().$name($($arg),*)
        }
    )*};
    (@ret $out:ident) => { $out<'_> };
    (@ret $out:ident $ret:ty) => { $ret };
}
pub(crate) use view_methods;

impl Tile {
    view_methods! { TileRef;
        /// [`TileRef::ap`] over this tile's storage.
        fn ap(pattern: &[[usize; 2]], offset: usize);
        /// [`TileRef::ap_as`] over this tile's storage (a reinterpret cast to `dtype`).
        fn ap_as(pattern: &[[usize; 2]], offset: usize, dtype: DType);
        /// [`TileRef::view_as`] of the whole tile (NKI `tensor.view(dtype)`).
        fn view_as(dtype: DType);
        /// [`TileRef::reshape`] of the whole tile.
        fn reshape(dims: &[usize]);
        /// [`TileRef::permute`] of the whole tile.
        fn permute(perm: &[usize]);
    }
}

/// The NKI 0.7 view methods of a whole tensor type `$ty` (with `view()` giving a `$out`):
/// each is the same method of its whole view.
macro_rules! whole_views {
    ($ty:ty => $out:ident) => {
        impl $ty {
            $crate::view::view_methods! { $out;
                #[doc = concat!("[`", stringify!($out), "::expand_dim`] of the whole tensor.")]
                fn expand_dim(dim: usize);
                #[doc = concat!("[`", stringify!($out), "::squeeze_dim`] of the whole tensor.")]
                fn squeeze_dim(dim: usize);
                #[doc = concat!("[`", stringify!($out), "::select`] of the whole tensor.")]
                fn select<'i>(dim: usize, index: impl $crate::view::SelectIndex<'i>);
                #[doc = concat!("[`", stringify!($out), "::broadcast`] of the whole tensor.")]
                fn broadcast(dim: usize, size: usize);
                #[doc = concat!("[`", stringify!($out), "::rearrange`] of the whole tensor.")]
                fn rearrange(pattern: &str, sizes: &[(&str, usize)]);
                #[doc = concat!("[`", stringify!($out), "::reshape_dim`] of the whole tensor.")]
                fn reshape_dim(dim: usize, shape: &[isize]);
                #[doc = concat!("[`", stringify!($out), "::flatten_dims`] of the whole tensor.")]
                fn flatten_dims(start_dim: usize, end_dim: usize);
            }

            #[doc = concat!("[`", stringify!($out), "::get_pattern`] of the whole tensor (row-major).")]
            pub fn get_pattern(&self) -> Vec<[isize; 2]> {
                self.view().get_pattern()
            }
        }
    };
}
pub(crate) use whole_views;

whole_views!(Tile => TileRef);

#[cfg(test)]
mod tests {
    use super::*;

    fn ap(dims: &[usize]) -> Ap {
        Ap::contiguous(Shape::new(dims).unwrap())
    }

    fn values(a: &Ap, n: usize) -> Vec<f32> {
        let src: Vec<f32> = (0..n).map(|x| x as f32).collect();
        let mut out = vec![0.0; a.shape.numel()];
        a.gather(&src, &mut out);
        out
    }

    #[test]
    fn reshape_splits_and_merges_contiguous_dims() {
        let a = reshape(&ap(&[4, 6]), &[4, 2, 3], "t").unwrap();
        assert_eq!(&a.strides[..3], &[6, 3, 1]);
        let b = reshape(&a, &[24], "t").unwrap();
        assert_eq!(
            values(&b, 24),
            (0..24).map(|x| x as f32).collect::<Vec<_>>()
        );
        let c = reshape(&ap(&[2, 1, 3]), &[6, 1], "t").unwrap();
        assert_eq!(c.shape.dims(), &[6, 1]);
    }

    #[test]
    fn reshape_splits_strided_slices_but_does_not_merge_them() {
        // Columns 0..4 of a [3, 6] tensor, split into [3, 2, 2].
        let s = ap(&[3, 6])
            .slice(
                &[crate::access::Ix::from(0..3), crate::access::Ix::from(0..4)],
                false,
                "t",
            )
            .unwrap();
        let r = reshape(&s, &[3, 2, 2], "t").unwrap();
        assert_eq!(
            values(&r, 18),
            vec![0., 1., 2., 3., 6., 7., 8., 9., 12., 13., 14., 15.]
        );
        let e = reshape(&s, &[12], "t").unwrap_err();
        assert!(e.message().contains("not contiguous"), "{e}");
        let e = reshape(&s, &[5, 2], "t").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
    }

    #[test]
    fn permute_broadcast_and_pattern() {
        let t = permute(&ap(&[2, 3]), &[1, 0], "t").unwrap();
        assert_eq!(values(&t, 6), vec![0., 3., 1., 4., 2., 5.]);
        assert!(permute(&ap(&[2, 3]), &[0, 0], "t").is_err());
        let b = broadcast(&ap(&[1, 3]), 0, 2, "t").unwrap();
        assert_eq!(values(&b, 3), vec![0., 1., 2., 0., 1., 2.]);
        assert!(broadcast(&ap(&[2, 3]), 0, 4, "t").is_err());
        let p = pattern(&ap(&[4, 4]), &[[4, 2], [2, 2]], 1, 16, "t").unwrap();
        assert_eq!(values(&p, 16), vec![1., 3., 5., 7.]);
        let e = pattern(&ap(&[4, 4]), &[[4, 4], [1, 4]], 1, 16, "t").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::OutOfBounds);
    }
}
