//! Shapes, index expressions and affine access patterns: how a view (of an HBM tensor or an
//! on-chip tile) maps its multi-dimensional indices onto a flat buffer.

use crate::error::{ErrorKind, NkiError, Result};
use std::fmt;
use std::ops::{Range, RangeFrom, RangeFull, RangeInclusive, RangeTo};

/// The most dimensions a view may have (partition + 4 free dims, as the hardware's access
/// patterns allow).
pub const MAX_DIMS: usize = 5;

/// The most elements a shape may hold: byte counts (up to 8 bytes an element) and signed
/// element strides of every view of it are then exact in `usize`/`isize` arithmetic.
pub const MAX_ELEMENTS: usize = isize::MAX as usize / 8;

/// A shape of 1 to [`MAX_DIMS`] dimensions (dimension 0 is the partition dim on chip).
#[derive(Clone, Copy, Eq)]
pub struct Shape {
    /// The dims, then 1 up to [`MAX_DIMS`] (so products over all of them need no length).
    dims: [usize; MAX_DIMS],
    ndim: u8,
}

impl PartialEq for Shape {
    fn eq(&self, o: &Shape) -> bool {
        // Element by element: an array comparison calls `memcmp` (shapes are compared on
        // every tile access).
        self.ndim == o.ndim && (0..MAX_DIMS).all(|d| self.dims[d] == o.dims[d])
    }
}

impl std::hash::Hash for Shape {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        // The fields in order, as a derived hash (consistent with `eq`: equal fields).
        self.dims.hash(state);
        self.ndim.hash(state);
    }
}

impl Shape {
    /// A shape from its dimensions. Errors for 0 or more than [`MAX_DIMS`] dims, and for an
    /// element count over [`MAX_ELEMENTS`] (the product is computed with checked arithmetic).
    pub fn new(dims: &[usize]) -> Result<Shape> {
        if dims.is_empty() || dims.len() > MAX_DIMS {
            return Err(NkiError::new(
                ErrorKind::InvalidArgument,
                "shape",
                format!(
                    "shape {dims:?} has {} dimensions; 1 to {MAX_DIMS} are supported",
                    dims.len()
                ),
            ));
        }
        let numel = dims.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
        if numel.is_none_or(|n| n > MAX_ELEMENTS) {
            return Err(NkiError::new(
                ErrorKind::InvalidArgument,
                "shape",
                format!(
                    "shape {dims:?}: the element count overflows (more than {MAX_ELEMENTS} \
                     elements cannot be addressed)"
                ),
            ));
        }
        // Slot by slot (a copy of a run of unknown length calls `memcpy`).
        let d: [usize; MAX_DIMS] = std::array::from_fn(|i| dims.get(i).copied().unwrap_or(1));
        Ok(Shape {
            dims: d,
            ndim: dims.len() as u8,
        })
    }

    /// The shape of `dims`, known to be valid (1 to [`MAX_DIMS`] dims, at most
    /// [`MAX_ELEMENTS`] elements: a part of a valid shape), built without [`Shape::new`]'s
    /// checks.
    #[inline]
    pub(crate) fn of_valid(dims: &[usize]) -> Shape {
        debug_assert!(Shape::new(dims).is_ok(), "invalid shape {dims:?}");
        Shape {
            dims: std::array::from_fn(|i| dims.get(i).copied().unwrap_or(1)),
            ndim: dims.len() as u8,
        }
    }

    /// The dimensions.
    pub fn dims(&self) -> &[usize] {
        &self.dims[..self.ndim as usize]
    }

    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.ndim as usize
    }

    /// Total number of elements.
    pub fn numel(&self) -> usize {
        self.dims[0] * self.free()
    }

    /// Size of dimension 0 (the partition dimension of a tile).
    pub fn partitions(&self) -> usize {
        self.dims[0]
    }

    /// Elements per partition: the product of the free dimensions (1 for a 1-D shape).
    pub fn free(&self) -> usize {
        self.dims[1..].iter().product()
    }

    /// Row-major (C order) strides in elements.
    pub fn contiguous_strides(&self) -> [isize; MAX_DIMS] {
        const {
            assert!(
                MAX_DIMS == 5,
                "the strides below are written out for 5 slots"
            )
        };
        // Suffix products over all slots (the padding dims are 1, so a dim's stride is the
        // product of every slot after it), then 0 for the padding.
        let d = self.dims.map(|x| x as isize);
        let s3 = d[4];
        let s2 = s3 * d[3];
        let s1 = s2 * d[2];
        let s0 = s1 * d[1];
        match self.ndim {
            1 => [s0, 0, 0, 0, 0],
            2 => [s0, s1, 0, 0, 0],
            3 => [s0, s1, s2, 0, 0],
            4 => [s0, s1, s2, s3, 0],
            _ => [s0, s1, s2, s3, 1],
        }
    }
}

