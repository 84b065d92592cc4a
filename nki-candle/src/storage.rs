//! Moving candle CPU storage into nki-rs [`Hbm`] tensors and back, without copies where the
//! layout allows.
//!
//! A contiguous input (any start offset) is lent to the kernel in place
//! ([`nki_core::with_borrowed`]: f32, i32 and u32, whose host slots are their own bits;
//! bf16, f16, u8 and i16 are converted in one pass, as nki-rs keeps every element in an f32
//! slot). A strided view (a transpose, a broadcast, a narrowed column range) is gathered once
//! into row-major order first, then lent. An output is allocated zeroed (fresh pages the kernel
//! writes first) and its buffer moved into the candle storage ([`Hbm::into_vec`]): no copy
//! for f32, i32 and u32, one conversion pass for the others.

use crate::kernel::{each_hbm, HbmTensor};
use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, DType, Error, Layout, WithDType};
use nki_core::prelude::*;
use nki_core::Lender;

/// The element types the bridge moves between candle and nki-rs.
pub trait BridgeElement: Element + WithDType {
    /// The tensor as an [`HbmTensor`].
    fn into_tensor(h: Hbm<Self>) -> HbmTensor;
}

macro_rules! bridge_element {
    ($($t:ty => $v:ident),*) => {$(
        impl BridgeElement for $t {
            fn into_tensor(h: Hbm<Self>) -> HbmTensor {
                HbmTensor::$v(h)
            }
        }
    )*};
}
bridge_element!(f32 => F32, bf16 => BF16, f16 => F16, u8 => U8, u32 => U32, i16 => I16, i32 => I32);

/// Runs `$body` with the type alias `$t` bound to the element type of candle dtype `$dtype`,
/// or evaluates to `Err(UnsupportedDTypeForOp)` of op `$op` (f64, i64, the 8-bit and smaller
/// floats: nki-rs has no element type for them).
macro_rules! with_element {
    ($op:expr, $dtype:expr, $t:ident => $body:expr) => {
        match $dtype {
            candle_core::DType::F32 => {
                type $t = f32;
                $body
            }
            candle_core::DType::BF16 => {
                type $t = nki_core::prelude::bf16;
                $body
            }
            candle_core::DType::F16 => {
                type $t = nki_core::prelude::f16;
                $body
            }
            candle_core::DType::U8 => {
                type $t = u8;
                $body
            }
            candle_core::DType::U32 => {
                type $t = u32;
                $body
            }
            candle_core::DType::I16 => {
                type $t = i16;
                $body
            }
            candle_core::DType::I32 => {
                type $t = i32;
                $body
            }
            other => Err(candle_core::Error::UnsupportedDTypeForOp(other, $op)),
        }
    };
}

/// One input ready to lend: contiguous storage as it is, or a strided view gathered once.
pub(crate) enum Source<'s> {
    /// The candle storage (contiguous elements `start..end` of it) and the view's shape.
    Contiguous {
        storage: &'s CpuStorage,
        start: usize,
        end: usize,
        dims: &'s [usize],
    },
    /// The view's elements gathered into row-major order.
    Gathered {
        storage: CpuStorage,
        dims: &'s [usize],
    },
}

impl<'s> Source<'s> {
    /// The source of an input of op `op` seen through `layout`.
    pub(crate) fn new(
        op: &'static str,
        storage: &'s CpuStorage,
        layout: &'s Layout,
    ) -> candle_core::Result<Source<'s>> {
        let dims = layout.dims();
        if let Some((start, end)) = layout.contiguous_offsets() {
            // Check the dtype now, as the gathered case does.
            with_element!(op, storage.dtype(), T => T::cpu_storage_as_slice(storage).map(|_| ()))?;
            return Ok(Source::Contiguous {
                storage,
                start,
                end,
                dims,
            });
        }
        let storage = with_element!(op, storage.dtype(), T => {
            T::cpu_storage_as_slice(storage).map(|data| T::to_cpu_storage_owned(gather(data, layout)))
        })?;
        Ok(Source::Gathered { storage, dims })
    }

    /// The candle dtype.
    pub(crate) fn dtype(&self) -> DType {
        match self {
            Source::Contiguous { storage, .. } => storage.dtype(),
            Source::Gathered { storage, .. } => storage.dtype(),
        }
    }

    /// The shape.
    pub(crate) fn dims(&self) -> &[usize] {
        match self {
            Source::Contiguous { dims, .. } | Source::Gathered { dims, .. } => dims,
        }
    }

    /// The input as a kernel input lent by `lend` (see the module doc).
    pub(crate) fn lend<'a>(
        &'a self,
        op: &'static str,
        lend: &Lender<'a>,
    ) -> candle_core::Result<HbmTensor> {
        let (storage, range) = match self {
            Source::Contiguous {
                storage,
                start,
                end,
                ..
            } => (*storage, *start..*end),
            Source::Gathered { storage, dims } => (storage, 0..dims.iter().product::<usize>()),
        };
        with_element!(op, storage.dtype(), T => {
            let data = T::cpu_storage_as_slice(storage)?;
            lend.hbm(self.dims(), &data[range])
                .map(T::into_tensor)
                .map_err(|e| crate::error::op_error(op, e))
        })
    }
}

/// A zero-filled output of op `op`.
pub(crate) fn output(
    op: &'static str,
    shape: &[usize],
    dtype: DType,
) -> candle_core::Result<HbmTensor> {
    with_element!(op, dtype, T => {
        Hbm::<T>::zeros_dyn(shape)
            .map(T::into_tensor)
            .map_err(|e| crate::error::op_error(op, e))
    })
}

/// The values of a kernel output as candle CPU storage: the tensor's own buffer where its
/// element type allows (see the module doc).
pub(crate) fn into_storage(op: &str, t: HbmTensor) -> Result<CpuStorage, Error> {
    each_hbm!(t, h, T => h
        .into_vec()
        .map(T::to_cpu_storage_owned)
        .map_err(|e| crate::error::op_error(op, e)))
}

/// The elements a strided layout addresses, in row-major order.
fn gather<T: Copy>(data: &[T], layout: &Layout) -> Vec<T> {
    let (dims, strides) = (layout.dims(), layout.stride());
    let count: usize = dims.iter().product();
    let mut out = Vec::with_capacity(count);
    let mut index = vec![0usize; dims.len()];
    for _ in 0..count {
        let offset: usize = index.iter().zip(strides).map(|(i, s)| i * s).sum();
        out.push(data[layout.start_offset() + offset]);
        for axis in (0..dims.len()).rev() {
            index[axis] += 1;
            if index[axis] < dims[axis] {
                break;
            }
            index[axis] = 0;
        }
    }
    out
}
