//! The base every instruction builder (and every `nl` lowering) stands on: operand types
//! ([`Operand`]), the hardware's operand rules and shape checks, a new output or a
//! destination slice ([`Dst`]), the one engine choice for element-wise ALU ops
//! ([`alu_engine`]) and for a `tensor_scalar` with no engine named
//! ([`unnamed_tensor_scalar_engine`]), the DMA dimensions of a transfer, and the instruction
//! record builder ([`Rec`]). The rules are also methods of the op handle
//! ([`Op`](super::op::Op)), which fail with the op's NKI name and source line; the
//! `Result`-returning forms here serve callers that combine checks.

use crate::dtype::DType;
use crate::error::{ensure, ErrorKind, NkiError, Result};
use crate::hbm::view::HbmView;
use crate::math::AluOp;
use crate::record::{DmaDims, Engine, Instr, MatmulDims, MemKind, Opcode, Regions};
use crate::tile::tile_operand;
use crate::tile::{Tile, TileRef};

/// An element-wise operand: a tile view or a scalar.
#[derive(Clone, Copy, Debug)]
pub enum Operand<'a> {
    /// A tile (or view).
    Tile(TileRef<'a>),
    /// A scalar; `float` tells NKI's weak-type promotion whether it was a float literal.
    Scalar {
        /// The value: a float scalar's f32 value, or an integer scalar exactly.
        value: f64,
        /// True for floats (promotes ints to fp32), false for ints.
        float: bool,
    },
}

impl Operand<'_> {
    /// The dtype in which an exact integer operation reads the operand's slots: the tile's,
    /// int32 for an integer scalar (see [`Operand::scalar_slot`]), float32 for a float scalar.
    pub(crate) fn int_dtype(&self) -> DType {
        match self {
            Operand::Tile(t) => t.dtype(),
            Operand::Scalar { float: false, .. } => DType::I32,
            Operand::Scalar { .. } => DType::F32,
        }
    }

    /// A scalar's slot in [`Operand::int_dtype`] (exact for integer scalars), or its f32
    /// value when `slots` is false.
    pub(crate) fn scalar_slot(value: f64, float: bool, slots: bool) -> f32 {
        if slots && !float {
            DType::I32.slot_of_int(value as i64)
        } else {
            value as f32
        }
    }
}

impl From<f32> for Operand<'_> {
    fn from(v: f32) -> Self {
        Operand::Scalar {
            value: v as f64,
            float: true,
        }
    }
}
impl From<f64> for Operand<'_> {
    fn from(v: f64) -> Self {
        Operand::Scalar {
            value: v as f32 as f64,
            float: true,
        }
    }
}
impl From<i32> for Operand<'_> {
    fn from(v: i32) -> Self {
        Operand::Scalar {
            value: v as f64,
            float: false,
        }
    }
}
tile_operand!(Operand);
impl<'a> From<&'a TileRef<'a>> for Operand<'a> {
    fn from(t: &'a TileRef<'a>) -> Self {
        Operand::Tile(*t)
    }
}

/// Result dtype of a binary op under NKI promotion (or the explicit `dtype`).
pub(crate) fn result_dtype(x: &Operand, y: &Operand, dtype: Option<DType>) -> DType {
    if let Some(d) = dtype {
        return d;
    }
    match (x, y) {
        (Operand::Tile(a), Operand::Tile(b)) => DType::promote(a.dtype(), b.dtype()),
        (Operand::Tile(a), Operand::Scalar { float, .. })
        | (Operand::Scalar { float, .. }, Operand::Tile(a)) => {
            DType::promote_scalar(a.dtype(), *float)
        }
        _ => DType::F32,
    }
}

/// The engine of a copy whose engine the kernel leaves to the compiler (`nl.copy`,
/// `nl.broadcast_to`'s PSUM read-out): a copy out of PSUM runs on ScalarE, as the compiler
/// places it (calibration §3b: the 1024² transpose's PSUM -> SBUF copies ran on ScalarE,
/// leaving VectorE free); other copies on VectorE.
pub(crate) fn copy_engine(src: MemKind) -> Engine {
    match src {
        MemKind::Psum => Engine::Scalar,
        MemKind::Sbuf | MemKind::Hbm => Engine::Vector,
    }
}

