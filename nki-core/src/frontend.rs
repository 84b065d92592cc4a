//! Entry points for kernel front ends in other languages (the `nki_rs` Python package runs NKI
//! Python kernels through them): what a Rust kernel gets from its types and from
//! `#[track_caller]`, given here at run time.
//!
//! A front end traces a kernel by running it: each of its `nl.*` / `nisa.*` calls becomes a
//! call of the same [`nl`](crate::nl) / [`nisa`](crate::nisa) function a Rust kernel makes, so
//! nothing here implements an instruction. What it adds:
//! - [`AnyHbm`]: an HBM tensor whose dtype is a value (kernel arguments and returned outputs
//!   as bit patterns), and [`returns`] / [`returned`], the launch's returned tensors without
//!   static types;
//! - [`ChipView`]: a view of an on-chip tensor held apart from the borrow of its tensor, so a
//!   front end's object can keep it ([`detach`], [`attach`]);
//! - [`guard`] and [`Abort`]: a failing op stops the kernel by unwinding (see `abort.rs`); a
//!   front end whose interpreter must not be unwound through catches it at each call, carries
//!   it through its own frames and resumes it once back in Rust;
//! - [`SourceLoc::at`]: the kernel's own file and line for every op a call makes;
//! - [`set_wait_hook`]: what the front end runs around an instance's wait for another (an
//!   interpreter lock let go, so the instance waited for can run).

use crate::abort::in_instance;
use crate::access::{Ap, Shape};
use crate::dtype::DType;
use crate::error::{ErrorKind, NkiError, Result, SourceLoc};
use crate::hbm::{HbmStorage, HbmView};
use crate::record::MemKind;
use crate::reinterpret;
use crate::tensor::{KernelOutputs, KernelReturn, Returned, Tensor};
use crate::tile::{Tile, TileRef};
use std::any::Any;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;

/// What a front end runs around an instance's wait for another (see [`set_wait_hook`]).
pub use crate::blocking::{set_wait_hook, WaitHook};

/// Where a launch's instances leave the tensors they return ([`returns`], [`returned`]).
pub use crate::tensor::ReturnSlot;

/// A tensor in device HBM whose dtype is known at run time: a kernel argument made from a
/// front end's array, or a tensor the kernel returned.
#[derive(Clone)]
pub struct AnyHbm {
    st: Arc<HbmStorage>,
}

impl AnyHbm {
    /// A tensor of `dtype` and `shape` holding `bits`, one element's bit pattern (in the low
    /// `dtype.size() * 8` bits) per element, row-major. A count that does not match the shape
    /// is an [`ErrorKind::ShapeMismatch`] error; a shape NKI cannot have an
    /// [`ErrorKind::InvalidArgument`] error.
    pub fn from_bits(
        dtype: DType,
        shape: &[usize],
        bits: impl ExactSizeIterator<Item = u32>,
    ) -> Result<AnyHbm> {
        let s = Shape::new(shape)?;
        if s.numel() != bits.len() {
            return Err(NkiError::new(
                ErrorKind::ShapeMismatch,
                "AnyHbm::from_bits",
                format!(
                    "shape {s} holds {} elements but {} values were given",
                    s.numel(),
                    bits.len()
                ),
            ));
        }
        let values = bits.map(|b| reinterpret::from_bits(dtype, b)).collect();
        Ok(AnyHbm {
            st: HbmStorage::new(dtype, s, Some(values)),
        })
    }

    /// A tensor with a shape and a dtype but no values, for estimate-mode launches.
    pub fn shape_only(dtype: DType, shape: &[usize]) -> Result<AnyHbm> {
        Ok(AnyHbm {
            st: HbmStorage::new(dtype, Shape::new(shape)?, None),
        })
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        self.st.shape.dims()
    }

    /// The dtype.
    pub fn dtype(&self) -> DType {
        self.st.dtype
    }

    /// The tensor's name in errors and profiles.
    pub fn name(&self) -> String {
        self.st.name.get().to_string()
    }

    /// Names the tensor in errors and profiles (a front end names each argument after its
    /// kernel parameter).
    pub fn set_name(&self, name: &str) {
        self.st.name.set(name)
    }

