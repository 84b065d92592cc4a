//! The per-instance execution context and the instruction funnel.
//!
//! While a program instance runs, its thread holds an `InstanceCtx`: program id, launch mode,
//! target, the instruction records, the capacity tracker and the affine_range frames. Every
//! `nl`/`nisa` op goes through `issue`, which executes it (unless the launch is estimate-only)
//! and appends its [`Instr`] record (unless the launch is execute-only). Errors inside a kernel
//! are raised with [`raise`] (in `abort`), which unwinds to the launcher as a typed payload. In estimate
//! mode the funnel also checks the records' tile reads against the tiles nothing has written
//! yet, the uninitialised-read check the value path makes in the other modes.

use crate::error::{ErrorKind, NkiError, SourceLoc};
use crate::hbm::writers::{Writer, WriterKind};
use crate::memory::MemoryTracker;
use crate::record::{AffinePos, BufId, Instr};
use crate::shadow::StateValue;
use crate::target::Target;
use std::any::Any;
use std::cell::{Cell, RefCell};
use std::sync::Arc;

/// How a launch runs the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize)]
pub enum Mode {
    /// Compute values only (fastest; no timeline).
    #[default]
    Execute,
    /// Compute values and record instructions for the timing model.
    Simulate,
    /// Record instructions only: no arithmetic, inputs may be shape-only.
    Estimate,
}

impl Mode {
    /// True when ops compute values.
    pub fn executes(self) -> bool {
        self != Mode::Estimate
    }
    /// True when ops leave instruction records.
    pub fn records(self) -> bool {
        self != Mode::Execute
    }
}

// The unwind payloads of a failing and a cancelled instance (caught in `abort`).
pub(crate) use crate::abort::Cancelled;
use crate::abort::{catch, FailureKey, Stop};

pub(crate) use crate::hbm::shared::{current_instance, LaunchShared};
pub(crate) use crate::written::UnwrittenTile;

/// Everything one running program instance needs.
pub(crate) struct InstanceCtx {
    pub(crate) program_id: Vec<usize>,
    pub(crate) grid: Vec<usize>,
    pub(crate) instance: u64,
    pub(crate) nc: usize,
    pub(crate) mode: Mode,
    pub(crate) target: Target,
    /// The modelling thread that follows the records as they are made, if the launch has one.
    /// It reads them in place: declared (so dropped) before `records`.
    pub(crate) feed: Option<crate::timing::RecordFeed>,
    /// The feed set aside while an untaken branch is traced (its records are not fed: they
    /// are dropped after it); it still reads the records handed to it before, in place.
    parked_feed: Option<crate::timing::RecordFeed>,
    pub(crate) records: Vec<Instr>,
    /// The record count at which [`InstanceCtx::room_for_one`] takes its slow path: the
    /// buffer's capacity, or the record budget if lower (see [`InstanceCtx::set_record_budget`]).
    record_stop: usize,
    /// The most records the instance may keep ([`crate::spmd::Launch::max_records`]).
    record_budget: usize,
    pub(crate) mem: MemoryTracker,
    pub(crate) shared: Arc<LaunchShared>,
    /// Estimate mode: the live tiles allocated without a fill and not written yet, by tile id
    /// (kept by `Tile::alloc`, the tile write paths and `Drop for Tile`; read by [`issue`]).
    pub(crate) unwritten: crate::timing::fast_hash::Map<u64, UnwrittenTile>,
    /// The records the op in progress kept for its earlier steps (multi-step ops push them
    /// from inside their last step's `record`; `issue` checks all of the op's steps at once).
    op_steps: usize,
    frames: Vec<(u32, u32)>,
    /// `frames` as the records share it (made on the first record after a loop began or
    /// ended; an inline one follows `set_affine_iter` in place).
    position: Option<AffinePos>,
    next_activation: u32,
    /// Where each `affine_range` activation began (indexed by activation id; read by the
    /// `compiler` stage for its profile lines).
    pub(crate) loop_lines: Vec<SourceLoc>,
    /// The HBM tensors this instance allocated in private HBM (`nl::private_hbm`, the
    /// instance's scratch): id and how the profile names it (read by the `compiler` stage's
    /// `scratch_spill`).
    pub(crate) private_hbm: Vec<(u64, String)>,
    /// This instance's writer ids (store, atomic, read) at its current affine_range position.
    writer: [Option<u32>; 3],
    /// Meetings with the other core of the logical NeuronCore passed so far (`core_barrier`,
    /// `sendrecv`): they order this instance's HBM accesses against the other core's.
    pub(crate) meetings: u32,
    /// How many tensors this instance allocated in shared HBM so far (the next one is the
    /// launch's tensor of this number, see [`LaunchShared::kernel_outputs`]).
    pub(crate) shared_hbm_allocs: usize,
    /// The ids of the tiles allocated in device-loop bodies (one buffer in every iteration).
    pub(crate) loop_tiles: crate::memory::LoopTiles,
    /// The instance's state kept by the instructions and the language in their own folders
    /// (the accumulator registers, the engines' RNG generators and the LNC=2 meeting point
    /// of `isa/`, the device loops of `lang/`).
    pub(crate) state: InstanceState,
    /// The name the instructions issued now carry (`nisa::named`), if any.
    pub(crate) name: Option<crate::names::InstrName>,
    /// The dialect the running kernel is written in (from its `#[nki_kernel]` attribute, see
    /// [`crate::dialect::Dialect`]); read it with [`InstanceCtx::dialect`].
    pub(crate) dialect: crate::dialect::Dialect,
    /// `Some(k)` when the kernel is Beta 1 and launched on a plain grid `[k]`, `k >= 2`
    /// (`k` instances on one NeuronCore), which NKI 0.7 reads as `k` cores: an NKI 0.7-only
    /// call there is the dialect mistake `Op::require_07` reports.
    pub(crate) beta1_grid_of_07: Option<usize>,
    /// Where the API-level trace of an emit launch goes ([`crate::emit`]), if this is one.
    pub(crate) emit: Option<Arc<crate::emit::trace::Sink>>,
}

