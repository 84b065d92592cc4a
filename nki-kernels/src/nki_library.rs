//! Ports of NKI Library kernels (aws-neuron/nki-library, `src/nkilib_src/nkilib/core/...`,
//! NKI 0.7 surface) covering the library's families: cumsum, a norm with quantisation
//! (rmsnorm_quant), a token-generation layer norm, RoPE, the QKV projection, token-generation
//! attention, the MLP and the MoE router top-k. Each is written from the library's algorithm
//! in NKI 0.7's destination-first style (`nl::ndarray` + `nisa::x(dst, ..., options)`), and each
//! doc comment says what differs from the library's kernel. Every kernel runs as one program
//! instance (grid `[1]`); its independent reference is in [`reference`](mod@reference).
//!
//! Differences common to all of them: outputs are `&mut Hbm` parameters (the library
//! allocates and returns them); LNC sharding, the library's layout and dtype switches and its
//! SBUF allocators are left out (one layout per kernel, the one its docstring calls the
//! default); loops are Rust loops.

use crate::checks::{expect_rank, expect_shape, require};
use nki_core::nisa::{
    ActFn, ActivationOpts, AffineExpr, AluOp, Engine, Opts, ReduceOpts, TensorScalarOpts,
};
use nki_core::prelude::*;

const P: usize = nl::tile_size::PMAX;
const FMAX: usize = nl::tile_size::GEMM_MOVING_FMAX;

/// A `[n, 1]` fp32 SBUF vector filled with `value` (an activation bias constant, as the
/// library's `*_bias_sbuf` constants).
#[track_caller]
fn const_vec(n: usize, value: f32) -> Tile {
    let t = nl::ndarray(&[n, 1], DType::F32, MemKind::Sbuf);
    nisa::memset(&t, value, None);
    t
}

/// `dst[n, 128*c..] = src^T` for the `[n, w]` SBUF tile `src` (w <= 128): one TensorE
/// transpose into PSUM and a ScalarE copy out, as the library's `nc_transpose` + `tensor_copy`.
#[track_caller]
fn transpose_to_sbuf(dst: TileRef, src: TileRef) {
    let (n, w) = (src.partitions(), src.free_size());
    let ps = nl::ndarray(&[w, n], DType::F32, MemKind::Psum);
    nisa::nc_transpose(&ps, src, Opts::new().engine(Engine::Tensor));
    nisa::tensor_copy(dst, &ps, Opts::new().engine(Engine::Scalar));
}

/// The library's `cumsum` (`core/cumsum/cumsum.py`): the cumulative sum of `x[R, H]` along its
/// last dimension into `y`. Rows go to partitions (128 per tile); the free dimension is taken
/// in tiles of 2048 by `tensor_tensor_scan(ones * carry + x)` with the last column carried to
/// the next tile, accumulating in fp32.
///
/// Differs: 2-D input only (the library folds leading dimensions by `reshape`); the carry is
/// copied out of the scan's result tile.
#[nki_kernel]
pub fn cumsum<T: Element>(x: &Hbm<T>, y: &mut Hbm<T>) {
    const F_TILE: usize = 2048;
    let shape = expect_rank("cumsum", "x", x.shape(), 2).to_vec();
    expect_shape("cumsum", "y", y.shape(), &shape);
    let (rows, h) = (shape[0], shape[1]);
    for pt in nl::affine_range(nl::num_tiles(rows, P)) {
        let r = nl::tile_range(pt, P, rows);
        let n = r.len();
        let init = const_vec(P, 0.0);
        let ones = nl::ndarray(&[P, F_TILE], DType::F32, MemKind::Sbuf);
        nisa::memset(&ones, 1.0, None);
        let f_tiles = nl::num_tiles(h, F_TILE);
        for ft in nl::sequential_range(f_tiles) {
            let f = nl::tile_range(ft, F_TILE, h);
            let fs = f.len();
            let data = nl::ndarray(&[P, F_TILE], x.dtype(), MemKind::Sbuf);
            nisa::dma_copy(
                data.slice((0..n, 0..fs)),
                x.slice((r.clone(), f.clone())),
                None,
            );
            let result = nl::ndarray(&[n, fs], x.dtype(), MemKind::Sbuf);
            nisa::tensor_tensor_scan(
                &result,
                ones.slice((0..n, 0..fs)),
                data.slice((0..n, 0..fs)),
                init.slice((0..n, 0..1)),
                AluOp::Multiply,
                AluOp::Add,
                None,
            );
            nisa::dma_copy(y.slice((r.clone(), f)), &result, None);
            if ft + 1 < f_tiles {
                nisa::tensor_copy(
                    init.slice((0..n, 0..1)),
                    result.slice((.., fs - 1..fs)),
                    Opts::new().engine(Engine::Vector),
                );
            }
        }
    }
}

/// The FP8 e4m3 range the library quantises to (`rmsnorm_quant_constants.py`:
/// `quant_data_type_range = 240`).
pub const FP8_RANGE: f32 = 240.0;
/// The smallest dequantisation scale (`min_dequant_scale_value`), keeping `1 / scale` finite.
pub const MIN_DEQUANT_SCALE: f32 = 1e-6;

