//! HBM tensors over host memory a framework already holds, and values moved out without a
//! copy: what a bridge such as `nki-candle` needs to hand a kernel its framework's tensors and
//! take the output back as the framework's storage.
//!
//! [`with_borrowed`] runs a closure with a [`Lender`] whose [`Lender::hbm`] makes an
//! [`Hbm`] reading a borrowed slice in place (f32, i32 and u32, whose host slots are their own
//! bits; other element types are converted once into an owned buffer, as
//! [`Hbm::from_slice`] does). Lent values are only read: a launch never writes them in place
//! (writing a lent tensor, e.g. as a kernel output, first copies its values into a buffer of
//! its own), tile loads copy from them instead of sharing them, and when the closure returns
//! (or unwinds) every lent tensor still held elsewhere (an `Hbm` or view moved out of the
//! closure) gets an owned copy of its values under the tensor's write lock, so nothing reads
//! the slice after the loan ends. The `'a` of a [`Lender`] is invariant, so a slice lent must outlive the
//! whole [`with_borrowed`] call (the `std::thread::scope` construction).
//!
//! [`Hbm::into_vec`] moves a tensor's buffer out as a `Vec` (f32, i32, u32 tensors nothing
//! else holds) instead of copying it. So that such a buffer (a kernel output handed to the
//! framework) costs little more than the kernel's own stores, large zero-filled tensor buffers
//! ask the OS for transparent huge pages before anything touches them
//! ([`super::storage::advise_huge_pages`]): a fresh 64 MiB output then takes 32 page faults, not 16 384.

use super::storage::{no_data, HbmStorage};
use super::tensor::Hbm;
use crate::dtype::Element;
use crate::error::Result;
use crate::values::Values;
use std::any::TypeId;
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

/// True when `T`'s host slot is its own bit pattern as an f32 (see [`Element::to_slot`]), so
/// a `[T]` is already a row of slots.
fn slots_are_bits<T: Element>() -> bool {
    let t = TypeId::of::<T>();
    t == TypeId::of::<f32>() || t == TypeId::of::<i32>() || t == TypeId::of::<u32>()
}

/// Lends host slices to [`Hbm`] tensors for the duration of one [`with_borrowed`] call.
pub struct Lender<'a> {
    /// The tensors over lent memory, detached when the call ends.
    lent: Mutex<Vec<Arc<HbmStorage>>>,
    /// Invariant in `'a`: a lent slice outlives the call (see the module doc).
    _loan: PhantomData<fn(&'a ()) -> &'a ()>,
}

impl<'a> Lender<'a> {
    /// A kernel input of `shape` over the row-major `values`, read in place for f32, i32 and
    /// u32 (converted once into an owned buffer for other element types). A shape that does
    /// not hold `values.len()` elements is an
    /// [`ErrorKind::ShapeMismatch`](crate::ErrorKind::ShapeMismatch) error.
    pub fn hbm<T: Element>(&self, shape: &[usize], values: &'a [T]) -> Result<Hbm<T>> {
        let s = super::tensor::shape_holding("Lender::hbm", shape, values.len(), "lent")?;
        if !slots_are_bits::<T>() {
            return Hbm::from_slice(shape, values);
        }
        let ptr = NonNull::from(values).cast::<f32>();
        // SAFETY: `T` is f32, i32 or u32: four bytes, aligned to four, every bit pattern a
        // valid f32, so the slice is `values.len()` f32 slots. The slice lives for `'a`,
        // which outlives the `with_borrowed` call (invariance), and the call detaches this
        // storage (drops or copies its values) before it returns; nothing writes lent values.
        let lent = unsafe { Values::borrowed(ptr, values.len()) };
        let st = HbmStorage::with_values(T::DTYPE, s, Some(lent));
        self.lent
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Arc::clone(&st));
        Ok(Hbm::wrap(st))
    }

    /// Ends every loan: a lent tensor nothing else holds loses its values; one still held
    /// (an `Hbm` or view moved out of the closure) gets an owned copy.
    fn detach(&self) {
        let lent = std::mem::take(&mut *self.lent.lock().unwrap_or_else(|p| p.into_inner()));
        for st in lent {
            let mut g = st.write();
            // Only this list holds the storage, and no weak handle can revive it: nothing
            // will read the values again.
            let alone = Arc::strong_count(&st) == 1 && Arc::weak_count(&st) == 0;
            match g.values.as_mut() {
                Some(v) if v.is_borrowed() && alone => g.values = None,
                Some(v) => v.make_owned(),
                None => {}
            }
        }
    }
}

/// Detaches the lender's tensors when the call ends, returning or unwinding.
struct DetachOnDrop<'l, 'a>(&'l Lender<'a>);

impl Drop for DetachOnDrop<'_, '_> {
    fn drop(&mut self) {
        self.0.detach();
    }
}

