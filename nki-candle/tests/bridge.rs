//! The candle bridge against candle-native computations: forward values and gradients (f32 and
//! bf16), a finite-difference check of the RMSNorm backward kernel, borrowed and strided
//! inputs, integer dtypes, several outputs of their own dtypes, typed errors, and the
//! modelled-time profiler.

use candle_core::{DType, Device, Error, Tensor, Var};
use nki_candle::ops::{rmsnorm, tensor_add, AddTile};
use nki_candle::testing::{random_tensor, rmsnorm_reference};
use nki_candle::{nki_error, KernelOp, Profiler};
use nki_core::prelude::*;
use nki_kernels::autograd::RMSNORM_EPS;

/// A `[rows, cols]` tensor of values uniform in [-1, 1), deterministic in `seed`.
fn random(rows: usize, cols: usize, seed: u64, dtype: DType) -> Tensor {
    random_tensor(rows, cols, seed, dtype).unwrap()
}

/// Largest `|x - y|` after converting both to f32.
fn max_diff(x: &Tensor, y: &Tensor) -> f32 {
    let d = (x.to_dtype(DType::F32).unwrap() - y.to_dtype(DType::F32).unwrap()).unwrap();
    d.abs()
        .unwrap()
        .max_all()
        .unwrap()
        .to_scalar::<f32>()
        .unwrap()
}

/// Largest `|y|` in f32.
fn max_abs(y: &Tensor) -> f32 {
    let a = y.to_dtype(DType::F32).unwrap().abs().unwrap();
    a.max_all().unwrap().to_scalar::<f32>().unwrap()
}

/// candle-native RMSNorm, the reference.
fn rmsnorm_candle(x: &Tensor, gain: &Tensor) -> candle_core::Result<Tensor> {
    rmsnorm_reference(x, gain, RMSNORM_EPS)
}

/// Gradients of `sum((a + b) * a * b)` with the add from `add`.
fn seed_grads(
    a: &Tensor,
    b: &Tensor,
    add: impl Fn(&Tensor, &Tensor) -> candle_core::Result<Tensor>,
) -> (Tensor, Tensor, Tensor) {
    let (va, vb) = (Var::from_tensor(a).unwrap(), Var::from_tensor(b).unwrap());
    let c = add(va.as_tensor(), vb.as_tensor()).unwrap();
    let out = ((c * va.as_tensor()).unwrap() * vb.as_tensor()).unwrap();
    let grads = out.sum_all().unwrap().backward().unwrap();
    let ga = grads.get(va.as_tensor()).unwrap().clone();
    let gb = grads.get(vb.as_tensor()).unwrap().clone();
    (out, ga, gb)
}

#[test]
fn seed_add_forward_and_gradients_match_candle() {
    for dtype in [DType::F32, DType::BF16, DType::F16] {
        let a = random(256, 1024, 1, dtype);
        let b = random(256, 1024, 2, dtype);
        let add = tensor_add();
        let (out, ga, gb) = seed_grads(&a, &b, |x, y| add.apply2(x, y));
        let (out_ref, ga_ref, gb_ref) = seed_grads(&a, &b, |x, y| x + y);
        // The kernel adds in f32 and rounds once, as candle does: results are bit-equal.
        assert_eq!(max_diff(&out, &out_ref), 0.0, "{dtype:?} forward");
        assert_eq!(max_diff(&ga, &ga_ref), 0.0, "{dtype:?} grad a");
        assert_eq!(max_diff(&gb, &gb_ref), 0.0, "{dtype:?} grad b");
        assert_eq!(out.dtype(), dtype);
    }
}

