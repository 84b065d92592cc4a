//! The compiled conditional (NKI 0.8 `nl.if_else(cond, then_fn, else_fn=None)`): one of two
//! closures runs according to a condition. A Rust `bool` or integer is resolved while the
//! kernel is traced (only the selected closure runs and no branch is emitted, as a Python
//! `bool`/`int` condition is resolved at compile time); an [`NkiScalar`] is evaluated on the
//! device: every engine's sequencer runs a compare-and-branch on it.
//!
//! What each launch mode does with a device condition:
//! - execute and simulate evaluate it on its value (non-zero, a negative value included,
//!   selects `then_fn`) and run the selected closure;
//! - estimate (no values) needs the branch taken for a condition read from a tile: from the
//!   launch's [`TripCounts`] ([`TripCounts::branch`] by the `if_else` line, a count of 0 for
//!   the else branch and any other for the then branch), or the launch fails with an
//!   [`ErrorKind::NoData`] error naming the call and its line. Nothing is guessed.
//!
//! Timing: the branch is one [`BRANCH`](crate::record::Opcode::Branch) record on each
//! sequencer (Sync, Vector, Scalar, GpSimd; TensorE's and the DMA queues' work is triggered
//! from them, as for a device loop's branch), each reading the condition's register, so every
//! engine waits for the `scalar_load` the condition comes from before it runs anything after
//! the branch. A branch costs its sequencer one `MIN_II` [A: no public figure for a
//! compare-and-branch; the floor every non-TensorE instruction pays, as `scalar_load`].
//!
//! Both closures of a device branch are traced, `then_fn` first, as NKI's compiler compiles
//! both sides of a branch: an error in either fails the launch in every mode, whichever
//! branch it takes. The branch not taken is traced as the compiler sees it ([`crate::shadow`]):
//! checks and records without values (the scalars the device computes are unknown in it; a
//! device loop in it whose trip count is not known runs its body once, a branch in it whose
//! condition is not known traces both sides), then its records and what it changed in the
//! instance (tiles written, loop runs, accumulator registers, memory peak) are rolled back.
//! So only the branch taken runs, is costed and shows in the profile. It claims no HBM
//! elements and meets no other core; its tracing ends early, its checks so far standing, at
//! an operation that would act outside the instance (a mesh collective or device copy, an
//! HBM allocation) or at a dynamic access pattern whose values are neither computed nor given.

use super::control::{count_run, given_trips};
use super::loop_state::TripCounts;
use crate::context::{self, raise};
use crate::error::{ErrorKind, NkiError, SourceLoc};
use crate::isa::op::Op;
use crate::isa::NkiScalar;
use crate::record::{Engine, Opcode};
use crate::shadow;

/// The sequencers that run a device branch (every engine's instruction stream; TensorE's
/// and the DMA queues' instructions are triggered from these).
pub(crate) const SEQUENCERS: [Engine; 4] =
    [Engine::Vector, Engine::Scalar, Engine::GpSimd, Engine::Sync];

/// A condition of [`if_else`]: resolved while tracing (a `bool` or an integer) or evaluated on
/// the device (an [`NkiScalar`], a comparison's 0/1 result included).
pub trait Condition {
    /// The condition, resolved or left to the device.
    fn condition(self) -> Cond;
}

/// A resolved [`Condition`].
#[derive(Clone, Copy, Debug)]
pub enum Cond {
    /// Known while tracing: only the selected closure runs, no branch is emitted.
    Traced(bool),
    /// Computed on the device: every sequencer branches on it.
    Device(NkiScalar),
}

impl Condition for bool {
    fn condition(self) -> Cond {
        Cond::Traced(self)
    }
}

macro_rules! int_condition {
    ($($t:ty),*) => {$(
        impl Condition for $t {
            /// Non-zero selects `then_fn` (a compile-time integer, as a Python `int`).
            fn condition(self) -> Cond {
                Cond::Traced(self != 0)
            }
        }
    )*};
}
int_condition!(i32, i64, u32, usize);

impl Condition for NkiScalar {
    /// A device condition; a scalar combined only from integers (`scalar_alu(2, 3,
    /// AluOp::Less)`, a Python `bool` in NKI) is resolved while tracing.
    fn condition(self) -> Cond {
        match (self.is_literal(), self.value()) {
            (true, Some(v)) => Cond::Traced(v != 0),
            _ => Cond::Device(self),
        }
    }
}

impl Condition for &NkiScalar {
    fn condition(self) -> Cond {
        (*self).condition()
    }
}

