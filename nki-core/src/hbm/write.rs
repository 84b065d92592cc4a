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

use super::pages::Pages;
use super::writers::Writers;
use super::{no_data, HbmData, HbmView};
use crate::access::Ap;
use crate::context::LaunchShared;
use crate::error::{ErrorKind, NkiError, Result, SourceLoc};
use crate::tile::TileRef;

/// Elements per writer-tag block.
pub(crate) const BLOCK: usize = 16;
/// Block tags per page of block tags (a page covers 65536 elements).
pub(crate) const BLOCKS_PER_PAGE: usize = 4096;
/// Block tag meaning "the elements of this block carry their own tags".
pub(crate) const MIXED: u32 = u32::MAX;

/// Checks the value operand of a write into HBM (`store`, `atomic_rmw`) and that it fits the
/// destination as the DMA moves it: the same partition count (a 1-D destination is one
/// partition) and the same elements per partition, the free dimensions being flattened in
/// row-major order (a `[4, 3, 5]` tile stores into `[4, 15]`). Any other pair is a
/// [`ErrorKind::ShapeMismatch`] error of operation `op` (named `name` in the message), even
/// with equal element counts: a `[128, 512]` tile does not store into `[512, 128]` or
/// `[64, 1024]` (no implicit reshape across partitions).
pub(crate) fn check_dest_value(
    op: &'static str,
    name: &str,
    dst: &HbmView,
    src: &TileRef,
    loc: SourceLoc,
) {
    crate::context::check(crate::isa::base::operand(op, "value", src), loc);
    let d = dst.shape();
    let (dp, dfree) = match d.len() {
        1 => (1, d[0]),
        _ => (d[0], d[1..].iter().product()),
    };
    if (dp, dfree) != (src.partitions(), src.free_size()) {
        crate::context::raise(
            NkiError::new(
                ErrorKind::ShapeMismatch,
                op,
                format!(
                    "destination {} and value {} of '{name}' have different shapes \
                     (partitions and elements per partition must match)",
                    dst.describe(),
                    src.describe()
                ),
            ),
            loc,
        );
    }
}

/// Writes row-major `vals` (slots of the tensor dtype, stored as they are) into `dst`, tagging each element with
/// `writer`. An element already written in this launch by a conflicting writer is an
/// output-dependency error naming both writers and the element.
pub(crate) fn write(
    dst: &HbmView,
    vals: Vec<f32>,
    writer: u32,
    shared: &LaunchShared,
) -> Result<()> {
    let r = write_slice(dst, &vals, true, writer, shared);
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
        writes,
        reads,
    } = &mut *g;
    let Some(values) = values.as_mut() else {
        return Err(no_data(st, "store"));
    };
    let mut tags = Tags::new(writes, writer, &shared.writers);
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
                values[e] = if exact { v } else { dtype.slot(v) };
            }
        }
    });
    written(tags, dst, reads, shared, "store")
}

/// The tracking half of [`write`] without values (estimate mode): tags the elements of `dst`
/// with `writer` and reports a conflicting earlier writer (or reader) exactly as a store would.
/// Works on shape-only tensors; tag pages are allocated where the tracked writes land.
pub(crate) fn track(dst: &HbmView, writer: u32, shared: &LaunchShared) -> Result<()> {
    let st = &dst.st;
    let mut g = st.write();
    let HbmData { writes, reads, .. } = &mut *g;
    let mut tags = Tags::new(writes, writer, &shared.writers);
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
    written(tags, dst, reads, shared, "store")
}

/// Tags the elements of `dst` as updated by the atomic writer `writer` (see
/// [`Writers::merge_atomic`]), on the tag arrays of the locked tensor data `data` (the
/// caller updates the values under the same lock; estimate mode calls this alone). An element
/// stored (or loaded) by an unordered writer (reader) is an output-dependency error naming
/// both.
pub(crate) fn atomic(
    dst: &HbmView,
    data: &mut HbmData,
    writer: u32,
    shared: &LaunchShared,
) -> Result<()> {
    let HbmData { writes, reads, .. } = data;
    let mut tags = Tags::new(writes, writer, &shared.writers);
    let mut merge = Merge::new(writer, &shared.writers);
    visit(&mut tags, &dst.ap, |chk, old, e| {
        merge.tag(&mut chk.conflict, old, e)
    });
    written(tags, dst, reads, shared, "nl.atomic_rmw")
}

