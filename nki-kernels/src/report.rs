//! The story every tutorial example tells: a check against the reference ("match"), then the
//! modelled latency and the bottleneck engine on trn1 and trn2, versions side by side.
//!
//! ```no_run
//! use nki_kernels::report::{print_check, print_profiles, Version};
//! use nki_core::prelude::*;
//! # fn estimate(t: Target) -> Result<Profile, NkiError> { unimplemented!() }
//! let ok = print_check("softmax [250, 512] fp32", Ok(()));
//! print_profiles("[4096, 8192] fp32", &[Version::new("softmax", &estimate)]).unwrap();
//! ```

use crate::testing::Mismatch;
use nki_core::prelude::*;
use std::process::ExitCode;

/// The targets every example models.
pub const TARGETS: [Target; 2] = [Target::Trn1, Target::Trn2];

/// The busiest engine of a profile (largest active time): the one bounding the latency.
/// Returns its name and its active time as a percentage of the latency.
pub fn bottleneck(p: &Profile) -> (String, f64) {
    p.engines
        .iter()
        .max_by(|a, b| a.active_ns.total_cmp(&b.active_ns))
        .map(|e| (e.engine.clone(), e.active_percent))
        .unwrap_or_else(|| ("none".to_string(), 0.0))
}

/// Prints `label: match` (or `MISMATCH` with the worst element) and returns whether it matched.
pub fn print_check(label: &str, result: Result<(), Mismatch>) -> bool {
    match result {
        Ok(()) => {
            println!("  {label:<44} match");
            true
        }
        Err(e) => {
            println!("  {label:<44} MISMATCH ({e})");
            false
        }
    }
}

/// A kernel version to model: its name and a function modelling it on a target.
pub struct Version<'a> {
    /// Name printed in the table.
    pub name: &'a str,
    /// Models the version on a target (usually the kernel's `estimate` launcher).
    pub model: &'a dyn Fn(Target) -> Result<Profile, NkiError>,
}

impl<'a> Version<'a> {
    /// A version named `name` modelled by `model`.
    pub fn new(name: &'a str, model: &'a dyn Fn(Target) -> Result<Profile, NkiError>) -> Self {
        Version { name, model }
    }
}

/// Models every version on trn1 and trn2 and prints one row per version: latency, the
/// bottleneck engine with its busy percentage, and (from the second version on) the speed-up
/// over the first. Returns the profiles, `[trn1, trn2]` per version.
pub fn print_profiles(shape: &str, versions: &[Version]) -> Result<Vec<[Profile; 2]>, NkiError> {
    println!("\nModelled at {shape}:");
    println!(
        "  {:<22} {:>11} {:<18} {:>11} {:<18}",
        "version", "trn1 us", "  bottleneck", "trn2 us", "  bottleneck"
    );
    let mut out: Vec<[Profile; 2]> = Vec::new();
    for v in versions {
        let [p1, p2] = [(v.model)(TARGETS[0])?, (v.model)(TARGETS[1])?];
        let cell = |p: &Profile| {
            let (e, pct) = bottleneck(p);
            format!(
                "{:>11.2}   {:<16}",
                p.latency_us(),
                format!("{e} {pct:.0}%")
            )
        };
        let speedup = match out.first() {
            Some([f1, f2]) => format!(
                "  ({:.2}x / {:.2}x faster than {})",
                f1.latency_ns / p1.latency_ns,
                f2.latency_ns / p2.latency_ns,
                versions[0].name
            ),
            None => String::new(),
        };
        println!("  {:<22} {} {}{speedup}", v.name, cell(&p1), cell(&p2));
        out.push([p1, p2]);
    }
    Ok(out)
}

/// The `main` of an example with command-line options: parses them (a bad option exits with
/// code 2), creates the trace directory `trace` picks from them (if any), runs, and returns
/// [`finish`]'s exit code.
pub fn main_with_options<O>(
    parsed: Result<O, String>,
    trace: impl Fn(&O) -> Option<&std::path::Path>,
    run: impl FnOnce(&O) -> Result<bool, NkiError>,
) -> ExitCode {
    let o = match parsed {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    if let Some(dir) = trace(&o) {
        if let Err(e) = std::fs::create_dir_all(dir) {
            eprintln!("cannot create {}: {e}", dir.display());
            return ExitCode::FAILURE;
        }
    }
    finish(run(&o))
}

/// The exit code of an example: success when every check matched and nothing failed.
pub fn finish(result: Result<bool, NkiError>) -> ExitCode {
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("a kernel's result did not match the reference");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
