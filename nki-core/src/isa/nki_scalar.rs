//! `NkiScalar`: one integer computed on the device (NKI `nki.isa.NkiScalar`), read from a
//! 1x1 tile with [`scalar_load`], written back with [`scalar_store`], combined by
//! [`scalar_alu`](super::scalar_alu) and its operators (`+ - * / %`, the comparison methods),
//! and used as a bound of [`nl::fori_loop`](crate::lang::fori_loop), the condition of
//! [`nl::while_loop`](crate::lang::while_loop) and [`nl::if_else`](crate::lang::if_else) and a
//! dynamic DMA offset ([`HbmView::scalar_offset`](crate::hbm::HbmView::scalar_offset)).
//!
//! In execute and simulate modes a scalar holds its value; in estimate mode (no values) a
//! scalar read from a tile holds none, and whatever needs the value (a loop bound) takes it
//! from the launch's estimate options or fails with a clear error (see
//! [`nl::fori_loop`](crate::lang::fori_loop)).
//!
//! Dtypes (NKI 0.8's `nki.isa.NkiScalar` page): `int32` and `uint32` scalars take every
//! operation, `int64` ones only `+ - *` (comparisons, divide, fmod, maximum and minimum are
//! errors); arithmetic keeps the dtype and wraps at its width (`100000 * 100000` is
//! `1410065408` in int32); two scalars combined must have the same dtype, and an integer
//! operand takes the scalar's dtype (an error when it does not fit). Registers are 32-bit
//! on the sequencers [hardware.md §1 "control instructions"]; nki-rs has no int64 tile dtype,
//! so an int64 scalar is loaded from, and stored to, the two 32-bit words of a `[1, 2]` int32 or
//! uint32 tile, low word first (the bytes of one int64 element, little-endian):
//! [`scalar_load_i64`], and [`scalar_store`] of an int64 value.
//!
//! Engines (NKI 0.8): [`scalar_load_on`] binds a scalar to one engine's sequencer; a scalar
//! bound to an engine may be stored only by that engine and may not decide a branch (every
//! sequencer runs it); two scalars bound to different engines do not combine. A
//! [`scalar_store`] without an engine is replicated on every sequencer: each writes the value
//! and the next instruction reading the tile waits for all of those writes.

use super::op::Op;
use crate::context::raise;
use crate::dtype::DType;
use crate::error::{ErrorKind, NkiError, SourceLoc};
use crate::record::{BufId, Engine, MemKind, Opcode, Region};
use crate::tile::TileRef;

/// The dtype of a scalar (NKI 0.8: `nl.int32`, `nl.uint32`, `nl.int64`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScalarType {
    /// Signed 32-bit (every operation).
    Int32,
    /// Unsigned 32-bit (every operation; comparisons are unsigned).
    Uint32,
    /// Signed 64-bit (`+ - *` only).
    Int64,
}

impl ScalarType {
    /// NKI's name of the dtype.
    pub fn name(self) -> &'static str {
        match self {
            ScalarType::Int32 => "int32",
            ScalarType::Uint32 => "uint32",
            ScalarType::Int64 => "int64",
        }
    }

    /// The tile dtype a scalar of this type is loaded from and stored to (`None` for int64:
    /// nki-rs has no int64 tile dtype; an int64 lives in the two words of a `[1, 2]` int32 or
    /// uint32 tile).
    pub fn tile_dtype(self) -> Option<DType> {
        match self {
            ScalarType::Int32 => Some(DType::I32),
            ScalarType::Uint32 => Some(DType::U32),
            ScalarType::Int64 => None,
        }
    }

    /// `v` wrapped to this type's width (two's complement), as the registers hold it.
    pub(crate) fn wrap(self, v: i128) -> i64 {
        match self {
            ScalarType::Int32 => v as i32 as i64,
            ScalarType::Uint32 => v as u32 as i64,
            ScalarType::Int64 => v as i64,
        }
    }

    /// Whether `v` is a value of this type.
    pub(crate) fn holds(self, v: i64) -> bool {
        match self {
            ScalarType::Int32 => i32::try_from(v).is_ok(),
            ScalarType::Uint32 => u32::try_from(v).is_ok(),
            ScalarType::Int64 => true,
        }
    }
}

