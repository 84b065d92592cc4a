//! Tracing a branch the launch does not take (the untaken side of an `nl::if_else` on a
//! device condition): its instructions are checked as the compiler checks both sides of a
//! branch, then its records and state are rolled back, so only the branch taken is run and
//! costed.
//!
//! While such a branch is traced (this module's depth is above zero on the thread), the
//! rest of the crate reads the scalar values the device computes as unknown (the compiler
//! does not know them: [`active`] is what `NkiScalar::value` asks), claims no HBM elements,
//! meets no other core and marks no tile written for good. Where tracing cannot go on
//! without doing what the untaken branch does not do (a mesh collective or device copy, an
//! HBM allocation, a dynamic access pattern whose values are not given), [`stop`] ends the
//! branch's tracing there: its checks so far stand, the rest of it is not traced.
//!
//! This module depends on nothing else in the crate, so every layer may ask it.

use std::any::Any;
use std::cell::Cell;

thread_local! {
    /// How many untaken branches the running instance is tracing, nested.
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// Whether the running instance is tracing a branch the launch does not take.
#[inline]
pub(crate) fn active() -> bool {
    DEPTH.with(Cell::get) > 0
}

/// Enters an untaken branch (nested in any being traced).
pub(crate) fn enter() {
    DEPTH.with(|d| d.set(d.get() + 1));
}

/// Leaves the untaken branch entered last.
pub(crate) fn leave() {
    DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
}

/// The unwind payload of [`stop`]: caught where the untaken branch began.
pub(crate) struct Stop;

/// Ends the tracing of the untaken branch here (see the module docs). Only called while
/// [`active`].
pub(crate) fn stop() -> ! {
    std::panic::panic_any(Stop)
}

/// Ends the tracing of the untaken branch here if one is being traced (an operation that
/// would act outside the instance: communicate, allocate in HBM).
#[inline]
pub(crate) fn stop_if_active() {
    if active() {
        stop()
    }
}

/// A value kept in an instance's state (`context::InstanceState`): it says what tracing a
/// branch the launch does not take may change in it, and how to put that back.
pub(crate) trait StateValue: Any + Send + Default {
    /// What tracing an untaken branch may change, saved before it.
    fn checkpoint(&self) -> Box<dyn Any + Send>;
    /// Puts back what [`StateValue::checkpoint`] saved.
    fn rollback(&mut self, saved: Box<dyn Any + Send>);
}

/// The [`StateValue`] of a small value saved whole.
macro_rules! state_value_by_clone {
    ($($t:ty),*) => {$(
        impl $crate::shadow::StateValue for $t {
            fn checkpoint(&self) -> Box<dyn std::any::Any + Send> {
                Box::new(self.clone())
            }
            fn rollback(&mut self, saved: Box<dyn std::any::Any + Send>) {
                if let Ok(v) = saved.downcast::<$t>() {
                    *self = *v;
                }
            }
        }
    )*};
}
pub(crate) use state_value_by_clone;