/// State of one running instance that the instruction sets and the language keep in their own
/// modules: one value of each type, made (`Default`) on its first use. The context holds it
/// without knowing its types, so it depends on none of those modules.
#[derive(Default)]
pub(crate) struct InstanceState(Vec<StateEntry>);

/// One value of an [`InstanceState`] with its type's [`StateValue`] functions.
struct StateEntry {
    value: Box<dyn Any + Send>,
    checkpoint: fn(&dyn Any) -> Box<dyn Any + Send>,
    rollback: fn(&mut dyn Any, Box<dyn Any + Send>),
    reset: fn(&mut dyn Any),
}

impl InstanceState {
    /// The instance's value of type `T` (a default one the first time).
    pub(crate) fn get<T: StateValue>(&mut self) -> &mut T {
        let i = match self.0.iter().position(|v| v.value.is::<T>()) {
            Some(i) => i,
            None => {
                self.0.push(StateEntry {
                    value: Box::new(T::default()),
                    checkpoint: |v| match v.downcast_ref::<T>() {
                        Some(t) => t.checkpoint(),
                        None => Box::new(()),
                    },
                    rollback: |v, saved| {
                        if let Some(t) = v.downcast_mut::<T>() {
                            t.rollback(saved)
                        }
                    },
                    reset: |v| {
                        if let Some(t) = v.downcast_mut::<T>() {
                            *t = T::default();
                        }
                    },
                });
                self.0.len() - 1
            }
        };
        self.0[i]
            .value
            .downcast_mut()
            .expect("the value at its type's index")
    }

    /// Sets the instance's value of type `T` (before it runs: the launch's part of it).
    pub(crate) fn set<T: StateValue>(&mut self, value: T) {
        *self.get::<T>() = value;
    }

    /// Takes the instance's value of type `T` out (after it ran), leaving a default one.
    pub(crate) fn take<T: StateValue>(&mut self) -> T {
        std::mem::take(self.get::<T>())
    }

    /// Every value's [`StateValue::checkpoint`], in order.
    fn checkpoint(&self) -> Vec<Box<dyn Any + Send>> {
        self.0
            .iter()
            .map(|e| (e.checkpoint)(e.value.as_ref()))
            .collect()
    }

