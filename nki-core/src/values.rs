//! The values of an HBM tensor, shared copy-on-write, written in place by a launch.
//!
//! [`Values`] is the row-major f32 buffer of a tensor behind an `Arc`, so a load from a kernel
//! input can hand its tile the tensor's own rows instead of a copy (see `tile::TileData`).
//! Reading derefs to the buffer; host-side writing (`DerefMut`) first makes the buffer unique,
//! copying it only if a tile still reads the old values.
//!
//! Inside a launch, program instances on different host threads write disjoint regions of an
//! output at the same time without a lock on the whole tensor: the buffer is made unique once,
//! when the launch first accesses the tensor ([`Values::make_unique`]), and each store or load
//! then copies through [`Values::write_run`] / [`Values::read_run`] the elements its claim in
//! the tensor's access tracker (`hbm::track`) covers. The tracker lets two accesses of
//! overlapping elements run at once only when both are loads, which is what makes the
//! unsynchronised copies sound; the elements sit in `UnsafeCell`s for that reason.
//!
//! The buffer may also be host memory lent for one scope (`Hbm::with_borrowed`, see
//! `hbm::borrow`): such values are only ever read. They are never shared with tiles
//! ([`Values::share`] says no, so tile loads copy), never written (making them unique first
//! copies them into an owned buffer), and the scope replaces them with a copy, under the
//! tensor's write lock, before the loan ends if anything else still holds the tensor.

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::Arc;

/// The row-major values of an HBM tensor (already rounded to its dtype), shared with the
/// tiles loaded from it until something writes them.
pub(crate) struct Values(Arc<Cells>);

/// The elements: owned, each writable through a shared reference (see the module doc), or
/// lent read-only for a scope.
enum Cells {
    /// A buffer of the tensor's own.
    Owned(Box<[UnsafeCell<f32>]>),
    /// `len` slots at `ptr` lent by `Hbm::with_borrowed` for the duration of its scope; the
    /// scope ends only after these cells are gone or replaced (see the module doc).
    Borrowed { ptr: NonNull<f32>, len: usize },
}

// SAFETY: owned cells are written through shared references only by `Values::write_run` and
// friends, whose callers hold a claim of the tracker that no other running access overlaps
// (see their docs); borrowed cells are plain `f32`s that nothing writes, valid for as long as
// the cells exist (`Hbm::with_borrowed` drops or replaces them before its loan ends), so they
// may be read from any thread.
unsafe impl Sync for Cells {}
// SAFETY: as above; the cells own nothing thread-bound.
unsafe impl Send for Cells {}

impl Cells {
    fn from_slice(v: &[f32]) -> Cells {
        Cells::Owned(v.iter().map(|&x| UnsafeCell::new(x)).collect())
    }

    fn as_slice(&self) -> &[f32] {
        match self {
            // SAFETY: `UnsafeCell<f32>` has the layout of `f32`; nothing writes the elements
            // while this shared view lives (writes happen only in claimed regions, which no
            // reader of this slice overlaps: see `Values::write_run`).
            Cells::Owned(cells) => unsafe {
                std::slice::from_raw_parts(cells.as_ptr().cast::<f32>(), cells.len())
            },
            // SAFETY: the loan outlives the cells and nothing writes lent values.
            Cells::Borrowed { ptr, len } => unsafe {
                std::slice::from_raw_parts(ptr.as_ptr(), *len)
            },
        }
    }

    /// The owned cells, for writing.
    fn owned(&self) -> &[UnsafeCell<f32>] {
        match self {
            Cells::Owned(cells) => cells,
            // Lent values back kernel inputs only, and making values unique for writing
            // copies them first (`Values::make_unique`).
            Cells::Borrowed { .. } => unreachable!("lent HBM values are never written"),
        }
    }
}

impl Values {
    /// A handle on the same values for a tile to read in place; `None` for lent values,
    /// which must not outlive their loan inside a tile.
    pub(crate) fn share(&self) -> Option<Values> {
        match *self.0 {
            Cells::Owned(_) => Some(Values(Arc::clone(&self.0))),
            Cells::Borrowed { .. } => None,
        }
    }

    /// Values reading `len` slots at `ptr`, lent for a scope, without a copy.
    ///
    /// # Safety
    /// The `len` f32s at `ptr` stay valid and unwritten until these values (and every handle
    /// on them) are dropped or made owned ([`Values::make_owned`]); `Hbm::with_borrowed`
    /// guarantees it.
    pub(crate) unsafe fn borrowed(ptr: NonNull<f32>, len: usize) -> Values {
        Values(Arc::new(Cells::Borrowed { ptr, len }))
    }

