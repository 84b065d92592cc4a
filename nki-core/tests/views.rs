//! The view language pieces through launched kernels: HBM `reshape` / `permute` / `broadcast` /
//! `ap` views in loads and stores, on-chip `reshape` / `permute` views, block tiles indexed by
//! block, and the indirect (index-tile) gather; each against plain loops, in execute and
//! estimate mode, plus the errors.

use nki_core::prelude::*;
// The Beta-1 instruction forms (allocating, `_into` twins): the seeds' dialect.
use nki_core::nisa::classic as nisa;

fn seq(n: usize) -> Vec<f32> {
    (0..n).map(|x| x as f32).collect()
}

#[nki_kernel]
fn pool_windows(x: &Hbm<f32>, out: &mut Hbm<f32>) {
    // x[4, 6, 8] viewed as [4, 3, 2, 4, 2]: 2x2 windows as their own dimensions.
    let w = nl::load(x.reshape(&[4, 3, 2, 4, 2]));
    let s = nl::sum(&w, &[4], false); // [4, 3, 2, 4]
    let t = nl::add(s.slice((.., .., 0, ..)), s.slice((.., .., 1, ..)));
    nl::store(out.view(), &t);
}

#[test]
fn hbm_reshape_splits_dims_for_pooling() {
    let x = Hbm::from_vec(&[4, 6, 8], seq(192)).unwrap();
    let mut out = Hbm::<f32>::zeros([4, 3, 4]);
    pool_windows::launch(1, &x, &mut out).unwrap();
    let got = out.to_f32_vec().unwrap();
    let v = seq(192);
    for c in 0..4 {
        for i in 0..3 {
            for j in 0..4 {
                let at = |a: usize, b: usize| v[c * 48 + (2 * i + a) * 8 + 2 * j + b];
                assert_eq!(
                    got[c * 12 + i * 4 + j],
                    at(0, 0) + at(0, 1) + at(1, 0) + at(1, 1)
                );
            }
        }
    }
    let p = pool_windows::estimate(
        1,
        Target::Trn2,
        &Hbm::shape_only([4, 6, 8]),
        &mut Hbm::shape_only([4, 3, 4]),
    )
    .unwrap();
    assert!(p.latency_ns > 0.0);
}

#[nki_kernel]
fn transposed_and_broadcast(
    a: &Hbm<f32>,
    row: &Hbm<f32>,
    out: &mut Hbm<f32>,
    out_b: &mut Hbm<f32>,
) {
    // a[3, 5] read transposed into a [5, 3] tile; row[1, 4] broadcast to 8 partitions.
    let t = nl::load(a.view().permute(&[1, 0]));
    nl::store(out.view(), &t);
    let b = nl::load(row.view().broadcast(0, 8));
    nl::store(out_b.view(), &b);
}

#[test]
fn hbm_permute_and_broadcast_views() {
    let a = Hbm::from_vec(&[3, 5], seq(15)).unwrap();
    let row = Hbm::from_vec(&[1, 4], seq(4)).unwrap();
    let (mut out, mut out_b) = (Hbm::<f32>::zeros([5, 3]), Hbm::<f32>::zeros([8, 4]));
    transposed_and_broadcast::launch(1, &a, &row, &mut out, &mut out_b).unwrap();
    let got = out.to_f32_vec().unwrap();
    for i in 0..5 {
        for j in 0..3 {
            assert_eq!(got[i * 3 + j], (j * 5 + i) as f32);
        }
    }
    assert_eq!(out_b.to_f32_vec().unwrap(), seq(4).repeat(8));
}

#[nki_kernel]
fn tile_views(a: &Hbm<f32>, out: &mut Hbm<f32>) {
    // Each partition's 12 values as a 3 x 4 matrix, transposed in one copy.
    let t = nl::load(a.view());
    let o = nl::ndarray(&[2, 12], DType::F32, nl::SBUF);
    nl::assign(
        o.reshape(&[2, 4, 3]),
        t.reshape(&[2, 3, 4]).permute(&[0, 2, 1]),
    );
    nl::store(out.view(), &o);
}

#[test]
fn tile_reshape_and_permute_transpose_in_one_copy() {
    let a = Hbm::from_vec(&[2, 12], seq(24)).unwrap();
    let mut out = Hbm::<f32>::zeros([2, 12]);
    let r = tile_views::run(Launch::new(1).mode(Mode::Simulate), &a, &mut out).unwrap();
    let got = out.to_f32_vec().unwrap();
    for p in 0..2 {
        for y in 0..4 {
            for x in 0..3 {
                assert_eq!(got[p * 12 + y * 3 + x], (p * 12 + x * 4 + y) as f32);
            }
        }
    }
    // load, one copy, store.
    assert_eq!(r.profile.unwrap().instructions, 3);
}