/// Notes that `reader` (a program instance at one affine_range position, see
/// [`super::writers::WriterKind::Read`]) loads `src` by operation `op`, on a tensor that is a
/// kernel output of the running launch: an element an unordered writer (another instance, or
/// another iteration of an affine_range) stored or updated is an output-dependency error
/// naming both, and the read is remembered, so an unordered write that comes later is one
/// too. Loads by unordered readers of one element never conflict. An element nothing wrote
/// yet in this launch is an [`ErrorKind::UninitializedRead`] error.
pub(crate) fn read(
    src: &HbmView,
    reader: u32,
    shared: &LaunchShared,
    op: &'static str,
) -> Result<()> {
    let mut g = src.st.write();
    let HbmData { writes, reads, .. } = &mut *g;
    let mut w = Tags::new(writes, reader, &shared.writers);
    let mut unwritten = None;
    visit(&mut w, &src.ap, |chk, old, e| {
        if old < chk.base {
            unwritten.get_or_insert(e);
        }
        chk.check(old, e);
        old
    });
    w.finish(src, op)?;
    if let Some(e) = unwritten {
        return Err(NkiError::new(
            ErrorKind::UninitializedRead,
            op,
            format!(
                "reads element {:?} of output {} ({}) before anything in this launch wrote it; \
                 kernel outputs start uninitialised",
                Ap::unravel(e, &src.st.shape),
                src.st.name,
                src.describe()
            ),
        ));
    }
    let mut r = Tags::new(reads, reader, &shared.writers);
    let mut merge = Merge::new(reader, &shared.writers);
    visit(&mut r, &src.ap, |chk, old, e| {
        merge.tag(&mut chk.conflict, old, e)
    });
    r.finish(src, op)
}

/// Notes a load of `src` by operation `op` of the running instance (at `loc`): when the
/// tensor is an output of the running launch, the load is checked and remembered by
/// [`read`]: a read-write race, or a read of an element nothing wrote yet in this launch,
/// fails the instance. Loads of kernel inputs cost nothing here.
pub(crate) fn track_load(src: &HbmView, op: &'static str, loc: SourceLoc) {
    let Some((reader, shared)) = crate::context::with_ctx(op, loc, |c| {
        c.shared
            .is_output(src.st.id)
            .then(|| (c.reader_id(loc), c.shared.clone()))
    }) else {
        return;
    };
    if let Err(e) = read(src, reader, &shared, op) {
        crate::context::raise(e, loc);
    }
}

/// Ends a tracked write of `dst` (operation `op`) whose writer tags are `tags`: reports a
/// conflicting earlier writer, notes the tensor written in this launch, and checks the write
/// against the launch's loads of the tensor (`reads`).
fn written(
    tags: Tags,
    dst: &HbmView,
    reads: &mut TagSet,
    shared: &LaunchShared,
    op: &'static str,
) -> Result<()> {
    let writer = tags.chk.writer;
    tags.finish(dst, op)?;
    dst.st
        .last_writer
        .fetch_max(writer, std::sync::atomic::Ordering::SeqCst);
    against_reads(dst, reads, writer, shared, op)
}

/// Checks the write of `dst` by `writer` against the loads of this launch (`reads`): an
/// element loaded by an unordered reader is an output-dependency error naming both.
fn against_reads(
    dst: &HbmView,
    reads: &mut TagSet,
    writer: u32,
    shared: &LaunchShared,
    op: &'static str,
) -> Result<()> {
    if reads.is_empty() {
        return Ok(());
    }
    let mut t = Tags::new(reads, writer, &shared.writers);
    visit(&mut t, &dst.ap, |chk, old, e| {
        chk.check(old, e);
        old
    });
    t.finish(dst, op)
}

/// Visits the tag of every element of view `ap` (one block tag for each whole block of a
/// contiguous run): `f(check, old tag, element)` returns the new tag.
fn visit(tags: &mut Tags, ap: &Ap, mut f: impl FnMut(&mut Check, u32, usize) -> u32) {
    let s = ap.inner_stride();
    ap.for_each_row(|off, n| {
        if s != 1 {
            for j in 0..n {
                tags.element_with((off as isize + j as isize * s) as usize, &mut f);
            }
            return;
        }
        let end = off + n;
        let (b0, b1) = (off.div_ceil(BLOCK), end / BLOCK);
        if b0 >= b1 {
            (off..end).for_each(|e| tags.element_with(e, &mut f));
            return;
        }
        (off..b0 * BLOCK).for_each(|e| tags.element_with(e, &mut f));
        for b in b0..b1 {
            let old = tags.set.blocks.get(b);
            if old == MIXED {
                (b * BLOCK..(b + 1) * BLOCK).for_each(|e| tags.element_with(e, &mut f));
            } else {
                let new = f(&mut tags.chk, old, b * BLOCK);
                tags.set.blocks.set(b, new);
            }
        }
        (b1 * BLOCK..end).for_each(|e| tags.element_with(e, &mut f));
    });
}

/// The tag updates of one atomic writer (or reader), remembering the last merge (a store of
/// whole rows leaves long runs of one tag).
struct Merge<'a> {
    writer: u32,
    writers: &'a Writers,
    /// The last (old tag, new tag) merge that did not conflict.
    last: Option<(u32, u32)>,
}

impl<'a> Merge<'a> {
    fn new(writer: u32, writers: &'a Writers) -> Self {
        Merge {
            writer,
            writers,
            last: None,
        }
    }

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
}

/// The tags of one tensor's writes, or of its loads: per block of [`BLOCK`] elements, and per
/// element in the blocks marked [`MIXED`]; both paged (allocated where accesses land).
#[derive(Default)]
pub(crate) struct TagSet {
    blocks: Pages<BLOCKS_PER_PAGE>,
    elems: Pages<BLOCK>,
}