/// The library's `rmsnorm_quant_kernel` (`core/rmsnorm/rmsnorm_quant.py`) with RMS norm and
/// row quantisation: per row of `hidden[N, H]`, `y = x * rsqrt(mean(x^2) + eps) * ln_w`, then
/// `scale = max(max|y| / 240, 1e-6)` and `out = y / scale` rounded to FP8 e4m3; `scales[N, 1]`
/// receives the dequantisation scale. Per 128-row tile: ScalarE `activation_reduce(square)`,
/// ScalarE `rsqrt` with scale `1/H` and an eps bias vector, VectorE multiplies, the abs-max,
/// ScalarE `copy` scaled by `1/240`, VectorE `max`, `reciprocal` and the quantising multiply.
///
/// Differs: the library stores the fp32 scale in the last 4 bytes of each `[H + 4]` fp8 row;
/// here `scales` is its own fp32 tensor. The library's fused `tensor_scalar_reduce(abs, max)`
/// is a ScalarE `abs` activation and a VectorE `tensor_reduce(max)` (nki-rs has no
/// `tensor_scalar_reduce` yet). Compute is fp32 (the library's is bf16). No lower-bound
/// clipping, no static quantisation.
#[nki_kernel]
pub fn rmsnorm_quant<T: Element>(
    hidden: &Hbm<T>,
    ln_w: &Hbm<T>,
    out: &mut Hbm<F8E4M3>,
    scales: &mut Hbm<f32>,
    eps: f32,
) {
    const OP: &str = "rmsnorm_quant";
    let shape = expect_rank(OP, "hidden", hidden.shape(), 2).to_vec();
    let (rows, h) = (shape[0], shape[1]);
    expect_shape(OP, "ln_w", ln_w.shape(), &[h]);
    expect_shape(OP, "out", out.shape(), &shape);
    expect_shape(OP, "scales", scales.shape(), &[rows, 1]);
    let gamma_row = nl::ndarray(&[1, h], DType::F32, MemKind::Sbuf);
    nisa::dma_copy(&gamma_row, ln_w.view(), None);
    let gamma = nl::broadcast_to(&gamma_row, &[P.min(rows), h]);
    let eps_bias = const_vec(P, eps);
    for t in nl::affine_range(nl::num_tiles(rows, P)) {
        let r = nl::tile_range(t, P, rows);
        let n = r.len();
        let x = nl::ndarray(&[n, h], DType::F32, MemKind::Sbuf);
        nisa::dma_copy(&x, hidden.slice((r.clone(), ..)), None);
        let squares = nl::ndarray(&[n, h], DType::F32, MemKind::Sbuf);
        let sum_sq = nl::ndarray(&[n, 1], DType::F32, MemKind::Sbuf);
        nisa::activation_reduce(&squares, ActFn::Square, &x, AluOp::Add, &sum_sq, None);
        let inv_rms = nl::ndarray(&[n, 1], DType::F32, MemKind::Sbuf);
        nisa::activation(
            &inv_rms,
            ActFn::Rsqrt,
            &sum_sq,
            ActivationOpts::new()
                .scale(1.0 / h as f32)
                .bias(eps_bias.slice((0..n, ..))),
        );
        let y = nl::ndarray(&[n, h], DType::F32, MemKind::Sbuf);
        nisa::tensor_scalar(&y, &x, AluOp::Multiply, &inv_rms, TensorScalarOpts::new());
        nisa::tensor_tensor(&y, &y, gamma.slice((0..n, ..)), AluOp::Multiply, None);
        let abs = nl::ndarray(&[n, h], DType::F32, MemKind::Sbuf);
        nisa::activation(&abs, ActFn::Abs, &y, ActivationOpts::new());
        let dq = nl::ndarray(&[n, 1], DType::F32, MemKind::Sbuf);
        nisa::tensor_reduce(&dq, AluOp::Maximum, &abs, &[1], None);
        nisa::activation(
            &dq,
            ActFn::Copy,
            &dq,
            ActivationOpts::new().scale(1.0 / FP8_RANGE),
        );
        nisa::tensor_scalar(
            &dq,
            &dq,
            AluOp::Maximum,
            MIN_DEQUANT_SCALE,
            TensorScalarOpts::new(),
        );
        let q_scale = nl::ndarray(&[n, 1], DType::F32, MemKind::Sbuf);
        nisa::reciprocal(&q_scale, &dq, None);
        let q = nl::ndarray(&[n, h], DType::F8E4M3, MemKind::Sbuf);
        nisa::tensor_scalar(&q, &y, AluOp::Multiply, &q_scale, TensorScalarOpts::new());
        nisa::dma_copy(out.slice((r.clone(), ..)), &q, None);
        nisa::dma_copy(scales.slice((r, ..)), &dq, None);
    }
}

/// The library's token-generation layer norm (`core/subkernels/layernorm_tkg.py`): per token
/// row of `x[T, H]`, `(x - mean) * rsqrt(var + eps) * gamma + beta`, with the statistics from
/// VectorE `bn_stats` over 512-element chunks and one `bn_aggr`.
///
/// Differs: the input is `[T, H]` in HBM with tokens on partitions, in 128-row tiles (the
/// library takes `[B, S, H]`, possibly already in SBUF, and can write a transposed layout for
/// the next matmul); compute is fp32.
#[nki_kernel]
pub fn layernorm_tkg<T: Element>(
    x: &Hbm<T>,
    gamma: &Hbm<T>,
    beta: &Hbm<T>,
    out: &mut Hbm<T>,
    eps: f32,
) {
    const OP: &str = "layernorm_tkg";
    const CHUNK: usize = 512;
    let shape = expect_rank(OP, "x", x.shape(), 2).to_vec();
    let (rows, h) = (shape[0], shape[1]);
    expect_shape(OP, "gamma", gamma.shape(), &[h]);
    expect_shape(OP, "beta", beta.shape(), &[h]);
    expect_shape(OP, "out", out.shape(), &shape);
    let g_row = nl::ndarray(&[1, h], DType::F32, MemKind::Sbuf);
    let b_row = nl::ndarray(&[1, h], DType::F32, MemKind::Sbuf);
    nisa::dma_copy(&g_row, gamma.view(), None);
    nisa::dma_copy(&b_row, beta.view(), None);
    let g = nl::broadcast_to(&g_row, &[P.min(rows), h]);
    let b = nl::broadcast_to(&b_row, &[P.min(rows), h]);
    let eps_bias = const_vec(P, eps);
    let chunks = nl::num_tiles(h, CHUNK);
    for t in nl::affine_range(nl::num_tiles(rows, P)) {
        let r = nl::tile_range(t, P, rows);
        let n = r.len();
        let xt = nl::ndarray(&[n, h], DType::F32, MemKind::Sbuf);
        nisa::dma_copy(&xt, x.slice((r.clone(), ..)), None);
        let stats = nl::ndarray(&[n, 6 * chunks], DType::F32, MemKind::Sbuf);
        for c in 0..chunks {
            let f = nl::tile_range(c, CHUNK, h);
            nisa::bn_stats(
                stats.slice((.., 6 * c..6 * (c + 1))),
                xt.slice((.., f)),
                None,
            );
        }
        let mv = nl::ndarray(&[n, 2], DType::F32, MemKind::Sbuf);
        nisa::bn_aggr(&mv, &stats, None);
        let rstd = nl::ndarray(&[n, 1], DType::F32, MemKind::Sbuf);
        nisa::activation(
            &rstd,
            ActFn::Rsqrt,
            mv.slice((.., 1..2)),
            ActivationOpts::new().bias(eps_bias.slice((0..n, ..))),
        );
        let y = nl::ndarray(&[n, h], DType::F32, MemKind::Sbuf);
        nisa::tensor_scalar(
            &y,
            &xt,
            AluOp::Subtract,
            mv.slice((.., 0..1)),
            TensorScalarOpts::new().then(AluOp::Multiply, &rstd),
        );
        nisa::tensor_tensor(&y, &y, g.slice((0..n, ..)), AluOp::Multiply, None);
        let o = nl::ndarray(&[n, h], out.dtype(), MemKind::Sbuf);
        nisa::tensor_tensor(&o, &y, b.slice((0..n, ..)), AluOp::Add, None);
        nisa::dma_copy(out.slice((r, ..)), &o, None);
    }
}

