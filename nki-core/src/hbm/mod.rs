//! Device tensors in HBM: [`Hbm`] (owned by the host, shared read-only by program instances),
//! [`HbmOut`] (a kernel output: the exclusive borrow of an `Hbm` for one launch), and the views
//! and slices of both that `nl::load` / `nl::store` / `nisa::dma_copy` take.
//!
//! Each tensor also tracks, for every element, which writer (program instance and affine_range
//! iteration) stored to it during the current launch (compactly, per block of elements where a
//! store covers whole blocks), which is how overlapping writes are detected (NKI's "unexpected
//! output dependencies"). The tags are kept in every launch mode, so estimate-mode launches on
//! [`Hbm::shape_only`] tensors detect races too; the tag arrays are allocated on first write.
//!
//! The folder: this module holds the tensors, `view.rs` their views and slices; `write.rs` the tracked stores,
//! `writers.rs` who wrote what and which writers conflict, `atomic.rs` `nl.atomic_rmw`.

pub(crate) mod atomic;
mod view;
pub(crate) mod write;
pub(crate) mod writers;

pub use view::{HbmDest, HbmSource, HbmView, HbmViewMut};

use crate::access::{IntoIndex, Shape};
use crate::dtype::{DType, Element};
use crate::error::{ErrorKind, NkiError, Result};
use ndarray::{ArrayBase, ArrayD, Data, Dimension, IxDyn};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

static NEXT_HBM_ID: AtomicU64 = AtomicU64::new(1);

/// The storage behind an HBM tensor and all its views.
pub(crate) struct HbmStorage {
    pub(crate) id: u64,
    pub(crate) dtype: DType,
    pub(crate) shape: Shape,
    pub(crate) name: String,
    data: RwLock<HbmData>,
}

/// Values (absent for shape-only tensors) and the writer tags of the current launch.
///
/// Writer ids are global and increasing, so ids from earlier launches (and 0, "never
/// written") are recognised as stale. Tags are kept per block of
/// [`write::BLOCK`] elements, and per element only for blocks that were written
/// partially (marked [`write::MIXED`]), so a store of whole blocks touches 1/16 of
/// the tag memory.
pub(crate) struct HbmData {
    pub(crate) values: Option<Vec<f32>>,
    /// Writer id per block of elements, or `MIXED`.
    pub(crate) blocks: Vec<u32>,
    /// Writer id per element, meaningful inside `MIXED` blocks (allocated on first need).
    pub(crate) elems: Vec<u32>,
}

impl HbmStorage {
    fn new(dtype: DType, shape: Shape, values: Option<Vec<f32>>) -> Arc<HbmStorage> {
        let id = NEXT_HBM_ID.fetch_add(1, Ordering::Relaxed);
        Arc::new(HbmStorage {
            id,
            dtype,
            shape,
            name: format!("hbm{id}"),
            data: RwLock::new(HbmData {
                values,
                blocks: Vec::new(),
                elems: Vec::new(),
            }),
        })
    }

    pub(crate) fn read(&self) -> RwLockReadGuard<'_, HbmData> {
        self.data.read().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, HbmData> {
        self.data.write().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn has_data(&self) -> bool {
        self.read().values.is_some()
    }
}

fn shape_of<const N: usize>(dims: [usize; N]) -> Shape {
    const {
        assert!(
            N >= 1 && N <= crate::access::MAX_DIMS,
            "HBM tensors have 1 to 5 dimensions"
        )
    };
    Shape::new(&dims).expect("rank checked at compile time")
}

/// A tensor in device HBM with elements of type `T`.
///
/// Inputs are passed to kernels as `&Hbm<T>` (read-only inside the kernel); outputs as
/// `&mut Hbm<T>`, which the launcher turns into an [`HbmOut`] shared by all instances.
pub struct Hbm<T: Element> {
    pub(crate) st: Arc<HbmStorage>,
    _t: PhantomData<T>,
}

impl<T: Element> Hbm<T> {
    /// A zero-filled tensor.
    pub fn zeros<const N: usize>(shape: [usize; N]) -> Self {
        Self::full(shape, T::from_f32(0.0))
    }

