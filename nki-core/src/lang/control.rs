//! Device loops: `nl::fori_loop` and `nl::while_loop` (NKI 0.7), loops the hardware runs (one
//! copy of the body, a compare-and-branch per iteration on each engine's sequencer) whose trip
//! count may come from data ([`NkiScalar`] bounds and conditions). Rust loops in a kernel stay
//! host loops: unrolled into the record stream, as NKI unrolls Python loops.
//!
//! What each launch mode does:
//! - execute and simulate run the body once per iteration on the values (a bound or condition
//!   read from a tile has its value);
//! - estimate (no values) needs the trip count of every loop whose bounds or condition it
//!   cannot know: from [`TripCounts`] given to the launch ([`Launch::trip_counts`](
//!   crate::spmd::Launch::trip_counts)), or the launch fails with an [`ErrorKind::NoData`]
//!   error naming the loop and its line. Nothing is guessed.
//!
//! As in 0.7, a tile allocated inside a device loop body exists once: every iteration's
//! allocation at one line is the same buffer (the timing model sees one buffer, so iterations
//! wait for each other's reads and writes of it; no rotation). Iterations run in order, so
//! the HBM race checks treat them as ordered (two iterations writing one location is not a
//! race, unlike two `affine_range` iterations). Each iteration ends with one
//! [`LOOP_BRANCH`](crate::record::Opcode::LoopBranch) record on every engine its records used
//! (the Sync engine's for TensorE and DMA work): the iteration boundary, a scheduling barrier
//! in the timing model (every branch waits for the whole iteration, the next iteration waits
//! for every branch, and a branch costs the target's barrier time, less for a
//! software-pipelined iteration: see [`TargetSpec::device_loop_barrier_ns`](
//! crate::target::TargetSpec::device_loop_barrier_ns)). The profile lists every device loop
//! ([`Profile::device_loops`](crate::profile::Profile)).

use super::loop_state::Loops;
pub use super::loop_state::{TripCounts, MAX_DEVICE_LOOP_ITERATIONS};
use crate::context::{self, raise};
use crate::error::{ErrorKind, NkiError, SourceLoc};
use crate::isa::nki_scalar::IntoScalar;
use crate::isa::op::Op;
use crate::isa::NkiScalar;
use crate::record::LoopLog;
use crate::record::{BufId, Engine, Instr, Opcode, Region};

/// Runs `iteration` for each iteration of a device loop at `loc`; `next(k)` says whether
/// iteration `k` runs (it is called before each one, and may run kernel code). A loop not
/// `rolled` (unrolled by the compiler) branches nowhere and is not logged for the profile. `decides()` is
/// the scalar register the loop's branch reads after an iteration (its bound's, or the next
/// condition's), if the value came from a `scalar_load`: the branch waits for that load.
fn run_loop(
    api: &'static str,
    loc: SourceLoc,
    rolled: bool,
    mut next: impl FnMut(u64) -> bool,
    mut iteration: impl FnMut(u64),
    decides: impl Fn() -> Option<Region>,
) {
    let records = Op::at(api, loc).env.records && rolled;
    let max = context::with_ctx(api, loc, |c| {
        c.loop_tiles.enter(loc);
        let loops = c.state.get::<Loops>();
        loops.active.push((api, loc, 0));
        loops.max_iterations
    });
    let mut log = LoopLog {
        api,
        loc,
        iterations: Vec::new(),
    };
    let mut k = 0u64;
    while next(k) {
        if k >= max {
            raise(
                NkiError::new(
                    ErrorKind::Budget,
                    api,
                    format!(
                        "the device loop ran {k} iterations without ending (the launch's \
                         budget of iterations per device loop run; Launch::max_loop_iterations \
                         or MeshLaunch::max_loop_iterations sets it, default \
                         {MAX_DEVICE_LOOP_ITERATIONS}): its trip count or \
                         condition never ends it"
                    ),
                ),
                loc,
            );
        }
        let first = context::with_ctx(api, loc, |c| {
            c.loop_tiles.next_iteration();
            if let Some(a) = c.state.get::<Loops>().active.last_mut() {
                a.2 = k;
            }
            c.records.len()
        });
        iteration(k);
        if records {
            let (branch, end) = branches(api, loc, first, decides());
            log.iterations.push((first, branch, end));
        }
        k += 1;
    }
    context::with_ctx(api, loc, |c| {
        c.loop_tiles.exit();
        let loops = c.state.get::<Loops>();
        loops.active.pop();
        if records && rolled {
            loops.log.push(log);
        }
    });
}