/// The engine of a constant fill whose engine the kernel leaves to the compiler (`nl.zeros`,
/// `nl.full`, `nisa.memset` without `engine=`): a fill of PSUM runs on GpSimdE, where the
/// compiler put the PSUM memset that zeroes the accumulators of a tuned trn2 matmul kernel
/// (its hardware profile); other fills on VectorE (`nisa.memset`'s default engine, NKI 0.6+
/// `memset(dst, value)`).
pub(crate) fn fill_engine(dst: MemKind) -> Engine {
    match dst {
        MemKind::Psum => Engine::GpSimd,
        MemKind::Sbuf | MemKind::Hbm => Engine::Vector,
    }
}

/// THE engine choice for an element-wise ALU operator (NKI's classic engine table,
/// nki.api.shared "supported math operators"): `power`, and add/subtract/multiply computed
/// in 32-bit integers (`compute` is the promoted operand dtype), run on GpSimdE; everything
/// else on VectorE. GpSimdE cannot access PSUM, so an operand in PSUM (`in_psum`) keeps the
/// op on VectorE.
pub(crate) fn alu_engine(op: AluOp, compute: DType, in_psum: bool) -> Engine {
    let int32 = matches!(compute, DType::I32 | DType::U32)
        && matches!(op, AluOp::Add | AluOp::Subtract | AluOp::Multiply);
    if (op == AluOp::Power || int32) && !in_psum {
        Engine::GpSimd
    } else {
        Engine::Vector
    }
}

/// The operators of a `tensor_scalar`-class instruction whose kernel names no engine
/// (`nisa.tensor_scalar` without `engine`, NKI's `engine.unknown`; an `nl` element-wise op
/// with a scalar or `[P, 1]` operand): `(op0, op1)`, for [`Rec::unnamed_engine`].
pub(crate) type UnnamedOps = Option<(AluOp, Option<AluOp>)>;

/// THE engine choice for a `tensor_scalar`-class instruction whose kernel names no engine:
/// the engine on which the instruction, as recorded (`facts`: its shape, dtypes, PSUM side,
/// contiguity), costs least, VectorE or ScalarE, VectorE on a tie. Evidence: nki.isa
/// tensor_scalar's `engine` parameter, Beta 1 and 0.7 alike, is "`nki.isa.unknown_engine`
/// (default, let compiler select best engine based on the input tile shape)"; no public
/// source says what "best" weighs or that the compiler balances the engines' load, so the
/// choice is per instruction, by the target's own cost table ([`compute_ns`]), never by
/// what else is queued. ScalarE is a candidate only where the docs allow it there: on
/// NeuronCore-v3 and later (not trn1), for `multiply`, `add` or `multiply` then `add`.
/// GpSimdE (only `rsqrt` there) is never chosen.
///
/// [`compute_ns`]: crate::timing::cost::compute_ns
pub(crate) fn unnamed_tensor_scalar_engine(
    spec: &crate::target::TargetSpec,
    facts: crate::record::CostFacts,
    (op0, op1): (AluOp, Option<AluOp>),
) -> Engine {
    use crate::timing::cost::compute_ns;
    let scalar_ops = matches!(
        (op0, op1),
        (AluOp::Multiply, None) | (AluOp::Add, None) | (AluOp::Multiply, Some(AluOp::Add))
    );
    if !scalar_ops || spec.nc_version < 3 {
        return Engine::Vector;
    }
    let on = |engine| compute_ns(spec, crate::record::CostFacts { engine, ..facts });
    if on(Engine::Scalar) < on(Engine::Vector) {
        Engine::Scalar
    } else {
        Engine::Vector
    }
}