#[test]
fn rmsnorm_forward_matches_candle_f32_and_bf16() {
    // 300 rows: two full row tiles and a partial one.
    let (x, gain) = (random(300, 96, 3, DType::F32), random(1, 96, 4, DType::F32));
    let reference = rmsnorm_candle(&x, &gain).unwrap();
    let y = rmsnorm(RMSNORM_EPS).apply2(&x, &gain).unwrap();
    assert!(max_diff(&y, &reference) <= 1e-5 * max_abs(&reference));

    // bf16 inputs: the kernel computes in f32 and rounds the result once, so it is within
    // bf16 rounding of the f32 reference on the same (bf16-rounded) inputs.
    let (xb, gb) = (
        x.to_dtype(DType::BF16).unwrap(),
        gain.to_dtype(DType::BF16).unwrap(),
    );
    let yb = rmsnorm(RMSNORM_EPS).apply2(&xb, &gb).unwrap();
    assert_eq!(yb.dtype(), DType::BF16);
    let reference_b = rmsnorm_candle(
        &xb.to_dtype(DType::F32).unwrap(),
        &gb.to_dtype(DType::F32).unwrap(),
    )
    .unwrap();
    assert!(max_diff(&yb, &reference_b) <= 2f32.powi(-8) * max_abs(&reference_b));
}

/// Gradients of `sum(rmsnorm(x, gain) * w)` with `norm` as the RMSNorm.
fn rmsnorm_grads(
    x: &Tensor,
    gain: &Tensor,
    w: &Tensor,
    norm: impl Fn(&Tensor, &Tensor) -> candle_core::Result<Tensor>,
) -> (Tensor, Tensor) {
    let (vx, vg) = (
        Var::from_tensor(x).unwrap(),
        Var::from_tensor(gain).unwrap(),
    );
    let y = norm(vx.as_tensor(), vg.as_tensor()).unwrap();
    let loss = (y * w).unwrap().sum_all().unwrap();
    let grads = loss.backward().unwrap();
    (
        grads.get(vx.as_tensor()).unwrap().clone(),
        grads.get(vg.as_tensor()).unwrap().clone(),
    )
}

#[test]
fn rmsnorm_gradients_match_candle_autograd() {
    let (x, gain) = (random(260, 64, 5, DType::F32), random(1, 64, 6, DType::F32));
    let w = random(260, 64, 7, DType::F32);
    let op = rmsnorm(RMSNORM_EPS);
    let (dx, dgain) = rmsnorm_grads(&x, &gain, &w, |x, g| op.apply2(x, g));
    let (dx_ref, dgain_ref) = rmsnorm_grads(&x, &gain, &w, rmsnorm_candle);
    assert!(max_diff(&dx, &dx_ref) <= 1e-5 * max_abs(&dx_ref));
    assert!(max_diff(&dgain, &dgain_ref) <= 1e-5 * max_abs(&dgain_ref));

    // bf16: the kernel's gradients round once from f32; the reference is the f32 autograd on
    // the same bf16-rounded values.
    let to_bf16 = |t: &Tensor| t.to_dtype(DType::BF16).unwrap();
    let to_f32 = |t: &Tensor| t.to_dtype(DType::F32).unwrap();
    let (xb, gb, wb) = (to_bf16(&x), to_bf16(&gain), to_bf16(&w));
    let (dxb, dgb) = rmsnorm_grads(&xb, &gb, &wb, |x, g| op.apply2(x, g));
    assert_eq!(dxb.dtype(), DType::BF16);
    let (dx_r, dg_r) = rmsnorm_grads(&to_f32(&xb), &to_f32(&gb), &to_f32(&wb), rmsnorm_candle);
    assert!(max_diff(&dxb, &dx_r) <= 2f32.powi(-8) * max_abs(&dx_r));
    assert!(max_diff(&dgb, &dg_r) <= 2f32.powi(-8) * max_abs(&dg_r));
}

/// `sum(rmsnorm(x, gain) * w)` through the nki op, summed in f64.
fn rmsnorm_loss(x: &[f32], gain: &Tensor, w: &Tensor, shape: (usize, usize)) -> f64 {
    let x = Tensor::from_slice(x, shape, &Device::Cpu).unwrap();
    let y = rmsnorm(RMSNORM_EPS).apply2(&x, gain).unwrap();
    let prod = (y.to_dtype(DType::F64).unwrap() * w.to_dtype(DType::F64).unwrap()).unwrap();
    prod.sum_all().unwrap().to_scalar::<f64>().unwrap()
}

