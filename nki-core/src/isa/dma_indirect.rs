//! Indirect DMA: gathers and scatters of HBM rows chosen at run time by an SBUF index tile,
//! NKI 0.7's `t.ap(pattern, offset, vector_offset=idx, indirect_dim=0)` on either side of
//! `nisa.dma_copy` or as a source / destination of `nisa.dma_compute` (gather-add into SBUF,
//! scatter-add into HBM).
//!
//! Semantics (NKI's access-pattern guide and the `dma_copy` / `dma_compute` docs): element
//! `(p, i1, i2, ..)` of the view is element `offset + idx[p] * row_step + i1 * step1 + ..` of
//! the tensor's row-major storage, where `row_step` is the product of the tensor's dimensions
//! after the first (the pattern's own leading step is ignored) and `idx` is the `[P, 1]`
//! int32/uint32 SBUF index tile. The indexed tensor must be in HBM; the transfer uses
//! software DGE (descriptor generation on GpSimdE; `dge_mode` none or hwdge is an error).
//!
//! An index whose row lies outside the tensor (below 0, at or past its first dimension, or
//! reaching past its storage) is an [`ErrorKind::OutOfBounds`] error naming the op, the
//! tensor, the index tile and the user's line under `oob_mode=error` (the default); under
//! `oob_mode=skip` that partition's row is not transferred (a gather leaves its destination
//! row as it was, a scatter writes nothing for it). The rows a scatter writes must be
//! distinct: the DMA queues write them in no fixed order, so two partitions naming one row
//! is an error here (NKI's `unique_indices=True`, the only setting 0.7 supports with
//! `vector_offset`).
//!
//! Estimate mode carries no index values: the record reads (and a scatter writes) the whole
//! indexed tensor, a scatter claims it as an atomic-kind writer (so instances scattering
//! into one output do not conflict with each other, and the output counts as written), and a
//! gather from a kernel output is not checked for uninitialised reads. Execute and simulate
//! modes check every row: races with other writers and reads of unwritten rows, as stores
//! and loads are checked.

use super::base::short;
use super::op::Op;
use crate::access::{Ap, Shape, MAX_DIMS};
use crate::dtype::DType;
use crate::error::{ErrorKind, NkiError, Result};
use crate::hbm::HbmView;
use crate::record::{MemKind, Region};
use crate::tile::TileRef;

/// An HBM access pattern whose first dimension picks rows at run time from an SBUF index
/// tile: NKI 0.7's `t.ap(pattern, offset, vector_offset=idx, indirect_dim=0)`, made by
/// [`HbmView::ap_indirect`] (and the same method on writable views and HBM tensors). It is a
/// [`dma_copy`](super::dma_copy) source (a gather) or destination (a scatter), and a
/// [`dma_compute`](super::dma_compute) operand (see the module docs of `nisa`).
#[derive(Clone, Debug)]
pub struct IndirectAp<'a> {
    /// The pattern as if `idx[p] = p`: dimension 0 steps by `row_step`.
    pub(crate) rows: HbmView,
    /// Elements between consecutive rows of the indexed tensor.
    pub(crate) row_step: usize,
    /// Rows of the indexed tensor (its first dimension).
    pub(crate) nrows: usize,
    /// The `[P, 1]` int32/uint32 SBUF index tile.
    pub(crate) index: TileRef<'a>,
    /// False for views of kernel inputs (not a scatter target).
    pub(crate) writable: bool,
}

