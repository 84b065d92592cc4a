//! MX (OCP Microscaling) on trn3: `quantize_mx` and `nc_matmul_mx` against a plain-Rust
//! reference written from the SDK's definitions (groups of 8 partitions x 4 elements, an e8m0
//! block scale "two times larger" than the OCP sample algorithm's, the quadrant layout of the
//! scale tile), with NaN / inf / zero / subnormal / huge groups, fp4 operands, the error rules
//! and the documented costs.

use nki_core::nisa::{Engine, MatmulOpts, Opts};
use nki_core::prelude::*;

mod common;
use common::{hbm, Rng};

/// All 256 values of an fp8 format from its definition: e4m3fn (bias 7, `S.1111.111` NaN, no
/// inf) or e5m2 (bias 15, IEEE-like specials).
fn fp8_table(e4m3fn: bool) -> Vec<f32> {
    let (mbits, bias) = if e4m3fn { (3, 7) } else { (2, 15) };
    (0u32..256)
        .map(|b| {
            let neg = b & 0x80 != 0;
            let e = ((b & 0x7f) >> mbits) as i32;
            let m = b & ((1 << mbits) - 1);
            let top = if e4m3fn { 15 } else { 31 };
            let v = if e4m3fn && e == top && m == 7 {
                f32::NAN
            } else if !e4m3fn && e == top {
                if m == 0 {
                    f32::INFINITY
                } else {
                    f32::NAN
                }
            } else if e == 0 {
                m as f32 / (1 << mbits) as f32 * 2f32.powi(1 - bias)
            } else {
                (1.0 + m as f32 / (1 << mbits) as f32) * 2f32.powi(e - bias)
            };
            if neg {
                -v
            } else {
                v
            }
        })
        .collect()
}

/// The code of the value nearest `x` among the finite codes of `x`'s sign (ties: the even
/// code, i.e. the even mantissa).
fn nearest(table: &[f32], x: f32) -> u32 {
    let sign = if x.is_sign_negative() { 0x80 } else { 0 };
    let mut best = (f64::INFINITY, 0u32);
    for c in sign..sign + 0x80 {
        let v = table[c as usize];
        if !v.is_finite() {
            continue;
        }
        let d = (v as f64 - x as f64).abs();
        if d < best.0 || (d == best.0 && c % 2 == 0) {
            best = (d, c);
        }
    }
    best.1
}

/// Reference `quantize_mx` of row-major `[p, f]` values: packed words `[p, f/4]` and scale
/// codes `[p/8, f/4]`.
fn reference_quantize(v: &[f32], p: usize, f: usize, e4m3fn: bool) -> (Vec<u32>, Vec<u32>) {
    let table = fp8_table(e4m3fn);
    let emax = if e4m3fn { 8 } else { 15 };
    let g = f / 4;
    let (mut words, mut codes) = (vec![0u32; p * g], vec![0u32; p / 8 * g]);
    for b in 0..p / 8 {
        for c in 0..g {
            let cells: Vec<(usize, usize)> = (8 * b..8 * b + 8)
                .flat_map(|r| (0..4).map(move |j| (r, 4 * c + j)))
                .collect();
            let special = cells.iter().any(|&(r, k)| !v[r * f + k].is_finite());
            let e = cells
                .iter()
                .map(|&(r, k)| ((v[r * f + k].to_bits() >> 23) & 0xff) as i32)
                .max()
                .unwrap();
            let code = if special {
                255
            } else {
                (e - emax + 1).clamp(0, 254) as u32
            };
            codes[b * g + c] = code;
            for &(r, k) in &cells {
                let byte = if special {
                    0x7f
                } else {
                    let scaled = v[r * f + k] as f64 / 2f64.powi(code as i32 - 127);
                    nearest(&table, scaled as f32)
                };
                words[r * g + c] |= byte << (8 * (k % 4));
            }
        }
    }
    (words, codes)
}

