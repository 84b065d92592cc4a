//! The NKI 0.7 twins of the examples and tutorial kernels a new user reads first, each against
//! its NKI Beta 1 twin: the same values bit for bit, and the same modelled latency with each
//! launched as the compiler runs it (each dialect's default compile configuration: the Beta-1
//! compiler stage for the Beta-1 kernel). The example files are compiled here as modules, so
//! the kernels checked are the ones the examples show.

use nki_core::prelude::*;
use nki_core::{Engine, Opcode};
use nki_kernels::rmsnorm::{rmsnorm, rmsnorm_07};
use nki_kernels::softmax::{softmax, softmax_07};
use nki_kernels::tensor_add::{tensor_add_stream, tensor_add_stream_07};
use nki_kernels::testing::{random_bf16, random_f32, random_range, random_vec};

#[allow(dead_code)]
#[path = "../examples/getting_started.rs"]
mod getting_started;
#[allow(dead_code)]
#[path = "../examples/getting_started_07.rs"]
mod getting_started_07;
#[allow(dead_code)]
#[path = "../examples/spmd_multiple_nc_tensor_addition.rs"]
mod main_demo;
#[allow(dead_code)]
#[path = "../examples/spmd_multiple_nc_tensor_addition_07.rs"]
mod main_demo_07;

const TARGET: Target = Target::Trn2;

fn bf16_input(rows: usize, cols: usize, seed: u64) -> Hbm<bf16> {
    Hbm::from_array(&random_bf16(rows, cols, seed)).unwrap()
}

fn f32_input(rows: usize, cols: usize, seed: u64) -> Hbm<f32> {
    let v = random_range(rows * cols, -4.0, 4.0, seed);
    Hbm::from_vec(&[rows, cols], v).unwrap()
}

/// A Beta-1 launch of `grid` on the target in `mode`, as every example runs it.
fn beta1(grid: impl Into<Grid>, mode: Mode) -> Launch {
    Launch::new(grid).target(TARGET).mode(mode)
}

/// Asserts the twins' values are equal bit for bit.
fn same_values<T: Element>(what: &str, beta1: &Hbm<T>, twin: &Hbm<T>) {
    let (b, t) = (beta1.to_f32_vec().unwrap(), twin.to_f32_vec().unwrap());
    assert_eq!(b.len(), t.len(), "{what}");
    let differ = b
        .iter()
        .zip(&t)
        .position(|(x, y)| x.to_bits() != y.to_bits());
    assert_eq!(differ, None, "{what}: first differing element");
}

/// Asserts the twins model the same latency and instructions, each core ending at the same time.
fn same_timeline(what: &str, beta1: &Profile, twin: &Profile) {
    assert_eq!(beta1.latency_ns, twin.latency_ns, "{what}: latency");
    assert_eq!(
        beta1.instructions, twin.instructions,
        "{what}: instructions"
    );
    let ends = |p: &Profile| p.cores.iter().map(|c| c.latency_ns).collect::<Vec<_>>();
    assert_eq!(ends(beta1), ends(twin), "{what}: each core's latency");
}

#[test]
fn getting_started_07_is_its_beta1_twin() {
    let (a, b) = (bf16_input(128, 512, 1), bf16_input(128, 512, 2));
    let mut c = Hbm::<bf16>::zeros([128, 512]);
    let kernel = getting_started::nki_tensor_add_kernel::run;
    let p = kernel(beta1(1, Mode::Simulate), &a, &b, &mut c).unwrap();
    let twin = getting_started_07::nki_tensor_add_kernel::simulate(1, TARGET, &a, &b).unwrap();
    same_values("getting_started", &c, &twin.0);
    same_timeline("getting_started", &p.profile.unwrap(), &twin.1);
}