impl<'a> IndirectAp<'a> {
    /// The pattern `pattern` (`[step, num]` pairs, outermost first) at `offset` over the
    /// storage of `view`'s tensor, its first pair's rows chosen by `index`.
    pub(crate) fn new(
        view: &HbmView,
        pattern: &[[usize; 2]],
        offset: usize,
        index: TileRef<'a>,
        writable: bool,
    ) -> Result<IndirectAp<'a>> {
        const OP: &str = "ap";
        let st = &view.st;
        let what = format!("tensor {} {}", st.name, st.shape);
        let fail = |kind, msg: String| Err(NkiError::new(kind, OP, msg));
        if pattern.is_empty() || pattern.len() > MAX_DIMS || pattern.iter().any(|p| p[1] == 0) {
            return fail(
                ErrorKind::InvalidArgument,
                format!(
                    "access pattern {pattern:?} of {what} with a vector_offset needs 1 to \
                     {MAX_DIMS} [step, num] pairs, each with num >= 1"
                ),
            );
        }
        let parts = pattern[0][1];
        // dma_transpose's gather form takes a [p, n] index covering the rows: n > 1, or more
        // rows than the pattern's (p a multiple of 16 up to 128, the rows a multiple of 16).
        let (p, n) = (index.partitions(), index.free_size());
        let wide = p * n >= parts
            && (n > 1
                || (p > parts && p.is_multiple_of(16) && p <= 128 && parts.is_multiple_of(16)));
        if !(wide && index.mem() == MemKind::Sbuf && index.shape().len() == 2) {
            let on = format!("the access pattern {pattern:?} on {what}");
            check_index(&index, parts, OP, &on)?;
        }
        let dims = st.shape.dims();
        let row_step: usize = dims[1..].iter().product();
        let reach = pattern[1..]
            .iter()
            .try_fold(0usize, |r, p| r.checked_add(p[0].checked_mul(p[1] - 1)?));
        let numel = st.shape.numel();
        if reach.is_none_or(|r| offset.saturating_add(r) >= numel) {
            return fail(
                ErrorKind::OutOfBounds,
                format!(
                    "access pattern {pattern:?} at offset {offset} of {what} reaches outside its \
                     {numel} elements even for row index 0"
                ),
            );
        }
        let shape_dims: Vec<usize> = pattern.iter().map(|p| p[1]).collect();
        let shape = Shape::new(&shape_dims)
            .map_err(|e| NkiError::new(e.kind(), OP, e.message().to_string()))?;
        let mut strides = [0isize; MAX_DIMS];
        strides[0] = row_step as isize;
        for (k, p) in pattern.iter().enumerate().skip(1) {
            strides[k] = p[0] as isize;
        }
        let ap = Ap {
            offset,
            shape,
            strides,
        };
        Ok(IndirectAp {
            rows: HbmView::of(st.clone(), ap),
            row_step,
            nrows: dims[0],
            index,
            writable,
        })
    }

    /// NKI 0.7 `view.vector_select(0, index)`: dimension 0 of `view` indexed per partition by
    /// the `[P, 1]` index tile, the other dimensions kept. Element `(p, i1, ..)` is element
    /// `(index[p], i1, ..)` of the view; an index outside `0..view.shape[0]` is out of bounds.
    pub(crate) fn select_rows(
        view: &HbmView,
        dim: usize,
        index: TileRef<'a>,
        writable: bool,
    ) -> Result<IndirectAp<'a>> {
        const OP: &str = "vector_select";
        let what = view.describe();
        let fail = |kind, msg: String| Err(NkiError::new(kind, OP, msg));
        let (dims, stride0) = (view.ap.shape.dims(), view.ap.strides[0]);
        if dim != 0 || stride0 <= 0 {
            return fail(
                ErrorKind::InvalidArgument,
                format!(
                    "vector_select on dimension {dim} of {what}: the selected dimension must be \
                     dimension 0, with a positive stride (not a broadcast one; it has {stride0})"
                ),
            );
        }
        let parts = index.partitions();
        check_index(&index, parts, OP, &what)?;
        let mut shape = dims.to_vec();
        shape[0] = parts;
        let shape =
            Shape::new(&shape).map_err(|e| NkiError::new(e.kind(), OP, e.message().to_string()))?;
        let ap = Ap {
            offset: view.ap.offset,
            shape,
            strides: view.ap.strides,
        };
        Ok(IndirectAp {
            rows: HbmView::of(view.st.clone(), ap),
            row_step: stride0 as usize,
            nrows: dims[0],
            index,
            writable,
        })
    }

    /// The view's shape: `[P, ..]`, the pattern's counts.
    pub fn shape(&self) -> &[usize] {
        self.rows.shape()
    }

    /// The indexed tensor's dtype.
    pub fn dtype(&self) -> DType {
        self.rows.dtype()
    }

    /// The index tile (NKI's `vector_offset`).
    pub fn index(&self) -> TileRef<'a> {
        self.index
    }

    /// Partitions (rows) of the pattern.
    pub(crate) fn partitions(&self) -> usize {
        self.rows.ap.shape.dims()[0]
    }

    /// Elements of one row of the pattern.
    pub(crate) fn row_len(&self) -> usize {
        self.rows.ap.shape.numel() / self.partitions()
    }

    /// The row of index `i`, or `None` when it lies outside the tensor.
    fn row(&self, i: i64) -> Option<HbmView> {
        if i < 0 || i as u64 >= self.nrows as u64 {
            return None;
        }
        let start = self
            .rows
            .ap
            .offset
            .checked_add((i as usize).checked_mul(self.row_step)?)?;
        let nd = self.rows.ap.shape.ndim();
        let (dims, strides) = if nd == 1 {
            (vec![1], [1isize; MAX_DIMS])
        } else {
            let mut s = [0isize; MAX_DIMS];
            s[..nd - 1].copy_from_slice(&self.rows.ap.strides[1..nd]);
            (self.rows.ap.shape.dims()[1..].to_vec(), s)
        };
        let ap = Ap {
            offset: start,
            shape: Shape::of_valid(&dims),
            strides,
        };
        (ap.span().1 <= self.rows.st.shape.numel()).then(|| HbmView::of(self.rows.st.clone(), ap))
    }

    /// The whole indexed tensor (what the record reads or writes: the rows are not known
    /// before the kernel runs).
    pub(super) fn whole(&self) -> HbmView {
        HbmView::of(self.rows.st.clone(), self.rows.st.whole)
    }

    /// The record region of the whole indexed tensor.
    pub(crate) fn region(&self) -> Region {
        self.whole().region()
    }

    /// Description for messages.
    pub(crate) fn describe(&self) -> String {
        format!(
            "{}{} (rows of {} chosen by vector_offset {})",
            self.rows.st.name,
            self.rows.ap.shape,
            self.rows.st.shape,
            self.index.describe()
        )
    }

    /// Whether `other` names the same rows of the same tensor through the same index tile.
    pub(super) fn same_as(&self, other: &IndirectAp) -> bool {
        self.rows.st.id == other.rows.st.id
            && self.rows.ap == other.rows.ap
            && std::ptr::eq(self.index.tile, other.index.tile)
            && self.index.ap == other.index.ap
    }
}

