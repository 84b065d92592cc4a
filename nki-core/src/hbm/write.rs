//! Tracked HBM accesses: stores, `atomic_rmw` updates and loads of kernel outputs, each
//! checked by the tensor's access tracker ([`super::track`]) before its values move.
//!
//! A store (or DMA into HBM) and an atomic update claim the elements they write; a load of a
//! kernel output claims the elements it reads. Two claims of one element at unordered
//! positions (different instances, or different iterations of one affine_range) are an
//! output-dependency error naming both (NKI's "unexpected output dependencies"), unless both
//! are loads or both atomic updates; a load of an element that no write of this launch covers
//! is an [`ErrorKind::UninitializedRead`] error. Estimate-mode launches, which carry no values,
//! make the same claims through [`track`], so races are reported in every mode.
//!
//! Values are copied outside any tensor-wide lock: the tracker lets an access copy only while
//! no overlapping access copies (unless both are loads), so instances on different host
//! threads write disjoint parts of an output at the same time.

use super::rect::rects_of;
use super::shared::{current_instance, LaunchShared};
use super::storage::{no_data, HbmStorage};
use super::track::{Access, Conflict, Kind};
use super::view::HbmView;
use crate::access::Ap;
use crate::dtype::DType;
use crate::error::{ErrorKind, NkiError, Result, SourceLoc};

