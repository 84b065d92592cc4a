//! Independent references for the kernels: plain loops or ndarray (often in f64), written
//! from the tutorials' NumPy/PyTorch definitions and sharing no code with the kernels. The
//! tests and the tutorial examples check the kernels against these.

#![allow(clippy::needless_range_loop)]

use crate::adaptive_avg_pool2d::window;
use crate::flash_attention::MASK_VALUE;
use crate::rmsnorm_qkv::EPS;
use ndarray::{s, Array1, Array2, Array3, Array4, ArrayD, ArrayView3, Axis, IxDyn};
use nki_core::Element;

/// `out[p, y * X + x] = a[p, x * Y + y]` by loops (each row's `X x Y` matrix transposed).
pub fn transpose2d(a: &Array2<i8>, x: usize, y: usize) -> Array2<f32> {
    Array2::from_shape_fn(a.dim(), |(p, j)| {
        let (yy, xx) = (j / x, j % x);
        f32::from(a[[p, xx * y + yy]])
    })
}

/// Row softmax `exp(x - max) / sum(exp(x - max))`.
pub fn softmax(x: &Array2<f32>) -> Array2<f32> {
    let mut out = x.clone();
    for mut row in out.axis_iter_mut(Axis(0)) {
        let m = row.fold(f32::NEG_INFINITY, |a, &b| a.max(b));
        row.mapv_inplace(|v| (v - m).exp());
        let s = row.sum();
        row.mapv_inplace(|v| v / s);
    }
    out
}

/// RMSNorm without epsilon: `a * rsqrt(mean(a^2, 1)) * g`.
pub fn rmsnorm(a: &Array2<f32>, g: &Array1<f32>) -> Array2<f32> {
    let ms = a.mapv(|v| v * v).mean_axis(Axis(1)).unwrap();
    let mut out = a.clone();
    for (mut row, m) in out.axis_iter_mut(Axis(0)).zip(ms.iter()) {
        row.zip_mut_with(g, |v, &gi| *v = *v / m.sqrt() * gi);
    }
    out
}

/// LayerNorm of each row in f64: `(x - mean) / sqrt(var + 1e-5) * g + b` (biased variance).
pub fn layernorm(x: &Array2<f32>, g: &Array1<f32>, b: &Array1<f32>) -> Array2<f32> {
    let mut out = x.clone();
    for mut row in out.axis_iter_mut(Axis(0)) {
        let n = row.len() as f64;
        let mean = row.iter().map(|&v| v as f64).sum::<f64>() / n;
        let var = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n;
        let rstd = 1.0 / (var + 1e-5).sqrt();
        for ((v, gi), bi) in row.iter_mut().zip(g).zip(b) {
            *v = ((*v as f64 - mean) * rstd) as f32 * gi + bi;
        }
    }
    out
}

/// Average of each `p x p` window (stride `p`) of `x[C, H, W]`, trailing rows/columns dropped.
pub fn average_pool2d<T: Element>(x: ArrayView3<T>, p: usize) -> Array3<f32> {
    let (c, h, w) = x.dim();
    Array3::from_shape_fn((c, h / p, w / p), |(ci, i, j)| {
        let mut s = 0.0f32;
        for a in 0..p {
            for b in 0..p {
                s += x[[ci, i * p + a, j * p + b]].to_f32();
            }
        }
        s / (p * p) as f32
    })
}

/// PyTorch adaptive average pooling of `x[N, C, H, W]` to `[N, C, oh, ow]`, in f64.
pub fn adaptive_avg_pool2d<T: Element>(x: &Array4<T>, oh: usize, ow: usize) -> ArrayD<f32> {
    let (n, c, h, w) = x.dim();
    ArrayD::from_shape_fn(IxDyn(&[n, c, oh, ow]), |i| {
        let (rows, cols) = (window(i[2], h, oh), window(i[3], w, ow));
        let mut s = 0.0f64;
        for r in rows.clone() {
            for q in cols.clone() {
                s += x[[i[0], i[1], r, q]].to_f32() as f64;
            }
        }
        (s / (rows.len() * cols.len()) as f64) as f32
    })
}

/// HF `apply_rotary_pos_emb`: `x * cos + rotate_half(x) * sin` for `x[B, H, S, D]`.
pub fn rotary(x: &Array4<f32>, cos: &Array2<f32>, sin: &Array2<f32>) -> Array4<f32> {
    let d = x.dim().3;
    let h = d / 2;
    Array4::from_shape_fn(x.dim(), |(b, n, s, j)| {
        let rot = if j < h {
            -x[[b, n, s, j + h]]
        } else {
            x[[b, n, s, j - h]]
        };
        x[[b, n, s, j]] * cos[[s, j]] + rot * sin[[s, j]]
    })
}

/// `softmax(scale q k^T) v` in f64.
pub fn attention(q: &Array2<f32>, k: &Array2<f32>, v: &Array2<f32>, scale: f32) -> Array2<f32> {
    let (q, k, v) = (q.mapv(f64::from), k.mapv(f64::from), v.mapv(f64::from));
    let mut s = q.dot(&k.t()) * scale as f64;
    for mut row in s.rows_mut() {
        let m = row.fold(f64::NEG_INFINITY, |a, &b| a.max(b));
        row.mapv_inplace(|x| (x - m).exp());
        let sum = row.sum();
        row.mapv_inplace(|x| x / sum);
    }
    s.dot(&v).mapv(|x| x as f32)
}

