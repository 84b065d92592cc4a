//! The base every instruction builder (and every `nl` lowering) stands on: operand types
//! ([`Operand`]), the hardware's operand rules and shape checks, output allocation or a
//! destination slice ([`Dst`]), the one engine choice for element-wise ALU ops
//! ([`alu_engine`]) and for a `tensor_scalar` with no engine named
//! ([`unnamed_tensor_scalar_engine`]), the DMA dimensions of a transfer, and the record of a compute
//! instruction. Rules are methods of the op handle ([`Op`]) so they fail with the op's NKI
//! name and source line; the `Result`-returning forms serve callers that combine checks.

use crate::access::Shape;
use crate::builder::tile_operand;
use crate::context::Op;
use crate::dtype::DType;
use crate::error::{ensure, ErrorKind, NkiError, Result};
use crate::hbm::view::HbmView;
use crate::math::AluOp;
use crate::record::{DmaDims, Engine, Instr, MatmulDims, MemKind, Opcode, Regions};
use crate::tile::{Fill, Tile, TileRef};

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
fn partitions_match(
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

/// A per-partition operand checked against a data tile of `p` partitions: a scalar broadcast
/// to every element, or a `[P, 1]` vector broadcast along the free dimension.
#[derive(Clone, Copy, Debug)]
pub(crate) enum PerPartition<'a> {
    Scalar(f64),
    Vector(TileRef<'a>),
}

impl<'a> PerPartition<'a> {
    /// The value of each of the `p` partitions (executes only).
    pub(crate) fn values(&self, op: &Op, p: usize) -> Vec<f32> {
        match self {
            PerPartition::Scalar(v) => vec![*v as f32; p],
            PerPartition::Vector(t) => op.read(t),
        }
    }

    /// The exact integer value of each of the `p` partitions (executes only): an integer
    /// scalar as given, a vector tile's slots read as integers of its dtype.
    pub(crate) fn ints(&self, op: &Op, p: usize) -> Vec<i64> {
        match self {
            PerPartition::Scalar(v) => vec![*v as i64; p],
            PerPartition::Vector(t) => {
                let d = t.dtype();
                t.gather_slots(op.api, op.loc)
                    .into_iter()
                    .map(|s| d.int(s))
                    .collect()
            }
        }
    }

    /// The vector operand, if any.
    pub(crate) fn tile(&self) -> Option<&TileRef<'a>> {
        match self {
            PerPartition::Scalar(_) => None,
            PerPartition::Vector(t) => Some(t),
        }
    }
}

/// Which instruction is being issued: its engine and opcode (and the ALU operator, for the
/// instructions whose cost depends on it).
#[derive(Clone, Copy)]
pub(crate) struct Site {
    engine: Engine,
    opcode: Opcode,
    alu: Option<AluOp>,
    accumulate: bool,
    /// The operators of a `tensor_scalar` whose kernel named no engine (the record moves to
    /// the compiler's engine, [`Rec::unnamed_engine`]).
    unnamed: UnnamedOps,
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

/// The operand rules and the output handling of every instruction, as methods of the op
/// handle (they fail with the op's name and line).
impl Op {
    /// Fails unless `op` (the argument `what`) is one of `allowed`, listing them.
    pub(crate) fn require_alu(&self, what: &str, op: AluOp, allowed: &[AluOp]) {
        if allowed.contains(&op) {
            return;
        }
        let names: Vec<&str> = allowed.iter().map(|a| a.name()).collect();
        let list = match names.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            _ => names.join(""),
        };
        self.fail(
            ErrorKind::InvalidArgument,
            format!("{what} '{op}' of '{}' must be {list}", short(self.api)),
        );
    }

    /// THE funnel for this op: executes (unless estimating), records (unless only executing)
    /// and, in estimate mode, marks `outs` written (the views whose regions the record writes)
    /// so later reads of them are not flagged as uninitialised.
    pub(crate) fn issue(
        &self,
        outs: &[&TileRef],
        exec: impl FnOnce(),
        record: impl FnOnce() -> Instr,
    ) {
        self.funnel(outs, || crate::context::issue(self.env, exec, record));
    }

