//! Meshes: device ids and axes, sharding round trips, remote copies with semaphores, every
//! collective and algorithm against an ndarray reference, and the modelled time of a ring
//! all-gather against the link model's closed form.

mod common;

use common::Rng;
use half::bf16;
use ndarray::{concatenate, s, Array2, ArrayD, Axis};
use nki_core::mesh::link_spec;
use nki_core::mesh::{self, Algorithm, Mesh, MeshLaunch, PartitionSpec, ReplicaGroups, ShardedHbm};
use nki_core::nl;
use nki_core::prelude::*;
use nki_core::DType;

const ALGORITHMS: [Algorithm; 3] = [
    Algorithm::Ring,
    Algorithm::RecursiveDoubling,
    Algorithm::Direct,
];

fn random(rows: usize, cols: usize, seed: u64) -> Array2<f32> {
    Array2::from_shape_vec((rows, cols), Rng(seed).vec(rows * cols, -1.0, 1.0)).unwrap()
}

fn p(dims: [Option<&str>; 2]) -> PartitionSpec {
    PartitionSpec::new(dims)
}

fn assert_close(got: &ArrayD<f32>, want: &Array2<f32>, tol: f32) {
    assert_eq!(got.shape(), want.shape());
    for (g, w) in got.iter().zip(want.iter()) {
        assert!((g - w).abs() <= tol * (1.0 + w.abs()), "got {g}, want {w}");
    }
}

/// The shards of `a` (split along axis 0 into `n`), as separate arrays.
fn blocks(a: &Array2<f32>, n: usize) -> Vec<Array2<f32>> {
    let r = a.nrows() / n;
    (0..n)
        .map(|i| a.slice(s![i * r..(i + 1) * r, ..]).to_owned())
        .collect()
}

#[test]
fn device_ids_and_axes_inside_the_kernel() {
    let m = Mesh::new([2, 3], ["x", "y"]).unwrap();
    let out =
        ShardedHbm::<f32>::zeros(&m, &[6, 3], PartitionSpec::multi(&[&["x", "y"], &[]])).unwrap();
    MeshLaunch::new(&m)
        .run(|| {
            let o = out.local_out();
            let vals = [
                mesh::device_id(),
                mesh::axis_index("x") * 10 + mesh::axis_index("y"),
                mesh::axis_size("x") * 10 + mesh::axis_size("y"),
            ];
            for (j, v) in vals.iter().enumerate() {
                let t = nl::full(&[1, 1], *v as f32, DType::F32, MemKind::Sbuf);
                nl::store(o.slice((0..1, j..j + 1)), &t);
            }
        })
        .unwrap();
    let a = out.to_array().unwrap();
    for d in 0..6 {
        let row = [d as f32, ((d / 3) * 10 + d % 3) as f32, 23.0];
        assert_eq!(a.slice(s![d, ..]).to_vec(), row);
    }
}

#[test]
fn every_device_runs_its_own_grid_on_its_shard() {
    // out = 2 * x, with a [2] grid per device over the rows of each shard.
    let m = Mesh::new([2, 2], ["x", "y"]).unwrap();
    let a = random(8, 6, 1);
    let x = ShardedHbm::from_array(&m, &a, p([Some("x"), Some("y")])).unwrap();
    let out = ShardedHbm::<f32>::zeros(&m, &[8, 6], p([Some("x"), Some("y")])).unwrap();
    MeshLaunch::new(&m)
        .grid(2)
        .run(|| {
            let i = nl::program_id(0) * 2;
            let t = nl::load(x.local().slice((i..i + 2, ..)));
            let y = nl::add(&t, &t);
            nl::store(out.local_out().slice((i..i + 2, ..)), &y);
        })
        .unwrap();
    assert_close(&out.to_array().unwrap(), &(&a * 2.0), 0.0);
}

