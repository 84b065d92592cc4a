//! SPMD tensor addition on multiple NeuronCores (NKI tutorial *SPMD Tensor Addition using
//! Multiple Neuron Cores*).
//!
//! The kernel is NKI Beta 1, the tutorial's dialect (`#[nki_kernel]`): launched on an SPMD grid
//! of program instances. (NKI 0.7 has no SPMD grid: a 0.7 kernel launches once per core of a
//! logical NeuronCore and splits the work by `nl::program_id(0)`: the same kernel in NKI 0.7 is
//! `spmd_multiple_nc_tensor_addition_07`.)
//!
//! The [128, 512]-tile add kernel of the SPMD tutorial is reused unchanged; only the launch grid
//! changes. `spmd_dim(grid_x, nc(2))` makes grid axis 0 twice as long and deals its instances
//! out to two logical NeuronCores (even ids to core 0, odd ids to core 1), which share HBM, as
//! the two physical cores of a trn2 logical core do. On the CPU each core is a worker thread;
//! instances of one core run one after the other, cores run side by side.
//!
//! The example prints which core ran which tile, checks the result against ndarray, and models
//! the launch on trn2 (one core vs two).
//!
//! Run with `cargo run --example spmd_multiple_nc_tensor_addition` (add `-- --trace FILE` to
//! write the modelled timeline as a Chrome trace for Perfetto).

use nki_core::prelude::*;
use nki_kernels::testing::{allclose, random_bf16};
use std::process::ExitCode;

/// Rows per tile (the partition dimension, `nl.tile_size.pmax`).
const TILE_P: usize = nl::tile_size::PMAX;
/// Columns per tile (free dimension; chosen freely, here 512).
const TILE_F: usize = 512;
/// Logical NeuronCores to shard over (a trn2 logical core has two).
const CORES: usize = 2;

/// Adds the [128, 512] tile of `a_input` and `b_input` that this instance's program id selects
/// and stores it into the same tile of `c_output`. (`pub(crate)`: the twin tests compile this
/// file to check `spmd_multiple_nc_tensor_addition_07` against it.)
#[nki_kernel]
pub(crate) fn nki_tensor_add_kernel(
    a_input: &Hbm<bf16>,
    b_input: &Hbm<bf16>,
    c_output: &mut Hbm<bf16>,
) {
    let offset_i_x = nl::program_id(0) * TILE_P;
    let offset_i_y = nl::program_id(1) * TILE_F;
    let rows = offset_i_x..offset_i_x + TILE_P;
    let cols = offset_i_y..offset_i_y + TILE_F;
    let a_tile = nl::load(a_input.slice((rows.clone(), cols.clone())));
    let b_tile = nl::load(b_input.slice((rows.clone(), cols.clone())));
    let c_tile = nl::add(&a_tile, &b_tile);
    nl::store(c_output.slice((rows, cols)), &c_tile);
}

/// Prints the tile map: for each [128, 512] tile of the output, the core that computed it and
/// the instance's position in that core's run order.
fn print_placement(report: &LaunchReport, grid_x: usize, grid_y: usize) {
    let mut cell = vec![vec![String::new(); grid_y]; grid_x];
    for inst in &report.instances {
        let (x, y) = (inst.program_id[0], inst.program_id[1]);
        cell[x][y] = format!("nc{} #{}", inst.nc, inst.order);
    }
    print!("{:>16}", "");
    for y in 0..grid_y {
        print!("  {:>11}", format!("{}..{}", y * TILE_F, (y + 1) * TILE_F));
    }
    println!("   <- columns");
    for (x, row) in cell.iter().enumerate() {
        print!(
            "  rows {:>9} ",
            format!("{}..{}", x * TILE_P, (x + 1) * TILE_P)
        );
        for c in row {
            print!("  {c:>11}");
        }
        println!();
    }
    for core in 0..CORES {
        let mut mine: Vec<_> = report.instances.iter().filter(|i| i.nc == core).collect();
        mine.sort_by_key(|i| i.order);
        let ids: Vec<String> = mine
            .iter()
            .map(|i| format!("({},{})", i.program_id[0], i.program_id[1]))
            .collect();
        println!(
            "  NeuronCore {core} ran {} instances in order: {}",
            ids.len(),
            ids.join(" ")
        );
    }
}

