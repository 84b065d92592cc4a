//! `nki.collectives` by its 0.7 names (`mesh::names`): the reducing operator as
//! a parameter (add, max, min), `rank_id`, `ReplicaGroup`, the other collectives as thin
//! calls into the mesh layer, and the variable-length `all_gather_v` / `all_to_all_v` (plain and
//! prepare/trigger) against a plain-Rust reference, their rules as errors, and their time.

use nki_core::mesh::names::{self as cc, ReduceOp, ReplicaGroup, VFlags};
use nki_core::mesh::{Mesh, MeshLaunch, PartitionSpec, ShardedHbm, Topology};
use nki_core::ndarray::{Array2, ArrayD};
use nki_core::prelude::*;
use nki_core::{nl, ErrorKind, NkiError};
use std::sync::Mutex;

/// Device d's [4, 3] shard: rows 4d..4d+4 of a [16, 3] array with mixed signs.
fn input() -> Array2<f32> {
    Array2::from_shape_fn((16, 3), |(i, j)| {
        let v = ((i * 7 + j * 5) % 11) as f32 - 5.0;
        if (i / 4) % 2 == 0 {
            v
        } else {
            -v * 0.5
        }
    })
}

#[test]
fn all_reduce_and_reduce_scatter_take_the_reducing_operator() {
    let m = Mesh::new([4], ["x"]).unwrap();
    let g: ReplicaGroup = ReplicaGroup::all(&m);
    let a = input();
    let spec = PartitionSpec::new([Some("x"), None]);
    for op in [ReduceOp::Add, ReduceOp::Max, ReduceOp::Min] {
        let want = Array2::from_shape_fn((4, 3), |(i, j)| {
            let vals = (0..4).map(|d| a[[4 * d + i, j]]);
            match op {
                ReduceOp::Add => vals.sum::<f32>(),
                ReduceOp::Max => vals.fold(f32::NEG_INFINITY, f32::max),
                ReduceOp::Min => vals.fold(f32::INFINITY, f32::min),
            }
        });
        let x = ShardedHbm::from_array(&m, &a, spec.clone()).unwrap();
        let ar = ShardedHbm::<f32>::zeros(&m, &[4, 3], PartitionSpec::replicated(2)).unwrap();
        MeshLaunch::new(&m)
            .run(|| cc::all_reduce(x.view(), ar.view(), op, &g))
            .unwrap();
        let got = ar.to_array().unwrap();
        for (k, (g, w)) in got.iter().zip(want.iter()).enumerate() {
            assert!((g - w).abs() < 1e-5, "{op:?} element {k}: {g} vs {w}");
        }
        // reduce_scatter: device d keeps row d of the reduction.
        let rs = ShardedHbm::<f32>::zeros(&m, &[4, 3], spec.clone()).unwrap();
        MeshLaunch::new(&m)
            .run(|| cc::reduce_scatter(x.view(), rs.view(), 0, op, &g))
            .unwrap();
        let got = rs.to_array().unwrap();
        for (g, w) in got.iter().zip(want.iter()) {
            assert!((g - w).abs() < 1e-5, "{op:?} reduce_scatter: {g} vs {w}");
        }
    }
}