/// Runs `f` with a [`Lender`] whose [`Lender::hbm`] makes kernel inputs over host slices
/// without copying them (f32, i32, u32): the way in for a framework whose tensors already
/// live in host memory. The loans end when `f` returns; an `Hbm` kept past that point holds
/// its own copy of the values.
///
/// ```
/// use nki_core::Hbm;
/// use nki_core::prelude::*;
///
/// #[nki_kernel]
/// fn double(x: &Hbm<f32>, y: &mut Hbm<f32>) {
///     let t = nl::load(x.view());
///     nl::store(y.view(), &(&t + &t));
/// }
///
/// let host = vec![1.0f32, 2.0, 3.0, 4.0];
/// let out = nki_core::with_borrowed(|lend| -> Result<Vec<f32>, NkiError> {
///     let x = lend.hbm(&[2, 2], &host)?; // reads `host` in place
///     let mut y = Hbm::<f32>::zeros([2, 2]);
///     double::run(Launch::new([1]), &x, &mut y)?;
///     y.into_vec() // the output's buffer, not a copy
/// })?;
/// assert_eq!(out, [2.0, 4.0, 6.0, 8.0]);
/// # Ok::<(), NkiError>(())
/// ```
pub fn with_borrowed<'a, R>(f: impl FnOnce(&Lender<'a>) -> R) -> R {
    let lender = Lender {
        lent: Mutex::new(Vec::new()),
        _loan: PhantomData,
    };
    let _detach = DetachOnDrop(&lender);
    f(&lender)
}

impl<T: Element> Hbm<T> {
    /// The values as a row-major `Vec<T>`, moving the tensor's own buffer out when it can
    /// (an f32, i32 or u32 tensor with values that nothing else holds: no view, tile or
    /// launch) and copying it as [`Hbm::to_vec`] does otherwise. [`ErrorKind::NoData`](crate::ErrorKind::NoData) for
    /// shape-only tensors.
    pub fn into_vec(self) -> Result<Vec<T>> {
        let st = self.st;
        if !slots_are_bits::<T>() || Arc::strong_count(&st) != 1 || Arc::weak_count(&st) != 0 {
            return Hbm::<T>::wrap(st).to_vec();
        }
        let taken = st.write().values.take();
        let values = taken.ok_or_else(|| no_data(&st, "Hbm::into_vec"))?;
        match values.into_vec() {
            Ok(v) => {
                let mut v = std::mem::ManuallyDrop::new(v);
                // SAFETY: `T` is f32, i32 or u32 (checked above): same size and alignment as
                // f32 and every bit pattern valid, so the allocation is a `Vec<T>` of the same
                // length and capacity; the slots of these types are their bits.
                Ok(unsafe {
                    Vec::from_raw_parts(v.as_mut_ptr().cast::<T>(), v.len(), v.capacity())
                })
            }
            Err(shared) => Ok(shared.iter().map(|&x| T::from_slot(x)).collect()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn lent_values_are_read_in_place_and_detached_at_the_end() {
        let host = vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
        let kept = with_borrowed(|lend| {
            let h = lend.hbm(&[2, 3], &host).unwrap();
            let g = h.st.read();
            let v = g.values.as_ref().unwrap();
            assert!(v.is_borrowed() && std::ptr::eq(v.as_ptr(), host.as_ptr()));
            assert!(
                v.share().is_none(),
                "lent values are never shared with tiles"
            );
            drop(g);
            assert_eq!(h.to_vec().unwrap(), host);
            let dropped = lend.hbm(&[6], &host).unwrap();
            drop(dropped);
            h
        });
        // Kept past the loan: its own copy, same values.
        let g = kept.st.read();
        let v = g.values.as_ref().unwrap();
        assert!(!v.is_borrowed() && !std::ptr::eq(v.as_ptr(), host.as_ptr()));
        drop(g);
        assert_eq!(kept.to_vec().unwrap(), host);
    }

    #[test]
    fn other_types_and_bad_shapes() {
        let ints = [7i32, -8, 9];
        let halves = [half::bf16::from_f32(1.5); 2];
        with_borrowed(|lend| {
            let i = lend.hbm(&[3], &ints).unwrap();
            assert!(i.st.read().values.as_ref().unwrap().is_borrowed());
            assert_eq!(i.to_vec().unwrap(), ints);
            let h = lend.hbm(&[2], &halves).unwrap();
            assert!(
                !h.st.read().values.as_ref().unwrap().is_borrowed(),
                "converted"
            );
            assert_eq!(h.to_vec().unwrap(), halves);
            let e = lend.hbm(&[2, 2], &ints).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
        });
    }

    #[test]
    fn into_vec_moves_the_buffer_out_when_alone() {
        let h = Hbm::from_vec(&[2, 2], vec![1u32, 2, 3, u32::MAX]).unwrap();
        let before = h.st.read().values.as_ref().unwrap().as_ptr() as usize;
        let v = h.into_vec().unwrap();
        assert_eq!(
            (v.as_ptr() as usize, &v[..]),
            (before, &[1, 2, 3, u32::MAX][..])
        );
        // A view still holds the tensor: copied, values intact for the view.
        let h = Hbm::from_vec(&[2], vec![1.5f32, 2.5]).unwrap();
        let view = h.view();
        assert_eq!(h.into_vec().unwrap(), [1.5, 2.5]);
        assert!(view.st.read().values.is_some());
        let e = Hbm::<f32>::shape_only([2]).into_vec().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NoData);
    }
}
