//! The NKI 0.7 ALU operators of issue 21's last batch, each against a plain-Rust reference
//! written from its documentation:
//!
//! - `tensor_scalar` / `tensor_scalar_reduce` with a unary `op0` (the operator table's
//!   "Arithmetic Unary" rows `abs`, `square`, `relu`, `rsqrt`, `reciprocal`; `operand0` must be
//!   None or 0; `square` / `relu` on trn3 only; GpSimdE for `rsqrt` only);
//! - `nl.abs_max` / `nl.abs_min` and the `abs_max` / `abs_min` operators (trn3 only): the
//!   value of larger / smaller magnitude *with its sign*, `y` on a tie (the doc's examples);
//! - `prelu` as `activate2`'s function with `relu_param`;
//! - `memset` of the x4 packed types: only value 0;
//! - `nisa.dropout(dst, data, prob)`, the dst-first form of `nl.dropout`.
//!
//! Edge values throughout: NaN, +-inf, -0.0, zero, ties.

use nki_core::nisa::{AccumOpts, ActFn, Activate2Opts, AluOp, Engine, TensorScalarOpts};
use nki_core::prelude::*;

mod common;
use common::{fails_on, hbm, zeros, Rng};

/// Runs `body` once on `target`, writing into a fresh f32 output of `shape`; returns it.
fn run_on(target: Target, shape: &[usize], body: impl Fn(&HbmOut<'_, f32>) + Sync) -> Vec<f32> {
    let mut out = zeros::<f32>(shape);
    {
        let o = out.as_output();
        Launch::new(1).target(target).run(|| body(&o)).unwrap();
    }
    out.to_vec().unwrap()
}

/// Bit-exact equality, NaN equal to NaN, -0.0 different from 0.0.
fn assert_bits(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let same = (g.is_nan() && w.is_nan()) || g.to_bits() == w.to_bits();
        assert!(same, "{what}[{i}]: got {g:e}, want {w:e}");
    }
}

/// Edge values first (NaN, +-inf, -0.0, 0.0, tiny and huge magnitudes), then random ones.
fn edge_values(n: usize, seed: u64) -> Vec<f32> {
    let mut v = vec![
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        -0.0,
        0.0,
        1.0,
        -1.0,
        0.25,
        -4.0,
        1e-30,
        -1e30,
        3.0e38,
        f32::MIN_POSITIVE,
        -2.5,
    ];
    let mut rng = Rng(seed);
    v.extend(rng.vec(n - v.len(), -6.0, 6.0));
    v
}

// ---- the doc's definitions, written out ------------------------------------------------

/// The unary operators as the operator table names them, computed exactly and rounded once.
fn unary_ref(op: AluOp, x: f32) -> f32 {
    let d = x as f64;
    match op {
        AluOp::Abs => x.abs(),
        AluOp::Square => (d * d) as f32,
        // relu(x) = max(x, 0); NaN stays NaN.
        AluOp::Relu => {
            if x.is_nan() || x > 0.0 {
                x
            } else {
                0.0
            }
        }
        AluOp::Rsqrt => (1.0 / d.sqrt()) as f32,
        AluOp::Reciprocal => (1.0 / d) as f32,
        _ => unreachable!("not a unary operator: {op:?}"),
    }
}

/// `nl.abs_max(x, y)`: "x if |x| > |y|, else y".
fn abs_max_ref(x: f32, y: f32) -> f32 {
    if x.abs() > y.abs() {
        x
    } else {
        y
    }
}

/// `nl.abs_min(x, y)`: "x if |x| < |y|, else y".
fn abs_min_ref(x: f32, y: f32) -> f32 {
    if x.abs() < y.abs() {
        x
    } else {
        y
    }
}

const UNARY: [AluOp; 5] = [
    AluOp::Abs,
    AluOp::Square,
    AluOp::Relu,
    AluOp::Rsqrt,
    AluOp::Reciprocal,
];

// ---- tensor_scalar with a unary op0 ------------------------------------------------------

