//! The NKI `average_pool2d` tutorial: `out[c, i, j] = mean of input[c, p*i .. p*i+p, p*j .. p*j+p]`
//! for `input[C, H, W]` and a square pool of size and stride `p` (PyTorch `avg_pool2d(p, p)`;
//! trailing rows/columns that do not fill a window are dropped, as PyTorch does).
//!
//! Tiling: channels go to partitions, 128 per tile; a channel's image stays in its partition,
//! taken in bands of output rows whose input rows fit [`BAND_ELEMS`] elements. A band is loaded
//! straight into a `[C, rows, p, W/p, p]` tile (the same bytes, viewed with the pool windows as
//! their own dimensions), VectorE sums the innermost `p` (one reduce), adds the `p` row slices
//! of the window and scales by `1/p^2`.
//!
//! Bottleneck (modelled, `average_pool2d` example): the tutorial's `[2, 6, 6]` bf16 input is
//! bounded by the fixed latency of its one load and one store (about 5 us on trn1 and trn2);
//! at `[128, 224, 224]` fp32, pool 2, DMA bounds trn1 (100 % busy, 307 us) while on trn2,
//! with its faster DMA, VectorE's reduce and adds become the busiest engine (78 %, 134 us).

use crate::checks::{expect_rank, expect_shape, require};
use nki_core::prelude::*;
use std::ops::Range;
// The Beta-1 instruction forms (allocating, `_into` twins): the seeds' dialect.
use nki_core::nisa::classic as nisa;

const OP: &str = "average_pool2d";

/// The most input elements per partition one band loads (64 KiB of fp32).
pub const BAND_ELEMS: usize = 16 * 1024;

/// The output shape `[C, H / pool, W / pool]` of pooling `input[C, H, W]` by `pool`; a rank
/// other than 3 or a pool outside `1..=min(H, W)` fails the launch.
#[track_caller]
fn pooled_shape(s: &[usize], pool: usize) -> [usize; 3] {
    let s = expect_rank(OP, "input", s, 3);
    let (c, h, w) = (s[0], s[1], s[2]);
    require(OP, pool > 0 && pool <= h && pool <= w, || {
        format!("pool {pool} must be between 1 and the image size of input{s:?}")
    });
    [c, h / pool, w / pool]
}

/// Output rows per band: a band's input rows stay within [`BAND_ELEMS`] per partition.
fn band_rows(pool: usize, oh: usize, ow: usize) -> usize {
    (BAND_ELEMS / (pool * ow * pool)).clamp(1, oh)
}

/// NKI's `in_tensor[i_c, p*i_h + i_ph, p*i_w + i_pw]`: the band of channels `ch` and output
/// rows `rows` of `input`, viewed with the pool windows as their own dimensions
/// `[C, rows, p, W/p, p]`.
#[track_caller]
fn windows_of<T: Element>(
    input: &Hbm<T>,
    (ch, rows): (&Range<usize>, &Range<usize>),
    pool: usize,
    ow: usize,
) -> HbmView {
    let band = input.slice((ch.clone(), rows.start * pool..rows.end * pool, 0..ow * pool));
    band.reshape(&[ch.len(), rows.len(), pool, ow, pool])
}

/// Average pooling with window and stride `pool` of `input[C, H, W]` into
/// `out[C, H / pool, W / pool]`, one instance (grid `[1]`).
#[nki_kernel]
pub fn average_pool2d<T: Element>(input: &Hbm<T>, out: &mut Hbm<T>, pool: usize) {
    let [c, oh, ow] = pooled_shape(input.shape(), pool);
    expect_shape(OP, "out", out.shape(), &[c, oh, ow]);
    let pmax = nl::tile_size::PMAX;
    let band = band_rows(pool, oh, ow);
    for t in nl::affine_range(nl::num_tiles(c, pmax)) {
        let ch = nl::tile_range(t, pmax, c);
        for b in nl::affine_range(nl::num_tiles(oh, band)) {
            let rows = nl::tile_range(b, band, oh);
            // Loaded in one DMA.
            let windows = nl::load(windows_of(input, (&ch, &rows), pool, ow));
            let row_sums = nl::reduce(nl::AluOp::Add, &windows, &[4], false, Some(DType::F32));
            drop(windows);
            let mut acc = nl::copy(row_sums.slice((.., .., 0, ..)), None);
            for i in nl::sequential_range(pool).skip(1) {
                acc = nl::add(&acc, row_sums.slice((.., .., i, ..)));
            }
            let avg = nisa::tensor_scalar(
                &acc,
                nl::AluOp::Multiply,
                1.0 / (pool * pool) as f32,
                nisa::TensorScalarOpts::new().dtype(out.dtype()),
            );
            nl::store(out.slice((ch.clone(), rows, ..)), &avg);
        }
    }
}

/// The NKI 0.7 twin of [`average_pool2d`](fn@average_pool2d): average pooling with window and
/// stride `pool` of `input[C, H, W]`, returned as `[C, H / pool, W / pool]`, on one core
/// (launch it on `[1]`). The same bands and instructions written in 0.7's form: SBUF tensors
/// allocated with `nl::ndarray`, each band moved by one `nisa::dma_copy` into a
/// `[C, rows, p, W/p, p]` tensor, the window sums by `nisa::tensor_reduce`, `nisa::tensor_copy`
/// and `nisa::tensor_tensor` into one accumulator, and the scale by `nisa::tensor_scalar`, each
/// writing into a destination given first. It computes the same values as the Beta-1 kernel.
#[nki_kernel(nki = "0.7")]
pub fn average_pool2d_07<T: Element>(input: &Hbm<T>, pool: usize) -> Hbm<T> {
    // This file's `nisa` is Beta 1's allocating forms; the twin uses NKI 0.7's.
    use nki_core::nisa;
    let [c, oh, ow] = pooled_shape(input.shape(), pool);
    let out = nl::ndarray(&[c, oh, ow], input.dtype(), nl::shared_hbm);
    let (band, partitions) = (band_rows(pool, oh, ow), nl::tile_size::PMAX);
    for t in nl::affine_range(nl::num_tiles(c, partitions)) {
        let ch = nl::tile_range(t, partitions, c);
        for b in nl::affine_range(nl::num_tiles(oh, band)) {
            let rows = nl::tile_range(b, band, oh);
            let (k, n) = (ch.len(), rows.len());
            let windows = nl::ndarray(&[k, n, pool, ow, pool], input.dtype(), nl::sbuf);
            nisa::dma_copy(&windows, windows_of(input, (&ch, &rows), pool, ow), None);
            let row_sums = nl::ndarray(&[k, n, pool, ow], DType::F32, nl::sbuf);
            nisa::tensor_reduce(&row_sums, nl::AluOp::Add, &windows, &[4], None);
            let acc = nl::ndarray(&[k, n, ow], DType::F32, nl::sbuf);
            nisa::tensor_copy(&acc, row_sums.slice((.., .., 0, ..)), None);
            for i in nl::sequential_range(pool).skip(1) {
                let row = row_sums.slice((.., .., i, ..));
                nisa::tensor_tensor(&acc, &acc, row, nl::AluOp::Add, None);
            }
            let avg = nl::ndarray(&[k, n, ow], input.dtype(), nl::sbuf);
            let scale = 1.0 / (pool * pool) as f32;
            nisa::tensor_scalar(&avg, &acc, nl::AluOp::Multiply, scale, None);
            nisa::dma_copy(out.slice((ch.clone(), rows, ..)), &avg, None);
        }
    }
    out
}