    /// Puts back the values saved by [`InstanceState::checkpoint`]; a value made since starts
    /// over from its default.
    fn rollback(&mut self, saved: Vec<Box<dyn Any + Send>>) {
        let n = saved.len();
        for (e, s) in self.0.iter_mut().zip(saved) {
            (e.rollback)(e.value.as_mut(), s);
        }
        for e in self.0.iter_mut().skip(n) {
            (e.reset)(e.value.as_mut());
        }
    }
}

/// What an instance saves before tracing a branch it does not take, to put back after
/// ([`InstanceCtx::begin_untaken`], [`InstanceCtx::end_untaken`]).
pub(crate) struct Untaken {
    records: usize,
    op_steps: usize,
    mode: Mode,
    unwritten: crate::timing::fast_hash::Map<u64, UnwrittenTile>,
    frames: Vec<(u32, u32)>,
    next_activation: u32,
    loop_lines: usize,
    private_hbm: usize,
    shared_hbm_allocs: usize,
    loop_depth: usize,
    state: Vec<Box<dyn Any + Send>>,
    name: Option<crate::names::InstrName>,
    emit: Option<Arc<crate::emit::trace::Sink>>,
    mem: crate::memory::MemCheckpoint,
    parked: bool,
}

thread_local! {
    static CTX: RefCell<Option<InstanceCtx>> = const { RefCell::new(None) };
    /// A tile of another instance or launch made into a view on this thread, not yet
    /// reported: its message and where the view was made (see [`defer_foreign_use`]).
    static FOREIGN_USE: Cell<Option<Box<(String, SourceLoc)>>> = const { Cell::new(None) };
    /// Whether [`FOREIGN_USE`] holds an error: read by every op, and cheaper to read than
    /// `FOREIGN_USE` (no destructor, so no lazy registration check).
    static FOREIGN_PENDING: Cell<bool> = const { Cell::new(false) };
}

/// Notes that the running instance made a view of a tile it does not own (`message` says
/// whose it is), at `loc`. The error is raised by the op that takes the view as an operand
/// ([`raise_foreign_use`], at its start and at its funnel), so it names that op (`nl.store`,
/// `nisa.tensor_copy`) rather than the conversion; a view no op takes fails the instance
/// when it ends.
#[cold]
pub(crate) fn defer_foreign_use(message: String, loc: SourceLoc) {
    FOREIGN_USE.with(|f| {
        let first = f.take();
        f.set(first.or(Some(Box::new((message, loc)))));
    });
    FOREIGN_PENDING.with(|p| p.set(true));
}

/// Takes the pending foreign-tile error ([`defer_foreign_use`]), if any.
fn take_foreign_use() -> Option<Box<(String, SourceLoc)>> {
    FOREIGN_PENDING.with(|p| p.set(false));
    FOREIGN_USE.with(Cell::take)
}

/// Raises the pending foreign-tile error ([`defer_foreign_use`]), if any, as an error of op
/// `op` at `loc`.
#[inline]
pub(crate) fn raise_foreign_use(op: &'static str, loc: SourceLoc) {
    if !FOREIGN_PENDING.with(Cell::get) {
        return;
    }
    if let Some(pending) = take_foreign_use() {
        raise(
            NkiError::new(ErrorKind::InvalidArgument, op, pending.0),
            loc,
        );
    }
}

impl InstanceCtx {
    pub(crate) fn new(
        program_id: Vec<usize>,
        grid: Vec<usize>,
        instance: impl Into<u64>,
        nc: usize,
        mode: Mode,
        target: Target,
        shared: Arc<LaunchShared>,
    ) -> Self {
        let records = if mode.records() {
            crate::record::record_buffer()
        } else {
            Vec::new()
        };
        InstanceCtx {
            program_id,
            grid,
            instance: instance.into(),
            nc,
            mode,
            target,
            record_stop: records.capacity().min(crate::record::DEFAULT_MAX_RECORDS),
            record_budget: crate::record::DEFAULT_MAX_RECORDS,
            records,
            feed: None,
            parked_feed: None,
            mem: MemoryTracker::new(target.spec()),
            shared,
            unwritten: Default::default(),
            op_steps: 0,
            frames: Vec::new(),
            position: None,
            next_activation: 0,
            loop_lines: Vec::new(),
            private_hbm: Vec::new(),
            writer: [None; 3],
            meetings: 0,
            shared_hbm_allocs: 0,
            loop_tiles: Default::default(),
            state: InstanceState::default(),
            name: None,
            dialect: crate::dialect::Dialect::Beta1,
            beta1_grid_of_07: None,
            emit: None,
        }
    }

