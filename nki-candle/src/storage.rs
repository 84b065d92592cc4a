//! Moving candle CPU storage into nki-rs [`Hbm`] tensors and back.
//!
//! A contiguous candle tensor (any start offset) becomes an `Hbm` in one pass over its slice
//! ([`Hbm::from_slice`]); a strided view (a transpose, a broadcast) is first gathered into
//! row-major order. A kernel's output comes back in one pass ([`Hbm::to_vec`]) and its `Vec`
//! moves into the candle storage without another copy.

use crate::error::op_error;
use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, Layout, Storage, Tensor, WithDType};
use nki_core::prelude::*;

/// The element types the bridge moves between candle and nki-rs.
pub trait BridgeElement: Element + WithDType {}

impl BridgeElement for f32 {}
impl BridgeElement for bf16 {}
impl BridgeElement for f16 {}

/// Runs `$body` with the type alias `$t` bound to the element type of candle dtype `$dtype`, or
/// evaluates to an unsupported-dtype error of op `$op`.
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
            other => Err($crate::error::op_error(
                $op,
                format!("dtype {other:?} is not supported (f32, bf16 and f16 are)"),
            )),
        }
    };
}
pub(crate) use with_element;

/// Copies candle storage seen through `layout` into a new `Hbm`. `index` and `first` (the
/// dtype of the op's first input) make the dtype-mismatch message.
pub(crate) fn to_hbm<T: BridgeElement>(
    op: &str,
    index: usize,
    storage: &CpuStorage,
    layout: &Layout,
) -> candle_core::Result<Hbm<T>> {
    if storage.dtype() != <T as WithDType>::DTYPE {
        return Err(op_error(
            op,
            format!(
                "input {index} has dtype {:?} but input 0 has {:?}; the tensors of an nki-rs op \
                 share one dtype",
                storage.dtype(),
                <T as WithDType>::DTYPE
            ),
        ));
    }
    let data = T::cpu_storage_as_slice(storage)?;
    let hbm = match layout.contiguous_offsets() {
        Some((start, end)) => Hbm::from_slice(layout.dims(), &data[start..end]),
        None => Hbm::from_vec(layout.dims(), gather(data, layout)),
    };
    hbm.map_err(|e| op_error(op, format!("input {index}: {e}")))
}

/// Copies a CPU tensor into a new `Hbm`.
pub(crate) fn tensor_to_hbm<T: BridgeElement>(
    op: &str,
    index: usize,
    t: &Tensor,
) -> candle_core::Result<Hbm<T>> {
    let (storage, layout) = t.storage_and_layout();
    match &*storage {
        Storage::Cpu(cpu) => to_hbm(op, index, cpu, layout),
        _ => Err(op_error(
            op,
            format!(
                "input {index} is on {:?}; nki-rs kernels run on the CPU device",
                t.device().location()
            ),
        )),
    }
}

/// The values of a kernel output as candle CPU storage.
pub(crate) fn to_storage<T: BridgeElement>(
    op: &str,
    hbm: &Hbm<T>,
) -> candle_core::Result<CpuStorage> {
    let values = hbm.to_vec().map_err(|e| op_error(op, e))?;
    Ok(T::to_cpu_storage_owned(values))
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