#[test]
fn the_main_demos_07_twin_is_its_beta1_twin_on_one_core_and_on_two() {
    let (a, b) = (bf16_input(512, 2048, 1), bf16_input(512, 2048, 2));
    let mut c = Hbm::<bf16>::zeros([512, 2048]);
    let kernel = main_demo::nki_tensor_add_kernel::run;
    // The demo's grid: even row tiles on core 0, odd ones on core 1; 0.7's kernel[2].
    let two_cores = Grid::new([spmd_dim(2, nc(2)), spmd_dim(4, 1)]);
    let p = kernel(beta1(two_cores, Mode::Simulate), &a, &b, &mut c).unwrap();
    let twin = main_demo_07::nki_tensor_add_kernel::simulate(2, TARGET, &a, &b).unwrap();
    same_values("main demo on two cores", &c, &twin.0);
    let p = p.profile.unwrap();
    assert_eq!(p.cores.len(), 2);
    same_timeline("main demo on two cores", &p, &twin.1);
    // Every tile on one core: the Beta-1 grid [4, 4] and 0.7's kernel[1].
    let p = kernel(beta1([4, 4], Mode::Simulate), &a, &b, &mut c).unwrap();
    let twin = main_demo_07::nki_tensor_add_kernel::simulate(1, TARGET, &a, &b).unwrap();
    same_values("main demo on one core", &c, &twin.0);
    same_timeline("main demo on one core", &p.profile.unwrap(), &twin.1);
}

#[test]
fn tensor_add_stream_07_is_its_beta1_twin() {
    // The tutorial's shape, and one with a partial last row tile and chunk.
    for (rows, cols, free_dim) in [(256, 1024, 512), (256, 1024, 128), (250, 1000, 384)] {
        let what = format!("tensor_add_stream [{rows}, {cols}] free_dim {free_dim}");
        let (a, b) = (bf16_input(rows, cols, 1), bf16_input(rows, cols, 2));
        let mut c = Hbm::<bf16>::zeros([rows, cols]);
        let p = tensor_add_stream::simulate(1, TARGET, &a, &b, &mut c, free_dim).unwrap();
        let twin = tensor_add_stream_07::simulate(1, TARGET, &a, &b, free_dim).unwrap();
        same_values(&what, &c, &twin.0);
        same_timeline(&what, &p, &twin.1);
    }
}

#[test]
fn softmax_07_is_its_beta1_twin() {
    for (rows, d) in [(2, 5), (250, 512)] {
        let x = f32_input(rows, d, 3);
        let mut out = Hbm::<f32>::zeros([rows, d]);
        let p = softmax::simulate(1, TARGET, &x, &mut out).unwrap();
        let twin = softmax_07::simulate(1, TARGET, &x).unwrap();
        same_values(&format!("softmax [{rows}, {d}]"), &out, &twin.0);
        same_timeline(&format!("softmax [{rows}, {d}]"), &p, &twin.1);
    }
    // The example's modelled shape, in estimate mode.
    let x = Hbm::<f32>::shape_only([4096, 8192]);
    let mut out = Hbm::<f32>::shape_only([4096, 8192]);
    let p = softmax::estimate(1, TARGET, &x, &mut out).unwrap();
    let twin = softmax_07::estimate(1, TARGET, &x).unwrap();
    same_timeline("softmax [4096, 8192]", &p, &twin.1);
}

