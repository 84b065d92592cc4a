//! Layout and index-generation ops: `nl.load_transpose2d`, `nl.broadcast_to`, `nl.expand_dims`,
//! index tiles (`iota`, `arange`) and `astype` casts.

use super::data::copy_to_impl;
use crate::access::{Ap, Shape, MAX_DIMS};
use crate::context::raise;
use crate::dtype::DType;
use crate::error::{ErrorKind, NkiError, SourceLoc};
use crate::exec;
use crate::hbm::HbmSource;
use crate::isa::base::copy_engine;
use crate::isa::op::Op;
use crate::record::{DmaDims, Engine, MatmulDims, MemKind, Opcode};
use crate::tile::{Tile, TileRef};

/// Loads a 2-D HBM view `[F, P]` transposed into a new SBUF tile `[P, F]` (NKI
/// `nl.load_transpose2d`): `P` (the source's last dimension) becomes the partition dimension
/// and must be at most 128. Recorded as a DMA transpose, which moves one element per
/// descriptor (much slower than a contiguous load on trn1).
#[track_caller]
pub fn load_transpose2d(src: impl HbmSource) -> Tile {
    const API: &str = "nl.load_transpose2d";
    let ins = Op::begin(API);
    let v = src.hbm_view();
    ins.track_load(&v, API);
    let (f, p) = ins.hbm_2d(&v, "'load_transpose2d' takes a 2-D source");
    let dtype = v.dtype();
    let t = ins.alloc(MemKind::Sbuf, dtype, &[p, f]);
    let tv = t.view();
    ins.issue(
        &[&tv],
        || {
            // The DMA moves the tensor's slots untouched (same dtype: bit-exact).
            let vals = ins.check(v.gather(API));
            tv.scatter_slots(exec::transpose2d(&vals, f, p));
        },
        || {
            ins.record_as(API, Engine::Dma, Opcode::DmaTranspose)
                .size(p as u32, f as u32)
                .dtypes(dtype, dtype)
                .contiguous(false)
                .dma(DmaDims {
                    src: MemKind::Hbm,
                    dst: MemKind::Sbuf,
                    bytes: (p * f * dtype.size()) as u64,
                    partitions: p as u32,
                    start_partition: 0,
                    chunk_bytes: dtype.size() as u64,
                })
                .reads([v.region()])
                .writes([tv.region()])
                .done()
        },
    );
    t
}