#[test]
fn hand_written_ring_all_gather_with_remote_copies() {
    // The seed's kernel (b): every device forwards along the ring what it received last.
    let m = Mesh::new([4], ["x"]).unwrap();
    let a = random(16, 8, 2);
    let x = ShardedHbm::from_array(&m, &a, p([Some("x"), None])).unwrap();
    let out = ShardedHbm::<f32>::zeros(&m, &[16, 8], PartitionSpec::replicated(2)).unwrap();
    MeshLaunch::new(&m)
        .run(|| {
            let (me, n) = (mesh::axis_index("x"), mesh::axis_size("x"));
            let right = (me + 1) % n;
            let local = mesh::semaphore("local");
            let send = mesh::semaphore("send");
            let recv = mesh::semaphore("recv");
            let rows = |i: usize| out.view().slice((i * 4..i * 4 + 4, ..));
            let c = mesh::async_copy(x.view(), &rows(me), &local);
            c.start();
            c.wait();
            for step in 0..n - 1 {
                let b = rows((me + n - step) % n);
                let copy = mesh::remote_copy(&b, &b.on(right), &send, &recv);
                copy.start();
                copy.wait();
            }
            mesh::barrier(&ReplicaGroups::along(out.mesh(), &["x"]).unwrap());
        })
        .unwrap();
    assert_close(&out.to_array().unwrap(), &a, 0.0);
}

#[test]
fn semaphores_signal_across_devices() {
    let m = Mesh::new([3], ["x"]).unwrap();
    let out = ShardedHbm::<f32>::zeros(&m, &[3, 1], p([Some("x"), None])).unwrap();
    MeshLaunch::new(&m)
        .run(|| {
            let sem = mesh::semaphore("token");
            let me = mesh::device_id();
            // A token passes 0 -> 1 -> 2; each device records its turn.
            if me > 0 {
                sem.wait(1);
            }
            let t = nl::full(&[1, 1], me as f32, DType::F32, MemKind::Sbuf);
            nl::store(out.local_out().view(), &t);
            if me + 1 < 3 {
                sem.signal_device(me + 1, 1);
            }
            assert_eq!(sem.value(), 0);
        })
        .unwrap();
    assert_eq!(
        out.to_array().unwrap().into_raw_vec_and_offset().0,
        vec![0.0, 1.0, 2.0]
    );
}

/// Runs one collective on `m` with `groups` along `axes`.
fn run(m: &Mesh, kernel: impl Fn() + Sync) {
    MeshLaunch::new(m).run(kernel).unwrap();
}

#[test]
fn all_gather_every_algorithm_along_both_dims() {
    let m = Mesh::new([4], ["x"]).unwrap();
    let g = ReplicaGroups::along(&m, &["x"]).unwrap();
    let a = random(8, 12, 3);
    for alg in ALGORITHMS {
        let x = ShardedHbm::from_array(&m, &a, p([Some("x"), None])).unwrap();
        let out = ShardedHbm::<f32>::zeros(&m, &[8, 12], PartitionSpec::replicated(2)).unwrap();
        run(&m, || mesh::all_gather(x.view(), out.view(), 0, &g, alg));
        assert_close(&out.to_array().unwrap(), &a, 0.0);
        let x = ShardedHbm::from_array(&m, &a, p([None, Some("x")])).unwrap();
        let out = ShardedHbm::<f32>::zeros(&m, &[8, 12], PartitionSpec::replicated(2)).unwrap();
        run(&m, || mesh::all_gather(x.view(), out.view(), 1, &g, alg));
        assert_close(&out.to_array().unwrap(), &a, 0.0);
    }
}

#[test]
fn all_gather_over_one_axis_of_a_2x2_mesh() {
    let m = Mesh::new([2, 2], ["x", "y"]).unwrap();
    let a = random(4, 8, 4);
    let x = ShardedHbm::from_array(&m, &a, p([Some("x"), Some("y")])).unwrap();
    let out = ShardedHbm::<f32>::zeros(&m, &[4, 8], p([Some("x"), None])).unwrap();
    let g = ReplicaGroups::along(&m, &["y"]).unwrap();
    for alg in ALGORITHMS {
        run(&m, || mesh::all_gather(x.view(), out.view(), 1, &g, alg));
        assert_close(&out.to_array().unwrap(), &a, 0.0);
    }
}

