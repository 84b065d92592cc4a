//! The launchers of every `#[nki_kernel]`, written once.
//!
//! For a kernel `k`, the macro generates only `k::run(launch, args...)`, which borrows the
//! kernel's outputs and runs its body under a configured [`Launch`]. The other three
//! launchers, `k::launch`, `k::simulate` and `k::estimate`, are one-line calls of [`launch`]
//! and [`modelled`] here, passing a closure that forwards the arguments to `k::run`. A kernel is
//! therefore always launched one way: grid, target and mode go into a [`Launch`], and the
//! kernel's `run` executes it.

use crate::context::Mode;
use crate::error::{ErrorKind, NkiError, Result};
use crate::profile::Profile;
use crate::spmd::{Grid, Launch, LaunchReport};
use crate::target::Target;

/// `k::launch(grid, args...)`: runs the kernel on `grid` in execute mode on the default
/// target; `run` is the kernel's `run` with its arguments.
#[track_caller]
pub fn launch(
    grid: impl Into<Grid>,
    run: impl FnOnce(Launch) -> Result<LaunchReport>,
) -> Result<LaunchReport> {
    run(called_here(Launch::new(grid)))
}

/// `l` remembering its caller's caller (the user's launch call, through the `#[track_caller]`
/// launchers): the closure between the launcher and [`Launch::run`] would hide it.
#[track_caller]
fn called_here(mut l: Launch) -> Launch {
    l.called_at = Some(crate::error::SourceLoc::caller());
    l
}

/// `k::simulate(grid, target, args...)` (`mode` [`Mode::Simulate`]: values and the modelled
/// timeline) and `k::estimate(grid, target, args...)` ([`Mode::Estimate`]: the timeline only;
/// inputs may be `Hbm::shape_only`): runs the kernel on `target` in the recording `mode` and
/// returns the modelled timeline. [`Mode::Execute`] models none: an
/// [`ErrorKind::InvalidArgument`] error.
#[track_caller]
pub fn modelled(
    grid: impl Into<Grid>,
    target: Target,
    mode: Mode,
    run: impl FnOnce(Launch) -> Result<LaunchReport>,
) -> Result<Profile> {
    let no_timeline = || {
        NkiError::new(
            ErrorKind::InvalidArgument,
            "launch",
            format!("a {mode:?} launch models no timeline: use Mode::Simulate or Mode::Estimate"),
        )
    };
    if !mode.records() {
        return Err(no_timeline());
    }
    let report = run(called_here(Launch::new(grid).target(target).mode(mode)))?;
    report.profile.ok_or_else(no_timeline)
}

/// `k::launch(grid, args...)` of a kernel that returns its outputs (`-> Hbm<T>`): as
/// [`launch`], handing back the outputs with the report.
#[track_caller]
pub fn launch_returning<O>(
    grid: impl Into<Grid>,
    run: impl FnOnce(Launch) -> Result<(O, LaunchReport)>,
) -> Result<(O, LaunchReport)> {
    run(called_here(Launch::new(grid)))
}

/// `k::simulate` and `k::estimate` of a kernel that returns its outputs: as [`modelled`],
/// handing back the outputs with the profile.
#[track_caller]
pub fn modelled_returning<O>(
    grid: impl Into<Grid>,
    target: Target,
    mode: Mode,
    run: impl FnOnce(Launch) -> Result<(O, LaunchReport)>,
) -> Result<(O, Profile)> {
    let mut outputs = None;
    let profile = modelled(grid, target, mode, |l| {
        let (o, report) = run(l)?;
        outputs = Some(o);
        Ok(report)
    })?;
    // `modelled` returns a profile only after `run` succeeded.
    let o = outputs.ok_or_else(|| {
        NkiError::new(
            ErrorKind::InvalidArgument,
            "launch",
            "the launch ran no kernel",
        )
    })?;
    Ok((o, profile))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn a_model_of_an_execute_launch_is_an_error_and_runs_nothing() {
        let ran = Cell::new(false);
        let e = modelled(1, Target::default(), Mode::Execute, |l| {
            ran.set(true);
            l.run(|| ())
        })
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
        assert!(e.to_string().contains("Mode::Simulate"), "{e}");
        assert!(!ran.get());
    }

    #[test]
    fn launchers_configure_the_launch_they_hand_to_run() {
        let seen = Cell::new(None);
        let r = launch([2, 3], |l| {
            let r = l.run(|| ());
            seen.set(r.as_ref().ok().map(|r| (r.mode, r.target, r.grid.shape())));
            r
        });
        assert!(r.is_ok());
        let (mode, target, shape) = seen.take().unwrap();
        assert_eq!(
            (mode, target, shape),
            (Mode::Execute, Target::default(), vec![2, 3])
        );
        for mode in [Mode::Simulate, Mode::Estimate] {
            let p = modelled(4, Target::Trn1, mode, |l| {
                let r = l.run(|| ())?;
                assert_eq!((r.mode, r.target), (mode, Target::Trn1));
                Ok(r)
            });
            assert!(p.is_ok());
        }
    }
}
