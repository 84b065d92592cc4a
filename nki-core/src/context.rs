//! The per-instance execution context and the instruction funnel.
//!
//! While a program instance runs, its thread holds an [`InstanceCtx`]: program id, launch mode,
//! target, the instruction records, the capacity tracker and the affine_range frames. Every
//! `nl`/`nisa` op goes through [`issue`], which executes it (unless the launch is estimate-only)
//! and appends its [`Instr`] record (unless the launch is execute-only). Errors inside a kernel
//! are raised with [`raise`], which unwinds to the launcher as a typed payload. In estimate
//! mode the funnel also checks the records' tile reads against the tiles nothing has written
//! yet, the uninitialised-read check the value path makes in the other modes.

use crate::access::Shape;
use crate::dtype::DType;
use crate::error::{ErrorKind, NkiError, SourceLoc};
use crate::memory::MemoryTracker;
use crate::record::{BufId, Instr, MemKind};
use crate::target::Target;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

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

/// The payload a failing kernel unwinds with.
pub(crate) struct KernelAbort(pub(crate) NkiError);

/// The payload an instance unwinds with when another instance already failed.
pub(crate) struct Cancelled;

static NEXT_WRITER: AtomicU32 = AtomicU32::new(1);

/// What kind of HBM write a writer performs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum WriterKind {
    /// Plain stores (`nl.store`, `nisa.dma_copy`).
    Store,
    /// Atomic updates (`nl.atomic_rmw`): they may overlap other atomic updates.
    Atomic,
    /// The atomic updates of the two (conflicting-position) atomic writers `.0` and `.1` to
    /// one location: the tag an element keeps once several instances or iterations updated it
    /// atomically, so a later store conflicting with either is still reported.
    Atomics(u32, u32),
}

/// Who performed an HBM write: the program instance and its stack of affine_range frames
/// `(loop activation, iteration)`, and the kind of write.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Writer {
    pub(crate) instance: u32,
    pub(crate) frames: Vec<(u32, u32)>,
    pub(crate) kind: WriterKind,
}

impl Writer {
    /// True when writes by `self` and `other` happen at unordered positions: different
    /// instances, or the same instance in different iterations of one affine_range.
    fn unordered(&self, other: &Writer) -> bool {
        if self.instance != other.instance {
            return true;
        }
        for (fa, fb) in self.frames.iter().zip(&other.frames) {
            if fa.0 != fb.0 {
                return false;
            }
            if fa.1 != fb.1 {
                return true;
            }
        }
        false
    }
}

/// State shared by all instances of one launch.
pub(crate) struct LaunchShared {
    pub(crate) cancelled: AtomicBool,
    /// First writer id of this launch: ids below are from earlier launches.
    pub(crate) writer_base: u32,
    writers: Mutex<WriterTable>,
}

/// Interned writers of a launch: writer -> id, and id -> (writer, program id, first store line).
type WriterTable = (
    HashMap<Writer, u32>,
    HashMap<u32, (Writer, Vec<usize>, SourceLoc)>,
);

impl LaunchShared {
    pub(crate) fn new() -> Arc<LaunchShared> {
        Arc::new(LaunchShared {
            cancelled: AtomicBool::new(false),
            writer_base: NEXT_WRITER.load(Ordering::SeqCst),
            writers: Mutex::new((HashMap::new(), HashMap::new())),
        })
    }

    /// Interns a writer, remembering its program id and the first source line it stored from.
    fn writer_id(&self, w: Writer, pid: &[usize], loc: SourceLoc) -> u32 {
        let mut g = self.writers.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(&id) = g.0.get(&w) {
            return id;
        }
        let id = NEXT_WRITER.fetch_add(1, Ordering::SeqCst);
        g.0.insert(w.clone(), id);
        g.1.insert(id, (w, pid.to_vec(), loc));
        id
    }

    /// Describes writer `id`: its program id, affine iterations and source line (and whether
    /// it is an `atomic_rmw` writer).
    pub(crate) fn describe_writer(&self, id: u32) -> String {
        let g = self.writers.lock().unwrap_or_else(|p| p.into_inner());
        Self::describe_locked(&g, id)
    }

