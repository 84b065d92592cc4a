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
//! the tensor's access tracker (`super::track`) covers. The tracker lets two accesses of
//! overlapping elements run at once only when both are loads, which is what makes the
//! unsynchronised copies sound; the elements sit in `UnsafeCell`s for that reason.

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

/// The row-major values of an HBM tensor (already rounded to its dtype), shared with the
/// tiles loaded from it until something writes them.
#[derive(Clone)]
pub(crate) struct Values(Arc<Cells>);

/// The elements, each writable through a shared reference (see the module doc).
struct Cells(Box<[UnsafeCell<f32>]>);

// SAFETY: the cells are written through shared references only by `Values::write_run`, whose
// callers hold a claim of the tracker that no other running access overlaps (see its doc).
unsafe impl Sync for Cells {}

impl Cells {
    fn from_slice(v: &[f32]) -> Cells {
        Cells(v.iter().map(|&x| UnsafeCell::new(x)).collect())
    }

    fn as_slice(&self) -> &[f32] {
        // SAFETY: `UnsafeCell<f32>` has the layout of `f32`; nothing writes the elements
        // while this shared view lives (writes happen only in claimed regions, which no
        // reader of this slice overlaps: see `Values::write_run`).
        unsafe { std::slice::from_raw_parts(self.0.as_ptr().cast::<f32>(), self.0.len()) }
    }
}

impl Values {
    /// A handle on the same values for a tile to read in place.
    pub(crate) fn share(&self) -> Values {
        Values(Arc::clone(&self.0))
    }

    /// Makes the buffer unique (copying it if a tile still shares it), so that a launch may
    /// write it in place.
    pub(crate) fn make_unique(&mut self) {
        if Arc::get_mut(&mut self.0).is_none() {
            self.0 = Arc::new(Cells::from_slice(self.0.as_slice()));
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
        let cells = &self.0 .0[off..off + n];
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
        let cells = &self.0 .0;
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
        let cells = &self.0 .0;
        if stride == 1 {
            let src = &cells[off..off + n];
            out.extend_from_slice(std::slice::from_raw_parts(src.as_ptr().cast::<f32>(), n));
        } else {
            out.extend((0..n).map(|j| *cells[(off as isize + j as isize * stride) as usize].get()));
        }
    }
}

impl From<Vec<f32>> for Values {
    fn from(v: Vec<f32>) -> Values {
        Values(Arc::new(Cells(
            v.into_iter().map(UnsafeCell::new).collect(),
        )))
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
        let cells = Arc::get_mut(&mut self.0).expect("made unique above");
        // SAFETY: exclusive access to the cells; `UnsafeCell<f32>` has the layout of `f32`.
        unsafe { std::slice::from_raw_parts_mut(cells.0.as_mut_ptr().cast::<f32>(), cells.0.len()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_leaves_a_shared_handle_with_the_old_values() {
        let mut v = Values::from(vec![1.0, 2.0]);
        let tile = v.share();
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
