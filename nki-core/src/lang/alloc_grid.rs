//! Storage allocated as a grid of tiles (NKI 0.7/0.8 `nl.alloc_tiles(tile_shape=,
//! element_shape=, buffer=, dtype=)` and `nl.alloc_blocks(..., block_shape=)`): one new,
//! unwritten allocation navigated in tile (or block) coordinates, its logical extent
//! `element_shape`, the last tiles clamped to it.
//!
//! Where the elements lie, as NKI's pages describe it: in HBM the backing tensor is the
//! compact logical extent (`element_shape`); on chip the tiles lie side by side along the
//! free dimension in a dense rank-two layout, `[tile rows, tile count x tile columns]`,
//! tile `(i, j)` at free offset `(i * tiles_per_row + j) * tile columns` (the partition
//! dimension holds one tile's rows, so a tensor of more rows than partitions still fits).
//! A selection within one row of tiles is one on-chip view; one spanning several rows of
//! tiles is not (NKI's `is_data_representable`), and asking for its `data` is an error.
//! Block grouping adds no allocation and changes no tile's place.

use super::tile_grid::{grid_of, BlockGrid, GridView, TileGrid};
use crate::access::Ix;
use crate::context::raise;
use crate::dtype::DType;
use crate::error::{ErrorKind, NkiError, SourceLoc};
use crate::record::MemKind;
use crate::tensor::{Buffer, Tensor, TensorRef};

/// Storage made by [`alloc_tiles`] or [`alloc_blocks`]: the backing tensor and its grid
/// geometry. NKI's returned grid owns its allocation; in Rust the grids borrow it
/// ([`GridTensor::tiles`], [`GridTensor::blocks`]).
#[derive(Debug)]
pub struct GridTensor {
    tensor: Tensor,
    elements: Vec<usize>,
    tile: Vec<usize>,
    block: Vec<usize>,
    /// On chip: the tiles per row of tiles (the rank-two layout); `None` in HBM.
    per_row: Option<usize>,
}

/// The storage of a [`GridTensor`] as a [`GridView`]: its logical shape is the allocation's
/// `element_shape`, and a selection's data is the backing tensor's view of those elements.
#[derive(Clone, Copy, Debug)]
pub struct AllocView<'a> {
    of: &'a GridTensor,
}

impl<'a> GridView for AllocView<'a> {
    type Data = TensorRef<'a>;
    fn grid_dims(&self) -> Vec<usize> {
        self.of.elements.clone()
    }
    fn grid_dtype(&self) -> DType {
        self.of.tensor.dtype()
    }
    fn grid_data(&self, index: Vec<Ix>, loc: SourceLoc) -> TensorRef<'a> {
        let g = self.of;
        let Some(per_row) = g.per_row else {
            return g.tensor.view().slice(index);
        };
        let range = |ix: &Ix| match *ix {
            Ix::Range { start, end, .. } => start..end.unwrap_or(start + 1),
            Ix::At(i) => i..i + 1,
        };
        let (rows, cols) = (range(&index[0]), range(&index[1]));
        let (tr, tc) = (g.tile[0], g.tile[1]);
        let row = rows.start / tr;
        if rows.end > (row + 1) * tr {
            raise(
                NkiError::new(
                    ErrorKind::InvalidArgument,
                    "NkiGrid.data",
                    format!(
                        "the selection spans rows {}..{} of a tile grid allocated on chip with \
                         tiles of {tr} rows: on chip the tiles lie side by side along the free \
                         dimension (alloc_tiles' rank-two layout), so only a selection within \
                         one row of tiles is one view (is_data_representable is false here)",
                        rows.start, rows.end
                    ),
                ),
                loc,
            );
        }
        let base = row * per_row * tc;
        g.tensor.view().slice((
            rows.start - row * tr..rows.end - row * tr,
            base + cols.start..base + cols.end,
        ))
    }
}