#[test]
fn tensor_scalar_unary_op0_matches_the_operator_table_on_trn3() {
    let (p, f) = (4, 16);
    let xs = edge_values(p * f, 5);
    let xh = hbm(&[p, f], xs.clone());
    for op in UNARY {
        // One operator, operand0 = 0.
        let got = run_on(Target::Trn3, &[p, f], |o| {
            let x = nl::load(&xh);
            let d = nl::ndarray(&[p, f], DType::F32, nl::SBUF);
            nisa::tensor_scalar(&d, &x, op, 0.0, None);
            nl::store(o, &d);
        });
        let want: Vec<f32> = xs.iter().map(|&x| unary_ref(op, x)).collect();
        assert_bits(&got, &want, &format!("{op}"));
        // With op1 (multiply by 2, then subtract from 1 reversed), and reverse0 set: the
        // unary op0 has no second operand to swap.
        let got = run_on(Target::Trn3, &[p, f], |o| {
            let x = nl::load(&xh);
            let d = nl::ndarray(&[p, f], DType::F32, nl::SBUF);
            let args = TensorScalarOpts::new()
                .reverse0()
                .then(AluOp::Subtract, 1.0)
                .reverse1();
            nisa::tensor_scalar(&d, &x, op, 0, args);
            nl::store(o, &d);
        });
        let want: Vec<f32> = xs.iter().map(|&x| 1.0 - unary_ref(op, x)).collect();
        assert_bits(&got, &want, &format!("{op} then 1 - t"));
    }
}

#[test]
fn tensor_scalar_unary_op0_rounds_to_a_bf16_dst() {
    let (p, f) = (2, 14);
    let xs = edge_values(p * f, 9);
    let xh = hbm(&[p, f], xs.clone());
    let got = run_on(Target::Trn3, &[p, f], |o| {
        let x = nl::load(&xh);
        let d = nl::ndarray(&[p, f], DType::BF16, nl::SBUF);
        nisa::tensor_scalar(&d, &x, AluOp::Square, 0.0, None);
        nl::store(o, &d);
    });
    // RNE to bfloat16 of the fp32 square (NaN stays NaN, an overflow is inf).
    let want: Vec<f32> = xs
        .iter()
        .map(|&x| half::bf16::from_f32(unary_ref(AluOp::Square, x)).to_f32())
        .collect();
    assert_bits(&got, &want, "square to bf16");
}

#[test]
fn the_unary_operators_before_trn3_and_on_gpsimd() {
    let (p, f) = (2, 14);
    let xs = edge_values(p * f, 11);
    let xh = hbm(&[p, f], xs.clone());
    // abs, rsqrt and reciprocal are not NeuronCore-v4 operators: they run on trn2.
    for op in [AluOp::Abs, AluOp::Rsqrt, AluOp::Reciprocal] {
        let got = run_on(Target::Trn2, &[p, f], |o| {
            let x = nl::load(&xh);
            let d = nl::ndarray(&[p, f], DType::F32, nl::SBUF);
            nisa::tensor_scalar(&d, &x, op, 0.0, None);
            nl::store(o, &d);
        });
        let want: Vec<f32> = xs.iter().map(|&x| unary_ref(op, x)).collect();
        assert_bits(&got, &want, &format!("{op} on trn2"));
    }
    // square and relu are trn3's: on trn2 an error naming the NeuronCore version.
    for op in [AluOp::Square, AluOp::Relu] {
        let e = fails_on(Target::Trn2, ErrorKind::InvalidArgument, || {
            let x = nl::load(&xh);
            let d = nl::ndarray(&[p, f], DType::F32, nl::SBUF);
            nisa::tensor_scalar(&d, &x, op, 0.0, None);
        });
        let msg = e.to_string();
        assert!(
            msg.contains("NeuronCore-v4") && msg.contains(op.name()),
            "{msg}"
        );
    }
    // GpSimdE: rsqrt (the documented case) gives the same values; abs is an error.
    let got = run_on(Target::Trn2, &[p, f], |o| {
        let x = nl::load(&xh);
        let d = nl::ndarray(&[p, f], DType::F32, nl::SBUF);
        let args = TensorScalarOpts::new().engine(Engine::GpSimd);
        nisa::tensor_scalar(&d, &x, AluOp::Rsqrt, 0.0, args);
        nl::store(o, &d);
    });
    let want: Vec<f32> = xs.iter().map(|&x| unary_ref(AluOp::Rsqrt, x)).collect();
    assert_bits(&got, &want, "rsqrt on GpSimdE");
    let e = fails_on(Target::Trn3, ErrorKind::InvalidArgument, || {
        let x = nl::load(&xh);
        let d = nl::ndarray(&[p, f], DType::F32, nl::SBUF);
        let args = TensorScalarOpts::new().engine(Engine::GpSimd);
        nisa::tensor_scalar(&d, &x, AluOp::Abs, 0.0, args);
    });
    assert!(e.to_string().contains("only for rsqrt"), "{e}");
}

