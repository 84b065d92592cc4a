//! PSUM placement rules against what NKI documents and what runs on hardware. Tuned trn2
//! matmul kernels (NKI 0.7) zero their PSUM accumulators with a memset into PSUM and keep the
//! accumulators of several 2 KiB banks in one PSUM tensor, each matmul writing within one bank:
//! both are valid. What stays an error: one matmul (or transpose) destination that crosses a
//! bank boundary, a PSUM tensor over the 8 banks, and a Beta-1 PSUM tile over one bank (Beta 1
//! documents "a PSUM tile cannot cross a bank").

use nki_core::prelude::*;

mod common;
use common::{fails_with, hbm, zeros, Rng};

/// fp32 columns of one 2 KiB PSUM bank.
const BANK: usize = 512;

/// `out = lhs_t^T @ rhs` (`lhs_t` `[K, 128]`, `rhs` `[K, banks * 512]`, K a multiple of 128)
/// with every accumulator in one PSUM tensor of `banks` banks, zeroed by a memset into PSUM
/// (`engine` as given, or where the compiler puts it), each matmul writing one bank's 512
/// columns; `offset` shifts every matmul destination by that many columns (0 in a valid
/// kernel).
#[nki_kernel(nki = "0.7")]
fn banked_accumulators(
    lhs_t: &Hbm<f32>,
    rhs: &Hbm<f32>,
    out: &mut Hbm<f32>,
    banks: usize,
    offset: usize,
    engine: Option<nisa::Engine>,
) {
    let k_tiles = lhs_t.shape()[0] / 128;
    let acc = nl::ndarray(&[128, banks * BANK], DType::F32, MemKind::Psum);
    nisa::memset(&acc, 0.0, engine.map(|e| nisa::Opts::new().engine(e)));
    for k in 0..k_tiles {
        let rows = k * 128..(k + 1) * 128;
        let st = nl::ndarray(&[128, 128], DType::F32, MemKind::Sbuf);
        nisa::dma_copy(&st, lhs_t.slice((rows.clone(), ..)), None);
        let mv = nl::ndarray(&[128, banks * BANK], DType::F32, MemKind::Sbuf);
        nisa::dma_copy(&mv, rhs.slice((rows, ..)), None);
        for b in 0..banks {
            let cols = b * BANK + offset..(b + 1) * BANK + offset;
            let mv_cols = b * BANK..(b + 1) * BANK;
            nisa::nc_matmul(acc.slice((.., cols)), &st, mv.slice((.., mv_cols)), None);
        }
    }
    let res = nl::ndarray(&[128, banks * BANK], DType::F32, MemKind::Sbuf);
    nisa::tensor_copy(&res, &acc, None);
    nisa::dma_copy(out.view(), &res, None);
}

/// Runs [`banked_accumulators`] in simulate mode on trn2 with small integer inputs; returns
/// its profile and whether `out` equals the exact product.
fn run_banked(
    banks: usize,
    offset: usize,
    engine: Option<nisa::Engine>,
) -> Result<(Profile, bool), NkiError> {
    let (k, m, n) = (256, 128, banks * BANK);
    let mut rng = Rng(11);
    let (a, b) = (rng.int_f32s(k * m, -3, 3), rng.int_f32s(k * n, -3, 3));
    let (lhs_t, rhs) = (hbm(&[k, m], a.clone()), hbm(&[k, n], b.clone()));
    let mut out = zeros::<f32>(&[m, n]);
    let p = banked_accumulators::simulate(
        Grid::new([1]),
        Target::Trn2,
        &lhs_t,
        &rhs,
        &mut out,
        banks,
        offset,
        engine,
    )?;
    let got = out.to_f32_vec().unwrap();
    let exact = (0..m * n).all(|ij| {
        let (i, j) = (ij / n, ij % n);
        let want: f32 = (0..k).map(|p| a[p * m + i] * b[p * n + j]).sum();
        got[ij] == want
    });
    Ok((p, exact))
}

/// The engine the profile's `nisa.memset` ran on.
fn memset_engine(p: &Profile) -> nisa::Engine {
    p.ops
        .iter()
        .find(|o| o.api == "nisa.memset")
        .expect("a memset")
        .engine
}

#[test]
fn accumulators_of_several_banks_in_one_psum_tensor_zeroed_by_a_memset_are_valid() {
    for banks in [2, 4, 8] {
        let (p, exact) = run_banked(banks, 0, None).unwrap();
        assert!(exact, "{banks} banks: wrong product");
        assert_eq!(p.memory.psum_banks, banks, "{banks} banks");
    }
}

#[test]
fn a_psum_memset_with_no_engine_runs_on_gpsimd_and_a_named_engine_stays() {
    let (p, _) = run_banked(2, 0, None).unwrap();
    assert_eq!(memset_engine(&p), nisa::Engine::GpSimd);
    let (p, exact) = run_banked(2, 0, Some(nisa::Engine::Vector)).unwrap();
    assert!(exact);
    assert_eq!(memset_engine(&p), nisa::Engine::Vector);
}

#[test]
fn a_matmul_destination_across_a_bank_boundary_is_an_error() {
    let e = run_banked(2, 256, None).expect_err("crosses banks 0 and 1");
    assert_eq!(e.kind(), ErrorKind::PsumBankLimit, "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("banks 0 to 1") && msg.contains("2048-byte bank") && msg.contains("trn2"),
        "{msg}"
    );
}

#[test]
fn a_psum_tensor_over_the_eight_banks_is_an_error() {
    let e = run_banked(9, 0, None).expect_err("nine banks");
    assert_eq!(e.kind(), ErrorKind::PsumBankLimit, "{e}");
    assert!(e.to_string().contains("at most 8 banks"), "{e}");
}

#[test]
fn a_beta1_psum_tile_still_fits_one_bank() {
    let e = fails_with(ErrorKind::PsumBankLimit, || {
        let _ = nl::zeros(&[128, 2 * BANK], DType::F32, nl::PSUM);
    });
    assert!(e.to_string().contains("2048-byte bank"), "{e}");
}
