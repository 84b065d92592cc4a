//! Dynamic access patterns (NKI 0.8, Neuron 2.34 release notes: "a dynamic access pattern
//! reads its stride or count at run time"): an HBM access pattern `[[stride, count], ..]`
//! whose strides and counts may be [`NkiScalar`]s, read from their registers when the DMA
//! runs, as 0.7's `scalar_offset` reads an offset.
//!
//! A count read at run time is given with its maximum ([`ApTerm::count`]): on-chip tiles have
//! compile-time shapes, so the DMA's other side is sized for the maximum and the DMA moves the
//! first `count` entries of that dimension on both sides (a partial last tile: `count` rows of
//! a 128-row tile). Only [`dma_copy`](super::dma_copy) takes a view with run-time counts; any
//! other access of its values is an error.
//!
//! Checks, in every mode, with the values read at run time (execute and simulate: the
//! scalars' values; estimate: the values given to the launch,
//! [`TripCounts::values`](crate::lang::TripCounts::values) by the line of the
//! `ap_dynamic` call, or an [`ErrorKind::NoData`] error naming the call, as for trip counts):
//! a negative stride or count, a count above its maximum and a pattern reaching outside the
//! tensor make the view out of bounds; a DMA of it is an [`ErrorKind::OutOfBounds`] error
//! naming `dma_copy`, both sides, the values and the line of the pattern under
//! `oob_mode=error`, and skips the transfer under `oob_mode=skip` (the DMA is still issued,
//! as for `scalar_offset`).
//!
//! Timing: the DMA is costed for the elements it moves (`count` entries, the strides' runs
//! deciding its descriptor size as for any DMA); a count of 0 moves nothing and costs the
//! DMA's fixed latency. The DMA reads the registers of the scalars its pattern takes, so it
//! waits for their `scalar_load`s. [A: no public figure for generating descriptors of a
//! dynamic pattern; no cost beyond the DMA's own is added.]

use super::nki_scalar::NkiScalar;
use crate::context::{raise, with_ctx};
use crate::error::{ErrorKind, NkiError, SourceLoc};
use crate::hbm::view::RunCounts;
use crate::hbm::{HbmView, HbmViewMut};
use crate::lang::loop_state::Loops;
use std::sync::Arc;

/// The name errors of a dynamic access pattern carry.
const API: &str = "ap_dynamic";

/// One entry of a dynamic access pattern's `[stride, count]` pair: a compile-time integer
/// (`512.into()`), a stride read at run time (`s.into()` for an [`NkiScalar`] `s`) or a count
/// read at run time with its maximum ([`ApTerm::count`]).
#[derive(Clone, Copy, Debug)]
pub enum ApTerm {
    /// A compile-time stride or count.
    Fixed(usize),
    /// A stride read at run time.
    Scalar(NkiScalar),
    /// A count read at run time, at most the given maximum.
    Count(NkiScalar, usize),
}

impl ApTerm {
    /// A count read at run time from `n`, at most `max` (the size of the DMA's other side in
    /// that dimension).
    pub fn count(n: NkiScalar, max: usize) -> ApTerm {
        ApTerm::Count(n, max)
    }
}

impl From<usize> for ApTerm {
    fn from(v: usize) -> ApTerm {
        ApTerm::Fixed(v)
    }
}

impl From<NkiScalar> for ApTerm {
    fn from(s: NkiScalar) -> ApTerm {
        ApTerm::Scalar(s)
    }
}

impl From<&NkiScalar> for ApTerm {
    fn from(s: &NkiScalar) -> ApTerm {
        ApTerm::Scalar(*s)
    }
}

