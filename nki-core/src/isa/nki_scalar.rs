//! `NkiScalar`: one integer computed on the device (NKI 0.7 `nki.isa.NkiScalar`), read from a
//! 1x1 tile with [`scalar_load`], written back with [`scalar_store`], combined with `+`, `-`
//! and `*` (traced on the device: 32-bit arithmetic wraps), and used as a bound of
//! [`nl::fori_loop`](crate::lang::fori_loop), the condition of
//! [`nl::while_loop`](crate::lang::while_loop) and a dynamic DMA offset
//! ([`HbmView::scalar_offset`](crate::hbm::HbmView::scalar_offset)).
//!
//! In execute and simulate modes a scalar holds its value; in estimate mode (no values) a
//! scalar read from a tile holds none, and whatever needs the value (a loop bound) takes it
//! from the launch's estimate options or fails with a clear error (see
//! [`nl::fori_loop`](crate::lang::fori_loop)).
//!
//! Registers hold 32-bit values on the engines' sequencers [hardware.md §1 "control
//! instructions"]; nki-rs has no 64-bit integer tile dtype, so only `int32` scalars exist here
//! (0.7's `int64` scalars, for HBM offsets beyond 4 GiB, are not provided).

use super::op::Op;
use crate::context::raise;
use crate::dtype::DType;
use crate::error::{ErrorKind, NkiError, SourceLoc};
use crate::record::{BufId, Engine, MemKind, Opcode, Region};
use crate::tile::TileRef;

/// One 32-bit integer held in a sequencer register (NKI 0.7 `nki.isa.NkiScalar`).
///
/// Made by [`scalar_load`] (from a 1x1 `int32` tile), by a device loop (its induction
/// variable) or by arithmetic on scalars and integers (`i * 4 + 1`): `+`, `-` (binary and
/// unary) and `*` wrap at 32 bits as the hardware's registers do (`100000 * 100000` is
/// `1410065408`). Comparisons, which 0.7 traces but whose result a kernel cannot use, are not
/// provided.
///
/// Timing: a scalar remembers the register its value came from (the latest [`scalar_load`] it
/// derives from, through arithmetic or a device loop's bounds), and what uses it waits for
/// that load: a DMA whose HBM side is moved by it
/// ([`HbmView::scalar_offset`](crate::hbm::HbmView::scalar_offset), in
/// [`nisa::dma_copy`](crate::isa::dma_copy)) and each iteration's branch of a device loop it
/// bounds. (NKI 0.7's
/// guide: the value is read from the tile into a register at run time, and the instructions
/// that take it read that register.) Scalar loads all run on the Sync engine in program order,
/// so waiting for the latest one a value derives from waits for all of them.
#[derive(Clone, Copy, Debug)]
pub struct NkiScalar {
    /// The value (`None` in estimate mode for a value read from a tile).
    value: Option<i32>,
    /// The register written by the latest `scalar_load` the value derives from (`None` for
    /// compile-time values).
    reg: Option<Region>,
}

impl PartialEq for NkiScalar {
    /// Scalars are equal when their values are (the register they came from is timing only).
    fn eq(&self, o: &NkiScalar) -> bool {
        self.value == o.value
    }
}

impl Eq for NkiScalar {}

impl NkiScalar {
    /// A scalar of known value (loop induction variables, arithmetic results).
    pub(crate) fn known(v: i32) -> NkiScalar {
        NkiScalar {
            value: Some(v),
            reg: None,
        }
    }

    /// A scalar whose value is not known (estimate mode).
    pub(crate) fn unknown() -> NkiScalar {
        NkiScalar {
            value: None,
            reg: None,
        }
    }

    /// The register the value was loaded into by the latest `scalar_load` it derives from: the
    /// region what uses the scalar reads (so it waits for that load).
    pub(crate) fn register(&self) -> Option<Region> {
        self.reg
    }

    /// This scalar, also derived from `o`'s register (the later-loaded of the two).
    pub(crate) fn after(self, o: NkiScalar) -> NkiScalar {
        NkiScalar {
            value: self.value,
            reg: later(self.reg, o.reg),
        }
    }

    /// The value, when the launch computes values (`None` in estimate mode for scalars read
    /// from tiles). Host code cannot read device registers in NKI; this is for kernels'
    /// tests and checks.
    pub fn value(&self) -> Option<i64> {
        self.value.map(i64::from)
    }

    /// The scalar's dtype (`int32`).
    pub fn dtype(&self) -> DType {
        DType::I32
    }

    fn zip(self, o: NkiScalar, f: impl FnOnce(i32, i32) -> i32) -> NkiScalar {
        NkiScalar {
            value: self.value.zip(o.value).map(|(a, b)| f(a, b)),
            reg: later(self.reg, o.reg),
        }
    }
}

/// Of two registers, the one loaded later (registers take increasing buffer ids as they are
/// loaded).
fn later(a: Option<Region>, b: Option<Region>) -> Option<Region> {
    let id = |r: &Region| match r.buf {
        BufId::Tile(id) | BufId::Hbm(id) => id,
    };
    match (a, b) {
        (Some(x), Some(y)) => Some(if id(&y) > id(&x) { y } else { x }),
        (x, y) => x.or(y),
    }
}