/// Issues the loop-branch records closing an iteration whose records start at `first`: one
/// per engine the iteration used (the Sync engine's for TensorE and DMA work, which the
/// sequencers of the engines that trigger them run), each reading `register` (the scalar
/// register the branch decides on, if loaded from a tile). Returns the range of those records.
fn branches(
    api: &'static str,
    loc: SourceLoc,
    first: usize,
    register: Option<Region>,
) -> (usize, usize) {
    let mut used = [false; Engine::COUNT];
    let start = context::with_ctx(api, loc, |c| {
        for r in c.records.get(first..).unwrap_or(&[]) {
            let e = match r.engine {
                Engine::Tensor | Engine::Dma => Engine::Sync,
                e => e,
            };
            used[e.index()] = true;
        }
        c.records.len()
    });
    if !used.iter().any(|&u| u) {
        used[Engine::Sync.index()] = true;
    }
    let pipelined = context::with_ctx(api, loc, |c| {
        software_pipelined(c.records.get(first..).unwrap_or(&[]))
    });
    let op = Op::at(api, loc);
    for e in Engine::ALL.iter().filter(|e| used[e.index()]) {
        op.issue(
            &[],
            || {},
            || {
                let mut r = op.record(*e, Opcode::LoopBranch).size(1, 1).done();
                r.reads.extend(register);
                r.accumulate = pipelined;
                r
            },
        );
    }
    let end = context::with_ctx(api, loc, |c| c.records.len());
    (start, end)
}

/// Whether an iteration's records are software-pipelined (double buffering): a DMA in it
/// writes an on-chip tile (a load) that no later record of the iteration reads, so what it
/// loads is the next iteration's input and the load runs beside this iteration's compute.
/// Recognised by the program's structure only (the iteration's records and their regions).
fn software_pipelined(iteration: &[Instr]) -> bool {
    iteration.iter().enumerate().any(|(i, r)| {
        r.engine == Engine::Dma
            && !r.writes.is_empty()
            && r.writes.iter().all(|w| matches!(w.buf, BufId::Tile(_)))
            && !iteration[i + 1..].iter().any(|later| {
                later
                    .reads
                    .iter()
                    .any(|g| r.writes.iter().any(|w| w.overlaps(g)))
            })
    })
}

/// The trip count the launch's [`TripCounts`] give the current run of the loop (or branch)
/// at `loc`.
pub(super) fn given_trips(api: &'static str, loc: SourceLoc) -> Option<u64> {
    context::with_ctx(api, loc, |c| {
        let loops = c.state.get::<Loops>();
        let run = loops.runs.get(&loc).copied().unwrap_or(0);
        loops
            .trips
            .as_ref()
            .and_then(|t| t.count_for(loc.line, run))
    })
}

/// The trip count the launch's [`TripCounts`] give the current run of the loop at `loc`, or
/// the estimate-mode error naming the loop (whose `why` has no value). Inside a branch the
/// launch does not take ([`crate::shadow`]), a loop without a given count runs its body once:
/// the compiler traces a device loop's body once, and the branch is traced for its checks.
fn estimate_trips(api: &'static str, loc: SourceLoc, why: &str) -> u64 {
    match given_trips(api, loc) {
        Some(n) => n,
        None if crate::shadow::active() => 1,
        None => raise(
            NkiError::new(
                ErrorKind::NoData,
                api,
                format!(
                    "estimate mode has no values, and this device loop's {why} is read from a \
                     tile: give its trip count to the launch (Launch::trip_counts(\
                     TripCounts::new().line({}, n)), or .runs({}, [..]) for one count per run)",
                    loc.line, loc.line
                ),
            ),
            loc,
        ),
    }
}

/// Counts a run of the loop (or branch) at `loc` (the index of its next run's trip count).
pub(super) fn count_run(api: &'static str, loc: SourceLoc) {
    context::with_ctx(api, loc, |c| {
        *c.state.get::<Loops>().runs.entry(loc).or_insert(0) += 1
    });
}

/// A device loop (NKI 0.7 `nl.fori_loop(lower, upper, body_fun)`): `body(i)` for `i` from
/// `lower` to `upper` (exclusive), step 1, run by the hardware (see the module docs). The
/// bounds are integers or 32-bit [`NkiScalar`]s (int32 or uint32, one dtype); `i` is an
/// [`NkiScalar`] of their dtype (usable as a dynamic DMA offset or in scalar arithmetic).
/// Loop state lives in SBUF or HBM.
///
/// In estimate mode a bound read from a tile has no value: the trip count comes from the
/// launch's [`TripCounts`] (by this call's line), or the launch fails naming the loop.
#[track_caller]
pub fn fori_loop(lower: impl IntoScalar, upper: impl IntoScalar, body: impl FnMut(NkiScalar)) {
    fori_loop_with(lower, upper, ForiOpts::new(), body);
}

