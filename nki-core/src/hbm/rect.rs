//! The elements an HBM access touches, as a few rectangles rather than per element.
//!
//! A tensor is seen as a matrix of `rows x cols` with `cols` its last dimension. A [`Rect`] is
//! the set of elements in rows `r0, r0 + rs, ...` (`rn` of them) and columns `c0, c0 + cs,
//! ...` (`cn` of them): a tile stored into a 2-D tensor is one rectangle, whatever its size,
//! so the access tracker's cost follows the number of accesses, not the elements.
//! [`rects_of`] splits any view into rectangles (one per row group for views of more than two
//! dimensions; rows crossing the tensor's rows are split where they cross).

use crate::access::Ap;

/// An arithmetic progression `start, start + step, ...` of `n` (≥ 1) values; `step` is 0 when
/// `n` is 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Prog {
    pub(crate) start: u64,
    pub(crate) n: u64,
    pub(crate) step: u64,
}

impl Prog {
    fn new(start: u64, n: u64, step: u64) -> Prog {
        let step = if n <= 1 { 0 } else { step };
        Prog { start, n, step }
    }

    /// The last value.
    pub(crate) fn last(&self) -> u64 {
        self.start + (self.n - 1) * self.step
    }

    /// True when `x` is one of the values.
    pub(crate) fn contains(&self, x: u64) -> bool {
        if x < self.start || x > self.last() {
            return false;
        }
        self.step == 0 || (x - self.start).is_multiple_of(self.step)
    }

    /// The smallest value of both progressions, if they share one.
    pub(crate) fn first_common(&self, other: &Prog) -> Option<u64> {
        let lo = self.start.max(other.start);
        let hi = self.last().min(other.last());
        if lo > hi {
            return None;
        }
        let (a, b) = match (self.step, other.step) {
            (0, _) => return other.contains(self.start).then_some(self.start),
            (_, 0) => return self.contains(other.start).then_some(other.start),
            _ => (self, other),
        };
        // x = a.start (mod a.step) and x = b.start (mod b.step), by the Chinese remainder
        // theorem over the gcd.
        let (sa, sb) = (a.step as i128, b.step as i128);
        let (g, p, _) = ext_gcd(sa, sb);
        let diff = b.start as i128 - a.start as i128;
        if diff % g != 0 {
            return None;
        }
        let lcm = sa / g * sb;
        let k = (diff / g * p).rem_euclid(sb / g);
        let x0 = (a.start as i128 + k * sa).rem_euclid(lcm);
        let lo = lo as i128;
        let x = if x0 >= lo {
            x0 - (x0 - lo) / lcm * lcm
        } else {
            x0 + (lo - x0 + lcm - 1) / lcm * lcm
        };
        (x <= hi as i128).then_some(x as u64)
    }
}

/// `(g, p, q)` with `g = gcd(a, b) = p * a + q * b`.
fn ext_gcd(a: i128, b: i128) -> (i128, i128, i128) {
    if b == 0 {
        (a, 1, 0)
    } else {
        let (g, p, q) = ext_gcd(b, a % b);
        (g, q, p - a / b * q)
    }
}

/// The elements of rows `rows` x columns `cols` of a tensor seen as a matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Rect {
    pub(crate) rows: Prog,
    pub(crate) cols: Prog,
}

impl Rect {
    /// The smallest element (row, column) both rectangles hold, if any: the first in
    /// row-major order.
    pub(crate) fn first_common(&self, other: &Rect) -> Option<(u64, u64)> {
        Some((
            self.rows.first_common(&other.rows)?,
            self.cols.first_common(&other.cols)?,
        ))
    }
}

/// The rectangles of view `ap` of a tensor whose rows are `cols` elements long, in the
/// view's row-major order.
pub(crate) fn rects_of(ap: &Ap, cols: usize) -> Vec<Rect> {
    let cols = cols.max(1) as u64;
    match matrix_rect(ap, cols) {
        Some(r) => vec![r],
        None => rects_walked(ap, cols),
    }
}

/// [`rects_of`] row by row: each row's rectangles, merged into the last one where they
/// extend it.
fn rects_walked(ap: &Ap, cols: u64) -> Vec<Rect> {
    let s = ap.inner_stride();
    let mut out: Vec<Rect> = Vec::new();
    ap.for_each_row(|off, n| {
        let (mut off, n) = (off as u64, n as u64);
        let step = if n <= 1 { 0 } else { s.unsigned_abs() as u64 };
        if s < 0 && n > 1 {
            off -= (n - 1) * step;
        }
        run_rects(off, n, step, cols, &mut |r| push_merged(&mut out, r));
    });
    out
}

