//! The arithmetic behind `nl`/`nisa`: broadcasting element-wise kernels and the TensorE GEMM
//! (matrixmultiply's sgemm, f32 accumulation). Pure functions over f32 slices; no checks here.

pub(crate) use crate::dtype::copy_round;
use crate::dtype::DType;
use crate::math::AluOp;
use crate::memory::take_buf;

/// `op` in native integer arithmetic as a map from slots to slots: operand slots of dtypes
/// `x` and `y` read as exact integers, evaluated at `compute`'s width ([`AluOp::eval_int`],
/// wrapping around), the result stored as a slot of `out` ([`DType::slot_of_int`]).
///
/// # Panics
/// When `op` has no integer form (callers check [`AluOp::is_integer_on`] first).
pub(crate) fn int_op(
    op: AluOp,
    x: DType,
    y: DType,
    compute: DType,
    out: DType,
) -> impl Fn(f32, f32) -> f32 {
    move |p, q| {
        let r = op.eval_int(x.int(p), y.int(q), compute);
        out.slot_of_int(r.expect("an operator with an integer form"))
    }
}

/// NumPy broadcasting of two shapes (right-aligned); `None` when they do not broadcast.
pub(crate) fn broadcast_shape(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for i in 0..n {
        let da = if i + a.len() >= n {
            a[i + a.len() - n]
        } else {
            1
        };
        let db = if i + b.len() >= n {
            b[i + b.len() - n]
        } else {
            1
        };
        out[i] = if da == db {
            da
        } else if da == 1 {
            db
        } else if db == 1 {
            da
        } else {
            return None;
        };
    }
    Some(out)
}

/// Strides (in elements) to read a dense row-major `shape` as if it had `out` shape
/// (0 stride on broadcast dims).
fn broadcast_strides(shape: &[usize], out: &[usize]) -> Vec<usize> {
    let n = out.len();
    let mut strides = vec![0; n];
    let mut acc = 1;
    for i in (0..shape.len()).rev() {
        let o = i + n - shape.len();
        strides[o] = if shape[i] == 1 && out[o] != 1 { 0 } else { acc };
        acc *= shape[i];
    }
    strides
}

/// Applies `f` element-wise over the broadcast of `a` (shape `sa`) and `b` (shape `sb`).
pub(crate) fn binary(
    a: &[f32],
    sa: &[usize],
    b: &[f32],
    sb: &[usize],
    out: &[usize],
    f: impl Fn(f32, f32) -> f32,
) -> Vec<f32> {
    if sa == sb {
        return a.iter().zip(b).map(|(&x, &y)| f(x, y)).collect();
    }
    let n: usize = out.iter().product();
    let st_a = broadcast_strides(sa, out);
    let st_b = broadcast_strides(sb, out);
    let nd = out.len();
    let inner = out[nd - 1];
    let (ia, ib) = (st_a[nd - 1], st_b[nd - 1]);
    let mut res = take_buf(n);
    let mut idx = vec![0usize; nd];
    for _ in 0..n / inner.max(1) {
        let (mut oa, mut ob) = (0, 0);
        for d in 0..nd - 1 {
            oa += idx[d] * st_a[d];
            ob += idx[d] * st_b[d];
        }
        // The common rows (a row against a row, or against one broadcast value) as slice
        // loops that vectorise; other stride mixes element by element.
        match (ia, ib) {
            (1, 1) => res.extend(
                a[oa..oa + inner]
                    .iter()
                    .zip(&b[ob..ob + inner])
                    .map(|(&x, &y)| f(x, y)),
            ),
            (1, 0) => {
                let y = b[ob];
                res.extend(a[oa..oa + inner].iter().map(|&x| f(x, y)));
            }
            (0, 1) => {
                let x = a[oa];
                res.extend(b[ob..ob + inner].iter().map(|&y| f(x, y)));
            }
            _ => res.extend((0..inner).map(|j| f(a[oa + j * ia], b[ob + j * ib]))),
        }
        for d in (0..nd.saturating_sub(1)).rev() {
            idx[d] += 1;
            if idx[d] < out[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    res
}

/// `c[M, N] (+)= a^T @ b` for `a` = [K, M] and `b` = [K, N], all row-major, f32 accumulation.
pub(crate) fn gemm_tn(
    k: usize,
    m: usize,
    n: usize,
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
    accumulate: bool,
) {
    gemm_tn_strided(
        k,
        m,
        n,
        Strided::dense(a, m),
        Strided::dense(b, n),
        StridedMut {
            data: c,
            offset: 0,
            rs: n,
            cs: 1,
        },
        accumulate,
    );
}

/// A read-only strided 2-D operand: element (i, j) is `data[offset + i * rs + j * cs]`.
#[derive(Clone, Copy)]
pub(crate) struct Strided<'a> {
    pub(crate) data: &'a [f32],
    pub(crate) offset: usize,
    pub(crate) rs: usize,
    pub(crate) cs: usize,
}

impl<'a> Strided<'a> {
    /// A dense row-major matrix with `cols` columns.
    pub(crate) fn dense(data: &'a [f32], cols: usize) -> Self {
        Strided {
            data,
            offset: 0,
            rs: cols,
            cs: 1,
        }
    }

    fn fits(&self, rows: usize, cols: usize) -> bool {
        rows == 0
            || cols == 0
            || self.offset + (rows - 1) * self.rs + (cols - 1) * self.cs < self.data.len()
    }
}

/// A writable strided 2-D operand (see [`Strided`]).
pub(crate) struct StridedMut<'a> {
    pub(crate) data: &'a mut [f32],
    pub(crate) offset: usize,
    pub(crate) rs: usize,
    pub(crate) cs: usize,
}

/// `c[M, N] (+)= a^T @ b` for strided `a` = [K, M] and `b` = [K, N], f32 accumulation
/// (matrixmultiply's sgemm reads the operands in place; no copies).
pub(crate) fn gemm_tn_strided(
    k: usize,
    m: usize,
    n: usize,
    a: Strided,
    b: Strided,
    c: StridedMut,
    accumulate: bool,
) {
    let beta = if accumulate { 1.0 } else { 0.0 };
    let c_fits = m == 0 || n == 0 || c.offset + (m - 1) * c.rs + (n - 1) * c.cs < c.data.len();
    assert!(
        a.fits(k, m) && b.fits(k, n) && c_fits,
        "gemm operands out of bounds"
    );
    // SAFETY: every element index reached, offset + i * rs + j * cs for i, j inside the
    // operand's shape, is within its slice (asserted above; strides are non-negative), and `c`
    // is an exclusive borrow distinct from `a` and `b`.
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            1.0,
            a.data.as_ptr().add(a.offset),
            a.cs as isize,
            a.rs as isize,
            b.data.as_ptr().add(b.offset),
            b.rs as isize,
            b.cs as isize,
            beta,
            c.data.as_mut_ptr().add(c.offset),
            c.rs as isize,
            c.cs as isize,
        );
    }
}

