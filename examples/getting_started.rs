//! Getting started with nki-rs: the "hello world" NKI kernel (NKI tutorial *Getting Started*).
//!
//! A kernel has three phases: load the inputs from device memory (HBM) into on-chip SBUF tiles,
//! compute on the tiles, and store the result tile back to HBM. This one adds two
//! [128, 512] bf16 tensors in a single tile, checks the result against ndarray with the NKI
//! tutorials' tolerance, then runs the same launch in simulate mode to get the modelled
//! NeuronCore profile.
//!
//! The kernel is NKI Beta 1, the seeds' dialect; `getting_started_07` is its NKI 0.7 twin.
//!
//! Run with `cargo run --example getting_started`.

use nki_core::prelude::*;
use nki_kernels::testing::{allclose, random_bf16};
use std::process::ExitCode;

/// `c_output = a_input + b_input` for tensors that fit in one tile (at most 128 rows).
/// (`pub(crate)`: the twin tests compile this file to check `getting_started_07` against it.)
#[nki_kernel]
pub(crate) fn nki_tensor_add_kernel(
    a_input: &Hbm<bf16>,
    b_input: &Hbm<bf16>,
    c_output: &mut Hbm<bf16>,
) {
    // The kernel expects same-shaped inputs and output whose first (partition) dimension fits
    // in one tile. A failed assertion fails the launch with an error naming this line.
    assert_eq!(a_input.shape(), b_input.shape(), "inputs differ in shape");
    assert_eq!(a_input.shape(), c_output.shape(), "output differs in shape");
    assert!(a_input.shape()[0] <= nl::tile_size::PMAX, "too many rows");

    // 1. Load the inputs from HBM into SBUF tiles.
    let a_tile = nl::load(a_input);
    let b_tile = nl::load(b_input);

    // 2. Compute on the tiles (VectorE tensor_tensor add, rounded to bf16).
    let c_tile = nl::add(&a_tile, &b_tile);

    // 3. Store the result tile back to HBM.
    nl::store(c_output, &c_tile);
}

fn main() -> ExitCode {
    let (a, b) = (random_bf16(128, 512, 1), random_bf16(128, 512, 2));
    let a_input = Hbm::from_array(&a).expect("2-D array");
    let b_input = Hbm::from_array(&b).expect("2-D array");
    let mut c_output = Hbm::<bf16>::zeros([128, 512]);

    // Run the kernel once (NKI's baremetal call): a grid of one instance.
    if let Err(e) = launch!(nki_tensor_add_kernel[1](&a_input, &b_input, &mut c_output)) {
        eprintln!("kernel failed: {e}");
        return ExitCode::FAILURE;
    }
    let output_nki = c_output.to_array().expect("output has values");
    let output_ref = (a.mapv(f32::from) + b.mapv(f32::from)).into_dyn();
    println!(
        "output_nki[0, 0..4] = {:?}",
        &output_nki.as_slice().expect("contiguous")[..4]
    );
    println!(
        "output_ref[0, 0..4] = {:?}",
        &output_ref.as_slice().expect("contiguous")[..4]
    );
    let matched = allclose(&output_nki, &output_ref, 1e-4, 1e-2);
    match &matched {
        Ok(()) => println!("NKI and ndarray match"),
        Err(m) => println!("NKI and ndarray differ: {m}"),
    }

    // The same launch in simulate mode: values plus the modelled NeuronCore timeline.
    let launch = Launch::new(1).target(Target::Trn2).mode(Mode::Simulate);
    match nki_tensor_add_kernel::run(launch, &a_input, &b_input, &mut c_output) {
        Ok(report) => match &report.profile {
            Some(profile) => print!("\nSimulate mode, {profile}"),
            None => println!("\n(simulate mode returned no profile)"),
        },
        Err(e) => {
            eprintln!("simulate failed: {e}");
            return ExitCode::FAILURE;
        }
    }

    if matched.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
