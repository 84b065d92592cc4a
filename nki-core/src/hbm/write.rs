//! HBM stores with write tracking: values are written while the writer tags of the elements
//! are checked against the previous writers of this launch (NKI's "unexpected output
//! dependencies"). Tags are kept per block of [`BLOCK`] elements, falling back to per-element
//! tags only in blocks that are written partially, so the common store of whole rows costs a
//! fraction of the value traffic. Estimate-mode launches, which carry no values, run the same
//! tag bookkeeping through [`track`], so races are reported in every mode.
//!
//! `nl.atomic_rmw` updates are tagged by their own "atomic" writers ([`atomic`]): atomic
//! updates never conflict with each other, but an atomic update and a store of one element at
//! unordered positions (different instances or affine_range iterations), in either order, are
//! an output-dependency error exactly like two stores. An element updated atomically by several
//! unordered writers is tagged with both of the first two (see
//! [`Writers::merge_atomic`]), so a later store is checked against them. The store path
//! is unchanged by this: atomic tags only reach its (already slow) conflict check.

use super::writers::Writers;
use super::{no_data, HbmData, HbmView};
use crate::access::Ap;
use crate::context::LaunchShared;
use crate::error::{ErrorKind, NkiError, Result, SourceLoc};
use crate::tile::TileRef;

/// Elements per writer-tag block.
pub(crate) const BLOCK: usize = 16;
/// Block tag meaning "the elements of this block carry their own tags".
pub(crate) const MIXED: u32 = u32::MAX;

/// Checks the value operand of a write into HBM (`store`, `atomic_rmw`) and that it has the
/// destination's shape (a 1-D destination counts as one partition) or at least its element
/// count; raises the error of operation `op` (named `name` in the message) otherwise.
pub(crate) fn check_dest_value(
    op: &'static str,
    name: &str,
    dst: &HbmView,
    src: &TileRef,
    loc: SourceLoc,
) {
    crate::context::check(crate::lang::checks::operand(op, "value", src), loc);
    let mut ddims = dst.shape().to_vec();
    if ddims.len() == 1 {
        ddims.insert(0, 1);
    }
    if ddims != src.shape() && dst.ap.shape.numel() != src.ap.shape.numel() {
        crate::context::raise(
            NkiError::new(
                ErrorKind::ShapeMismatch,
                op,
                format!(
                    "destination {} and value {} of '{name}' have different shapes",
                    dst.describe(),
                    src.describe()
                ),
            ),
            loc,
        );
    }
}

/// Writes row-major `vals` (rounded to the tensor dtype) into `dst`, tagging each element with
/// `writer`. An element already written in this launch by a conflicting writer is an
/// output-dependency error naming both writers and the element.
pub(crate) fn write(
    dst: &HbmView,
    vals: Vec<f32>,
    writer: u32,
    shared: &LaunchShared,
) -> Result<()> {
    let r = write_slice(dst, &vals, false, writer, shared);
    crate::tile::give_buf(vals);
    r
}

/// [`write`] from a borrowed slice; `exact` says the values are already representable in the
/// tensor's dtype (no rounding needed).
pub(crate) fn write_slice(
    dst: &HbmView,
    vals: &[f32],
    exact: bool,
    writer: u32,
    shared: &LaunchShared,
) -> Result<()> {
    let st = &dst.st;
    let dtype = st.dtype;
    let mut g = st.write();
    let HbmData {
        values,
        blocks,
        elems,
    } = &mut *g;
    let Some(values) = values.as_mut() else {
        return Err(no_data(st, "store"));
    };
    let mut tags = Tags::new(blocks, elems, st.shape.numel(), writer, &shared.writers);
    let s = dst.ap.inner_stride();
    let mut pos = 0;
    dst.ap.for_each_row(|off, n| {
        let src = &vals[pos..pos + n];
        pos += n;
        if s == 1 {
            tags.run(off, n);
            crate::exec::copy_round(dtype, exact, &mut values[off..off + n], src);
        } else {
            for (j, &v) in src.iter().enumerate() {
                let e = (off as isize + j as isize * s) as usize;
                tags.element(e);
                values[e] = if exact { v } else { dtype.round(v) };
            }
        }
    });
    tags.finish(dst, "store")
}

