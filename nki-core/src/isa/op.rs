//! THE op handle ([`Op`]): every `nl`/`nisa` op in flight is built through one. It begins
//! the op (the caller's source line, the instance's execution facts), fails it with its NKI
//! name and line, holds the operand rules and output handling of every instruction (as its
//! methods, so a broken rule names the op), allocates outputs, and hands the instruction to
//! the funnel ([`Op::issue`], [`Op::compute`]) with its record ([`Op::record`]).

use super::base::{
    memory, operand, partitions_match, per_partition_shape, short, ti_index_regions, unit_stride,
    Dst, Operand, Output, Rec, Site,
};
use crate::access::Shape;
use crate::context::{
    check, current_instance, env, raise, raise_foreign_use, with_ctx, InstanceCtx, LaunchShared,
    OpEnv,
};
use crate::dtype::DType;
use crate::emit::trace::{Call, Event, What};
use crate::error::{ErrorKind, NkiError, SourceLoc};
use crate::hbm::view::HbmView;
use crate::math::AluOp;
use crate::record::{Engine, Instr, MemKind, Opcode, Regions};
use crate::target::Target;
use crate::tile::{Fill, Tile, TileRef};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// One `nl`/`nisa` op in flight: THE handle every op is built through.
///
/// [`Op::begin`] captures the caller's source line (`#[track_caller]`) and the instance's
/// execution facts once; the op's checks fail through it ([`Op::fail`], [`Op::check`]) with
/// its NKI name and line; it allocates outputs ([`Op::alloc`]), and [`Op::issue`] executes
/// (unless estimating), records (unless only executing) and, when no values flow, marks the
/// op's outputs written itself. The `Result`-returning forms of its rules, the operand types
/// and the record builder live in [`super::base`]; the funnel it hands over to in
/// [`crate::context`].
#[derive(Clone, Copy)]
pub(crate) struct Op {
    /// The NKI name (`nl.add`, `nisa.tensor_tensor`).
    pub(crate) api: &'static str,
    /// The user's call site.
    pub(crate) loc: SourceLoc,
    /// The launch facts.
    pub(crate) env: OpEnv,
}

/// Beginning an op, failing it, and the instance state it reaches.
impl Op {
    /// Begins op `api` at the caller's location (raises outside a kernel, unwinds when the
    /// launch was cancelled).
    #[track_caller]
    pub(crate) fn begin(api: &'static str) -> Op {
        Op::at(api, SourceLoc::caller())
    }

    /// Begins op `api` at a known location `loc`.
    #[inline]
    pub(crate) fn at(api: &'static str, loc: SourceLoc) -> Op {
        let env = env(api, loc);
        raise_foreign_use(api, loc);
        Op { api, loc, env }
    }

    /// The same op under the NKI name `api`: an `nl` call that lowers onto an instruction
    /// builder records (and fails in the builder) under its own full name (`nl.copy`).
    pub(crate) fn recorded_as(&self, api: &'static str) -> Op {
        Op { api, ..*self }
    }

    /// True when values are computed.
    pub(crate) fn executes(&self) -> bool {
        self.env.executes
    }

    /// The launch target.
    pub(crate) fn target(&self) -> Target {
        self.env.target
    }

    /// Fails the instance with an error of `kind` naming this op (and its instruction name,
    /// when it has one) and its line.
    pub(crate) fn fail(&self, kind: ErrorKind, msg: impl Into<String>) -> ! {
        raise(self.named(NkiError::new(kind, self.api, msg)), self.loc)
    }

    /// Unwraps `r`; an `Err` fails the instance at this op's line (naming the instruction
    /// name, when it has one).
    pub(crate) fn check<T>(&self, r: crate::error::Result<T>) -> T {
        match self.env.name {
            None => check(r, self.loc),
            Some(_) => r.unwrap_or_else(|e| raise(self.named(e), self.loc)),
        }
    }

    /// `e` with this op's instruction name (`nisa::named`) in its message, if it has one.
    #[cold]
    fn named(&self, e: NkiError) -> NkiError {
        match self.env.name {
            None => e,
            Some(n) => NkiError::new(
                e.kind(),
                e.op(),
                format!("{} (instruction '{n}')", e.message()),
            ),
        }
    }