    /// Sets the dialect the kernel is written in (and the PSUM rule that goes with it).
    pub(crate) fn set_dialect(&mut self, dialect: crate::dialect::Dialect) {
        self.dialect = dialect;
        self.mem.set_dialect(dialect);
    }

    /// Sets the most instruction records the instance may keep (a launch's
    /// [`crate::spmd::Launch::max_records`]): the record that would pass it fails the
    /// instance instead of growing the buffer until memory runs out.
    pub(crate) fn set_record_budget(&mut self, n: usize) {
        self.record_budget = n;
        self.record_stop = self.records.capacity().min(n);
    }

    /// The dialect the running kernel is written in: [`crate::dialect::Dialect::Beta1`] unless
    /// the kernel is `#[nki_kernel(nki = "0.7")]`.
    pub(crate) fn dialect(&self) -> crate::dialect::Dialect {
        self.dialect
    }

    /// This instance's writer id for HBM stores at its current affine_range position.
    pub(crate) fn writer_id(&mut self, loc: SourceLoc) -> u32 {
        self.writer_of(WriterKind::Store, loc)
    }

    /// This instance's writer id for `atomic_rmw` updates at its current affine_range position.
    pub(crate) fn atomic_writer_id(&mut self, loc: SourceLoc) -> u32 {
        self.writer_of(WriterKind::Atomic, loc)
    }

    /// This instance's reader id for loads of kernel outputs at its current affine_range
    /// position.
    pub(crate) fn reader_id(&mut self, loc: SourceLoc) -> u32 {
        self.writer_of(WriterKind::Read, loc)
    }

    fn writer_of(&mut self, kind: WriterKind, loc: SourceLoc) -> u32 {
        let slot = match kind {
            WriterKind::Atomic => 1,
            WriterKind::Read => 2,
            _ => 0,
        };
        if let Some(w) = self.writer[slot] {
            return w;
        }
        let w = Writer {
            instance: self.instance,
            frames: self.frames.clone(),
            kind,
            meetings: self.meetings,
        };
        let id = self.shared.writers.intern(w, &self.program_id, loc);
        self.writer[slot] = Some(id);
        id
    }

    /// Notes a meeting with the other core: later HBM accesses are ordered after the other
    /// core's accesses before it.
    pub(crate) fn met_other_core(&mut self) {
        self.meetings += 1;
        self.writer = [None; 3];
    }

    /// Keeps record `r`, tagged with the affine_range iterations it was issued in.
    pub(crate) fn push_record(&mut self, mut r: Instr) {
        r.affine = self.position();
        self.room_for_one();
        self.records.push(r);
        self.op_steps += 1;
        self.feed_last();
    }

    /// Keeps record `r`, the last step of an op whose earlier steps' records (if any) are the
    /// last ones kept ([`InstanceCtx::push_record`] counts them), unless one of the op's steps
    /// reads a tile nothing has written: then the uninitialised-read error and the line of
    /// `r` are returned (boxed: the common result stays small) and nothing is kept.
    ///
    /// A record is large, so it is moved once, straight from the op's frame into its slot
    /// ([`InstanceCtx::push_in_place`]), and tagged and checked there.
    ///
    /// # Safety
    ///
    /// `r` is moved out: the caller must neither use nor drop it after this call.
    unsafe fn push_checked(
        &mut self,
        r: &mut std::mem::ManuallyDrop<Instr>,
    ) -> Option<Box<(NkiError, SourceLoc)>> {
        // SAFETY: the caller hands `r` over (it is never used or dropped again); it is taken
        // once, when `push_in_place` writes its slot.
        self.push_in_place(|| unsafe { std::mem::ManuallyDrop::take(r) }, |_| {})
    }