/// The tracking half of [`write`] without values (estimate mode): tags the elements of `dst`
/// with `writer` and reports a conflicting earlier writer exactly as a store would. Works on
/// shape-only tensors; the tag arrays are allocated on the first tracked write.
pub(crate) fn track(dst: &HbmView, writer: u32, shared: &LaunchShared) -> Result<()> {
    let st = &dst.st;
    let mut g = st.write();
    let HbmData { blocks, elems, .. } = &mut *g;
    let mut tags = Tags::new(blocks, elems, st.shape.numel(), writer, &shared.writers);
    let s = dst.ap.inner_stride();
    dst.ap.for_each_row(|off, n| {
        if s == 1 {
            tags.run(off, n);
        } else {
            for j in 0..n {
                tags.element((off as isize + j as isize * s) as usize);
            }
        }
    });
    tags.finish(dst, "store")
}

/// Tags the elements of `dst` as updated by the atomic writer `writer` (see
/// [`Writers::merge_atomic`]), on the tag arrays of the locked tensor data `data` (the
/// caller updates the values under the same lock; estimate mode calls this alone). An element
/// stored by an unordered writer is an output-dependency error naming both writers.
pub(crate) fn atomic(
    dst: &HbmView,
    data: &mut HbmData,
    writer: u32,
    shared: &LaunchShared,
) -> Result<()> {
    let st = &dst.st;
    let numel = st.shape.numel();
    let HbmData { blocks, elems, .. } = data;
    let mut tags = Tags::new(blocks, elems, numel, writer, &shared.writers);
    let mut merge = Merge {
        writer,
        writers: &shared.writers,
        last: None,
    };
    let s = dst.ap.inner_stride();
    dst.ap.for_each_row(|off, n| {
        if s == 1 {
            let end = off + n;
            let (b0, b1) = (off.div_ceil(BLOCK), end / BLOCK);
            if b0 >= b1 {
                (off..end).for_each(|e| merge.element(&mut tags, e));
                return;
            }
            (off..b0 * BLOCK).for_each(|e| merge.element(&mut tags, e));
            for b in b0..b1 {
                let old = tags.blocks[b];
                if old == MIXED {
                    (b * BLOCK..(b + 1) * BLOCK).for_each(|e| merge.element(&mut tags, e));
                } else {
                    tags.blocks[b] = merge.tag(&mut tags.conflict, old, b * BLOCK);
                }
            }
            (b1 * BLOCK..end).for_each(|e| merge.element(&mut tags, e));
        } else {
            for j in 0..n {
                merge.element(&mut tags, (off as isize + j as isize * s) as usize);
            }
        }
    });
    tags.finish(dst, "nl.atomic_rmw")
}

/// The tag updates of one atomic writer, remembering the last merge (a store of whole rows
/// leaves long runs of one tag).
struct Merge<'a> {
    writer: u32,
    writers: &'a Writers,
    /// The last (old tag, new tag) merge that did not conflict.
    last: Option<(u32, u32)>,
}

impl Merge<'_> {
    /// The new tag of a location tagged `old` (element `e`), noting the first conflict.
    #[inline]
    fn tag(&mut self, conflict: &mut Option<(u32, usize)>, old: u32, e: usize) -> u32 {
        if old == self.writer {
            return old;
        }
        if let Some((o, n)) = self.last {
            if o == old {
                return n;
            }
        }
        match self.writers.merge_atomic(old, self.writer) {
            Ok(n) => {
                self.last = Some((old, n));
                n
            }
            Err(()) => {
                conflict.get_or_insert((old, e));
                old
            }
        }
    }

    /// Updates the tag of element `e` on its own, splitting its block into per-element tags.
    fn element(&mut self, tags: &mut Tags, e: usize) {
        tags.split(e / BLOCK);
        let old = tags.elems[e];
        tags.elems[e] = self.tag(&mut tags.conflict, old, e);
    }
}

/// The writer tags of one tensor during one store.
struct Tags<'a> {
    blocks: &'a mut Vec<u32>,
    elems: &'a mut Vec<u32>,
    numel: usize,
    writer: u32,
    base: u32,
    writers: &'a Writers,
    /// The first conflicting (previous writer, element).
    conflict: Option<(u32, usize)>,
    /// A previous writer already found not to conflict.
    ok_pair: Option<u32>,
}