/// The one rectangle of a 2-D view whose rows each lie within one tensor row, at the same
/// columns, and follow each other at a whole number of tensor rows (a tile stored into or
/// loaded from a matrix): what [`rects_of`]'s row-by-row merging gives, without the walk.
fn matrix_rect(ap: &Ap, cols: u64) -> Option<Rect> {
    let dims = ap.shape.dims();
    let &[rn, n] = dims else {
        return None;
    };
    let (rs, s) = (ap.strides[0], ap.strides[1]);
    let (rn, n) = (rn as u64, n as u64);
    let step = if n <= 1 { 0 } else { s.unsigned_abs() as u64 };
    let mut off = ap.offset as u64;
    if s < 0 && n > 1 {
        off -= (n - 1) * step;
    }
    let (r, c) = (off / cols, off % cols);
    let in_row = step == 0 || c + (n - 1) * step < cols;
    let row_step = (rs > 0 && (rs as u64).is_multiple_of(cols)).then(|| rs as u64 / cols);
    let row_step = if rn == 1 { 0 } else { row_step? };
    in_row.then(|| Rect {
        rows: Prog::new(r, rn, row_step),
        cols: Prog::new(c, n, step),
    })
}

/// The rectangles of the elements `off, off + step, ...` (`n` of them).
fn run_rects(off: u64, n: u64, step: u64, cols: u64, push: &mut impl FnMut(Rect)) {
    let (r, c) = (off / cols, off % cols);
    let one_row = |r, c0, cn, cs| Rect {
        rows: Prog::new(r, 1, 0),
        cols: Prog::new(c0, cn, cs),
    };
    if step == 0 || c + (n - 1) * step < cols {
        // Within one row.
        push(one_row(r, c, n, step));
    } else if step.is_multiple_of(cols) {
        // One column over several rows.
        push(Rect {
            rows: Prog::new(r, n, step / cols),
            cols: Prog::new(c, 1, 0),
        });
    } else if step == 1 {
        // A contiguous run across rows: the rest of the first row, whole rows, the start of
        // the last row.
        let end = off + n;
        let first_end = (r + 1) * cols;
        push(one_row(r, c, first_end - off, 1));
        let (full0, full1) = (r + 1, end / cols);
        if full1 > full0 {
            push(Rect {
                rows: Prog::new(full0, full1 - full0, 1),
                cols: Prog::new(0, cols, 1),
            });
        }
        if !end.is_multiple_of(cols) && end / cols >= full0 {
            push(one_row(end / cols, 0, end % cols, 1));
        }
    } else {
        // A strided run across rows (rare): its elements one row at a time.
        let mut j = 0;
        while j < n {
            let e = off + j * step;
            let (r, c) = (e / cols, e % cols);
            let in_row = ((cols - 1 - c) / step + 1).min(n - j);
            push(one_row(r, c, in_row, step));
            j += in_row;
        }
    }
}

/// Appends `r`, merged into the last rectangle when it extends it by a row (same columns,
/// rows evenly spaced) or by a column (same rows, columns evenly spaced).
fn push_merged(out: &mut Vec<Rect>, r: Rect) {
    if let Some(last) = out.last_mut() {
        if let Some(rows) = extend(&last.rows, &r.rows).filter(|_| last.cols == r.cols) {
            last.rows = rows;
            return;
        }
        if let Some(cols) = extend(&last.cols, &r.cols).filter(|_| last.rows == r.rows) {
            last.cols = cols;
            return;
        }
    }
    out.push(r);
}

