//! The NKI matrix-multiplication tutorial's kernels: `result[M, N] = lhsT[K, M]^T @ rhs[K, N]`
//! with the left-hand side delivered transposed (K on the partitions, as TensorE wants it),
//! fp32 accumulation in PSUM and the result cast back to the input dtype.
//!
//! The four stages of the tutorial, each a step in data reuse:
//!
//! | kernel | what changes |
//! |---|---|
//! | [`matmul_tiled`](fn@matmul_tiled) | loops m, n, k over `[128, 128]` x `[128, 512]` tiles, loading both tiles in the k loop |
//! | [`matmul_hoist_load`](fn@matmul_hoist_load) | the K column of lhsT tiles is loaded once per m, the rhs tiles once per (m, n) |
//! | [`matmul_block_free_dimension`](fn@matmul_block_free_dimension) | blocks of tiles in M and N share their loads |
//! | [`matmul_fully_optimized`](fn@matmul_fully_optimized) | blocks in M, N and K; K blocks in a sequential loop accumulate into an SBUF result block, stored once |
//!
//! Every kernel runs as one program instance (grid `[1]`). [`MatmulKernel`] names the four
//! stages and launches any of them with its tutorial block sizes.

use nki_core::nisa::AluOp;
use nki_core::prelude::*;
use std::ops::Range;
// The Beta-1 instruction forms (allocating, `_into` twins): the seeds' dialect.
use nki_core::nisa::classic as nisa;

/// Rows of the result (columns of lhsT) per tile: TensorE's stationary free-dim limit.
pub const TILE_M: usize = nl::tile_size::GEMM_STATIONARY_FMAX;
/// Contraction rows per tile: the partition dimension.
pub const TILE_K: usize = nl::tile_size::PMAX;
/// Columns of the result per tile: TensorE's moving free-dim limit (one PSUM bank of fp32).
pub const TILE_N: usize = nl::tile_size::GEMM_MOVING_FMAX;

/// How many tiles make one block along each dimension (the tutorial's `TILES_IN_BLOCK_*`
/// meta-parameters). Kernels that do not block a dimension ignore its count.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Blocking {
    /// Tiles of [`TILE_M`] rows per M block.
    pub m: usize,
    /// Tiles of [`TILE_N`] columns per N block.
    pub n: usize,
    /// Tiles of [`TILE_K`] contraction rows per K block.
    pub k: usize,
}

impl Blocking {
    /// The tutorial's blocking of the free dimensions: 2 tiles in M (256), 2 in N (1024).
    pub const BLOCK_FREE_DIMENSION: Blocking = Blocking { m: 2, n: 2, k: 1 };
    /// The tutorial's full blocking: 16 tiles in M (2048), 2 in N (1024), 8 in K (1024).
    pub const FULLY_OPTIMIZED: Blocking = Blocking { m: 16, n: 2, k: 8 };

    /// A blocking of `m`, `n` and `k` tiles.
    pub const fn new(m: usize, n: usize, k: usize) -> Blocking {
        Blocking { m, n, k }
    }
}

/// Checks the operand shapes for a kernel that needs M, N and K to be multiples of
/// `mult = [m, n, k]` elements; returns `(K, M, N)`.
fn matmul_dims(
    op: &'static str,
    lhs_t: &[usize],
    rhs: &[usize],
    result: &[usize],
    mult: [usize; 3],
) -> Result<(usize, usize, usize), NkiError> {
    if lhs_t.len() != 2 || rhs.len() != 2 || result.len() != 2 {
        return Err(NkiError::new(
            ErrorKind::InvalidArgument,
            op,
            format!(
                "expected 2-D lhsT[K, M], rhs[K, N] and result[M, N], got lhsT{lhs_t:?}, rhs{rhs:?}, result{result:?}"
            ),
        ));
    }
    let (k, m, n) = (lhs_t[0], lhs_t[1], rhs[1]);
    if rhs[0] != k {
        return Err(NkiError::new(
            ErrorKind::ContractionMismatch,
            op,
            format!(
                "lhsT{lhs_t:?} and rhs{rhs:?} must have the same contraction dimension (K = {k} vs {})",
                rhs[0]
            ),
        ));
    }
    if result != [m, n] {
        return Err(NkiError::new(
            ErrorKind::ShapeMismatch,
            op,
            format!("result{result:?} must have shape [M, N] = [{m}, {n}] for lhsT{lhs_t:?} and rhs{rhs:?}"),
        ));
    }
    for (what, size, mult) in [("M", m, mult[0]), ("N", n, mult[1]), ("K", k, mult[2])] {
        if mult == 0 {
            return Err(NkiError::new(
                ErrorKind::InvalidArgument,
                op,
                format!("block size along {what} must be at least one tile"),
            ));
        }
        if size == 0 || size % mult != 0 {
            return Err(NkiError::new(
                ErrorKind::InvalidArgument,
                op,
                format!("expected {what} = {size} to be a positive multiple of {mult}"),
            ));
        }
    }
    Ok((k, m, n))
}