#[test]
fn a_unary_op0_needs_operand0_zero_and_is_no_op1() {
    let (p, f) = (4, 8);
    let xh = hbm(&[p, f], vec![1.5; p * f]);
    let vh = hbm(&[p, 1], vec![0.0; p]);
    let e = fails_on(Target::Trn3, ErrorKind::InvalidArgument, || {
        let x = nl::load(&xh);
        nisa::tensor_scalar(&x, &x, AluOp::Abs, 2.0, None);
    });
    assert!(e.to_string().contains("must be None or 0"), "{e}");
    // A tile operand0 is not None or 0, even a tile of zeros.
    let e = fails_on(Target::Trn3, ErrorKind::InvalidArgument, || {
        let (x, v) = (nl::load(&xh), nl::load(&vh));
        nisa::tensor_scalar(&x, &x, AluOp::Relu, &v, None);
    });
    assert!(e.to_string().contains("must be None or 0"), "{e}");
    let e = fails_on(Target::Trn3, ErrorKind::InvalidArgument, || {
        let x = nl::load(&xh);
        let args = TensorScalarOpts::new().then(AluOp::Square, 0.0);
        nisa::tensor_scalar(&x, &x, AluOp::Add, 1.0, args);
    });
    assert!(e.to_string().contains("unary operator"), "{e}");
    // Nor in an instruction of two data operands.
    let e = fails_on(Target::Trn3, ErrorKind::InvalidArgument, || {
        let x = nl::load(&xh);
        nisa::tensor_tensor(&x, &x, &x, AluOp::Abs, None);
    });
    assert!(e.to_string().contains("unary operator"), "{e}");
    // ScalarE keeps its (multiply, add) combinations.
    fails_on(Target::Trn3, ErrorKind::InvalidArgument, || {
        let x = nl::load(&xh);
        let args = TensorScalarOpts::new().engine(Engine::Scalar);
        nisa::tensor_scalar(&x, &x, AluOp::Abs, 0.0, args);
    });
}

#[test]
fn tensor_scalar_reduce_sums_squares_on_trn3() {
    let (p, f) = (8, 24);
    let mut rng = Rng(17);
    let mut xs = rng.vec(p * f, -3.0, 3.0);
    xs[3] = -0.0;
    let xh = hbm(&[p, f], xs.clone());
    let mut out = (Hbm::<f32>::zeros([p, f]), Hbm::<f32>::zeros([p, 1]));
    {
        let (o, r) = (out.0.as_output(), out.1.as_output());
        Launch::new(1)
            .target(Target::Trn3)
            .run(|| {
                let x = nl::load(&xh);
                let d = nl::ndarray(&[p, f], DType::F32, nl::SBUF);
                let rr = nl::ndarray(&[p, 1], DType::F32, nl::SBUF);
                let args = AccumOpts::new().reduce_res(&rr);
                nisa::tensor_scalar_reduce(&d, &x, AluOp::Square, 0.0, AluOp::Add, args);
                nl::store(&o, &d);
                nl::store(&r, &rr);
            })
            .unwrap();
    }
    let (got, sums) = (out.0.to_vec().unwrap(), out.1.to_vec().unwrap());
    let want: Vec<f32> = xs.iter().map(|&x| unary_ref(AluOp::Square, x)).collect();
    assert_bits(&got, &want, "squares");
    for r in 0..p {
        let s: f64 = want[r * f..(r + 1) * f].iter().map(|&v| v as f64).sum();
        let rel = ((sums[r] as f64 - s) / s).abs();
        assert!(rel < 1e-6, "row {r}: {} vs {s}", sums[r]);
    }
    fails_on(Target::Trn2, ErrorKind::InvalidArgument, || {
        let x = nl::load(&xh);
        nisa::tensor_scalar_reduce(&x, &x, AluOp::Relu, 0.0, AluOp::Add, None);
    });
}

