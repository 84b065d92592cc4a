//! The criterion measurement of modelled time (feature `criterion`): benchmarks whose values
//! are the latency the timing model gives a kernel, not host time, so `cargo bench` reports
//! "modelled latency per configuration" for any kernel.
//!
//! nki-core re-exports the criterion it is built with as `nki_core::criterion` (with the
//! feature): a bench uses that one, so that no second criterion (`cargo add criterion` picks
//! the newest) clashes with it ("multiple different versions of crate criterion"). In
//! `Cargo.toml`: `nki-core = { .., features = ["criterion"] }` and a `[[bench]]` with
//! `harness = false`; then, as pasted:
//!
//! ```no_run
//! use nki_core::criterion::{criterion_group, criterion_main, Criterion};
//! use nki_core::prelude::*;
//! use nki_core::sweep::{bench_grid, ModelledTime, ParamGrid};
//!
//! #[nki_kernel(nki = "0.7")]
//! fn scale(a: &Hbm<f32>, chunk: usize) -> Hbm<f32> {
//!     let out = nl::ndarray(a.shape(), DType::F32, nl::shared_hbm);
//!     let (rows, cols) = (a.shape()[0], a.shape()[1]);
//!     for i in 0..rows / 128 {
//!         for j in 0..cols / chunk {
//!             let tile = (i * 128..(i + 1) * 128, j * chunk..(j + 1) * chunk);
//!             let x = nl::ndarray(&[128, chunk], DType::F32, nl::sbuf);
//!             nisa::dma_copy(&x, a.slice(tile.clone()), None);
//!             let y = nl::ndarray(&[128, chunk], DType::F32, nl::sbuf);
//!             nisa::tensor_scalar(&y, &x, nl::AluOp::Multiply, 2.0, None);
//!             nisa::dma_copy(out.slice(tile), &y, None);
//!         }
//!     }
//!     out
//! }
//!
//! fn sweep_scale(c: &mut Criterion<ModelledTime>) {
//!     let a = Hbm::<f32>::shape_only([256, 4096]);
//!     let grid = ParamGrid::new().axis("chunk", [256, 512, 1024]);
//!     // A returning kernel's estimate gives (outputs, profile): bench_grid takes it as it is.
//!     bench_grid(c, "scale/trn2", &grid, |p| scale::estimate(1, Target::Trn2, &a, p["chunk"]));
//! }
//!
//! criterion_group! {
//!     name = sweeps;
//!     config = ModelledTime::config();
//!     targets = sweep_scale
//! }
//! criterion_main!(sweeps);
//! ```

use super::grid::{first_line, ParamGrid, Params};
use super::IntoProfile;
use criterion::measurement::{Measurement, ValueFormatter};
use criterion::{BenchmarkId, Criterion, Throughput};
use std::time::Duration;

/// A criterion measurement whose values are modelled device nanoseconds, supplied by the
/// benchmark through `Bencher::iter_custom` (it has no clock of its own: `start`/`end` measure
/// nothing, so `iter`-style benchmarks read zero).
pub struct ModelledTime;

impl ModelledTime {
    /// The criterion configuration of a modelled-time benchmark, as this crate's own benches
    /// use it: this measurement, 10 samples, no warm-up and no plots (every sample of a point
    /// is the same value, and criterion's plots cannot draw a zero-width distribution), then
    /// the command line's options (`cargo bench -- <filter>`). Each sample runs one estimate
    /// whatever its iteration count, so the measurement time only sets the iteration counts.
    pub fn config() -> Criterion<ModelledTime> {
        Criterion::default()
            .with_measurement(ModelledTime)
            .sample_size(10)
            .warm_up_time(Duration::from_millis(1))
            .measurement_time(Duration::from_secs(3))
            .nresamples(1000)
            .without_plots()
            .configure_from_args()
    }
}

impl Measurement for ModelledTime {
    type Intermediate = ();
    type Value = f64;