#[test]
fn rank_id_all_gather_and_permute_by_their_07_names() {
    let m = Mesh::new([4], ["x"]).unwrap();
    let g = ReplicaGroup::all(&m);
    let a = input();
    let spec = PartitionSpec::new([Some("x"), None]);
    let x = ShardedHbm::from_array(&m, &a, spec.clone()).unwrap();
    let ranks = Mutex::new(Vec::new());
    let cat = ShardedHbm::<f32>::zeros(&m, &[16, 3], PartitionSpec::replicated(2)).unwrap();
    let moved = ShardedHbm::<f32>::zeros(&m, &[16, 3], spec.clone()).unwrap();
    let swapped = ShardedHbm::<f32>::zeros(&m, &[16, 3], spec).unwrap();
    MeshLaunch::new(&m)
        .run(|| {
            ranks.lock().unwrap().push(cc::rank_id());
            cc::all_gather(x.view(), cat.view(), 0, &g);
            cc::collective_permute(
                x.view(),
                moved.view(),
                &[(0, 1), (1, 2), (2, 3), (3, 0)],
                &g,
            );
            cc::all_to_all(x.view(), swapped.view(), 0, &g);
        })
        .unwrap();
    let mut r = ranks.into_inner().unwrap();
    r.sort_unstable();
    assert_eq!(r, vec![0, 1, 2, 3]);
    assert_eq!(cat.to_array().unwrap().into_dimensionality().unwrap(), a);
    let got = moved.to_array().unwrap();
    for d in 0..4 {
        let from = (d + 3) % 4;
        for i in 0..4 {
            for j in 0..3 {
                assert_eq!(got[[4 * d + i, j]], a[[4 * from + i, j]]);
            }
        }
    }
    // all_to_all: block q (one row) of device d's shard goes to row d of device q's shard.
    let got = swapped.to_array().unwrap();
    for d in 0..4 {
        for q in 0..4 {
            for j in 0..3 {
                assert_eq!(got[[4 * q + d, j]], a[[4 * d + q, j]]);
            }
        }
    }
}

// ---- all_gather_v / all_to_all_v --------------------------------------------------------

/// Four devices, one group; per-device 1-D buffers are rows of `[4, n]` arrays split on x.
fn mesh4() -> (Mesh, ReplicaGroup) {
    let m = Mesh::new([4], ["x"]).unwrap();
    let g = ReplicaGroup::all(&m);
    (m, g)
}

fn rows() -> PartitionSpec {
    PartitionSpec::new([Some("x"), None])
}

/// Device d's source buffer: `n` distinct values per device.
fn sources(m: &Mesh, n: usize) -> (Array2<f32>, ShardedHbm<f32>) {
    let a = Array2::from_shape_fn((4, n), |(d, k)| (100 * d + k) as f32 + 0.5);
    let x = ShardedHbm::from_array(m, &a, rows()).unwrap();
    (a, x)
}

/// Device d's metadata is rows `r*d .. r*d + r` of the `[4 * r, 4]` uint32 array `meta`.
fn metadata(m: &Mesh, meta: &Array2<u32>) -> ShardedHbm<u32> {
    ShardedHbm::from_array(m, meta, rows()).unwrap()
}

/// A destination of `n` elements per device, holding zeros (a `_v` collective writes it only
/// in part).
fn dst(m: &Mesh, n: usize) -> ShardedHbm<f32> {
    ShardedHbm::from_array(m, &Array2::<f32>::zeros((4, n)), rows()).unwrap()
}

fn as2(a: ArrayD<f32>) -> Array2<f32> {
    a.into_dimensionality().unwrap()
}

/// `c[i][j]`: elements rank i sends to rank j (0 to 4; some chunks are empty).
fn counts() -> [[u32; 4]; 4] {
    let mut c = [[0; 4]; 4];
    for (i, row) in c.iter_mut().enumerate() {
        for (j, v) in row.iter_mut().enumerate() {
            *v = ((i * 3 + j * 5 + 1) % 5) as u32;
        }
    }
    c
}

/// Exclusive prefix sums of `xs`.
fn displs(xs: impl Iterator<Item = u32>) -> Vec<u32> {
    xs.scan(0, |acc, x| {
        let d = *acc;
        *acc += x;
        Some(d)
    })
    .collect()
}

/// all_to_all_v metadata: sends packed in rank order; with `recv`, rows 2/3 hold the counts
/// each rank receives and packed receive displacements.
fn a2a_metadata(recv: bool) -> Array2<u32> {
    let c = counts();
    let r = if recv { 4 } else { 2 };
    let mut meta = Array2::<u32>::zeros((4 * r, 4));
    for d in 0..4 {
        let sd = displs(c[d].iter().copied());
        let rc: Vec<u32> = (0..4).map(|i| c[i][d]).collect();
        let rd = displs(rc.iter().copied());
        for j in 0..4 {
            meta[[r * d, j]] = c[d][j];
            meta[[r * d + 1, j]] = sd[j];
            if recv {
                meta[[r * d + 2, j]] = rc[j];
                meta[[r * d + 3, j]] = rd[j];
            }
        }
    }
    meta
}