#[test]
fn rmsnorm_backward_kernel_matches_finite_differences() {
    let shape = (130, 16);
    let x = random(shape.0, shape.1, 8, DType::F32);
    let gain = random(1, shape.1, 9, DType::F32);
    let w = random(shape.0, shape.1, 10, DType::F32);
    let (dx, _) = rmsnorm_grads(&x, &gain, &w, |x, g| rmsnorm(RMSNORM_EPS).apply2(x, g));
    let dx = dx.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    let xs = x.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    let h = 1e-2f32;
    // Elements of both row tiles (the second is partial), first and last columns.
    for i in [0, 17, 127, 128, 129 * 16 + 15, 64 * 16 + 3, 130 * 16 - 1] {
        let (mut up, mut down) = (xs.clone(), xs.clone());
        up[i] += h;
        down[i] -= h;
        let numeric = (rmsnorm_loss(&up, &gain, &w, shape) - rmsnorm_loss(&down, &gain, &w, shape))
            / (2.0 * h as f64);
        let err = (numeric - dx[i] as f64).abs();
        assert!(
            err <= 2e-3 + 1e-2 * numeric.abs(),
            "dx[{i}]: kernel {} vs finite difference {numeric}",
            dx[i]
        );
    }
}

#[test]
fn strided_inputs_are_read_through_their_layout() {
    // A transposed view and a narrowed one: neither is contiguous from offset 0.
    let xt = random(64, 200, 11, DType::F32).t().unwrap();
    let gain = random(4, 64, 12, DType::F32).narrow(0, 2, 1).unwrap();
    assert!(!xt.is_contiguous());
    let y = rmsnorm(RMSNORM_EPS).apply2(&xt, &gain).unwrap();
    let reference = rmsnorm_candle(&xt, &gain).unwrap();
    assert!(max_diff(&y, &reference) <= 1e-5 * max_abs(&reference));
}

/// The error of a failing op call.
fn error(r: candle_core::Result<Tensor>) -> Error {
    match r {
        Ok(t) => panic!("expected an error, got a tensor {:?}", t.shape()),
        Err(e) => e,
    }
}