/// One integer held in a sequencer register (NKI `nki.isa.NkiScalar`; see the module docs for
/// its dtypes and engines).
///
/// Made by [`scalar_load`] (from a 1x1 `int32` or `uint32` tile), by a device loop (its
/// induction variable), by [`scalar_alu`](super::scalar_alu) and the operators (`i * 4 + 1`):
/// `+`, `-` (binary and unary) and `*` wrap at the dtype's width as the hardware's registers
/// do (`100000 * 100000` is `1410065408` in int32), `/` divides toward zero and `%` is fmod
/// (the sign of the dividend); the comparisons ([`NkiScalar::less`] and its siblings) give an
/// int32 0/1 scalar, usable as a loop bound, an offset, a stored value or a branch's
/// condition.
///
/// Timing: a scalar remembers the register its value came from (the latest [`scalar_load`] it
/// derives from, through arithmetic or a device loop's bounds), and what uses it waits for
/// that load: a DMA whose HBM side is moved by it
/// ([`HbmView::scalar_offset`](crate::hbm::HbmView::scalar_offset), in
/// [`nisa::dma_copy`](crate::isa::dma_copy)), each iteration's branch of a device loop it
/// bounds and each sequencer's branch of an [`nl::if_else`](crate::lang::if_else) it decides.
/// (NKI's guide: the value is read from the tile into a register at run time, and the
/// instructions that take it read that register.) Register arithmetic leaves no record of its
/// own [A: no public cost for a sequencer ALU operation; it is folded into the instruction
/// that takes the value].
#[derive(Clone, Copy, Debug)]
pub struct NkiScalar {
    /// The value (`None` in estimate mode for a value read from a tile).
    value: Option<i64>,
    /// The dtype.
    ty: ScalarType,
    /// The register written by the latest `scalar_load` the value derives from (`None` for
    /// compile-time values).
    reg: Option<Region>,
    /// The engine whose sequencer alone holds the value (`scalar_load_on`), if bound.
    engine: Option<Engine>,
    /// A compile-time integer (a Rust integer operand, NKI's Python `int`): it takes the
    /// other operand's dtype, and two of them combine at compile time.
    literal: bool,
}

impl PartialEq for NkiScalar {
    /// Scalars are equal when their values are (the register they came from is timing only).
    fn eq(&self, o: &NkiScalar) -> bool {
        self.value == o.value
    }
}

impl Eq for NkiScalar {}

impl NkiScalar {
    /// An int32 scalar of known value (loop induction variables, rank ids).
    pub(crate) fn known(v: i32) -> NkiScalar {
        NkiScalar::typed(Some(i64::from(v)), ScalarType::Int32)
    }

    /// A scalar of dtype `ty` holding `value` (`None`: not known), unbound and not from a
    /// load.
    pub(crate) fn typed(value: Option<i64>, ty: ScalarType) -> NkiScalar {
        NkiScalar {
            value,
            ty,
            reg: None,
            engine: None,
            literal: false,
        }
    }

    /// A compile-time integer operand (NKI's Python `int`).
    pub(crate) fn literal(v: i64) -> NkiScalar {
        NkiScalar {
            literal: true,
            ..NkiScalar::typed(Some(v), ScalarType::Int32)
        }
    }

    /// Whether this is a compile-time integer (resolved while tracing, as a Python `int`).
    pub(crate) fn is_literal(&self) -> bool {
        self.literal
    }

    /// The register the value was loaded into by the latest `scalar_load` it derives from: the
    /// region what uses the scalar reads (so it waits for that load).
    pub(crate) fn register(&self) -> Option<Region> {
        self.reg
    }

    /// This scalar, also derived from `o`'s register (the later-loaded of the two).
    pub(crate) fn after(self, o: NkiScalar) -> NkiScalar {
        NkiScalar {
            reg: later(self.reg, o.reg),
            ..self
        }
    }

