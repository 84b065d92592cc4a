//! `dma_copy`: one DMA transfer between HBM and SBUF (any direction, including HBM->HBM and
//! SBUF->SBUF), with a cast when the dtypes differ.

use super::base::{dma_dims, short};
use crate::context::Op;
use crate::dtype::Element;
use crate::error::ErrorKind;
use crate::hbm::{HbmDest, HbmSource, HbmView};
use crate::record::{DmaDims, Engine, Instr, MemKind, Opcode};
use crate::tile::{Tile, TileRef};
use crate::typed::Sbuf;

const API: &str = "nisa.dma_copy";

/// One side of a DMA transfer: an HBM view or an on-chip tile view.
#[derive(Clone, Debug)]
pub enum DmaEndpoint<'a> {
    /// A view of an HBM tensor.
    Hbm(HbmView),
    /// A view of an SBUF tile.
    Tile(TileRef<'a>),
}

/// What [`dma_copy`] can read from: any HBM view (inputs and outputs) or a tile (`&Tile`,
/// `TileRef`, `&Sbuf<..>`).
pub trait DmaSource<'a> {
    /// The endpoint to read.
    fn dma_source(self) -> DmaEndpoint<'a>;
}

/// What [`dma_copy`] can write to: views of kernel outputs, or tiles (`&Tile`, `TileRef`,
/// `&Sbuf<..>`).
#[diagnostic::on_unimplemented(
    message = "cannot dma_copy into `{Self}`: kernel inputs are immutable (NKI err_cannot_update_immutable_parameter)",
    label = "not a kernel output or a tile",
    note = "declare the kernel parameter as `&mut Hbm<T>` to make it an output, or copy into a tile"
)]
pub trait DmaTarget<'a> {
    /// The endpoint to write.
    fn dma_target(self) -> DmaEndpoint<'a>;
}

impl<'a, T: HbmSource> DmaSource<'a> for T {
    fn dma_source(self) -> DmaEndpoint<'a> {
        DmaEndpoint::Hbm(self.hbm_view())
    }
}
/// Implements [`DmaSource`] and [`DmaTarget`] for the on-chip operand forms.
macro_rules! tile_endpoints {
    ($([$($gen:tt)*] $t:ty => |$x:ident| $e:expr;)*) => {$(
        impl<$($gen)*> DmaSource<'a> for $t {
            fn dma_source(self) -> DmaEndpoint<'a> {
                let $x = self;
                DmaEndpoint::Tile($e)
            }
        }
        impl<$($gen)*> DmaTarget<'a> for $t {
            fn dma_target(self) -> DmaEndpoint<'a> {
                let $x = self;
                DmaEndpoint::Tile($e)
            }
        }
    )*};
}