/// The DMA dimensions of a transfer between the HBM view `hbm` and the tile view `tile`
/// (`to_chip`: HBM -> tile).
#[inline]
pub(crate) fn dma_dims(hbm: &HbmView, tile: &TileRef, to_chip: bool) -> DmaDims {
    let bytes = (hbm.ap.shape.numel() * hbm.dtype().size()) as u64;
    let (src, dst) = if to_chip {
        (MemKind::Hbm, tile.mem())
    } else {
        (tile.mem(), MemKind::Hbm)
    };
    DmaDims {
        src,
        dst,
        bytes,
        partitions: tile.partitions() as u32,
        start_partition: tile.start_partition() as u32,
        chunk_bytes: (hbm.ap.contiguous_run().min(hbm.ap.shape.numel()) * hbm.dtype().size())
            as u64,
    }
}

/// Whether a DMA's on-chip side `t` is read or written in whole partition rows (unit
/// innermost stride, or one element per partition); a strided one moves element by element.
pub(crate) fn dma_rows_contiguous(t: &TileRef) -> bool {
    unit_stride(t)
}

/// The regions of the index tiles of the indirect views among `ops`, which their instruction
/// reads (tensor indirection).
pub(crate) fn ti_index_regions(ops: &[&TileRef]) -> Vec<crate::record::Region> {
    ops.iter()
        .filter_map(|t| t.ti_parts().map(|(_, index, _)| index.region()))
        .collect()
}

/// Whether the on-chip view `t` is read or written with a unit innermost stride (or one
/// element per partition). An indirect view (tensor indirection) never is: its columns are
/// wherever its offsets say, so it is costed as a strided access \[A: the docs give no figure
/// for tensor indirection; see `TargetSpec` `vector_perf_modes`\].
pub(crate) fn unit_stride(t: &TileRef) -> bool {
    t.ind.is_none() && (t.free_size() <= 1 || t.ap.inner_stride() == 1)
}

/// The partition start-offset rule: more than 64 partitions start at 0; 33..=64 at 0 or 64;
/// up to 32 at 0, 32, 64 or 96.
#[inline]
pub(crate) fn partition_start(op: &'static str, what: &str, t: &TileRef) -> Result<()> {
    if starts_legally(t) {
        Ok(())
    } else {
        Err(partition_start_error(op, what, t))
    }
}

/// The error of [`partition_start`].
#[cold]
fn partition_start_error(op: &'static str, what: &str, t: &TileRef) -> NkiError {
    let p = t.partitions();
    let s = t.start_partition();
    let valid = if p > 64 {
        "0"
    } else if p > 32 {
        "0 or 64"
    } else {
        "0, 32, 64 or 96"
    };
    NkiError::new(
        ErrorKind::PartitionOffset,
        op,
        format!(
            "operand '{what}' {} accesses {p} partitions starting at partition {s}; \
             an access of {p} partitions must start at partition {valid}",
            t.describe()
        ),
    )
}

/// True when view `t` starts on a partition its partition count allows (see
/// [`partition_start`]).
#[inline]
fn starts_legally(t: &TileRef) -> bool {
    let p = t.partitions();
    let s = t.start_partition();
    if p > 64 {
        s == 0
    } else if p > 32 {
        s == 0 || s == 64
    } else {
        s.is_multiple_of(32)
    }
}

/// The operand must live in one of `allowed` memories.
#[inline]
pub(crate) fn memory(op: &'static str, what: &str, t: &TileRef, allowed: &[MemKind]) -> Result<()> {
    if allowed.contains(&t.mem()) {
        return Ok(());
    }
    Err(memory_error(op, what, t, allowed))
}

/// The error of [`memory`].
#[cold]
fn memory_error(op: &'static str, what: &str, t: &TileRef, allowed: &[MemKind]) -> NkiError {
    let names: Vec<&str> = allowed.iter().map(|m| m.name()).collect();
    NkiError::new(
        ErrorKind::WrongMemory,
        op,
        format!(
            "expected operand '{what}' of '{op}' to be in address space '{}', but got a tile in '{}' instead ({})",
            names.join("|"),
            t.mem().name(),
            t.describe()
        ),
    )
}