/// [`matmul_dims`] inside a kernel: an error fails the launch.
#[track_caller]
fn dims_or_raise(
    op: &'static str,
    lhs_t: &[usize],
    rhs: &[usize],
    result: &[usize],
    mult: [usize; 3],
) -> (usize, usize, usize) {
    nl::check(matmul_dims(op, lhs_t, rhs, result, mult))
}

/// The tiled matmul: for every `[128, 512]` result tile, loop over K in `[128]`-row steps, loading
/// a `[128, 128]` lhsT tile and a `[128, 512]` rhs tile each step and accumulating their product in
/// one PSUM bank; then copy PSUM to SBUF (casting to the result dtype) and store.
///
/// Needs M a multiple of 128, N of 512 and K of 128.
#[nki_kernel]
pub fn matmul_tiled<T: Element>(lhs_t: &Hbm<T>, rhs: &Hbm<T>, result: &mut Hbm<T>) {
    let mult = [TILE_M, TILE_N, TILE_K];
    let (k, m, n) = dims_or_raise(
        "matmul_tiled",
        lhs_t.shape(),
        rhs.shape(),
        result.shape(),
        mult,
    );
    for mi in nl::affine_range(m / TILE_M) {
        let rows = mi * TILE_M..(mi + 1) * TILE_M;
        for ni in nl::affine_range(n / TILE_N) {
            let cols = ni * TILE_N..(ni + 1) * TILE_N;
            let res_psum = nl::ndarray(&[TILE_M, TILE_N], DType::F32, MemKind::Psum);
            for ki in nl::affine_range(k / TILE_K) {
                let kr = ki * TILE_K..(ki + 1) * TILE_K;
                let lhs_tile = nl::load(lhs_t.slice((kr.clone(), rows.clone())));
                let rhs_tile = nl::load(rhs.slice((kr, cols.clone())));
                nl::matmul_acc(&res_psum, &lhs_tile, &rhs_tile, true);
            }
            let res_sb = nl::copy(&res_psum, Some(result.dtype()));
            nl::store(result.slice((rows.clone(), cols)), &res_sb);
        }
    }
}

/// The tiled matmul with its loads hoisted out of the k loop: for each M tile the K/128 lhsT
/// tiles are loaded once, before the n loop; for each (m, n) the K/128 rhs tiles once, before
/// the k loop.
///
/// Needs M a multiple of 128, N of 512 and K of 128 (and the K column of tiles must fit SBUF:
/// K up to about 16384 in bf16).
#[nki_kernel]
pub fn matmul_hoist_load<T: Element>(lhs_t: &Hbm<T>, rhs: &Hbm<T>, result: &mut Hbm<T>) {
    let mult = [TILE_M, TILE_N, TILE_K];
    let (k, m, n) = dims_or_raise(
        "matmul_hoist_load",
        lhs_t.shape(),
        rhs.shape(),
        result.shape(),
        mult,
    );
    let k_tiles = k / TILE_K;
    for mi in nl::affine_range(m / TILE_M) {
        let rows = mi * TILE_M..(mi + 1) * TILE_M;
        let mut lhs_tiles = Vec::with_capacity(k_tiles);
        for ki in nl::affine_range(k_tiles) {
            lhs_tiles.push(nl::load(
                lhs_t.slice((ki * TILE_K..(ki + 1) * TILE_K, rows.clone())),
            ));
        }
        for ni in nl::affine_range(n / TILE_N) {
            let cols = ni * TILE_N..(ni + 1) * TILE_N;
            let mut rhs_tiles = Vec::with_capacity(k_tiles);
            for ki in nl::affine_range(k_tiles) {
                rhs_tiles.push(nl::load(
                    rhs.slice((ki * TILE_K..(ki + 1) * TILE_K, cols.clone())),
                ));
            }
            let res_psum = nl::ndarray(&[TILE_M, TILE_N], DType::F32, MemKind::Psum);
            for ki in nl::affine_range(k_tiles) {
                nl::matmul_acc(&res_psum, &lhs_tiles[ki], &rhs_tiles[ki], true);
            }
            let res_sb = nl::copy(&res_psum, Some(result.dtype()));
            nl::store(result.slice((rows.clone(), cols)), &res_sb);
        }
    }
}

