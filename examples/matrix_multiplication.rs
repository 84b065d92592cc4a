//! The NKI matrix-multiplication tutorial, re-told in Rust, in NKI Beta 1 and in NKI 0.7.
//!
//! Four kernels compute `result[M, N] = lhsT[K, M]^T @ rhs[K, N]` (bf16 in, fp32 accumulation
//! in PSUM, bf16 out), each reusing data better than the one before (see
//! `nki_kernels::matmul`). Each is written in NKI Beta 1 (`nl::load`, `nl::matmul_acc`,
//! `nl::copy`, the result a `&mut Hbm` parameter) and has its NKI 0.7 twin (`*_07`: tensors
//! from `nl::ndarray`, `nisa::dma_copy`, `nisa::nc_matmul` and `nisa::tensor_copy` writing
//! into a destination given first, the result allocated in HBM and returned). This example
//!
//! 1. checks every kernel and its 0.7 twin against a plain f32 reference at a small shape and
//!    prints "match";
//! 2. models each kernel on one trn1 NeuronCore at the tutorial's benchmark shape, lhsT
//!    [8192, 4096] x rhs [8192, 8192] (estimate mode: no values, nothing big allocated), and
//!    prints the modelled latency and HFU beside the figures AWS published for real hardware,
//!    the 0.7 twin's modelled latency, and how long the four Beta-1 estimates took (wall and
//!    CPU time, records per second).
//!
//! ```text
//! cargo run --release --example matrix_multiplication [-- --json] [--target trn2] [--trace DIR]
//! ```
//!
//! `--json` prints the comparison as a JSON array instead of a table; `--trace DIR` writes a
//! Chrome trace (open in Perfetto) per kernel into DIR; `--target` models another NeuronCore
//! generation (the published figures are for trn1).

use half::bf16;
use nki_core::prelude::*;
use nki_kernels::calibration::cpu_seconds;
use nki_kernels::matmul::{Blocking, MatmulKernel, PUBLISHED_TRN1, TUTORIAL_BENCHMARK_KMN};
use nki_kernels::testing::{allclose, random_bf16};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// Command-line options.
struct Options {
    json: bool,
    trace: Option<PathBuf>,
    target: Target,
}

fn parse_args() -> Result<Options, String> {
    let mut o = Options {
        json: false,
        trace: None,
        target: Target::Trn1,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--json" => o.json = true,
            "--trace" => {
                o.trace = Some(args.next().ok_or("--trace needs a directory")?.into());
            }
            "--target" => {
                let t = args.next().ok_or("--target needs trn1, trn2 or trn3")?;
                o.target = Target::parse(&t).ok_or(format!("unknown target '{t}'"))?;
            }
            "-h" | "--help" => {
                return Err(
                    "usage: matrix_multiplication [--json] [--target trn1|trn2|trn3] [--trace DIR]"
                        .into(),
                )
            }
            other => return Err(format!("unknown argument '{other}' (try --help)")),
        }
    }
    Ok(o)
}

/// Runs `kernel` and its NKI 0.7 twin on a small problem and compares each with an f32
/// reference (atol 1e-4, rtol 1e-2, as the tutorial's test does).
fn check_small(kernel: MatmulKernel) -> Result<[bool; 2], NkiError> {
    // The fully blocked kernel needs whole blocks: 16 x 128 rows of M, 8 x 128 of K.
    let (k, m, n) = match kernel {
        MatmulKernel::FullyOptimized(b) => (128 * b.k, 128 * b.m, 512 * b.n),
        _ => (512, 256, 1024),
    };
    let lhs_t = random_bf16(k, m, 1);
    let rhs = random_bf16(k, n, 2);
    let want = lhs_t.mapv(f32::from).t().dot(&rhs.mapv(f32::from));
    let (lhs_t, rhs) = (Hbm::from_array(&lhs_t)?, Hbm::from_array(&rhs)?);
    let mut out = Hbm::<bf16>::zeros([m, n]);
    kernel.launch(&lhs_t, &rhs, &mut out)?;
    let (out_07, _report) = kernel.launch_07(&lhs_t, &rhs)?;
    let ok = |out: &Hbm<bf16>| -> Result<bool, NkiError> {
        Ok(allclose(&out.to_array()?, &want, 1e-4, 1e-2).is_ok())
    };
    Ok([ok(&out)?, ok(&out_07)?])
}

/// One row of the comparison.
struct Row {
    kernel: MatmulKernel,
    profile: Profile,
    /// The NKI 0.7 twin's profile.
    profile_07: Profile,
    published_ms: f64,
    published_hfu: f64,
}

impl Row {
    fn error_percent(&self) -> f64 {
        (self.profile.latency_ms() - self.published_ms) / self.published_ms * 100.0
    }
}

