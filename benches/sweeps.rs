//! Tile-size sweeps on modelled device time.
//!
//! These criterion benches do not time the host: their measurement, `nki_core::sweep::ModelledTime`
//! (the `criterion` feature of nki-core, usable for any kernel), is the
//! latency the timing model gives a kernel on a NeuronCore (estimate mode, so nothing is
//! computed and the tensors are shape-only). Each benchmark point is one tile or block size, so
//! criterion's report reads as "modelled latency per tile size":
//!
//! - `tensor_add_stream/<target>/<FREE_DIM>`: the streaming vector add on a [4096, 8192] bf16
//!   tensor, chunked along the free dimension in FREE_DIM elements per partition (128..8192),
//!   with the modelled HBM traffic as throughput.
//! - `matmul_block_free_dimension/<target>/<M>x<N>` and
//!   `matmul_fully_optimized/<target>/<M>x<N>x<K>`: the blocked matmuls of the tutorial at its
//!   benchmark shape (lhsT [8192, 4096] x rhs [8192, 8192] bf16) for several TILES_IN_BLOCK
//!   choices. Blockings whose tiles do not fit SBUF are reported and skipped.
//!
//! - `scale_stream/trn2/<chunk>x<bufs>`: a kernel written in this file, as a user would write
//!   one, swept over a [`ParamGrid`] with `nki_core::sweep::bench_grid`.
//!
//! The model is deterministic, so every sample of a point is the same value; plots are off
//! (`ModelledTime::config()`: criterion's density plots cannot draw a zero-width
//! distribution). Run with `cargo bench --bench sweeps` (a few minutes on two cores); filter
//! with e.g.
//! `cargo bench --bench sweeps -- tensor_add_stream/trn2`.

use nki_core::criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use nki_core::prelude::*;
use nki_core::sweep::{bench_grid, ModelledTime, ParamGrid};
use nki_kernels::matmul::{Blocking, MatmulKernel, TUTORIAL_BENCHMARK_KMN};
use nki_kernels::tensor_add::tensor_add_stream;

/// Tensor shape of the streaming add sweep.
const ADD_SHAPE: [usize; 2] = [4096, 8192];

/// FREE_DIM values swept for the streaming add.
const FREE_DIMS: [usize; 7] = [128, 256, 512, 1024, 2048, 4096, 8192];

fn sweep_tensor_add(c: &mut Criterion<ModelledTime>) {
    let a = Hbm::<bf16>::shape_only(ADD_SHAPE);
    let b = Hbm::<bf16>::shape_only(ADD_SHAPE);
    let bytes = (ADD_SHAPE[0] * ADD_SHAPE[1] * 2) as u64;
    for target in [Target::Trn1, Target::Trn2] {
        let mut g = c.benchmark_group(format!("tensor_add_stream/{target}"));
        // Two tensors read and one written per addition.
        g.throughput(Throughput::Bytes(3 * bytes));
        for free_dim in FREE_DIMS {
            g.bench_with_input(
                BenchmarkId::from_parameter(free_dim),
                &free_dim,
                |bch, &fd| {
                    bch.iter_custom(|iters| {
                        let mut out = Hbm::<bf16>::shape_only(ADD_SHAPE);
                        let p = tensor_add_stream::estimate(1, target, &a, &b, &mut out, fd)
                            .unwrap_or_else(|e| panic!("tensor_add_stream FREE_DIM {fd}: {e}"));
                        p.latency_ns * iters as f64
                    })
                },
            );
        }
        g.finish();
    }
}

/// Block sizes (tiles in M, N) swept for the free-dimension blocked matmul; the tutorial's is
/// (2, 2).
const FREE_BLOCKINGS: [(usize, usize); 5] = [(1, 1), (2, 1), (1, 2), (2, 2), (4, 1)];

/// Block sizes (tiles in M, N, K) swept for the fully blocked matmul; the tutorial's is
/// (16, 2, 8).
const FULL_BLOCKINGS: [(usize, usize, usize); 8] = [
    (4, 2, 8),
    (8, 2, 8),
    (16, 2, 8),
    (32, 2, 8),
    (16, 1, 8),
    (16, 4, 8),
    (16, 2, 4),
    (16, 2, 16),
];

