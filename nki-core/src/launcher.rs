//! The launchers of every `#[nki_kernel]`, written once.
//!
//! For a kernel `k`, the macro generates only `k::run(launch, args...)`, which borrows the
//! kernel's outputs and runs its body under a configured [`Launch`]. The other three
//! launchers, `k::launch`, `k::simulate` and `k::estimate`, are one-line calls of the
//! functions here, passing a closure that forwards the arguments to `k::run`. A kernel is
//! therefore always launched one way: grid, target and mode go into a [`Launch`], and the
//! kernel's `run` executes it.

use crate::context::Mode;
use crate::error::Result;
use crate::profile::Profile;
use crate::spmd::{Grid, Launch, LaunchReport};
use crate::target::Target;

/// `k::launch(grid, args...)`: runs the kernel on `grid` in execute mode on the default
/// target; `run` is the kernel's `run` with its arguments.
pub fn launch(
    grid: impl Into<Grid>,
    run: impl FnOnce(Launch) -> Result<LaunchReport>,
) -> Result<LaunchReport> {
    run(Launch::new(grid))
}

/// `k::simulate(grid, target, args...)`: runs the kernel computing values and the modelled
/// timeline on `target`; returns the timeline.
pub fn simulate(
    grid: impl Into<Grid>,
    target: Target,
    run: impl FnOnce(Launch) -> Result<LaunchReport>,
) -> Result<Profile> {
    modelled(grid, target, Mode::Simulate, run)
}

/// `k::estimate(grid, target, args...)`: models the kernel's timeline on `target` without
/// computing values (inputs may be `Hbm::shape_only`).
pub fn estimate(
    grid: impl Into<Grid>,
    target: Target,
    run: impl FnOnce(Launch) -> Result<LaunchReport>,
) -> Result<Profile> {
    modelled(grid, target, Mode::Estimate, run)
}

/// Runs a launch of a recording `mode` and returns its profile.
fn modelled(
    grid: impl Into<Grid>,
    target: Target,
    mode: Mode,
    run: impl FnOnce(Launch) -> Result<LaunchReport>,
) -> Result<Profile> {
    debug_assert!(mode.records());
    let report = run(Launch::new(grid).target(target).mode(mode))?;
    Ok(report
        .profile
        .expect("simulate and estimate launches record a profile"))
}
