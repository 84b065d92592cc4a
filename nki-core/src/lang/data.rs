//! Tile creation and data movement: `ndarray`, `zeros`, `ones`, `full`, `load`, `store`,
//! `copy`, `load_transpose2d`.

use crate::abort::raise;
use crate::access::Shape;
use crate::dtype::DType;
use crate::error::ErrorKind;
use crate::error::{NkiError, SourceLoc};
use crate::hbm::{HbmDest, HbmSource, HbmView};
use crate::isa::base::{dma_dims, dma_rows_contiguous, Dst};
use crate::isa::op::Op;
use crate::isa::vector::tensor_copy_to;
use crate::record::{Engine, MemKind, Opcode};
use crate::tensor::{Placement, Tensor, TensorLike, TensorRef};
use crate::tile::{Tile, TileRef};

/// A new, unwritten tensor (NKI `nl.ndarray(shape, dtype, buffer, name, address)`); reading
/// it before writing it is an error. `buffer` is NKI 0.7's `nl::sbuf`, `nl::psum`,
/// `nl::private_hbm` (`nl::hbm`) or `nl::shared_hbm`, optionally with `.name("x")` and
/// `.address(partition, byte)`, giving a [`Tensor`](crate::tensor::Tensor); or the Beta-1
/// `nl::SBUF` / `nl::PSUM` ([`MemKind`]), giving a [`Tile`].
#[track_caller]
pub fn ndarray<P: Placement>(dims: &[usize], dtype: DType, buffer: P) -> P::Out {
    buffer.ndarray("ndarray", dims, dtype)
}

/// A tensor filled with `value` (NKI `nl.full`), recorded as a memset; on chip only. See
/// [`ndarray()`] for `buffer`.
#[track_caller]
pub fn full<P: Placement>(dims: &[usize], value: f32, dtype: DType, buffer: P) -> P::Out {
    buffer.full("full", dims, value, dtype)
}

/// A zero-filled tensor (NKI `nl.zeros`); on chip only. See [`ndarray()`] for `buffer`.
#[track_caller]
pub fn zeros<P: Placement>(dims: &[usize], dtype: DType, buffer: P) -> P::Out {
    buffer.full("full", dims, 0.0, dtype)
}

/// A zero-filled tensor of `a`'s shape (NKI `nl.zeros_like(a, dtype, buffer)`): of `dtype`,
/// or `a`'s dtype when `None`; on chip only. See [`ndarray()`] for `buffer`.
#[track_caller]
pub fn zeros_like<P: Placement>(a: &impl TensorLike, dtype: Option<DType>, buffer: P) -> P::Out {
    buffer.full("full", a.like_shape(), 0.0, dtype.unwrap_or(a.like_dtype()))
}

/// A new, unwritten tensor of `a`'s shape (NKI `nl.empty_like(a, dtype, buffer)`): of
/// `dtype`, or `a`'s dtype when `None`. See [`ndarray()`] for `buffer`.
#[track_caller]
pub fn empty_like<P: Placement>(a: &impl TensorLike, dtype: Option<DType>, buffer: P) -> P::Out {
    buffer.ndarray("ndarray", a.like_shape(), dtype.unwrap_or(a.like_dtype()))
}

/// A tensor of ones (NKI `nl.ones`); on chip only. See [`ndarray()`] for `buffer`.
#[track_caller]
pub fn ones<P: Placement>(dims: &[usize], dtype: DType, buffer: P) -> P::Out {
    buffer.full("full", dims, 1.0, dtype)
}

/// Loads an HBM view into a new SBUF tile of the same shape (NKI `nl.load`); the first
/// dimension becomes the partition dimension (at most 128). `dtype` casts on the way.
#[track_caller]
pub fn load(src: impl HbmSource) -> Tile {
    load_impl(&Op::begin("load"), src.hbm_view(), None)
}

/// [`load`] with a cast to `dtype` (DMA casts go through fp32).
#[track_caller]
pub fn load_as(src: impl HbmSource, dtype: DType) -> Tile {
    load_impl(&Op::begin("load"), src.hbm_view(), Some(dtype))
}