#[test]
fn reduce_scatter_and_all_reduce_every_algorithm() {
    let m = Mesh::new([4], ["x"]).unwrap();
    let g = ReplicaGroups::along(&m, &["x"]).unwrap();
    // Each device holds a different [8, 6] buffer: rows 8d..8d+8 of a [32, 6] array.
    let a = random(32, 6, 5);
    let sum = blocks(&a, 4)
        .into_iter()
        .fold(Array2::zeros((8, 6)), |s, b| s + b);
    for alg in ALGORITHMS {
        let x = ShardedHbm::from_array(&m, &a, p([Some("x"), None])).unwrap();
        let rs = ShardedHbm::<f32>::zeros(&m, &[8, 6], p([Some("x"), None])).unwrap();
        run(&m, || mesh::reduce_scatter(x.view(), rs.view(), 0, &g, alg));
        assert_close(&rs.to_array().unwrap(), &sum, 1e-6);
        let ar = ShardedHbm::<f32>::zeros(&m, &[8, 6], PartitionSpec::replicated(2)).unwrap();
        run(&m, || mesh::all_reduce(x.view(), ar.view(), &g, alg));
        assert_close(&ar.to_array().unwrap(), &sum, 1e-6);
    }
}

#[test]
fn reductions_accumulate_in_f32_and_round_once() {
    // bf16 inputs whose bf16 partial sums would lose the small terms: 256 + 1 + 1 + 1 - 256.
    let m = Mesh::new([4], ["x"]).unwrap();
    let g = ReplicaGroups::along(&m, &["x"]).unwrap();
    let vals = [256.0f32, 1.0, 1.0, -256.0];
    // Rows 4d..4d+4 hold device d's value.
    let a = Array2::from_shape_fn((16, 2), |(i, _)| bf16::from_f32(vals[i / 4]));
    for alg in ALGORITHMS {
        let x = ShardedHbm::from_array(&m, &a, p([Some("x"), None])).unwrap();
        let ar = ShardedHbm::<bf16>::zeros(&m, &[4, 2], PartitionSpec::replicated(2)).unwrap();
        run(&m, || mesh::all_reduce(x.view(), ar.view(), &g, alg));
        for v in ar.to_array().unwrap().iter() {
            assert_eq!(v.to_f32(), 2.0, "{alg}");
        }
    }
}

#[test]
fn all_to_all_and_permute() {
    let m = Mesh::new([4], ["x"]).unwrap();
    let g = ReplicaGroups::along(&m, &["x"]).unwrap();
    let a = random(32, 3, 6);
    let shards = blocks(&a, 4);
    // Block j of device i lands as block i of device j.
    let want: Vec<Array2<f32>> = (0..4)
        .map(|j| {
            let parts: Vec<_> = (0..4).map(|i| blocks(&shards[i], 4)[j].clone()).collect();
            let views: Vec<_> = parts.iter().map(|p| p.view()).collect();
            concatenate(Axis(0), &views).unwrap()
        })
        .collect();
    for alg in [Algorithm::Ring, Algorithm::Direct] {
        let x = ShardedHbm::from_array(&m, &a, p([Some("x"), None])).unwrap();
        let out = ShardedHbm::<f32>::zeros(&m, &[32, 3], p([Some("x"), None])).unwrap();
        run(&m, || mesh::all_to_all(x.view(), out.view(), 0, &g, alg));
        for (j, w) in want.iter().enumerate() {
            assert_close(&out.shard(j).unwrap(), w, 0.0);
        }
    }
    let x = ShardedHbm::from_array(&m, &a, p([Some("x"), None])).unwrap();
    let out = ShardedHbm::<f32>::zeros(&m, &[32, 3], p([Some("x"), None])).unwrap();
    run(&m, || {
        mesh::collective_permute(x.view(), out.view(), &[(0, 1), (1, 2), (2, 3), (3, 0)], &g)
    });
    for j in 0..4 {
        assert_close(&out.shard(j).unwrap(), &shards[(j + 3) % 4], 0.0);
    }
}

