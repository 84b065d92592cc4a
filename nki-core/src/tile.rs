//! On-chip tiles in SBUF and PSUM.
//!
//! [`Tile`] is the run-time-shaped tile every op works on; [`TileRef`] is a view (slice) of one.
//! [`Sbuf`](crate::typed::Sbuf) and [`Psum`](crate::typed::Psum) are tiles whose 2-D shape is
//! part of the type, so the partition limit, the PSUM bank limit, element-wise shape agreement
//! and the matmul operand limits are checked by rustc (see [`crate::typed`]).

use crate::access::{Ap, IntoIndex, Shape};
use crate::context::{self, raise};
use crate::dtype::DType;
use crate::error::{ErrorKind, NkiError, Result, SourceLoc};
use crate::record::{BufId, MemKind, Region};
use std::cell::{Cell, Ref, RefCell, RefMut};
use std::sync::atomic::{AtomicU64, Ordering};

static NEXT_TILE_ID: AtomicU64 = AtomicU64::new(1);

/// An on-chip tile: dimension 0 is the partition dimension (at most 128), the rest are free
/// dimensions. Values are held as f32 already rounded to the tile's dtype.
pub struct Tile {
    pub(crate) id: u64,
    pub(crate) mem: MemKind,
    pub(crate) dtype: DType,
    pub(crate) shape: Shape,
    pub(crate) data: RefCell<Vec<f32>>,
    /// True while `data` is an empty pooled buffer standing for an all-NaN (unwritten) tile:
    /// filled on first access, skipped when an op overwrites the whole tile.
    fill_pending: Cell<bool>,
    pub(crate) init: Cell<bool>,
    /// True while the tile is listed in the instance's unwritten tiles (estimate mode, tiles
    /// allocated without a fill, until the first write).
    tracked: Cell<bool>,
    pub(crate) loc: SourceLoc,
}

impl Tile {
    /// Allocates a tile in `mem` inside the running kernel instance: checks the partition limit,
    /// PSUM bank limit and capacity, then registers it with the capacity tracker. `fill` marks
    /// it as written (zeros/full) or not (ndarray/empty); in estimate mode an unfilled tile is
    /// also listed in the instance's unwritten tiles, which the funnel checks reads against.
    pub(crate) fn alloc(
        op: &'static str,
        mem: MemKind,
        dtype: DType,
        shape: Shape,
        fill: Option<f32>,
        loc: SourceLoc,
    ) -> Tile {
        if let Err(e) = check_tile_shape(op, mem, shape) {
            raise(e, loc);
        }
        let id = NEXT_TILE_ID.fetch_add(1, Ordering::Relaxed);
        let (executes, r) = context::with_ctx(op, loc, |c| {
            let executes = c.mode.executes();
            let r = c.mem.alloc(id, mem, shape, dtype, loc);
            if !executes && fill.is_none() && r.is_ok() {
                let u = context::UnwrittenTile {
                    mem,
                    dtype,
                    shape,
                    loc,
                };
                c.unwritten.insert(id, u);
            }
            (executes, r)
        });
        if let Err(e) = r {
            // Name the op that allocated (the tracker does not know it).
            raise(NkiError::new(e.kind(), op, e.message().to_string()), loc);
        }
        let n = shape.numel();
        let (data, fill_pending) = match (executes, fill) {
            (false, _) => (Vec::new(), false),
            (true, Some(v)) => {
                let mut d = take_buf(n);
                d.resize(n, dtype.round(v));
                (d, false)
            }
            (true, None) => (take_buf(n), true),
        };
        Tile {
            id,
            mem,
            dtype,
            shape,
            data: RefCell::new(data),
            fill_pending: Cell::new(fill_pending),
            init: Cell::new(fill.is_some()),
            tracked: Cell::new(!executes && fill.is_none()),
            loc,
        }
    }

    /// The shape (partition dim first).
    pub fn shape(&self) -> &[usize] {
        self.shape.dims()
    }

    /// The dtype.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The memory it lives in (SBUF or PSUM).
    pub fn mem(&self) -> MemKind {
        self.mem
    }

    /// Number of partitions.
    pub fn partitions(&self) -> usize {
        self.shape.partitions()
    }

    /// Elements per partition.
    pub fn free_size(&self) -> usize {
        self.shape.free()
    }

