//! Host-throughput benches: how fast the CPU runtime executes tiled NKI kernels and models
//! them, next to plain Rust doing the same arithmetic on the same data.
//!
//! * `add_4096_f32/*`: `c = a + b` on [4096, 4096] f32 tensors with [128, 512] tiles:
//!   `nki` on the 2-D grid `[32, 8]` (no `nc`; all host cores), `nki_1thread` the same on one
//!   host thread (`Launch::host_threads(1)`), `nki_nc2` on `[spmd_dim(16, nc(2)), 8]`,
//!   beside ndarray's `&a + &b` (`ndarray`), a single-threaded contiguous loop into a
//!   preallocated output (`loop`, the numpy-class baseline) and the same loop split over two
//!   threads (`loop_2threads`: how much a second thread gains on this machine's memory).
//! * `matmul_2048/*`: `lhsT[K, M]^T @ rhs[K, N]` with K = M = 2048, N = 1024 in bf16,
//!   accumulating in f32 PSUM ([128, 128] stationary x [128, 512] moving tiles) and stored as
//!   bf16, one [512, 512] output block per instance on grid `[spmd_dim(2, nc(2)), 2]` (`nki`),
//!   beside ndarray's f32 `dot` of the same shapes (`ndarray_dot`, matrixmultiply's GEMM).
//! * `estimate/*`: estimate-mode launches of the four matmul tutorial kernels at the tutorial's
//!   benchmark shape on trn1 (shape-only tensors); throughput in elements = instruction
//!   records, so criterion reports records per second. `estimate/compiled/gemm4096` and
//!   `estimate/as_written/gemm4096`: the fully optimised tutorial kernel on a 4096³ bf16 GEMM
//!   (blocking 1 x 1 x 4, trn2) as compiled (the defaults: the Beta-1 compiler stage and the
//!   compiler's allocation) and as written (`CompilerStage::OFF` and
//!   `CompileConfig::as_written()`): what the compiler's transformations cost the estimate.
//! * `add_scaling_f32/nki/<n>`: the add at n = 1024 … 8192 (grid `[n / 128, n / 512]`), with
//!   throughput in elements to show that time grows linearly with the data.
//!
//! Measured numbers are in the README ("Host speed").
//!
//! Run with `cargo bench --bench host` (about three minutes on two cores); filter with e.g.
//! `cargo bench --bench host -- add_4096_f32`.

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ndarray::{Array2, ArrayView2};
use nki_core::prelude::*;
// The Beta-1 instruction forms (allocating, `_into` twins): the seeds' dialect.
use nki_core::nisa::classic as nisa;
use nki_core::{with_compile_config, with_compiler_stage, CompileConfig, CompilerStage};
use nki_kernels::matmul::{Blocking, MatmulKernel, TUTORIAL_BENCHMARK_KMN};
use std::time::Duration;

/// Tile partition size.
const P: usize = 128;
/// Free size of the add's tiles.
const F: usize = 512;

/// One [128, 512] tile of `c = a + b` per program instance.
#[nki_kernel]
fn tiled_add(a: &Hbm<f32>, b: &Hbm<f32>, c: &mut Hbm<f32>) {
    let (i, j) = (nl::program_id(0) * P, nl::program_id(1) * F);
    let x = nl::load(a.slice((i..i + P, j..j + F)));
    let y = nl::load(b.slice((i..i + P, j..j + F)));
    nl::store(c.slice((i..i + P, j..j + F)), &nl::add(&x, &y));
}

/// Output rows per matmul instance (4 stationary blocks of 128).
const MB: usize = 512;
/// Output columns per matmul instance (one PSUM bank of f32).
const NB: usize = 512;

/// One [512, 512] block of `out = lhsT^T @ rhs` per program instance: for each K step of 128,
/// one [128, 512] tile of `rhs` (moving) and one of `lhsT` (sliced into four [128, 128]
/// stationary views) are loaded, and four PSUM banks accumulate over K.
#[nki_kernel]
fn tiled_matmul(lhs_t: &Hbm<bf16>, rhs: &Hbm<bf16>, out: &mut Hbm<bf16>) {
    let k_total = lhs_t.shape()[0];
    let (m0, n0) = (nl::program_id(0) * MB, nl::program_id(1) * NB);
    let accs: Vec<Tile> = (0..MB / P)
        .map(|_| nl::zeros(&[P, NB], DType::F32, nl::PSUM))
        .collect();
    for k in (0..k_total).step_by(P) {
        let moving = nl::load(rhs.slice((k..k + P, n0..n0 + NB)));
        let stat = nl::load(lhs_t.slice((k..k + P, m0..m0 + MB)));
        for (mi, acc) in accs.iter().enumerate() {
            let s = stat.slice((.., mi * P..(mi + 1) * P));
            nisa::nc_matmul_acc(acc, s, &moving);
        }
    }
    for (mi, acc) in accs.iter().enumerate() {
        let res = nl::copy(acc, Some(DType::BF16));
        let r = m0 + mi * P;
        nl::store(out.slice((r..r + P, n0..n0 + NB)), &res);
    }
}