/// Transposes a row-major [rows, cols] matrix.
pub(crate) fn transpose2d(x: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0.0; rows * cols];
    for r in 0..rows {
        for c in 0..cols {
            out[c * rows + r] = x[r * cols + c];
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasting_rules() {
        assert_eq!(
            broadcast_shape(&[128, 512], &[128, 1]),
            Some(vec![128, 512])
        );
        assert_eq!(
            broadcast_shape(&[128, 512], &[1, 512]),
            Some(vec![128, 512])
        );
        assert_eq!(broadcast_shape(&[128, 512], &[128, 256]), None);
        let a = [1.0, 2.0, 3.0, 4.0];
        let b = [10.0, 20.0];
        assert_eq!(
            binary(&a, &[2, 2], &b, &[2, 1], &[2, 2], |x, y| x + y),
            vec![11.0, 12.0, 23.0, 24.0]
        );
        assert_eq!(
            binary(&a, &[2, 2], &b, &[1, 2], &[2, 2], |x, y| x + y),
            vec![11.0, 22.0, 13.0, 24.0]
        );
        assert_eq!(
            binary(&b, &[2, 1], &a, &[2, 2], &[2, 2], |x, y| x - y),
            vec![9.0, 8.0, 17.0, 16.0]
        );
        // An outer product: [2, 1] x [1, 2] broadcasts both operands.
        assert_eq!(
            binary(&b, &[2, 1], &b, &[1, 2], &[2, 2], |x, y| x * y),
            vec![100.0, 200.0, 200.0, 400.0]
        );
    }

    #[test]
    fn gemm_matches_loops() {
        let (k, m, n) = (3, 2, 4);
        let a: Vec<f32> = (0..k * m).map(|x| x as f32 * 0.5).collect();
        let b: Vec<f32> = (0..k * n).map(|x| x as f32 - 3.0).collect();
        let mut c = vec![0.0; m * n];
        gemm_tn(k, m, n, &a, &b, &mut c, false);
        for i in 0..m {
            for j in 0..n {
                let r: f32 = (0..k).map(|t| a[t * m + i] * b[t * n + j]).sum();
                assert_eq!(c[i * n + j], r);
            }
        }
    }
}
