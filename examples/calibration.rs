//! Every public calibration point of the timing model (shared/reference/calibration.md
//! sections 1–6), modelled from kernels written as their sources write them, beside the
//! published figure: error and what bounds the kernel, per row (for section 4's collectives:
//! the algorithm the runtime picks; section 5's rows are byte counters, in MB, of kernels
//! whose tiles exceed SBUF if all stay live, followed by the tutorial's blocked fp32 matmuls
//! on trn2, which must not be rejected either and have no published counters; section 6's
//! rows are trn2 profiles: the 4096³ bf16 matmul ladder's total and per-engine active times,
//! TensorE time of reduced and full matmul tiles, DMA time by descriptor size).
//!
//! ```text
//! cargo run --release --example calibration [-- --json] [--trace DIR] [--cross-validate]
//! ```
//!
//! `--cross-validate` refits every fitted constant of the timing model without each family
//! of points in turn (`nki_kernels::cross_validation`) and prints, per family, its error
//! with the built-in constants, refitted on every family (in sample) and refitted without
//! it (left out), then per constant its built-in, refitted and left-out values (instead of
//! the rows).
//!
//! `--compiler` also prints what the `compiler` stage ([`CompilerStage::BETA1`]: duplicate-load
//! removal, hoisting, multi-buffering) moves: section 1, the NKIBench byte counters of
//! section 5 and the tutorial's fp32 versions on trn2, off against on (the rows and the JSON
//! are modelled with the default, the stage on for Beta-1 kernels).
//!
//! `--json` prints one array of objects with the keys `section`, `name`, `target`,
//! `published_us`, `model_us`, `error_percent` and `bottleneck` (the DMA-efficiency rows of
//! section 2 are percentages: their `*_us` keys are null and `published_percent` /
//! `model_percent` hold the figures; section 5's are bytes, in `published_bytes` /
//! `model_bytes`). `--trace DIR` writes a Chrome trace per section-3 row.
//! The example also times the estimates themselves (the four full-size tutorial matmuls and a
//! sweep of 100 blockings of a 4096³ GEMM) and prints both wall times.

use nki_core::prelude::*;
use nki_core::{with_compiler_stage, CompilerStage};
use nki_kernels::calibration::{cpu_seconds, points, Row};
use nki_kernels::cross_validation;
use nki_kernels::kernel_optimization::{Tiles, Version, BENCHMARK_KMN};
use nki_kernels::matmul::{Blocking, MatmulKernel, PUBLISHED_TRN1, TUTORIAL_BENCHMARK_KMN};
use nki_kernels::nkibench::Baseline;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

struct Options {
    json: bool,
    trace: Option<PathBuf>,
    compiler: bool,
    cross_validate: bool,
}

fn parse_args() -> Result<Options, String> {
    let mut o = Options {
        json: false,
        trace: None,
        compiler: false,
        cross_validate: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--json" => o.json = true,
            "--compiler" => o.compiler = true,
            "--cross-validate" => o.cross_validate = true,
            "--trace" => o.trace = Some(args.next().ok_or("--trace needs a directory")?.into()),
            "-h" | "--help" => {
                return Err(
                    "usage: calibration [--json] [--trace DIR] [--compiler] [--cross-validate]"
                        .into(),
                )
            }
            other => return Err(format!("unknown argument '{other}' (try --help)")),
        }
    }
    Ok(o)
}