#[test]
fn all_gather_v_sends_one_chunk_into_every_ranks_slot() {
    let (m, g) = mesh4();
    let (a, x) = sources(&m, 10);
    // Device d sends src[sd .. sd + sc]; only column 0 of rows 0/1 is read (the others are
    // deliberately garbage).
    let (sc, sd) = ([3u32, 6, 0, 5], [1u32, 4, 2, 0]);
    let mut meta = Array2::<u32>::from_elem((8, 4), 77);
    for d in 0..4 {
        meta[[2 * d, 0]] = sc[d];
        meta[[2 * d + 1, 0]] = sd[d];
    }
    let md = metadata(&m, &meta);
    let out = dst(&m, 24); // 4 slots of 6 elements
    MeshLaunch::new(&m)
        .run(|| cc::all_gather_v(&[x.view()], &[out.view()], &g, md.view(), VFlags::default()))
        .unwrap();
    let mut want = Array2::<f32>::zeros((4, 24));
    for r in 0..4 {
        for s in 0..4 {
            for k in 0..sc[s] as usize {
                want[[r, 6 * s + k]] = a[[s, sd[s] as usize + k]];
            }
        }
    }
    assert_eq!(as2(out.to_array().unwrap()), want);
}

/// The plain-Rust reference of all_to_all_v over `counts()`: slot placement (`dst` of 20 =
/// 4 slots of 5) or packed receive displacements.
fn a2a_reference(a: &Array2<f32>, packed: bool) -> Array2<f32> {
    let c = counts();
    let mut want = Array2::<f32>::zeros((4, 20));
    for j in 0..4 {
        let rd = displs((0..4).map(|i| c[i][j]));
        for i in 0..4 {
            let sd = displs(c[i].iter().copied());
            let start = if packed { rd[i] as usize } else { 5 * i };
            for k in 0..c[i][j] as usize {
                want[[j, start + k]] = a[[i, sd[j] as usize + k]];
            }
        }
    }
    want
}

#[test]
fn all_to_all_v_places_chunks_by_slot_or_by_receive_displacements() {
    let (m, g) = mesh4();
    let (a, x) = sources(&m, 16);
    for recv in [false, true] {
        let md = metadata(&m, &a2a_metadata(recv));
        let out = dst(&m, 20);
        let flags = VFlags {
            recv_counts_known: recv,
            has_rdispls: recv,
        };
        MeshLaunch::new(&m)
            .run(|| cc::all_to_all_v(&[x.view()], &[out.view()], &g, md.view(), flags))
            .unwrap();
        assert_eq!(
            as2(out.to_array().unwrap()),
            a2a_reference(&a, recv),
            "has_rdispls = {recv}"
        );
    }
}

/// Thirty dependent multiplies on a [128, 512] tile: device work between prepare and trigger.
fn compute(x: &ShardedHbm<f32>, y: &ShardedHbm<f32>) {
    let mut t = nl::load(x.local().view());
    for _ in 0..30 {
        t = nl::multiply(&t, &t);
    }
    nl::store(y.local_out().view(), &t);
}

#[test]
fn a_prepared_all_to_all_v_gives_the_plain_result_and_hides_its_setup_behind_compute() {
    let (m, g) = mesh4();
    let (a, x) = sources(&m, 16);
    let md = metadata(&m, &a2a_metadata(false));
    let w = ShardedHbm::<f32>::zeros(&m, &[4 * 128, 512], rows()).unwrap();
    let y = ShardedHbm::<f32>::zeros(&m, &[4 * 128, 512], rows()).unwrap();
    let flags = VFlags::default();
    let run = |split: bool| {
        let out = dst(&m, 20);
        let rep = MeshLaunch::new(&m)
            .mode(Mode::Simulate)
            .run(|| {
                if split {
                    let p =
                        cc::all_to_all_v_prepare(&[x.view()], &[out.view()], &g, md.view(), flags);
                    compute(&w, &y);
                    cc::all_to_all_v_trigger(p);
                } else {
                    compute(&w, &y);
                    cc::all_to_all_v(&[x.view()], &[out.view()], &g, md.view(), flags);
                }
            })
            .unwrap();
        assert_eq!(as2(out.to_array().unwrap()), a2a_reference(&a, false));
        let c = &rep.collectives[0];
        assert_eq!(c.name, "all_to_all_v");
        (rep.latency_ns, rep.devices[0].compute_ns)
    };
    let (plain, busy) = run(false);
    let (split, busy2) = run(true);
    assert_eq!(busy, busy2);
    // The fixed cost (4.4 us on trn2, links.rs) runs beside the compute instead of after it.
    let hidden = plain - split;
    let setup = 4400.0_f64;
    assert!(
        (hidden - setup.min(busy)).abs() < 1.0,
        "plain {plain} ns, split {split} ns, compute {busy} ns"
    );
}