    /// A view of the whole tile.
    pub fn view(&self) -> TileRef<'_> {
        TileRef {
            tile: self,
            ap: Ap::contiguous(self.shape),
        }
    }

    /// A view of part of the tile, e.g. `t.slice((0..64, 128..256))`. An integer on dimension 0
    /// keeps a size-1 partition dimension; integers on free dimensions drop them.
    #[track_caller]
    pub fn slice(&self, index: impl IntoIndex) -> TileRef<'_> {
        self.view().slice(index)
    }

    /// The tile's values as a row-major f32 vector (a debugging aid like `nl.device_print`).
    /// Empty in estimate mode.
    pub fn values(&self) -> Vec<f32> {
        self.data().clone()
    }

    /// The values (row-major, f32).
    pub(crate) fn data(&self) -> Ref<'_, Vec<f32>> {
        self.materialize();
        self.data.borrow()
    }

    /// The values, mutably.
    pub(crate) fn data_mut(&self) -> RefMut<'_, Vec<f32>> {
        self.materialize();
        self.data.borrow_mut()
    }

    /// Fills a pending (never written) tile with NaN, the garbage an unwritten tile reads as.
    fn materialize(&self) {
        if self.fill_pending.replace(false) {
            self.data.borrow_mut().resize(self.shape.numel(), f32::NAN);
        }
    }

    /// Description for messages: `sbuf tile float32[128, 512]`.
    pub(crate) fn describe(&self) -> String {
        describe_tile(self.mem, self.dtype, self.shape)
    }

    /// Marks the tile written (coarsely: any write marks all of it), taking it off the
    /// instance's unwritten tiles when it was listed there.
    #[inline]
    fn set_written(&self) {
        if !self.init.replace(true) && self.tracked.replace(false) {
            let id = self.id;
            context::try_with_ctx(|c| c.unwritten.remove(&id));
        }
    }
}

/// Description of a tile for messages: `sbuf tile float32[128, 512]`.
pub(crate) fn describe_tile(mem: MemKind, dtype: DType, shape: Shape) -> String {
    format!("{} tile {}{}", mem.name(), dtype, shape)
}

impl Drop for Tile {
    fn drop(&mut self) {
        let (id, tracked) = (self.id, self.tracked.get());
        context::try_with_ctx(|c| {
            c.mem.free(id);
            if tracked {
                c.unwritten.remove(&id);
            }
        });
        give_buf(std::mem::take(self.data.get_mut()));
    }
}

impl std::fmt::Debug for Tile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

/// Checks the partition-count limit (and PSUM bank size) of a new tile's shape.
pub(crate) fn check_tile_shape(op: &'static str, mem: MemKind, shape: Shape) -> Result<()> {
    if shape.ndim() < 2 {
        return Err(NkiError::new(
            ErrorKind::InvalidArgument,
            op,
            format!(
                "insufficient rank: on-chip tiles need at least 2 dimensions (partition, free), got {shape}"
            ),
        ));
    }
    if shape.partitions() > 128 {
        return Err(NkiError::new(
            ErrorKind::PartitionLimit,
            op,
            format!(
                "number of partitions {} of {} tile {shape} exceeds architecture limitation of 128 (tile_size.pmax)",
                shape.partitions(),
                mem.name()
            ),
        ));
    }
    if shape.numel() == 0 {
        return Err(NkiError::new(
            ErrorKind::InvalidArgument,
            op,
            format!("tile shape {shape} has no elements"),
        ));
    }
    Ok(())
}

/// A view of (part of) a tile: what every op reads from or writes into.
#[derive(Clone, Copy)]
pub struct TileRef<'a> {
    pub(crate) tile: &'a Tile,
    pub(crate) ap: Ap,
}

