//! trn3 (NeuronCore-v4) as the NKI docs describe it: `nc_matmul` moving free sizes up to 4096
//! (fp32 dst) / 8192 (bf16 dst) with a dst spanning several PSUM banks, bf16 PSUM results and
//! accumulation (fp32 inside, rounded to bf16 after each matmul), the same calls on trn2 as
//! errors naming the limit, and `get_nc_version` inside a kernel. References are plain loops.

use nki_core::prelude::*;

mod common;
use common::{fails_with, Rng};

/// `s^T @ m` for `s` `[k, mm]` and `m` `[k, n]`, row-major, summed in f64.
fn reference_matmul(k: usize, mm: usize, n: usize, s: &[f32], m: &[f32]) -> Vec<f32> {
    let mut out = vec![0.0f32; mm * n];
    for i in 0..mm {
        for j in 0..n {
            let mut acc = 0.0f64;
            for p in 0..k {
                acc += s[p * mm + i] as f64 * m[p * n + j] as f64;
            }
            out[i * n + j] = acc as f32;
        }
    }
    out
}

/// `x` rounded to bf16 (round to nearest even).
fn bf(x: f32) -> f32 {
    half::bf16::from_f32(x).to_f32()
}

/// Runs one `[128, mm] x [128, n]` matmul into a PSUM dst of `dst_dtype` on `target`
/// (accumulating `groups` products of the same operands scaled by 1, 2, ...); returns dst.
fn run_matmul(
    target: Target,
    (mm, n): (usize, usize),
    dst_dtype: DType,
    s: &[f32],
    m: &[f32],
    groups: usize,
) -> Result<Vec<f32>, NkiError> {
    let sh = Hbm::<f32>::from_vec(&[128, mm], s.to_vec()).unwrap();
    let mh = Hbm::<f32>::from_vec(&[128, n], m.to_vec()).unwrap();
    let mut out = Hbm::<f32>::zeros([mm, n]);
    {
        let o = out.as_output();
        Launch::new(1).target(target).run(|| {
            let st = nl::load_as(&sh, DType::BF16);
            let mv = nl::load_as(&mh, DType::BF16);
            let acc = nl::ndarray(&[mm, n], dst_dtype, MemKind::Psum);
            for g in 0..groups {
                let scaled = nl::ndarray(&[128, n], DType::BF16, MemKind::Sbuf);
                nisa::tensor_scalar(&scaled, &mv, nisa::AluOp::Multiply, (g + 1) as f32, None);
                nisa::nc_matmul(&acc, &st, &scaled, None);
            }
            let sb = nl::ndarray(&[mm, n], DType::F32, MemKind::Sbuf);
            nisa::tensor_copy(&sb, &acc, None);
            nl::store(&o, &sb);
        })?;
    }
    Ok(out.to_f32_vec().unwrap())
}

#[test]
fn trn3_matmul_moving_4096_fp32_and_8192_bf16() {
    let mut rng = Rng(21);
    // Integers in [-1, 1]: every product sum is exact in fp32 and in bf16 (|sum| <= 128).
    for (n, dst) in [(4096, DType::F32), (8192, DType::BF16)] {
        let mm = 16;
        let s = rng.int_f32s(128 * mm, -1, 1);
        let m = rng.int_f32s(128 * n, -1, 1);
        let got = run_matmul(Target::Trn3, (mm, n), dst, &s, &m, 1)
            .unwrap_or_else(|e| panic!("trn3 {n}-column {dst} matmul: {e}"));
        let want = reference_matmul(128, mm, n, &s, &m);
        assert_eq!(got, want, "trn3 [128, {mm}] x [128, {n}] -> {dst}");
    }
}

#[test]
fn trn3_bf16_psum_accumulates_in_fp32_and_rounds_each_matmul() {
    let mut rng = Rng(7);
    let (mm, n) = (32, 512);
    // Integers in [0, 3]: sums average ~290 and reach ~1000, beyond bf16's exact integers
    // (256), exact in fp32.
    let s = rng.int_f32s(128 * mm, 0, 3);
    let m = rng.int_f32s(128 * n, 0, 3);
    let got = run_matmul(Target::Trn3, (mm, n), DType::BF16, &s, &m, 3).unwrap();
    let p = reference_matmul(128, mm, n, &s, &m);
    // PSUM holds bf16: each matmul adds its fp32 product to the bf16 value and rounds (RNE).
    let want: Vec<f32> = p
        .iter()
        .map(|&x| bf(bf(bf(x) + 2.0 * x) + 3.0 * x))
        .collect();
    assert_eq!(got, want);
    assert!(
        p.iter().any(|&x| bf(x) != x),
        "the test needs sums bf16 cannot hold"
    );
}

