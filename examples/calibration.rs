//! Every public calibration point of the timing model (shared/reference/calibration.md
//! sections 1–3), modelled from kernels written as their sources write them, beside the
//! published figure: error and what bounds the kernel, per row.
//!
//! ```text
//! cargo run --release --example calibration [-- --json] [--trace DIR]
//! ```
//!
//! `--json` prints one array of objects with the keys `section`, `name`, `target`,
//! `published_us`, `model_us`, `error_percent` and `bottleneck` (the DMA-efficiency rows of
//! section 2 are percentages: their `*_us` keys are null and `published_percent` /
//! `model_percent` hold the figures). `--trace DIR` writes a Chrome trace per section-3 row.
//! The example also times the estimates themselves (the four full-size tutorial matmuls and a
//! sweep of 100 blockings of a 4096³ GEMM) and prints both wall times.

use nki_core::prelude::*;
use nki_kernels::calibration::{points, Row};
use nki_kernels::matmul::{Blocking, MatmulKernel};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

struct Options {
    json: bool,
    trace: Option<PathBuf>,
}

fn parse_args() -> Result<Options, String> {
    let mut o = Options {
        json: false,
        trace: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--json" => o.json = true,
            "--trace" => o.trace = Some(args.next().ok_or("--trace needs a directory")?.into()),
            "-h" | "--help" => return Err("usage: calibration [--json] [--trace DIR]".into()),
            other => return Err(format!("unknown argument '{other}' (try --help)")),
        }
    }
    Ok(o)
}

/// Wall time of estimating 100 blockings of a 4096³ bf16 GEMM on trn2.
fn sweep_seconds() -> Result<f64, NkiError> {
    let s = 4096;
    let lhs_t = Hbm::<bf16>::shape_only([s, s]);
    let rhs = Hbm::<bf16>::shape_only([s, s]);
    let mut result = Hbm::<bf16>::shape_only([s, s]);
    // The first 100 blockings (of M, N and K tile counts) whose tiles fit on chip; the ones
    // the capacity check rejects are tried too and counted in the time.
    let t0 = Instant::now();
    let (mut done, mut rejected) = (0, 0);
    'sweep: for m in [1usize, 2, 4, 8, 16, 32] {
        for n in [1usize, 2, 4, 8] {
            for k in [1usize, 2, 4, 8, 16, 32] {
                let kernel = MatmulKernel::FullyOptimized(Blocking::new(m, n, k));
                match kernel.estimate(Target::Trn2, &lhs_t, &rhs, &mut result) {
                    Ok(_) => done += 1,
                    Err(e) if e.kind() == ErrorKind::Capacity => rejected += 1,
                    Err(e) => return Err(e),
                }
                if done == 100 {
                    break 'sweep;
                }
            }
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    eprintln!("sweep: {done} blockings estimated, {rejected} rejected by the capacity check");
    Ok(secs)
}

fn main() -> ExitCode {
    let opts = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let run = || -> Result<(Vec<Row>, f64, f64), NkiError> {
        let (rows, tutorial) = points(opts.trace.as_deref())?;
        Ok((rows, tutorial, sweep_seconds()?))
    };
    let (rows, tutorial_s, sweep_s) = match run() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    if opts.json {
        let v: Vec<serde_json::Value> = rows.iter().map(Row::json).collect();
        println!("{}", serde_json::Value::Array(v));
        return ExitCode::SUCCESS;
    }
    println!(
        "{:<3} {:<62} {:<5} {:>11} {:>11} {:>8}  bottleneck",
        "§", "point", "tgt", "published", "model", "error"
    );
    for r in &rows {
        let unit = if r.percent { "%" } else { "us" };
        println!(
            "{:<3} {:<62} {:<5} {:>9.2}{unit:<2} {:>9.2}{unit:<2} {:>+7.1}%  {}",
            r.section,
            r.name,
            r.target.name(),
            r.published,
            r.model,
            r.error_percent(),
            r.bottleneck
        );
    }
    println!(
        "\nestimate speed: four full-size tutorial matmuls {tutorial_s:.2} s; 100 blockings of a 4096^3 GEMM {sweep_s:.2} s"
    );
    ExitCode::SUCCESS
}
