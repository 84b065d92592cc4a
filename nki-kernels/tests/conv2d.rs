//! conv2d_maxpool against a plain-loop reference of `max_pool2d(conv2d(X, W) + b, pool)` on
//! CS149's correctness cases (`X[4, Cin, 32, 16]`, 3x3, Cin, Cout in {128, 256}, with and
//! without bias and pooling; fp32 U[0, 1), NumPy's default allclose tolerances), edge shapes,
//! and the perf shape in estimate mode.

use ndarray::{Array1, Array4};
use nki_core::prelude::*;
use nki_kernels::conv2d::conv2d_maxpool;
use nki_kernels::reference::conv2d_maxpool as reference;
use nki_kernels::testing::{check_modes, random_vec};

fn check(x: [usize; 4], cout: usize, k: usize, with_bias: bool, pool: usize) {
    let [n, cin, h, wd] = x;
    let xa = Array4::from_shape_vec(x, random_vec(n * cin * h * wd, 1)).unwrap();
    let wa = Array4::from_shape_vec((cout, cin, k, k), random_vec(cout * cin * k * k, 2)).unwrap();
    let ba = if with_bias {
        Array1::from(random_vec(cout, 3))
    } else {
        Array1::zeros(cout)
    };
    let want = reference(&xa, &wa, &ba, pool);
    let (xh, wh, bh) = (
        Hbm::from_array(&xa).unwrap(),
        Hbm::from_array(&wa).unwrap(),
        Hbm::from_array(&ba).unwrap(),
    );
    let out_dims = [n, cout, (h - k + 1) / pool, (wd - k + 1) / pool];
    let label = format!("conv2d_maxpool X{x:?} Cout {cout} k {k} bias {with_bias} pool {pool}");
    check_modes(&label, &want, 1e-8, 1e-5, |launch| {
        let mut out = Hbm::<f32>::zeros(out_dims);
        let r = conv2d_maxpool::run(launch, &xh, &wh, &bh, &mut out, pool)?;
        Ok((out.to_array()?, r))
    });
}

#[test]
fn cs149_correctness_cases() {
    check([4, 128, 32, 16], 128, 3, false, 1);
    check([4, 128, 32, 16], 128, 3, true, 2);
    check([4, 256, 32, 16], 256, 3, true, 1);
    check([4, 256, 32, 16], 256, 3, false, 2);
}

#[test]
fn edge_shapes() {
    check([1, 1, 3, 3], 1, 3, true, 1);
    check([2, 130, 9, 11], 200, 3, true, 2);
    check([1, 64, 40, 40], 32, 5, true, 3);
}

#[test]
fn cs149_perf_shape_estimates() {
    let x = Hbm::<f32>::shape_only([1, 256, 224, 224]);
    let w = Hbm::<f32>::shape_only([256, 256, 3, 3]);
    let b = Hbm::<f32>::shape_only([256]);
    for pool in [1, 2] {
        let mut out = Hbm::<f32>::shape_only([1, 256, 222 / pool, 222 / pool]);
        let p = conv2d_maxpool::estimate(1, Target::Trn1, &x, &w, &b, &mut out, pool).unwrap();
        assert!(p.latency_ns > 0.0);
    }
}