/// Causal attention `(out[b, h, S, d], lse[b, h, 128, S / 128])` in f64.
pub fn causal_attention(
    q: &Array4<f32>,
    k: &Array4<f32>,
    v: &Array4<f32>,
    scale: f64,
) -> (ArrayD<f32>, ArrayD<f32>) {
    let (b, h, d, s) = q.dim();
    let group = h / k.dim().1;
    let mut out = ArrayD::zeros(IxDyn(&[b, h, s, d]));
    let mut lse = ArrayD::zeros(IxDyn(&[b, h, 128, s / 128]));
    for bi in 0..b {
        for hi in 0..h {
            let kv = hi / group;
            for i in 0..s {
                let sc: Vec<f64> = (0..s)
                    .map(|j| {
                        if j > i {
                            return MASK_VALUE as f64;
                        }
                        (0..d)
                            .map(|x| q[[bi, hi, x, i]] as f64 * k[[bi, kv, x, j]] as f64)
                            .sum::<f64>()
                            * scale
                    })
                    .collect();
                let m = sc.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> = sc.iter().map(|x| (x - m).exp()).collect();
                let sum: f64 = e.iter().sum();
                for x in 0..d {
                    let o: f64 = (0..s).map(|j| e[j] * v[[bi, kv, j, x]] as f64).sum();
                    out[[bi, hi, i, x]] = (o / sum) as f32;
                }
                lse[[bi, hi, i % 128, i / 128]] = (m + sum.ln()) as f32;
            }
        }
    }
    (out, lse)
}

/// `x / (sqrt(mean(x^2)) + 1e-6) @ w` for `x[1, S, D]`, `w[D, dh]`, in f64.
pub fn rmsnorm_qkv<T: Element>(x: &Array3<T>, w: &Array2<T>) -> Array3<f32> {
    let (_, s, d) = x.dim();
    let dh = w.dim().1;
    let mut out = Array3::zeros((1, s, dh));
    for i in 0..s {
        let ms = (0..d)
            .map(|j| (x[[0, i, j]].to_f32() as f64).powi(2))
            .sum::<f64>()
            / d as f64;
        let inv = 1.0 / (ms.sqrt() + EPS as f64);
        for c in 0..dh {
            let dot: f64 = (0..d)
                .map(|j| x[[0, i, j]].to_f32() as f64 * w[[j, c]].to_f32() as f64)
                .sum();
            out[[0, i, c]] = (dot * inv) as f32;
        }
    }
    out
}

/// `max_pool2d(conv2d(x, w) + b, pool)` in f64: the convolution as a sum over the filter taps
/// of `W[:, :, a, q] @ x[i, :, a.., q..]` (ndarray matrix products), then the window maxima.
pub fn conv2d_maxpool(
    x: &Array4<f32>,
    w: &Array4<f32>,
    b: &Array1<f32>,
    pool: usize,
) -> Array4<f32> {
    let (n, cin, h, wd) = x.dim();
    let (cout, _, kh, kw) = w.dim();
    let (oh, ow) = (h - kh + 1, wd - kw + 1);
    let (x, w) = (x.mapv(f64::from), w.mapv(f64::from));
    let mut conv = Array4::<f64>::zeros((n, cout, oh, ow));
    for i in 0..n {
        let mut acc = Array2::<f64>::zeros((cout, oh * ow));
        for a in 0..kh {
            for q in 0..kw {
                let window = x.slice(s![i, .., a..a + oh, q..q + ow]).to_owned();
                let window = window.into_shape_with_order((cin, oh * ow)).unwrap();
                acc += &w.slice(s![.., .., a, q]).dot(&window);
            }
        }
        for o in 0..cout {
            acc.row_mut(o).mapv_inplace(|v| v + b[o] as f64);
        }
        conv.slice_mut(s![i, .., .., ..])
            .assign(&acc.into_shape_with_order((cout, oh, ow)).unwrap());
    }
    Array4::from_shape_fn((n, cout, oh / pool, ow / pool), |(i, o, r, c)| {
        let mut m = f64::NEG_INFINITY;
        for a in 0..pool {
            for q in 0..pool {
                m = m.max(conv[[i, o, r * pool + a, c * pool + q]]);
            }
        }
        m as f32
    })
}

/// The inputs of the Mamba selective scan: `delta`, `u[B, C, L]`, `a[C, N]`, `b`, `c[B, N, L]`.
pub struct ScanInputs {
    /// Time steps `delta[B, C, L]`.
    pub delta: Array3<f32>,
    /// Input `u[B, C, L]`.
    pub u: Array3<f32>,
    /// State matrix diagonal `A[C, N]` (negative).
    pub a: Array2<f32>,
    /// Input projection `B[B, N, L]`.
    pub b: Array3<f32>,
    /// Output projection `C[B, N, L]`.
    pub c: Array3<f32>,
}

/// The Mamba selective scan in f64: `h = exp(delta * A) * h + delta * u * B` along `L`,
/// `y = sum_n C * h`.
pub fn selective_scan(x: &ScanInputs) -> Array3<f32> {
    let (batch, chans, len) = x.delta.dim();
    let states = x.a.dim().1;
    let mut y = Array3::zeros((batch, chans, len));
    for b in 0..batch {
        for c in 0..chans {
            for n in 0..states {
                let mut h = 0.0f64;
                for t in 0..len {
                    let d = x.delta[[b, c, t]] as f64;
                    h = (d * x.a[[c, n]] as f64).exp() * h
                        + d * x.u[[b, c, t]] as f64 * x.b[[b, n, t]] as f64;
                    y[[b, c, t]] += (x.c[[b, n, t]] as f64 * h) as f32;
                }
            }
        }
    }
    y
}
