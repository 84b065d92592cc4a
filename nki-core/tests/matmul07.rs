//! `nc_matmul`'s last 0.7 options and inputs: the `is_stationary_onezero` /
//! `is_moving_onezero` hints ("2x better performance if the tile is in float32", no effect
//! otherwise; nki-rs checks the promised values) and `tfloat32` (1S 8E 10M: casts round the
//! mantissa to 10 bits, TensorE pairs it with float32/tfloat32 only, at the bf16 rate).

use nki_core::nisa::MatmulOpts;
use nki_core::prelude::*;

mod common;
use common::{hbm, zeros, Rng};

/// tfloat32 from its definition: keep 10 of the 23 mantissa bits, round to nearest, ties to
/// the even kept mantissa (computed on the value, not on the bits).
fn tf32_ref(x: f32) -> f32 {
    if !x.is_finite() || x == 0.0 {
        return x;
    }
    let e = (x.abs() as f64).log2().floor() as i32;
    // A quantum of 2^(e - 10) for normal numbers; subnormals keep fp32's quantum 2^-149
    // scaled the same way (2^(-126 - 10)).
    let q = 2f64.powi(e.max(-126) - 10);
    let v = x as f64 / q;
    let fl = v.floor();
    let r = match (v - fl).partial_cmp(&0.5).unwrap() {
        std::cmp::Ordering::Less => fl,
        std::cmp::Ordering::Greater => fl + 1.0,
        std::cmp::Ordering::Equal if fl % 2.0 == 0.0 => fl,
        std::cmp::Ordering::Equal => fl + 1.0,
    };
    let out = r * q;
    if out.abs() > f32::MAX as f64 {
        f32::INFINITY.copysign(x)
    } else {
        out as f32
    }
}

/// `stationary^T @ moving` in f64 (`[K, M]`, `[K, N]` -> `[M, N]`).
fn matmul_ref(s: &[f32], m: &[f32], k: usize, mm: usize, n: usize) -> Vec<f64> {
    let mut out = vec![0.0f64; mm * n];
    for p in 0..k {
        for i in 0..mm {
            for j in 0..n {
                out[i * n + j] += s[p * mm + i] as f64 * m[p * n + j] as f64;
            }
        }
    }
    out
}

/// The matmul `[k, mm] x [k, n]` of `dtype` operands; returns the result and the modelled
/// TensorE time of one more such matmul in a stream of them (simulate mode: TensorE busy
/// time of 8 matmuls minus that of 4, over 4).
fn matmul_run(
    target: Target,
    hs: (&Hbm<f32>, &Hbm<f32>),
    dims: (usize, usize, usize),
    dtype: DType,
    opts: MatmulOpts,
) -> Result<(Vec<f32>, f64), NkiError> {
    let (_, t4) = matmul_reps(target, hs, dims, dtype, opts, 4)?;
    let (v, t8) = matmul_reps(target, hs, dims, dtype, opts, 8)?;
    Ok((v, (t8 - t4) / 4.0))
}

/// `reps` matmuls into one PSUM tile; the result and the TensorE busy time.
fn matmul_reps(
    target: Target,
    (sh, mh): (&Hbm<f32>, &Hbm<f32>),
    (k, mm, n): (usize, usize, usize),
    dtype: DType,
    opts: MatmulOpts,
    reps: usize,
) -> Result<(Vec<f32>, f64), NkiError> {
    let mut out = zeros::<f32>(&[mm, n]);
    let rep = {
        let o = out.as_output();
        Launch::new(1).target(target).mode(Mode::Simulate).run(|| {
            let (s32, m32) = (nl::load(sh), nl::load(mh));
            let (st, mv) = (
                nl::ndarray(&[k, mm], dtype, MemKind::Sbuf),
                nl::ndarray(&[k, n], dtype, MemKind::Sbuf),
            );
            nisa::tensor_copy(&st, &s32, None);
            nisa::tensor_copy(&mv, &m32, None);
            let ps = nl::ndarray(&[mm, n], DType::F32, MemKind::Psum);
            for _ in 0..reps {
                nisa::nc_matmul(&ps, &st, &mv, opts.accumulate(false));
            }
            let sb = nl::ndarray(&[mm, n], DType::F32, MemKind::Sbuf);
            nisa::tensor_copy(&sb, &ps, None);
            nl::store(&o, &sb);
        })?
    };
    let busy = rep
        .profile
        .expect("simulate profile")
        .engine("TensorE")
        .expect("TensorE ran")
        .active_ns;
    Ok((out.to_vec().unwrap(), busy))
}

