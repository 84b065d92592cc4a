//! How a failing kernel instance stops: by unwinding, as rayon's workers do.
//!
//! An error inside a kernel (a failed check of an `nl`/`nisa` op, see `context::raise`)
//! unwinds the instance's thread with a [`KernelAbort`] payload carrying the [`NkiError`]; an
//! instance that notices another instance already failed unwinds with [`Cancelled`]. The
//! launcher runs each instance with [`run_instance`], under [`catch`], which turns the unwind back into a value: the
//! error, a cancellation, or — for any other panic of the kernel body — an
//! [`ErrorKind::KernelPanic`] error. [`quiet_kernel_unwinds`] keeps these unwinds from
//! printing panic messages.
//!
//! Under `panic = "abort"` nothing unwinds: the first error inside a kernel ends the process
//! (after the panic hook printed the error). Errors found before the kernel runs (an invalid
//! grid) are still returned as `Err`.

use crate::context::{self, InstanceCtx};
use crate::error::{ErrorKind, NkiError};
use std::any::Any;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;

/// The payload a failing kernel unwinds with.
pub(crate) struct KernelAbort(pub(crate) NkiError);

/// The payload an instance unwinds with when another instance already failed.
pub(crate) struct Cancelled;

/// Why a kernel instance stopped early.
pub(crate) enum Stop {
    /// Another instance failed first.
    Cancelled,
    /// The instance failed with this error.
    Failed(NkiError),
}

/// Runs the instance body `f` of program id `program_id`, turning its unwind into a [`Stop`]:
/// a [`KernelAbort`] gives its error, [`Cancelled`] a cancellation, and any other panic a
/// [`ErrorKind::KernelPanic`] error with the panic message.
pub(crate) fn catch<R>(program_id: &[usize], f: impl FnOnce() -> R) -> Result<R, Stop> {
    panic::catch_unwind(AssertUnwindSafe(f)).map_err(|payload| stop_of(payload, program_id))
}

/// Runs `f` as the program instance `ctx` on this thread under [`catch`]; returns the
/// instance's context (its records, memory peak) with the outcome. The thread's previous
/// context, if any, is restored afterwards.
pub(crate) fn run_instance<R>(
    ctx: InstanceCtx,
    f: impl FnOnce() -> R,
) -> (InstanceCtx, Result<R, Stop>) {
    let pid = ctx.program_id.clone();
    let prev = context::install(ctx);
    let outcome = catch(&pid, f);
    let ctx = context::take().expect("the instance context was installed above");
    if let Some(p) = prev {
        context::install(p);
    }
    (ctx, outcome)
}

fn stop_of(payload: Box<dyn Any + Send>, program_id: &[usize]) -> Stop {
    if payload.is::<Cancelled>() {
        return Stop::Cancelled;
    }
    let payload = match payload.downcast::<KernelAbort>() {
        Ok(abort) => return Stop::Failed(abort.0),
        Err(p) => p,
    };
    let msg = payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "unknown panic".into());
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
/// this thread (they all become `Err`s of the launch). Other panics go to the previous hook.
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
            let in_kernel = context::try_with_ctx(|_| ()).is_some();
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
    fn a_kernel_abort_gives_its_error() {
        let e = NkiError::new(ErrorKind::ShapeMismatch, "nl.add", "shapes differ");
        let got = failed(catch(&[3], || panic::panic_any(KernelAbort(e.clone()))));
        assert_eq!(got.kind(), ErrorKind::ShapeMismatch);
        assert_eq!(got.to_string(), e.to_string());
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