/// Two operands must have the same number of partitions (NKI's
/// `err_num_partition_mismatch`, naming the op as `name`).
pub(crate) fn partitions_match(
    op: &'static str,
    name: &str,
    a: (&str, &TileRef),
    b: (&str, &TileRef),
) -> Result<()> {
    if a.1.partitions() == b.1.partitions() {
        return Ok(());
    }
    Err(NkiError::new(
        ErrorKind::PartitionMismatch,
        op,
        format!(
            "number of partitions (dimension 0 size of a tile) mismatch in parameters ({}{:?}, {}{:?}) of '{name}'",
            a.0,
            a.1.shape(),
            b.0,
            b.1.shape()
        ),
    ))
}

/// Two operands must have the same number of partitions.
pub(crate) fn same_partitions(
    op: &'static str,
    a: (&str, &TileRef),
    b: (&str, &TileRef),
) -> Result<()> {
    partitions_match(op, op, a, b)
}

/// Standard checks of an on-chip operand: start-offset rule.
#[inline]
pub(crate) fn operand(op: &'static str, what: &str, t: &TileRef) -> Result<()> {
    partition_start(op, what, t)
}

/// The short NKI name of an instruction (`nisa.tensor_tensor` -> `tensor_tensor`).
pub(crate) fn short(api: &'static str) -> &'static str {
    api.strip_prefix("nisa.").unwrap_or(api)
}

/// `t` must be a `[p, 1]` vector.
pub(crate) fn per_partition_shape(
    api: &'static str,
    what: &str,
    t: &TileRef,
    p: usize,
) -> Result<()> {
    ensure(
        t.partitions() == p,
        ErrorKind::PartitionMismatch,
        api,
        || {
            format!(
            "number of partitions (dimension 0 size of a tile) mismatch in parameters (data[{p}, ...], {what}{:?}) of '{}'",
            t.shape(),
            short(api)
        )
        },
    )?;
    ensure(t.free_size() == 1, ErrorKind::ShapeMismatch, api, || {
        format!(
            "'{what}' of '{}' must be a scalar or a vector of shape [{p}, 1] (one element per partition), got {}",
            short(api),
            t.describe()
        )
    })?;
    Ok(())
}

/// Where an instruction writes its result: a new tile, or part of an existing one.
///
/// Every builder takes one; the dst-first `nisa::x(dst, ...)` writes into `dst` (`Dst::Into`,
/// NKI 0.7's `nisa.x(dst=...)`), and the Beta-1 `nisa::classic::x(...)` returns a new tile
/// (`Dst::New`): one instruction either way.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Dst<'d> {
    /// A new tile; `Some(dtype)` overrides the instruction's default output dtype.
    New(Option<DType>),
    /// This view of an existing tile; the result is rounded to its dtype.
    Into(TileRef<'d>),
}

/// The output of an instruction: the new tile it allocated, or the destination view.
pub(crate) enum Output<'d> {
    /// A new tile.
    New(Tile),
    /// Part of an existing tile.
    Into(TileRef<'d>),
}

impl Output<'_> {
    /// The view the instruction writes.
    pub(crate) fn view(&self) -> TileRef<'_> {
        match self {
            Output::New(t) => t.view(),
            Output::Into(v) => *v,
        }
    }

    /// The new tile (the value of a non-destination builder).
    pub(crate) fn tile(self) -> Tile {
        match self {
            Output::New(t) => t,
            Output::Into(_) => unreachable!("a builder given Dst::New returns a new tile"),
        }
    }
}

