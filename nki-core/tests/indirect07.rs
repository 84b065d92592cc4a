//! NeuronCore-v4 tensor indirection (NKI 0.7 `tensor.indirect(index, num_elem)`): an on-chip
//! view read (gather) or written (scatter) at free-dimension offsets taken from an index
//! tensor, as an operand of the compute instructions, against a plain-Rust reference written
//! from the definition: "offset i comes from `index[i % G, i // G]` where G is the group size
//! (16 for vector/scalar/gpsimd engines, 32 for tensor engine)", the output shape
//! `(P, num_elem)`; with more than `G` index partitions the snake continues over the next `G`
//! partitions (nki-rs's reading, marked [A] in the docs).
//!
//! Edge values (NaN, infinities, -0.0) travel bit-exactly through VectorE / GpSimdE copies;
//! the errors (out-of-range offset, a target before trn3, a partial partition group, a
//! misaligned index, view operations on an indirect view, a DMA of one) name the op, the
//! tensors and the test's line.

use nki_core::nisa::{ActFn, AluOp, Engine, MatmulOpts, Opts, TensorScalarOpts};
use nki_core::prelude::*;

mod common;
use common::{fails_on, hbm, zeros, Rng};

/// Runs `body` once on `target` in `mode`, writing into a fresh f32 output of `shape`;
/// returns it and the modelled latency (simulate mode).
fn run_on(
    target: Target,
    mode: Mode,
    shape: &[usize],
    body: impl Fn(&HbmOut<'_, f32>) + Sync,
) -> (Vec<f32>, Option<f64>) {
    let mut out = zeros::<f32>(shape);
    let latency = {
        let o = out.as_output();
        let report = Launch::new(1)
            .target(target)
            .mode(mode)
            .run(|| body(&o))
            .unwrap();
        report.profile.map(|p| p.latency_ns)
    };
    (out.to_vec().unwrap(), latency)
}

/// The documented offsets: `index[i % G, i // G]` of the `[rows, cols]` index, for
/// `i < num`. With `rows > G` the index is read as its `G`-partition blocks side by side
/// (block `b`'s columns after block `b - 1`'s), the formula then applied to that `[G, ..]`
/// matrix.
fn offsets_ref(index: &[u32], rows: usize, cols: usize, group: usize, num: usize) -> Vec<usize> {
    let g = group.min(rows);
    let blocks = rows / g;
    // m[r][b * cols + c] = index[b * g + r][c]
    let width = blocks * cols;
    let mut m = vec![0u32; g * width];
    for b in 0..blocks {
        for r in 0..g {
            for c in 0..cols {
                m[r * width + b * cols + c] = index[(b * g + r) * cols + c];
            }
        }
    }
    (0..num)
        .map(|i| m[(i % g) * width + i / g] as usize)
        .collect()
}

/// A gather: `out[p, i] = data[p, offset(i)]`.
fn gather_ref(data: &[f32], p: usize, f: usize, offsets: &[usize]) -> Vec<f32> {
    let n = offsets.len();
    (0..p * n)
        .map(|k| data[(k / n) * f + offsets[k % n]])
        .collect()
}

/// A scatter into `base` (`[p, f]`): `base[p, offset(i)] = vals[p, i]`, later `i` last.
fn scatter_ref(base: &mut [f32], f: usize, vals: &[f32], offsets: &[usize]) {
    let n = offsets.len();
    for (k, &v) in vals.iter().enumerate() {
        base[(k / n) * f + offsets[k % n]] = v;
    }
}

/// `[p, f]` data whose first values are the edge values, then small integers (so fp32
/// matmul sums are exact).
fn data(p: usize, f: usize, seed: u64, edges: bool) -> Vec<f32> {
    let mut rng = Rng(seed);
    let mut v = rng.int_f32s(p * f, -8, 8);
    if edges {
        let e = [
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -0.0,
            0.0,
            1e-40,
            -3.0e38,
        ];
        v[..e.len()].copy_from_slice(&e);
    }
    v
}

/// A `[rows, cols]` index of offsets in `0..f`.
fn index(rows: usize, cols: usize, f: usize, seed: u64) -> Vec<u32> {
    let mut rng = Rng(seed);
    rng.ints(rows * cols, 0, f as i64 - 1)
        .into_iter()
        .map(|v| v as u32)
        .collect()
}

/// Bit-exact equality, NaN equal to NaN.
fn assert_bits(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let same = (g.is_nan() && w.is_nan()) || g.to_bits() == w.to_bits();
        assert!(same, "{what}[{i}]: got {g:e}, want {w:e}");
    }
}