/// Writes row-major `vals` (slots of the tensor dtype, stored as they are) into `dst` as
/// writer `writer` (the API `op` the user called, `nl.store` or `nisa.dma_copy`, at `loc`). An
/// element an unordered writer or reader of this launch touches is an output-dependency error
/// naming both (each by its API) and the element.
pub(crate) fn write(
    dst: &HbmView,
    vals: Vec<f32>,
    writer: u32,
    shared: &LaunchShared,
    (op, loc): (&'static str, SourceLoc),
) -> Result<()> {
    let r = write_slice(dst, &vals, true, writer, shared, (op, loc));
    crate::memory::give_buf(vals);
    r
}

/// [`write`] from a borrowed slice; `exact` says the values are already representable in the
/// tensor's dtype (no rounding needed).
pub(crate) fn write_slice(
    dst: &HbmView,
    vals: &[f32],
    exact: bool,
    writer: u32,
    shared: &LaunchShared,
    (op, loc): (&'static str, SourceLoc),
) -> Result<()> {
    let st = &dst.st;
    dst.in_bounds(op)?;
    if !st.has_data() {
        return Err(no_data(st, op));
    }
    let dtype = st.dtype;
    let copying = claim(dst, writer, Kind::Store, op, loc, shared, true)?;
    let g = st.read();
    let values = g.values.as_ref().expect("checked above");
    let s = dst.ap.inner_stride();
    let mut pos = 0;
    dst.ap.for_each_row(|off, n| {
        let src = &vals[pos..pos + n];
        pos += n;
        // Values the dtype holds exactly are streamed into memory (see `Values::stream_run`).
        // SAFETY: the claim above is ours until `copying` drops: no other access of these elements
        // copies values meanwhile, and the launch made the values unique (`claim`).
        unsafe {
            if s == 1 && (exact || dtype == DType::F32) {
                values.stream_run(off, src);
            } else if s == 1 {
                crate::exec::copy_round(dtype, exact, values.run_mut(off, n), src);
            } else if exact {
                values.write_run(off, s, src, |_, v| v);
            } else {
                values.write_run(off, s, src, |_, v| dtype.slot(v));
            }
        }
    });
    drop((g, copying));
    Ok(())
}

/// The tracking half of [`write`] without values (estimate mode): claims the elements of
/// `dst` for `writer` and reports a conflicting earlier access exactly as a store would.
/// Works on shape-only tensors.
pub(crate) fn track(
    dst: &HbmView,
    writer: u32,
    shared: &LaunchShared,
    (op, loc): (&'static str, SourceLoc),
) -> Result<()> {
    claim(dst, writer, Kind::Store, op, loc, shared, false).map(drop)
}

/// Adds row-major `vals` into the elements of `dst` (in fp32, rounded to the tensor's dtype)
/// as the atomic writer `writer` of `nl.atomic_rmw` at `loc`; with `vals` `None` (estimate
/// mode) only claims them. Overlapping atomic updates never run at once, so no add is lost.
pub(crate) fn atomic(
    dst: &HbmView,
    vals: Option<&[f32]>,
    writer: u32,
    shared: &LaunchShared,
    loc: SourceLoc,
) -> Result<()> {
    const API: &str = "nl.atomic_rmw";
    let st = &dst.st;
    let Some(vals) = vals else {
        return claim(dst, writer, Kind::Atomic, API, loc, shared, false).map(drop);
    };
    if !st.has_data() {
        return Err(no_data(st, API));
    }
    let dtype = st.dtype;
    let copying = claim(dst, writer, Kind::Atomic, API, loc, shared, true)?;
    let g = st.read();
    let values = g.values.as_ref().expect("checked above");
    let s = dst.ap.inner_stride();
    let mut pos = 0;
    dst.ap.for_each_row(|off, n| {
        // SAFETY: as in `write_slice`; overlapping atomic updates wait for each other.
        unsafe {
            values.write_run(off, s, &vals[pos..pos + n], |old, v| {
                dtype.slot(dtype.value(old) + v)
            })
        };
        pos += n;
    });
    drop((g, copying));
    Ok(())
}

/// Notes a load of `src`, an output of the running launch, by operation `op` of the running
/// instance (reader tag `reader`, at `loc`): the load claims the elements it reads, so a
/// read-write race with an unordered writer (in either order) is an output-dependency error
/// naming both, and a read of an element nothing in this launch wrote yet (by this instance
/// or one before it in launch order) is an [`ErrorKind::UninitializedRead`] error.
/// `Op::track_load` calls it for the loads that need it (loads of kernel inputs cost nothing).
pub(crate) fn track_load(
    src: &HbmView,
    reader: u32,
    shared: &LaunchShared,
    op: &'static str,
    loc: SourceLoc,
) {
    if let Err(e) = claim(src, reader, Kind::Load, op, loc, shared, false) {
        crate::abort::raise(e, loc);
    }
}

/// The output checks of a launch, here beside the write tracking they read (storage.rs
/// imports neither the launch state nor the write tracking).
impl HbmStorage {
    /// Marks the tensor, an output of the running launch, as written in part on purpose
    /// (`Tensor::allow_partial_write`, `HbmOut::allow_partial_write`): the launch does not
    /// check that every element was written. Called outside a kernel: an
    /// [`ErrorKind::OutsideKernel`] error at `loc`.
    pub(crate) fn allow_partial_write(&self, loc: crate::error::SourceLoc) {
        match current_instance() {
            Some((launch, _)) => self
                .partial_ok_in
                .store(launch, std::sync::atomic::Ordering::Relaxed),
            None => crate::abort::raise(
                NkiError::new(
                    ErrorKind::OutsideKernel,
                    "allow_partial_write",
                    format!(
                        "{} is marked as written in part outside a kernel: mark an output \
                         inside the kernel that writes it",
                        self.name
                    ),
                ),
                loc,
            ),
        }
    }

    /// The error of launch `launch` (whose first writer id is `base`) that left output `self`
    /// unwritten, or written only in part when `whole` (and the kernel did not mark it as
    /// written in part on purpose): the first unwritten element named.
    pub(crate) fn check_output(&self, base: u32, launch: u64, whole: bool) -> Result<()> {
        super::storage::check_written(self, base)?;
        if whole
            && self
                .partial_ok_in
                .load(std::sync::atomic::Ordering::Relaxed)
                != launch
        {
            check_fully_written(self, launch)?;
        }
        Ok(())
    }
}

/// The error of a launch that left part of output `st` unwritten, when the launch (id
/// `launch`) treats its outputs as uninitialised device memory
/// ([`Launch::outputs_uninitialised`](crate::spmd::Launch::outputs_uninitialised)): names the
/// first element no store, DMA or atomic update of the launch covered.
pub(crate) fn check_fully_written(st: &HbmStorage, launch: u64) -> Result<()> {
    let dims = st.shape.dims();
    let cols = dims.last().copied().unwrap_or(1) as u64;
    let rows = st.shape.numel() as u64 / cols.max(1);
    let Some(e) = st.tracker().first_unwritten_element(launch, rows, cols) else {
        return Ok(());
    };
    Err(NkiError::new(
        ErrorKind::OutputNotWritten,
        "launch",
        format!(
            "output tensor {} {} is written only in part: element {:?} is never written by the \
             kernel, and the output starts uninitialised (a framework's output allocation holds \
             garbage there on the device)",
            st.name,
            st.shape,
            Ap::unravel(e as usize, &st.shape)
        ),
    ))
}

/// The first tensor element (flat) a store's view `ap` writes twice, if any: two elements of
/// one DMA landing on one address (a stride-0 or overlapping access pattern), whose final
/// value depends on the order the DMA queues run in on the device.
fn repeated_element(ap: &Ap) -> Option<usize> {
    let nd = ap.shape.ndim();
    let dims = ap.shape.dims();
    // Sufficient for no repeat: with the dimensions ordered by stride, each stride steps over
    // everything the smaller ones reach (row-major views, slices, permutations, `.ap` steps).
    // (stride, size) of the dimensions of more than one element, on the stack: this runs on
    // every store.
    let mut by_stride = [(0u64, 0u64); crate::access::MAX_DIMS];
    let mut used = 0;
    for d in (0..nd).filter(|&d| dims[d] > 1) {
        by_stride[used] = (ap.strides[d].unsigned_abs() as u64, dims[d] as u64);
        used += 1;
    }
    let by_stride = &mut by_stride[..used];
    by_stride.sort_unstable();
    let mut reach = 0u64;
    if by_stride.iter().all(|&(step, n)| {
        let steps_over = step > reach;
        reach += step * (n - 1);
        steps_over
    }) {
        return None;
    }
    let inner = ap.inner_stride();
    let mut offsets = Vec::with_capacity(ap.shape.numel());
    ap.for_each_row(|off, n| {
        offsets.extend((0..n as isize).map(|k| (off as isize + k * inner) as usize));
    });
    offsets.sort_unstable();
    offsets.windows(2).find(|w| w[0] == w[1]).map(|w| w[0])
}

/// Claims the elements of `view` for one access of the running instance (writer id `writer`,
/// operation `op` at `loc`), waiting while an overlapping access copies values. Conflicts
/// with earlier accesses are reported to the launch (each belongs to the later access in
/// launch order, see `track`); the access's own conflict, or for a load its first unwritten
/// element, is returned as the error. With `copies`, the access may copy its values until the
/// returned [`Copying`] drops.
fn claim<'v>(
    view: &'v HbmView,
    writer: u32,
    kind: Kind,
    op: &'static str,
    loc: SourceLoc,
    shared: &LaunchShared,
    copies: bool,
) -> Result<Copying<'v>> {
    let st = &view.st;
    if kind == Kind::Store {
        if let Some(e) = repeated_element(&view.ap) {
            return Err(NkiError::new(
                ErrorKind::OutputDependency,
                op,
                format!(
                    "writes element {:?} of {} more than once in one access ({}): which value \
                     lands depends on the order of the DMA queues on the device",
                    Ap::unravel(e, &st.shape),
                    st.name,
                    view.describe()
                ),
            ));
        }
    }
    if crate::shadow::active() {
        // A branch the launch does not take: checked, but it accesses nothing.
        return Ok(Copying { st, token: None });
    }
    if kind != Kind::Load {
        super::observe::notify(st.id, &view.ap, true, op, loc);
    }
    let instance = current_instance().map_or(0, |k| k.1);
    let access = Access {
        meetings: shared.writers.meetings(writer),
        ..Access::next(writer, instance, kind, op, view.ap, loc)
    };
    let cols = st.shape.dims().last().copied().unwrap_or(1) as u64;
    let rects = rects_of(&view.ap, cols as usize);
    let found = {
        let mut t = st.tracker_when_free(&rects, kind != Kind::Load);
        if t.enter(shared.id) {
            // The launch's first access: from now on its stores write the values in place.
            if let Some(v) = st.write().values.as_mut() {
                v.make_unique();
            }
        }
        t.begin(access, rects, cols, &shared.writers, copies)
    };
    if kind != Kind::Load {
        st.last_writer
            .fetch_max(writer, std::sync::atomic::Ordering::SeqCst);
    }
    let mut own = None;
    for c in &found.conflicts {
        let e = race_error(c, st, &shared.writers);
        if c.second.instance == access.instance && c.second.seq == access.seq {
            own = Some(e.clone());
        }
        shared.cancelled.report(c.key(), e);
    }
    let fail = own.or_else(|| {
        found.unwritten.map(|e| {
            NkiError::new(
                ErrorKind::UninitializedRead,
                op,
                format!(
                    "reads element {:?} of output {} ({}) before anything in this launch wrote it; \
                     kernel outputs start uninitialised",
                    Ap::unravel(e as usize, &st.shape),
                    st.name,
                    view.describe()
                ),
            )
        })
    });
    let copying = Copying {
        st,
        token: found.running,
    };
    match fail {
        Some(e) => Err(e),
        None => Ok(copying),
    }
}

/// A value copy in progress (of a claim made with `copies`, or of a load, see [`reading`]):
/// ends it when dropped, also when the copy unwinds, waking the accesses waiting for it.
struct Copying<'a> {
    st: &'a HbmStorage,
    token: Option<u64>,
}

