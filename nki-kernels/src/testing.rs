//! Deterministic test inputs and NumPy-style result checks, shared by the kernels' tests and
//! the examples.
//!
//! - [`XorShift`]: a tiny seeded generator (xorshift64), so inputs are reproducible without an
//!   RNG dependency; [`random_f32`], [`random_bf16`] and [`random_vec`] draw uniform values in
//!   [0, 1) from it, as NumPy's `random_sample` does in the NKI tutorials' tests.
//! - [`allclose`]: NumPy's `allclose` (`|got - want| <= atol + rtol * |want|`) that reports the
//!   worst offending element as a [`Mismatch`] instead of a bare `false`.
//!
//! ```
//! use nki_kernels::testing::{allclose, random_bf16};
//!
//! let a = random_bf16(4, 8, 1);
//! let want = a.mapv(f32::from);
//! assert!(allclose(&a, &want, 1e-4, 1e-2).is_ok());
//! ```

use half::bf16;
use ndarray::{Array2, ArrayBase, ArrayD, Data, Dimension, IntoDimension};
use nki_core::prelude::{Launch, LaunchReport, Mode, NkiError};
use nki_core::Element;
use std::fmt;

/// A seeded xorshift64 generator of deterministic pseudo-random test inputs.
#[derive(Clone, Debug)]
pub struct XorShift(u64);

impl XorShift {
    /// A generator for `seed` (any value, zero included: the state is never zero).
    pub fn new(seed: u64) -> XorShift {
        XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut s = self.0;
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        self.0 = s;
        s
    }

    /// The next value uniform in [0, 1), a multiple of 2^-24 (exact in f32).
    pub fn uniform(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// A `rows x cols` f32 array of values uniform in [0, 1), deterministic in `seed`.
pub fn random_f32(rows: usize, cols: usize, seed: u64) -> Array2<f32> {
    let mut rng = XorShift::new(seed);
    Array2::from_shape_simple_fn((rows, cols), || rng.uniform())
}

/// [`random_f32`] rounded to bf16 (the NKI tutorials' bf16 inputs).
pub fn random_bf16(rows: usize, cols: usize, seed: u64) -> Array2<bf16> {
    random_f32(rows, cols, seed).mapv(bf16::from_f32)
}

/// `n` values uniform in [0, 1), deterministic in `seed` (the same stream as [`random_f32`]).
pub fn random_vec(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = XorShift::new(seed);
    (0..n).map(|_| rng.uniform()).collect()
}

/// Why [`allclose`] failed.
#[derive(Clone, Debug, PartialEq)]
pub enum Mismatch {
    /// The arrays differ in shape.
    Shape {
        /// Shape of the computed array.
        got: Vec<usize>,
        /// Shape of the reference.
        want: Vec<usize>,
    },
    /// The element furthest outside the tolerance (a NaN on either side counts as furthest).
    Element {
        /// Its index.
        index: Vec<usize>,
        /// The computed value.
        got: f32,
        /// The reference value.
        want: f32,
    },
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mismatch::Shape { got, want } => write!(f, "shape {got:?} vs {want:?}"),
            Mismatch::Element { index, got, want } => {
                write!(f, "element {index:?}: nki {got} vs ndarray {want}")
            }
        }
    }
}

impl std::error::Error for Mismatch {}

/// NumPy's `allclose(got, want, rtol, atol)`: every element must satisfy
/// `|got - want| <= atol + rtol * |want|` (NaN never does). On failure returns the worst
/// offender: the element that exceeds its tolerance by the most (the first NaN, if any).
pub fn allclose<T, S1, S2, D1, D2>(
    got: &ArrayBase<S1, D1>,
    want: &ArrayBase<S2, D2>,
    atol: f32,
    rtol: f32,
) -> Result<(), Mismatch>
where
    T: Element,
    S1: Data<Elem = T>,
    S2: Data<Elem = f32>,
    D1: Dimension,
    D2: Dimension,
{
    if got.shape() != want.shape() {
        return Err(Mismatch::Shape {
            got: got.shape().to_vec(),
            want: want.shape().to_vec(),
        });
    }
    let mut worst: Option<(f32, Mismatch)> = None;
    for ((idx, g), &w) in got.indexed_iter().zip(want.iter()) {
        let g = g.to_f32();
        let excess = if g.is_nan() || w.is_nan() {
            f32::INFINITY
        } else {
            (g - w).abs() - (atol + rtol * w.abs())
        };
        if excess > 0.0 && worst.as_ref().is_none_or(|(e, _)| excess > *e) {
            let index = idx.into_dimension().as_array_view().to_vec();
            worst = Some((
                excess,
                Mismatch::Element {
                    index,
                    got: g,
                    want: w,
                },
            ));
        }
    }
    match worst {
        Some((_, m)) => Err(m),
        None => Ok(()),
    }
}

