//! The VectorE accumulator instructions against plain-Rust references written from the NKI
//! 0.7 definitions: `tensor_scalar_reduce`, `tensor_scalar_cumulative`, `select_reduce`,
//! `range_select`, `exponential` (trn3), `tensor_copy_predicated`; register chaining across
//! instructions (`reduce` after `reset_reduce`, `load_reduce`), edge values (NaN, -inf fill,
//! a single element), and the rules as errors.

use nki_core::nisa::{AccumOpts, ReduceCmd};
use nki_core::prelude::*;

mod common;
use common::{assert_f32_close, fails_with, hbm, Rng};

use nisa::AluOp;

/// Runs `body` on `target` with two f32 outputs of `a` and `b` shapes; returns both.
fn run2(
    target: Target,
    a: &[usize],
    b: &[usize],
    body: impl Fn(&HbmOut<'_, f32>, &HbmOut<'_, f32>) + Sync,
) -> Result<(Vec<f32>, Vec<f32>), NkiError> {
    let mut x = Hbm::<f32>::zeros_dyn(a).unwrap();
    let mut y = Hbm::<f32>::zeros_dyn(b).unwrap();
    {
        let (ox, oy) = (x.as_output(), y.as_output());
        Launch::new(1).target(target).run(|| body(&ox, &oy))?;
    }
    Ok((x.to_f32_vec().unwrap(), y.to_f32_vec().unwrap()))
}

fn sbuf(dims: &[usize], dtype: DType) -> Tile {
    nl::ndarray(dims, dtype, MemKind::Sbuf)
}

/// Sum of `row` rounded once to f32 (the definition the instructions use per row).
fn row_sum(row: &[f32]) -> f32 {
    row.iter().map(|&v| v as f64).sum::<f64>() as f32
}

#[test]
fn tensor_scalar_reduce_sums_and_chains_through_the_registers() {
    let (p, f) = (64, 100);
    let mut rng = Rng(3);
    let xs = rng.int_f32s(p * f, -20, 20);
    let ys = rng.int_f32s(p * f, -20, 20);
    let scale = rng.int_f32s(p, -3, 3);
    let (xh, yh, sh) = (
        hbm(&[p, f], xs.clone()),
        hbm(&[p, f], ys.clone()),
        hbm(&[p, 1], scale.clone()),
    );
    let (dst, res) = run2(Target::Trn2, &[p, f], &[p, 3], |o, r| {
        let (x, y, s) = (nl::load(&xh), nl::load(&yh), nl::load(&sh));
        let d = sbuf(&[p, f], DType::F32);
        let d2 = sbuf(&[p, f], DType::F32);
        let rr = sbuf(&[p, 3], DType::F32);
        // x * scale, summed; then y * scale reduced on top (chaining), read out negated.
        nisa::tensor_scalar_reduce(
            &d,
            &x,
            AluOp::Multiply,
            &s,
            AluOp::Add,
            AccumOpts::new().reduce_res(rr.slice((.., 0..1))),
        );
        nisa::tensor_scalar_reduce(
            &d2,
            &y,
            AluOp::Multiply,
            &s,
            AluOp::Add,
            AccumOpts::new()
                .cmd(ReduceCmd::Reduce)
                .reduce_res(rr.slice((.., 1..2)))
                .negate(),
        );
        // max of (y - 1), loaded with 15 first.
        nisa::tensor_scalar_reduce(
            &d2,
            &y,
            AluOp::Subtract,
            1.0,
            AluOp::Maximum,
            AccumOpts::new()
                .cmd(ReduceCmd::LoadReduce)
                .init(15.0)
                .reduce_res(rr.slice((.., 2..3))),
        );
        nl::store(o, &d);
        nl::store(r, &rr);
    })
    .unwrap();
    let want_d: Vec<f32> = xs
        .chunks(f)
        .zip(&scale)
        .flat_map(|(row, s)| row.iter().map(move |v| v * s))
        .collect();
    assert_eq!(dst, want_d);
    for r in 0..p {
        let a = row_sum(&want_d[r * f..(r + 1) * f]);
        let b: Vec<f32> = ys[r * f..(r + 1) * f]
            .iter()
            .map(|v| v * scale[r])
            .collect();
        let chained = a + row_sum(&b);
        let m = ys[r * f..(r + 1) * f]
            .iter()
            .map(|v| v - 1.0)
            .fold(15.0f32, f32::max);
        assert_eq!(res[r * 3], a, "row {r} sum");
        assert_eq!(res[r * 3 + 1], -chained, "row {r} chained, negated");
        assert_eq!(res[r * 3 + 2], m, "row {r} load_reduce max");
    }
}

