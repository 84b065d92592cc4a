//! Data types: the [`DType`] tag every tile and tensor carries, the [`Element`] trait that links a
//! Rust type to its tag, rounding from the engines' f32 math to each dtype, and NKI's type
//! promotion rules.
//!
//! All values are held in `f32` slots on the host. Every NKI dtype up to 32 bits is exactly
//! representable as an f32 value except `int32`/`uint32` and the 32-bit packed MX types, so
//! those hold their 32-bit pattern in the slot instead ([`DType::holds_bits`]): a copy (DMA, `tensor_copy`,
//! load/store of the same dtype) moves slots untouched and stays exact, the engines' fp32 math
//! reads the value through [`DType::value`] (int32 -> fp32 rounds to nearest even, as the
//! hardware converts), and integer ALU paths read the exact integer through [`DType::int`].

use half::{bf16, f16};
use std::fmt;

/// An NKI data type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[allow(non_camel_case_types)]
pub enum DType {
    /// IEEE single precision.
    F32,
    /// bfloat16 (1 sign, 8 exponent, 7 mantissa bits).
    BF16,
    /// IEEE half precision.
    F16,
    /// fp8 e4m3 (NKI `float8_e4m3`: 1S 4E 3M, bias 7, max 240, with infinities).
    F8E4M3,
    /// fp8 e5m2 (NKI `float8_e5m2`: 1S 5E 2M, bias 15, max 57344).
    F8E5M2,
    /// Signed 8-bit integer.
    I8,
    /// Signed 16-bit integer.
    I16,
    /// Signed 32-bit integer.
    I32,
    /// Unsigned 8-bit integer.
    U8,
    /// Unsigned 16-bit integer.
    U16,
    /// Unsigned 32-bit integer.
    U32,
    /// Boolean, stored as one byte (0 or 1).
    Bool,
    /// OCP fp8 e4m3 (NKI `float8_e4m3fn`: 1S 4E 3M, bias 7, max 448, no infinities; NaN is
    /// `S.1111.111`).
    F8E4M3FN,
    /// The MX scale type (NKI `float8_e8m0fnu`: 8 exponent bits, no sign or mantissa: the
    /// value `2^(e - 127)` for `e` in 0..=254; 255 is NaN).
    F8E8M0,
    /// Four packed float8_e4m3fn values in 32 bits (NKI `float8_e4m3fn_x4`, MX data; value
    /// `j` of an element in bits `8j..8j+8`). The host slot holds the 32-bit pattern.
    F8E4M3FNx4,
    /// Four packed float8_e5m2 values in 32 bits (NKI `float8_e5m2_x4`, MX data; value `j`
    /// in bits `8j..8j+8`). The host slot holds the 32-bit pattern.
    F8E5M2x4,
    /// Four packed float4_e2m1fn values in 16 bits (NKI `float4_e2m1fn_x4`, MX data: 1S 2E
    /// 1M, bias 1, max 6, no inf/NaN; value `j` in bits `4j..4j+4`). The host slot holds the
    /// 16-bit pattern as an integer value.
    F4E2M1FNx4,
    /// TensorFloat-32 (NKI `tfloat32`: 1S 8E 10M in a 32-bit element): fp32's range with a
    /// 10-bit mantissa; a cast rounds to nearest even \[A: the docs give the format only\].
    /// TensorE reads it at the bf16 rate (ARCH guides: "BF16/FP16/TF32" share one figure),
    /// and a matmul pairs it only with float32 or tfloat32.
    TF32,
}

impl DType {
    /// Size of one element in bytes.
    pub const fn size(self) -> usize {
        match self {
            DType::F32
            | DType::TF32
            | DType::I32
            | DType::U32
            | DType::F8E4M3FNx4
            | DType::F8E5M2x4 => 4,
            DType::BF16 | DType::F16 | DType::I16 | DType::U16 | DType::F4E2M1FNx4 => 2,
            DType::F8E4M3
            | DType::F8E5M2
            | DType::I8
            | DType::U8
            | DType::Bool
            | DType::F8E4M3FN
            | DType::F8E8M0 => 1,
        }
    }