/// A deterministic pseudo-random matrix with values in [-1, 1).
fn rand_matrix(rows: usize, cols: usize, seed: u64) -> Array2<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    Array2::from_shape_fn((rows, cols), |_| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    })
}

fn to_bf16(a: ArrayView2<f32>) -> Array2<bf16> {
    a.mapv(bf16::from_f32)
}

fn bench_add(c: &mut Criterion) {
    const N: usize = 4096;
    let (a_nd, b_nd) = (rand_matrix(N, N, 1), rand_matrix(N, N, 2));
    let a = Hbm::from_array(&a_nd).expect("2-D");
    let b = Hbm::from_array(&b_nd).expect("2-D");
    let mut out = Hbm::<f32>::zeros([N, N]);
    // Check once that the kernel computes the same as ndarray, bit for bit.
    launch!(tiled_add[N / P, N / F](&a, &b, &mut out)).expect("add runs");
    assert_eq!(out.to_array().expect("values"), (&a_nd + &b_nd).into_dyn());
    // The numpy-class baseline: one contiguous single-threaded loop over the same data.
    let (a_v, b_v) = (
        a_nd.as_slice().expect("standard layout").to_vec(),
        b_nd.as_slice().expect("standard layout").to_vec(),
    );
    let mut c_v = vec![0f32; N * N];

    let mut g = c.benchmark_group("add_4096_f32");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    g.bench_function("nki", |bch| {
        bch.iter(|| launch!(tiled_add[N / P, N / F](&a, &b, &mut out)).expect("add runs"))
    });
    g.bench_function("nki_1thread", |bch| {
        bch.iter(|| {
            tiled_add::run(
                Launch::new([N / P, N / F]).host_threads(1),
                &a,
                &b,
                &mut out,
            )
            .expect("add runs")
        })
    });
    g.bench_function("nki_nc2", |bch| {
        bch.iter(|| {
            launch!(tiled_add[spmd_dim(N / P / 2, nc(2)), N / F](&a, &b, &mut out))
                .expect("add runs")
        })
    });
    g.bench_function("ndarray", |bch| bch.iter(|| &a_nd + &b_nd));
    g.bench_function("loop", |bch| {
        bch.iter(|| add_loop(black_box(&a_v), black_box(&b_v), &mut c_v))
    });
    g.bench_function("loop_2threads", |bch| {
        bch.iter(|| {
            let half = N * N / 2;
            let (c0, c1) = c_v.split_at_mut(half);
            std::thread::scope(|s| {
                s.spawn(|| add_loop(black_box(&a_v[..half]), black_box(&b_v[..half]), c0));
                add_loop(black_box(&a_v[half..]), black_box(&b_v[half..]), c1);
            })
        })
    });
    g.finish();
}

/// `c = a + b` as one contiguous, single-threaded loop.
fn add_loop(a: &[f32], b: &[f32], c: &mut [f32]) {
    for ((c, a), b) in c.iter_mut().zip(a).zip(b) {
        *c = a + b;
    }
}

/// The add at 1024² … 8192² (grid `[n / 128, n / 512]`, no `nc`): time should grow with the
/// element count (criterion throughput in elements).
fn bench_add_scaling(c: &mut Criterion) {
    let mut g = c.benchmark_group("add_scaling_f32");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    for n in [1024, 2048, 4096, 8192] {
        let a = Hbm::from_array(&rand_matrix(n, n, 5)).expect("2-D");
        let b = Hbm::from_array(&rand_matrix(n, n, 6)).expect("2-D");
        let mut out = Hbm::<f32>::zeros([n, n]);
        g.throughput(Throughput::Elements((n * n) as u64));
        g.bench_with_input(BenchmarkId::new("nki", n), &n, |bch, &n| {
            bch.iter(|| launch!(tiled_add[n / P, n / F](&a, &b, &mut out)).expect("add runs"))
        });
    }
    g.finish();
}