#[test]
fn all_to_all_v_time_grows_with_the_bytes_moved() {
    let (m, g) = mesh4();
    let n = 4 * 8192;
    let (_, x) = sources(&m, n);
    let time = |count: u32| {
        let mut meta = Array2::<u32>::zeros((8, 4));
        for d in 0..4 {
            for j in 0..4 {
                meta[[2 * d, j]] = count;
                meta[[2 * d + 1, j]] = j as u32 * 8192;
            }
        }
        let md = metadata(&m, &meta);
        let out = dst(&m, n);
        let rep = MeshLaunch::new(&m)
            .mode(Mode::Simulate)
            .run(|| cc::all_to_all_v(&[x.view()], &[out.view()], &g, md.view(), VFlags::default()))
            .unwrap();
        let c = &rep.collectives[0];
        assert_eq!(c.bytes, 4 * 4 * count as u64);
        c.time_ns
    };
    let (t0, t1, t2) = (time(0), time(1024), time(8192));
    assert!(t0 < t1 && t1 < t2, "{t0} {t1} {t2}");
}

/// Runs `k` on mesh `m` and returns its error.
fn fails(m: &Mesh, target: Target, mode: Mode, k: impl Fn() + Sync) -> NkiError {
    MeshLaunch::new(m)
        .target(target)
        .mode(mode)
        .run(k)
        .expect_err("the kernel breaks a rule")
}

fn check(e: &NkiError, kind: ErrorKind, op: &str, words: &[&str]) {
    assert_eq!(e.kind(), kind, "{e}");
    assert_eq!(e.op(), op, "{e}");
    for w in words {
        assert!(e.message().contains(w), "{w:?} not in: {e}");
    }
    let loc = e.location().expect("the user's line");
    assert!(loc.file.ends_with("collectives07.rs"), "{e}");
}