    /// The value, when the launch computes values (`None` in estimate mode for scalars read
    /// from tiles). Host code cannot read device registers in NKI; this is for kernels'
    /// tests and checks. Inside the side of an [`nl::if_else`](crate::lang::if_else) the
    /// launch does not take, which is traced as the compiler sees it, only a compile-time
    /// integer has a value.
    pub fn value(&self) -> Option<i64> {
        match self.literal || !crate::shadow::active() {
            true => self.value,
            false => None,
        }
    }

    /// The scalar's dtype.
    pub fn dtype(&self) -> ScalarType {
        self.ty
    }

    /// The engine whose sequencer holds the value, when bound to one
    /// ([`scalar_load_on`]); `None`: available on every engine.
    pub fn engine(&self) -> Option<Engine> {
        self.engine
    }

    /// The two operands of a binary scalar operation at `loc`, as `api`: a literal takes the
    /// other's dtype (it must fit), two scalars must have one dtype and, when both are bound,
    /// one engine. Returns the operands' common dtype and engine.
    pub(crate) fn unify(
        self,
        o: NkiScalar,
        api: &'static str,
        loc: SourceLoc,
    ) -> (NkiScalar, NkiScalar, ScalarType, Option<Engine>) {
        let fail = |msg: String| -> ! { raise(NkiError::new(ErrorKind::DType, api, msg), loc) };
        let adopt = |lit: NkiScalar, ty: ScalarType| -> NkiScalar {
            let v = lit.value.unwrap_or(0);
            if !ty.holds(v) {
                fail(format!(
                    "integer {v} does not fit the other operand's dtype {}",
                    ty.name()
                ));
            }
            NkiScalar { ty, ..lit }
        };
        let (a, b) = match (self.literal, o.literal) {
            (true, false) => (adopt(self, o.ty), o),
            (false, true) => (self, adopt(o, self.ty)),
            _ => (self, o),
        };
        if a.ty != b.ty {
            fail(format!(
                "the operands are {} and {} scalars; scalars combined must have the same width \
                 and signedness",
                a.ty.name(),
                b.ty.name()
            ));
        }
        let engine = match (a.engine, b.engine) {
            (Some(x), Some(y)) if x != y => raise(
                NkiError::new(
                    ErrorKind::InvalidArgument,
                    api,
                    format!(
                        "the operands are bound to {} and {} (scalar_load(.., engine)); a \
                         scalar lives in one sequencer's registers, so two bound to different \
                         engines do not combine",
                        x.name(),
                        y.name()
                    ),
                ),
                loc,
            ),
            (x, y) => x.or(y),
        };
        (a, b, a.ty, engine)
    }

    /// The result of an operation on `a` and `b` (from [`NkiScalar::unify`]) whose value is
    /// `value`, of dtype `ty`.
    pub(crate) fn derived(
        a: NkiScalar,
        b: NkiScalar,
        value: Option<i64>,
        ty: ScalarType,
        engine: Option<Engine>,
    ) -> NkiScalar {
        NkiScalar {
            value,
            ty,
            reg: later(a.reg, b.reg),
            engine,
            literal: a.literal && b.literal,
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
    /// A constant as an int32 scalar (wrapping as a register does: `NkiScalar::from(100000) *
    /// 100000` is `1410065408`).
    fn from(v: i32) -> NkiScalar {
        NkiScalar::known(v)
    }
}

impl From<u32> for NkiScalar {
    /// A constant as a uint32 scalar.
    fn from(v: u32) -> NkiScalar {
        NkiScalar::typed(Some(i64::from(v)), ScalarType::Uint32)
    }
}

impl From<i64> for NkiScalar {
    /// A constant as an int64 scalar (`+ - *` only).
    fn from(v: i64) -> NkiScalar {
        NkiScalar::typed(Some(v), ScalarType::Int64)
    }
}

/// An integer operand of scalar arithmetic: an `NkiScalar` or a plain integer (a compile-time
/// value, which takes the other operand's dtype).
pub trait IntoScalar {
    /// The operand as a scalar (raises at `loc` when an integer does not fit 64 bits).
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
                match i64::try_from(self) {
                    Ok(v) => NkiScalar::literal(v),
                    Err(_) => raise(
                        NkiError::new(
                            ErrorKind::InvalidArgument,
                            "nki.isa.NkiScalar",
                            format!("integer {self} does not fit a 64-bit scalar"),
                        ),
                        loc,
                    ),
                }
            }
        }
    )*};
}
int_scalar!(i32, i64, usize, u32, isize, u64);

