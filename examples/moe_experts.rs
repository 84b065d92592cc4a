//! A mixture-of-experts layer with device loops (NKI 0.7 `nl.fori_loop` over routed tokens).
//!
//! A router sent each of `T` tokens to one of `E` experts with a gate weight. The kernel gets
//! the tokens grouped by expert (`order`), how many each expert got (`counts`) and the gates;
//! for each expert it runs one `fori_loop` whose trip count is that expert's token count, read
//! on the device with `nisa::scalar_load`: gather the token's row (a DMA whose offset is a
//! scalar), the expert's MLP `relu(x W1) W2` on TensorE and ScalarE, and scatter-add the gated
//! result into the token's output row. The start of each expert's group in `order` is scalar
//! arithmetic on the device (`start = start + count`).
//!
//! It runs in simulate mode (values and the modelled time) and in estimate mode, which has no
//! values and takes the trip counts of the expert loops from the launch
//! (`TripCounts::runs(line, counts)`), and prints "match" when the outputs equal a host
//! reference.
//!
//! Run with `cargo run --release --example moe_experts`.

use nki_core::nl::TripCounts;
use nki_core::prelude::*;
use std::process::ExitCode;

/// Tokens, hidden size, expert MLP width, experts.
const T: usize = 128;
const H: usize = 64;
const F: usize = 128;
const E: usize = 4;

/// The MoE layer: `out[t] = gate[t] * relu(x[t] W1[e]) W2[e]` for the expert `e` of token `t`.
#[nki_kernel]
#[allow(clippy::too_many_arguments)]
fn moe_layer(
    x: &Hbm<f32>,
    order: &Hbm<i32>,
    counts: &Hbm<i32>,
    gate: &Hbm<f32>,
    w1: &Hbm<f32>,
    w2: &Hbm<f32>,
    out: &mut Hbm<f32>,
) {
    // out = 0, then every token's row is scatter-added.
    let zero = nl::zeros(&[128, H], DType::F32, nl::sbuf);
    nisa::dma_copy(out.slice((.., ..)), &zero, None);
    let mut start = nisa::NkiScalar::from(0);
    for e in 0..E {
        let w1e = nl::ndarray(&[H, F], DType::F32, nl::sbuf);
        nisa::dma_copy(&w1e, w1.slice((e * H..(e + 1) * H, ..)), None);
        let w2e = nl::ndarray(&[F, H], DType::F32, nl::sbuf);
        nisa::dma_copy(&w2e, w2.slice((e * F..(e + 1) * F, ..)), None);
        let c = nl::ndarray(&[1, 1], DType::I32, nl::sbuf);
        nisa::dma_copy(&c, counts.slice((e..e + 1, ..)), None);
        let count = nisa::scalar_load(&c);
        let first = start;
        nl::fori_loop(0, count, |i| {
            // The token: order[first + i].
            let idx = nl::ndarray(&[1, 1], DType::I32, nl::sbuf);
            nisa::dma_copy(
                &idx,
                order.slice((0..1, ..)).scalar_offset(first + i, 0),
                None,
            );
            let tok = nisa::scalar_load(&idx);
            // Gather its row as a column [H, 1] (hidden on the partitions).
            let xt = nl::ndarray(&[H, 1], DType::F32, nl::sbuf);
            let row = x.slice((0..1, ..)).reshape(&[H, 1]).scalar_offset(tok, 0);
            nisa::dma_copy(&xt, row, None);
            // h^T = relu(W1^T x^T): [F, 1].
            let hp = nl::matmul(&w1e, &xt, true);
            let ht = nl::ndarray(&[F, 1], DType::F32, nl::sbuf);
            nisa::activation(&ht, nl::ActFn::Relu, &hp, None);
            // y = h W2: [1, H], times the token's gate.
            let yp = nl::matmul(&ht, &w2e, true);
            let g = nl::ndarray(&[1, 1], DType::F32, nl::sbuf);
            nisa::dma_copy(&g, gate.slice((0..1, ..)).scalar_offset(tok, 0), None);
            let y = nl::ndarray(&[1, H], DType::F32, nl::sbuf);
            nisa::tensor_scalar(&y, &yp, nl::AluOp::Multiply, &g, None);
            // Scatter-add into out[tok].
            let dst = out.slice((0..1, ..)).scalar_offset(tok, 0);
            let acc = nl::ndarray(&[1, H], DType::F32, nl::sbuf);
            nisa::dma_copy(&acc, dst.clone(), None);
            nisa::tensor_tensor(&acc, &acc, &y, nl::AluOp::Add, None);
            nisa::dma_copy(dst, &acc, None);
        });
        start = start + count;
    }
}