#[test]
fn onezero_hints_halve_an_fp32_matmul_and_keep_its_values() {
    let (k, mm, n) = (128, 64, 256);
    let mut rng = Rng(3);
    // stationary: a 0/1 mask; moving: fp32 values (also 0/1 for the both-hinted case).
    let s: Vec<f32> = rng
        .ints(k * mm, 0, 1)
        .into_iter()
        .map(|v| v as f32)
        .collect();
    let m = rng.vec(k * n, -2.0, 2.0);
    let m01: Vec<f32> = rng
        .ints(k * n, 0, 1)
        .into_iter()
        .map(|v| v as f32)
        .collect();
    let (sh, mh, m01h) = (
        hbm(&[k, mm], s.clone()),
        hbm(&[k, n], m.clone()),
        hbm(&[k, n], m01.clone()),
    );
    let dims = (k, mm, n);
    // trn1: no PE power throttle, so a stream of matmuls costs their cycles exactly.
    let run = |mv: &Hbm<f32>, opts| matmul_run(Target::Trn1, (&sh, mv), dims, DType::F32, opts);
    let (plain, t_plain) = run(&mh, MatmulOpts::new()).unwrap();
    let (hinted, t_hinted) = run(&mh, MatmulOpts::new().stationary_onezero()).unwrap();
    // The values do not depend on the hint, and match an f64 reference to fp32 accuracy.
    assert_eq!(plain, hinted);
    let want = matmul_ref(&s, &m, k, mm, n);
    for (i, (&g, &w)) in hinted.iter().zip(&want).enumerate() {
        assert!(
            (g as f64 - w).abs() <= 1e-5 * (1.0 + w.abs()),
            "[{i}] {g} vs {w}"
        );
    }
    // The cost: TensorE time halves with one hint, and halves again with both.
    assert!(t_plain > 0.0);
    let r1 = t_plain / t_hinted;
    assert!(
        (r1 - 2.0).abs() < 1e-9,
        "one hint: {t_plain} / {t_hinted} = {r1}"
    );
    let (p01, t01) = run(&m01h, MatmulOpts::new()).unwrap();
    let (both, t_both) = run(
        &m01h,
        MatmulOpts::new().stationary_onezero().moving_onezero(),
    )
    .unwrap();
    assert_eq!(p01, both);
    let r2 = t01 / t_both;
    assert!(
        (r2 - 4.0).abs() < 1e-9,
        "two hints: {t01} / {t_both} = {r2}"
    );
    // A bf16 matmul: the hint has no effect on cost.
    let bf = |opts| matmul_run(Target::Trn1, (&sh, &mh), dims, DType::BF16, opts).unwrap();
    let ((_, tb), (_, tbh)) = (
        bf(MatmulOpts::new()),
        bf(MatmulOpts::new().stationary_onezero()),
    );
    assert_eq!(tb, tbh);
}

#[test]
fn a_broken_onezero_promise_is_an_error() {
    let (k, mm, n) = (32, 16, 8);
    let mut s = vec![1.0f32; k * mm];
    s[5 * mm + 3] = 0.5;
    let (sh, mh) = (hbm(&[k, mm], s), hbm(&[k, n], vec![1.0; k * n]));
    let e = matmul_run(
        Target::Trn2,
        (&sh, &mh),
        (k, mm, n),
        DType::F32,
        MatmulOpts::new().stationary_onezero(),
    )
    .expect_err("0.5 is not a one or a zero");
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("is_stationary_onezero") && msg.contains("partition 5, element 3"),
        "{msg}"
    );
    // The same hint on a bf16 operand is ignored, as documented ("no impact").
    assert!(matmul_run(
        Target::Trn2,
        (&sh, &mh),
        (k, mm, n),
        DType::BF16,
        MatmulOpts::new().stationary_onezero(),
    )
    .is_ok());
}

#[test]
fn tfloat32_casts_round_the_mantissa_to_ten_bits() {
    let mut xs = vec![
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        -0.0,
        0.0,
        1.0,
        // 1 + 2^-11: a tie, to the even mantissa 1.0; 1 + 3 * 2^-11: a tie, up.
        1.0 + 2f32.powi(-11),
        1.0 + 3.0 * 2f32.powi(-11),
        // Just above a tie: up.
        1.0 + 2f32.powi(-11) + 2f32.powi(-20),
        f32::MAX,
        -f32::MAX,
        f32::MIN_POSITIVE,
        1e-40,
        -3.3e-39,
    ];
    let mut rng = Rng(13);
    xs.extend(rng.vec(50, -1e6, 1e6));
    let n = xs.len();
    let xh = hbm(&[1, n], xs.clone());
    let mut out = zeros::<f32>(&[1, n]);
    {
        let o = out.as_output();
        Launch::new(1)
            .run(|| {
                let x = nl::load(&xh);
                let t = nl::ndarray(&[1, n], DType::TF32, MemKind::Sbuf);
                nisa::tensor_copy(&t, &x, None);
                let back = nl::ndarray(&[1, n], DType::F32, MemKind::Sbuf);
                nisa::tensor_copy(&back, &t, None);
                nl::store(&o, &back);
            })
            .unwrap();
    }
    let got = out.to_vec().unwrap();
    for (i, (&g, &x)) in got.iter().zip(&xs).enumerate() {
        let w = tf32_ref(x);
        let same = (g.is_nan() && w.is_nan()) || g.to_bits() == w.to_bits();
        assert!(same, "[{i}] tfloat32({x:e}) = {g:e}, want {w:e}");
    }
    assert_eq!(DType::TF32.size(), 4);
    assert_eq!(DType::TF32.name(), "tfloat32");
    assert!(DType::TF32.is_float());
}

