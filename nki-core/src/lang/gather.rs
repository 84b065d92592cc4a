//! `nl.gather_flattened`: the per-partition gather of GpSimdE (`nisa.nc_n_gather` in NKI 0.2+).
//!
//! Each partition gathers independently: the free dimensions of `data` are flattened into one
//! row of `F` elements, and every element of `indices` (uint32) picks one element of that row
//! in the same partition. The result has the shape of `indices`.
//!
//! NKI documents out-of-range indices as returning garbage; nki-rs is stricter and fails the
//! kernel with an [`ErrorKind::OutOfBounds`] error naming the partition, the index and the
//! bound, so a wrong index computation is caught instead of silently reading garbage.

use crate::error::ErrorKind;
use crate::isa::op::Op;
use crate::record::MemKind;
use crate::tile::{Tile, TileRef};

const API: &str = "nl.gather_flattened";

/// Raises unless `t` has 2 to 4 dimensions (partition + 1..=3 free).
fn check_rank(ins: &Op, what: &str, t: &TileRef) {
    let nd = t.shape().len();
    if !(2..=4).contains(&nd) {
        ins.fail(ErrorKind::InvalidArgument, format!(
                    "operand '{what}' {} of 'gather_flattened' must be 2-, 3- or 4-dimensional, got {nd} dimensions",
                    t.describe()
                ));
    }
}

/// Gathers elements of `data` per partition (NKI `nl.gather_flattened`): with the free
/// dimensions of `data` flattened into a row of `F` elements,
/// `out[p, j...] = data_flat[p, indices[p, j...]]`.
///
/// * `data`: a 2- to 4-D SBUF tile (any dtype); the output keeps its dtype.
/// * `indices`: a 2- to 4-D SBUF tile of `uint32` with the same partition count; the output
///   has its shape.
///
/// Runs on GpSimdE (which cannot access PSUM), cost `150 + N` cycles with `N` the output
/// elements per partition. An index `>= F` is an [`ErrorKind::OutOfBounds`] error naming the
/// partition, the index and the bound (NKI returns garbage there).
#[track_caller]
pub fn gather_flattened<'a, 'b>(
    data: impl Into<TileRef<'a>>,
    indices: impl Into<TileRef<'b>>,
) -> Tile {
    let ins = Op::begin(API);
    let data: TileRef = data.into();
    let idx: TileRef = indices.into();
    check_rank(&ins, "data", &data);
    check_rank(&ins, "indices", &idx);
    let out = ins.alloc(MemKind::Sbuf, data.dtype(), idx.shape());
    crate::isa::gather::n_gather_into(&ins, &out.view(), &data, &idx);
    out
}

#[cfg(test)]
mod tests {
    use crate::context::Mode;
    use crate::dtype::DType;
    use crate::isa::trace::run;
    use crate::lang;
    use crate::record::{BufId, Engine, MemKind, Opcode};

    #[test]
    fn record_names_the_gpsimd_gather_and_its_regions() {
        for mode in [Mode::Simulate, Mode::Estimate] {
            let recs = run(mode, || {
                let d = lang::zeros(&[64, 4, 8], DType::BF16, MemKind::Sbuf);
                let i = lang::zeros(&[64, 10], DType::U32, MemKind::Sbuf);
                let o = super::gather_flattened(&d, &i);
                assert_eq!(o.shape(), &[64, 10]);
                assert_eq!(o.dtype(), DType::BF16);
            })
            .unwrap();
            assert_eq!(recs.len(), 3);
            let r = &recs[2];
            assert_eq!(
                (r.engine, r.opcode, r.api),
                (Engine::GpSimd, Opcode::Gather, "nl.gather_flattened")
            );
            assert_eq!((r.partitions, r.free, r.inputs), (64, 10, 2));
            assert_eq!((r.in_dtype, r.out_dtype), (DType::BF16, DType::BF16));
            assert_eq!((r.reads.len(), r.writes.len()), (2, 1));
            // data: 32 bf16 per partition; indices: 10 uint32 per partition.
            assert_eq!((r.reads[0].p0, r.reads[0].p1, r.reads[0].hi), (0, 64, 64));
            assert_eq!(r.reads[1].hi, 40);
            assert_eq!(r.writes[0].hi, 20);
            assert!(matches!(r.writes[0].buf, BufId::Tile(_)));
            assert!(r.loc.file.ends_with("gather.rs"));
        }
    }
}