impl<'a> TileRef<'a> {
    /// Slices the view further (integer on dim 0 keeps it with size 1).
    #[track_caller]
    pub fn slice(&self, index: impl IntoIndex) -> TileRef<'a> {
        let loc = SourceLoc::caller();
        match self
            .ap
            .slice(&index.into_index(), true, &self.tile.describe())
        {
            Ok(ap) => TileRef {
                tile: self.tile,
                ap,
            },
            Err(e) => raise(e, loc),
        }
    }

    /// The view's shape.
    pub fn shape(&self) -> &[usize] {
        self.ap.shape.dims()
    }

    /// The tile's dtype.
    pub fn dtype(&self) -> DType {
        self.tile.dtype
    }

    /// The memory of the tile.
    pub fn mem(&self) -> MemKind {
        self.tile.mem
    }

    /// The tile this view belongs to.
    pub fn tile(&self) -> &'a Tile {
        self.tile
    }

    /// Partitions of the view.
    pub fn partitions(&self) -> usize {
        self.ap.shape.partitions()
    }

    /// Elements per partition of the view.
    pub fn free_size(&self) -> usize {
        self.ap.shape.free()
    }

    /// First partition of the view within its tile.
    pub fn start_partition(&self) -> usize {
        let row = self.tile.shape.free().max(1);
        self.ap.offset / row
    }

    /// The view's region for instruction records.
    pub(crate) fn region(&self) -> Region {
        let row = self.tile.shape.free().max(1);
        let p0 = self.ap.offset / row;
        let (lo, hi) = self.ap.span();
        let p1 = p0 + self.partitions();
        let sz = self.tile.dtype.size() as u64;
        // Free-byte range within one partition.
        let (flo, fhi) = if self.partitions() == 1 || p1 - p0 == 1 {
            ((lo % row) as u64, ((hi - 1) % row + 1) as u64)
        } else {
            let base = (self.ap.offset % row) as isize;
            let mut lo_f = base;
            let mut hi_f = base;
            for d in 1..self.ap.shape.ndim() {
                let ext = (self.ap.shape.dims()[d] as isize - 1) * self.ap.strides[d];
                if ext < 0 {
                    lo_f += ext
                } else {
                    hi_f += ext
                }
            }
            (lo_f as u64, hi_f as u64 + 1)
        };
        Region {
            buf: BufId::Tile(self.tile.id),
            p0: p0 as u32,
            p1: p1 as u32,
            lo: flo * sz,
            hi: fhi * sz,
        }
    }

    /// True when the view is the whole tile.
    pub(crate) fn is_whole(&self) -> bool {
        self.ap.offset == 0 && self.ap.shape == self.tile.shape
    }

    /// The flat index range of the view when it is one contiguous block of the tile.
    fn contiguous_range(&self) -> Option<std::ops::Range<usize>> {
        self.ap
            .is_contiguous()
            .then(|| self.ap.offset..self.ap.offset + self.ap.shape.numel())
    }

    /// Copies the view's values out (row-major); raises on a read of an unwritten tile.
    pub(crate) fn gather(&self, op: &'static str, loc: SourceLoc) -> Vec<f32> {
        self.with_values(op, loc, |v| {
            let mut out = take_buf(v.len());
            out.extend_from_slice(v);
            out
        })
    }

    /// Calls `f` with the view's values (row-major) without copying them when the view is
    /// contiguous; raises on a read of an unwritten tile.
    pub(crate) fn with_values<R>(
        &self,
        op: &'static str,
        loc: SourceLoc,
        f: impl FnOnce(&[f32]) -> R,
    ) -> R {
        self.check_init(op, loc);
        let data = self.tile.data();
        if let Some(r) = self.contiguous_range() {
            return f(&data[r]);
        }
        let mut tmp = take_buf(self.ap.shape.numel());
        tmp.resize(self.ap.shape.numel(), 0.0);
        self.ap.gather(&data, &mut tmp);
        drop(data);
        let r = f(&tmp);
        give_buf(tmp);
        r
    }

    /// Writes the view from `fill`, which must push exactly the view's element count of
    /// row-major values onto the (empty) vector it is given; the values are then rounded to
    /// the tile's dtype unless `exact` (already representable in it). An unwritten tile
    /// overwritten whole is filled in place, without a copy.
    pub(crate) fn write_with(&self, exact: bool, fill: impl FnOnce(&mut Vec<f32>)) {
        let n = self.ap.shape.numel();
        let dtype = self.tile.dtype;
        if self.is_whole() && !self.tile.init.get() {
            // Nothing can be reading this tile (it is unwritten), so take its buffer out, fill
            // it, and put it back.
            self.tile.fill_pending.set(false);
            let mut buf = std::mem::take(&mut *self.tile.data.borrow_mut());
            buf.clear();
            fill(&mut buf);
            assert_eq!(buf.len(), n, "an op produced the wrong number of values");
            if !exact {
                dtype.round_slice(&mut buf);
            }
            *self.tile.data.borrow_mut() = buf;
        } else {
            let mut tmp = take_buf(n);
            fill(&mut tmp);
            assert_eq!(tmp.len(), n, "an op produced the wrong number of values");
            if !exact {
                dtype.round_slice(&mut tmp);
            }
            let mut data = self.tile.data_mut();
            match self.contiguous_range() {
                Some(r) => data[r].copy_from_slice(&tmp),
                None => self.ap.scatter(&mut data, &tmp),
            }
            drop(data);
            give_buf(tmp);
        }
        self.tile.set_written();
    }

    /// Raises [`ErrorKind::UninitializedRead`] when nothing has written the tile yet.
    pub(crate) fn check_init(&self, op: &'static str, loc: SourceLoc) {
        if !self.tile.init.get() {
            raise(
                NkiError::new(
                    ErrorKind::UninitializedRead,
                    op,
                    format!(
                        "reads {} (allocated at {}) before anything wrote it",
                        self.tile.describe(),
                        self.tile.loc
                    ),
                ),
                loc,
            );
        }
    }

    /// Writes row-major `vals` into the view, rounding to the tile's dtype.
    pub(crate) fn scatter(&self, mut vals: Vec<f32>) {
        self.tile.dtype.round_slice(&mut vals);
        if self.is_whole() {
            self.tile.fill_pending.set(false);
            let old = std::mem::replace(&mut *self.tile.data.borrow_mut(), vals);
            give_buf(old);
        } else {
            let mut data = self.tile.data_mut();
            match self.contiguous_range() {
                Some(r) => data[r].copy_from_slice(&vals),
                None => self.ap.scatter(&mut data, &vals),
            }
            drop(data);
            give_buf(vals);
        }
        self.tile.set_written();
    }

    /// Marks the tile written without touching values (estimate mode).
    pub(crate) fn mark_written(&self) {
        self.tile.set_written();
    }

    /// Description for messages.
    pub(crate) fn describe(&self) -> String {
        if self.ap.shape == self.tile.shape {
            self.tile.describe()
        } else {
            format!("{} (view {})", self.tile.describe(), self.ap.shape)
        }
    }
}