#[test]
fn the_rules_of_the_v_collectives_are_clear_errors() {
    let (m, g) = mesh4();
    let (_, x) = sources(&m, 16);
    let good = metadata(&m, &a2a_metadata(false));
    let out = dst(&m, 20);
    // The views of the running device (made inside the launch).
    let src = || vec![x.view()];
    let dsts = || vec![out.view()];
    let f = VFlags::default();
    let sim = |k: &(dyn Fn() + Sync)| fails(&m, Target::Trn2, Mode::Simulate, k);

    // A second prepare before the first one's trigger.
    let e = sim(&|| {
        let p = cc::all_to_all_v_prepare(&src(), &dsts(), &g, good.view(), f);
        let q = cc::all_gather_v_prepare(&src(), &dsts(), &g, good.view(), f);
        cc::all_to_all_v_trigger(p);
        cc::all_gather_v_trigger(q);
    });
    check(
        &e,
        ErrorKind::Synchronization,
        "all_gather_v_prepare",
        &["all_to_all_v_prepare", "not been triggered"],
    );
    // A prepare never triggered.
    let e = sim(&|| {
        let _p = cc::all_to_all_v_prepare(&src(), &dsts(), &g, good.view(), f);
    });
    check(
        &e,
        ErrorKind::Synchronization,
        "all_to_all_v_prepare",
        &["never passed to all_to_all_v_trigger"],
    );
    // A handle passed to the other collective's trigger.
    let e = sim(&|| {
        let p = cc::all_to_all_v_prepare(&src(), &dsts(), &g, good.view(), f);
        cc::all_gather_v_trigger(p);
    });
    check(
        &e,
        ErrorKind::InvalidArgument,
        "all_gather_v_trigger",
        &["prepared by all_to_all_v_prepare"],
    );
    // Metadata of the wrong dtype and of the wrong shape.
    let fmeta = ShardedHbm::<f32>::zeros(&m, &[8, 4], rows()).unwrap();
    let e = sim(&|| cc::all_to_all_v(&src(), &dsts(), &g, fmeta.view(), f));
    check(&e, ErrorKind::DType, "all_to_all_v", &["uint32", "float32"]);
    let e = sim(&|| {
        let flags = VFlags {
            recv_counts_known: true,
            has_rdispls: true,
        };
        cc::all_to_all_v(&src(), &dsts(), &g, good.view(), flags)
    });
    check(
        &e,
        ErrorKind::ShapeMismatch,
        "all_to_all_v",
        &["[4, 4]", "[2, 4]"],
    );
    // Two source tensors.
    let two = || vec![x.view(), x.view()];
    let e = sim(&|| cc::all_gather_v(&two(), &dsts(), &g, good.view(), f));
    check(
        &e,
        ErrorKind::InvalidArgument,
        "all_gather_v",
        &["srcs must hold exactly one"],
    );
    // Counts beyond the source buffer, beyond a destination slot, and against the receive
    // counts.
    let mut meta = a2a_metadata(false);
    meta[[2 + 1, 2]] = 13; // rank 1 sends 4 elements from 13 of its 16
    let beyond = metadata(&m, &meta);
    let e = sim(&|| cc::all_to_all_v(&src(), &dsts(), &g, beyond.view(), f));
    check(
        &e,
        ErrorKind::OutOfBounds,
        "all_to_all_v",
        &["column 2", "16 elements"],
    );
    let mut meta = a2a_metadata(false);
    meta[[0, 1]] = 6;
    let wide = metadata(&m, &meta);
    let e = sim(&|| cc::all_to_all_v(&src(), &dsts(), &g, wide.view(), f));
    check(
        &e,
        ErrorKind::OutOfBounds,
        "all_to_all_v",
        &["rank 0 sends 6 elements to rank 1", "holds 5"],
    );
    let mut meta = a2a_metadata(true);
    meta[[4 + 2, 0]] += 1;
    let wrong = metadata(&m, &meta);
    let flags = VFlags {
        recv_counts_known: true,
        has_rdispls: true,
    };
    let e = sim(&|| cc::all_to_all_v(&src(), &dsts(), &g, wrong.view(), flags));
    check(
        &e,
        ErrorKind::InvalidArgument,
        "all_to_all_v",
        &["rank 1's receive count"],
    );
    // Estimate mode has no metadata values.
    let shape_only = |n: usize| ShardedHbm::<f32>::shape_only(&m, &[4, n], rows()).unwrap();
    let (xs, os) = (shape_only(16), shape_only(20));
    let ms = ShardedHbm::<u32>::shape_only(&m, &[8, 4], rows()).unwrap();
    let e = fails(&m, Target::Trn2, Mode::Estimate, || {
        cc::all_to_all_v(&[xs.view()], &[os.view()], &g, ms.view(), f)
    });
    check(
        &e,
        ErrorKind::NoData,
        "all_to_all_v",
        &["estimate mode has no metadata values"],
    );
    // NeuronSwitch fabrics (trn3) have no prepare/trigger split; the plain form runs.
    let e = fails(&m, Target::Trn3, Mode::Simulate, || {
        let p = cc::all_gather_v_prepare(&src(), &dsts(), &g, good.view(), f);
        cc::all_gather_v_trigger(p);
    });
    check(
        &e,
        ErrorKind::InvalidArgument,
        "all_gather_v_prepare",
        &["NeuronSwitch"],
    );
    MeshLaunch::new(&m)
        .target(Target::Trn3)
        .run(|| cc::all_to_all_v(&src(), &dsts(), &g, good.view(), f))
        .unwrap();
}

