//! Fused 2-D convolution + max-pool in the CS149 (asst4) form:
//! `out = max_pool2d(conv2d(X, W) + bias, pool)` for `X[N, Cin, H, W]`, `W[Cout, Cin, KH, KW]`,
//! `bias[Cout]`, stride 1, no padding, pool window and stride `pool` (1 = no pooling), output
//! `[N, Cout, (H - KH + 1) / pool, (W - KW + 1) / pool]`.
//!
//! Tiling: input channels are the contraction dimension, on partitions in tiles of 128; output
//! channels are the stationary free dimension, 128 per tile. The weights are loaded once per
//! (Cout tile, Cin tile) and each `[Cout, Cin]` filter tap transposed on TensorE to the
//! stationary `[Cin, Cout]`. Output rows are taken in bands of `R` rows (`R * OW <= 512`, a
//! multiple of `pool`): the band's `R + KH - 1` input rows are loaded per Cin tile, and for
//! each Cout tile TensorE accumulates `KH * KW * Cin / 128` matmuls into one `[128, R, OW]`
//! PSUM bank, each moving operand a shifted `[Cin, R, OW]` window of the band (no im2col
//! copy). ScalarE adds the bias while evacuating PSUM, VectorE takes the max over the
//! `pool x pool` strided views, and the pooled band is stored.
//!
//! Bottleneck (modelled, `conv2d` example): TensorE at CS149's perf shape
//! (`[1, 256, 224, 224]`, 3x3, 256 channels: 99-100 % busy, 2.57 ms on trn1): fp32 matmuls at a
//! quarter rate, 36 per band and Cout tile with a moving free size of `2 * 222 = 444`; the band
//! loads, the bias and the pooling overlap with them, so pooling is free.

use crate::checks::{expect_rank, expect_shape, require};
use nki_core::nl::BlockTile;
use nki_core::prelude::*;
// The Beta-1 instruction forms (allocating, `_into` twins): the seeds' dialect.
use nki_core::nisa::classic as nisa;

const OP: &str = "conv2d_maxpool";
const PMAX: usize = nl::tile_size::PMAX;
const BANK: usize = nl::tile_size::GEMM_MOVING_FMAX;

/// Convolution geometry derived from the operand shapes.
struct Geometry {
    n: usize,
    cin: usize,
    cout: usize,
    kh: usize,
    kw: usize,
    /// Convolution output rows and columns (before pooling).
    oh: usize,
    ow: usize,
    /// Output rows per band.
    band: usize,
}

#[track_caller]
fn geometry(x: &[usize], w: &[usize], bias: &[usize], out: &[usize], pool: usize) -> Geometry {
    let xs = expect_rank(OP, "X", x, 4);
    let ws = expect_rank(OP, "W", w, 4);
    let (n, cin, h, wd) = (xs[0], xs[1], xs[2], xs[3]);
    let (cout, kh, kw) = (ws[0], ws[2], ws[3]);
    require(
        OP,
        ws[1] == cin && kh <= h && kw <= wd && kh > 0 && kw > 0,
        || {
            format!("W{ws:?} must be [Cout, Cin, KH, KW] with Cin = {cin} and a kernel no larger than the image of X{xs:?}")
        },
    );
    expect_shape(OP, "bias", bias, &[cout]);
    let (oh, ow) = (h - kh + 1, wd - kw + 1);
    require(
        OP,
        pool > 0 && pool <= oh && pool <= ow && ow <= BANK,
        || {
            format!("pool {pool} must be between 1 and the output size {oh} x {ow}, whose rows must fit one PSUM bank ({BANK})")
        },
    );
    expect_shape(OP, "out", out, &[n, cout, oh / pool, ow / pool]);
    let band = ((BANK / ow) / pool * pool).min(oh / pool * pool).max(pool);
    Geometry {
        n,
        cin,
        cout,
        kh,
        kw,
        oh,
        ow,
        band,
    }
}

/// The stationary filter taps `[Cin tile, Cout tile]` of weight tile `(co, ci)`, indexed by
/// `kh * KW + kw`: one load and `KH * KW` TensorE transposes.
#[track_caller]
fn filter_taps<T: Element>(
    w: &Hbm<T>,
    g: &Geometry,
    co: std::ops::Range<usize>,
    ci: std::ops::Range<usize>,
) -> BlockTile {
    let taps = nl::ndarray_blocks(g.kh * g.kw, &[ci.len(), co.len()], DType::F32, nl::SBUF);
    let wt = nl::load_as(w.slice((co, ci, .., ..)), DType::F32);
    for a in 0..g.kh {
        for b in 0..g.kw {
            let t = nisa::nc_transpose(wt.slice((.., .., a, b)), nisa::Engine::Tensor);
            nisa::tensor_copy_into(taps.block(a * g.kw + b), &t, nisa::Engine::Vector);
        }
    }
    taps
}