#[test]
fn tensor_scalar_cumulative_follows_the_pseudocode() {
    let (p, f) = (32, 17);
    let mut rng = Rng(5);
    let xs = rng.int_f32s(p * f, -9, 9);
    let xh = hbm(&[p, f], xs.clone());
    let cases = [
        (AluOp::Add, ReduceCmd::ResetReduce, 0.0),
        (AluOp::Maximum, ReduceCmd::ResetReduce, 0.0),
        (AluOp::Subtract, ReduceCmd::ResetReduce, 0.0),
        (AluOp::Multiply, ReduceCmd::LoadReduce, 0.5),
    ];
    for (op1, cmd, init) in cases {
        let (got, res) = run2(Target::Trn2, &[p, f], &[p, 1], |o, r| {
            let x = nl::load(&xh);
            let d = sbuf(&[p, f], DType::F32);
            let rr = sbuf(&[p, 1], DType::F32);
            let mut args = AccumOpts::new().cmd(cmd).reduce_res(&rr);
            if cmd == ReduceCmd::LoadReduce {
                args = args.init(init);
            }
            nisa::tensor_scalar_cumulative(&d, &x, AluOp::Multiply, op1, 0.5, args);
            nl::store(o, &d);
            nl::store(r, &rr);
        })
        .unwrap();
        // The documented loop: reg = op1(op0(x, imm0), reg); out = reg.
        let mut want = Vec::new();
        let mut regs = Vec::new();
        for row in xs.chunks(f) {
            let mut reg = match (cmd, op1) {
                (ReduceCmd::LoadReduce, _) => init,
                (_, AluOp::Multiply) => 1.0,
                (_, AluOp::Maximum) => f32::NEG_INFINITY,
                _ => 0.0,
            };
            for &v in row {
                let t = v * 0.5;
                reg = match op1 {
                    AluOp::Add => t + reg,
                    AluOp::Subtract => t - reg,
                    AluOp::Multiply => t * reg,
                    _ => t.max(reg),
                };
                want.push(reg);
            }
            regs.push(reg);
        }
        assert_eq!(got, want, "{op1:?}");
        assert_eq!(res, regs, "{op1:?} registers");
    }
}

