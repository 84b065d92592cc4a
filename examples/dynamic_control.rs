//! Data-dependent control flow in NKI 0.8: experts that skip the work their token counts do
//! not need (`nl::if_else` on a condition the device computes with `nisa::scalar_alu`).
//!
//! Each of `E` experts has room for `CAP` tokens (padded with zeros) and got `counts[e]` of
//! them from a router; the layer is `out[e] = relu(x[e] W[e])`, `[CAP, F]` per expert. Three
//! versions of the kernel, each checked against an ndarray reference:
//!
//! - `dense`: every expert computes all its `CAP / 128` token tiles (no control flow);
//! - `loop`: an expert with no tokens exits early (`nl::if_then(count > 0)`: its weights are
//!   not even loaded), and the others run a device loop over `ceil(count / 128)` tiles
//!   (`nl::fori_loop` whose trip count is `scalar_alu` arithmetic on the loaded count);
//! - `branch`: the same early exit, then one `nl::if_then(count > 128 t)` per tile: the
//!   masked tail of the token tiles as branches instead of a loop.
//!
//! Each version runs in simulate mode (values and the modelled time on trn2) and in estimate
//! mode, which has no values and takes the branches taken and the loops' trip counts from the
//! launch (`TripCounts::branch_runs` / `runs`, by line); the example prints "match" per
//! version when the outputs equal the reference and estimate models the time simulate does.
//!
//! Run with `cargo run --release --example dynamic_control`.

use ndarray::{s, Array2, Array3};
use nki_core::nisa::{MatmulOpts, NkiScalar};
use nki_core::nl::TripCounts;
use nki_core::prelude::*;
use std::process::ExitCode;

/// Experts, hidden size (the contraction), output width, token capacity per expert.
const E: usize = 4;
const D: usize = 128;
const F: usize = 256;
const CAP: usize = 512;
/// Token tiles per expert (128 tokens on TensorE's stationary side each).
const TILES: usize = CAP / 128;

/// Which version of the kernel runs.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Version {
    Dense,
    Loop,
    Branch,
}

/// `out[e] = relu(x[e] W[e])` for each expert; `xt` holds each expert's tokens transposed
/// (`[E * D, CAP]`, hidden on the partitions), `w` the weights (`[E * D, F]`), `counts` the
/// tokens each expert got (`[E, 1]`).
#[nki_kernel(nki = "0.8")]
fn experts(counts: &Hbm<i32>, xt: &Hbm<f32>, w: &Hbm<f32>, out: &mut Hbm<f32>, version: Version) {
    let zero = nl::zeros(&[128, F], DType::F32, nl::sbuf);
    for e in 0..E {
        let rows = e * D..(e + 1) * D;
        let first = e * CAP;
        // One token tile: out[first + t0 .. + 128] = relu(x[t0 .. + 128] W), `t0` a scalar
        // offset (a compile-time one for the host-unrolled versions).
        let tile = |we: &Tensor, t0: NkiScalar| {
            let xs = nl::ndarray(&[D, 128], DType::F32, nl::sbuf);
            let src = xt.slice((rows.clone(), 0..128)).scalar_offset(t0, 1);
            nisa::dma_copy(&xs, src, None);
            let p = nl::ndarray(&[128, F], DType::F32, nl::psum);
            nisa::nc_matmul(&p, &xs, we, MatmulOpts::default());
            let y = nl::ndarray(&[128, F], DType::F32, nl::sbuf);
            nisa::activation(&y, nl::ActFn::Relu, &p, None);
            let dst = out.slice((first..first + 128, ..)).scalar_offset(t0, 0);
            nisa::dma_copy(dst, &y, None);
        };
        let weights = || {
            let we = nl::ndarray(&[D, F], DType::F32, nl::sbuf);
            nisa::dma_copy(&we, w.slice((rows.clone(), ..)), None);
            we
        };
        if version == Version::Dense {
            let we = weights();
            for t in 0..TILES {
                tile(&we, NkiScalar::from((t * 128) as i32));
            }
            continue;
        }
        // The rows no token reaches stay zero.
        for t in 0..TILES {
            let dst = out.slice((first + t * 128..first + (t + 1) * 128, ..));
            nisa::dma_copy(dst, &zero, None);
        }
        let c = nl::ndarray(&[1, 1], DType::I32, nl::sbuf);
        nisa::dma_copy(&c, counts.slice((e..e + 1, ..)), None);
        let count = nisa::scalar_load(&c);
        nl::if_then(count.greater(0), || {
            let we = weights();
            if version == Version::Loop {
                // ceil(count / 128) token tiles: scalar_alu's divide rounds toward zero.
                let tiles = nisa::scalar_alu(count + 127, 128, nl::AluOp::Divide);
                nl::fori_loop(0, tiles, |t| tile(&we, t * 128));
            } else {
                for t in 0..TILES {
                    let t0 = (t * 128) as i32;
                    nl::if_then(count.greater(t0), || tile(&we, NkiScalar::from(t0)));
                }
            }
        });
    }
}