#[test]
fn rmsnorm_07_computes_its_beta1_twins_values_and_differs_only_in_the_gain_broadcast() {
    for (rows, d) in [(128, 512), (250, 512)] {
        let a = Hbm::from_array(&random_f32(rows, d, 1)).unwrap();
        let g = Hbm::from_vec(&[d], random_vec(d, 2)).unwrap();
        let mut out = Hbm::<f32>::zeros([rows, d]);
        rmsnorm::launch(1, &a, &g, &mut out).unwrap();
        let (twin, _) = rmsnorm_07::launch(1, &a, &g).unwrap();
        same_values(&format!("rmsnorm [{rows}, {d}]"), &out, &twin);
    }
    // The per-tile instructions are the same; the gain is broadcast once, by one DMA with a
    // partition step of 0 (reading the gain from HBM once per partition) where the Beta-1
    // kernel loads one row and broadcasts it on TensorE (a ones matmul per 512 columns and
    // its PSUM read-out). Only that once-per-launch setup tells the latencies apart.
    for (rows, d) in [(250, 512), (4096, 8192)] {
        let (a, g) = (
            Hbm::<f32>::shape_only([rows, d]),
            Hbm::<f32>::shape_only([d]),
        );
        let mut out = Hbm::<f32>::shape_only([rows, d]);
        let p = rmsnorm::estimate(1, TARGET, &a, &g, &mut out).unwrap();
        let (_, twin) = rmsnorm_07::estimate(1, TARGET, &a, &g).unwrap();
        let chunks = d.div_ceil(512);
        // Beta 1: the gain load, and per 512 columns a matmul and its read-out.
        assert_eq!(
            p.instructions,
            twin.instructions + 2 * chunks,
            "[{rows}, {d}]"
        );
        let count = |p: &Profile, api: &str| p.ops.iter().filter(|o| o.api == api).count();
        assert_eq!(
            count(&twin, "nisa.nc_matmul") + count(&twin, "nl.matmul"),
            0
        );
        let (b, t) = (p.latency_ns, twin.latency_ns);
        assert!(
            (t - b).abs() < 0.1 * b,
            "[{rows}, {d}]: Beta 1 {b} ns, 0.7 {t} ns"
        );
    }
}

#[test]
fn transpose2d_07_is_its_beta1_twin() {
    use nki_kernels::transpose2d::{transpose2d, transpose2d_07};
    // The tutorial's int8 case, and rows past one tile.
    let v: Vec<i8> = (0..5 * 12).map(|i| (i * 7 % 256) as i8).collect();
    let input = Hbm::from_vec(&[5, 12], v).unwrap();
    let mut out = Hbm::<i8>::zeros([5, 12]);
    let p = transpose2d::simulate(1, TARGET, &input, &mut out, 3, 4).unwrap();
    let twin = transpose2d_07::simulate(1, TARGET, &input, 3, 4).unwrap();
    same_values("transpose2d [5, 3 * 4]", &out, &twin.0);
    same_timeline("transpose2d [5, 3 * 4]", &p, &twin.1);
    let input = f32_input(200, 64, 5);
    let mut out = Hbm::<f32>::zeros([200, 64]);
    let p = transpose2d::simulate(1, TARGET, &input, &mut out, 8, 8).unwrap();
    let twin = transpose2d_07::simulate(1, TARGET, &input, 8, 8).unwrap();
    same_values("transpose2d [200, 8 * 8]", &out, &twin.0);
    same_timeline("transpose2d [200, 8 * 8]", &p, &twin.1);
}

#[test]
fn average_pool2d_07_is_its_beta1_twin() {
    use nki_kernels::average_pool2d::{average_pool2d, average_pool2d_07};
    // The tutorial's [2, 6, 6] bf16 image, and one past a tile of channels with pool 3.
    for (c, h, w, pool) in [(2, 6, 6, 2), (130, 9, 12, 3)] {
        let what = format!("average_pool2d [{c}, {h}, {w}] pool {pool}");
        let v = random_range(c * h * w, -4.0, 4.0, 7);
        let input =
            Hbm::<bf16>::from_vec(&[c, h, w], v.into_iter().map(bf16::from_f32).collect()).unwrap();
        let mut out = Hbm::<bf16>::zeros([c, h / pool, w / pool]);
        let p = average_pool2d::simulate(1, TARGET, &input, &mut out, pool).unwrap();
        let twin = average_pool2d_07::simulate(1, TARGET, &input, pool).unwrap();
        same_values(&what, &out, &twin.0);
        same_timeline(&what, &p, &twin.1);
    }
}

