//! SPMD tensor addition (NKI tutorial *Single program, multiple data tensor addition*).
//!
//! The kernel adds one [128, 512] tile; a launch grid runs one instance of it per tile. Each
//! instance reads its position in the grid with `nl::program_id` and turns it into row and
//! column offsets. A (256, 1024) bf16 tensor is covered by a 2 x 2 grid: axis 0 tiles the rows
//! (partition dimension, 128 per tile), axis 1 tiles the columns (free dimension, 512 per tile).
//!
//! Run with `cargo run --example spmd_tensor_addition`.

use nki_core::prelude::*;
use nki_kernels::testing::{allclose, random_bf16};
use std::process::ExitCode;

/// Rows per tile (the partition dimension, `nl.tile_size.pmax`).
const TILE_P: usize = nl::tile_size::PMAX;
/// Columns per tile (free dimension; chosen freely, here 512).
const TILE_F: usize = 512;

/// Adds the [128, 512] tile of `a_input` and `b_input` that this instance's program id selects
/// and stores it into the same tile of `c_output`.
#[nki_kernel]
fn nki_tensor_add_kernel(a_input: &Hbm<bf16>, b_input: &Hbm<bf16>, c_output: &mut Hbm<bf16>) {
    // Offsets of this instance's tile, from its position in the launch grid.
    let offset_i_x = nl::program_id(0) * TILE_P;
    let offset_i_y = nl::program_id(1) * TILE_F;
    let rows = offset_i_x..offset_i_x + TILE_P;
    let cols = offset_i_y..offset_i_y + TILE_F;

    // Load the input tiles, add them, store the result tile.
    let a_tile = nl::load(a_input.slice((rows.clone(), cols.clone())));
    let b_tile = nl::load(b_input.slice((rows.clone(), cols.clone())));
    let c_tile = nl::add(&a_tile, &b_tile);
    nl::store(c_output.slice((rows, cols)), &c_tile);
}

fn main() -> ExitCode {
    let (rows, cols) = (256, 1024);
    let (a, b) = (random_bf16(rows, cols, 1), random_bf16(rows, cols, 2));
    let a_input = Hbm::from_array(&a).expect("2-D array");
    let b_input = Hbm::from_array(&b).expect("2-D array");
    let mut c_output = Hbm::<bf16>::zeros([rows, cols]);

    // One instance per tile: a grid of (rows / 128) x (cols / 512). The tensor sizes are
    // multiples of the tile sizes, so there are no partial tiles to handle.
    let (grid_x, grid_y) = (rows / TILE_P, cols / TILE_F);
    let report = match launch!(nki_tensor_add_kernel[grid_x, grid_y](
        &a_input,
        &b_input,
        &mut c_output
    )) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("kernel failed: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "launched grid {} ({} instances) over a {rows}x{cols} bf16 tensor:",
        report.grid,
        report.instances.len()
    );
    for inst in &report.instances {
        let (x, y) = (inst.program_id[0], inst.program_id[1]);
        println!(
            "  program_id = ({x}, {y}) adds rows {:>3}..{:<3} cols {:>4}..{:<4}",
            x * TILE_P,
            (x + 1) * TILE_P,
            y * TILE_F,
            (y + 1) * TILE_F
        );
    }

    let output_nki = c_output.to_array().expect("output has values");
    let output_ref = (a.mapv(f32::from) + b.mapv(f32::from)).into_dyn();
    match allclose(&output_nki, &output_ref, 1e-4, 1e-2) {
        Ok(()) => {
            println!("NKI and ndarray match");
            ExitCode::SUCCESS
        }
        Err(m) => {
            println!("NKI and ndarray differ: {m}");
            ExitCode::FAILURE
        }
    }
}