impl NkiScalar {
    /// A 32-bit value of this scalar for `api` at `loc` (a loop bound, a branch's condition):
    /// an int64 scalar is an error; a literal must fit int32.
    pub(crate) fn require_32(self, api: &'static str, loc: SourceLoc) -> NkiScalar {
        let bad = match (self.literal, self.ty) {
            (true, _) => !self.value.is_some_and(|v| ScalarType::Int32.holds(v)),
            (false, t) => t == ScalarType::Int64,
        };
        if bad {
            let what = match self.literal {
                true => format!("integer {}", self.value.unwrap_or(0)),
                false => format!("an {} scalar", self.ty.name()),
            };
            raise(
                NkiError::new(
                    ErrorKind::DType,
                    api,
                    format!("{what}: this takes a 32-bit value (int32 or uint32)"),
                ),
                loc,
            );
        }
        self
    }
}

/// Checks that `t` is a 1x1 `int32` or `uint32` tile for `api` (`wide`: a `[1, 2]` one holding
/// an int64's two words, low first); returns its scalar dtype.
fn one_scalar_tile(ins: &Op, what: &str, t: &TileRef, wide: bool) -> ScalarType {
    ins.operand(what, t);
    let ty = match t.dtype() {
        DType::I32 | DType::U32 if wide => ScalarType::Int64,
        DType::I32 => ScalarType::Int32,
        DType::U32 => ScalarType::Uint32,
        d => ins.fail(
            ErrorKind::DType,
            format!(
                "{what} has dtype {}; a scalar register is read from and written to an int32 \
                 or uint32 tile (an int64 one: the two words of a [1, 2] int32 or uint32 tile, \
                 as nki-rs has no int64 tile dtype)",
                d.name()
            ),
        ),
    };
    let (want, words) = if wide { ([1, 2], 2) } else { ([1, 1], 1) };
    if t.shape().iter().product::<usize>() != words || t.partitions() != 1 {
        ins.fail(
            ErrorKind::ShapeMismatch,
            format!(
                "{what} has shape {:?}; {} is read from and written to a {want:?} tile",
                t.shape(),
                match wide {
                    true => "an int64 scalar (its low and high words)",
                    false => "a scalar",
                }
            ),
        );
    }
    ty
}

/// Fails unless `engine` has a sequencer that holds scalars in nki-rs.
fn sequencer_engine(ins: &Op, engine: Engine) {
    if !crate::lang::SEQUENCERS.contains(&engine) {
        ins.fail(
            ErrorKind::InvalidArgument,
            format!(
                "engine={}: a scalar is bound to the sequencer of the Sync, Vector, Scalar or \
                 GpSimd engine (TensorE's and the DMA queues' work is triggered from those)",
                engine.name()
            ),
        );
    }
}

/// Reads the one element of a 1x1 `int32` or `uint32` SBUF tile into a scalar register of
/// that dtype (NKI `nisa.scalar_load(src)`), available on every engine.
///
/// Recorded as one register load on the Sync engine's sequencer, reading `src`. Its cost is
/// the sequencer's floor (one `MIN_II`, 64 cycles): no public figure exists for register
/// loads (hardware.md §7 lists sequencer costs as a gap), so this is an assumption, the same
/// floor every non-TensorE instruction pays. In estimate mode the scalar has no value.
#[track_caller]
pub fn scalar_load<'a>(src: impl Into<TileRef<'a>>) -> NkiScalar {
    load_as("nisa.scalar_load", src.into(), None, false)
}

/// Reads an int64 scalar from the two 32-bit words of a `[1, 2]` int32 or uint32 SBUF tile, low
/// word first (NKI `nisa.scalar_load` of an `nl.int64` tile: nki-rs has no int64 tile dtype, so
/// the tile holds the int64's eight bytes as two words, as they lie in memory). The scalar
/// takes `+ - *` only. One register load on the Sync engine, costed as [`scalar_load`].
#[track_caller]
pub fn scalar_load_i64<'a>(src: impl Into<TileRef<'a>>) -> NkiScalar {
    load_as("nisa.scalar_load", src.into(), None, true)
}

