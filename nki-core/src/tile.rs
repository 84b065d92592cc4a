//! On-chip tiles in SBUF and PSUM.
//!
//! [`Tile`] is the run-time-shaped tile every op works on; [`TileRef`] is a view (slice) of one.
//! [`Sbuf`](crate::typed::Sbuf) and [`Psum`](crate::typed::Psum) are tiles whose 2-D shape is
//! part of the type, so the partition limit, the PSUM bank limit, element-wise shape agreement
//! and the matmul operand limits are checked by rustc (see [`crate::typed`]).

use crate::abort::raise;
use crate::access::{Ap, IntoIndex, Ix, Shape, MAX_DIMS};
use crate::context;
use crate::dtype::DType;
use crate::error::{ErrorKind, NkiError, Result, SourceLoc};
use crate::memory::TileDesc;
use crate::record::{BufId, MemKind, Region};
use crate::values::Values;
use crate::written::{describe_tile, unwritten_error, Rect, UnwrittenTile};
use std::cell::{Cell, OnceCell, Ref, RefCell, RefMut};
use std::sync::atomic::{AtomicU64, Ordering};

static NEXT_TILE_ID: AtomicU64 = AtomicU64::new(1);

/// A fresh on-chip buffer id, unique in the process (tiles take theirs from the same count; a
/// scalar register names the value it holds by one, see `isa::nki_scalar`).
pub(crate) fn fresh_buffer_id() -> u64 {
    NEXT_TILE_ID.fetch_add(1, Ordering::Relaxed)
}

/// An on-chip tile: dimension 0 is the partition dimension (at most 128), the rest are free
/// dimensions. Values are held in f32 slots already rounded to the tile's dtype (int32/uint32
/// as their bit pattern, see [`DType::holds_bits`]).
pub struct Tile {
    pub(crate) id: u64,
    pub(crate) mem: MemKind,
    pub(crate) dtype: DType,
    pub(crate) shape: Shape,
    /// The row-major strides of `shape` (every view of the whole tile starts from them).
    strides: [isize; MAX_DIMS],
    pub(crate) data: RefCell<Vec<f32>>,
    /// True while `data` is an empty pooled buffer standing for an all-NaN (unwritten) tile:
    /// filled on first access, skipped when an op overwrites the whole tile.
    fill_pending: Cell<bool>,
    /// Set while the values are not copied yet: a load from a kernel input reads them in place
    /// in the tensor's values (`data` is then an empty pooled buffer). Row reads
    /// ([`TileRef::with_rows`]) and contiguous reads use them there; the first write, or a read
    /// that needs the tile's own layout, copies them into `data` first (copy on write).
    in_place: RefCell<Option<InPlace>>,
    pub(crate) init: Cell<bool>,
    /// The elements written so far of a tile written in part (one bit per element, row-major),
    /// and how many they are; `None` while nothing or everything (`init`) is written (boxed:
    /// it is rare, and a small tile moves cheaply, see [`TileCold`]).
    written: RefCell<Option<Box<WrittenBits>>>,
    /// True while the tile is listed in the instance's unwritten tiles (estimate mode, tiles
    /// allocated without a fill, until written whole), whose written rectangles stand for the
    /// per-element state there.
    tracked: Cell<bool>,
    pub(crate) loc: SourceLoc,
    /// The (launch, program instance) the tile belongs to: using it in any other is an error.
    owner: (u64, u64),
    /// The tile's slot in its instance's capacity tracker.
    slot: u32,
    /// Its name and tensor-indirection specs, made on first use: most tiles have neither.
    cold: OnceCell<Box<TileCold>>,
    /// The `let` binding `#[nki_kernel]` saw the tile bound to (`let x = nl::load(..)` is
    /// `x`), the name messages use when `nl::ndarray` gave it none (see `crate::binding`).
    binding: Cell<Option<&'static str>>,
}

// A tile moves cheaply (see `TileCold`): keep it within 256 bytes on 64-bit hosts.
#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<Tile>() <= 256);

/// The rarely set parts of a [`Tile`], kept apart so that a tile stays under 256 bytes: a
/// tile is moved twice on its way from `nl.load` to the kernel's variable, and a move of up
/// to 256 bytes costs about a third of a larger one (callgrind: 29 against 64 instructions).
#[derive(Default)]
struct TileCold {
    /// The name `nl::ndarray` gave it (NKI's `name=`), shown in errors.
    name: Option<Box<str>>,
    /// The tensor indirections whose offsets this tile holds ([`TileRef::indirect_of`]): a
    /// view carries the position of its own here, which keeps [`TileRef`] small.
    ti: RefCell<Vec<TiSpec>>,
}

/// The elements written of a tile written in part: one bit per element (row-major), and how
/// many are set.
type WrittenBits = (Vec<u64>, usize);

/// How a new tile starts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Fill {
    /// Unwritten (`nl.ndarray`, an instruction's output): reading it before it is written is an
    /// error.
    Unwritten,
    /// Unwritten, and the result of the op allocating it, which writes it whole before
    /// anything can read it (a load's tile): in estimate mode it starts written and is not
    /// listed with the unwritten tiles (the op's own write would take it off the list at once).
    ResultOfOp,
}