/// New, unwritten storage of `element_shape` elements organised as a grid of `tile_shape`
/// tiles (NKI `nl.alloc_tiles(tile_shape=, element_shape=, buffer=, dtype=)`): in HBM the
/// compact `element_shape` tensor (`tile_shape` applies to its trailing dimensions, the
/// ones before are untiled), on chip a rank-two tile layout (see the module docs; a
/// two-dimensional `element_shape` and `tile_shape`, the tile's rows at most the
/// partitions). Errors: a tile shape of fewer than two dimensions or more than
/// `element_shape`, a size of 0, an on-chip shape of other than two dimensions; a backing
/// tensor the buffer cannot hold is `nl.ndarray`'s error.
///
/// ```
/// use nki_core::prelude::*;
/// let x = Hbm::from_vec(&[300, 512], (0..300 * 512).map(|v| v as f32).collect()).unwrap();
/// let mut y = Hbm::<f32>::zeros([300, 512]);
/// let out = y.as_output();
/// Launch::new(1)
///     .run(|| {
///         // 300 rows in tiles of 128 x 256: a 3 x 2 grid whose third row of tiles has 44 rows.
///         let buf = nl::alloc_tiles(&[128, 256], &[300, 512], nl::sbuf, DType::F32);
///         let (src, dst) = (nl::tiles(x.view(), &[128, 256]), nl::tiles(out.view(), &[128, 256]));
///         for i in 0..3 {
///             let row = buf.tiles().at(i); // one row of tiles: one on-chip view
///             nisa::dma_copy(&row.data(), src.at(i).data(), None);
///             nisa::dma_copy(dst.at(i).data(), &row.data(), None);
///         }
///     })
///     .unwrap();
/// assert_eq!(y.to_vec().unwrap(), x.to_vec().unwrap());
/// ```
#[track_caller]
pub fn alloc_tiles(
    tile_shape: &[usize],
    element_shape: &[usize],
    buffer: Buffer,
    dtype: DType,
) -> GridTensor {
    let loc = SourceLoc::caller();
    alloc(
        "nl.alloc_tiles",
        loc,
        tile_shape,
        None,
        element_shape,
        buffer,
        dtype,
    )
}

/// [`alloc_tiles`] with a block level above the tiles (NKI `nl.alloc_blocks(tile_shape=,
/// block_shape=, element_shape=, buffer=, dtype=)`): the same storage and tile geometry,
/// [`GridTensor::blocks`] grouping `block_shape` tiles (one count per tiled dimension).
#[track_caller]
pub fn alloc_blocks(
    tile_shape: &[usize],
    block_shape: &[usize],
    element_shape: &[usize],
    buffer: Buffer,
    dtype: DType,
) -> GridTensor {
    let loc = SourceLoc::caller();
    let api = "nl.alloc_blocks";
    alloc(
        api,
        loc,
        tile_shape,
        Some(block_shape),
        element_shape,
        buffer,
        dtype,
    )
}

/// The storage of [`alloc_tiles`] / [`alloc_blocks`] (op `api` at `loc`).
fn alloc(
    api: &'static str,
    loc: SourceLoc,
    tile_shape: &[usize],
    block_shape: Option<&[usize]>,
    element_shape: &[usize],
    buffer: Buffer,
    dtype: DType,
) -> GridTensor {
    let fail =
        |msg: String| -> ! { raise(NkiError::new(ErrorKind::InvalidArgument, api, msg), loc) };
    if tile_shape.len() < 2
        || tile_shape.len() > element_shape.len()
        || tile_shape.contains(&0)
        || element_shape.contains(&0)
    {
        fail(format!(
            "tile_shape {tile_shape:?}, element_shape {element_shape:?}: positive sizes, a \
             tile of at least two dimensions and at most element_shape's"
        ));
    }
    let block = match block_shape {
        Some(b) if b.len() != tile_shape.len() || b.contains(&0) => fail(format!(
            "block_shape {b:?} for tiles of shape {tile_shape:?}: one positive count of \
             tiles per tile dimension"
        )),
        Some(b) => b.to_vec(),
        None => vec![1; tile_shape.len()],
    };
    let (backing, per_row) = if buffer.mem() == MemKind::Hbm {
        (element_shape.to_vec(), None)
    } else {
        if element_shape.len() != 2 {
            fail(format!(
                "element_shape {element_shape:?} in {}: nki-rs lays on-chip tile grids out \
                 for two-dimensional tensors (rows, columns)",
                buffer.nki_name()
            ));
        }
        let rows = element_shape[0].div_ceil(tile_shape[0]);
        let per_row = element_shape[1].div_ceil(tile_shape[1]);
        (
            vec![tile_shape[0], rows * per_row * tile_shape[1]],
            Some(per_row),
        )
    };
    let tensor = super::data::ndarray(&backing, dtype, buffer);
    GridTensor {
        tensor,
        elements: element_shape.to_vec(),
        tile: tile_shape.to_vec(),
        block,
        per_row,
    }
}

impl GridTensor {
    /// The storage in tile coordinates (NKI: the `NkiTileGrid` `alloc_tiles` returns).
    #[track_caller]
    pub fn tiles(&self) -> TileGrid<AllocView<'_>> {
        grid_of(
            "nl.alloc_tiles",
            SourceLoc::caller(),
            AllocView { of: self },
            &self.tile,
        )
    }

    /// The storage in block coordinates (NKI: the `NkiBlockGrid` `alloc_blocks` returns; for
    /// [`alloc_tiles`] storage, blocks of one tile).
    #[track_caller]
    pub fn blocks(&self) -> BlockGrid<AllocView<'_>> {
        self.tiles().blocks(&self.block)
    }

    /// The logical extent (NKI `element_shape`).
    pub fn element_shape(&self) -> &[usize] {
        &self.elements
    }

    /// The backing tensor (in HBM of `element_shape`; on chip the rank-two tile layout).
    pub fn tensor(&self) -> &Tensor {
        &self.tensor
    }
}