/// The library's `RoPE` (`core/embeddings/rope.py`, contiguous layout): for `x[d, B, N, S]`
/// with `cos`, `sin` of `[d/2, B, S]`, `out[:d/2] = x1 * cos - x2 * sin` and
/// `out[d/2:] = x2 * cos + x1 * sin` (`x1 = x[:d/2]`, `x2 = x[d/2:]`). The second half is first
/// copied to a buffer starting at partition 0 (the library's "base partition alignment" copy);
/// four VectorE products and two VectorE sums per (batch, head).
///
/// Differs: the library broadcasts `cos`/`sin` over the heads with a stride-0 access pattern and
/// runs each product once over `[d/2, B, N, S]`; here each (batch, head) is one `[d/2, S]`
/// instruction group (nki-rs has no stride-0 views yet). No interleaved layout, no LNC shard.
#[nki_kernel]
pub fn rope<T: Element>(x: &Hbm<T>, cos: &Hbm<T>, sin: &Hbm<T>, out: &mut Hbm<T>) {
    const OP: &str = "rope";
    let shape = expect_rank(OP, "x", x.shape(), 4).to_vec();
    let (d, batch, heads, s) = (shape[0], shape[1], shape[2], shape[3]);
    require(OP, d.is_multiple_of(2) && d <= P, || {
        format!("d_head = {d} must be even and at most {P}")
    });
    let half = d / 2;
    expect_shape(OP, "cos", cos.shape(), &[half, batch, s]);
    expect_shape(OP, "sin", sin.shape(), &[half, batch, s]);
    expect_shape(OP, "out", out.shape(), &shape);
    for b in nl::affine_range(batch) {
        let c = nl::ndarray(&[half, s], DType::F32, MemKind::Sbuf);
        let sn = nl::ndarray(&[half, s], DType::F32, MemKind::Sbuf);
        nisa::dma_copy(&c, cos.slice((.., b, ..)), None);
        nisa::dma_copy(&sn, sin.slice((.., b, ..)), None);
        for hd in nl::affine_range(heads) {
            let xt = nl::ndarray(&[d, s], DType::F32, MemKind::Sbuf);
            nisa::dma_copy(&xt, x.slice((.., b, hd, ..)), None);
            let odd = nl::ndarray(&[half, s], DType::F32, MemKind::Sbuf);
            nisa::tensor_copy(
                &odd,
                xt.slice((half..d, ..)),
                Opts::new().engine(Engine::Vector),
            );
            let even = xt.slice((0..half, ..));
            let products: Vec<Tile> = (0..4)
                .map(|_| nl::ndarray(&[half, s], DType::F32, MemKind::Sbuf))
                .collect();
            nisa::tensor_tensor(&products[0], even, &c, AluOp::Multiply, None);
            nisa::tensor_tensor(&products[1], &odd, &c, AluOp::Multiply, None);
            nisa::tensor_tensor(&products[2], even, &sn, AluOp::Multiply, None);
            nisa::tensor_tensor(&products[3], &odd, &sn, AluOp::Multiply, None);
            let o = nl::ndarray(&[d, s], out.dtype(), MemKind::Sbuf);
            nisa::tensor_tensor(
                o.slice((0..half, ..)),
                &products[0],
                &products[3],
                AluOp::Subtract,
                None,
            );
            nisa::tensor_tensor(
                o.slice((half..d, ..)),
                &products[1],
                &products[2],
                AluOp::Add,
                None,
            );
            nisa::dma_copy(out.slice((.., b, hd, ..)), &o, None);
        }
    }
}

/// RMS-normalises the `[n, h]` fp32 tile `x` in place with gain tile `g` (`[>= n, h]`) and
/// epsilon bias `eps_bias` (`[>= n, 1]`), as the library's `rmsnorm_tkg`.
#[track_caller]
fn rmsnorm_in_place(x: &Tile, g: &Tile, eps_bias: &Tile) {
    let (n, h) = (x.partitions(), x.free_size());
    let squares = nl::ndarray(&[n, h], x.dtype(), MemKind::Sbuf);
    let sum_sq = nl::ndarray(&[n, 1], DType::F32, MemKind::Sbuf);
    nisa::activation_reduce(&squares, ActFn::Square, x, AluOp::Add, &sum_sq, None);
    let inv = nl::ndarray(&[n, 1], DType::F32, MemKind::Sbuf);
    nisa::activation(
        &inv,
        ActFn::Rsqrt,
        &sum_sq,
        ActivationOpts::new()
            .scale(1.0 / h as f32)
            .bias(eps_bias.slice((0..n, ..))),
    );
    nisa::tensor_scalar(x, x, AluOp::Multiply, &inv, TensorScalarOpts::new());
    nisa::tensor_tensor(x, x, g.slice((0..n, ..)), AluOp::Multiply, None);
}

/// `x[T, H]` (T <= 128) transposed into `H / 128` SBUF tiles `[128, T]` in the kernel's
/// matmul dtype, the stationary operands of a projection.
#[track_caller]
fn transposed_chunks(x: &Tile, dtype: DType) -> Vec<Tile> {
    let (t, h) = (x.partitions(), x.free_size());
    (0..h / P)
        .map(|c| {
            let xt = nl::ndarray(&[P, t], dtype, MemKind::Sbuf);
            transpose_to_sbuf(xt.view(), x.slice((.., c * P..(c + 1) * P)));
            xt
        })
        .collect()
}

/// `out[T, F] = sum_c xt[c]^T @ w[c*128.., cols]`, F in PSUM chunks of 512 columns, into the
/// `[T, F]` SBUF tile `out` (fp32). `w` rows are DMA'd per 128-row chunk and column block.
#[track_caller]
fn project(out: &Tile, xt: &[Tile], w: &Hbm<impl Element>) {
    let (t, f) = (out.partitions(), out.free_size());
    for cb in 0..nl::num_tiles(f, FMAX) {
        let cols = nl::tile_range(cb, FMAX, f);
        let ps = nl::ndarray(&[t, cols.len()], DType::F32, MemKind::Psum);
        for (c, x_c) in xt.iter().enumerate() {
            let w_c = nl::ndarray(&[P, cols.len()], w.dtype(), MemKind::Sbuf);
            nisa::dma_copy(&w_c, w.slice((c * P..(c + 1) * P, cols.clone())), None);
            nisa::nc_matmul(&ps, x_c, &w_c, None);
        }
        nisa::tensor_copy(
            out.slice((.., cols)),
            &ps,
            Opts::new().engine(Engine::Scalar),
        );
    }
}

/// The library's token-generation QKV projection (`core/qkv/qkv_tkg.py`) with its fused RMS
/// norm: `out[T, F] = rmsnorm(x[T, H]) * gamma @ w[H, F]` (F = the fused Q, K and V columns).
/// The tokens (T <= 128) sit on partitions for the norm; `H / 128` TensorE transposes put H on
/// partitions, and the projection accumulates over H in PSUM, 512 columns per bank.
///
/// Differs: one 128-token tile (the library also shards over LNC and supports a bias, an
/// output layout `[B, N, d, S]`, fp8 weights and MX formats); compute and the matmul operands
/// are fp32 for fp32 inputs (bf16 for bf16).
#[nki_kernel]
pub fn qkv_tkg<T: Element>(x: &Hbm<T>, gamma: &Hbm<T>, w: &Hbm<T>, out: &mut Hbm<T>, eps: f32) {
    const OP: &str = "qkv_tkg";
    let shape = expect_rank(OP, "x", x.shape(), 2).to_vec();
    let (t, h) = (shape[0], shape[1]);
    require(OP, t <= P && h.is_multiple_of(P), || {
        format!("x{shape:?}: T must be at most {P} and H a multiple of {P}")
    });
    expect_rank(OP, "w", w.shape(), 2);
    let f = w.shape()[1];
    expect_shape(OP, "w", w.shape(), &[h, f]);
    expect_shape(OP, "gamma", gamma.shape(), &[h]);
    expect_shape(OP, "out", out.shape(), &[t, f]);
    let g_row = nl::ndarray(&[1, h], DType::F32, MemKind::Sbuf);
    nisa::dma_copy(&g_row, gamma.view(), None);
    let g = nl::broadcast_to(&g_row, &[t, h]);
    let xs = nl::ndarray(&[t, h], DType::F32, MemKind::Sbuf);
    nisa::dma_copy(&xs, x.view(), None);
    rmsnorm_in_place(&xs, &g, &const_vec(t, eps));
    let xt = transposed_chunks(&xs, x.dtype());
    let res = nl::ndarray(&[t, f], DType::F32, MemKind::Sbuf);
    project(&res, &xt, w);
    let o = nl::ndarray(&[t, f], out.dtype(), MemKind::Sbuf);
    nisa::tensor_copy(&o, &res, Opts::new().engine(Engine::Vector));
    nisa::dma_copy(out.view(), &o, None);
}