/// Runs `then_fn` when `cond` is non-zero, `else_fn` otherwise (NKI 0.8 `nl.if_else(cond,
/// then_fn, else_fn)`; see the module docs for the modes and the timing). A `bool` or an
/// integer is resolved while tracing; an [`NkiScalar`] (a `scalar_load`, scalar arithmetic, a
/// comparison such as `nisa::scalar_alu(a, b, AluOp::Less)` or `a.less(b)`) is evaluated on the device.
///
/// Errors: a device condition that is not a 32-bit scalar, or one bound to one engine
/// (`scalar_load(.., engine)`: every sequencer runs the branch, so each needs the value); in
/// estimate mode a condition read from a tile without the branch taken given to the launch.
///
/// ```
/// use nki_core::prelude::*;
/// #[nki_kernel(nki = "0.8")]
/// fn add_if(flag: &Hbm<i32>, x: &Hbm<f32>) -> Hbm<f32> {
///     let out = nl::ndarray(x.shape(), DType::F32, nl::shared_hbm);
///     let f = nl::ndarray(&[1, 1], DType::I32, nl::sbuf);
///     nisa::dma_copy(&f, flag.view(), None);
///     let t = nl::ndarray(x.shape(), DType::F32, nl::sbuf);
///     nisa::dma_copy(&t, x.view(), None);
///     let cond = nisa::scalar_alu(nisa::scalar_load(&f), 0, nl::AluOp::Greater);
///     nl::if_else(
///         cond,
///         || nisa::tensor_scalar(&t, &t, nl::AluOp::Add, 10.0, None),
///         || nisa::tensor_scalar(&t, &t, nl::AluOp::Multiply, 2.0, None),
///     );
///     nisa::dma_copy(out.view(), &t, None);
///     out
/// }
/// let x = Hbm::from_vec(&[2, 2], vec![1.0f32, 2.0, 3.0, 4.0]).unwrap();
/// let (y, _) = add_if::launch(1, &Hbm::from_vec(&[1, 1], vec![1]).unwrap(), &x).unwrap();
/// assert_eq!(y.to_f32_vec().unwrap(), [11.0, 12.0, 13.0, 14.0]);
/// let (y, _) = add_if::launch(1, &Hbm::from_vec(&[1, 1], vec![0]).unwrap(), &x).unwrap();
/// assert_eq!(y.to_f32_vec().unwrap(), [2.0, 4.0, 6.0, 8.0]);
/// ```
#[track_caller]
pub fn if_else(cond: impl Condition, then_fn: impl FnOnce(), else_fn: impl FnOnce()) {
    let loc = SourceLoc::caller();
    match branch(API, loc, cond.condition()) {
        Decided::Traced(true) => then_fn(),
        Decided::Traced(false) => else_fn(),
        Decided::Device(true) => {
            then_fn();
            untaken(loc, else_fn);
        }
        Decided::Device(false) => {
            untaken(loc, then_fn);
            else_fn();
        }
    }
}

/// [`if_else`] without an else branch (NKI's `else_fn=None`): runs `then_fn` when `cond` is
/// non-zero.
#[track_caller]
pub fn if_then(cond: impl Condition, then_fn: impl FnOnce()) {
    let loc = SourceLoc::caller();
    match branch(API, loc, cond.condition()) {
        Decided::Traced(true) | Decided::Device(true) => then_fn(),
        Decided::Traced(false) => {}
        Decided::Device(false) => untaken(loc, then_fn),
    }
}

/// The API name of [`if_else`] and [`if_then`].
const API: &str = "nl.if_else";

/// How a branch was decided: while tracing (only the selected closure is traced) or on the
/// device (the other closure is traced too, as the branch not taken).
#[derive(Clone, Copy)]
enum Decided {
    Traced(bool),
    Device(bool),
}

/// Traces `f`, the side of the device branch at `loc` that the launch does not take: checked
/// and then rolled back (see the module docs). An error in it fails the launch.
fn untaken(loc: SourceLoc, f: impl FnOnce()) {
    let cp = context::with_ctx(API, loc, |c| c.begin_untaken());
    let traced = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    context::with_ctx(API, loc, |c| c.end_untaken(cp));
    if let Err(payload) = traced {
        if !payload.is::<shadow::Stop>() {
            std::panic::resume_unwind(payload);
        }
    }
}

/// Decides the branch at `loc` (emitting its records for a device condition): whether the
/// then branch runs, and whether the device decides it.
fn branch(api: &'static str, loc: SourceLoc, cond: Cond) -> Decided {
    let c = match cond {
        Cond::Traced(b) => return Decided::Traced(b),
        Cond::Device(c) => c,
    };
    let op = Op::at(api, loc);
    let c = c.require_32(api, loc);
    if let Some(e) = c.engine() {
        op.fail(
            ErrorKind::InvalidArgument,
            format!(
                "the condition is bound to {} (scalar_load(.., engine)); every sequencer runs \
                 the branch, so its value must be available on all engines: load it without \
                 an engine",
                e.name()
            ),
        );
    }
    let taken = match c.value() {
        Some(v) => v != 0,
        None => match given_trips(api, loc) {
            Some(n) => n != 0,
            // Inside a branch not taken, unknown: both sides are traced (the other one as a
            // branch not taken in turn).
            None if shadow::active() => true,
            None => raise(
                NkiError::new(
                    ErrorKind::NoData,
                    api,
                    format!(
                        "estimate mode has no values, and this branch's condition is read \
                         from a tile: give the branch taken to the launch \
                         (Launch::trip_counts(TripCounts::new().branch({line}, true)), or \
                         .branch_runs({line}, [..]) for one per run)",
                        line = loc.line
                    ),
                ),
                loc,
            ),
        },
    };
    count_run(api, loc);
    let register = c.register();
    for e in SEQUENCERS {
        op.issue(
            &[],
            || {},
            || {
                let mut r = op.record(e, Opcode::Branch).size(1, 1).done();
                r.reads.extend(register);
                r
            },
        );
    }
    Decided::Device(taken)
}

/// The branch taken, as a [`TripCounts`] entry (what the estimate-mode docs of
/// [`if_else`] refer to).
impl TripCounts {
    /// Every run of the [`if_else`] at source line `line` takes the then branch (`true`) or
    /// the else branch (`false`), in estimate mode.
    pub fn branch(self, line: u32, taken: bool) -> TripCounts {
        self.line(line, u64::from(taken))
    }

    /// The `k`-th run of the [`if_else`] at `line` (in each instance) takes the then branch
    /// when `taken[k]`; a run past the list's end has no branch given.
    pub fn branch_runs(self, line: u32, taken: impl IntoIterator<Item = bool>) -> TripCounts {
        self.runs(line, taken.into_iter().map(u64::from))
    }
}
