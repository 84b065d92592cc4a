//! The timing model against the published matmul tutorial measurements (trn1, one NeuronCore,
//! lhsT [8192, 4096] x rhs [8192, 8192] bf16; shared/reference/calibration.md section 1):
//! each stage's modelled latency within 20% of the measured one, and the stages in the
//! measured order (each faster than the one before).

use nki_core::prelude::*;
use nki_kernels::matmul::{PUBLISHED_TRN1, TUTORIAL_BENCHMARK_KMN};

/// Models every stage on trn1 at the benchmark shape; returns latencies in ms.
fn modelled_ms() -> Vec<f64> {
    let (k, m, n) = TUTORIAL_BENCHMARK_KMN;
    let lhs_t = Hbm::<bf16>::shape_only([k, m]);
    let rhs = Hbm::<bf16>::shape_only([k, n]);
    let mut result = Hbm::<bf16>::shape_only([m, n]);
    PUBLISHED_TRN1
        .iter()
        .map(|p| {
            let profile = p
                .kernel
                .estimate(Target::Trn1, &lhs_t, &rhs, &mut result)
                .unwrap_or_else(|e| panic!("{}: {e}", p.kernel));
            assert!(
                profile.latency_ns.is_finite() && profile.latency_ns > 0.0,
                "{}: modelled latency {} ns",
                p.kernel,
                profile.latency_ns
            );
            profile.latency_ns / 1e6
        })
        .collect()
}

#[test]
fn matmul_tutorial_latencies_within_20_percent_and_in_order() {
    let got = modelled_ms();
    let mut report = String::new();
    for (p, ms) in PUBLISHED_TRN1.iter().zip(&got) {
        report += &format!(
            "\n  {:<28} modelled {ms:8.2} ms, published {:6.2} ms ({:+.1}%)",
            p.kernel.name(),
            p.latency_ms,
            (ms - p.latency_ms) / p.latency_ms * 100.0
        );
    }
    for (p, ms) in PUBLISHED_TRN1.iter().zip(&got) {
        let err = (ms - p.latency_ms).abs() / p.latency_ms;
        assert!(err <= 0.20, "{} off by more than 20%:{report}", p.kernel);
    }
    for w in got.windows(2) {
        assert!(w[1] < w[0], "stages out of the published order:{report}");
    }
}