/// The library's token-generation MLP (`core/mlp/mlp_tkg/mlp_tkg.py`) without its norm:
/// `out[T, H] = (silu(x @ w_gate) * (x @ w_up)) @ w_down` for T <= 128 tokens. `x` is
/// transposed to H-on-partitions chunks; gate and up projections accumulate in PSUM; ScalarE
/// applies SiLU, VectorE multiplies; the activation is transposed to I-on-partitions chunks
/// and the down projection accumulates over I in PSUM.
///
/// Differs: no fused RMS norm, bias, clamping, fp8/MX weights, or LNC sharding; one 128-token
/// tile; H and I multiples of 128.
#[nki_kernel]
pub fn mlp_tkg<T: Element>(
    x: &Hbm<T>,
    w_gate: &Hbm<T>,
    w_up: &Hbm<T>,
    w_down: &Hbm<T>,
    out: &mut Hbm<T>,
) {
    const OP: &str = "mlp_tkg";
    let shape = expect_rank(OP, "x", x.shape(), 2).to_vec();
    let (t, h) = (shape[0], shape[1]);
    expect_rank(OP, "w_gate", w_gate.shape(), 2);
    let i = w_gate.shape()[1];
    require(
        OP,
        t <= P && h.is_multiple_of(P) && i.is_multiple_of(P),
        || format!("x{shape:?}, I = {i}: T must be at most {P}, H and I multiples of {P}"),
    );
    expect_shape(OP, "w_up", w_up.shape(), &[h, i]);
    expect_shape(OP, "w_down", w_down.shape(), &[i, h]);
    expect_shape(OP, "out", out.shape(), &[t, h]);
    let xs = nl::ndarray(&[t, h], DType::F32, MemKind::Sbuf);
    nisa::dma_copy(&xs, x.view(), None);
    let xt = transposed_chunks(&xs, x.dtype());
    let gate = nl::ndarray(&[t, i], DType::F32, MemKind::Sbuf);
    let up = nl::ndarray(&[t, i], DType::F32, MemKind::Sbuf);
    project(&gate, &xt, w_gate);
    project(&up, &xt, w_up);
    let act = nl::ndarray(&[t, i], DType::F32, MemKind::Sbuf);
    nisa::activation(&act, ActFn::Silu, &gate, ActivationOpts::new());
    nisa::tensor_tensor(&act, &act, &up, AluOp::Multiply, None);
    let act_t = transposed_chunks(&act, x.dtype());
    let res = nl::ndarray(&[t, h], DType::F32, MemKind::Sbuf);
    project(&res, &act_t, w_down);
    let o = nl::ndarray(&[t, h], out.dtype(), MemKind::Sbuf);
    nisa::tensor_copy(&o, &res, Opts::new().engine(Engine::Vector));
    nisa::dma_copy(out.view(), &o, None);
}

/// The library's token-generation attention (`core/attention/attention_tkg.py`) for one
/// (batch, KV head): `out[Tq, d] = softmax(q^T k^T * scale) @ v` with `q[d, Tq]` (the query
/// tokens or grouped query heads of one KV head, d <= 128 on partitions), the key cache
/// transposed `k_t[d, S]` and `v[S, d]`. Scores accumulate in PSUM 512 keys at a time and are
/// gathered in SBUF; VectorE takes the negated row maximum; one ScalarE `exp(scale * s - max)`
/// per row block with its add-reduction gives the denominators; the probabilities are
/// transposed in 128-key chunks and `P @ V` accumulates over S in PSUM; VectorE divides by
/// the sums.
///
/// Differs: no causal/active-token mask, no KV-cache update, no batching over heads or LNC;
/// S a multiple of 128.
#[nki_kernel]
pub fn attention_tkg<T: Element>(
    q: &Hbm<T>,
    k_t: &Hbm<T>,
    v: &Hbm<T>,
    out: &mut Hbm<T>,
    scale: f32,
) {
    const OP: &str = "attention_tkg";
    let qs = expect_rank(OP, "q", q.shape(), 2).to_vec();
    let (d, tq) = (qs[0], qs[1]);
    expect_rank(OP, "k_t", k_t.shape(), 2);
    let s = k_t.shape()[1];
    require(OP, d <= P && tq <= P && s.is_multiple_of(P), || {
        format!("q{qs:?}, S = {s}: d and Tq must be at most {P}, S a multiple of {P}")
    });
    expect_shape(OP, "k_t", k_t.shape(), &[d, s]);
    expect_shape(OP, "v", v.shape(), &[s, d]);
    expect_shape(OP, "out", out.shape(), &[tq, d]);
    let q_sb = nl::ndarray(&[d, tq], q.dtype(), MemKind::Sbuf);
    nisa::dma_copy(&q_sb, q.view(), None);
    let scores = nl::ndarray(&[tq, s], DType::F32, MemKind::Sbuf);
    for kb in 0..nl::num_tiles(s, FMAX) {
        let cols = nl::tile_range(kb, FMAX, s);
        let k_sb = nl::ndarray(&[d, cols.len()], k_t.dtype(), MemKind::Sbuf);
        nisa::dma_copy(&k_sb, k_t.slice((.., cols.clone())), None);
        let ps = nl::ndarray(&[tq, cols.len()], DType::F32, MemKind::Psum);
        nisa::nc_matmul(&ps, &q_sb, &k_sb, None);
        nisa::tensor_copy(
            scores.slice((.., cols)),
            &ps,
            Opts::new().engine(Engine::Vector),
        );
    }
    let neg_max = nl::ndarray(&[tq, 1], DType::F32, MemKind::Sbuf);
    nisa::tensor_reduce(
        &neg_max,
        AluOp::Maximum,
        &scores,
        &[1],
        ReduceOpts::new().negate(),
    );
    nisa::tensor_scalar(
        &neg_max,
        &neg_max,
        AluOp::Multiply,
        scale,
        TensorScalarOpts::new(),
    );
    let probs = nl::ndarray(&[tq, s], DType::F32, MemKind::Sbuf);
    let sums = nl::ndarray(&[tq, 1], DType::F32, MemKind::Sbuf);
    nisa::activation_reduce(
        &probs,
        ActFn::Exp,
        &scores,
        AluOp::Add,
        &sums,
        ActivationOpts::new().scale(scale).bias(&neg_max),
    );
    let probs_t: Vec<Tile> = (0..s / P)
        .map(|c| {
            let pt = nl::ndarray(&[P, tq], v.dtype(), MemKind::Sbuf);
            transpose_to_sbuf(pt.view(), probs.slice((.., c * P..(c + 1) * P)));
            pt
        })
        .collect();
    let ps = nl::ndarray(&[tq, d], DType::F32, MemKind::Psum);
    for (c, p_c) in probs_t.iter().enumerate() {
        let v_c = nl::ndarray(&[P, d], v.dtype(), MemKind::Sbuf);
        nisa::dma_copy(&v_c, v.slice((c * P..(c + 1) * P, ..)), None);
        nisa::nc_matmul(&ps, p_c, &v_c, None);
    }
    let o = nl::ndarray(&[tq, d], out.dtype(), MemKind::Sbuf);
    nisa::tensor_scalar(&o, &ps, AluOp::Divide, &sums, TensorScalarOpts::new());
    nisa::dma_copy(out.view(), &o, None);
}