fn main() -> ExitCode {
    let (rows, cols) = (512, 2048);
    let (a, b) = (random_bf16(rows, cols, 1), random_bf16(rows, cols, 2));
    let a_input = Hbm::from_array(&a).expect("2-D array");
    let b_input = Hbm::from_array(&b).expect("2-D array");
    let mut c_output = Hbm::<bf16>::zeros([rows, cols]);

    // Axis 0 covers rows / 128 tiles, split into grid_x groups of CORES (one per core).
    let grid_x = rows / (TILE_P * CORES);
    let grid_y = cols / TILE_F;
    println!("SPMD tensor addition on {CORES} NeuronCores (NKI Beta 1: an SPMD grid of instances)");
    println!("  a, b, c   [{rows}, {cols}] bf16 in shared HBM, tiles of [{TILE_P}, {TILE_F}]");

    let report = match launch!(nki_tensor_add_kernel[spmd_dim(grid_x, nc(CORES)), grid_y](
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
        "  grid      {} = {} instances\n",
        report.grid,
        report.instances.len()
    );
    println!("Which NeuronCore computed each output tile (#k: k-th instance on that core):\n");
    print_placement(&report, grid_x * CORES, grid_y);

    let output_nki = c_output.to_array().expect("output has values");
    let output_ref = (a.mapv(f32::from) + b.mapv(f32::from)).into_dyn();
    let matched = allclose(&output_nki, &output_ref, 1e-4, 1e-2);
    match &matched {
        Ok(()) => println!("\nNKI and ndarray match (atol 1e-4, rtol 1e-2)"),
        Err(m) => println!("\nNKI and ndarray differ: {m}"),
    }

    // The same kernel modelled on trn2: all tiles on one NeuronCore vs shared by two.
    let mut simulate = |grid: Grid| {
        let launch = Launch::new(grid).target(Target::Trn2).mode(Mode::Simulate);
        nki_tensor_add_kernel::run(launch, &a_input, &b_input, &mut c_output)
            .map(|r| r.profile.expect("simulate mode returns a profile"))
    };
    let (one, two) = match (
        simulate(Grid::new([grid_x * CORES, grid_y])),
        simulate(Grid::new([
            spmd_dim(grid_x, nc(CORES)),
            spmd_dim(grid_y, 1),
        ])),
    ) {
        (Ok(one), Ok(two)) => (one, two),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("simulate failed: {e}");
            return ExitCode::FAILURE;
        }
    };
    print!("\nSimulate mode, grid [spmd_dim({grid_x}, nc({CORES})), {grid_y}]: {two}");
    println!(
        "The same {} tiles on one NeuronCore (grid [{}, {grid_y}]): {:.2} us, so nc({CORES}) is modelled {:.2}x faster.",
        grid_x * CORES * grid_y,
        grid_x * CORES,
        one.latency_us(),
        one.latency_ns / two.latency_ns
    );

    // `-- --trace FILE` writes the two-core timeline for Perfetto / chrome://tracing.
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--trace") {
        let Some(path) = args.get(i + 1) else {
            eprintln!(
                "usage: cargo run --example spmd_multiple_nc_tensor_addition [-- --trace FILE]"
            );
            return ExitCode::from(2);
        };
        match two.write_chrome_trace(path) {
            Ok(()) => println!("Wrote the timeline to {path} (open it in Perfetto)."),
            Err(e) => {
                eprintln!("could not write {path}: {e}");
                return ExitCode::FAILURE;
            }
        }
    }

    if matched.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
