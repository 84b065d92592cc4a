//! Training a tiny candle model in which one layer is an nki-rs forward + backward kernel pair.
//!
//! The model maps [256, 32] inputs to [256, 8] outputs: `relu(rmsnorm(x @ w1) * gain) @ w2`,
//! with the RMSNorm (and its learnt gain) as the NKI kernels `rmsnorm_fwd` / `rmsnorm_bwd` of
//! `nki_kernels::autograd` wrapped as one differentiable candle op. Two copies of the model
//! start from the same weights; one uses the NKI op, the other candle's own ops for the
//! RMSNorm. Both train for a few steps of plain SGD on a mean-squared error against fixed
//! targets, and their loss curves are compared. Every call of the NKI op is also simulated on a
//! Trainium target, and the modelled device time of the custom op (forward and backward) is
//! printed.
//!
//! Run with `cargo run --release --features candle --example candle_training [trn1|trn2|trn3]`.

use candle_core::{DType, Tensor, Var};
use nki_candle::testing::{example_main, random_tensor, rmsnorm_reference};
use nki_candle::{ops, Profiler};
use nki_core::prelude::Target;
use nki_kernels::autograd::RMSNORM_EPS;
use std::process::ExitCode;

/// Rows of a batch.
const BATCH: usize = 256;
/// Input features.
const INPUTS: usize = 32;
/// Hidden features (the normalised layer).
const HIDDEN: usize = 64;
/// Output features.
const OUTPUTS: usize = 8;
/// SGD steps.
const STEPS: usize = 12;
/// SGD learning rate.
const LEARNING_RATE: f64 = 0.2;
/// Largest relative difference of the two loss curves that counts as a match (f32 sums in a
/// different order, amplified over the steps).
const LOSS_RTOL: f64 = 1e-4;

/// The trainable parameters.
struct Model {
    w1: Var,
    gain: Var,
    w2: Var,
}

impl Model {
    /// The initial weights (the same for both copies).
    fn new() -> candle_core::Result<Model> {
        let scaled = |rows, cols, seed, scale: f64| {
            random_tensor(rows, cols, seed, DType::F32).and_then(|t| t * scale)
        };
        Ok(Model {
            w1: Var::from_tensor(&scaled(INPUTS, HIDDEN, 11, 0.3)?)?,
            gain: Var::from_tensor(&(scaled(1, HIDDEN, 12, 0.1)? + 1.0)?)?,
            w2: Var::from_tensor(&scaled(HIDDEN, OUTPUTS, 13, 0.3)?)?,
        })
    }

    /// The model's output, with `rmsnorm` as the normalisation.
    fn forward(
        &self,
        x: &Tensor,
        rmsnorm: &dyn Fn(&Tensor, &Tensor) -> candle_core::Result<Tensor>,
    ) -> candle_core::Result<Tensor> {
        let hidden = x.matmul(self.w1.as_tensor())?;
        let normed = rmsnorm(&hidden, self.gain.as_tensor())?;
        normed.relu()?.matmul(self.w2.as_tensor())
    }

    /// One SGD step on the mean-squared error; returns the loss before the step.
    fn step(
        &self,
        x: &Tensor,
        target: &Tensor,
        rmsnorm: &dyn Fn(&Tensor, &Tensor) -> candle_core::Result<Tensor>,
    ) -> candle_core::Result<f32> {
        let loss = (self.forward(x, rmsnorm)? - target)?.sqr()?.mean_all()?;
        let grads = loss.backward()?;
        for var in [&self.w1, &self.gain, &self.w2] {
            let grad = grads
                .get(var.as_tensor())
                .ok_or_else(|| candle_core::Error::Msg("a parameter got no gradient".into()))?;
            var.set(&(var.as_tensor() - (grad * LEARNING_RATE)?)?)?;
        }
        loss.to_scalar::<f32>()
    }
}

fn run(target_hw: Target) -> candle_core::Result<bool> {
    let x = random_tensor(BATCH, INPUTS, 1, DType::F32)?;
    let target = random_tensor(BATCH, OUTPUTS, 2, DType::F32)?;

    let profiler = Profiler::new(target_hw);
    let nki_rmsnorm = ops::rmsnorm(RMSNORM_EPS).profiled(&profiler);
    let nki = |h: &Tensor, g: &Tensor| nki_rmsnorm.apply2(h, g);
    let native = |h: &Tensor, g: &Tensor| rmsnorm_reference(h, g, RMSNORM_EPS);

    let (with_nki, with_candle) = (Model::new()?, Model::new()?);
    println!("step   loss (nki RMSNorm)   loss (candle RMSNorm)   rel. diff");
    let mut worst = 0.0f64;
    for step in 0..STEPS {
        let l_nki = with_nki.step(&x, &target, &nki)? as f64;
        let l_candle = with_candle.step(&x, &target, &native)? as f64;
        let rel = (l_nki - l_candle).abs() / l_candle.abs();
        worst = worst.max(rel);
        println!("{step:>4}   {l_nki:>18.6}   {l_candle:>21.6}   {rel:>9.2e}");
    }
    let final_loss = |m: &Model| -> candle_core::Result<f32> {
        (m.forward(&x, &native)? - &target)?
            .sqr()?
            .mean_all()?
            .to_scalar::<f32>()
    };
    println!(
        "final loss {:.6} (nki) vs {:.6} (candle); worst relative difference {worst:.2e} \
         (tolerance {LOSS_RTOL:e})",
        final_loss(&with_nki)?,
        final_loss(&with_candle)?
    );

    println!();
    print!("{profiler}");
    if let (Some(f), Some(b)) = (profiler.op("nki_rmsnorm"), profiler.op("nki_rmsnorm.bwd")) {
        println!(
            "modelled device time of the custom op per training step: {:.2} us \
             (forward {:.2} us + backward {:.2} us)",
            (f.mean_ns() + b.mean_ns()) / 1e3,
            f.mean_ns() / 1e3,
            b.mean_ns() / 1e3
        );
    }
    Ok(worst <= LOSS_RTOL)
}

fn main() -> ExitCode {
    example_main("loss curves match", run)
}