    /// Keeps a record built in its slot: the last step of an op, as
    /// [`InstanceCtx::push_checked`] keeps one, but written straight into the launch's record
    /// buffer (no copy of the record): `new` makes its common fields and `fill` the rest.
    ///
    /// `fill` runs while the context is borrowed, so it must not reach the context (`with_ctx`
    /// would fail and `try_with_ctx` do nothing): it may only set the record's fields. If it
    /// unwinds, the record is forgotten (not kept, not dropped).
    #[inline]
    fn push_in_place(
        &mut self,
        new: impl FnOnce() -> Instr,
        fill: impl FnOnce(&mut Instr),
    ) -> Option<Box<(NkiError, SourceLoc)>> {
        let first = self.records.len().saturating_sub(self.op_steps);
        self.op_steps = 0;
        let affine = self.position();
        self.room_for_one();
        let n = self.records.len();
        let slot = &mut self.records.spare_capacity_mut()[0];
        let r = slot.write(new());
        r.affine = affine;
        fill(r);
        let loc = r.loc;
        // SAFETY: slot `n`, the first past the length, was initialised just above.
        unsafe { self.records.set_len(n + 1) };
        self.check_last(first, loc)
    }

    /// Checks the op whose records are `records[first..]` (the last one just kept) for
    /// uninitialised reads: on one, the last record is dropped and the error and `loc` (the
    /// op's line) returned; otherwise it is handed to the feed.
    #[inline]
    fn check_last(&mut self, first: usize, loc: SourceLoc) -> Option<Box<(NkiError, SourceLoc)>> {
        if !self.unwritten.is_empty() {
            if let Some(e) = unwritten_read(self, first) {
                self.records.pop();
                return Some(Box::new((e, loc)));
            }
        }
        self.feed_last();
        None
    }

    /// Room for one more record. When the buffer must grow (move), the feed's thread first
    /// finishes reading the records handed to it in place; a record past the budget fails
    /// the instance (both on the slow path, [`InstanceCtx::grow_records`]).
    #[inline(always)]
    fn room_for_one(&mut self) {
        if self.records.len() >= self.record_stop {
            self.grow_records();
        }
    }

    /// [`InstanceCtx::room_for_one`]'s slow path: at the budget, the error naming the device
    /// loop running (the innermost, at its line) or else the last instruction's line; at the
    /// buffer's capacity, a larger buffer.
    #[cold]
    #[inline(never)]
    fn grow_records(&mut self) {
        let n = self.records.len();
        if n >= self.record_budget {
            let (e, loc) = self.over_record_budget();
            raise(e, loc);
        }
        if n == self.records.capacity() {
            for feed in [&mut self.feed, &mut self.parked_feed]
                .into_iter()
                .flatten()
            {
                feed.sync();
            }
            self.records.reserve(1);
        }
        self.record_stop = self.records.capacity().min(self.record_budget);
    }

    /// The error of an instance that reached its record budget, and where it points.
    fn over_record_budget(&mut self) -> (NkiError, SourceLoc) {
        let budget = self.record_budget;
        let why = |what: String| {
            format!(
                "the kernel instance reached the launch's budget of {budget} instruction records \
                 {what} (Launch::max_records or MeshLaunch::max_records sets the budget, \
                 default {}): nki-rs stops it \
                 before the host runs out of memory",
                crate::record::DEFAULT_MAX_RECORDS
            )
        };
        let active = self
            .state
            .get::<crate::lang::loop_state::Loops>()
            .active
            .last()
            .copied();
        if let Some((api, loc, iteration)) = active {
            let msg = why(format!(
                "in iteration {iteration} of this device loop (a loop whose trip count or \
                 condition never ends it, or one too long to model)"
            ));
            return (NkiError::new(ErrorKind::Budget, api, msg), loc);
        }
        let loc = self
            .records
            .last()
            .map_or_else(SourceLoc::caller, |r| r.loc);
        let msg = why(format!("after the instruction at {loc}"));
        (NkiError::new(ErrorKind::Budget, "kernel", msg), loc)
    }

    /// The records made so far, taken out of the context (the feed, which reads them in place
    /// and would no longer see all of them, is dropped first).
    pub(crate) fn take_records(&mut self) -> Vec<Instr> {
        self.feed = None;
        self.record_stop = 0;
        std::mem::take(&mut self.records)
    }