    /// A read-only view of the whole tensor: how a kernel sees its input.
    pub fn input_view(&self) -> HbmView {
        HbmView::whole(&self.st, true)
    }

    /// The values as bit patterns, row-major (one element per `u32`, in its low
    /// `dtype.size() * 8` bits). An [`ErrorKind::NoData`] error for a shape-only tensor.
    pub fn to_bits(&self) -> Result<Vec<u32>> {
        let g = self.st.read();
        let values = g
            .values
            .as_ref()
            .ok_or_else(|| crate::hbm::no_data(&self.st, "AnyHbm::to_bits"))?;
        let dtype = self.st.dtype;
        Ok(values
            .iter()
            .map(|&s| reinterpret::bits(dtype, s))
            .collect())
    }
}

impl std::fmt::Debug for AnyHbm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AnyHbm<{}>{}", self.st.dtype, self.st.shape)
    }
}

/// The shared-HBM tensors one program instance returns, in order (see [`returns`]).
pub struct ReturnedTensors<'a>(pub &'a [&'a Tensor]);

impl KernelReturn for ReturnedTensors<'_> {
    fn returned(self, loc: SourceLoc) -> Returned {
        Returned(self.0.iter().map(|t| t.returned(loc)).collect())
    }
}

/// The tensors a launch's instances returned, whatever their dtypes.
impl KernelOutputs for Vec<AnyHbm> {
    fn from_returned(r: Returned) -> Result<Self> {
        Ok(r.0.into_iter().map(|st| AnyHbm { st }).collect())
    }
}

/// Notes in `slot` the tensors the running instance returned (every instance must return
/// the same ones; a tensor not in shared HBM fails the kernel at the caller's line).
#[track_caller]
pub fn returns(slot: &ReturnSlot, tensors: &[&Tensor]) {
    slot.set(ReturnedTensors(tensors));
}

/// The tensors the launch's instances returned ([`returns`]), in order.
pub fn returned(slot: ReturnSlot) -> Result<Vec<AnyHbm>> {
    slot.take()
}

/// A view of an on-chip tensor without the borrow of the tensor: its access pattern (and the
/// dtype it reads the bytes as). [`attach`] makes it a view of the same tile again.
#[derive(Clone, Debug)]
pub struct ChipView {
    ap: Ap,
    cast: Option<DType>,
}

/// `view` as a [`ChipView`]. A view through a tensor indirection (`tensor.indirect`) keeps
/// its index tile borrowed and cannot be held apart: an [`ErrorKind::InvalidArgument`] error.
pub fn detach(view: &TileRef<'_>) -> Result<ChipView> {
    if view.ind.is_some() {
        return Err(NkiError::new(
            ErrorKind::InvalidArgument,
            "indirect",
            "a view through a tensor indirection is used where it is made (pass \
             t.indirect(...) to the instruction directly)",
        ));
    }
    Ok(ChipView {
        ap: view.ap,
        cast: view.cast,
    })
}

/// The view `v` of `tile`, which must be the tile `v` was [`detach`]ed from.
pub fn attach<'a>(tile: &'a Tile, v: &ChipView) -> TileRef<'a> {
    TileRef {
        tile,
        ap: v.ap,
        cast: v.cast,
        ind: None,
    }
}

/// Checks a shape `dims` for an on-chip tensor in `mem` as allocating it would (dimensions,
/// partition limit, elements), without allocating: a front end that allocates a tensor at
/// its first use reports a bad shape at the allocating call.
pub fn check_on_chip(api: &'static str, mem: MemKind, dims: &[usize]) -> Result<()> {
    crate::tile::check_tile_shape(api, mem, Shape::new(dims)?)
}

/// True while a kernel instance runs on this thread: `nl` / `nisa` calls are valid.
pub fn in_kernel() -> bool {
    in_instance() && crate::context::in_kernel()
}

/// How a kernel instance stopped inside [`guard`]: a failing op, a cancellation (an earlier
/// instance failed) or a panic. Hand it back to the launch with [`Abort::resume`].
pub struct Abort(Box<dyn Any + Send>);

