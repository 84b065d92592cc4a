//! What the candle bridge costs on top of the kernel it launches: `c = a + b` on two
//! [4096, 4096] f32 candle tensors (64 MiB each), three ways, back to back in one run:
//!
//! * `add_4096/candle`: candle's own `a + b`.
//! * `add_4096/nki_op`: the NKI tensor-add kernel as a candle custom op
//!   (`nki_candle::ops::tensor_add().apply2(&a, &b)`): inputs borrowed from candle's storage,
//!   the output handed to candle as its storage.
//! * `add_4096/kernel_only`: the same kernel launched on input `Hbm` tensors built once outside
//!   the timing loop, writing a new output each call (`Hbm::zeros_dyn`, moved out with
//!   `Hbm::into_vec`) as every call of an op must: the floor of `nki_op`, the bridge's work
//!   (lending candle's storage, building the op's tensors, handing the output to candle)
//!   removed.
//! * `add_4096/kernel_warm_output`: the launch alone, into one output reused every call (its
//!   pages already mapped): how much of `kernel_only` is the fresh output's first touch.
//!
//! All NKI variants run the kernel on the `[32, 8]` grid of [128, 512] tiles with all host
//! cores. Issue 23's bar: `nki_op` within 1.3x of `kernel_only` in the same run.
//!
//! Run with `cargo bench --features candle --bench candle_bridge` (about half a minute).

use candle_core::{DType, Device, Tensor};
use criterion::{black_box, criterion_group, criterion_main, Criterion};
use nki_core::prelude::*;
use nki_kernels::autograd::{tensor_add_tile, ADD_TILE_COLS, ADD_TILE_ROWS};
use std::time::Duration;

/// Rows and columns of the operands.
const N: usize = 4096;

/// Deterministic operands with values in [-1, 1).
fn operand(seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..N * N)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

fn add_4096(c: &mut Criterion) {
    let (va, vb) = (operand(1), operand(2));
    let a = Tensor::from_slice(&va, (N, N), &Device::Cpu).expect("tensor a");
    let b = Tensor::from_slice(&vb, (N, N), &Device::Cpu).expect("tensor b");
    let ha = Hbm::from_slice(&[N, N], &va).expect("hbm a");
    let hb = Hbm::from_slice(&[N, N], &vb).expect("hbm b");
    let mut hc = Hbm::<f32>::zeros([N, N]);
    let op = nki_candle::ops::tensor_add();
    let grid = [N / ADD_TILE_ROWS, N / ADD_TILE_COLS];

    // The three agree before anything is timed.
    let native = (&a + &b).expect("candle add");
    let bridged = op.apply2(&a, &b).expect("nki op");
    tensor_add_tile::run(Launch::new(grid), &ha, &hb, &mut hc).expect("kernel");
    let diff = (&native - &bridged).and_then(|d| d.abs()?.max_all()?.to_scalar::<f32>());
    assert_eq!(diff.expect("difference"), 0.0, "nki_op differs from candle");
    assert_eq!(
        hc.to_vec().expect("values"),
        native
            .flatten_all()
            .and_then(|t| t.to_vec1::<f32>())
            .expect("candle values")
    );
    assert_eq!(native.dtype(), DType::F32);

    let mut g = c.benchmark_group("add_4096");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    g.bench_function("candle", |bench| {
        bench.iter(|| black_box((&a + &b).expect("candle add")))
    });
    g.bench_function("nki_op", |bench| {
        bench.iter(|| black_box(op.apply2(&a, &b).expect("nki op")))
    });
    g.bench_function("kernel_only", |bench| {
        bench.iter(|| {
            let mut out = Hbm::<f32>::zeros_dyn(&[N, N]).expect("output");
            tensor_add_tile::run(Launch::new(grid), &ha, &hb, &mut out).expect("kernel");
            black_box(out.into_vec().expect("values"))
        })
    });
    g.bench_function("kernel_warm_output", |bench| {
        bench.iter(|| {
            tensor_add_tile::run(Launch::new(grid), &ha, &hb, &mut hc).expect("kernel");
        })
    });
    g.finish();
}

criterion_group!(benches, add_4096);
criterion_main!(benches);