#[nki_kernel]
fn bad_tile_permute(a: &Hbm<f32>, out: &mut Hbm<f32>) {
    let t = nl::load(a.view());
    let o = nl::copy(t.permute(&[1, 0]), None);
    nl::store(out.view(), &o);
}

#[nki_kernel]
fn bad_reshape(a: &Hbm<f32>, out: &mut Hbm<f32>) {
    let t = nl::load(a.slice((.., 0..4)).reshape(&[16]));
    nl::store(out.view(), &t);
}

#[test]
fn view_errors_name_the_shapes() {
    let a = Hbm::<f32>::zeros([4, 6]);
    let mut out = Hbm::<f32>::zeros([4, 6]);
    let e = bad_tile_permute::launch(1, &a, &mut out).unwrap_err();
    assert!(e.message().contains("partition dimension"), "{e}");
    let e = bad_reshape::launch(1, &a, &mut out).unwrap_err();
    assert!(e.message().contains("not contiguous"), "{e}");
    let e = a.view().try_reshape(&[5, 5]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
}

#[nki_kernel]
fn blocks_roundtrip(a: &Hbm<f32>, out: &mut Hbm<f32>) {
    // a[3 * 4, 8] loaded into 3 blocks of [4, 8], each doubled in place, stored back.
    let b = nl::ndarray_blocks(3, &[4, 8], DType::F32, nl::SBUF);
    for i in nl::affine_range(3) {
        nisa::dma_copy(b.block(i), a.slice((i * 4..(i + 1) * 4, ..)));
    }
    for i in nl::affine_range(3) {
        nisa::tensor_scalar_into(
            b.block(i),
            b.block(i),
            nl::AluOp::Multiply,
            2.0,
            Default::default(),
        );
        nl::store(out.slice((i * 4..(i + 1) * 4, ..)), b.block(i));
    }
}

#[nki_kernel]
fn block_out_of_range(out: &mut Hbm<f32>) {
    let b = nl::ndarray_blocks(2, &[4, 8], DType::F32, nl::SBUF);
    nl::store(out.view(), b.block(2));
}

#[test]
fn block_tiles_index_by_block() {
    let a = Hbm::from_vec(&[12, 8], seq(96)).unwrap();
    let mut out = Hbm::<f32>::zeros([12, 8]);
    blocks_roundtrip::launch(1, &a, &mut out).unwrap();
    assert_eq!(
        out.to_f32_vec().unwrap(),
        seq(96).iter().map(|v| v * 2.0).collect::<Vec<_>>()
    );
    let mut o = Hbm::<f32>::zeros([4, 8]);
    let e = block_out_of_range::launch(1, &mut o).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfBounds, "{e}");
    assert!(e.message().contains("block index 2"), "{e}");
}

#[nki_kernel]
fn gather_rows(table: &Hbm<f32>, idx: &Hbm<i32>, out: &mut Hbm<f32>) {
    let i = nl::load(idx.view());
    let rows = nl::load_indirect(table.view(), &i);
    nl::store(out.view(), &rows);
}

#[test]
fn indirect_dma_gathers_rows() {
    let table = Hbm::from_vec(&[10, 3], seq(30)).unwrap();
    let idx = Hbm::from_vec(&[4, 1], vec![7i32, 0, 7, 9]).unwrap();
    let mut out = Hbm::<f32>::zeros([4, 3]);
    gather_rows::launch(1, &table, &idx, &mut out).unwrap();
    let want: Vec<f32> = [7, 0, 7, 9]
        .iter()
        .flat_map(|&r| (0..3).map(move |c| (r * 3 + c) as f32))
        .collect();
    assert_eq!(out.to_f32_vec().unwrap(), want);
    let p = gather_rows::estimate(
        1,
        Target::Trn1,
        &Hbm::shape_only([10, 3]),
        &Hbm::shape_only([4, 1]),
        &mut Hbm::shape_only([4, 3]),
    )
    .unwrap();
    assert!(p.dma.count >= 3);
    let bad = Hbm::from_vec(&[4, 1], vec![1i32, 2, 10, 0]).unwrap();
    let e = gather_rows::launch(1, &table, &bad, &mut out).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfBounds);
    assert!(e.message().contains("index 10 at partition 2"), "{e}");
}