#[test]
fn ring_all_gather_time_matches_the_link_model_closed_form() {
    // 8 trn2 devices = 2 chips of 4: the ring crosses chip 0 -> chip 1 and back. After the
    // collective's fixed cost and the local copy the ring takes (r - 1) transfers at the
    // collective rings' bandwidth (below the chip link's on trn2, so every step streams at
    // one rate); each of the two chip crossings (3 -> 4, 7 -> 0) delays the chain of steps by
    // one hop latency; the launch pays its pre/postamble once.
    let m = Mesh::new([8], ["x"]).unwrap();
    let g = ReplicaGroups::along(&m, &["x"]).unwrap();
    let shard_rows = 512; // 512 x 1024 bf16 = 1 MiB per device
    let x =
        ShardedHbm::<bf16>::shape_only(&m, &[8 * shard_rows, 1024], p([Some("x"), None])).unwrap();
    let out =
        ShardedHbm::<bf16>::shape_only(&m, &[8 * shard_rows, 1024], PartitionSpec::replicated(2))
            .unwrap();
    let report = MeshLaunch::new(&m)
        .target(Target::Trn2)
        .mode(Mode::Estimate)
        .run(|| mesh::all_gather(x.view(), out.view(), 0, &g, Algorithm::Ring))
        .unwrap();
    let l = link_spec(Target::Trn2);
    let bytes = (shard_rows * 1024 * 2) as f64;
    let cc = l.dma_gbps * l.collective_dma_fraction;
    let overhead = Target::Trn2.spec().launch_overhead_ns;
    let local = l.dma_fixed_ns + bytes / cc;
    let want = l.collective_fixed_ns
        + local
        + 7.0 * (l.dma_fixed_ns + bytes / l.link_gbps.min(cc))
        + 2.0 * l.hop_ns
        + overhead;
    assert!(
        (report.latency_ns - want).abs() < 1e-6 * want,
        "modelled {} ns, closed form {want} ns",
        report.latency_ns
    );
    // On one chip (4 devices) every step is a DMA-bandwidth copy.
    let m4 = Mesh::new([4], ["x"]).unwrap();
    let g4 = ReplicaGroups::along(&m4, &["x"]).unwrap();
    let x =
        ShardedHbm::<bf16>::shape_only(&m4, &[4 * shard_rows, 1024], p([Some("x"), None])).unwrap();
    let out =
        ShardedHbm::<bf16>::shape_only(&m4, &[4 * shard_rows, 1024], PartitionSpec::replicated(2))
            .unwrap();
    let r4 = MeshLaunch::new(&m4)
        .mode(Mode::Estimate)
        .run(|| mesh::all_gather(x.view(), out.view(), 0, &g4, Algorithm::Ring))
        .unwrap();
    let want4 = l.collective_fixed_ns + 4.0 * local + overhead;
    assert!((r4.latency_ns - want4).abs() < 1e-6 * r4.latency_ns);
    // nccom-test's bus bandwidth: algbw x (r-1)/r, algbw = output bytes / time.
    let c = &report.collectives[0];
    assert_eq!((c.name, c.ranks), ("all_gather", 8));
    assert_eq!(c.bytes, 8 * bytes as u64);
    let algbw = c.bytes as f64 / c.time_ns * 1e9 / (1u64 << 30) as f64;
    assert!((c.algbw_gib_s - algbw).abs() < 1e-9);
    assert!((c.busbw_gib_s - algbw * 7.0 / 8.0).abs() < 1e-9);
}