/// The matmul with blocked free dimensions: M is taken in blocks of `blocks.m` tiles and N in
/// blocks of `blocks.n` tiles (`blocks.k` is ignored). For each M block all K/128 lhsT tiles of
/// its `blocks.m` tiles are loaded once; for each N block likewise the rhs tiles; then every
/// (m tile, n tile) pair of the two blocks accumulates over K in PSUM, is copied to SBUF and
/// stored. The tutorial uses [`Blocking::BLOCK_FREE_DIMENSION`].
///
/// Needs M a multiple of `128 * blocks.m` and N of `512 * blocks.n`, K of 128.
#[nki_kernel]
pub fn matmul_block_free_dimension<T: Element>(
    lhs_t: &Hbm<T>,
    rhs: &Hbm<T>,
    result: &mut Hbm<T>,
    blocks: Blocking,
) {
    let mult = [TILE_M * blocks.m, TILE_N * blocks.n, TILE_K];
    let op = "matmul_block_free_dimension";
    let (k, m, n) = dims_or_raise(op, lhs_t.shape(), rhs.shape(), result.shape(), mult);
    let k_tiles = k / TILE_K;
    let (block_m, block_n) = (TILE_M * blocks.m, TILE_N * blocks.n);
    for mb in nl::affine_range(m / block_m) {
        // lhs_tiles[bm][k]: the K column of tiles of the bm-th M tile of this block.
        let mut lhs_tiles: Vec<Vec<Tile>> = Vec::with_capacity(blocks.m);
        for bm in nl::affine_range(blocks.m) {
            let r0 = mb * block_m + bm * TILE_M;
            let mut column = Vec::with_capacity(k_tiles);
            for ki in nl::affine_range(k_tiles) {
                column.push(nl::load(
                    lhs_t.slice((ki * TILE_K..(ki + 1) * TILE_K, r0..r0 + TILE_M)),
                ));
            }
            lhs_tiles.push(column);
        }
        for nb in nl::affine_range(n / block_n) {
            let mut rhs_tiles: Vec<Vec<Tile>> = Vec::with_capacity(blocks.n);
            for bn in nl::affine_range(blocks.n) {
                let c0 = nb * block_n + bn * TILE_N;
                let mut column = Vec::with_capacity(k_tiles);
                for ki in nl::affine_range(k_tiles) {
                    column.push(nl::load(
                        rhs.slice((ki * TILE_K..(ki + 1) * TILE_K, c0..c0 + TILE_N)),
                    ));
                }
                rhs_tiles.push(column);
            }
            for bm in nl::affine_range(blocks.m) {
                let r0 = mb * block_m + bm * TILE_M;
                for bn in nl::affine_range(blocks.n) {
                    let c0 = nb * block_n + bn * TILE_N;
                    let res_psum = nl::ndarray(&[TILE_M, TILE_N], DType::F32, MemKind::Psum);
                    for ki in nl::affine_range(k_tiles) {
                        nl::matmul_acc(&res_psum, &lhs_tiles[bm][ki], &rhs_tiles[bn][ki], true);
                    }
                    let res_sb = nl::copy(&res_psum, Some(result.dtype()));
                    nl::store(result.slice((r0..r0 + TILE_M, c0..c0 + TILE_N)), &res_sb);
                }
            }
        }
    }
}