    /// [`Op::issue`] of a one-step op whose record (`api`'s instruction `opcode` on `engine`,
    /// see [`Op::record_as`]) is built in its slot of the launch's record buffer: `fill` sets
    /// its fields. `fill` only sets fields: it runs while the instance context is borrowed
    /// (see `InstanceCtx::push_in_place`) and must not issue, allocate or drop tiles.
    #[inline]
    pub(crate) fn issue_in_place(
        &self,
        outs: &[&TileRef],
        exec: impl FnOnce(),
        (api, engine, opcode): (&'static str, Engine, Opcode),
        fill: impl FnOnce(&mut Rec<&mut Instr>),
    ) {
        self.funnel(outs, || {
            crate::context::issue_in_place(
                self.env,
                exec,
                || self.new_record(api, engine, opcode),
                |instr| fill(&mut Rec::at(instr)),
            )
        });
    }

    /// Around `issue` (the funnel proper): the checks every instruction passes first, and in
    /// estimate mode the marking of `outs` as written after.
    #[inline(always)]
    fn funnel(&self, outs: &[&TileRef], issue: impl FnOnce()) {
        crate::context::raise_foreign_use(self.api, self.loc);
        if let Some(o) = outs.iter().find(|o| o.ap.repeats()) {
            self.broadcast_write(o);
        }
        issue();
        if !self.env.executes {
            for o in outs {
                o.mark_written();
            }
        }
    }

    /// Fails: the instruction writes through `out`, a view that repeats elements
    /// (`broadcast`), which would write one element several times.
    #[cold]
    fn broadcast_write(&self, out: &TileRef) -> ! {
        self.fail(
            ErrorKind::InvalidArgument,
            format!(
                "cannot write through {}: it repeats elements (a broadcast view, stride 0) \
                 and is read-only",
                out.describe()
            ),
        )
    }

    /// Fails with a dtype error unless the dtype of the operand `t` is `ok`; `message` gets
    /// `t`'s description (built only on failure).
    #[inline]
    pub(crate) fn dtype_rule(
        &self,
        t: &TileRef,
        ok: impl FnOnce(DType) -> bool,
        message: impl FnOnce(String) -> String,
    ) {
        if !ok(t.dtype()) {
            self.fail(ErrorKind::DType, message(t.describe()));
        }
    }

    /// The `(rows, columns)` of the 2-D HBM view `v`; a view of another rank fails with
    /// "`wants`, got <v> of <n> dimensions".
    pub(crate) fn hbm_2d(&self, v: &HbmView, wants: &str) -> (usize, usize) {
        match *v.shape() {
            [rows, cols] => (rows, cols),
            ref s => self.fail(
                ErrorKind::InvalidArgument,
                format!("{wants}, got {} of {} dimensions", v.describe(), s.len()),
            ),
        }
    }

    /// The partition-start rule for every on-chip operand.
    #[inline]
    pub(crate) fn operand(&self, what: &str, t: &TileRef) {
        self.check(operand(self.api, what, t));
    }

    /// The operand must live in one of `allowed`.
    #[inline]
    pub(crate) fn memory(&self, what: &str, t: &TileRef, allowed: &[MemKind]) {
        self.check(memory(self.api, what, t, allowed));
    }

    /// NKI's `err_num_partition_mismatch`, verbatim: "number of partitions (dimension 0 size
    /// of a tile) mismatch in parameters (data1[128, 512], data2[1, 512]) of 'tensor_tensor'".
    pub(crate) fn same_partitions(&self, a: (&str, &TileRef), b: (&str, &TileRef)) {
        self.check(partitions_match(self.api, short(self.api), a, b));
    }

    /// Two full-size operands must hold the same number of elements per partition.
    pub(crate) fn same_free(&self, a: (&str, &TileRef), b: (&str, &TileRef)) {
        if a.1.free_size() != b.1.free_size() {
            self.fail(
                ErrorKind::ShapeMismatch,
                format!(
                    "number of elements per partition mismatch in parameters ({}{:?}, {}{:?}) of '{}': {} vs {}",
                    a.0,
                    a.1.shape(),
                    b.0,
                    b.1.shape(),
                    short(self.api),
                    a.1.free_size(),
                    b.1.free_size()
                ),
            );
        }
    }

    /// The two data tiles of an element-wise instruction: each a valid operand, with the same
    /// partitions and elements per partition, not both in PSUM.
    pub(crate) fn data_pair(&self, a: (&str, &TileRef), b: (&str, &TileRef)) {
        self.operand(a.0, a.1);
        self.operand(b.0, b.1);
        self.same_partitions(a, b);
        self.same_free(a, b);
        self.not_both_psum(a, b);
    }

    /// Two tile inputs of one VectorE instruction cannot both be read from PSUM.
    pub(crate) fn not_both_psum(&self, a: (&str, &TileRef), b: (&str, &TileRef)) {
        if a.1.mem() == MemKind::Psum && b.1.mem() == MemKind::Psum {
            self.fail(
                ErrorKind::WrongMemory,
                format!(
                    "operands '{}' ({}) and '{}' ({}) of '{}' cannot both be in psum; move one to sbuf first",
                    a.0,
                    a.1.describe(),
                    b.0,
                    b.1.describe(),
                    short(self.api)
                ),
            );
        }
    }

    /// `engine` must be one of `allowed` for this instruction.
    pub(crate) fn engine_in(&self, engine: Engine, allowed: &[Engine]) {
        self.one_of(
            ErrorKind::InvalidArgument,
            &engine,
            allowed,
            |e| e.name(),
            |list| {
                format!(
                    "'{}' cannot run on {}; supported engines: {list}",
                    short(self.api),
                    engine.name()
                )
            },
        );
    }

    /// Fails with a `kind` error unless `x` is one of `allowed`; `message` gets the list of
    /// the allowed values' names (`name`), joined by ", ".
    #[inline]
    pub(crate) fn one_of<T: PartialEq, N: std::fmt::Display>(
        &self,
        kind: ErrorKind,
        x: &T,
        allowed: &[T],
        name: impl Fn(&T) -> N,
        message: impl FnOnce(String) -> String,
    ) {
        if !allowed.contains(x) {
            let names: Vec<String> = allowed.iter().map(|a| name(a).to_string()).collect();
            self.fail(kind, message(names.join(", ")));
        }
    }

    /// The operand rule ([`Op::operand`]) for the operand `what` of an instruction on
    /// `engine`, then GpSimdE's ([`Op::gpsimd_sbuf`]) when it runs there.
    pub(crate) fn operand_on(&self, engine: Engine, what: &str, t: &TileRef) {
        self.operand(what, t);
        if engine == Engine::GpSimd {
            self.gpsimd_sbuf(what, t);
        }
    }

    /// GpSimdE cannot read or write PSUM.
    pub(crate) fn gpsimd_sbuf(&self, what: &str, t: &TileRef) {
        if t.mem() == MemKind::Psum {
            self.fail(
                ErrorKind::WrongMemory,
                format!(
                    "expected operand '{what}' of '{}' to be in address space 'sbuf', but got a tile in 'psum' instead ({}): GpSimd Engine cannot access psum",
                    short(self.api),
                    t.describe()
                ),
            );
        }
    }

    /// Validates `o` as a scalar or a `[p, 1]` tile (any number of size-1 free dims).
    pub(crate) fn per_partition<'a>(
        &self,
        what: &str,
        o: Operand<'a>,
        p: usize,
    ) -> PerPartition<'a> {
        match o {
            Operand::Scalar { value, .. } => PerPartition::Scalar(value),
            Operand::Tile(t) => {
                self.check(per_partition_shape(self.api, what, &t, p));
                self.operand(what, &t);
                PerPartition::Vector(t)
            }
        }
    }

    /// Allocates a new, unwritten output tile of `dims` (checked as a tile shape).
    pub(crate) fn alloc(&self, mem: MemKind, dtype: DType, dims: &[usize]) -> Tile {
        self.alloc_with(mem, dtype, dims, Fill::Unwritten)
    }

    /// Allocates a new, unwritten tile of `dims` that this op writes whole before anything
    /// reads it ([`Fill::ResultOfOp`]: its issue must write the whole tile and its record
    /// must not read it).
    pub(crate) fn alloc_result(&self, mem: MemKind, dtype: DType, dims: &[usize]) -> Tile {
        self.alloc_with(mem, dtype, dims, Fill::ResultOfOp)
    }

    /// [`Op::alloc_result`] of a tile of `shape` (a shape already checked as a view's).
    pub(crate) fn alloc_result_shaped(&self, mem: MemKind, dtype: DType, shape: Shape) -> Tile {
        Tile::alloc(self.api, mem, dtype, shape, Fill::ResultOfOp, self.loc)
    }

    /// Allocates a new tile of `dims` filled with `value` (written from the start).
    pub(crate) fn alloc_filled(
        &self,
        mem: MemKind,
        dtype: DType,
        dims: &[usize],
        value: f32,
    ) -> Tile {
        self.alloc_with(mem, dtype, dims, Fill::Value(value))
    }

    /// Allocates a new tile of `dims` (checked as a tile shape: at most
    /// [`crate::access::MAX_DIMS`] dims, none zero), starting as `fill` says.
    fn alloc_with(&self, mem: MemKind, dtype: DType, dims: &[usize], fill: Fill) -> Tile {
        let shape = match Shape::new(dims) {
            Ok(s) => s,
            Err(e) => self.fail(e.kind(), e.message().to_string()),
        };
        Tile::alloc(self.api, mem, dtype, shape, fill, self.loc)
    }

    /// The values of the input view `t`, in row-major order (a pooled buffer).
    pub(crate) fn read(&self, t: &TileRef) -> Vec<f32> {
        t.gather(self.api, self.loc)
    }

    /// The output of an instruction whose result is `dims` of `dtype` (default) in `mem`:
    /// a new tile, or the destination view, which must have the result's partition count
    /// and elements per partition, start on a legal partition and live in `mem` (or PSUM
    /// when `psum_ok`). The result is rounded to the destination's dtype.
    pub(crate) fn output<'d>(
        &self,
        dst: Dst<'d>,
        mem: MemKind,
        dtype: DType,
        dims: &[usize],
        psum_ok: bool,
    ) -> Output<'d> {
        match dst {
            Dst::New(d) => Output::New(self.alloc(mem, d.unwrap_or(dtype), dims)),
            Dst::Into(t) => {
                let free: usize = dims[1..].iter().product();
                if t.partitions() != dims[0] || t.free_size() != free.max(1) {
                    self.fail(
                        ErrorKind::ShapeMismatch,
                        format!(
                            "destination dst{:?} of '{}' does not match the result shape {dims:?} (partitions and elements per partition must agree; dst is {})",
                            t.shape(),
                            short(self.api),
                            t.describe()
                        ),
                    );
                }
                self.operand("dst", &t);
                let allowed: &[MemKind] = if psum_ok {
                    &[MemKind::Sbuf, MemKind::Psum]
                } else {
                    &[mem]
                };
                self.memory("dst", &t, allowed);
                Output::Into(t)
            }
        }
    }

    /// Issues a compute instruction through the funnel ([`Op::issue`]): `exec` computes the
    /// values of `outs`. The record reads `data` (the full-size inputs; the cost's N is the
    /// free size of the first) and `extra` (per-partition operands) and writes `outs` (the
    /// first one's dtype is the output dtype).
    pub(crate) fn compute(
        &self,
        site: Site,
        data: &[&TileRef],
        extra: &[&TileRef],
        outs: &[&TileRef],
        exec: impl FnOnce(),
    ) {
        let ops = Operands { data, extra, outs };
        if let Some(all) = ops.indirect() {
            self.indirection(site.engine, &all);
        }
        self.issue(outs, exec, || ops.record(self, site));
    }

    /// THE check of NeuronCore-v4 tensor indirection (NKI 0.7 `tensor.indirect(index)`) for
    /// an instruction on `engine` with operands `ops`, called by the funnel of every compute
    /// instruction ([`Op::compute`]) and of the TensorE matmuls before they issue: an
    /// indirect operand needs a NeuronCore-v4 target, its view and its index start on a
    /// partition that is a multiple of the engine's group `G` (16 on the Vector, Scalar and
    /// GpSimd Engines, 32, a quadrant, on the Tensor Engine) and have `P <= G` or a multiple
    /// of `G` partitions \[A: "quadrant-aligned" read as aligned to the group\]; when
    /// values are computed every offset it reads lies in its view's free elements. Sets the
    /// snake order's group for the instruction's reads and writes.
    #[inline]
    pub(crate) fn indirection(&self, engine: Engine, ops: &[&TileRef]) {
        if ops.iter().any(|t| t.ind.is_some()) {
            self.check_indirection(engine, ops);
        }
    }

    /// [`Op::indirection`] once an operand is indirect (apart and cold: the check costs
    /// nothing on the common path, every matmul and compute instruction).
    #[cold]
    #[inline(never)]
    fn check_indirection(&self, engine: Engine, ops: &[&TileRef]) {
        let group = if engine == Engine::Tensor { 32 } else { 16 };
        for t in ops {
            let Some((base, index, _)) = t.ti_parts() else {
                continue;
            };
            let target = self.target();
            if target.spec().nc_version < 4 {
                self.fail(
                    ErrorKind::InvalidArgument,
                    format!(
                        "operand {} of '{}' is an indirect view (tensor indirection), available only on NeuronCore-v4 (trn3), not on {target}",
                        t.describe(),
                        short(self.api)
                    ),
                );
            }
            let p = base.partitions();
            for (what, v) in [("view", &base), ("index", &index)] {
                if v.start_partition() % group != 0 || (p > group && p % group != 0) {
                    self.fail(
                        ErrorKind::PartitionOffset,
                        format!(
                            "the {what} {} of indirect operand {} of '{}' starts at partition {} with {p} partitions: tensor indirection on the {} Engine needs a start partition that is a multiple of {group} and at most {group} or a multiple of {group} partitions",
                            v.describe(),
                            t.describe(),
                            short(self.api),
                            v.start_partition(),
                            engine.name()
                        ),
                    );
                }
            }
            crate::tile::set_ti_group(group);
            if self.executes() {
                t.ti_offsets(self.api, self.loc);
            }
        }
    }

    /// THE start of every instruction record: instruction `opcode` on `engine`, issued by this
    /// op at its line (see [`Rec`]).
    #[inline(always)]
    pub(crate) fn record(&self, engine: Engine, opcode: Opcode) -> Rec {
        self.record_as(self.api, engine, opcode)
    }

    /// [`Op::record`] under the NKI name `api` (an `nl` call recorded under its full name).
    #[inline(always)]
    pub(crate) fn record_as(&self, api: &'static str, engine: Engine, opcode: Opcode) -> Rec {
        Rec {
            instr: std::mem::ManuallyDrop::new(self.new_record(api, engine, opcode)),
            taken: false,
        }
    }

    /// A new record of `api`'s instruction `opcode` on `engine`, issued by this op at its
    /// line under its instruction name; the other fields are [`Instr::new`]'s defaults.
    #[inline(always)]
    fn new_record(&self, api: &'static str, engine: Engine, opcode: Opcode) -> Instr {
        let mut r = Instr::new(engine, opcode, api, self.loc);
        r.name = self.env.name;
        r
    }
}