#[test]
fn select_reduce_and_copy_predicated() {
    let (p, f) = (16, 40);
    let mut rng = Rng(11);
    let xs = rng.vec(p * f, -50.0, 50.0);
    let preds = rng.int_f32s(p * f, 0, 1);
    let fills = rng.vec(p, -100.0, -60.0);
    let (xh, ph, fh) = (
        hbm(&[p, f], xs.clone()),
        hbm(&[p, f], preds.clone()),
        hbm(&[p, 1], fills.clone()),
    );
    for reverse in [false, true] {
        let (got, res) = run2(Target::Trn2, &[p, f], &[p, 1], |o, r| {
            let x = nl::load(&xh);
            let pr = nl::load_as(&ph, DType::U8);
            let fl = nl::load(&fh);
            let d = sbuf(&[p, f], DType::F32);
            let rr = sbuf(&[p, 1], DType::F32);
            let mut args = AccumOpts::new().cmd(ReduceCmd::ResetReduce).reduce_res(&rr);
            if reverse {
                args = args.reverse_pred();
            }
            nisa::select_reduce(&d, &pr, &x, &fl, AluOp::Maximum, args);
            nl::store(o, &d);
            nl::store(r, &rr);
        })
        .unwrap();
        let want: Vec<f32> = (0..p * f)
            .map(|i| {
                if (preds[i] != 0.0) != reverse {
                    xs[i]
                } else {
                    fills[i / f]
                }
            })
            .collect();
        assert_eq!(got, want, "reverse={reverse}");
        for r in 0..p {
            let m = want[r * f..(r + 1) * f]
                .iter()
                .fold(f32::NEG_INFINITY, |a, &b| a.max(b));
            assert_eq!(res[r], m, "row {r}");
        }
    }
    // tensor_copy_predicated: a tile source, then a scalar with the predicate reversed.
    let (got, _) = run2(Target::Trn2, &[p, f], &[p, 1], |o, unused| {
        let x = nl::load(&xh);
        let pr = nl::load_as(&ph, DType::U16);
        let d = sbuf(&[p, f], DType::F32);
        nisa::memset(&d, 7.0, None);
        nisa::tensor_copy_predicated(&d, &x, &pr, None);
        nisa::tensor_copy_predicated(&d, -1.0, &pr, nisa::PredicateOpts::new().reverse_pred());
        nl::store(o, &d);
        nl::store(unused, d.slice((.., 0..1)));
    })
    .unwrap();
    let want: Vec<f32> = (0..p * f)
        .map(|i| if preds[i] != 0.0 { xs[i] } else { -1.0 })
        .collect();
    assert_eq!(got, want);
}

#[test]
fn range_select_is_a_causal_mask_with_a_row_max() {
    let (p, f) = (128, 96);
    let mut rng = Rng(13);
    let xs = rng.vec(p * f, -10.0, 10.0);
    let xh = hbm(&[p, f], xs.clone());
    // Row r keeps columns 8 <= start + i <= r (start = 8: the tile is columns 8..104).
    let lo: Vec<f32> = vec![8.0; p];
    let hi: Vec<f32> = (0..p).map(|r| r as f32).collect();
    let (loh, hih) = (hbm(&[p, 1], lo), hbm(&[p, 1], hi.clone()));
    for dtype in [DType::F32, DType::BF16] {
        let (got, res) = run2(Target::Trn2, &[p, f], &[p, 1], |o, r| {
            let x = nl::load(&xh);
            let (b0, b1) = (nl::load(&loh), nl::load(&hih));
            let d = sbuf(&[p, f], dtype);
            let rr = sbuf(&[p, 1], DType::F32);
            nisa::range_select(
                &d,
                &x,
                AluOp::GreaterEqual,
                AluOp::LessEqual,
                &b0,
                &b1,
                AluOp::Maximum,
                AccumOpts::new().range_start(8).reduce_res(&rr),
            );
            let out = sbuf(&[p, f], DType::F32);
            nisa::tensor_copy(&out, &d, None);
            nl::store(o, &out);
            nl::store(r, &rr);
        })
        .unwrap();
        for r in 0..p {
            let mut m = f32::NEG_INFINITY;
            for i in 0..f {
                let idx = 8 + i;
                let keep = idx >= 8 && idx as f32 <= hi[r];
                let v = if keep { xs[r * f + i] } else { f32::MIN };
                m = m.max(v);
                let want = match (dtype, keep) {
                    (DType::BF16, false) => f32::NEG_INFINITY,
                    (DType::BF16, true) => common::bf(v),
                    _ => v,
                };
                assert_eq!(got[r * f + i], want, "{dtype} [{r}, {i}]");
            }
            assert_eq!(res[r], m, "row {r} max");
        }
    }
}