/// Broadcasts `src` to `dims` into a new SBUF tile (NKI `nl.broadcast_to`): NumPy rules, every
/// dimension of `src` equals the target's or is 1 (a 1-partition source is replicated across
/// partitions).
///
/// Lowered as the compiler does: a partition broadcast (`[1, N]` to `[P, N]`) is a TensorE
/// matmul of a ones vector `[1, P]` with `src` into PSUM (in chunks of 512 columns), read out
/// to SBUF by the default PSUM copy engine; a free-dimension broadcast (`[P, 1]` to `[P, N]`)
/// is one `tensor_scalar`-class VectorE instruction; anything else one VectorE copy.
#[track_caller]
pub fn broadcast_to<'a>(src: impl Into<TileRef<'a>>, dims: &[usize]) -> Tile {
    const API: &str = "nl.broadcast_to";
    let ins = Op::begin(API);
    let src: TileRef = src.into();
    ins.operand("src", &src);
    if exec::broadcast_shape(src.shape(), dims).as_deref() != Some(dims) {
        ins.fail(
            ErrorKind::ShapeMismatch,
            format!(
                "cannot broadcast src{:?} to shape {dims:?}: each dimension must match or be 1",
                src.shape()
            ),
        );
    }
    let out = ins.alloc(MemKind::Sbuf, src.dtype(), dims);
    let ov = out.view();
    ins.trace(|| {
        use crate::emit::trace::{Call, TensorId};
        use crate::isa::trace_args as ta;
        Call::new(API)
            .arg("src", ta::tile(&src))
            .arg("shape", ta::ints(dims))
            .returns(TensorId::Tile(ov.tile.id), MemKind::Sbuf, dims)
    });
    let (p, n) = (dims[0], ov.free_size());
    let across_partitions = src.partitions() == 1 && p > 1;
    let chunk = super::tile_size::GEMM_MOVING_FMAX.min(n).max(1);
    let psum = across_partitions.then(|| ins.alloc(MemKind::Psum, DType::F32, &[p, chunk]));
    ins.issue(
        &[&ov],
        || {
            // Across partitions the values pass a PSUM matmul (fp32); along the free
            // dimension VectorE copies the slots untouched (bit-exact).
            let zeros = vec![0.0; dims.iter().product()];
            if across_partitions {
                let v = ins.read(&src);
                ov.scatter(exec::binary(&zeros, dims, &v, src.shape(), dims, |_, b| b));
            } else {
                let v = src.gather_slots(API, ins.loc);
                ov.scatter_slots(exec::binary(&zeros, dims, &v, src.shape(), dims, |_, b| b));
            }
        },
        || {
            let rec = |engine, opcode, free: usize| {
                let mut r = ins.record_as(API, engine, opcode);
                r.size(p as u32, free as u32)
                    .dtypes(src.dtype(), src.dtype())
                    .psum(src.mem() == MemKind::Psum)
                    .contiguous(src.ap.inner_stride() == 1)
                    .reads([src.region()])
                    .writes([ov.region()]);
                r
            };
            let Some(psum) = &psum else {
                let opcode = if src.free_size() == 1 && n > 1 {
                    Opcode::TensorScalar
                } else {
                    Opcode::TensorCopy
                };
                return rec(Engine::Vector, opcode, n).done();
            };
            let pv = psum.view();
            let mut last = None;
            for c0 in (0..n).step_by(chunk) {
                let cols = chunk.min(n - c0);
                if let Some(r) = last.take() {
                    crate::context::try_with_ctx(|c| c.push_record(r));
                }
                let mm = rec(Engine::Tensor, Opcode::Matmul, cols)
                    .matmul(MatmulDims {
                        k: 1,
                        m: p as u32,
                        n: cols as u32,
                        fp32: src.dtype() == DType::F32,
                        onezero: 0,
                    })
                    .writes([pv.region()])
                    .done();
                crate::context::try_with_ctx(|c| c.push_record(mm));
                last = Some(
                    rec(copy_engine(MemKind::Psum), Opcode::TensorCopy, cols)
                        .psum(true)
                        .dtypes(DType::F32, src.dtype())
                        .reads([pv.region()])
                        .done(),
                );
            }
            last.expect("at least one column")
        },
    );
    out
}

/// A view of `x` with a new size-1 dimension at `axis` (NKI `nl.expand_dims`). The partition
/// dimension stays first, so `axis` is 1..=ndim; no instruction is issued.
#[track_caller]
pub fn expand_dims<'a>(x: impl Into<TileRef<'a>>, axis: usize) -> TileRef<'a> {
    let loc = SourceLoc::caller();
    let x: TileRef = x.into();
    match expand_ap(&x.ap, axis) {
        Ok(ap) => TileRef {
            tile: x.tile,
            ap,
            cast: x.cast,
            ind: None,
        },
        Err(msg) => raise(
            NkiError::new(
                ErrorKind::InvalidArgument,
                "nl.expand_dims",
                format!("cannot expand x{:?} at axis {axis}: {msg}", x.shape()),
            ),
            loc,
        ),
    }
}

fn expand_ap(ap: &Ap, axis: usize) -> Result<Ap, String> {
    let nd = ap.shape.ndim();
    if axis == 0 {
        return Err("dimension 0 is the partition dimension".into());
    }
    if axis > nd {
        return Err(format!("axis must be in 1..={nd}"));
    }
    if nd + 1 > MAX_DIMS {
        return Err(format!("views have at most {MAX_DIMS} dimensions"));
    }
    let mut dims = ap.shape.dims().to_vec();
    dims.insert(axis, 1);
    let mut strides = [0isize; MAX_DIMS];
    let mut j = 0;
    for (d, s) in strides.iter_mut().enumerate().take(nd + 1) {
        if d == axis {
            *s = 1;
        } else {
            *s = ap.strides[j];
            j += 1;
        }
    }
    Ok(Ap {
        offset: ap.offset,
        shape: Shape::new(&dims).map_err(|e| e.message().to_string())?,
        strides,
    })
}

