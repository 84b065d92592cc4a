//! How a kernel rejects bad arguments: [`require`] a condition, [`check`] a `Result`, or
//! [`fail`] with an error. Each fails the launch with the error at the kernel's own source
//! line (and the failing instance's program id), the way a failed `nl`/`nisa` check does.

use crate::error::{ErrorKind, NkiError, Result, SourceLoc};

/// Fails the launch with an [`ErrorKind::InvalidArgument`] error from `kernel` (the name the
/// error reports) unless `ok`; `message` is only built on failure.
///
/// ```
/// use nki_core::prelude::*;
///
/// #[nki_kernel]
/// fn scale(x: &Hbm<f32>, out: &mut Hbm<f32>, factor: f32) {
///     nl::require(factor != 0.0, "scale", || format!("factor must be nonzero, got {factor}"));
///     let t = nl::load(x.slice((0..1, 0..4)));
///     nl::store(out.slice((0..1, 0..4)), &nl::multiply(&t, factor));
/// }
///
/// let x = Hbm::<f32>::full([1, 4], 1.5);
/// let mut out = Hbm::<f32>::zeros([1, 4]);
/// let err = launch!(scale[1](&x, &mut out, 0.0)).unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::InvalidArgument);
/// assert!(err.to_string().contains("factor must be nonzero"), "{err}");
/// assert!(launch!(scale[1](&x, &mut out, 2.0)).is_ok());
/// ```
#[track_caller]
pub fn require(ok: bool, kernel: &'static str, message: impl FnOnce() -> String) {
    if !ok {
        fail(NkiError::new(ErrorKind::InvalidArgument, kernel, message()));
    }
}

/// The value of `r`, or, for an `Err`, fails the launch with that error at the caller's line.
#[track_caller]
pub fn check<T>(r: Result<T>) -> T {
    match r {
        Ok(v) => v,
        Err(e) => fail(e),
    }
}

/// Fails the launch with `e` at the caller's line. Outside a kernel launch this panics with
/// the error's message.
#[track_caller]
pub fn fail(e: NkiError) -> ! {
    crate::context::raise(e, SourceLoc::caller())
}