impl HbmView {
    /// An access pattern whose strides and counts may be read at run time (NKI 0.8's dynamic
    /// access pattern; see the module docs): `pattern[k] = [stride, count]`, outermost first,
    /// absolute as [`HbmView::ap`]; a stride is an integer or an [`NkiScalar`], a count an
    /// integer or [`ApTerm::count(n, max)`](ApTerm::count).
    ///
    /// ```
    /// use nki_core::nisa::ApTerm;
    /// use nki_core::prelude::*;
    /// #[nki_kernel(nki = "0.8")]
    /// fn head_rows(n: &Hbm<i32>, x: &Hbm<f32>) -> Hbm<f32> {
    ///     let out = nl::ndarray(&[4, 8], DType::F32, nl::shared_hbm);
    ///     let n_t = nl::ndarray(&[1, 1], DType::I32, nl::sbuf);
    ///     nisa::dma_copy(&n_t, n.view(), None);
    ///     let rows = nisa::scalar_load(&n_t);
    ///     let t = nl::zeros(&[4, 8], DType::F32, nl::sbuf);
    ///     // the first `rows` rows of x (at most 4) into the first rows of t
    ///     let src = x.view().ap_dynamic(&[[8.into(), ApTerm::count(rows, 4)], [1.into(), 8.into()]], 0);
    ///     nisa::dma_copy(&t, src, None);
    ///     nisa::dma_copy(out.view(), &t, None);
    ///     out
    /// }
    /// let x = Hbm::from_vec(&[3, 8], (0..24).map(|v| v as f32).collect()).unwrap();
    /// let n = Hbm::from_vec(&[1, 1], vec![2]).unwrap();
    /// let (y, _) = head_rows::launch(1, &n, &x).unwrap();
    /// let y = y.to_f32_vec().unwrap();
    /// assert_eq!(&y[..16], &(0..16).map(|v| v as f32).collect::<Vec<_>>()[..]);
    /// assert!(y[16..].iter().all(|&v| v == 0.0));
    /// ```
    #[track_caller]
    pub fn ap_dynamic(&self, pattern: &[[ApTerm; 2]], offset: usize) -> HbmView {
        dynamic_view(self, pattern, offset, SourceLoc::caller())
    }
}

impl HbmViewMut {
    /// [`HbmView::ap_dynamic`] of a writable view: also a DMA destination.
    #[track_caller]
    pub fn ap_dynamic(&self, pattern: &[[ApTerm; 2]], offset: usize) -> HbmViewMut {
        HbmViewMut(dynamic_view(&self.0, pattern, offset, SourceLoc::caller()))
    }
}

impl crate::tensor::TensorRef<'_> {
    /// [`HbmView::ap_dynamic`] of a view of an HBM tensor the kernel allocated (a 0.7/0.8
    /// kernel's returned output). A view of an on-chip tensor is an error (a dynamic access
    /// pattern here moves an HBM access, as `scalar_offset` does).
    #[track_caller]
    pub fn ap_dynamic(&self, pattern: &[[ApTerm; 2]], offset: usize) -> Self {
        let loc = SourceLoc::caller();
        match self {
            crate::tensor::TensorRef::Hbm(v) => {
                crate::tensor::TensorRef::Hbm(dynamic_view(v, pattern, offset, loc))
            }
            crate::tensor::TensorRef::Chip(t) => raise(
                NkiError::new(
                    ErrorKind::WrongMemory,
                    API,
                    format!(
                        "{} is on chip: a dynamic access pattern is an HBM access of a DMA",
                        t.describe()
                    ),
                ),
                loc,
            ),
        }
    }
}

/// The values given to the launch for the dynamic pattern at `loc` (estimate mode), counting
/// its run.
fn given_values(loc: SourceLoc) -> Option<Vec<i64>> {
    with_ctx(API, loc, |c| {
        let loops = c.state.get::<Loops>();
        let run = loops.runs.entry(loc).or_insert(0);
        let k = *run;
        *run += 1;
        loops
            .trips
            .as_ref()
            .and_then(|t| t.values_for(loc.line, k).map(<[i64]>::to_vec))
    })
}