impl Tile {
    /// Allocates a tile in `mem` inside the running kernel instance: checks the partition limit,
    /// PSUM bank limit and capacity, then registers it with the capacity tracker. `fill` marks
    /// it as written (zeros/full) or not (ndarray/empty); in estimate mode a tile allocated
    /// [`Fill::Unwritten`] is also listed in the instance's unwritten tiles, which the funnel
    /// checks reads against.
    pub(crate) fn alloc(
        op: &'static str,
        mem: MemKind,
        dtype: DType,
        shape: Shape,
        fill: Fill,
        loc: SourceLoc,
    ) -> Tile {
        if !fits_tile(shape) {
            if let Err(e) = check_tile_shape(op, mem, shape) {
                raise(e, loc);
            }
        }
        // A small result out of the context (an error is boxed: it is rare and large).
        let placed = context::with_ctx(op, loc, |c| {
            // Inside a device loop, one body allocation is one buffer in every iteration.
            let id = c
                .loop_tiles
                .tile_id(loc, fresh_buffer_id)
                .unwrap_or_else(fresh_buffer_id);
            let slot = c
                .mem
                .alloc(id, mem, shape, dtype, loc, c.records.len())
                .map_err(Box::new)?;
            let executes = c.mode.executes();
            if !executes && fill == Fill::Unwritten {
                let desc = TileDesc {
                    dtype,
                    shape,
                    loc,
                    name: None,
                };
                let u = UnwrittenTile {
                    mem,
                    desc,
                    written: Default::default(),
                };
                c.unwritten.insert(id, u);
            }
            Ok::<_, Box<NkiError>>((id, executes, slot, (c.shared.id, c.instance)))
        });
        let (id, executes, slot, owner) = match placed {
            Ok(p) => p,
            // Name the op that allocated (the tracker does not know it).
            Err(e) => raise(NkiError::new(e.kind(), op, e.message().to_string()), loc),
        };
        let n = shape.numel();
        let (data, fill_pending) = match (executes, fill) {
            (false, _) => (Vec::new(), false),
            (true, Fill::Unwritten | Fill::ResultOfOp) => (take_buf(n), true),
        };
        // In estimate mode an op's result starts written: nothing reads it before the op's
        // own issue, which writes it whole (and would mark it written there).
        let filled = !executes && fill == Fill::ResultOfOp;
        Tile {
            id,
            mem,
            dtype,
            shape,
            strides: shape.contiguous_strides(),
            data: RefCell::new(data),
            fill_pending: Cell::new(fill_pending),
            in_place: RefCell::new(None),
            init: Cell::new(filled),
            written: RefCell::new(None),
            tracked: Cell::new(!executes && fill == Fill::Unwritten),
            loc,
            owner,
            slot,
            cold: OnceCell::new(),
            binding: Cell::new(None),
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

    /// A view of the whole tile. Inside a kernel, a tile of another program instance or of
    /// an earlier launch (smuggled out of its instance) fails the launch with an
    /// [`ErrorKind::InvalidArgument`] error: a tile belongs to the instance that allocated it.
    #[track_caller]
    #[inline]
    pub fn view(&self) -> TileRef<'_> {
        if let Some(here) = context::current_instance() {
            if here != self.owner {
                self.foreign_use(here.0, SourceLoc::caller());
            }
        }
        TileRef {
            tile: self,
            ap: Ap {
                offset: 0,
                shape: self.shape,
                strides: self.strides,
            },
            cast: None,
            ind: None,
        }
    }

    /// Reports that the instance running here (of launch `launch`), which does not own this
    /// tile, made a view of it at `loc`: the op that takes the view fails the instance,
    /// naming itself (see `context::defer_foreign_use`).
    #[cold]
    fn foreign_use(&self, launch: u64, loc: SourceLoc) {
        let pid = context::try_with_ctx(|c| c.program_id.clone()).unwrap_or_default();
        let whose = if launch == self.owner.0 {
            "another program instance of this launch"
        } else {
            "an earlier launch"
        };
        context::defer_foreign_use(
            format!(
                "{} (allocated at {}) belongs to {whose}; program id {pid:?} cannot use it: a \
                 tile lives in the instance that allocated it",
                self.describe(),
                self.loc
            ),
            loc,
        );
    }

    /// A view of part of the tile, e.g. `t.slice((0..64, 128..256))`. An integer on dimension 0
    /// keeps a size-1 partition dimension; integers on free dimensions drop them.
    #[track_caller]
    pub fn slice(&self, index: impl IntoIndex) -> TileRef<'_> {
        self.view().slice(index)
    }

    /// The tile's values as a row-major f32 vector (a debugging aid like `nl.device_print`;
    /// int32/uint32 values above 2^24 rounded to the nearest f32, see [`Tile::ints`]).
    /// Empty in estimate mode.
    pub fn values(&self) -> Vec<f32> {
        let mut v = self.data().clone();
        self.dtype.to_values(&mut v);
        v
    }

    /// The tile's values as exact integers (row-major; float values truncated toward zero).
    /// Empty in estimate mode.
    pub fn ints(&self) -> Vec<i64> {
        self.data().iter().map(|&s| self.dtype.int(s)).collect()
    }