    fn describe_locked(g: &WriterTable, id: u32) -> String {
        match g.1.get(&id) {
            Some((w, pid, loc)) => {
                if let WriterKind::Atomics(a, b) = w.kind {
                    return format!(
                        "the atomic_rmw updates of {} and {}",
                        Self::describe_locked(g, a),
                        Self::describe_locked(g, b)
                    );
                }
                let mut s = format!("program id {pid:?}");
                if !w.frames.is_empty() {
                    let its: Vec<String> = w.frames.iter().map(|f| f.1.to_string()).collect();
                    s.push_str(&format!(" in affine_range iteration ({})", its.join(", ")));
                }
                if w.kind == WriterKind::Atomic {
                    s.push_str(" (atomic_rmw)");
                }
                s.push_str(&format!(" at {loc}"));
                s
            }
            None => format!("writer #{id}"),
        }
    }

    /// True when writes by `old` and `new` to one location are an output-dependency error:
    /// writes at unordered positions (different instances, or the same instance in different
    /// iterations of one affine_range), unless both are atomic updates.
    pub(crate) fn conflicts(&self, old: u32, new: u32) -> bool {
        if old < self.writer_base || old == new {
            return false;
        }
        let g = self.writers.lock().unwrap_or_else(|p| p.into_inner());
        Self::conflicts_locked(&g, old, new)
    }

    fn conflicts_locked(g: &WriterTable, old: u32, new: u32) -> bool {
        let (Some((a, _, _)), Some((b, _, _))) = (g.1.get(&old), g.1.get(&new)) else {
            return false;
        };
        match (a.kind, b.kind) {
            (WriterKind::Atomics(x, y), _) => {
                Self::conflicts_locked(g, x, new) || Self::conflicts_locked(g, y, new)
            }
            (_, WriterKind::Atomics(x, y)) => {
                Self::conflicts_locked(g, old, x) || Self::conflicts_locked(g, old, y)
            }
            (WriterKind::Atomic, WriterKind::Atomic) => false,
            _ => a.unordered(b),
        }
    }

    /// The tag of a location previously tagged `old` after the atomic writer `new` updated it,
    /// or `Err(())` when the update conflicts with `old` (a store at an unordered position).
    ///
    /// A store tag stays (later atomic updates and stores conflict with it as before); an
    /// atomic tag of an unordered atomic writer becomes the [`WriterKind::Atomics`] tag of
    /// both, so a later store unordered with either is reported. An `Atomics` tag stays (a
    /// third atomic writer is not remembered).
    pub(crate) fn merge_atomic(&self, old: u32, new: u32) -> std::result::Result<u32, ()> {
        if old < self.writer_base || old == new {
            return Ok(new);
        }
        let mut g = self.writers.lock().unwrap_or_else(|p| p.into_inner());
        if Self::conflicts_locked(&g, old, new) {
            return Err(());
        }
        let (Some((a, _, _)), Some((b, _, _))) = (g.1.get(&old), g.1.get(&new)) else {
            return Ok(new);
        };
        match a.kind {
            WriterKind::Store | WriterKind::Atomics(..) => Ok(old),
            WriterKind::Atomic if a.unordered(b) => {
                let w = Writer {
                    instance: a.instance,
                    frames: Vec::new(),
                    kind: WriterKind::Atomics(old, new),
                };
                if let Some(&id) = g.0.get(&w) {
                    return Ok(id);
                }
                let id = NEXT_WRITER.fetch_add(1, Ordering::SeqCst);
                let (pid, loc) = (g.1[&old].1.clone(), g.1[&old].2);
                g.0.insert(w.clone(), id);
                g.1.insert(id, (w, pid, loc));
                Ok(id)
            }
            WriterKind::Atomic => Ok(new),
        }
    }
}

