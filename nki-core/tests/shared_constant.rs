//! `nl.shared_constant(constant, dtype)` (NKI 0.7: "create a new tensor filled with the data
//! specified by data array"): an HBM tensor made inside a kernel from host values, converted
//! to its dtype (bf16: round to nearest even, checked against the `half` crate's conversion),
//! read by a DMA that costs what the same DMA from a kernel input costs.

use half::bf16;
use nki_core::prelude::*;

const FILE: &str = file!();

/// Host values with the edge cases of a bf16 conversion: NaN, infinities, -0.0, a subnormal,
/// a tie (1 + 2^-8 rounds to even: 1.0), a value just above it, the f32 maximum.
fn values() -> Vec<f32> {
    let mut v = vec![
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        -0.0,
        1e-40,
        1.0 + 1.0 / 256.0,
        1.0 + 3.0 / 512.0,
        f32::MAX,
    ];
    v.extend((0..24).map(|i| i as f32 * 0.37 - 4.0));
    v
}

/// Runs a kernel that DMAs a `[4, 8]` tensor (the constant, or `input` when given) into SBUF
/// and out to an f32 output; returns the output and the profile's instruction counts and
/// latency (simulate mode).
fn run(dtype: DType, input: Option<&Hbm<f32>>) -> (Vec<f32>, String, f64) {
    let vals = values();
    let mut out = Hbm::<f32>::zeros([4, 8]);
    let report = {
        let o = out.as_output();
        Launch::new(1)
            .target(Target::Trn2)
            .mode(Mode::Simulate)
            .run(|| {
                let t = nl::ndarray(&[4, 8], dtype, nl::sbuf);
                match input {
                    Some(h) => nisa::dma_copy(&t, h.view(), None),
                    None => {
                        let c = nl::shared_constant(&[4, 8], &vals, dtype);
                        assert_eq!(c.shape(), &[4, 8]);
                        assert_eq!(c.dtype(), dtype);
                        nisa::dma_copy(&t, &c, None);
                    }
                }
                let f = nl::ndarray(&[4, 8], DType::F32, nl::sbuf);
                nisa::tensor_copy(&f, &t, None);
                nisa::dma_copy(o.view(), &f, None);
            })
            .unwrap()
    };
    let p = report.profile.expect("a profile");
    (
        out.to_vec().unwrap(),
        format!("{:?}", p.instruction_counts),
        p.latency_ns,
    )
}

#[test]
fn a_constant_holds_its_values_in_its_dtype() {
    let (got, _, _) = run(DType::F32, None);
    let want = values();
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(
            g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
            "f32[{i}]: {g} vs {w}"
        );
    }
    let (got, _, _) = run(DType::BF16, None);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let w = bf16::from_f32(*w).to_f32();
        assert!(
            g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
            "bf16[{i}]: {g} vs {w}"
        );
    }
}

#[test]
fn a_constant_is_read_like_an_hbm_input() {
    let input = Hbm::<f32>::from_vec(&[4, 8], values()).unwrap();
    let (_, counts_c, latency_c) = run(DType::F32, None);
    let (_, counts_i, latency_i) = run(DType::F32, Some(&input));
    assert_eq!(counts_c, counts_i);
    assert_eq!(latency_c, latency_i);
}

#[test]
fn a_constant_of_the_wrong_length_is_an_error() {
    let e = Launch::new(1)
        .run(|| {
            let _ = nl::shared_constant(&[4, 8], &[1.0; 31], DType::F32);
        })
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ShapeMismatch, "{e}");
    assert!(e.to_string().contains("nl.shared_constant"), "{e}");
    assert!(e.to_string().contains("31 values"), "{e}");
    assert_eq!(e.location().unwrap().file, FILE);
}