/// The fully blocked matmul: blocks of `blocks.m` tiles in M, `blocks.n` in N and `blocks.k`
/// in K. For each N block, a result block covering all of M and the block's N columns is kept in
/// SBUF (zeroed, in the result dtype as in the tutorial); a sequential loop over K blocks loads
/// the block's rhs rows (`blocks.k` DMAs of `[128, BLOCK_N]`, whole partition rows of the block)
/// and, for each M block, its lhsT rows (`blocks.k` DMAs of `[128, BLOCK_M]`); every (m tile,
/// n tile) pair accumulates its `blocks.k` matmuls in PSUM and adds the partial sum into the
/// SBUF result block. After the last K block each M tile's row of result tiles is packed into
/// one `[128, BLOCK_N]` tile and stored with one DMA. The tutorial uses
/// [`Blocking::FULLY_OPTIMIZED`].
///
/// Needs M a multiple of `128 * blocks.m`, N of `512 * blocks.n` and K of `128 * blocks.k`.
#[nki_kernel]
pub fn matmul_fully_optimized<T: Element>(
    lhs_t: &Hbm<T>,
    rhs: &Hbm<T>,
    result: &mut Hbm<T>,
    blocks: Blocking,
) {
    let mult = [TILE_M * blocks.m, TILE_N * blocks.n, TILE_K * blocks.k];
    let op = "matmul_fully_optimized";
    let (k, m, n) = dims_or_raise(op, lhs_t.shape(), rhs.shape(), result.shape(), mult);
    let (block_m, block_n, block_k) = (TILE_M * blocks.m, TILE_N * blocks.n, TILE_K * blocks.k);
    let (num_m, num_n, num_k) = (m / block_m, n / block_n, k / block_k);
    let out_dtype = result.dtype();
    for nb in nl::affine_range(num_n) {
        let cols = nb * block_n..(nb + 1) * block_n;
        // acc[(mb * blocks.m + bm) * blocks.n + bn]: the partial sums of one [128, 512] tile.
        let mut acc = Vec::with_capacity(num_m * blocks.m * blocks.n);
        for _ in 0..num_m * blocks.m * blocks.n {
            acc.push(nl::zeros(&[TILE_M, TILE_N], out_dtype, MemKind::Sbuf));
        }
        for kb in nl::sequential_range(num_k) {
            let mut rhs_tiles = Vec::with_capacity(blocks.k);
            for bk in nl::affine_range(blocks.k) {
                let k0 = kb * block_k + bk * TILE_K;
                rhs_tiles.push(nl::load(rhs.slice((k0..k0 + TILE_K, cols.clone()))));
            }
            for mb in nl::affine_range(num_m) {
                let mut lhs_tiles = Vec::with_capacity(blocks.k);
                for bk in nl::affine_range(blocks.k) {
                    let k0 = kb * block_k + bk * TILE_K;
                    lhs_tiles.push(nl::load(
                        lhs_t.slice((k0..k0 + TILE_K, mb * block_m..(mb + 1) * block_m)),
                    ));
                }
                for bn in nl::affine_range(blocks.n) {
                    let moving = bn * TILE_N..(bn + 1) * TILE_N;
                    for bm in nl::affine_range(blocks.m) {
                        let stationary = bm * TILE_M..(bm + 1) * TILE_M;
                        let res_psum = nl::ndarray(&[TILE_M, TILE_N], DType::F32, MemKind::Psum);
                        for bk in nl::affine_range(blocks.k) {
                            nl::matmul_acc(
                                &res_psum,
                                lhs_tiles[bk].slice((.., stationary.clone())),
                                rhs_tiles[bk].slice((.., moving.clone())),
                                true,
                            );
                        }
                        // One VectorE tensor_tensor adds the PSUM partial sum into the SBUF
                        // result tile (the tutorial writes it in place; here the sum replaces
                        // the tile, which frees the old one).
                        let idx = (mb * blocks.m + bm) * blocks.n + bn;
                        acc[idx] =
                            nisa::tensor_tensor(&acc[idx], &res_psum, AluOp::Add, Some(out_dtype));
                    }
                }
            }
        }
        for mt in nl::affine_range(num_m * blocks.m) {
            let packed = nl::ndarray(&[TILE_M, block_n], out_dtype, MemKind::Sbuf);
            for bn in nl::affine_range(blocks.n) {
                nl::assign(
                    packed.slice((.., bn * TILE_N..(bn + 1) * TILE_N)),
                    &acc[mt * blocks.n + bn],
                );
            }
            nl::store(
                result.slice((mt * TILE_M..(mt + 1) * TILE_M, cols.clone())),
                &packed,
            );
        }
    }
}

/// [`dims_or_raise`] for an NKI 0.7 twin, which allocates its result: the result shape is the
/// product's, `[M, N]`.
#[track_caller]
fn dims_07(
    op: &'static str,
    lhs_t: &[usize],
    rhs: &[usize],
    mult: [usize; 3],
) -> (usize, usize, usize) {
    let result = match (lhs_t, rhs) {
        ([_, m], [_, n]) => vec![*m, *n],
        _ => Vec::new(),
    };
    dims_or_raise(op, lhs_t, rhs, &result, mult)
}

/// An SBUF tensor holding `src` (a `dma_copy`).
#[track_caller]
fn copy_in(src: HbmView) -> Tensor {
    let tile = nl::ndarray(src.shape(), src.dtype(), nl::sbuf);
    nki_core::nisa::dma_copy(&tile, src, None);
    tile
}

/// Copies the fp32 PSUM accumulator `acc` to SBUF in `result`'s dtype (`nisa.tensor_copy` with
/// the engine left to the compiler) and stores it into `result` at `rows`, `cols`.
#[track_caller]
fn read_out(result: &Tensor, acc: &Tensor, rows: Range<usize>, cols: Range<usize>) {
    use nki_core::nisa;
    let res_sb = nl::ndarray(acc.shape(), result.dtype(), nl::sbuf);
    nisa::tensor_copy(&res_sb, acc, None);
    nisa::dma_copy(result.slice((rows, cols)), &res_sb, None);
}

