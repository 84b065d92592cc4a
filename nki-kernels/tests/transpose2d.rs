//! transpose2d against a plain-loop reference: the tutorial's int8 `[5, 3 * 4]` case, one
//! row, a row count that is not a multiple of 128 and a full 128-row tile.

use ndarray::Array2;
use nki_core::prelude::*;
use nki_kernels::reference::transpose2d as reference;
use nki_kernels::testing::{check_modes, random_range};
use nki_kernels::transpose2d::transpose2d;

fn check(rows: usize, x: usize, y: usize) {
    let vals = random_range(rows * x * y, -128.0, 127.0, rows as u64);
    let a = Array2::from_shape_vec((rows, x * y), vals.iter().map(|v| *v as i8).collect()).unwrap();
    let want = reference(&a, x, y);
    let input = Hbm::from_array(&a).unwrap();
    check_modes(
        &format!("transpose2d [{rows}, {x}x{y}]"),
        &want,
        0.0,
        0.0,
        |launch| {
            let mut out = Hbm::<i8>::zeros([rows, x * y]);
            let r = transpose2d::run(launch, &input, &mut out, x, y)?;
            Ok((out.to_array()?, r))
        },
    );
}

#[test]
fn tutorial_shape_int8() {
    check(5, 3, 4);
}

#[test]
fn edge_shapes() {
    check(1, 3, 4);
    check(300, 5, 7);
    check(128, 16, 32);
}

#[test]
fn wrong_column_count_is_an_error() {
    let input = Hbm::<i8>::zeros([5, 12]);
    let mut out = Hbm::<i8>::zeros([5, 12]);
    let e = transpose2d::launch(1, &input, &mut out, 5, 3).unwrap_err();
    assert!(e.to_string().contains("X * Y"), "{e}");
}
