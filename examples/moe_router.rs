//! A mixture-of-experts router, as the NKI Library's `router_topk` kernel computes it: the
//! router logits `x^T W + b` on TensorE (tokens on the output partitions), the softmax over
//! the experts on ScalarE / VectorE, the top `k` of each token with VectorE `max8` and their
//! experts with `nc_find_index8`, and the selected probabilities renormalised over the `k`
//! (`norm_topk`) and scattered into the token's row of expert affinities.
//!
//! The host reference takes the other road the definition allows: the top `k` *logits* per
//! token (ties: the lower expert), then the softmax of just those `k` — equal to the
//! renormalised top-k of the full softmax, since `exp(l_i) / sum_topk exp(l_j)` is both. The
//! example prints "match" when the expert indices are the same and the affinities agree to
//! fp32 accuracy, on trn2 and on trn3, with each target's modelled time.
//!
//! Run with `cargo run --release --example moe_router`.

use nki_core::prelude::*;
use nki_kernels::nki_library::router_topk;
use std::process::ExitCode;

/// Hidden size, tokens, experts, experts per token.
const H: usize = 512;
const T: usize = 256;
const E: usize = 64;
const K: usize = 8;

/// A small deterministic generator (the example needs no randomness crate).
struct Lcg(u64);

impl Lcg {
    /// Uniform in [-0.5, 0.5).
    fn next(&mut self) -> f32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) - 0.5
    }
}

/// For each token: its `K` experts (largest logit first, ties to the lower expert) and the
/// softmax of their logits, from `x[H, T]`, `w[H, E]`, `b[E]` in f64.
fn reference(x: &[f32], w: &[f32], b: &[f32]) -> (Vec<u32>, Vec<f64>) {
    let mut experts = Vec::with_capacity(T * K);
    let mut aff = vec![0.0f64; T * E];
    for t in 0..T {
        let logits: Vec<f64> = (0..E)
            .map(|e| {
                b[e] as f64
                    + (0..H)
                        .map(|h| x[h * T + t] as f64 * w[h * E + e] as f64)
                        .sum::<f64>()
            })
            .collect();
        let mut order: Vec<usize> = (0..E).collect();
        order.sort_by(|&i, &j| logits[j].total_cmp(&logits[i]).then(i.cmp(&j)));
        let top = &order[..K];
        let m = logits[top[0]];
        let z: f64 = top.iter().map(|&e| (logits[e] - m).exp()).sum();
        for &e in top {
            experts.push(e as u32);
            aff[t * E + e] = (logits[e] - m).exp() / z;
        }
    }
    (experts, aff)
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
    let mut rng = Lcg(5);
    let xs: Vec<f32> = (0..H * T).map(|_| 2.0 * rng.next()).collect();
    let ws: Vec<f32> = (0..H * E).map(|_| 0.2 * rng.next()).collect();
    let bs: Vec<f32> = (0..E).map(|_| rng.next()).collect();
    let (want_idx, want_aff) = reference(&xs, &ws, &bs);
    let x = Hbm::from_vec(&[H, T], xs)?;
    let w = Hbm::from_vec(&[H, E], ws)?;
    let b = Hbm::from_vec(&[1, E], bs)?;
    println!("MoE router: {T} tokens, hidden {H}, {E} experts, top {K} per token (fp32)");
    let mut all = true;
    for target in [Target::Trn2, Target::Trn3] {
        let mut logits = Hbm::<f32>::zeros([T, E]);
        let mut aff = Hbm::<f32>::zeros([T, E]);
        let mut idx = Hbm::<u32>::zeros([T, K]);
        let launch = Launch::new(1).target(target).mode(Mode::Simulate);
        let rep = router_topk::run(launch, &x, &w, &b, &mut logits, &mut aff, &mut idx, K, true)?;
        let got_idx = idx.to_vec()?;
        let same_experts = got_idx == want_idx;
        let worst = aff
            .to_f32_vec()?
            .iter()
            .zip(&want_aff)
            .fold(0.0f64, |m, (&g, &w)| m.max((g as f64 - w).abs()));
        let ok = same_experts && worst < 1e-5;
        all &= ok;
        let us = rep.profile.as_ref().map_or(f64::NAN, |p| p.latency_us());
        println!(
            "{target}: {} (experts {}, largest affinity difference {worst:.2e}); modelled time {us:.2} us",
            if ok { "match" } else { "MISMATCH" },
            if same_experts { "equal" } else { "DIFFER" },
        );
    }
    Ok(all)
}
