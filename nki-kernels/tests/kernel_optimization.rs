//! The kernel-optimization tutorial's five matmul versions against an f32 reference, in fp32
//! and bf16, in execute, simulate and estimate modes (atol 1e-4, rtol 1e-2: the matmul
//! tutorials' test tolerance; docs/reference/test-cases.md).

use ndarray::Array2;
use nki_core::prelude::*;
use nki_kernels::kernel_optimization::{Tiles, Version, VersionResult, BENCHMARK_KMN};
use nki_kernels::testing::{check_modes, random_f32};

/// `lhs_t^T @ rhs` in f32 (inputs already rounded to the kernel's dtype), by ndarray.
fn reference(lhs_t: &Array2<f32>, rhs: &Array2<f32>) -> Array2<f32> {
    lhs_t.t().dot(rhs)
}

fn check<T: Element>(v: Version, (k, m, n): (usize, usize, usize), atol: f32, rtol: f32) {
    let lhs_t = random_f32(k, m, 11).mapv(T::from_f32);
    let rhs = random_f32(k, n, 12).mapv(T::from_f32);
    let want = reference(&lhs_t.mapv(|x| x.to_f32()), &rhs.mapv(|x| x.to_f32()));
    let (lh, rh) = (
        Hbm::from_array(&lhs_t).unwrap(),
        Hbm::from_array(&rhs).unwrap(),
    );
    let label = format!("{v} {} [{k}, {m}] x [{k}, {n}]", T::DTYPE);
    check_modes(&label, &want, atol, rtol, |launch| {
        let (out, r) = v.run(launch, &lh, &rh)?;
        // The returned result has the version's dtype and the shape [M, N].
        assert_eq!(out.dtype(), v.result_dtype(T::DTYPE), "{label}");
        // An estimate returns a shape-only result (no values to compare).
        let got = if r.mode == Mode::Estimate {
            ndarray::ArrayD::zeros(ndarray::IxDyn(&[m, n]))
        } else {
            out.to_f32_array()?
        };
        assert_eq!(got.shape(), &[m, n], "{label}");
        Ok((got, r))
    });
}

#[test]
fn every_version_matches_in_fp32_and_bf16() {
    let small = Tiles { m: 2, n: 1, k: 2 };
    for v in Version::ALL.into_iter().map(|v| match v {
        Version::FullyBlocked(_) => Version::FullyBlocked(small),
        v => v,
    }) {
        check::<f32>(v, v.small_kmn(), 1e-4, 1e-2);
        check::<bf16>(v, v.small_kmn(), 1e-4, 1e-2);
    }
}

#[test]
fn single_tile_edges() {
    // Single tiles smaller than the limits: the tutorial's (64, 128) @ (128, 512) and one row.
    check::<bf16>(Version::SingleTile, (128, 64, 512), 1e-4, 1e-2);
    check::<f32>(Version::SingleTile, (1, 1, 1), 1e-4, 1e-2);
}

#[test]
fn results_are_returned_in_the_tutorials_dtype() {
    // The tutorial allocates `result` in shared HBM inside the kernel and returns it: fp32 for
    // versions 1, 3 and 5, the input dtype for versions 2 and 4.
    let lh = Hbm::<bf16>::zeros([128, 128]);
    let rh = Hbm::<bf16>::zeros([128, 512]);
    let (out, _) = Version::Tiled.run(Launch::new(1), &lh, &rh).unwrap();
    assert!(matches!(out, VersionResult::Input(_)), "{out:?}");
    let (out, _) = Version::SingleTile.run(Launch::new(1), &lh, &rh).unwrap();
    assert!(matches!(out, VersionResult::Fp32(_)), "{out:?}");
    assert_eq!(out.to_f32_array().unwrap().shape(), &[128, 512]);
}

#[test]
fn wrong_shapes_are_errors() {
    let lh = Hbm::<f32>::zeros([256, 128]);
    let rh = Hbm::<f32>::zeros([128, 512]);
    let e = Version::Tiled.run(Launch::new(1), &lh, &rh).unwrap_err();
    assert!(e.to_string().contains("contraction"), "{e}");
    let big = Hbm::<f32>::zeros([256, 128]);
    let e = Version::SingleTile
        .run(Launch::new(1), &big, &Hbm::<f32>::zeros([256, 512]))
        .unwrap_err();
    assert!(e.to_string().contains("partition dimension"), "{e}");
}

#[test]
fn benchmark_shape_estimates_on_trn2_in_bf16() {
    let (k, m, n) = BENCHMARK_KMN;
    let lh = Hbm::<bf16>::shape_only([k, m]);
    let rh = Hbm::<bf16>::shape_only([k, n]);
    let launch = || Launch::new(1).target(Target::Trn2).mode(Mode::Estimate);
    let mut lat = Vec::new();
    for v in [Version::Tiled, Version::FullyBlocked(Tiles::TUTORIAL)] {
        let (out, r) = v.run(launch(), &lh, &rh).unwrap();
        // Estimate mode returns a shape-only result.
        assert!(out.to_f32_array().is_err(), "{v}");
        lat.push(r.profile.unwrap().latency_ns);
    }
    // The fully blocked version is the tutorial's compute-bound end point: faster than tiled.
    assert!(lat[1] < lat[0], "{lat:?}");
}