/// The library's MoE `router_topk` (`core/router_topk/router_topk.py`), ACT1 pipeline with
/// softmax and one-hot scatter: `logits[T, E] = x[H, T]^T @ w[H, E] + bias`,
/// `p = softmax(logits)` over the experts, the top `k <= 8` of `p` per token with VectorE
/// `max8` and their expert indices with `nc_find_index8`, and `affinities[T, E]` holding each
/// token's top-k probabilities at their experts (zero elsewhere), L1-normalised over the k
/// when `norm_topk`. The scatter compares a GpSimd `iota` of expert ids with each selected
/// index (VectorE `tensor_scalar(is_equal)`) and accumulates `mask * value`
/// (`scalar_tensor_tensor`).
///
/// Differs: x in the `[H, T]` HBM layout only, T in tiles of 128, E <= 512; no sigmoid
/// activation, ACT2 pipeline, indirect-DMA scatter, column tiling or LNC sharding. Tied
/// probabilities select distinct experts, lowest first (`nc_find_index8` pairs repeated
/// values with successive matches).
#[nki_kernel]
#[allow(clippy::too_many_arguments)]
pub fn router_topk<T: Element>(
    x: &Hbm<T>,
    w: &Hbm<T>,
    bias: &Hbm<T>,
    logits: &mut Hbm<f32>,
    affinities: &mut Hbm<f32>,
    expert_index: &mut Hbm<u32>,
    k: usize,
    norm_topk: bool,
) {
    const OP: &str = "router_topk";
    let xs = expect_rank(OP, "x", x.shape(), 2).to_vec();
    let (h, t) = (xs[0], xs[1]);
    expect_rank(OP, "w", w.shape(), 2);
    let e = w.shape()[1];
    require(
        OP,
        h.is_multiple_of(P) && (8..=FMAX).contains(&e) && (1..=8).contains(&k),
        || {
            format!("x{xs:?}, E = {e}, k = {k}: H must be a multiple of {P}, 8 <= E <= {FMAX}, 1 <= k <= 8")
        },
    );
    expect_shape(OP, "w", w.shape(), &[h, e]);
    expect_shape(OP, "bias", bias.shape(), &[1, e]);
    expect_shape(OP, "logits", logits.shape(), &[t, e]);
    expect_shape(OP, "affinities", affinities.shape(), &[t, e]);
    expect_shape(OP, "expert_index", expert_index.shape(), &[t, k]);
    let w_sb: Vec<Tile> = (0..h / P)
        .map(|c| {
            let wc = nl::ndarray(&[P, e], w.dtype(), MemKind::Sbuf);
            nisa::dma_copy(&wc, w.slice((c * P..(c + 1) * P, ..)), None);
            wc
        })
        .collect();
    let b_row = nl::ndarray(&[1, e], DType::F32, MemKind::Sbuf);
    nisa::dma_copy(&b_row, bias.view(), None);
    let b_all = nl::broadcast_to(&b_row, &[P.min(t), e]);
    let experts = nl::ndarray(&[P.min(t), e], DType::F32, MemKind::Sbuf);
    nisa::iota(&experts, &AffineExpr::new(P.min(t), 0).free(1, e), None);
    for tt in nl::affine_range(nl::num_tiles(t, P)) {
        let r = nl::tile_range(tt, P, t);
        let n = r.len();
        let ps = nl::ndarray(&[n, e], DType::F32, MemKind::Psum);
        for (c, w_c) in w_sb.iter().enumerate() {
            let x_c = nl::ndarray(&[P, n], x.dtype(), MemKind::Sbuf);
            nisa::dma_copy(&x_c, x.slice((c * P..(c + 1) * P, r.clone())), None);
            nisa::nc_matmul(&ps, &x_c, w_c, None);
        }
        let lg = nl::ndarray(&[n, e], DType::F32, MemKind::Sbuf);
        nisa::tensor_tensor(&lg, &ps, b_all.slice((0..n, ..)), AluOp::Add, None);
        nisa::dma_copy(logits.slice((r.clone(), ..)), &lg, None);
        // Softmax over the experts.
        let neg_max = nl::ndarray(&[n, 1], DType::F32, MemKind::Sbuf);
        nisa::tensor_reduce(
            &neg_max,
            AluOp::Maximum,
            &lg,
            &[1],
            ReduceOpts::new().negate(),
        );
        let ex = nl::ndarray(&[n, e], DType::F32, MemKind::Sbuf);
        let sum = nl::ndarray(&[n, 1], DType::F32, MemKind::Sbuf);
        let bias = ActivationOpts::new().bias(&neg_max);
        nisa::activation_reduce(&ex, ActFn::Exp, &lg, AluOp::Add, &sum, bias);
        let prob = nl::ndarray(&[n, e], DType::F32, MemKind::Sbuf);
        nisa::tensor_scalar(&prob, &ex, AluOp::Divide, &sum, TensorScalarOpts::new());
        // Top-8 values and their expert indices.
        let top = nl::ndarray(&[n, 8], DType::F32, MemKind::Sbuf);
        nisa::max8(&top, &prob);
        let idx = nl::ndarray(&[n, 8], DType::U32, MemKind::Sbuf);
        nisa::nc_find_index8(&idx, &prob, &top);
        nisa::dma_copy(
            expert_index.slice((r.clone(), ..)),
            idx.slice((.., 0..k)),
            None,
        );
        if norm_topk {
            let s = nl::ndarray(&[n, 1], DType::F32, MemKind::Sbuf);
            nisa::tensor_reduce(&s, AluOp::Add, top.slice((.., 0..k)), &[1], None);
            nisa::tensor_scalar(&top, &top, AluOp::Divide, &s, TensorScalarOpts::new());
        }
        // One-hot scatter of the k values to their experts.
        let idx_f = nl::ndarray(&[n, 8], DType::F32, MemKind::Sbuf);
        nisa::tensor_copy(&idx_f, &idx, Opts::new().engine(Engine::Vector));
        let aff = nl::ndarray(&[n, e], DType::F32, MemKind::Sbuf);
        nisa::memset(&aff, 0.0, None);
        for j in 0..k {
            let mask = nl::ndarray(&[n, e], DType::F32, MemKind::Sbuf);
            nisa::tensor_scalar(
                &mask,
                experts.slice((0..n, ..)),
                AluOp::Equal,
                idx_f.slice((.., j..j + 1)),
                TensorScalarOpts::new(),
            );
            let next = nl::ndarray(&[n, e], DType::F32, MemKind::Sbuf);
            nisa::scalar_tensor_tensor(
                &next,
                &mask,
                AluOp::Multiply,
                top.slice((.., j..j + 1)),
                AluOp::Add,
                &aff,
                None,
            );
            nisa::tensor_copy(&aff, &next, Opts::new().engine(Engine::Vector));
        }
        nisa::dma_copy(affinities.slice((r, ..)), &aff, None);
    }
}

