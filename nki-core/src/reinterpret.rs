//! Reinterpreting the bytes of an on-chip tensor as another dtype: NKI 0.7's
//! `t.ap(pattern, offset, dtype=...)` (and `view(dtype)`), where the pattern and the offset
//! count elements of the chosen dtype over the same bytes.
//!
//! Host slots hold values ([`DType`] docs), so a reinterpreting view goes through the bit
//! patterns: each element of the view is the bytes `[e * size, (e + 1) * size)` of the
//! storage, `e` its flat index in elements of the view's dtype, read from (or written into)
//! the storage elements that hold them. Bytes are little-endian within an element (an int32
//! seen as two bfloat16s: the low half is element `2k`, the high half `2k + 1`), as on the
//! host and in NumPy's `view`. Floats keep their exact bits (NaN payloads of fp32 and bf16
//! included); fp8 follows the IEEE-style layouts of [`DType::F8E4M3`] and [`DType::F8E5M2`]
//! (all-ones exponent for infinities and NaN).

use crate::access::Ap;
use crate::dtype::DType;

/// The bit pattern (in the low `size * 8` bits) of slot `s` of `dtype`.
pub(crate) fn bits(dtype: DType, s: f32) -> u32 {
    match dtype {
        // The 32-bit MX x4 slots hold their pattern too.
        DType::F32
        | DType::TF32
        | DType::I32
        | DType::U32
        | DType::F8E4M3FNx4
        | DType::F8E5M2x4 => s.to_bits(),
        DType::F8E4M3FN => crate::mx::e4m3fn_bits(s),
        DType::F8E8M0 => crate::mx::e8m0_code(s),
        // A bf16 slot is an f32 whose low 16 bits are zero.
        DType::BF16 => s.to_bits() >> 16,
        DType::F16 => half::f16::from_f32(s).to_bits() as u32,
        DType::F8E4M3 => minifloat_bits(s, 3, 7),
        DType::F8E5M2 => minifloat_bits(s, 2, 15),
        DType::I8 => s as i8 as u8 as u32,
        DType::I16 => s as i16 as u16 as u32,
        DType::U8 | DType::Bool => s as u8 as u32,
        DType::U16 | DType::F4E2M1FNx4 => s as u16 as u32,
    }
}

/// The slot of `dtype` whose bit pattern is the low `size * 8` bits of `b`.
pub(crate) fn from_bits(dtype: DType, b: u32) -> f32 {
    match dtype {
        DType::F32 | DType::I32 | DType::U32 | DType::F8E4M3FNx4 | DType::F8E5M2x4 => {
            f32::from_bits(b)
        }
        // The low 13 bits are no part of a tfloat32 [A: dropped].
        DType::TF32 => f32::from_bits(b & 0xffff_e000),
        DType::F8E4M3FN => crate::mx::e4m3fn_value(b),
        DType::F8E8M0 => crate::mx::scale_value(b & 0xff) as f32,
        DType::BF16 => f32::from_bits((b & 0xffff) << 16),
        DType::F16 => half::f16::from_bits(b as u16).to_f32(),
        DType::F8E4M3 => minifloat_value(b as u8, 3, 7),
        DType::F8E5M2 => minifloat_value(b as u8, 2, 15),
        DType::I8 => b as u8 as i8 as f32,
        DType::I16 => b as u16 as i16 as f32,
        DType::U8 => (b & 0xff) as f32,
        DType::U16 | DType::F4E2M1FNx4 => (b & 0xffff) as f32,
        // Any non-zero byte reads as true.
        DType::Bool => ((b & 0xff) != 0) as u8 as f32,
    }
}

/// The 8-bit pattern of `x`, a value of the fp8 format with `mant` mantissa bits and
/// exponent bias `bias` (exactly representable in it, as slots are).
fn minifloat_bits(x: f32, mant: u32, bias: i32) -> u32 {
    let exp_bits = 7 - mant;
    let emax = (1u32 << exp_bits) - 1;
    let sign = (x.is_sign_negative() as u32) << 7;
    if x.is_nan() {
        return sign | (emax << mant) | 1;
    }
    let a = x.abs();
    if a.is_infinite() {
        return sign | (emax << mant);
    }
    if a == 0.0 {
        return sign;
    }
    let e = ((a.to_bits() >> 23) & 0xff) as i32 - 127;
    if e + bias >= 1 {
        let m = (a.to_bits() & 0x7f_ffff) >> (23 - mant);
        sign | (((e + bias) as u32) << mant) | m
    } else {
        // Subnormal: a = m * 2^(1 - bias - mant).
        let m = (a / 2f32.powi(1 - bias - mant as i32)) as u32;
        sign | m
    }
}

/// The value of the fp8 pattern `b` (see [`minifloat_bits`]).
fn minifloat_value(b: u8, mant: u32, bias: i32) -> f32 {
    let exp_bits = 7 - mant;
    let emax = (1u32 << exp_bits) - 1;
    let sign = if b & 0x80 != 0 { -1.0 } else { 1.0 };
    let e = ((b as u32) >> mant) & emax;
    let m = (b as u32) & ((1 << mant) - 1);
    let mag = if e == emax {
        if m == 0 {
            f32::INFINITY
        } else {
            f32::NAN
        }
    } else if e == 0 {
        m as f32 * 2f32.powi(1 - bias - mant as i32)
    } else {
        (1.0 + m as f32 / (1u32 << mant) as f32) * 2f32.powi(e as i32 - bias)
    };
    sign * mag
}