    /// The slots (row-major, f32; int32/uint32 as bit patterns).
    pub(crate) fn data(&self) -> Ref<'_, Vec<f32>> {
        self.materialize();
        self.data.borrow()
    }

    /// The slots, mutably.
    pub(crate) fn data_mut(&self) -> RefMut<'_, Vec<f32>> {
        self.materialize();
        self.data.borrow_mut()
    }

    /// Gives the tile its own values in `data`: copies values read in place, and fills a
    /// pending (never written) tile with NaN, the garbage an unwritten tile reads as.
    fn materialize(&self) {
        let in_place = self.in_place.borrow_mut().take();
        if let Some(src) = in_place {
            let mut data = self.data.borrow_mut();
            data.clear();
            src.rows(self.shape)
                .iter()
                .for_each(|row| data.extend_from_slice(row));
        }
        if self.fill_pending.replace(false) {
            self.data.borrow_mut().resize(self.shape.numel(), f32::NAN);
        }
    }

    /// A handle on the values the tile reads in place, if it does (held apart from the tile, so
    /// a nested access that copies them into the tile cannot conflict with the reader).
    fn in_place_values(&self) -> Option<InPlace> {
        self.in_place.borrow().clone()
    }

    /// Forgets values read in place (the whole tile is about to be overwritten).
    fn drop_in_place(&self) {
        self.in_place.borrow_mut().take();
    }

    /// Description for messages: `sbuf tile float32[128, 512]`, with its name when it has
    /// one (`sbuf tile 'acc' float32[128, 512]`).
    pub(crate) fn describe(&self) -> String {
        match self.name() {
            None => describe_tile(self.mem, self.dtype, self.shape),
            Some(n) => format!(
                "{} tile '{n}' {}{}",
                self.mem.name(),
                self.dtype,
                self.shape
            ),
        }
    }

    /// The tile's name in messages: the one `nl::ndarray` gave it (NKI's `name=`), else the
    /// `let` binding of the kernel it is bound to, if any.
    pub(crate) fn name(&self) -> Option<&str> {
        match self.cold.get().and_then(|c| c.name.as_deref()) {
            Some(n) => Some(n),
            None => self.binding.get(),
        }
    }

    /// Names the tile after the `let` binding `name` it is bound to, unless it has a name: the
    /// instance's capacity tracker and unwritten-tile list name it too.
    pub(crate) fn bind_name(&self, name: &'static str) {
        if self.name().is_some() {
            return;
        }
        self.binding.set(Some(name));
        self.publish_name(std::borrow::Cow::Borrowed(name));
    }

    /// Hands the tile's name to the running instance's capacity tracker and list of unwritten
    /// tiles (which describe it in capacity errors, spills and uninitialised reads).
    pub(crate) fn publish_name(&self, name: std::borrow::Cow<'static, str>) {
        let (id, slot, tracked) = (self.id, self.slot, self.tracked.get());
        context::try_with_ctx(|c| {
            if tracked {
                if let Some(u) = c.unwritten.get_mut(&id) {
                    u.desc.name = Some(name.clone());
                }
            }
            c.mem.set_name(slot, id, &name);
        });
    }

    /// Names the tile `name` (or takes its name away).
    pub(crate) fn set_name(&mut self, name: Option<Box<str>>) {
        match self.cold.get_mut() {
            Some(cold) => cold.name = name,
            None if name.is_some() => {
                let cold = TileCold {
                    name,
                    ..Default::default()
                };
                // Cannot fail: the cell is empty and borrowed mutably here.
                let _ = self.cold.set(Box::new(cold));
            }
            None => {}
        }
    }

    /// The tensor indirections whose offsets this tile holds (see [`TileCold`]).
    fn ti(&self) -> &RefCell<Vec<TiSpec>> {
        &self.cold.get_or_init(Default::default).ti
    }

    /// The slot of the tile in its instance's capacity tracker.
    pub(crate) fn slot(&self) -> u32 {
        self.slot
    }

    /// Marks the elements of view `ap` (whose instruction region is `region`) written: per
    /// element (a bitmap kept only while the tile is written in part), the tile becoming
    /// written (`init`) once every element is. In estimate mode a tracked tile notes the
    /// region's rectangle in the instance's unwritten tiles instead (no per-element work),
    /// leaving them once written whole.
    ///
    /// Inside a branch the launch does not take ([`crate::shadow`]) only the instance's
    /// unwritten tiles note the write (they are put back after the branch); the tile itself
    /// stays as it was.
    #[inline]
    fn set_written(&self, ap: &Ap, region: impl FnOnce() -> Region) {
        let untaken = crate::shadow::active();
        if self.tracked.get() {
            let (id, whole) = (self.id, self.whole_rect());
            let r = if ap.offset == 0 && ap.shape == self.shape {
                whole
            } else {
                Rect::of_region(&region(), self.dtype.size() as u64)
            };
            let done = context::try_with_ctx(|c| match c.unwritten.get_mut(&id) {
                Some(_) if r == whole => {
                    c.unwritten.remove(&id);
                    true
                }
                Some(u) => {
                    u.written.add(r);
                    let done = u.written.first_gap(&whole).is_none();
                    if done {
                        c.unwritten.remove(&id);
                    }
                    done
                }
                None => true,
            });
            if done.unwrap_or(true) && !untaken {
                self.tracked.set(false);
                self.init.set(true);
            }
            return;
        }
        if self.init.get() || untaken {
            return;
        }
        let numel = self.shape.numel();
        if !(ap.offset == 0 && ap.shape == self.shape) {
            let mut g = self.written.borrow_mut();
            let (bits, count) =
                &mut **g.get_or_insert_with(|| Box::new((vec![0; numel.div_ceil(64)], 0)));
            for_each_element(ap, |e| {
                let (w, b) = (e / 64, 1u64 << (e % 64));
                *count += (bits[w] & b == 0) as usize;
                bits[w] |= b;
            });
            if *count < numel {
                return;
            }
        }
        *self.written.borrow_mut() = None;
        self.init.set(true);
    }

    /// The rectangle of the whole tile.
    fn whole_rect(&self) -> Rect {
        Rect {
            p0: 0,
            p1: self.shape.partitions() as u32,
            f0: 0,
            f1: self.shape.free() as u64,
        }
    }

    /// The first element of view `ap` (flat tile index; its instruction region is `region`)
    /// nothing has written, if any.
    fn first_unwritten(
        &self,
        ap: impl FnOnce() -> Ap,
        region: impl FnOnce() -> Region,
    ) -> Option<usize> {
        if self.init.get() {
            return None;
        }
        if self.tracked.get() {
            let id = self.id;
            let r = Rect::of_region(&region(), self.dtype.size() as u64);
            let gap = context::try_with_ctx(|c| c.unwritten.get(&id)?.written.first_gap(&r));
            let free = self.shape.free();
            return gap.flatten().map(|(p, f)| p as usize * free + f as usize);
        }
        let g = self.written.borrow();
        let ap = ap();
        let Some((bits, _)) = g.as_deref() else {
            return Some(ap.offset);
        };
        let mut first = None;
        for_each_element(&ap, |e| {
            if first.is_none() && bits[e / 64] & (1 << (e % 64)) == 0 {
                first = Some(e);
            }
        });
        first
    }
}

/// Calls `f` with the flat index of every element of view `ap`.
fn for_each_element(ap: &Ap, mut f: impl FnMut(usize)) {
    let s = ap.inner_stride();
    ap.for_each_row(|off, n| {
        for j in 0..n {
            f((off as isize + j as isize * s) as usize);
        }
    });
}

/// The values of a tile loaded from a kernel input, read in place: partition `p`'s free
/// elements are `src[offset + p * row_stride..][..free]`.
#[derive(Clone)]
struct InPlace {
    src: Values,
    offset: usize,
    row_stride: usize,
}

impl InPlace {
    /// The rows of a tile of `shape`.
    fn rows(&self, shape: Shape) -> Rows<'_> {
        Rows {
            data: &self.src,
            offset: self.offset,
            stride: self.row_stride,
            len: shape.free(),
            count: shape.partitions(),
        }
    }
}

/// The partition rows of a tile view: `get(p)` is partition `p`'s free elements, row-major.
#[derive(Clone, Copy)]
pub(crate) struct Rows<'a> {
    data: &'a [f32],
    offset: usize,
    stride: usize,
    len: usize,
    /// Number of rows (partitions).
    count: usize,
}

impl<'a> Rows<'a> {
    /// The rows of row-major values `data` of a view of `shape`.
    fn packed(data: &'a [f32], shape: Shape) -> Rows<'a> {
        let len = shape.free();
        Rows {
            data,
            offset: 0,
            stride: len,
            len,
            count: shape.partitions(),
        }
    }

    /// Row `p`.
    #[inline]
    fn get(&self, p: usize) -> &'a [f32] {
        let o = self.offset + p * self.stride;
        &self.data[o..o + self.len]
    }

    /// The rows in partition order.
    pub(crate) fn iter(self) -> impl Iterator<Item = &'a [f32]> {
        (0..self.count).map(move |p| self.get(p))
    }
}

impl Drop for Tile {
    fn drop(&mut self) {
        let (id, slot, tracked) = (self.id, self.slot, self.tracked.get());
        context::try_with_ctx(|c| {
            c.mem.free(slot, id);
            if tracked {
                c.unwritten.remove(&id);
            }
        });
        let data = self.data.get_mut();
        if data.capacity() != 0 {
            give_buf(std::mem::take(data));
        }
    }
}

impl std::fmt::Debug for Tile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

/// True when `shape` passes [`check_tile_shape`].
#[inline]
fn fits_tile(shape: Shape) -> bool {
    shape.ndim() >= 2 && shape.partitions() <= 128 && shape.numel() != 0
}