/// The rule of a `vector_offset` index tile of op `op` on `what`: an int32 or uint32 SBUF
/// tile of shape `[parts, 1]`.
fn check_index(index: &TileRef, parts: usize, op: &'static str, what: &str) -> Result<()> {
    if index.mem() != MemKind::Sbuf
        || !matches!(index.dtype(), DType::I32 | DType::U32)
        || index.partitions() != parts
        || index.free_size() != 1
    {
        return Err(NkiError::new(
            ErrorKind::InvalidArgument,
            op,
            format!(
                "vector_offset {} of {what} must be an int32 or uint32 SBUF tensor of shape \
                 [{parts}, 1] (one row index per partition)",
                index.describe()
            ),
        ));
    }
    Ok(())
}

/// The row each partition of `ind` names (read from its index tile), `None` for a row
/// skipped under `oob_mode=skip`; an out-of-range index under `oob_mode=error`, or (for a
/// scatter) two partitions naming one row, fails the op (`skip`: `oob_mode=skip`).
pub(super) fn index_rows(
    ins: &Op,
    ind: &IndirectAp,
    skip: bool,
    scatter: bool,
) -> Vec<Option<HbmView>> {
    let name = short(ins.api);
    let ids = ind.index.gather_slots(ins.api, ins.loc);
    let dt = ind.index.dtype();
    // Row `p` takes index `(p % rows, p / rows)` of the `[rows, n]` index tile (column-major:
    // NKI's `indices.T.flatten()`); one index per partition when `n` is 1.
    let (idx_rows, n) = (ind.index.partitions(), ind.index.free_size());
    let mut seen = std::collections::HashMap::new();
    let rows = (0..ind.partitions())
        .map(|p| {
            let i = dt.int(ids[(p % idx_rows) * n + p / idx_rows]);
            let row = ind.row(i);
            if row.is_none() && !skip {
                ins.fail(
                    ErrorKind::OutOfBounds,
                    format!(
                        "index {i} at partition {p} of vector_offset {} is out of bounds for \
                         {} (rows 0..{} of tensor {} {}, {} elements) in '{name}' with \
                         oob_mode=error (oob_mode=skip skips such rows)",
                        ind.index.describe(),
                        ind.describe(),
                        ind.nrows,
                        ind.rows.st.name,
                        ind.rows.st.shape,
                        ind.rows.st.shape.numel()
                    ),
                );
            }
            if scatter && row.is_some() {
                if let Some(q) = seen.insert(i, p) {
                    ins.fail(
                        ErrorKind::InvalidArgument,
                        format!(
                            "partitions {q} and {p} of vector_offset {} both name row {i} of \
                             {}: the rows of a scatter must be distinct (unique_indices; the \
                             DMA queues write them in no fixed order)",
                            ind.index.describe(),
                            ind.describe()
                        ),
                    );
                }
            }
            row
        })
        .collect();
    crate::tile::give_buf(ids);
    rows
}

