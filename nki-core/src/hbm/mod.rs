//! Device tensors in HBM: [`Hbm`] (owned by the host, shared read-only by program instances),
//! [`HbmOut`] (a kernel output: the exclusive borrow of an `Hbm` for one launch), and the views
//! and slices of both that `nl::load` / `nl::store` / `nisa::dma_copy` take.
//!
//! Each tensor also tracks which program instance (and affine_range iteration) stored to,
//! updated or loaded which of its elements during the current launch, as rectangles of
//! elements per access (`track.rs`, `rect.rs`): that is how overlapping writes and read-write
//! races are detected (NKI's "unexpected output dependencies"), in every launch mode, so
//! estimate-mode launches on [`Hbm::shape_only`] tensors detect races too.
//!
//! The folder: this module holds the tensors, `view.rs` their views and slices, `values.rs`
//! their values, `borrow.rs` tensors over lent host memory ([`with_borrowed`]) and
//! moving values out ([`Hbm::into_vec`]); `write.rs` the tracked stores and loads, `track.rs` the access tracker,
//! `rect.rs` the rectangles it keeps, `writers.rs` who wrote what and which writers
//! conflict, `atomic.rs` `nl.atomic_rmw`.

pub(crate) mod atomic;
mod borrow;
pub(crate) mod observe;
mod rect;
pub(crate) mod shared;
pub(crate) mod track;
pub(crate) mod values;
pub(crate) mod view;
pub(crate) mod write;
pub(crate) mod writers;

pub use borrow::{with_borrowed, Lender};
pub use view::{HbmDest, HbmSource, HbmView, HbmViewMut};

use crate::access::{IntoIndex, Shape};
use crate::dtype::{DType, Element};
use crate::error::{ErrorKind, NkiError, Result};
use ndarray::{ArrayBase, ArrayD, Data, Dimension, IxDyn};
use std::cell::RefCell;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak};
use values::Values;

static NEXT_HBM_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// Tensors borrowed as outputs ([`Hbm::as_output`]) on this thread since the last launch
    /// started here.
    static PENDING_OUTPUTS: RefCell<Vec<Weak<HbmStorage>>> = const { RefCell::new(Vec::new()) };
}

/// The kernel outputs of a launch starting on this thread: the tensors borrowed with
/// [`Hbm::as_output`] since the previous launch started here (and still alive).
pub(crate) fn take_pending_outputs() -> Vec<Arc<HbmStorage>> {
    let mut v: Vec<Arc<HbmStorage>> = PENDING_OUTPUTS
        .with(|p| std::mem::take(&mut *p.borrow_mut()))
        .iter()
        .filter_map(Weak::upgrade)
        .collect();
    v.dedup_by_key(|s| s.id);
    v
}

/// Zero-filled host slots for a tensor of shape `s` and `dtype`, made by `op`: an
/// [`ErrorKind::HostMemory`] error naming the shape and the bytes when the host cannot
/// allocate them (`Vec`'s infallible allocation would abort the process instead). The pages
/// come zeroed from the allocator, so a large tensor costs what it touches.
pub(crate) fn try_zeros(op: &'static str, s: &Shape, dtype: DType) -> Result<Vec<f32>> {
    let n = s.numel();
    let fail = || {
        NkiError::new(
            ErrorKind::HostMemory,
            op,
            format!(
                "the host cannot allocate the values of a {dtype} tensor of shape {s} ({n} elements, \
                 {} bytes of host memory as f32 slots)",
                n as u128 * 4
            ),
        )
    };
    if n == 0 {
        return Ok(Vec::new());
    }
    let layout = std::alloc::Layout::array::<f32>(n).map_err(|_| fail())?;
    // SAFETY: `layout` has a non-zero size (n > 0). A non-null result is an allocation of
    // `layout` from the global allocator, all zero bytes (0.0f32), which is exactly what a
    // `Vec<f32>` of capacity and length `n` owns and frees.
    unsafe {
        let p = std::alloc::alloc_zeroed(layout) as *mut f32;
        if p.is_null() {
            return Err(fail());
        }
        borrow::advise_huge_pages(p, n);
        Ok(Vec::from_raw_parts(p, n, n))
    }
}

/// The error of a launch that wrote none of the output `st` (NKI's
/// `err_tensor_output_not_written_to`), if it did not: `base` is the launch's first writer id.
pub(crate) fn check_written(st: &HbmStorage, base: u32) -> Result<()> {
    if st.last_writer.load(Ordering::SeqCst) >= base {
        return Ok(());
    }
    Err(NkiError::new(
        ErrorKind::OutputNotWritten,
        "launch",
        format!(
            "output tensor {} {} is never written by the kernel (err_tensor_output_not_written_to)",
            st.name, st.shape
        ),
    ))
}

