//! Tile-grid views (NKI 0.7/0.8 `nl.tiles(src, tile_shape)`, `NkiTileGrid`): a tensor view
//! navigated in tile coordinates. The grid's trailing dimensions are tiled by `tile_shape`
//! (a dimension of `n` elements has `ceil(n / tile)` tiles, the last one partial when the tile
//! does not divide it); dimensions before them are untiled and indexed one slab at a time.
//! Integer indexing consumes a coordinate and keeps a grid; [`TileGrid::data`] is the exact
//! view of the selection, clamped at the tensor's end (a partial last tile is a smaller view,
//! not an error). Making and indexing a grid allocates nothing, moves no data and records no
//! instruction.

use crate::access::{IntoIndex, Ix};
use crate::context::raise;
use crate::dtype::DType;
use crate::error::{ErrorKind, NkiError, SourceLoc};
use crate::hbm::{HbmView, HbmViewMut};
use crate::tensor::{Tensor, TensorRef};

/// A view a tile grid can be made of: an HBM view (a kernel input's, read-only), a writable
/// HBM view (a kernel output's), a [`TensorRef`] (an on-chip or kernel-allocated tensor) or
/// the storage of [`alloc_tiles`](super::alloc_tiles) ([`AllocView`](super::AllocView)).
pub trait GridView: Clone {
    /// What a selection's [`TileGrid::data`] is (the view type itself for plain views).
    type Data;
    /// The view's (logical) shape.
    fn grid_dims(&self) -> Vec<usize>;
    /// The view's dtype.
    fn grid_dtype(&self) -> DType;
    /// The elements selected by `index` (in range: the grid computes it) as one operand.
    fn grid_data(&self, index: Vec<Ix>, loc: SourceLoc) -> Self::Data;
}

impl GridView for HbmView {
    type Data = HbmView;
    fn grid_dims(&self) -> Vec<usize> {
        self.shape().to_vec()
    }
    fn grid_dtype(&self) -> DType {
        self.dtype()
    }
    fn grid_data(&self, index: Vec<Ix>, loc: SourceLoc) -> HbmView {
        self.try_slice(index).unwrap_or_else(|e| raise(e, loc))
    }
}

impl GridView for HbmViewMut {
    type Data = HbmViewMut;
    fn grid_dims(&self) -> Vec<usize> {
        self.0.shape().to_vec()
    }
    fn grid_dtype(&self) -> DType {
        self.0.dtype()
    }
    fn grid_data(&self, index: Vec<Ix>, loc: SourceLoc) -> HbmViewMut {
        HbmViewMut(self.0.grid_data(index, loc))
    }
}

impl<'a> GridView for TensorRef<'a> {
    type Data = TensorRef<'a>;
    fn grid_dims(&self) -> Vec<usize> {
        self.shape().to_vec()
    }
    fn grid_dtype(&self) -> DType {
        self.dtype()
    }
    fn grid_data(&self, index: Vec<Ix>, _: SourceLoc) -> TensorRef<'a> {
        self.slice(index)
    }
}

/// What [`tiles`] takes: a view or a tensor (`&Tensor` is its whole view).
pub trait IntoGridView {
    /// The view.
    type View: GridView;
    /// The view to tile.
    fn into_grid_view(self) -> Self::View;
}

impl<V: GridView> IntoGridView for V {
    type View = V;
    fn into_grid_view(self) -> V {
        self
    }
}

impl<'a> IntoGridView for &'a Tensor {
    type View = TensorRef<'a>;
    fn into_grid_view(self) -> TensorRef<'a> {
        self.view()
    }
}

/// The selection along one source dimension, in tiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Sel {
    /// The first selected tile.
    first: usize,
    /// How many tiles are selected.
    count: usize,
    /// Consumed by an integer index (no longer a grid coordinate).
    consumed: bool,
}

/// A view navigated in tile coordinates (NKI `NkiTileGrid`; made by [`tiles`]).
#[derive(Clone, Debug)]
pub struct TileGrid<V> {
    /// The whole source view.
    view: V,
    /// The source view's shape.
    dims: Vec<usize>,
    /// The tile size of each source dimension (1 for the untiled leading ones).
    tile: Vec<usize>,
    /// How many leading source dimensions are untiled.
    untiled: usize,
    /// The selection along each source dimension.
    sel: Vec<Sel>,
}