/// The NKI 0.7 twin of [`matmul_tiled`](fn@matmul_tiled): `lhsT^T @ rhs`, returned, on one
/// core (launch it on `[1]`). The same loops, tiles and instructions written in 0.7's form:
/// SBUF and PSUM tensors allocated with `nl::ndarray`, data moved by `nisa::dma_copy`, the
/// product accumulated by `nisa::nc_matmul` into a PSUM tensor given first, the read-out a
/// `nisa::tensor_copy` whose engine the compiler picks (VectorE, where the Beta-1 `nl.copy`
/// of PSUM goes to ScalarE), the result allocated in HBM and returned. It computes the same
/// values as the Beta-1 kernel.
///
/// Needs M a multiple of 128, N of 512 and K of 128.
#[nki_kernel(nki = "0.7")]
pub fn matmul_tiled_07<T: Element>(lhs_t: &Hbm<T>, rhs: &Hbm<T>) -> Hbm<T> {
    use nki_core::nisa;
    let mult = [TILE_M, TILE_N, TILE_K];
    let (k, m, n) = dims_07("matmul_tiled_07", lhs_t.shape(), rhs.shape(), mult);
    let result = nl::ndarray(&[m, n], lhs_t.dtype(), nl::shared_hbm);
    for mi in nl::affine_range(m / TILE_M) {
        let rows = mi * TILE_M..(mi + 1) * TILE_M;
        for ni in nl::affine_range(n / TILE_N) {
            let cols = ni * TILE_N..(ni + 1) * TILE_N;
            let res_psum = nl::ndarray(&[TILE_M, TILE_N], DType::F32, nl::psum);
            for ki in nl::affine_range(k / TILE_K) {
                let kr = ki * TILE_K..(ki + 1) * TILE_K;
                let lhs_tile = copy_in(lhs_t.slice((kr.clone(), rows.clone())));
                let rhs_tile = copy_in(rhs.slice((kr, cols.clone())));
                nisa::nc_matmul(&res_psum, &lhs_tile, &rhs_tile, None);
            }
            read_out(&result, &res_psum, rows.clone(), cols);
        }
    }
    result
}

/// The NKI 0.7 twin of [`matmul_hoist_load`](fn@matmul_hoist_load): the tiled matmul with the
/// K column of lhsT tensors copied once per M tile and the rhs tensors once per (m, n),
/// written as [`matmul_tiled_07`](fn@matmul_tiled_07) is; returned, on one core.
///
/// Needs M a multiple of 128, N of 512 and K of 128.
#[nki_kernel(nki = "0.7")]
pub fn matmul_hoist_load_07<T: Element>(lhs_t: &Hbm<T>, rhs: &Hbm<T>) -> Hbm<T> {
    use nki_core::nisa;
    let mult = [TILE_M, TILE_N, TILE_K];
    let (k, m, n) = dims_07("matmul_hoist_load_07", lhs_t.shape(), rhs.shape(), mult);
    let result = nl::ndarray(&[m, n], lhs_t.dtype(), nl::shared_hbm);
    let k_tiles = k / TILE_K;
    let k_rows = |ki: usize| ki * TILE_K..(ki + 1) * TILE_K;
    for mi in nl::affine_range(m / TILE_M) {
        let rows = mi * TILE_M..(mi + 1) * TILE_M;
        let lhs_tiles: Vec<Tensor> = nl::affine_range(k_tiles)
            .map(|ki| copy_in(lhs_t.slice((k_rows(ki), rows.clone()))))
            .collect();
        for ni in nl::affine_range(n / TILE_N) {
            let cols = ni * TILE_N..(ni + 1) * TILE_N;
            let rhs_tiles: Vec<Tensor> = nl::affine_range(k_tiles)
                .map(|ki| copy_in(rhs.slice((k_rows(ki), cols.clone()))))
                .collect();
            let res_psum = nl::ndarray(&[TILE_M, TILE_N], DType::F32, nl::psum);
            for ki in nl::affine_range(k_tiles) {
                nisa::nc_matmul(&res_psum, &lhs_tiles[ki], &rhs_tiles[ki], None);
            }
            read_out(&result, &res_psum, rows.clone(), cols);
        }
    }
    result
}

