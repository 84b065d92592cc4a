//! An MX-quantised matmul on trn3, as the SDK's mxfp-matmul tutorial does it: bf16 operands
//! quantised on the device with `nisa::quantize_mx` (OCP MX: a shared e8m0 scale per block of
//! 8 partitions x 4 elements, fp8 e4m3fn / e5m2 values packed four to a 32-bit element), then
//! one `nisa::nc_matmul_mx` contracting the partitions and the four packed values.
//!
//! The stationary operand `a[K, 4M]` holds, for output row `i`, the values `a[p, 4i + q]`; the
//! moving operand `b[K, 4N]` the values `b[p, 4j + q]` for output column `j`; so
//! `out[i, j] = sum over p, q of a[p, 4i + q] * b[p, 4j + q]` — a matmul contracting `4K`
//! values. The host reference quantises the same bf16 values from the definition (block scale
//! `2^(E - emax + 1 - 127)` with `E` the block's largest exponent field, each value rounded to
//! the nearest fp8 value of its scaled magnitude, ties to even) and sums the dequantised
//! products in f64; the example prints "match" when the device result equals it to fp32
//! accuracy, and how far both are from the unquantised bf16 product.
//!
//! MX needs NeuronCore-v4: on trn2 the same kernel is an error naming the rule. For the
//! modelled times the example also runs the bf16 matmul of the same logical size (four
//! accumulating K = 128 matmuls) on trn2 and trn3.
//!
//! Run with `cargo run --release --example mx_matmul`.

use nki_core::nisa::MatmulOpts;
use nki_core::prelude::*;
use std::process::ExitCode;

/// Partitions (contraction rows per packed value), output rows, output columns.
const K: usize = 128;
const M: usize = 128;
const N: usize = 512;

/// `out = a^T b` over the packed layout above: quantise both operands, one MX matmul.
#[nki_kernel]
fn mx_matmul(a: &Hbm<f32>, b: &Hbm<f32>, out: &mut Hbm<f32>) {
    let x = nl::load_as(a, DType::BF16);
    let y = nl::load_as(b, DType::BF16);
    let qa = nl::ndarray(&[K, M], DType::F8E4M3FNx4, nl::sbuf);
    let qb = nl::ndarray(&[K, N], DType::F8E4M3FNx4, nl::sbuf);
    let sa = nl::ndarray(&[K, M], DType::F8E8M0, nl::sbuf);
    let sb = nl::ndarray(&[K, N], DType::F8E8M0, nl::sbuf);
    nisa::quantize_mx(&qa, &x, &sa, None);
    nisa::quantize_mx(&qb, &y, &sb, None);
    let ps = nl::ndarray(&[M, N], DType::F32, nl::psum);
    nisa::nc_matmul_mx(&ps, &qa, &qb, &sa, &sb, None);
    let o = nl::ndarray(&[M, N], DType::F32, nl::sbuf);
    nisa::tensor_copy(&o, &ps, None);
    nisa::dma_copy(out.view(), &o, None);
}

/// The bf16 matmul of the same logical size: `at[4K, M]^T bt[4K, N]` as four accumulating
/// K = 128 TensorE matmuls.
#[nki_kernel]
fn bf16_matmul(at: &Hbm<f32>, bt: &Hbm<f32>, out: &mut Hbm<f32>) {
    let ps = nl::ndarray(&[M, N], DType::F32, nl::psum);
    for c in 0..4 {
        let s = nl::ndarray(&[K, M], DType::BF16, nl::sbuf);
        let m = nl::ndarray(&[K, N], DType::BF16, nl::sbuf);
        nisa::dma_copy(&s, at.slice((c * K..(c + 1) * K, ..)), None);
        nisa::dma_copy(&m, bt.slice((c * K..(c + 1) * K, ..)), None);
        nisa::nc_matmul(&ps, &s, &m, MatmulOpts::new().accumulate(c > 0));
    }
    let o = nl::ndarray(&[M, N], DType::F32, nl::sbuf);
    nisa::tensor_copy(&o, &ps, None);
    nisa::dma_copy(out.view(), &o, None);
}

/// A small deterministic generator (the example needs no randomness crate).
struct Lcg(u64);

impl Lcg {
    /// Uniform in [-0.5, 0.5).
    fn next(&mut self) -> f32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) - 0.5
    }
}

/// bfloat16 round-to-nearest-even (what `nl::load_as(.., BF16)` does to each value).
fn bf16(x: f32) -> f32 {
    let b = x.to_bits();
    f32::from_bits(b.wrapping_add(0x7fff + ((b >> 16) & 1)) & 0xffff_0000)
}

/// Every finite non-negative fp8 e4m3fn value (bias 7, no infinities, `0x7f` is NaN).
fn e4m3fn_values() -> Vec<f64> {
    (0u32..0x7f)
        .map(|c| {
            let (e, m) = ((c >> 3) as i32, (c & 7) as f64);
            if e == 0 {
                m / 8.0 * 2f64.powi(-6)
            } else {
                (1.0 + m / 8.0) * 2f64.powi(e - 7)
            }
        })
        .collect()
}