/// A tile allocated without a fill that nothing has written yet (tracked in estimate mode,
/// where no values exist to carry the "written" state through the ops).
#[derive(Clone, Copy, Debug)]
pub(crate) struct UnwrittenTile {
    pub(crate) mem: MemKind,
    pub(crate) dtype: DType,
    pub(crate) shape: Shape,
    /// Where the tile was allocated.
    pub(crate) loc: SourceLoc,
}

/// Everything one running program instance needs.
pub(crate) struct InstanceCtx {
    pub(crate) program_id: Vec<usize>,
    pub(crate) grid: Vec<usize>,
    pub(crate) instance: u32,
    pub(crate) nc: usize,
    pub(crate) mode: Mode,
    pub(crate) target: Target,
    pub(crate) records: Vec<Instr>,
    pub(crate) mem: MemoryTracker,
    pub(crate) shared: Arc<LaunchShared>,
    /// Estimate mode: the live tiles allocated without a fill and not written yet, by tile id
    /// (kept by `Tile::alloc`, the tile write paths and `Drop for Tile`; read by [`issue`]).
    pub(crate) unwritten: HashMap<u64, UnwrittenTile>,
    frames: Vec<(u32, u32)>,
    next_activation: u32,
    /// This instance's writer ids (store, atomic) at its current affine_range position.
    writer: [Option<u32>; 2],
}

thread_local! {
    static CTX: RefCell<Option<InstanceCtx>> = const { RefCell::new(None) };
}

impl InstanceCtx {
    pub(crate) fn new(
        program_id: Vec<usize>,
        grid: Vec<usize>,
        instance: u32,
        nc: usize,
        mode: Mode,
        target: Target,
        shared: Arc<LaunchShared>,
    ) -> Self {
        InstanceCtx {
            program_id,
            grid,
            instance,
            nc,
            mode,
            target,
            records: Vec::new(),
            mem: MemoryTracker::new(target.spec()),
            shared,
            unwritten: HashMap::new(),
            frames: Vec::new(),
            next_activation: 0,
            writer: [None; 2],
        }
    }

    /// This instance's writer id for HBM stores at its current affine_range position.
    pub(crate) fn writer_id(&mut self, loc: SourceLoc) -> u32 {
        self.writer_of(WriterKind::Store, loc)
    }

    /// This instance's writer id for `atomic_rmw` updates at its current affine_range position.
    pub(crate) fn atomic_writer_id(&mut self, loc: SourceLoc) -> u32 {
        self.writer_of(WriterKind::Atomic, loc)
    }

    fn writer_of(&mut self, kind: WriterKind, loc: SourceLoc) -> u32 {
        let slot = (kind == WriterKind::Atomic) as usize;
        if let Some(w) = self.writer[slot] {
            return w;
        }
        let w = Writer {
            instance: self.instance,
            frames: self.frames.clone(),
            kind,
        };
        let id = self.shared.writer_id(w, &self.program_id, loc);
        self.writer[slot] = Some(id);
        id
    }

    /// Keeps record `r`, tagged with the affine_range iterations it was issued in.
    pub(crate) fn push_record(&mut self, mut r: Instr) {
        r.affine.clone_from(&self.frames);
        self.records.push(r);
    }

    /// Enters a new affine_range activation; returns its id.
    pub(crate) fn push_affine(&mut self) -> u32 {
        let id = self.next_activation;
        self.next_activation += 1;
        self.frames.push((id, 0));
        self.writer = [None; 2];
        id
    }

    /// Sets the iteration of the innermost affine frame with activation `id`.
    pub(crate) fn set_affine_iter(&mut self, id: u32, iter: u32) {
        if let Some(f) = self.frames.iter_mut().rev().find(|f| f.0 == id) {
            f.1 = iter;
            self.writer = [None; 2];
        }
    }

    /// Leaves affine activation `id`.
    pub(crate) fn pop_affine(&mut self, id: u32) {
        if let Some(pos) = self.frames.iter().rposition(|f| f.0 == id) {
            self.frames.truncate(pos);
            self.writer = [None; 2];
        }
    }
}

/// Installs `ctx` on this thread (replacing none) and returns the previous one.
pub(crate) fn install(ctx: InstanceCtx) -> Option<InstanceCtx> {
    CTX.with(|c| c.borrow_mut().replace(ctx))
}

