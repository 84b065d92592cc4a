//! The streaming tensor-add kernel against a plain-loop reference.

use ndarray::Array2;
use nki_core::prelude::*;
use nki_kernels::tensor_add::{tensor_add, tensor_add_stream};
use nki_kernels::testing::random_vec;

fn check_add<T: Element>(rows: usize, cols: usize, free_dim: usize) {
    let av: Vec<T> = random_vec(rows * cols, 1)
        .into_iter()
        .map(T::from_f32)
        .collect();
    let bv: Vec<T> = random_vec(rows * cols, 2)
        .into_iter()
        .map(T::from_f32)
        .collect();
    let a = Hbm::from_vec(&[rows, cols], av.clone()).unwrap();
    let b = Hbm::from_vec(&[rows, cols], bv.clone()).unwrap();
    let mut c = Hbm::<T>::zeros([rows, cols]);
    tensor_add_stream::launch(1, &a, &b, &mut c, free_dim).unwrap();
    let got = c.to_f32_vec().unwrap();
    for i in 0..rows * cols {
        // Reference: f32 sum of the stored inputs, rounded once to T (the engine
        // computes in f32 and rounds once, so the results agree exactly).
        let want = T::from_f32(av[i].to_f32() + bv[i].to_f32()).to_f32();
        assert_eq!(
            got[i], want,
            "element {i} of [{rows}, {cols}], free_dim {free_dim}"
        );
    }
}

#[test]
fn tutorial_shape_bf16_and_f16() {
    check_add::<bf16>(256, 1024, 512);
    check_add::<f16>(256, 1024, 512);
}

#[test]
fn partial_tiles_and_odd_chunks() {
    check_add::<f32>(1, 7, 3);
    check_add::<f32>(250, 1000, 384);
    check_add::<bf16>(129, 130, 128);
}

#[test]
fn sweep_sizes_agree() {
    for fd in [128, 1024, 8192] {
        check_add::<bf16>(128, 8192, fd);
    }
}

#[test]
fn default_wrapper_matches_ndarray() {
    let a = Array2::from_shape_fn((256, 1024), |(i, j)| (i as f32) * 0.5 - j as f32);
    let b = Array2::from_shape_fn((256, 1024), |(i, j)| (j % 7) as f32 + i as f32);
    let mut c = Hbm::<f32>::zeros([256, 1024]);
    tensor_add(
        &Hbm::from_array(&a).unwrap(),
        &Hbm::from_array(&b).unwrap(),
        &mut c,
    )
    .unwrap();
    let got = c.to_array().unwrap();
    let want = (&a + &b).into_dyn();
    assert_eq!(got, want);
}

#[test]
fn bad_arguments_are_errors() {
    let a = Hbm::<f32>::zeros([128, 512]);
    let b = Hbm::<f32>::zeros([128, 256]);
    let mut c = Hbm::<f32>::zeros([128, 512]);
    let e = tensor_add_stream::launch(1, &a, &b, &mut c, 512).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
    let e = tensor_add_stream::launch(1, &a, &a, &mut c, 0).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    let a3 = Hbm::<f32>::zeros([2, 128, 512]);
    let mut c3 = Hbm::<f32>::zeros([2, 128, 512]);
    let e = tensor_add_stream::launch(1, &a3, &a3, &mut c3, 512).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
}

#[test]
fn oversized_chunk_exceeds_sbuf() {
    // Three live f32 chunks of 16384 elements need 192 KiB per partition: more than SBUF holds.
    // (Two different inputs: the compiler loads one input added to itself once.)
    let a = Hbm::<f32>::shape_only([128, 16384]);
    let b = Hbm::<f32>::shape_only([128, 16384]);
    let mut c = Hbm::<f32>::shape_only([128, 16384]);
    let e = tensor_add_stream::estimate(1, Target::Trn1, &a, &b, &mut c, 16384).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Capacity);
    tensor_add_stream::estimate(1, Target::Trn1, &a, &b, &mut c, 8192).unwrap();
}
