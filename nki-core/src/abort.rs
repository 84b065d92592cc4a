//! How a failing kernel instance stops: by unwinding, as rayon's workers do.
//!
//! An error inside a kernel (a failed check of an `nl`/`nisa` op) is [`raise`]d: it unwinds
//! the instance's thread with a [`KernelAbort`] payload carrying the [`NkiError`]; an
//! instance that notices another instance already failed unwinds with [`Cancelled`]. The
//! launcher runs each instance (`context::run_instance`) under [`catch`], which turns the
//! unwind back into a value: the error (with the instance's program id), a cancellation, or
//! — for any other panic of the kernel body — an [`ErrorKind::KernelPanic`] error. [`quiet_kernel_unwinds`] keeps these unwinds from
//! printing panic messages.
//!
//! Under `panic = "abort"` nothing unwinds: the first error inside a kernel ends the process
//! (after the panic hook printed the error). Errors found before the kernel runs (an invalid
//! grid) are still returned as `Err`.

use crate::error::{ErrorKind, NkiError, SourceLoc};
use std::any::Any;
use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, Once};

thread_local! {
    /// Where the last panic of a kernel body on this thread happened (set by the panic hook,
    /// taken by [`catch`]).
    static PANIC_AT: Cell<Option<SourceLoc>> = const { Cell::new(None) };
    /// How many [`catch`]es are running on this thread (a kernel instance runs inside one).
    static CATCHING: Cell<u32> = const { Cell::new(0) };
    /// How many [`user_closure`]s are running on this thread.
    static IN_USER_CLOSURE: Cell<u32> = const { Cell::new(0) };
}

/// True while a kernel instance (a [`catch`]) runs on this thread.
pub(crate) fn in_instance() -> bool {
    CATCHING.try_with(Cell::get).unwrap_or(0) > 0
}

/// Fails the running kernel instance with `e` at `loc` (its program id is attached where the
/// instance is caught). Outside a kernel this panics with the error's message.
pub fn raise(e: NkiError, loc: SourceLoc) -> ! {
    let e = e.with_loc(loc);
    if !in_instance() {
        panic!("{e}");
    }
    panic::panic_any(KernelAbort(e))
}

/// Unwraps a result inside a kernel: an `Err` fails the instance (see [`raise`]).
pub(crate) fn check<T>(r: crate::error::Result<T>, loc: SourceLoc) -> T {
    match r {
        Ok(v) => v,
        Err(e) => raise(e, loc),
    }
}

/// The payload a failing kernel unwinds with.
pub(crate) struct KernelAbort(pub(crate) NkiError);

/// The payload an instance unwinds with when an instance before it failed.
pub(crate) struct Cancelled;

/// Where a failure sits in the order a launch reports failures in: the failing instance
/// (linear program id), then the point of its run (its count of tracked HBM accesses, see
/// `hbm::track`), then a rank among failures at the same point (a race first: by element,
/// then by the other access; an instance's own error last).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct FailureKey {
    /// Linear program id of the failing instance.
    pub(crate) index: u64,
    /// The failing instance's tracked HBM accesses before the failure.
    pub(crate) seq: u32,
    /// The rank among failures at the same point.
    pub(crate) rank: (u8, u64, u64, u32),
}

impl FailureKey {
    /// The key of an instance's own error (raised by the instance itself) after `seq`
    /// tracked accesses.
    pub(crate) fn own(index: u64, seq: u32) -> FailureKey {
        FailureKey {
            index,
            seq,
            rank: (1, 0, 0, 0),
        }
    }
}

/// The failures of a launch: the first one in [`FailureKey`] order is the launch's error, and
/// a failure cancels the instances after the lowest failing instance in launch order. The
/// instances before it still run, so the same failure is reported whatever order the host
/// threads run the instances in (a race between two instances belongs to the later one,
/// whichever of the two finds it, see `hbm::track`).
pub(crate) struct Cancellation {
    /// Linear program id of the lowest failing instance so far (`u64::MAX`: none).
    lowest_failure: AtomicU64,
    /// The first failure so far.
    first: Mutex<Option<(FailureKey, NkiError)>>,
    /// No instance is cancelled by another's failure ([`Cancellation::isolate`]).
    isolated: AtomicBool,
}

impl Cancellation {
    /// No instance has failed yet.
    pub(crate) fn new() -> Cancellation {
        Cancellation {
            lowest_failure: AtomicU64::new(u64::MAX),
            first: Mutex::new(None),
            isolated: AtomicBool::new(false),
        }
    }