/// Removes and returns this thread's context.
pub(crate) fn take() -> Option<InstanceCtx> {
    CTX.with(|c| c.borrow_mut().take())
}

/// Runs `f` on this thread's context; raises [`ErrorKind::OutsideKernel`] when there is none.
pub(crate) fn with_ctx<R>(
    op: &'static str,
    loc: SourceLoc,
    f: impl FnOnce(&mut InstanceCtx) -> R,
) -> R {
    let r = CTX.with(|c| c.borrow_mut().as_mut().map(f));
    match r {
        Some(r) => r,
        None => raise(
            NkiError::new(
                ErrorKind::OutsideKernel,
                op,
                format!("nki.{op} called outside of a kernel launch (err_nki_api_outside_of_nki_kernel)"),
            ),
            loc,
        ),
    }
}

/// Runs `f` on this thread's context if there is one.
pub(crate) fn try_with_ctx<R>(f: impl FnOnce(&mut InstanceCtx) -> R) -> Option<R> {
    CTX.try_with(|c| c.try_borrow_mut().ok().and_then(|mut g| g.as_mut().map(f)))
        .ok()
        .flatten()
}

/// Fails the running kernel instance with `e` (attaching its program id and `loc`). Outside a
/// kernel this panics with the error's message.
pub fn raise(e: NkiError, loc: SourceLoc) -> ! {
    let e = e.with_loc(loc);
    let e = match try_with_ctx(|c| c.program_id.clone()) {
        Some(pid) => e.with_program_id(&pid),
        None => panic!("{e}"),
    };
    std::panic::panic_any(KernelAbort(e))
}

/// Unwraps a result inside a kernel: an `Err` fails the instance (see [`raise`]).
pub(crate) fn check<T>(r: crate::error::Result<T>, loc: SourceLoc) -> T {
    match r {
        Ok(v) => v,
        Err(e) => raise(e, loc),
    }
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
}

/// The entry of the funnel: checks for cancellation and returns the mode facts.
pub(crate) fn env(op: &'static str, loc: SourceLoc) -> OpEnv {
    let (env, cancelled) = with_ctx(op, loc, |c| {
        (
            OpEnv {
                executes: c.mode.executes(),
                records: c.mode.records(),
                target: c.target,
            },
            c.shared.cancelled.load(Ordering::Relaxed),
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
        // Multi-step ops push the records of their earlier steps from inside `record`.
        let first = try_with_ctx(|c| c.records.len()).unwrap_or(0);
        let r = record();
        if let Some(e) = try_with_ctx(|c| unwritten_read(c, first, &r)).flatten() {
            raise(e, r.loc);
        }
        try_with_ctx(|c| c.push_record(r));
    }
}

/// The uninitialised-read error of the op whose records are `c.records[first..]` then `last`
/// (in program order), if one of them reads a tile nothing has written: the earlier steps'
/// writes count as written for the later steps.
fn unwritten_read(c: &InstanceCtx, first: usize, last: &Instr) -> Option<NkiError> {
    if c.unwritten.is_empty() {
        return None;
    }
    let steps = c.records.get(first..).unwrap_or(&[]);
    let mut written: Vec<u64> = Vec::new();
    for r in steps.iter().chain(std::iter::once(last)) {
        for reg in &r.reads {
            let BufId::Tile(id) = reg.buf else { continue };
            if written.contains(&id) {
                continue;
            }
            if let Some(u) = c.unwritten.get(&id) {
                return Some(NkiError::new(
                    ErrorKind::UninitializedRead,
                    r.api,
                    format!(
                        "reads {} (allocated at {}) before anything wrote it",
                        crate::tile::describe_tile(u.mem, u.dtype, u.shape),
                        u.loc
                    ),
                ));
            }
        }
        written.extend(r.writes.iter().filter_map(|w| match w.buf {
            BufId::Tile(id) => Some(id),
            BufId::Hbm(_) => None,
        }));
    }
    None
}