#[test]
fn overlapping_receive_displacements_name_the_collective_the_ranks_and_the_metadata() {
    let (m, g) = mesh4();
    let (_, x) = sources(&m, 16);
    let out = dst(&m, 20);
    let flags = VFlags {
        recv_counts_known: true,
        has_rdispls: true,
    };
    // Rank 2 places rank 1's chunk where rank 0's lies (both non-empty).
    let c = counts();
    assert!(c[0][2] > 0 && c[1][2] > 0);
    let mut meta = a2a_metadata(true);
    meta[[4 * 2 + 3, 1]] = meta[[4 * 2 + 3, 0]];
    let md = metadata(&m, &meta);
    let e = fails(&m, Target::Trn2, Mode::Simulate, || {
        cc::all_to_all_v(&[x.view()], &[out.view()], &g, md.view(), flags)
    });
    check(
        &e,
        ErrorKind::InvalidArgument,
        "all_to_all_v",
        &[
            "receive displacements of rank 2 overlap",
            "rank 0's chunk",
            "rank 1's",
            "row 3, columns 0 and 1 of rank 2's metadata",
        ],
    );
    assert!(e.program_id().is_some(), "{e}");
}

// ---- collective_permute_implicit* -----------------------------------------------------------

/// What an error on device 0 of [`ring`] says of its rank.
const RING_RANK0: &str = "rank 0 of the group of devices [0, 2, 1, 3]";

/// The ring 0 -> 2 -> 1 -> 3 -> 0 (a rank-list's order is its ring).
fn ring(m: &Mesh) -> ReplicaGroup {
    ReplicaGroup::new(m, vec![vec![0, 2, 1, 3]]).unwrap()
}

/// Device `d`'s ring predecessor in [`ring`].
fn pred(d: usize) -> usize {
    [3, 2, 0, 1][d]
}

#[test]
fn collective_permute_implicit_moves_each_channel_to_the_ring_successor() {
    let (m, _) = mesh4();
    let g = ring(&m);
    let (a, x) = sources(&m, 6);
    let b = a.mapv(|v| -2.0 * v);
    let y = ShardedHbm::from_array(&m, &b, rows()).unwrap();
    let (o0, o1) = (dst(&m, 6), dst(&m, 6));
    MeshLaunch::new(&m)
        .run(|| {
            cc::collective_permute_implicit(
                &[vec![x.view()], vec![y.view()]],
                &[vec![o0.view()], vec![o1.view()]],
                &g,
                &[0, 1],
            )
        })
        .unwrap();
    let (got0, got1) = (as2(o0.to_array().unwrap()), as2(o1.to_array().unwrap()));
    for d in 0..4 {
        assert_eq!(got0.row(d), a.row(pred(d)), "channel 0, device {d}");
        assert_eq!(got1.row(d), b.row(pred(d)), "channel 1, device {d}");
    }
}

#[test]
fn a_ring_loop_knows_whose_data_it_holds_at_each_step() {
    let (m, _) = mesh4();
    let g = ring(&m);
    let (a, x) = sources(&m, 6);
    let (p, q) = (dst(&m, 6), dst(&m, 6));
    let seen = Mutex::new(Vec::new());
    MeshLaunch::new(&m)
        .run(|| {
            let me = cc::rank_id();
            let mut held = x.view();
            for (step, next) in [(1, &p), (2, &q), (3, &p)] {
                cc::collective_permute_implicit(&[vec![held]], &[vec![next.view()]], &g, &[0]);
                held = next.view();
                let r = cc::collective_permute_implicit_current_processing_rank_id(step, &g, 0);
                seen.lock()
                    .unwrap()
                    .push((me, step, r.value().unwrap() as usize));
            }
            let own = cc::collective_permute_implicit_current_processing_rank_id(0, &g, 0);
            assert_eq!(own.value(), Some(me as i64));
        })
        .unwrap();
    // After three steps every device holds its successor's data (three back in a ring of 4).
    let got = as2(p.to_array().unwrap());
    for (d, step, r) in seen.into_inner().unwrap() {
        let mut want = d;
        for _ in 0..step {
            want = pred(want);
        }
        assert_eq!(r, want, "device {d} step {step}");
        if step == 3 {
            assert_eq!(got.row(d), a.row(r), "device {d} holds rank {r}'s data");
        }
    }
}

