//! Indirect (index-tile) DMA: NKI's `nl.load(data[idx_tile[i_p, 0], i_f])`, a gather of HBM
//! rows whose row numbers are read from an SBUF tile at run time (nearest-neighbour resize,
//! embedding lookups, paged KV caches).
//!
//! NKI allows the indirect index on the partition dimension only; an out-of-range index is a
//! run-time error there, and an [`ErrorKind::OutOfBounds`] error naming the partition, the
//! index and the bound here.

use crate::context::raise;
use crate::dtype::DType;
use crate::error::{ErrorKind, NkiError, SourceLoc};
use crate::hbm::HbmSource;
use crate::isa::op::Op;
use crate::record::{DmaDims, Engine, MemKind, Opcode};
use crate::tile::{Tile, TileRef};

const API: &str = "nl.load_indirect";

/// Gathers rows of the 2-D HBM view `src[N, F]` into a new SBUF tile `[P, F]`:
/// `out[p, :] = src[indices[p, 0], :]` (NKI `nl.load(src[idx[i_p, 0], i_f])`), one DMA whose
/// descriptors each move one row.
///
/// `indices` is an SBUF tile `[P, 1]` of int32 or uint32 (`P <= 128`). An index outside
/// `0..N` fails the kernel with an out-of-bounds error.
#[track_caller]
pub fn load_indirect<'a>(src: impl HbmSource, indices: impl Into<TileRef<'a>>) -> Tile {
    let loc = SourceLoc::caller();
    let ins = Op::at(API, loc);
    let v = src.hbm_view();
    let idx: TileRef = indices.into();
    ins.operand("indices", &idx);
    ins.memory("indices", &idx, &[MemKind::Sbuf]);
    let fail = |kind, msg: String| -> ! { raise(NkiError::new(kind, API, msg), loc) };
    if !matches!(idx.dtype(), DType::I32 | DType::U32) || idx.free_size() != 1 {
        fail(
            ErrorKind::DType,
            format!(
                "indices {} of 'load_indirect' must be a [P, 1] int32 or uint32 tile, got {:?} {}",
                idx.describe(),
                idx.shape(),
                idx.dtype()
            ),
        );
    }
    let (rows, f) = ins.hbm_2d(&v, "'load_indirect' gathers rows of a 2-D view");
    crate::hbm::observe::notify(v.st.id, &v.ap, false, API, loc);
    let p = idx.partitions();
    let out = ins.alloc(MemKind::Sbuf, v.dtype(), &[p, f]);
    let ov = out.view();
    let size = v.dtype().size() as u64;
    ins.issue(
        &[&ov],
        || {
            // Indices are read as the integers they are (int32/uint32 slots hold their bit
            // patterns): exact beyond 2^24, where an f32 would round them.
            let ids = idx.gather_slots(API, loc);
            let mut vals = Vec::with_capacity(p * f);
            for (part, &slot) in ids.iter().enumerate() {
                let i = idx.dtype().int(slot);
                if i < 0 || i as u64 >= rows as u64 {
                    fail(
                        ErrorKind::OutOfBounds,
                        format!(
                            "index {i} at partition {part} of indices{:?} is out of bounds for {} with {rows} rows (valid 0..{rows})",
                            idx.shape(),
                            v.describe()
                        ),
                    );
                }
                let row = v.try_slice(i as usize).unwrap_or_else(|e| raise(e, loc));
                row.gather_into(API, &mut vals).unwrap_or_else(|e| raise(e, loc));
            }
            // The DMA moves the tensor's slots untouched (same dtype: bit-exact).
            ov.scatter_slots(vals);
        },
        || ins.record_as(API, Engine::Dma, Opcode::DmaCopy).size(p as u32, f as u32).dtypes(v.dtype(), v.dtype()).dma(DmaDims {
                src: MemKind::Hbm,
                dst: MemKind::Sbuf,
                bytes: (p * f) as u64 * size,
                partitions: p as u32,
                start_partition: 0,
                chunk_bytes: if v.ap.inner_stride() == 1 { f as u64 * size } else { size },
            }).reads([v.region(), idx.region()]).writes([ov.region()]).done(),
    );
    out
}
