//! The GpSimdE gathers inside SBUF: `nc_n_gather` (within each partition; `nl.gather_flattened`
//! lowers onto it) and `local_gather` (across the 16 partitions of one GpSimd core).
//!
//! Definitions (NKI 0.7):
//! - `nc_n_gather(dst, data, indices)`: per partition, the free dimensions of `data` are
//!   flattened into one row of `F` elements and `dst[p, j...] = data_flat[p, indices[p, j...]]`.
//!   `indices` is uint32, `dst` has `data`'s dtype (a bit-exact move) and `indices`' elements
//!   per partition; everything is in SBUF. The docs require indices in `[0, F)`; nki-rs fails
//!   the kernel with an [`ErrorKind::OutOfBounds`] error naming the partition, the index and
//!   the bound (NKI returns garbage there).
//! - `local_gather(dst, src_buffer, index, num_elem_per_idx, num_valid_indices)`: each of the
//!   8 GpSimd cores serves 16 partitions. A core reads its 16-partition slice of `index`
//!   (uint16) and flattens it "along the partition dimension first" into `indices_1d`
//!   (`indices_1d[k] = index[16c + k % 16, k / 16]`); only the first `num_valid_indices` of
//!   them are used (all by default). Every partition `p` of the core gathers from its own
//!   partition with that one list: each index is an element offset into `p`'s flattened free
//!   row of `src_buffer`, from which `num_elem_per_idx` (1, 2, 4, 8, 16 or 32) contiguous
//!   elements are read, and they fill `p`'s row of `dst` in order:
//!   `dst_flat[p, k * n + e] = src_flat[p, indices_1d[k] + e]`. This is NKI's own test of the
//!   instruction and its NumPy golden (`test_nki_isa_local_gather.py`: per core,
//!   `np.take(src[16c:16c+16], indices_1d, axis=1)`), where every element of `dst` is written.
//!   Elements of a `dst` row past `num_valid_indices * num_elem_per_idx` are left as they
//!   were. No dtype cast (`dst` has `src_buffer`'s dtype); at most 4096 indices per core; the
//!   partitions of `src_buffer`, `index` and `dst` match and are a multiple of 16.
//!
//! Where the documentation is silent: out-of-range indices are "undefined" in the docs;
//! nki-rs fails with [`ErrorKind::OutOfBounds`]. A `dst` row too small for the gathered
//! elements is an error.
//!
//! Cost: GpSimdE start-up plus one cycle per element written per partition (`150 + N`);
//! no published figure for either instruction \[A\] (the same rule `nl.gather_flattened` has
//! always used).

use super::base::short;
use super::op::Op;
use crate::builder::instruction;
use crate::dtype::DType;
use crate::error::ErrorKind;
use crate::record::{Engine, MemKind, Opcode, Regions};
use crate::tile::{give_buf, TileRef};

/// The `num_elem_per_idx` values `local_gather` accepts.
pub const LOCAL_GATHER_ELEMS: [usize; 6] = [1, 2, 4, 8, 16, 32];

/// Indices one GpSimd core gathers with at most in one `local_gather`.
pub const LOCAL_GATHER_MAX_INDICES: usize = 4096;

/// Partitions one GpSimd core serves.
const CORE_PARTITIONS: usize = 16;

/// Fails unless `t` is an SBUF operand with a legal start partition.
fn sbuf_operand(ins: &Op, what: &str, t: &TileRef) {
    ins.operand(what, t);
    ins.memory(what, t, &[MemKind::Sbuf]);
}

/// Fails unless the index operand `what` has dtype `want`.
fn index_dtype(ins: &Op, what: &str, t: &TileRef, want: DType) {
    if t.dtype() != want {
        ins.fail(
            ErrorKind::DType,
            format!(
                "operand '{what}' {} of '{}' must be {want}, got {}",
                t.describe(),
                short(ins.api),
                t.dtype()
            ),
        );
    }
}

/// Fails unless `dst` has the dtype of the gathered `src` (no cast in a gather).
fn same_dtype(ins: &Op, dst: &TileRef, src: (&str, &TileRef)) {
    if dst.dtype() != src.1.dtype() {
        ins.fail(
            ErrorKind::DType,
            format!(
                "dst {} of '{}' must have the dtype of {} {} (a gather does not cast)",
                dst.describe(),
                short(ins.api),
                src.0,
                src.1.describe()
            ),
        );
    }
}