impl TagSet {
    /// True when no access was ever tagged.
    fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }
}

/// The writer tags of one tensor during one store.
struct Tags<'a> {
    set: &'a mut TagSet,
    chk: Check<'a>,
}

/// The conflict check of one store's writer against the previous tags it meets.
struct Check<'a> {
    writer: u32,
    base: u32,
    writers: &'a Writers,
    /// The first conflicting (previous writer, element).
    conflict: Option<(u32, usize)>,
    /// A previous writer already found not to conflict.
    ok_pair: Option<u32>,
}

impl Check<'_> {
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
}

impl<'a> Tags<'a> {
    /// The tags `set` of a tensor for one access by `writer`.
    fn new(set: &'a mut TagSet, writer: u32, writers: &'a Writers) -> Self {
        Tags {
            set,
            chk: Check {
                writer,
                base: writers.base(),
                writers,
                conflict: None,
                ok_pair: None,
            },
        }
    }

    /// The output-dependency error of the write (by operation `op`) into `dst`, if it met a
    /// conflicting writer.
    fn finish(self, dst: &HbmView, op: &'static str) -> Result<()> {
        let Some((old, e)) = self.chk.conflict else {
            return Ok(());
        };
        let st = &dst.st;
        let idx = Ap::unravel(e, &st.shape);
        let writers = self.chk.writers;
        let new = self.chk.writer;
        let (a, b) = (writers.describe(old), writers.describe(new));
        let (access, rule) = match (writers.is_read(old), writers.is_read(new)) {
            (true, _) => (format!("is read by {a} and written by {b}"), "read"),
            (_, true) => (format!("is written by {a} and read by {b}"), "read"),
            _ => (format!("is written by {a} and again by {b}"), "write"),
        };
        Err(NkiError::new(
            ErrorKind::OutputDependency,
            op,
            format!(
                "unexpected output dependencies: element {idx:?} of {} {access} (this {op} covers \
                 {}); each program instance and each affine_range iteration must {rule} \
                 locations no other one writes, or use sequential_range",
                st.name,
                dst.describe()
            ),
        ))
    }

    /// Splits block `b` into per-element tags (once).
    #[inline]
    fn split(&mut self, b: usize) {
        let tag = self.set.blocks.get(b);
        if tag != MIXED {
            self.set.elems.page_mut(b).fill(tag);
            self.set.blocks.set(b, MIXED);
        }
    }

    /// Tags element `e` with this store's writer.
    fn element(&mut self, e: usize) {
        self.element_with(e, |chk, old, e| {
            chk.check(old, e);
            chk.writer
        });
    }

    /// Gives element `e` the tag `f(check, old tag, e)`; its block is split into per-element
    /// tags only when the element's tag changes and its block has one tag.
    #[inline]
    fn element_with(&mut self, e: usize, mut f: impl FnMut(&mut Check, u32, usize) -> u32) {
        let b = e / BLOCK;
        let block = self.set.blocks.get(b);
        if block != MIXED {
            let new = f(&mut self.chk, block, e);
            if new != block {
                self.split(b);
                self.set.elems.set(e, new);
            }
            return;
        }
        let old = self.set.elems.get(e);
        let new = f(&mut self.chk, old, e);
        self.set.elems.set(e, new);
    }

    /// Tags the contiguous run of elements `off..off + n`: whole blocks by their block tag
    /// (page by page), the partial blocks at either end element by element.
    fn run(&mut self, off: usize, n: usize) {
        let end = off + n;
        let (b0, b1) = (off.div_ceil(BLOCK), end / BLOCK);
        if b0 >= b1 {
            (off..end).for_each(|e| self.element(e));
            return;
        }
        (off..b0 * BLOCK).for_each(|e| self.element(e));
        let mut b = b0;
        while b < b1 {
            let hi = ((b / BLOCKS_PER_PAGE + 1) * BLOCKS_PER_PAGE).min(b1);
            self.blocks_run(b, hi);
            b = hi;
        }
        (b1 * BLOCK..end).for_each(|e| self.element(e));
    }

    /// Tags the whole blocks `b0..b1`, all on one page.
    fn blocks_run(&mut self, b0: usize, b1: usize) {
        let (w, base) = (self.chk.writer, self.chk.base);
        let first = b0 % BLOCKS_PER_PAGE;
        let TagSet { blocks, elems } = &mut *self.set;
        let page = &mut blocks.page_mut(b0 / BLOCKS_PER_PAGE)[first..first + (b1 - b0)];
        // Branch-free scan (it vectorises): every block unwritten in this launch or ours.
        let clean = page
            .iter()
            .fold(true, |ok, &old| ok & ((old == w) | (old < base)));
        if !clean {
            for (b, &old) in (b0..b1).zip(page.iter()) {
                if old == MIXED {
                    let tags = elems.page_mut(b);
                    for (e, &o) in (b * BLOCK..).zip(tags.iter()) {
                        self.chk.check(o, e);
                    }
                } else {
                    self.chk.check(old, b * BLOCK);
                }
            }
        }
        page.fill(w);
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