/// A gather on VectorE, ScalarE and GpSimdE (`tensor_copy` of an indirect `src`, G = 16) and
/// on TensorE (`nc_matmul` with an indirect `moving`, G = 32), with a `[32, 2]` index: more
/// partitions than VectorE's group, so the two snake orders differ.
#[test]
fn gathers_on_every_engine_family() {
    let (p, f, k) = (32, 40, 2);
    let xs = data(p, f, 3, true);
    let ids = index(p, k, f, 4);
    let (xh, ih) = (
        hbm(&[p, f], xs.clone()),
        Hbm::from_vec(&[p, k], ids.clone()).unwrap(),
    );
    let num = p * k;
    let want16 = gather_ref(&xs, p, f, &offsets_ref(&ids, p, k, 16, num));
    for mode in [Mode::Execute, Mode::Simulate] {
        for engine in [Engine::Vector, Engine::Scalar, Engine::GpSimd] {
            let (got, _) = run_on(Target::Trn3, mode, &[p, num], |o| {
                let (x, i) = (nl::load(&xh), nl::load(&ih));
                let d = nl::ndarray(&[p, num], DType::F32, nl::SBUF);
                nisa::tensor_copy(&d, x.view().indirect(&i, None), Opts::new().engine(engine));
                nl::store(o, &d);
            });
            // ScalarE copies through fp32, VectorE / GpSimdE copy bits: the same values.
            assert_bits(&got, &want16, &format!("{engine:?} {mode:?} gather"));
        }
    }
    // TensorE: dst[M, N] = stationary^T @ moving, moving gathered with G = 32.
    let m = 8;
    let ws = data(p, m, 5, false);
    let xs_small = data(p, f, 6, false);
    let (wh, xh2) = (hbm(&[p, m], ws.clone()), hbm(&[p, f], xs_small.clone()));
    let num = 48;
    let off32 = offsets_ref(&ids, p, k, 32, num);
    let moving = gather_ref(&xs_small, p, f, &off32);
    let mut want = vec![0f32; m * num];
    for r in 0..m {
        for c in 0..num {
            want[r * num + c] = (0..p)
                .map(|q| ws[q * m + r] as f64 * moving[q * num + c] as f64)
                .sum::<f64>() as f32;
        }
    }
    let (got, _) = run_on(Target::Trn3, Mode::Execute, &[m, num], |o| {
        let (w, x, i) = (nl::load(&wh), nl::load(&xh2), nl::load(&ih));
        let acc = nl::ndarray(&[m, num], DType::F32, nl::PSUM);
        nisa::nc_matmul(&acc, &w, x.view().indirect(&i, num), MatmulOpts::default());
        let s = nl::ndarray(&[m, num], DType::F32, nl::SBUF);
        nisa::tensor_copy(&s, &acc, None);
        nl::store(o, &s);
    });
    assert_bits(&got, &want, "TensorE gather (moving)");
    // The groups matter: the VectorE order gives other columns here.
    assert_ne!(off32, offsets_ref(&ids, p, k, 16, num));
}