/// The line of the expert loop (its trip counts are given by line in estimate mode).
fn expert_loop_line() -> u32 {
    include_str!("moe_experts.rs")
        .lines()
        .position(|l| l.trim_start().starts_with("nl::fori_loop(0, count,"))
        .map_or(0, |k| k as u32 + 1)
}

/// A small deterministic generator (the example needs no randomness crate).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> f32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) - 0.5
    }
}

/// The router's output: each token's expert (a skewed split) and gate.
fn route(rng: &mut Lcg) -> (Vec<usize>, Vec<f32>) {
    let expert = (0..T)
        .map(|t| match (t * 7 + 3) % 10 {
            0..=4 => 0,
            5..=7 => 1,
            8 => 2,
            _ => 3,
        })
        .collect();
    let gate = (0..T).map(|_| 0.5 + rng.next()).collect();
    (expert, gate)
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<bool, NkiError> {
    let mut rng = Lcg(7);
    let xs: Vec<f32> = (0..T * H).map(|_| rng.next()).collect();
    let w1s: Vec<f32> = (0..E * H * F).map(|_| rng.next() * 0.25).collect();
    let w2s: Vec<f32> = (0..E * F * H).map(|_| rng.next() * 0.25).collect();
    let (expert, gates) = route(&mut rng);
    let mut order = Vec::new();
    let mut counts = Vec::new();
    for e in 0..E {
        let mine: Vec<i32> = (0..T)
            .filter(|&t| expert[t] == e)
            .map(|t| t as i32)
            .collect();
        counts.push(mine.len() as i32);
        order.extend(mine);
    }
    // Host reference.
    let mut want = vec![0.0f32; T * H];
    for t in 0..T {
        let e = expert[t];
        let h: Vec<f32> = (0..F)
            .map(|f| {
                let s: f32 = (0..H)
                    .map(|k| xs[t * H + k] * w1s[(e * H + k) * F + f])
                    .sum();
                s.max(0.0)
            })
            .collect();
        for j in 0..H {
            let y: f32 = (0..F).map(|f| h[f] * w2s[(e * F + f) * H + j]).sum();
            want[t * H + j] = gates[t] * y;
        }
    }
    let x = Hbm::from_vec(&[T, H], xs)?;
    let order_t = Hbm::from_vec(&[T, 1], order)?;
    let counts_t = Hbm::from_vec(&[E, 1], counts.clone())?;
    let gate = Hbm::from_vec(&[T, 1], gates)?;
    let w1 = Hbm::from_vec(&[E * H, F], w1s)?;
    let w2 = Hbm::from_vec(&[E * F, H], w2s)?;
    let mut out = Hbm::<f32>::zeros([T, H]);
    println!(
        "MoE layer: {T} tokens, hidden {H}, {E} experts of width {F}; tokens per expert {counts:?}"
    );

    let sim = moe_layer::simulate(
        1,
        Target::Trn2,
        &x,
        &order_t,
        &counts_t,
        &gate,
        &w1,
        &w2,
        &mut out,
    )?;
    let got = out.to_f32_vec()?;
    let worst = got
        .iter()
        .zip(&want)
        .map(|(a, b)| (a - b).abs() / (1e-3 + b.abs()))
        .fold(0.0f32, f32::max);
    let ok = worst < 1e-3;
    println!(
        "{} (largest relative difference {worst:.2e})",
        if ok { "match" } else { "MISMATCH" }
    );
    println!("simulate: modelled time {:.2} us", sim.latency_us());
    for l in &sim.device_loops {
        println!("  {l}");
    }

    // Estimate mode: no values, so the expert loops' trip counts come from the launch.
    let shape = |d: [usize; 2]| Hbm::<f32>::shape_only(d);
    let ints = |d: [usize; 2]| Hbm::<i32>::shape_only(d);
    let mut out_e = shape([T, H]);
    let trips = TripCounts::new().runs(expert_loop_line(), counts.iter().map(|&c| c as u64));
    let launch = Launch::new(1)
        .target(Target::Trn2)
        .mode(Mode::Estimate)
        .trip_counts(trips);
    let est = moe_layer::run(
        launch,
        &shape([T, H]),
        &ints([T, 1]),
        &ints([E, 1]),
        &shape([T, 1]),
        &shape([E * H, F]),
        &shape([E * F, H]),
        &mut out_e,
    )?
    .profile
    .expect("an estimate models a timeline");
    println!(
        "estimate (trip counts {counts:?} given): modelled time {:.2} us",
        est.latency_us()
    );
    Ok(ok)
}