    /// The affine_range iterations the records issued now are tagged with (made on the first
    /// record after the loop nest changed; inline positions follow the iterations in place).
    #[inline]
    fn position(&mut self) -> AffinePos {
        self.position
            .get_or_insert_with(|| AffinePos::new(&self.frames))
            .clone()
    }

    /// Hands the last record (tagged and checked) to the feed.
    #[inline]
    fn feed_last(&mut self) {
        let n = self.records.len();
        if let Some(feed) = &mut self.feed {
            // SAFETY: the buffer holds `n` records; it moves only after `feed.sync()`
            // (`room_for_one`) and frees only after the feed is dropped (declared before
            // `records`; `take_records` drops it first), and a record is not written after it
            // is fed (it is complete before it is moved into its slot).
            unsafe { feed.push(self.records.as_ptr(), n) };
        }
    }

    /// Begins tracing a branch the launch does not take ([`crate::shadow`]): the instance runs
    /// as in estimate mode (checks and records, no values), its feed set aside, and what the
    /// branch changes is saved to be put back by [`InstanceCtx::end_untaken`].
    pub(crate) fn begin_untaken(&mut self) -> Untaken {
        let parked = self.feed.is_some();
        if parked {
            self.parked_feed = self.feed.take();
        }
        let cp = Untaken {
            records: self.records.len(),
            op_steps: self.op_steps,
            mode: self.mode,
            unwritten: self.unwritten.clone(),
            frames: self.frames.clone(),
            next_activation: self.next_activation,
            loop_lines: self.loop_lines.len(),
            private_hbm: self.private_hbm.len(),
            shared_hbm_allocs: self.shared_hbm_allocs,
            loop_depth: self.loop_tiles.depth(),
            state: self.state.checkpoint(),
            name: self.name,
            emit: self.emit.take(),
            mem: self.mem.checkpoint(),
            parked,
        };
        self.mode = Mode::Estimate;
        crate::shadow::enter();
        cp
    }

    /// Ends the untaken branch begun with `cp` ([`InstanceCtx::begin_untaken`]): its records
    /// dropped, the instance's state as before it, the feed back.
    pub(crate) fn end_untaken(&mut self, cp: Untaken) {
        crate::shadow::leave();
        self.records.truncate(cp.records);
        self.op_steps = cp.op_steps;
        self.mode = cp.mode;
        self.unwritten = cp.unwritten;
        self.frames = cp.frames;
        self.position = None;
        self.writer = [None; 3];
        self.next_activation = cp.next_activation;
        self.loop_lines.truncate(cp.loop_lines);
        self.private_hbm.truncate(cp.private_hbm);
        self.shared_hbm_allocs = cp.shared_hbm_allocs;
        self.loop_tiles.unwind_to(cp.loop_depth);
        self.state.rollback(cp.state);
        self.name = cp.name;
        self.emit = cp.emit;
        self.mem.rollback(cp.mem);
        if cp.parked {
            self.feed = self.parked_feed.take();
        }
    }

    /// The affine_range frames the instance is in (`(activation, iteration)`, outermost
    /// first).
    pub(crate) fn affine_frames(&self) -> &[(u32, u32)] {
        &self.frames
    }

    /// Enters a new affine_range activation (of the loop at `loc`); returns its id.
    pub(crate) fn push_affine(&mut self, loc: SourceLoc) -> u32 {
        let id = self.next_activation;
        self.next_activation += 1;
        self.loop_lines.push(loc);
        self.frames.push((id, 0));
        self.position = None;
        self.writer = [None; 3];
        id
    }

    /// Sets the iteration of the innermost affine frame with activation `id`.
    pub(crate) fn set_affine_iter(&mut self, id: u32, iter: u32) {
        if let Some(k) = self.frames.iter().rposition(|f| f.0 == id) {
            self.frames[k].1 = iter;
            // An inline position follows in place; a shared one is made anew when next used.
            if !self.position.as_mut().is_some_and(|p| p.set_iter(k, iter)) {
                self.position = None;
            }
            self.writer = [None; 3];
        }
    }

    /// Leaves affine activation `id`.
    pub(crate) fn pop_affine(&mut self, id: u32) {
        if let Some(pos) = self.frames.iter().rposition(|f| f.0 == id) {
            self.frames.truncate(pos);
            self.position = None;
            self.writer = [None; 3];
        }
    }
}