#[test]
fn trace_has_a_process_per_device() {
    let m = Mesh::new([2, 2], ["x", "y"]).unwrap();
    let g = ReplicaGroups::along(&m, &["y"]).unwrap();
    let a = random(256, 512, 7);
    let x = ShardedHbm::from_array(&m, &a, p([Some("x"), Some("y")])).unwrap();
    let out = ShardedHbm::<f32>::zeros(&m, &[256, 512], p([Some("x"), None])).unwrap();
    let sq = ShardedHbm::<f32>::zeros(&m, &[256, 512], p([Some("x"), Some("y")])).unwrap();
    let report = MeshLaunch::new(&m)
        .mode(Mode::Simulate)
        .run(|| {
            let t = nl::load(x.local().slice((0..128, ..)));
            let t2 = nl::multiply(&t, &t);
            nl::store(sq.local_out().slice((0..128, ..)), &t2);
            mesh::all_gather(x.view(), out.view(), 1, &g, Algorithm::Ring);
        })
        .unwrap();
    let mut buf = Vec::new();
    report.write_trace(&mut buf).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&buf).unwrap();
    let events = v["traceEvents"].as_array().unwrap();
    let procs: std::collections::BTreeSet<u64> = events
        .iter()
        .filter(|e| e["name"] == "process_name")
        .map(|e| e["pid"].as_u64().unwrap())
        .collect();
    assert_eq!(procs.len(), 4);
    assert!(events.iter().any(|e| e["name"] == "TENSOR_TENSOR"));
    assert!(events.iter().any(|e| e["name"] == "all_gather"));
    assert!(report
        .devices
        .iter()
        .all(|d| d.compute_ns > 0.0 && d.end_ns > d.compute_ns));
}

#[test]
fn modelled_times_do_not_depend_on_thread_interleaving() {
    // Direct all-gathers over-subscribe the links, so transfers contend; the replay books
    // them in modelled-time order, whatever order the device threads ran in.
    let m = Mesh::new([16], ["x"]).unwrap();
    let g = ReplicaGroups::along(&m, &["x"]).unwrap();
    let x = ShardedHbm::<bf16>::shape_only(&m, &[16 * 64, 512], p([Some("x"), None])).unwrap();
    let out =
        ShardedHbm::<bf16>::shape_only(&m, &[16 * 64, 512], PartitionSpec::replicated(2)).unwrap();
    let times: Vec<Vec<f64>> = (0..4)
        .map(|_| {
            let r = MeshLaunch::new(&m)
                .mode(Mode::Estimate)
                .run(|| mesh::all_gather(x.view(), out.view(), 0, &g, Algorithm::Direct))
                .unwrap();
            r.devices.iter().map(|d| d.end_ns).collect()
        })
        .collect();
    assert!(times.iter().all(|t| t == &times[0]), "{times:?}");
    assert!(
        times[0].iter().any(|&t| t != times[0][0]),
        "devices on different chips differ"
    );
}

#[test]
fn sixty_four_devices_in_one_process() {
    // An 8x8 mesh (16 trn2 chips): a 1 MiB-per-device ring all-gather over all 64 devices,
    // shapes only. 63 steps, each at least one DMA start and one 1 MiB transfer.
    let m = Mesh::new([8, 8], ["x", "y"]).unwrap();
    let all = ReplicaGroups::all(&m);
    let spec = PartitionSpec::multi(&[&["x", "y"], &[]]);
    let x = ShardedHbm::<bf16>::shape_only(&m, &[64 * 512, 1024], spec).unwrap();
    let out = ShardedHbm::<bf16>::shape_only(&m, &[64 * 512, 1024], PartitionSpec::replicated(2))
        .unwrap();
    let r = MeshLaunch::new(&m)
        .mode(Mode::Estimate)
        .engine_spans(false)
        .run(|| mesh::all_gather(x.view(), out.view(), 0, &all, Algorithm::Ring))
        .unwrap();
    let l = link_spec(Target::Trn2);
    let step = l.dma_fixed_ns + (1 << 20) as f64 / l.link_gbps;
    assert_eq!(r.devices.len(), 64);
    assert!(
        r.latency_ns >= 63.0 * step,
        "{} < {}",
        r.latency_ns,
        63.0 * step
    );
    assert_eq!(r.collectives.len(), 1);
    assert_eq!(r.collectives[0].bytes, 64 << 20);
}