/// MX quantise-dequantise of row-major `[K, 4F]` values from the definition: per block of 8
/// partitions x 4 consecutive elements, the scale `2^(E - 8 + 1 - 127)` (`E` the largest
/// exponent field, e4m3fn's emax 8) and each value the nearest e4m3fn value of `v / scale`
/// (ties: the even code).
fn mx_dequantised(v: &[f32], f: usize) -> Vec<f64> {
    let table = e4m3fn_values();
    let width = 4 * f;
    let mut out = vec![0.0f64; v.len()];
    for blk in 0..K / 8 {
        for g in 0..f {
            let cells: Vec<usize> = (8 * blk..8 * blk + 8)
                .flat_map(|r| (0..4).map(move |q| r * width + 4 * g + q))
                .collect();
            let e = cells
                .iter()
                .map(|&i| ((v[i].to_bits() >> 23) & 0xff) as i32)
                .max()
                .unwrap_or(0);
            let scale = 2f64.powi((e - 8 + 1).clamp(0, 254) - 127);
            for &i in &cells {
                let x = v[i] as f64 / scale;
                let mut best = (f64::INFINITY, 0usize);
                for (c, &t) in table.iter().enumerate() {
                    let d = (t - x.abs()).abs();
                    if d < best.0 || (d == best.0 && c % 2 == 0) {
                        best = (d, c);
                    }
                }
                out[i] = table[best.1].copysign(x) * scale;
            }
        }
    }
    out
}

/// `out[i, j] = sum over p, q of a[p, 4i + q] b[p, 4j + q]` in f64.
fn packed_matmul(a: &[f64], b: &[f64]) -> Vec<f64> {
    let mut out = vec![0.0f64; M * N];
    for p in 0..K {
        for i in 0..M {
            for q in 0..4 {
                let x = a[p * 4 * M + 4 * i + q];
                let row = &b[p * 4 * N..(p + 1) * 4 * N];
                for j in 0..N {
                    out[i * N + j] += x * row[4 * j + q];
                }
            }
        }
    }
    out
}

/// The largest `|got - want|` relative to the largest `|want|`.
fn rel_err(got: impl Iterator<Item = f64>, want: &[f64]) -> f64 {
    let scale = want.iter().fold(0.0f64, |m, w| m.max(w.abs()));
    got.zip(want).fold(0.0f64, |m, (g, w)| m.max((g - w).abs())) / scale
}

/// TensorE's busy time in a profile, in microseconds.
fn tensor_us(p: &Profile) -> f64 {
    p.engine("TensorE").map_or(0.0, |e| e.active_ns / 1e3)
}

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
    let mut rng = Lcg(11);
    // Values over a few binades, so blocks get different scales.
    let mut gen = |n: usize| -> Vec<f32> {
        (0..n)
            .map(|i| bf16(rng.next() * 2f32.powi((i % 7) as i32 - 3)))
            .collect()
    };
    let (av, bv) = (gen(K * 4 * M), gen(K * 4 * N));
    let want = packed_matmul(&mx_dequantised(&av, M), &mx_dequantised(&bv, N));
    let exact = packed_matmul(
        &av.iter().map(|&v| v as f64).collect::<Vec<_>>(),
        &bv.iter().map(|&v| v as f64).collect::<Vec<_>>(),
    );
    let (a, b) = (
        Hbm::from_vec(&[K, 4 * M], av.clone())?,
        Hbm::from_vec(&[K, 4 * N], bv.clone())?,
    );
    println!(
        "MX matmul: [{K}, 4 x {M}] x [{K}, 4 x {N}] bf16, quantised to fp8 e4m3fn x4 with e8m0 block scales"
    );
    let mut out = Hbm::<f32>::zeros([M, N]);
    let trn3 = mx_matmul::simulate(1, Target::Trn3, &a, &b, &mut out)?;
    let got = out.to_f32_vec()?;
    let err = rel_err(got.iter().map(|&g| g as f64), &want);
    // fp32 sums of 4K = 512 products against f64 ones: within 1e-4 of the largest value (MX
    // itself is about 1e-2 away from the unquantised product).
    let ok = err < 1e-4;
    println!(
        "{} (largest difference from the host MX reference {err:.2e} of the largest value; \
         MX vs the unquantised bf16 product: {:.2e})",
        if ok { "match" } else { "MISMATCH" },
        rel_err(got.iter().map(|&g| g as f64), &exact)
    );
    println!(
        "trn3: modelled time {:.2} us (quantize_mx x2 + nc_matmul_mx), TensorE busy {:.3} us",
        trn3.latency_us(),
        tensor_us(&trn3)
    );
    match mx_matmul::simulate(1, Target::Trn2, &a, &b, &mut out) {
        Ok(_) => {
            println!("trn2: ran, but MX needs NeuronCore-v4");
            return Ok(false);
        }
        Err(e) => println!("trn2: not available ({e})"),
    }
    // The bf16 matmul of the same logical size: at[(c, p, q), i] = a[p, 4i + q] in chunks
    // of K rows (c = q here: chunk q holds the q-th packed value of every row).
    let mut at = vec![0.0f32; 4 * K * M];
    let mut bt = vec![0.0f32; 4 * K * N];
    for p in 0..K {
        for q in 0..4 {
            for i in 0..M {
                at[(q * K + p) * M + i] = av[p * 4 * M + 4 * i + q];
            }
            for j in 0..N {
                bt[(q * K + p) * N + j] = bv[p * 4 * N + 4 * j + q];
            }
        }
    }
    let (ath, bth) = (
        Hbm::from_vec(&[4 * K, M], at)?,
        Hbm::from_vec(&[4 * K, N], bt)?,
    );
    let mut all_ok = ok;
    for target in [Target::Trn2, Target::Trn3] {
        let mut o = Hbm::<f32>::zeros([M, N]);
        let prof = bf16_matmul::simulate(1, target, &ath, &bth, &mut o)?;
        let e = rel_err(o.to_f32_vec()?.iter().map(|&g| g as f64), &exact);
        all_ok &= e < 1e-4;
        println!(
            "{target}: bf16 matmul of the same size (4 x K = 128), modelled time {:.2} us, TensorE busy {:.3} us, {} (difference {e:.2e})",
            prof.latency_us(),
            tensor_us(&prof),
            if e < 1e-4 { "match" } else { "MISMATCH" }
        );
    }
    Ok(all_ok)
}