impl<'a> Tags<'a> {
    /// The tags of a tensor of `numel` elements for one store by `writer`, sizing the block
    /// tags on the first write.
    fn new(
        blocks: &'a mut Vec<u32>,
        elems: &'a mut Vec<u32>,
        numel: usize,
        writer: u32,
        writers: &'a Writers,
    ) -> Self {
        if blocks.len() != numel.div_ceil(BLOCK) {
            *blocks = vec![0; numel.div_ceil(BLOCK)];
        }
        Tags {
            blocks,
            elems,
            numel,
            writer,
            base: writers.base(),
            writers,
            conflict: None,
            ok_pair: None,
        }
    }

    /// The output-dependency error of the write (by operation `op`) into `dst`, if it met a
    /// conflicting writer.
    fn finish(self, dst: &HbmView, op: &'static str) -> Result<()> {
        let Some((old, e)) = self.conflict else {
            return Ok(());
        };
        let st = &dst.st;
        let idx = Ap::unravel(e, &st.shape);
        Err(NkiError::new(
            ErrorKind::OutputDependency,
            op,
            format!(
                "unexpected output dependencies: element {idx:?} of {} is written by {} and again by {} \
                 (this {op} covers {}); each program instance and each affine_range iteration must \
                 write distinct locations, or use sequential_range",
                st.name,
                self.writers.describe(old),
                self.writers.describe(self.writer),
                dst.describe()
            ),
        ))
    }

    /// Checks the previous writer `old` of element `e` against this store's writer.
    #[inline]
    fn check(&mut self, old: u32, e: usize) {
        if old != self.writer
            && old >= self.base
            && self.conflict.is_none()
            && self.ok_pair != Some(old)
        {
            if self.writers.conflicts(old, self.writer) {
                self.conflict = Some((old, e));
            } else {
                self.ok_pair = Some(old);
            }
        }
    }

    /// Splits block `b` into per-element tags (once).
    #[inline]
    fn split(&mut self, b: usize) {
        if self.blocks[b] != MIXED {
            if self.elems.len() != self.numel {
                *self.elems = vec![0; self.numel];
            }
            let (lo, hi) = (b * BLOCK, ((b + 1) * BLOCK).min(self.numel));
            self.elems[lo..hi].fill(self.blocks[b]);
            self.blocks[b] = MIXED;
        }
    }

    /// Tags element `e` on its own, splitting its block into per-element tags.
    fn element(&mut self, e: usize) {
        self.split(e / BLOCK);
        let old = self.elems[e];
        self.check(old, e);
        self.elems[e] = self.writer;
    }

    /// Tags the contiguous run of elements `off..off + n`: whole blocks by their block tag,
    /// the partial blocks at either end element by element.
    fn run(&mut self, off: usize, n: usize) {
        let end = off + n;
        let (b0, b1) = (off.div_ceil(BLOCK), end / BLOCK);
        if b0 >= b1 {
            (off..end).for_each(|e| self.element(e));
            return;
        }
        (off..b0 * BLOCK).for_each(|e| self.element(e));
        let (w, base) = (self.writer, self.base);
        // Branch-free scan (it vectorises): every block unwritten in this launch or ours.
        let clean = self.blocks[b0..b1]
            .iter()
            .fold(true, |ok, &old| ok & ((old == w) | (old < base)));
        if !clean {
            for b in b0..b1 {
                let old = self.blocks[b];
                if old == MIXED {
                    for e in b * BLOCK..(b + 1) * BLOCK {
                        let o = self.elems[e];
                        self.check(o, e);
                    }
                } else {
                    self.check(old, b * BLOCK);
                }
            }
        }
        self.blocks[b0..b1].fill(w);
        (b1 * BLOCK..end).for_each(|e| self.element(e));
    }
}

#[cfg(test)]
mod tests {
    use crate::prelude::*;

