//! The four matmul tutorial kernels against an ndarray reference.
//!
//! Inputs are bf16 values drawn uniformly from [0, 1) (as the tutorial's tests do); the
//! reference is the f32 product of the same bf16-rounded inputs, and the bf16 output must match
//! it within atol = 1e-4, rtol = 1e-2.

use ndarray::{Array2, ArrayView2};
use nki_core::prelude::*;
use nki_kernels::matmul::{
    matmul_block_free_dimension, matmul_fully_optimized, matmul_hoist_load, matmul_tiled, Blocking,
    MatmulKernel,
};
use nki_kernels::testing::{allclose, random_bf16};

/// `lhs_t^T @ rhs` in f32 by ndarray.
fn reference(lhs_t: ArrayView2<bf16>, rhs: ArrayView2<bf16>) -> Array2<f32> {
    let a = lhs_t.mapv(f32::from);
    let b = rhs.mapv(f32::from);
    a.t().dot(&b)
}

/// Runs `kernel` on lhsT[k, m] x rhs[k, n] and checks the result against the reference.
fn check(kernel: MatmulKernel, k: usize, m: usize, n: usize) {
    let lhs_t = random_bf16(k, m, 7 + k as u64);
    let rhs = random_bf16(k, n, 11 + n as u64);
    let want = reference(lhs_t.view(), rhs.view());
    let a = Hbm::from_array(&lhs_t).unwrap();
    let b = Hbm::from_array(&rhs).unwrap();
    let mut c = Hbm::<bf16>::zeros([m, n]);
    kernel.launch(&a, &b, &mut c).unwrap();
    let got = c.to_array().unwrap();
    if let Err(e) = allclose(&got, &want, 1e-4, 1e-2) {
        panic!("{kernel} [{k}x{m}]^T @ [{k}x{n}]: {e}");
    }
}

#[test]
fn tiled_small_and_multi_tile() {
    check(MatmulKernel::Tiled, 128, 128, 512);
    check(MatmulKernel::Tiled, 384, 256, 1024);
}

#[test]
fn hoist_load_small_and_multi_tile() {
    check(MatmulKernel::HoistLoad, 128, 128, 512);
    check(MatmulKernel::HoistLoad, 384, 256, 1024);
}

#[test]
fn block_free_dimension_tutorial_blocking() {
    let b = Blocking::BLOCK_FREE_DIMENSION;
    check(MatmulKernel::BlockFreeDimension(b), 128, 256, 1024);
    check(MatmulKernel::BlockFreeDimension(b), 512, 512, 2048);
}

#[test]
fn block_free_dimension_other_blockings() {
    check(
        MatmulKernel::BlockFreeDimension(Blocking::new(1, 1, 1)),
        256,
        128,
        512,
    );
    check(
        MatmulKernel::BlockFreeDimension(Blocking::new(3, 1, 1)),
        256,
        384,
        1024,
    );
}

#[test]
fn fully_optimized_tutorial_blocking_two_k_blocks() {
    // K = 2048 is two K blocks of 1024 (partial sums meet in the SBUF result block),
    // M = 2048 one M block of 16 tiles, N = 1024 one N block of 2 tiles.
    check(
        MatmulKernel::FullyOptimized(Blocking::FULLY_OPTIMIZED),
        2048,
        2048,
        1024,
    );
}

#[test]
fn fully_optimized_small_blockings() {
    // Several blocks along every dimension.
    check(
        MatmulKernel::FullyOptimized(Blocking::new(2, 1, 2)),
        768,
        512,
        1024,
    );
    check(
        MatmulKernel::FullyOptimized(Blocking::new(1, 2, 1)),
        256,
        256,
        1024,
    );
}

#[test]
fn stages_on_the_tutorial_large_shape_scaled_down() {
    // The tutorial's large test is lhs (4096, 1024) @ (1024, 2048); an eighth of M, half of K and
    // half of N keep a debug build quick while giving every stage several tiles and blocks.
    for kernel in &MatmulKernel::TUTORIAL[..3] {
        check(*kernel, 512, 512, 1024);
    }
}

#[test]
fn generated_launchers_compute_the_same() {
    let lhs_t = random_bf16(256, 256, 1);
    let rhs = random_bf16(256, 1024, 2);
    let a = Hbm::from_array(&lhs_t).unwrap();
    let b = Hbm::from_array(&rhs).unwrap();
    let mut outs = Vec::new();
    for i in 0..4 {
        let mut c = Hbm::<bf16>::zeros([256, 1024]);
        match i {
            0 => launch!(matmul_tiled[1](&a, &b, &mut c)).map(|_| ()),
            1 => launch!(matmul_hoist_load[1](&a, &b, &mut c)).map(|_| ()),
            2 => matmul_block_free_dimension::launch(1, &a, &b, &mut c, Blocking::new(2, 2, 1))
                .map(|_| ()),
            _ => matmul_fully_optimized::launch(1, &a, &b, &mut c, Blocking::new(2, 2, 2))
                .map(|_| ()),
        }
        .unwrap();
        outs.push(c.to_array().unwrap());
    }
    // Stages 1-3 accumulate all of K in PSUM and round once: identical results.
    assert_eq!(outs[0], outs[1]);
    assert_eq!(outs[0], outs[2]);
}