/// [`fori_loop`] with a step (NKI's `step=`, a compile-time positive integer).
#[track_caller]
pub fn fori_loop_step(
    lower: impl IntoScalar,
    upper: impl IntoScalar,
    step: u32,
    body: impl FnMut(NkiScalar),
) {
    fori_loop_with(lower, upper, ForiOpts::new().step(step), body);
}

/// [`fori_loop`] with NKI 0.8's keywords (`step=`, `unroll=`) as options.
///
/// `unroll(true)` (NKI 0.8 `unroll=True`): the loop is unrolled by the compiler: its bounds
/// must be compile-time integers (a bound read at run time is an error, as NKI's compilation
/// fails), the body is traced once (a tile it allocates is one buffer, as in a rolled loop)
/// and replicated once per iteration, and no loop runs on the device: no branch, no iteration
/// barrier in the timing model, so consecutive iterations overlap as far as their data
/// allows, and the profile lists no device loop. `unroll(false)` and the default (NKI's
/// `None`, where the compiler decides [A: its heuristic is not public]) keep the loop rolled.
///
/// ```
/// use nki_core::nl::ForiOpts;
/// let o = ForiOpts::new().step(2).unroll(true);
/// assert_eq!((o.get_step(), o.get_unroll()), (2, Some(true)));
/// ```
#[track_caller]
pub fn fori_loop_with(
    lower: impl IntoScalar,
    upper: impl IntoScalar,
    opts: ForiOpts,
    body: impl FnMut(NkiScalar),
) {
    fori_at(
        "nl.fori_loop",
        SourceLoc::caller(),
        lower,
        upper,
        opts,
        body,
    );
}

/// The keyword options of [`fori_loop_with`] (NKI `step=1, unroll=None`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ForiOpts {
    step: u32,
    unroll: Option<bool>,
}

impl Default for ForiOpts {
    fn default() -> Self {
        ForiOpts {
            step: 1,
            unroll: None,
        }
    }
}

impl ForiOpts {
    /// Step 1, `unroll=None` (rolled).
    pub fn new() -> ForiOpts {
        ForiOpts::default()
    }

    /// The step (a positive 32-bit integer).
    pub fn step(mut self, step: u32) -> ForiOpts {
        self.step = step;
        self
    }

    /// Unrolls the loop at compile time (`true`) or keeps it rolled (`false`).
    pub fn unroll(mut self, unroll: bool) -> ForiOpts {
        self.unroll = Some(unroll);
        self
    }

    /// The step set.
    pub fn get_step(&self) -> u32 {
        self.step
    }

    /// The unroll choice set (`None`: the compiler's).
    pub fn get_unroll(&self) -> Option<bool> {
        self.unroll
    }
}

fn fori_at(
    api: &'static str,
    loc: SourceLoc,
    lower: impl IntoScalar,
    upper: impl IntoScalar,
    opts: ForiOpts,
    mut body: impl FnMut(NkiScalar),
) {
    let step = opts.step;
    if step == 0 || step > i32::MAX as u32 {
        raise(
            NkiError::new(
                ErrorKind::InvalidArgument,
                api,
                format!("step={step}: a device loop's step is a positive 32-bit integer"),
            ),
            loc,
        );
    }
    let (lo, hi) = (
        lower.into_scalar(loc).require_32(api, loc),
        upper.into_scalar(loc).require_32(api, loc),
    );
    let (lo, hi, ty, _) = lo.unify(hi, api, loc);
    let unrolled = opts.unroll == Some(true);
    if unrolled && !(lo.is_literal() && hi.is_literal()) {
        raise(
            NkiError::new(
                ErrorKind::InvalidArgument,
                api,
                "unroll=True: the loop is unrolled at compile time, so its bounds must be \
                 compile-time integers; a bound known only at run time (an NkiScalar) needs \
                 a rolled loop (unroll=False)",
            ),
            loc,
        );
    }
    let trips = match (lo.value(), hi.value()) {
        (Some(a), Some(b)) if b > a => ((b - a + i64::from(step) - 1) / i64::from(step)) as u64,
        (Some(_), Some(_)) => 0,
        _ => estimate_trips(api, loc, "bound"),
    };
    if !unrolled {
        count_run(api, loc);
    }
    run_loop(
        api,
        loc,
        !unrolled,
        |k| k < trips,
        |k| {
            let v = lo.value().map(|a| a + k as i64 * i64::from(step));
            // The induction variable derives from both bounds' registers.
            body(NkiScalar::typed(v, ty).after(lo).after(hi))
        },
        || lo.after(hi).register(),
    );
}