#[test]
fn collectives_on_sbuf_tiles() {
    // Each device loads its [32, 16] shard into SBUF, all-reduces it tile to tile and
    // all-gathers it along the free dimension, then stores both results.
    let m = Mesh::new([4], ["x"]).unwrap();
    let g = ReplicaGroups::along(&m, &["x"]).unwrap();
    let a = random(128, 16, 8);
    let x = ShardedHbm::from_array(&m, &a, p([Some("x"), None])).unwrap();
    let sum = ShardedHbm::<f32>::zeros(&m, &[32, 16], PartitionSpec::replicated(2)).unwrap();
    let cat = ShardedHbm::<f32>::zeros(&m, &[32, 64], PartitionSpec::replicated(2)).unwrap();
    for alg in ALGORITHMS {
        run(&m, || {
            let t = nl::load(x.local().view());
            let r = nl::ndarray(&[32, 16], DType::F32, MemKind::Sbuf);
            mesh::all_reduce(&t, &r, &g, alg);
            nl::store(sum.local_out().view(), &r);
            let wide = nl::ndarray(&[32, 64], DType::F32, MemKind::Sbuf);
            mesh::all_gather(&t, &wide, 1, &g, alg);
            nl::store(cat.local_out().view(), &wide);
        });
        let want_sum = blocks(&a, 4)
            .into_iter()
            .fold(Array2::zeros((32, 16)), |s, b| s + b);
        assert_close(&sum.to_array().unwrap(), &want_sum, 1e-6);
        let parts = blocks(&a, 4);
        let views: Vec<_> = parts.iter().map(|b| b.view()).collect();
        assert_close(
            &cat.to_array().unwrap(),
            &concatenate(Axis(1), &views).unwrap(),
            0.0,
        );
    }
}

#[test]
fn transfers_slow_the_dma_bound_kernel_code_they_overlap() {
    // Device 0 streams a [512, 2048] f32 tensor through SBUF (DMA-bound), with or without a
    // 4 MiB copy to device 1 in flight: the copy takes DMA time from the kernel segment.
    let m = Mesh::new([2], ["x"]).unwrap();
    let x = ShardedHbm::<f32>::shape_only(&m, &[1024, 2048], p([Some("x"), None])).unwrap();
    let y = ShardedHbm::<f32>::shape_only(&m, &[1024, 2048], p([Some("x"), None])).unwrap();
    let buf = ShardedHbm::<f32>::shape_only(&m, &[2048, 1024], p([Some("x"), None])).unwrap();
    // The copies read `src` and write `buf`: copying `buf` into the peer's `buf` while the peer
    // copies its `buf` into ours would be a race (each buffer read and written unordered).
    let src = ShardedHbm::<f32>::shape_only(&m, &[2048, 1024], p([Some("x"), None])).unwrap();
    let compute = |with_copy: bool| {
        let r = MeshLaunch::new(&m)
            .mode(Mode::Estimate)
            .run(|| {
                let (send, recv) = (mesh::semaphore("send"), mesh::semaphore("recv"));
                let me = mesh::device_id();
                let copy = mesh::remote_copy(src.view(), &buf.at(1 - me), &send, &recv);
                if with_copy {
                    copy.start();
                }
                for i in 0..4 {
                    let t = nl::load(x.local().slice((i * 128..(i + 1) * 128, ..)));
                    nl::store(y.local_out().slice((i * 128..(i + 1) * 128, ..)), &t);
                }
                if with_copy {
                    copy.wait();
                }
            })
            .unwrap();
        r.devices[0].compute_ns
    };
    let (alone, shared) = (compute(false), compute(true));
    assert!(shared > alone, "{shared} <= {alone}");
    assert!(shared < 2.0 * alone, "{shared} vs {alone}");
}

