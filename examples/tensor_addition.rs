//! Tensor addition, tiled and streamed, in NKI 0.7 (NKI tutorials *Tensor addition* and the
//! Trainium notes on the partition and free dimensions).
//!
//! A (256, 1024) bf16 tensor does not fit in one tile: its first dimension goes on the 128 SBUF
//! partitions, so the kernel walks it 128 rows at a time, and streams each row tile along the
//! free dimension in chunks of `FREE_DIM` elements (load both chunks, add, store). `FREE_DIM` is
//! a tuning knob: bigger chunks mean fewer, larger DMA transfers; smaller chunks let the engines
//! overlap more. The kernel is `nki_kernels::tensor_add::tensor_add_stream_07`: each chunk an
//! SBUF tensor allocated with `nl::ndarray`, moved with `nisa::dma_copy`, added by
//! `nisa::tensor_tensor` into a destination given first, and the output allocated in HBM and
//! returned; it handles a last chunk that is shorter than `FREE_DIM`. It issues the same
//! instructions as its NKI Beta 1 twin, `tensor_add_stream`: the same values and the same
//! modelled latency.
//!
//! Run with `cargo run --example tensor_addition [-- FREE_DIM]` (default 512).

use nki_core::prelude::*;
use nki_kernels::tensor_add::{tensor_add_stream_07, DEFAULT_FREE_DIM};
use nki_kernels::testing::{allclose, random_bf16};
use std::process::ExitCode;

/// The tutorial's tensor shape.
const SHAPE: [usize; 2] = [256, 1024];

/// `FREE_DIM` from the first command-line argument, or the default.
fn free_dim_arg() -> Result<usize, String> {
    match std::env::args().nth(1) {
        None => Ok(DEFAULT_FREE_DIM),
        Some(s) => match s.parse::<usize>() {
            Ok(n) if n >= 1 => Ok(n),
            _ => Err(format!("FREE_DIM must be a positive integer, got {s:?}")),
        },
    }
}

fn main() -> ExitCode {
    let free_dim = match free_dim_arg() {
        Ok(n) => n,
        Err(m) => {
            eprintln!("{m}\nusage: cargo run --example tensor_addition [-- FREE_DIM]");
            return ExitCode::from(2);
        }
    };
    let [rows, cols] = SHAPE;
    let (a, b) = (random_bf16(rows, cols, 1), random_bf16(rows, cols, 2));
    let a_input = Hbm::from_array(&a).expect("2-D array");
    let b_input = Hbm::from_array(&b).expect("2-D array");

    let row_tiles = rows.div_ceil(nl::tile_size::PMAX);
    let chunks = cols.div_ceil(free_dim);
    println!(
        "c = a + b on {rows}x{cols} bf16: {row_tiles} row tiles of {} partitions x {chunks} chunks of FREE_DIM = {free_dim}",
        nl::tile_size::PMAX
    );
    // NKI 0.7's kernel[1]: one core; the kernel returns its output.
    let c_output = match launch!(tensor_add_stream_07[1](&a_input, &b_input, free_dim)) {
        Ok((c_output, _report)) => c_output,
        Err(e) => {
            eprintln!("kernel failed: {e}");
            return ExitCode::FAILURE;
        }
    };
    let output_nki = c_output.to_array().expect("output has values");
    let output_ref = (a.mapv(f32::from) + b.mapv(f32::from)).into_dyn();
    let matched = allclose(&output_nki, &output_ref, 1e-4, 1e-2);
    match &matched {
        Ok(()) => println!("NKI and ndarray match"),
        Err(m) => println!("NKI and ndarray differ: {m}"),
    }

    // Tuning FREE_DIM: the modelled trn2 latency of the same kernel for a few chunk sizes
    // (estimate mode: the timeline only, no arithmetic).
    println!("\nFREE_DIM sweep (modelled on trn2):");
    let mut sweep = vec![128, 256, 512, 1024];
    if !sweep.contains(&free_dim) {
        sweep.push(free_dim);
        sweep.sort_unstable();
    }
    for fd in sweep {
        let mark = if fd == free_dim { "  <- this run" } else { "" };
        match tensor_add_stream_07::estimate(1, Target::Trn2, &a_input, &b_input, fd) {
            Ok((_, p)) => {
                println!(
                    "  FREE_DIM = {fd:>4}: {:>3} instructions, {:>3} DMA transfers of {:>6.0} B avg, latency {:>6.2} us{mark}",
                    p.instructions,
                    p.dma.count,
                    p.dma.average_bytes,
                    p.latency_us()
                );
            }
            Err(e) => println!("  FREE_DIM = {fd:>4}: {e}"),
        }
    }

    if matched.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