/// The storage behind an HBM tensor and all its views.
pub(crate) struct HbmStorage {
    pub(crate) id: u64,
    pub(crate) dtype: DType,
    pub(crate) shape: Shape,
    /// The access pattern of the whole tensor (what its views and slices start from).
    pub(crate) whole: crate::access::Ap,
    /// The name errors and profiles show: `hbm<id>` until the tensor is named (by a kernel
    /// parameter, `nl::ndarray`'s `name`, or [`Hbm::set_name`]).
    pub(crate) name: TensorName,
    /// True for a tensor a kernel allocated (`nl::ndarray` in HBM): its accesses are tracked
    /// like those of a kernel output (uninitialised reads, races).
    pub(crate) in_kernel: bool,
    /// The highest writer id that wrote the tensor (0: never): a kernel output whose last
    /// writer is older than the launch was never written by it.
    pub(crate) last_writer: AtomicU32,
    /// The launch that last took the tensor as a kernel output (0: none), so that a load
    /// tells a kernel input from an output without the launch's state.
    pub(crate) output_of: AtomicU64,
    data: RwLock<HbmData>,
    /// The accesses of the running launch (see `track.rs`).
    tracker: Mutex<track::Tracker>,
    /// Signalled when an access ends its value copy (accesses it overlaps wait for it).
    turn: Condvar,
}

/// The name of an HBM tensor, which a launch may change (a kernel names its HBM parameters):
/// displayed as the name itself.
pub(crate) struct TensorName(RwLock<Arc<str>>);

impl TensorName {
    pub(crate) fn new(name: String) -> TensorName {
        TensorName(RwLock::new(name.into()))
    }

    /// The current name.
    pub(crate) fn get(&self) -> Arc<str> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Renames the tensor.
    pub(crate) fn set(&self, name: &str) {
        if *self.get() != *name {
            *self.0.write().unwrap_or_else(|p| p.into_inner()) = name.into();
        }
    }
}

impl std::fmt::Display for TensorName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.get())
    }
}

/// The values of a tensor (absent for shape-only tensors).
pub(crate) struct HbmData {
    pub(crate) values: Option<Values>,
}

impl HbmStorage {
    pub(crate) fn new(dtype: DType, shape: Shape, values: Option<Vec<f32>>) -> Arc<HbmStorage> {
        Self::with_values(dtype, shape, values.map(Values::from))
    }

    /// [`HbmStorage::new`] over values already made (lent ones, see `borrow.rs`).
    pub(crate) fn with_values(
        dtype: DType,
        shape: Shape,
        values: Option<Values>,
    ) -> Arc<HbmStorage> {
        let id = NEXT_HBM_ID.fetch_add(1, Ordering::Relaxed);
        Arc::new(HbmStorage {
            id,
            dtype,
            shape,
            whole: crate::access::Ap::contiguous(shape),
            name: TensorName::new(format!("hbm{id}")),
            in_kernel: false,
            last_writer: AtomicU32::new(0),
            output_of: AtomicU64::new(0),
            data: RwLock::new(HbmData { values }),
            tracker: Mutex::new(track::Tracker::default()),
            turn: Condvar::new(),
        })
    }

    /// A tensor allocated inside a kernel (`nl::ndarray` in HBM), named `name`: with values
    /// when `values` (zero pages until written; reads before a write are tracked errors), else
    /// shape only (estimate mode). An [`ErrorKind::HostMemory`] error when the host cannot
    /// hold its values.
    pub(crate) fn in_kernel(
        dtype: DType,
        shape: Shape,
        values: bool,
        name: Option<&str>,
    ) -> Result<HbmStorage> {
        let values = match values {
            true => Some(Values::from(try_zeros("ndarray", &shape, dtype)?)),
            false => None,
        };
        let id = NEXT_HBM_ID.fetch_add(1, Ordering::Relaxed);
        Ok(HbmStorage {
            id,
            dtype,
            shape,
            whole: crate::access::Ap::contiguous(shape),
            name: TensorName::new(name.map_or_else(|| format!("hbm{id}"), str::to_string)),
            in_kernel: true,
            last_writer: AtomicU32::new(0),
            output_of: AtomicU64::new(0),
            data: RwLock::new(HbmData { values }),
            tracker: Mutex::new(track::Tracker::default()),
            turn: Condvar::new(),
        })
    }

    pub(crate) fn read(&self) -> RwLockReadGuard<'_, HbmData> {
        self.data.read().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, HbmData> {
        self.data.write().unwrap_or_else(|p| p.into_inner())
    }

    fn tracker(&self) -> MutexGuard<'_, track::Tracker> {
        self.tracker.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The tracker, once no access overlapping `rects` copies values (when `writes`, or when
    /// the copying access writes): it waits on [`HbmStorage::turn`] meanwhile.
    fn tracker_when_free(
        &self,
        rects: &[rect::Rect],
        writes: bool,
    ) -> MutexGuard<'_, track::Tracker> {
        let mut t = self.tracker();
        while t.must_wait(rects, writes) {
            t.waiting += 1;
            t = self.turn.wait(t).unwrap_or_else(|p| p.into_inner());
            t.waiting -= 1;
        }
        t
    }

    /// True while the running launch (`launch`, see `LaunchShared::id`) tracks accesses to
    /// this tensor: its values are then written in place and must not be shared with tiles.
    pub(crate) fn tracked_in(&self, launch: u64) -> bool {
        self.tracker().is_in(launch)
    }

    pub(crate) fn has_data(&self) -> bool {
        self.read().values.is_some()
    }
}

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
    _t: PhantomData<T>,
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
        let s = Shape::new(shape)?;
        if s.numel() != values.len() {
            return Err(NkiError::new(
                ErrorKind::ShapeMismatch,
                "Hbm::from_slice",
                format!(
                    "shape {s} holds {} elements but {} values were given",
                    s.numel(),
                    values.len()
                ),
            ));
        }
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
    st: Arc<HbmStorage>,
    _t: PhantomData<&'a mut Hbm<T>>,
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
