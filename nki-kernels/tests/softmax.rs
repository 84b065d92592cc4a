//! softmax against an ndarray reference: the tutorial's logits, the masked 250-row case and
//! edge shapes.

use ndarray::{array, Array2};
use nki_core::prelude::*;
use nki_kernels::reference::softmax as reference;
use nki_kernels::softmax::softmax;
use nki_kernels::testing::{check_modes, random_range};

fn check(x: Array2<f32>, atol: f32, rtol: f32) {
    let want = reference(&x);
    let input = Hbm::from_array(&x).unwrap();
    let dims = [x.nrows(), x.ncols()];
    check_modes(&format!("softmax {dims:?}"), &want, atol, rtol, |launch| {
        let mut out = Hbm::<f32>::zeros(dims);
        let r = softmax::run(launch, &input, &mut out)?;
        Ok((out.to_array()?, r))
    });
}

fn random(rows: usize, cols: usize) -> Array2<f32> {
    let v = random_range(rows * cols, -4.0, 4.0, (rows * cols) as u64);
    Array2::from_shape_vec((rows, cols), v).unwrap()
}

#[test]
fn tutorial_logits() {
    check(
        array![[1.0, 2.0, 3.0, 4.0, 5.0], [5.0, 4.0, 3.0, 2.0, 1.0]],
        1e-5,
        1e-5,
    );
}

#[test]
fn edge_shapes() {
    check(random(1, 7), 1e-5, 1e-5);
    check(random(250, 512), 1e-5, 1e-5);
    check(random(128, 2048), 1e-5, 1e-5);
}