#[test]
fn remote_copy_from_an_sbuf_tile() {
    // Each device doubles its shard in SBUF and sends the tile to the next device's HBM.
    let m = Mesh::new([4], ["x"]).unwrap();
    let a = random(128, 8, 9);
    let x = ShardedHbm::from_array(&m, &a, p([Some("x"), None])).unwrap();
    let out = ShardedHbm::<f32>::zeros(&m, &[128, 8], p([Some("x"), None])).unwrap();
    run(&m, || {
        let (send, recv) = (mesh::semaphore("send"), mesh::semaphore("recv"));
        let t = nl::load(x.local().view());
        let twice = nl::add(&t, &t);
        let next = (mesh::device_id() + 1) % 4;
        let c = mesh::remote_copy(&twice, &out.at(next), &send, &recv);
        c.start();
        c.wait();
    });
    let shards = blocks(&a, 4);
    for j in 0..4 {
        assert_close(&out.shard(j).unwrap(), &(&shards[(j + 3) % 4] * 2.0), 0.0);
    }
}

#[test]
fn one_pre_postamble_per_launch_whatever_the_semaphore_calls() {
    // A kernel split into stretches by no-op signal/wait pairs on its own semaphore pays the
    // launch pre/postamble once (one span per device), not once per stretch: the three
    // pairs cost less than one pre/postamble in all (what they do cost: the stretches no
    // longer overlap each other's DMAs).
    let m = Mesh::new([2], ["x"]).unwrap();
    let x = ShardedHbm::<f32>::shape_only(&m, &[256, 512], p([Some("x"), None])).unwrap();
    let y = ShardedHbm::<f32>::shape_only(&m, &[256, 512], p([Some("x"), None])).unwrap();
    let latency = |pairs: usize| {
        MeshLaunch::new(&m)
            .target(Target::Trn2)
            .mode(Mode::Estimate)
            .run(|| {
                let sem = mesh::semaphore("noop");
                for i in 0..4 {
                    let t = nl::load(x.local().slice((i * 32..(i + 1) * 32, ..)));
                    nl::store(y.local_out().slice((i * 32..(i + 1) * 32, ..)), &t);
                    if i < pairs {
                        sem.signal(1);
                        sem.wait(1);
                    }
                }
            })
            .unwrap()
    };
    let (plain, split) = (latency(0), latency(3));
    let overhead = Target::Trn2.spec().launch_overhead_ns;
    assert!(plain.latency_ns > overhead, "{}", plain.latency_ns);
    assert!(
        (split.latency_ns - plain.latency_ns).abs() < overhead,
        "3 no-op signal/wait pairs moved the latency from {} to {} ns",
        plain.latency_ns,
        split.latency_ns
    );
    for d in &split.devices {
        let launches = d
            .spans
            .iter()
            .filter(|s| s.track == "pre/postamble")
            .count();
        assert_eq!(launches, 1, "device {}", d.device);
    }
}

#[test]
fn the_runtime_picks_mesh_for_small_messages_and_rdh_then_ring_for_large() {
    let m = Mesh::new([4], ["x"]).unwrap();
    let g = ReplicaGroups::all(&m);
    let pick = |rows: usize| {
        let x = ShardedHbm::<f32>::shape_only(&m, &[4 * rows, 1024], p([Some("x"), None])).unwrap();
        let y = ShardedHbm::<f32>::shape_only(&m, &[4 * rows, 1024], p([Some("x"), None])).unwrap();
        let r = MeshLaunch::new(&m)
            .target(Target::Trn1)
            .mode(Mode::Estimate)
            .run(|| mesh::all_reduce(x.view(), y.view(), &g, Algorithm::Runtime))
            .unwrap();
        r.collectives[0].algorithm.clone().unwrap()
    };
    // 4 KiB per row: 16 rows = 64 KiB, 1024 rows = 4 MiB, 16384 rows = 64 MiB.
    assert_eq!(pick(16), "direct");
    assert_eq!(pick(1024), "recursive-doubling");
    assert_eq!(pick(16 * 1024), "ring");
}