/// The coordinates of a tile-grid selection over the dimensions of its data (its tile sizes
/// and which coordinates are consumed): what a grid over another view of the same shape keeps,
/// such as a stream slot holding one step of a tile-grid source
/// ([`StreamBuffers::grid`](super::StreamBuffers::grid)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GridPattern {
    tile: Vec<usize>,
    consumed: Vec<bool>,
    untiled: usize,
}

impl GridPattern {
    /// The grid over `view` (of the data's shape) with this pattern's tiles and coordinates.
    pub(crate) fn over<W: GridView>(&self, view: W) -> TileGrid<W> {
        let dims = view.grid_dims();
        let sel = dims
            .iter()
            .zip(&self.tile)
            .zip(&self.consumed)
            .map(|((&n, &t), &consumed)| Sel {
                first: 0,
                count: n.div_ceil(t).max(1),
                consumed,
            })
            .collect();
        TileGrid {
            view,
            dims,
            tile: self.tile.clone(),
            untiled: self.untiled,
            sel,
        }
    }
}

/// Applies `index` to the remaining (not consumed) coordinates of `sel`, in order, as op
/// `api` at `loc`: an integer consumes its coordinate, a range (step 1) keeps it with the
/// selected count; an index past a coordinate's extent is an [`ErrorKind::OutOfBounds`]
/// error naming the grid's shape.
fn select(api: &'static str, loc: SourceLoc, sel: &mut [Sel], index: &[Ix]) {
    let shape: Vec<usize> = sel
        .iter()
        .filter(|s| !s.consumed)
        .map(|s| s.count)
        .collect();
    let free: Vec<usize> = (0..sel.len()).filter(|&d| !sel[d].consumed).collect();
    if index.len() > free.len() {
        bad(
            api,
            loc,
            format!("{} indices for a grid of shape {shape:?}", index.len()),
        );
    }
    for (ix, &d) in index.iter().zip(&free) {
        let s = &mut sel[d];
        let oob = |what: String| -> ! {
            raise(
                NkiError::new(
                    ErrorKind::OutOfBounds,
                    api,
                    format!("{what} of a grid of shape {shape:?}"),
                ),
                loc,
            )
        };
        match *ix {
            Ix::At(i) if i < s.count => {
                s.first += i;
                s.count = 1;
                s.consumed = true;
            }
            Ix::At(i) => oob(format!("coordinate {i} is outside 0..{}", s.count)),
            Ix::Range { start, end, step } => {
                let end = end.unwrap_or(s.count);
                if step != 1 {
                    bad(api, loc, format!("a grid range takes step 1, not {step}"));
                }
                if start >= end || end > s.count {
                    oob(format!("range {start}..{end} is outside 0..{}", s.count));
                }
                s.first += start;
                s.count = end - start;
            }
        }
    }
}

/// Fails op `api` at `loc` with an [`ErrorKind::InvalidArgument`] error.
fn bad(api: &'static str, loc: SourceLoc, msg: String) -> ! {
    raise(NkiError::new(ErrorKind::InvalidArgument, api, msg), loc)
}

/// The view `src` in tiles of `tile_shape` (NKI `nl.tiles(src, tile_shape=...)`): the last
/// `tile_shape.len()` dimensions of `src` are tiled, the ones before are untiled (one slab a
/// coordinate). Errors: an empty tile shape, a tile size of 0, more tile dimensions than
/// `src` has.
///
/// ```
/// use nki_core::prelude::*;
/// let x = Hbm::from_vec(&[300, 8], vec![1.0f32; 2400]).unwrap();
/// Launch::new(1)
///     .run(|| {
///         let grid = nl::tiles(x.view(), &[128, 8]);
///         assert_eq!(grid.shape(), [3, 1]);
///         let last = grid.at(2);
///         assert_eq!(last.element_shape(), [44, 8]);
///         assert!(last.is_remainder());
///         let t = nl::ndarray(&[128, 8], DType::F32, nl::sbuf);
///         let part = t.slice((0..44, ..));
///         nisa::dma_copy(&part, last.data(), None);
///     })
///     .unwrap();
/// ```
#[track_caller]
pub fn tiles<S: IntoGridView>(src: S, tile_shape: &[usize]) -> TileGrid<S::View> {
    grid_of(
        "nl.tiles",
        SourceLoc::caller(),
        src.into_grid_view(),
        tile_shape,
    )
}