    /// A tensor filled with `value`.
    pub fn full<const N: usize>(shape: [usize; N], value: T) -> Self {
        let s = shape_of(shape);
        Self::wrap(HbmStorage::new(
            T::DTYPE,
            s,
            Some(vec![value.to_f32(); s.numel()]),
        ))
    }

    /// A tensor with a shape but no values: enough for estimate-mode launches (timeline only)
    /// of shapes too large to hold. Reading its values is an [`ErrorKind::NoData`] error.
    pub fn shape_only<const N: usize>(shape: [usize; N]) -> Self {
        Self::wrap(HbmStorage::new(T::DTYPE, shape_of(shape), None))
    }

    /// A tensor holding a copy of an ndarray (any dimensionality from 1 to 5).
    pub fn from_array<S: Data<Elem = T>, D: Dimension>(a: &ArrayBase<S, D>) -> Result<Self> {
        let shape = Shape::new(a.shape())?;
        let values: Vec<f32> = a.iter().map(|x| x.to_f32()).collect();
        Ok(Self::wrap(HbmStorage::new(T::DTYPE, shape, Some(values))))
    }

    /// A tensor from row-major values.
    pub fn from_vec(shape: &[usize], values: Vec<T>) -> Result<Self> {
        let s = Shape::new(shape)?;
        if s.numel() != values.len() {
            return Err(NkiError::new(
                ErrorKind::ShapeMismatch,
                "Hbm::from_vec",
                format!(
                    "shape {s} holds {} elements but {} values were given",
                    s.numel(),
                    values.len()
                ),
            ));
        }
        let v = values.into_iter().map(|x| x.to_f32()).collect();
        Ok(Self::wrap(HbmStorage::new(T::DTYPE, s, Some(v))))
    }

    fn wrap(st: Arc<HbmStorage>) -> Self {
        Hbm {
            st,
            _t: PhantomData,
        }
    }

    /// The values as an ndarray. [`ErrorKind::NoData`] for shape-only tensors.
    pub fn to_array(&self) -> Result<ArrayD<T>> {
        let g = self.st.read();
        let vals = g
            .values
            .as_ref()
            .ok_or_else(|| no_data(&self.st, "Hbm::to_array"))?;
        let v: Vec<T> = vals.iter().map(|&x| T::from_f32(x)).collect();
        Ok(ArrayD::from_shape_vec(IxDyn(self.st.shape.dims()), v).expect("shape matches"))
    }

    /// The values as f32 (exactly as stored), row-major.
    pub fn to_f32_vec(&self) -> Result<Vec<f32>> {
        let g = self.st.read();
        g.values
            .clone()
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

    /// True when the tensor holds values (false for [`Hbm::shape_only`]).
    pub fn has_data(&self) -> bool {
        self.st.has_data()
    }

    /// A read-only view of the whole tensor.
    pub fn view(&self) -> HbmView {
        HbmView::whole(&self.st)
    }

    /// A read-only slice, e.g. `a.slice((i..i + 128, j..j + 512))`. Inside a kernel a bad
    /// index fails the launch with an out-of-bounds error naming the kernel line.
    #[track_caller]
    pub fn slice(&self, index: impl IntoIndex) -> HbmView {
        self.view().slice(index)
    }

    /// Borrows the tensor as a kernel output for one launch.
    pub fn as_output(&mut self) -> HbmOut<'_, T> {
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
    st: Arc<HbmStorage>,
    _t: PhantomData<&'a mut Hbm<T>>,
}

impl<T: Element> HbmOut<'_, T> {
    /// A writable view of the whole tensor.
    pub fn view(&self) -> HbmViewMut {
        HbmViewMut(HbmView::whole(&self.st))
    }

    /// A writable slice, e.g. `c.slice((i..i + 128, ..))`.
    #[track_caller]
    pub fn slice(&self, index: impl IntoIndex) -> HbmViewMut {
        HbmViewMut(HbmView::whole(&self.st).slice(index))
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

pub(crate) fn no_data(st: &HbmStorage, op: &'static str) -> NkiError {
    NkiError::new(
        ErrorKind::NoData,
        op,
        format!(
            "tensor {} {} was created with Hbm::shape_only and has no values; \
             use an estimate-mode launch or create it with values",
            st.name, st.shape
        ),
    )
}
