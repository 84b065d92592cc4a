//! Helpers shared by the integration tests (`mod common;`): a deterministic input generator,
//! one-instance kernel runners and NumPy-style closeness assertions.

// Each test crate uses a different subset of these helpers.
#![allow(dead_code)]

use half::bf16;
use nki_core::prelude::*;

/// SplitMix64: a small deterministic generator for test inputs.
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1) (NumPy `random_sample`).
    pub fn uniform(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }

    /// `n` values uniform in `[lo, hi)`.
    pub fn vec(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n).map(|_| lo + self.uniform() * (hi - lo)).collect()
    }

    /// The SDK tests' inputs: `n` values of `random_sample() * 100`.
    pub fn sample(&mut self, n: usize) -> Vec<f32> {
        self.vec(n, 0.0, 100.0)
    }

    /// `n` integers uniform in `[lo, hi]`.
    pub fn ints(&mut self, n: usize, lo: i64, hi: i64) -> Vec<i64> {
        (0..n)
            .map(|_| lo + (self.next_u64() % (hi - lo + 1) as u64) as i64)
            .collect()
    }

    /// `n` integers uniform in `[lo, hi]`, as f32 values (exact for magnitudes below 2^24).
    pub fn int_f32s(&mut self, n: usize, lo: i64, hi: i64) -> Vec<f32> {
        self.ints(n, lo, hi).into_iter().map(|v| v as f32).collect()
    }
}

/// An f32 HBM tensor of `shape` holding `vals`.
pub fn hbm(shape: &[usize], vals: Vec<f32>) -> Hbm<f32> {
    Hbm::from_vec(shape, vals).unwrap()
}

/// A zero-filled HBM tensor of any rank.
pub fn zeros<T: Element>(shape: &[usize]) -> Hbm<T> {
    let z: Vec<T> = (0..numel(shape)).map(|_| T::from_f32(0.0)).collect();
    Hbm::from_vec(shape, z).unwrap()
}

/// Number of elements of `shape`.
pub fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// Runs `body` as a one-instance kernel writing into `out`; returns `out`'s values as f32.
pub fn run_into<T: Element>(
    mut out: Hbm<T>,
    body: impl Fn(&HbmOut<'_, T>) + Sync,
) -> Result<Vec<f32>, NkiError> {
    {
        let o = out.as_output();
        Launch::new(1).run(|| body(&o))?;
    }
    Ok(out.to_f32_vec().unwrap())
}

/// Runs `body` as a one-instance kernel that must fail; returns the error.
pub fn run_err(body: impl Fn() + Sync) -> NkiError {
    Launch::new(1)
        .run(body)
        .expect_err("the kernel should fail")
}

/// Runs `body` as a one-instance kernel that must fail with an error of `kind`; returns the
/// error.
#[track_caller]
pub fn fails_with(kind: ErrorKind, body: impl Fn() + Sync) -> NkiError {
    let e = run_err(body);
    assert_eq!(e.kind(), kind, "{e}");
    e
}

/// Runs `body` as a one-instance kernel on `target` that must fail with an error of `kind`;
/// returns the error.
pub fn fails_on(target: Target, kind: ErrorKind, body: impl Fn() + Sync) -> NkiError {
    let e = Launch::new(1)
        .target(target)
        .run(body)
        .expect_err("the kernel should fail");
    assert_eq!(e.kind(), kind, "{e}");
    e
}

/// NumPy `allclose(got, want, rtol, atol)` element by element (NaN == NaN, inf == inf);
/// `what` names the check in the failure message.
pub fn assert_close(got: &[f32], want: &[f32], rtol: f32, atol: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = if w.is_nan() {
            g.is_nan()
        } else if w.is_infinite() {
            g == w
        } else {
            (g - w).abs() <= atol + rtol * w.abs()
        };
        assert!(ok, "{what}: element {i}: got {g}, want {w}");
    }
}

/// [`assert_close`] with NumPy's defaults for fp32 (rtol 1e-5, atol 1e-8).
pub fn assert_f32_close(got: &[f32], want: &[f32], what: &str) {
    assert_close(got, want, 1e-5, 1e-8, what);
}

/// `x` rounded to bf16 (and back).
pub fn bf(x: f32) -> f32 {
    bf16::from_f32(x).to_f32()
}