/// The tile grid of `view` in tiles of `tile_shape`, made by op `api` at `loc` (see [`tiles`]).
pub(super) fn grid_of<V: GridView>(
    api: &'static str,
    loc: SourceLoc,
    view: V,
    tile_shape: &[usize],
) -> TileGrid<V> {
    let dims = view.grid_dims();
    if tile_shape.is_empty() || tile_shape.len() > dims.len() || tile_shape.contains(&0) {
        bad(
            api,
            loc,
            format!(
                "tile_shape {tile_shape:?} for a view of shape {dims:?}: one positive tile \
                 size per tiled (trailing) dimension, at most one per dimension"
            ),
        );
    }
    let untiled = dims.len() - tile_shape.len();
    let mut tile = vec![1; untiled];
    tile.extend_from_slice(tile_shape);
    let sel = dims
        .iter()
        .zip(&tile)
        .map(|(&n, &t)| Sel {
            first: 0,
            count: n.div_ceil(t),
            consumed: false,
        })
        .collect();
    TileGrid {
        view,
        dims,
        tile,
        untiled,
        sel,
    }
}

impl<V: GridView> TileGrid<V> {
    /// The grid's shape: the tiles (or slabs) selected along each coordinate not consumed.
    pub fn shape(&self) -> Vec<usize> {
        self.sel
            .iter()
            .filter(|s| !s.consumed)
            .map(|s| s.count)
            .collect()
    }

    /// The nominal element shape of one tile (NKI `tile_shape`).
    pub fn tile_shape(&self) -> &[usize] {
        &self.tile[self.untiled..]
    }

    /// Each remaining coordinate's step in source elements (NKI `index_step_elements`).
    pub fn index_step_elements(&self) -> Vec<usize> {
        self.sel
            .iter()
            .zip(&self.tile)
            .filter(|(s, _)| !s.consumed)
            .map(|(_, &t)| t)
            .collect()
    }

    /// The source dtype.
    pub fn dtype(&self) -> DType {
        self.view.grid_dtype()
    }

    /// The selected elements along each source dimension, clamped at the source's end (NKI
    /// `element_shape`).
    pub fn element_shape(&self) -> Vec<usize> {
        (0..self.dims.len()).map(|d| self.span(d).len()).collect()
    }

    /// Whether the selection is clamped (it holds a partial tile; NKI `is_remainder`).
    pub fn is_remainder(&self) -> bool {
        (0..self.dims.len()).any(|d| self.span(d).len() < self.sel[d].count * self.tile[d])
    }

    /// The element range selected along source dimension `d`.
    fn span(&self, d: usize) -> std::ops::Range<usize> {
        let s = self.sel[d];
        let lo = s.first * self.tile[d];
        lo..((s.first + s.count) * self.tile[d]).min(self.dims[d])
    }

    /// The grid with its first remaining coordinate fixed at `i` (NKI `grid[i]`): the
    /// coordinate is consumed.
    #[track_caller]
    pub fn at(&self, i: usize) -> TileGrid<V> {
        self.get([Ix::At(i)].as_slice())
    }

    /// The grid indexed by `index` over its remaining coordinates, in order (NKI
    /// `grid[i, a:b]`): an integer consumes its coordinate, a range (step 1) keeps it with
    /// the selected count. An index past a coordinate's extent is an
    /// [`ErrorKind::OutOfBounds`] error naming the grid.
    #[track_caller]
    pub fn get(&self, index: impl IntoIndex) -> TileGrid<V> {
        let mut out = self.clone();
        select(
            "NkiTileGrid",
            SourceLoc::caller(),
            &mut out.sel,
            &index.into_index(),
        );
        out
    }

    /// The grid's selection grouped into blocks of `block_shape` tiles (NKI `nl.blocks(grid,
    /// block_shape=...)`), one count per tiled dimension: block `b` along a dimension holds
    /// the selection's tiles `b * block .. (b + 1) * block` (the last block partial when the
    /// block does not divide the tile count). Errors: a block shape of another length than
    /// the tile shape, a block size of 0.
    #[track_caller]
    pub fn blocks(&self, block_shape: &[usize]) -> BlockGrid<V> {
        let loc = SourceLoc::caller();
        let tiled = self.tile.len() - self.untiled;
        if block_shape.len() != tiled || block_shape.contains(&0) {
            bad(
                "nl.blocks",
                loc,
                format!(
                    "block_shape {block_shape:?} for tiles of shape {:?}: one positive count \
                     of tiles per tiled dimension",
                    self.tile_shape()
                ),
            );
        }
        let mut block = vec![1; self.untiled];
        block.extend_from_slice(block_shape);
        let bsel = self
            .sel
            .iter()
            .zip(&block)
            .map(|(s, &b)| Sel {
                first: 0,
                count: s.count.div_ceil(b),
                consumed: s.consumed,
            })
            .collect();
        BlockGrid {
            tiles: self.clone(),
            block,
            bsel,
        }
    }

