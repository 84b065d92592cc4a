//! Collective operands: a view of an HBM shard, or an on-chip tile of the running device.
//!
//! Tiles live on their device's thread, so a tile operand is staged: its values are copied
//! into a buffer of the tile's dtype allocated symmetrically on every device (peers write into
//! the destination's staging buffer as they would into HBM), the collective runs on the
//! staging buffers, and the destination tile takes the result when the collective ends.

use super::{Call, SLOTS};
use crate::context;
use crate::mesh::dma::write_values;
use crate::mesh::sharding::MeshView;
use crate::tile::{Tile, TileRef};

/// Scratch key of the staging buffer of the source (0) or destination (1) tile.
const STAGING: u32 = 7 * SLOTS;

/// What a collective reads from or writes to.
pub enum Operand<'a> {
    /// A view of an HBM shard on the running device.
    Hbm(MeshView),
    /// An on-chip (SBUF or PSUM) tile or tile slice of the running device.
    Tile(TileRef<'a>),
}

impl From<&MeshView> for Operand<'_> {
    fn from(v: &MeshView) -> Self {
        Operand::Hbm(v.clone())
    }
}

impl From<MeshView> for Operand<'_> {
    fn from(v: MeshView) -> Self {
        Operand::Hbm(v)
    }
}

impl<'a> From<&'a Tile> for Operand<'a> {
    fn from(t: &'a Tile) -> Self {
        Operand::Tile(t.view())
    }
}

impl<'a> From<TileRef<'a>> for Operand<'a> {
    fn from(t: TileRef<'a>) -> Self {
        Operand::Tile(t)
    }
}

impl Operand<'_> {
    /// The operand's shape.
    pub fn shape(&self) -> Vec<usize> {
        match self {
            Operand::Hbm(v) => v.shape().to_vec(),
            Operand::Tile(t) => t.shape().to_vec(),
        }
    }

    /// The view the collective works on: the HBM view itself, or the tile's staging buffer
    /// (slot 0 for a source, 1 for a destination) holding the tile's current values.
    pub(super) fn stage(&self, c: &Call, slot: u32) -> MeshView {
        let t = match self {
            Operand::Hbm(v) => {
                super::check_local(c.name(), v, ["source", "destination"][slot as usize], c.loc);
                return v.clone();
            }
            Operand::Tile(t) => t,
        };
        let v = c.scratch_of(STAGING + slot, t.shape(), t.dtype());
        if c.executes() && t.tile().init.get() {
            let mut vals = t.gather(c.name(), c.loc);
            context::check(write_values(&v, &mut vals), c.loc);
        }
        v
    }

    /// Hands a destination tile the result left in its staging buffer `v`.
    pub(super) fn unstage(&self, c: &Call, v: &MeshView) {
        if let Operand::Tile(t) = self {
            if c.executes() {
                t.scatter(c.read(v));
            } else {
                t.mark_written();
            }
        }
    }
}