#[test]
fn reductions_are_priced_by_their_dtype_and_collectives_pay_a_fixed_cost() {
    // The same element count all-reduced in bf16 and in f32 (ring, 2 ranks on one trn1
    // chip): the bf16 reduction moves and reduces half the bytes.
    let m = Mesh::new([2], ["x"]).unwrap();
    let g = ReplicaGroups::all(&m);
    fn time<T: Element>(m: &Mesh, g: &ReplicaGroups) -> f64 {
        let x =
            ShardedHbm::<T>::shape_only(m, &[4096, 2048], PartitionSpec::new([Some("x"), None]))
                .unwrap();
        let y =
            ShardedHbm::<T>::shape_only(m, &[4096, 2048], PartitionSpec::new([Some("x"), None]))
                .unwrap();
        let r = MeshLaunch::new(m)
            .target(Target::Trn1)
            .mode(Mode::Estimate)
            .run(|| mesh::all_reduce(x.view(), y.view(), g, Algorithm::Ring))
            .unwrap();
        let reduce: f64 = r.devices[0]
            .spans
            .iter()
            .filter(|s| s.track == "DMA reductions")
            .map(|s| s.dur_ns)
            .sum();
        assert!(reduce > 0.0);
        reduce
    }
    let (f, b) = (time::<f32>(&m, &g), time::<bf16>(&m, &g));
    assert!((f / b - 2.0).abs() < 1e-9, "f32 {f} ns, bf16 {b} ns");
    // A 1-element all-reduce still pays the reducing collectives' fixed cost.
    let x =
        ShardedHbm::<f32>::shape_only(&m, &[2, 1], PartitionSpec::new([Some("x"), None])).unwrap();
    let y =
        ShardedHbm::<f32>::shape_only(&m, &[2, 1], PartitionSpec::new([Some("x"), None])).unwrap();
    let r = MeshLaunch::new(&m)
        .target(Target::Trn1)
        .mode(Mode::Estimate)
        .run(|| mesh::all_reduce(x.view(), y.view(), &g, Algorithm::Runtime))
        .unwrap();
    let fixed = link_spec(Target::Trn1).reduction_fixed_ns;
    assert!(r.collectives[0].time_ns >= fixed, "{:?}", r.collectives[0]);
}

#[test]
fn a_topology_places_devices_for_what_if_studies() {
    // Two trn2 devices on one chip, then on two chips: the copy crosses a link and its hop.
    let m = Mesh::new([2], ["x"]).unwrap();
    let src = ShardedHbm::<f32>::shape_only(&m, &[512, 1024], p([Some("x"), None])).unwrap();
    let dst = ShardedHbm::<f32>::shape_only(&m, &[512, 1024], p([Some("x"), None])).unwrap();
    let time = |t: mesh::Topology| {
        MeshLaunch::new(&m)
            .mode(Mode::Estimate)
            .topology(t)
            .run(|| {
                let (send, recv) = (mesh::semaphore("send"), mesh::semaphore("recv"));
                let me = mesh::device_id();
                let c = mesh::remote_copy(src.view(), &dst.at(1 - me), &send, &recv);
                c.start();
                c.wait();
            })
            .unwrap()
            .latency_ns
    };
    let near = time(mesh::Topology::of(Target::Trn2));
    let far = time(mesh::Topology::of(Target::Trn2).placement(vec![0, 4]));
    let l = link_spec(Target::Trn2);
    assert!(far > near + l.hop_ns * 0.99, "{near} {far}");
    let slow = time(
        mesh::Topology::of(Target::Trn2)
            .placement(vec![0, 4])
            .link_gbps(l.link_gbps / 4.0),
    );
    assert!(slow > far, "{far} {slow}");
    let bad = MeshLaunch::new(&m)
        .topology(mesh::Topology::of(Target::Trn2).placement(vec![3, 3]))
        .run(|| {})
        .unwrap_err();
    assert!(bad.to_string().contains("slot 3"), "{bad}");
}