/// Asserts the twins issue the same instructions on the same engines, but for the PSUM
/// read-outs: the Beta-1 `nl.copy` of PSUM runs on ScalarE, 0.7's `nisa.tensor_copy` with its
/// engine left to the compiler on VectorE.
fn same_instructions_but_readouts(what: &str, beta1: &Profile, twin: &Profile) {
    let instructions = |p: &Profile| {
        let mut v: Vec<_> = (p.ops.iter())
            .map(|o| {
                let readout = o.opcode == Opcode::TensorCopy && o.api == "nl.copy";
                let engine = if readout { Engine::Vector } else { o.engine };
                let shape = (o.partitions, o.free, o.in_dtype, o.out_dtype);
                format!("{:?}", (o.opcode, engine, shape, o.bytes, o.kmn))
            })
            .collect();
        v.sort();
        v
    };
    assert_eq!(instructions(beta1), instructions(twin), "{what}");
    let readouts = |p: &Profile, e: Engine| {
        (p.ops.iter())
            .filter(|o| o.opcode == Opcode::TensorCopy && o.engine == e)
            .count()
    };
    assert_eq!(
        readouts(beta1, Engine::Scalar),
        readouts(twin, Engine::Vector) - readouts(beta1, Engine::Vector),
        "{what}"
    );
}

#[test]
fn matmul_07_twins_are_their_beta1_twins() {
    use nki_kernels::matmul::{Blocking, MatmulKernel, TUTORIAL_BENCHMARK_KMN};
    let stages = [
        (MatmulKernel::Tiled, (384, 256, 1024)),
        (MatmulKernel::HoistLoad, (384, 256, 1024)),
        (
            MatmulKernel::BlockFreeDimension(Blocking::new(2, 2, 1)),
            (256, 512, 2048),
        ),
        (
            MatmulKernel::FullyOptimized(Blocking::new(2, 1, 2)),
            (512, 512, 1024),
        ),
    ];
    for (kernel, (k, m, n)) in stages {
        let what = format!("{kernel} [{k}, {m}] x [{k}, {n}]");
        let (lhs_t, rhs) = (bf16_input(k, m, 1), bf16_input(k, n, 2));
        let mut result = Hbm::<bf16>::zeros([m, n]);
        let p = kernel.run(beta1(1, Mode::Simulate), &lhs_t, &rhs, &mut result);
        let launch = Launch::new(1).target(TARGET).mode(Mode::Simulate);
        let (twin, report) = kernel.run_07(launch, &lhs_t, &rhs).unwrap();
        same_values(&what, &result, &twin);
        let (p, t) = (p.unwrap().profile.unwrap(), report.profile.unwrap());
        same_instructions_but_readouts(&what, &p, &t);
    }
    // At the tutorial's benchmark shape every stage is bound by TensorE or DMA, which the
    // read-out engine does not touch: the same modelled latency on trn1 and trn2.
    let (k, m, n) = TUTORIAL_BENCHMARK_KMN;
    let (lhs_t, rhs) = (
        Hbm::<bf16>::shape_only([k, m]),
        Hbm::<bf16>::shape_only([k, n]),
    );
    let mut result = Hbm::<bf16>::shape_only([m, n]);
    for kernel in MatmulKernel::TUTORIAL {
        for target in [Target::Trn1, Target::Trn2] {
            let p = kernel.estimate(target, &lhs_t, &rhs, &mut result).unwrap();
            let t = kernel.estimate_07(target, &lhs_t, &rhs).unwrap();
            same_timeline(&format!("{kernel} on {target}"), &p, &t);
        }
    }
}

