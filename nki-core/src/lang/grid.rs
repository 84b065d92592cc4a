//! Program ids and loop iterators: `program_id`, `num_programs`, `program_ndim`,
//! `affine_range`, `sequential_range`, `static_range`.

use super::check::require;
use crate::context::{self, raise, try_with_ctx, with_ctx};
use crate::error::{ErrorKind, NkiError, SourceLoc};

/// This instance's index along grid axis `axis` (NKI `nl.program_id`).
#[track_caller]
pub fn program_id(axis: usize) -> usize {
    grid_axis("program_id", axis, |c| &c.program_id)
}

/// Number of instances along grid axis `axis` (NKI `nl.num_programs(axes)`).
#[track_caller]
pub fn num_programs(axis: usize) -> usize {
    grid_axis("num_programs", axis, |c| &c.grid)
}

/// Entry `axis` of a per-grid-axis list of the running instance (`get`); an axis beyond the
/// grid's rank fails `api`.
#[track_caller]
fn grid_axis(
    api: &'static str,
    axis: usize,
    get: impl FnOnce(&context::InstanceCtx) -> &Vec<usize>,
) -> usize {
    let loc = SourceLoc::caller();
    let r = with_ctx(api, loc, |c| {
        let v = get(c);
        v.get(axis).copied().ok_or((v.len(), c.dialect()))
    });
    match r {
        Ok(v) => v,
        Err((_, d)) if d.grid_is_lnc_degree() => raise(
            NkiError::new(
                ErrorKind::InvalidArgument,
                api,
                format!(
                    "invalid program axis {axis}: an {} kernel's program axis must be zero \
                     (its grid is only the logical NeuronCore's degree)",
                    d.name()
                ),
            ),
            loc,
        ),
        Err((nd, _)) => raise(
            NkiError::new(
                ErrorKind::InvalidArgument,
                api,
                format!("axis {axis} is out of range for a {nd}-dimensional launch grid"),
            ),
            loc,
        ),
    }
}

/// Total number of instances in the grid (NKI `nl.num_programs()` with no axes).
#[track_caller]
pub fn num_programs_total() -> usize {
    with_ctx("num_programs", SourceLoc::caller(), |c| {
        c.grid.iter().product()
    })
}

/// Number of grid dimensions (NKI `nl.program_ndim`).
#[track_caller]
pub fn program_ndim() -> usize {
    with_ctx("program_ndim", SourceLoc::caller(), |c| c.grid.len())
}

/// The logical NeuronCore this instance runs on (0 without `nc()` in the grid).
#[track_caller]
pub fn core_id() -> usize {
    with_ctx("core_id", SourceLoc::caller(), |c| c.nc)
}

/// NKI `nl.affine_range`: a parallel loop whose iterations must not depend on each other.
/// Two iterations writing the same HBM location is an output-dependency error.
#[track_caller]
pub fn affine_range(n: usize) -> AffineRange {
    affine_range_step(0, n, 1)
}

/// `affine_range(start, stop, step)`. A step of 0 is an [`ErrorKind::InvalidArgument`]
/// error at the caller's line (the loop would never end).
#[track_caller]
pub fn affine_range_step(start: usize, stop: usize, step: usize) -> AffineRange {
    require(step != 0, "affine_range", || {
        format!("affine_range({start}, {stop}, 0): the step of a loop cannot be 0")
    });
    AffineRange {
        next: start,
        stop,
        step,
        iter: 0,
        activation: None,
        loc: SourceLoc::caller(),
    }
}

/// Iterator of [`affine_range`].
pub struct AffineRange {
    next: usize,
    stop: usize,
    step: usize,
    iter: u32,
    activation: Option<u32>,
    /// Where the loop is (the profile names it).
    loc: SourceLoc,
}

impl Iterator for AffineRange {
    type Item = usize;
    fn next(&mut self) -> Option<usize> {
        if self.next >= self.stop {
            self.leave();
            return None;
        }
        let act = match self.activation {
            Some(a) => a,
            None => {
                let trips = (self.stop - self.next).div_ceil(self.step) as u64;
                let a = try_with_ctx(|c| {
                    let a = c.push_affine(self.loc);
                    if let Some(sink) = &c.emit {
                        use crate::emit::trace::{Event, LoopKind, What};
                        // The loop's own frame is not one of the frames it begins in.
                        let frames = c.affine_frames();
                        let event = Event {
                            frames: frames[..frames.len() - 1].to_vec(),
                            loc: self.loc,
                            what: What::Loop {
                                activation: a,
                                trips,
                                kind: LoopKind::Affine,
                            },
                        };
                        sink.push(c.instance, event);
                    }
                    a
                });
                self.activation = a;
                a.unwrap_or(u32::MAX)
            }
        };
        let it = self.iter;
        try_with_ctx(|c| c.set_affine_iter(act, it));
        self.iter += 1;
        let v = self.next;
        self.next = self.next.saturating_add(self.step);
        Some(v)
    }
}

impl AffineRange {
    fn leave(&mut self) {
        if let Some(a) = self.activation.take() {
            context::try_with_ctx(|c| c.pop_affine(a));
        }
    }
}

impl Drop for AffineRange {
    fn drop(&mut self) {
        self.leave();
    }
}

/// NKI `nl.sequential_range`: a loop whose iterations may depend on each other.
///
/// Timing: its iterations keep program order on every engine, a loop-carried dependency waits
/// through the regions' dependencies, and the compiler stage moves nothing across its
/// iterations; nothing else synchronises the engines between iterations and it costs nothing
/// of its own. That is all its documentation gives (Beta 1: the compiler will "respect
/// inter-loop dependency and perform much more conservative loop-level optimizations", and a
/// kernel's Python `range(...)` is replaced with `sequential_range(...)`, so it is timed like
/// a host loop; NKI 0.7: an alias of `range()`). See docs/timing-model.md, "Scheduler".
pub fn sequential_range(n: usize) -> std::ops::Range<usize> {
    0..n
}

/// NKI `nl.static_range`: a loop unrolled at trace time (same semantics on CPU).
pub fn static_range(n: usize) -> std::ops::Range<usize> {
    0..n
}

/// The part of tile `index` (tiles of `tile` elements) that lies inside a dimension of `total`
/// elements: `index * tile .. min((index + 1) * tile, total)`.
///
/// This is how a partial last tile is written here. NKI expresses it with a mask such as
/// `mask=(i_p < n)`, which the compiler turns into a shrunken instruction over exactly this
/// range; slicing both the HBM view and the tile with it does the same (and the timing model
/// sees the smaller instruction). For tile indices past the end the range is empty.
pub fn tile_range(index: usize, tile: usize, total: usize) -> std::ops::Range<usize> {
    let at = |i: usize| i.saturating_mul(tile).min(total);
    at(index)..at(index.saturating_add(1))
}

/// Number of tiles of `tile` elements needed to cover `total` (the last may be partial).
pub fn num_tiles(total: usize, tile: usize) -> usize {
    total.div_ceil(tile.max(1))
}
