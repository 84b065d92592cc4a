//! `nl.atomic_rmw`: atomic read-modify-write of kernel outputs in HBM (`dst = dst + value`).
//!
//! Overlapping updates never run at once (the tensor's access tracker makes them wait for each
//! other, see [`crate::hbm::write::atomic`]), so concurrent updates from program instances on
//! different host threads never lose an add.
//! The sum is computed in fp32 and rounded to the tensor's dtype, as the DMA engine's compute
//! path does.
//!
//! Atomic updates take part in the output-dependency tracking of HBM writes
//! ([`crate::hbm::write::atomic`]) as writers of their own "atomic" kind: atomic updates of
//! one element by different program instances or affine_range iterations may overlap freely
//! (that is their point), but a plain store and an atomic update of one element from
//! different instances or iterations, in either order, are an output-dependency error, like
//! two overlapping stores. This is checked in every launch mode (estimate mode included,
//! also on [`Hbm::shape_only`](crate::hbm::Hbm::shape_only) tensors).

use crate::error::ErrorKind;
use crate::hbm::HbmDest;
use crate::isa::op::Op;
use crate::math::AluOp;
use crate::record::{DmaDims, Engine, MemKind, Opcode};
use crate::tile::TileRef;

const API: &str = "nl.atomic_rmw";

/// Atomically updates an output HBM view (NKI `nl.atomic_rmw`): `dst = op(dst, value)` for
/// every element, with `value` an on-chip tile (or view) of the same shape (or element
/// count). Only [`AluOp::Add`] is supported, as in NKI (`np.add`); any other operator is an
/// [`ErrorKind::InvalidArgument`] error.
///
/// Unlike [`store`](crate::lang::store), overlapping updates by different program instances
/// or affine_range iterations are not an output-dependency error: each add is atomic, so the
/// result is the sum of all of them (up to the order of the fp32 roundings). The add runs in
/// the DMA engine, which computes in fp32 whatever the dtypes (`nki.isa.dma_compute` docs:
/// "The DMA engines perform all computations in float32 precision internally"), so int32
/// values above 2^24 round as they do on the device: this is the hardware's arithmetic, not
/// an emulation shortcut. An update and a
/// plain store of one element by different instances or iterations (in either order) are an
/// [`ErrorKind::OutputDependency`] error naming both writers, in every mode. Recorded as one
/// DMA (`DMA_COPY`) that reads the tile and the HBM region and writes the HBM region.
/// NKI also allows only indirect (dynamic) indexing of `dst`; nki-rs accepts any output view.
#[track_caller]
pub fn atomic_rmw<'a>(dst: impl HbmDest, value: impl Into<TileRef<'a>>, op: AluOp) {
    let ins = Op::begin(API);
    let dst = dst.hbm_dest();
    let src: TileRef = value.into();
    if op != AluOp::Add {
        ins.fail(
            ErrorKind::InvalidArgument,
            format!(
                "'atomic_rmw' supports only the add operator (np.add), got '{}'",
                op.name()
            ),
        );
    }
    super::data::check_dest_value(API, "atomic_rmw", &dst, &src, ins.loc);
    // The writer is tagged in every mode: estimate mode tracks races without values.
    let (wid, shared) = ins.hbm_atomic_writer();
    ins.issue(
        &[],
        || {
            ins.check(src.with_values(API, ins.loc, |vals| {
                crate::hbm::write::atomic(&dst, Some(vals), wid, &shared, ins.loc)
            }))
        },
        || {
            let bytes = (dst.ap.shape.numel() * dst.dtype().size()) as u64;
            let run = dst.ap.contiguous_run().min(dst.ap.shape.numel());
            ins.record_as(API, Engine::Dma, Opcode::DmaCopy)
                .size(src.partitions() as u32, src.free_size() as u32)
                .dtypes(src.dtype(), dst.dtype())
                .psum(src.mem() == MemKind::Psum)
                .alu(Some(AluOp::Add))
                .dma(DmaDims {
                    src: src.mem(),
                    dst: MemKind::Hbm,
                    bytes,
                    partitions: src.partitions() as u32,
                    start_partition: src.start_partition() as u32,
                    chunk_bytes: (run * dst.dtype().size()) as u64,
                })
                .reads([src.region(), dst.region()])
                .writes([dst.region()])
                .done()
        },
    );
    if !ins.executes() {
        ins.check(crate::hbm::write::atomic(&dst, None, wid, &shared, ins.loc));
    }
}

#[cfg(test)]
mod tests {
    use crate::context::Mode;
    use crate::dtype::DType;
    use crate::hbm::Hbm;
    use crate::isa::trace::run;
    use crate::lang;
    use crate::math::AluOp;
    use crate::record::{BufId, Engine, MemKind, Opcode};

    #[test]
    fn record_reads_and_writes_the_hbm_region() {
        let mut c = Hbm::<f32>::zeros([4, 8]);
        let out = c.as_output();
        for mode in [Mode::Simulate, Mode::Estimate] {
            let recs = run(mode, || {
                let t = lang::ones(&[2, 8], DType::F32, MemKind::Sbuf);
                super::atomic_rmw(out.slice((1..3, ..)), &t, AluOp::Add);
            })
            .unwrap();
            let r = &recs[1];
            assert_eq!(
                (r.engine, r.opcode, r.api),
                (Engine::Dma, Opcode::DmaCopy, "nl.atomic_rmw")
            );
            assert_eq!((r.partitions, r.free), (2, 8));
            let d = r.dma.unwrap();
            assert_eq!(
                (d.src, d.dst, d.bytes, d.chunk_bytes),
                (MemKind::Sbuf, MemKind::Hbm, 64, 64)
            );
            assert_eq!(r.reads.len(), 2);
            assert!(matches!(r.reads[1].buf, BufId::Hbm(_)));
            assert_eq!(r.reads[1], r.writes[0]);
            assert_eq!((r.writes[0].lo, r.writes[0].hi), (32, 96));
        }
        // Estimate mode did not touch the values; simulate mode added ones to rows 1 and 2.
        let want: Vec<f32> = (0..32)
            .map(|i| if (8..24).contains(&i) { 1.0 } else { 0.0 })
            .collect();
        assert_eq!(c.to_f32_vec().unwrap(), want);
    }
}