/// A device `while` loop (NKI `nl.while_loop(cond, body_fun)`): while `cond` is non-zero, run
/// `body`, which returns the next condition (usually [`scalar_load`](crate::isa::scalar_load)
/// of a tile the body updated). A zero `cond` skips the body.
///
/// In estimate mode a condition read from a tile has no value: the number of body runs comes
/// from the launch's [`TripCounts`] (by this call's line), or the launch fails naming the
/// loop. A loop that runs [`MAX_DEVICE_LOOP_ITERATIONS`] iterations (or the launch's
/// [`Launch::max_loop_iterations`](crate::spmd::Launch::max_loop_iterations)) fails the launch
/// instead of hanging the host.
#[track_caller]
pub fn while_loop(cond: NkiScalar, mut body: impl FnMut() -> NkiScalar) {
    let api = "nl.while_loop";
    let loc = SourceLoc::caller();
    let cond = cond.require_32(api, loc);
    let estimate = !Op::at(api, loc).executes();
    // Estimate mode: a trip count given for this loop decides it; otherwise the condition
    // must have a value (one computed from constants), or the launch fails.
    let trips = match (estimate, cond.value()) {
        (true, _) => given_trips(api, loc),
        (false, _) => None,
    };
    let trips = match trips {
        None if cond.value().is_none() => Some(estimate_trips(api, loc, "condition")),
        t => t,
    };
    count_run(api, loc);
    let c = std::cell::Cell::new(cond);
    run_loop(
        api,
        loc,
        true,
        |k| match trips {
            Some(n) => k < n,
            None => c.get().value().unwrap_or(0) != 0,
        },
        |_| {
            let next = body();
            if trips.is_none() && next.value().is_none() {
                estimate_trips(api, loc, "condition");
            }
            c.set(next);
        },
        || c.get().register(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::Mode;
    use crate::dtype::DType;
    use crate::record::{BufId, MemKind};

    /// The tiles the records of `f` write.
    fn written_tiles(mode: Mode, f: impl FnOnce()) -> Vec<u64> {
        let recs = crate::isa::trace::run(mode, f).unwrap();
        let mut ids: Vec<u64> = recs
            .iter()
            .filter(|r| r.opcode == Opcode::Memset)
            .flat_map(|r| r.writes.iter().map(|w| w.buf))
            .filter_map(|b| match b {
                BufId::Tile(id) => Some(id),
                BufId::Hbm(_) => None,
            })
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    #[test]
    fn a_body_allocation_is_one_buffer_in_every_iteration_and_nest() {
        for mode in [Mode::Simulate, Mode::Estimate] {
            let device = written_tiles(mode, || {
                fori_loop(0, 4, |_| {
                    let _a = super::super::data::zeros(&[128, 8], DType::F32, MemKind::Sbuf);
                    let _b = super::super::data::zeros(&[128, 8], DType::F32, MemKind::Sbuf);
                    fori_loop(0, 3, |_| {
                        let _c = super::super::data::zeros(&[128, 8], DType::F32, MemKind::Sbuf);
                    });
                });
            });
            // a, b and c: three buffers, whatever the iteration counts.
            assert_eq!(device.len(), 3, "{mode:?}");
            let host = written_tiles(mode, || {
                for _ in 0..4 {
                    let _a = super::super::data::zeros(&[128, 8], DType::F32, MemKind::Sbuf);
                }
            });
            assert_eq!(host.len(), 4, "{mode:?}");
        }
    }

    #[test]
    fn each_iteration_ends_with_a_branch_on_every_engine_it_used() {
        let recs = crate::isa::trace::run(Mode::Simulate, || {
            fori_loop(0, 2, |_| {
                let _a = super::super::data::zeros(&[128, 8], DType::F32, MemKind::Sbuf);
            });
        })
        .unwrap();
        let branches: Vec<_> = recs
            .iter()
            .filter(|r| r.opcode == Opcode::LoopBranch)
            .map(|r| r.engine)
            .collect();
        let memset_engine = recs
            .iter()
            .find(|r| r.opcode == Opcode::Memset)
            .unwrap()
            .engine;
        assert_eq!(branches, vec![memset_engine; 2]);
        // A loop with nothing in it still branches (on the Sync engine).
        let recs = crate::isa::trace::run(Mode::Simulate, || fori_loop(0, 3, |_| {})).unwrap();
        assert_eq!(recs.len(), 3);
        assert!(recs.iter().all(|r| r.engine == Engine::Sync));
    }
}
