//! The autograd kernels against ndarray references written from the formulas: the tiled add,
//! RMSNorm forward, and RMSNorm backward (both gradients), on full and partial row tiles, plus
//! their shape errors.

use ndarray::{Array2, Axis};
use nki_core::prelude::*;
use nki_kernels::autograd::{rmsnorm_bwd, rmsnorm_fwd, tensor_add_tile, RMSNORM_EPS};
use nki_kernels::testing::{allclose, random_f32};

/// Values uniform in [-1, 1), deterministic in `seed`.
fn signed(rows: usize, cols: usize, seed: u64) -> Array2<f32> {
    random_f32(rows, cols, seed).mapv(|v| 2.0 * v - 1.0)
}

fn hbm(a: &Array2<f32>) -> Hbm<f32> {
    Hbm::from_array(a).unwrap()
}

/// `1 / sqrt(mean(x^2) + eps)` per row, as an `[n, 1]` column.
fn inverse_rms(x: &Array2<f32>) -> Array2<f32> {
    x.mapv(|v| v * v)
        .mean_axis(Axis(1))
        .unwrap()
        .mapv(|m| 1.0 / (m + RMSNORM_EPS).sqrt())
        .insert_axis(Axis(1))
}

#[test]
fn tensor_add_tile_adds_every_tile_of_the_grid() {
    let (a, b) = (signed(256, 1024, 1), signed(256, 1024, 2));
    let mut c = Hbm::<f32>::zeros([256, 1024]);
    launch!(tensor_add_tile[2, 2](&hbm(&a), &hbm(&b), &mut c)).unwrap();
    allclose(&c.to_array().unwrap(), &(&a + &b).into_dyn(), 0.0, 0.0).unwrap();
}

#[test]
fn rmsnorm_forward_matches_the_formula() {
    for rows in [1, 128, 300] {
        let (x, gain) = (signed(rows, 96, 3), signed(1, 96, 4));
        let mut y = Hbm::<f32>::zeros([rows, 96]);
        let grid = rows.div_ceil(128);
        rmsnorm_fwd::launch(grid, &hbm(&x), &hbm(&gain), &mut y, RMSNORM_EPS).unwrap();
        let want = &x * &inverse_rms(&x) * &gain;
        allclose(&y.to_array().unwrap(), &want.into_dyn(), 1e-6, 1e-5).unwrap();
    }
}

#[test]
fn rmsnorm_backward_matches_the_formula() {
    let rows = 260;
    let (x, gain, dy) = (signed(rows, 64, 5), signed(1, 64, 6), signed(rows, 64, 7));
    let (mut dx, mut dgain) = (Hbm::<f32>::zeros([rows, 64]), Hbm::<f32>::zeros([1, 64]));
    let args = (&hbm(&x), &hbm(&gain), &hbm(&dy));
    rmsnorm_bwd::launch(1, args.0, args.1, args.2, &mut dx, &mut dgain, RMSNORM_EPS).unwrap();

    let r = inverse_rms(&x);
    let xhat = &x * &r;
    let dy_g = &dy * &gain;
    let proj = (&dy_g * &xhat)
        .mean_axis(Axis(1))
        .unwrap()
        .insert_axis(Axis(1));
    let want_dx = (&dy_g - &(&xhat * &proj)) * &r;
    let want_dgain = (&dy * &xhat).sum_axis(Axis(0)).insert_axis(Axis(0));
    allclose(&dx.to_array().unwrap(), &want_dx.into_dyn(), 1e-6, 1e-5).unwrap();
    allclose(
        &dgain.to_array().unwrap(),
        &want_dgain.into_dyn(),
        1e-5,
        1e-5,
    )
    .unwrap();
}

#[test]
fn rmsnorm_rejects_a_gain_of_the_wrong_width() {
    let x = hbm(&signed(8, 32, 8));
    let gain = hbm(&signed(1, 16, 9));
    let mut y = Hbm::<f32>::zeros([8, 32]);
    let e = rmsnorm_fwd::launch(1, &x, &gain, &mut y, RMSNORM_EPS).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
    assert!(e.to_string().contains("gain must be [1, 32]"), "{e}");
    let (mut dx, mut dgain) = (Hbm::<f32>::zeros([8, 32]), Hbm::<f32>::zeros([1, 32]));
    let e = rmsnorm_bwd::launch(1, &x, &gain, &x, &mut dx, &mut dgain, RMSNORM_EPS).unwrap_err();
    assert!(e.to_string().contains("rmsnorm_bwd"), "{e}");
}