// ---- abs_max / abs_min -------------------------------------------------------------------

/// Pairs covering ties of both signs, NaN on either side, infinities and signed zeros.
fn abs_pairs() -> (Vec<f32>, Vec<f32>) {
    let xs = vec![
        -5.0,
        1.0,
        -1.0,
        3.0,
        f32::NAN,
        2.0,
        f32::NEG_INFINITY,
        -0.0,
        0.0,
        7.5,
        -2.0,
        f32::INFINITY,
    ];
    let ys = vec![
        3.0,
        -1.0,
        1.0,
        -3.0,
        2.0,
        f32::NAN,
        f32::INFINITY,
        0.0,
        -0.0,
        -7.25,
        2.0,
        -1.0,
    ];
    (xs, ys)
}

#[test]
fn nl_abs_max_and_abs_min_keep_the_sign_and_give_y_on_ties() {
    let (xs, ys) = abs_pairs();
    let n = xs.len();
    let (xh, yh) = (hbm(&[1, n], xs.clone()), hbm(&[1, n], ys.clone()));
    for (max, name) in [(true, "abs_max"), (false, "abs_min")] {
        let got = run_on(Target::Trn3, &[1, n], |o| {
            let (x, y) = (nl::load(&xh), nl::load(&yh));
            let r = if max {
                nl::abs_max(&x, &y)
            } else {
                nl::abs_min(&x, &y)
            };
            nl::store(o, &r);
        });
        let want: Vec<f32> = xs
            .iter()
            .zip(&ys)
            .map(|(&x, &y)| {
                if max {
                    abs_max_ref(x, y)
                } else {
                    abs_min_ref(x, y)
                }
            })
            .collect();
        assert_bits(&got, &want, name);
    }
    // The doc's examples: abs_max(-5, 3) = -5, abs_min(5, -3) = -3, abs_max(1, -1) = -1.
    assert_eq!(abs_max_ref(-5.0, 3.0), -5.0);
    assert_eq!(abs_min_ref(5.0, -3.0), -3.0);
    assert_eq!(abs_max_ref(1.0, -1.0), -1.0);
    // As tensor_scalar's op0 with a per-partition operand0.
    let (p, f) = (4, 12);
    let mut rng = Rng(29);
    let mut data = rng.vec(p * f, -4.0, 4.0);
    data[0] = f32::NAN;
    data[1] = -2.0;
    let ops = vec![2.0, -1.0, f32::INFINITY, -0.0];
    let (dh, oh) = (hbm(&[p, f], data.clone()), hbm(&[p, 1], ops.clone()));
    for (op, rf) in [
        (AluOp::AbsMax, abs_max_ref as fn(f32, f32) -> f32),
        (AluOp::AbsMin, abs_min_ref),
    ] {
        let got = run_on(Target::Trn3, &[p, f], |o| {
            let (x, v) = (nl::load(&dh), nl::load(&oh));
            let d = nl::ndarray(&[p, f], DType::F32, nl::SBUF);
            nisa::tensor_scalar(&d, &x, op, &v, None);
            nl::store(o, &d);
        });
        let want: Vec<f32> = (0..p * f).map(|i| rf(data[i], ops[i / f])).collect();
        assert_bits(&got, &want, op.name());
    }
}

#[test]
fn abs_max_and_abs_min_are_trn3_only() {
    let xh = hbm(&[2, 4], vec![1.0; 8]);
    for target in [Target::Trn1, Target::Trn2] {
        let e = fails_on(target, ErrorKind::InvalidArgument, || {
            let x = nl::load(&xh);
            nl::abs_max(&x, &x);
        });
        assert!(e.to_string().contains("NeuronCore-v4"), "{e}");
        fails_on(target, ErrorKind::InvalidArgument, || {
            let x = nl::load(&xh);
            nl::abs_min(&x, 2.0);
        });
        fails_on(target, ErrorKind::InvalidArgument, || {
            let x = nl::load(&xh);
            nisa::tensor_scalar(&x, &x, AluOp::AbsMax, 1.0, None);
        });
        fails_on(target, ErrorKind::InvalidArgument, || {
            let x = nl::load(&xh);
            nisa::tensor_tensor(&x, &x, &x, AluOp::AbsMin, None);
        });
    }
}

// ---- prelu -------------------------------------------------------------------------------

