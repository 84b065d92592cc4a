//! The timing model against every public calibration point (shared/reference/calibration.md
//! sections 1–6, estimated by `nki_kernels::calibration::points`): the accuracy bands and the
//! published orders of issue 8.
//!
//! Bands: section 1 within 10 % per stage and in the published order; section 2 within 15 %;
//! section 3 within 25 % per row, with every published order kept (`vector_add_stream`
//! FREE_DIM=2 on trn1 included: its 8-byte partition rows are whole ECC words, while
//! `vector_add_tiled`'s 4-byte rows pay the partial-word write receipt); section 4 (nccom-test's
//! collectives on trn1, the algorithm the runtime picks) within 25 % per row; section 5
//! (NKIBench baselines whose tiles exceed SBUF if all stay live) not rejected, and their HBM
//! and spill bytes within 10 % of the profiler's counters; section 6 (AWS's trn2 profile
//! analyses) within 20 % per row but for the misses named below, each under its ceiling, and
//! the matmul ladder in the published order.

use nki_kernels::calibration::{points, Row};
use std::sync::OnceLock;

fn rows() -> &'static [Row] {
    static ROWS: OnceLock<Vec<Row>> = OnceLock::new();
    ROWS.get_or_init(|| points(None).expect("every calibration kernel estimates").0)
}

fn table(rows: &[&Row]) -> String {
    rows.iter().map(|r| format!("\n  {r}")).collect()
}

fn section(s: u8) -> Vec<&'static Row> {
    rows().iter().filter(|r| r.section == s).collect()
}

fn model_of(name: &str) -> f64 {
    rows()
        .iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("no calibration row '{name}'"))
        .model
}

fn assert_band(rows: &[&Row], band_percent: f64, except: &[&str]) {
    for r in rows {
        if except.contains(&r.name.as_str()) {
            continue;
        }
        assert!(
            r.error_percent().abs() <= band_percent,
            "{} off by more than {band_percent}%:{}",
            r.name,
            table(rows)
        );
    }
}

#[test]
fn section1_matmul_tutorial_within_10_percent_and_in_order() {
    let s1 = section(1);
    assert_eq!(s1.len(), 4);
    assert_band(&s1, 10.0, &[]);
    for w in s1.windows(2) {
        assert!(
            w[1].model < w[0].model,
            "stages out of order:{}",
            table(&s1)
        );
    }
}

#[test]
fn section2_micro_benchmarks_within_15_percent() {
    let s2 = section(2);
    assert_eq!(s2.len(), 8);
    assert_band(&s2, 15.0, &[]);
}

const FD2: &str = "vector_add_stream n=25600 FREE_DIM=2";

#[test]
fn section3_small_kernels_within_25_percent() {
    let s3 = section(3);
    assert_eq!(s3.len(), 12);
    assert_band(&s3, 25.0, &[]);
}

#[test]
fn section3_published_orders_are_kept() {
    let rc1 = model_of("vector_add_tiled n=25600 ROW_CHUNK=1");
    let rc128 = model_of("vector_add_tiled n=25600 ROW_CHUNK=128");
    let fd2 = model_of(FD2);
    let fd200 = model_of("vector_add_stream n=25600 FREE_DIM=200");
    let all = table(&section(3));
    assert!(rc1 > rc128 && rc128 > fd2 && fd2 > fd200, "{all}");
    // FREE_DIM=2000 is slower than 1000 on both targets (1000 pipelines two iterations).
    let t1 = (
        model_of("vector_add_stream n=256000 FREE_DIM=2000"),
        model_of("vector_add_stream n=256000 FREE_DIM=1000"),
    );
    let t2 = (
        model_of("vector_add_stream (dma_copy) n=256000 FREE_DIM=2000"),
        model_of("vector_add_stream (dma_copy) n=256000 FREE_DIM=1000"),
    );
    assert!(t1.0 > t1.1 && t2.0 > t2.1, "{all}");
}