/// The line (1-based) of this file's first line that starts with `start` (trimmed): where a
/// branch or loop whose estimate-mode counts the launch gives is called.
fn line_of(start: &str) -> u32 {
    include_str!("dynamic_control.rs")
        .lines()
        .position(|l| l.trim_start().starts_with(start))
        .map_or(0, |k| k as u32 + 1)
}

/// What estimate mode needs for `version` with these token counts: the branch taken by each
/// run of every `if_then` and the trip count of each run of the loop, in program order.
fn trip_counts(version: Version, counts: &[i32]) -> TripCounts {
    let exit_line = line_of("nl::if_then(count.greater(0)");
    let busy: Vec<bool> = counts.iter().map(|&c| c > 0).collect();
    let trips = TripCounts::new().branch_runs(exit_line, busy);
    match version {
        Version::Dense => trips,
        Version::Loop => trips.runs(
            line_of("nl::fori_loop(0, tiles"),
            counts
                .iter()
                .filter(|&&c| c > 0)
                .map(|&c| (c as u64).div_ceil(128)),
        ),
        Version::Branch => trips.branch_runs(
            line_of("nl::if_then(count.greater(t0)"),
            counts
                .iter()
                .filter(|&&c| c > 0)
                .flat_map(|&c| (0..TILES).map(move |t| c > (t * 128) as i32)),
        ),
    }
}

/// Deterministic values in [-0.5, 0.5) (the example needs no randomness crate): a
/// multiplicative hash of `k` and the stream `seed`.
fn value(seed: u64, k: usize) -> f32 {
    let h = (k as u64 ^ seed.rotate_left(32)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (h >> 40) as f32 / (1u64 << 24) as f32 - 0.5
}

fn main() -> ExitCode {
    let ok = run().unwrap_or_else(|e| {
        eprintln!("error: {e}");
        false
    });
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn run() -> Result<bool, NkiError> {
    let w = Array3::from_shape_fn((E, D, F), |(e, k, f)| value(1, (e * D + k) * F + f) * 0.2);
    let mut all_ok = true;
    println!(
        "{E} experts of capacity {CAP} tokens, hidden {D}, width {F}: out[e] = relu(x[e] W[e])"
    );
    for (seed, counts) in [[512, 512, 512, 512], [300, 0, 37, 129], [0, 0, 0, 64]]
        .into_iter()
        .enumerate()
    {
        // Tokens past an expert's count are the zero padding.
        let mut x = Array3::<f32>::zeros((E, CAP, D));
        for (e, &c) in counts.iter().enumerate() {
            for t in 0..c as usize {
                for k in 0..D {
                    x[[e, t, k]] = value(seed as u64 + 2, (e * CAP + t) * D + k);
                }
            }
        }
        let mut want = Array3::<f32>::zeros((E, CAP, F));
        for e in 0..E {
            let y: Array2<f32> = x.slice(s![e, .., ..]).dot(&w.slice(s![e, .., ..]));
            want.slice_mut(s![e, .., ..])
                .assign(&y.mapv(|v| v.max(0.0)));
        }
        let xt: Vec<f32> = (0..E)
            .flat_map(|e| {
                let xe = x.slice(s![e, .., ..]).t().to_owned();
                xe.iter().copied().collect::<Vec<_>>()
            })
            .collect();
        let xt = Hbm::from_vec(&[E * D, CAP], xt)?;
        let wh = Hbm::from_vec(&[E * D, F], w.iter().copied().collect())?;
        let ch = Hbm::from_vec(&[E, 1], counts.to_vec())?;
        println!("tokens per expert {counts:?}:");
        for version in [Version::Dense, Version::Loop, Version::Branch] {
            let mut out = Hbm::<f32>::zeros([E * CAP, F]);
            let sim = experts::simulate(1, Target::Trn2, &ch, &xt, &wh, &mut out, version)?;
            let got = out.to_f32_vec()?;
            let worst = got
                .iter()
                .zip(want.iter())
                .map(|(a, b)| (a - b).abs() / (1e-3 + b.abs()))
                .fold(0.0f32, f32::max);
            let l = Launch::new(1)
                .target(Target::Trn2)
                .mode(Mode::Estimate)
                .trip_counts(trip_counts(version, &counts));
            let shape_only = |d: [usize; 2]| Hbm::<f32>::shape_only(d);
            let mut out_e = shape_only([E * CAP, F]);
            let est = experts::run(
                l,
                &Hbm::<i32>::shape_only([E, 1]),
                &shape_only([E * D, CAP]),
                &shape_only([E * D, F]),
                &mut out_e,
                version,
            )?
            .profile
            .ok_or_else(|| NkiError::new(ErrorKind::NoData, "estimate", "no profile"))?;
            let agree = (est.latency_ns - sim.latency_ns).abs() <= 1e-6 * sim.latency_ns;
            let ok = worst < 1e-4 && agree;
            all_ok &= ok;
            println!(
                "  {:<7} {} (largest relative difference {worst:.1e}); modelled {:>8.2} us \
                 (estimate {:.2} us), {} instructions",
                format!("{version:?}").to_lowercase(),
                if ok { "match" } else { "MISMATCH" },
                sim.latency_us(),
                est.latency_us(),
                sim.instructions
            );
        }
    }
    Ok(all_ok)
}