fn load_impl(ins: &Op, v: HbmView, dtype: Option<DType>) -> Tile {
    ins.track_load(&v, "load");
    // The tile's shape: the view's, a 1-D view as one partition.
    let shape = match v.shape() {
        &[f] => Shape::of_valid(&[1, f]),
        _ => v.ap.shape,
    };
    let dtype = dtype.unwrap_or(v.dtype());
    let t = ins.alloc_result_shaped(MemKind::Sbuf, dtype, shape);
    let tv = t.view();
    ins.issue_in_place(
        &[&tv],
        || {
            if !tv.load_in_place(v.dtype(), || v.share_rows()) {
                // Slots move untouched (bit-exact); a cast goes through fp32.
                tv.write_slots(|out| {
                    ins.check(v.gather_into("load", out));
                    v.dtype().cast_slots(dtype, out);
                })
            }
        },
        ("nl.load", Engine::Dma, Opcode::DmaCopy),
        |r| {
            r.size(shape.partitions() as u32, tv.free_size() as u32)
                .dtypes(v.dtype(), dtype)
                .dma(dma_dims(&v, &tv, true))
                .reads([v.region()])
                .writes([tv.region()]);
        },
    );
    t
}

/// What `nl::store` writes into: any HBM tensor (the `nki.language.store` page), that is a
/// view of a kernel output (`&mut Hbm<T>` parameter) or of an HBM [`Tensor`] the kernel
/// allocated (`nl::ndarray(.., nl::shared_hbm)`, its own returned output included). A
/// [`TensorRef`] on chip is an [`ErrorKind::WrongMemory`] error when the store runs. Kernel
/// inputs (`&Hbm<T>` parameters) are immutable, so storing into one does not compile.
#[diagnostic::on_unimplemented(
    message = "cannot store into `{Self}`: kernel inputs are immutable (NKI err_cannot_update_immutable_parameter)",
    label = "not a kernel output",
    note = "declare the kernel parameter as `&mut Hbm<T>` to make it an output, or allocate the output with `nl::ndarray(.., nl::shared_hbm)` and return it, then store into a slice of it"
)]
pub trait StoreDest {
    /// The HBM view written; `loc` is the store's line, for the error of an on-chip view.
    fn store_dest(&self, loc: SourceLoc) -> HbmView;
}
impl<T: HbmDest> StoreDest for T {
    fn store_dest(&self, _: SourceLoc) -> HbmView {
        self.hbm_dest()
    }
}
impl StoreDest for TensorRef<'_> {
    fn store_dest(&self, loc: SourceLoc) -> HbmView {
        self.hbm_of("store", loc)
    }
}
impl StoreDest for &TensorRef<'_> {
    fn store_dest(&self, loc: SourceLoc) -> HbmView {
        self.hbm_of("store", loc)
    }
}
impl StoreDest for &Tensor {
    fn store_dest(&self, loc: SourceLoc) -> HbmView {
        self.view().hbm_of("store", loc)
    }
}