/// `n` values uniform in `[lo, hi)`, deterministic in `seed`.
pub fn random_range(n: usize, lo: f32, hi: f32, seed: u64) -> Vec<f32> {
    random_vec(n, seed)
        .into_iter()
        .map(|v| lo + (hi - lo) * v)
        .collect()
}

/// Runs a kernel in execute, simulate and estimate mode and checks each run.
///
/// `run` launches the kernel with the given [`Launch`] (on fresh outputs) and returns the
/// output it is checked on with the launch report. In execute and simulate mode the output
/// must match `want` within `atol`/`rtol`; simulate and estimate mode must model the same
/// instruction stream, so both profiles must have the same positive latency. Panics with
/// `label` and the worst mismatch otherwise (this is a test helper).
pub fn check_modes<T, D, F>(
    label: &str,
    want: &ArrayBase<impl Data<Elem = f32>, D>,
    atol: f32,
    rtol: f32,
    run: F,
) where
    T: Element,
    D: Dimension,
    F: Fn(Launch) -> Result<(ArrayD<T>, LaunchReport), NkiError>,
{
    let mut latencies = Vec::new();
    for mode in [Mode::Execute, Mode::Simulate, Mode::Estimate] {
        let (got, report) =
            run(Launch::new(1).mode(mode)).unwrap_or_else(|e| panic!("{label} ({mode:?}): {e}"));
        if mode != Mode::Estimate {
            let want = want.view().into_dyn();
            if let Err(m) = allclose(&got, &want, atol, rtol) {
                panic!("{label} ({mode:?}): {m}");
            }
        }
        if let Some(p) = report.profile {
            assert!(p.latency_ns > 0.0, "{label} ({mode:?}): zero latency");
            latencies.push(p.latency_ns);
        }
    }
    assert_eq!(
        latencies.len(),
        2,
        "{label}: simulate and estimate give profiles"
    );
    assert_eq!(
        latencies[0], latencies[1],
        "{label}: simulate and estimate model different latencies"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{arr1, arr2};

    #[test]
    fn generators_are_deterministic_and_in_range() {
        let (a, b) = (random_f32(16, 32, 7), random_f32(16, 32, 7));
        assert_eq!(a, b);
        assert_ne!(a, random_f32(16, 32, 8));
        assert!(a.iter().all(|v| (0.0..1.0).contains(v)));
        assert_eq!(
            random_vec(16 * 32, 7),
            a.iter().copied().collect::<Vec<_>>()
        );
        assert_eq!(random_bf16(16, 32, 7), a.mapv(bf16::from_f32));
    }

    #[test]
    fn allclose_reports_the_worst_offender() {
        let want = arr2(&[[1.0f32, 2.0], [100.0, 4.0]]);
        assert_eq!(allclose(&want, &want, 0.0, 0.0), Ok(()));
        // Within atol + rtol * |want| everywhere: 0.5 <= 0.1 + 0.01 * 100.
        let near = arr2(&[[1.05f32, 2.0], [100.5, 4.0]]);
        assert_eq!(allclose(&near, &want, 0.1, 0.01), Ok(()));
        // Two offenders: [0, 0] exceeds its tolerance by 0.4, [1, 1] by 0.9.
        let far = arr2(&[[1.5f32, 2.0], [100.0, 5.0]]);
        assert_eq!(
            allclose(&far, &want, 0.1, 0.0),
            Err(Mismatch::Element {
                index: vec![1, 1],
                got: 5.0,
                want: 4.0
            })
        );
        let nan = arr2(&[[1.0f32, 2.0], [f32::NAN, 9.0]]);
        let e = allclose(&nan, &want, 1.0, 1.0).unwrap_err();
        assert_eq!(e.to_string(), "element [1, 0]: nki NaN vs ndarray 100");
    }

    #[test]
    fn allclose_checks_shapes() {
        let e = allclose(&arr1(&[1.0f32, 2.0]), &arr2(&[[1.0f32, 2.0]]), 1.0, 1.0).unwrap_err();
        assert_eq!(e.to_string(), "shape [2] vs [1, 2]");
    }
}