/// `p` followed by the single value of `q`, when that keeps an even step.
fn extend(p: &Prog, q: &Prog) -> Option<Prog> {
    if q.n != 1 || q.start <= p.last() {
        return None;
    }
    let gap = q.start - p.last();
    (p.n == 1 || gap == p.step).then(|| Prog::new(p.start, p.n + 1, gap))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::{stepped, IntoIndex, Shape};
    use std::collections::BTreeSet;

    fn elements(rects: &[Rect], cols: u64) -> BTreeSet<u64> {
        let mut s = BTreeSet::new();
        for r in rects {
            for i in 0..r.rows.n {
                for j in 0..r.cols.n {
                    s.insert(
                        (r.rows.start + i * r.rows.step) * cols + r.cols.start + j * r.cols.step,
                    );
                }
            }
        }
        s
    }

    fn view_elements(ap: &Ap) -> BTreeSet<u64> {
        let mut s = BTreeSet::new();
        let st = ap.inner_stride();
        ap.for_each_row(|off, n| {
            for j in 0..n {
                s.insert((off as isize + j as isize * st) as u64);
            }
        });
        s
    }

    #[test]
    fn progressions_meet_at_their_first_common_value() {
        let p = |s, n, st| Prog::new(s, n, st);
        assert_eq!(p(0, 10, 3).first_common(&p(1, 10, 2)), Some(3));
        assert_eq!(p(0, 10, 4).first_common(&p(2, 10, 4)), None);
        assert_eq!(p(5, 1, 0).first_common(&p(1, 10, 2)), Some(5));
        assert_eq!(p(6, 1, 0).first_common(&p(1, 10, 2)), None);
        assert_eq!(p(100, 3, 7).first_common(&p(0, 101, 1)), Some(100));
        // Brute force over small progressions.
        for (a, b) in [
            (p(3, 7, 5), p(8, 9, 3)),
            (p(0, 20, 6), p(4, 20, 10)),
            (p(1, 4, 9), p(0, 50, 2)),
        ] {
            let av: BTreeSet<u64> = (0..a.n).map(|i| a.start + i * a.step).collect();
            let want = (0..b.n)
                .map(|i| b.start + i * b.step)
                .filter(|x| av.contains(x))
                .min();
            assert_eq!(a.first_common(&b), want, "{a:?} {b:?}");
        }
    }

    #[test]
    fn views_split_into_few_rectangles_holding_exactly_their_elements() {
        let shape = Shape::new(&[6, 10]).unwrap();
        let whole = Ap::contiguous(shape);
        let views = [
            whole.slice(&(1..4, 2..9).into_index(), false, "t").unwrap(),
            whole
                .slice(&(.., stepped(1..10, 3)).into_index(), false, "t")
                .unwrap(),
            whole
                .slice(&(stepped(0..6, 2), 4).into_index(), false, "t")
                .unwrap(),
            whole,
        ];
        for ap in &views {
            let rects = rects_of(ap, 10);
            assert_eq!(rects.len(), 1, "{ap:?}: {rects:?}");
            assert_eq!(elements(&rects, 10), view_elements(ap), "{ap:?}");
        }
        // The one-rectangle shortcut gives what the row walk gives, wherever it applies.
        let mut shortcuts = 0;
        for (r0, r1, rstep) in [(0, 6, 1), (1, 4, 1), (0, 6, 2), (2, 3, 1), (5, 6, 1)] {
            for (c0, c1, cstep) in [(0, 10, 1), (2, 9, 1), (1, 10, 3), (4, 5, 1), (0, 10, 9)] {
                let ix = (stepped(r0..r1, rstep), stepped(c0..c1, cstep)).into_index();
                let mut ap = whole.slice(&ix, false, "t").unwrap();
                for reversed in [false, true] {
                    if reversed {
                        // The same elements, columns read right to left.
                        let n = ap.shape.dims()[1] as isize;
                        ap.offset = (ap.offset as isize + (n - 1) * ap.strides[1]) as usize;
                        ap.strides[1] = -ap.strides[1];
                    }
                    let walked = rects_walked(&ap, 10);
                    assert_eq!(elements(&walked, 10), view_elements(&ap), "{ap:?}");
                    if let Some(r) = matrix_rect(&ap, 10) {
                        assert_eq!(walked, vec![r], "{ap:?}");
                        shortcuts += 1;
                    }
                }
            }
        }
        assert_eq!(shortcuts, 50);
        // A flat run across rows, and a transposed view.
        let flat = Ap::contiguous(Shape::new(&[60]).unwrap())
            .slice(&(7..43).into_index(), false, "t")
            .unwrap();
        let rects = rects_of(&flat, 10);
        assert_eq!(rects.len(), 3, "{rects:?}");
        assert_eq!(elements(&rects, 10), view_elements(&flat));
        let mut t = views[0];
        t.shape = Shape::new(&[7, 3]).unwrap();
        t.strides[..2].copy_from_slice(&[1, 10]);
        let rects = rects_of(&t, 10);
        assert_eq!(rects.len(), 1, "{rects:?}");
        assert_eq!(elements(&rects, 10), view_elements(&t));
    }
}