/// Which instruction is being issued: its engine and opcode (and the ALU operator, for the
/// instructions whose cost depends on it).
#[derive(Clone, Copy)]
pub(crate) struct Site {
    pub(super) engine: Engine,
    pub(super) opcode: Opcode,
    pub(super) alu: Option<AluOp>,
    pub(super) accumulate: bool,
    /// The operators of a `tensor_scalar` whose kernel named no engine (the record moves to
    /// the compiler's engine, [`Rec::unnamed_engine`]).
    pub(super) unnamed: UnnamedOps,
}

impl Site {
    /// The instruction `opcode` on `engine`.
    pub(crate) fn new(engine: Engine, opcode: Opcode) -> Site {
        Site {
            engine,
            opcode,
            alu: None,
            accumulate: false,
            unnamed: None,
        }
    }

    /// The same instruction, with operators `ops` when the kernel named no engine for it (the
    /// compiler picks, [`unnamed_tensor_scalar_engine`]).
    pub(crate) fn unnamed(self, unnamed: UnnamedOps) -> Site {
        Site { unnamed, ..self }
    }

    /// The same instruction, recorded as also reducing into the engine's accumulator.
    pub(crate) fn accumulating(self, accumulate: bool) -> Site {
        Site { accumulate, ..self }
    }

    /// The same instruction, recorded with ALU operator `op`.
    pub(crate) fn with_alu(self, op: AluOp) -> Site {
        Site {
            alu: Some(op),
            ..self
        }
    }
}

/// THE instruction-record builder: every record of an `nl`/`nisa`/HBM op is made by
/// [`Op::record`](super::op::Op::record) (or, in its slot, by
/// [`Op::issue_in_place`](super::op::Op::issue_in_place)) and these setters (no record
/// is assembled field by field elsewhere).
/// Unset fields keep [`Instr::new`]'s defaults: one input, fp32 in and out, no PSUM,
/// contiguous, no TensorE or DMA sizes, no ALU operator, no accumulate, nothing read or
/// written.
///
/// The record is held in a `ManuallyDrop` so that [`Rec::done`] can move it out without
/// writing a replacement (a record is ~320 bytes and this is the estimate hot path); `taken`
/// makes a second `done` a panic rather than a second owner of the same record.
///
/// A `Rec<&mut Instr>` ([`Op::issue_in_place`](super::op::Op::issue_in_place)) sets the
/// fields of a record already in its slot of the launch's record buffer instead: it owns
/// nothing and has no `done`.
#[must_use = "a record builder does nothing until `done`"]
pub(crate) struct Rec<I = std::mem::ManuallyDrop<Instr>> {
    instr: I,
    taken: bool,
}