/// Installs `ctx` on this thread (replacing none) and returns the previous one.
pub(crate) fn install(ctx: InstanceCtx) -> Option<InstanceCtx> {
    take_foreign_use();
    crate::hbm::shared::set_current((ctx.shared.id, ctx.instance));
    CTX.with(|c| c.borrow_mut().replace(ctx))
}

/// Removes and returns this thread's context.
pub(crate) fn take() -> Option<InstanceCtx> {
    take_foreign_use();
    crate::hbm::shared::set_current((0, 0));
    CTX.with(|c| c.borrow_mut().take())
}

/// Runs `f` on this thread's context; raises [`ErrorKind::OutsideKernel`] when there is none.
pub(crate) fn with_ctx<R>(
    op: &'static str,
    loc: SourceLoc,
    f: impl FnOnce(&mut InstanceCtx) -> R,
) -> R {
    let outside = || {
        format!("nki.{op} called outside of a kernel launch (err_nki_api_outside_of_nki_kernel)")
    };
    with_installed(&CTX, op, loc, outside, f)
}

/// Runs `f` on the state installed in the thread-local `slot` (an instance's context, a mesh
/// device's state); when none is, raises an [`ErrorKind::OutsideKernel`] error of `op` with
/// the message `outside()`.
#[inline]
pub(crate) fn with_installed<T: 'static, R>(
    slot: &'static std::thread::LocalKey<RefCell<Option<T>>>,
    op: &'static str,
    loc: SourceLoc,
    outside: impl FnOnce() -> String,
    f: impl FnOnce(&mut T) -> R,
) -> R {
    match slot.with(|c| c.borrow_mut().as_mut().map(f)) {
        Some(r) => r,
        None => raise(NkiError::new(ErrorKind::OutsideKernel, op, outside()), loc),
    }
}

/// True while a kernel instance runs on this thread (its context is installed, possibly
/// borrowed by the op in progress).
pub(crate) fn in_kernel() -> bool {
    CTX.try_with(|c| c.try_borrow().map_or(true, |g| g.is_some()))
        .unwrap_or(false)
}

/// Runs `f` on this thread's context if there is one.
pub(crate) fn try_with_ctx<R>(f: impl FnOnce(&mut InstanceCtx) -> R) -> Option<R> {
    CTX.try_with(|c| c.try_borrow_mut().ok().and_then(|mut g| g.as_mut().map(f)))
        .ok()
        .flatten()
}

pub(crate) use crate::abort::check;
pub use crate::abort::raise;

/// Runs `f` as the program instance `ctx` on this thread under [`catch`]; returns the
/// instance's context (its records, memory peak) with the outcome. A failure is reported to
/// the launch's [`Cancellation`] at the instance's point of failure ([`FailureKey::own`]).
/// The thread's previous context, if any, is restored afterwards.
pub(crate) fn run_instance<R>(
    ctx: InstanceCtx,
    f: impl FnOnce() -> R,
) -> (InstanceCtx, Result<R, Stop>) {
    let pid = ctx.program_id.clone();
    let prev = install(ctx);
    let prev_accesses = crate::hbm::track::reset_accesses();
    let outcome = catch(&pid, || {
        let r = f();
        // A view of a foreign tile that no op took (e.g. only read on the host side).
        if let Some(pending) = take_foreign_use() {
            raise(
                NkiError::new(ErrorKind::InvalidArgument, "tile", pending.0),
                pending.1,
            );
        }
        r
    });
    let ctx = take().expect("the instance context was installed above");
    if let Err(Stop::Failed(e)) = &outcome {
        let key = FailureKey::own(ctx.instance, crate::hbm::track::accesses_so_far());
        ctx.shared.cancelled.report(key, e.clone());
    }
    crate::hbm::track::restore_accesses(prev_accesses);
    if let Some(p) = prev {
        install(p);
    }
    (ctx, outcome)
}

/// Execution facts an op needs before doing its work.
#[derive(Clone, Copy)]
pub(crate) struct OpEnv {
    /// True when values are computed.
    pub(crate) executes: bool,
    /// True when records are kept.
    pub(crate) records: bool,
    /// The launch target.
    pub(crate) target: Target,
    /// The instruction name in force (`nisa::named`), carried into the op's records.
    pub(crate) name: Option<crate::names::InstrName>,
    /// True when the launch traces its calls for the emitter ([`crate::emit`]).
    pub(crate) traces: bool,
}