/// Benchmarks `kernel` at the tutorial's shape on `target` as point `id` of group `g`, unless
/// the blocking does not fit on chip (then says so and skips it).
fn bench_matmul(
    g: &mut criterion::BenchmarkGroup<'_, ModelledTime>,
    kernel: MatmulKernel,
    target: Target,
    id: String,
) {
    let (k, m, n) = TUTORIAL_BENCHMARK_KMN;
    let lhs_t = Hbm::<bf16>::shape_only([k, m]);
    let rhs = Hbm::<bf16>::shape_only([k, n]);
    let mut out = Hbm::<bf16>::shape_only([m, n]);
    if let Err(e) = kernel.estimate(target, &lhs_t, &rhs, &mut out) {
        let first_line = e.to_string().lines().next().unwrap_or_default().to_string();
        eprintln!("skipping {kernel} {id} on {target}: {first_line}");
        return;
    }
    g.bench_function(BenchmarkId::from_parameter(id), |bch| {
        bch.iter_custom(|iters| {
            let p = kernel
                .estimate(target, &lhs_t, &rhs, &mut out)
                .expect("estimated once above");
            p.latency_ns * iters as f64
        })
    });
}

fn sweep_matmul(c: &mut Criterion<ModelledTime>) {
    for target in [Target::Trn1, Target::Trn2] {
        let mut g = c.benchmark_group(format!("matmul_block_free_dimension/{target}"));
        for (bm, bn) in FREE_BLOCKINGS {
            let kernel = MatmulKernel::BlockFreeDimension(Blocking::new(bm, bn, 1));
            bench_matmul(&mut g, kernel, target, format!("{bm}x{bn}"));
        }
        g.finish();
        let mut g = c.benchmark_group(format!("matmul_fully_optimized/{target}"));
        for (bm, bn, bk) in FULL_BLOCKINGS {
            let kernel = MatmulKernel::FullyOptimized(Blocking::new(bm, bn, bk));
            bench_matmul(&mut g, kernel, target, format!("{bm}x{bn}x{bk}"));
        }
        g.finish();
    }
}

/// A kernel written in the bench, as a user would: `out = x * scale` streamed in
/// `chunk`-wide column strips, with `bufs` strips loaded before they are scaled and stored.
#[nki_kernel]
fn scale_stream(x: &Hbm<bf16>, out: &mut Hbm<bf16>, chunk: usize, bufs: usize) {
    let rows = nl::program_id(0) * 128..(nl::program_id(0) + 1) * 128;
    let strips = x.shape()[1] / chunk;
    for g in nl::affine_range(strips / bufs) {
        let tiles: Vec<Tile> = (0..bufs)
            .map(|b| {
                let c0 = (g * bufs + b) * chunk;
                nl::load(x.slice((rows.clone(), c0..c0 + chunk)))
            })
            .collect();
        for (b, t) in tiles.iter().enumerate() {
            let c0 = (g * bufs + b) * chunk;
            nl::store(out.slice((rows.clone(), c0..c0 + chunk)), &(t * 0.5));
        }
    }
}

/// A user kernel swept with `nki_core::sweep::bench_grid`: `scale_stream/trn2/<chunk>x<bufs>`.
fn sweep_user_kernel(c: &mut Criterion<ModelledTime>) {
    let x = Hbm::<bf16>::shape_only([1024, 8192]);
    let grid = ParamGrid::new()
        .axis("chunk", [512, 1024, 2048])
        .axis("bufs", [1, 2, 4]);
    bench_grid(c, "scale_stream/trn2", &grid, |p| {
        let mut out = Hbm::<bf16>::shape_only([1024, 8192]);
        scale_stream::estimate(8, Target::Trn2, &x, &mut out, p["chunk"], p["bufs"])
    });
}

criterion_group! {
    name = sweeps;
    config = ModelledTime::config();
    targets = sweep_tensor_add, sweep_matmul, sweep_user_kernel
}
criterion_main!(sweeps);