/// The shared index-tile generator (GpSimdE `Iota`): value = `f(index)` as int32, exact in
/// int32/uint32 tiles (see [`DType::slot_of_int`]), rounded to nearest in float ones.
fn iota_impl(ins: &Op, dims: &[usize], dtype: DType, value: impl Fn(&[usize]) -> i64) -> Tile {
    let out = ins.alloc(MemKind::Sbuf, dtype, dims);
    let ov = out.view();
    ins.issue(
        &[&ov],
        || {
            let n: usize = dims.iter().product();
            let mut idx = vec![0usize; dims.len()];
            let mut vals = Vec::with_capacity(n);
            for _ in 0..n {
                vals.push(dtype.slot_of_int(value(&idx) as i32 as i64));
                for d in (0..dims.len()).rev() {
                    idx[d] += 1;
                    if idx[d] < dims[d] {
                        break;
                    }
                    idx[d] = 0;
                }
            }
            ov.scatter_slots(vals);
        },
        || {
            ins.record(Engine::GpSimd, Opcode::Iota)
                .size(dims[0] as u32, ov.free_size() as u32)
                .inputs(0)
                .dtypes(DType::I32, dtype)
                .writes([ov.region()])
                .done()
        },
    );
    out
}

/// An index tile of shape `dims` whose every element holds its own index along `axis`
/// (axis 0: the partition index `i_p`; axis 1: the free index `i_f`, ...), cast to `dtype`.
/// This materialises NKI's `nl.arange`/`nl.mgrid` index expressions (GpSimdE `iota`).
#[track_caller]
pub fn iota(dims: &[usize], axis: usize, dtype: DType) -> Tile {
    let ins = Op::begin("nl.iota");
    if axis >= dims.len() {
        ins.fail(
            ErrorKind::InvalidArgument,
            format!("axis {axis} is out of range for shape {dims:?}"),
        );
    }
    iota_impl(&ins, dims, dtype, |i| i[axis] as i64)
}

/// A `[1, len]` tile holding `start, start + step, ...` (`len` values) cast to `dtype`, like
/// `nl.arange(start, stop)[None, :]` materialised with GpSimdE `iota`.
#[track_caller]
pub fn arange(start: i32, step: i32, len: usize, dtype: DType) -> Tile {
    iota_impl(&Op::begin("nl.arange"), &[1, len], dtype, |i| {
        start as i64 + step as i64 * i[1] as i64
    })
}

impl Tile {
    /// A copy of the tile converted to `dtype` (NKI `tensor.astype`; VectorE tensor_copy with
    /// round-to-nearest-even, integer conversions saturate).
    #[track_caller]
    pub fn astype(&self, dtype: DType) -> Tile {
        let ins = Op::begin("copy");
        copy_to_impl(&ins, "nl.astype", self.view(), dtype)
    }

    /// The tile with a new size-1 dimension at `axis` (see [`expand_dims`]).
    #[track_caller]
    pub fn expand_dims(&self, axis: usize) -> TileRef<'_> {
        expand_dims(self.view(), axis)
    }
}

impl<'a> TileRef<'a> {
    /// A copy of the view converted to `dtype` (NKI `tensor.astype`).
    #[track_caller]
    pub fn astype(&self, dtype: DType) -> Tile {
        let ins = Op::begin("copy");
        copy_to_impl(&ins, "nl.astype", *self, dtype)
    }

    /// The view with a new size-1 dimension at `axis` (see [`expand_dims`]).
    #[track_caller]
    pub fn expand_dims(&self, axis: usize) -> TileRef<'a> {
        expand_dims(*self, axis)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expand_ap_inserts_unit_dims() {
        let ap = Ap::contiguous(Shape::new(&[4, 6]).unwrap());
        let e = expand_ap(&ap, 1).unwrap();
        assert_eq!(e.shape.dims(), &[4, 1, 6]);
        let e2 = expand_ap(&ap, 2).unwrap();
        assert_eq!(e2.shape.dims(), &[4, 6, 1]);
        // Same elements in the same order.
        let src: Vec<f32> = (0..24).map(|v| v as f32).collect();
        let mut a = vec![0.0; 24];
        let mut b = vec![0.0; 24];
        e.gather(&src, &mut a);
        e2.gather(&src, &mut b);
        assert_eq!(a, src);
        assert_eq!(b, src);
        assert!(expand_ap(&ap, 0).is_err());
        assert!(expand_ap(&ap, 3).is_err());
    }
}