#[test]
fn exponential_on_trn3_with_a_running_sum() {
    let (p, f) = (128, 64);
    let mut rng = Rng(17);
    let xs = rng.vec(p * f, -8.0, 8.0);
    let ys = rng.vec(p * f, -8.0, 8.0);
    let mx = rng.vec(p, -1.0, 1.0);
    let (xh, yh, mh) = (
        hbm(&[p, f], xs.clone()),
        hbm(&[p, f], ys.clone()),
        hbm(&[p, 1], mx.clone()),
    );
    let (got, res) = run2(Target::Trn3, &[p, f], &[p, 2], |o, r| {
        let (x, y, m) = (nl::load(&xh), nl::load(&yh), nl::load(&mh));
        let d = sbuf(&[p, f], DType::F32);
        let d2 = sbuf(&[p, f], DType::F32);
        let rr = sbuf(&[p, 2], DType::F32);
        nisa::exponential(
            &d,
            &x,
            &m,
            AccumOpts::new()
                .cmd(ReduceCmd::ResetReduce)
                .reduce_res(rr.slice((.., 0..1))),
        );
        // The second tile of the same rows sums on top (a softmax over 2 x 64 columns).
        nisa::exponential(
            &d2,
            &y,
            &m,
            AccumOpts::new()
                .cmd(ReduceCmd::Reduce)
                .reduce_res(rr.slice((.., 1..2))),
        );
        nl::store(o, &d);
        nl::store(r, &rr);
    })
    .unwrap();
    let want: Vec<f32> = (0..p * f)
        .map(|i| ((xs[i] as f64) - mx[i / f] as f64).exp() as f32)
        .collect();
    assert_f32_close(&got, &want, "exp(x - max)");
    for r in 0..p {
        let e = |v: &[f32]| -> f64 {
            v.iter()
                .map(|&x| ((x as f64) - mx[r] as f64).exp())
                .sum::<f64>()
        };
        let a = e(&xs[r * f..(r + 1) * f]);
        let b = e(&ys[r * f..(r + 1) * f]);
        common::assert_close(&[res[2 * r]], &[a as f32], 1e-5, 0.0, "first sum");
        common::assert_close(&[res[2 * r + 1]], &[(a + b) as f32], 1e-5, 0.0, "chained");
    }
    // Edge values: -inf -> 0, +inf -> inf, NaN -> NaN; a single element.
    let eh = hbm(&[1, 3], vec![f32::NEG_INFINITY, f32::INFINITY, f32::NAN]);
    let (got, _) = run2(Target::Trn3, &[1, 3], &[1, 1], |o, unused| {
        let x = nl::load(&eh);
        let d = sbuf(&[1, 3], DType::F32);
        nisa::exponential(&d, &x, 0.0, None);
        nl::store(o, &d);
        nl::store(unused, d.slice((.., 0..1)));
    })
    .unwrap();
    assert_eq!(got[0], 0.0);
    assert_eq!(got[1], f32::INFINITY);
    assert!(got[2].is_nan());
}

