//! OCP Microscaling (MX) numerics shared by `quantize_mx` and `nc_matmul_mx`: the bit
//! encodings of the packed element formats (float8_e4m3fn, float8_e5m2, float4_e2m1fn), the
//! float8_e8m0fnu scale, and the scale-partition layout of NeuronCore-v4.
//!
//! Definitions (SDK `nki.isa.quantize_mx` / `nc_matmul_mx`, OCP MX v1.0): a scaling group is
//! 32 values, 8 partitions x 4 elements of one partition row (the 4 values of one packed x4
//! element); its scale is an e8m0 power of two `2^(s - 127)` (`s` = 255 is NaN).

use crate::dtype::DType;

/// Bit layout of a small float format: exponent bits, mantissa bits, exponent bias, and
/// whether the all-ones exponent holds infinities/NaNs (IEEE-like e5m2), only one NaN
/// (`S.1111.111`, OCP e4m3fn) or nothing special (e2m1).
#[derive(Clone, Copy)]
struct Mini {
    ebits: u32,
    mbits: u32,
    bias: i32,
    special: Special,
}

#[derive(Clone, Copy, PartialEq)]
enum Special {
    Ieee,
    OneNan,
    None,
}

const E4M3FN: Mini = Mini {
    ebits: 4,
    mbits: 3,
    bias: 7,
    special: Special::OneNan,
};
const E5M2: Mini = Mini {
    ebits: 5,
    mbits: 2,
    bias: 15,
    special: Special::Ieee,
};
const E2M1: Mini = Mini {
    ebits: 2,
    mbits: 1,
    bias: 1,
    special: Special::None,
};

/// The element format of packed type `x4` and its bits per value (8 or 4).
fn format(x4: DType) -> (Mini, u32) {
    match x4 {
        DType::F8E5M2x4 => (E5M2, 8),
        DType::F4E2M1FNx4 => (E2M1, 4),
        _ => (E4M3FN, 8),
    }
}

impl Mini {
    /// The value of bit pattern `b`.
    fn decode(self, b: u32) -> f32 {
        let sign = if b >> (self.ebits + self.mbits) & 1 == 1 {
            -1.0
        } else {
            1.0
        };
        let e = (b >> self.mbits) & ((1 << self.ebits) - 1);
        let m = b & ((1 << self.mbits) - 1);
        let emax = (1 << self.ebits) - 1;
        match self.special {
            Special::Ieee if e == emax => {
                return if m == 0 {
                    sign * f32::INFINITY
                } else {
                    f32::NAN
                }
            }
            Special::OneNan if e == emax && m == (1 << self.mbits) - 1 => return f32::NAN,
            _ => {}
        }
        let frac = m as f64 / (1u32 << self.mbits) as f64;
        let v = if e == 0 {
            frac * 2f64.powi(1 - self.bias)
        } else {
            (1.0 + frac) * 2f64.powi(e as i32 - self.bias)
        };
        sign * v as f32
    }

    /// The bit pattern of `v`, a value of the format (already rounded to it); NaN gives the
    /// all-ones NaN pattern (e2m1 has no NaN: 0).
    fn encode(self, v: f32) -> u32 {
        let width = 1 + self.ebits + self.mbits;
        if v.is_nan() {
            return if self.special == Special::None {
                0
            } else {
                (1 << (width - 1)) - 1
            };
        }
        let sign = if v.is_sign_negative() {
            1 << (width - 1)
        } else {
            0
        };
        let a = v.abs() as f64;
        if a == 0.0 {
            return sign;
        }
        if a.is_infinite() {
            return sign | (((1 << self.ebits) - 1) << self.mbits);
        }
        let e = (a.log2().floor() as i32).max(1 - self.bias);
        let (field, frac) = if e == 1 - self.bias && a < 2f64.powi(e) {
            (0, a / 2f64.powi(1 - self.bias))
        } else {
            ((e + self.bias) as u32, a / 2f64.powi(e) - 1.0)
        };
        let m = (frac * (1u32 << self.mbits) as f64).round() as u32;
        sign | (field << self.mbits) | m
    }

