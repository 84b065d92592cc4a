//! A tile-size sweep, as a kernel author tunes: estimate 100 blockings of a 4096³ bf16 GEMM
//! (`lhsT[K, M]^T @ rhs[K, N]`, the tutorial's fully optimised kernel with every block count
//! in M, N and K from the candidates below, then the free-dimension blocked kernel) and pick
//! the fastest modelled one.
//!
//! Blockings whose tiles do not fit on chip are rejected by the capacity check and counted.
//! The estimates are independent, so they run on every host core (`--threads N` caps them);
//! the chosen 100 and the best blocking are the same for any thread count. The example prints
//! the wall and CPU time of the sweep and the instruction records estimated per second.
//!
//! ```text
//! cargo run --release --example blocking_sweep [-- --target trn1|trn2|trn3] [--threads N]
//! ```

use nki_core::prelude::*;
use nki_kernels::calibration::cpu_seconds;
use nki_kernels::matmul::{Blocking, MatmulKernel};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// GEMM size (M = N = K).
const SIZE: usize = 4096;
/// Blockings to estimate (those that fit on chip).
const WANTED: usize = 100;

/// Command-line options.
struct Options {
    target: Target,
    threads: usize,
}

fn parse_args() -> Result<Options, String> {
    let mut o = Options {
        target: Target::Trn2,
        threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
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
            "-h" | "--help" => {
                return Err("usage: blocking_sweep [--target trn1|trn2|trn3] [--threads N]".into())
            }
            other => return Err(format!("unknown argument '{other}' (try --help)")),
        }
    }
    Ok(o)
}

/// The candidate kernels, in the order the sweep tries them.
fn candidates() -> Vec<MatmulKernel> {
    let mut v = Vec::new();
    for m in [1, 2, 4, 8, 16, 32] {
        for n in [1, 2, 4, 8] {
            for k in [1, 2, 4, 8, 16, 32] {
                v.push(MatmulKernel::FullyOptimized(Blocking::new(m, n, k)));
            }
            v.push(MatmulKernel::BlockFreeDimension(Blocking::new(m, n, 1)));
        }
    }
    v
}

/// What estimating one candidate gave: its modelled latency (ns) and instruction count, or
/// `None` when the capacity check rejected it.
type Outcome = Option<(f64, usize)>;

/// Estimates candidates in order on `threads` host threads until [`WANTED`] of them fit (or
/// none is left). Returns the outcome of every candidate tried: always a prefix of
/// `kernels`, so the first [`WANTED`] fitting ones are the same for any thread count.
fn sweep(
    kernels: &[MatmulKernel],
    target: Target,
    threads: usize,
) -> Result<Vec<Outcome>, NkiError> {
    let lhs_t = Hbm::<bf16>::shape_only([SIZE, SIZE]);
    let rhs = Hbm::<bf16>::shape_only([SIZE, SIZE]);
    let next = AtomicUsize::new(0);
    let fitted = AtomicUsize::new(0);
    let results: Mutex<Vec<(usize, Result<Outcome, NkiError>)>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let mut result = Hbm::<bf16>::shape_only([SIZE, SIZE]);
                while fitted.load(Ordering::Relaxed) < WANTED {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(kernel) = kernels.get(i) else { break };
                    let r = match kernel.estimate(target, &lhs_t, &rhs, &mut result) {
                        Ok(p) => {
                            fitted.fetch_add(1, Ordering::Relaxed);
                            Ok(Some((p.latency_ns, p.instructions)))
                        }
                        Err(e) if e.kind() == ErrorKind::Capacity => Ok(None),
                        Err(e) => Err(e),
                    };
                    let failed = r.is_err();
                    results
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push((i, r));
                    if failed {
                        fitted.store(WANTED, Ordering::Relaxed); // stop the other threads too
                    }
                }
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_else(|p| p.into_inner());
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, r)| r).collect()
}

fn run(o: &Options) -> Result<(), NkiError> {
    let kernels = candidates();
    let (t0, cpu0) = (Instant::now(), cpu_seconds());
    let outcomes = sweep(&kernels, o.target, o.threads)?;
    let wall = t0.elapsed().as_secs_f64();
    let cpu = cpu_seconds().zip(cpu0).map_or(0.0, |(b, a)| b - a);

    // The first WANTED candidates that fit (later ones a thread finished are left out).
    let mut chosen = Vec::new();
    let mut rejected = 0;
    for (kernel, outcome) in kernels.iter().zip(&outcomes) {
        if chosen.len() == WANTED {
            break;
        }
        match outcome {
            Some((ns, records)) => chosen.push((*kernel, *ns, *records)),
            None => rejected += 1,
        }
    }
    let records: usize = outcomes.iter().flatten().map(|(_, r)| r).sum();
    println!(
        "Sweep of {} blockings of a {SIZE}^3 bf16 GEMM on {} ({} rejected by the capacity check), {} host thread(s):",
        chosen.len(),
        o.target,
        rejected,
        o.threads
    );
    println!(
        "  {wall:.2} s wall, {cpu:.2} s CPU; {records} instruction records estimated, {:.2} M records/s",
        records as f64 / wall.max(1e-9) / 1e6
    );
    let best = chosen
        .iter()
        .min_by(|a, b| a.1.total_cmp(&b.1).then(a.2.cmp(&b.2)));
    if let Some((kernel, ns, _)) = best {
        let b = match kernel {
            MatmulKernel::BlockFreeDimension(b) | MatmulKernel::FullyOptimized(b) => *b,
            _ => Blocking::new(1, 1, 1),
        };
        println!(
            "  best: {} with {} x {} x {} tiles in M x N x K: {:.3} ms modelled",
            kernel.name(),
            b.m,
            b.n,
            b.k,
            ns / 1e6
        );
    }
    Ok(())
}

fn main() -> ExitCode {
    nki_kernels::report::main_with_options(parse_args(), |_| None, |o| run(o).map(|()| true))
}