#[test]
fn accumulator_rules_are_errors() {
    // exponential is NeuronCore-v4 only.
    let e = fails_with(ErrorKind::InvalidArgument, || {
        let x = sbuf(&[8, 8], DType::F32);
        nisa::memset(&x, 0.0, None);
        nisa::exponential(&x, &x, 0.0, None);
    });
    assert!(e.to_string().contains("NeuronCore-v4"), "{e}");
    // Reducing onto registers nothing reset.
    let e = fails_with(ErrorKind::InvalidArgument, || {
        let x = sbuf(&[8, 8], DType::F32);
        let r = sbuf(&[8, 1], DType::F32);
        nisa::memset(&x, 0.0, None);
        nisa::tensor_scalar_reduce(
            &x,
            &x,
            AluOp::Add,
            1.0,
            AluOp::Add,
            AccumOpts::new().cmd(ReduceCmd::Reduce).reduce_res(&r),
        );
    });
    assert!(e.to_string().contains("no defined value"), "{e}");
    // load_reduce needs reduce_init; select_reduce only reduces by max; bad predicate dtype.
    let e = fails_with(ErrorKind::InvalidArgument, || {
        let x = sbuf(&[8, 8], DType::F32);
        nisa::memset(&x, 0.0, None);
        nisa::tensor_scalar_reduce(
            &x,
            &x,
            AluOp::Add,
            1.0,
            AluOp::Add,
            AccumOpts::new().cmd(ReduceCmd::LoadReduce),
        );
    });
    assert!(e.to_string().contains("reduce_init"), "{e}");
    let e = fails_with(ErrorKind::DType, || {
        let x = sbuf(&[8, 8], DType::F32);
        nisa::memset(&x, 0.0, None);
        nisa::select_reduce(&x, &x, &x, 0.0, AluOp::Maximum, None);
    });
    assert!(e.to_string().contains("predicate"), "{e}");
    // range_select is NeuronCore-v3+.
    let e = Launch::new(1)
        .target(Target::Trn1)
        .run(|| {
            let x = sbuf(&[8, 8], DType::F32);
            let b = sbuf(&[8, 1], DType::F32);
            nisa::memset(&x, 0.0, None);
            nisa::memset(&b, 0.0, None);
            nisa::range_select(
                &x,
                &x,
                AluOp::Less,
                AluOp::Less,
                &b,
                &b,
                AluOp::Maximum,
                None,
            );
        })
        .expect_err("trn1 has no range_select");
    assert!(e.to_string().contains("NeuronCore-v3"), "{e}");
}

#[test]
fn activation_chains_scalar_registers_and_takes_a_scalar_bias() {
    use nisa::{ActFn, ActivationOpts};
    let (p, f) = (64, 48);
    let mut rng = Rng(19);
    let xs = rng.vec(p * f, -2.0, 2.0);
    let ys = rng.vec(p * f, -2.0, 2.0);
    let (xh, yh) = (hbm(&[p, f], xs.clone()), hbm(&[p, f], ys.clone()));
    let (got, res) = run2(Target::Trn2, &[p, f], &[p, 3], |o, r| {
        let (x, y) = (nl::load(&xh), nl::load(&yh));
        let d = sbuf(&[p, f], DType::F32);
        let rr = sbuf(&[p, 3], DType::F32);
        // sum(exp(x * 0.5 + 0.25)) into the registers, no read-out.
        nisa::activation(
            &d,
            ActFn::Exp,
            &x,
            ActivationOpts::new()
                .scale(0.5)
                .bias(0.25)
                .reduce(AluOp::Add, ReduceCmd::ResetReduce),
        );
        // ... plus sum(square(y)), read out: a norm over two tiles of one row.
        let d2 = sbuf(&[p, f], DType::F32);
        nisa::activation(
            &d2,
            ActFn::Square,
            &y,
            ActivationOpts::new()
                .reduce(AluOp::Add, ReduceCmd::Reduce)
                .reduce_res(rr.slice((.., 0..1))),
        );
        // idle keeps them; a read-out only.
        nisa::activation(
            &d2,
            ActFn::Copy,
            &y,
            ActivationOpts::new().reduce_res(rr.slice((.., 1..2))),
        );
        // activation_reduce resets them to its own sums.
        nisa::activation_reduce(&d2, ActFn::Copy, &y, AluOp::Add, rr.slice((.., 2..3)), None);
        nl::store(o, &d);
        nl::store(r, &rr);
    })
    .unwrap();
    let want: Vec<f32> = xs
        .iter()
        .map(|&v| ((v * 0.5 + 0.25) as f64).exp() as f32)
        .collect();
    assert_f32_close(&got, &want, "exp(0.5 x + 0.25)");
    for r in 0..p {
        let a: f64 = want[r * f..(r + 1) * f].iter().map(|&v| v as f64).sum();
        let b: f64 = ys[r * f..(r + 1) * f]
            .iter()
            .map(|&v| (v as f64) * (v as f64))
            .sum();
        let c: f64 = ys[r * f..(r + 1) * f].iter().map(|&v| v as f64).sum();
        common::assert_close(&[res[3 * r]], &[(a + b) as f32], 1e-5, 1e-6, "chained");
        assert_eq!(res[3 * r + 1], res[3 * r], "idle leaves the registers");
        common::assert_close(&[res[3 * r + 2]], &[c as f32], 1e-5, 1e-6, "reset");
    }
    // A scalar bias is NeuronCore-v3+.
    let e = Launch::new(1)
        .target(Target::Trn1)
        .run(|| {
            let x = sbuf(&[8, 8], DType::F32);
            nisa::memset(&x, 0.0, None);
            nisa::activation(&x, ActFn::Exp, &x, ActivationOpts::new().bias(1.0));
        })
        .expect_err("trn1 needs a bias vector");
    assert!(e.to_string().contains("NeuronCore-v3"), "{e}");
}