/// The operands of a compute instruction ([`Op::compute`]): `data` (the full-size inputs;
/// the cost's N is the free size of the first), `extra` (per-partition operands) and `outs`
/// (the first one's dtype is the output dtype).
#[derive(Clone, Copy)]
struct Operands<'r> {
    data: &'r [&'r TileRef<'r>],
    extra: &'r [&'r TileRef<'r>],
    outs: &'r [&'r TileRef<'r>],
}

impl<'r> Operands<'r> {
    /// Every operand: the data, the extra operands, then the outputs.
    fn all(self) -> impl Iterator<Item = &'r TileRef<'r>> {
        self.data.iter().chain(self.extra).chain(self.outs).copied()
    }

    /// All the operands when one of them is an indirect view (tensor indirection), else
    /// `None` (the common case, without allocating).
    fn indirect(self) -> Option<Vec<&'r TileRef<'r>>> {
        self.all()
            .any(|t| t.ind.is_some())
            .then(|| self.all().collect())
    }

    /// The record of [`Op::compute`] by `ins` at `site`: the sizes of the first data operand
    /// (or output), the dtypes of the first input and output, PSUM and contiguity from every
    /// operand, and reads/writes of all of them.
    fn record(self, ins: &Op, site: Site) -> Instr {
        let Operands { data, extra, outs } = self;
        let main = data.first().or(outs.first()).expect("an operand");
        let contiguous = |t: &&TileRef| unit_stride(t);
        let mut reads: Regions<3> = data.iter().map(|t| t.region()).collect();
        reads.extend(extra.iter().map(|t| t.region()));
        if let Some(all) = self.indirect() {
            reads.extend(ti_index_regions(&all));
        }
        ins.record(site.engine, site.opcode)
            .size(main.partitions() as u32, main.free_size() as u32)
            .inputs(data.len() as u8)
            .dtypes(
                main.dtype(),
                outs.first().map_or(main.dtype(), |o| o.dtype()),
            )
            .psum(self.all().any(|t| t.mem() == MemKind::Psum))
            .contiguous(data.iter().chain(outs).all(contiguous))
            .reads(reads)
            .writes(outs.iter().map(|t| t.region()).collect::<Regions<1>>())
            .alu(site.alu)
            .accumulate(site.accumulate)
            .unnamed_engine(ins.target(), site.unnamed)
            .done()
    }
}

/// THE instruction-record builder: every record of an `nl`/`nisa`/HBM op is made by
/// [`Op::record`] (or, in its slot, by [`Op::issue_in_place`]) and these setters (no record
/// is assembled field by field elsewhere).
/// Unset fields keep [`Instr::new`]'s defaults: one input, fp32 in and out, no PSUM,
/// contiguous, no TensorE or DMA sizes, no ALU operator, no accumulate, nothing read or
/// written.
///
/// The record is held in a `ManuallyDrop` so that [`Rec::done`] can move it out without
/// writing a replacement (a record is ~320 bytes and this is the estimate hot path); `taken`
/// makes a second `done` a panic rather than a second owner of the same record.
///
/// A `Rec<&mut Instr>` ([`Op::issue_in_place`]) sets the fields of a record already in its
/// slot of the launch's record buffer instead: it owns nothing and has no `done`.
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
    fn at(instr: &'r mut Instr) -> Self {
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