/// Runs `quantize_mx` on trn3 over the bf16-rounded `[p, f]` values `v` into `x4`; returns the
/// packed words and the whole scale tile (initialised to 7: rows the instruction does not
/// write keep it).
fn run_quantize(v: &[f32], p: usize, f: usize, x4: DType) -> (Vec<u32>, Vec<u8>) {
    let sp = if p == 32 { 4 } else { p };
    let src = hbm(&[p, f], v.to_vec());
    let mut words = Hbm::<u32>::zeros([p, f / 4]);
    let mut scales = Hbm::<u8>::zeros([sp, f / 4]);
    {
        let (ow, os) = (words.as_output(), scales.as_output());
        Launch::new(1)
            .target(Target::Trn3)
            .run(|| {
                let x = nl::load_as(&src, DType::BF16);
                let q = nl::ndarray(&[p, f / 4], x4, MemKind::Sbuf);
                let sc = nl::ndarray(&[sp, f / 4], DType::U8, MemKind::Sbuf);
                nisa::memset(&sc, 7.0, None);
                nisa::quantize_mx(&q, &x, &sc, None);
                nl::store(&ow, &q);
                nl::store(&os, &sc);
            })
            .unwrap();
    }
    (words.to_vec().unwrap(), scales.to_vec().unwrap())
}

#[test]
fn quantize_mx_matches_the_definition_with_edge_groups() {
    let (p, f) = (64, 32);
    let g = f / 4;
    let mut rng = Rng(71);
    let mut v: Vec<f32> = (0..p * f)
        .map(|_| {
            let m = rng.uniform() * 2.0 - 1.0;
            let e = rng.ints(1, -6, 12)[0] as i32;
            m * 2f32.powi(e)
        })
        .collect();
    let mut group = |b: usize, c: usize, vals: &dyn Fn(usize) -> f32| {
        for (i, r) in (8 * b..8 * b + 8).enumerate() {
            for j in 0..4 {
                v[r * f + 4 * c + j] = vals(4 * i + j);
            }
        }
    };
    // All zeros, with negative zeros: scale code 0, values +-0.
    group(0, 0, &|i| if i % 2 == 0 { 0.0 } else { -0.0 });
    // One NaN / one infinity: the NaN scale and NaN elements.
    group(1, 1, &|i| if i == 5 { f32::NAN } else { i as f32 });
    group(2, 2, &|i| if i == 31 { f32::NEG_INFINITY } else { 1.5 });
    // Near the bf16 maximum next to tiny values (which underflow to zero).
    group(3, 3, &|i| if i == 0 { 3.0e38 } else { 1.0e-3 * i as f32 });
    // bf16 subnormals: exponent field 0, scale code clamped to 0.
    group(4, 4, &|i| i as f32 * 1.0e-40);
    // The largest value of each group lands near the top of the format without saturating.
    group(5, 5, &|i| if i == 7 { -511.0 } else { 448.0 + i as f32 });
    // Ties between fp8 neighbours.
    group(6, 6, &|i| 1.0 + i as f32 / 16.0);
    let v: Vec<f32> = v.into_iter().map(common::bf).collect();
    for (x4, e4m3fn) in [(DType::F8E4M3FNx4, true), (DType::F8E5M2x4, false)] {
        let (words, scales) = run_quantize(&v, p, f, x4);
        let (want_words, want_codes) = reference_quantize(&v, p, f, e4m3fn);
        for (i, (&got, &want)) in words.iter().zip(&want_words).enumerate() {
            assert_eq!(got, want, "{x4}: word [{}, {}]", i / g, i % g);
        }
        for r in 0..p {
            for c in 0..g {
                // Block b's scales sit on row 32 (b / 4) + b % 4; the other rows keep 7.
                let (q, o) = (r / 32, r % 32);
                let want = if o < 4 {
                    want_codes[(4 * q + o) * g + c] as u8
                } else {
                    7
                };
                assert_eq!(scales[r * g + c], want, "{x4}: scale row {r}, column {c}");
            }
        }
        assert_eq!(want_codes[0], 0, "an all-zero group has scale code 0");
        assert_eq!(want_codes[g + 1], 255, "a NaN group has the NaN scale");
    }
}

#[test]
fn one_quadrant_scales_take_four_partitions() {
    let (p, f) = (32, 8);
    let v: Vec<f32> = Rng(5)
        .vec(p * f, -3.0, 3.0)
        .into_iter()
        .map(common::bf)
        .collect();
    let (words, scales) = run_quantize(&v, p, f, DType::F8E4M3FNx4);
    let (want_words, want_codes) = reference_quantize(&v, p, f, true);
    assert_eq!(words, want_words);
    let want: Vec<u8> = want_codes.iter().map(|&c| c as u8).collect();
    assert_eq!(scales, want);
}