/// Independent references of the ported kernels: plain loops in f64 over `Vec`s, written from
/// the library's torch references' definitions (`*_torch.py`), not from the kernels above.
pub mod reference {
    /// Cumulative sums along each row.
    pub fn cumsum(rows: usize, cols: usize, x: &[f32]) -> Vec<f32> {
        let mut out = vec![0.0; rows * cols];
        for r in 0..rows {
            let mut acc = 0.0f64;
            for c in 0..cols {
                acc += x[r * cols + c] as f64;
                out[r * cols + c] = acc as f32;
            }
        }
        out
    }

    /// `x * rsqrt(mean(x^2) + eps) * g` per row, in f64.
    pub fn rmsnorm(rows: usize, cols: usize, x: &[f32], g: &[f32], eps: f32) -> Vec<f64> {
        let mut out = vec![0.0; rows * cols];
        for r in 0..rows {
            let row = &x[r * cols..(r + 1) * cols];
            let ms = row.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / cols as f64;
            let inv = 1.0 / (ms + eps as f64).sqrt();
            for c in 0..cols {
                out[r * cols + c] = row[c] as f64 * inv * g[c] as f64;
            }
        }
        out
    }

    /// rmsnorm then row quantisation: `(y, scale)` with `scale = max(max|y| / 240, 1e-6)`; the
    /// quantised value of `y` is `y / scale` (before FP8 rounding).
    pub fn rmsnorm_quant(
        rows: usize,
        cols: usize,
        x: &[f32],
        g: &[f32],
        eps: f32,
    ) -> (Vec<f64>, Vec<f64>) {
        let y = rmsnorm(rows, cols, x, g, eps);
        let scales = (0..rows)
            .map(|r| {
                let m = y[r * cols..(r + 1) * cols]
                    .iter()
                    .fold(0.0f64, |a, &v| a.max(v.abs()));
                (m / super::FP8_RANGE as f64).max(super::MIN_DEQUANT_SCALE as f64)
            })
            .collect();
        (y, scales)
    }

    /// Layer norm per row with biased variance.
    pub fn layernorm(
        rows: usize,
        cols: usize,
        x: &[f32],
        g: &[f32],
        b: &[f32],
        eps: f32,
    ) -> Vec<f32> {
        let mut out = vec![0.0; rows * cols];
        for r in 0..rows {
            let row = &x[r * cols..(r + 1) * cols];
            let mean = row.iter().map(|&v| v as f64).sum::<f64>() / cols as f64;
            let var = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / cols as f64;
            let inv = 1.0 / (var + eps as f64).sqrt();
            for c in 0..cols {
                out[r * cols + c] =
                    ((row[c] as f64 - mean) * inv * g[c] as f64 + b[c] as f64) as f32;
            }
        }
        out
    }

    /// RoPE on `x[d, B, N, S]` (flattened) with `cos`, `sin` of `[d/2, B, S]`.
    pub fn rope(shape: [usize; 4], x: &[f32], cos: &[f32], sin: &[f32]) -> Vec<f32> {
        let [d, bs, nh, s] = shape;
        let half = d / 2;
        let at = |i: usize, b: usize, h: usize, t: usize| ((i * bs + b) * nh + h) * s + t;
        let cs = |i: usize, b: usize, t: usize| (i * bs + b) * s + t;
        let mut out = vec![0.0; x.len()];
        for b in 0..bs {
            for h in 0..nh {
                for t in 0..s {
                    for i in 0..half {
                        let (x1, x2) = (x[at(i, b, h, t)] as f64, x[at(i + half, b, h, t)] as f64);
                        let (c, sn) = (cos[cs(i, b, t)] as f64, sin[cs(i, b, t)] as f64);
                        out[at(i, b, h, t)] = (x1 * c - x2 * sn) as f32;
                        out[at(i + half, b, h, t)] = (x2 * c + x1 * sn) as f32;
                    }
                }
            }
        }
        out
    }

    /// `a[m, k] @ b[k, n]` in f64.
    pub fn matmul(m: usize, k: usize, n: usize, a: &[f64], b: &[f32]) -> Vec<f64> {
        let mut out = vec![0.0; m * n];
        for i in 0..m {
            for kk in 0..k {
                let av = a[i * k + kk];
                for j in 0..n {
                    out[i * n + j] += av * b[kk * n + j] as f64;
                }
            }
        }
        out
    }

    /// `rmsnorm(x) @ w`.
    pub fn qkv(
        t: usize,
        h: usize,
        f: usize,
        x: &[f32],
        g: &[f32],
        w: &[f32],
        eps: f32,
    ) -> Vec<f32> {
        let xn = rmsnorm(t, h, x, g, eps);
        matmul(t, h, f, &xn, w)
            .into_iter()
            .map(|v| v as f32)
            .collect()
    }

    /// `(silu(x @ wg) * (x @ wu)) @ wd`.
    pub fn mlp(
        t: usize,
        h: usize,
        i: usize,
        x: &[f32],
        wg: &[f32],
        wu: &[f32],
        wd: &[f32],
    ) -> Vec<f32> {
        let xd: Vec<f64> = x.iter().map(|&v| v as f64).collect();
        let gate = matmul(t, h, i, &xd, wg);
        let up = matmul(t, h, i, &xd, wu);
        let act: Vec<f64> = gate
            .iter()
            .zip(&up)
            .map(|(&g, &u)| g / (1.0 + (-g).exp()) * u)
            .collect();
        matmul(t, i, h, &act, wd)
            .into_iter()
            .map(|v| v as f32)
            .collect()
    }