#[test]
fn activate2_prelu_takes_its_slope_from_relu_param() {
    let (p, f) = (4, 16);
    let xs = edge_values(p * f, 41);
    let alphas = vec![0.25, -0.5, 0.0, 3.0];
    let (xh, ah) = (hbm(&[p, f], xs.clone()), hbm(&[p, 1], alphas.clone()));
    // PReLU(v) = v for v >= 0, alpha * v below; v = x * 2 (op0 multiply, op1 bypass).
    let prelu = |v: f32, a: f32| if v < 0.0 { a * v } else { v };
    let got = run_on(Target::Trn3, &[p, f], |o| {
        let (x, a) = (nl::load(&xh), nl::load(&ah));
        let d = nl::ndarray(&[p, f], DType::F32, nl::SBUF);
        let args = Activate2Opts::new().relu_param(&a);
        nisa::activate2(
            &d,
            ActFn::Prelu,
            &x,
            2.0,
            0.0,
            AluOp::Multiply,
            AluOp::Bypass,
            args,
        );
        nl::store(o, &d);
    });
    let want: Vec<f32> = (0..p * f)
        .map(|i| prelu(xs[i] * 2.0, alphas[i / f]))
        .collect();
    assert_bits(&got, &want, "prelu, vector slope");
    // A scalar slope; without relu_param the slope is NKI's default 0.
    for (slope, given) in [(0.1f32, true), (0.0, false)] {
        let got = run_on(Target::Trn3, &[p, f], |o| {
            let x = nl::load(&xh);
            let d = nl::ndarray(&[p, f], DType::F32, nl::SBUF);
            let mut args = Activate2Opts::new();
            if given {
                args = args.relu_param(slope);
            }
            nisa::activate2(
                &d,
                ActFn::Prelu,
                &x,
                0.0,
                0.0,
                AluOp::Bypass,
                AluOp::Bypass,
                args,
            );
            nl::store(o, &d);
        });
        let want: Vec<f32> = xs.iter().map(|&x| prelu(x, slope)).collect();
        assert_bits(&got, &want, &format!("prelu, slope {slope}"));
    }
    // activation has no relu_param: prelu there is an error that points to activate2.
    let e = fails_on(Target::Trn3, ErrorKind::InvalidArgument, || {
        let x = nl::load(&xh);
        nisa::activation(&x, ActFn::Prelu, &x, None);
    });
    assert!(e.to_string().contains("activate2"), "{e}");
}

// ---- memset of the x4 packed types --------------------------------------------------------

#[test]
fn memset_of_an_x4_packed_type_takes_only_zero() {
    for dtype in [DType::F8E4M3FNx4, DType::F8E5M2x4, DType::F4E2M1FNx4] {
        // Zero: every word is 0.
        let mut out = Hbm::<u32>::zeros([4, 8]);
        {
            let o = out.as_output();
            Launch::new(1)
                .target(Target::Trn3)
                .run(|| {
                    let t = nl::ndarray(&[4, 8], dtype, nl::SBUF);
                    nisa::memset(&t, 0.0, None);
                    let w = nl::ndarray(&[4, 8], DType::U32, nl::SBUF);
                    nisa::tensor_copy(&w, &t, None);
                    nl::store(&o, &w);
                })
                .unwrap();
        }
        assert!(out.to_vec().unwrap().iter().all(|&w| w == 0), "{dtype}");
        let e = fails_on(Target::Trn3, ErrorKind::InvalidArgument, || {
            let t = nl::ndarray(&[4, 8], dtype, nl::SBUF);
            nisa::memset(&t, 1.0, None);
        });
        assert!(e.to_string().contains("only value 0"), "{e}");
    }
}

// ---- nisa.dropout -------------------------------------------------------------------------

