//! `nki.collectives` by its 0.7 names (`mesh::names`): the reducing operator as
//! a parameter (add, max, min), `rank_id`, `ReplicaGroup`, and the other collectives as thin
//! calls into the mesh layer.

use nki_core::mesh::names::{self as cc, ReduceOp, ReplicaGroup};
use nki_core::mesh::{Mesh, MeshLaunch, PartitionSpec, ShardedHbm};
use nki_core::ndarray::Array2;
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