    /// `softmax(q^T k_t * scale) @ v` for `q[d, tq]`, `k_t[d, s]`, `v[s, d]`.
    pub fn attention(
        d: usize,
        tq: usize,
        s: usize,
        q: &[f32],
        k_t: &[f32],
        v: &[f32],
        scale: f32,
    ) -> Vec<f32> {
        let mut out = vec![0.0; tq * d];
        for i in 0..tq {
            let sc: Vec<f64> = (0..s)
                .map(|j| {
                    (0..d)
                        .map(|c| q[c * tq + i] as f64 * k_t[c * s + j] as f64)
                        .sum::<f64>()
                        * scale as f64
                })
                .collect();
            let m = sc.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let p: Vec<f64> = sc.iter().map(|&x| (x - m).exp()).collect();
            let z: f64 = p.iter().sum();
            for c in 0..d {
                out[i * d + c] =
                    ((0..s).map(|j| p[j] * v[j * d + c] as f64).sum::<f64>() / z) as f32;
            }
        }
        out
    }

    /// Router: `(logits, affinities, indices)` for `x[h, t]`, `w[h, e]`, `bias[e]`, top `k` of
    /// the softmax (ties: lowest expert first), L1-normalised when `norm`.
    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    pub fn router(
        h: usize,
        t: usize,
        e: usize,
        x: &[f32],
        w: &[f32],
        bias: &[f32],
        k: usize,
        norm: bool,
    ) -> (Vec<f32>, Vec<f32>, Vec<u32>) {
        let mut logits = vec![0.0f32; t * e];
        let mut aff = vec![0.0f32; t * e];
        let mut idx = vec![0u32; t * k];
        for i in 0..t {
            let lg: Vec<f64> = (0..e)
                .map(|j| {
                    (0..h)
                        .map(|c| x[c * t + i] as f64 * w[c * e + j] as f64)
                        .sum::<f64>()
                        + bias[j] as f64
                })
                .collect();
            let m = lg.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let ex: Vec<f64> = lg.iter().map(|&v| (v - m).exp()).collect();
            let z: f64 = ex.iter().sum();
            let p: Vec<f64> = ex.iter().map(|&v| v / z).collect();
            let mut order: Vec<usize> = (0..e).collect();
            order.sort_by(|&a, &b| p[b].partial_cmp(&p[a]).unwrap().then(a.cmp(&b)));
            let top = &order[..k];
            let s: f64 = if norm {
                top.iter().map(|&j| p[j]).sum()
            } else {
                1.0
            };
            for (slot, &j) in top.iter().enumerate() {
                idx[i * k + slot] = j as u32;
                aff[i * e + j] = (p[j] / s) as f32;
            }
            for j in 0..e {
                logits[i * e + j] = lg[j] as f32;
            }
        }
        (logits, aff, idx)
    }
}

/// Runs each ported kernel at a representative shape on deterministic random inputs and
/// compares it with its [`reference`](mod@reference): the check behind `cargo run --example nki_library`
/// and the tests. Shapes and tolerances follow docs/reference/test-cases.md where it lists
/// one for the kernel's family.
pub mod check {
    use super::reference as r;
    use crate::testing::{allclose, random_range, Mismatch};
    use ndarray::{ArrayD, IxDyn};
    use nki_core::prelude::*;

    /// The ported kernels, in the order the example prints them.
    pub const KERNELS: [&str; 8] = [
        "cumsum",
        "rmsnorm_quant",
        "layernorm_tkg",
        "rope",
        "qkv_tkg",
        "attention_tkg",
        "mlp_tkg",
        "router_topk",
    ];

    /// The outcome of one run: the comparison (always `Ok` in estimate mode) and the report.
    pub type Outcome = (Result<(), Mismatch>, LaunchReport);

    fn hbm(shape: &[usize], v: Vec<f32>) -> Result<Hbm<f32>, NkiError> {
        Hbm::from_vec(shape, v)
    }

    fn arr(shape: &[usize], v: Vec<f32>) -> ArrayD<f32> {
        ArrayD::from_shape_vec(IxDyn(shape), v).expect("reference shape")
    }

    fn compare(
        report: &LaunchReport,
        got: impl FnOnce() -> Result<Vec<f32>, NkiError>,
        shape: &[usize],
        want: Vec<f32>,
        tol: (f32, f32),
    ) -> Result<Result<(), Mismatch>, NkiError> {
        if report.mode == Mode::Estimate {
            return Ok(Ok(()));
        }
        Ok(allclose(
            &arr(shape, got()?),
            &arr(shape, want),
            tol.0,
            tol.1,
        ))
    }

