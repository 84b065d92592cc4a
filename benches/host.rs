//! Host-throughput benches: how fast the CPU runtime executes tiled NKI kernels, next to plain
//! ndarray doing the same arithmetic on the same data.
//!
//! * `add`: a tiled add of two [4096, 4096] f32 tensors, [128, 512] tiles, sharded over two
//!   logical NeuronCores (`[spmd_dim(16, nc(2)), 8]`), beside ndarray's `&a + &b`.
//! * `matmul`: `lhsT[K, M]^T @ rhs[K, N]` with K = M = 2048, N = 1024 in bf16, accumulating in
//!   f32 PSUM ([128, 128] stationary x [128, 512] moving tiles) and stored as bf16, one
//!   [512, 512] output block per instance on grid `[spmd_dim(2, nc(2)), 2]`, beside ndarray's
//!   f32 `dot` of the same shapes.
//!
//! Measured numbers are in the README.
//!
//! Run with `cargo bench --bench host`. The config is kept short (10 samples, a few seconds
//! each) so the whole bench finishes in under two minutes.

use criterion::{criterion_group, criterion_main, Criterion};
use ndarray::{Array2, ArrayView2};
use nki_core::prelude::*;
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
    // Check once that the kernel computes the same as ndarray.
    launch!(tiled_add[spmd_dim(N / P / 2, nc(2)), N / F](&a, &b, &mut out)).expect("add runs");
    assert_eq!(out.to_array().expect("values"), (&a_nd + &b_nd).into_dyn());

    let mut g = c.benchmark_group("add_4096x4096_f32");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    g.bench_function("nki_tiled_nc2", |bch| {
        bch.iter(|| {
            launch!(tiled_add[spmd_dim(N / P / 2, nc(2)), N / F](&a, &b, &mut out))
                .expect("add runs")
        })
    });
    g.bench_function("ndarray", |bch| bch.iter(|| &a_nd + &b_nd));
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

    let mut g = c.benchmark_group("matmul_2048x2048x1024");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(8));
    g.bench_function("nki_bf16_psum_f32_nc2", |bch| {
        bch.iter(|| {
            launch!(tiled_matmul[spmd_dim(M / MB / 2, nc(2)), N / NB](&lhs_t, &rhs, &mut out))
                .expect("matmul runs")
        })
    });
    g.bench_function("ndarray_f32_dot", |bch| bch.iter(|| lhs32.dot(&r32)));
    g.finish();
}

criterion_group!(benches, bench_add, bench_matmul);
criterion_main!(benches);