impl fmt::Debug for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.dims())
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[")?;
        for (i, d) in self.dims().iter().enumerate() {
            if i > 0 {
                write!(f, ", ")?;
            }
            write!(f, "{d}")?;
        }
        write!(f, "]")
    }
}

/// One index of a slice expression: a single position (drops the dim on HBM) or a strided
/// range `start..end` with `step`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ix {
    /// A single index.
    At(usize),
    /// `start..end` (end `None` = to the end of the dimension) with a step >= 1.
    Range {
        /// First index.
        start: usize,
        /// One past the last index; `None` for the dimension's end.
        end: Option<usize>,
        /// Step between indices.
        step: usize,
    },
}

/// NKI's `nl.ds(start, size)`: the dynamic slice `start..start + size` (an end past the
/// address space saturates, and is then out of bounds of any tensor).
pub fn ds(start: usize, size: usize) -> Ix {
    Ix::Range {
        start,
        end: Some(start.saturating_add(size)),
        step: 1,
    }
}

/// A strided range `start..end` stepping by `step` (NKI `start:end:step`).
pub fn stepped(r: Range<usize>, step: usize) -> Ix {
    Ix::Range {
        start: r.start,
        end: Some(r.end),
        step,
    }
}

impl From<usize> for Ix {
    fn from(i: usize) -> Ix {
        Ix::At(i)
    }
}
impl From<Range<usize>> for Ix {
    fn from(r: Range<usize>) -> Ix {
        Ix::Range {
            start: r.start,
            end: Some(r.end),
            step: 1,
        }
    }
}
impl From<RangeInclusive<usize>> for Ix {
    fn from(r: RangeInclusive<usize>) -> Ix {
        Ix::Range {
            start: *r.start(),
            end: Some(r.end().saturating_add(1)),
            step: 1,
        }
    }
}
impl From<RangeFrom<usize>> for Ix {
    fn from(r: RangeFrom<usize>) -> Ix {
        Ix::Range {
            start: r.start,
            end: None,
            step: 1,
        }
    }
}
impl From<RangeTo<usize>> for Ix {
    fn from(r: RangeTo<usize>) -> Ix {
        Ix::Range {
            start: 0,
            end: Some(r.end),
            step: 1,
        }
    }
}
impl From<RangeFull> for Ix {
    fn from(_: RangeFull) -> Ix {
        Ix::Range {
            start: 0,
            end: None,
            step: 1,
        }
    }
}

/// A slice expression: anything convertible into a list of [`Ix`] (a single index or range, a
/// tuple of up to 5 of them, or a `Vec<Ix>`).
pub trait IntoIndex {
    /// The list of indices.
    fn into_index(self) -> Vec<Ix>;

    /// Calls `f` with the list of indices (slicing calls this: single indices and tuples
    /// hand over a list on the stack instead of allocating one).
    fn with_index<R>(self, f: impl FnOnce(&[Ix]) -> R) -> R
    where
        Self: Sized,
    {
        f(&self.into_index())
    }
}

impl IntoIndex for Vec<Ix> {
    fn into_index(self) -> Vec<Ix> {
        self
    }
}
impl IntoIndex for &[Ix] {
    fn into_index(self) -> Vec<Ix> {
        self.to_vec()
    }
}
macro_rules! impl_into_index_single {
    ($($t:ty),*) => {$(
        impl IntoIndex for $t {
            fn into_index(self) -> Vec<Ix> { vec![self.into()] }
            fn with_index<R>(self, f: impl FnOnce(&[Ix]) -> R) -> R { f(&[self.into()]) }
        }
    )*};
}
impl_into_index_single!(
    usize,
    Ix,
    Range<usize>,
    RangeInclusive<usize>,
    RangeFrom<usize>,
    RangeTo<usize>,
    RangeFull
);
macro_rules! impl_into_index_tuple {
    ($($n:ident),+) => {
        impl<$($n: Into<Ix>),+> IntoIndex for ($($n,)+) {
            #[allow(non_snake_case)]
            fn into_index(self) -> Vec<Ix> { let ($($n,)+) = self; vec![$($n.into()),+] }
            #[allow(non_snake_case)]
            fn with_index<R>(self, f: impl FnOnce(&[Ix]) -> R) -> R {
                let ($($n,)+) = self;
                f(&[$($n.into()),+])
            }
        }
    };
}
impl_into_index_tuple!(A);
impl_into_index_tuple!(A, B);
impl_into_index_tuple!(A, B, C);
impl_into_index_tuple!(A, B, C, D);
impl_into_index_tuple!(A, B, C, D, E);