/// `max_pool2d(conv2d(X, W) + bias, pool)`, one instance (grid `[1]`).
#[nki_kernel]
pub fn conv2d_maxpool<T: Element>(
    x: &Hbm<T>,
    w: &Hbm<T>,
    bias: &Hbm<T>,
    out: &mut Hbm<T>,
    pool: usize,
) {
    let g = geometry(x.shape(), w.shape(), bias.shape(), out.shape(), pool);
    let (ci_tiles, co_tiles) = (nl::num_tiles(g.cin, PMAX), nl::num_tiles(g.cout, PMAX));
    // taps[co][ci]: a `[KH * KW, par_dim(Cin), Cout]` block tile per weight tile.
    let taps: Vec<Vec<BlockTile>> = (0..co_tiles)
        .map(|co| {
            (0..ci_tiles)
                .map(|ci| {
                    filter_taps(
                        w,
                        &g,
                        nl::tile_range(co, PMAX, g.cout),
                        nl::tile_range(ci, PMAX, g.cin),
                    )
                })
                .collect()
        })
        .collect();
    let biases: Vec<Tile> = (0..co_tiles)
        .map(|co| {
            let ch = nl::tile_range(co, PMAX, g.cout);
            // NKI's `bias.reshape((Cout, 1))[ch]`: one value per partition.
            nl::load_as(bias.slice(ch.clone()).reshape(&[ch.len(), 1]), DType::F32)
        })
        .collect();
    let used_rows = g.oh / pool * pool;
    let pw = g.ow / pool;
    for img in nl::affine_range(g.n) {
        for band in nl::affine_range(used_rows.div_ceil(g.band)) {
            let rows = nl::tile_range(band, g.band, used_rows);
            let in_rows = rows.start..rows.end + g.kh - 1;
            let x_band: Vec<Tile> = (0..ci_tiles)
                .map(|ci| {
                    nl::load_as(
                        x.slice((img, nl::tile_range(ci, PMAX, g.cin), in_rows.clone(), ..)),
                        DType::F32,
                    )
                })
                .collect();
            for co in nl::affine_range(co_tiles) {
                let ch = nl::tile_range(co, PMAX, g.cout);
                let acc = nl::ndarray(&[ch.len(), rows.len() * g.ow], DType::F32, nl::PSUM);
                for (ci, xb) in x_band.iter().enumerate() {
                    for a in 0..g.kh {
                        for b in 0..g.kw {
                            let window = xb.slice((.., a..a + rows.len(), b..b + g.ow));
                            nisa::nc_matmul_acc(&acc, taps[co][ci].block(a * g.kw + b), window);
                        }
                    }
                }
                let conv = nisa::activation(
                    nl::ActFn::Copy,
                    &acc,
                    nisa::ActivationOpts::new().bias(&biases[co]),
                );
                drop(acc);
                let pooled = max_pool(conv, rows.len(), pool, pw);
                let out_rows = rows.start / pool..rows.end / pool;
                nl::store(out.slice((img, ch, out_rows, ..)), &pooled);
            }
        }
    }
}

/// Max over the `pool x pool` windows of `conv[C, R * OW]` (`R` rows of `OW`, stride `pool`)
/// into `[C, R / pool, pw]`: `pool^2 - 1` VectorE maxima of strided views of it, the running
/// maximum updated in place (`conv` itself for `pool == 1`).
#[track_caller]
fn max_pool(conv: Tile, r: usize, pool: usize, pw: usize) -> Tile {
    if pool == 1 {
        return conv;
    }
    let ow = conv.free_size() / r;
    // The `[C, R * OW]` tile viewed as `[C, R, OW]` (free).
    let rows = conv.reshape(&[conv.partitions(), r, ow]);
    let view = |a: usize, b: usize| {
        rows.slice((
            ..,
            stepped(a..r, pool),
            stepped(b..b + (pw - 1) * pool + 1, pool),
        ))
    };
    let max = nl::AluOp::Maximum;
    let m = nisa::tensor_tensor(view(0, 0), view(0, 1), max, None);
    for k in 2..pool * pool {
        nisa::tensor_tensor_into(&m, &m, view(k / pool, k % pool), max);
    }
    m
}
