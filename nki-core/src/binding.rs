//! Names the user wrote: `#[nki_kernel]` names each tensor a kernel binds with `let` after its
//! binding, so that `let y = nl::ndarray(..)` is `y` in errors, profiles and traces (NKI names
//! a tensor after its Python variable the same way), unless `name=` (`nl::sbuf.name(..)`)
//! named it already.
//!
//! The macro rewrites `let y = <call of nl / nisa>;` into
//! `let y = Binding::new(<call>).__nki_bind("y");`. Which `__nki_bind` runs is chosen by the
//! type of the value at compile time (method resolution tries `Binding<T>` before
//! `&mut Binding<T>`): for a [`Tensor`] or a [`Tile`] the naming one ([`NameByBinding`]); for
//! anything else (a program id, a range, a view) the one that hands the value back untouched
//! ([`PassBinding`]). Naming costs a pointer store on a tile and a comparison on an HBM tensor.

use crate::tensor::Tensor;
use crate::tile::Tile;

/// A value a `let` binding of a kernel is about to hold (see the module doc).
#[doc(hidden)]
pub struct Binding<T>(Option<T>);

impl<T> Binding<T> {
    /// The value `value`, about to be bound.
    #[inline]
    pub fn new(value: T) -> Binding<T> {
        Binding(Some(value))
    }
}

/// Values named after their binding: tensors and tiles.
#[doc(hidden)]
pub trait NameByBinding {
    /// The bound value.
    type Value;
    /// The value, named `name` unless it has a name.
    fn __nki_bind(self, name: &'static str) -> Self::Value;
}

impl NameByBinding for Binding<Tensor> {
    type Value = Tensor;
    #[inline]
    fn __nki_bind(self, name: &'static str) -> Tensor {
        let mut t = self.into_value();
        t.bind_name(name);
        t
    }
}

impl NameByBinding for Binding<Tile> {
    type Value = Tile;
    #[inline]
    fn __nki_bind(self, name: &'static str) -> Tile {
        let mut t = self.into_value();
        t.bind_name(name);
        t
    }
}

/// Every other value: bound as it is.
#[doc(hidden)]
pub trait PassBinding {
    /// The bound value.
    type Value;
    /// The value, untouched.
    fn __nki_bind(self, name: &'static str) -> Self::Value;
}

impl<T> PassBinding for &mut Binding<T> {
    type Value = T;
    #[inline]
    fn __nki_bind(self, _name: &'static str) -> T {
        take(&mut self.0)
    }
}

impl<T> Binding<T> {
    #[inline]
    fn into_value(mut self) -> T {
        take(&mut self.0)
    }
}

/// The value of a binding, which holds one from [`Binding::new`] until it is bound.
#[inline]
fn take<T>(v: &mut Option<T>) -> T {
    match v.take() {
        Some(v) => v,
        None => unreachable!("a Binding holds its value until it is bound, once"),
    }
}