    /// Reports failure `e` at `key`: fails instance `key.index` and keeps `e` if it is the
    /// first failure in key order.
    pub(crate) fn report(&self, key: FailureKey, e: NkiError) {
        self.fail(key.index);
        let mut g = self.first.lock().unwrap_or_else(|p| p.into_inner());
        if g.as_ref().is_none_or(|(k, _)| key < *k) {
            *g = Some((key, e));
        }
    }

    /// The first failure reported, if any.
    pub(crate) fn take_first(&self) -> Option<NkiError> {
        let mut g = self.first.lock().unwrap_or_else(|p| p.into_inner());
        g.take().map(|(_, e)| e)
    }

    /// Records that instance `index` (linear program id) failed (nothing, once isolated).
    pub(crate) fn fail(&self, index: u64) {
        if !self.isolated.load(Ordering::SeqCst) {
            self.lowest_failure.fetch_min(index, Ordering::SeqCst);
        }
    }

    /// From now on no failure cancels another instance. A mesh launch runs each device on
    /// its own thread until it fails, ends, or waits for what no device will send (a
    /// deadlock): cancelling the others at the first failure the host happened to see would
    /// make the error reported depend on which device the host ran first.
    pub(crate) fn isolate(&self) {
        self.isolated.store(true, Ordering::SeqCst);
    }

    /// True when instance `index` should stop: an instance before it failed.
    pub(crate) fn cancels(&self, index: u64) -> bool {
        index > self.lowest_failure.load(Ordering::Relaxed)
    }
}

/// Why a kernel instance stopped early.
pub(crate) enum Stop {
    /// An instance before it (in launch order) failed.
    Cancelled,
    /// The instance failed with this error.
    Failed(NkiError),
}

/// Runs the instance body `f` of program id `program_id`, turning its unwind into a [`Stop`]:
/// a [`KernelAbort`] gives its error, [`Cancelled`] a cancellation, and any other panic a
/// [`ErrorKind::KernelPanic`] error with the panic message and the file:line where it
/// panicked (recorded by the hook of [`quiet_kernel_unwinds`]).
pub(crate) fn catch<R>(program_id: &[usize], f: impl FnOnce() -> R) -> Result<R, Stop> {
    PANIC_AT.with(|p| p.set(None));
    CATCHING.with(|c| c.set(c.get() + 1));
    let outcome = panic::catch_unwind(AssertUnwindSafe(f));
    CATCHING.with(|c| c.set(c.get() - 1));
    outcome.map_err(|payload| {
        let at = PANIC_AT.with(|p| p.take());
        match stop_of(payload, program_id) {
            Stop::Failed(e) if e.kind() == ErrorKind::KernelPanic => Stop::Failed(match at {
                Some(loc) => e.with_loc(loc),
                None => e,
            }),
            other => other,
        }
    })
}

/// The location of a panic as a [`SourceLoc`] (its file name interned, see [`SourceLoc::new`]).
fn source_loc(l: &panic::Location<'_>) -> SourceLoc {
    SourceLoc::new(l.file(), l.line(), l.column())
}

/// Runs `f`, a closure the user handed the library whose `role` is e.g. "the sweep's
/// reject_if rule": a panic in it comes back as an [`ErrorKind::ClosurePanic`] error naming
/// the role, the panic message and where it panicked (the panic prints nothing). A kernel
/// instance's own unwind (its error or cancellation) passing through `f` goes on unwinding.
pub fn user_closure<R>(role: &str, f: impl FnOnce() -> R) -> Result<R, NkiError> {
    quiet_kernel_unwinds();
    let saved_at = PANIC_AT.with(|p| p.take());
    IN_USER_CLOSURE.with(|c| c.set(c.get() + 1));
    let outcome = panic::catch_unwind(AssertUnwindSafe(f));
    IN_USER_CLOSURE.with(|c| c.set(c.get() - 1));
    let at = PANIC_AT.with(|p| p.replace(saved_at));
    outcome.map_err(|payload| {
        if payload.is::<KernelAbort>() || payload.is::<Cancelled>() {
            panic::resume_unwind(payload)
        }
        let msg = panic_message(payload.as_ref());
        let e = NkiError::new(
            ErrorKind::ClosurePanic,
            "closure",
            format!("{role} panicked: {msg}"),
        );
        match at {
            Some(loc) => e.with_loc(loc),
            None => e,
        }
    })
}

