//! Operands of remote copies and collectives: a view of an HBM shard, or an on-chip tile of
//! the running device (collectives stage tiles, see `collectives::stage`).

use super::sharding::MeshView;
use crate::tile::tile_operand;
use crate::tile::TileRef;

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

tile_operand!(Operand);

impl Operand<'_> {
    /// The operand's shape.
    pub fn shape(&self) -> Vec<usize> {
        match self {
            Operand::Hbm(v) => v.shape().to_vec(),
            Operand::Tile(t) => t.shape().to_vec(),
        }
    }
}
