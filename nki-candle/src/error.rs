//! How nki-rs errors reach candle: as a [`candle_core::Error`] whose message names the op and
//! carries nki-rs's own message (op, shapes, program id, kernel source line).

use std::fmt::Display;

/// A candle error for op `op` with `message`.
pub(crate) fn op_error(op: &str, message: impl Display) -> candle_core::Error {
    candle_core::Error::Msg(format!("nki op `{op}`: {message}")).bt()
}
