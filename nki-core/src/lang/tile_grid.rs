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
/// HBM view (a kernel output's) or a [`TensorRef`] (an on-chip or kernel-allocated tensor).
pub trait GridView: Clone {
    /// The view's shape.
    fn grid_dims(&self) -> Vec<usize>;
    /// The view's dtype.
    fn grid_dtype(&self) -> DType;
    /// The view sliced by `index` (in range: the grid computes it).
    fn grid_slice(&self, index: Vec<Ix>, loc: SourceLoc) -> Self;
}

impl GridView for HbmView {
    fn grid_dims(&self) -> Vec<usize> {
        self.shape().to_vec()
    }
    fn grid_dtype(&self) -> DType {
        self.dtype()
    }
    fn grid_slice(&self, index: Vec<Ix>, loc: SourceLoc) -> Self {
        self.try_slice(index).unwrap_or_else(|e| raise(e, loc))
    }
}

impl GridView for HbmViewMut {
    fn grid_dims(&self) -> Vec<usize> {
        self.0.shape().to_vec()
    }
    fn grid_dtype(&self) -> DType {
        self.0.dtype()
    }
    fn grid_slice(&self, index: Vec<Ix>, loc: SourceLoc) -> Self {
        HbmViewMut(self.0.grid_slice(index, loc))
    }
}

impl GridView for TensorRef<'_> {
    fn grid_dims(&self) -> Vec<usize> {
        self.shape().to_vec()
    }
    fn grid_dtype(&self) -> DType {
        self.dtype()
    }
    fn grid_slice(&self, index: Vec<Ix>, _: SourceLoc) -> Self {
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
    let loc = SourceLoc::caller();
    let view = src.into_grid_view();
    let dims = view.grid_dims();
    if tile_shape.is_empty() || tile_shape.len() > dims.len() || tile_shape.contains(&0) {
        bad(
            "nl.tiles",
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
        let loc = SourceLoc::caller();
        let index = index.into_index();
        let free: Vec<usize> = (0..self.sel.len())
            .filter(|&d| !self.sel[d].consumed)
            .collect();
        if index.len() > free.len() {
            bad(
                "NkiTileGrid",
                loc,
                format!(
                    "{} indices for a grid of shape {:?}",
                    index.len(),
                    self.shape()
                ),
            );
        }
        let mut out = self.clone();
        for (ix, &d) in index.iter().zip(&free) {
            let s = &mut out.sel[d];
            let oob = |what: String| -> ! {
                raise(
                    NkiError::new(
                        ErrorKind::OutOfBounds,
                        "NkiTileGrid",
                        format!("{what} of a grid of shape {:?}", self.shape()),
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
                        bad(
                            "NkiTileGrid",
                            loc,
                            format!("a grid range takes step 1, not {step}"),
                        );
                    }
                    if start >= end || end > s.count {
                        oob(format!("range {start}..{end} is outside 0..{}", s.count));
                    }
                    s.first += start;
                    s.count = end - start;
                }
            }
        }
        out
    }

    /// The selection as one view of the source (NKI `data`): the selected tiles' elements,
    /// clamped at the source's end; a consumed untiled coordinate is dropped.
    #[track_caller]
    pub fn data(&self) -> V {
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
        self.view.grid_slice(index, SourceLoc::caller())
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

    /// `size(d)` for each source dimension `d` [`TileGrid::data`] keeps.
    fn dims_of(&self, size: impl Fn(usize) -> usize) -> Vec<usize> {
        (0..self.dims.len())
            .filter(|&d| !(d < self.untiled && self.sel[d].consumed))
            .map(size)
            .collect()
    }
}