/// Checks the partition-count limit (and PSUM bank size) of a new tile's shape.
pub(crate) fn check_tile_shape(op: &'static str, mem: MemKind, shape: Shape) -> Result<()> {
    if fits_tile(shape) {
        return Ok(());
    }
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
    /// The dtype the view reads the tile's bytes as, when `.ap(.., dtype)` reinterprets them
    /// (`ap` then counts elements of it); `None` for the tile's own dtype.
    pub(crate) cast: Option<DType>,
    /// The NeuronCore-v4 tensor indirection of a view made by [`TileRef::indirect_of`]
    /// (NKI 0.7 `tensor.indirect(index)`): `ap` is then the `[P, num_elem]` shape it presents,
    /// and every read and write below goes through the offsets ([`Ti`]).
    pub(crate) ind: Option<Ti<'a>>,
}

impl<'a> TileRef<'a> {
    /// Slices the view further (integer on dim 0 keeps it with size 1).
    #[track_caller]
    pub fn slice(&self, index: impl IntoIndex) -> TileRef<'a> {
        let loc = SourceLoc::caller();
        self.direct("slice", loc);
        index.with_index(|index| {
            if let Some(Ix::Range { step, .. }) = index.first() {
                if *step > 1 {
                    raise(
                        NkiError::new(
                            ErrorKind::PartitionOffset,
                            "slice",
                            format!(
                                "partition step {step} on {}: an on-chip access covers contiguous \
                                 partitions (step 1); use a free-dimension step or separate tiles",
                                self.describe()
                            ),
                        ),
                        loc,
                    );
                }
            }
            match self.ap.slice_named(index, true, || self.tile.describe()) {
                Ok(ap) => TileRef {
                    tile: self.tile,
                    ap,
                    cast: self.cast,
                    ind: None,
                },
                Err(e) => raise(e, loc),
            }
        })
    }

    /// The view's shape.
    pub fn shape(&self) -> &[usize] {
        self.ap.shape.dims()
    }

    /// The view's dtype: the tile's, or the one `.ap(.., dtype)` reinterprets its bytes as.
    pub fn dtype(&self) -> DType {
        self.cast.unwrap_or(self.tile.dtype)
    }

    /// Elements of the view's dtype per partition of the tile's storage.
    pub(crate) fn row_elems(&self) -> usize {
        match self.cast {
            None => self.tile.shape.free(),
            Some(c) => self.tile.shape.free() * self.tile.dtype.size() / c.size(),
        }
    }

    /// The lowest and highest element (inclusive, in elements of the view's dtype from the
    /// start of a partition) that one partition of the view touches.
    fn free_extent(&self) -> (isize, isize) {
        let base = (self.ap.offset % self.row_elems().max(1)) as isize;
        (1..self.ap.shape.ndim()).fold((base, base), |(lo, hi), d| {
            let ext = (self.ap.shape.dims()[d] as isize - 1) * self.ap.strides[d];
            if ext < 0 {
                (lo + ext, hi)
            } else {
                (lo, hi + ext)
            }
        })
    }

    /// The tile elements the view touches, as an access pattern over the tile (for the
    /// written-element tracking): the view itself, or for a reinterpreting view of another
    /// element size, the span of tile elements its bytes cover in each of its partitions.
    fn tile_ap(&self) -> Ap {
        let Some(c) = self.cast.filter(|c| c.size() != self.tile.dtype.size()) else {
            return self.ap;
        };
        let (vs, ts) = (c.size(), self.tile.dtype.size());
        let p0 = self.ap.offset / self.row_elems().max(1);
        let (lo, hi) = self.free_extent();
        let (lo_t, hi_t) = (lo as usize * vs / ts, ((hi as usize + 1) * vs).div_ceil(ts));
        let free = self.tile.shape.free();
        Ap {
            offset: p0 * free + lo_t,
            shape: Shape::of_valid(&[self.partitions(), hi_t - lo_t]),
            strides: {
                let mut s = [0isize; MAX_DIMS];
                s[0] = free as isize;
                s[1] = 1;
                s
            },
        }
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
        if self.ap.offset == 0 {
            return 0; // no division for views from the tile's start
        }
        let row = self.row_elems().max(1);
        self.ap.offset / row
    }

    /// The view's region for instruction records.
    #[inline]
    pub(crate) fn region(&self) -> Region {
        match self.ind {
            Some(_) => self.indexed_region(),
            None => self.plain_region(),
        }
    }

    /// [`TileRef::region`] of an indirect view: its whole indexed view's. Apart (and cold)
    /// so that `region`, on every operand of every record, stays small and not recursive,
    /// which keeps it inlined.
    #[cold]
    #[inline(never)]
    fn indexed_region(&self) -> Region {
        match self.ti_base() {
            Some(base) => base.plain_region(),
            None => self.plain_region(),
        }
    }

    /// [`TileRef::region`] of a view that is not indirect.
    #[inline]
    fn plain_region(&self) -> Region {
        if !self.is_whole() {
            return self.part_region();
        }
        Region {
            buf: BufId::Tile(self.tile.id),
            p0: 0,
            p1: self.partitions() as u32,
            lo: 0,
            hi: (self.free_size() * self.tile.dtype.size()) as u64,
        }
    }

    /// [`TileRef::region`] of a view that is not the whole tile.
    fn part_region(&self) -> Region {
        let sz = self.dtype().size() as u64;
        let row = self.row_elems().max(1);
        let p0 = self.ap.offset / row;
        let (lo, hi) = self.ap.span();
        // A view repeating one partition (stride 0, an `nl` operand broadcast across
        // partitions) reads that partition only.
        let rows = if self.ap.strides[0] == 0 {
            1
        } else {
            self.partitions()
        };
        let p1 = p0 + rows;
        // Free-byte range within one partition.
        let (flo, fhi) = if self.partitions() == 1 || p1 - p0 == 1 {
            ((lo % row) as u64, ((hi - 1) % row + 1) as u64)
        } else {
            let (lo_f, hi_f) = self.free_extent();
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
        self.ap.offset == 0
            && self.ap.shape == self.tile.shape
            && self.cast.is_none()
            && self.ind.is_none()
    }

    /// The flat index range of the view when it is one contiguous block of the tile.
    fn contiguous_range(&self) -> Option<std::ops::Range<usize>> {
        (self.ap.is_contiguous() && self.ind.is_none())
            .then(|| self.ap.offset..self.ap.offset + self.ap.shape.numel())
    }

    /// Copies the view's values out (row-major, as the engines' fp32 sees them); raises on a
    /// read of an unwritten tile.
    pub(crate) fn gather(&self, op: &'static str, loc: SourceLoc) -> Vec<f32> {
        let mut out = self.gather_slots(op, loc);
        self.dtype().to_values(&mut out);
        out
    }

    /// Copies the view's slots out (row-major; int32/uint32 as bit patterns, for exact copies
    /// and integer ALU paths); raises on a read of an unwritten tile.
    pub(crate) fn gather_slots(&self, op: &'static str, loc: SourceLoc) -> Vec<f32> {
        self.with_slots(op, loc, |v| {
            let mut out = take_buf(v.len());
            out.extend_from_slice(v);
            out
        })
    }

    /// Calls `f` with the view's values (row-major, as the engines' fp32 sees them) without
    /// copying them when the view is contiguous and its dtype holds values; raises on a read
    /// of an unwritten tile.
    pub(crate) fn with_values<R>(
        &self,
        op: &'static str,
        loc: SourceLoc,
        f: impl FnOnce(&[f32]) -> R,
    ) -> R {
        if self.dtype().holds_bits() {
            let v = self.gather(op, loc);
            let r = f(&v);
            give_buf(v);
            return r;
        }
        self.with_slots(op, loc, f)
    }

    /// Calls `f` with the view's slots (row-major; int32/uint32 as bit patterns) without
    /// copying them when the view is contiguous; raises on a read of an unwritten tile.
    pub(crate) fn with_slots<R>(
        &self,
        op: &'static str,
        loc: SourceLoc,
        f: impl FnOnce(&[f32]) -> R,
    ) -> R {
        if self.ind.is_some() {
            let v = self.ti_gather(op, loc);
            let r = f(&v);
            give_buf(v);
            return r;
        }
        self.check_init(op, loc);
        if let Some(c) = self.cast {
            let mut tmp = take_buf(self.ap.shape.numel());
            crate::reinterpret::read(&self.tile.data(), self.tile.dtype, c, &self.ap, &mut tmp);
            let r = f(&tmp);
            give_buf(tmp);
            return r;
        }
        if let Some(src) = self.tile.in_place_values() {
            let rows = self.rows_in(src.rows(self.tile.shape));
            if let Some(r) = rows.filter(|r| r.count <= 1 || r.stride == r.len) {
                let o = r.offset;
                return f(&r.data[o..o + r.count * r.len]);
            }
        }
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

    /// Calls `f` with the view's partition rows of values (as the engines' fp32 sees them),
    /// read in place when each row is contiguous in the tile's slots and the dtype holds
    /// values (also values a load reads in place from a kernel input), else from a row-major
    /// copy; raises on a read of an unwritten tile.
    pub(crate) fn with_rows<R>(
        &self,
        op: &'static str,
        loc: SourceLoc,
        f: impl FnOnce(Rows<'_>) -> R,
    ) -> R {
        if self.dtype().holds_bits() {
            return self.with_values(op, loc, |v| f(Rows::packed(v, self.ap.shape)));
        }
        self.with_slot_rows(op, loc, f)
    }

    /// [`with_rows`](Self::with_rows) of the view's slots (int32/uint32 as bit patterns).
    pub(crate) fn with_slot_rows<R>(
        &self,
        op: &'static str,
        loc: SourceLoc,
        f: impl FnOnce(Rows<'_>) -> R,
    ) -> R {
        if self.ind.is_some() {
            return self.with_slots(op, loc, |v| f(Rows::packed(v, self.ap.shape)));
        }
        self.check_init(op, loc);
        if let Some(src) = self.tile.in_place_values() {
            if let Some(rows) = self.rows_in(src.rows(self.tile.shape)) {
                return f(rows);
            }
        }
        {
            let data = self.tile.data();
            let (free, count) = (self.tile.shape.free(), self.tile.shape.partitions());
            let own = Rows {
                data: &data,
                offset: 0,
                stride: free,
                len: free,
                count,
            };
            if let Some(rows) = self.rows_in(own) {
                return f(rows);
            }
        }
        self.with_slots(op, loc, |v| f(Rows::packed(v, self.ap.shape)))
    }

    /// The view's rows within `tile`, the rows of the whole tile, when each of the view's
    /// partitions is one contiguous run of a tile row.
    fn rows_in<'t>(&self, tile: Rows<'t>) -> Option<Rows<'t>> {
        if self.cast.is_some() || self.ind.is_some() {
            return None;
        }
        let (offset, row_stride, col_stride) = self.ap.as_matrix()?;
        let (count, len) = (self.ap.shape.partitions(), self.ap.shape.free());
        let free = self.tile.shape.free();
        if (col_stride != 1 && len > 1) || row_stride % free != 0 {
            return None;
        }
        let (p0, j0) = (offset / free, offset % free);
        Some(Rows {
            data: tile.data,
            offset: tile.offset + p0 * tile.stride + j0,
            stride: row_stride / free * tile.stride,
            len,
            count,
        })
    }

    /// Loads the values of a kernel input of `dtype` into this whole, unwritten tile by
    /// reading them in place: `rows` gives them shared, with the loaded view's offset and row
    /// stride in them (`HbmView::share_rows`), when its partition rows are contiguous (no copy
    /// until something writes the tile). Returns false, touching nothing, otherwise.
    pub(crate) fn load_in_place(
        &self,
        dtype: DType,
        rows: impl FnOnce() -> Option<(Values, usize, usize)>,
    ) -> bool {
        if !self.is_whole() || self.tile.init.get() || dtype != self.tile.dtype {
            return false;
        }
        let Some((src, offset, row_stride)) = rows() else {
            return false;
        };
        self.tile.fill_pending.set(false);
        *self.tile.in_place.borrow_mut() = Some(InPlace {
            src,
            offset,
            row_stride,
        });
        self.tile.set_written(&self.ap, || self.region());
        true
    }

    /// Writes the view from `fill`, which must push exactly the view's element count of
    /// row-major values onto the (empty) vector it is given; the values are then made slots of
    /// the tile's dtype ([`DType::to_slots`]: rounded unless `exact`, i.e. already
    /// representable in it). An unwritten tile overwritten whole is filled in place.
    pub(crate) fn write_with(&self, exact: bool, fill: impl FnOnce(&mut Vec<f32>)) {
        let dtype = self.dtype();
        self.write_slots(|buf| {
            fill(buf);
            dtype.to_slots(buf, exact);
        })
    }

    /// Writes the view from `fill`, which must push exactly the view's element count of
    /// row-major slots of the tile's dtype (int32/uint32 as bit patterns) onto the (empty)
    /// vector it is given, stored as they are. An unwritten tile overwritten whole is filled
    /// in place, without a copy.
    pub(crate) fn write_slots(&self, fill: impl FnOnce(&mut Vec<f32>)) {
        let n = self.ap.shape.numel();
        if self.ind.is_some() {
            let mut tmp = take_buf(n);
            fill(&mut tmp);
            assert_eq!(tmp.len(), n, "an op produced the wrong number of values");
            return self.ti_scatter(tmp);
        }
        if self.is_whole() && (!self.tile.init.get() || self.tile.in_place.borrow().is_some()) {
            // Nothing can be reading this tile (it is unwritten, or its values are read in
            // place and about to be replaced), so take its buffer out, fill it, and put it
            // back.
            self.tile.fill_pending.set(false);
            self.tile.drop_in_place();
            let mut buf = std::mem::take(&mut *self.tile.data.borrow_mut());
            buf.clear();
            fill(&mut buf);
            assert_eq!(buf.len(), n, "an op produced the wrong number of values");
            *self.tile.data.borrow_mut() = buf;
        } else {
            let mut tmp = take_buf(n);
            fill(&mut tmp);
            assert_eq!(tmp.len(), n, "an op produced the wrong number of values");
            self.write_part(tmp);
        }
        self.tile.set_written(&self.tile_ap(), || self.region());
    }

    /// Writes the row-major slots `vals` into the view's elements of the tile's buffer (cast
    /// when the view reinterprets the tile) and returns `vals` to the buffer pool.
    fn write_part(&self, vals: Vec<f32>) {
        let mut data = self.tile.data_mut();
        match (self.cast, self.contiguous_range()) {
            (Some(c), _) => {
                crate::reinterpret::write(&mut data, self.tile.dtype, c, &self.ap, &vals)
            }
            (None, Some(r)) => data[r].copy_from_slice(&vals),
            (None, None) => self.ap.scatter(&mut data, &vals),
        }
        drop(data);
        give_buf(vals);
    }

    /// True when every element of the view has been written.
    pub(crate) fn is_written(&self) -> bool {
        if self.ind.is_some() {
            return self.indexed_view_written();
        }
        self.tile
            .first_unwritten(|| self.tile_ap(), || self.region())
            .is_none()
    }

    /// Raises [`ErrorKind::UninitializedRead`] when an element of the view was never written
    /// (per element: a tile written in part is read only where it was written).
    pub(crate) fn check_init(&self, op: &'static str, loc: SourceLoc) {
        if self.ind.is_some() {
            return self.ti_check_init(op, loc);
        }
        let Some(e) = self
            .tile
            .first_unwritten(|| self.tile_ap(), || self.region())
        else {
            return;
        };
        let t = self.tile;
        let partial = t.written.borrow().is_some();
        let what = (t.mem, t.dtype, t.shape);
        let e = unwritten_error(op, what, t.name(), t.loc, partial.then_some(e));
        raise(e, loc);
    }

    /// Writes row-major values `vals` into the view, made slots of the tile's dtype
    /// ([`DType::to_slots`]: rounded; int32/uint32 as bit patterns).
    pub(crate) fn scatter(&self, mut vals: Vec<f32>) {
        self.dtype().to_slots(&mut vals, false);
        self.scatter_slots(vals)
    }

    /// Writes row-major slots of the tile's dtype into the view as they are.
    pub(crate) fn scatter_slots(&self, vals: Vec<f32>) {
        if self.ind.is_some() {
            return self.ti_scatter(vals);
        }
        if self.is_whole() {
            self.tile.fill_pending.set(false);
            self.tile.drop_in_place();
            let old = std::mem::replace(&mut *self.tile.data.borrow_mut(), vals);
            give_buf(old);
        } else {
            self.write_part(vals);
        }
        self.tile.set_written(&self.tile_ap(), || self.region());
    }

    /// Marks the tile written without touching values (estimate mode).
    #[inline]
    pub(crate) fn mark_written(&self) {
        if self.ind.is_some() {
            return self.mark_indexed_view_written();
        }
        let t = self.tile;
        if t.init.get() && !t.tracked.get() {
            return; // written already (an op's result starts so)
        }
        t.set_written(&self.tile_ap(), || self.region());
    }

    /// Description for messages.
    pub(crate) fn describe(&self) -> String {
        if let Some((base, index, _)) = self.ti_parts() {
            return format!(
                "{} indirect through index {} ({} offsets)",
                base.describe(),
                index.describe(),
                self.ap.shape.free()
            );
        }
        match self.cast {
            Some(c) => format!("{} (view {} as {c})", self.tile.describe(), self.ap.shape),
            None if self.ap.shape == self.tile.shape => self.tile.describe(),
            None => format!("{} (view {})", self.tile.describe(), self.ap.shape),
        }
    }
}

impl<'a> From<&'a Tile> for TileRef<'a> {
    #[track_caller]
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

/// Implements `From<&Tile>` (the tile's whole view) and `From<TileRef>` for the operand enum
/// `$operand<'a>`, whose variant `Tile` holds a [`TileRef`].
macro_rules! tile_operand {
    ($operand:ident) => {
        impl<'a> From<&'a $crate::tile::Tile> for $operand<'a> {
            fn from(t: &'a $crate::tile::Tile) -> Self {
                $operand::Tile(t.view())
            }
        }
        impl<'a> From<$crate::tile::TileRef<'a>> for $operand<'a> {
            fn from(t: $crate::tile::TileRef<'a>) -> Self {
                $operand::Tile(t)
            }
        }
    };
}

