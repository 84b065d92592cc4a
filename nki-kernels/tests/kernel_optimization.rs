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
