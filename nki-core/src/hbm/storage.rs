//! The storage behind every HBM tensor ([`HbmStorage`]: shape, dtype, name, values and the
//! access tracker) and the host-memory rules of making one (zero-filled buffers, huge pages,
//! the "no values" error of shape-only tensors).

use super::track;
use crate::access::Shape;
use crate::dtype::DType;
use crate::error::{ErrorKind, NkiError, Result};
use crate::values::Values;
use std::cell::RefCell;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak};

static NEXT_HBM_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// Tensors borrowed as outputs ([`Hbm::as_output`](super::Hbm::as_output)) on this thread since the last launch
    /// started here.
    pub(super) static PENDING_OUTPUTS: RefCell<Vec<Weak<HbmStorage>>> = const { RefCell::new(Vec::new()) };
}

/// The kernel outputs of a launch starting on this thread: the tensors borrowed with
/// [`Hbm::as_output`](super::Hbm::as_output) since the previous launch started here (and still alive).
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
        advise_huge_pages(p, n);
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
    /// The launch whose kernel marked the tensor as written in part on purpose (0: none; see
    /// [`HbmStorage::allow_partial_write`]).
    pub(super) partial_ok_in: AtomicU64,
    pub(super) data: RwLock<HbmData>,
    /// The accesses of the running launch (see `track.rs`).
    pub(super) tracker: Mutex<track::Tracker>,
    /// Signalled when an access ends its value copy (accesses it overlaps wait for it).
    pub(super) turn: Condvar,
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

    /// Names the tensor `name` when it still has the default name `hbm<id>` of a tensor nobody
    /// named (tensor `id`).
    pub(crate) fn set_if_default(&self, id: u64, name: &str) {
        let unnamed = self
            .get()
            .strip_prefix("hbm")
            .is_some_and(|n| n.parse() == Ok(id));
        if unnamed {
            self.set(name);
        }
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
        Arc::new(Self::fresh(dtype, shape, values, None, false))
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
        Ok(Self::fresh(dtype, shape, values, name, true))
    }

    /// A storage with the next tensor id, named `name` (default `hbm<id>`), with no accesses
    /// and no writer yet.
    fn fresh(
        dtype: DType,
        shape: Shape,
        values: Option<Values>,
        name: Option<&str>,
        in_kernel: bool,
    ) -> HbmStorage {
        let id = NEXT_HBM_ID.fetch_add(1, Ordering::Relaxed);
        HbmStorage {
            id,
            dtype,
            shape,
            whole: crate::access::Ap::contiguous(shape),
            name: TensorName::new(name.map_or_else(|| format!("hbm{id}"), str::to_string)),
            in_kernel,
            last_writer: AtomicU32::new(0),
            output_of: AtomicU64::new(0),
            partial_ok_in: AtomicU64::new(0),
            data: RwLock::new(HbmData { values }),
            tracker: Mutex::new(track::Tracker::default()),
            turn: Condvar::new(),
        }
    }

    pub(crate) fn read(&self) -> RwLockReadGuard<'_, HbmData> {
        self.data.read().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, HbmData> {
        self.data.write().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn tracker(&self) -> MutexGuard<'_, track::Tracker> {
        self.tracker.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The tracker, once no access overlapping `rects` copies values (when `writes`, or when
    /// the copying access writes): it waits on [`HbmStorage::turn`] meanwhile.
    pub(super) fn tracker_when_free(
        &self,
        rects: &[super::rect::Rect],
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

/// Size of a transparent huge page on x86-64 and aarch64 Linux (4 KiB base pages).
#[cfg(target_os = "linux")]
const HUGE_PAGE: usize = 2 << 20;

/// Advises the OS to back the whole 2 MiB pages inside the fresh, untouched allocation of `n`
/// f32s at `p` with transparent huge pages (`madvise(MADV_HUGEPAGE)`, what PyTorch's CPU
/// allocator does for large tensors): the kernel's first stores then fault once per 2 MiB
/// instead of once per 4 KiB. Only advice: contents are unchanged, nothing happens where the
/// OS has no such pages (THP "never") or on other systems, and a failure is ignored.
pub(crate) fn advise_huge_pages(p: *mut f32, n: usize) {
    #[cfg(target_os = "linux")]
    {
        let (start, end) = (p as usize, p as usize + n * 4);
        let (first, last) = (
            start.next_multiple_of(HUGE_PAGE),
            end / HUGE_PAGE * HUGE_PAGE,
        );
        if last > first {
            // SAFETY: `first..last` lies inside the caller's allocation, whole pages of it;
            // MADV_HUGEPAGE changes how the pages are backed, never their contents.
            unsafe {
                libc::madvise(
                    first as *mut libc::c_void,
                    last - first,
                    libc::MADV_HUGEPAGE,
                );
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (p, n);
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