/// The NKI 0.7 twin of
/// [`matmul_block_free_dimension`](fn@matmul_block_free_dimension): M in blocks of `blocks.m`
/// tiles and N in blocks of `blocks.n` tiles sharing their copies, written as
/// [`matmul_tiled_07`](fn@matmul_tiled_07) is; returned, on one core.
///
/// Needs M a multiple of `128 * blocks.m` and N of `512 * blocks.n`, K of 128.
#[nki_kernel(nki = "0.7")]
pub fn matmul_block_free_dimension_07<T: Element>(
    lhs_t: &Hbm<T>,
    rhs: &Hbm<T>,
    blocks: Blocking,
) -> Hbm<T> {
    use nki_core::nisa;
    let mult = [TILE_M * blocks.m, TILE_N * blocks.n, TILE_K];
    let op = "matmul_block_free_dimension_07";
    let (k, m, n) = dims_07(op, lhs_t.shape(), rhs.shape(), mult);
    let result = nl::ndarray(&[m, n], lhs_t.dtype(), nl::shared_hbm);
    let k_tiles = k / TILE_K;
    let k_rows = |ki: usize| ki * TILE_K..(ki + 1) * TILE_K;
    let (block_m, block_n) = (TILE_M * blocks.m, TILE_N * blocks.n);
    for mb in nl::affine_range(m / block_m) {
        // lhs_tiles[bm][k]: the K column of tensors of the bm-th M tile of this block.
        let lhs_tiles: Vec<Vec<Tensor>> = nl::affine_range(blocks.m)
            .map(|bm| {
                let r0 = mb * block_m + bm * TILE_M;
                nl::affine_range(k_tiles)
                    .map(|ki| copy_in(lhs_t.slice((k_rows(ki), r0..r0 + TILE_M))))
                    .collect()
            })
            .collect();
        for nb in nl::affine_range(n / block_n) {
            let rhs_tiles: Vec<Vec<Tensor>> = nl::affine_range(blocks.n)
                .map(|bn| {
                    let c0 = nb * block_n + bn * TILE_N;
                    nl::affine_range(k_tiles)
                        .map(|ki| copy_in(rhs.slice((k_rows(ki), c0..c0 + TILE_N))))
                        .collect()
                })
                .collect();
            for bm in nl::affine_range(blocks.m) {
                let r0 = mb * block_m + bm * TILE_M;
                for bn in nl::affine_range(blocks.n) {
                    let c0 = nb * block_n + bn * TILE_N;
                    let res_psum = nl::ndarray(&[TILE_M, TILE_N], DType::F32, nl::psum);
                    for ki in nl::affine_range(k_tiles) {
                        let (s, mv) = (&lhs_tiles[bm][ki], &rhs_tiles[bn][ki]);
                        nisa::nc_matmul(&res_psum, s, mv, None);
                    }
                    read_out(&result, &res_psum, r0..r0 + TILE_M, c0..c0 + TILE_N);
                }
            }
        }
    }
    result
}

/// The NKI 0.7 twin of [`matmul_fully_optimized`](fn@matmul_fully_optimized): blocks in M, N
/// and K, the K blocks in a sequential loop adding each PSUM partial sum into a zeroed SBUF
/// result tensor in place (`nisa.tensor_tensor(dst=acc, data1=acc, data2=res_psum,
/// op=nl.add)`, as the tutorial writes it), each M tile's row of results packed with
/// `nisa.tensor_copy` and stored with one `dma_copy`; returned, on one core.
///
/// Needs M a multiple of `128 * blocks.m`, N of `512 * blocks.n` and K of `128 * blocks.k`.
#[nki_kernel(nki = "0.7")]
pub fn matmul_fully_optimized_07<T: Element>(
    lhs_t: &Hbm<T>,
    rhs: &Hbm<T>,
    blocks: Blocking,
) -> Hbm<T> {
    use nki_core::nisa;
    let mult = [TILE_M * blocks.m, TILE_N * blocks.n, TILE_K * blocks.k];
    let op = "matmul_fully_optimized_07";
    let (k, m, n) = dims_07(op, lhs_t.shape(), rhs.shape(), mult);
    let out_dtype = lhs_t.dtype();
    let result = nl::ndarray(&[m, n], out_dtype, nl::shared_hbm);
    let (block_m, block_n, block_k) = (TILE_M * blocks.m, TILE_N * blocks.n, TILE_K * blocks.k);
    let (num_m, num_n, num_k) = (m / block_m, n / block_n, k / block_k);
    let k_rows = |kb: usize, bk: usize| {
        let k0 = kb * block_k + bk * TILE_K;
        k0..k0 + TILE_K
    };
    for nb in nl::affine_range(num_n) {
        let cols = nb * block_n..(nb + 1) * block_n;
        // acc[(mb * blocks.m + bm) * blocks.n + bn]: the partial sums of one [128, 512] tile.
        let acc: Vec<Tensor> = (0..num_m * blocks.m * blocks.n)
            .map(|_| nl::zeros(&[TILE_M, TILE_N], out_dtype, nl::sbuf))
            .collect();
        for kb in nl::sequential_range(num_k) {
            let rhs_tiles: Vec<Tensor> = nl::affine_range(blocks.k)
                .map(|bk| copy_in(rhs.slice((k_rows(kb, bk), cols.clone()))))
                .collect();
            for mb in nl::affine_range(num_m) {
                let lhs_tiles: Vec<Tensor> = nl::affine_range(blocks.k)
                    .map(|bk| {
                        copy_in(lhs_t.slice((k_rows(kb, bk), mb * block_m..(mb + 1) * block_m)))
                    })
                    .collect();
                for bn in nl::affine_range(blocks.n) {
                    let moving = bn * TILE_N..(bn + 1) * TILE_N;
                    for bm in nl::affine_range(blocks.m) {
                        let stationary = bm * TILE_M..(bm + 1) * TILE_M;
                        let res_psum = nl::ndarray(&[TILE_M, TILE_N], DType::F32, nl::psum);
                        for bk in nl::affine_range(blocks.k) {
                            nisa::nc_matmul(
                                &res_psum,
                                lhs_tiles[bk].slice((.., stationary.clone())),
                                rhs_tiles[bk].slice((.., moving.clone())),
                                None,
                            );
                        }
                        let sum = &acc[(mb * blocks.m + bm) * blocks.n + bn];
                        nisa::tensor_tensor(sum, sum, &res_psum, AluOp::Add, None);
                    }
                }
            }
        }
        for mt in nl::affine_range(num_m * blocks.m) {
            let packed = nl::ndarray(&[TILE_M, block_n], out_dtype, nl::sbuf);
            for bn in nl::affine_range(blocks.n) {
                let part = packed.slice((.., bn * TILE_N..(bn + 1) * TILE_N));
                nisa::tensor_copy(part, &acc[mt * blocks.n + bn], None);
            }
            let rows = mt * TILE_M..(mt + 1) * TILE_M;
            nisa::dma_copy(result.slice((rows, cols.clone())), &packed, None);
        }
    }
    result
}

