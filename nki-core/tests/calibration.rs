//! The timing model against the public calibration points (shared/reference/calibration.md):
//! the micro-benchmarks (§2). The matmul tutorial (§1) is checked in nki-kernels.

use nki_core::prelude::*;
use nki_core::profile::Track;

// Calibration §1 (the matmul tutorial on trn1, each stage within 20 % and in the published
// order) is asserted beside the kernels, in nki-kernels/tests/calibration.rs: nki-core cannot
// depend on nki-kernels. Modelled: 51.77 / 42.18 / 21.73 / 7.03 ms against the published
// 51.80 / 42.96 / 22.07 / 6.97 ms.

/// Durations (ns) of the spans of `track` in `p`, in start order.
fn spans_on(p: &Profile, pick: impl Fn(Track) -> bool) -> Vec<(f64, f64)> {
    let mut v: Vec<(f64, f64)> = p
        .spans
        .iter()
        .filter(|s| pick(s.track))
        .map(|s| (s.start_ns, s.dur_ns))
        .collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v
}

fn within(got: f64, want: f64, tol: f64) -> bool {
    (got / want - 1.0).abs() <= tol
}

#[nki_kernel]
fn activation_chain(a: &Hbm<f32>, out: &mut Hbm<f32>, n: usize) {
    let mut x = nl::load(a);
    for _ in 0..n {
        x = nisa::activation(nisa::ActFn::Exp, &x, nisa::ActivationArgs::new());
    }
    nl::store(out, &x);
}

/// Calibration §2: back-to-back dependent ScalarE activations with one element per partition
/// issue every 189 ns (264 ScalarE cycles) on trn1.
#[test]
fn dependent_scalar_activations_issue_every_189ns_on_trn1() {
    let a = Hbm::<f32>::shape_only([128, 1]);
    let mut out = Hbm::<f32>::shape_only([128, 1]);
    let p = activation_chain::estimate(Grid::new([1]), Target::Trn1, &a, &mut out, 16).unwrap();
    let acts = spans_on(&p, |t| t == Track::Scalar);
    assert_eq!(acts.len(), 16);
    for w in acts.windows(2) {
        let ii = w[1].0 - w[0].0;
        assert!(
            within(ii, 189.0, 0.15),
            "initiation interval {ii} ns, published 189 ns"
        );
    }
}

#[nki_kernel]
fn one_load(a: &Hbm<bf16>) {
    let _t = nl::load(a);
}

/// The modelled duration (ns) of the single DMA of a [p, f] bf16 HBM -> SBUF load on trn2.
fn load_duration(p: usize, f: usize) -> f64 {
    let a = Hbm::<bf16>::shape_only([p, f]);
    let prof = one_load::estimate(Grid::new([1]), Target::Trn2, &a).unwrap();
    let d = spans_on(&prof, |t| matches!(t, Track::DmaQueue(_)));
    assert_eq!(d.len(), 1);
    assert_eq!(prof.dma.count, 1);
    assert_eq!(prof.dma.bytes, (p * f * 2) as u64);
    d[0].1
}

/// Calibration §2: one DMA of 32 KiB bf16 [4, 4096] HBM -> SBUF (one DMA engine) takes
/// 1416 ns on trn2.
#[test]
fn single_engine_32kib_dma_takes_1416ns_on_trn2() {
    let d = load_duration(4, 4096);
    assert!(
        within(d, 1416.0, 0.15),
        "modelled {d} ns, published 1416 ns"
    );
}

/// Calibration §2: DMA efficiency vs bytes per partition (128 partitions) relative to
/// 32 KiB per partition, trn2.
#[test]
fn dma_efficiency_curve_on_trn2() {
    let reference = 32768.0 / load_duration(128, 32768 / 2);
    for (bytes, pct) in [
        (32usize, 1.4),
        (256, 10.0),
        (1024, 42.0),
        (2048, 81.0),
        (4096, 97.0),
        (16384, 99.0),
    ] {
        let eff = 100.0 * (bytes as f64 / load_duration(128, bytes / 2)) / reference;
        assert!(
            within(eff, pct, 0.15),
            "{bytes} B/partition: modelled {eff:.2}%, published {pct}%"
        );
    }
}