/// Mask of the low `n` bytes.
fn mask(n: usize) -> u32 {
    if n >= 4 {
        u32::MAX
    } else {
        (1u32 << (8 * n)) - 1
    }
}

/// Calls `f` with the flat index (in elements of the view's dtype) of every element of `ap`,
/// in row-major order.
fn each(ap: &Ap, mut f: impl FnMut(usize)) {
    let s = ap.inner_stride();
    ap.for_each_row(|off, n| {
        for j in 0..n {
            f((off as isize + j as isize * s) as usize);
        }
    });
}

/// Appends the elements of `ap` (in `view` dtype elements over the bytes of `data`, slots of
/// `stored`) to `out`, as slots of `view`.
pub(crate) fn read(data: &[f32], stored: DType, view: DType, ap: &Ap, out: &mut Vec<f32>) {
    let (ts, vs) = (stored.size(), view.size());
    each(ap, |e| {
        let byte = e * vs;
        let b = if vs <= ts {
            (bits(stored, data[byte / ts]) >> ((byte % ts) * 8)) & mask(vs)
        } else {
            (0..vs / ts).fold(0u32, |b, j| {
                b | (bits(stored, data[byte / ts + j]) & mask(ts)) << (j * ts * 8)
            })
        };
        out.push(from_bits(view, b));
    });
}

/// Writes `vals` (slots of `view`, row-major over `ap`) into the bytes of `data` (slots of
/// `stored`), keeping the bytes of each storage element the view does not cover.
pub(crate) fn write(data: &mut [f32], stored: DType, view: DType, ap: &Ap, vals: &[f32]) {
    let (ts, vs) = (stored.size(), view.size());
    let mut k = 0;
    each(ap, |e| {
        let b = bits(view, vals[k]) & mask(vs);
        k += 1;
        let byte = e * vs;
        if vs <= ts {
            let i = byte / ts;
            let sh = (byte % ts) * 8;
            let old = bits(stored, data[i]) & mask(ts);
            data[i] = from_bits(stored, (old & !(mask(vs) << sh)) | (b << sh));
        } else {
            for j in 0..vs / ts {
                data[byte / ts + j] = from_bits(stored, (b >> (j * ts * 8)) & mask(ts));
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::Shape;

    const ALL: [DType; 15] = [
        DType::F32,
        DType::BF16,
        DType::F16,
        DType::F8E4M3,
        DType::F8E5M2,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::Bool,
        DType::F8E4M3FN,
        DType::F8E8M0,
        DType::F4E2M1FNx4,
    ];

    #[test]
    fn every_bit_pattern_of_the_small_types_round_trips() {
        for d in ALL
            .into_iter()
            .filter(|d| d.size() <= 2 && *d != DType::Bool)
        {
            for b in 0..(1u32 << (8 * d.size())) {
                let s = from_bits(d, b);
                if s.is_nan() {
                    continue; // NaN patterns other than the canonical one need not survive
                }
                assert_eq!(bits(d, s), b, "{d} pattern {b:#x} (value {s})");
                // The slot is a value of the dtype (rounding leaves it as it is), except the
                // fp8 infinity patterns: they read as infinities, which fp8 casts saturate.
                if s.is_finite() || !d.is_fp8() {
                    assert_eq!(d.round(s).to_bits(), s.to_bits(), "{d} {b:#x}");
                }
            }
        }
    }

    #[test]
    fn fp8_patterns_match_their_formats() {
        // e4m3: 0x38 = 1.0, 0x77 = 240 (largest normal), 0x01 = 2^-9, 0x78 = inf.
        assert_eq!(from_bits(DType::F8E4M3, 0x38), 1.0);
        assert_eq!(from_bits(DType::F8E4M3, 0x77), 240.0);
        assert_eq!(from_bits(DType::F8E4M3, 0x01), 2f32.powi(-9));
        assert_eq!(from_bits(DType::F8E4M3, 0xf8), f32::NEG_INFINITY);
        // e5m2: 0x3c = 1.0, 0x7b = 57344, 0x01 = 2^-16.
        assert_eq!(from_bits(DType::F8E5M2, 0x3c), 1.0);
        assert_eq!(from_bits(DType::F8E5M2, 0x7b), 57344.0);
        assert_eq!(from_bits(DType::F8E5M2, 0x01), 2f32.powi(-16));
    }

    #[test]
    fn int32_read_as_bf16_halves_and_written_back() {
        // One int32 0x3f80_4000: low half 0x4000 (bf16 2.0), high half 0x3f80 (bf16 1.0).
        let mut data = vec![f32::from_bits(0x3f80_4000)];
        let ap = Ap::contiguous(Shape::new(&[1, 2]).unwrap());
        let mut out = Vec::new();
        read(&data, DType::I32, DType::BF16, &ap, &mut out);
        assert_eq!(out, vec![2.0, 1.0]);
        write(&mut data, DType::I32, DType::BF16, &ap, &[-2.0, 0.5]);
        assert_eq!(data[0].to_bits(), 0x3f00_c000);
        // Two uint8s seen as one uint16 (little-endian), then one byte rewritten.
        let mut bytes = vec![0x34 as f32, 0x12 as f32];
        let one = Ap::contiguous(Shape::new(&[1, 1]).unwrap());
        let mut out = Vec::new();
        read(&bytes, DType::U8, DType::U16, &one, &mut out);
        assert_eq!(out, vec![0x1234 as f32]);
        write(&mut bytes, DType::U8, DType::U16, &one, &[0xabcd as f32]);
        assert_eq!(bytes, vec![0xcd as f32, 0xab as f32]);
    }
}