    /// A short description of the shape `name` runs at.
    pub fn shape_of(name: &str) -> &'static str {
        match name {
            "cumsum" => "[2048, 2048] fp32",
            "rmsnorm_quant" => "[256, 4096] fp32 -> fp8",
            "layernorm_tkg" => "[300, 1000] fp32",
            "rope" => "x [128, 2, 2, 1024] fp32",
            "qkv_tkg" => "[128, 1024] @ [1024, 512] fp32",
            "attention_tkg" => "d 128, Tq 128, S 2048 fp32",
            "mlp_tkg" => "T 128, H 512, I 1024 fp32",
            "router_topk" => "H 1024, T 256, E 64, k 8 fp32",
            _ => "?",
        }
    }

    /// Runs kernel `name` with `launch` (grid `[1]`) and compares its outputs.
    pub fn run(name: &str, launch: Launch) -> Result<Outcome, NkiError> {
        match name {
            "cumsum" => {
                let (rows, cols) = (2048, 2048);
                let x = random_range(rows * cols, -1.0, 1.0, 1);
                let xh = hbm(&[rows, cols], x.clone())?;
                let mut y = Hbm::<f32>::zeros([rows, cols]);
                let rep = super::cumsum::run(launch, &xh, &mut y)?;
                let want = r::cumsum(rows, cols, &x);
                let cmp = compare(&rep, || y.to_f32_vec(), &[rows, cols], want, (1e-4, 1e-2))?;
                Ok((cmp, rep))
            }
            "rmsnorm_quant" => {
                let (rows, h, eps) = (256, 4096, 1e-6);
                let x = random_range(rows * h, -2.0, 2.0, 2);
                let g = random_range(h, 0.5, 1.5, 3);
                let (xh, gh) = (hbm(&[rows, h], x.clone())?, hbm(&[h], g.clone())?);
                let mut q = Hbm::<F8E4M3>::zeros([rows, h]);
                let mut s = Hbm::<f32>::zeros([rows, 1]);
                let rep = super::rmsnorm_quant::run(launch, &xh, &gh, &mut q, &mut s, eps)?;
                if rep.mode == Mode::Estimate {
                    return Ok((Ok(()), rep));
                }
                let (y, scales) = r::rmsnorm_quant(rows, h, &x, &g, eps);
                let want_s: Vec<f32> = scales.iter().map(|&v| v as f32).collect();
                let cmp = allclose(
                    &arr(&[rows, 1], s.to_f32_vec()?),
                    &arr(&[rows, 1], want_s),
                    0.0,
                    1e-5,
                );
                // Dequantised values within FP8 e4m3 rounding (3 mantissa bits: half an ulp
                // is 1/16 relative) plus the smallest subnormal step of the scaled range.
                let qv = q.to_f32_vec()?;
                let deq: Vec<f32> = (0..rows * h)
                    .map(|i| qv[i] * scales[i / h] as f32)
                    .collect();
                let want: Vec<f32> = y.iter().map(|&v| v as f32).collect();
                let atol = scales.iter().cloned().fold(0.0, f64::max) as f32 * 2f32.powi(-9);
                let cmp = cmp.and(allclose(
                    &arr(&[rows, h], deq),
                    &arr(&[rows, h], want),
                    atol,
                    0.0625,
                ));
                Ok((cmp, rep))
            }
            "layernorm_tkg" => {
                let (rows, h, eps) = (300, 1000, 1e-5);
                let x = random_range(rows * h, -3.0, 3.0, 4);
                let (g, b) = (random_range(h, 0.5, 1.5, 5), random_range(h, -0.5, 0.5, 6));
                let (xh, gh, bh) = (
                    hbm(&[rows, h], x.clone())?,
                    hbm(&[h], g.clone())?,
                    hbm(&[h], b.clone())?,
                );
                let mut out = Hbm::<f32>::zeros([rows, h]);
                let rep = super::layernorm_tkg::run(launch, &xh, &gh, &bh, &mut out, eps)?;
                let want = r::layernorm(rows, h, &x, &g, &b, eps);
                let cmp = compare(&rep, || out.to_f32_vec(), &[rows, h], want, (1e-3, 1e-2))?;
                Ok((cmp, rep))
            }
            "rope" => {
                let shape = [128, 2, 2, 1024];
                let n: usize = shape.iter().product();
                let cs = 64 * 2 * 1024;
                let x = random_range(n, -1.0, 1.0, 7);
                let (c, s) = (
                    random_range(cs, -1.0, 1.0, 8),
                    random_range(cs, -1.0, 1.0, 9),
                );
                let xh = hbm(&shape, x.clone())?;
                let (ch, sh) = (
                    hbm(&[64, 2, 1024], c.clone())?,
                    hbm(&[64, 2, 1024], s.clone())?,
                );
                let mut out = Hbm::<f32>::zeros(shape);
                let rep = super::rope::run(launch, &xh, &ch, &sh, &mut out)?;
                let want = r::rope(shape, &x, &c, &s);
                let cmp = compare(&rep, || out.to_f32_vec(), &shape, want, (1e-4, 1e-2))?;
                Ok((cmp, rep))
            }
            "qkv_tkg" => {
                let (t, h, f, eps) = (128, 1024, 512, 1e-6);
                let x = random_range(t * h, -1.0, 1.0, 10);
                let g = random_range(h, 0.5, 1.5, 11);
                let w = random_range(h * f, -0.05, 0.05, 12);
                let (xh, gh, wh) = (
                    hbm(&[t, h], x.clone())?,
                    hbm(&[h], g.clone())?,
                    hbm(&[h, f], w.clone())?,
                );
                let mut out = Hbm::<f32>::zeros([t, f]);
                let rep = super::qkv_tkg::run(launch, &xh, &gh, &wh, &mut out, eps)?;
                let want = r::qkv(t, h, f, &x, &g, &w, eps);
                let cmp = compare(&rep, || out.to_f32_vec(), &[t, f], want, (1e-2, 1e-2))?;
                Ok((cmp, rep))
            }
            "attention_tkg" => {
                let (d, tq, s) = (128, 128, 2048);
                let scale = 1.0 / (d as f32).sqrt();
                let q = random_range(d * tq, -1.0, 1.0, 13);
                let k = random_range(d * s, -1.0, 1.0, 14);
                let v = random_range(s * d, -1.0, 1.0, 15);
                let (qh, kh, vh) = (
                    hbm(&[d, tq], q.clone())?,
                    hbm(&[d, s], k.clone())?,
                    hbm(&[s, d], v.clone())?,
                );
                let mut out = Hbm::<f32>::zeros([tq, d]);
                let rep = super::attention_tkg::run(launch, &qh, &kh, &vh, &mut out, scale)?;
                let want = r::attention(d, tq, s, &q, &k, &v, scale);
                let cmp = compare(&rep, || out.to_f32_vec(), &[tq, d], want, (1e-2, 0.0))?;
                Ok((cmp, rep))
            }
            "mlp_tkg" => {
                let (t, h, i) = (128, 512, 1024);
                let x = random_range(t * h, -1.0, 1.0, 16);
                let wg = random_range(h * i, -0.05, 0.05, 17);
                let wu = random_range(h * i, -0.05, 0.05, 18);
                let wd = random_range(i * h, -0.05, 0.05, 19);
                let xh = hbm(&[t, h], x.clone())?;
                let (gh, uh, dh) = (
                    hbm(&[h, i], wg.clone())?,
                    hbm(&[h, i], wu.clone())?,
                    hbm(&[i, h], wd.clone())?,
                );
                let mut out = Hbm::<f32>::zeros([t, h]);
                let rep = super::mlp_tkg::run(launch, &xh, &gh, &uh, &dh, &mut out)?;
                let want = r::mlp(t, h, i, &x, &wg, &wu, &wd);
                let cmp = compare(&rep, || out.to_f32_vec(), &[t, h], want, (1e-3, 1e-2))?;
                Ok((cmp, rep))
            }
            "router_topk" => {
                let (h, t, e, k) = (1024, 256, 64, 8);
                let x = random_range(h * t, -1.0, 1.0, 20);
                let w = random_range(h * e, -0.1, 0.1, 21);
                let b = random_range(e, -0.5, 0.5, 22);
                let (xh, wh, bh) = (
                    hbm(&[h, t], x.clone())?,
                    hbm(&[h, e], w.clone())?,
                    hbm(&[1, e], b.clone())?,
                );
                let mut lg = Hbm::<f32>::zeros([t, e]);
                let mut aff = Hbm::<f32>::zeros([t, e]);
                let mut idx = Hbm::<u32>::zeros([t, k]);
                let rep = super::router_topk::run(
                    launch, &xh, &wh, &bh, &mut lg, &mut aff, &mut idx, k, true,
                )?;
                if rep.mode == Mode::Estimate {
                    return Ok((Ok(()), rep));
                }
                let (want_lg, want_aff, want_idx) = r::router(h, t, e, &x, &w, &b, k, true);
                let got_idx: Vec<f32> = idx.to_f32_vec()?;
                let want_idx: Vec<f32> = want_idx.iter().map(|&v| v as f32).collect();
                let cmp = allclose(
                    &arr(&[t, e], lg.to_f32_vec()?),
                    &arr(&[t, e], want_lg),
                    1e-3,
                    1e-3,
                )
                .and(allclose(
                    &arr(&[t, e], aff.to_f32_vec()?),
                    &arr(&[t, e], want_aff),
                    1e-5,
                    1e-3,
                ))
                .and(allclose(
                    &arr(&[t, k], got_idx),
                    &arr(&[t, k], want_idx),
                    0.0,
                    0.0,
                ));
                Ok((cmp, rep))
            }
            other => Err(NkiError::new(
                ErrorKind::InvalidArgument,
                "nki_library::check::run",
                format!("unknown kernel '{other}'; the kernels are {KERNELS:?}"),
            )),
        }
    }
}
