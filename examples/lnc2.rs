//! A matmul split over the two physical cores of a logical NeuronCore (the kernel is
//! `nki_kernels::lnc2::matmul_lnc2`), written as an NKI 0.7
//! kernel (`#[nki_kernel(nki = "0.7")]`) and launched as NKI 0.7's `kernel[2]`
//! (`matmul_lnc2::simulate(2, ..)`, the same as `Grid::lnc(2)`): `nl::program_id(0)` is the
//! core index; each core multiplies its half
//! of the contraction dimension, the cores exchange their partial products with
//! `nisa::sendrecv`, and each core adds the two and stores its half of the output rows.
//!
//! Prints "match" when the output equals a host reference, and the modelled time in simulate
//! mode and in estimate mode (no values), with each core's timeline length.
//!
//! Run with `cargo run --release --example lnc2`.

use nki_core::prelude::*;
use nki_kernels::lnc2::{matmul_lnc2, K, M, N};
use std::process::ExitCode;

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
    let val = |k: usize, s: usize| ((k * s + 11) % 17) as f32 / 17.0 - 0.5;
    let at: Vec<f32> = (0..K * M).map(|k| val(k, 5)).collect();
    let bv: Vec<f32> = (0..K * N).map(|k| val(k, 3)).collect();
    let mut want = vec![0.0f32; M * N];
    for i in 0..M {
        for j in 0..N {
            want[i * N + j] = (0..K).map(|k| at[k * M + i] * bv[k * N + j]).sum();
        }
    }
    let a = Hbm::from_vec(&[K, M], at)?;
    let b = Hbm::from_vec(&[K, N], bv)?;
    let mut c = Hbm::<f32>::zeros([M, N]);
    println!("c[{M}, {N}] = a[{M}, {K}] @ b[{K}, {N}] on a logical NeuronCore of 2 cores (trn2)");

    // NKI 0.7: `matmul_lnc2[2](a, b, c)`, LNC=2.
    let sim = matmul_lnc2::simulate(2, Target::Trn2, &a, &b, &mut c)?;
    let got = c.to_f32_vec()?;
    let worst = got
        .iter()
        .zip(&want)
        .map(|(x, y)| (x - y).abs() / (1e-2 + y.abs()))
        .fold(0.0f32, f32::max);
    let ok = worst < 1e-4;
    println!(
        "{} (largest relative difference {worst:.2e})",
        if ok { "match" } else { "MISMATCH" }
    );
    let cores = |p: &Profile| {
        p.cores
            .iter()
            .map(|c| format!("nc{} {:.2} us", c.nc, c.latency_ns / 1e3))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!(
        "simulate: modelled time {:.2} us ({})",
        sim.latency_us(),
        cores(&sim)
    );
    let mut c_est = Hbm::<f32>::shape_only([M, N]);
    let est = matmul_lnc2::estimate(
        2,
        Target::Trn2,
        &Hbm::<f32>::shape_only([K, M]),
        &Hbm::<f32>::shape_only([K, N]),
        &mut c_est,
    )?;
    println!(
        "estimate: modelled time {:.2} us ({})",
        est.latency_us(),
        cores(&est)
    );
    Ok(ok)
}