    /// The selection as one view of the source (NKI `data`): the selected tiles' elements,
    /// clamped at the source's end; a consumed untiled coordinate is dropped. (A grid over
    /// [`alloc_tiles`](super::alloc_tiles)'s on-chip storage gives a view only for a selection
    /// within one row of tiles: see [`AllocView`](super::AllocView).)
    #[track_caller]
    pub fn data(&self) -> V::Data {
        let index = (0..self.dims.len())
            .map(|d| match d < self.untiled && self.sel[d].consumed {
                true => Ix::At(self.sel[d].first),
                false => {
                    let r = self.span(d);
                    Ix::Range {
                        start: r.start,
                        end: Some(r.end),
                        step: 1,
                    }
                }
            })
            .collect();
        self.view.grid_data(index, SourceLoc::caller())
    }

    /// The shape [`TileGrid::data`] has with every selected tile whole (no clamping): the
    /// capacity an on-chip buffer for this selection needs.
    pub(crate) fn capacity(&self) -> Vec<usize> {
        self.dims_of(|d| self.sel[d].count * self.tile[d])
    }

    /// The shape of [`TileGrid::data`].
    pub(crate) fn data_shape(&self) -> Vec<usize> {
        self.dims_of(|d| self.span(d).len())
    }

    /// How the grid's selection lies over [`TileGrid::data`]'s dimensions: the tile size of
    /// each, whether each is a consumed coordinate, and how many leading ones are untiled.
    pub(crate) fn pattern(&self) -> GridPattern {
        let kept: Vec<usize> = (0..self.dims.len())
            .filter(|&d| !(d < self.untiled && self.sel[d].consumed))
            .collect();
        GridPattern {
            tile: kept.iter().map(|&d| self.tile[d]).collect(),
            consumed: kept.iter().map(|&d| self.sel[d].consumed).collect(),
            untiled: kept.iter().filter(|&&d| d < self.untiled).count(),
        }
    }

    /// `size(d)` for each source dimension `d` [`TileGrid::data`] keeps.
    fn dims_of(&self, size: impl Fn(usize) -> usize) -> Vec<usize> {
        (0..self.dims.len())
            .filter(|&d| !(d < self.untiled && self.sel[d].consumed))
            .map(size)
            .collect()
    }
}

/// A view navigated in block coordinates (NKI `NkiBlockGrid`; made by [`blocks`] or
/// [`TileGrid::blocks`]): each block groups a fixed number of tiles along every tiled
/// dimension, a coarser grain (one DMA of several tiles, say) over the tile grain compute
/// instructions take. Indexing keeps a block grid; [`BlockGrid::tiles`] gives the selection's
/// tiles as a [`TileGrid`], [`BlockGrid::data`] the selection as one operand. Partial last
/// blocks and tiles are kept, clamped at the source's end. Making and indexing a block grid
/// allocates nothing, moves no data and records no instruction.
#[derive(Clone, Debug)]
pub struct BlockGrid<V> {
    /// The tiles the blocks group (their selection is the blocks' whole extent).
    tiles: TileGrid<V>,
    /// Tiles per block along each source dimension (1 for the untiled ones).
    block: Vec<usize>,
    /// The selection along each source dimension, in blocks of `tiles`' selection.
    bsel: Vec<Sel>,
}

