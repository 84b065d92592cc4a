//! An NKI kernel as a framework custom operator (NKI guide *NKI Kernel as a Framework Custom
//! Operator*), with candle as the framework.
//!
//! The graph is `(a + b) * a * b` on two [256, 1024] f32 tensors. First all in candle; then
//! with the addition replaced by the NKI tensor-add kernel (`nki_kernels::autograd::
//! tensor_add_tile`, one [128, 512] tile per instance of a [256 / 128, 1024 / 512] grid) wrapped
//! as a candle custom op. Its backward is the guide's: both gradients are the output gradient
//! (`return dy, dy`). The forward values and the gradients of `a` and `b` from candle's
//! backprop (loss `out.sum()`) are compared with the all-candle graph, and the modelled device
//! time of the custom op is printed.
//!
//! Run with `cargo run --release --features candle --example framework_custom_op [trn1|trn2|trn3]`.

use candle_core::{DType, Tensor, Var};
use nki_candle::testing::{example_main, random_tensor};
use nki_candle::{ops, Profiler};
use nki_core::prelude::Target;
use std::process::ExitCode;

/// The output of `(a + b) * a * b` and the gradients of `a` and `b` of its sum, with `add` as
/// the addition.
fn graph(
    a: &Tensor,
    b: &Tensor,
    add: impl Fn(&Tensor, &Tensor) -> candle_core::Result<Tensor>,
) -> candle_core::Result<[Tensor; 3]> {
    let (a, b) = (Var::from_tensor(a)?, Var::from_tensor(b)?);
    let c = add(a.as_tensor(), b.as_tensor())?;
    let out = ((a.as_tensor() * b.as_tensor())? * c)?;
    // A (dummy) loss, as in the guide, to backpropagate from.
    let grads = out.sum_all()?.backward()?;
    let missing = || candle_core::Error::Msg("no gradient".into());
    let grad_a = grads.get(a.as_tensor()).ok_or_else(missing)?.clone();
    let grad_b = grads.get(b.as_tensor()).ok_or_else(missing)?.clone();
    Ok([out, grad_a, grad_b])
}

/// Largest absolute difference of two tensors.
fn max_diff(x: &Tensor, y: &Tensor) -> candle_core::Result<f32> {
    (x - y)?.abs()?.max_all()?.to_scalar::<f32>()
}

fn run(target: Target) -> candle_core::Result<bool> {
    let a = random_tensor(256, 1024, 1, DType::F32)?;
    let b = random_tensor(256, 1024, 2, DType::F32)?;

    // Native candle.
    let native = graph(&a, &b, |a, b| a + b)?;

    // The addition as the NKI kernel, modelled on `target` as it runs.
    let profiler = Profiler::new(target);
    let nki_add = ops::tensor_add().profiled(&profiler);
    let custom = graph(&a, &b, |a, b| nki_add.apply2(a, b))?;

    let mut all_match = true;
    for (what, n, c) in [
        ("forward (a + b) * a * b", &native[0], &custom[0]),
        ("gradient of a", &native[1], &custom[1]),
        ("gradient of b", &native[2], &custom[2]),
    ] {
        let d = max_diff(n, c)?;
        let verdict = if d == 0.0 { "match" } else { "MISMATCH" };
        all_match &= d == 0.0;
        println!("{what:<26} max |candle - nki| = {d:e}  {verdict}");
    }
    println!();
    print!("{profiler}");
    if let Some(stats) = profiler.op("nki_tensor_add") {
        println!();
        print!("last call: {}", stats.last_profile);
    }
    Ok(all_match)
}

fn main() -> ExitCode {
    example_main("NKI custom op and candle match", run)
}
