//! A profile that says what to do next: advice read off the critical path (small DMAs that
//! each pay their fixed cost, engines waiting), per-core critical paths that say why one core
//! of a launch ends later, and the report of an element-wise kernel without TensorE rows.

use nki_core::prelude::*;
use nki_core::{AdviceKind, Bound};

/// `out = x + x` over `[rows, cols]` f32, tiles of `[128, cols]`: the rows of each DMA are
/// `cols * 4` bytes, split over the two cores of a `[2]` launch.
#[nki_kernel(nki = "0.7")]
fn double(x: &Hbm<f32>) -> Hbm<f32> {
    let out = nl::ndarray(x.shape(), x.dtype(), nl::shared_hbm);
    let cols = x.shape()[1];
    let tiles = x.shape()[0] / 128;
    for t in (nl::program_id(0)..tiles).step_by(nl::num_programs(0)) {
        let rows = t * 128..t * 128 + 128;
        let a = nl::ndarray(&[128, cols], x.dtype(), nl::sbuf);
        let b = nl::ndarray(&[128, cols], x.dtype(), nl::sbuf);
        nisa::dma_copy(&a, x.slice((rows.clone(), 0..cols)), None);
        nisa::tensor_tensor(&b, &a, &a, nl::AluOp::Add, None);
        nisa::dma_copy(out.slice((rows, 0..cols)), &b, None);
    }
    out
}

fn share(p: &Profile, bound: Bound) -> f64 {
    p.bounds
        .iter()
        .find(|s| s.bound == bound)
        .map_or(0.0, |s| s.percent)
}

#[test]
fn small_rows_are_called_dma_fixed_cost_with_the_lever() {
    // 1 KiB rows: each DMA's bytes take less than its fixed cost.
    let x = Hbm::<f32>::shape_only([4096, 256]);
    let (_, p) = double::estimate(1, Target::Trn2, &x).unwrap();
    let fixed = p
        .advice()
        .into_iter()
        .find(|a| a.kind == AdviceKind::DmaFixedCost)
        .unwrap_or_else(|| panic!("no DMA fixed-cost advice:\n{p}"));
    assert!(fixed.message.contains("wider tiles"), "{}", fixed.message);
    assert!(fixed.message.contains("under 4 KiB"), "{}", fixed.message);
    let text = p.to_string();
    assert!(text.contains("DMA fixed cost"), "{text}");
    assert!(text.contains("next steps:"), "{text}");
    // The lever works in the model: the same bytes in 8 KiB rows spend a smaller share of
    // the critical path in DMA fixed costs.
    let wide = Hbm::<f32>::shape_only([512, 2048]);
    let (_, q) = double::estimate(1, Target::Trn2, &wide).unwrap();
    assert!(
        share(&q, Bound::DmaLatency) < share(&p, Bound::DmaLatency),
        "{q}\n{p}"
    );
}

#[test]
fn an_element_wise_report_shows_no_tensor_engine() {
    let x = Hbm::<f32>::shape_only([2048, 512]);
    let (_, p) = double::estimate(2, Target::Trn2, &x).unwrap();
    let text = p.to_string();
    assert!(!text.contains("HFU"), "{text}");
    assert!(!text.contains("MFU"), "{text}");
    assert!(!text.contains("TensorE "), "{text}");
    let html = p.to_html();
    assert!(html.contains("Next steps"), "{html}");
}

#[test]
fn each_core_has_its_own_critical_path_and_a_late_core_is_explained() {
    let x = Hbm::<f32>::shape_only([4096, 512]);
    let (_, p) = double::estimate(2, Target::Trn2, &x).unwrap();
    assert_eq!(p.cores.len(), 2);
    for c in &p.cores {
        // A core's path runs from its last instruction back to time 0.
        let sum: f64 = c.bounds.iter().map(|s| s.ns).sum();
        assert!(
            (sum - c.latency_ns).abs() <= 1e-6 * c.latency_ns.max(1.0),
            "nc{}: {sum} vs {}",
            c.nc,
            c.latency_ns
        );
    }
    let first = p
        .cores
        .iter()
        .map(|c| c.latency_ns)
        .fold(f64::INFINITY, f64::min);
    let imbalance: Vec<_> = p
        .advice()
        .into_iter()
        .filter(|a| a.kind == AdviceKind::CoreImbalance)
        .collect();
    let late = p
        .cores
        .iter()
        .filter(|c| c.latency_ns > first * 1.05)
        .count();
    assert_eq!(imbalance.len(), late, "{p}");
    for a in &imbalance {
        assert!(a.message.contains(" after nc"), "{a}");
    }
}

#[test]
fn one_core_has_no_core_paths() {
    let x = Hbm::<f32>::shape_only([1024, 512]);
    let (_, p) = double::estimate(1, Target::Trn2, &x).unwrap();
    assert!(p.cores.iter().all(|c| c.bounds.is_empty()));
    assert!(p
        .advice()
        .iter()
        .all(|a| a.kind != AdviceKind::CoreImbalance));
}