    /// This instance's writer tag for the HBM stores of this op (at its current affine_range
    /// position), and the launch state that checks it: HBM writes are tagged in every mode.
    pub(crate) fn hbm_writer(&self) -> (u32, Arc<LaunchShared>) {
        self.with_ctx(|c| (c.writer_id(self.loc), c.shared.clone()))
    }

    /// Starts a load of `src` by this op (as operation `what`): when `src` is an output of
    /// the running launch, the load claims the elements it reads (see
    /// [`crate::hbm::write::track_load`]) under this instance's reader tag.
    pub(crate) fn track_load(&self, src: &crate::hbm::HbmView, what: &'static str) {
        if crate::shadow::active() {
            return; // a branch the launch does not take loads nothing
        }
        crate::hbm::observe::notify(src.st.id, &src.ap, false, what, self.loc);
        // Not an output of the launch running here (a kernel input): no state to look up.
        let output_of = src.st.output_of.load(Ordering::Relaxed);
        if current_instance().is_some_and(|(launch, _)| launch != output_of) {
            return;
        }
        let reader = self.with_ctx(|c| {
            (src.st.in_kernel || c.shared.is_output(src.st.id))
                .then(|| (c.reader_id(self.loc), c.shared.clone()))
        });
        if let Some((reader, shared)) = reader {
            crate::hbm::write::track_load(src, reader, &shared, what, self.loc);
        }
    }

    /// This instance's writer tag for the HBM atomic read-modify-writes of this op (atomics
    /// of one launch never conflict with each other), and the launch state that checks it.
    pub(crate) fn hbm_atomic_writer(&self) -> (u32, Arc<LaunchShared>) {
        self.with_ctx(|c| (c.atomic_writer_id(self.loc), c.shared.clone()))
    }

    /// Runs `f` on the running instance's state: instance state an op changes besides its
    /// outputs (the RNG stream, the HBM writer tags) is reached through its op handle.
    pub(crate) fn with_ctx<R>(&self, f: impl FnOnce(&mut InstanceCtx) -> R) -> R {
        with_ctx(self.api, self.loc, f)
    }

    /// Fails the op, a call only NKI 0.7 has (`what`), when the kernel is Beta 1 launched on
    /// a grid `[k]` that 0.7 reads as `k` cores: the kernel was written in 0.7 without
    /// `#[nki_kernel(nki = "0.7")]`, and its grid means something else than the author meant.
    pub(crate) fn require_07(&self, what: impl FnOnce() -> String) {
        let Some(k) = self.with_ctx(|c| c.beta1_grid_of_07) else {
            return;
        };
        self.fail(
            ErrorKind::InvalidGrid,
            format!(
                "{} is NKI 0.7, but the kernel is NKI Beta 1 (the default of #[nki_kernel]), \
                 whose grid [{k}] is {k} program instances one after another on one \
                 NeuronCore, not NKI 0.7's kernel[{k}] (once on each core of a logical \
                 NeuronCore): write #[nki_kernel(nki = \"0.7\")]",
                what()
            ),
        );
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
        if self.env.traces {
            self.traced_issue();
        }
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

    /// Emit launches ([`crate::emit`]): traces this op's call, made by `call` (only called when
    /// the launch traces; otherwise this is one branch on a flag).
    #[inline(always)]
    pub(crate) fn trace(&self, call: impl FnOnce() -> Call) {
        if self.env.traces {
            self.trace_what(What::Call(call()));
        }
    }

    /// Emit launches: traces an allocation of `tensor` (see [`Op::trace`]).
    #[inline(always)]
    pub(crate) fn trace_alloc(&self, alloc: impl FnOnce() -> What) {
        if self.env.traces {
            self.trace_what(alloc());
        }
    }

    /// Pushes `what`, at this op's line and the instance's loop frames, to the launch's
    /// emit trace.
    #[cold]
    fn trace_what(&self, what: What) {
        self.with_ctx(|c| {
            if let Some(sink) = &c.emit {
                let event = Event {
                    frames: c.affine_frames().to_vec(),
                    loc: self.loc,
                    what,
                };
                sink.push(c.instance, event);
            }
        });
    }

    /// The funnel's check of emit launches: an op that issues without having traced its call
    /// is noted (the emitter refuses the kernel, naming it).
    #[cold]
    fn traced_issue(&self) {
        self.with_ctx(|c| {
            if let Some(sink) = &c.emit {
                sink.issued(c.instance, self.api, self.loc, c.affine_frames().to_vec());
            }
        });
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
        Rec::new(self.new_record(api, engine, opcode))
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