/// The four stages of the tutorial, for drivers that run or model all of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MatmulKernel {
    /// [`matmul_tiled`](fn@matmul_tiled).
    Tiled,
    /// [`matmul_hoist_load`](fn@matmul_hoist_load).
    HoistLoad,
    /// [`matmul_block_free_dimension`](fn@matmul_block_free_dimension) with the given blocking.
    BlockFreeDimension(Blocking),
    /// [`matmul_fully_optimized`](fn@matmul_fully_optimized) with the given blocking.
    FullyOptimized(Blocking),
}

impl MatmulKernel {
    /// The four stages in the tutorial's order, with the tutorial's block sizes.
    pub const TUTORIAL: [MatmulKernel; 4] = [
        MatmulKernel::Tiled,
        MatmulKernel::HoistLoad,
        MatmulKernel::BlockFreeDimension(Blocking::BLOCK_FREE_DIMENSION),
        MatmulKernel::FullyOptimized(Blocking::FULLY_OPTIMIZED),
    ];

    /// The kernel's function name.
    pub fn name(self) -> &'static str {
        match self {
            MatmulKernel::Tiled => "matmul_tiled",
            MatmulKernel::HoistLoad => "matmul_hoist_load",
            MatmulKernel::BlockFreeDimension(_) => "matmul_block_free_dimension",
            MatmulKernel::FullyOptimized(_) => "matmul_fully_optimized",
        }
    }

    /// Runs the kernel with a configured launch. Every stage is one program instance: launch it
    /// on grid `[1]` (`Launch::new(1)`); a larger grid would have every instance store the same
    /// result, which is an output-dependency error.
    pub fn run<T: Element>(
        self,
        launch: Launch,
        lhs_t: &Hbm<T>,
        rhs: &Hbm<T>,
        result: &mut Hbm<T>,
    ) -> Result<LaunchReport, NkiError> {
        match self {
            MatmulKernel::Tiled => matmul_tiled::run(launch, lhs_t, rhs, result),
            MatmulKernel::HoistLoad => matmul_hoist_load::run(launch, lhs_t, rhs, result),
            MatmulKernel::BlockFreeDimension(b) => {
                matmul_block_free_dimension::run(launch, lhs_t, rhs, result, b)
            }
            MatmulKernel::FullyOptimized(b) => {
                matmul_fully_optimized::run(launch, lhs_t, rhs, result, b)
            }
        }
    }

    /// Computes `result = lhs_t^T @ rhs` (execute mode).
    pub fn launch<T: Element>(
        self,
        lhs_t: &Hbm<T>,
        rhs: &Hbm<T>,
        result: &mut Hbm<T>,
    ) -> Result<LaunchReport, NkiError> {
        self.run(Launch::new(1), lhs_t, rhs, result)
    }

    /// Models the kernel's timeline on `target` without computing values (the tensors may be
    /// [`Hbm::shape_only`]).
    pub fn estimate<T: Element>(
        self,
        target: Target,
        lhs_t: &Hbm<T>,
        rhs: &Hbm<T>,
        result: &mut Hbm<T>,
    ) -> Result<Profile, NkiError> {
        let launch = Launch::new(1).target(target).mode(Mode::Estimate);
        let report = self.run(launch, lhs_t, rhs, result)?;
        Ok(report.profile.expect("estimate mode records a profile"))
    }
}