impl Drop for Copying<'_> {
    fn drop(&mut self) {
        if let Some(token) = self.token {
            let mut t = self.st.tracker();
            t.end(token);
            if t.waiting > 0 {
                self.st.turn.notify_all();
            }
        }
    }
}

impl HbmView {
    /// Copies the view's values out in row-major order.
    pub(crate) fn gather(&self, op: &'static str) -> Result<Vec<f32>> {
        let mut out = crate::memory::take_buf(self.ap.shape.numel());
        self.gather_into(op, &mut out)?;
        Ok(out)
    }

    /// Appends the view's values (row-major) to `out`.
    /// Waits while a store or atomic update of overlapping elements copies values (see
    /// `reading`).
    pub(crate) fn gather_into(&self, op: &'static str, out: &mut Vec<f32>) -> Result<()> {
        self.in_bounds(op)?;
        reading(self, || {
            let g = self.st.read();
            let vals = g.values.as_ref().ok_or_else(|| no_data(&self.st, op))?;
            out.reserve(self.ap.shape.numel());
            let s = self.ap.inner_stride();
            // SAFETY: `reading` keeps every write of these elements waiting meanwhile.
            self.ap
                .for_each_row(|off, n| unsafe { vals.read_run(off, s, n, out) });
            Ok(())
        })
    }
}

