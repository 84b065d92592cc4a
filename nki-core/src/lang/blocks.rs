//! Block tiles: NKI's `nl.ndarray((nb, nl.par_dim(p), f), ...)`, a buffer holding `nb` tiles of
//! `[p, f]` side by side in every partition, indexed by block (`buf[i]` is a `[p, f]` tile).
//!
//! Kernels keep several tiles per buffer this way: the K column of a matmul operand, the value
//! tiles of attention, per-channel-tile accumulators. [`BlockTile::block`] is the view of one
//! block that every op reads or writes (DMA destinations included), so a kernel loads into,
//! computes into and reads from `buf.block(i)` as NKI does with `buf[i]`.
//!
//! Capacity is what NKI charges: `nb` times the block's bytes per partition, all live as long
//! as the block tile.

use super::check::require;
use crate::context::raise;
use crate::dtype::DType;
use crate::error::{ErrorKind, NkiError, SourceLoc};
use crate::record::MemKind;
use crate::tile::{Tile, TileRef};

/// `blocks` tiles of shape `dims` (partition dimension first) in one buffer.
pub struct BlockTile {
    blocks: Vec<Tile>,
}

/// A block tile of `blocks` uninitialised tiles of shape `dims` (partitions first) in `mem`
/// (NKI `nl.ndarray((blocks, nl.par_dim(dims[0]), *dims[1:]), dtype, buffer=mem)`).
#[track_caller]
pub fn ndarray_blocks(blocks: usize, dims: &[usize], dtype: DType, mem: MemKind) -> BlockTile {
    require(blocks != 0, "nl.ndarray", || {
        format!("a block tile needs at least one block, got 0 blocks of {dims:?}")
    });
    // A loop, not a closure: a closure would hide the caller's line from `ndarray`'s errors.
    let mut tiles = Vec::with_capacity(blocks);
    for _ in 0..blocks {
        tiles.push(super::data::ndarray(dims, dtype, mem));
    }
    BlockTile { blocks: tiles }
}

impl BlockTile {
    /// Block `i`: a view of the whole `[p, f...]` tile (NKI `buf[i]`). An index past the last
    /// block is an out-of-bounds error at the caller's line.
    #[track_caller]
    pub fn block(&self, i: usize) -> TileRef<'_> {
        match self.blocks.get(i) {
            Some(t) => t.view(),
            None => raise(
                NkiError::new(
                    ErrorKind::OutOfBounds,
                    "index",
                    format!(
                        "block index {i} is out of bounds for a block tile of {} blocks of {:?}",
                        self.blocks.len(),
                        self.blocks[0].shape()
                    ),
                ),
                SourceLoc::caller(),
            ),
        }
    }

    /// Number of blocks.
    pub fn len(&self) -> usize {
        self.blocks.len()
    }

    /// Always false: a block tile has at least one block.
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// The shape of one block.
    pub fn block_shape(&self) -> &[usize] {
        self.blocks[0].shape()
    }

    /// Every block in order.
    pub fn iter(&self) -> impl Iterator<Item = TileRef<'_>> {
        self.blocks.iter().map(Tile::view)
    }
}