/// An affine access pattern: element `idx` of the view lives at
/// `offset + sum(idx[k] * strides[k])` in the flat buffer.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Ap {
    /// Flat offset of element 0.
    pub offset: usize,
    /// Shape of the view.
    pub shape: Shape,
    /// Stride of each dimension in elements.
    pub strides: [isize; MAX_DIMS],
}

impl Ap {
    /// The whole of a contiguous row-major buffer of `shape`.
    pub fn contiguous(shape: Shape) -> Ap {
        Ap {
            offset: 0,
            shape,
            strides: shape.contiguous_strides(),
        }
    }

    /// Applies a slice expression. `keep_dim0` keeps an integer-indexed dimension 0 as size 1
    /// (on-chip views keep their partition dim) and keeps a view of a multi-dimensional
    /// buffer at least 2-D (a size-1 free dimension when integers drop every free one); other
    /// integer indices drop their dimension.
    /// Missing trailing indices select the whole dimension.
    pub fn slice(&self, index: &[Ix], keep_dim0: bool, what: &str) -> Result<Ap> {
        self.slice_named(index, keep_dim0, || what.to_string())
    }

    /// [`Ap::slice`] with the sliced object's description built only for an error (slicing
    /// sits on every kernel's hot path; describing a tile or tensor formats a string).
    #[inline]
    pub(crate) fn slice_named(
        &self,
        index: &[Ix],
        keep_dim0: bool,
        describe: impl Fn() -> String,
    ) -> Result<Ap> {
        let nd = self.shape.ndim();
        if index.len() > nd {
            return Err(NkiError::new(
                ErrorKind::InvalidArgument,
                "slice",
                format!(
                    "too many indices for {} of shape {}: got {}",
                    describe(),
                    self.shape,
                    index.len()
                ),
            ));
        }
        let mut offset = self.offset as isize;
        // The view's dims (`dims[..n]`) and strides.
        let (mut dims, mut n) = ([0usize; MAX_DIMS], 0);
        let mut strides = [0isize; MAX_DIMS];
        for d in 0..nd {
            let size = self.shape.dims[d];
            let ix = index.get(d).copied().unwrap_or(Ix::Range {
                start: 0,
                end: None,
                step: 1,
            });
            match ix {
                Ix::At(i) => {
                    if i >= size {
                        return Err(oob(&describe(), d, i, i, size, &self.shape));
                    }
                    offset += i as isize * self.strides[d];
                    if d == 0 && keep_dim0 {
                        (dims[n], strides[n]) = (1, self.strides[d]);
                        n += 1;
                    }
                }
                Ix::Range { start, end, step } => {
                    let end = end.unwrap_or(size);
                    if step == 0 {
                        return Err(NkiError::new(
                            ErrorKind::InvalidArgument,
                            "slice",
                            format!(
                                "slice step cannot be zero (dimension {d} of {})",
                                describe()
                            ),
                        ));
                    }
                    if start >= end {
                        return Err(NkiError::new(
                            ErrorKind::InvalidArgument,
                            "index",
                            format!(
                                "the range {start}..{end} on dimension {d} of {} (shape {}) is \
                                 empty: a view needs at least one element on every dimension",
                                describe(),
                                self.shape
                            ),
                        ));
                    }
                    if end > size {
                        return Err(oob(&describe(), d, start, end - 1, size, &self.shape));
                    }
                    offset += start as isize * self.strides[d];
                    // (No division for the common unit step.)
                    dims[n] = if step == 1 {
                        end - start
                    } else {
                        (end - start).div_ceil(step)
                    };
                    strides[n] = self.strides[d] * step as isize;
                    n += 1;
                }
            }
        }
        if n == 0 {
            (dims[0], strides[0], n) = (1, 1, 1);
        }
        if keep_dim0 && n == 1 && nd >= 2 {
            // An on-chip view keeps at least two dimensions: integers on every free dimension
            // leave one free dimension of size 1 (NKI language guide, "Tensor Values", and the
            // `NkiTensor` indexing docstring: `t[0, 0, 10]` of a 3-D SBUF tensor is `[1, 1]`,
            // `t[:, 0, 10]` is `[P, 1]`).
            (dims[1], strides[1], n) = (1, 1, 2);
        }
        Ok(Ap {
            offset: offset as usize,
            // Every dim is at least 1 and at most the sliced one's: a part of a valid shape.
            shape: Shape::of_valid(&dims[..n]),
            strides,
        })
    }

