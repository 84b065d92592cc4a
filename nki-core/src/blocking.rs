//! Waits of one kernel instance for another — a core of an LNC=2 launch at its
//! `sendrecv` / `core_barrier`, a mesh device at a collective — and what a front end runs
//! around them.
//!
//! A front end whose kernels run under an interpreter lock (the `nki_rs` Python package:
//! each instance of a Python kernel calls into nki-core holding Python's GIL) must let go of
//! the lock while an instance waits, or the instance it waits for can never reach the call
//! that ends the wait. It registers a [`WaitHook`] once ([`set_wait_hook`]); every such wait
//! runs inside it.

use std::sync::OnceLock;

/// What a front end runs around each wait of an instance for another: it must call the
/// wait it is given exactly once (on the same thread), and may do something before and after
/// it (release and retake a lock).
pub type WaitHook = fn(&mut dyn FnMut());

/// The process's wait hook, if a front end registered one.
static HOOK: OnceLock<WaitHook> = OnceLock::new();

/// Registers the process's [`WaitHook`]. Returns false (and changes nothing) if one is
/// registered already.
pub fn set_wait_hook(hook: WaitHook) -> bool {
    HOOK.set(hook).is_ok()
}

/// Runs `wait`, a blocking wait for another instance, inside the registered hook (directly
/// without one, or if the hook did not run it).
pub(crate) fn wait<R>(wait: impl FnOnce() -> R) -> R {
    let Some(hook) = HOOK.get() else {
        return wait();
    };
    let mut pending = Some(wait);
    let mut done = None;
    hook(&mut || {
        if let Some(w) = pending.take() {
            done = Some(w());
        }
    });
    match (done, pending) {
        (Some(r), _) => r,
        // The hook did not run the wait: run it here.
        (None, Some(w)) => w(),
        // The wait ran but gave nothing: only an unwind out of it, which never gets here.
        (None, None) => unreachable!("a wait that ran returned its value"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    static AROUND: AtomicUsize = AtomicUsize::new(0);

    fn counting_hook(w: &mut dyn FnMut()) {
        AROUND.fetch_add(1, Ordering::SeqCst);
        w();
    }

    #[test]
    fn a_wait_runs_once_inside_the_registered_hook() {
        // The only hook this test binary registers (every later wait runs inside it too,
        // which changes nothing: it runs the wait).
        assert!(set_wait_hook(counting_hook));
        assert!(!set_wait_hook(counting_hook), "a second hook is refused");
        let before = AROUND.load(Ordering::SeqCst);
        let mut runs = 0;
        let r = wait(|| {
            runs += 1;
            7
        });
        assert_eq!((r, runs), (7, 1));
        assert!(AROUND.load(Ordering::SeqCst) > before);
    }
}