/// A scatter on VectorE (`tensor_copy`), ScalarE (`tensor_scalar` x 2) and GpSimdE
/// (`tensor_copy`) into an indirect `dst` (G = 16, `[16, 3]` index: NKI's formula exactly),
/// and on TensorE (`nc_matmul` into an indirect PSUM `dst`, G = 32); the columns not indexed
/// keep their values, a repeated offset keeps the last value.
#[test]
fn scatters_on_every_engine_family() {
    let (p, f, k) = (16, 64, 3);
    let base: Vec<f32> = (0..p * f).map(|v| -(v as f32)).collect();
    let mut ids = index(p, k, f, 8);
    ids[5] = ids[0]; // offsets 0 and 5 of the snake: i = 0 -> [0, 0], i = 1 -> [1, 0]; repeat one
    ids[k] = ids[0];
    let num = p * k;
    let vals = data(p, num, 9, true);
    let (bh, vh, ih) = (
        hbm(&[p, f], base.clone()),
        hbm(&[p, num], vals.clone()),
        Hbm::from_vec(&[p, k], ids.clone()).unwrap(),
    );
    let off = offsets_ref(&ids, p, k, 16, num);
    assert_eq!(off[0], off[1], "the test repeats an offset");
    for engine in [Engine::Vector, Engine::Scalar, Engine::GpSimd] {
        let mut want = base.clone();
        let scaled: Vec<f32> = vals.iter().map(|v| v * 2.0).collect();
        let src = if engine == Engine::Scalar {
            &scaled
        } else {
            &vals
        };
        scatter_ref(&mut want, f, src, &off);
        for mode in [Mode::Execute, Mode::Simulate] {
            let (got, _) = run_on(Target::Trn3, mode, &[p, f], |o| {
                let (b, v, i) = (nl::load(&bh), nl::load(&vh), nl::load(&ih));
                let dst = b.view().indirect(&i, None);
                if engine == Engine::Scalar {
                    let args = TensorScalarOpts::new().engine(Engine::Scalar);
                    nisa::tensor_scalar(dst, &v, AluOp::Multiply, 2.0, args);
                } else {
                    nisa::tensor_copy(dst, &v, Opts::new().engine(engine));
                }
                nl::store(o, &b);
            });
            assert_bits(&got, &want, &format!("{engine:?} scatter"));
        }
    }
    // TensorE: dst[32, F] in PSUM, its columns offset(i) (G = 32) written by the matmul.
    let (m, kk, n) = (32, 16, 20);
    let ws = data(kk, m, 10, false);
    let xs = data(kk, n, 11, false);
    let ids32 = index(m, 1, f, 12);
    let (wh, xh, ih32) = (
        hbm(&[kk, m], ws.clone()),
        hbm(&[kk, n], xs.clone()),
        Hbm::from_vec(&[m, 1], ids32.clone()).unwrap(),
    );
    let mut prod = vec![0f32; m * n];
    for r in 0..m {
        for c in 0..n {
            prod[r * n + c] = (0..kk)
                .map(|q| ws[q * m + r] as f64 * xs[q * n + c] as f64)
                .sum::<f64>() as f32;
        }
    }
    let off32 = offsets_ref(&ids32, m, 1, 32, n);
    // accumulate=false overwrites the indexed columns; true (and None on a written dst)
    // adds the product to them.
    for accumulate in [false, true] {
        let mut want = vec![7.0f32; m * f];
        let vals: Vec<f32> = prod
            .iter()
            .map(|v| if accumulate { v + 7.0 } else { *v })
            .collect();
        scatter_ref(&mut want, f, &vals, &off32);
        let (got, _) = run_on(Target::Trn3, Mode::Execute, &[m, f], |o| {
            let (w, x, i) = (nl::load(&wh), nl::load(&xh), nl::load(&ih32));
            let acc = nl::ndarray(&[m, f], DType::F32, nl::PSUM);
            let sevens = nl::ndarray(&[m, f], DType::F32, nl::SBUF);
            nisa::memset(&sevens, 7.0, None);
            nisa::tensor_copy(&acc, &sevens, None);
            let opts = MatmulOpts::default().accumulate(accumulate);
            nisa::nc_matmul(acc.view().indirect(&i, n), &w, &x, opts);
            let s = nl::ndarray(&[m, f], DType::F32, nl::SBUF);
            nisa::tensor_copy(&s, &acc, None);
            nl::store(o, &s);
        });
        assert_bits(
            &got,
            &want,
            &format!("TensorE scatter (dst), accumulate={accumulate}"),
        );
    }
}