impl From<i32> for NkiScalar {
    /// A compile-time constant as a scalar (what an integer operand of scalar arithmetic
    /// becomes).
    fn from(v: i32) -> NkiScalar {
        NkiScalar::known(v)
    }
}

/// An integer operand of scalar arithmetic: an `NkiScalar` or a plain integer (which must fit
/// 32 bits).
pub trait IntoScalar {
    /// The operand as a scalar (raises at `loc` when an integer does not fit 32 bits).
    fn into_scalar(self, loc: SourceLoc) -> NkiScalar;
}

impl IntoScalar for NkiScalar {
    fn into_scalar(self, _: SourceLoc) -> NkiScalar {
        self
    }
}

impl IntoScalar for &NkiScalar {
    fn into_scalar(self, _: SourceLoc) -> NkiScalar {
        *self
    }
}

macro_rules! int_scalar {
    ($($t:ty),*) => {$(
        impl IntoScalar for $t {
            fn into_scalar(self, loc: SourceLoc) -> NkiScalar {
                match i32::try_from(self) {
                    Ok(v) => NkiScalar::known(v),
                    Err(_) => raise(
                        NkiError::new(
                            ErrorKind::InvalidArgument,
                            "nki.isa.NkiScalar",
                            format!(
                                "integer {self} does not fit a 32-bit scalar register \
                                 (int32 scalars range over {}..={})",
                                i32::MIN,
                                i32::MAX
                            ),
                        ),
                        loc,
                    ),
                }
            }
        }
    )*};
}
int_scalar!(i32, i64, usize, u32, isize);

macro_rules! scalar_op {
    ($tr:ident, $m:ident, $f:ident) => {
        impl<R: IntoScalar> std::ops::$tr<R> for NkiScalar {
            type Output = NkiScalar;
            #[track_caller]
            fn $m(self, rhs: R) -> NkiScalar {
                let r = rhs.into_scalar(SourceLoc::caller());
                self.zip(r, i32::$f)
            }
        }
        impl<R: IntoScalar> std::ops::$tr<R> for &NkiScalar {
            type Output = NkiScalar;
            #[track_caller]
            fn $m(self, rhs: R) -> NkiScalar {
                let r = rhs.into_scalar(SourceLoc::caller());
                self.zip(r, i32::$f)
            }
        }
        impl std::ops::$tr<NkiScalar> for i32 {
            type Output = NkiScalar;
            fn $m(self, rhs: NkiScalar) -> NkiScalar {
                NkiScalar::known(self).zip(rhs, i32::$f)
            }
        }
    };
}
scalar_op!(Add, add, wrapping_add);
scalar_op!(Sub, sub, wrapping_sub);
scalar_op!(Mul, mul, wrapping_mul);

impl std::ops::Neg for NkiScalar {
    type Output = NkiScalar;
    fn neg(self) -> NkiScalar {
        NkiScalar {
            value: self.value.map(i32::wrapping_neg),
            reg: self.reg,
        }
    }
}

/// Checks that `t` is a 1x1 `int32` tile for `api`.
fn one_int32(ins: &Op, what: &str, t: &TileRef) {
    ins.operand(what, t);
    if t.dtype() != DType::I32 {
        ins.fail(
            ErrorKind::DType,
            format!(
                "{what} has dtype {}; a scalar register is read from and written to an int32 \
                 tile (0.7 also takes int64, which nki-rs has no tile dtype for)",
                t.dtype().name()
            ),
        );
    }
    if t.shape().iter().product::<usize>() != 1 {
        ins.fail(
            ErrorKind::ShapeMismatch,
            format!(
                "{what} has shape {:?}; a scalar is read from and written to a 1x1 tile",
                t.shape()
            ),
        );
    }
}

/// Reads the one `int32` element of a 1x1 SBUF tile into a scalar register (NKI 0.7
/// `nisa.scalar_load(src)`).
///
/// Recorded as one register load on the Sync engine's sequencer, reading `src`. Its cost is
/// the sequencer's floor (one `MIN_II`, 64 cycles): no public figure exists for register
/// loads (hardware.md §7 lists sequencer costs as a gap), so this is an assumption, the same
/// floor every non-TensorE instruction pays. In estimate mode the scalar has no value.
#[track_caller]
pub fn scalar_load<'a>(src: impl Into<TileRef<'a>>) -> NkiScalar {
    load_as("nisa.scalar_load", src.into())
}