/// The entry of the funnel: checks for cancellation and returns the mode facts.
#[inline]
pub(crate) fn env(op: &'static str, loc: SourceLoc) -> OpEnv {
    let (env, cancelled) = with_ctx(op, loc, |c| {
        (
            OpEnv {
                executes: c.mode.executes(),
                records: c.mode.records(),
                target: c.target,
                name: c.name,
                traces: c.emit.is_some(),
            },
            c.shared.cancelled.cancels(c.instance),
        )
    });
    if cancelled {
        std::panic::panic_any(Cancelled);
    }
    env
}

/// THE funnel: executes the instruction (unless estimating) and records it (unless only
/// executing). `record` is only called when a record is kept.
///
/// In estimate mode, where no values flow, the funnel also performs the uninitialised-read
/// check of the value path: a read region naming a tile that was allocated without a fill
/// and not written yet raises [`ErrorKind::UninitializedRead`] at the op's line.
pub(crate) fn issue(env: OpEnv, exec: impl FnOnce(), record: impl FnOnce() -> Instr) {
    if env.executes {
        exec();
        if env.records {
            let r = record();
            try_with_ctx(|c| c.push_record(r));
        }
    } else if env.records {
        // Held here and moved by the context straight into its slot (moving a large record
        // into a closure or an `Option` copies it each time).
        let mut r = std::mem::ManuallyDrop::new(record());
        let mut kept = false;
        let unwritten = try_with_ctx(|c| {
            kept = true;
            // SAFETY: `r` is handed over here, once (`kept`), and not used or dropped after.
            unsafe { c.push_checked(&mut r) }
        });
        if !kept {
            // No context took it (not inside a kernel).
            // SAFETY: `r` was not handed over, and is not used after this.
            unsafe { std::mem::ManuallyDrop::drop(&mut r) };
        }
        if let Some(e) = unwritten.flatten() {
            let (e, loc) = *e;
            raise(e, loc);
        }
    }
}

/// [`issue`] of a one-step op whose record is built in its slot of the launch's record
/// buffer: `new` makes the record's common fields and `fill` sets the rest (see
/// [`InstanceCtx::push_in_place`] for what `fill` must not do). Saves moving the ~340-byte
/// record from the op's frame into its slot (the estimate hot path: loads and matmuls).
pub(crate) fn issue_in_place(
    env: OpEnv,
    exec: impl FnOnce(),
    new: impl FnOnce() -> Instr,
    fill: impl FnOnce(&mut Instr),
) {
    if env.executes {
        // Values first, then the record, as any op (executing is not the hot path).
        let record = || {
            let mut r = new();
            fill(&mut r);
            r
        };
        issue(env, exec, record);
    } else if env.records {
        if let Some(Some(e)) = try_with_ctx(|c| c.push_in_place(new, fill)) {
            let (e, loc) = *e;
            raise(e, loc);
        }
    }
}

/// The uninitialised-read error of the op whose records are `c.records[first..]` (in program
/// order), if one of them reads a tile nothing has written: the earlier steps' writes count as
/// written for the later steps.
fn unwritten_read(c: &InstanceCtx, first: usize) -> Option<NkiError> {
    let steps = c.records.get(first..).unwrap_or(&[]);
    // The tiles the op's earlier steps wrote (empty, never allocated, for one-step ops).
    let mut written: Vec<u64> = Vec::new();
    for (k, r) in steps.iter().enumerate() {
        for reg in &r.reads {
            let BufId::Tile(id) = reg.buf else { continue };
            if written.contains(&id) {
                continue;
            }
            if let Some(e) = c.unwritten.get(&id).and_then(|u| u.read_error(r.api, reg)) {
                return Some(e);
            }
        }
        if k + 1 == steps.len() {
            break; // the last step: no later step reads what it writes
        }
        written.extend(r.writes.iter().filter_map(|w| match w.buf {
            BufId::Tile(id) => Some(id),
            BufId::Hbm(_) => None,
        }));
    }
    None
}
