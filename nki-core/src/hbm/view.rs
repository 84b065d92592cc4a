//! Views and slices of HBM tensors: [`HbmView`] (read-only), [`HbmViewMut`] (of a kernel
//! output), and the [`HbmSource`] / [`HbmDest`] traits that `nl::load` / `nl::store` /
//! `nisa::dma_copy` take.

use super::storage::HbmStorage;
use crate::access::{Ap, IntoIndex};
use crate::dtype::DType;
use crate::error::Result;
use crate::record::{BufId, Region};
use crate::values::Values;
use std::sync::Arc;

/// Access pattern `ap` of tensor `st` sliced by `index`.
fn slice_ap(st: &HbmStorage, ap: &Ap, index: impl IntoIndex) -> Result<Ap> {
    index.with_index(|index| ap.slice_named(index, false, || format!("tensor {}", st.name)))
}

/// A read-only view (slice) of an HBM tensor.
#[derive(Clone)]
pub struct HbmView {
    pub(crate) st: Arc<HbmStorage>,
    pub(crate) ap: Ap,
    /// A view of a kernel input (`&Hbm`), which nothing writes during a launch: a load may
    /// read its values in place instead of copying them (see [`HbmView::share_rows`]).
    input: bool,
    /// The scalar register (its buffer id) this view's offset was read from
    /// (`scalar_offset`): a DMA of the view waits for that `scalar_load`.
    register: Option<std::num::NonZeroU64>,
    /// Why the view is out of its tensor, when a dynamic offset (`scalar_offset`) moved it
    /// outside: the view then keeps its unmoved pattern, a `dma_copy` of it fails under
    /// `oob_mode=error` or skips the transfer under `oob_mode=skip` (NKI checks a dynamic
    /// offset when the DMA runs), and any other access of its values is this error.
    pub(crate) oob: Option<Arc<str>>,
    /// The run-time counts of a dynamic access pattern (`ap_dynamic`), when it has any: the
    /// view then holds the counts read at run time, and only a DMA takes it (the other side
    /// of the DMA gives the shape with each count at its maximum).
    pub(crate) counts: Option<Arc<RunCounts>>,
}

/// The run-time counts of a view made by a dynamic access pattern (NKI 0.8).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RunCounts {
    /// Per counted dimension: `(dimension, count read at run time, maximum)`. Empty once a DMA
    /// has narrowed its other side to the counts.
    pub(crate) dims: Vec<(usize, usize, usize)>,
    /// A count read at run time is 0: the DMA moves no element (it is still issued).
    pub(crate) empty: bool,
}

impl HbmView {
    pub(crate) fn whole(st: &Arc<HbmStorage>, input: bool) -> HbmView {
        HbmView {
            st: st.clone(),
            ap: st.whole,
            input,
            register: None,
            oob: None,
            counts: None,
        }
    }

    /// A view of `ap` in `st` that is not a kernel input (its loads copy).
    pub(crate) fn of(st: Arc<HbmStorage>, ap: Ap) -> HbmView {
        HbmView {
            st,
            ap,
            input: false,
            register: None,
            oob: None,
            counts: None,
        }
    }

    /// The same tensor through another access pattern `ap` (a reshape, permutation or
    /// broadcast of this view), still a kernel input if this view is one.
    pub(crate) fn with_ap(&self, ap: Ap) -> HbmView {
        HbmView {
            st: self.st.clone(),
            ap,
            input: self.input,
            register: self.register,
            oob: self.oob.clone(),
            counts: self.counts.clone(),
        }
    }

    /// This view, its offset read from the scalar register `reg` (a one-word on-chip region
    /// written by `nisa::scalar_load`; `None`: a compile-time offset).
    pub(crate) fn after_register(mut self, reg: Option<Region>) -> HbmView {
        if let Some(Region {
            buf: crate::record::BufId::Tile(id),
            ..
        }) = reg
        {
            self.register = std::num::NonZeroU64::new(id);
        }
        self
    }

    /// The scalar register this view's offset was read from, as the region a DMA of the view
    /// reads (so it waits for the `scalar_load`), if any.
    pub(crate) fn register(&self) -> Option<Region> {
        self.register.map(|id| Region {
            buf: crate::record::BufId::Tile(id.get()),
            p0: 0,
            p1: 1,
            lo: 0,
            hi: 4,
        })
    }

    /// Slices the view further (integer indices drop their dimension, as in NKI on HBM).
    #[track_caller]
    pub fn slice(&self, index: impl IntoIndex) -> HbmView {
        let loc = crate::error::SourceLoc::caller();
        match self.try_slice(index) {
            Ok(v) => v,
            Err(e) => crate::abort::raise(e, loc),
        }
    }

    /// Slices the view, returning an error instead of failing the kernel.
    pub fn try_slice(&self, index: impl IntoIndex) -> Result<HbmView> {
        Ok(HbmView {
            st: self.st.clone(),
            ap: slice_ap(&self.st, &self.ap, index)?,
            input: self.input,
            register: self.register,
            oob: self.oob.clone(),
            counts: self.counts.clone(),
        })
    }

    /// `HbmView::whole(st, input).slice(index)`, without making the whole view first.
    #[track_caller]
    pub(super) fn slice_of_whole(
        st: &Arc<HbmStorage>,
        input: bool,
        index: impl IntoIndex,
    ) -> HbmView {
        let loc = crate::error::SourceLoc::caller();
        match slice_ap(st, &st.whole, index) {
            Ok(ap) => HbmView {
                st: st.clone(),
                ap,
                input,
                register: None,
                oob: None,
                counts: None,
            },
            Err(e) => crate::abort::raise(e, loc),
        }
    }