    /// True for values lent for a scope (read-only; see the module doc).
    pub(crate) fn is_borrowed(&self) -> bool {
        matches!(*self.0, Cells::Borrowed { .. })
    }

    /// Replaces lent values with an owned copy (nothing for owned values).
    pub(crate) fn make_owned(&mut self) {
        if self.is_borrowed() {
            self.0 = Arc::new(Cells::from_slice(self.0.as_slice()));
        }
    }

    /// Makes the buffer unique and owned (copying it if a tile still shares it or it is
    /// lent), so that a launch may write it in place.
    pub(crate) fn make_unique(&mut self) {
        if Arc::get_mut(&mut self.0).is_none() || self.is_borrowed() {
            self.0 = Arc::new(Cells::from_slice(self.0.as_slice()));
        }
    }

    /// The buffer itself as a `Vec`, without a copy, when it is owned and nothing shares it;
    /// the values back otherwise.
    pub(crate) fn into_vec(self) -> Result<Vec<f32>, Values> {
        match Arc::try_unwrap(self.0) {
            Ok(Cells::Owned(cells)) => {
                // SAFETY: `UnsafeCell<f32>` is `repr(transparent)` over `f32`, so the boxed
                // slice is a valid `[f32]` of the same length and allocation layout.
                let b = unsafe { Box::from_raw(Box::into_raw(cells) as *mut [f32]) };
                Ok(b.into_vec())
            }
            Ok(borrowed) => Err(Values(Arc::new(borrowed))),
            Err(shared) => Err(Values(shared)),
        }
    }

    /// The elements `off..off + n` for writing through a shared reference.
    ///
    /// # Safety
    /// The caller holds a claim of the tensor's access tracker over these elements that no
    /// other running access overlaps (the tracker makes overlapping accesses wait unless both
    /// are loads), the buffer was made unique for the running launch, and no tile shares it;
    /// the slice is dropped before the claim ends.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn run_mut(&self, off: usize, n: usize) -> &mut [f32] {
        let cells = &self.0.owned()[off..off + n];
        std::slice::from_raw_parts_mut(UnsafeCell::raw_get(cells.as_ptr()), n)
    }

    /// Copies `src` into the elements `off..off + src.len()` with streaming (non-temporal)
    /// stores where the CPU has them (x86-64): a store into HBM then writes memory without
    /// first reading the destination's cache lines, as the device's DMA does not either.
    /// The values are the same as a plain copy's.
    ///
    /// # Safety
    /// As [`Values::run_mut`].
    pub(crate) unsafe fn stream_run(&self, off: usize, src: &[f32]) {
        let dst = self.run_mut(off, src.len());
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_loadu_ps, _mm_sfence, _mm_stream_ps};
            // Plain stores up to the first 16-byte boundary, streaming stores of 4 values
            // after it, plain stores for the tail.
            let head = dst.as_ptr().align_offset(16).min(dst.len());
            dst[..head].copy_from_slice(&src[..head]);
            let body = (dst.len() - head) / 4 * 4;
            let (d, s) = (dst[head..].as_mut_ptr(), src[head..].as_ptr());
            for i in (0..body).step_by(4) {
                // SAFETY: `d + i` is 16-byte aligned and `i + 4 <= body`, in both slices;
                // SSE is part of x86-64.
                _mm_stream_ps(d.add(i), _mm_loadu_ps(s.add(i)));
            }
            dst[head + body..].copy_from_slice(&src[head + body..]);
            // Streaming stores are weakly ordered: fence them before the claim ends.
            _mm_sfence();
        }
        #[cfg(not(target_arch = "x86_64"))]
        dst.copy_from_slice(src);
    }

    /// Sets each element `off + j * stride` (`j < src.len()`) to `f(its value, src[j])`
    /// through a shared reference.
    ///
    /// # Safety
    /// As [`Values::run_mut`].
    pub(crate) unsafe fn write_run(
        &self,
        off: usize,
        stride: isize,
        src: &[f32],
        f: impl Fn(f32, f32) -> f32,
    ) {
        let cells = self.0.owned();
        for (j, &v) in src.iter().enumerate() {
            let cell = cells[(off as isize + j as isize * stride) as usize].get();
            *cell = f(*cell, v);
        }
    }

    /// Reads the elements `off, off + stride, ...` (`n` of them) into `out`.
    ///
    /// # Safety
    /// As [`Values::write_run`], except that other loads may overlap.
    pub(crate) unsafe fn read_run(&self, off: usize, stride: isize, n: usize, out: &mut Vec<f32>) {
        let cells = match &*self.0 {
            Cells::Owned(cells) => cells,
            Cells::Borrowed { .. } => {
                // Nothing writes lent values: read them as plain f32s.
                let v = self.0.as_slice();
                if stride == 1 {
                    out.extend_from_slice(&v[off..off + n]);
                } else {
                    out.extend((0..n).map(|j| v[(off as isize + j as isize * stride) as usize]));
                }
                return;
            }
        };
        if stride == 1 {
            let src = &cells[off..off + n];
            out.extend_from_slice(std::slice::from_raw_parts(src.as_ptr().cast::<f32>(), n));
        } else {
            out.extend((0..n).map(|j| *cells[(off as isize + j as isize * stride) as usize].get()));
        }
    }
}