#[test]
fn layernorm_07_twins_are_their_beta1_twins() {
    use nki_kernels::layernorm::{layernorm_v1, layernorm_v1_07, layernorm_v2, layernorm_v2_07};
    // The tutorial's [300, 1000] (a partial last row tile, a partial last bn_stats piece).
    let (rows, d) = (300, 1000);
    let x = f32_input(rows, d, 1);
    let vector = |seed| Hbm::from_vec(&[d], random_range(d, -4.0, 4.0, seed)).unwrap();
    let (g, b) = (vector(2), vector(3));
    let mut out = Hbm::<f32>::zeros([rows, d]);
    let p = layernorm_v1::simulate(1, TARGET, &x, &g, &b, &mut out).unwrap();
    let twin = layernorm_v1_07::simulate(1, TARGET, &x, &g, &b).unwrap();
    same_values("layernorm_v1 [300, 1000]", &out, &twin.0);
    same_timeline("layernorm_v1 [300, 1000]", &p, &twin.1);
    let p = layernorm_v2::simulate(1, TARGET, &x, &g, &b, &mut out).unwrap();
    let twin = layernorm_v2_07::simulate(1, TARGET, &x, &g, &b).unwrap();
    same_values("layernorm_v2 [300, 1000]", &out, &twin.0);
    same_timeline("layernorm_v2 [300, 1000]", &p, &twin.1);
    // The torch driver's shape, modelled on both targets.
    let (rows, d) = (4096, 8192);
    let (x, v) = (
        Hbm::<f32>::shape_only([rows, d]),
        Hbm::<f32>::shape_only([d]),
    );
    let mut out = Hbm::<f32>::shape_only([rows, d]);
    for target in [Target::Trn1, Target::Trn2] {
        let what = format!("layernorm [{rows}, {d}] on {target}");
        let p = layernorm_v1::estimate(1, target, &x, &v, &v, &mut out).unwrap();
        let (_, twin) = layernorm_v1_07::estimate(1, target, &x, &v, &v).unwrap();
        same_timeline(&format!("{what} v1"), &p, &twin);
        let p = layernorm_v2::estimate(1, target, &x, &v, &v, &mut out).unwrap();
        let (_, twin) = layernorm_v2_07::estimate(1, target, &x, &v, &v).unwrap();
        same_timeline(&format!("{what} v2"), &p, &twin);
    }
}

#[test]
fn rmsnorm_qkv_07_is_its_beta1_twin() {
    use nki_kernels::rmsnorm_qkv::{rmsnorm_qkv, rmsnorm_qkv_07};
    // The samples' bf16 case (a full row tile), and one with a partial last row tile and a
    // partial last PSUM bank.
    for (s, d, dh) in [(512, 1024, 384), (200, 256, 640)] {
        let what = format!("rmsnorm_qkv [1, {s}, {d}] @ [{d}, {dh}]");
        let v = random_range(s * d, 0.0, 1.0, 1);
        let x = Hbm::from_vec(&[1, s, d], v.into_iter().map(bf16::from_f32).collect()).unwrap();
        let w = bf16_input(d, dh, 2);
        let mut out = Hbm::<bf16>::zeros([1, s, dh]);
        let p = rmsnorm_qkv::simulate(1, TARGET, &x, &w, &mut out).unwrap();
        let twin = rmsnorm_qkv_07::simulate(1, TARGET, &x, &w).unwrap();
        same_values(&what, &out, &twin.0);
        same_timeline(&what, &p, &twin.1);
    }
    // The example's modelled shape on both targets.
    let (s, d, dh) = (1024, 8192, 512);
    let (x, w) = (
        Hbm::<bf16>::shape_only([1, s, d]),
        Hbm::<bf16>::shape_only([d, dh]),
    );
    let mut out = Hbm::<bf16>::shape_only([1, s, dh]);
    for target in [Target::Trn1, Target::Trn2] {
        let p = rmsnorm_qkv::estimate(1, target, &x, &w, &mut out).unwrap();
        let (_, twin) = rmsnorm_qkv_07::estimate(1, target, &x, &w).unwrap();
        same_timeline(&format!("rmsnorm_qkv [1, {s}, {d}] on {target}"), &p, &twin);
    }
}

