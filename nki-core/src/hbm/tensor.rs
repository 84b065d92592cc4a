//! The tensor types a user holds: [`Hbm`] (owned by the host) and [`HbmOut`] (a kernel
//! output: the exclusive borrow of an `Hbm` for one launch), and what makes them sources and
//! destinations of loads and stores.

use super::storage::{no_data, try_zeros, HbmStorage, PENDING_OUTPUTS};
use super::view::{HbmDest, HbmSource, HbmView, HbmViewMut};
use crate::access::{IntoIndex, Shape};
use crate::dtype::{DType, Element};
use crate::error::{ensure, ErrorKind, Result};
use ndarray::{ArrayBase, ArrayD, Data, Dimension, IxDyn};
use std::marker::PhantomData;
use std::sync::Arc;
/// The shape of a tensor made by an infallible constructor; panics (at the caller) when the
/// element count overflows, as `Vec` and ndarray constructors do.
#[track_caller]
fn shape_of<const N: usize>(dims: [usize; N]) -> Shape {
    const {
        assert!(
            N >= 1 && N <= crate::access::MAX_DIMS,
            "HBM tensors have 1 to 5 dimensions"
        )
    };
    Shape::new(&dims).unwrap_or_else(|e| panic!("{e}"))
}

/// A tensor in device HBM with elements of type `T`.
///
/// Inputs are passed to kernels as `&Hbm<T>` (read-only inside the kernel); outputs as
/// `&mut Hbm<T>`, which the launcher turns into an [`HbmOut`] shared by all instances.
pub struct Hbm<T: Element> {
    pub(crate) st: Arc<HbmStorage>,
    pub(super) _t: PhantomData<T>,
}

impl<T: Element> Hbm<T> {
    /// A zero-filled tensor.
    ///
    /// # Panics
    /// When the element count overflows (more than [`crate::access::MAX_ELEMENTS`]).
    #[track_caller]
    pub fn zeros<const N: usize>(shape: [usize; N]) -> Self {
        Self::full(shape, T::from_f32(0.0))
    }

    /// A tensor filled with `value`.
    ///
    /// # Panics
    /// When the element count overflows (more than [`crate::access::MAX_ELEMENTS`]).
    #[track_caller]
    pub fn full<const N: usize>(shape: [usize; N], value: T) -> Self {
        let s = shape_of(shape);
        Self::wrap(HbmStorage::new(
            T::DTYPE,
            s,
            Some(vec![value.to_slot(); s.numel()]),
        ))
    }

    /// A zero-filled tensor of a shape known only at run time (1 to 5 dimensions). A shape
    /// whose values the host cannot allocate is an [`ErrorKind::HostMemory`] error naming the
    /// shape and the bytes (never an abort of the process).
    pub fn zeros_dyn(shape: &[usize]) -> Result<Self> {
        let s = Shape::new(shape)?;
        let values = try_zeros("Hbm::zeros_dyn", &s, T::DTYPE)?;
        Ok(Self::wrap(HbmStorage::new(T::DTYPE, s, Some(values))))
    }

    /// A tensor with a shape but no values: enough for estimate-mode launches (timeline only)
    /// of shapes too large to hold. Reading its values is an [`ErrorKind::NoData`] error.
    /// Memory spent on it follows what launches touch, not its size.
    ///
    /// # Panics
    /// When the element count overflows (more than [`crate::access::MAX_ELEMENTS`]); see
    /// [`Hbm::try_shape_only`] for the fallible form.
    #[track_caller]
    pub fn shape_only<const N: usize>(shape: [usize; N]) -> Self {
        Self::wrap(HbmStorage::new(T::DTYPE, shape_of(shape), None))
    }

    /// [`Hbm::shape_only`] of a shape given at run time: an [`ErrorKind::InvalidArgument`]
    /// error for 0 or more than 5 dimensions, or an element count that overflows.
    pub fn try_shape_only(shape: &[usize]) -> Result<Self> {
        Ok(Self::wrap(HbmStorage::new(
            T::DTYPE,
            Shape::new(shape)?,
            None,
        )))
    }

    /// A tensor holding a copy of an ndarray (any dimensionality from 1 to 5).
    pub fn from_array<S: Data<Elem = T>, D: Dimension>(a: &ArrayBase<S, D>) -> Result<Self> {
        let shape = Shape::new(a.shape())?;
        let values: Vec<f32> = a.iter().map(|x| x.to_slot()).collect();
        Ok(Self::wrap(HbmStorage::new(T::DTYPE, shape, Some(values))))
    }

    /// A tensor from row-major values.
    pub fn from_vec(shape: &[usize], values: Vec<T>) -> Result<Self> {
        Self::from_slice(shape, &values)
    }

    /// A tensor from a row-major slice, converted in one pass into the tensor's storage (the
    /// one copy a framework's host buffer needs to become a device tensor).
    pub fn from_slice(shape: &[usize], values: &[T]) -> Result<Self> {
        let s = shape_holding("Hbm::from_slice", shape, values.len(), "given")?;
        let v = values.iter().map(|x| x.to_slot()).collect();
        Ok(Self::wrap(HbmStorage::new(T::DTYPE, s, Some(v))))
    }

    pub(crate) fn wrap(st: Arc<HbmStorage>) -> Self {
        Hbm {
            st,
            _t: PhantomData,
        }
    }

    /// The values as an ndarray. [`ErrorKind::NoData`] for shape-only tensors.
    pub fn to_array(&self) -> Result<ArrayD<T>> {
        let v = self.to_vec()?;
        Ok(ArrayD::from_shape_vec(IxDyn(self.st.shape.dims()), v).expect("shape matches"))
    }