/// Quantises `[k, 4 m]` and `[k, 4 n]` integer inputs on trn3, multiplies them with
/// `nc_matmul_mx` (twice, accumulating, when `twice`) into a `dst_dtype` PSUM tile and returns
/// the `[m, n]` result.
fn mx_matmul(a: &[f32], b: &[f32], (k, m, n): (usize, usize, usize), twice: bool) -> Vec<f32> {
    let (ah, bh) = (hbm(&[k, 4 * m], a.to_vec()), hbm(&[k, 4 * n], b.to_vec()));
    let mut out = Hbm::<f32>::zeros([m, n]);
    {
        let o = out.as_output();
        Launch::new(1)
            .target(Target::Trn3)
            .run(|| {
                let sp = if k == 32 { 4 } else { k };
                let x = nl::load_as(&ah, DType::BF16);
                let y = nl::load_as(&bh, DType::BF16);
                let (qs, qm) = (
                    nl::ndarray(&[k, m], DType::F8E4M3FNx4, MemKind::Sbuf),
                    nl::ndarray(&[k, n], DType::F8E5M2x4, MemKind::Sbuf),
                );
                let ss = nl::ndarray(&[sp, m], DType::U8, MemKind::Sbuf);
                let ms = nl::ndarray(&[sp, n], DType::F8E8M0, MemKind::Sbuf);
                nisa::quantize_mx(&qs, &x, &ss, None);
                nisa::quantize_mx(&qm, &y, &ms, None);
                let ps = nl::ndarray(&[m, n], DType::F32, MemKind::Psum);
                nisa::nc_matmul_mx(&ps, &qs, &qm, &ss, &ms, None);
                if twice {
                    nisa::nc_matmul_mx(&ps, &qs, &qm, &ss, &ms, MatmulOpts::new().accumulate(true));
                }
                let sb = nl::ndarray(&[m, n], DType::F32, MemKind::Sbuf);
                nisa::tensor_copy(&sb, &ps, None);
                nl::store(&o, &sb);
            })
            .unwrap();
    }
    out.to_vec().unwrap()
}

#[test]
fn nc_matmul_mx_contracts_partitions_and_packed_values() {
    // Integers in [-8, 8] quantise exactly (at most 3 significant bits) in both formats, and
    // every sum is exact: the result must equal the integer matmul.
    let (k, m, n) = (64, 16, 40);
    let mut rng = Rng(19);
    let a = rng.int_f32s(k * 4 * m, -8, 8);
    let b = rng.int_f32s(k * 4 * n, -8, 8);
    for twice in [false, true] {
        let got = mx_matmul(&a, &b, (k, m, n), twice);
        for i in 0..m {
            for j in 0..n {
                let mut want = 0.0f32;
                for p in 0..k {
                    for q in 0..4 {
                        want += a[p * 4 * m + 4 * i + q] * b[p * 4 * n + 4 * j + q];
                    }
                }
                let want = if twice { 2.0 * want } else { want };
                assert_eq!(
                    got[i * n + j],
                    want,
                    "[{i}, {j}] (accumulated twice: {twice})"
                );
            }
        }
    }
}