/// The builder of `nc_n_gather` (and of `nl.gather_flattened`, which calls it on a new tile):
/// checks the operands and issues one GpSimdE gather writing `dst`.
pub(crate) fn n_gather_into(ins: &Op, dst: &TileRef, data: &TileRef, idx: &TileRef) {
    sbuf_operand(ins, "data", data);
    sbuf_operand(ins, "indices", idx);
    index_dtype(ins, "indices", idx, DType::U32);
    ins.same_partitions(("data", data), ("indices", idx));
    sbuf_operand(ins, "dst", dst);
    ins.same_partitions(("indices", idx), ("dst", dst));
    ins.same_free(("indices", idx), ("dst", dst));
    same_dtype(ins, dst, ("data", data));
    let dtype = data.dtype();
    ins.issue(
        &[dst],
        || {
            let f = data.free_size();
            let n = idx.free_size();
            // The gathered elements move as slots (same dtype: bit-exact).
            let vals = data.gather_slots(ins.api, ins.loc);
            // Indices are read as the integers they are (uint32 slots hold their bit
            // patterns): exact beyond 2^24, where an f32 would round them.
            let ids = idx.gather_slots(ins.api, ins.loc);
            let mut res = Vec::with_capacity(ids.len());
            for (k, &slot) in ids.iter().enumerate() {
                let (p, j) = (k / n, k % n);
                let i = idx.dtype().int(slot) as u64;
                if i >= f as u64 {
                    ins.fail(
                        ErrorKind::OutOfBounds,
                        format!(
                            "index {i} at partition {p} (flattened position {j} of indices{:?}) \
                             is out of bounds: data {} has {f} flattened free elements per \
                             partition (valid indices 0..{f})",
                            idx.shape(),
                            data.describe()
                        ),
                    );
                }
                res.push(vals[p * f + i as usize]);
            }
            give_buf(vals);
            give_buf(ids);
            dst.scatter_slots(res);
        },
        || {
            ins.record(Engine::GpSimd, Opcode::Gather)
                .size(idx.partitions() as u32, idx.free_size() as u32)
                .inputs(2)
                .dtypes(dtype, dtype)
                .contiguous(data.ap.inner_stride() == 1 && idx.ap.inner_stride() == 1)
                .reads([data.region(), idx.region()])
                .writes([dst.region()])
                .done()
        },
    );
}

instruction! {
    /// Gathers, in each partition, the elements of `data` (free dimensions flattened) that
    /// `indices` (uint32) names into `dst` (NKI 0.7 `nisa.nc_n_gather(dst, data, indices)`):
    /// `dst[p, j] = data_flat[p, indices[p, j]]`. `dst` has `data`'s dtype and `indices`'
    /// elements per partition; all in SBUF. One GpSimdE instruction of `150 + N` cycles \[A\].
    /// An index out of `[0, F)` is an [`ErrorKind::OutOfBounds`] error.
    pub fn nc_n_gather<'d, 'a, 'i>(
        dst: into TileRef<'d>, data: into TileRef<'a>, indices: into TileRef<'i>,
    ) as ins = "nisa.nc_n_gather" {
        n_gather_into(&ins, &dst, &data, &indices);
    }
}

instruction! {
    /// Gathers within each 16-partition group (one GpSimd core): the core's `index` values
    /// (uint16, flattened partition-first, the first `num_valid_indices` of them, all when
    /// `None`) are offsets into its partition-first slice of `src_buffer`, each reading
    /// `num_elem_per_idx` contiguous elements; they fill the core's slice of `dst` in the same
    /// order (NKI 0.7 `nisa.local_gather(dst, src_buffer, index, num_elem_per_idx,
    /// num_valid_indices)`; see the module docs for the order, which the docs leave to a
    /// figure \[A\]). One GpSimdE instruction.
    pub fn local_gather<'d, 's, 'i>(
        dst: into TileRef<'d>, src_buffer: into TileRef<'s>, index: into TileRef<'i>,
        num_elem_per_idx: usize, num_valid_indices: into Option<usize>,
    ) as ins = "nisa.local_gather" {
        gather_in_cores(&ins, [dst, src_buffer, index], num_elem_per_idx, num_valid_indices);
    }
}