/// [`scalar_load`] under the name of the call the user made (`api`: errors name it).
#[track_caller]
pub(crate) fn load_as(api: &'static str, src: TileRef<'_>) -> NkiScalar {
    let ins = Op::begin(api);
    one_int32(&ins, "src", &src);
    ins.memory("src", &src, &[MemKind::Sbuf]);
    let mut out = NkiScalar::unknown();
    // The register: a fresh one-word buffer the load writes and the scalar's users read
    // (the same region `HbmView::register` gives back).
    let reg = Region {
        buf: BufId::Tile(crate::tile::fresh_buffer_id()),
        p0: 0,
        p1: 1,
        lo: 0,
        hi: 4,
    };
    ins.issue(
        &[],
        || {
            let slots = src.gather_slots(ins.api, ins.loc);
            out = NkiScalar::known(DType::I32.int(slots[0]) as i32);
        },
        || {
            ins.record(Engine::Sync, Opcode::ScalarLoad)
                .size(1, 1)
                .dtypes(DType::I32, DType::I32)
                .reads([src.region()])
                .writes([reg])
                .done()
        },
    );
    out.reg = Some(reg);
    out
}

/// Writes a scalar register into the one element of a 1x1 `int32` SBUF tile (NKI 0.7
/// `nisa.scalar_store(dst, value)`). Recorded as one register store on the Sync engine
/// (cost: one `MIN_II`, the same assumption as [`scalar_load`]).
#[track_caller]
pub fn scalar_store<'d>(dst: impl Into<TileRef<'d>>, value: NkiScalar) {
    store_as("nisa.scalar_store", dst.into(), value)
}

/// [`scalar_store`] under the name of the call the user made (`api`: errors name it).
#[track_caller]
pub(crate) fn store_as(api: &'static str, dst: TileRef<'_>, value: NkiScalar) {
    let ins = Op::begin(api);
    one_int32(&ins, "dst", &dst);
    ins.memory("dst", &dst, &[MemKind::Sbuf]);
    ins.issue(
        &[&dst],
        || {
            let v = value.value.unwrap_or(0);
            dst.scatter_slots(vec![DType::I32.slot_of_int(i64::from(v))]);
        },
        || {
            ins.record(Engine::Sync, Opcode::ScalarStore)
                .size(1, 1)
                .dtypes(DType::I32, DType::I32)
                .writes([dst.region()])
                .done()
        },
    );
}

impl crate::hbm::HbmView {
    /// The view moved by a scalar along dimension `indirect_dim` of the tensor (NKI 0.7
    /// `tensor.ap(pattern, offset, scalar_offset=s, indirect_dim=d)`): element `e` of the new
    /// view is element `e + s * stride_d` of the tensor's row-major storage, where `stride_d`
    /// is the tensor's stride of dimension `d` (`s` rows when `d = 0`). As in NKI 0.7, a moved
    /// view outside the tensor is checked when the DMA runs: `nisa::dma_copy` of it is an
    /// [`ErrorKind::OutOfBounds`] error naming the op, the tensors, the scalar's value and the
    /// line under `oob_mode=error`, and skips the transfer (the destination keeps its values;
    /// the DMA is still issued and costed) under `oob_mode=skip`; any other use of its values
    /// (`nl::load`, `nl::store`, ...) is that error.
    ///
    /// In estimate mode a scalar read from a tile has no value: the view is taken unmoved.
    /// The DMA's size and cost do not depend on the offset; only the region its record
    /// names (the timing model's dependencies) may differ from the real one.
    ///
    /// A DMA of the moved view waits for the `scalar_load` the offset comes from (it reads the
    /// scalar's register, see [`NkiScalar`]).
    #[track_caller]
    pub fn scalar_offset(&self, s: NkiScalar, indirect_dim: usize) -> crate::hbm::HbmView {
        let loc = SourceLoc::caller();
        let fail = |msg: String| -> ! {
            raise(
                NkiError::new(ErrorKind::OutOfBounds, "scalar_offset", msg),
                loc,
            )
        };
        let dims = self.st.shape.dims();
        if indirect_dim >= dims.len() {
            fail(format!(
                "indirect_dim={indirect_dim} but tensor {} has {} dimensions {:?}",
                self.st.name,
                dims.len(),
                dims
            ));
        }
        let Some(v) = s.value() else {
            return self.clone().after_register(s.register());
        };
        let stride = self.st.whole.strides[indirect_dim] as i64;
        let mut ap = self.ap;
        let (lo, hi) = ap.span();
        let shift = v * stride;
        let numel = self.st.shape.numel() as i64;
        if lo as i64 + shift < 0 || hi as i64 + shift > numel {
            let why = format!(
                "scalar_offset {v} along dimension {indirect_dim} of tensor {} {:?} moves the \
                 view of shape {:?} (elements {lo}..{hi}) to elements {}..{}, outside the \
                 tensor's {numel}",
                self.st.name,
                dims,
                self.shape(),
                lo as i64 + shift,
                hi as i64 + shift
            );
            let mut out = self.clone().after_register(s.register());
            out.oob = Some(why.into());
            return out;
        }
        ap.offset = (ap.offset as i64 + shift) as usize;
        self.with_ap(ap).after_register(s.register())
    }
}

impl crate::hbm::HbmViewMut {
    /// [`HbmView::scalar_offset`](crate::hbm::HbmView::scalar_offset) of a writable view.
    #[track_caller]
    pub fn scalar_offset(&self, s: NkiScalar, indirect_dim: usize) -> crate::hbm::HbmViewMut {
        crate::hbm::HbmViewMut(self.0.scalar_offset(s, indirect_dim))
    }
}