/// Setters of [`Rec`]: `name(value)` sets the record's field of that name (or the listed
/// fields) to the argument.
macro_rules! rec_setters {
    ($($(#[$doc:meta])* $name:ident($($arg:ident: $ty:ty => $field:ident $(as $wrap:ident)?),+);)*) => {$(
        $(#[$doc])*
        #[inline(always)]
        pub(crate) fn $name(&mut self, $($arg: $ty),+) -> &mut Self {
            $(self.instr.$field = $($wrap)?($arg);)+
            self
        }
    )*};
}

impl<'r> Rec<&'r mut Instr> {
    /// The builder of the record in `instr` (its slot).
    #[inline(always)]
    pub(super) fn at(instr: &'r mut Instr) -> Self {
        Rec {
            instr,
            taken: false,
        }
    }
}

impl<I: std::ops::DerefMut<Target = Instr>> Rec<I> {
    rec_setters! {
        /// Partitions processed and free elements per partition (N of the cost formulas).
        size(partitions: u32 => partitions, free: u32 => free);
        /// Number of tile inputs the engine reads.
        inputs(n: u8 => inputs);
        /// Dtypes of the (first) input and of the output.
        dtypes(input: DType => in_dtype, output: DType => out_dtype);
        /// Whether an input or the output is in PSUM.
        psum(psum: bool => psum);
        /// Whether every on-chip access has a unit innermost stride.
        contiguous(contiguous: bool => contiguous);
        /// The ALU operator, if the instruction has one.
        alu(alu: Option<AluOp> => alu);
        /// Whether the instruction also reduces into the engine's accumulator.
        accumulate(accumulate: bool => accumulate);
        /// TensorE sizes.
        matmul(dims: MatmulDims => matmul as Some);
        /// DMA sizes.
        dma(dims: DmaDims => dma as Some);
    }

    /// The regions read.
    #[inline(always)]
    pub(crate) fn reads(&mut self, reads: impl Into<Regions<3>>) -> &mut Self {
        // A taken builder no longer owns its regions: assigning would drop them again.
        assert!(!self.taken, "a record builder used after `done`");
        self.instr.reads = reads.into();
        self
    }

    /// The regions written.
    #[inline(always)]
    pub(crate) fn writes(&mut self, writes: impl Into<Regions<1>>) -> &mut Self {
        // A taken builder no longer owns its regions: assigning would drop them again.
        assert!(!self.taken, "a record builder used after `done`");
        self.instr.writes = writes.into();
        self
    }

    /// Reads the tile `inputs` (all of them) and writes `out`: PSUM when an input is in PSUM,
    /// contiguous when every input has a unit innermost stride.
    #[inline(always)]
    pub(crate) fn over<'t, 'a: 't>(
        &mut self,
        inputs: impl Iterator<Item = &'t TileRef<'a>> + Clone,
        out: &TileRef,
    ) -> &mut Self {
        self.psum(inputs.clone().any(|t| t.mem() == MemKind::Psum))
            .contiguous(inputs.clone().all(|t| t.ap.inner_stride() == 1))
            .reads(inputs.map(|t| t.region()).collect::<Regions<3>>())
            .writes([out.region()])
    }

    /// Moves a `tensor_scalar`-class record whose kernel named no engine (`ops` is `Some`) to
    /// the engine the compiler picks for it ([`unnamed_tensor_scalar_engine`]), from the
    /// fields set so far (call it last).
    #[inline]
    pub(crate) fn unnamed_engine(
        &mut self,
        target: crate::target::Target,
        ops: UnnamedOps,
    ) -> &mut Self {
        if let Some(ops) = ops {
            let facts = self.instr.cost;
            self.instr.engine = unnamed_tensor_scalar_engine(target.spec(), facts, ops);
        }
        self
    }
}

impl Rec {
    /// A builder of the new record `instr` (see [`Op::record`](super::op::Op::record)).
    #[inline(always)]
    pub(super) fn new(instr: Instr) -> Rec {
        Rec {
            instr: std::mem::ManuallyDrop::new(instr),
            taken: false,
        }
    }

    /// The record. Ends the builder: a second `done` panics.
    #[inline(always)]
    pub(crate) fn done(&mut self) -> Instr {
        assert!(!self.taken, "a record builder ended twice");
        self.taken = true;
        // SAFETY: `taken` was false, so the record was not moved out before; it is moved out
        // once here and never read or dropped through this builder again: `Rec` has no
        // `Drop`, the setters of fields that own memory (`reads`, `writes`) panic on a taken
        // builder, and the other setters only overwrite plain values.
        unsafe { std::mem::ManuallyDrop::take(&mut self.instr) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::SourceLoc;

    fn builder() -> Rec {
        let r = Instr::new(
            Engine::Vector,
            Opcode::TensorCopy,
            "test",
            SourceLoc::caller(),
        );
        Rec {
            instr: std::mem::ManuallyDrop::new(r),
            taken: false,
        }
    }

    #[test]
    #[should_panic(expected = "ended twice")]
    fn a_builder_ended_twice_panics_instead_of_handing_out_its_record_twice() {
        let mut r = builder();
        r.size(4, 8);
        let first = r.done();
        assert_eq!((first.partitions, first.free), (4, 8));
        let _second = r.done();
    }

    #[test]
    #[should_panic(expected = "used after `done`")]
    fn setting_regions_on_an_ended_builder_panics() {
        let mut r = builder();
        let _first = r.done();
        r.reads(Regions::<3>::new());
    }
}