#[test]
fn collective_permute_implicit_reduce_sends_the_reduced_sources() {
    let (m, _) = mesh4();
    let g = ring(&m);
    let (a, x) = sources(&m, 5);
    let b = Array2::from_shape_fn((4, 5), |(d, k)| (k as f32 - 2.0) * 60.0 + d as f32);
    let y = ShardedHbm::from_array(&m, &b, rows()).unwrap();
    for op in [ReduceOp::Add, ReduceOp::Max, ReduceOp::Min] {
        let out = dst(&m, 5);
        let rep = MeshLaunch::new(&m)
            .mode(Mode::Simulate)
            .run(|| {
                cc::collective_permute_implicit_reduce(
                    &[vec![x.view()]],
                    &[vec![y.view()]],
                    &[vec![out.view()]],
                    &g,
                    op,
                    &[0],
                )
            })
            .unwrap();
        assert_eq!(
            rep.collectives[0].name,
            "collective_permute_implicit_reduce"
        );
        let got = as2(out.to_array().unwrap());
        for d in 0..4 {
            for k in 0..5 {
                let (u, v) = (a[[pred(d), k]], b[[pred(d), k]]);
                let want = match op {
                    ReduceOp::Add => u + v,
                    ReduceOp::Max => u.max(v),
                    ReduceOp::Min => u.min(v),
                };
                assert_eq!(got[[d, k]], want, "{op:?} device {d} element {k}");
            }
        }
    }
}

#[test]
fn the_rules_of_the_implicit_permutes_are_clear_errors() {
    let (m, _) = mesh4();
    let g = ring(&m);
    let (_, x) = sources(&m, 6);
    let (o, short) = (dst(&m, 6), dst(&m, 5));
    let sim = |k: &(dyn Fn() + Sync)| fails(&m, Target::Trn2, Mode::Simulate, k);
    let op = "collective_permute_implicit";
    // Three channels on a group of 4 of a 64-device trn2 node: 2 at most.
    let e = sim(&|| {
        let s = vec![vec![x.view()]; 3];
        let d = vec![vec![o.view()]; 3];
        cc::collective_permute_implicit(&s, &d, &g, &[0, 1, 2])
    });
    check(
        &e,
        ErrorKind::InvalidArgument,
        op,
        &["channel_ids: channel id 2", "2 channels", RING_RANK0],
    );
    let e = sim(&|| {
        cc::collective_permute_implicit_current_processing_rank_id(1, &g, 3);
    });
    check(
        &e,
        ErrorKind::InvalidArgument,
        "collective_permute_implicit_current_processing_rank_id",
        &["channel id 3"],
    );
    // A node of one chip: the group holds all of it, so 4 channels run.
    let node = Topology::of(Target::Trn2).chips_per_node(1);
    let outs: Vec<_> = (0..4).map(|_| dst(&m, 6)).collect();
    MeshLaunch::new(&m)
        .topology(node)
        .run(|| {
            let s = vec![vec![x.view()]; 4];
            let d: Vec<_> = outs.iter().map(|o| vec![o.view()]).collect();
            cc::collective_permute_implicit(&s, &d, &g, &[3, 2, 1, 0])
        })
        .unwrap();
    // Lists that disagree, a coalesced channel, a repeated id, mismatched shapes.
    let e =
        sim(&|| cc::collective_permute_implicit(&[vec![x.view()]], &[vec![o.view()]], &g, &[0, 1]));
    check(
        &e,
        ErrorKind::InvalidArgument,
        op,
        &["one channel per entry"],
    );
    let e = sim(&|| {
        cc::collective_permute_implicit(&[vec![x.view(), x.view()]], &[vec![o.view()]], &g, &[0])
    });
    check(&e, ErrorKind::InvalidArgument, op, &["exactly one tensor"]);
    let e = sim(&|| {
        let s = vec![vec![x.view()]; 2];
        let d = vec![vec![o.view()]; 2];
        cc::collective_permute_implicit(&s, &d, &g, &[1, 1])
    });
    check(
        &e,
        ErrorKind::InvalidArgument,
        op,
        &["repeated", RING_RANK0],
    );
    let e = sim(&|| {
        cc::collective_permute_implicit(&[vec![x.view()]], &[vec![short.view()]], &g, &[0])
    });
    let words = ["srcs_by_channel[0] ", "dsts_by_channel[0] ", RING_RANK0];
    check(&e, ErrorKind::ShapeMismatch, op, &words);
}