#[test]
fn activate2_stages_and_abs_max_reduction_on_trn3() {
    use nisa::{ActFn, Activate2Opts};
    let (p, f) = (32, 40);
    let mut rng = Rng(23);
    let xs = rng.vec(p * f, -3.0, 3.0);
    let sc = rng.vec(p, 0.5, 2.0);
    let (xh, sh) = (hbm(&[p, f], xs.clone()), hbm(&[p, 1], sc.clone()));
    let cases = [
        (AluOp::Multiply, AluOp::Add, false, false),
        (AluOp::Multiply, AluOp::Subtract, false, true),
        (AluOp::Subtract, AluOp::Bypass, true, false),
        (AluOp::Bypass, AluOp::Bypass, false, false),
    ];
    for (op0, op1, r0, r1) in cases {
        let (got, res) = run2(Target::Trn3, &[p, f], &[p, 1], |o, r| {
            let (x, s) = (nl::load(&xh), nl::load(&sh));
            let d = sbuf(&[p, f], DType::F32);
            let rr = sbuf(&[p, 1], DType::F32);
            let mut args = Activate2Opts::new()
                .reduce(AluOp::AbsMax, ReduceCmd::ResetReduce)
                .reduce_res(&rr);
            if r0 {
                args = args.reverse0();
            }
            if r1 {
                args = args.reverse1();
            }
            nisa::activate2(&d, ActFn::Tanh, &x, &s, 0.75, op0, op1, args);
            nl::store(o, &d);
            nl::store(r, &rr);
        })
        .unwrap();
        let stage = |o: AluOp, rev: bool, v: f32, imm: f32| {
            let (a, b) = if rev { (imm, v) } else { (v, imm) };
            match o {
                AluOp::Multiply => a * b,
                AluOp::Add => a + b,
                AluOp::Subtract => a - b,
                _ => v,
            }
        };
        let want: Vec<f32> = (0..p * f)
            .map(|i| {
                let v = stage(op1, r1, stage(op0, r0, xs[i], sc[i / f]), 0.75);
                (v as f64).tanh() as f32
            })
            .collect();
        assert_f32_close(&got, &want, &format!("{op0:?} {op1:?}"));
        // NKI 0.7 `nl.abs_max`: the value of larger magnitude with its sign, the later one on
        // a tie ("returns y when |x| == |y|").
        for r in 0..p {
            let m =
                got[r * f..(r + 1) * f]
                    .iter()
                    .fold(0.0f32, |a, &b| if a.abs() > b.abs() { a } else { b });
            assert_eq!(res[r], m, "row {r} abs_max");
        }
    }
    let e = fails_with(ErrorKind::InvalidArgument, || {
        let x = sbuf(&[8, 8], DType::F32);
        nisa::memset(&x, 0.0, None);
        nisa::activate2(&x, ActFn::Exp, &x, 1.0, 1.0, AluOp::Add, AluOp::Add, None);
    });
    assert!(e.to_string().contains("NeuronCore-v4"), "{e}");
}