impl Abort {
    /// The error of the failing op (`None` for a cancellation or a panic).
    pub fn error(&self) -> Option<&NkiError> {
        self.0
            .downcast_ref::<crate::abort::KernelAbort>()
            .map(|a| &a.0)
    }

    /// Continues stopping the instance: the launch reports the error (with the instance's
    /// program id) as it would for a Rust kernel.
    pub fn resume(self) -> ! {
        panic::resume_unwind(self.0)
    }
}

impl std::fmt::Debug for Abort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.error() {
            Some(e) => write!(f, "Abort({e})"),
            None => f.write_str("Abort(..)"),
        }
    }
}

/// Runs `f` (calls into `nl` / `nisa`), catching the unwind that stops a failing instance.
pub fn guard<R>(f: impl FnOnce() -> R) -> std::result::Result<R, Abort> {
    panic::catch_unwind(AssertUnwindSafe(f)).map_err(Abort)
}

/// Fails the running kernel instance with `e` at the caller's line (see [`SourceLoc::at`]):
/// how a front end reports a mistake it finds itself (an argument of the wrong kind).
#[track_caller]
pub fn fail(e: NkiError) -> ! {
    crate::abort::raise(e, SourceLoc::caller())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prelude::*;

    #[test]
    fn bits_round_trip_through_an_hbm_tensor() {
        let bits = [0x3f80u32, 0xc040, 0x7f80, 0x0001];
        let t = AnyHbm::from_bits(DType::BF16, &[2, 2], bits.iter().copied()).unwrap();
        assert_eq!(t.to_bits().unwrap(), bits);
        let e = AnyHbm::from_bits(DType::BF16, &[3, 2], bits.iter().copied()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
        let s = AnyHbm::shape_only(DType::F32, &[4]).unwrap();
        assert_eq!(s.to_bits().unwrap_err().kind(), ErrorKind::NoData);
    }

    #[test]
    fn a_front_end_kernel_runs_with_its_own_lines_and_returns_its_outputs() {
        let a = AnyHbm::from_bits(
            DType::F32,
            &[128, 4],
            (0..512).map(|i| (i as f32).to_bits()),
        )
        .unwrap();
        a.set_name("a");
        let slot = ReturnSlot::new();
        let at = |line| SourceLoc::new("kernel.py", line, 5);
        Launch::new(1)
            .dialect(Dialect::Nki07)
            .run(|| {
                let out = at(3).at(|| nl::ndarray(&[128, 4], DType::F32, nl::shared_hbm));
                let x = at(4).at(|| nl::ndarray(&[128, 4], DType::F32, nl::sbuf));
                let dst = detach(&TileRef::from(&x)).unwrap();
                at(5).at(|| {
                    nisa::dma_copy(
                        attach(x.tile(), &dst),
                        crate::TensorRef::Hbm(a.input_view()),
                        None,
                    )
                });
                at(6).at(|| nisa::dma_copy(&out, &x, None));
                at(7).at(|| returns(&slot, &[&out]));
            })
            .unwrap();
        let out = returned(slot).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].to_bits().unwrap(), a.to_bits().unwrap());
    }

    #[test]
    fn a_failing_op_is_caught_with_its_line_and_resumed_into_the_launch() {
        let e = Launch::new(1)
            .run(|| {
                let loc = SourceLoc::new("kernel.py", 12, 9);
                let r = guard(|| loc.at(|| nl::ndarray(&[256, 4], DType::F32, nl::sbuf)));
                let abort = r.expect_err("256 partitions are over the limit");
                let e = abort.error().expect("an op's error");
                assert_eq!(e.kind(), ErrorKind::PartitionLimit);
                assert_eq!(e.location(), Some(loc));
                abort.resume();
            })
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::PartitionLimit);
        assert!(e.to_string().contains("kernel.py:12:9"), "{e}");
        assert!(!in_kernel());
    }

    #[test]
    fn on_chip_shapes_are_checked_without_allocating() {
        assert!(check_on_chip("nl.ndarray", MemKind::Sbuf, &[128, 512]).is_ok());
        let e = check_on_chip("nl.ndarray", MemKind::Psum, &[129, 4]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::PartitionLimit);
        let e = check_on_chip("nl.ndarray", MemKind::Sbuf, &[128]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    }
}