/// Stores a tile (or view) into an HBM view of the same shape (NKI `nl.store`): a kernel
/// output or an HBM tensor the kernel allocated ([`StoreDest`]). Storing into a kernel input
/// does not compile. Overlapping stores by different program instances or affine_range
/// iterations are an output-dependency error.
#[track_caller]
pub fn store<'a>(dst: impl StoreDest, value: impl Into<TileRef<'a>>) {
    let src: TileRef = value.into();
    if src.mem() == MemKind::Psum {
        // Beta 1 `nl.store` (nki.language.store docs): "If the tile is in PSUM, an extra copy
        // will be performed to move the tile to SBUF first." That copy, recorded as
        // `nl.store (PSUM copy)`, runs where a PSUM -> SBUF copy runs (`copy_engine`:
        // ScalarE); the DMA then stores the SBUF tile.
        let ins = Op::begin("store");
        let staged = copy_to_impl(&ins, "nl.store (PSUM copy)", src, src.dtype());
        store(dst, &staged);
        return;
    }
    let ins = Op::begin("store");
    let dst = dst.store_dest(ins.loc);
    check_dest_value("store", "store", &dst, &src, ins.loc);
    // The writer is tagged in every mode: estimate mode tracks races without values.
    let (wid, shared) = ins.hbm_writer();
    ins.issue(
        &[],
        || {
            // Slots move untouched (bit-exact); a cast goes through fp32.
            let (from, to) = (src.dtype(), dst.dtype());
            ins.check(src.with_slots("store", ins.loc, |vals| {
                if from == to {
                    crate::hbm::write::write_slice(
                        &dst,
                        vals,
                        true,
                        wid,
                        &shared,
                        (ins.api, ins.loc),
                    )
                } else {
                    let mut cast = vals.to_vec();
                    from.cast_slots(to, &mut cast);
                    crate::hbm::write::write_slice(
                        &dst,
                        &cast,
                        true,
                        wid,
                        &shared,
                        (ins.api, ins.loc),
                    )
                }
            }));
        },
        || {
            ins.record_as("nl.store", Engine::Dma, Opcode::DmaCopy)
                .size(src.partitions() as u32, src.free_size() as u32)
                .dtypes(src.dtype(), dst.dtype())
                .psum(src.mem() == MemKind::Psum)
                .contiguous(dma_rows_contiguous(&src))
                .dma(dma_dims(&dst, &src, false))
                .reads([src.region()])
                .writes([dst.region()])
                .done()
        },
    );
    if !ins.executes() {
        ins.check(crate::hbm::write::track(
            &dst,
            wid,
            &shared,
            (ins.api, ins.loc),
        ));
    }
}

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
    // No start-partition rule here: the value is read by a DMA, whose descriptors address
    // any SBUF partition; the rule is the compute engines' (docs/checks.md).
    let d = dst.shape();
    let (dp, dfree) = match d.len() {
        1 => (1, d[0]),
        _ => (d[0], d[1..].iter().product()),
    };
    if (dp, dfree) != (src.partitions(), src.free_size()) {
        raise(
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

/// Copies a tile (or view) into a new SBUF tile, optionally casting (NKI `nl.copy`: a
/// tensor_copy on the engine the compiler picks, ScalarE for a PSUM source, else VectorE;
/// `nisa::tensor_copy` names the engine).
#[track_caller]
pub fn copy<'a>(src: impl Into<TileRef<'a>>, dtype: Option<DType>) -> Tile {
    let src: TileRef = src.into();
    copy_to_impl(
        &Op::begin("copy"),
        "nl.copy",
        src,
        dtype.unwrap_or(src.dtype()),
    )
}

/// A tensor_copy of `src` into a new SBUF tile of `dtype`, on the engine the compiler picks:
/// the `tensor_copy` builder, recorded as `api` (op `ins` checks the operand and names the
/// error).
pub(crate) fn copy_to_impl(ins: &Op, api: &'static str, src: TileRef, dtype: DType) -> Tile {
    ins.operand("src", &src);
    tensor_copy_to(&ins.recorded_as(api), Dst::New(Some(dtype)), src, None).tile()
}

/// Writes `value` into the tile view `dst` (NKI `dst[...] = value`): a tensor_copy on the
/// engine the compiler picks (as [`copy`]), reading `value` broadcast to `dst`'s shape (NumPy
/// rules: size-1 and missing leading dimensions repeat).
#[track_caller]
pub fn assign<'a, 'b>(dst: impl Into<TileRef<'a>>, value: impl Into<TileRef<'b>>) {
    let ins = Op::begin("assign");
    let dst: TileRef = dst.into();
    let src: TileRef = value.into();
    ins.operand("dst", &dst);
    let Some(value) = src.broadcast_as(dst.shape()) else {
        ins.fail(
            ErrorKind::ShapeMismatch,
            format!(
                "illegal assignment destination shape: shape {:?} of {} is smaller than the value {}",
                dst.shape(),
                dst.describe(),
                src.describe()
            ),
        )
    };
    tensor_copy_to(&ins.recorded_as("nl.assign"), Dst::Into(dst), value, None);
}