#[test]
fn blocked_fp32_versions_at_the_tutorial_shape_on_trn2_are_not_rejected() {
    // calibration.md section 5: versions 4 and 5 in fp32 keep more tiles allocated than SBUF
    // holds and run on trn2; the compiler makes them fit, so must the model.
    let cap = Target::Trn2.spec().sbuf_bytes_per_partition;
    for v in [Version::BlockedFree, Version::FullyBlocked(Tiles::TUTORIAL)] {
        let p = v
            .estimate::<f32>(Target::Trn2, BENCHMARK_KMN)
            .unwrap_or_else(|e| {
                panic!("{v} fp32 on trn2 rejected: {e}");
            });
        assert!(
            !p.spills.is_empty(),
            "{v}: over-committed tiles, but no spill line"
        );
        assert!(p.spills.resident_peak_bytes <= cap, "{v}: {:?}", p.spills);
        assert!(p.memory.sbuf_bytes_per_partition <= cap, "{v}");
        let s = &p.spills;
        assert!(
            p.dma.hbm_read_bytes >= s.input_reload_bytes + s.reload_bytes
                && p.dma.hbm_write_bytes >= s.save_bytes,
            "{v}: {s:?}"
        );
    }
}

#[test]
fn bounds_hold_the_latency_and_tell_the_versions_apart() {
    use nki_core::FindingKind;
    // K, M, N: 4 K tiles, 2 M tiles, 2 N tiles of 512 bf16 (1 KiB rows of rhs).
    let kmn = (512, 256, 1024);
    let (k, m, n) = kmn;
    let spec = Target::Trn2.spec();
    let peak_flops = 2.0 * 128.0 * 128.0 * spec.tensor_ghz;
    let mut memory = Vec::new();
    for v in [Version::Tiled, Version::Hoisted] {
        let p = v.estimate::<bf16>(Target::Trn2, kmn).unwrap();
        let b = p.bounds();
        // The model cannot beat its own bounds.
        for r in &b.table {
            assert!(r.ns > 0.0 && r.ns <= p.active_ns, "{v}: {r:?}");
        }
        assert_eq!(b.bytes_moved, p.dma.bytes, "{v}");
        assert!(
            (b.memory_bound_ns - p.dma.bytes as f64 / 368.0).abs() < 1e-6,
            "{v}"
        );
        // Ideal: lhsT and rhs read once, the result written once.
        // (tiled returns bf16, hoisted fp32).
        let result_bytes = if v == Version::Tiled { 2 } else { 4 };
        let ideal = ((k * m + k * n) * 2 + m * n * result_bytes) as u64;
        assert_eq!(b.bytes_ideal, ideal, "{v}");
        // Useful FLOPs of bf16 matmuls at TensorE's peak.
        let flops = 2.0 * (k * m * n) as f64;
        assert!(
            (b.compute_bound_ideal_ns - flops / peak_flops).abs() < 1e-6,
            "{v}"
        );
        // 128x128 stationary tiles of 512 columns: MultiplyMoving 512 cycles each.
        let mms = (k / 128 * m / 128 * n / 512) as f64;
        assert!(
            (b.compute_bound_ns - mms * 512.0 / spec.tensor_ghz).abs() < 1e-6,
            "{v}"
        );
        assert_eq!(
            b.perfect_pipeline_ns,
            b.memory_bound_ns.max(b.compute_bound_ns)
        );
        // rhs rows of 512 bf16 are 1 KiB descriptors; full TensorE tiles.
        assert!(
            b.of_kind(FindingKind::SmallDescriptors).count() > 0,
            "{v}: {b}"
        );
        assert_eq!(b.of_kind(FindingKind::ReducedTensorTile).count(), 0, "{v}");
        let reloaded: u64 = b.of_kind(FindingKind::Reloaded).map(|f| f.bytes).sum();
        memory.push((reloaded, b.bytes_moved - b.bytes_ideal));
        let text = p.to_string();
        assert!(
            text.contains("memory_bound_ideal") && text.contains("findings:"),
            "{text}"
        );
        let json: serde_json::Value = serde_json::from_str(&p.to_json()).unwrap();
        assert_eq!(
            json["performance_bounds"]["bytes_ideal"].as_u64(),
            Some(ideal),
            "{v}"
        );
        assert!(p.to_html().contains("Performance bounds"));
    }
    // Tiled re-loads each lhsT tile for every N tile and each rhs tile for every M tile;
    // hoisted loads the lhsT column once per M tile.
    let (lhs_tile, rhs_tile) = (128 * 128 * 2, 128 * 512 * 2);
    let (kt, mt, nt) = (k / 128, m / 128, n / 512);
    let rhs_reloads = (nt * kt * (mt - 1) * rhs_tile) as u64;
    let lhs_reloads = (mt * kt * (nt - 1) * lhs_tile) as u64;
    assert_eq!(memory[0].0, lhs_reloads + rhs_reloads, "tiled");
    assert_eq!(memory[1].0, rhs_reloads, "hoisted");
    // What each moves beyond the ideal is exactly what it re-loads.
    assert!(memory.iter().all(|(r, extra)| r == extra), "{memory:?}");
}
