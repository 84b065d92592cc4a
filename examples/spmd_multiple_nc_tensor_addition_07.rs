//! The main demo in NKI 0.7: tensor addition on the two cores of a logical NeuronCore (the
//! twin of `spmd_multiple_nc_tensor_addition`, which is the tutorial's NKI Beta 1).
//!
//! NKI 0.7 has no SPMD grid. `#[nki_kernel(nki = "0.7")]` makes a launch on `[2]` NKI 0.7's
//! `kernel[2]`: the kernel runs once on each of the two physical cores of a logical NeuronCore,
//! `nl::program_id(0)` is the core and `nl::num_programs(0)` the number of cores, and the
//! kernel deals the tiles out itself (`for t in range(nl.program_id(0), n_tiles,
//! nl.num_programs())` in NKI). Tensors are allocated with `nl::ndarray(shape, dtype, buffer)`,
//! instructions write into a destination given first, data moves with `nisa::dma_copy`, and
//! the output is allocated in HBM inside the kernel and returned.
//!
//! Core `c` takes row tiles `c, c + 2, ...`, each across every column tile: the tiles each core
//! computes, and their order, are those of the Beta-1 grid `[spmd_dim(2, nc(2)), 4]`, whose
//! even row ids run on core 0. The example checks the result against ndarray and models the
//! launch on trn2 on one core (`[1]`) and on two (`[2]`).
//!
//! Run with `cargo run --release --example spmd_multiple_nc_tensor_addition_07` (add
//! `-- --trace FILE` to write the two-core timeline as a Chrome trace for Perfetto).

use nki_core::prelude::*;
use nki_kernels::testing::{allclose, random_bf16};

/// Rows per tile (the partition dimension, `nl.tile_size.pmax`).
const TILE_P: usize = nl::tile_size::PMAX;
/// Columns per tile (free dimension; chosen freely, here 512).
const TILE_F: usize = 512;

/// `a_input + b_input`, returned; each core adds its row tiles, [128, 512] at a time.
#[nki_kernel(nki = "0.7")]
pub(crate) fn nki_tensor_add_kernel(a_input: &Hbm<bf16>, b_input: &Hbm<bf16>) -> Hbm<bf16> {
    let c_output = nl::ndarray(a_input.shape(), a_input.dtype(), nl::shared_hbm);
    let (row_tiles, col_tiles) = (a_input.shape()[0] / TILE_P, a_input.shape()[1] / TILE_F);
    // Core program_id(0) of num_programs(0) takes every other row tile.
    for i in (nl::program_id(0)..row_tiles).step_by(nl::num_programs(0)) {
        for j in 0..col_tiles {
            let rows = i * TILE_P..(i + 1) * TILE_P;
            let cols = j * TILE_F..(j + 1) * TILE_F;
            let a_tile = nl::ndarray(&[TILE_P, TILE_F], a_input.dtype(), nl::sbuf);
            let b_tile = nl::ndarray(&[TILE_P, TILE_F], b_input.dtype(), nl::sbuf);
            let c_tile = nl::ndarray(&[TILE_P, TILE_F], a_input.dtype(), nl::sbuf);
            nisa::dma_copy(&a_tile, a_input.slice((rows.clone(), cols.clone())), None);
            nisa::dma_copy(&b_tile, b_input.slice((rows.clone(), cols.clone())), None);
            nisa::tensor_tensor(&c_tile, &a_tile, &b_tile, nl::AluOp::Add, None);
            nisa::dma_copy(c_output.slice((rows, cols)), &c_tile, None);
        }
    }
    c_output
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (rows, cols) = (512, 2048);
    let (a, b) = (random_bf16(rows, cols, 1), random_bf16(rows, cols, 2));
    let (a_input, b_input) = (Hbm::from_array(&a)?, Hbm::from_array(&b)?);
    println!("Tensor addition on the 2 cores of a logical NeuronCore (NKI 0.7: kernel[2])");
    println!("  a, b, c   [{rows}, {cols}] bf16 in shared HBM, tiles of [{TILE_P}, {TILE_F}]");

    let (c_output, report) = launch!(nki_tensor_add_kernel[2](&a_input, &b_input))?;
    let cores = report.instances.len();
    for core in 0..cores {
        let tiles: Vec<String> = (core..rows / TILE_P)
            .step_by(cores)
            .map(|i| format!("{}..{}", i * TILE_P, (i + 1) * TILE_P))
            .collect();
        let (all, tile_cols) = (tiles.join(", "), cols / TILE_F);
        println!(
            "  core {core} = program_id(0) adds rows {all} across its {tile_cols} column tiles"
        );
    }
    let output_ref = (a.mapv(f32::from) + b.mapv(f32::from)).into_dyn();
    allclose(&c_output.to_array()?, &output_ref, 1e-4, 1e-2)?;
    println!("\nNKI and ndarray match (atol 1e-4, rtol 1e-2)");

    // Modelled on trn2: the kernel on one core (`[1]`: every tile) and on two.
    let (_, one) = nki_tensor_add_kernel::simulate(1, Target::Trn2, &a_input, &b_input)?;
    let (_, two) = nki_tensor_add_kernel::simulate(2, Target::Trn2, &a_input, &b_input)?;
    print!("\nSimulate mode, [2]: {two}");
    let speedup = one.latency_ns / two.latency_ns;
    println!(
        "The same {} tiles on one core ([1]): {:.2} us, so [2] is modelled {speedup:.2}x faster.",
        rows / TILE_P * (cols / TILE_F),
        one.latency_us()
    );
    // `-- --trace FILE` writes the two-core timeline for Perfetto / chrome://tracing.
    if let Some(path) = std::env::args().skip_while(|a| a != "--trace").nth(1) {
        two.write_chrome_trace(&path)?;
        println!("Wrote the timeline to {path} (open it in Perfetto).");
    }
    Ok(())
}