#[test]
fn wrong_shapes_are_errors_naming_the_op() {
    let add = tensor_add();
    let e = error(add.apply2(
        &random(100, 1024, 1, DType::F32),
        &random(100, 1024, 2, DType::F32),
    ));
    let m = e.to_string();
    assert!(
        m.contains("nki op `nki_tensor_add`") && m.contains("[100, 1024]"),
        "{m}"
    );
    assert!(
        matches!(&e, Error::UnexpectedShape { expected, .. } if expected.dims() == [128, 1024]),
        "{e:?}"
    );
    let e = error(add.apply2(
        &random(128, 512, 1, DType::F32),
        &random(256, 512, 2, DType::F32),
    ));
    assert!(
        matches!(&e, Error::ShapeMismatchBinaryOp { lhs, rhs, op: "nki_tensor_add" }
            if lhs.dims() == [128, 512] && rhs.dims() == [256, 512]),
        "{e:?}"
    );
    let x = random(8, 32, 3, DType::F32);
    let e = error(rmsnorm(RMSNORM_EPS).apply2(&x, &random(1, 31, 4, DType::F32)));
    let m = e.to_string();
    assert!(
        m.contains("nki op `nki_rmsnorm`") && m.contains("gain must be [1, 32]"),
        "{m}"
    );
    assert!(matches!(e, Error::UnexpectedShape { .. }), "{e:?}");
    let e = error(rmsnorm(RMSNORM_EPS).apply2(&x.flatten_all().unwrap(), &x));
    assert!(
        matches!(
            e,
            Error::UnexpectedNumberOfDims {
                expected: 2,
                got: 1,
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn wrong_dtypes_are_typed_errors_naming_the_op() {
    let add = tensor_add();
    let a = random(128, 512, 1, DType::F32);
    // nki-rs has no 64-bit element types.
    for dtype in [DType::F64, DType::I64] {
        let x = a.to_dtype(dtype).unwrap();
        let e = error(add.apply2(&x, &x));
        assert!(
            matches!(e, Error::UnsupportedDTypeForOp(d, "nki_tensor_add") if d == dtype),
            "{e:?}"
        );
        assert!(e.to_string().contains("nki_tensor_add"), "{e}");
    }
    let e = error(add.apply2(&a, &a.to_dtype(DType::BF16).unwrap()));
    assert!(e.to_string().to_lowercase().contains("dtype"), "{e}");
    assert!(
        matches!(
            e,
            Error::DTypeMismatchBinaryOp {
                lhs: DType::F32,
                rhs: DType::BF16,
                op: "nki_tensor_add"
            }
        ),
        "{e:?}"
    );
}

#[test]
fn kernel_errors_carry_the_nki_message() {
    // A grid one tile too tall: instance (2, 0) slices rows 256..384 of a 256-row tensor.
    let op = KernelOp::new("bad_grid_add", AddTile, |_| Grid::new([3, 2]));
    let a = random(256, 1024, 1, DType::F32);
    let e = error(op.apply2(&a, &a));
    let m = e.to_string();
    assert!(m.contains("nki op `bad_grid_add`"), "{m}");
    assert!(m.contains("autograd.rs"), "the kernel line is named: {m}");
    assert!(
        m.contains("[2, 0]") || m.contains("(2, 0)"),
        "the program id is named: {m}"
    );
    let nki = nki_error(&e).expect("the nki-rs error is reachable");
    assert_eq!(nki.kind(), ErrorKind::OutOfBounds, "{nki}");
}

#[test]
fn a_panicking_grid_or_output_function_is_an_error_naming_it() {
    let a = random(256, 1024, 1, DType::F32);
    let op = KernelOp::new("panicky_grid_add", AddTile, |s| {
        assert!(
            s[0][0] < 128,
            "the grid function wants fewer rows than {}",
            s[0][0]
        );
        Grid::new([1, 1])
    });
    let e = error(op.apply2(&a, &a));
    let nki = nki_error(&e).expect("the nki-rs error is reachable");
    assert_eq!(nki.kind(), ErrorKind::ClosurePanic, "{nki}");
    let m = e.to_string();
    assert!(
        m.contains("the grid function of nki op `panicky_grid_add` panicked"),
        "{m}"
    );
    assert!(m.contains("fewer rows than 256"), "{m}");
    let op = KernelOp::new("panicky_shape_add", AddTile, |_| Grid::new([1, 1]))
        .output_shape(|_| panic!("no shape today"));
    let e = error(op.apply2(&a, &a));
    let m = e.to_string();
    assert!(
        m.contains("the output function of nki op `panicky_shape_add` panicked: no shape today"),
        "{m}"
    );
}

#[test]
fn contiguous_inputs_at_an_offset_and_strided_inputs_add_like_candle() {
    let add = tensor_add();
    let big = random(512, 1024, 21, DType::F32);
    // Rows 128..384: contiguous, starting inside the storage (lent in place).
    let a = big.narrow(0, 128, 256).unwrap();
    assert!(a.is_contiguous());
    // Columns 0..512 of a [256, 1024] tensor: strided (gathered once), and a transpose.
    let b = random(256, 1024, 22, DType::F32).narrow(1, 0, 512).unwrap();
    let bt = random(512, 256, 23, DType::F32).t().unwrap();
    assert!(!b.is_contiguous() && !bt.is_contiguous());
    let a = a.narrow(1, 0, 512).unwrap().contiguous().unwrap();
    for other in [&b, &bt] {
        let out = add.apply2(&a, other).unwrap();
        assert_eq!(max_diff(&out, &(&a + other).unwrap()), 0.0);
    }
    // The inputs are untouched by the kernel.
    let again = add.apply2(&a, &b).unwrap();
    assert_eq!(max_diff(&again, &(&a + &b).unwrap()), 0.0);
}

#[test]
fn integer_dtypes_run_through_a_generic_kernel() {
    let add = tensor_add();
    let base: Vec<u32> = (0..128 * 512).map(|i| (i * 7 % 1000) as u32).collect();
    let a = Tensor::from_vec(base, (128, 512), &Device::Cpu).unwrap();
    let b = (a.ones_like().unwrap() * 3.0).unwrap();
    for dtype in [DType::U32, DType::I32, DType::I16, DType::U8] {
        let (x, y) = (a.to_dtype(dtype).unwrap(), b.to_dtype(dtype).unwrap());
        let (x, y) = if dtype == DType::U8 {
            // Values within u8.
            ((x / 8.0).unwrap(), y)
        } else {
            (x, y)
        };
        let out = add.apply2(&x, &y).unwrap();
        assert_eq!(out.dtype(), dtype);
        let expected = (&x + &y).unwrap();
        assert_eq!(
            out.to_dtype(DType::F32)
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1::<f32>()
                .unwrap(),
            expected
                .to_dtype(DType::F32)
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1::<f32>()
                .unwrap(),
            "{dtype:?}"
        );
    }
}

/// `sum = a + b` and the same sum rounded to bf16, on one [128, 512] tile.
#[nki_kernel]
fn sum_and_bf16(a: &Hbm<f32>, b: &Hbm<f32>, sum: &mut Hbm<f32>, low: &mut Hbm<bf16>) {
    let s = &nl::load(a.view()) + &nl::load(b.view());
    nl::store(sum.view(), &s);
    nl::store(low.view(), &nl::copy(&s, Some(nki_core::DType::BF16)));
}

nki_candle::kernel!(
    /// [`sum_and_bf16`] with a type per tensor.
    SumAndBf16 = |launch, [a: f32, b: f32], [sum: f32, low: bf16]| {
        sum_and_bf16::run(launch, a, b, sum, low)
    }
);

/// The two-output op over [`SumAndBf16`].
fn sum_and_bf16_op() -> KernelOp<SumAndBf16> {
    KernelOp::new("sum_and_bf16", SumAndBf16, |_| Grid::new([1])).outputs(|s, _| {
        Ok(vec![
            (s[0].to_vec(), DType::F32),
            (s[0].to_vec(), DType::BF16),
        ])
    })
}

#[test]
fn several_outputs_each_of_its_own_dtype() {
    let (a, b) = (
        random(128, 512, 31, DType::F32),
        random(128, 512, 32, DType::F32),
    );
    let outs = sum_and_bf16_op().apply(&[&a, &b]).unwrap();
    let [sum, low] = &outs[..] else {
        panic!("two outputs, got {}", outs.len())
    };
    let reference = (&a + &b).unwrap();
    assert_eq!((sum.dtype(), low.dtype()), (DType::F32, DType::BF16));
    assert_eq!(max_diff(sum, &reference), 0.0);
    assert_eq!(
        max_diff(low, &reference.to_dtype(DType::BF16).unwrap()),
        0.0
    );
    // A candle custom op has one output.
    let e = error(sum_and_bf16_op().apply2(&a, &b));
    assert!(e.to_string().contains("2 outputs"), "{e}");
    // The typed kernel checks its tensors' element types.
    let e = error(
        sum_and_bf16_op()
            .apply(&[
                &a.to_dtype(DType::BF16).unwrap(),
                &b.to_dtype(DType::BF16).unwrap(),
            ])
            .map(|mut v| v.remove(0)),
    );
    let nki = nki_error(&e).expect("a kernel error");
    assert!(nki.to_string().contains("tensor `a`"), "{nki}");
}

#[test]
fn an_op_without_backward_says_so() {
    let op = KernelOp::new("forward_only_add", AddTile, |_| Grid::new([1, 1]));
    let a = Var::from_tensor(&random(128, 512, 1, DType::F32)).unwrap();
    let c = op.apply2(a.as_tensor(), a.as_tensor()).unwrap();
    let e = c.sum_all().unwrap().backward().unwrap_err().to_string();
    assert!(e.contains("forward_only_add"), "{e}");
}

#[test]
fn an_output_the_kernel_writes_in_part_is_an_error_not_zeros() {
    // AddTile writes one [128, 512] tile: the rows below it would hold garbage on the device.
    let op = KernelOp::new("half_written_add", AddTile, |_| Grid::new([1, 1]))
        .output_shape(|_| Ok(vec![256, 512]));
    let a = random(128, 512, 1, DType::F32);
    let e = op.apply2(&a, &a).unwrap_err();
    let nki = nki_error(&e).expect("the nki-rs error is reachable");
    assert_eq!(nki.kind(), ErrorKind::OutputNotWritten, "{nki}");
    assert!(nki.to_string().contains("[128, 0]"), "{nki}");
}

#[test]
fn pass_through_backward_needs_inputs_shaped_like_the_output() {
    // The left half of a + b: the output is narrower than the inputs.
    let op = KernelOp::new("left_half_add", AddTile, |_| Grid::new([1, 1]))
        .output_shape(|_| Ok(vec![128, 512]))
        .backward_pass_through();
    let a = Var::from_tensor(&random(128, 1024, 1, DType::F32)).unwrap();
    let c = op.apply2(a.as_tensor(), a.as_tensor()).unwrap();
    let e = c.sum_all().unwrap().backward().unwrap_err().to_string();
    assert!(
        e.contains("left_half_add") && e.contains("[128, 1024]"),
        "{e}"
    );
}

#[test]
fn profiler_keeps_per_op_modelled_time() {
    let profiler = Profiler::new(Target::Trn2);
    let (x, gain) = (
        random(256, 128, 13, DType::F32),
        random(1, 128, 14, DType::F32),
    );
    let w = random(256, 128, 15, DType::F32);
    let op = rmsnorm(RMSNORM_EPS).profiled(&profiler);
    let (dx, _) = rmsnorm_grads(&x, &gain, &w, |x, g| op.apply2(x, g));
    let y = op.apply2(&x, &gain).unwrap();
    // Simulating does not change values.
    let plain = rmsnorm(RMSNORM_EPS);
    assert_eq!(max_diff(&y, &plain.apply2(&x, &gain).unwrap()), 0.0);
    let (dx_plain, _) = rmsnorm_grads(&x, &gain, &w, |x, g| plain.apply2(x, g));
    assert_eq!(max_diff(&dx, &dx_plain), 0.0);

    let fwd = profiler.op("nki_rmsnorm").expect("forward recorded");
    let bwd = profiler.op("nki_rmsnorm.bwd").expect("backward recorded");
    assert_eq!((fwd.calls, bwd.calls), (2, 1));
    assert!(fwd.mean_ns() > 0.0 && bwd.mean_ns() > 0.0);
    assert!((fwd.total_ns - 2.0 * fwd.last_ns).abs() < 1e-6 * fwd.total_ns);
    let (engine, percent) = fwd.bottleneck().expect("engines ran");
    assert!(!engine.is_empty() && percent > 0.0 && percent <= 100.0 + 1e-9);
    assert_eq!(fwd.last_profile.target, Target::Trn2);
    let table = profiler.to_string();
    assert!(
        table.contains("nki_rmsnorm.bwd") && table.contains("trn2"),
        "{table}"
    );
    profiler.reset();
    assert!(profiler.stats().is_empty());
}