#[test]
fn section4_collectives_within_25_percent() {
    let s4 = section(4);
    assert_eq!(s4.len(), 9);
    assert_band(&s4, 25.0, &[]);
    // The fixed cost dominates small messages: the 2-rank floor is flat from 8 B to 64 KiB,
    // and a 1 GiB all-reduce approaches the bandwidth limit (not the floor).
    let floor: Vec<f64> = s4
        .iter()
        .filter(|r| r.name.contains("(floor)"))
        .map(|r| r.model)
        .collect();
    assert_eq!(floor.len(), 3);
    let (lo, hi) = floor
        .iter()
        .fold((f64::MAX, 0.0f64), |(a, b), &x| (a.min(x), b.max(x)));
    assert!(hi / lo < 1.1, "{}", table(&s4));
}

#[test]
fn json_rows_carry_the_required_keys() {
    for r in rows() {
        let j = r.json();
        for key in ["section", "name", "target", "published_us", "model_us"] {
            assert!(j.get(key).is_some(), "{key} missing in {j}");
        }
        assert_eq!(j["model_us"].is_null(), r.percent || r.bytes);
        if r.bytes {
            assert_eq!(j["model_bytes"].as_f64(), Some(r.model), "{j}");
            assert_eq!(j["published_bytes"].as_f64(), Some(r.published), "{j}");
        }
    }
}

#[test]
fn section5_kernels_are_not_rejected_and_their_bytes_match_the_counters() {
    // Every NKIBench baseline estimates (a capacity error would fail `rows()`), and its
    // modelled HBM and spill bytes are within 10 % of the profiler's counters (a zero counter
    // must be modelled as zero).
    let s5 = section(5);
    assert_eq!(s5.len(), 24, "{}", table(&s5));
    assert!(s5.iter().all(|r| r.bytes), "{}", table(&s5));
    assert_band(&s5, 10.0, &[]);
}

/// Section 6 rows the model misses by more than 20 % today (docs/calibration.md, section 6,
/// says why by mechanism), each with a ceiling on its miss: the miss measured when the
/// ceiling was set (2026-12-07; V0's TensorE row 2026-12-08, when the throttle took the
/// documented window rule) plus 2.5 points, so that a change that makes any of them worse
/// fails here. Every other row of the section must stay within 20 %.
const SECTION6_MISSES: [(&str, f64); 6] = [
    ("matmul 4096^3 bf16 V0 tiled, total", 46.3),
    ("matmul 4096^3 bf16 V0 tiled, DMA", 41.6),
    ("matmul 4096^3 bf16 V0 tiled, TensorE", 27.5),
    ("matmul 4096^3 bf16 V1 blocked BM=8 BN=2, total", 28.2),
    ("matmul 4096^3 bf16 V1 blocked BM=8 BN=2, DMA", 44.2),
    (
        "DMA loads and stores, 1 KiB descriptors (259 GB/s over DMA active), DMA",
        29.4,
    ),
];

#[test]
fn section6_trn2_profiles_within_20_percent_and_the_ladder_in_order() {
    let s6 = section(6);
    assert_eq!(s6.len(), 16, "{}", table(&s6));
    let misses: Vec<&str> = SECTION6_MISSES.iter().map(|m| m.0).collect();
    assert_band(&s6, 20.0, &misses);
    for (name, ceiling) in SECTION6_MISSES {
        let r = s6
            .iter()
            .find(|r| r.name == name)
            .unwrap_or_else(|| panic!("no calibration row '{name}'"));
        assert!(
            r.error_percent().abs() <= ceiling,
            "{name}: the miss grew beyond {ceiling}%:{}",
            table(&s6)
        );
    }
    let total = |v: &str| model_of(&format!("matmul 4096^3 bf16 {v}, total"));
    let (v0, v1, v2) = (
        total("V0 tiled"),
        total("V1 blocked BM=8 BN=2"),
        total("V2 blocked, row loads"),
    );
    assert!(v0 > v1 && v1 > v2, "{}", table(&s6));
}