/// Runs `f` while the elements of `view` may be read: waits while an overlapping store or
/// atomic update copies values (a racing write of a failing launch), and keeps overlapping
/// writes waiting until `f` returns.
pub(crate) fn reading<R>(view: &HbmView, f: impl FnOnce() -> R) -> R {
    let st = &view.st;
    let cols = st.shape.dims().last().copied().unwrap_or(1);
    let rects = rects_of(&view.ap, cols);
    let token = st.tracker_when_free(&rects, false).run_load(rects);
    let _copying = Copying {
        st,
        token: Some(token),
    };
    f()
}

/// The output-dependency error of conflict `c` on tensor `st`, as the later access in launch
/// order meets it.
fn race_error(c: &Conflict, st: &HbmStorage, writers: &super::writers::Writers) -> NkiError {
    let idx = Ap::unravel(c.element as usize, &st.shape);
    let (a, b) = (
        writers.describe(c.first.writer),
        writers.describe(c.second.writer),
    );
    let (access, rule) = match (c.first.kind, c.second.kind) {
        (Kind::Load, _) => (format!("is read by {a} and written by {b}"), "read"),
        (_, Kind::Load) => (format!("is written by {a} and read by {b}"), "read"),
        _ => (format!("is written by {a} and again by {b}"), "write"),
    };
    let op = c.second.op;
    NkiError::new(
        ErrorKind::OutputDependency,
        op,
        format!(
            "unexpected output dependencies: element {idx:?} of {} {access} (this {op} covers \
             {}{} (view of {})); each program instance and each affine_range iteration must \
             {rule} locations no other one writes, or use sequential_range",
            st.name, st.name, c.second.ap.shape, st.shape
        ),
    )
    .with_loc(c.second.loc)
    .with_program_id(&writers.program_id(c.second.writer))
}

#[cfg(test)]
mod tests {
    use crate::prelude::*;