/// The other instructions take indirect operands through the same path: `tensor_tensor`
/// with an indirect input and an indirect `dst`, `tensor_reduce` of an indirect input,
/// `activation` (exp) of one.
#[test]
fn other_instructions_take_indirect_operands() {
    let (p, f, k) = (16, 32, 2);
    let xs = data(p, f, 17, false);
    let ys = data(p, p * k, 18, false);
    let ids = index(p, k, f, 19);
    let (xh, yh, ih) = (
        hbm(&[p, f], xs.clone()),
        hbm(&[p, p * k], ys.clone()),
        Hbm::from_vec(&[p, k], ids.clone()).unwrap(),
    );
    let num = p * k;
    let off = offsets_ref(&ids, p, k, 16, num);
    let g = gather_ref(&xs, p, f, &off);
    // tensor_tensor: dst.indirect = x.indirect + y (a read-modify-write of x's columns).
    let mut want = xs.clone();
    let sum: Vec<f32> = g.iter().zip(&ys).map(|(a, b)| a + b).collect();
    scatter_ref(&mut want, f, &sum, &off);
    let (got, _) = run_on(Target::Trn3, Mode::Execute, &[p, f], |o| {
        let (x, y, i) = (nl::load(&xh), nl::load(&yh), nl::load(&ih));
        nisa::tensor_tensor(
            x.view().indirect(&i, None),
            x.view().indirect(&i, None),
            &y,
            AluOp::Add,
            None,
        );
        nl::store(o, &x);
    });
    assert_bits(&got, &want, "tensor_tensor");
    // tensor_reduce (max over the free axis) of the gathered columns.
    let want: Vec<f32> = (0..p)
        .map(|q| {
            g[q * num..(q + 1) * num]
                .iter()
                .fold(f32::NEG_INFINITY, |a, &b| a.max(b))
        })
        .collect();
    let (got, _) = run_on(Target::Trn3, Mode::Execute, &[p, 1], |o| {
        let (x, i) = (nl::load(&xh), nl::load(&ih));
        let d = nl::ndarray(&[p, 1], DType::F32, nl::SBUF);
        nisa::tensor_reduce(&d, AluOp::Maximum, x.view().indirect(&i, None), &[1], None);
        nl::store(o, &d);
    });
    assert_bits(&got, &want, "tensor_reduce");
    // activation(exp): within 2 ulp of exp of the gathered values.
    let (got, _) = run_on(Target::Trn3, Mode::Execute, &[p, num], |o| {
        let (x, i) = (nl::load(&xh), nl::load(&ih));
        let d = nl::ndarray(&[p, num], DType::F32, nl::SBUF);
        nisa::activation(&d, ActFn::Exp, x.view().indirect(&i, None), None);
        nl::store(o, &d);
    });
    for (j, (a, v)) in got.iter().zip(&g).enumerate() {
        let w = (*v as f64).exp() as f32;
        assert!(
            (a - w).abs() <= 2.0 * f32::EPSILON * w.abs(),
            "exp[{j}]: {a} vs {w}"
        );
    }
}

/// In estimate mode (no values) an indirect operand records the same instructions as in
/// simulate mode, with the same modelled time.
#[test]
fn estimate_records_what_simulate_records() {
    let (p, f, k) = (32, 40, 2);
    let (xh, ih) = (
        hbm(&[p, f], data(p, f, 13, false)),
        Hbm::from_vec(&[p, k], index(p, k, f, 14)).unwrap(),
    );
    let (sx, si) = (
        Hbm::<f32>::shape_only([p, f]),
        Hbm::<u32>::shape_only([p, k]),
    );
    let mut seen = Vec::new();
    for mode in [Mode::Simulate, Mode::Estimate] {
        let (x_h, i_h) = if mode == Mode::Estimate {
            (&sx, &si)
        } else {
            (&xh, &ih)
        };
        let (_, latency) = run_on(Target::Trn3, mode, &[p, p * k], |o| {
            let (x, i) = (nl::load(x_h), nl::load(i_h));
            let d = nl::ndarray(&[p, p * k], DType::F32, nl::SBUF);
            nisa::tensor_copy(&d, x.view().indirect(&i, None), None);
            nl::store(o, &d);
        });
        seen.push(latency.expect("a modelled time"));
    }
    assert_eq!(seen[0], seen[1], "simulate vs estimate");
}