impl MatmulKernel {
    /// The function name of the stage's NKI 0.7 twin.
    pub fn name_07(self) -> &'static str {
        match self {
            MatmulKernel::Tiled => "matmul_tiled_07",
            MatmulKernel::HoistLoad => "matmul_hoist_load_07",
            MatmulKernel::BlockFreeDimension(_) => "matmul_block_free_dimension_07",
            MatmulKernel::FullyOptimized(_) => "matmul_fully_optimized_07",
        }
    }

    /// Runs the stage's NKI 0.7 twin with a configured launch (on grid `[1]`, one core): the
    /// result it returns and the report.
    pub fn run_07<T: Element>(
        self,
        launch: Launch,
        lhs_t: &Hbm<T>,
        rhs: &Hbm<T>,
    ) -> Result<(Hbm<T>, LaunchReport), NkiError> {
        match self {
            MatmulKernel::Tiled => matmul_tiled_07::run(launch, lhs_t, rhs),
            MatmulKernel::HoistLoad => matmul_hoist_load_07::run(launch, lhs_t, rhs),
            MatmulKernel::BlockFreeDimension(b) => {
                matmul_block_free_dimension_07::run(launch, lhs_t, rhs, b)
            }
            MatmulKernel::FullyOptimized(b) => {
                matmul_fully_optimized_07::run(launch, lhs_t, rhs, b)
            }
        }
    }

    /// Computes `lhs_t^T @ rhs` with the stage's NKI 0.7 twin (execute mode, `kernel[1]`).
    pub fn launch_07<T: Element>(
        self,
        lhs_t: &Hbm<T>,
        rhs: &Hbm<T>,
    ) -> Result<(Hbm<T>, LaunchReport), NkiError> {
        self.run_07(Launch::new(1), lhs_t, rhs)
    }

    /// Models the stage's NKI 0.7 twin on `target` without computing values: its profile.
    pub fn estimate_07<T: Element>(
        self,
        target: Target,
        lhs_t: &Hbm<T>,
        rhs: &Hbm<T>,
    ) -> Result<Profile, NkiError> {
        let launch = Launch::new(1).target(target).mode(Mode::Estimate);
        let (_, report) = self.run_07(launch, lhs_t, rhs)?;
        Ok(report.profile.expect("estimate mode records a profile"))
    }
}

impl std::fmt::Display for MatmulKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One published measurement of a tutorial stage (see [`PUBLISHED_TRN1`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Published {
    /// The stage measured, with the tutorial's block sizes.
    pub kernel: MatmulKernel,
    /// Measured latency in ms.
    pub latency_ms: f64,
    /// Measured hardware FLOPs utilisation in percent.
    pub hfu_percent: f64,
}

/// The tutorial benchmark's problem: `lhsT[K, M]` and `rhs[K, N]` with K = 8192, M = 4096,
/// N = 8192, as `(K, M, N)`.
pub const TUTORIAL_BENCHMARK_KMN: (usize, usize, usize) = (8192, 4096, 8192);

/// The four stages' latency and HFU as measured by AWS on one trn1 NeuronCore for
/// [`TUTORIAL_BENCHMARK_KMN`] in bf16 (the NKI matmul tutorial's performance table, Neuron
/// 2.20-2.27 docs; docs/calibration.md section 1). Reference data for comparing the
/// timing model's estimates, in the tutorial's order; the model itself never reads it.
pub const PUBLISHED_TRN1: [Published; 4] = [
    Published {
        kernel: MatmulKernel::Tiled,
        latency_ms: 51.80,
        hfu_percent: 10.98,
    },
    Published {
        kernel: MatmulKernel::HoistLoad,
        latency_ms: 42.96,
        hfu_percent: 13.24,
    },
    Published {
        kernel: MatmulKernel::BlockFreeDimension(Blocking::BLOCK_FREE_DIMENSION),
        latency_ms: 22.07,
        hfu_percent: 26.51,
    },
    Published {
        kernel: MatmulKernel::FullyOptimized(Blocking::FULLY_OPTIMIZED),
        latency_ms: 6.97,
        hfu_percent: 85.24,
    },
];
