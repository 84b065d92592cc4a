//! Which parts of a tile are written, as rectangles of partitions × free elements: the
//! estimate-mode form of the uninitialised-read check, where no values (and no per-element
//! state) flow. A view is tracked by the rectangle of its instruction region (exact for a view
//! whose partitions each read one contiguous run of free elements; the hull of a strided
//! view). Adjacent rectangles are merged, so the usual patterns (column blocks, row blocks,
//! a loop of slices) stay a handful of rectangles.

use crate::access::{Ap, Shape};
use crate::dtype::DType;
use crate::error::{ErrorKind, NkiError, SourceLoc};
use crate::memory::TileDesc;
use crate::record::{MemKind, Region};

/// A rectangle of a tile: partitions `p0..p1` × free elements `f0..f1` of each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Rect {
    pub(crate) p0: u32,
    pub(crate) p1: u32,
    pub(crate) f0: u64,
    pub(crate) f1: u64,
}

impl Rect {
    /// The rectangle of instruction region `r` of a tile whose elements are `elem` bytes.
    pub(crate) fn of_region(r: &Region, elem: u64) -> Rect {
        Rect {
            p0: r.p0,
            p1: r.p1,
            f0: r.lo / elem,
            f1: r.hi.div_ceil(elem),
        }
    }

    fn is_empty(&self) -> bool {
        self.p0 >= self.p1 || self.f0 >= self.f1
    }

    /// `self` and `o` as one rectangle, when their union is one.
    fn merged(&self, o: &Rect) -> Option<Rect> {
        let same_p = self.p0 == o.p0 && self.p1 == o.p1;
        let same_f = self.f0 == o.f0 && self.f1 == o.f1;
        if same_p && self.f0 <= o.f1 && o.f0 <= self.f1 {
            Some(Rect {
                f0: self.f0.min(o.f0),
                f1: self.f1.max(o.f1),
                ..*self
            })
        } else if same_f && self.p0 <= o.p1 && o.p0 <= self.p1 {
            Some(Rect {
                p0: self.p0.min(o.p0),
                p1: self.p1.max(o.p1),
                ..*self
            })
        } else {
            None
        }
    }

    fn contains(&self, o: &Rect) -> bool {
        self.p0 <= o.p0 && o.p1 <= self.p1 && self.f0 <= o.f0 && o.f1 <= self.f1
    }
}

/// The written rectangles of one tile.
#[derive(Clone, Debug, Default)]
pub(crate) struct Written {
    rects: Vec<Rect>,
}

impl Written {
    /// Notes rectangle `r` written.
    pub(crate) fn add(&mut self, mut r: Rect) {
        if r.is_empty() || self.rects.iter().any(|w| w.contains(&r)) {
            return;
        }
        self.rects.retain(|w| !r.contains(w));
        // Merge with neighbours until nothing merges (each merge removes one rectangle).
        while let Some(i) = self.rects.iter().position(|w| r.merged(w).is_some()) {
            let w = self.rects.swap_remove(i);
            r = r.merged(&w).expect("checked");
        }
        self.rects.push(r);
    }

    /// The first element (partition, free index) of `r` that no written rectangle covers, in
    /// row-major order; `None` when `r` is written whole.
    pub(crate) fn first_gap(&self, r: &Rect) -> Option<(u32, u64)> {
        if r.is_empty() || self.rects.iter().any(|w| w.contains(r)) {
            return None;
        }
        if self.rects.is_empty() {
            return Some((r.p0, r.f0));
        }
        // Partition bands where the set of rectangles crossing `r` is constant.
        let mut cuts: Vec<u32> = vec![r.p0, r.p1];
        for w in &self.rects {
            cuts.extend([w.p0, w.p1].into_iter().filter(|&p| r.p0 < p && p < r.p1));
        }
        cuts.sort_unstable();
        cuts.dedup();
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for band in cuts.windows(2) {
            let p = band[0];
            runs.clear();
            runs.extend(
                self.rects
                    .iter()
                    .filter(|w| w.p0 <= p && p < w.p1 && w.f0 < r.f1 && r.f0 < w.f1)
                    .map(|w| (w.f0, w.f1)),
            );
            runs.sort_unstable();
            let mut at = r.f0;
            for &(lo, hi) in &runs {
                if lo > at {
                    break;
                }
                at = at.max(hi);
            }
            if at < r.f1 {
                return Some((p, at));
            }
        }
        None
    }
}