#[test]
fn trn2_rejects_trn3_matmul_sizes_naming_the_limit() {
    // The same 4096-column matmul on trn2: the moving limit (the classic form checks the
    // operands before allocating its PSUM result).
    let e = fails_with(ErrorKind::MatmulLimit, || {
        let st = nl::ndarray(&[128, 16], DType::BF16, MemKind::Sbuf);
        let mv = nl::ndarray(&[128, 4096], DType::BF16, MemKind::Sbuf);
        nisa::memset(&st, 0.0, None);
        nisa::memset(&mv, 0.0, None);
        let _ = nisa::classic::nc_matmul(&st, &mv);
    });
    let msg = e.to_string();
    assert!(msg.contains("4096") && msg.contains("512"), "{msg}");
    assert!(msg.contains("trn2"), "{msg}");
    // Its [16, 4096] fp32 dst does not fit one PSUM bank on trn2.
    let e = fails_with(ErrorKind::PsumBankLimit, || {
        let _ = nl::ndarray(&[16, 4096], DType::F32, MemKind::Psum);
    });
    assert!(e.to_string().contains("2048"), "{e}");
    // A bf16 dst is NeuronCore-v4 only.
    let e = fails_with(ErrorKind::DType, || {
        let st = nl::ndarray(&[128, 16], DType::BF16, MemKind::Sbuf);
        let mv = nl::ndarray(&[128, 512], DType::BF16, MemKind::Sbuf);
        nisa::memset(&st, 0.0, None);
        nisa::memset(&mv, 0.0, None);
        let acc = nl::ndarray(&[16, 512], DType::BF16, MemKind::Psum);
        nisa::nc_matmul(&acc, &st, &mv, None);
    });
    assert!(e.to_string().contains("float32"), "{e}");
    // trn3's own limits: 4097 fp32 columns, 8193 bf16 columns.
    for (n, dst) in [(4097, DType::F32), (8193, DType::BF16)] {
        let e = Launch::new(1)
            .target(Target::Trn3)
            .run(|| {
                let st = nl::ndarray(&[128, 1], DType::BF16, MemKind::Sbuf);
                let mv = nl::ndarray(&[128, n], DType::BF16, MemKind::Sbuf);
                nisa::memset(&st, 0.0, None);
                nisa::memset(&mv, 0.0, None);
                let acc = nl::ndarray(&[1, n], dst, MemKind::Psum);
                nisa::nc_matmul(&acc, &st, &mv, None);
            })
            .expect_err("over the trn3 limit");
        assert!(
            matches!(e.kind(), ErrorKind::MatmulLimit | ErrorKind::PsumBankLimit),
            "{e}"
        );
    }
}

#[test]
fn trn3_psum_tiles_take_whole_banks() {
    // Two [128, 2048] fp32 tiles (4 banks each) fill PSUM; a third tile does not fit.
    let e = Launch::new(1)
        .target(Target::Trn3)
        .run(|| {
            let _a = nl::ndarray(&[128, 2048], DType::F32, MemKind::Psum);
            let _b = nl::ndarray(&[128, 2048], DType::F32, MemKind::Psum);
            let _c = nl::ndarray(&[128, 1], DType::F32, MemKind::Psum);
        })
        .expect_err("PSUM is full");
    assert_eq!(e.kind(), ErrorKind::Capacity, "{e}");
    // Freed banks are reused.
    Launch::new(1)
        .target(Target::Trn3)
        .run(|| {
            for _ in 0..3 {
                let _a = nl::ndarray(&[128, 4096], DType::F32, MemKind::Psum);
            }
            let _b = nl::ndarray(&[128, 512], DType::F32, MemKind::Psum);
        })
        .unwrap();
}

#[test]
fn get_nc_version_inside_a_kernel() {
    use nki_core::nisa::NcVersion;
    for (t, v) in [
        (Target::Trn1, NcVersion::Gen2),
        (Target::Trn2, NcVersion::Gen3),
        (Target::Trn3, NcVersion::Gen4),
    ] {
        let seen = std::sync::Mutex::new(None);
        Launch::new(1)
            .target(t)
            .run(|| {
                *seen.lock().unwrap() = Some((nisa::get_nc_version(), nisa::get_nc_sub_version()));
            })
            .unwrap();
        assert_eq!(seen.into_inner().unwrap(), Some((v, 0)), "{t}");
        assert_eq!(v.number(), t.spec().nc_version);
    }
    assert!(NcVersion::Gen4 > NcVersion::Gen3);
}