    fn start(&self) -> Self::Intermediate {}

    fn end(&self, _i: Self::Intermediate) -> Self::Value {
        0.0
    }

    fn add(&self, v1: &Self::Value, v2: &Self::Value) -> Self::Value {
        v1 + v2
    }

    fn zero(&self) -> Self::Value {
        0.0
    }

    fn to_f64(&self, value: &Self::Value) -> f64 {
        *value
    }

    fn formatter(&self) -> &dyn ValueFormatter {
        &ModelledTimeFormatter
    }
}

/// Formats modelled nanoseconds as ns / µs / ms / s, and throughputs per modelled second.
pub struct ModelledTimeFormatter;

impl ModelledTimeFormatter {
    /// The divisor and unit for a typical value in ns.
    fn time_unit(typical_ns: f64) -> (f64, &'static str) {
        if typical_ns < 1e3 {
            (1.0, "ns")
        } else if typical_ns < 1e6 {
            (1e3, "µs")
        } else if typical_ns < 1e9 {
            (1e6, "ms")
        } else {
            (1e9, "s")
        }
    }

    /// Converts per-iteration times in ns to `amount` per second, scaled to a unit.
    fn rate(
        amount: f64,
        typical_ns: f64,
        values: &mut [f64],
        units: [&'static str; 4],
    ) -> &'static str {
        let per_s = amount * 1e9 / typical_ns;
        let (div, unit) = if per_s < 1e3 {
            (1.0, units[0])
        } else if per_s < 1e6 {
            (1e3, units[1])
        } else if per_s < 1e9 {
            (1e6, units[2])
        } else {
            (1e9, units[3])
        };
        for v in values {
            *v = amount * 1e9 / *v / div;
        }
        unit
    }
}

impl ValueFormatter for ModelledTimeFormatter {
    fn scale_values(&self, typical_value: f64, values: &mut [f64]) -> &'static str {
        let (div, unit) = Self::time_unit(typical_value);
        for v in values {
            *v /= div;
        }
        unit
    }

    fn scale_throughputs(
        &self,
        typical_value: f64,
        throughput: &Throughput,
        values: &mut [f64],
    ) -> &'static str {
        match *throughput {
            Throughput::Bytes(b) | Throughput::BytesDecimal(b) => Self::rate(
                b as f64,
                typical_value,
                values,
                ["B/s", "KB/s", "MB/s", "GB/s"],
            ),
            Throughput::Elements(e) => Self::rate(
                e as f64,
                typical_value,
                values,
                ["elem/s", "Kelem/s", "Melem/s", "Gelem/s"],
            ),
        }
    }

    fn scale_for_machines(&self, _values: &mut [f64]) -> &'static str {
        "ns"
    }
}

/// Benchmarks every point of `grid` as `group/<params>` with the modelled latency `estimate`
/// gives it (one estimate per sample: the model is deterministic, so every sample is the same
/// value). Points whose estimate fails (capacity, shape, ...) are skipped with a line on
/// standard error naming the point and the reason.
pub fn bench_grid<F, R>(c: &mut Criterion<ModelledTime>, group: &str, grid: &ParamGrid, estimate: F)
where
    F: Fn(&Params) -> R,
    R: IntoProfile,
{
    let estimate = |p: &Params| estimate(p).into_profile();
    let mut g = c.benchmark_group(group);
    for p in grid.points() {
        if let Err(e) = estimate(&p) {
            eprintln!("skipping {group} {p}: {}", first_line(&e.to_string()));
            continue;
        }
        let id = p
            .values()
            .iter()
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join("x");
        g.bench_function(BenchmarkId::from_parameter(id), |b| {
            b.iter_custom(|iters| match estimate(&p) {
                Ok(profile) => profile.latency_ns * iters as f64,
                Err(_) => 0.0, // estimated once above; the model is deterministic
            })
        });
    }
    g.finish();
}