    #[test]
    fn interleaved_column_stores_are_not_races_but_overlaps_are() {
        let a = Hbm::<f32>::from_vec(&[2, 8], (0..16).map(|i| i as f32).collect()).unwrap();
        let mut c = Hbm::<f32>::zeros([2, 8]);
        // Two instances store the even and the odd columns (strided views): no conflict.
        for _ in 0..2 {
            let out = c.as_output();
            Launch::new(2)
                .run(|| {
                    let p = nl::program_id(0);
                    let cols = stepped(p..8, 2);
                    let t = nl::load(a.slice((.., cols)));
                    nl::store(out.slice((.., cols)), &t);
                })
                .unwrap();
        }
        assert_eq!(c.to_array().unwrap(), a.to_array().unwrap());
        // Both storing the same contiguous row is a race on the first element.
        let out = c.as_output();
        let e = Launch::new(2)
            .run(|| {
                let t = nl::load(a.slice((0..1, ..)));
                nl::store(out.slice((0..1, ..)), &t);
            })
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::OutputDependency);
        assert!(e.message().contains("element [0, 0]"), "{e}");
    }

    #[test]
    fn block_tags_detect_exactly_the_overlapping_stores() {
        // Views (rows, first column, columns, column step) of a [3, 37] tensor: 37 is not a
        // multiple of the tag block, so whole blocks, partial blocks and the short last block
        // all occur, and the tensor is reused across launches (stale and mixed tags), in
        // execute and in estimate mode.
        let (rows, cols) = (3usize, 37usize);
        let a = Hbm::<f32>::full([rows, cols], 1.0);
        let mut c = Hbm::<f32>::zeros([rows, cols]);
        let mut shapes = Hbm::<f32>::shape_only([rows, cols]);
        let mut s = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: usize| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s % n as u64) as usize
        };
        // Block-aligned cases first (only whole-block and mixed-block tags meet), then random.
        let mut cases = vec![
            vec![(0..1, 0, 37, 1), (0..1, 16, 16, 1)],
            vec![(0..3, 0, 32, 1), (1..2, 16, 16, 1)],
            vec![(0..1, 0, 16, 2), (0..1, 16, 16, 1)],
            vec![(0..1, 1, 16, 2), (0..1, 0, 16, 1)],
            vec![(0..2, 0, 16, 1), (2..3, 0, 37, 1)],
        ];
        for _ in 0..300 {
            let mut views = Vec::new();
            for _ in 0..2 {
                let r0 = next(rows);
                let r1 = r0 + 1 + next(rows - r0);
                let step = 1 + next(3) * next(2);
                let c0 = next(cols);
                let n = 1 + next((cols - c0).div_ceil(step));
                views.push((r0..r1, c0, n, step));
            }
            cases.push(views);
        }
        let mut conflicts = 0;
        for views in cases {
            let cells = |v: &(std::ops::Range<usize>, usize, usize, usize)| {
                let (rr, c0, n, st) = v.clone();
                rr.flat_map(move |r| (0..n).map(move |j| (r, c0 + j * st)))
                    .collect::<std::collections::HashSet<_>>()
            };
            let overlap = !cells(&views[0]).is_disjoint(&cells(&views[1]));
            // Estimate mode keeps the same tags without values, here on a shape-only tensor.
            for (mode, c) in [(Mode::Execute, &mut c), (Mode::Estimate, &mut shapes)] {
                let out = c.as_output();
                let r = Launch::new(2).mode(mode).run(|| {
                    let (rr, c0, n, st) = views[nl::program_id(0)].clone();
                    let cs = stepped(c0..c0 + (n - 1) * st + 1, st);
                    let t = nl::load(a.slice((rr.clone(), cs)));
                    nl::store(out.slice((rr.clone(), cs)), &t);
                    // Storing the same view again from the same instance is no conflict.
                    nl::store(out.slice((rr, cs)), &t);
                });
                assert_eq!(r.is_err(), overlap, "{mode:?}, views {views:?}: {r:?}");
            }
            conflicts += overlap as usize;
        }
        assert!(conflicts > 20 && conflicts < 280, "{conflicts} conflicts");
    }

    #[test]
    fn stores_round_to_the_tensor_dtype() {
        let vals = [1.0 + 2f32.powi(-8), 1.0 + 3.0 * 2f32.powi(-8), -3.3, 1e-40];
        let a = Hbm::<f32>::from_vec(&[1, 4], vals.to_vec()).unwrap();
        let mut c = Hbm::<bf16>::zeros([1, 4]);
        let out = c.as_output();
        Launch::new(1)
            .run(|| nl::store(&out, &nl::load(&a)))
            .unwrap();
        let want: Vec<f32> = vals.iter().map(|&v| bf16::from_f32(v).to_f32()).collect();
        assert_eq!(c.to_f32_vec().unwrap(), want);
    }
}
