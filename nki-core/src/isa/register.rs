//! NKI's virtual registers (`nisa.register_alloc`, `register_move`, `register_load`,
//! `register_store`, `nisa.VirtualRegister`), which 0.7 still documents beside `NkiScalar`: a
//! register is a named, re-assignable scalar. Its value is an [`NkiScalar`], so a register
//! bounds a device loop (`nl::fori_loop(0, &reg, ..)`), offsets a DMA and times like the
//! scalar it holds; a load and a store are [`scalar_load`](super::scalar_load) and
//! [`scalar_store`](super::scalar_store) under the register API's names (one Sync-engine
//! record each, the same `MIN_II` assumption). `register_move` touches no memory and leaves no
//! record, as scalar arithmetic does (an assumption: no public cost for a register move).

#![allow(deprecated)]

use super::nki_scalar::{load_as, store_as, IntoScalar, NkiScalar};
use crate::context::raise;
use crate::error::{ErrorKind, NkiError, SourceLoc};
use crate::tile::TileRef;
use std::cell::Cell;

/// A virtual register (`nisa.VirtualRegister`; NKI 0.8 deprecates it for [`NkiScalar`]): allocated by [`register_alloc`], written by
/// [`register_move`] and [`register_load`], read by [`register_store`] and wherever a scalar
/// is taken (`&reg` is a scalar operand: a loop bound, scalar arithmetic).
#[derive(Debug)]
#[deprecated(note = "NKI 0.8 deprecates nisa.VirtualRegister: use nisa::NkiScalar")]
pub struct VirtualRegister {
    value: Cell<Option<NkiScalar>>,
    /// Where it was allocated (for the error of a read before any write).
    loc: SourceLoc,
}

impl VirtualRegister {
    /// The register's value; reading a register nothing wrote is an error naming both lines.
    #[track_caller]
    pub fn get(&self) -> NkiScalar {
        self.read(SourceLoc::caller())
    }

    fn read(&self, loc: SourceLoc) -> NkiScalar {
        match self.value.get() {
            Some(v) => v,
            None => raise(
                NkiError::new(
                    ErrorKind::UninitializedRead,
                    "nisa.VirtualRegister",
                    format!(
                        "the register allocated at {} is read before register_move or register_load wrote it",
                        self.loc
                    ),
                ),
                loc,
            ),
        }
    }
}

impl IntoScalar for &VirtualRegister {
    fn into_scalar(self, loc: SourceLoc) -> NkiScalar {
        self.read(loc)
    }
}

/// Allocates a virtual register, holding `x` or uninitialised (`nisa.register_alloc(x)`).
#[deprecated(
    note = "NKI 0.8 deprecates nisa.register_alloc: use nisa::NkiScalar (a constant: NkiScalar::from)"
)]
#[track_caller]
pub fn register_alloc(x: Option<i32>) -> VirtualRegister {
    VirtualRegister {
        value: Cell::new(x.map(NkiScalar::from)),
        loc: SourceLoc::caller(),
    }
}

/// Moves a constant or another register's value into `dst` (`nisa.register_move(dst, src)`).
#[deprecated(note = "NKI 0.8 deprecates nisa.register_move: use nisa::NkiScalar arithmetic")]
#[track_caller]
pub fn register_move(dst: &VirtualRegister, src: impl IntoScalar) {
    dst.value.set(Some(src.into_scalar(SourceLoc::caller())));
}

/// Loads the one `int32` element of a 1x1 SBUF tile into `dst` (`nisa.register_load(dst,
/// src)`; 0.7 also reads other dtypes and HBM, nki-rs only what `scalar_load` reads).
#[deprecated(note = "NKI 0.8 deprecates nisa.register_load: use nisa::scalar_load")]
#[track_caller]
pub fn register_load<'a>(dst: &VirtualRegister, src: impl Into<TileRef<'a>>) {
    dst.value
        .set(Some(load_as("nisa.register_load", src.into(), None, false)));
}

/// Stores `src` into the one element of a 1x1 `int32` SBUF tile (`nisa.register_store(dst,
/// src)`).
#[deprecated(note = "NKI 0.8 deprecates nisa.register_store: use nisa::scalar_store")]
#[track_caller]
pub fn register_store<'d>(dst: impl Into<TileRef<'d>>, src: &VirtualRegister) {
    let loc = SourceLoc::caller();
    store_as(
        "nisa.register_store",
        dst.into(),
        src.read(loc),
        Some(crate::record::Engine::Sync),
    );
}