    /// NKI's name for the type (`float32`, `bfloat16`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::BF16 => "bfloat16",
            DType::F16 => "float16",
            DType::F8E4M3 => "float8_e4m3",
            DType::F8E5M2 => "float8_e5m2",
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::U8 => "uint8",
            DType::U16 => "uint16",
            DType::U32 => "uint32",
            DType::Bool => "bool",
            DType::F8E4M3FN => "float8_e4m3fn",
            DType::F8E8M0 => "float8_e8m0fnu",
            DType::F8E4M3FNx4 => "float8_e4m3fn_x4",
            DType::F8E5M2x4 => "float8_e5m2_x4",
            DType::F4E2M1FNx4 => "float4_e2m1fn_x4",
            DType::TF32 => "tfloat32",
        }
    }

    /// True for the floating-point types (the packed MX x4 types are not: their elements are
    /// groups of four values).
    pub const fn is_float(self) -> bool {
        matches!(
            self,
            DType::F32
                | DType::TF32
                | DType::BF16
                | DType::F16
                | DType::F8E4M3
                | DType::F8E5M2
                | DType::F8E4M3FN
                | DType::F8E8M0
        )
    }

    /// The element format packed four to an element by an MX x4 type (`float8_e4m3fn_x4` ->
    /// `float8_e4m3fn`, ...; `None` for the other types). The fp4 format has no dtype of its
    /// own: `float4_e2m1fn_x4` maps to itself.
    pub const fn mx_element(self) -> Option<DType> {
        match self {
            DType::F8E4M3FNx4 => Some(DType::F8E4M3FN),
            DType::F8E5M2x4 => Some(DType::F8E5M2),
            DType::F4E2M1FNx4 => Some(DType::F4E2M1FNx4),
            _ => None,
        }
    }

    /// True for the integer types (bool excluded).
    pub const fn is_int(self) -> bool {
        matches!(
            self,
            DType::I8 | DType::I16 | DType::I32 | DType::U8 | DType::U16 | DType::U32
        )
    }

    /// True for fp8 data types (the e8m0 scale type excluded).
    pub const fn is_fp8(self) -> bool {
        matches!(self, DType::F8E4M3 | DType::F8E5M2 | DType::F8E4M3FN)
    }

    /// Rounds an f32 engine result to this dtype (round-to-nearest-even for floats, saturating
    /// round-to-nearest-even for integers, non-zero -> 1 for bool) and returns it as f32.
    #[inline]
    pub fn round(self, x: f32) -> f32 {
        match self {
            DType::F32 => x,
            DType::TF32 => tf32_rne(x),
            DType::BF16 => bf16::from_f32(x).to_f32(),
            DType::F16 => f16::from_f32(x).to_f32(),
            DType::F8E4M3 => round_minifloat(x, 3, 7, 240.0, true),
            DType::F8E5M2 => round_minifloat(x, 2, 15, 57344.0, true),
            // OCP e4m3: no infinities, saturating like NKI's other fp8 casts [A: the docs do
            // not say what a cast overflow gives].
            DType::F8E4M3FN => round_minifloat(x, 3, 7, 448.0, true),
            DType::F8E8M0 => round_e8m0(x),
            // A packed element's value is its bit pattern as an unsigned integer.
            DType::F8E4M3FNx4 | DType::F8E5M2x4 => round_int(x, 0.0, u32::MAX as f32),
            DType::F4E2M1FNx4 => round_int(x, 0.0, u16::MAX as f32),
            DType::I8 => round_int(x, i8::MIN as f32, i8::MAX as f32),
            DType::I16 => round_int(x, i16::MIN as f32, i16::MAX as f32),
            DType::I32 => round_int(x, i32::MIN as f32, i32::MAX as f32),
            DType::U8 => round_int(x, 0.0, u8::MAX as f32),
            DType::U16 => round_int(x, 0.0, u16::MAX as f32),
            DType::U32 => round_int(x, 0.0, u32::MAX as f32),
            DType::Bool => {
                if x != 0.0 && !x.is_nan() {
                    1.0
                } else {
                    0.0
                }
            }
        }
    }

    /// True for the dtypes whose host slot holds the integer's 32-bit pattern rather than its
    /// value (`int32`, `uint32`: their values above 2^24 are not exact f32 values).
    #[inline]
    pub const fn holds_bits(self) -> bool {
        matches!(
            self,
            DType::I32 | DType::U32 | DType::F8E4M3FNx4 | DType::F8E5M2x4
        )
    }

    /// The host slot of engine result `x` in this dtype: `x` rounded to the dtype
    /// ([`round`](Self::round)), stored as its 32-bit pattern for `int32`/`uint32`.
    #[inline]
    pub fn slot(self, x: f32) -> f32 {
        match self {
            DType::I32 => f32::from_bits(self.round(x) as i32 as u32),
            DType::U32 | DType::F8E4M3FNx4 | DType::F8E5M2x4 => {
                f32::from_bits(self.round(x) as u32)
            }
            _ => self.round(x),
        }
    }

    /// The value held in slot `s` as the engines' fp32 sees it (`int32`/`uint32` converted
    /// with round-to-nearest-even, like the hardware's int -> fp32 cast).
    #[inline]
    pub fn value(self, s: f32) -> f32 {
        match self {
            DType::I32 => s.to_bits() as i32 as f32,
            DType::U32 | DType::F8E4M3FNx4 | DType::F8E5M2x4 => s.to_bits() as f32,
            _ => s,
        }
    }

    /// The exact integer held in slot `s` (for float dtypes, the value truncated toward zero).
    #[inline]
    pub fn int(self, s: f32) -> i64 {
        match self {
            DType::I32 => s.to_bits() as i32 as i64,
            DType::U32 | DType::F8E4M3FNx4 | DType::F8E5M2x4 => s.to_bits() as i64,
            _ => s as i64,
        }
    }

    /// The slot of integer `v` in this dtype: exact for `int32`/`uint32` (saturating at their
    /// range, as [`round`](Self::round) does); other dtypes round its value to nearest f32
    /// first, as [`slot`](Self::slot) does.
    #[inline]
    pub fn slot_of_int(self, v: i64) -> f32 {
        match self {
            DType::I32 => f32::from_bits(v.clamp(i32::MIN as i64, i32::MAX as i64) as i32 as u32),
            DType::U32 | DType::F8E4M3FNx4 | DType::F8E5M2x4 => {
                f32::from_bits(v.clamp(0, u32::MAX as i64) as u32)
            }
            _ => self.slot(v as f32),
        }
    }

    /// Turns engine results into slots in place ([`slot`](Self::slot) of each; `rounded` says
    /// they are already representable in the dtype, so only `int32`/`uint32` change).
    pub fn to_slots(self, xs: &mut [f32], rounded: bool) {
        if self.holds_bits() {
            xs.iter_mut().for_each(|x| *x = self.slot(*x));
        } else if !rounded {
            self.round_slice(xs);
        }
    }

    /// Turns slots into values in place ([`value`](Self::value) of each; a no-op unless the
    /// dtype holds bits).
    pub fn to_values(self, xs: &mut [f32]) {
        if self.holds_bits() {
            xs.iter_mut().for_each(|x| *x = self.value(*x));
        }
    }

    /// Converts slots of `self` into slots of `to` in place: untouched when the dtypes are
    /// equal (a bit-exact copy), else through the fp32 value (a cast, as DMA and engine casts
    /// go through fp32).
    ///
    /// A 32-bit MX x4 type and `int32`/`uint32` (or another 32-bit x4 type) convert bit for
    /// bit: a packed element is no number, so its bits are kept.
    pub fn cast_slots(self, to: DType, xs: &mut [f32]) {
        let packed = self.mx_element().is_some() || to.mx_element().is_some();
        if packed && self.holds_bits() && to.holds_bits() {
            return;
        }
        if self != to {
            xs.iter_mut().for_each(|x| *x = to.slot(self.value(*x)));
        }
    }

    /// Rounds every value of a slice in place (a no-op for f32; bf16 takes a vectorised
    /// bit-trick path).
    pub fn round_slice(self, xs: &mut [f32]) {
        match self {
            DType::F32 => {}
            DType::BF16 => xs.iter_mut().for_each(|x| *x = bf16_rne(*x)),
            _ => xs.iter_mut().for_each(|x| *x = self.round(*x)),
        }
    }

    /// NKI's type promotion for a binary operation on two tiles (nki.api.shared "type promotion").
    pub fn promote(a: DType, b: DType) -> DType {
        use DType::*;
        if a == b {
            return a;
        }
        match (a.is_float(), b.is_float()) {
            (true, false) => a,
            (false, true) => b,
            (true, true) => {
                let pair = |x, y| (a == x && b == y) || (a == y && b == x);
                if pair(F16, BF16) || pair(F32, TF32) {
                    F32
                } else if pair(F8E4M3, F8E5M2) {
                    BF16
                } else if a.is_fp8() {
                    b
                } else if b.is_fp8() || a.size() >= b.size() {
                    a
                } else {
                    b
                }
            }
            (false, false) => {
                let a = if a == Bool { U8 } else { a };
                let b = if b == Bool { U8 } else { b };
                if a == b {
                    return a;
                }
                let signed = |t: DType| matches!(t, I8 | I16 | I32);
                if signed(a) == signed(b) {
                    if a.size() >= b.size() {
                        a
                    } else {
                        b
                    }
                } else {
                    let (s, u) = if signed(a) { (a, b) } else { (b, a) };
                    if s.size() > u.size() {
                        s
                    } else {
                        match u.size() {
                            1 => I16,
                            2 => I32,
                            _ => F32,
                        }
                    }
                }
            }
        }
    }

    /// Promotion of a tile dtype with a weak Python-style scalar (float -> fp32, int -> int32).
    pub fn promote_scalar(a: DType, scalar_is_float: bool) -> DType {
        if scalar_is_float {
            if a.is_float() {
                DType::promote(a, DType::F32)
            } else {
                DType::F32
            }
        } else {
            DType::promote(a, DType::I32)
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Rounds a positive value to the nearest power of two `2^e`, `e` in -127..=127 (the
/// float8_e8m0fnu values); zero, negative values and NaN give NaN (e8m0 has no zero and no
/// sign) [A: the docs define the type, not a cast into it; ties of the exponent (the
/// geometric mean of two powers) round up].
fn round_e8m0(x: f32) -> f32 {
    if x.is_nan() || x <= 0.0 {
        return f32::NAN;
    }
    let e = (x as f64).log2().round().clamp(-127.0, 127.0) as i32;
    2f64.powi(e) as f32
}

fn round_int(x: f32, lo: f32, hi: f32) -> f32 {
    if x.is_nan() {
        return 0.0;
    }
    x.round_ties_even().clamp(lo, hi)
}

/// Rounds to a small float format with `mant` mantissa bits and exponent `bias`, saturating at
/// `max` (NKI's fp8 casts saturate), with subnormals, round-to-nearest-even.
fn round_minifloat(x: f32, mant: i32, bias: i32, max: f32, saturate: bool) -> f32 {
    if x.is_nan() || x == 0.0 {
        return x;
    }
    let a = x.abs();
    if a.is_infinite() {
        return if saturate { max.copysign(x) } else { x };
    }
    let min_exp = 1 - bias; // exponent of the smallest normal
    let e = (a.log2().floor() as i32).max(min_exp);
    let quantum = 2f32.powi(e - mant);
    let q = (a / quantum).round_ties_even() * quantum;
    q.min(max).copysign(x)
}

/// A Rust element type with an NKI dtype. Implemented for f32, bf16, f16, [`F8E4M3`], [`F8E4M3FN`],
/// [`F8E5M2`], i8, i16, i32, u8, u16, u32 and bool.
pub trait Element: Copy + Send + Sync + 'static + fmt::Debug {
    /// The dtype tag of this element type.
    const DTYPE: DType;
    /// Converts to the host f32 representation.
    fn to_f32(self) -> f32;
    /// Converts from an f32 value (rounding as the hardware does).
    fn from_f32(x: f32) -> Self;
    /// The host slot holding this value (see [`DType::slot`]): exact for every element type.
    #[inline]
    fn to_slot(self) -> f32 {
        Self::DTYPE.slot(self.to_f32())
    }
    /// The element held in host slot `s` (the inverse of [`to_slot`](Self::to_slot)).
    #[inline]
    fn from_slot(s: f32) -> Self {
        Self::from_f32(s)
    }
}

/// Implements [`Element`] for primitive types converted with `as` (plus any extra methods,
/// e.g. the slot conversions of the 32-bit integers).
macro_rules! impl_element_prim {
    ($($t:ty => $d:ident { $($extra:tt)* }),*) => {$(
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            #[inline]
            fn to_f32(self) -> f32 { self as f32 }
            #[inline]
            fn from_f32(x: f32) -> Self { DType::$d.round(x) as $t }
            $($extra)*
        }
    )*};
}
impl_element_prim!(f32 => F32 {}, i8 => I8 {}, i16 => I16 {}, u8 => U8 {}, u16 => U16 {});
// The 32-bit integers' slots hold their bit pattern.
impl_element_prim!(
    i32 => I32 {
        #[inline]
        fn to_slot(self) -> f32 { f32::from_bits(self as u32) }
        #[inline]
        fn from_slot(s: f32) -> Self { s.to_bits() as i32 }
    },
    u32 => U32 {
        #[inline]
        fn to_slot(self) -> f32 { f32::from_bits(self) }
        #[inline]
        fn from_slot(s: f32) -> Self { s.to_bits() }
    }
);

/// Implements [`Element`] for the `half` float types through their own conversions.
macro_rules! impl_element_half {
    ($($t:ty => $d:ident),*) => {$(
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            #[inline]
            fn to_f32(self) -> f32 {
                <$t>::to_f32(self)
            }
            #[inline]
            fn from_f32(x: f32) -> Self {
                <$t>::from_f32(x)
            }
        }
    )*};
}