#[test]
fn flash_attention_fwd_07_is_its_beta1_twin() {
    use nki_kernels::flash_attention::{flash_attention_fwd, flash_attention_fwd_07};
    // The example's checked case: four query heads over two key/value heads.
    let (b, h, hkv, d, s) = (1, 4, 2, 64, 512);
    let input = |heads: usize, shape: [usize; 2], seed| {
        let v = random_range(b * heads * d * s, -1.0, 1.0, seed);
        Hbm::<f32>::from_vec(&[b, heads, shape[0], shape[1]], v).unwrap()
    };
    let (q, k, v) = (
        input(h, [d, s], 1),
        input(hkv, [d, s], 2),
        input(hkv, [s, d], 3),
    );
    let scale = 1.0 / (d as f32).sqrt();
    let mut out = Hbm::<f32>::zeros([b, h, s, d]);
    let mut lse = Hbm::<f32>::zeros([b, h, 128, s / 128]);
    let what = "flash_attention_fwd [1, 4, 64, 512]";
    let launch = beta1([b, h], Mode::Simulate);
    let p = flash_attention_fwd::run(launch, &q, &k, &v, &mut out, &mut lse, scale).unwrap();
    let ((out_07, lse_07), twin) =
        flash_attention_fwd_07::simulate(1, TARGET, &q, &k, &v, scale).unwrap();
    same_values(&format!("{what} out"), &out, &out_07);
    same_values(&format!("{what} lse"), &lse, &lse_07);
    same_timeline(what, &p.profile.unwrap(), &twin);
    // The samples' [1, 1, 128, 4096] and the GQA case, modelled on both targets.
    for (h, hkv) in [(1, 1), (6, 3)] {
        let (d, s) = (128, 4096);
        let q = Hbm::<f32>::shape_only([1, h, d, s]);
        let k = Hbm::<f32>::shape_only([1, hkv, d, s]);
        let v = Hbm::<f32>::shape_only([1, hkv, s, d]);
        let mut out = Hbm::<f32>::shape_only([1, h, s, d]);
        let mut lse = Hbm::<f32>::shape_only([1, h, 128, s / 128]);
        for target in [Target::Trn1, Target::Trn2] {
            let (o, l) = (&mut out, &mut lse);
            let p = flash_attention_fwd::estimate([1, h], target, &q, &k, &v, o, l, scale).unwrap();
            let (_, twin) = flash_attention_fwd_07::estimate(1, target, &q, &k, &v, scale).unwrap();
            same_timeline(&format!("[1, {h}, {d}, {s}] on {target}"), &p, &twin);
        }
    }
}

#[test]
fn rotary_07_is_its_beta1_twin() {
    use nki_kernels::rotary::{rotary, rotary_07};
    // The example's second checked shape, and one with a partial last sequence tile.
    for [b, h, s, d] in [[2, 16, 256, 128], [1, 3, 200, 64]] {
        let what = format!("rotary [{b}, {h}, {s}, {d}]");
        let v = random_range(b * h * s * d, -1.0, 1.0, 1);
        let x = Hbm::<f32>::from_vec(&[b, h, s, d], v).unwrap();
        let (cos, sin) = (f32_input(s, d, 2), f32_input(s, d, 3));
        let mut out = Hbm::<f32>::zeros([b, h, s, d]);
        let p = rotary::simulate(1, TARGET, &x, &cos, &sin, &mut out).unwrap();
        let twin = rotary_07::simulate(1, TARGET, &x, &cos, &sin).unwrap();
        same_values(&what, &out, &twin.0);
        same_timeline(&what, &p, &twin.1);
    }
    // The example's large modelled shape on both targets. (cos and sin are two tensors: passed
    // one tensor twice, the Beta-1 compiler stage drops the second, duplicate load of each
    // tile, which 0.7's compiler does not.)
    let [b, h, s, d] = [8, 32, 512, 128];
    let x = Hbm::<f32>::shape_only([b, h, s, d]);
    let (cos, sin) = (
        Hbm::<f32>::shape_only([s, d]),
        Hbm::<f32>::shape_only([s, d]),
    );
    let mut out = Hbm::<f32>::shape_only([b, h, s, d]);
    for target in [Target::Trn1, Target::Trn2] {
        let p = rotary::estimate(1, target, &x, &cos, &sin, &mut out).unwrap();
        let (_, twin) = rotary_07::estimate(1, target, &x, &cos, &sin).unwrap();
        same_timeline(
            &format!("rotary [{b}, {h}, {s}, {d}] on {target}"),
            &p,
            &twin,
        );
    }
}