#[test]
fn nc_matmul_mx_reads_fp4_nibbles_and_applies_scales() {
    // fp4 e2m1 operands loaded as 16-bit words (value j in bits 4j..4j+4), one quadrant, scale
    // codes around 127 and one NaN scale column.
    const FP4: [f32; 16] = [
        0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0,
    ];
    let (k, m, n) = (32, 2, 3);
    let mut rng = Rng(23);
    let sw: Vec<u16> = rng
        .ints(k * m, 0, 0xffff)
        .into_iter()
        .map(|x| x as u16)
        .collect();
    let mw: Vec<u16> = rng
        .ints(k * n, 0, 0xffff)
        .into_iter()
        .map(|x| x as u16)
        .collect();
    let sc: Vec<u8> = rng
        .ints(4 * m, 120, 134)
        .into_iter()
        .map(|x| x as u8)
        .collect();
    let mut mc: Vec<u8> = rng
        .ints(4 * n, 120, 134)
        .into_iter()
        .map(|x| x as u8)
        .collect();
    mc[2 * n + 2] = 255; // block 2 of moving column 2: NaN
    let (swh, mwh) = (
        Hbm::from_vec(&[k, m], sw.clone()).unwrap(),
        Hbm::from_vec(&[k, n], mw.clone()).unwrap(),
    );
    let (sch, mch) = (
        Hbm::from_vec(&[4, m], sc.clone()).unwrap(),
        Hbm::from_vec(&[4, n], mc.clone()).unwrap(),
    );
    let mut out = Hbm::<f32>::zeros([m, n]);
    {
        let o = out.as_output();
        Launch::new(1)
            .target(Target::Trn3)
            .run(|| {
                let s = nl::load_as(&swh, DType::F4E2M1FNx4);
                let mv = nl::load_as(&mwh, DType::F4E2M1FNx4);
                let (ss, ms) = (nl::load(&sch), nl::load(&mch));
                let ps = nl::ndarray(&[m, n], DType::F32, MemKind::Psum);
                nisa::nc_matmul_mx(&ps, &s, &mv, &ss, &ms, None);
                let sb = nl::ndarray(&[m, n], DType::F32, MemKind::Sbuf);
                nisa::tensor_copy(&sb, &ps, None);
                nl::store(&o, &sb);
            })
            .unwrap();
    }
    let got = out.to_vec().unwrap();
    let val = |w: u16, q: usize, code: u8| {
        FP4[((w >> (4 * q)) & 0xf) as usize] as f64 * 2f64.powi(code as i32 - 127)
    };
    let mut want = vec![0.0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut acc = 0.0f64;
            for p in 0..k {
                for q in 0..4 {
                    let (cs, cm) = (sc[p / 8 * m + i], mc[p / 8 * n + j]);
                    acc += if cm == 255 {
                        f64::NAN
                    } else {
                        val(sw[p * m + i], q, cs) * val(mw[p * n + j], q, cm)
                    };
                }
            }
            want[i * n + j] = acc as f32;
        }
    }
    common::assert_close(&got, &want, 1e-6, 1e-6, "fp4 nc_matmul_mx");
    assert!(
        got[2].is_nan() && got[n + 2].is_nan(),
        "the NaN scale reaches column 2"
    );
}

#[test]
fn mx_rules_are_errors() {
    let trn = |target: Target, body: &(dyn Fn() + Sync)| {
        Launch::new(1)
            .target(target)
            .run(body)
            .expect_err("must fail")
    };
    // Not on trn2.
    let e = trn(Target::Trn2, &|| {
        let x = nl::ndarray(&[32, 8], DType::BF16, MemKind::Sbuf);
        nisa::memset(&x, 1.0, None);
        let q = nl::ndarray(&[32, 2], DType::F8E4M3FNx4, MemKind::Sbuf);
        let s = nl::ndarray(&[4, 2], DType::U8, MemKind::Sbuf);
        nisa::quantize_mx(&q, &x, &s, None);
    });
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.to_string().contains("NeuronCore-v4"), "{e}");
    // An fp32 source, a scale tile of the wrong height, 48 partitions, a bf16 matmul operand.
    let cases: [(ErrorKind, &str, &(dyn Fn() + Sync)); 4] = [
        (ErrorKind::DType, "bfloat16 or float16", &|| {
            let x = nl::ndarray(&[32, 8], DType::F32, MemKind::Sbuf);
            let q = nl::ndarray(&[32, 2], DType::F8E4M3FNx4, MemKind::Sbuf);
            let s = nl::ndarray(&[4, 2], DType::U8, MemKind::Sbuf);
            nisa::quantize_mx(&q, &x, &s, None);
        }),
        (ErrorKind::ShapeMismatch, "dst_scale", &|| {
            let x = nl::ndarray(&[64, 8], DType::BF16, MemKind::Sbuf);
            let q = nl::ndarray(&[64, 2], DType::F8E4M3FNx4, MemKind::Sbuf);
            let s = nl::ndarray(&[8, 2], DType::U8, MemKind::Sbuf);
            nisa::quantize_mx(&q, &x, &s, None);
        }),
        (ErrorKind::ShapeMismatch, "multiple of 32", &|| {
            let x = nl::ndarray(&[48, 8], DType::BF16, MemKind::Sbuf);
            let q = nl::ndarray(&[48, 2], DType::F8E4M3FNx4, MemKind::Sbuf);
            let s = nl::ndarray(&[48, 2], DType::U8, MemKind::Sbuf);
            nisa::quantize_mx(&q, &x, &s, None);
        }),
        (ErrorKind::DType, "moving", &|| {
            let s = nl::ndarray(&[32, 4], DType::F8E4M3FNx4, MemKind::Sbuf);
            let mv = nl::ndarray(&[32, 4], DType::BF16, MemKind::Sbuf);
            let sc = nl::ndarray(&[4, 4], DType::U8, MemKind::Sbuf);
            let ps = nl::ndarray(&[4, 4], DType::F32, MemKind::Psum);
            nisa::nc_matmul_mx(&ps, &s, &mv, &sc, &sc, None);
        }),
    ];
    for (kind, needle, body) in cases {
        let e = trn(Target::Trn3, body);
        assert_eq!(e.kind(), kind, "{e}");
        assert!(e.to_string().contains(needle), "{needle}: {e}");
    }
}