/// [`scalar_load`] into the register of one engine's sequencer (NKI 0.8
/// `nisa.scalar_load(src, engine=e)`; `e` one of Sync, Vector, Scalar, GpSimd): the load runs
/// on `e`, and the scalar is bound to it (stored only by `e`, no branch condition, combined
/// only with scalars of `e` or unbound ones).
#[track_caller]
pub fn scalar_load_on<'a>(src: impl Into<TileRef<'a>>, engine: Engine) -> NkiScalar {
    load_as("nisa.scalar_load", src.into(), Some(engine), false)
}

/// [`scalar_load`] under the name of the call the user made (`api`: errors name it), bound to
/// `engine` if given (`wide`: an int64 from a `[1, 2]` tile, [`scalar_load_i64`]).
#[track_caller]
pub(crate) fn load_as(
    api: &'static str,
    src: TileRef<'_>,
    engine: Option<Engine>,
    wide: bool,
) -> NkiScalar {
    let ins = Op::begin(api);
    let ty = one_scalar_tile(&ins, "src", &src, wide);
    ins.memory("src", &src, &[MemKind::Sbuf]);
    if let Some(e) = engine {
        sequencer_engine(&ins, e);
    }
    let mut out = NkiScalar::typed(None, ty);
    // The register: a fresh one-word buffer the load writes and the scalar's users read
    // (the same region `HbmView::register` gives back).
    let reg = Region {
        buf: BufId::Tile(crate::tile::fresh_buffer_id()),
        p0: 0,
        p1: 1,
        lo: 0,
        hi: if wide { 8 } else { 4 },
    };
    let dt = src.dtype();
    ins.issue(
        &[],
        || {
            let slots = src.gather_slots(ins.api, ins.loc);
            // The int64's words, bit for bit (int32 and uint32 slots hold their bits).
            let word = |k: usize| i128::from(slots[k].to_bits());
            out.value = Some(match wide {
                true => ty.wrap(word(0) | word(1) << 32),
                false => ty.wrap(i128::from(dt.int(slots[0]))),
            });
        },
        || {
            ins.record(engine.unwrap_or(Engine::Sync), Opcode::ScalarLoad)
                .size(1, if wide { 2 } else { 1 })
                .dtypes(dt, dt)
                .reads([src.region()])
                .writes([reg])
                .done()
        },
    );
    out.reg = Some(reg);
    out.engine = engine;
    out
}

/// Writes a scalar into the one element of a 1x1 SBUF tile of its dtype (NKI
/// `nisa.scalar_store(dst, value)`; an integer is stored as the tile's dtype). Without an
/// engine the store is replicated onto every sequencer (NKI 0.8's scalar page): one register
/// store on each of the Sync, Vector, Scalar and GpSimd engines, each waiting for the value's
/// `scalar_load`, and the next instruction reading `dst` waits for all of them; the value must
/// be available on every engine (one bound by [`scalar_load_on`] is an error: store it with
/// [`scalar_store_on`]). Each store costs one `MIN_II` (the same assumption as
/// [`scalar_load`]).
#[track_caller]
pub fn scalar_store<'d>(dst: impl Into<TileRef<'d>>, value: impl IntoScalar) {
    let loc = SourceLoc::caller();
    store_as(
        "nisa.scalar_store",
        dst.into(),
        value.into_scalar(loc),
        None,
    )
}

/// [`scalar_store`] by one engine's sequencer (NKI 0.8 `nisa.scalar_store(dst, value,
/// engine=e)`): one register store on `e`. A value bound to another engine is an error.
#[track_caller]
pub fn scalar_store_on<'d>(dst: impl Into<TileRef<'d>>, value: impl IntoScalar, engine: Engine) {
    let loc = SourceLoc::caller();
    store_as(
        "nisa.scalar_store",
        dst.into(),
        value.into_scalar(loc),
        Some(engine),
    )
}