    /// Rounds `x` to the format (nearest, ties to even; saturating at the largest finite
    /// value; NaN stays NaN).
    fn round(self, x: f32) -> f32 {
        match self.mbits {
            3 => DType::F8E4M3FN.round(x),
            2 => DType::F8E5M2.round(x),
            _ => {
                if x.is_nan() {
                    return x;
                }
                let a = x.abs().min(6.0);
                // e2m1 values: 0, 0.5, 1, 1.5, 2, 3, 4, 6 (quantum 0.5 below 2, 1 up to 4, 2 above).
                let q = if a < 2.0 {
                    0.5
                } else if a < 4.0 {
                    1.0
                } else {
                    2.0
                };
                ((a / q).round_ties_even() * q).min(6.0).copysign(x)
            }
        }
    }
}

/// The bit pattern of the float8_e4m3fn value `v` (NaN: `0x7f` with `v`'s sign).
pub(crate) fn e4m3fn_bits(v: f32) -> u32 {
    let b = E4M3FN.encode(v);
    if v.is_nan() && v.is_sign_negative() {
        b | 0x80
    } else {
        b
    }
}

/// The float8_e4m3fn value of bit pattern `b` (low 8 bits).
pub(crate) fn e4m3fn_value(b: u32) -> f32 {
    E4M3FN.decode(b & 0xff)
}

/// The e8m0 code of the float8_e8m0fnu slot `s` (a power of two, or NaN for code 255).
pub(crate) fn e8m0_code(s: f32) -> u32 {
    if s.is_nan() {
        255
    } else {
        ((s as f64).log2().round() + 127.0) as u32
    }
}

/// The four values packed in the slot `s` of an element of MX type `x4`.
pub(crate) fn unpack(x4: DType, s: f32) -> [f32; 4] {
    let (f, bits) = format(x4);
    let word = x4.int(s) as u32;
    std::array::from_fn(|j| f.decode((word >> (bits * j as u32)) & ((1 << bits) - 1)))
}

/// The slot of the MX type `x4` element packing the four values `v` (each rounded to the
/// element format first).
pub(crate) fn pack(x4: DType, v: [f32; 4]) -> f32 {
    let (f, bits) = format(x4);
    let word = (0..4).fold(0u32, |w, j| {
        w | f.encode(f.round(v[j])) << (bits * j as u32)
    });
    x4.slot_of_int(word as i64)
}

/// The largest power-of-two exponent of a normal value of the element format of `x4`
/// (`emax_elem` of the OCP MX spec: 8 for e4m3fn, 15 for e5m2, 2 for e2m1).
pub(crate) fn emax(x4: DType) -> i32 {
    let (f, _) = format(x4);
    let top = (1 << f.ebits) - 1 - i32::from(f.special == Special::Ieee);
    top - f.bias
}

/// The scale factor `2^(s - 127)` of e8m0 code `s` (NaN for 255).
pub(crate) fn scale_value(s: u32) -> f64 {
    if s >= 255 {
        f64::NAN
    } else {
        2f64.powi(s as i32 - 127)
    }
}

/// The row (within the scale tile) of the scale of partition block `b` (partitions `8b..8b+8`
/// of the data): 4 scale rows per 32-partition quadrant, at the same offsets in each quadrant
/// (SDK `quantize_mx`, "Layout": `32 (b / 4) + b % 4`).
pub(crate) fn scale_row(b: usize) -> usize {
    32 * (b / 4) + b % 4
}

/// The partitions of the scale tile of data spanning `p` partitions: 4 when the data is one
/// quadrant, else `p` (SDK `quantize_mx`, "Tile size").
pub(crate) fn scale_partitions(p: usize) -> usize {
    if p <= 32 {
        4
    } else {
        p
    }
}