/// Wall time (s) of estimating up to 100 blockings of a 4096³ bf16 GEMM on trn2, and how many fit.
fn sweep_seconds() -> Result<(f64, usize), NkiError> {
    let s = 4096;
    let lhs_t = Hbm::<bf16>::shape_only([s, s]);
    let rhs = Hbm::<bf16>::shape_only([s, s]);
    let mut result = Hbm::<bf16>::shape_only([s, s]);
    // The first 100 blockings (tile counts of M, N and K of the blocked kernels) whose tiles
    // fit on chip; the ones the capacity check rejects are tried too and counted in the time.
    let t0 = Instant::now();
    let (mut done, mut rejected) = (0, 0);
    let mut candidates = Vec::new();
    for m in [1usize, 2, 4, 8, 16, 32] {
        for n in [1usize, 2, 4, 8] {
            for k in [1usize, 2, 4, 8, 16, 32] {
                candidates.push(MatmulKernel::FullyOptimized(Blocking::new(m, n, k)));
            }
            candidates.push(MatmulKernel::BlockFreeDimension(Blocking::new(m, n, 1)));
        }
    }
    for kernel in candidates {
        match kernel.estimate(Target::Trn2, &lhs_t, &rhs, &mut result) {
            Ok(_) => done += 1,
            Err(e) if e.kind() == ErrorKind::Capacity => rejected += 1,
            Err(e) => return Err(e),
        }
        if done == 100 {
            break;
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    eprintln!("sweep: {done} blockings estimated, {rejected} rejected by the capacity check");
    Ok((secs, done))
}

fn main() -> ExitCode {
    let opts = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    if opts.cross_validate {
        return cross_validate();
    }
    let (rows, (tutorial_s, tutorial_cpu)) = match points(opts.trace.as_deref()) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let cpu0 = cpu_seconds().unwrap_or(0.0);
    let (sweep_s, swept) = match sweep_seconds() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let sweep_cpu = cpu_seconds().unwrap_or(0.0) - cpu0;
    if opts.json {
        let v: Vec<serde_json::Value> = rows.iter().map(Row::json).collect();
        println!("{}", serde_json::Value::Array(v));
        return ExitCode::SUCCESS;
    }
    println!(
        "{:<3} {:<68} {:<5} {:>12} {:>12} {:>8}  bottleneck",
        "§", "point", "tgt", "published", "model", "error"
    );
    for r in &rows {
        println!("{r}");
    }
    // Section 5, no published counters: the SDK tutorial's blocked fp32 versions on trn2.
    for v in [Version::BlockedFree, Version::FullyBlocked(Tiles::TUTORIAL)] {
        match v.estimate::<f32>(Target::Trn2, BENCHMARK_KMN) {
            Ok(p) => println!(
                "5   {:<68} trn2  not rejected: HBM read {:.2} MB, write {:.2} MB, input reloads {:.2} MB, spill save {:.2} MB, reload {:.2} MB",
                format!("{v} fp32 (SDK kernel-optimization tutorial)"),
                p.dma.hbm_read_bytes as f64 / 1e6,
                p.dma.hbm_write_bytes as f64 / 1e6,
                p.spills.input_reload_bytes as f64 / 1e6,
                p.spills.save_bytes as f64 / 1e6,
                p.spills.reload_bytes as f64 / 1e6,
            ),
            Err(e) => {
                eprintln!("error: {v} fp32 on trn2 rejected: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    if opts.compiler {
        if let Err(e) = compiler_stage() {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    }
    println!(
        "\nestimate speed: four full-size tutorial matmuls {tutorial_s:.2} s ({tutorial_cpu:.2} s CPU); {swept} blockings of a 4096^3 GEMM {sweep_s:.2} s ({sweep_cpu:.2} s CPU)"
    );
    ExitCode::SUCCESS
}

/// Prints the cross-validation of the fitted constants, and its wall and CPU time.
fn cross_validate() -> ExitCode {
    let t0 = Instant::now();
    let cpu0 = cpu_seconds().unwrap_or(0.0);
    let options = cross_validation::Options {
        progress: |step| eprintln!("cross-validation: {step}"),
        ..Default::default()
    };
    match cross_validation::cross_validate(&options) {
        Ok(cv) => {
            println!(
                "cross-validation: every fitted constant refitted on every family (in sample) and \
                 without each family (left out);\nerrors are mean / max of |model / published - 1| \
                 over the family's points\n"
            );
            println!("{cv}");
            println!(
                "cross-validation took {:.1} s ({:.1} s CPU)",
                t0.elapsed().as_secs_f64(),
                cpu_seconds().unwrap_or(0.0) - cpu0
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Prints what the `compiler` stage moves, off against on.
fn compiler_stage() -> Result<(), NkiError> {
    let both = |f: &dyn Fn() -> Result<Profile, NkiError>| -> Result<(Profile, Profile), NkiError> {
        Ok((
            with_compiler_stage(CompilerStage::OFF, f)?,
            with_compiler_stage(CompilerStage::BETA1, f)?,
        ))
    };
    println!("\ncompiler stage (CompilerStage::BETA1, the Beta-1 default): off -> on");
    let (k, m, n) = TUTORIAL_BENCHMARK_KMN;
    let lhs_t = Hbm::<bf16>::shape_only([k, m]);
    let rhs = Hbm::<bf16>::shape_only([k, n]);
    for p in PUBLISHED_TRN1 {
        let (off, on) = both(&|| {
            let mut result = Hbm::<bf16>::shape_only([m, n]);
            p.kernel.estimate(Target::Trn1, &lhs_t, &rhs, &mut result)
        })?;
        println!(
            "1   {:<40} trn1  published {:>9.2} ms  off {:>9.2} ms  on {:>9.2} ms  ({} removed, {} tiles multi-buffered)",
            p.kernel.name(),
            p.latency_ms,
            off.latency_ms(),
            on.latency_ms(),
            on.compiler.removed,
            on.compiler.renamed_tiles
        );
    }
    let mb = |b: u64| b as f64 / 1e6;
    for b in Baseline::ALL {
        let (off, on) = both(&|| b.estimate(Target::Trn1))?;
        let c = b.counters();
        let bytes = |p: &Profile| {
            [
                p.dma.hbm_read_bytes,
                p.dma.hbm_write_bytes,
                p.spills.save_bytes,
                p.spills.reload_bytes,
            ]
        };
        let (o, x) = (bytes(&off), bytes(&on));
        println!("5   {:<40} trn1  (MB: counter / off / on)", b.name());
        for (i, what) in ["HBM read", "HBM write", "spill save", "spill reload"]
            .iter()
            .enumerate()
        {
            println!(
                "      {what:<14} {:>10.2} {:>10.2} {:>10.2}",
                mb(c[i]),
                mb(o[i]),
                mb(x[i])
            );
        }
        println!(
            "      latency off {:.2} ms, on {:.2} ms; {} removed, {} tiles multi-buffered",
            off.latency_ms(),
            on.latency_ms(),
            on.compiler.removed,
            on.compiler.renamed_tiles
        );
    }
    for v in [
        Version::Hoisted,
        Version::BlockedFree,
        Version::FullyBlocked(Tiles::TUTORIAL),
    ] {
        let (off, on) = both(&|| v.estimate::<f32>(Target::Trn2, BENCHMARK_KMN))?;
        println!(
            "5   {:<40} trn2  fp32 off {:>9.2} ms  on {:>9.2} ms  HBM read off {:.2} MB on {:.2} MB",
            v.to_string(),
            off.latency_ms(),
            on.latency_ms(),
            mb(off.dma.hbm_read_bytes),
            mb(on.dma.hbm_read_bytes)
        );
    }
    Ok(())
}
