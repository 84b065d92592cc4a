//! Sparse tag storage: fixed-size pages of `u32` tags allocated when first written, so the
//! writer tags of an HBM tensor cost memory in proportion to what launches touch, not to the
//! tensor's size (a few stores into a `shape_only` [65536, 65536] tensor allocate a few pages).

use std::collections::HashMap;

/// Pages of `N` tags each, by page number, allocated (all zero: "never written") on the first
/// look-up: every look-up of the write paths is followed by a write.
pub(crate) struct Pages<const N: usize> {
    /// Page number -> position in `pages`.
    index: HashMap<usize, usize>,
    pages: Vec<Box<[u32; N]>>,
    /// The last page looked up: (page number, position), so runs over one page hash once.
    last: Option<(usize, usize)>,
}

impl<const N: usize> Default for Pages<N> {
    fn default() -> Self {
        Pages {
            index: HashMap::new(),
            pages: Vec::new(),
            last: None,
        }
    }
}

impl<const N: usize> Pages<N> {
    /// Page `p`, allocated (all zero) on first use.
    #[inline]
    pub(crate) fn page_mut(&mut self, p: usize) -> &mut [u32; N] {
        let pos = match self.last {
            Some((q, pos)) if q == p => pos,
            _ => {
                let next = self.pages.len();
                let pos = *self.index.entry(p).or_insert(next);
                if pos == next {
                    self.pages.push(Box::new([0; N]));
                }
                self.last = Some((p, pos));
                pos
            }
        };
        &mut self.pages[pos]
    }

    /// True when no page was allocated.
    pub(crate) fn is_empty(&self) -> bool {
        self.pages.is_empty()
    }

    /// Tag `i` (page `i / N`, slot `i % N`), allocating its page.
    #[inline]
    pub(crate) fn get(&mut self, i: usize) -> u32 {
        self.page_mut(i / N)[i % N]
    }

    /// Sets tag `i`.
    #[inline]
    pub(crate) fn set(&mut self, i: usize, tag: u32) {
        self.page_mut(i / N)[i % N] = tag;
    }

    /// Bytes held by the allocated pages (for tests of the memory bound).
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        self.pages.len() * N * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_allocate_on_first_use_and_read_zero_before() {
        let mut p = Pages::<4>::default();
        assert_eq!(p.get(1 << 40), 0);
        p.set(1 << 40, 7);
        p.set(5, 3);
        assert_eq!((p.get(1 << 40), p.get(5), p.get(4), p.get(6)), (7, 3, 0, 0));
        assert_eq!(p.bytes(), 2 * 16, "only the pages of 1 << 40 and of 3..8");
    }
}