impl Clone for Values {
    /// Another handle on owned values ([`Values::share`]); an owned copy of lent ones, which
    /// no handle may keep past their loan.
    fn clone(&self) -> Values {
        self.share()
            .unwrap_or_else(|| Values(Arc::new(Cells::from_slice(self.0.as_slice()))))
    }
}

impl From<Vec<f32>> for Values {
    /// The vector's own buffer, without a copy (and without touching its pages: a freshly
    /// allocated zeroed buffer stays unmapped until a store writes it).
    fn from(v: Vec<f32>) -> Values {
        let b = v.into_boxed_slice();
        // SAFETY: `UnsafeCell<f32>` is `repr(transparent)` over `f32`: same layout, same
        // allocation.
        let cells = unsafe { Box::from_raw(Box::into_raw(b) as *mut [UnsafeCell<f32>]) };
        Values(Arc::new(Cells::Owned(cells)))
    }
}

impl Deref for Values {
    type Target = [f32];

    fn deref(&self) -> &[f32] {
        self.0.as_slice()
    }
}

impl DerefMut for Values {
    /// The values for writing: copied first when a tile still shares them.
    fn deref_mut(&mut self) -> &mut [f32] {
        self.make_unique();
        let Some(Cells::Owned(cells)) = Arc::get_mut(&mut self.0) else {
            unreachable!("made unique and owned above")
        };
        // SAFETY: exclusive access to the cells; `UnsafeCell<f32>` has the layout of `f32`.
        unsafe { std::slice::from_raw_parts_mut(cells.as_mut_ptr().cast::<f32>(), cells.len()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_leaves_a_shared_handle_with_the_old_values() {
        let mut v = Values::from(vec![1.0, 2.0]);
        let tile = v.share().expect("owned values are shared");
        assert!(
            std::ptr::eq(tile.as_ptr(), v.as_ptr()),
            "shared, not copied"
        );
        v[0] = 5.0;
        assert_eq!((tile[0], v[0]), (1.0, 5.0));
        drop(tile);
        let before = v.as_ptr();
        v[1] = 6.0;
        assert_eq!(v.as_ptr(), before, "unique values are written in place");
        assert_eq!(*v, [5.0, 6.0]);
    }

    #[test]
    fn runs_are_written_and_read_in_place() {
        let mut v = Values::from(vec![0.0; 8]);
        v.make_unique();
        let mut out = Vec::new();
        // SAFETY: one thread, nothing shares the values.
        unsafe {
            v.run_mut(1, 2).copy_from_slice(&[10.0, 20.0]);
            v.stream_run(3, &[]);
            v.write_run(4, 2, &[3.0, 4.0], |old, x| old + x);
            v.read_run(0, 2, 4, &mut out);
        }
        assert_eq!(*v, [0.0, 10.0, 20.0, 0.0, 3.0, 0.0, 4.0, 0.0]);
        assert_eq!(out, [0.0, 20.0, 3.0, 4.0]);
        // Streaming copies of every length and alignment hold the same values.
        let mut w = Values::from(vec![0.0; 64]);
        w.make_unique();
        for off in 0..8 {
            for n in 0..40 {
                let src: Vec<f32> = (0..n).map(|i| (off * 100 + i) as f32).collect();
                // SAFETY: as above.
                unsafe { w.stream_run(off, &src) };
                assert_eq!(&w[off..off + n], &src[..], "off {off}, n {n}");
            }
        }
    }
}