/// [`local_gather`] on its converted operands.
#[track_caller]
fn gather_in_cores(
    ins: &Op,
    [dst, src, idx]: [TileRef; 3],
    num_elem_per_idx: usize,
    valid: Option<usize>,
) {
    sbuf_operand(ins, "src_buffer", &src);
    sbuf_operand(ins, "index", &idx);
    sbuf_operand(ins, "dst", &dst);
    index_dtype(ins, "index", &idx, DType::U16);
    same_dtype(ins, &dst, ("src_buffer", &src));
    ins.same_partitions(("src_buffer", &src), ("index", &idx));
    ins.same_partitions(("src_buffer", &src), ("dst", &dst));
    let p = src.partitions();
    if p % CORE_PARTITIONS != 0 || src.start_partition() % CORE_PARTITIONS != 0 {
        ins.fail(
            ErrorKind::PartitionOffset,
            format!(
                "src_buffer {} of 'local_gather' must cover whole 16-partition GpSimd core groups (a multiple of 16 partitions starting at a multiple of 16), got {p} partitions from partition {}",
                src.describe(),
                src.start_partition()
            ),
        );
    }
    if !LOCAL_GATHER_ELEMS.contains(&num_elem_per_idx) {
        ins.fail(
            ErrorKind::InvalidArgument,
            format!(
                "num_elem_per_idx {num_elem_per_idx} of 'local_gather' must be one of {LOCAL_GATHER_ELEMS:?}"
            ),
        );
    }
    let per_core = idx.free_size() * CORE_PARTITIONS;
    let valid = valid.unwrap_or(per_core);
    if valid > per_core {
        ins.fail(
            ErrorKind::InvalidArgument,
            format!(
                "num_valid_indices {valid} of 'local_gather' exceeds the {per_core} indices of each 16-partition slice of index {}",
                idx.describe()
            ),
        );
    }
    if valid > LOCAL_GATHER_MAX_INDICES {
        ins.fail(
            ErrorKind::InvalidArgument,
            format!(
                "'local_gather' gathers with {valid} indices per GpSimd core; at most {LOCAL_GATHER_MAX_INDICES} are allowed"
            ),
        );
    }
    let (src_row, dst_row) = (src.free_size(), dst.free_size());
    let out_row = valid * num_elem_per_idx;
    if out_row > dst_row {
        ins.fail(
            ErrorKind::ShapeMismatch,
            format!(
                "dst {} of 'local_gather' holds {dst_row} elements per partition; {valid} indices x {num_elem_per_idx} elements need {out_row}",
                dst.describe()
            ),
        );
    }
    let dtype = src.dtype();
    // A dst row the gather does not fill keeps its other elements, so it is read too.
    let partial = out_row < dst_row;
    ins.issue(
        &[&dst],
        || {
            let fi = idx.free_size();
            let vals = src.gather_slots(ins.api, ins.loc);
            let ids = idx.gather_slots(ins.api, ins.loc);
            let mut out = if partial {
                dst.gather_slots(ins.api, ins.loc)
            } else {
                vec![0.0; dst.partitions() * dst_row]
            };
            for c in 0..p / CORE_PARTITIONS {
                // The core's index list, partition first.
                let list: Vec<usize> = (0..valid)
                    .map(|k| {
                        let at = (c * CORE_PARTITIONS + k % CORE_PARTITIONS) * fi + k / CORE_PARTITIONS;
                        DType::U16.int(ids[at]) as usize
                    })
                    .collect();
                for (k, &i) in list.iter().enumerate() {
                    if i + num_elem_per_idx > src_row {
                        ins.fail(
                            ErrorKind::OutOfBounds,
                            format!(
                                "index {i} (position {k} of GpSimd core {c}) reads elements {i}..{} of each partition of src_buffer {}, which holds {src_row}",
                                i + num_elem_per_idx,
                                src.describe()
                            ),
                        );
                    }
                }
                for q in c * CORE_PARTITIONS..(c + 1) * CORE_PARTITIONS {
                    let (from, to) = (&vals[q * src_row..], &mut out[q * dst_row..]);
                    for (k, &i) in list.iter().enumerate() {
                        let n = num_elem_per_idx;
                        to[k * n..(k + 1) * n].copy_from_slice(&from[i..i + n]);
                    }
                }
            }
            give_buf(vals);
            give_buf(ids);
            dst.scatter_slots(out);
        },
        || {
            let mut reads: Regions<3> = [src.region(), idx.region()].into_iter().collect();
            if partial {
                reads.extend([dst.region()]);
            }
            ins.record(Engine::GpSimd, Opcode::Gather)
                .size(p as u32, out_row as u32)
                .inputs(2)
                .dtypes(dtype, dtype)
                .contiguous(src.ap.inner_stride() == 1 && idx.ap.inner_stride() == 1)
                .reads(reads)
                .writes([dst.region()])
                .done()
        },
    );
}