impl_element_half!(bf16 => BF16, f16 => F16);

impl Element for bool {
    const DTYPE: DType = DType::Bool;
    #[inline]
    fn to_f32(self) -> f32 {
        if self {
            1.0
        } else {
            0.0
        }
    }
    #[inline]
    fn from_f32(x: f32) -> Self {
        x != 0.0 && !x.is_nan()
    }
}

macro_rules! fp8_type {
    ($name:ident, $d:ident, $doc:literal) => {
        #[doc = $doc]
        #[derive(Clone, Copy, Debug, PartialEq, PartialOrd, Default)]
        pub struct $name(f32);
        impl $name {
            /// Rounds an f32 to this format.
            pub fn from_f32(x: f32) -> Self {
                $name(DType::$d.round(x))
            }
            /// The value as f32 (exact).
            pub fn to_f32(self) -> f32 {
                self.0
            }
        }
        impl Element for $name {
            const DTYPE: DType = DType::$d;
            #[inline]
            fn to_f32(self) -> f32 {
                self.0
            }
            #[inline]
            fn from_f32(x: f32) -> Self {
                $name(DType::$d.round(x))
            }
        }
    };
}
fp8_type!(
    F8E4M3,
    F8E4M3,
    "An fp8 e4m3 value (NKI `float8_e4m3`), held exactly as f32."
);
fp8_type!(
    F8E5M2,
    F8E5M2,
    "An fp8 e5m2 value (NKI `float8_e5m2`), held exactly as f32."
);
fp8_type!(
    F8E4M3FN,
    F8E4M3FN,
    "An OCP fp8 e4m3 value (NKI `float8_e4m3fn`, max 448, no infinities), held exactly as f32."
);

