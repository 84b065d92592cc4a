//! The values of an HBM tensor, shared copy-on-write.
//!
//! [`Values`] is the row-major f32 buffer of a tensor behind an `Arc`, so a load from a kernel
//! input can hand its tile the tensor's own rows instead of a copy (see `tile::TileData`).
//! Reading derefs to the buffer; writing (`DerefMut`, used by stores and atomics) first makes
//! the buffer unique, copying it only if a tile still reads the old values. Loads share only
//! kernel inputs, which nothing writes during a launch, so within a launch that copy never
//! happens; if a tile did hold values a store then overwrites, it keeps the values it loaded,
//! exactly as a copying load would.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

/// The row-major values of an HBM tensor (already rounded to its dtype), shared with the
/// tiles loaded from it until something writes them.
#[derive(Clone)]
pub(crate) struct Values(Arc<Vec<f32>>);

impl Values {
    /// A handle on the same values for a tile to read in place.
    pub(crate) fn share(&self) -> Values {
        Values(Arc::clone(&self.0))
    }
}

impl From<Vec<f32>> for Values {
    fn from(v: Vec<f32>) -> Values {
        Values(Arc::new(v))
    }
}

impl Deref for Values {
    type Target = Vec<f32>;

    fn deref(&self) -> &Vec<f32> {
        &self.0
    }
}

impl DerefMut for Values {
    /// The values for writing: copied first when a tile still shares them.
    fn deref_mut(&mut self) -> &mut Vec<f32> {
        Arc::make_mut(&mut self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_leaves_a_shared_handle_with_the_old_values() {
        let mut v = Values::from(vec![1.0, 2.0]);
        let tile = v.share();
        assert!(
            std::ptr::eq(tile.as_ptr(), v.as_ptr()),
            "shared, not copied"
        );
        v[0] = 5.0;
        assert_eq!((tile[0], v[0]), (1.0, 5.0));
        drop(tile);
        let before = v.as_ptr();
        v[1] = 6.0;
        assert_eq!(v.as_ptr(), before, "unique values are written in place");
        assert_eq!(*v, vec![5.0, 6.0]);
    }
}