    /// True when the view covers a contiguous row-major block.
    pub fn is_contiguous(&self) -> bool {
        let c = self.shape.contiguous_strides();
        (0..self.shape.ndim()).all(|d| self.shape.dims()[d] == 1 || self.strides[d] == c[d])
    }

    /// True when the view repeats an element (a dimension of size > 1 with stride 0, as
    /// `broadcast` makes).
    #[inline]
    pub fn repeats(&self) -> bool {
        (0..self.shape.ndim()).any(|d| self.strides[d] == 0 && self.shape.dims()[d] > 1)
    }

    /// The pattern as NKI prints it: `[step, num]` per dimension, outermost first.
    pub fn pairs(&self) -> Vec<[isize; 2]> {
        (0..self.shape.ndim())
            .map(|d| [self.strides[d], self.shape.dims()[d] as isize])
            .collect()
    }

    /// Lowest and one-past-highest flat offsets touched.
    pub fn span(&self) -> (usize, usize) {
        let mut lo = self.offset as isize;
        let mut hi = self.offset as isize;
        for d in 0..self.shape.ndim() {
            let ext = (self.shape.dims()[d] as isize - 1) * self.strides[d];
            if ext < 0 {
                lo += ext;
            } else {
                hi += ext;
            }
        }
        (lo as usize, hi as usize + 1)
    }

    /// Length of the innermost contiguous run in elements (1 when the last dim is strided).
    pub fn contiguous_run(&self) -> usize {
        let nd = self.shape.ndim();
        let mut run = 1usize;
        let mut expect = 1isize;
        for d in (0..nd).rev() {
            let n = self.shape.dims()[d];
            if n == 1 {
                continue;
            }
            if self.strides[d] != expect {
                break;
            }
            run *= n;
            expect *= n as isize;
        }
        run
    }