pub(crate) use tile_operand;

pub(crate) use crate::memory::{give_buf, take_buf};

/// One NeuronCore-v4 tensor indirection (NKI 0.7 `tensor.indirect(index, num_elem)`), kept
/// in its index tile ([`Tile::ti`]).
#[derive(Clone, Copy, PartialEq)]
pub(crate) struct TiSpec {
    /// The indexed view: an offset `o` names free element `o` of each of its partitions
    /// (its free dimensions flattened, row-major).
    base: Ap,
    /// The `[P, K]` view of the index tile holding the offsets.
    index: Ap,
}

/// The tensor indirection of a [`TileRef`]: the index tile and the position of the
/// [`TiSpec`] in it.
#[derive(Clone, Copy)]
pub(crate) struct Ti<'a> {
    index: &'a Tile,
    id: u32,
}

thread_local! {
    /// The partition group `G` of the snake order of the instruction running on this thread
    /// (16 on the Vector, Scalar and GpSimd Engines, 32 on the Tensor Engine), set by the op
    /// funnel ([`set_ti_group`]) before an instruction with an indirect operand executes.
    static TI_GROUP: Cell<usize> = const { Cell::new(16) };
}

/// Sets the partition group of the snake order for the instruction about to execute.
pub(crate) fn set_ti_group(group: usize) {
    TI_GROUP.with(|g| g.set(group));
}

