//! How nki-rs errors reach candle, typed.
//!
//! What the bridge itself checks comes back as candle's own variants, each naming the op: an
//! element type the bridge cannot move is [`Error::UnsupportedDTypeForOp`], inputs of
//! different dtypes [`Error::DTypeMismatchBinaryOp`], shapes an op's output function rejects
//! [`Error::ShapeMismatchBinaryOp`], [`Error::UnexpectedShape`] or
//! [`Error::UnexpectedNumberOfDims`] (what the ready-made ops return), a tensor off the CPU
//! [`Error::DeviceMismatchBinaryOp`]. A kernel's own error (out-of-bounds tile, SBUF overflow,
//! race, …) is an [`Error::WrappedContext`] around a [`KernelError`], whose [`NkiError`]
//! ([`nki_error`] finds it) carries the kind, program id and kernel source line.

use candle_core::Error;
use nki_core::NkiError;
use std::fmt;

/// An nki-rs error raised while op `op` ran its kernel (or moved its tensors).
#[derive(Clone)]
pub struct KernelError {
    /// The op's name (`"<name>.bwd"` for its backward kernel).
    pub op: String,
    /// nki-rs's error: kind, message, program id, kernel line.
    pub error: NkiError,
}

impl fmt::Display for KernelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "nki op `{}`: {}", self.op, self.error)
    }
}

/// As [`Display`](fmt::Display): candle prints a wrapped error with `{:?}`.
impl fmt::Debug for KernelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for KernelError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

/// The nki-rs error inside a candle error the bridge returned (through candle's backtrace and
/// context wrappers), if it is one: `nki_error(&e).map(|e| e.kind())`.
pub fn nki_error(e: &Error) -> Option<&NkiError> {
    kernel_error(e).map(|k| &k.error)
}

/// The [`KernelError`] inside a candle error the bridge returned, if it is one.
pub fn kernel_error(e: &Error) -> Option<&KernelError> {
    match e {
        Error::WrappedContext { wrapped, .. } => wrapped.downcast_ref::<KernelError>(),
        Error::WithBacktrace { inner, .. }
        | Error::Context { inner, .. }
        | Error::WithPath { inner, .. } => kernel_error(inner),
        _ => None,
    }
}

/// The candle error of op `op` for nki-rs error `error`.
pub(crate) fn op_error(op: &str, error: NkiError) -> Error {
    Error::WrappedContext {
        wrapped: Box::new(KernelError {
            op: op.to_string(),
            error,
        }),
        context: format!("in candle op `{op}`"),
    }
    .bt()
}
