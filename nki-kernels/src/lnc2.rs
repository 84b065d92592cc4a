//! A matmul split over the two physical cores of a logical NeuronCore, written as an NKI 0.7
//! kernel and launched as NKI's `kernel[2]` (LNC=2, [`Grid::lnc(2)`](nki_core::Grid::lnc)):
//! `nl::program_id(0)` is the core index; each core multiplies its half of the contraction
//! dimension, the cores exchange their partial products with `nisa::sendrecv`, and each core
//! adds the two and stores its half of the output rows. Run by `examples/lnc2.rs`, emitted as
//! NKI 0.8 Python by `examples/emit.rs`.

// The 0.7 entries NKI 0.8 deprecated (the nisa LNC calls) stay provided and run here.
#![allow(deprecated)]

use nki_core::prelude::*;

/// Rows of the output (`M`), columns of `at`.
pub const M: usize = 128;
/// The contraction dimension (`K`): 128 rows per core.
pub const K: usize = 256;
/// Columns of the output (`N`).
pub const N: usize = 512;

/// `c = a @ b` with `at = a^T` ([K, M]) and `b` ([K, N]); core `me` contracts rows
/// `128 me .. 128 me + 128` of `at` and `b`, and stores rows `64 me .. 64 me + 64` of `c`.
#[nki_kernel(nki = "0.7")]
pub fn matmul_lnc2(at: &Hbm<f32>, b: &Hbm<f32>, c: &mut Hbm<f32>) {
    let me = nl::program_id(0);
    let k0 = 128 * me;
    let a_part = nl::ndarray(&[128, M], DType::F32, nl::sbuf);
    nisa::dma_copy(&a_part, at.slice((k0..k0 + 128, ..)), None);
    let b_part = nl::ndarray(&[128, N], DType::F32, nl::sbuf);
    nisa::dma_copy(&b_part, b.slice((k0..k0 + 128, ..)), None);
    // This core's partial product, [M, N].
    let ps = nl::ndarray(&[M, N], DType::F32, nl::psum);
    nisa::nc_matmul(&ps, &a_part, &b_part, None);
    let mine = nl::ndarray(&[M, N], DType::F32, nl::sbuf);
    nisa::tensor_copy(&mine, &ps, None);
    // Swap partial products with the other core.
    let theirs = nl::ndarray(&[M, N], DType::F32, nl::sbuf);
    nisa::sendrecv(&mine, &theirs, 1 - me, 1 - me);
    let sum = nl::ndarray(&[M, N], DType::F32, nl::sbuf);
    nisa::tensor_tensor(&sum, &mine, &theirs, nl::AluOp::Add, None);
    let r0 = 64 * me;
    nisa::dma_copy(
        c.slice((r0..r0 + 64, ..)),
        sum.slice((r0..r0 + 64, ..)),
        None,
    );
}