    /// The view's shape.
    pub fn shape(&self) -> &[usize] {
        self.ap.shape.dims()
    }

    /// The tensor's dtype.
    pub fn dtype(&self) -> DType {
        self.st.dtype
    }

    /// The shape of the whole tensor this view belongs to.
    pub fn tensor_shape(&self) -> &[usize] {
        self.st.shape.dims()
    }

    /// The byte region this view touches (bounding range), for instruction records.
    pub(crate) fn region(&self) -> Region {
        let (lo, hi) = self.ap.span();
        let sz = self.st.dtype.size() as u64;
        Region {
            buf: BufId::Hbm(self.st.id),
            p0: 0,
            p1: 1,
            lo: lo as u64 * sz,
            hi: hi as u64 * sz,
        }
    }

    /// For a load of a kernel-input view whose partition rows are each contiguous: the tensor's
    /// values shared (not copied) with the view's offset and row stride in them, for a tile
    /// to read in place. `None` for outputs, strided rows, shape-only tensors, lent host
    /// memory (`Hbm::with_borrowed`), and tensors the running launch accesses as an output
    /// (through another view), which it writes in place.
    pub(crate) fn share_rows(&self) -> Option<(Values, usize, usize)> {
        if !self.input || self.oob.is_some() || self.counts.is_some() {
            return None;
        }
        let launch = super::shared::current_instance().map_or(0, |k| k.0);
        if self.st.tracked_in(launch) {
            return None;
        }
        let (offset, row_stride) = if self.ap.shape.ndim() == 1 {
            // Loaded as one partition of all the elements.
            (self.ap.strides[0] == 1 || self.ap.shape.numel() == 1)
                .then_some((self.ap.offset, 0))?
        } else {
            let (offset, row_stride, col_stride) = self.ap.as_matrix()?;
            (col_stride == 1 || self.ap.shape.free() == 1).then_some((offset, row_stride))?
        };
        let g = self.st.read();
        Some((g.values.as_ref()?.share()?, offset, row_stride))
    }

    /// Whether a DMA of this view moves no element (a dynamic access pattern's run-time count
    /// of 0).
    pub(crate) fn moves_nothing(&self) -> bool {
        self.counts.as_ref().is_some_and(|c| c.empty)
    }

    /// The error of accessing the values of a view a dynamic offset moved outside its tensor
    /// (see `oob`), as op `op`.
    pub(crate) fn in_bounds(&self, op: &'static str) -> Result<()> {
        if self.counts.as_ref().is_some_and(|c| !c.dims.is_empty()) {
            return Err(crate::error::NkiError::new(
                crate::error::ErrorKind::InvalidArgument,
                op,
                format!(
                    "{} has counts read at run time (a dynamic access pattern): only \
                     nisa.dma_copy takes it, its other side giving the shape",
                    self.describe()
                ),
            ));
        }
        match &self.oob {
            None => Ok(()),
            Some(why) => Err(crate::error::NkiError::new(
                crate::error::ErrorKind::OutOfBounds,
                op,
                why.to_string(),
            )),
        }
    }

    /// Human-readable description for messages: `hbm3[0:128, 0:512]`.
    pub(crate) fn describe(&self) -> String {
        format!(
            "{}{} (view of {})",
            self.st.name, self.ap.shape, self.st.shape
        )
    }
}

impl std::fmt::Debug for HbmView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

/// A writable view of a kernel output.
#[derive(Clone, Debug)]
pub struct HbmViewMut(pub(crate) HbmView);

impl HbmViewMut {
    /// Slices the view further.
    #[track_caller]
    pub fn slice(&self, index: impl IntoIndex) -> HbmViewMut {
        HbmViewMut(self.0.slice(index))
    }

    /// The view's shape.
    pub fn shape(&self) -> &[usize] {
        self.0.shape()
    }

    /// A read-only view of the same elements.
    #[inline]
    pub fn as_read(&self) -> HbmView {
        self.0.clone()
    }
}

/// Something `nl::load` / `nisa::dma_copy` can read from HBM.
pub trait HbmSource {
    /// The view to read.
    fn hbm_view(&self) -> HbmView;
}
impl HbmSource for HbmView {
    #[inline]
    fn hbm_view(&self) -> HbmView {
        self.clone()
    }
}
impl HbmSource for &HbmView {
    #[inline]
    fn hbm_view(&self) -> HbmView {
        (*self).clone()
    }
}
impl HbmSource for HbmViewMut {
    #[inline]
    fn hbm_view(&self) -> HbmView {
        self.0.clone()
    }
}
impl HbmSource for &HbmViewMut {
    #[inline]
    fn hbm_view(&self) -> HbmView {
        self.0.clone()
    }
}

/// Something `nl::store` can write to: only views of kernel outputs. Kernel inputs
/// (`&Hbm<T>` parameters) are immutable, so storing into one does not compile.
#[diagnostic::on_unimplemented(
    message = "cannot store into `{Self}`: kernel inputs are immutable (NKI err_cannot_update_immutable_parameter)",
    label = "not a kernel output",
    note = "declare the kernel parameter as `&mut Hbm<T>` to make it an output, then store into `param.slice(...)`"
)]
pub trait HbmDest {
    /// The writable view.
    fn hbm_dest(&self) -> HbmView;
}
impl HbmDest for HbmViewMut {
    fn hbm_dest(&self) -> HbmView {
        self.0.clone()
    }
}
impl HbmDest for &HbmViewMut {
    fn hbm_dest(&self) -> HbmView {
        self.0.clone()
    }
}