#[test]
fn f32_inputs_work() {
    let lhs_t = Array2::from_shape_fn((128, 128), |(i, j)| ((i + 2 * j) % 5) as f32 - 2.0);
    let rhs = Array2::from_shape_fn((128, 512), |(i, j)| ((3 * i + j) % 7) as f32 * 0.25);
    let want = lhs_t.t().dot(&rhs);
    let mut c = Hbm::<f32>::zeros([128, 512]);
    MatmulKernel::Tiled
        .launch(
            &Hbm::from_array(&lhs_t).unwrap(),
            &Hbm::from_array(&rhs).unwrap(),
            &mut c,
        )
        .unwrap();
    assert_eq!(c.to_array().unwrap(), want.into_dyn());
}

#[test]
fn unsupported_shapes_are_errors() {
    let run = |kernel: MatmulKernel, lhs: [usize; 2], rhs: [usize; 2], out: [usize; 2]| {
        let a = Hbm::<bf16>::shape_only(lhs);
        let b = Hbm::<bf16>::shape_only(rhs);
        let mut c = Hbm::<bf16>::shape_only(out);
        kernel
            .estimate(Target::Trn1, &a, &b, &mut c)
            .unwrap_err()
            .kind()
    };
    for kernel in MatmulKernel::TUTORIAL {
        // Contraction dimensions differ.
        assert_eq!(
            run(kernel, [1024, 2048], [512, 2048], [2048, 2048]),
            ErrorKind::ContractionMismatch
        );
        // Result of the wrong shape.
        assert_eq!(
            run(kernel, [1024, 2048], [1024, 2048], [2048, 1024]),
            ErrorKind::ShapeMismatch
        );
        // M, N, K not multiples of the tile (or block) sizes.
        assert_eq!(
            run(kernel, [1024, 2000], [1024, 2048], [2000, 2048]),
            ErrorKind::InvalidArgument
        );
        assert_eq!(
            run(kernel, [1024, 2048], [1024, 2000], [2048, 2000]),
            ErrorKind::InvalidArgument
        );
        assert_eq!(
            run(kernel, [1000, 2048], [1000, 2048], [2048, 2048]),
            ErrorKind::InvalidArgument
        );
    }
    // The tutorial's first kernel shape (64, 128) @ (128, 512) has M below one tile.
    assert_eq!(
        run(MatmulKernel::Tiled, [128, 64], [128, 512], [64, 512]),
        ErrorKind::InvalidArgument
    );
    // The fully optimized kernel needs K in whole K blocks (8 x 128 = 1024).
    assert_eq!(
        run(
            MatmulKernel::FullyOptimized(Blocking::FULLY_OPTIMIZED),
            [512, 2048],
            [512, 1024],
            [2048, 1024]
        ),
        ErrorKind::InvalidArgument
    );
    // A zero block size is an error, not a division by zero.
    assert_eq!(
        run(
            MatmulKernel::FullyOptimized(Blocking::new(0, 1, 1)),
            [128, 128],
            [128, 512],
            [128, 512]
        ),
        ErrorKind::InvalidArgument
    );
}

#[test]
fn blocks_too_big_for_sbuf_are_resolved_with_spill_traffic() {
    // 64 M tiles per block keep 8 lhsT rows of [128, 8192] bf16 and 128 SBUF accumulators
    // allocated: more than SBUF holds together, though every instruction's own tiles fit.
    // The compiler resolves it (calibration.md section 5), so the model does: no error, the
    // added traffic in the profile and on the HBM counters.
    let a = Hbm::<bf16>::shape_only([8192, 8192]);
    let b = Hbm::<bf16>::shape_only([8192, 1024]);
    let mut c = Hbm::<bf16>::shape_only([8192, 1024]);
    let big = MatmulKernel::FullyOptimized(Blocking::new(64, 2, 8))
        .estimate(Target::Trn1, &a, &b, &mut c)
        .unwrap();
    let s = &big.spills;
    assert!(!s.is_empty(), "{s:?}");
    assert!(s.resident_peak_bytes <= Target::Trn1.spec().sbuf_bytes_per_partition);
    let added = s.input_reload_bytes + s.reload_bytes;
    assert!(added > 0, "{s:?}");
    // The added traffic is on the HBM counters, beside what the kernel moves itself (one
    // block of N and of M: lhsT and rhs read once, the result written once).
    let (lhs_bytes, rhs_bytes, out_bytes) = (8192 * 8192 * 2, 8192 * 1024 * 2, 8192 * 1024 * 2);
    assert_eq!(
        big.dma.hbm_read_bytes,
        lhs_bytes + rhs_bytes + added,
        "{s:?}"
    );
    assert_eq!(big.dma.hbm_write_bytes, out_bytes + s.save_bytes, "{s:?}");
}