    /// Calls `f(flat_offset_of_run_start, run_len)` for every run of the view in row-major
    /// order. A run is `run_len` elements along the last dim, spaced by the last stride.
    #[inline]
    pub fn for_each_row(&self, mut f: impl FnMut(usize, usize)) {
        let nd = self.shape.ndim();
        let dims = self.shape.dims();
        let inner = dims[nd - 1];
        let outer: usize = dims[..nd - 1].iter().product();
        let mut idx = [0usize; MAX_DIMS];
        for _ in 0..outer {
            let off = self.offset as isize
                + idx[..nd - 1]
                    .iter()
                    .zip(&self.strides)
                    .map(|(&i, &s)| i as isize * s)
                    .sum::<isize>();
            f(off as usize, inner);
            for d in (0..nd.saturating_sub(1)).rev() {
                idx[d] += 1;
                if idx[d] < dims[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
    }

    /// The view as a 2-D matrix [dim 0, product of the other dims]: `(offset, row stride,
    /// column stride)`, when the non-unit trailing dims flatten into one evenly strided run and
    /// no stride is negative.
    pub fn as_matrix(&self) -> Option<(usize, usize, usize)> {
        let dims = self.shape.dims();
        let mut col: Option<(isize, isize)> = None; // (stride, span of the flattened dims)
        for d in (1..dims.len()).rev() {
            if dims[d] == 1 {
                continue;
            }
            let st = self.strides[d];
            col = match col {
                None => Some((st, st * dims[d] as isize)),
                Some((cs, span)) if st == span => Some((cs, st * dims[d] as isize)),
                Some(_) => return None,
            };
        }
        let cs = col.map_or(1, |c| c.0);
        let rs = if dims[0] == 1 { 0 } else { self.strides[0] };
        (cs >= 0 && rs >= 0).then_some((self.offset, rs as usize, cs as usize))
    }

    /// Stride of the last dimension.
    pub fn inner_stride(&self) -> isize {
        self.strides[self.shape.ndim() - 1]
    }

    /// Copies the view out of `src` into `out` in row-major order (`out.len()` = numel).
    pub fn gather(&self, src: &[f32], out: &mut [f32]) {
        let s = self.inner_stride();
        let mut pos = 0;
        self.for_each_row(|off, n| {
            if s == 1 {
                out[pos..pos + n].copy_from_slice(&src[off..off + n]);
            } else {
                for j in 0..n {
                    out[pos + j] = src[(off as isize + j as isize * s) as usize];
                }
            }
            pos += n;
        });
    }

    /// Writes `vals` (row-major, numel long) into the view's elements of `dst`.
    pub fn scatter(&self, dst: &mut [f32], vals: &[f32]) {
        let s = self.inner_stride();
        let mut pos = 0;
        self.for_each_row(|off, n| {
            if s == 1 {
                dst[off..off + n].copy_from_slice(&vals[pos..pos + n]);
            } else {
                for j in 0..n {
                    dst[(off as isize + j as isize * s) as usize] = vals[pos + j];
                }
            }
            pos += n;
        });
    }

    /// The multi-dimensional index (within the parent buffer of `parent` shape) of a flat
    /// offset; used for error messages.
    pub fn unravel(flat: usize, parent: &Shape) -> Vec<usize> {
        let strides = parent.contiguous_strides();
        let mut rem = flat;
        (0..parent.ndim())
            .map(|d| {
                let i = rem / strides[d] as usize;
                rem %= strides[d] as usize;
                i
            })
            .collect()
    }
}

fn oob(what: &str, dim: usize, first: usize, last: usize, size: usize, shape: &Shape) -> NkiError {
    NkiError::new(
        ErrorKind::OutOfBounds,
        "index",
        format!(
            "out-of-bound access for {what} of shape {shape} on dimension {dim}: index range \
             [{first}, {last}] exceeds dimension size of {size}"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slicing_offsets_strides_and_drops() {
        let ap = Ap::contiguous(Shape::new(&[4, 6]).unwrap());
        let v = ap
            .slice(&[Ix::from(1..3), stepped(0..6, 2)], false, "t")
            .unwrap();
        assert_eq!(v.shape.dims(), &[2, 3]);
        assert_eq!(v.offset, 6);
        assert_eq!(&v.strides[..2], &[6, 2]);
        let row = ap.slice(&[Ix::At(2)], false, "t").unwrap();
        assert_eq!(row.shape.dims(), &[6]);
        let keep = ap.slice(&[Ix::At(2)], true, "t").unwrap();
        assert_eq!(keep.shape.dims(), &[1, 6]);
        // On chip at least two dims stay (the NkiTensor indexing docstring's examples).
        let chip = Ap::contiguous(Shape::new(&[4, 3, 16]).unwrap());
        let one = chip
            .slice(&[Ix::At(0), Ix::At(0), Ix::At(10)], true, "t")
            .unwrap();
        assert_eq!((one.shape.dims(), one.offset), (&[1, 1][..], 10));
        let col = chip
            .slice(&[Ix::from(..), Ix::At(0), Ix::At(10)], true, "t")
            .unwrap();
        assert_eq!((col.shape.dims(), col.offset), (&[4, 1][..], 10));
        assert_eq!(col.strides[0], 48);
        let hbm = chip
            .slice(&[Ix::from(..), Ix::At(0), Ix::At(10)], false, "t")
            .unwrap();
        assert_eq!(hbm.shape.dims(), &[4]);
        let src: Vec<f32> = (0..24).map(|x| x as f32).collect();
        let mut out = vec![0.0; 6];
        v.gather(&src, &mut out);
        assert_eq!(out, vec![6., 8., 10., 12., 14., 16.]);
    }

    #[test]
    fn out_of_bounds_is_reported() {
        let ap = Ap::contiguous(Shape::new(&[4, 6]).unwrap());
        let e = ap.slice(&[Ix::from(0..5)], false, "tensor a").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::OutOfBounds);
        assert!(e.message().contains("dimension 0"), "{e}");
    }
}
