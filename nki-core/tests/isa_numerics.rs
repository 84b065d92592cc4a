//! `nisa` instructions against independent references computed with plain loops, on the SDK
//! unit-test shapes (inputs `random_sample * 100`, `allclose` with rtol 1e-5 / atol 1e-8 for
//! fp32), plus bf16 rounding checks and the instructions' error cases.

use half::bf16;
use nki_core::nisa::{
    ActFn, ActivationOpts, AffineExpr, AluOp, Engine, ScanOpts, TensorScalarOpts,
};
use nki_core::prelude::*;
// The Beta-1 instruction forms (allocating, `_into` twins): the seeds' dialect.
use nki_core::nisa::classic as nisa;

mod common;
use common::{assert_close, assert_f32_close, bf, fails_with, hbm, numel, run_into, Rng};

/// Runs `body` as a single-instance kernel that writes `out_shape` into a fresh f32 output
/// (NaN-filled, so unwritten elements show); returns the output's values.
fn run_out(
    out_shape: &[usize],
    body: impl Fn(&HbmOut<'_, f32>) + Sync,
) -> Result<Vec<f32>, NkiError> {
    run_into(hbm(out_shape, vec![f32::NAN; numel(out_shape)]), body)
}

/// The SDK tests' input for `shape`: `random_sample() * 100` values from seed `seed`, and the
/// f32 HBM tensor holding them.
fn sampled(seed: u64, shape: &[usize]) -> (Vec<f32>, Hbm<f32>) {
    let xs = Rng(seed).sample(numel(shape));
    (xs.clone(), hbm(shape, xs))
}

/// Loads `a`, applies `f` to the tile and stores the tile `f` returns into a fresh `out_shape`
/// output (one instance); returns the output's values.
fn map_out(a: &Hbm<f32>, out_shape: &[usize], f: impl Fn(Tile) -> Tile + Sync) -> Vec<f32> {
    run_out(out_shape, |o| nl::store(o, &f(nl::load(a)))).unwrap()
}

/// Loads `a` and applies `f` to the tile in a one-instance kernel that must fail with an error
/// of `kind`; returns the error.
#[track_caller]
fn load_err(a: &Hbm<f32>, kind: ErrorKind, f: impl Fn(Tile) + Sync) -> NkiError {
    fails_with(kind, || f(nl::load(a)))
}

// ---------------------------------------------------------------- ScalarE: activation

#[test]
fn activation_exp_128x1024() {
    let mut rng = Rng(1);
    let (p, f) = (128, 1024);
    let xs = rng.vec(p * f, -5.0, 5.0);
    let a = hbm(&[p, f], xs.clone());
    let got = map_out(&a, &[p, f], |x| {
        nisa::activation(ActFn::Exp, &x, ActivationOpts::new())
    });
    let want: Vec<f32> = xs.iter().map(|&v| v.exp()).collect();
    assert_f32_close(&got, &want, "activation_exp_128x1024");
}

#[test]
fn activation_scale_and_bias_128x512() {
    let mut rng = Rng(2);
    let (p, f) = (128, 512);
    let xs = rng.sample(p * f);
    let bs = rng.sample(p);
    let ss = rng.vec(p, -0.01, 0.01);
    let (a, b, s) = (
        hbm(&[p, f], xs.clone()),
        hbm(&[p, 1], bs.clone()),
        hbm(&[p, 1], ss.clone()),
    );
    // Scalar scale, vector bias: identity exposes the exact fp32 affine step.
    let got = run_out(&[p, f], |o| {
        let (x, bias) = (nl::load(&a), nl::load(&b));
        let y = nisa::activation(
            ActFn::Copy,
            &x,
            ActivationOpts::new().bias(&bias).scale(2.0),
        );
        nl::store(o, &y);
    })
    .unwrap();
    for i in 0..p {
        for j in 0..f {
            assert_eq!(got[i * f + j], xs[i * f + j] * 2.0 + bs[i], "({i}, {j})");
        }
    }
    // Vector scale and bias through a nonlinear function (kept off tanh's saturation).
    let b_small = rng.vec(p, -1.0, 1.0);
    let bh = hbm(&[p, 1], b_small.clone());
    let got = run_out(&[p, f], |o| {
        let (x, bias, scale) = (nl::load(&a), nl::load(&bh), nl::load(&s));
        let args = ActivationOpts::new().bias(&bias).scale(&scale);
        nl::store(o, &nisa::activation(ActFn::Tanh, &x, args));
    })
    .unwrap();
    let mut want = vec![0.0; p * f];
    for i in 0..p {
        for j in 0..f {
            want[i * f + j] = ((xs[i * f + j] * ss[i] + b_small[i]) as f64).tanh() as f32;
        }
    }
    assert_f32_close(&got, &want, "activation_scale_and_bias_128x512");
}

#[test]
fn activation_reduce_sums_each_partition() {
    let mut rng = Rng(3);
    let (p, f) = (128, 512);
    let xs = rng.vec(p * f, -2.0, 2.0);
    let a = hbm(&[p, f], xs.clone());
    let got = run_out(&[p, f + 1], |o| {
        let x = nl::load(&a);
        let (y, r) = nisa::activation_reduce(ActFn::Square, &x, ActivationOpts::new().scale(0.5));
        nl::store(o.slice((.., 0..f)), &y);
        nl::store(o.slice((.., f..f + 1)), &r);
    })
    .unwrap();
    for i in 0..p {
        let mut sum = 0.0f64;
        for j in 0..f {
            let h = xs[i * f + j] * 0.5;
            let sq = h * h;
            assert_eq!(got[i * (f + 1) + j], sq);
            sum += sq as f64;
        }
        assert_close(
            &[got[i * (f + 1) + f]],
            &[sum as f32],
            1e-5,
            1e-8,
            "activation_reduce_sums_each_partition",
        );
    }
}

#[test]
fn activation_rounds_to_bf16_output() {
    let (p, f) = (64, 256);
    let (xs, a) = sampled(4, &[p, f]);
    let got = map_out(&a, &[p, f], |x| {
        let y = nisa::activation(
            ActFn::Copy,
            &x,
            ActivationOpts::new().scale(1.5).dtype(DType::BF16),
        );
        assert_eq!(y.dtype(), DType::BF16);
        y
    });
    let want: Vec<f32> = xs.iter().map(|&v| bf(v * 1.5)).collect();
    assert_eq!(got, want);
    // Rounding really happened somewhere.
    assert!(xs.iter().zip(&got).any(|(&x, &g)| x * 1.5 != g));
}

#[test]
fn activation_argument_errors() {
    let a = Hbm::<f32>::full([128, 64], 1.0);
    let b2 = Hbm::<f32>::full([128, 2], 1.0);
    let b64 = Hbm::<f32>::full([64, 1], 1.0);
    let bi = Hbm::<i32>::full([128, 1], 1);
    let sb = Hbm::<bf16>::full([128, 1], bf16::ONE);
    fails_with(ErrorKind::ShapeMismatch, || {
        let (x, b) = (nl::load(&a), nl::load(&b2));
        nisa::activation(ActFn::Exp, &x, ActivationOpts::new().bias(&b));
    });
    fails_with(ErrorKind::PartitionMismatch, || {
        let (x, b) = (nl::load(&a), nl::load(&b64));
        nisa::activation(ActFn::Exp, &x, ActivationOpts::new().bias(&b));
    });
    let e = fails_with(ErrorKind::DType, || {
        let (x, b) = (nl::load(&a), nl::load(&bi));
        nisa::activation(ActFn::Exp, &x, ActivationOpts::new().bias(&b));
    });
    assert!(
        e.message().contains("err_activation_bias_invalid_type"),
        "{e}"
    );
    let e = fails_with(ErrorKind::DType, || {
        let (x, s) = (nl::load(&a), nl::load(&sb));
        nisa::activation(ActFn::Exp, &x, ActivationOpts::new().scale(&s));
    });
    assert!(
        e.message().contains("err_activation_scale_invalid_type"),
        "{e}"
    );
    let e = load_err(&a, ErrorKind::InvalidArgument, |x| {
        nisa::activation(ActFn::Floor, &x, ActivationOpts::new());
    });
    assert!(e.location().unwrap().file.ends_with("isa_numerics.rs"));
}

// ---------------------------------------------------------------- VectorE: tensor_tensor

#[test]
fn tensor_tensor_add_128x512() {
    let mut rng = Rng(5);
    let (p, f) = (128, 512);
    let (xs, ys) = (rng.sample(p * f), rng.sample(p * f));
    let (a, b) = (hbm(&[p, f], xs.clone()), hbm(&[p, f], ys.clone()));
    let got = run_out(&[p, f], |o| {
        let (x, y) = (nl::load(&a), nl::load(&b));
        nl::store(o, &nisa::tensor_tensor(&x, &y, AluOp::Add, None));
    })
    .unwrap();
    let want: Vec<f32> = xs.iter().zip(&ys).map(|(x, y)| x + y).collect();
    assert_f32_close(&got, &want, "tensor_tensor_add_128x512");
}

#[test]
fn tensor_tensor_every_arithmetic_and_compare_op() {
    let mut rng = Rng(6);
    let (p, f) = (32, 64);
    let xs = rng.vec(p * f, -4.0, 4.0);
    let mut ys = rng.vec(p * f, -4.0, 4.0);
    ys[3] = xs[3]; // exercise equality
    let (a, b) = (hbm(&[p, f], xs.clone()), hbm(&[p, f], ys.clone()));
    type Reference = fn(f32, f32) -> f32;
    let cases: Vec<(AluOp, Reference)> = vec![
        (AluOp::Subtract, |x, y| x - y),
        (AluOp::Multiply, |x, y| x * y),
        (AluOp::Divide, |x, y| x / y),
        (AluOp::Maximum, f32::max),
        (AluOp::Minimum, f32::min),
        (AluOp::Equal, |x, y| (x == y) as i32 as f32),
        (AluOp::Greater, |x, y| (x > y) as i32 as f32),
        (AluOp::LessEqual, |x, y| (x <= y) as i32 as f32),
    ];
    for (op, r) in cases {
        let got = run_out(&[p, f], |o| {
            let (x, y) = (nl::load(&a), nl::load(&b));
            nl::store(o, &nisa::tensor_tensor(&x, &y, op, None));
        })
        .unwrap();
        let want: Vec<f32> = xs.iter().zip(&ys).map(|(&x, &y)| r(x, y)).collect();
        assert_eq!(got, want, "{op}");
    }
}

#[test]
fn tensor_tensor_bf16_inputs_and_output_round() {
    let mut rng = Rng(7);
    let (p, f) = (128, 128);
    let (xs, ys) = (rng.sample(p * f), rng.sample(p * f));
    let (a, b) = (hbm(&[p, f], xs.clone()), hbm(&[p, f], ys.clone()));
    let got = run_out(&[p, f], |o| {
        let (x, y) = (nl::load_as(&a, DType::BF16), nl::load_as(&b, DType::BF16));
        let z = nisa::tensor_tensor(&x, &y, AluOp::Multiply, None);
        assert_eq!(z.dtype(), DType::BF16);
        nl::store(o, &z);
    })
    .unwrap();
    let want: Vec<f32> = xs
        .iter()
        .zip(&ys)
        .map(|(&x, &y)| bf(bf(x) * bf(y)))
        .collect();
    assert_eq!(got, want);
    // fp32 output keeps the exact product of the bf16 inputs.
    let got = run_out(&[p, f], |o| {
        let (x, y) = (nl::load_as(&a, DType::BF16), nl::load_as(&b, DType::BF16));
        nl::store(
            o,
            &nisa::tensor_tensor(&x, &y, AluOp::Multiply, Some(DType::F32)),
        );
    })
    .unwrap();
    let want: Vec<f32> = xs.iter().zip(&ys).map(|(&x, &y)| bf(x) * bf(y)).collect();
    assert_eq!(got, want);
}

#[test]
fn tensor_tensor_bitvec_on_integers() {
    let (p, f) = (4, 16);
    let xs: Vec<i32> = (0..p * f).map(|i| (i * 37 % 251) as i32).collect();
    let ys: Vec<i32> = (0..p * f).map(|i| (i * 11 % 97) as i32 + 1).collect();
    let a = Hbm::<i32>::from_vec(&[p, f], xs.clone()).unwrap();
    let b = Hbm::<i32>::from_vec(&[p, f], ys.clone()).unwrap();
    let got = run_out(&[p, f], |o| {
        let (x, y) = (nl::load(&a), nl::load(&b));
        nl::store(o, &nisa::tensor_tensor(&x, &y, AluOp::BitwiseXor, None));
    })
    .unwrap();
    let want: Vec<f32> = xs.iter().zip(&ys).map(|(x, y)| (x ^ y) as f32).collect();
    assert_eq!(got, want);
}

#[test]
fn scalar_tensor_tensor_fuses_scale_and_residual() {
    let mut rng = Rng(11);
    let (p, f) = (64, 256);
    let (xs, ys, ss) = (rng.sample(p * f), rng.sample(p * f), rng.sample(p));
    let (a, b, s) = (
        hbm(&[p, f], xs.clone()),
        hbm(&[p, f], ys.clone()),
        hbm(&[p, 1], ss.clone()),
    );
    // (x * s[p]) + y with a [P, 1] operand, in fp32.
    let got = run_out(&[p, f], |o| {
        let (x, y, sc) = (nl::load(&a), nl::load(&b), nl::load(&s));
        nl::store(
            o,
            &nisa::scalar_tensor_tensor(&x, AluOp::Multiply, &sc, AluOp::Add, &y, None),
        );
    })
    .unwrap();
    let want: Vec<f32> = (0..p * f).map(|i| xs[i] * ss[i / f] + ys[i]).collect();
    assert_f32_close(&got, &want, "scalar_tensor_tensor (x * s) + y");
    // (x - 3) max y with a scalar operand, rounded once to bf16.
    let got = run_out(&[p, f], |o| {
        let (x, y) = (nl::load(&a), nl::load(&b));
        let r = nisa::scalar_tensor_tensor(
            &x,
            AluOp::Subtract,
            3.0,
            AluOp::Maximum,
            &y,
            Some(DType::BF16),
        );
        assert_eq!(r.dtype(), DType::BF16);
        nl::store(o, &r);
    })
    .unwrap();
    let want: Vec<f32> = (0..p * f).map(|i| bf((xs[i] - 3.0).max(ys[i]))).collect();
    assert_eq!(got, want, "scalar_tensor_tensor rounds once to bf16");
}

#[test]
fn scalar_tensor_tensor_errors() {
    let a = Hbm::<f32>::full([128, 512], 1.0);
    let v = Hbm::<f32>::full([128, 2], 1.0);
    let e = fails_with(ErrorKind::ShapeMismatch, || {
        let (x, s) = (nl::load(&a), nl::load(&v));
        nisa::scalar_tensor_tensor(&x, AluOp::Multiply, &s, AluOp::Add, &x, None);
    });
    assert!(e.message().contains("[128, 1]"), "{}", e.message());
    let e = fails_with(ErrorKind::InvalidArgument, || {
        let x = nl::load(&a);
        nisa::scalar_tensor_tensor(&x, AluOp::Multiply, 2.0, AluOp::BitwiseAnd, &x, None);
    });
    assert!(
        e.message().contains("both be arithmetic"),
        "{}",
        e.message()
    );
}

#[test]
fn tensor_tensor_errors() {
    let a = Hbm::<f32>::full([128, 512], 1.0);
    let b = Hbm::<f32>::full([1, 512], 1.0);
    let c = Hbm::<f32>::full([128, 256], 1.0);
    let e = fails_with(ErrorKind::PartitionMismatch, || {
        let (x, y) = (nl::load(&a), nl::load(&b));
        nisa::tensor_tensor(&x, &y, AluOp::Add, None);
    });
    assert_eq!(
        e.message(),
        "number of partitions (dimension 0 size of a tile) mismatch in parameters (data1[128, 512], data2[1, 512]) of 'tensor_tensor'"
    );
    fails_with(ErrorKind::ShapeMismatch, || {
        let (x, y) = (nl::load(&a), nl::load(&c));
        nisa::tensor_tensor(&x, &y, AluOp::Add, None);
    });
    fails_with(ErrorKind::WrongMemory, || {
        let x = nl::zeros(&[128, 512], DType::F32, nl::PSUM);
        let y = nl::zeros(&[128, 512], DType::F32, nl::PSUM);
        nisa::tensor_tensor(&x, &y, AluOp::Add, None);
    });
    fails_with(ErrorKind::DType, || {
        let (x, y) = (nl::load(&a), nl::load(&a));
        nisa::tensor_tensor(&x, &y, AluOp::BitwiseAnd, None);
    });
    // power runs on GpSimd, which cannot read PSUM.
    fails_with(ErrorKind::WrongMemory, || {
        let x = nl::zeros(&[128, 512], DType::F32, nl::PSUM);
        let y = nl::load(&a);
        nisa::tensor_tensor(&x, &y, AluOp::Power, None);
    });
    // One PSUM input is fine on VectorE.
    let got = run_out(&[128, 512], |o| {
        let x = nl::zeros(&[128, 512], DType::F32, nl::PSUM);
        let y = nl::load(&a);
        nl::store(o, &nisa::tensor_tensor(&x, &y, AluOp::Add, None));
    })
    .unwrap();
    assert!(got.iter().all(|&v| v == 1.0));
}

// ---------------------------------------------------------------- VectorE: tensor_scalar

#[test]
fn tensor_scalar_sdk_cases_64x1024() {
    let mut rng = Rng(8);
    let (p, f) = (64, 1024);
    let (xs, fs) = (rng.sample(p * f), rng.sample(p));
    let (a, fv) = (hbm(&[p, f], xs.clone()), hbm(&[p, 1], fs.clone()));
    // a - 1
    let got = run_out(&[p, f], |o| {
        let x = nl::load(&a);
        nl::store(
            o,
            &nisa::tensor_scalar(&x, AluOp::Subtract, 1.0, TensorScalarOpts::new()),
        );
    })
    .unwrap();
    let want: Vec<f32> = xs.iter().map(|v| v - 1.0).collect();
    assert_f32_close(&got, &want, "tensor_scalar_sdk_cases_64x1024");
    // 1 - c
    let got = map_out(&a, &[p, f], |x| {
        let args = TensorScalarOpts::new().reverse0();
        nisa::tensor_scalar(&x, AluOp::Subtract, 1.0, args)
    });
    let want: Vec<f32> = xs.iter().map(|v| 1.0 - v).collect();
    assert_f32_close(&got, &want, "tensor_scalar_sdk_cases_64x1024");
    // e * f + 2.5 with f a [64, 1] vector
    let got = run_out(&[p, f], |o| {
        let (x, fr) = (nl::load(&a), nl::load(&fv));
        let args = TensorScalarOpts::new().then(AluOp::Add, 2.5);
        nl::store(o, &nisa::tensor_scalar(&x, AluOp::Multiply, &fr, args));
    })
    .unwrap();
    let mut want = vec![0.0; p * f];
    for i in 0..p {
        for j in 0..f {
            want[i * f + j] = xs[i * f + j] * fs[i] + 2.5;
        }
    }
    assert_f32_close(&got, &want, "tensor_scalar_sdk_cases_64x1024");
    // The same on ScalarE and GpSimdE gives the same values; reverse1 and a bf16 output.
    for engine in [Engine::Scalar, Engine::GpSimd] {
        let got = run_out(&[p, f], |o| {
            let (x, fr) = (nl::load(&a), nl::load(&fv));
            let args = TensorScalarOpts::new().then(AluOp::Add, 2.5).engine(engine);
            nl::store(o, &nisa::tensor_scalar(&x, AluOp::Multiply, &fr, args));
        })
        .unwrap();
        assert_f32_close(&got, &want, "tensor_scalar_sdk_cases_64x1024");
    }
    let got = map_out(&a, &[p, f], |x| {
        let args = TensorScalarOpts::new()
            .then(AluOp::Divide, 3.0)
            .reverse1()
            .dtype(DType::BF16);
        nisa::tensor_scalar(&x, AluOp::Maximum, 50.0, args)
    });
    let want: Vec<f32> = xs.iter().map(|&v| bf(3.0 / v.max(50.0))).collect();
    assert_eq!(got, want);
}

#[test]
fn tensor_scalar_errors() {
    let a = Hbm::<f32>::full([64, 128], 2.0);
    let v = Hbm::<f32>::full([32, 1], 2.0);
    load_err(&a, ErrorKind::InvalidArgument, |x| {
        let args = TensorScalarOpts::new().engine(Engine::Scalar);
        nisa::tensor_scalar(&x, AluOp::Subtract, 1.0, args);
    });
    fails_with(ErrorKind::WrongMemory, || {
        let x = nl::zeros(&[64, 128], DType::F32, nl::PSUM);
        let args = TensorScalarOpts::new().engine(Engine::GpSimd);
        nisa::tensor_scalar(&x, AluOp::Add, 1.0, args);
    });
    fails_with(ErrorKind::PartitionMismatch, || {
        let (x, o) = (nl::load(&a), nl::load(&v));
        nisa::tensor_scalar(&x, AluOp::Add, &o, TensorScalarOpts::new());
    });
    load_err(&a, ErrorKind::InvalidArgument, |x| {
        let args = TensorScalarOpts::new().then(AluOp::LeftShift, 1.0);
        nisa::tensor_scalar(&x, AluOp::Add, 1.0, args);
    });
    load_err(&a, ErrorKind::InvalidArgument, |x| {
        nisa::tensor_scalar(
            &x,
            AluOp::Add,
            1.0,
            TensorScalarOpts::new().engine(Engine::Tensor),
        );
    });
}

// ---------------------------------------------------------------- VectorE: reductions

#[test]
fn tensor_reduce_sum_128x512() {
    let (p, f) = (128, 512);
    let (xs, a) = sampled(9, &[p, f]);
    let got = map_out(&a, &[p, 1], |x| {
        let r = nisa::tensor_reduce(AluOp::Add, &x, &[1], false, false, None);
        assert_eq!(r.shape(), &[p, 1]);
        r
    });
    let want: Vec<f32> = xs.chunks(f).map(|r| r.iter().sum()).collect();
    assert_f32_close(&got, &want, "tensor_reduce_sum_128x512");
}

#[test]
fn tensor_reduce_axes_keepdims_negate() {
    let (p, d1, d2) = (128, 8, 64);
    let (xs, a) = sampled(10, &[p, d1, d2]);
    // max over the last axis, negated, keepdims
    let got = map_out(&a, &[p, d1, 1], |x| {
        let r = nisa::tensor_reduce(AluOp::Maximum, &x, &[2], true, true, None);
        assert_eq!(r.shape(), &[p, d1, 1]);
        r
    });
    let want: Vec<f32> = xs
        .chunks(d2)
        .map(|r| -r.iter().copied().fold(f32::MIN, f32::max))
        .collect();
    assert_eq!(got, want);
    // min over both free axes, bf16 output
    let got = map_out(&a, &[p, 1], |x| {
        nisa::tensor_reduce(AluOp::Minimum, &x, &[1, 2], false, false, Some(DType::BF16))
    });
    let want: Vec<f32> = xs
        .chunks(d1 * d2)
        .map(|r| bf(r.iter().copied().fold(f32::MAX, f32::min)))
        .collect();
    assert_eq!(got, want);
    // multiply over a short axis
    let small = hbm(
        &[4, 3],
        vec![1.0, 2.0, 3.0, -1.0, 0.5, 4.0, 2.0, 2.0, 2.0, 0.0, 7.0, 9.0],
    );
    let got = run_out(&[4, 1], |o| {
        let x = nl::load(&small);
        nl::store(
            o,
            &nisa::tensor_reduce(AluOp::Multiply, &x, &[1], false, false, None),
        );
    })
    .unwrap();
    assert_eq!(got, vec![6.0, -2.0, 8.0, 0.0]);
}

#[test]
fn tensor_reduce_errors() {
    let a = Hbm::<f32>::full([128, 8, 64], 1.0);
    load_err(&a, ErrorKind::PartitionReduction, |x| {
        nisa::tensor_reduce(AluOp::Add, &x, &[0], false, false, None);
    });
    load_err(&a, ErrorKind::InvalidArgument, |x| {
        nisa::tensor_reduce(AluOp::Add, &x, &[1], false, false, None);
    });
    load_err(&a, ErrorKind::InvalidArgument, |x| {
        nisa::tensor_reduce(AluOp::Power, &x, &[2], false, false, None);
    });
}

#[test]
fn tensor_partition_reduce_3d_and_4d() {
    let mut rng = Rng(11);
    let (p, a1, a2) = (128, 32, 4);
    let xs = rng.sample(p * a1 * a2);
    let a = hbm(&[p, a1, a2], xs.clone());
    let row = a1 * a2;
    for (op, init, f) in [
        (
            AluOp::Add,
            0.0f64,
            (|s: f64, v: f64| s + v) as fn(f64, f64) -> f64,
        ),
        (AluOp::Maximum, f64::MIN, f64::max),
    ] {
        let got = run_out(&[1, a1, a2], |o| {
            let x = nl::load(&a);
            let r = nisa::tensor_partition_reduce(op, &x, None);
            assert_eq!(r.shape(), &[1, a1, a2]);
            nl::store(o, &r);
        })
        .unwrap();
        let want: Vec<f32> = (0..row)
            .map(|j| (0..p).map(|i| xs[i * row + j] as f64).fold(init, f) as f32)
            .collect();
        assert_f32_close(&got, &want, "tensor_partition_reduce_3d_and_4d");
    }
    let dims = [16, 4, 8, 4];
    let ys = rng.sample(numel(&dims));
    let b = hbm(&dims, ys.clone());
    let got = run_out(&[1, 4, 8, 4], |o| {
        let x = nl::load(&b);
        nl::store(o, &nisa::tensor_partition_reduce(AluOp::Add, &x, None));
    })
    .unwrap();
    let want: Vec<f32> = (0..128)
        .map(|j| (0..16).map(|i| ys[i * 128 + j]).sum())
        .collect();
    assert_f32_close(&got, &want, "tensor_partition_reduce_3d_and_4d");
    fails_with(ErrorKind::WrongMemory, || {
        let x = nl::zeros(&[128, 32], DType::F32, nl::PSUM);
        nisa::tensor_partition_reduce(AluOp::Add, &x, None);
    });
}

// ---------------------------------------------------------------- VectorE: scan, bn, misc

#[test]
fn tensor_tensor_scan_mul_add_128x1024() {
    let mut rng = Rng(12);
    let (p, f) = (128, 1024);
    let d0 = rng.vec(p * f, 0.0, 1.0);
    let d1 = rng.sample(p * f);
    let inits = rng.sample(p);
    let (a, b, c) = (
        hbm(&[p, f], d0.clone()),
        hbm(&[p, f], d1.clone()),
        hbm(&[p, 1], inits.clone()),
    );
    let reference = |init: &dyn Fn(usize) -> f32| {
        let mut out = vec![0.0; p * f];
        for i in 0..p {
            let mut r = init(i);
            for j in 0..f {
                r = d0[i * f + j] * r + d1[i * f + j];
                out[i * f + j] = r;
            }
        }
        out
    };
    // The initial value as the scalar 0, then as the [P, 1] tile `c`.
    for tile_init in [false, true] {
        let got = run_out(&[p, f], |o| {
            let (x, y) = (nl::load(&a), nl::load(&b));
            let i0 = tile_init.then(|| nl::load(&c));
            let init: nl::Operand = i0.as_ref().map_or(0.0.into(), Into::into);
            let s = nisa::tensor_tensor_scan(
                &x,
                &y,
                init,
                AluOp::Multiply,
                AluOp::Add,
                ScanOpts::default(),
            );
            nl::store(o, &s);
        })
        .unwrap();
        let want = reference(&|i| if tile_init { inits[i] } else { 0.0 });
        assert_f32_close(&got, &want, "tensor_tensor_scan_mul_add_128x1024");
    }
    // reverse flags: r = d1 - (r - d0)
    let got = run_out(&[p, f], |o| {
        let (x, y) = (nl::load(&a), nl::load(&b));
        let args = ScanOpts {
            reverse0: true,
            reverse1: true,
            dtype: None,
        };
        nl::store(
            o,
            &nisa::tensor_tensor_scan(&x, &y, 1.0, AluOp::Subtract, AluOp::Subtract, args),
        );
    })
    .unwrap();
    let mut want = vec![0.0; p * f];
    for i in 0..p {
        let mut r = 1.0f32;
        for j in 0..f {
            r = d1[i * f + j] - (r - d0[i * f + j]);
            want[i * f + j] = r;
        }
    }
    assert_f32_close(&got, &want, "tensor_tensor_scan_mul_add_128x1024");
}

/// Population mean and variance in f64.
fn mean_var(xs: &[f32]) -> (f64, f64) {
    let n = xs.len() as f64;
    let m = xs.iter().map(|&v| v as f64).sum::<f64>() / n;
    let v = xs.iter().map(|&x| (x as f64 - m).powi(2)).sum::<f64>() / n;
    (m, v)
}

#[test]
fn bn_stats_layout_even_odd() {
    let a = hbm(&[1, 5], vec![1.0, 2.0, 3.0, 4.0, 5.0]);
    let got = map_out(&a, &[1, 6], |x| nisa::bn_stats(&x, None));
    // even: 1, 3, 5 -> count 3, mean 3, var*count 8; odd: 2, 4 -> count 2, mean 3, 2.
    assert_eq!(got, vec![3.0, 3.0, 8.0, 2.0, 3.0, 2.0]);
}

#[test]
fn bn_stats_bn_aggr_128x128() {
    let (p, f) = (128, 128);
    let (xs, a) = sampled(13, &[p, f]);
    let got = map_out(&a, &[p, 2], |x| {
        let st = nisa::bn_stats(&x, None);
        assert_eq!(st.shape(), &[p, 6]);
        nisa::bn_aggr(&st, None)
    });
    let want: Vec<f32> = xs
        .chunks(f)
        .flat_map(|r| {
            let (m, v) = mean_var(r);
            [m as f32, v as f32]
        })
        .collect();
    assert_f32_close(&got, &want, "bn_stats_bn_aggr_128x128");
}

#[test]
fn bn_stats_bn_aggr_128x1024_in_512_pieces() {
    let (p, f) = (128, 1024);
    let (xs, a) = sampled(14, &[p, f]);
    let got = run_out(&[p, 2], |o| {
        let stats = nl::ndarray(&[p, 12], DType::F32, nl::SBUF);
        for k in 0..2 {
            let x = nl::load(a.slice((.., k * 512..(k + 1) * 512)));
            let st = nisa::bn_stats(&x, None);
            nl::assign(stats.slice((.., k * 6..(k + 1) * 6)), &st);
        }
        nl::store(o, &nisa::bn_aggr(&stats, None));
    })
    .unwrap();
    let want: Vec<f32> = xs
        .chunks(f)
        .flat_map(|r| {
            let (m, v) = mean_var(r);
            [m as f32, v as f32]
        })
        .collect();
    assert_f32_close(&got, &want, "bn_stats_bn_aggr_128x1024_in_512_pieces");
    let e = load_err(&a, ErrorKind::InvalidArgument, |x| {
        nisa::bn_stats(&x, None);
    });
    assert!(e.message().contains("512"), "{e}");
    fails_with(ErrorKind::InvalidArgument, || {
        let x = nl::load(a.slice((.., 0..8)));
        nisa::bn_aggr(&x, None);
    });
}

#[test]
fn reciprocal_128x512() {
    let (p, f) = (128, 512);
    let (xs, a) = sampled(15, &[p, f]);
    let got = map_out(&a, &[p, f], |x| nisa::reciprocal(&x, None));
    let want: Vec<f32> = xs.iter().map(|v| 1.0 / v).collect();
    assert_f32_close(&got, &want, "reciprocal_128x512");
}

#[test]
fn memset_128x128_f32_and_bf16() {
    let got = run_out(&[128, 256], |o| {
        let a = nisa::memset(&[128, 128], 0.2, DType::F32, Engine::Vector);
        let b = nisa::memset(&[128, 128], 0.2, DType::BF16, Engine::GpSimd);
        nl::store(o.slice((.., 0..128)), &a);
        nl::store(o.slice((.., 128..256)), &b);
    })
    .unwrap();
    for r in got.chunks(256) {
        assert!(r[..128].iter().all(|&v| v == 0.2f32));
        assert!(r[128..].iter().all(|&v| v == bf(0.2)));
    }
    assert_ne!(bf(0.2), 0.2f32);
    fails_with(ErrorKind::InvalidArgument, || {
        nisa::memset(&[128, 128], 0.0, DType::F32, Engine::Tensor);
    });
}

#[test]
fn tensor_copy_8x8_casts_and_engines() {
    let (xs, a) = sampled(16, &[8, 8]);
    for engine in [Engine::Vector, Engine::Scalar, Engine::GpSimd] {
        let got = run_out(&[8, 8], |o| {
            let x = nl::load(&a);
            nl::store(o, &nisa::tensor_copy(&x, Some(DType::BF16), engine));
        })
        .unwrap();
        let want: Vec<f32> = xs.iter().map(|&v| bf(v)).collect();
        assert_eq!(got, want);
    }
    let got = map_out(&a, &[8, 8], |x| nisa::tensor_copy(&x, None, Engine::Vector));
    assert_eq!(got, xs);
    fails_with(ErrorKind::WrongMemory, || {
        let x = nl::zeros(&[8, 8], DType::F32, nl::PSUM);
        nisa::tensor_copy(&x, None, Engine::GpSimd);
    });
}

// ---------------------------------------------------------------- transposes

#[test]
fn nc_transpose_tensor_128x64_and_vector_32x2() {
    let mut rng = Rng(17);
    let xs = rng.sample(128 * 64);
    let a = hbm(&[128, 64], xs.clone());
    let got = map_out(&a, &[64, 128], |x| {
        let t = nisa::nc_transpose(&x, Engine::Tensor);
        assert_eq!(t.mem(), MemKind::Psum);
        t
    });
    for i in 0..128 {
        for j in 0..64 {
            assert_eq!(got[j * 128 + i], xs[i * 64 + j]);
        }
    }
    let ys = rng.sample(64);
    let b = hbm(&[32, 2], ys.clone());
    let got = run_out(&[2, 32], |o| {
        let x = nl::load(&b);
        let t = nisa::nc_transpose(&x, Engine::Vector);
        assert_eq!(t.mem(), MemKind::Sbuf);
        nl::store(o, &t);
    })
    .unwrap();
    for i in 0..32 {
        for j in 0..2 {
            assert_eq!(got[j * 32 + i], ys[i * 2 + j]);
        }
    }
    load_err(&a, ErrorKind::InvalidArgument, |x| {
        nisa::nc_transpose(&x, Engine::Vector);
    });
    fails_with(ErrorKind::WrongMemory, || {
        let x = nl::zeros(&[64, 64], DType::F32, nl::PSUM);
        nisa::nc_transpose(&x, Engine::Tensor);
    });
}

// ---------------------------------------------------------------- GpSimdE: iota, affine_select

#[test]
fn iota_patterns_and_casts() {
    let got = run_out(&[128, 512], |o| {
        let t = nisa::iota(&AffineExpr::new(128, 512).free(1, 512), DType::F32);
        nl::store(o, &t);
    })
    .unwrap();
    assert!(got.iter().enumerate().all(|(i, &v)| v == i as f32));
    // Two free dims, offset, negative steps, int32 and bf16 outputs.
    let e = AffineExpr::new(4, -3).free(10, 3).free(-1, 5).offset(7);
    let want: Vec<f32> = (0..4)
        .flat_map(|p| {
            (0..3).flat_map(move |a| (0..5).map(move |b| (7 - 3 * p + 10 * a - b) as f32))
        })
        .collect();
    let got = run_out(&[4, 15], |o| {
        let t = nisa::iota(&e, DType::I32);
        assert_eq!(t.shape(), &[4, 3, 5]);
        nl::store(o, &t);
    })
    .unwrap();
    assert_eq!(got, want);
    let got = run_out(&[1, 3], |o| {
        let t = nisa::iota(&AffineExpr::new(1, 0).free(1, 3).offset(257), DType::BF16);
        nl::store(o, &t);
    })
    .unwrap();
    assert_eq!(got, vec![256.0, 258.0, 260.0]); // bf16 has 8 significant bits
}

#[test]
fn affine_select_causal_mask_128x128() {
    let (xs, a) = sampled(18, &[128, 128]);
    let got = run_out(&[128, 128], |o| {
        let x = nl::load(&a);
        let mask = AffineExpr::new(128, 1).free(-1, 128);
        nl::store(
            o,
            &nisa::affine_select(&mask, AluOp::GreaterEqual, &x, -9984.0, None),
        );
    })
    .unwrap();
    for i in 0..128 {
        for j in 0..128 {
            let want = if i >= j { xs[i * 128 + j] } else { -9984.0 };
            assert_eq!(got[i * 128 + j], want, "({i}, {j})");
        }
    }
    load_err(&a, ErrorKind::ShapeMismatch, |x| {
        nisa::affine_select(
            &AffineExpr::new(128, 1).free(-1, 64),
            AluOp::Less,
            &x,
            0.0,
            None,
        );
    });
    load_err(&a, ErrorKind::InvalidArgument, |x| {
        nisa::affine_select(
            &AffineExpr::new(128, 1).free(-1, 128),
            AluOp::Add,
            &x,
            0.0,
            None,
        );
    });
}

// ---------------------------------------------------------------- DMA

#[test]
fn dma_copy_every_direction_with_cast() {
    let (xs, a) = sampled(19, &[128, 256]);
    // HBM -> SBUF (cast to bf16), SBUF -> SBUF, SBUF -> HBM, HBM -> HBM.
    let mut c = Hbm::<f32>::zeros([128, 256]);
    let got = {
        let co = c.as_output();
        run_out(&[128, 256], |o| {
            let t = nl::ndarray(&[128, 256], DType::BF16, nl::SBUF);
            nisa::dma_copy(&t, &a);
            let u = nl::ndarray(&[128, 256], DType::F32, nl::SBUF);
            nisa::dma_copy(&u, &t);
            nisa::dma_copy(o, &u);
            nisa::dma_copy(&co, &a);
        })
        .unwrap()
    };
    let want: Vec<f32> = xs.iter().map(|&v| bf(v)).collect();
    assert_eq!(got, want);
    assert_eq!(c.to_f32_vec().unwrap(), xs);
    // A slice of a tile from a slice of HBM.
    let got = run_out(&[64, 32], |o| {
        let t = nl::zeros(&[128, 64], DType::F32, nl::SBUF);
        nisa::dma_copy(t.slice((64..128, 32..64)), a.slice((0..64, 100..132)));
        nisa::dma_copy(o, t.slice((64..128, 32..64)));
    })
    .unwrap();
    for i in 0..64 {
        for j in 0..32 {
            assert_eq!(got[i * 32 + j], xs[i * 256 + 100 + j]);
        }
    }
}

#[test]
fn dma_copy_errors_and_races() {
    let a = Hbm::<f32>::full([128, 64], 1.0);
    fails_with(ErrorKind::WrongMemory, || {
        let t = nl::zeros(&[128, 64], DType::F32, nl::PSUM);
        nisa::dma_copy(&t, &a);
    });
    fails_with(ErrorKind::ShapeMismatch, || {
        let t = nl::ndarray(&[128, 32], DType::F32, nl::SBUF);
        nisa::dma_copy(&t, &a);
    });
    // Reading a tile nothing wrote.
    fails_with(ErrorKind::UninitializedRead, || {
        let t = nl::ndarray(&[128, 64], DType::F32, nl::SBUF);
        let u = nl::ndarray(&[128, 64], DType::F32, nl::SBUF);
        nisa::dma_copy(&u, &t);
    });
    // Two instances writing the same HBM rows.
    let mut c = Hbm::<f32>::zeros([128, 64]);
    let co = c.as_output();
    let e = Launch::new(2)
        .run(|| nisa::dma_copy(&co, &a))
        .expect_err("race");
    assert_eq!(e.kind(), ErrorKind::OutputDependency, "{e}");
}

#[test]
fn typed_tiles_work_with_nisa() {
    let (xs, a) = sampled(20, &[128, 64]);
    let got = run_out(&[128, 64], |o| {
        let t = Sbuf::<f32, 128, 64>::ndarray();
        nisa::dma_copy(&t, &a);
        let y = nisa::tensor_scalar(&t, AluOp::Multiply, 2.0, TensorScalarOpts::new());
        let z = Sbuf::<f32, 128, 64>::from_tile(y);
        let w = nisa::activation(ActFn::Relu, &z, ActivationOpts::new().scale(-1.0));
        nisa::dma_copy(o, &w);
    })
    .unwrap();
    assert!(got.iter().all(|&v| v == 0.0));
    let got = run_out(&[128, 64], |o| {
        let t = Sbuf::<f32, 128, 64>::ndarray();
        nisa::dma_copy(&t, &a);
        let u = Sbuf::<bf16, 128, 64>::ndarray();
        nisa::dma_copy(&u, &t);
        nisa::dma_copy(o, &u);
    })
    .unwrap();
    assert_eq!(got, xs.iter().map(|&v| bf(v)).collect::<Vec<_>>());
}