/// Busy time (ns) of `engine` in an estimate-mode trn3 run of `body`.
fn busy(engine: &str, body: &(dyn Fn() + Sync)) -> f64 {
    let rep = Launch::new(1)
        .target(Target::Trn3)
        .mode(Mode::Estimate)
        .run(body)
        .unwrap();
    let p = rep.profile.expect("estimate profile");
    p.engine(engine).map_or(0.0, |e| e.active_ns)
}

#[test]
fn mx_costs_follow_the_documented_rates() {
    // nc_matmul_mx: the TensorE time of a bf16 matmul of the same M, N (4x the contraction).
    let mx = busy("TensorE", &|| {
        let s = nl::ndarray(&[128, 128], DType::F8E4M3FNx4, MemKind::Sbuf);
        let mv = nl::ndarray(&[128, 512], DType::F8E4M3FNx4, MemKind::Sbuf);
        let (ss, ms) = (
            nl::ndarray(&[128, 128], DType::U8, MemKind::Sbuf),
            nl::ndarray(&[128, 512], DType::U8, MemKind::Sbuf),
        );
        for t in [&s, &mv, &ss, &ms] {
            nisa::memset(t, 0.0, Opts::new().engine(Engine::GpSimd));
        }
        let ps = nl::ndarray(&[128, 512], DType::F32, MemKind::Psum);
        for _ in 0..4 {
            nisa::nc_matmul_mx(&ps, &s, &mv, &ss, &ms, None);
        }
    });
    let bf = busy("TensorE", &|| {
        let s = nl::ndarray(&[128, 128], DType::BF16, MemKind::Sbuf);
        let mv = nl::ndarray(&[128, 512], DType::BF16, MemKind::Sbuf);
        for t in [&s, &mv] {
            nisa::memset(t, 0.0, Opts::new().engine(Engine::GpSimd));
        }
        let ps = nl::ndarray(&[128, 512], DType::F32, MemKind::Psum);
        for _ in 0..4 {
            nisa::nc_matmul(&ps, &s, &mv, None);
        }
    });
    assert!(mx > 0.0 && (mx - bf).abs() < 1e-6, "mx {mx} vs bf16 {bf}");
    // quantize_mx: 4 elements per partition per VectorE cycle.
    let q = |f: usize| {
        busy("VectorE", &move || {
            let x = nl::ndarray(&[128, f], DType::BF16, MemKind::Sbuf);
            nisa::memset(&x, 1.0, Opts::new().engine(Engine::GpSimd));
            let d = nl::ndarray(&[128, f / 4], DType::F8E4M3FNx4, MemKind::Sbuf);
            let s = nl::ndarray(&[128, f / 4], DType::U8, MemKind::Sbuf);
            nisa::quantize_mx(&d, &x, &s, None);
        })
    };
    let per_2048 = q(4096) - q(2048);
    let want = 2048.0 / 4.0 / Target::Trn3.spec().vector_ghz;
    assert!((per_2048 - want).abs() < 1e-6, "{per_2048} vs {want} ns");
}