/// bfloat16 round-to-nearest-even of an f32, returned as f32: the same result as
/// `bf16::from_f32(x).to_f32()` (NaNs stay NaN, made quiet), written so loops vectorise.
#[inline(always)]
pub(crate) fn bf16_rne(x: f32) -> f32 {
    let b = x.to_bits();
    let rounded = b.wrapping_add(0x7fff + ((b >> 16) & 1)) & 0xffff_0000;
    let nan = (b & 0x7fff_ffff) > 0x7f80_0000;
    f32::from_bits(if nan {
        (b & 0xffff_0000) | 0x0040_0000
    } else {
        rounded
    })
}

/// tfloat32 round-to-nearest-even of an f32 (the low 13 of fp32's 23 mantissa bits dropped),
/// returned as f32; NaNs stay NaN (made quiet), a carry past the largest finite value gives
/// infinity.
#[inline]
pub(crate) fn tf32_rne(x: f32) -> f32 {
    let b = x.to_bits();
    if (b & 0x7fff_ffff) > 0x7f80_0000 {
        return f32::from_bits((b & 0xffff_e000) | 0x0040_0000);
    }
    f32::from_bits(b.wrapping_add(0xfff + ((b >> 13) & 1)) & 0xffff_e000)
}

/// Copies `src` into `dst` as slots of `dtype` ([`DType::slot`]: rounded, int32/uint32 as
/// bits); a plain copy when `exact`, i.e. `src` already holds slots of `dtype`.
#[inline]
pub(crate) fn copy_round(dtype: DType, exact: bool, dst: &mut [f32], src: &[f32]) {
    if exact || dtype == DType::F32 {
        dst.copy_from_slice(src);
    } else if dtype == DType::BF16 {
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = bf16_rne(s);
        }
    } else {
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = dtype.slot(s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_bf16_rounding_matches_half() {
        let mut s = 0x1234_5678_9abc_def0u64;
        let specials = [
            0.0f32,
            -0.0,
            1.0 + 2f32.powi(-8),
            1.0 + 3.0 * 2f32.powi(-8),
            f32::MAX,
            f32::MIN_POSITIVE,
            1e-40,
            f32::INFINITY,
            f32::NEG_INFINITY,
        ];
        let randoms = (0..100_000).map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            f32::from_bits(s as u32)
        });
        for x in specials.into_iter().chain(randoms) {
            let want = half::bf16::from_f32(x).to_f32();
            let got = bf16_rne(x);
            if want.is_nan() {
                assert!(got.is_nan(), "{x:e}");
            } else {
                assert_eq!(got.to_bits(), want.to_bits(), "{x:e}");
            }
        }
        let mut v = vec![1.0 + 2f32.powi(-8), 3.3];
        DType::BF16.round_slice(&mut v);
        assert_eq!(v, vec![1.0, DType::BF16.round(3.3)]);
    }

    #[test]
    fn bf16_rounds_to_nearest_even() {
        // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even -> 1.
        assert_eq!(DType::BF16.round(1.0 + 2f32.powi(-8)), 1.0);
        assert_eq!(
            DType::BF16.round(1.0 + 3.0 * 2f32.powi(-8)),
            1.0 + 2f32.powi(-6)
        );
    }

    #[test]
    fn fp8_e4m3_grid_and_saturation() {
        assert_eq!(DType::F8E4M3.round(1.0625), 1.0); // tie -> even
        assert_eq!(DType::F8E4M3.round(1.1), 1.125);
        assert_eq!(DType::F8E4M3.round(1000.0), 240.0);
        assert_eq!(DType::F8E4M3.round(-1000.0), -240.0);
        // smallest subnormal 2^-9
        assert_eq!(DType::F8E4M3.round(2f32.powi(-9)), 2f32.powi(-9));
        assert_eq!(DType::F8E5M2.round(3.2), 3.0);
        assert_eq!(DType::F8E5M2.round(1e6), 57344.0);
    }

    #[test]
    fn ints_saturate_and_round_even() {
        assert_eq!(DType::I8.round(300.0), 127.0);
        assert_eq!(DType::U8.round(-3.0), 0.0);
        assert_eq!(DType::I32.round(2.5), 2.0);
        assert_eq!(DType::Bool.round(0.3), 1.0);
    }

    #[test]
    fn promotion_follows_nki_table() {
        use DType::*;
        assert_eq!(DType::promote(F16, BF16), F32);
        assert_eq!(DType::promote(F8E4M3, F8E5M2), BF16);
        assert_eq!(DType::promote(F8E4M3, F16), F16);
        assert_eq!(DType::promote(BF16, F8E5M2), BF16);
        assert_eq!(DType::promote(I8, U8), I16);
        assert_eq!(DType::promote(I8, U16), I32);
        assert_eq!(DType::promote(I32, U32), F32);
        assert_eq!(DType::promote(I16, F16), F16);
        assert_eq!(DType::promote_scalar(I8, false), I32);
        assert_eq!(DType::promote_scalar(F16, true), F32);
    }
}