impl<'a> From<&'a Tile> for TileRef<'a> {
    fn from(t: &'a Tile) -> Self {
        t.view()
    }
}

impl<'a> From<&'a TileRef<'a>> for TileRef<'a> {
    fn from(t: &'a TileRef<'a>) -> Self {
        *t
    }
}

impl std::fmt::Debug for TileRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

pub(crate) use crate::memory::{give_buf, take_buf};

#[cfg(test)]
mod tests {
    use crate::prelude::*;

    /// Row-major values 0, 1, 2, ... scaled by `k`.
    fn ramp(n: usize, k: f32) -> Vec<f32> {
        (0..n).map(|i| i as f32 * k).collect()
    }

    #[test]
    fn partial_and_strided_views_read_and_write_like_loops() {
        let a = Hbm::<f32>::from_vec(&[4, 6], ramp(24, 1.0)).unwrap();
        let mut c = Hbm::<f32>::zeros([4, 3]);
        let out = c.as_output();
        Launch::new(1)
            .run(|| {
                // Every other column of a (a strided HBM view) into a fresh tile.
                let t = nl::load(a.slice((.., stepped(0..6, 2))));
                // Write columns 2..5 of a new tile from it (a partial view), leave the rest
                // unwritten, then copy only the written part out.
                let u = nl::ndarray(&[4, 6], DType::F32, nl::SBUF);
                nl::assign(u.slice((.., 2..5)), &t);
                let v = nl::copy(u.slice((.., 2..5)), None);
                assert_eq!(v.values(), t.values());
                // The unwritten columns read as NaN (garbage), the written ones as stored.
                let all = u.values();
                for (i, x) in all.iter().enumerate() {
                    assert_eq!(x.is_nan(), !(2..5).contains(&(i % 6)), "element {i}");
                }
                nl::store(&out, &nl::add(&t, 0.5));
            })
            .unwrap();
        let want: Vec<f32> = (0..4)
            .flat_map(|r| (0..3).map(move |j| (r * 6 + 2 * j) as f32 + 0.5))
            .collect();
        assert_eq!(c.to_f32_vec().unwrap(), want);
    }

    #[test]
    fn strided_stationary_matmul_accumulates_like_loops() {
        let (k, m, n) = (8, 3, 5);
        let lhs = ramp(k * 2 * m, 0.25); // [k, 2m]: the stationary is its odd columns
        let rhs = ramp(k * n, -0.5);
        let a = Hbm::<f32>::from_vec(&[k, 2 * m], lhs.clone()).unwrap();
        let b = Hbm::<f32>::from_vec(&[k, n], rhs.clone()).unwrap();
        let mut c = Hbm::<f32>::zeros([m, n]);
        let out = c.as_output();
        Launch::new(1)
            .run(|| {
                let s = nl::load(&a);
                let mv = nl::load(&b);
                let acc = nl::zeros(&[m, n], DType::F32, nl::PSUM);
                let st = s.slice((.., stepped(1..2 * m, 2)));
                nisa::nc_matmul_acc(&acc, st, &mv);
                nisa::nc_matmul_acc(&acc, st, &mv);
                nl::store(&out, &nl::copy(&acc, None));
            })
            .unwrap();
        let got = c.to_f32_vec().unwrap();
        for i in 0..m {
            for j in 0..n {
                let dot: f32 = (0..k)
                    .map(|t| lhs[t * 2 * m + 2 * i + 1] * rhs[t * n + j])
                    .sum();
                assert!((got[i * n + j] - 2.0 * dot).abs() < 1e-3, "({i}, {j})");
            }
        }
    }

    #[test]
    fn buffers_are_recycled_within_a_thread() {
        let b = super::take_buf(1000);
        let ptr = b.as_ptr();
        super::give_buf(b);
        let again = super::take_buf(900);
        assert_eq!(again.as_ptr(), ptr);
        assert!(again.is_empty() && again.capacity() >= 1000);
    }
}