fn run(o: &Options) -> Result<bool, NkiError> {
    let mut all_match = true;
    if !o.json {
        println!("Correctness at small shapes (bf16, f32 reference, atol 1e-4, rtol 1e-2):");
    }
    for p in PUBLISHED_TRN1 {
        let checks = check_small(p.kernel)?;
        for (name, ok) in [p.kernel.name(), p.kernel.name_07()]
            .into_iter()
            .zip(checks)
        {
            all_match &= ok;
            if !o.json {
                println!("  {name:<31} {}", if ok { "match" } else { "MISMATCH" });
            }
        }
    }

    let (k, m, n) = TUTORIAL_BENCHMARK_KMN;
    let lhs_t = Hbm::<bf16>::shape_only([k, m]);
    let rhs = Hbm::<bf16>::shape_only([k, n]);
    let mut result = Hbm::<bf16>::shape_only([m, n]);
    let mut rows = Vec::new();
    // The time the four estimates take (trace writing excluded), wall and CPU.
    let (mut estimate_s, mut estimate_cpu) = (0.0, 0.0);
    for p in PUBLISHED_TRN1 {
        let (t0, cpu0) = (Instant::now(), cpu_seconds());
        let profile = p.kernel.estimate(o.target, &lhs_t, &rhs, &mut result)?;
        estimate_s += t0.elapsed().as_secs_f64();
        estimate_cpu += cpu_seconds().zip(cpu0).map_or(0.0, |(b, a)| b - a);
        if let Some(dir) = &o.trace {
            let path = dir.join(format!("{}_{}.json", p.kernel.name(), o.target));
            profile.write_chrome_trace(&path).map_err(|e| {
                NkiError::new(
                    ErrorKind::Io,
                    "write_chrome_trace",
                    format!("{}: {e}", path.display()),
                )
            })?;
        }
        // The NKI 0.7 twin, modelled the same way (its own compile configuration).
        let profile_07 = p.kernel.estimate_07(o.target, &lhs_t, &rhs)?;
        rows.push(Row {
            kernel: p.kernel,
            profile,
            profile_07,
            published_ms: p.latency_ms,
            published_hfu: p.hfu_percent,
        });
    }

    if o.json {
        let arr: Vec<serde_json::Value> = rows
            .iter()
            .map(|r| {
                serde_json::json!({
                    "kernel": r.kernel.name(),
                    "blocking": blocking(r.kernel).map(|b| [b.m, b.n, b.k]),
                    "target": o.target.name(),
                    "lhs_t_shape": [k, m],
                    "rhs_shape": [k, n],
                    "latency_us": r.profile.latency_us(),
                    "latency_07_us": r.profile_07.latency_us(),
                    "hfu_percent": r.profile.hfu_percent,
                    "mfu_percent": r.profile.mfu_percent,
                    "instructions": r.profile.instructions,
                    "published_target": "trn1",
                    "published_latency_us": r.published_ms * 1e3,
                    "published_hfu_percent": r.published_hfu,
                    "latency_error_percent": r.error_percent(),
                    "correct_at_small_shape": all_match,
                })
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&arr).expect("JSON values serialise")
        );
    } else {
        println!();
        println!(
            "Modelled on {} at lhsT [{k}, {m}] x rhs [{k}, {n}] bf16 ({:.1} GFLOP), published figures from trn1:",
            o.target,
            2.0 * (k * m * n) as f64 / 1e9
        );
        println!(
            "  {:<28} {:>12} {:>8} {:>14} {:>10} {:>9} {:>11}",
            "kernel", "latency ms", "HFU %", "published ms", "pub HFU %", "error %", "0.7 twin ms"
        );
        for r in &rows {
            println!(
                "  {:<28} {:>12.2} {:>8.2} {:>14.2} {:>10.2} {:>+9.1} {:>11.2}",
                r.kernel.name(),
                r.profile.latency_ms(),
                r.profile.hfu_percent,
                r.published_ms,
                r.published_hfu,
                r.error_percent(),
                r.profile_07.latency_ms()
            );
        }
        let records: usize = rows.iter().map(|r| r.profile.instructions).sum();
        println!(
            "\nEstimating the four kernels took {estimate_s:.3} s ({estimate_cpu:.2} s CPU): \
             {records} instruction records, {:.2} M records/s",
            records as f64 / estimate_s.max(1e-9) / 1e6
        );
        if let Some(dir) = &o.trace {
            println!("\nChrome traces written to {}", dir.display());
        }
    }
    Ok(all_match)
}

/// The block sizes of a blocked stage.
fn blocking(k: MatmulKernel) -> Option<Blocking> {
    match k {
        MatmulKernel::BlockFreeDimension(b) | MatmulKernel::FullyOptimized(b) => Some(b),
        _ => None,
    }
}

fn main() -> ExitCode {
    nki_kernels::report::main_with_options(parse_args(), |o| o.trace.as_deref(), run)
}