#[cfg(test)]
mod tests {
    use super::super::trace::run;
    use super::super::*;
    use crate::context::Mode;
    use crate::dtype::DType;
    use crate::hbm::Hbm;
    use crate::lang;
    use crate::record::{Engine, MemKind, Opcode};

    #[test]
    fn a_gather_is_software_dge_reading_the_index_and_the_whole_tensor() {
        let data = Hbm::<f32>::from_vec(&[10, 6], (0..60).map(|x| x as f32).collect()).unwrap();
        let ids = Hbm::<i32>::from_vec(&[5, 1], vec![3, 0, 9, 3, 7]).unwrap();
        let (sd, si) = (
            Hbm::<f32>::shape_only([10, 6]),
            Hbm::<i32>::shape_only([5, 1]),
        );
        let mut got = Vec::new();
        for (mode, d, i) in [(Mode::Simulate, &data, &ids), (Mode::Estimate, &sd, &si)] {
            let recs = run(mode, || {
                let idx = lang::ndarray(&[5, 1], DType::I32, MemKind::Sbuf);
                dma_copy(&idx, i, None);
                let t = lang::ndarray(&[5, 6], DType::F32, MemKind::Sbuf);
                dma_copy(&t, d.view().ap_indirect(&[[6, 5], [1, 6]], 0, &idx), None);
            })
            .expect("runs");
            let k = recs
                .iter()
                .position(|r| r.opcode == Opcode::DmaDescriptors)
                .expect("software DGE generates descriptors");
            assert_eq!(recs[k].engine, Engine::GpSimd);
            let g = &recs[k + 1];
            assert_eq!((g.engine, g.opcode), (Engine::Dma, Opcode::DmaCopy));
            let dma = g.dma.expect("DMA dimensions");
            // 5 rows of 6 fp32: one 24-byte run each.
            assert_eq!((dma.bytes, dma.chunk_bytes, dma.partitions), (120, 24, 5));
            // Reads: the whole data tensor (rows unknown before run time) and the index tile.
            assert_eq!(g.reads.len(), 2);
            assert_eq!((g.reads[0].lo, g.reads[0].hi), (0, 240));
            assert_eq!(
                g.reads[1],
                recs[k - 1].writes[0],
                "the index tile the first DMA wrote"
            );
            got.push(
                recs.iter()
                    .map(|r| (r.engine, r.opcode, r.reads.to_vec(), r.writes.to_vec()))
                    .collect::<Vec<_>>(),
            );
        }
        assert_eq!(got[0].len(), got[1].len());
    }
}