#[test]
fn tfloat32_matmuls_at_the_bf16_rate_and_pair_only_with_fp32() {
    let (k, mm, n) = (128, 128, 512);
    let mut rng = Rng(19);
    let s = rng.vec(k * mm, -1.0, 1.0);
    let m = rng.vec(k * n, -1.0, 1.0);
    let (sh, mh) = (hbm(&[k, mm], s.clone()), hbm(&[k, n], m.clone()));
    let dims = (k, mm, n);
    // trn1: no PE power throttle, so a stream of matmuls costs their cycles exactly.
    let (got, t_tf32) = matmul_run(
        Target::Trn1,
        (&sh, &mh),
        dims,
        DType::TF32,
        MatmulOpts::new(),
    )
    .unwrap();
    // The products of tfloat32-rounded inputs, summed.
    let (st, mt): (Vec<f32>, Vec<f32>) = (
        s.iter().map(|&v| tf32_ref(v)).collect(),
        m.iter().map(|&v| tf32_ref(v)).collect(),
    );
    let want = matmul_ref(&st, &mt, k, mm, n);
    for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
        assert!(
            (g as f64 - w).abs() <= 1e-5 * (1.0 + w.abs()),
            "[{i}] {g} vs {w}"
        );
    }
    // Not the fp32 values: the inputs were rounded.
    let exact = matmul_ref(&s, &m, k, mm, n);
    assert!(got
        .iter()
        .zip(&exact)
        .any(|(&g, &w)| (g as f64 - w).abs() > 1e-4));
    let (_, t_bf16) = matmul_run(
        Target::Trn1,
        (&sh, &mh),
        dims,
        DType::BF16,
        MatmulOpts::new(),
    )
    .unwrap();
    let (_, t_fp32) = matmul_run(
        Target::Trn1,
        (&sh, &mh),
        dims,
        DType::F32,
        MatmulOpts::new(),
    )
    .unwrap();
    assert_eq!(t_tf32, t_bf16);
    assert!((t_fp32 / t_tf32 - 4.0).abs() < 1e-9, "{t_fp32} / {t_tf32}");
    // tfloat32 with bf16: an error naming the rule.
    let e = Launch::new(1)
        .run(|| {
            let st = nl::ndarray(&[k, mm], DType::TF32, MemKind::Sbuf);
            let mv = nl::ndarray(&[k, n], DType::BF16, MemKind::Sbuf);
            nisa::memset(&st, 0.0, None);
            nisa::memset(&mv, 0.0, None);
            let ps = nl::ndarray(&[mm, n], DType::F32, MemKind::Psum);
            nisa::nc_matmul(&ps, &st, &mv, None);
        })
        .expect_err("tfloat32 pairs only with float32/tfloat32");
    assert_eq!(e.kind(), ErrorKind::DType, "{e}");
    assert!(e.to_string().contains("tfloat32/float32"), "{e}");
}

#[test]
fn shared_identity_matrix_is_the_identity_and_transposes() {
    for (n, dtype) in [(128, DType::U8), (37, DType::BF16), (1, DType::F32)] {
        let mut out = zeros::<f32>(&[n, n]);
        {
            let o = out.as_output();
            Launch::new(1)
                .run(|| {
                    let id = nl::shared_identity_matrix(n, dtype);
                    let f = nl::ndarray(&[n, n], DType::F32, MemKind::Sbuf);
                    nisa::tensor_copy(&f, &id, None);
                    nl::store(&o, &f);
                })
                .unwrap();
        }
        let got = out.to_vec().unwrap();
        for (i, &v) in got.iter().enumerate() {
            let want = if i / n == i % n { 1.0 } else { 0.0 };
            assert_eq!(v, want, "{dtype} n = {n}: [{}, {}]", i / n, i % n);
        }
    }
    // As the moving operand of a TensorE transpose (is_transpose needs an exact identity).
    let (p, f) = (64, 48);
    let xs = Rng(7).vec(p * f, -4.0, 4.0);
    let xh = hbm(&[p, f], xs.clone());
    let mut out = zeros::<f32>(&[f, p]);
    {
        let o = out.as_output();
        Launch::new(1)
            .target(Target::Trn2)
            .run(|| {
                let x = nl::load(&xh);
                let id = nl::shared_identity_matrix(p, DType::F32);
                let ps = nl::ndarray(&[f, p], DType::F32, MemKind::Psum);
                nisa::nc_matmul(&ps, &x, &id, MatmulOpts::new().transpose());
                let sb = nl::ndarray(&[f, p], DType::F32, MemKind::Sbuf);
                nisa::tensor_copy(&sb, &ps, None);
                nl::store(&o, &sb);
            })
            .unwrap();
    }
    let got = out.to_vec().unwrap();
    for i in 0..f {
        for j in 0..p {
            assert_eq!(got[i * p + j], xs[j * f + i], "[{i}, {j}]");
        }
    }
    for n in [0, 129] {
        let e = Launch::new(1)
            .run(|| {
                nl::shared_identity_matrix(n, DType::F32);
            })
            .expect_err("n out of range");
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
        assert!(e.to_string().contains("1..=128"), "{e}");
    }
}
