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
// The Beta-1 instruction forms (allocating, `_into` twins): the seeds' dialect.
use nki_core::nisa::classic as nisa;

const OP: &str = "average_pool2d";

/// The most input elements per partition one band loads (64 KiB of fp32).
pub const BAND_ELEMS: usize = 16 * 1024;

/// Average pooling with window and stride `pool` of `input[C, H, W]` into
/// `out[C, H / pool, W / pool]`, one instance (grid `[1]`).
#[nki_kernel]
pub fn average_pool2d<T: Element>(input: &Hbm<T>, out: &mut Hbm<T>, pool: usize) {
    let s = expect_rank(OP, "input", input.shape(), 3);
    let (c, h, w) = (s[0], s[1], s[2]);
    require(OP, pool > 0 && pool <= h && pool <= w, || {
        format!("pool {pool} must be between 1 and the image size of input{s:?}")
    });
    let (oh, ow) = (h / pool, w / pool);
    expect_shape(OP, "out", out.shape(), &[c, oh, ow]);
    let pmax = nl::tile_size::PMAX;
    // Output rows per band: a band's input rows stay within BAND_ELEMS per partition.
    let band = (BAND_ELEMS / (pool * ow * pool)).clamp(1, oh);
    for t in nl::affine_range(nl::num_tiles(c, pmax)) {
        let ch = nl::tile_range(t, pmax, c);
        for b in nl::affine_range(nl::num_tiles(oh, band)) {
            let rows = nl::tile_range(b, band, oh);
            let n = rows.len();
            // NKI's `in_tensor[i_c, p*i_h + i_ph, p*i_w + i_pw]`: the band viewed with the pool
            // windows as their own dimensions, loaded in one DMA.
            let band_view =
                input.slice((ch.clone(), rows.start * pool..rows.end * pool, 0..ow * pool));
            let windows = nl::load(band_view.reshape(&[ch.len(), n, pool, ow, pool]));
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