fn bench_matmul(c: &mut Criterion) {
    const K: usize = 2048;
    const M: usize = 2048;
    const N: usize = 1024;
    let lhs_t_nd = to_bf16(rand_matrix(K, M, 3).view());
    let rhs_nd = to_bf16(rand_matrix(K, N, 4).view());
    let lhs_t = Hbm::from_array(&lhs_t_nd).expect("2-D");
    let rhs = Hbm::from_array(&rhs_nd).expect("2-D");
    let mut out = Hbm::<bf16>::zeros([M, N]);
    let (l32, r32) = (lhs_t_nd.mapv(f32::from), rhs_nd.mapv(f32::from));
    let lhs32 = l32.t().to_owned();
    // Check once against ndarray (bf16 output: relative error within bf16 rounding).
    launch!(tiled_matmul[spmd_dim(M / MB / 2, nc(2)), N / NB](&lhs_t, &rhs, &mut out))
        .expect("matmul runs");
    let want = lhs32.dot(&r32);
    let got = out.to_array().expect("values");
    for (g, w) in got.iter().zip(want.iter()) {
        let g = g.to_f32();
        assert!(
            (g - w).abs() <= 1e-4 + 1e-2 * w.abs(),
            "matmul mismatch: {g} vs {w}"
        );
    }

    let mut g = c.benchmark_group("matmul_2048");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(8));
    g.bench_function("nki", |bch| {
        bch.iter(|| {
            launch!(tiled_matmul[spmd_dim(M / MB / 2, nc(2)), N / NB](&lhs_t, &rhs, &mut out))
                .expect("matmul runs")
        })
    });
    g.bench_function("ndarray_dot", |bch| bch.iter(|| lhs32.dot(&r32)));
    g.finish();
}

/// Estimate-mode throughput of the four matmul tutorial kernels at the tutorial's benchmark
/// shape (trn1, bf16, shape-only tensors): criterion throughput in elements = instruction
/// records, so the report reads as records per second.
fn bench_estimate(c: &mut Criterion) {
    let (k, m, n) = TUTORIAL_BENCHMARK_KMN;
    let lhs_t = Hbm::<bf16>::shape_only([k, m]);
    let rhs = Hbm::<bf16>::shape_only([k, n]);
    let mut out = Hbm::<bf16>::shape_only([m, n]);
    let mut g = c.benchmark_group("estimate");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    for (kernel, id) in MatmulKernel::TUTORIAL.into_iter().zip([
        "tiled_matmul",
        "hoist_load_matmul",
        "block_free_matmul",
        "fully_optimized_matmul",
    ]) {
        let estimate = |out: &mut Hbm<bf16>| {
            kernel
                .estimate(Target::Trn1, &lhs_t, &rhs, out)
                .expect("estimate runs")
        };
        let records = estimate(&mut out).instructions;
        g.throughput(Throughput::Elements(records as u64));
        g.bench_function(id, |bch| bch.iter(|| estimate(&mut out)));
    }
    // A 4096³ GEMM with the compiler stage and without it.
    let s = 4096;
    let (lhs_t, rhs) = (Hbm::shape_only([s, s]), Hbm::shape_only([s, s]));
    let mut out = Hbm::<bf16>::shape_only([s, s]);
    let kernel = MatmulKernel::FullyOptimized(Blocking::new(1, 1, 4));
    for (as_written, id) in [(false, "compiled/gemm4096"), (true, "as_written/gemm4096")] {
        let estimate = |out: &mut Hbm<bf16>| {
            let mut run = || kernel.estimate(Target::Trn2, &lhs_t, &rhs, out);
            if as_written {
                with_compiler_stage(CompilerStage::OFF, || {
                    with_compile_config(CompileConfig::as_written(), &mut run)
                })
            } else {
                run()
            }
            .expect("estimate runs")
        };
        let records = estimate(&mut out).instructions;
        g.throughput(Throughput::Elements(records as u64));
        g.bench_function(id, |bch| bch.iter(|| estimate(&mut out)));
    }
    g.finish();
}

criterion_group!(
    benches,
    bench_add,
    bench_matmul,
    bench_estimate,
    bench_add_scaling
);
criterion_main!(benches);
