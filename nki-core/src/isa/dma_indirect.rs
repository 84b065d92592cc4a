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
use super::dma::{DgeMode, DmaEndpoint, DmaOpts, OobMode};
use crate::access::{Ap, Ix, Shape, MAX_DIMS};
use crate::context::Op;
use crate::dtype::DType;
use crate::error::{ErrorKind, NkiError, Result};
use crate::hbm::HbmView;
use crate::record::{Engine, MemKind, Region};
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
        if index.mem() != MemKind::Sbuf
            || !matches!(index.dtype(), DType::I32 | DType::U32)
            || index.partitions() != parts
            || index.free_size() != 1
        {
            return fail(
                ErrorKind::InvalidArgument,
                format!(
                    "vector_offset {} of the access pattern {pattern:?} on {what} must be an \
                     int32 or uint32 SBUF tensor of shape [{parts}, 1] (one row index per \
                     partition of the pattern)",
                    index.describe()
                ),
            );
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
    fn whole(&self) -> HbmView {
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
    fn same_as(&self, other: &IndirectAp) -> bool {
        self.rows.st.id == other.rows.st.id
            && self.rows.ap == other.rows.ap
            && std::ptr::eq(self.index.tile, other.index.tile)
            && self.index.ap == other.index.ap
    }
}

/// What one indirect DMA does.
enum Form {
    /// `dst = src[idx]`.
    Gather,
    /// `dst[idx] = src`.
    Scatter,
    /// `dst = dst + src[idx]` (dma_compute, dst in SBUF).
    GatherAdd,
    /// `dst[idx] = dst[idx] + src` (dma_compute, dst in HBM).
    ScatterAdd,
}

/// The DMA builder for transfers with an indirect side (called by `dma.rs`'s `transfer`
/// after the checks common to every DMA: no PSUM side, equal element counts, the options).
pub(super) fn transfer(ins: &Op, dst: DmaEndpoint, srcs: &[DmaEndpoint], opts: &DmaOpts) {
    let api = ins.api;
    let name = short(api);
    if !matches!(opts.dge_mode, DgeMode::Unknown | DgeMode::Swdge)
        || opts.engine.is_some_and(|e| e != Engine::GpSimd)
    {
        ins.fail(
            ErrorKind::InvalidArgument,
            format!(
                "'{name}' with a vector_offset gathers or scatters through software DGE \
                 (GpSimdE): dge_mode={:?}{} cannot; leave dge_mode unknown or use swdge",
                opts.dge_mode,
                opts.engine
                    .map(|e| format!(" with engine {}", e.name()))
                    .unwrap_or_default()
            ),
        );
    }
    let is_ind = |e: &DmaEndpoint| matches!(e, DmaEndpoint::Indirect(_));
    let (form, ind, other): (Form, &IndirectAp, &DmaEndpoint) = match (&dst, srcs) {
        (DmaEndpoint::Indirect(d), [s]) if !is_ind(s) => (Form::Scatter, d, s),
        (_, [DmaEndpoint::Indirect(s)]) if !is_ind(&dst) => (Form::Gather, s, &dst),
        (DmaEndpoint::Indirect(d), [a, b]) => match (a, b) {
            (DmaEndpoint::Indirect(x), t @ DmaEndpoint::Tile(_))
            | (t @ DmaEndpoint::Tile(_), DmaEndpoint::Indirect(x))
                if x.same_as(d) =>
            {
                (Form::ScatterAdd, d, t)
            }
            _ => compute_forms(ins),
        },
        (DmaEndpoint::Tile(d), [a, b]) => match (a, b) {
            (DmaEndpoint::Tile(t), DmaEndpoint::Indirect(x))
            | (DmaEndpoint::Indirect(x), DmaEndpoint::Tile(t))
                if std::ptr::eq(t.tile, d.tile) && t.ap == d.ap =>
            {
                (Form::GatherAdd, x, &dst)
            }
            _ => compute_forms(ins),
        },
        (_, [_]) => ins.fail(
            ErrorKind::InvalidArgument,
            format!(
                "'{name}' with a vector_offset on both sides ({} and {}) is not supported: one \
                 side gathers or scatters, the other is a plain tensor",
                dst.describe(),
                srcs[0].describe()
            ),
        ),
        _ => compute_forms(ins),
    };
    if !opts.unique_indices {
        ins.fail(
            ErrorKind::InvalidArgument,
            format!(
                "'{name}' with a vector_offset needs unique_indices=true (NKI 0.7 does not \
                 support non-unique indices with vector_offset)"
            ),
        );
    }
    if matches!(form, Form::Scatter | Form::ScatterAdd) && !ind.writable {
        ins.fail(
            ErrorKind::InvalidArgument,
            format!(
                "'{name}' cannot scatter into {}: it is a kernel input (immutable); declare \
                 the parameter as `&mut Hbm<T>` to update it",
                ind.describe()
            ),
        );
    }
    let p = ind.partitions();
    if other.shape().first() != Some(&p) {
        ins.fail(
            ErrorKind::ShapeMismatch,
            format!(
                "{} of '{name}' must have the {p} partitions of the indirect side {} as its \
                 first dimension (one row per index)",
                other.describe(),
                ind.describe()
            ),
        );
    }
    ins.operand("vector_offset", &ind.index);
    // Descriptors: software DGE on GpSimdE, one record before the transfer.
    let swdge = DmaOpts {
        dge_mode: DgeMode::Swdge,
        ..*opts
    };
    super::dma::descriptors(ins, &swdge, &dst, &srcs[0]);
    let tile_out: Vec<&TileRef> = match &dst {
        DmaEndpoint::Tile(t) => vec![t],
        _ => Vec::new(),
    };
    let adds = matches!(form, Form::GatherAdd | Form::ScatterAdd);
    let writer = match form {
        Form::Scatter => Some(ins.hbm_writer()),
        Form::ScatterAdd => Some(ins.hbm_atomic_writer()),
        _ => match &dst {
            DmaEndpoint::Hbm(_) => Some(ins.hbm_writer()),
            _ => None,
        },
    };
    ins.issue(
        &tile_out,
        || {
            let rows = index_rows(
                ins,
                ind,
                opts,
                matches!(form, Form::Scatter | Form::ScatterAdd),
            );
            let n = ind.row_len();
            let read_other = || -> Vec<f32> {
                match other {
                    DmaEndpoint::Hbm(v) => {
                        ins.track_load(v, api);
                        ins.check(v.gather(api))
                    }
                    DmaEndpoint::Tile(t) => t.gather_slots(api, ins.loc),
                    DmaEndpoint::Indirect(_) => unreachable!("one indirect side"),
                }
            };
            match form {
                Form::Gather | Form::GatherAdd => {
                    // Rows read from HBM, cast (or added in fp32) into dst's rows.
                    let mut vals = vec![0.0f32; p * n];
                    let base = if adds {
                        let mut b = read_other();
                        other.dtype().to_values(&mut b);
                        Some(b)
                    } else {
                        None
                    };
                    for (k, row) in rows.iter().enumerate() {
                        let Some(row) = row else { continue };
                        ins.track_load(row, api);
                        let mut r = crate::tile::take_buf(n);
                        ins.check(row.gather_into(api, &mut r));
                        let out = &mut vals[k * n..(k + 1) * n];
                        match &base {
                            Some(b) => {
                                ind.dtype().to_values(&mut r);
                                for ((o, x), y) in out.iter_mut().zip(&r).zip(&b[k * n..]) {
                                    *o = x + y;
                                }
                            }
                            None => out.copy_from_slice(&r),
                        }
                        crate::tile::give_buf(r);
                    }
                    let from = if adds { DType::F32 } else { ind.dtype() };
                    from.cast_slots(other.dtype(), &mut vals);
                    write_rows(ins, other, &rows, vals, n, writer.as_ref());
                }
                Form::Scatter | Form::ScatterAdd => {
                    let mut vals = read_other();
                    if adds {
                        other.dtype().to_values(&mut vals);
                    } else {
                        other.dtype().cast_slots(ind.dtype(), &mut vals);
                    }
                    let (wid, shared) = writer.as_ref().expect("a scatter has a writer");
                    for (k, row) in rows.iter().enumerate() {
                        let Some(row) = row else { continue };
                        let part = &vals[k * n..(k + 1) * n];
                        let r = if adds {
                            crate::hbm::write::atomic(row, Some(part), *wid, shared, ins.loc)
                        } else {
                            crate::hbm::write::write_slice(row, part, true, *wid, shared, ins.loc)
                        };
                        ins.check(r);
                    }
                }
            }
        },
        || {
            let data_src = match form {
                Form::ScatterAdd => other,
                _ => &srcs[0],
            };
            let mut r = super::dma::dma_record(&dst, data_src, ins);
            r.reads = srcs
                .iter()
                .map(|s| s.region())
                .chain([ind.index.region()])
                .collect();
            if adds {
                r.alu = Some(crate::math::AluOp::Add);
            }
            r
        },
    );
    if !ins.executes() {
        if let (Form::Scatter | Form::ScatterAdd, Some((_, shared))) = (&form, &writer) {
            // No index values: the whole tensor is claimed, as an atomic-kind writer.
            let (wid, _) = ins.hbm_atomic_writer();
            ins.check(crate::hbm::write::atomic(
                &ind.whole(),
                None,
                wid,
                shared,
                ins.loc,
            ));
        } else if let (DmaEndpoint::Hbm(v), Some((wid, shared))) = (&dst, &writer) {
            ins.check(crate::hbm::write::track(v, *wid, shared, ins.loc));
        }
    }
}

/// The error for a `dma_compute` with a vector_offset that is neither 0.7 form.
fn compute_forms(ins: &Op) -> ! {
    ins.fail(
        ErrorKind::InvalidArgument,
        format!(
            "'{}' with a vector_offset takes exactly two sources in one of two forms: a \
             scatter-add `dst = HBM.ap(.., vector_offset)` with sources [dst, an SBUF tensor], \
             or a gather-add into an SBUF `dst` with sources [dst, HBM.ap(.., vector_offset)]",
            short(ins.api)
        ),
    )
}

/// The row each partition of `ind` names (read from its index tile), `None` for a row
/// skipped under `oob_mode=skip`; an out-of-range index under `oob_mode=error`, or (for a
/// scatter) two partitions naming one row, fails the op.
fn index_rows(ins: &Op, ind: &IndirectAp, opts: &DmaOpts, scatter: bool) -> Vec<Option<HbmView>> {
    let name = short(ins.api);
    let ids = ind.index.gather_slots(ins.api, ins.loc);
    let dt = ind.index.dtype();
    let mut seen = std::collections::HashMap::new();
    let rows = ids
        .iter()
        .enumerate()
        .map(|(p, &slot)| {
            let i = dt.int(slot);
            let row = ind.row(i);
            if row.is_none() && opts.oob_mode == OobMode::Error {
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

/// Writes gathered rows `vals` (slots of `dst`'s dtype, `n` per partition) into `dst`: all at
/// once when no row was skipped, else partition by partition (skipped rows stay as they were).
fn write_rows(
    ins: &Op,
    dst: &DmaEndpoint,
    rows: &[Option<HbmView>],
    vals: Vec<f32>,
    n: usize,
    writer: Option<&(u32, std::sync::Arc<crate::context::LaunchShared>)>,
) {
    let all = rows.iter().all(Option::is_some);
    let part = |k: usize, keep0: bool, ap: &Ap| -> Ap {
        ins.check(ap.slice(&[Ix::from(k..k + 1)], keep0, "dst"))
    };
    match dst {
        DmaEndpoint::Tile(t) if all => t.scatter_slots(vals),
        DmaEndpoint::Tile(t) => {
            for (k, _) in rows.iter().enumerate().filter(|(_, r)| r.is_some()) {
                let v = TileRef {
                    tile: t.tile,
                    ap: part(k, true, &t.ap),
                };
                v.scatter_slots(vals[k * n..(k + 1) * n].to_vec());
            }
            crate::tile::give_buf(vals);
        }
        DmaEndpoint::Hbm(v) => {
            let (wid, shared) = writer.expect("an HBM destination has a writer");
            if all {
                ins.check(crate::hbm::write::write(v, vals, *wid, shared, ins.loc));
            } else {
                for (k, _) in rows.iter().enumerate().filter(|(_, r)| r.is_some()) {
                    let row = HbmView::of(v.st.clone(), part(k, true, &v.ap));
                    let r = crate::hbm::write::write_slice(
                        &row,
                        &vals[k * n..(k + 1) * n],
                        true,
                        *wid,
                        shared,
                        ins.loc,
                    );
                    ins.check(r);
                }
                crate::tile::give_buf(vals);
            }
        }
        DmaEndpoint::Indirect(_) => unreachable!("one indirect side"),
    }
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