/// The message of a panic payload (a `&str` or `String`; "unknown panic" for any other).
fn panic_message(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "unknown panic".into())
}

fn stop_of(payload: Box<dyn Any + Send>, program_id: &[usize]) -> Stop {
    if payload.is::<Cancelled>() {
        return Stop::Cancelled;
    }
    let payload = match payload.downcast::<KernelAbort>() {
        Ok(abort) => return Stop::Failed(abort.0.with_program_id(program_id)),
        Err(p) => p,
    };
    let msg = panic_message(payload.as_ref());
    Stop::Failed(
        NkiError::new(
            ErrorKind::KernelPanic,
            "kernel",
            format!("the kernel body panicked: {msg}"),
        )
        .with_program_id(program_id),
    )
}

/// Installs (once per process) a panic hook that stays quiet for kernel unwinds: the
/// [`KernelAbort`] and [`Cancelled`] payloads, and any panic while a kernel instance runs on
/// this thread (they all become `Err`s of the launch, with the panic's file:line). Other
/// panics go to the previous hook.
/// Under `panic = "abort"`, where the launch cannot return the error, a kernel error is
/// printed before the process aborts.
pub(crate) fn quiet_kernel_unwinds() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let prev = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            let p = info.payload();
            if let Some(KernelAbort(e)) = p.downcast_ref::<KernelAbort>() {
                if cfg!(panic = "abort") {
                    eprintln!("nki kernel error (panic = \"abort\": the process aborts): {e}");
                }
                return;
            }
            if p.is::<Cancelled>() {
                return;
            }
            let in_kernel = in_instance() || IN_USER_CLOSURE.try_with(Cell::get).unwrap_or(0) > 0;
            if in_kernel {
                if let Some(l) = info.location() {
                    let loc = source_loc(l);
                    PANIC_AT.with(|p| p.set(Some(loc)));
                }
            }
            if in_kernel && !cfg!(panic = "abort") {
                // A panic inside a kernel instance becomes an Err(KernelPanic); stay quiet.
                return;
            }
            prev(info)
        }));
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(stop: Result<(), Stop>) -> NkiError {
        match stop {
            Err(Stop::Failed(e)) => e,
            Err(Stop::Cancelled) => panic!("cancelled, not failed"),
            Ok(()) => panic!("did not stop"),
        }
    }

    #[test]
    fn a_kernel_abort_gives_its_error_with_the_program_id() {
        let e = NkiError::new(ErrorKind::ShapeMismatch, "nl.add", "shapes differ");
        let got = failed(catch(&[3], || panic::panic_any(KernelAbort(e.clone()))));
        assert_eq!(got.kind(), ErrorKind::ShapeMismatch);
        assert_eq!(got.program_id(), Some(&[3][..]));
        assert_eq!(got.to_string(), e.clone().with_program_id(&[3]).to_string());
        // An error that already names its instance keeps it.
        let other = e.with_program_id(&[7]);
        let got = failed(catch(&[3], || panic::panic_any(KernelAbort(other.clone()))));
        assert_eq!(got.to_string(), other.to_string());
    }

    #[test]
    fn a_cancellation_is_no_error() {
        let r = catch(&[0], || panic::panic_any(Cancelled));
        assert!(matches!(r, Err(Stop::Cancelled)));
        assert!(matches!(catch(&[0], || 7), Ok(7)));
    }

    #[test]
    fn other_panics_become_kernel_panic_errors_with_the_program_id() {
        quiet_kernel_unwinds();
        for e in [
            failed(catch(&[1, 2], || panic!("index {} out of range", 9))),
            failed(catch(&[1, 2], || std::panic::panic_any("a str payload"))),
            failed(catch(&[1, 2], || std::panic::panic_any(42u8))),
        ] {
            assert_eq!(e.kind(), ErrorKind::KernelPanic);
            assert!(e.to_string().contains("program id [1, 2]"), "{e}");
        }
        let e = failed(catch(&[0], || panic!("index {} out of range", 9)));
        assert!(
            e.to_string().contains("panicked: index 9 out of range"),
            "{e}"
        );
        let e = failed(catch(&[0], || std::panic::panic_any(42u8)));
        assert!(e.to_string().contains("unknown panic"), "{e}");
    }
}