/// The rules: an offset outside the view, a target before trn3, a partial partition group, an
/// index not starting on a group boundary, a wrong index, view operations on an indirect
/// view and a DMA of one are errors naming the op, the tensors and the test's line.
#[test]
fn misuse_is_a_clear_error() {
    let (p, f) = (16, 40);
    let xh = hbm(&[p, f], data(p, f, 15, false));
    let mut ids = index(p, 1, f, 16);
    ids[3] = f as u32; // one past the last column
    let ih = Hbm::from_vec(&[p, 1], ids).unwrap();
    let line = |e: &NkiError| e.to_string().contains("indirect07.rs");
    // Out of range.
    let e = fails_on(Target::Trn3, ErrorKind::OutOfBounds, || {
        let (x, i) = (nl::load(&xh), nl::load(&ih));
        let d = nl::ndarray(&[p, p], DType::F32, nl::SBUF);
        nisa::tensor_copy(&d, x.view().indirect(&i, None), None);
    });
    let msg = e.to_string();
    assert!(msg.contains("offset 40") && msg.contains("[3, 0]"), "{msg}");
    assert!(msg.contains("nisa.tensor_copy") && line(&e), "{msg}");
    // Before NeuronCore-v4.
    for target in [Target::Trn1, Target::Trn2] {
        let e = fails_on(target, ErrorKind::InvalidArgument, || {
            let x = nl::load(&xh);
            let i = nl::ndarray(&[p, 1], DType::U32, nl::SBUF);
            nisa::memset(&i, 1.0, None);
            let d = nl::ndarray(&[p, p], DType::F32, nl::SBUF);
            nisa::tensor_copy(&d, x.view().indirect(&i, None), None);
        });
        let msg = e.to_string();
        assert!(
            msg.contains("NeuronCore-v4")
                && msg.contains("tensor_copy")
                && msg.contains("[16, 40]"),
            "{msg}"
        );
        assert!(line(&e), "{msg}");
    }
    // A partial group: 24 partitions on VectorE (G = 16).
    let e = fails_on(Target::Trn3, ErrorKind::PartitionOffset, || {
        let x = nl::ndarray(&[24, 8], DType::F32, nl::SBUF);
        let i = nl::ndarray(&[24, 1], DType::U32, nl::SBUF);
        nisa::memset(&x, 1.0, None);
        nisa::memset(&i, 1.0, None);
        let d = nl::ndarray(&[24, 24], DType::F32, nl::SBUF);
        nisa::tensor_copy(&d, x.view().indirect(&i, None), None);
    });
    assert!(e.to_string().contains("multiple of 16") && line(&e), "{e}");
    // An index whose view starts at partition 8 (not a multiple of G).
    let e = fails_on(Target::Trn3, ErrorKind::PartitionOffset, || {
        let x = nl::ndarray(&[8, 8], DType::F32, nl::SBUF);
        let i = nl::ndarray(&[16, 1], DType::U32, nl::SBUF);
        nisa::memset(&x, 1.0, None);
        nisa::memset(&i, 1.0, None);
        let d = nl::ndarray(&[8, 8], DType::F32, nl::SBUF);
        nisa::tensor_copy(&d, x.view().indirect(i.slice((8..16, ..)), None), None);
    });
    assert!(e.to_string().contains("starts at partition 8"), "{e}");
    // Wrong index: float, other partitions, num_elem too large.
    for (idt, rows, num) in [
        (DType::F32, 16, None),
        (DType::U32, 8, None),
        (DType::U32, 16, Some(17)),
    ] {
        let e = fails_on(Target::Trn3, ErrorKind::InvalidArgument, || {
            let x = nl::ndarray(&[16, 8], DType::F32, nl::SBUF);
            let i = nl::ndarray(&[rows, 1], idt, nl::SBUF);
            let _ = x.view().indirect(&i, num);
        });
        assert!(e.to_string().contains("indirect") && line(&e), "{e}");
    }
    // View operations on an indirect view, and a DMA of one.
    let e = fails_on(Target::Trn3, ErrorKind::InvalidArgument, || {
        let x = nl::ndarray(&[16, 8], DType::F32, nl::SBUF);
        let i = nl::ndarray(&[16, 1], DType::U32, nl::SBUF);
        let _ = x.view().indirect(&i, None).reshape(&[16, 2, 8]);
    });
    assert!(
        e.to_string().contains("is an indirect view") && line(&e),
        "{e}"
    );
    let e = fails_on(Target::Trn3, ErrorKind::InvalidArgument, || {
        let x = nl::ndarray(&[16, 8], DType::F32, nl::SBUF);
        let i = nl::ndarray(&[16, 1], DType::U32, nl::SBUF);
        nisa::memset(&x, 1.0, None);
        nisa::memset(&i, 1.0, None);
        let out = nl::ndarray(&[16, 16], DType::F32, nl::shared_hbm);
        nisa::dma_copy(&out, x.view().indirect(&i, None), None);
    });
    assert!(e.to_string().contains("dma_copy") && line(&e), "{e}");
}