#[test]
fn adaptive_avg_pool2d_07_is_its_beta1_twin() {
    use nki_kernels::adaptive_avg_pool2d::{adaptive_avg_pool2d, adaptive_avg_pool2d_07};
    // Overlapping windows of two sizes past a tile of channels, and one window of 220 rows
    // loaded in three chunks (a 16 Ki-element chunk holds 102 rows of 160).
    for ([n, c, h, w], [oh, ow]) in [([2, 130, 9, 7], [4, 3]), ([1, 3, 220, 160], [1, 2])] {
        let what = format!("adaptive_avg_pool2d [{n}, {c}, {h}, {w}] -> {oh} x {ow}");
        let v = random_range(n * c * h * w, -4.0, 4.0, 5);
        let input = Hbm::<f32>::from_vec(&[n, c, h, w], v).unwrap();
        let mut out = Hbm::<f32>::zeros([n, c, oh, ow]);
        let p = adaptive_avg_pool2d::simulate(1, TARGET, &input, &mut out).unwrap();
        let twin = adaptive_avg_pool2d_07::simulate(1, TARGET, &input, oh, ow).unwrap();
        same_values(&what, &out, &twin.0);
        same_timeline(&what, &p, &twin.1);
    }
    // The example's modelled shapes on both targets.
    for ([n, c, h, w], o) in [([1, 64, 56, 56], 7), ([2, 64, 256, 256], 1)] {
        let input = Hbm::<f32>::shape_only([n, c, h, w]);
        let mut out = Hbm::<f32>::shape_only([n, c, o, o]);
        for target in [Target::Trn1, Target::Trn2] {
            let what = format!("adaptive_avg_pool2d [{n}, {c}, {h}, {w}] -> {o} on {target}");
            let p = adaptive_avg_pool2d::estimate(1, target, &input, &mut out).unwrap();
            let (_, twin) = adaptive_avg_pool2d_07::estimate(1, target, &input, o, o).unwrap();
            same_timeline(&what, &p, &twin);
        }
    }
}

#[test]
fn sd_attention_07_twins_are_their_beta1_twins() {
    use nki_kernels::sd_attention::{
        sd_attention_v1, sd_attention_v1_07, sd_attention_v2, sd_attention_v2_07, SD_SCALE,
    };
    let (s, d) = (512, 64);
    let (q, k, v) = (f32_input(s, d, 1), f32_input(s, d, 2), f32_input(s, d, 3));
    let mut out = Hbm::<f32>::zeros([s, d]);
    let what = "sd_attention [512, 64]";
    let p = sd_attention_v1::simulate(1, TARGET, &q, &k, &v, &mut out, SD_SCALE).unwrap();
    let twin = sd_attention_v1_07::simulate(1, TARGET, &q, &k, &v, SD_SCALE).unwrap();
    same_values(&format!("{what} v1"), &out, &twin.0);
    same_timeline(&format!("{what} v1"), &p, &twin.1);
    let p = sd_attention_v2::simulate(1, TARGET, &q, &k, &v, &mut out, SD_SCALE).unwrap();
    let twin = sd_attention_v2_07::simulate(1, TARGET, &q, &k, &v, SD_SCALE).unwrap();
    same_values(&format!("{what} v2"), &out, &twin.0);
    same_timeline(&format!("{what} v2"), &p, &twin.1);
    // The example's modelled [4096, 64] on both targets.
    let qkv = [0, 1, 2].map(|_| Hbm::<f32>::shape_only([4096, 64]));
    let [q, k, v] = &qkv;
    let mut out = Hbm::<f32>::shape_only([4096, 64]);
    for target in [Target::Trn1, Target::Trn2] {
        let what = format!("sd_attention [4096, 64] on {target}");
        let p = sd_attention_v1::estimate(1, target, q, k, v, &mut out, SD_SCALE).unwrap();
        let (_, twin) = sd_attention_v1_07::estimate(1, target, q, k, v, SD_SCALE).unwrap();
        same_timeline(&format!("{what} v1"), &p, &twin);
        let p = sd_attention_v2::estimate(1, target, q, k, v, &mut out, SD_SCALE).unwrap();
        let (_, twin) = sd_attention_v2_07::estimate(1, target, q, k, v, SD_SCALE).unwrap();
        same_timeline(&format!("{what} v2"), &p, &twin);
    }
}