/// Position `i` of the snake order over a `[rows, cols]` index in partition groups of
/// `group`: down the `group` partitions of a group, one column after the other, then the next
/// group (`index[i % G, i // G]` while `rows <= G`: NKI's formula; the continuation into the
/// next group of partitions when `rows > G` is an assumption \[A\]). Returns `(row, col)`.
pub(crate) fn snake(i: usize, rows: usize, cols: usize, group: usize) -> (usize, usize) {
    let g = group.min(rows).max(1);
    let (r, c) = (i % g, i / g);
    ((c / cols) * g + r, c % cols)
}

/// The view of column `f` of `base`'s flattened free dimensions: `[P, 1]`.
fn column_of(base: &Ap, f: usize) -> Ap {
    let dims = base.shape.dims();
    let (mut off, mut rem) = (base.offset as isize, f);
    for d in (1..dims.len()).rev() {
        off += (rem % dims[d]) as isize * base.strides[d];
        rem /= dims[d];
    }
    let mut strides = [0isize; MAX_DIMS];
    strides[0] = base.strides[0];
    strides[1] = 1;
    Ap {
        offset: off as usize,
        shape: Shape::of_valid(&[dims[0], 1]),
        strides,
    }
}

/// NeuronCore-v4 tensor indirection: making an indirect view, and reading and writing through
/// one (every instruction's operand reads and writes above come here for such a view).
impl<'a> TileRef<'a> {
    /// This view indirect through the offsets in `index` (NKI 0.7
    /// `tensor.indirect(index, num_elem)`): a view of shape `[P, num_elem]` whose element
    /// `(p, i)` is free element `offset(i)` of partition `p` of this view (its free dimensions
    /// flattened), `offset(i)` being `index` in snake order ([`snake`]). `index` is an integer
    /// SBUF tensor `[P, K]` with this view's `P`; `num_elem` defaults to its size.
    pub(crate) fn indirect_of(
        &self,
        index: TileRef<'a>,
        num_elem: Option<usize>,
    ) -> Result<TileRef<'a>> {
        let bad = |msg: String| Err(NkiError::new(ErrorKind::InvalidArgument, "indirect", msg));
        if self.ind.is_some() || index.ind.is_some() {
            return bad(format!(
                "{} cannot take another indirection (one per view; index {})",
                self.describe(),
                index.describe()
            ));
        }
        if index.mem() != MemKind::Sbuf || !index.dtype().is_int() || index.cast.is_some() {
            return bad(format!(
                "the index of an indirect view of {} must be an integer SBUF tensor, got {}",
                self.describe(),
                index.describe()
            ));
        }
        if index.partitions() != self.partitions() {
            return bad(format!(
                "the index {} of an indirect view of {} must have its {} partitions (index.shape[0] == self.shape[0])",
                index.describe(),
                self.describe(),
                self.partitions()
            ));
        }
        let size = index.ap.shape.numel();
        let num = num_elem.unwrap_or(size);
        if num == 0 || num > size {
            return bad(format!(
                "num_elem {num} of an indirect view of {} must be 1..={size}, the size of index {}",
                self.describe(),
                index.describe()
            ));
        }
        let spec = TiSpec {
            base: self.ap,
            index: index.ap,
        };
        let mut specs = index.tile.ti().borrow_mut();
        let id = match specs.iter().position(|s| *s == spec) {
            Some(i) => i,
            None => {
                specs.push(spec);
                specs.len() - 1
            }
        };
        let mut strides = [0isize; MAX_DIMS];
        strides[0] = self.ap.strides[0];
        strides[1] = 1;
        Ok(TileRef {
            tile: self.tile,
            ap: Ap {
                offset: self.ap.offset,
                shape: Shape::of_valid(&[self.partitions(), num]),
                strides,
            },
            cast: self.cast,
            ind: Some(Ti {
                index: index.tile,
                id: id as u32,
            }),
        })
    }

    /// Raises when this view is indirect: view operation `op` (at `loc`) takes direct views
    /// only.
    pub(crate) fn direct(&self, op: &'static str, loc: SourceLoc) {
        if self.ind.is_some() {
            raise(
                NkiError::new(
                    ErrorKind::InvalidArgument,
                    op,
                    format!(
                        "{} is an indirect view: it is an instruction operand only; take views \
                         of the tensor before .indirect()",
                        self.describe()
                    ),
                ),
                loc,
            );
        }
    }

    /// The indexed view, the index view and the spec of an indirect view.
    pub(crate) fn ti_parts(&self) -> Option<(TileRef<'a>, TileRef<'a>, TiSpec)> {
        let ti = self.ind?;
        let spec = ti.index.ti().borrow()[ti.id as usize];
        let base = TileRef {
            tile: self.tile,
            ap: spec.base,
            cast: self.cast,
            ind: None,
        };
        let index = TileRef {
            tile: ti.index,
            ap: spec.index,
            cast: None,
            ind: None,
        };
        Some((base, index, spec))
    }

    /// The indexed view of an indirect view (the region its instructions depend on).
    pub(crate) fn ti_base(&self) -> Option<TileRef<'a>> {
        self.ind?;
        self.ti_parts().map(|(b, _, _)| b)
    }

    /// [`TileRef::is_written`] of an indirect view: whether its whole indexed view is (apart
    /// and cold, as [`TileRef::region`]'s indirect case).
    #[cold]
    #[inline(never)]
    fn indexed_view_written(&self) -> bool {
        self.ti_base().is_some_and(|base| base.is_written())
    }

    /// [`TileRef::mark_written`] of an indirect view: estimate mode has no offsets, so the
    /// whole indexed view counts as written.
    #[cold]
    #[inline(never)]
    fn mark_indexed_view_written(&self) {
        if let Some(base) = self.ti_base() {
            base.mark_written();
        }
    }

    /// The free offsets of an indirect view, read from its index in snake order over the
    /// partition group of the running instruction; an offset outside the indexed view's free
    /// elements is an [`ErrorKind::OutOfBounds`] error of `op` at `loc`.
    pub(crate) fn ti_offsets(&self, op: &'static str, loc: SourceLoc) -> Vec<usize> {
        let Some((base, index, _)) = self.ti_parts() else {
            return Vec::new();
        };
        let ids = index.gather_slots(op, loc);
        let (rows, cols) = (index.partitions(), index.free_size());
        let (group, free) = (TI_GROUP.with(Cell::get), base.free_size());
        let dt = index.dtype();
        let offsets = (0..self.free_size())
            .map(|i| {
                let (r, c) = snake(i, rows, cols, group);
                let v = dt.int(ids[r * cols + c]);
                if v < 0 || v as usize >= free {
                    raise(
                        NkiError::new(
                            ErrorKind::OutOfBounds,
                            op,
                            format!(
                                "offset {v} (element [{r}, {c}] of index {}, offset {i} in snake \
                                 order over groups of {group} partitions) is outside the {free} \
                                 free elements of {}",
                                index.describe(),
                                base.describe()
                            ),
                        ),
                        loc,
                    );
                }
                v as usize
            })
            .collect();
        give_buf(ids);
        offsets
    }

    /// Column `f` of the indexed view of an indirect view, a direct `[P, 1]` view.
    fn ti_column(&self, base: &TileRef<'a>, f: usize) -> TileRef<'a> {
        TileRef {
            ap: column_of(&base.ap, f),
            ..*base
        }
    }

    /// The slots of an indirect view (row-major `[P, num_elem]`): a gather of the indexed
    /// columns, each read as a direct view (so an unwritten element read is an error).
    fn ti_gather(&self, op: &'static str, loc: SourceLoc) -> Vec<f32> {
        let base = self.ti_base().expect("an indirect view");
        let offsets = self.ti_offsets(op, loc);
        let (p, n) = (self.partitions(), offsets.len());
        let mut out = take_buf(p * n);
        out.resize(p * n, 0.0);
        for (i, &f) in offsets.iter().enumerate() {
            self.ti_column(&base, f).with_slots(op, loc, |col| {
                for (q, &v) in col.iter().enumerate() {
                    out[q * n + i] = v;
                }
            });
        }
        out
    }

    /// Writes the row-major `[P, num_elem]` slots `vals` through an indirect view: a scatter
    /// into the indexed columns (offsets in order, so a repeated offset keeps the last value
    /// \[A\]). The offsets were checked by the instruction's funnel (`Op::indirection`).
    fn ti_scatter(&self, vals: Vec<f32>) {
        let base = self.ti_base().expect("an indirect view");
        let offsets = self.ti_offsets("indirect", SourceLoc::caller());
        let (p, n) = (self.partitions(), offsets.len());
        for (i, &f) in offsets.iter().enumerate() {
            let mut col = take_buf(p);
            col.extend((0..p).map(|q| vals[q * n + i]));
            self.ti_column(&base, f).scatter_slots(col);
        }
        give_buf(vals);
    }

    /// [`TileRef::check_init`] of an indirect view: its index, and each column it reads.
    fn ti_check_init(&self, op: &'static str, loc: SourceLoc) {
        let base = self.ti_base().expect("an indirect view");
        for f in self.ti_offsets(op, loc) {
            self.ti_column(&base, f).check_init(op, loc);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::prelude::*;
    use crate::tile::Tile;

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
                nisa::nc_matmul(&acc, st, &mv, None);
                nisa::nc_matmul(&acc, st, &mv, None);
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

    /// True while `t` reads its values in place in an HBM tensor (nothing copied yet).
    fn in_place(t: &Tile) -> bool {
        t.in_place.borrow().is_some() && t.data.borrow().is_empty()
    }

    #[test]
    fn loads_from_inputs_are_read_in_place_until_written() {
        let vals = ramp(8 * 8, 1.0);
        let a = Hbm::<f32>::from_vec(&[8, 8], vals.clone()).unwrap();
        let at = |r: usize, c: usize| vals[r * 8 + c];
        let before = a.st.read().values.as_ref().unwrap().as_ptr();
        let mut c = Hbm::<f32>::zeros([4, 4]);
        let out = c.as_output();
        Launch::new(1)
            .run(|| {
                let t = nl::load(a.slice((2..6, 3..7)));
                assert!(in_place(&t));
                // Element-wise ops read the rows in place, with an owned tile and a scalar.
                let ones = nl::full(&[4, 4], 1.0, DType::F32, nl::SBUF);
                let sum = nl::add(&t, &ones);
                let twice = nl::add(&t, &t);
                let half = nl::multiply(&t, 0.5);
                let part = nl::copy(t.slice((0..2, 1..4)), None);
                assert!(in_place(&t), "reads copy nothing");
                for r in 0..4 {
                    for j in 0..4 {
                        let (i, x) = (r * 4 + j, at(2 + r, 3 + j));
                        assert_eq!(sum.values()[i], x + 1.0);
                        assert_eq!(twice.values()[i], 2.0 * x);
                        assert_eq!(half.values()[i], 0.5 * x);
                    }
                }
                assert_eq!(
                    part.values(),
                    vec![at(2, 4), at(2, 5), at(2, 6), at(3, 4), at(3, 5), at(3, 6)]
                );
                // A partial write copies the values first (copy on write).
                nl::assign(
                    t.slice((0..1, 0..2)),
                    &nl::zeros(&[1, 2], DType::F32, nl::SBUF),
                );
                assert!(!in_place(&t));
                let mut want: Vec<f32> = (0..16).map(|i| at(2 + i / 4, 3 + i % 4)).collect();
                want[..2].fill(0.0);
                assert_eq!(t.values(), want);
                // A whole overwrite replaces them without a copy.
                let u = nl::load(a.slice((0..4, 0..4)));
                assert!(in_place(&u));
                nl::assign(&u, &twice);
                assert_eq!(u.values(), twice.values());
                nl::store(&out, &u);
            })
            .unwrap();
        // The input itself was neither written nor copied.
        assert_eq!(a.to_f32_vec().unwrap(), vals);
        assert_eq!(a.st.read().values.as_ref().unwrap().as_ptr(), before);
        let want: Vec<f32> = (0..16).map(|i| 2.0 * at(2 + i / 4, 3 + i % 4)).collect();
        assert_eq!(c.to_f32_vec().unwrap(), want);
    }

    #[test]
    fn loads_that_cannot_be_read_in_place_are_copied() {
        let a = Hbm::<f32>::from_vec(&[4, 8], ramp(32, 1.0)).unwrap();
        let mut c = Hbm::<f32>::from_vec(&[4, 8], ramp(32, -1.0)).unwrap();
        let out = c.as_output();
        Launch::new(1)
            .run(|| {
                // Strided columns, a cast, an output tensor: copies.
                let strided = nl::load(a.slice((.., stepped(0..8, 2))));
                let cast = nl::load_as(&a, DType::BF16);
                // An output region is loaded back after this launch wrote it.
                nl::store(out.slice((0..2, ..)), &nl::load(a.slice((0..2, ..))));
                let from_out = nl::load(out.slice((0..2, ..)));
                for t in [&strided, &cast, &from_out] {
                    assert!(!in_place(t));
                }
                assert_eq!(
                    strided.values(),
                    ramp(32, 1.0).into_iter().step_by(2).collect::<Vec<_>>()
                );
                assert_eq!(from_out.values(), ramp(16, 1.0));
                // A 1-D view of contiguous elements is one partition read in place.
                let row = nl::load(a.slice((1, 2..6)));
                assert!(in_place(&row));
                assert_eq!(row.shape(), &[1, 4]);
                assert_eq!(nl::add(&row, 0.0).values(), vec![10.0, 11.0, 12.0, 13.0]);
            })
            .unwrap();
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