    #[test]
    fn interleaved_column_stores_are_not_races_but_overlaps_are() {
        let a = Hbm::<f32>::from_vec(&[2, 8], (0..16).map(|i| i as f32).collect()).unwrap();
        let mut c = Hbm::<f32>::zeros([2, 8]);
        // Two instances store the even and the odd columns (strided views): no conflict.
        for _ in 0..2 {
            let out = c.as_output();
            Launch::new(2)
                .run(|| {
                    let p = nl::program_id(0);
                    let cols = stepped(p..8, 2);
                    let t = nl::load(a.slice((.., cols)));
                    nl::store(out.slice((.., cols)), &t);
                })
                .unwrap();
        }
        assert_eq!(c.to_array().unwrap(), a.to_array().unwrap());
        // Both storing the same contiguous row is a race on the first element.
        let out = c.as_output();
        let e = Launch::new(2)
            .run(|| {
                let t = nl::load(a.slice((0..1, ..)));
                nl::store(out.slice((0..1, ..)), &t);
            })
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::OutputDependency);
        assert!(e.message().contains("element [0, 0]"), "{e}");
    }

    #[test]
    fn block_tags_detect_exactly_the_overlapping_stores() {
        // Views (rows, first column, columns, column step) of a [3, 37] tensor: 37 is not a
        // multiple of the tag block, so whole blocks, partial blocks and the short last block
        // all occur, and the tensor is reused across launches (stale and mixed tags), in
        // execute and in estimate mode.
        let (rows, cols) = (3usize, 37usize);
        let a = Hbm::<f32>::full([rows, cols], 1.0);
        let mut c = Hbm::<f32>::zeros([rows, cols]);
        let mut shapes = Hbm::<f32>::shape_only([rows, cols]);
        let mut s = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: usize| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s % n as u64) as usize
        };
        // Block-aligned cases first (only whole-block and mixed-block tags meet), then random.
        let mut cases = vec![
            vec![(0..1, 0, 37, 1), (0..1, 16, 16, 1)],
            vec![(0..3, 0, 32, 1), (1..2, 16, 16, 1)],
            vec![(0..1, 0, 16, 2), (0..1, 16, 16, 1)],
            vec![(0..1, 1, 16, 2), (0..1, 0, 16, 1)],
            vec![(0..2, 0, 16, 1), (2..3, 0, 37, 1)],
        ];
        for _ in 0..300 {
            let mut views = Vec::new();
            for _ in 0..2 {
                let r0 = next(rows);
                let r1 = r0 + 1 + next(rows - r0);
                let step = 1 + next(3) * next(2);
                let c0 = next(cols);
                let n = 1 + next((cols - c0).div_ceil(step));
                views.push((r0..r1, c0, n, step));
            }
            cases.push(views);
        }
        let mut conflicts = 0;
        for views in cases {
            let cells = |v: &(std::ops::Range<usize>, usize, usize, usize)| {
                let (rr, c0, n, st) = v.clone();
                rr.flat_map(move |r| (0..n).map(move |j| (r, c0 + j * st)))
                    .collect::<std::collections::HashSet<_>>()
            };
            let overlap = !cells(&views[0]).is_disjoint(&cells(&views[1]));
            // Estimate mode keeps the same tags without values, here on a shape-only tensor.
            for (mode, c) in [(Mode::Execute, &mut c), (Mode::Estimate, &mut shapes)] {
                let out = c.as_output();
                let r = Launch::new(2).mode(mode).run(|| {
                    let (rr, c0, n, st) = views[nl::program_id(0)].clone();
                    let cs = stepped(c0..c0 + (n - 1) * st + 1, st);
                    let t = nl::load(a.slice((rr.clone(), cs)));
                    nl::store(out.slice((rr.clone(), cs)), &t);
                    // Storing the same view again from the same instance is no conflict.
                    nl::store(out.slice((rr, cs)), &t);
                });
                assert_eq!(r.is_err(), overlap, "{mode:?}, views {views:?}: {r:?}");
            }
            conflicts += overlap as usize;
        }
        assert!(conflicts > 20 && conflicts < 280, "{conflicts} conflicts");
    }

    #[test]
    fn stores_round_to_the_tensor_dtype() {
        let vals = [1.0 + 2f32.powi(-8), 1.0 + 3.0 * 2f32.powi(-8), -3.3, 1e-40];
        let a = Hbm::<f32>::from_vec(&[1, 4], vals.to_vec()).unwrap();
        let mut c = Hbm::<bf16>::zeros([1, 4]);
        let out = c.as_output();
        Launch::new(1)
            .run(|| nl::store(&out, &nl::load(&a)))
            .unwrap();
        let want: Vec<f32> = vals.iter().map(|&v| bf16::from_f32(v).to_f32()).collect();
        assert_eq!(c.to_f32_vec().unwrap(), want);
    }
}