/// [`scalar_store`] under the name of the call the user made (`api`: errors name it), on
/// `engine` (`None`: replicated onto every sequencer).
#[track_caller]
pub(crate) fn store_as(
    api: &'static str,
    dst: TileRef<'_>,
    value: NkiScalar,
    engine: Option<Engine>,
) {
    let ins = Op::begin(api);
    let wide = !value.literal && value.ty == ScalarType::Int64;
    let ty = one_scalar_tile(&ins, "dst", &dst, wide);
    ins.memory("dst", &dst, &[MemKind::Sbuf]);
    if let Some(e) = engine {
        sequencer_engine(&ins, e);
    }
    let value = match value.literal {
        true => value.unify(NkiScalar::typed(None, ty), ins.api, ins.loc).0,
        false => value,
    };
    if value.ty != ty {
        ins.fail(
            ErrorKind::DType,
            format!(
                "the value is an {} scalar and dst {} is {}: a scalar is stored into a tile \
                 of its dtype",
                value.ty.name(),
                dst.describe(),
                dst.dtype().name()
            ),
        );
    }
    match (value.engine, engine) {
        (Some(b), None) => ins.fail(
            ErrorKind::InvalidArgument,
            format!(
                "the value is bound to {} (scalar_load(.., engine)); a store without engine= \
                 runs on every sequencer, which each need the value: store it with \
                 engine={} (nisa::scalar_store_on)",
                b.name(),
                b.name()
            ),
        ),
        (Some(b), Some(e)) if b != e => ins.fail(
            ErrorKind::InvalidArgument,
            format!(
                "the value is bound to {} (scalar_load(.., engine)) and cannot be stored by {}",
                b.name(),
                e.name()
            ),
        ),
        _ => {}
    }
    let engines: &[Engine] = match &engine {
        Some(e) => std::slice::from_ref(e),
        None => &crate::lang::SEQUENCERS,
    };
    let dt = dst.dtype();
    for (k, &e) in engines.iter().enumerate() {
        ins.issue(
            &[&dst],
            || {
                if k == 0 {
                    let v = value.value.unwrap_or(0);
                    dst.scatter_slots(match wide {
                        true => vec![f32::from_bits(v as u32), f32::from_bits((v >> 32) as u32)],
                        false => vec![dt.slot_of_int(v)],
                    });
                }
            },
            || {
                let mut r = ins
                    .record(e, Opcode::ScalarStore)
                    .size(1, 1)
                    .dtypes(dt, dt)
                    .writes([dst.region()])
                    .done();
                r.reads.extend(value.reg);
                r
            },
        );
    }
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

impl crate::tensor::TensorRef<'_> {
    /// [`HbmView::scalar_offset`](crate::hbm::HbmView::scalar_offset) of a view of an HBM
    /// tensor the kernel allocated (`nl::ndarray(.., nl::shared_hbm)`, a 0.7/0.8 kernel's
    /// returned output): the same moved view, checked when the DMA runs. A view of an on-chip
    /// tensor is an error (NKI's `scalar_offset` moves an HBM access).
    #[track_caller]
    pub fn scalar_offset(&self, s: NkiScalar, indirect_dim: usize) -> Self {
        match self {
            crate::tensor::TensorRef::Hbm(v) => {
                crate::tensor::TensorRef::Hbm(v.scalar_offset(s, indirect_dim))
            }
            crate::tensor::TensorRef::Chip(t) => raise(
                NkiError::new(
                    ErrorKind::WrongMemory,
                    "scalar_offset",
                    format!(
                        "{} is on chip: a scalar offset moves a view of an HBM tensor",
                        t.describe()
                    ),
                ),
                SourceLoc::caller(),
            ),
        }
    }
}

impl crate::hbm::HbmViewMut {
    /// [`HbmView::scalar_offset`](crate::hbm::HbmView::scalar_offset) of a writable view.
    #[track_caller]
    pub fn scalar_offset(&self, s: NkiScalar, indirect_dim: usize) -> crate::hbm::HbmViewMut {
        crate::hbm::HbmViewMut(self.0.scalar_offset(s, indirect_dim))
    }
}
