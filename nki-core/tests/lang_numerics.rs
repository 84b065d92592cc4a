//! The `nl` language against independent references (plain f64 loops): unary math and
//! activations, comparisons / logical / bitwise ops, `where`, reductions, softmax and rms_norm,
//! layout ops (load_transpose2d, broadcast_to, iota, astype, expand_dims) and the tile
//! operators. fp32 results are checked with NumPy's `allclose` defaults (rtol 1e-5, atol 1e-8,
//! as the SDK unit tests do); bf16 results must equal the fp32 result rounded to bf16. Also the
//! error cases (partition reduction, bitwise on floats, shape and partition mismatches) and the
//! engine/opcode each op records.

use half::{bf16, f16};
use nki_core::nisa::Engine;
use nki_core::prelude::*;
use nki_core::Opcode;

mod common;
use common::{assert_close, assert_f32_close, bf, fails_with, hbm, numel, run_into, zeros, Rng};

/// Runs `body` as a one-instance kernel writing a zeroed output of `T` and `shape`; returns its
/// values as f32.
fn run_as<T: Element>(
    shape: &[usize],
    body: impl Fn(&HbmOut<'_, T>) + Sync,
) -> Result<Vec<f32>, NkiError> {
    run_into(zeros::<T>(shape), body)
}

/// [`run_as`] with an f32 output.
fn run_out(shape: &[usize], body: impl Fn(&HbmOut<'_, f32>) + Sync) -> Vec<f32> {
    run_as::<f32>(shape, body).unwrap()
}

/// Runs `body` in simulate mode and returns `(engine, opcode, api, partitions, free)` of every
/// recorded instruction.
fn ops_of(body: impl Fn() + Sync) -> Vec<(Engine, Opcode, &'static str, u32, u32)> {
    let r = Launch::new(1).mode(Mode::Simulate).run(body).unwrap();
    r.profile
        .expect("simulate gives a profile")
        .ops
        .iter()
        .map(|o| (o.engine, o.opcode, o.api, o.partitions, o.free))
        .collect()
}

// ------------------------------------------------------------------ independent references

/// erf by composite Simpson integration of 2/sqrt(pi) e^(-t^2) over [0, x] (f64).
fn erf_ref(x: f64) -> f64 {
    let n = 2000;
    let h = x / n as f64;
    let g = |t: f64| (-t * t).exp();
    let mut s = g(0.0) + g(x);
    for k in 1..n {
        let w = if k % 2 == 1 { 4.0 } else { 2.0 };
        s += w * g(k as f64 * h);
    }
    s * h / 3.0 * 2.0 / std::f64::consts::PI.sqrt()
}

fn sigmoid_ref(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

fn phi_ref(x: f64) -> f64 {
    0.5 * (1.0 + erf_ref(x / 2f64.sqrt()))
}

type UnaryCase = (&'static str, fn(&Tile) -> Tile, fn(f64) -> f64, (f32, f32));

fn unary_cases() -> Vec<UnaryCase> {
    vec![
        ("exp", |t| nl::exp(t), f64::exp, (-5.0, 5.0)),
        ("log", |t| nl::log(t), f64::ln, (0.01, 100.0)),
        ("sqrt", |t| nl::sqrt(t), f64::sqrt, (0.0, 100.0)),
        ("rsqrt", |t| nl::rsqrt(t), |x| 1.0 / x.sqrt(), (0.01, 100.0)),
        (
            "reciprocal",
            |t| nl::reciprocal(t),
            |x| 1.0 / x,
            (0.5, 100.0),
        ),
        ("tanh", |t| nl::tanh(t), f64::tanh, (-4.0, 4.0)),
        ("sigmoid", |t| nl::sigmoid(t), sigmoid_ref, (-8.0, 8.0)),
        ("relu", |t| nl::relu(t), |x| x.max(0.0), (-5.0, 5.0)),
        ("gelu", |t| nl::gelu(t), |x| x * phi_ref(x), (-5.0, 5.0)),
        (
            "gelu_dx",
            |t| nl::gelu_dx(t),
            |x| phi_ref(x) + x * (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt(),
            (-5.0, 5.0),
        ),
        (
            "gelu_apprx_tanh",
            |t| nl::gelu_apprx_tanh(t),
            |x| {
                0.5 * x
                    * (1.0
                        + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).tanh())
            },
            (-5.0, 5.0),
        ),
        (
            "gelu_apprx_sigmoid",
            |t| nl::gelu_apprx_sigmoid(t),
            |x| x * sigmoid_ref(1.702 * x),
            (-5.0, 5.0),
        ),
        ("silu", |t| nl::silu(t), |x| x * sigmoid_ref(x), (-5.0, 5.0)),
        (
            "silu_dx",
            |t| nl::silu_dx(t),
            |x| sigmoid_ref(x) * (1.0 + x * (1.0 - sigmoid_ref(x))),
            (-5.0, 5.0),
        ),
        ("erf", |t| nl::erf(t), erf_ref, (-3.0, 3.0)),
        (
            "erf_dx",
            |t| nl::erf_dx(t),
            |x| 2.0 / std::f64::consts::PI.sqrt() * (-x * x).exp(),
            (-3.0, 3.0),
        ),
        (
            "softplus",
            |t| nl::softplus(t),
            |x| x.exp().ln_1p(),
            (-10.0, 10.0),
        ),
        (
            "mish",
            |t| nl::mish(t),
            |x| x * x.exp().ln_1p().tanh(),
            (-5.0, 5.0),
        ),
        ("square", |t| nl::square(t), |x| x * x, (-10.0, 10.0)),
        ("abs", |t| nl::abs(t), f64::abs, (-10.0, 10.0)),
        ("negative", |t| nl::negative(t), |x| -x, (-10.0, 10.0)),
        ("sign", |t| nl::sign(t), f64::signum, (-10.0, 10.0)),
        ("sin", |t| nl::sin(t), f64::sin, (-10.0, 10.0)),
        ("cos", |t| nl::cos(t), f64::cos, (-10.0, 10.0)),
        ("tan", |t| nl::tan(t), f64::tan, (-1.4, 1.4)),
        ("arctan", |t| nl::arctan(t), f64::atan, (-10.0, 10.0)),
        ("floor", |t| nl::floor(t), f64::floor, (-10.0, 10.0)),
        ("ceil", |t| nl::ceil(t), f64::ceil, (-10.0, 10.0)),
        ("trunc", |t| nl::trunc(t), f64::trunc, (-10.0, 10.0)),
    ]
}

// ------------------------------------------------------------------ unary math / activations

#[test]
fn unary_ops_match_f64_references_in_fp32() {
    let mut rng = Rng(11);
    let (p, f) = (128, 512);
    for (name, op, reference, (lo, hi)) in unary_cases() {
        let xs = rng.vec(p * f, lo, hi);
        let a = hbm(&[p, f], xs.clone());
        let got = run_out(&[p, f], |o| {
            let x = nl::load(&a);
            let y = op(&x);
            assert_eq!(y.dtype(), DType::F32, "{name}");
            assert_eq!(y.shape(), &[p, f], "{name}");
            nl::store(o, &y);
        });
        let want: Vec<f32> = xs.iter().map(|&v| reference(v as f64) as f32).collect();
        // erf-based references integrate numerically (~1e-10 abs error); the rest are exact.
        assert_close(&got, &want, 1e-5, 1e-7, name);
    }
}

#[test]
fn unary_ops_round_bf16_results() {
    let mut rng = Rng(12);
    let (p, f) = (64, 96);
    for (name, op, reference, (lo, hi)) in unary_cases() {
        let xs: Vec<bf16> = rng
            .vec(p * f, lo, hi)
            .into_iter()
            .map(bf16::from_f32)
            .collect();
        let a = Hbm::<bf16>::from_vec(&[p, f], xs.clone()).unwrap();
        let got = run_as::<bf16>(&[p, f], |o| {
            let x = nl::load(&a);
            let y = op(&x);
            assert_eq!(y.dtype(), DType::BF16, "{name}");
            nl::store(o, &y);
        })
        .unwrap();
        for (i, (&x, &g)) in xs.iter().zip(&got).enumerate() {
            let exact = reference(x.to_f32() as f64);
            let want = bf(exact as f32);
            // Every result is a bf16 value, and it is the fp32 result rounded to bf16 (one
            // bf16 ulp of slack for the numerically integrated erf references).
            assert_eq!(g, bf(g), "{name}: element {i} is not a bf16 value");
            let ulp = (bf16::from_f32(want).to_f32() * 2f32.powi(-7))
                .abs()
                .max(1e-30);
            assert!(
                g == want || (g - want).abs() <= ulp,
                "{name}: element {i}: x={x}, got {g}, want {want}"
            );
        }
        // Rounding to bf16 really happened (the f32 results are not all bf16 values).
        let xs32: Vec<f64> = xs.iter().map(|v| v.to_f32() as f64).collect();
        let f32_vals: Vec<f32> = xs32.iter().map(|&v| reference(v) as f32).collect();
        if !matches!(
            name,
            "relu" | "abs" | "negative" | "sign" | "floor" | "ceil" | "trunc"
        ) {
            assert!(f32_vals.iter().any(|&v| bf(v) != v), "{name}: trivial case");
        }
    }
}

#[test]
fn unary_int_inputs_keep_or_widen_dtype() {
    let xs: Vec<i32> = vec![-7, -1, 0, 3, 100, -128, 42, 5];
    let a = Hbm::<i32>::from_vec(&[2, 4], xs.clone()).unwrap();
    let got = run_as::<i32>(&[2, 4], |o| {
        let x = nl::load(&a);
        let y = nl::abs(&x);
        assert_eq!(y.dtype(), DType::I32);
        nl::store(o, &y);
    })
    .unwrap();
    let want: Vec<f32> = xs.iter().map(|v| v.abs() as f32).collect();
    assert_eq!(got, want);
    // exp of an int tile gives fp32.
    let got = run_out(&[2, 4], |o| {
        let x = nl::load(a.slice((.., ..)));
        let small = nl::minimum(&x, 10);
        let y = nl::exp(&small);
        assert_eq!(y.dtype(), DType::F32);
        nl::store(o, &y);
    });
    let want: Vec<f32> = xs
        .iter()
        .map(|&v| (v.min(10) as f64).exp() as f32)
        .collect();
    assert_f32_close(&got, &want, "exp(int)");
}

#[test]
fn unary_edge_shapes() {
    let mut rng = Rng(13);
    for shape in [[1usize, 7], [128, 1], [97, 33], [128, 2048]] {
        let xs = rng.vec(numel(&shape), -3.0, 3.0);
        let a = hbm(&shape, xs.clone());
        let got = run_out(&shape, |o| nl::store(o, &nl::tanh(&nl::load(&a))));
        let want: Vec<f32> = xs.iter().map(|&v| (v as f64).tanh() as f32).collect();
        assert_f32_close(&got, &want, &format!("tanh {shape:?}"));
    }
    // A 3-D tile and a strided view.
    let xs = rng.vec(16 * 4 * 6, -3.0, 3.0);
    let a = hbm(&[16, 4, 6], xs.clone());
    let got = run_out(&[16, 4, 3], |o| {
        let x = nl::load(&a);
        nl::store(o, &nl::exp(x.slice((.., .., stepped(0..6, 2)))));
    });
    let mut want = vec![];
    for i in 0..16 * 4 {
        for j in (0..6).step_by(2) {
            want.push((xs[i * 6 + j] as f64).exp() as f32);
        }
    }
    assert_f32_close(&got, &want, "exp strided 3-D");
}

#[test]
fn unary_general_form_takes_dtype() {
    let xs = vec![0.5f32, 1.25, -2.0, 3.0];
    let a = hbm(&[1, 4], xs.clone());
    let got = run_as::<bf16>(&[1, 4], |o| {
        let x = nl::load(&a);
        let y = nl::unary(nl::ActFn::Exp, &x, Some(DType::BF16));
        assert_eq!(y.dtype(), DType::BF16);
        nl::store(o, &y);
    })
    .unwrap();
    let want: Vec<f32> = xs.iter().map(|&v| bf((v as f64).exp() as f32)).collect();
    assert_eq!(got, want);
}

// ------------------------------------------------------------------ binary arithmetic

#[test]
fn binary_broadcasting_along_free_and_partition_axes() {
    let mut rng = Rng(21);
    let (p, f) = (128, 512);
    let xs = rng.vec(p * f, -50.0, 50.0);
    let cs = rng.vec(p, -5.0, 5.0);
    let rs = rng.vec(f, -5.0, 5.0);
    let (a, c, r) = (
        hbm(&[p, f], xs.clone()),
        hbm(&[p, 1], cs.clone()),
        hbm(&[1, f], rs.clone()),
    );
    let got = run_out(&[p, f], |o| {
        let (x, col, row) = (nl::load(&a), nl::load(&c), nl::load(&r));
        let y = nl::add(&x, &col);
        let z = nl::multiply(&y, &row);
        nl::store(o, &nl::subtract(&z, 1.5));
    });
    let mut want = vec![0.0; p * f];
    for i in 0..p {
        for j in 0..f {
            want[i * f + j] = (xs[i * f + j] + cs[i]) * rs[j] - 1.5;
        }
    }
    assert_f32_close(&got, &want, "broadcast add/mul");
    // maximum / minimum / divide / power against plain loops, scalar on the left too.
    let got = run_out(&[p, f], |o| {
        let (x, col) = (nl::load(&a), nl::load(&c));
        let m = nl::maximum(&x, &col);
        let n = nl::minimum(&m, 20.0);
        let d = nl::divide(100.0, &n);
        nl::store(o, &d);
    });
    for i in 0..p {
        for j in 0..f {
            want[i * f + j] = 100.0 / xs[i * f + j].max(cs[i]).min(20.0);
        }
    }
    assert_f32_close(&got, &want, "max/min/divide");
    let ys = rng.vec(p * f, 0.1, 3.0);
    let b = hbm(&[p, f], ys.clone());
    let got = run_out(&[p, f], |o| {
        nl::store(o, &nl::power(&nl::load(&b), 1.7));
    });
    let want: Vec<f32> = ys.iter().map(|&v| (v as f64).powf(1.7) as f32).collect();
    assert_f32_close(&got, &want, "power");
}

#[test]
fn promotion_bf16_plus_f16_gives_f32() {
    let xs: Vec<bf16> = [1.0f32, 2.5, -3.25, 1e-3]
        .iter()
        .map(|&v| bf16::from_f32(v))
        .collect();
    let ys: Vec<f16> = [0.1f32, 0.2, 0.3, 1000.5]
        .iter()
        .map(|&v| f16::from_f32(v))
        .collect();
    let a = Hbm::<bf16>::from_vec(&[1, 4], xs.clone()).unwrap();
    let b = Hbm::<f16>::from_vec(&[1, 4], ys.clone()).unwrap();
    let got = run_out(&[1, 4], |o| {
        let z = nl::add(&nl::load(&a), &nl::load(&b));
        assert_eq!(z.dtype(), DType::F32);
        nl::store(o, &z);
    });
    let want: Vec<f32> = xs
        .iter()
        .zip(&ys)
        .map(|(x, y)| x.to_f32() + y.to_f32())
        .collect();
    assert_eq!(got, want);
    // bf16 + bf16 stays bf16 and rounds; bf16 + float scalar promotes to fp32 (weak scalar
    // rules: float scalars are fp32).
    let got = run_as::<f32>(&[1, 4], |o| {
        let x = nl::load(&a);
        let s = nl::add(&x, &x);
        assert_eq!(s.dtype(), DType::BF16);
        let t = nl::multiply(&x, 0.1);
        assert_eq!(t.dtype(), DType::F32);
        nl::store(o, &t);
    })
    .unwrap();
    let want: Vec<f32> = xs.iter().map(|x| x.to_f32() * 0.1).collect();
    assert_eq!(got, want);
    // int8 + int literal -> int32.
    let ai = Hbm::<i8>::from_vec(&[1, 3], vec![100i8, -100, 7]).unwrap();
    let got = run_as::<i32>(&[1, 3], |o| {
        let z = nl::add(&nl::load(&ai), 100);
        assert_eq!(z.dtype(), DType::I32);
        nl::store(o, &z);
    })
    .unwrap();
    assert_eq!(got, vec![200.0, 0.0, 107.0]);
}

#[test]
fn bf16_arithmetic_rounds_each_result() {
    let mut rng = Rng(22);
    let n = 256;
    let xs: Vec<bf16> = rng
        .vec(n, -10.0, 10.0)
        .into_iter()
        .map(bf16::from_f32)
        .collect();
    let ys: Vec<bf16> = rng
        .vec(n, -10.0, 10.0)
        .into_iter()
        .map(bf16::from_f32)
        .collect();
    let a = Hbm::<bf16>::from_vec(&[2, n / 2], xs.clone()).unwrap();
    let b = Hbm::<bf16>::from_vec(&[2, n / 2], ys.clone()).unwrap();
    let got = run_as::<bf16>(&[2, n / 2], |o| {
        nl::store(o, &nl::multiply(&nl::load(&a), &nl::load(&b)));
    })
    .unwrap();
    let want: Vec<f32> = xs
        .iter()
        .zip(&ys)
        .map(|(x, y)| bf(x.to_f32() * y.to_f32()))
        .collect();
    assert_eq!(got, want);
    assert!(xs
        .iter()
        .zip(&ys)
        .any(|(x, y)| bf(x.to_f32() * y.to_f32()) != x.to_f32() * y.to_f32()));
}

// ------------------------------------------------------------------ comparisons, logic, where

#[test]
fn comparisons_give_bool_tiles() {
    let mut rng = Rng(31);
    let (p, f) = (128, 64);
    let xs: Vec<f32> = rng.int_f32s(p * f, -3, 3);
    let ys: Vec<f32> = rng.int_f32s(p * f, -3, 3);
    let (a, b) = (hbm(&[p, f], xs.clone()), hbm(&[p, f], ys.clone()));
    type Cmp = (&'static str, fn(&Tile, &Tile) -> Tile, fn(f32, f32) -> bool);
    let cases: Vec<Cmp> = vec![
        ("equal", |x, y| nl::equal(x, y), |a, b| a == b),
        ("not_equal", |x, y| nl::not_equal(x, y), |a, b| a != b),
        ("greater", |x, y| nl::greater(x, y), |a, b| a > b),
        (
            "greater_equal",
            |x, y| nl::greater_equal(x, y),
            |a, b| a >= b,
        ),
        ("less", |x, y| nl::less(x, y), |a, b| a < b),
        ("less_equal", |x, y| nl::less_equal(x, y), |a, b| a <= b),
        (
            "logical_and",
            |x, y| nl::logical_and(x, y),
            |a, b| a != 0.0 && b != 0.0,
        ),
        (
            "logical_or",
            |x, y| nl::logical_or(x, y),
            |a, b| a != 0.0 || b != 0.0,
        ),
        (
            "logical_xor",
            |x, y| nl::logical_xor(x, y),
            |a, b| (a != 0.0) != (b != 0.0),
        ),
    ];
    for (name, op, reference) in cases {
        let got = run_as::<bool>(&[p, f], |o| {
            let r = op(&nl::load(&a), &nl::load(&b));
            assert_eq!(r.dtype(), DType::Bool, "{name}");
            nl::store(o, &r);
        })
        .unwrap();
        let want: Vec<f32> = xs
            .iter()
            .zip(&ys)
            .map(|(&x, &y)| if reference(x, y) { 1.0 } else { 0.0 })
            .collect();
        assert_eq!(got, want, "{name}");
    }
    // Scalar operand, general form with a float result dtype, logical_not.
    let got = run_out(&[p, f], |o| {
        let x = nl::load(&a);
        let g = nl::binary(nl::AluOp::Greater, &x, 0.5, Some(DType::F32));
        assert_eq!(g.dtype(), DType::F32);
        let n = nl::logical_not(&g);
        assert_eq!(n.dtype(), DType::Bool);
        nl::store(o, &nl::add(&g, &nl::multiply(&n, 10.0)));
    });
    let want: Vec<f32> = xs
        .iter()
        .map(|&x| if x > 0.5 { 1.0 } else { 10.0 })
        .collect();
    assert_eq!(got, want);
}

#[test]
fn where_selects_with_broadcasting() {
    let mut rng = Rng(32);
    let (p, f) = (96, 40);
    let xs = rng.vec(p * f, -1.0, 1.0);
    let ys = rng.vec(p * f, -1.0, 1.0);
    let cs = rng.vec(p, -1.0, 1.0);
    let (a, b, c) = (
        hbm(&[p, f], xs.clone()),
        hbm(&[p, f], ys.clone()),
        hbm(&[p, 1], cs.clone()),
    );
    let got = run_out(&[p, f], |o| {
        let (x, y) = (nl::load(&a), nl::load(&b));
        let m = nl::greater(&x, &y);
        let s1 = nl::where_(&m, &x, &y); // element-wise max
        let col = nl::greater(&nl::load(&c), 0.0); // [P, 1] condition
        let s2 = nl::where_(&col, &s1, -5.0);
        nl::store(o, &s2);
    });
    let mut want = vec![0.0; p * f];
    for i in 0..p {
        for j in 0..f {
            let (x, y) = (xs[i * f + j], ys[i * f + j]);
            want[i * f + j] = if cs[i] > 0.0 { x.max(y) } else { -5.0 };
        }
    }
    assert_eq!(got, want);
}

#[test]
fn fmod_and_mod_follow_numpy_signs() {
    let xs = vec![-7.0f32, 7.0, -7.5, 7.5, 6.0, -0.5];
    let ys = vec![3.0f32, -3.0, 2.0, -2.0, 3.0, 2.0];
    let (a, b) = (hbm(&[1, 6], xs.clone()), hbm(&[1, 6], ys.clone()));
    let got = run_out(&[2, 6], |o| {
        let (x, y) = (nl::load(&a), nl::load(&b));
        nl::store(o.slice((0..1, ..)), &nl::fmod(&x, &y));
        nl::store(o.slice((1..2, ..)), &nl::mod_(&x, &y));
    });
    let mut want = vec![];
    for (&x, &y) in xs.iter().zip(&ys) {
        want.push(x % y);
    }
    for (&x, &y) in xs.iter().zip(&ys) {
        let r = x % y;
        want.push(if r != 0.0 && (r < 0.0) != (y < 0.0) {
            r + y
        } else {
            r
        });
    }
    assert_eq!(got, want);
    assert_eq!(&got[6..], &[2.0, -2.0, 0.5, -0.5, 0.0, 1.5]);
}

// ------------------------------------------------------------------ bitwise

#[test]
fn bitwise_ops_on_int32() {
    let mut rng = Rng(41);
    let n = 200;
    let xs: Vec<i32> = rng
        .ints(n, -100_000, 100_000)
        .into_iter()
        .map(|v| v as i32)
        .collect();
    let ys: Vec<i32> = rng
        .ints(n, -100_000, 100_000)
        .into_iter()
        .map(|v| v as i32)
        .collect();
    let ss: Vec<i32> = rng.ints(n, 0, 7).into_iter().map(|v| v as i32).collect();
    let a = Hbm::<i32>::from_vec(&[2, n / 2], xs.clone()).unwrap();
    let b = Hbm::<i32>::from_vec(&[2, n / 2], ys.clone()).unwrap();
    let s = Hbm::<i32>::from_vec(&[2, n / 2], ss.clone()).unwrap();
    type Bit = (
        &'static str,
        fn(&Tile, &Tile, &Tile) -> Tile,
        fn(i32, i32, i32) -> i32,
    );
    let cases: Vec<Bit> = vec![
        ("and", |x, y, _| nl::bitwise_and(x, y), |x, y, _| x & y),
        ("or", |x, y, _| nl::bitwise_or(x, y), |x, y, _| x | y),
        ("xor", |x, y, _| nl::bitwise_xor(x, y), |x, y, _| x ^ y),
        ("invert", |x, _, _| nl::invert(x), |x, _, _| !x),
        (
            "left_shift",
            |x, _, s| nl::left_shift(x, s),
            |x, _, s| x << s,
        ),
        (
            "right_shift",
            |x, _, s| nl::right_shift(x, s),
            |x, _, s| ((x as u32) >> s) as i32,
        ),
    ];
    for (name, op, reference) in cases {
        let got = run_as::<i32>(&[2, n / 2], |o| {
            let r = op(&nl::load(&a), &nl::load(&b), &nl::load(&s));
            assert_eq!(r.dtype(), DType::I32, "{name}");
            nl::store(o, &r);
        })
        .unwrap();
        for i in 0..n {
            let want = reference(xs[i], ys[i], ss[i]);
            // int32 values travel through fp32: compare within fp32's resolution.
            assert_eq!(got[i], want as f32, "{name}: element {i}");
        }
    }
}

#[test]
fn bitwise_ops_wrap_at_narrow_widths() {
    let xs: Vec<u8> = vec![0, 1, 127, 128, 200, 255];
    let a = Hbm::<u8>::from_vec(&[1, 6], xs.clone()).unwrap();
    let got = run_as::<u8>(&[3, 6], |o| {
        let x = nl::load(&a);
        nl::store(o.slice((0..1, ..)), &nl::invert(&x));
        // A u8 shift amount keeps the u8 width (an int scalar would promote to int32).
        let one = nl::full(&[1, 6], 1.0, DType::U8, nl::SBUF);
        nl::store(o.slice((1..2, ..)), &nl::left_shift(&x, &one));
        nl::store(o.slice((2..3, ..)), &nl::bitwise_xor(&x, &one));
    })
    .unwrap();
    let want: Vec<f32> = xs
        .iter()
        .map(|&x| !x as f32)
        .chain(xs.iter().map(|&x| x.wrapping_shl(1) as f32))
        .chain(xs.iter().map(|&x| (x ^ 1) as f32))
        .collect();
    assert_eq!(got, want);
    let xs8: Vec<i8> = vec![-128, -2, -1, 0, 1, 127];
    let a8 = Hbm::<i8>::from_vec(&[1, 6], xs8.clone()).unwrap();
    let got = run_as::<i8>(&[1, 6], |o| {
        let x = nl::load(&a8);
        let one = nl::full(&[1, 6], 1.0, DType::I8, nl::SBUF);
        nl::store(o, &nl::right_shift(&x, &one));
    })
    .unwrap();
    let want: Vec<f32> = xs8.iter().map(|&x| ((x as u8) >> 1) as i8 as f32).collect();
    assert_eq!(got, want);
}

#[test]
fn bitwise_on_floats_is_a_dtype_error() {
    let a = Hbm::<f32>::full([4, 4], 1.0);
    let ai = Hbm::<i32>::full([4, 4], 1);
    let e = fails_with(ErrorKind::DType, || {
        let x = nl::load(&a);
        let _ = nl::bitwise_and(&x, &x);
    });
    assert!(e.to_string().contains("bitwise_and"), "{e}");
    assert!(e.to_string().contains("float32"), "{e}");
    fails_with(ErrorKind::DType, || {
        let _ = nl::left_shift(&nl::load(&ai), 1.5);
    });
    fails_with(ErrorKind::DType, || {
        let _ = nl::invert(&nl::load(&a));
    });
}

// ------------------------------------------------------------------ reductions

fn rows(xs: &[f32], inner: usize) -> impl Iterator<Item = &[f32]> {
    xs.chunks(inner)
}

#[test]
fn reductions_over_the_free_axis() {
    let mut rng = Rng(51);
    let (p, f) = (128, 512);
    let xs = rng.vec(p * f, 0.0, 100.0);
    let a = hbm(&[p, f], xs.clone());
    type Red = (&'static str, fn(&Tile) -> Tile, fn(&[f32]) -> f64);
    let cases: Vec<Red> = vec![
        (
            "sum",
            |t| nl::sum(t, &[1], true),
            |r| r.iter().map(|&v| v as f64).sum(),
        ),
        (
            "max",
            |t| nl::max(t, &[1], true),
            |r| r.iter().fold(f64::MIN, |m, &v| m.max(v as f64)),
        ),
        (
            "min",
            |t| nl::min(t, &[1], true),
            |r| r.iter().fold(f64::MAX, |m, &v| m.min(v as f64)),
        ),
        (
            "mean",
            |t| nl::mean(t, &[1], true),
            |r| r.iter().map(|&v| v as f64).sum::<f64>() / r.len() as f64,
        ),
        (
            "var",
            |t| nl::var(t, &[1]),
            |r| {
                let m = r.iter().map(|&v| v as f64).sum::<f64>() / r.len() as f64;
                r.iter().map(|&v| (v as f64 - m).powi(2)).sum::<f64>() / r.len() as f64
            },
        ),
    ];
    for (name, op, reference) in cases {
        let got = run_out(&[p, 1], |o| {
            let r = op(&nl::load(&a));
            assert_eq!(r.shape(), &[p, 1], "{name}");
            assert_eq!(r.dtype(), DType::F32, "{name}");
            nl::store(o, &r);
        });
        let want: Vec<f32> = rows(&xs, f).map(|r| reference(r) as f32).collect();
        assert_f32_close(&got, &want, name);
    }
    // prod on values near 1 (no overflow), all on a 0/1 tile.
    let ps = rng.vec(p * 16, 0.9, 1.1);
    let b = hbm(&[p, 16], ps.clone());
    let got = run_out(&[p, 1], |o| {
        nl::store(o, &nl::prod(&nl::load(&b), &[1], false))
    });
    let want: Vec<f32> = rows(&ps, 16)
        .map(|r| r.iter().map(|&v| v as f64).product::<f64>() as f32)
        .collect();
    assert_f32_close(&got, &want, "prod");
    let got = run_as::<bool>(&[p, 1], |o| {
        let x = nl::load(&b);
        let r = nl::all(&nl::greater(&x, 0.95), &[1], true);
        assert_eq!(r.dtype(), DType::Bool);
        nl::store(o, &r);
    })
    .unwrap();
    let want: Vec<f32> = rows(&ps, 16)
        .map(|r| {
            if r.iter().all(|&v| v > 0.95) {
                1.0
            } else {
                0.0
            }
        })
        .collect();
    assert_eq!(got, want);
    assert!(want.contains(&0.0));
}

#[test]
fn reductions_keepdims_and_multiple_axes() {
    let mut rng = Rng(52);
    let (p, a1, a2) = (64, 8, 12);
    let xs = rng.vec(p * a1 * a2, -10.0, 10.0);
    let a = hbm(&[p, a1, a2], xs.clone());
    // Last axis, keepdims: [P, A1, 1].
    let got = run_out(&[p, a1, 1], |o| {
        let r = nl::sum(&nl::load(&a), &[2], true);
        assert_eq!(r.shape(), &[p, a1, 1]);
        nl::store(o, &r);
    });
    let want: Vec<f32> = rows(&xs, a2)
        .map(|r| r.iter().map(|&v| v as f64).sum::<f64>() as f32)
        .collect();
    assert_f32_close(&got, &want, "sum axis 2");
    // Last axis without keepdims: [P, A1].
    let got = run_out(&[p, a1], |o| {
        let r = nl::max(&nl::load(&a), &[2], false);
        assert_eq!(r.shape(), &[p, a1]);
        nl::store(o, &r);
    });
    let want: Vec<f32> = rows(&xs, a2)
        .map(|r| r.iter().cloned().fold(f32::MIN, f32::max))
        .collect();
    assert_eq!(got, want);
    // Both free axes (given in any order): [P, 1, 1] with keepdims, [P, 1] without.
    let got = run_out(&[p, 1, 1], |o| {
        let r = nl::mean(&nl::load(&a), &[2, 1], true);
        assert_eq!(r.shape(), &[p, 1, 1]);
        nl::store(o, &r);
    });
    let want: Vec<f32> = rows(&xs, a1 * a2)
        .map(|r| (r.iter().map(|&v| v as f64).sum::<f64>() / r.len() as f64) as f32)
        .collect();
    assert_f32_close(&got, &want, "mean axes [1, 2]");
    let got = run_out(&[p, 1], |o| {
        let r = nl::min(&nl::load(&a), &[1, 2], false);
        assert_eq!(r.shape(), &[p, 1]);
        nl::store(o, &r);
    });
    let want: Vec<f32> = rows(&xs, a1 * a2)
        .map(|r| r.iter().cloned().fold(f32::MAX, f32::min))
        .collect();
    assert_eq!(got, want);
    // One-row tile and a non-multiple shape.
    let ys = rng.vec(77, -1.0, 1.0);
    let b = hbm(&[1, 77], ys.clone());
    let got = run_out(&[1, 1], |o| {
        nl::store(o, &nl::sum(&nl::load(&b), &[1], false))
    });
    assert_f32_close(
        &got,
        &[ys.iter().map(|&v| v as f64).sum::<f64>() as f32],
        "sum 1 row",
    );
}

#[test]
fn mean_of_bf16_uses_fp32_intermediates() {
    let mut rng = Rng(53);
    let (p, f) = (32, 300);
    let xs: Vec<bf16> = rng
        .vec(p * f, 0.0, 10.0)
        .into_iter()
        .map(bf16::from_f32)
        .collect();
    let a = Hbm::<bf16>::from_vec(&[p, f], xs.clone()).unwrap();
    let got = run_as::<bf16>(&[p, 2], |o| {
        let x = nl::load(&a);
        let m = nl::mean(&x, &[1], true);
        assert_eq!(m.dtype(), DType::BF16);
        nl::store(o.slice((.., 0..1)), &m);
        nl::store(o.slice((.., 1..2)), &nl::sum(&x, &[1], true));
    })
    .unwrap();
    let mut want_mean = vec![];
    for r in xs.chunks(f) {
        let s: f64 = r.iter().map(|v| v.to_f32() as f64).sum();
        want_mean.push(bf((s / f as f64) as f32));
    }
    for i in 0..p {
        // A bf16 accumulator would drift far from the mean; fp32 intermediates round once.
        assert_eq!(got[2 * i], want_mean[i], "mean row {i}");
        let s: f64 = xs[i * f..(i + 1) * f]
            .iter()
            .map(|v| v.to_f32() as f64)
            .sum();
        assert_eq!(got[2 * i + 1], bf(s as f32), "sum row {i}");
    }
}

#[test]
fn reduction_errors() {
    let a = Hbm::<f32>::full([128, 64], 1.0);
    let a3 = Hbm::<f32>::full([16, 4, 8], 1.0);
    let e = fails_with(ErrorKind::PartitionReduction, || {
        let _ = nl::sum(&nl::load(&a), &[0], true);
    });
    assert!(
        e.message()
            .contains("reduction on partition axis is not supported"),
        "{e}"
    );
    assert!(
        e.to_string().contains("lang_numerics.rs"),
        "source line: {e}"
    );
    fails_with(ErrorKind::PartitionReduction, || {
        let _ = nl::max(&nl::load(&a), &[0, 1], false);
    });
    // Axes must be free dims of the tile.
    let e = fails_with(ErrorKind::InvalidArgument, || {
        let _ = nl::sum(&nl::load(&a3), &[3], true);
    });
    assert!(e.message().contains("free dimensions"), "{e}");
    fails_with(ErrorKind::InvalidArgument, || {
        let _ = nl::sum(&nl::load(&a), &[2], true);
    });
    fails_with(ErrorKind::InvalidArgument, || {
        let _ = nl::reduce(nl::AluOp::Power, &nl::load(&a), &[1], true, None);
    });
}

// ------------------------------------------------------------------ softmax, rms_norm

fn softmax_ref(xs: &[f32], f: usize) -> Vec<f32> {
    let mut out = vec![];
    for r in xs.chunks(f) {
        let m = r.iter().fold(f64::MIN, |m, &v| m.max(v as f64));
        let e: Vec<f64> = r.iter().map(|&v| (v as f64 - m).exp()).collect();
        let s: f64 = e.iter().sum();
        out.extend(e.iter().map(|v| (v / s) as f32));
    }
    out
}

#[test]
fn softmax_matches_reference() {
    // The tutorial's logits.
    let xs = vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 5.0, 4.0, 3.0, 2.0, 1.0];
    let a = hbm(&[2, 5], xs.clone());
    let got = run_out(&[2, 5], |o| nl::store(o, &nl::softmax(&nl::load(&a), 1)));
    assert_close(&got, &softmax_ref(&xs, 5), 1e-5, 1e-5, "softmax tutorial");
    let mut rng = Rng(61);
    for (p, f) in [(128usize, 512usize), (1, 9), (100, 1000)] {
        let xs = rng.vec(p * f, -20.0, 20.0);
        let a = hbm(&[p, f], xs.clone());
        let got = run_out(&[p, f], |o| nl::store(o, &nl::softmax(&nl::load(&a), 1)));
        assert_f32_close(&got, &softmax_ref(&xs, f), &format!("softmax [{p}, {f}]"));
    }
    // 3-D: softmax over the last axis of each [p, i] row.
    let xs = rng.vec(8 * 3 * 10, -5.0, 5.0);
    let a = hbm(&[8, 3, 10], xs.clone());
    let got = run_out(&[8, 3, 10], |o| {
        nl::store(o, &nl::softmax(&nl::load(&a), 2))
    });
    assert_f32_close(&got, &softmax_ref(&xs, 10), "softmax 3-D");
    // bf16 in, bf16 out.
    let xb: Vec<bf16> = rng
        .vec(4 * 64, -3.0, 3.0)
        .into_iter()
        .map(bf16::from_f32)
        .collect();
    let ab = Hbm::<bf16>::from_vec(&[4, 64], xb.clone()).unwrap();
    let got = run_as::<bf16>(&[4, 64], |o| {
        let y = nl::softmax(&nl::load(&ab), 1);
        assert_eq!(y.dtype(), DType::BF16);
        nl::store(o, &y);
    })
    .unwrap();
    let xf: Vec<f32> = xb.iter().map(|v| v.to_f32()).collect();
    let want: Vec<f32> = softmax_ref(&xf, 64).into_iter().map(bf).collect();
    assert_close(&got, &want, 1e-2, 1e-4, "softmax bf16");
    assert!(got.iter().all(|&g| g == bf(g)));
    // Partition axis is rejected.
    fails_with(ErrorKind::PartitionReduction, || {
        let _ = nl::softmax(&nl::load(&a), 0);
    });
}

#[test]
fn rms_norm_matches_reference() {
    let mut rng = Rng(62);
    for (p, f) in [(128usize, 512usize), (97, 33)] {
        let xs = rng.vec(p * f, -2.0, 2.0);
        let ws = rng.vec(f, 0.5, 1.5);
        let (a, w) = (hbm(&[p, f], xs.clone()), hbm(&[1, f], ws.clone()));
        let eps = 1e-6f32;
        let got = run_out(&[p, f], |o| {
            nl::store(o, &nl::rms_norm(&nl::load(&a), &nl::load(&w), 1, f, eps));
        });
        let mut want = vec![];
        for r in xs.chunks(f) {
            let ms = r.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / f as f64;
            let rstd = 1.0 / (ms + eps as f64).sqrt();
            want.extend(
                r.iter()
                    .zip(&ws)
                    .map(|(&v, &g)| (v as f64 * rstd * g as f64) as f32),
            );
        }
        assert_f32_close(&got, &want, &format!("rms_norm [{p}, {f}]"));
    }
}

// ------------------------------------------------------------------ layout / index ops

#[test]
fn load_transpose2d_transposes() {
    let mut rng = Rng(71);
    for (f, p) in [(2048usize, 128usize), (300, 100), (5, 1)] {
        let xs = rng.vec(f * p, -1.0, 1.0);
        let a = hbm(&[f, p], xs.clone());
        let got = run_out(&[p, f], |o| {
            let t = nl::load_transpose2d(&a);
            assert_eq!(t.shape(), &[p, f]);
            nl::store(o, &t);
        });
        for i in 0..p {
            for j in 0..f {
                assert_eq!(got[i * f + j], xs[j * p + i], "[{f}, {p}] ({i}, {j})");
            }
        }
    }
    // A slice of a larger tensor; too many partitions is an error.
    let xs: Vec<f32> = (0..64 * 256).map(|v| v as f32).collect();
    let a = hbm(&[64, 256], xs.clone());
    let got = run_out(&[32, 16], |o| {
        nl::store(o, &nl::load_transpose2d(a.slice((8..24, 32..64))));
    });
    for i in 0..32 {
        for j in 0..16 {
            assert_eq!(got[i * 16 + j], xs[(8 + j) * 256 + 32 + i]);
        }
    }
    fails_with(ErrorKind::PartitionLimit, || {
        let _ = nl::load_transpose2d(&a);
    });
}

#[test]
fn broadcast_to_replicates() {
    let rs: Vec<f32> = (0..10).map(|v| v as f32 * 0.5).collect();
    let cs: Vec<f32> = (0..128).map(|v| v as f32).collect();
    let (r, c) = (hbm(&[1, 10], rs.clone()), hbm(&[128, 1], cs.clone()));
    let got = run_out(&[128, 20], |o| {
        let rb = nl::broadcast_to(&nl::load(&r), &[128, 10]);
        let cb = nl::broadcast_to(&nl::load(&c), &[128, 10]);
        assert_eq!(rb.shape(), &[128, 10]);
        nl::store(o.slice((.., 0..10)), &rb);
        nl::store(o.slice((.., 10..20)), &cb);
    });
    for i in 0..128 {
        for j in 0..10 {
            assert_eq!(got[i * 20 + j], rs[j]);
            assert_eq!(got[i * 20 + 10 + j], cs[i]);
        }
    }
    fails_with(ErrorKind::ShapeMismatch, || {
        let _ = nl::broadcast_to(&nl::load(&c), &[64, 10]);
    });
}

#[test]
fn iota_and_arange_generate_indices() {
    let got = run_as::<i32>(&[128, 24], |o| {
        let ip = nl::iota(&[128, 8], 0, DType::I32);
        let jf = nl::iota(&[128, 8], 1, DType::I32);
        let flat = nl::add(&nl::multiply(&ip, 8), &jf);
        nl::store(o.slice((.., 0..8)), &ip);
        nl::store(o.slice((.., 8..16)), &jf);
        nl::store(o.slice((.., 16..24)), &flat);
    })
    .unwrap();
    for i in 0..128 {
        for j in 0..8 {
            assert_eq!(got[i * 24 + j], i as f32);
            assert_eq!(got[i * 24 + 8 + j], j as f32);
            assert_eq!(got[i * 24 + 16 + j], (i * 8 + j) as f32);
        }
    }
    let got = run_out(&[1, 6], |o| {
        let t = nl::classic::arange(10, -3, 6, DType::F32);
        assert_eq!(t.shape(), &[1, 6]);
        nl::store(o, &t);
    });
    assert_eq!(got, vec![10.0, 7.0, 4.0, 1.0, -2.0, -5.0]);
    // Cast to bf16: 257 is not representable and rounds to 256.
    let got = run_out(&[1, 3], |o| {
        nl::store(o, &nl::classic::arange(255, 1, 3, DType::BF16))
    });
    assert_eq!(got, vec![255.0, 256.0, 256.0]);
}

#[test]
fn astype_and_expand_dims() {
    let xs = vec![1.0f32 + 1.0 / 256.0, -2.5, 3.7, 1e6 + 0.3, -0.49, 2.5];
    let a = hbm(&[1, 6], xs.clone());
    let got = run_out(&[3, 6], |o| {
        let x = nl::load(&a);
        let b = x.astype(DType::BF16);
        assert_eq!(b.dtype(), DType::BF16);
        let i = x.view().astype(DType::I32);
        assert_eq!(i.dtype(), DType::I32);
        let h = x.astype(DType::F16);
        nl::store(o.slice((0..1, ..)), &b);
        nl::store(o.slice((1..2, ..)), &i);
        nl::store(o.slice((2..3, ..)), &h);
    });
    let want: Vec<f32> = xs
        .iter()
        .map(|&v| bf(v))
        .chain(xs.iter().map(|&v| v.round_ties_even()))
        .chain(xs.iter().map(|&v| f16::from_f32(v).to_f32()))
        .collect();
    assert_eq!(got, want);
    // expand_dims: [P, F] -> [P, F, 1] broadcasts against [P, F, K].
    let mut rng = Rng(72);
    let (p, f, k) = (16, 5, 4);
    let xs = rng.vec(p * f, -1.0, 1.0);
    let ys = rng.vec(p * f * k, -1.0, 1.0);
    let (a, b) = (hbm(&[p, f], xs.clone()), hbm(&[p, f, k], ys.clone()));
    let got = run_out(&[p, f, k], |o| {
        let x = nl::load(&a);
        let x3 = nl::expand_dims(&x, 2);
        assert_eq!(x3.shape(), &[p, f, 1]);
        assert_eq!(x.expand_dims(1).shape(), &[p, 1, f]);
        nl::store(o, &nl::add(x3, &nl::load(&b)));
    });
    for i in 0..p * f {
        for j in 0..k {
            assert_eq!(got[i * k + j], xs[i] + ys[i * k + j]);
        }
    }
    fails_with(ErrorKind::InvalidArgument, || {
        let x = nl::load(&a);
        let _ = nl::expand_dims(&x, 0);
    });
}

// ------------------------------------------------------------------ operators

#[nki_kernel]
fn axpy_ops(x: &Hbm<f32>, y: &Hbm<f32>, out: &mut Hbm<f32>) {
    let i = nl::program_id(0) * 64;
    let a = nl::load(x.slice((i..i + 64, ..)));
    let b = nl::load(y.slice((i..i + 64, ..)));
    // 2a + b - a*b/4, then negated, then 1 - that, then halved via a view.
    let t = 2.0 * &a + &b - &a * &b / 4.0;
    let u = 1.0 - (-t);
    let v = u.view() * 0.5f32;
    nl::store(out.slice((i..i + 64, ..)), &v);
}

#[test]
fn operators_match_loops() {
    let mut rng = Rng(81);
    let (p, f) = (128, 96);
    let xs = rng.vec(p * f, -5.0, 5.0);
    let ys = rng.vec(p * f, -5.0, 5.0);
    let (a, b) = (hbm(&[p, f], xs.clone()), hbm(&[p, f], ys.clone()));
    let mut c = Hbm::<f32>::zeros([p, f]);
    launch!(axpy_ops[2](&a, &b, &mut c)).unwrap();
    let got = c.to_f32_vec().unwrap();
    let want: Vec<f32> = xs
        .iter()
        .zip(&ys)
        .map(|(&x, &y)| (1.0 - (-(2.0 * x + y - x * y / 4.0))) * 0.5)
        .collect();
    assert_f32_close(&got, &want, "operators");
}

#[test]
fn operators_on_views_ints_and_free_broadcast() {
    let xs: Vec<i32> = (0..32).collect();
    let a = Hbm::<i32>::from_vec(&[4, 8], xs.clone()).unwrap();
    let got = run_as::<i32>(&[4, 4], |o| {
        let x = nl::load(&a);
        let (lo, hi) = (x.slice((.., 0..4)), x.slice((.., 4..8)));
        #[allow(clippy::op_ref)] // borrowed views are what this line tests
        let s = &lo + &hi;
        let d = hi - lo; // owned views
        let z = 3 * &s + d * 2 - 1; // i32 scalars on both sides
        assert_eq!(z.dtype(), DType::I32);
        nl::store(o, &(z / 1));
    })
    .unwrap();
    for r in 0..4 {
        for j in 0..4 {
            let (l, h) = (xs[r * 8 + j], xs[r * 8 + 4 + j]);
            assert_eq!(got[r * 4 + j], (3 * (l + h) + (h - l) * 2 - 1) as f32);
        }
    }
    // Free-axis broadcasting of a [P, 1] operand works with operators.
    let fa = hbm(&[4, 8], (0..32).map(|v| v as f32).collect());
    let fc = hbm(&[4, 1], vec![1.0, 2.0, 3.0, 4.0]);
    let got = run_out(&[4, 8], |o| {
        let (x, c) = (nl::load(&fa), nl::load(&fc));
        nl::store(o, &(&x * &c));
    });
    for r in 0..4 {
        for j in 0..8 {
            assert_eq!(got[r * 8 + j], (r * 8 + j) as f32 * (r + 1) as f32);
        }
    }
}

#[test]
fn operators_do_not_broadcast_partitions() {
    let a = Hbm::<f32>::full([128, 16], 1.0);
    let r = Hbm::<f32>::full([1, 16], 2.0);
    let e = fails_with(ErrorKind::PartitionMismatch, || {
        let (x, row) = (nl::load(&a), nl::load(&r));
        let _ = &x + &row;
    });
    assert!(e.to_string().contains("lang_numerics.rs"), "{e}");
    // The nl function allows it.
    let got = run_out(&[128, 16], |o| {
        nl::store(o, &nl::add(&nl::load(&a), &nl::load(&r)));
    });
    assert!(got.iter().all(|&v| v == 3.0));
}

#[test]
fn shape_mismatch_is_an_error() {
    let a = Hbm::<f32>::full([128, 512], 1.0);
    let b = Hbm::<f32>::full([128, 256], 1.0);
    fails_with(ErrorKind::ShapeMismatch, || {
        let _ = nl::add(&nl::load(&a), &nl::load(&b));
    });
    fails_with(ErrorKind::ShapeMismatch, || {
        let _ = &nl::load(&a) * &nl::load(&b);
    });
    fails_with(ErrorKind::ShapeMismatch, || {
        let (x, y) = (nl::load(&a), nl::load(&b));
        let _ = nl::where_(&nl::greater(&x, 0.0), &x, &y);
    });
}

// ------------------------------------------------------------------ records

#[test]
fn ops_record_engines_and_opcodes() {
    let a = Hbm::<f32>::full([128, 512], 1.0);
    let ai = Hbm::<i32>::full([64, 32], 3);
    let t = Hbm::<f32>::full([256, 64], 1.0);
    let ops = ops_of(|| {
        let x = nl::load(&a); // DMA
        let _ = nl::exp(&x); // Scalar activation
        let _ = nl::abs(&x); // Vector ALU
        let _ = nl::reciprocal(&x); // Vector reciprocal
        let _ = nl::sin(&x); // Vector range reduction + Scalar
        let _ = nl::sum(&x, &[1], true); // Vector reduce
        let _ = nl::greater(&x, 0.0); // Vector tensor-scalar
        let _ = nl::power(&x, &x); // GpSimd
        let i = nl::load(&ai); // DMA
        let _ = nl::add(&i, &i); // int32 add: GpSimd
        let _ = nl::iota(&[128, 4], 1, DType::I32); // GpSimd iota
        let _ = nl::load_transpose2d(t.slice((0..64, ..))); // DMA transpose
        let _ = nl::where_(&x, &x, 0.0); // Vector select
        let _ = &x + &x; // Vector tensor-tensor
    });
    use Engine::*;
    let want: Vec<(Engine, Opcode, &str, u32, u32)> = vec![
        (Dma, Opcode::DmaCopy, "nl.load", 128, 512),
        (Scalar, Opcode::Activation, "nl.exp", 128, 512),
        (Vector, Opcode::TensorScalar, "nl.abs", 128, 512),
        (Vector, Opcode::Reciprocal, "nl.reciprocal", 128, 512),
        (Vector, Opcode::TensorScalar, "nl.sin", 128, 512),
        (Scalar, Opcode::Activation, "nl.sin", 128, 512),
        (Vector, Opcode::TensorReduce, "nl.sum", 128, 512),
        (Vector, Opcode::TensorScalar, "nl.greater", 128, 512),
        (GpSimd, Opcode::TensorTensor, "nl.power", 128, 512),
        (Dma, Opcode::DmaCopy, "nl.load", 64, 32),
        (GpSimd, Opcode::TensorTensor, "nl.add", 64, 32),
        (GpSimd, Opcode::Iota, "nl.iota", 128, 4),
        (Dma, Opcode::DmaTranspose, "nl.load_transpose2d", 64, 64),
        (Vector, Opcode::Select, "nl.where", 128, 512),
        (Vector, Opcode::TensorTensor, "nl.add", 128, 512),
    ];
    assert_eq!(ops, want);
}

#[test]
fn composite_ops_record_their_instruction_sequences() {
    let a = Hbm::<f32>::full([128, 512], 1.0);
    let w = Hbm::<f32>::full([1, 512], 1.0);
    let ops = ops_of(|| {
        let x = nl::load(&a);
        let _ = nl::softmax(&x, 1);
    });
    let kinds: Vec<(Engine, Opcode)> = ops[1..].iter().map(|o| (o.0, o.1)).collect();
    assert_eq!(
        kinds,
        vec![
            (Engine::Vector, Opcode::TensorReduce),
            (Engine::Scalar, Opcode::Activation),
            (Engine::Vector, Opcode::Reciprocal),
            // Scaling by the [P, 1] reciprocal is a tensor_scalar-class instruction; no engine
            // is named, and in fp32 on trn2 ScalarE runs it for less than VectorE.
            (Engine::Scalar, Opcode::TensorScalar),
        ]
    );
    assert!(ops[1..].iter().all(|o| o.2 == "nl.softmax"));
    // The reciprocal works on one value per partition.
    assert_eq!((ops[3].3, ops[3].4), (128, 1));
    let ops = ops_of(|| {
        let (x, g) = (nl::load(&a), nl::load(&w));
        let _ = nl::rms_norm(&x, &g, 1, 512, 1e-6);
        let _ = nl::var(&x, &[1]);
    });
    let kinds: Vec<(Engine, Opcode, &str)> = ops[2..].iter().map(|o| (o.0, o.1, o.2)).collect();
    assert_eq!(
        kinds,
        vec![
            (Engine::Scalar, Opcode::Activation, "nl.rms_norm"),
            (Engine::Vector, Opcode::TensorScalar, "nl.rms_norm"),
            (Engine::Scalar, Opcode::Activation, "nl.rms_norm"),
            // x times the [P, 1] inverse rms: tensor_scalar class (fp32 on trn2, no engine
            // named: ScalarE); times gamma: tensor_tensor.
            (Engine::Scalar, Opcode::TensorScalar, "nl.rms_norm"),
            (Engine::Vector, Opcode::TensorTensor, "nl.rms_norm"),
            (Engine::Vector, Opcode::TensorReduce, "nl.var"),
            (Engine::Vector, Opcode::TensorReduce, "nl.var"),
        ]
    );
}

#[test]
fn estimate_mode_runs_without_values() {
    let a = Hbm::<f32>::shape_only([128, 512]);
    let r = Launch::new(1)
        .mode(Mode::Estimate)
        .run(|| {
            let x = nl::load(&a);
            let s = nl::softmax(&x, 1);
            let m = nl::mean(&s, &[1], true);
            let _ = nl::where_(&nl::greater(&m, 0.0), &m, 1.0);
            let _ = &x * 2.0 + nl::iota(&[128, 512], 1, DType::F32);
        })
        .unwrap();
    assert!(r.profile.unwrap().ops.len() >= 10);
}

// ------------------------------------------------------------------ tutorial-style kernels

/// The rmsnorm tutorial: `a * rsqrt(mean(a^2, 1)) * g` (no epsilon), 128 rows per instance,
/// with a partial last tile when the row count is not a multiple of 128.
#[nki_kernel]
fn rmsnorm_tutorial(a: &Hbm<f32>, g: &Hbm<f32>, out: &mut Hbm<f32>) {
    let rows = a.shape()[0];
    let i = nl::program_id(0) * 128;
    let n = (rows - i).min(128);
    let x = nl::load(a.slice((i..i + n, ..)));
    let w = nl::load(g);
    let ms = nl::mean(&nl::square(&x), &[1], true);
    let y = &x * &nl::rsqrt(&ms);
    nl::store(out.slice((i..i + n, ..)), &nl::multiply(&y, &w));
}

#[test]
fn rmsnorm_tutorial_kernel_on_250_rows() {
    let mut rng = Rng(91);
    let (rows, f) = (250, 512);
    let xs = rng.vec(rows * f, -1.0, 1.0);
    let gs = rng.vec(f, 0.0, 1.0);
    let (a, g) = (hbm(&[rows, f], xs.clone()), hbm(&[1, f], gs.clone()));
    let mut out = Hbm::<f32>::zeros([rows, f]);
    launch!(rmsnorm_tutorial[2](&a, &g, &mut out)).unwrap();
    let got = out.to_f32_vec().unwrap();
    let mut want = vec![];
    for r in xs.chunks(f) {
        let ms = r.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / f as f64;
        want.extend(
            r.iter()
                .zip(&gs)
                .map(|(&v, &w)| (v as f64 / ms.sqrt() * w as f64) as f32),
        );
    }
    // The tutorial's torch/jax tolerance is atol 1e-5, rtol 1e-3; fp32 math meets 1e-5.
    assert_close(&got, &want, 1e-5, 1e-6, "rmsnorm tutorial");
}

/// Row softmax over a grid of 128-row tiles, in bf16 storage with fp32 math.
#[nki_kernel]
fn softmax_rows(x: &Hbm<bf16>, out: &mut Hbm<bf16>) {
    let i = nl::program_id(0) * 128;
    let t = nl::load(x.slice((i..i + 128, ..)));
    nl::store(out.slice((i..i + 128, ..)), &nl::softmax(&t, 1));
}

#[test]
fn softmax_kernel_over_a_grid() {
    let mut rng = Rng(92);
    let (rows, f) = (256, 300);
    let xs: Vec<bf16> = rng
        .vec(rows * f, -4.0, 4.0)
        .into_iter()
        .map(bf16::from_f32)
        .collect();
    let x = Hbm::<bf16>::from_vec(&[rows, f], xs.clone()).unwrap();
    let mut out = Hbm::<bf16>::zeros([rows, f]);
    launch!(softmax_rows[2](&x, &mut out)).unwrap();
    let got = out.to_f32_vec().unwrap();
    let xf: Vec<f32> = xs.iter().map(|v| v.to_f32()).collect();
    let want: Vec<f32> = softmax_ref(&xf, f).into_iter().map(bf).collect();
    // Public bf16 tolerance (atol 1e-4, rtol 1e-2); most elements are exactly the rounded
    // reference.
    assert_close(&got, &want, 1e-2, 1e-4, "softmax kernel");
    let exact = got.iter().zip(&want).filter(|(g, w)| g == w).count();
    assert!(
        exact * 10 >= got.len() * 9,
        "only {exact} of {} exact",
        got.len()
    );
}