/// A tile allocated without a fill that is not written whole yet (tracked in estimate mode,
/// where no values exist to carry the "written" state through the ops).
#[derive(Clone, Debug)]
pub(crate) struct UnwrittenTile {
    pub(crate) mem: MemKind,
    pub(crate) desc: TileDesc,
    /// The parts written so far (kept by the tile's write paths).
    pub(crate) written: Written,
}

impl UnwrittenTile {
    /// The uninitialised-read error of op `api` reading region `reg` of this tile, if part of
    /// it was never written.
    pub(crate) fn read_error(&self, api: &'static str, reg: &Region) -> Option<NkiError> {
        let d = &self.desc;
        let r = Rect::of_region(reg, d.dtype.size() as u64);
        let (p, f) = self.written.first_gap(&r)?;
        let partial = !self.written.rects.is_empty();
        let first = p as usize * d.shape.free() + f as usize;
        Some(unwritten_error(
            api,
            (self.mem, d.dtype, d.shape),
            d.name.as_deref(),
            d.loc,
            partial.then_some(first),
        ))
    }
}

/// The [`ErrorKind::UninitializedRead`] error of op `op` reading the tile `(mem, dtype,
/// shape)` (named `name`, if it has a name) allocated at `loc`: naming `first`, the first
/// unwritten element read (flat index), when the tile is written in part.
pub(crate) fn unwritten_error(
    op: &'static str,
    (mem, dtype, shape): (MemKind, DType, Shape),
    name: Option<&str>,
    loc: SourceLoc,
    first: Option<usize>,
) -> NkiError {
    let tile = match name {
        None => describe_tile(mem, dtype, shape),
        Some(n) => format!("{} tile '{n}' {dtype}{shape}", mem.name()),
    };
    let what = match first {
        Some(e) => format!(
            "element {:?} of {tile}, which is written only in part,",
            Ap::unravel(e, &shape)
        ),
        None => tile,
    };
    NkiError::new(
        ErrorKind::UninitializedRead,
        op,
        format!("reads {what} (allocated at {loc}) before anything wrote it"),
    )
}

/// Description of a tile for messages: `sbuf tile float32[128, 512]`.
pub(crate) fn describe_tile(mem: MemKind, dtype: DType, shape: Shape) -> String {
    format!("{} tile {}{}", mem.name(), dtype, shape)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rect(p0: u32, p1: u32, f0: u64, f1: u64) -> Rect {
        Rect { p0, p1, f0, f1 }
    }

    #[test]
    fn column_and_row_blocks_merge_and_cover() {
        let mut w = Written::default();
        let whole = rect(0, 128, 0, 512);
        for j in 0..4 {
            assert_eq!(w.first_gap(&whole), Some((0, j * 128)));
            w.add(rect(0, 128, j * 128, (j + 1) * 128));
        }
        assert_eq!(w.rects.len(), 1);
        assert_eq!(w.first_gap(&whole), None);
        let mut w = Written::default();
        for p in (0..128).step_by(32) {
            w.add(rect(p, p + 32, 0, 512));
        }
        assert_eq!(w.rects, vec![whole]);
    }

    #[test]
    fn gaps_are_found_in_row_major_order() {
        let mut w = Written::default();
        w.add(rect(0, 8, 0, 12));
        w.add(rect(4, 8, 12, 16));
        assert_eq!(w.first_gap(&rect(0, 8, 0, 12)), None);
        assert_eq!(w.first_gap(&rect(0, 8, 0, 16)), Some((0, 12)));
        assert_eq!(w.first_gap(&rect(4, 8, 0, 16)), None);
        assert_eq!(w.first_gap(&rect(2, 6, 10, 14)), Some((2, 12)));
        // Overlapping writes.
        w.add(rect(0, 6, 10, 14));
        assert_eq!(w.first_gap(&rect(0, 8, 0, 16)), Some((0, 14)));
        w.add(rect(0, 4, 14, 16));
        assert_eq!(w.first_gap(&rect(0, 8, 0, 16)), None);
    }
}
