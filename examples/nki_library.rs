//! Ports of NKI Library kernels (aws-neuron/nki-library) in the NKI 0.7 surface: cumsum,
//! rmsnorm_quant, layernorm_tkg, RoPE, QKV, token-generation attention, MLP and the MoE
//! router top-k (see `nki_kernels::nki_library`, whose doc comments say what differs from
//! the library).
//!
//! Each kernel runs in execute, simulate and estimate mode against its independent
//! reference, and is modelled on trn2 and trn3 at the same shape: one line per kernel with
//! "match", the modelled latencies and the bottleneck.
//!
//! ```text
//! cargo run --release --example nki_library
//! ```

use nki_core::prelude::*;
use nki_kernels::nki_library::check::{run as run_kernel, shape_of, KERNELS};
use nki_kernels::report::{bottleneck, finish};
use std::process::ExitCode;

fn run() -> Result<bool, NkiError> {
    println!(
        "  {:<14} {:<32} {:<9} {:>10} {:<16} {:>10} {:<16}",
        "kernel", "shape", "check", "trn2 us", "  bottleneck", "trn3 us", "  bottleneck"
    );
    let mut ok = true;
    for name in KERNELS {
        let mut failure = None;
        let mut latencies = Vec::new();
        for mode in [Mode::Execute, Mode::Simulate, Mode::Estimate] {
            let (cmp, rep) = run_kernel(name, Launch::new(1).mode(mode))?;
            if let Err(e) = cmp {
                failure.get_or_insert(format!("{mode:?}: {e}"));
            }
            if let Some(p) = rep.profile {
                latencies.push(p.latency_ns);
            }
        }
        if latencies.len() != 2 || latencies[0] != latencies[1] {
            failure.get_or_insert("simulate and estimate model different latencies".into());
        }
        let mut cells = Vec::new();
        for target in [Target::Trn2, Target::Trn3] {
            let launch = Launch::new(1).mode(Mode::Estimate).target(target);
            let p = run_kernel(name, launch)?
                .1
                .profile
                .expect("estimate profile");
            let (e, pct) = bottleneck(&p);
            cells.push(format!(
                "{:>10.2}   {:<14}",
                p.latency_us(),
                format!("{e} {pct:.0}%")
            ));
        }
        let check = if failure.is_none() {
            "match"
        } else {
            "MISMATCH"
        };
        println!(
            "  {name:<14} {:<32} {check:<9} {} {}",
            shape_of(name),
            cells[0],
            cells[1]
        );
        if let Some(f) = failure {
            println!("      {f}");
            ok = false;
        }
    }
    Ok(ok)
}

fn main() -> ExitCode {
    finish(run())
}