tile_endpoints! {
    ['a] &'a Tile => |t| t.view();
    ['a] TileRef<'a> => |t| t;
    ['a] &TileRef<'a> => |t| *t;
    ['a, T: Element, const P: usize, const F: usize] &'a Sbuf<T, P, F> => |t| t.into();
}

impl<'a, T: HbmDest> DmaTarget<'a> for T {
    fn dma_target(self) -> DmaEndpoint<'a> {
        DmaEndpoint::Hbm(self.hbm_dest())
    }
}

impl DmaEndpoint<'_> {
    fn mem(&self) -> MemKind {
        match self {
            DmaEndpoint::Hbm(_) => MemKind::Hbm,
            DmaEndpoint::Tile(t) => t.mem(),
        }
    }
    fn shape(&self) -> &[usize] {
        match self {
            DmaEndpoint::Hbm(v) => v.shape(),
            DmaEndpoint::Tile(t) => t.shape(),
        }
    }
    fn numel(&self) -> usize {
        self.shape().iter().product()
    }
    fn elem_size(&self) -> usize {
        match self {
            DmaEndpoint::Hbm(v) => v.dtype().size(),
            DmaEndpoint::Tile(t) => t.dtype().size(),
        }
    }
    fn dtype(&self) -> crate::dtype::DType {
        match self {
            DmaEndpoint::Hbm(v) => v.dtype(),
            DmaEndpoint::Tile(t) => t.dtype(),
        }
    }
    /// Length of the innermost contiguous run in elements.
    fn run(&self) -> usize {
        match self {
            DmaEndpoint::Hbm(v) => v.ap.contiguous_run().min(v.ap.shape.numel()),
            DmaEndpoint::Tile(t) => t.ap.contiguous_run().min(t.free_size().max(1)),
        }
    }
    fn describe(&self) -> String {
        match self {
            DmaEndpoint::Hbm(v) => v.describe(),
            DmaEndpoint::Tile(t) => t.describe(),
        }
    }
    fn region(&self) -> crate::record::Region {
        match self {
            DmaEndpoint::Hbm(v) => v.region(),
            DmaEndpoint::Tile(t) => t.region(),
        }
    }
}

/// Copies `src` into `dst` with one DMA transfer (NKI `nisa.dma_copy(dst=..., src=...)`).
///
/// Either side is an HBM view or an SBUF tile view; both must hold the same number of elements
/// (they are matched in row-major order). A cast happens when the dtypes differ (DMA casts go
/// through fp32). PSUM is not reachable by DMA. HBM writes are race-checked like `nl::store`:
/// two program instances (or affine_range iterations) writing one element is an error.
/// Writing into a kernel input does not compile.
#[track_caller]
pub fn dma_copy<'a, 'b>(dst: impl DmaTarget<'a>, src: impl DmaSource<'b>) {
    let ins = Op::begin(API);
    let (dst, src) = (dst.dma_target(), src.dma_source());
    for (what, end) in [("dst", &dst), ("src", &src)] {
        if end.mem() == MemKind::Psum {
            ins.fail(ErrorKind::WrongMemory, format!(
                    "expected operand '{what}' of 'dma_copy' to be in address space 'hbm|sbuf', but got a tile in 'psum' instead ({}): DMA engines cannot access psum",
                    end.describe()
                ));
        }
    }
    if dst.numel() != src.numel() {
        ins.fail(
            ErrorKind::ShapeMismatch,
            format!(
                "dst {} and src {} of '{}' have different numbers of elements ({} vs {})",
                dst.describe(),
                src.describe(),
                short(API),
                dst.numel(),
                src.numel()
            ),
        );
    }
    // HBM accesses are tagged in every mode: estimate mode tracks races without values.
    if let DmaEndpoint::Hbm(v) = &src {
        ins.track_load(v, API);
    }
    let writer = match &dst {
        DmaEndpoint::Hbm(_) => Some(ins.hbm_writer()),
        DmaEndpoint::Tile(_) => None,
    };
    let tile_out: Vec<&TileRef> = match &dst {
        DmaEndpoint::Tile(t) => vec![t],
        DmaEndpoint::Hbm(_) => Vec::new(),
    };
    ins.issue(
        &tile_out,
        || {
            // Slots move untouched (bit-exact); a cast goes through fp32.
            let mut vals = match &src {
                DmaEndpoint::Hbm(v) => ins.check(v.gather(API)),
                DmaEndpoint::Tile(t) => t.gather_slots(API, ins.loc),
            };
            src.dtype().cast_slots(dst.dtype(), &mut vals);
            match &dst {
                DmaEndpoint::Tile(t) => t.scatter_slots(vals),
                DmaEndpoint::Hbm(v) => {
                    let (wid, shared) = writer.as_ref().expect("writer set for HBM targets");
                    ins.check(crate::hbm::write::write(v, vals, *wid, shared, ins.loc));
                }
            }
        },
        || dma_record(&dst, &src, &ins),
    );
    if !ins.executes() {
        if let (DmaEndpoint::Hbm(v), Some((wid, shared))) = (&dst, &writer) {
            ins.check(crate::hbm::write::track(v, *wid, shared, ins.loc));
        }
    }
}

/// The DMA record: bytes moved (counted on the HBM side when there is one, else the source),
/// the on-chip side's partitions, and the descriptor (contiguous run) size.
fn dma_record(dst: &DmaEndpoint, src: &DmaEndpoint, ins: &Op) -> Instr {
    let chip = match (dst, src) {
        (DmaEndpoint::Tile(t), _) | (_, DmaEndpoint::Tile(t)) => Some(*t),
        _ => None,
    };
    let (partitions, start, free) = match chip {
        Some(t) => (t.partitions(), t.start_partition(), t.free_size()),
        None => {
            let last = src.shape().last().copied().unwrap_or(1).max(1);
            (src.numel() / last, 0, last)
        }
    };
    let run = src.run().min(dst.run()).max(1);
    let dims = match (dst, src) {
        (DmaEndpoint::Hbm(h), DmaEndpoint::Tile(t)) => dma_dims(h, t, false),
        (DmaEndpoint::Tile(t), DmaEndpoint::Hbm(h)) => dma_dims(h, t, true),
        _ => DmaDims {
            src: src.mem(),
            dst: dst.mem(),
            bytes: (src.numel() * src.elem_size()) as u64,
            partitions: partitions as u32,
            start_partition: start as u32,
            chunk_bytes: (run * src.elem_size()) as u64,
        },
    };
    ins.record_as(API, Engine::Dma, Opcode::DmaCopy)
        .size(partitions as u32, free as u32)
        .dtypes(src.dtype(), dst.dtype())
        .contiguous([dst, src].iter().all(|end| match end {
            DmaEndpoint::Tile(t) => t.free_size() <= 1 || t.ap.inner_stride() == 1,
            DmaEndpoint::Hbm(_) => true,
        }))
        .dma(dims)
        .reads([src.region()])
        .writes([dst.region()])
        .done()
}
