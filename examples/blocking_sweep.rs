//! A tile-size sweep of the library's blocked matmuls: estimate every blocking of a 4096³ bf16
//! GEMM (`lhsT[K, M]^T @ rhs[K, N]`: the tutorial's fully optimised kernel with every block
//! count in M, N and K from the candidates below, and the free-dimension blocked kernel) with
//! `nki_core::sweep` and pick the fastest modelled one. (`tile_sweep` sweeps a kernel of your
//! own the same way.)
//!
//! Blockings whose tiles do not fit on chip are rejected by the capacity check and counted.
//! The estimates are independent, so they run on every host core (`--threads N` caps them);
//! the best blocking is the same for any thread count. The example prints the wall and CPU
//! time of the sweep and the instruction records estimated per second.
//!
//! Each kernel is estimated as the compiler runs it (every transformation of the compiler
//! stage, `CompilerStage::BETA1`, and the compiler's allocation); `--as-written` costs it
//! exactly as written instead (`CompilerStage::OFF` and `CompileConfig::as_written()`: no
//! transformation, every tile its own buffer), which shows what the compiler costs in host
//! time.
//!
//! ```text
//! cargo run --release --example blocking_sweep [-- --target trn1|trn2|trn3] [--threads N] [--as-written]
//! ```

use nki_core::prelude::*;
use nki_core::sweep::{ParamGrid, Params, Sweep};
use nki_core::{with_compile_config, with_compiler_stage, CompileConfig, CompilerStage};
use nki_kernels::calibration::cpu_seconds;
use nki_kernels::matmul::{Blocking, MatmulKernel};
use std::process::ExitCode;
use std::time::Instant;

/// GEMM size (M = N = K).
const SIZE: usize = 4096;

/// Command-line options.
struct Options {
    target: Target,
    threads: usize,
    /// The compiler stage every estimate runs.
    stage: CompilerStage,
}

fn parse_args() -> Result<Options, String> {
    let mut o = Options {
        target: Target::Trn2,
        threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        stage: CompilerStage::BETA1,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--target" => {
                let t = args.next().ok_or("--target needs trn1, trn2 or trn3")?;
                o.target = Target::parse(&t).ok_or(format!("unknown target '{t}'"))?;
            }
            "--threads" => {
                let n = args.next().ok_or("--threads needs a number")?;
                o.threads = match n.parse() {
                    Ok(n) if n > 0 => n,
                    _ => return Err(format!("--threads needs a positive number, not '{n}'")),
                };
            }
            "--as-written" => o.stage = CompilerStage::OFF,
            "-h" | "--help" => {
                return Err(
                    "usage: blocking_sweep [--target trn1|trn2|trn3] [--threads N] [--as-written]"
                        .into(),
                )
            }
            other => return Err(format!("unknown argument '{other}' (try --help)")),
        }
    }
    Ok(o)
}

/// The kernel of grid point `p`: `variant` 0 is the fully optimised kernel with `m x n x k`
/// tiles per block, 1 the free-dimension blocked one (`k` must then be 1).
fn kernel_of(p: &Params) -> MatmulKernel {
    let b = Blocking::new(p["m"], p["n"], p["k"]);
    if p["variant"] == 0 {
        MatmulKernel::FullyOptimized(b)
    } else {
        MatmulKernel::BlockFreeDimension(b)
    }
}

fn run(o: &Options) -> Result<(), NkiError> {
    let grid = ParamGrid::new()
        .axis("variant", [0, 1])
        .axis("m", [1, 2, 4, 8, 16, 32])
        .axis("n", [1, 2, 4, 8])
        .axis("k", [1, 2, 4, 8, 16, 32]);
    let lhs_t = Hbm::<bf16>::shape_only([SIZE, SIZE]);
    let rhs = Hbm::<bf16>::shape_only([SIZE, SIZE]);
    let (t0, cpu0) = (Instant::now(), cpu_seconds());
    let report = Sweep::new(grid)
        .threads(o.threads)
        .reject_if(|p| {
            (p["variant"] == 1 && p["k"] != 1)
                .then(|| "the free-dimension blocked kernel does not block K".to_string())
        })
        .run(|p| {
            let mut result = Hbm::<bf16>::shape_only([SIZE, SIZE]);
            // The stage and the configuration are per-thread settings: set on the sweep's
            // worker thread.
            let mut estimate = || kernel_of(p).estimate(o.target, &lhs_t, &rhs, &mut result);
            with_compiler_stage(o.stage, || {
                if o.stage.is_off() {
                    with_compile_config(CompileConfig::as_written(), &mut estimate)
                } else {
                    estimate()
                }
            })
        });
    let wall = t0.elapsed().as_secs_f64();
    let cpu = cpu_seconds().zip(cpu0).map_or(0.0, |(b, a)| b - a);
    let capacity = report
        .rejected()
        .filter(|(_, r)| r.category() == "capacity")
        .count();
    // Anything rejected for a reason other than capacity or the K rule is a bug: report it.
    if let Some((p, r)) = report
        .rejected()
        .find(|(_, r)| !matches!(r.category(), "capacity" | "shape"))
    {
        return Err(NkiError::new(
            ErrorKind::InvalidArgument,
            "blocking_sweep",
            format!("{p}: {}", r.reason),
        ));
    }
    let records: usize = report
        .estimated()
        .filter_map(|p| p.outcome.as_ref().ok())
        .map(|e| e.instructions)
        .sum();
    let how = if o.stage.is_off() {
        "as written"
    } else {
        "as compiled"
    };
    println!(
        "Sweep of {} blockings of a {SIZE}^3 bf16 GEMM on {}, {how} ({capacity} rejected by the capacity check), {} host thread(s):",
        report.estimated().count(),
        o.target,
        report.threads
    );
    println!(
        "  {wall:.2} s wall, {cpu:.2} s CPU; {records} instruction records estimated, {:.2} M records/s",
        records as f64 / wall.max(1e-9) / 1e6
    );
    if let Some(best) = report.best() {
        let kernel = kernel_of(&best.params);
        println!(
            "  best: {} with {} x {} x {} tiles in M x N x K: {:.3} ms modelled",
            kernel.name(),
            best.params["m"],
            best.params["n"],
            best.params["k"],
            best.latency_ns().unwrap_or_default() / 1e6
        );
    }
    Ok(())
}

fn main() -> ExitCode {
    nki_kernels::report::main_with_options(parse_args(), |_| None, |o| run(o).map(|()| true))
}