/// The view of `v`'s tensor through the dynamic `pattern` at `offset`, made at `loc`.
fn dynamic_view(v: &HbmView, pattern: &[[ApTerm; 2]], offset: usize, loc: SourceLoc) -> HbmView {
    let what = format!("tensor {} {}", v.st.name, v.st.shape);
    let fail = |kind, msg: String| -> ! { raise(NkiError::new(kind, API, msg), loc) };
    // The scalars, in pattern order (stride before count).
    let mut scalars: Vec<NkiScalar> = Vec::new();
    for (k, [s, c]) in pattern.iter().enumerate() {
        match s {
            ApTerm::Count(..) => fail(
                ErrorKind::InvalidArgument,
                format!(
                    "pair {k} of the access pattern of {what}: its stride is an integer or a \
                     scalar; ApTerm::count(n, max) is a count"
                ),
            ),
            ApTerm::Scalar(x) => scalars.push(*x),
            ApTerm::Fixed(_) => {}
        }
        match c {
            ApTerm::Scalar(_) => fail(
                ErrorKind::InvalidArgument,
                format!(
                    "pair {k} of the access pattern of {what}: a count read at run time needs \
                     its maximum (ApTerm::count(n, max)); on-chip tiles have compile-time \
                     shapes, so the DMA's other side is sized for the maximum"
                ),
            ),
            ApTerm::Count(x, max) => {
                if *max == 0 {
                    fail(
                        ErrorKind::InvalidArgument,
                        format!("pair {k} of the access pattern of {what}: a maximum count of 0"),
                    );
                }
                scalars.push(*x);
            }
            ApTerm::Fixed(0) => fail(
                ErrorKind::InvalidArgument,
                format!(
                    "pair {k} of the access pattern of {what} has a count of 0: every \
                     [stride, count] pair needs a count of at least 1"
                ),
            ),
            ApTerm::Fixed(_) => {}
        }
    }
    let values: Vec<i64> = match scalars.iter().map(NkiScalar::value).collect() {
        Some(v) => v,
        None => match given_values(loc) {
            Some(v) if v.len() == scalars.len() => v,
            Some(v) => fail(
                ErrorKind::InvalidArgument,
                format!(
                    "the launch gives {} values for the dynamic access pattern at line {}, \
                     which reads {} (its scalar strides and counts, in pattern order)",
                    v.len(),
                    loc.line,
                    scalars.len()
                ),
            ),
            // In a branch the launch does not take, no value to check the pattern with: its
            // tracing ends here.
            None if crate::shadow::active() => crate::shadow::stop(),
            None => raise(
                NkiError::new(
                    ErrorKind::NoData,
                    API,
                    format!(
                        "estimate mode has no values, and this access pattern of {what} reads \
                         {} of its strides and counts from scalars: give them to the launch \
                         (Launch::trip_counts(TripCounts::new().values({line}, [..])), or \
                         .values_runs({line}, [..]) for one list per run)",
                        scalars.len(),
                        line = loc.line
                    ),
                ),
                loc,
            ),
        },
    };
    let register = scalars
        .iter()
        .copied()
        .reduce(NkiScalar::after)
        .and_then(|s| s.register());
    // The pattern with the values read, its problems, and its counted dimensions.
    let mut vals = values.iter().copied();
    let (mut pairs, mut declared) = (Vec::new(), Vec::new());
    let (mut bad, mut dims) = (Vec::new(), Vec::new());
    for (k, [s, c]) in pattern.iter().enumerate() {
        let stride = match s {
            ApTerm::Fixed(x) => *x as i64,
            _ => vals.next().unwrap_or(0),
        };
        let (count, max) = match c {
            ApTerm::Fixed(x) => (*x as i64, *x),
            ApTerm::Count(_, m) => (vals.next().unwrap_or(0), *m),
            ApTerm::Scalar(_) => unreachable!("rejected above"),
        };
        if stride < 0 {
            bad.push(format!("stride {stride} of pair {k} is negative"));
        }
        if matches!(c, ApTerm::Count(..)) {
            if !(0..=max as i64).contains(&count) {
                bad.push(format!("count {count} of pair {k} is outside 0..={max}"));
            }
            dims.push((k, count.clamp(0, max as i64) as usize, max));
        }
        pairs.push([
            stride.max(0) as usize,
            (count.clamp(0, max as i64) as usize).max(1),
        ]);
        declared.push([0, max]);
    }
    let len = v.st.shape.numel();
    let moved = match bad.is_empty() {
        true => crate::view::pattern(&v.st.whole, &pairs, offset, len, &what)
            .map_err(|e| bad.push(e.message().to_string()))
            .ok(),
        false => None,
    };
    let mut out = match moved {
        Some(ap) => v.with_ap(ap),
        None => {
            // Out of bounds: the view keeps the pattern's full shape over element 0 (the DMA
            // fails or skips; no element of it is accessed).
            let ap = crate::view::pattern(&v.st.whole, &declared, 0, len, &what)
                .unwrap_or_else(|e| raise(e, loc));
            let mut out = v.with_ap(ap);
            out.oob = Some(
                format!(
                    "the dynamic access pattern at line {} ({what}, offset {offset}) read the \
                     values {values:?}: {}",
                    loc.line,
                    bad.join("; ")
                )
                .into(),
            );
            dims.iter_mut().for_each(|d| d.1 = d.2);
            out
        }
    };
    out.counts = (!dims.is_empty()).then(|| {
        Arc::new(RunCounts {
            empty: out.oob.is_none() && dims.iter().any(|d| d.1 == 0),
            dims,
        })
    });
    out.after_register(register)
}