#[test]
fn nisa_dropout_writes_what_nl_dropout_returns() {
    let (p, f) = (16, 40);
    let xs: Vec<f32> = (0..p * f).map(|i| 1.0 + i as f32).collect();
    let rates: Vec<f32> = (0..p).map(|r| r as f32 / (p - 1) as f32).collect();
    let (xh, rh) = (hbm(&[p, f], xs.clone()), hbm(&[p, 1], rates.clone()));
    // Each instance's stream starts fresh: the first draw of both forms is the same.
    let via_nl = run_on(Target::Trn2, &[p, f], |o| {
        let (x, r) = (nl::load(&xh), nl::load(&rh));
        nl::store(o, &nl::dropout(&x, &r));
    });
    let via_nisa = run_on(Target::Trn2, &[p, f], |o| {
        let (x, r) = (nl::load(&xh), nl::load(&rh));
        let d = nl::ndarray(&[p, f], DType::F32, nl::SBUF);
        nisa::dropout(&d, &x, &r);
        nl::store(o, &d);
    });
    assert_bits(&via_nisa, &via_nl, "nisa.dropout vs nl.dropout");
    // Rate 0 (partition 0) keeps every element, rate 1 (the last) drops every one; the rest
    // keep their value or are 0.
    for (i, (&g, &x)) in via_nisa.iter().zip(&xs).enumerate() {
        let r = i / f;
        if r == 0 {
            assert_eq!(g, x);
        } else if r == p - 1 {
            assert_eq!(g, 0.0);
        } else {
            assert!(g == x || g == 0.0, "[{i}] {g}");
        }
    }
    let dropped = via_nisa.iter().filter(|&&g| g == 0.0).count();
    assert!(dropped > p * f / 4 && dropped < 3 * p * f / 4, "{dropped}");
    // dst takes data's dtype; integer data takes float32 probabilities only.
    let e = fails_on(Target::Trn2, ErrorKind::DType, || {
        let x = nl::load(&xh);
        let d = nl::ndarray(&[p, f], DType::BF16, nl::SBUF);
        nisa::dropout(&d, &x, 0.5);
    });
    assert!(e.to_string().contains("dtype"), "{e}");
    fails_on(Target::Trn2, ErrorKind::DType, || {
        let x = nl::load_as(&xh, DType::I32);
        let r = nl::load_as(&rh, DType::BF16);
        let d = nl::ndarray(&[p, f], DType::I32, nl::SBUF);
        nisa::dropout(&d, &x, &r);
    });
}

/// NKI 0.7's `tensor_scalar(engine=gpsimd)` is "only allowed for rsqrt": the dst-first form
/// rejects a binary `op0` on GpSimdE (naming the rule and the line), while the Beta-1 form
/// (`nisa::classic::tensor_scalar`, whose documentation has no such rule) keeps computing it
/// there, with the same values as on VectorE.
#[test]
fn gpsimd_tensor_scalar_is_rsqrt_only_in_07_but_not_in_beta1() {
    let (p, f) = (8, 16);
    let xs = edge_values(p * f, 29);
    let xh = hbm(&[p, f], xs.clone());
    for op in [AluOp::Add, AluOp::Multiply, AluOp::Maximum] {
        let e = fails_on(Target::Trn2, ErrorKind::InvalidArgument, || {
            let x = nl::load(&xh);
            let d = nl::ndarray(&[p, f], DType::F32, nl::SBUF);
            let args = TensorScalarOpts::new().engine(Engine::GpSimd);
            nisa::tensor_scalar(&d, &x, op, 2.0, args);
        });
        let msg = e.to_string();
        assert!(
            msg.contains("only for rsqrt as op0") && msg.contains(op.name()),
            "{msg}"
        );
        assert!(
            msg.contains("alu07.rs"),
            "the error names the user's line: {msg}"
        );
        // Beta 1: the same operator on GpSimdE computes `x op 2`.
        let got = run_on(Target::Trn2, &[p, f], |o| {
            let x = nl::load(&xh);
            let args = TensorScalarOpts::new().engine(Engine::GpSimd);
            nl::store(
                o,
                &nki_core::nisa::classic::tensor_scalar(&x, op, 2.0, args),
            );
        });
        let want: Vec<f32> = xs
            .iter()
            .map(|&x| match op {
                AluOp::Add => x + 2.0,
                AluOp::Multiply => x * 2.0,
                _ => {
                    if x.is_nan() {
                        x
                    } else {
                        x.max(2.0)
                    }
                }
            })
            .collect();
        // NaN propagation of max is the engine's; compare the non-NaN inputs bit-exactly.
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            if xs[i].is_nan() {
                continue;
            }
            assert_eq!(g.to_bits(), w.to_bits(), "{op}: [{i}] {g} vs {w}");
        }
    }
}
