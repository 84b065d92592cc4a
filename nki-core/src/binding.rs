//! Names the user wrote: `#[nki_kernel]` names each tensor a kernel binds with `let` after its
//! binding, so that `let y = nl::ndarray(..)` is `y` in errors, profiles and traces (NKI names
//! a tensor after its Python variable the same way), unless `name=` (`nl::sbuf.name(..)`)
//! named it already.
//!
//! The macro follows `let y = <call of nl / nisa>;` with
//! `(&Binding(&y)).__nki_bind("y");`: the value stays where the `let` put it (a tile is
//! 256 bytes; moving it through a wrapper cost three copies per tile). Which `__nki_bind` runs
//! is chosen by the type of the value at compile time (method resolution tries the receiver
//! `&Binding<T>` before `&&Binding<T>`): for a [`Tensor`] or a [`Tile`] the naming one
//! ([`NameByBinding`]); for anything else (a program id, a range, a view) the one that does
//! nothing ([`PassBinding`]). Naming stores a pointer in the tile and hands the name to the
//! instance's capacity tracker; on an HBM tensor it is a comparison.

use crate::tensor::Tensor;
use crate::tile::Tile;

/// A value a `let` binding of a kernel has just bound (see the module doc).
#[doc(hidden)]
pub struct Binding<'a, T>(pub &'a T);

/// Values named after their binding: tensors and tiles.
#[doc(hidden)]
pub trait NameByBinding {
    /// Names the bound value `name` unless it has a name.
    fn __nki_bind(&self, name: &'static str);
}

impl NameByBinding for Binding<'_, Tensor> {
    #[inline]
    fn __nki_bind(&self, name: &'static str) {
        self.0.bind_name(name);
    }
}

impl NameByBinding for Binding<'_, Tile> {
    #[inline]
    fn __nki_bind(&self, name: &'static str) {
        self.0.bind_name(name);
    }
}

/// Every other value: left as it is.
#[doc(hidden)]
pub trait PassBinding {
    /// Does nothing.
    fn __nki_bind(&self, name: &'static str);
}

impl<T> PassBinding for &Binding<'_, T> {
    #[inline]
    fn __nki_bind(&self, _name: &'static str) {}
}
