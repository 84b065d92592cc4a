//! Getting started with nki-rs in NKI 0.7: the "hello world" kernel (the twin of
//! `getting_started`, which is written in the seeds' NKI Beta 1).
//!
//! A kernel has three phases: move the inputs from device memory (HBM) into on-chip SBUF
//! tensors, compute on them, and move the result back to HBM. In NKI 0.7 every tensor is
//! allocated with `nl::ndarray(shape, dtype, buffer)` (`nl::sbuf` on chip, `nl::shared_hbm`
//! for an output), data moves with `nisa::dma_copy(dst, src)`, each instruction writes into a
//! destination given first, and the kernel returns its output. This one adds two [128, 512]
//! bf16 tensors in a single tile, checks the result against ndarray with the NKI tutorials'
//! tolerance, then runs the same kernel in simulate mode to get the modelled NeuronCore
//! profile.
//!
//! Run with `cargo run --example getting_started_07`.

use nki_core::prelude::*;
use nki_kernels::testing::{allclose, random_bf16};

/// `a_input + b_input` for tensors that fit in one tile (at most 128 rows), returned.
#[nki_kernel(nki = "0.7")]
pub(crate) fn nki_tensor_add_kernel(a_input: &Hbm<bf16>, b_input: &Hbm<bf16>) -> Hbm<bf16> {
    // The kernel expects same-shaped inputs whose first (partition) dimension fits in one
    // tile. A failed assertion fails the launch with an error naming this line.
    assert_eq!(a_input.shape(), b_input.shape(), "inputs differ in shape");
    assert!(a_input.shape()[0] <= nl::tile_size::PMAX, "too many rows");

    // The output, allocated in HBM and returned.
    let c_output = nl::ndarray(a_input.shape(), a_input.dtype(), nl::shared_hbm);

    // 1. Move the inputs from HBM into SBUF tensors.
    let a_tile = nl::ndarray(a_input.shape(), a_input.dtype(), nl::sbuf);
    let b_tile = nl::ndarray(b_input.shape(), b_input.dtype(), nl::sbuf);
    nisa::dma_copy(&a_tile, a_input, None);
    nisa::dma_copy(&b_tile, b_input, None);

    // 2. Compute on them (VectorE tensor_tensor add, rounded to bf16).
    let c_tile = nl::ndarray(a_input.shape(), a_input.dtype(), nl::sbuf);
    nisa::tensor_tensor(&c_tile, &a_tile, &b_tile, nl::AluOp::Add, None);

    // 3. Move the result back to HBM.
    nisa::dma_copy(&c_output, &c_tile, None);
    c_output
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (a, b) = (random_bf16(128, 512, 1), random_bf16(128, 512, 2));
    let (a_input, b_input) = (Hbm::from_array(&a)?, Hbm::from_array(&b)?);

    // Run the kernel on one core (NKI 0.7's kernel[1]); it returns its output.
    let (c_output, _report) = launch!(nki_tensor_add_kernel[1](&a_input, &b_input))?;
    let output_nki = c_output.to_array()?;
    let output_ref = (a.mapv(f32::from) + b.mapv(f32::from)).into_dyn();
    let nki_head: Vec<_> = output_nki.iter().take(4).collect();
    let ref_head: Vec<_> = output_ref.iter().take(4).collect();
    println!("output_nki[0, 0..4] = {nki_head:?}\noutput_ref[0, 0..4] = {ref_head:?}");
    // The NKI tutorials' tolerance; a mismatch names the worst element.
    allclose(&output_nki, &output_ref, 1e-4, 1e-2)?;
    println!("NKI and ndarray match");

    // The same kernel in simulate mode: values plus the modelled NeuronCore timeline.
    let (_, profile) = nki_tensor_add_kernel::simulate(1, Target::Trn2, &a_input, &b_input)?;
    print!("\nSimulate mode, {profile}");
    Ok(())
}