    /// The values as a row-major `Vec<T>`, converted in one pass. [`ErrorKind::NoData`] for
    /// shape-only tensors.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        let g = self.st.read();
        let vals = g
            .values
            .as_ref()
            .ok_or_else(|| no_data(&self.st, "Hbm::to_vec"))?;
        Ok(vals.iter().map(|&x| T::from_slot(x)).collect())
    }

    /// The values as f32, row-major (exactly as stored, but for int32/uint32 values above
    /// 2^24, rounded to the nearest f32: use [`Hbm::to_vec`] for those).
    pub fn to_f32_vec(&self) -> Result<Vec<f32>> {
        let g = self.st.read();
        g.values
            .as_ref()
            .map(|v| v.iter().map(|&s| self.st.dtype.value(s)).collect())
            .ok_or_else(|| no_data(&self.st, "Hbm::to_f32_vec"))
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        self.st.shape.dims()
    }

    /// The dtype.
    pub fn dtype(&self) -> DType {
        self.st.dtype
    }

    /// The tensor's name in errors and profiles (`hbm<n>` until named).
    pub fn name(&self) -> String {
        self.st.name.get().to_string()
    }

    /// Names the tensor in errors and profiles. `#[nki_kernel]` launchers name each HBM
    /// argument after its kernel parameter (`a`, `out`, ...) when the launch starts.
    pub fn set_name(&self, name: &str) {
        self.st.name.set(name)
    }

    /// True when the tensor holds values (false for [`Hbm::shape_only`]).
    pub fn has_data(&self) -> bool {
        self.st.has_data()
    }

    /// A read-only view of the whole tensor.
    pub fn view(&self) -> HbmView {
        HbmView::whole(&self.st, true)
    }

    /// A read-only slice, e.g. `a.slice((i..i + 128, j..j + 512))`. Inside a kernel a bad
    /// index fails the launch with an out-of-bounds error naming the kernel line.
    #[track_caller]
    pub fn slice(&self, index: impl IntoIndex) -> HbmView {
        HbmView::slice_of_whole(&self.st, true, index)
    }

    /// Borrows the tensor as a kernel output for one launch: the next launch started on this
    /// thread takes it as one of its outputs (its loads are race- and initialisation-checked,
    /// and a launch that never writes it fails, NKI's `err_tensor_output_not_written_to`).
    pub fn as_output(&mut self) -> HbmOut<'_, T> {
        PENDING_OUTPUTS.with(|p| p.borrow_mut().push(Arc::downgrade(&self.st)));
        HbmOut {
            st: self.st.clone(),
            _t: PhantomData,
        }
    }
}

impl<T: Element> std::fmt::Debug for Hbm<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Hbm<{}>{}", self.st.dtype, self.st.shape)
    }
}

/// A kernel output: the launch's exclusive borrow of an [`Hbm`] tensor, shared by all program
/// instances. Only views of outputs can be stored to.
pub struct HbmOut<'a, T: Element> {
    pub(super) st: Arc<HbmStorage>,
    pub(super) _t: PhantomData<&'a mut Hbm<T>>,
}

impl<T: Element> HbmOut<'_, T> {
    /// An output over storage shared with other holders (a mesh shard written by its device
    /// while other devices copy into it remotely).
    pub(crate) fn shared(st: Arc<HbmStorage>) -> Self {
        HbmOut {
            st,
            _t: PhantomData,
        }
    }

    /// A writable view of the whole tensor.
    pub fn view(&self) -> HbmViewMut {
        HbmViewMut(HbmView::whole(&self.st, false))
    }

    /// A writable slice, e.g. `c.slice((i..i + 128, ..))`.
    #[track_caller]
    pub fn slice(&self, index: impl IntoIndex) -> HbmViewMut {
        HbmViewMut(HbmView::slice_of_whole(&self.st, false, index))
    }

    /// Marks the output as written only in part on purpose, for this launch: a launch that
    /// treats its outputs as uninitialised ([`Launch::outputs_uninitialised`](
    /// crate::Launch::outputs_uninitialised), the candle bridge) then does not require every
    /// element to be written (the unwritten elements keep what the host buffer held).
    #[track_caller]
    pub fn allow_partial_write(&self) {
        self.st
            .allow_partial_write(crate::error::SourceLoc::caller());
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        self.st.shape.dims()
    }

    /// The dtype.
    pub fn dtype(&self) -> DType {
        self.st.dtype
    }
}

impl<T: Element> HbmSource for &Hbm<T> {
    fn hbm_view(&self) -> HbmView {
        self.view()
    }
}
impl<T: Element> HbmSource for &HbmOut<'_, T> {
    fn hbm_view(&self) -> HbmView {
        self.view().0
    }
}
impl<T: Element> HbmDest for &HbmOut<'_, T> {
    fn hbm_dest(&self) -> HbmView {
        self.view().0
    }
}

/// `shape` as a [`Shape`] that must hold `n` values (`verb`: how they came, "given" or
/// "lent"); else an [`ErrorKind::ShapeMismatch`] error of `op`.
pub(crate) fn shape_holding(
    op: &'static str,
    shape: &[usize],
    n: usize,
    verb: &str,
) -> Result<Shape> {
    let s = Shape::new(shape)?;
    ensure(s.numel() == n, ErrorKind::ShapeMismatch, op, || {
        format!(
            "shape {s} holds {} elements but {n} values were {verb}",
            s.numel()
        )
    })?;
    Ok(s)
}