/// The view `src` in blocks of `block_shape` tiles of `tile_shape` elements (NKI
/// `nl.blocks(src, tile_shape=..., block_shape=...)`): [`tiles`]`(src, tile_shape)` grouped
/// by [`TileGrid::blocks`]. Errors: those of both.
///
/// ```
/// use nki_core::prelude::*;
/// let x = Hbm::from_vec(&[300, 1024], vec![1.0f32; 300 * 1024]).unwrap();
/// Launch::new(1)
///     .run(|| {
///         // 3 x 4 tiles of [128, 256], grouped 2 x 2: a 2 x 2 block grid.
///         let b = nl::blocks(x.view(), &[128, 256], &[2, 2]);
///         assert_eq!(b.shape(), [2, 2]);
///         let last = b.get((1, 1));
///         assert_eq!(last.element_shape(), [44, 512]);
///         assert_eq!(last.tiles().shape(), [1, 2]);
///         let t = nl::ndarray(&[128, 512], DType::F32, nl::sbuf);
///         nisa::dma_copy(&t.slice((0..44, ..)), last.data(), None);
///     })
///     .unwrap();
/// ```
#[track_caller]
pub fn blocks<S: IntoGridView>(
    src: S,
    tile_shape: &[usize],
    block_shape: &[usize],
) -> BlockGrid<S::View> {
    let loc = SourceLoc::caller();
    grid_of("nl.blocks", loc, src.into_grid_view(), tile_shape).blocks(block_shape)
}

impl<V: GridView> BlockGrid<V> {
    /// The grid's shape: the blocks (or untiled slabs) selected along each coordinate not
    /// consumed.
    pub fn shape(&self) -> Vec<usize> {
        self.bsel
            .iter()
            .filter(|s| !s.consumed)
            .map(|s| s.count)
            .collect()
    }

    /// Tiles per block along each tiled dimension (NKI `block_shape`).
    pub fn block_shape(&self) -> &[usize] {
        &self.block[self.tiles.untiled..]
    }

    /// The nominal element shape of one tile (NKI `tile_shape`).
    pub fn tile_shape(&self) -> &[usize] {
        self.tiles.tile_shape()
    }

    /// Each remaining coordinate's step in source elements: a block's tiles times the tile
    /// (NKI `index_step_elements`).
    pub fn index_step_elements(&self) -> Vec<usize> {
        (0..self.bsel.len())
            .filter(|&d| !self.bsel[d].consumed)
            .map(|d| self.block[d] * self.tiles.tile[d])
            .collect()
    }

    /// The source dtype.
    pub fn dtype(&self) -> DType {
        self.tiles.dtype()
    }

    /// The grid with its first remaining coordinate fixed at block `i` (NKI `grid[i]`).
    #[track_caller]
    pub fn at(&self, i: usize) -> BlockGrid<V> {
        self.get([Ix::At(i)].as_slice())
    }

    /// The grid indexed by `index` over its remaining coordinates, in block units (NKI
    /// `grid[i, a:b]`), as [`TileGrid::get`] indexes tiles.
    #[track_caller]
    pub fn get(&self, index: impl IntoIndex) -> BlockGrid<V> {
        let mut out = self.clone();
        select(
            "NkiBlockGrid",
            SourceLoc::caller(),
            &mut out.bsel,
            &index.into_index(),
        );
        out
    }

    /// The selected blocks' tiles as a tile grid (NKI `nl.tiles(block_grid)`): a consumed
    /// block coordinate of a tiled dimension becomes the block's tiles along it (a selected
    /// block is a grid of `block_shape` tiles, fewer in a partial block).
    pub fn tiles(&self) -> TileGrid<V> {
        let mut out = self.tiles.clone();
        for (d, (s, b)) in self.bsel.iter().zip(&self.block).enumerate() {
            let base = self.tiles.sel[d];
            let first = s.first * b;
            out.sel[d] = Sel {
                first: base.first + first,
                count: (s.count * b).min(base.count - first),
                consumed: base.consumed || (d < self.tiles.untiled && s.consumed),
            };
        }
        out
    }

    /// The selection regrouped into blocks of `block_shape` tiles (NKI `nl.blocks(block_grid,
    /// block_shape=...)`).
    #[track_caller]
    pub fn blocks(&self, block_shape: &[usize]) -> BlockGrid<V> {
        self.tiles().blocks(block_shape)
    }

    /// The selected elements along each source dimension, clamped at the source's end (NKI
    /// `element_shape`).
    pub fn element_shape(&self) -> Vec<usize> {
        self.tiles().element_shape()
    }

    /// Whether the selection is clamped (a partial block or tile; NKI `is_remainder`).
    pub fn is_remainder(&self) -> bool {
        let t = self.tiles();
        t.is_remainder()
            || (0..self.bsel.len()).any(|d| t.sel[d].count < self.bsel[d].count * self.block[d])
    }

    /// The selection as one operand (NKI `data`), as [`TileGrid::data`].
    #[track_caller]
    pub fn data(&self) -> V::Data {
        self.tiles().data()
    }
}