#[test]
fn mamba_07_twins_are_their_beta1_twins() {
    use nki_kernels::mamba::{mamba_v1, mamba_v1_07, mamba_v2, mamba_v2_07};
    // Two batches, channels past one tile (a partial second tile), four states.
    let (batch, chans, len, states) = (2, 200, 64, 4);
    let input = |shape: &[usize], lo, hi, seed| {
        let v = random_range(shape.iter().product(), lo, hi, seed);
        Hbm::<f32>::from_vec(shape, v).unwrap()
    };
    let delta = input(&[batch, chans, len], 0.0, 0.1, 1);
    let u = input(&[batch, chans, len], -1.0, 1.0, 2);
    let a = input(&[chans, states], -1.0, 0.0, 3);
    let (bm, cm) = (
        input(&[batch, states, len], -1.0, 1.0, 4),
        input(&[batch, states, len], -1.0, 1.0, 5),
    );
    let mut out = Hbm::<f32>::zeros([batch, chans, len]);
    let what = "mamba [2, 200, 64] x 4 states";
    let p = mamba_v1::simulate(1, TARGET, &delta, &u, &a, &bm, &cm, &mut out).unwrap();
    let twin = mamba_v1_07::simulate(1, TARGET, &delta, &u, &a, &bm, &cm).unwrap();
    same_values(&format!("{what} v1"), &out, &twin.0);
    same_timeline(&format!("{what} v1"), &p, &twin.1);
    let p = mamba_v2::simulate(1, TARGET, &delta, &u, &a, &bm, &cm, &mut out).unwrap();
    let twin = mamba_v2_07::simulate(1, TARGET, &delta, &u, &a, &bm, &cm).unwrap();
    same_values(&format!("{what} v2"), &out, &twin.0);
    same_timeline(&format!("{what} v2"), &p, &twin.1);
    // The example's [1, 256, 2048] x 16 states on both targets (five distinct inputs).
    let (chans, len, states) = (256, 2048, 16);
    let s3 = |d1| Hbm::<f32>::shape_only([1, d1, len]);
    let (d, u, b, c) = (s3(chans), s3(chans), s3(states), s3(states));
    let a = Hbm::<f32>::shape_only([chans, states]);
    let mut out = s3(chans);
    for target in [Target::Trn1, Target::Trn2] {
        let what = format!("mamba [1, {chans}, {len}] x {states} on {target}");
        let p = mamba_v1::estimate(1, target, &d, &u, &a, &b, &c, &mut out).unwrap();
        let (_, twin) = mamba_v1_07::estimate(1, target, &d, &u, &a, &b, &c).unwrap();
        same_timeline(&format!("{what} v1"), &p, &twin);
        let p = mamba_v2::estimate(1, target, &d, &u, &a, &b, &c, &mut out).unwrap();
        let (_, twin) = mamba_v2_07::estimate(1, target, &d, &u, &a, &b, &c).unwrap();
        same_timeline(&format!("{what} v2"), &p, &twin);
    }
}
