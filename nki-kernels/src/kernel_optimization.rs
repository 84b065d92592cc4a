//! The SDK's kernel-optimization tutorial (`nki/guides/tutorials/kernel-optimization.rst`,
//! NKI 0.7 surface): `result[M, N] = lhsT[K, M]^T @ rhs[K, N]`, written five times, each
//! version a step from "obviously correct" to "compute bound".
//!
//! Every kernel is written in the destination-first style of the tutorial: on-chip tensors are
//! allocated with [`nl::ndarray`] in `nl::sbuf` / `nl::psum` and every instruction writes into
//! a `dst` it is given, with NKI's keyword options last ([`nisa::dma_copy`],
//! [`nisa::nc_matmul`], [`nisa::tensor_copy`], [`nisa::tensor_tensor`], [`nisa::memset`]). As
//! in the tutorial, each kernel allocates its `result` in `nl::shared_hbm` and returns it, in
//! the tutorial's dtype: fp32 for versions 1, 3 and 5, the input dtype for versions 2 and 4.
//!
//! | version | kernel | what changes |
//! |---|---|---|
//! | 1 | [`mm_single_tile`](fn@mm_single_tile) | one `nc_matmul` on one tile (K, M <= 128, N <= 512) |
//! | 2 | [`mm_tiled`](fn@mm_tiled) | loops m, n, k over `[128, 128]` x `[128, 512]` tiles, loading both tiles in the k loop |
//! | 3 | [`mm_hoisted`](fn@mm_hoisted) | the K column of lhsT tiles is loaded once per m, of rhs tiles once per (m, n) |
//! | 4 | [`mm_blocked_free`](fn@mm_blocked_free) | blocks of 2 x 2 tiles in M and N share their loads |
//! | 5 | [`mm_fully_blocked`](fn@mm_fully_blocked) | blocks in M, N and K (16, 2, 8); partial sums accumulate in SBUF |
//!
//! What differs from the tutorial's Python:
//! - `nisa.nc_matmul(dst=psum, ...)` accumulating over k relies on `accumulate=None` (the
//!   first matmul into an unwritten PSUM tensor overwrites it, as on hardware).
//! - The tutorial's `tensor_copy` leaves the engine to the compiler; PSUM read-outs here run
//!   on ScalarE, where the compiler places them (docs/calibration.md §3b).
//! - Tiles kept in Python lists are Rust `Vec`s; a tile's SBUF space is freed when its `Vec`
//!   goes out of scope. In fp32 at the tutorial's benchmark shape, versions 4 and 5 keep more
//!   tiles allocated than SBUF holds; the hardware runs them because the compiler shortens
//!   live ranges, re-loads inputs and spills, and so does the model (the profile's `spills`;
//!   see the `kernel_optimization` example).

use crate::checks::require;
use crate::testing::{allclose, random_f32, Mismatch};
use nki_core::prelude::*;

/// Rows of the result per tile: TensorE's stationary free-dim limit (128).
pub const TILE_M: usize = nl::tile_size::GEMM_STATIONARY_FMAX;
/// Contraction rows per tile: the partition dimension (128).
pub const TILE_K: usize = nl::tile_size::PMAX;
/// Columns of the result per tile: TensorE's moving free-dim limit (512).
pub const TILE_N: usize = nl::tile_size::GEMM_MOVING_FMAX;

/// The tutorial's benchmark problem as `(K, M, N)`: lhsT [8192, 4096] x rhs [8192, 8192].
pub const BENCHMARK_KMN: (usize, usize, usize) = (8192, 4096, 8192);

/// The tutorial's free-dimension blocking of version 4: 2 tiles in M, 2 in N.
pub const BLOCKED_FREE_TILES: (usize, usize) = (2, 2);

/// Tiles per block of version 5 (the tutorial's `TILES_IN_BLOCK_M/N/K` meta-parameters).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tiles {
    /// `TILES_IN_BLOCK_M`.
    pub m: usize,
    /// `TILES_IN_BLOCK_N`.
    pub n: usize,
    /// `TILES_IN_BLOCK_K`.
    pub k: usize,
}

impl Tiles {
    /// The tutorial's defaults: 16 tiles in M, 2 in N, 8 in K.
    pub const TUTORIAL: Tiles = Tiles { m: 16, n: 2, k: 8 };
}

/// Checks `lhsT[K, M]` and `rhs[K, N]` against the multiples `mult = [m, n, k]` each
/// dimension must be; returns `(K, M, N)`.
#[track_caller]
fn dims(
    op: &'static str,
    lhs_t: &[usize],
    rhs: &[usize],
    mult: [usize; 3],
) -> (usize, usize, usize) {
    require(op, lhs_t.len() == 2 && rhs.len() == 2, || {
        format!("expected 2-D lhsT[K, M] and rhs[K, N], got lhsT{lhs_t:?} and rhs{rhs:?}")
    });
    let (k, m, n) = (lhs_t[0], lhs_t[1], rhs[1]);
    require(op, rhs[0] == k, || {
        format!("lhsT{lhs_t:?} and rhs{rhs:?} must have the same contraction dimension")
    });
    for (what, size, mult) in [("M", m, mult[0]), ("N", n, mult[1]), ("K", k, mult[2])] {
        require(op, mult > 0 && size > 0 && size % mult == 0, || {
            format!("expected {what} = {size} to be a positive multiple of {mult}")
        });
    }
    (k, m, n)
}

/// Version 1, "starting simple": one matmul of a single tile. `lhsT[K, M]` and `rhs[K, N]`
/// (K, M <= 128, N <= 512) are copied to SBUF, multiplied into an fp32 PSUM tensor, copied to
/// SBUF and out to the fp32 `result[M, N]` it returns.
#[nki_kernel]
pub fn mm_single_tile<T: Element>(lhs_t: &Hbm<T>, rhs: &Hbm<T>) -> Hbm<f32> {
    let (k, m, n) = dims("mm_single_tile", lhs_t.shape(), rhs.shape(), [1, 1, 1]);
    let op = "mm_single_tile";
    require(op, k <= TILE_K, || {
        format!("K = {k} exceeds the partition dimension {TILE_K}")
    });
    require(op, m <= TILE_M, || {
        format!("M = {m} exceeds the stationary free size {TILE_M}")
    });
    require(op, n <= TILE_N, || {
        format!("N = {n} exceeds the moving free size {TILE_N}")
    });
    let result = nl::ndarray(&[m, n], DType::F32, nl::shared_hbm);
    let lhs_tile = nl::ndarray(&[k, m], lhs_t.dtype(), nl::sbuf);
    let rhs_tile = nl::ndarray(&[k, n], rhs.dtype(), nl::sbuf);
    nisa::dma_copy(&lhs_tile, lhs_t.view(), None);
    nisa::dma_copy(&rhs_tile, rhs.view(), None);
    let result_tile = nl::ndarray(&[m, n], DType::F32, nl::psum);
    nisa::nc_matmul(&result_tile, &lhs_tile, &rhs_tile, None);
    let result_tmp = nl::ndarray(&[m, n], DType::F32, nl::sbuf);
    nisa::tensor_copy(
        &result_tmp,
        &result_tile,
        nisa::Opts::new().engine(nisa::Engine::Scalar),
    );
    nisa::dma_copy(result.view(), &result_tmp, None);
    result
}

/// Version 2, "writing the kernel": for every `[128, 512]` result tile, the k loop copies a
/// `[128, 128]` lhsT tile and a `[128, 512]` rhs tile to SBUF and accumulates their product in
/// PSUM; the fp32 sum is copied to SBUF and DMA'd (cast) into `result`, of the input dtype.
///
/// Needs M and K multiples of 128, N of 512.
#[nki_kernel]
pub fn mm_tiled<T: Element>(lhs_t: &Hbm<T>, rhs: &Hbm<T>) -> Hbm<T> {
    let mult = [TILE_M, TILE_N, TILE_K];
    let (k, m, n) = dims("mm_tiled", lhs_t.shape(), rhs.shape(), mult);
    let result = nl::ndarray(&[m, n], lhs_t.dtype(), nl::shared_hbm);
    for mi in nl::affine_range(m / TILE_M) {
        for ni in nl::affine_range(n / TILE_N) {
            let result_tile = nl::ndarray(&[TILE_M, TILE_N], DType::F32, nl::psum);
            for ki in nl::affine_range(k / TILE_K) {
                let lhs_tile = nl::ndarray(&[TILE_K, TILE_M], lhs_t.dtype(), nl::sbuf);
                let rhs_tile = nl::ndarray(&[TILE_K, TILE_N], rhs.dtype(), nl::sbuf);
                let kr = ki * TILE_K..(ki + 1) * TILE_K;
                nisa::dma_copy(
                    &lhs_tile,
                    lhs_t.slice((kr.clone(), mi * TILE_M..(mi + 1) * TILE_M)),
                    None,
                );
                nisa::dma_copy(
                    &rhs_tile,
                    rhs.slice((kr, ni * TILE_N..(ni + 1) * TILE_N)),
                    None,
                );
                nisa::nc_matmul(&result_tile, &lhs_tile, &rhs_tile, None);
            }
            let result_tmp = nl::ndarray(&[TILE_M, TILE_N], DType::F32, nl::sbuf);
            nisa::tensor_copy(
                &result_tmp,
                &result_tile,
                nisa::Opts::new().engine(nisa::Engine::Scalar),
            );
            nisa::dma_copy(
                result.slice((
                    mi * TILE_M..(mi + 1) * TILE_M,
                    ni * TILE_N..(ni + 1) * TILE_N,
                )),
                &result_tmp,
                None,
            );
        }
    }
    result
}

/// Version 3, "analyzing the kernel": the loads hoisted out of the k loop. For each M tile the
/// K / 128 lhsT tiles are copied once, before the n loop; for each (m, n) the K / 128 rhs tiles
/// once, before the k loop. The result is fp32.
///
/// Needs M and K multiples of 128, N of 512.
#[nki_kernel]
pub fn mm_hoisted<T: Element>(lhs_t: &Hbm<T>, rhs: &Hbm<T>) -> Hbm<f32> {
    let mult = [TILE_M, TILE_N, TILE_K];
    let (k, m, n) = dims("mm_hoisted", lhs_t.shape(), rhs.shape(), mult);
    let result = nl::ndarray(&[m, n], DType::F32, nl::shared_hbm);
    let k_tiles = k / TILE_K;
    for mi in nl::affine_range(m / TILE_M) {
        let mut lhs_tiles = Vec::with_capacity(k_tiles);
        for ki in nl::affine_range(k_tiles) {
            let lhs_tile = nl::ndarray(&[TILE_K, TILE_M], lhs_t.dtype(), nl::sbuf);
            nisa::dma_copy(
                &lhs_tile,
                lhs_t.slice((
                    ki * TILE_K..(ki + 1) * TILE_K,
                    mi * TILE_M..(mi + 1) * TILE_M,
                )),
                None,
            );
            lhs_tiles.push(lhs_tile);
        }
        for ni in nl::affine_range(n / TILE_N) {
            let mut rhs_tiles = Vec::with_capacity(k_tiles);
            for ki in nl::affine_range(k_tiles) {
                let rhs_tile = nl::ndarray(&[TILE_K, TILE_N], rhs.dtype(), nl::sbuf);
                nisa::dma_copy(
                    &rhs_tile,
                    rhs.slice((
                        ki * TILE_K..(ki + 1) * TILE_K,
                        ni * TILE_N..(ni + 1) * TILE_N,
                    )),
                    None,
                );
                rhs_tiles.push(rhs_tile);
            }
            let result_tile = nl::ndarray(&[TILE_M, TILE_N], DType::F32, nl::psum);
            for ki in nl::affine_range(k_tiles) {
                nisa::nc_matmul(&result_tile, &lhs_tiles[ki], &rhs_tiles[ki], None);
            }
            let result_tmp = nl::ndarray(&[TILE_M, TILE_N], DType::F32, nl::sbuf);
            nisa::tensor_copy(
                &result_tmp,
                &result_tile,
                nisa::Opts::new().engine(nisa::Engine::Scalar),
            );
            nisa::dma_copy(
                result.slice((
                    mi * TILE_M..(mi + 1) * TILE_M,
                    ni * TILE_N..(ni + 1) * TILE_N,
                )),
                &result_tmp,
                None,
            );
        }
    }
    result
}

/// Version 4, "overlapping data and compute through blocking": M in blocks of
/// [`BLOCKED_FREE_TILES`]`.0` tiles (256 rows) and N in blocks of `.1` tiles (1024 columns).
/// For each M block the K / 128 lhsT tiles of each of its M tiles are copied once; for each N
/// block likewise the rhs tiles; then every (m tile, n tile) pair accumulates over K in PSUM,
/// is copied to SBUF in the result dtype (the input dtype) and stored.
///
/// Needs M a multiple of 256, N of 1024, K of 128.
#[nki_kernel]
pub fn mm_blocked_free<T: Element>(lhs_t: &Hbm<T>, rhs: &Hbm<T>) -> Hbm<T> {
    let (tiles_m, tiles_n) = BLOCKED_FREE_TILES;
    let (block_m, block_n) = (TILE_M * tiles_m, TILE_N * tiles_n);
    let mult = [block_m, block_n, TILE_K];
    let (k, m, n) = dims("mm_blocked_free", lhs_t.shape(), rhs.shape(), mult);
    let result = nl::ndarray(&[m, n], lhs_t.dtype(), nl::shared_hbm);
    let k_tiles = k / TILE_K;
    for mb in nl::affine_range(m / block_m) {
        let mut lhs_tiles: Vec<Vec<Tensor>> = Vec::with_capacity(tiles_m);
        for bm in nl::affine_range(tiles_m) {
            let r0 = (mb * tiles_m + bm) * TILE_M;
            let mut inner = Vec::with_capacity(k_tiles);
            for ki in nl::affine_range(k_tiles) {
                let lhs_tile = nl::ndarray(&[TILE_K, TILE_M], lhs_t.dtype(), nl::sbuf);
                nisa::dma_copy(
                    &lhs_tile,
                    lhs_t.slice((ki * TILE_K..(ki + 1) * TILE_K, r0..r0 + TILE_M)),
                    None,
                );
                inner.push(lhs_tile);
            }
            lhs_tiles.push(inner);
        }
        for nb in nl::affine_range(n / block_n) {
            let mut rhs_tiles: Vec<Vec<Tensor>> = Vec::with_capacity(tiles_n);
            for bn in nl::affine_range(tiles_n) {
                let c0 = (nb * tiles_n + bn) * TILE_N;
                let mut inner = Vec::with_capacity(k_tiles);
                for ki in nl::affine_range(k_tiles) {
                    let rhs_tile = nl::ndarray(&[TILE_K, TILE_N], rhs.dtype(), nl::sbuf);
                    nisa::dma_copy(
                        &rhs_tile,
                        rhs.slice((ki * TILE_K..(ki + 1) * TILE_K, c0..c0 + TILE_N)),
                        None,
                    );
                    inner.push(rhs_tile);
                }
                rhs_tiles.push(inner);
            }
            for bm in nl::affine_range(tiles_m) {
                let r0 = (mb * tiles_m + bm) * TILE_M;
                for bn in nl::affine_range(tiles_n) {
                    let c0 = (nb * tiles_n + bn) * TILE_N;
                    let result_tile = nl::ndarray(&[TILE_M, TILE_N], DType::F32, nl::psum);
                    for ki in nl::affine_range(k_tiles) {
                        nisa::nc_matmul(&result_tile, &lhs_tiles[bm][ki], &rhs_tiles[bn][ki], None);
                    }
                    let result_tmp = nl::ndarray(&[TILE_M, TILE_N], result.dtype(), nl::sbuf);
                    nisa::tensor_copy(
                        &result_tmp,
                        &result_tile,
                        nisa::Opts::new().engine(nisa::Engine::Scalar),
                    );
                    nisa::dma_copy(
                        result.slice((r0..r0 + TILE_M, c0..c0 + TILE_N)),
                        &result_tmp,
                        None,
                    );
                }
            }
        }
    }
    result
}

/// Version 5, "optimizing DMA through blocking the contraction dimension": blocks of
/// `tiles.m` x 128 rows of M, `tiles.n` x 512 columns of N and `tiles.k` x 128 rows of K.
/// For each N block, SBUF result tiles covering all of M (in the input dtype, zeroed with
/// `memset`, as in the tutorial) collect the partial sums; a sequential loop over K blocks
/// copies `tiles.k` rhs rows of `[128, BLOCK_N]` and, per M block, `tiles.k` lhsT rows of
/// `[128, BLOCK_M]`; every (n tile, m tile) pair accumulates its `tiles.k` matmuls in PSUM
/// and a VectorE `tensor_tensor` adds them into its SBUF result tile in place. At the end each
/// M tile's `tiles.n` result tiles are packed into one fp32 `[128, BLOCK_N]` tile and stored
/// with one DMA. `result` is fp32.
///
/// Needs M a multiple of `128 * tiles.m`, N of `512 * tiles.n`, K of `128 * tiles.k`.
#[nki_kernel]
pub fn mm_fully_blocked<T: Element>(lhs_t: &Hbm<T>, rhs: &Hbm<T>, tiles: Tiles) -> Hbm<f32> {
    let (block_m, block_n, block_k) = (TILE_M * tiles.m, TILE_N * tiles.n, TILE_K * tiles.k);
    let mult = [block_m, block_n, block_k];
    let (k, m, n) = dims("mm_fully_blocked", lhs_t.shape(), rhs.shape(), mult);
    let result = nl::ndarray(&[m, n], DType::F32, nl::shared_hbm);
    let (num_m, num_n, num_k) = (m / block_m, n / block_n, k / block_k);
    for nb in nl::affine_range(num_n) {
        // result_tmps[mb][bm][bn]: the SBUF partial sums of one [128, 512] result tile.
        let mut result_tmps: Vec<Vec<Vec<Tensor>>> = Vec::with_capacity(num_m);
        for _ in 0..num_m {
            let mut block_m_tiles = Vec::with_capacity(tiles.m);
            for _ in 0..tiles.m {
                let mut block_n_tiles = Vec::with_capacity(tiles.n);
                for _ in 0..tiles.n {
                    let tile = nl::ndarray(&[TILE_M, TILE_N], lhs_t.dtype(), nl::sbuf);
                    nisa::memset(&tile, 0.0, None);
                    block_n_tiles.push(tile);
                }
                block_m_tiles.push(block_n_tiles);
            }
            result_tmps.push(block_m_tiles);
        }
        for kb in nl::sequential_range(num_k) {
            let mut rhs_tiles = Vec::with_capacity(tiles.k);
            for bk in 0..tiles.k {
                let k0 = (tiles.k * kb + bk) * TILE_K;
                let rhs_tile = nl::ndarray(&[TILE_K, block_n], rhs.dtype(), nl::sbuf);
                nisa::dma_copy(
                    &rhs_tile,
                    rhs.slice((k0..k0 + TILE_K, block_n * nb..block_n * (nb + 1))),
                    None,
                );
                rhs_tiles.push(rhs_tile);
            }
            for mb in nl::affine_range(num_m) {
                let mut lhs_tiles = Vec::with_capacity(tiles.k);
                for bk in nl::affine_range(tiles.k) {
                    let k0 = (tiles.k * kb + bk) * TILE_K;
                    let lhs_tile = nl::ndarray(&[TILE_K, block_m], lhs_t.dtype(), nl::sbuf);
                    nisa::dma_copy(
                        &lhs_tile,
                        lhs_t.slice((k0..k0 + TILE_K, block_m * mb..block_m * (mb + 1))),
                        None,
                    );
                    lhs_tiles.push(lhs_tile);
                }
                for bn in nl::affine_range(tiles.n) {
                    for bm in nl::affine_range(tiles.m) {
                        let result_tile = nl::ndarray(&[TILE_M, TILE_N], DType::F32, nl::psum);
                        for bk in nl::affine_range(tiles.k) {
                            nisa::nc_matmul(
                                &result_tile,
                                lhs_tiles[bk].slice((.., bm * TILE_M..(bm + 1) * TILE_M)),
                                rhs_tiles[bk].slice((.., bn * TILE_N..(bn + 1) * TILE_N)),
                                None,
                            );
                        }
                        let acc = &result_tmps[mb][bm][bn];
                        nisa::tensor_tensor(acc, acc, &result_tile, nisa::AluOp::Add, None);
                    }
                }
            }
        }
        for mb in nl::affine_range(num_m) {
            for bm in nl::affine_range(tiles.m) {
                let result_packed = nl::ndarray(&[TILE_M, block_n], DType::F32, nl::sbuf);
                for bn in nl::affine_range(tiles.n) {
                    nisa::tensor_copy(
                        result_packed.slice((.., bn * TILE_N..(bn + 1) * TILE_N)),
                        &result_tmps[mb][bm][bn],
                        nisa::Opts::new().engine(nisa::Engine::Vector),
                    );
                }
                let r0 = (tiles.m * mb + bm) * TILE_M;
                nisa::dma_copy(
                    result.slice((r0..r0 + TILE_M, block_n * nb..block_n * (nb + 1))),
                    &result_packed,
                    None,
                );
            }
        }
    }
    result
}

/// The five versions, for drivers that run or model all of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Version {
    /// [`mm_single_tile`](fn@mm_single_tile).
    SingleTile,
    /// [`mm_tiled`](fn@mm_tiled).
    Tiled,
    /// [`mm_hoisted`](fn@mm_hoisted).
    Hoisted,
    /// [`mm_blocked_free`](fn@mm_blocked_free).
    BlockedFree,
    /// [`mm_fully_blocked`](fn@mm_fully_blocked) with the given tiles per block.
    FullyBlocked(Tiles),
}

impl Version {
    /// The five versions in the tutorial's order, with its meta-parameters.
    pub const ALL: [Version; 5] = [
        Version::SingleTile,
        Version::Tiled,
        Version::Hoisted,
        Version::BlockedFree,
        Version::FullyBlocked(Tiles::TUTORIAL),
    ];

    /// The kernel's function name.
    pub fn name(self) -> &'static str {
        match self {
            Version::SingleTile => "mm_single_tile",
            Version::Tiled => "mm_tiled",
            Version::Hoisted => "mm_hoisted",
            Version::BlockedFree => "mm_blocked_free",
            Version::FullyBlocked(_) => "mm_fully_blocked",
        }
    }

    /// True when the version's result is fp32 whatever the input dtype (versions 1, 3 and
    /// 5); versions 2 and 4 write the input dtype (as in the tutorial).
    pub fn fp32_result(self) -> bool {
        !matches!(self, Version::Tiled | Version::BlockedFree)
    }

    /// The dtype of the version's result for inputs of `input` (see [`Version::fp32_result`]).
    pub fn result_dtype(self, input: DType) -> DType {
        if self.fp32_result() {
            DType::F32
        } else {
            input
        }
    }

    /// The smallest `(K, M, N)` the version accepts that still has more than one tile in
    /// each looped dimension (one tile for version 1, two blocks of N for version 5).
    pub fn small_kmn(self) -> (usize, usize, usize) {
        match self {
            Version::SingleTile => (128, 128, 512),
            Version::Tiled | Version::Hoisted => (256, 256, 1024),
            Version::BlockedFree => (256, 512, 2048),
            Version::FullyBlocked(t) => (2 * TILE_K * t.k, TILE_M * t.m, 2 * TILE_N * t.n),
        }
    }

    /// Runs the version with a configured launch (grid `[1]`): the result it returns (fp32
    /// for versions 1, 3 and 5, `T` for versions 2 and 4; [`Version::fp32_result`]) and the
    /// report.
    pub fn run<T: Element>(
        self,
        launch: Launch,
        lhs_t: &Hbm<T>,
        rhs: &Hbm<T>,
    ) -> Result<(VersionResult<T>, LaunchReport), NkiError> {
        use VersionResult::{Fp32, Input};
        Ok(match self {
            Version::SingleTile => {
                mm_single_tile::run(launch, lhs_t, rhs).map(|(r, l)| (Fp32(r), l))?
            }
            Version::Hoisted => mm_hoisted::run(launch, lhs_t, rhs).map(|(r, l)| (Fp32(r), l))?,
            Version::FullyBlocked(t) => {
                mm_fully_blocked::run(launch, lhs_t, rhs, t).map(|(r, l)| (Fp32(r), l))?
            }
            Version::Tiled => mm_tiled::run(launch, lhs_t, rhs).map(|(r, l)| (Input(r), l))?,
            Version::BlockedFree => {
                mm_blocked_free::run(launch, lhs_t, rhs).map(|(r, l)| (Input(r), l))?
            }
        })
    }
}

/// The `result[M, N]` a version returns: fp32 (versions 1, 3 and 5) or of the input dtype
/// `T` (versions 2 and 4).
#[derive(Debug)]
pub enum VersionResult<T: Element> {
    /// An fp32 result.
    Fp32(Hbm<f32>),
    /// A result of the input dtype.
    Input(Hbm<T>),
}

impl<T: Element> VersionResult<T> {
    /// The values as f32 (an error for a shape-only result of an estimate).
    pub fn to_f32_array(&self) -> Result<ndarray::ArrayD<f32>, NkiError> {
        match self {
            VersionResult::Fp32(r) => r.to_array(),
            VersionResult::Input(r) => Ok(r.to_array()?.mapv(|x| x.to_f32())),
        }
    }

    /// The dtype of the result.
    pub fn dtype(&self) -> DType {
        match self {
            VersionResult::Fp32(_) => DType::F32,
            VersionResult::Input(_) => T::DTYPE,
        }
    }
}

/// The tutorial test's tolerance (`np.allclose` with atol 1e-4, rtol 1e-2;
/// docs/reference/test-cases.md, matrix_multiplication).
pub const TOLERANCE: (f32, f32) = (1e-4, 1e-2);

impl Version {
    /// Runs the version with `launch` on deterministic random `lhsT[K, M]` and `rhs[K, N]`
    /// (uniform in [0, 1), rounded to `T`) given as `kmn = (K, M, N)`, and compares its result
    /// with an ndarray f32 reference of the rounded inputs at [`TOLERANCE`]. An estimate-mode
    /// launch computes no values: its comparison is `Ok(())`.
    pub fn check<T: Element>(
        self,
        launch: Launch,
        kmn: (usize, usize, usize),
    ) -> Result<(Result<(), Mismatch>, LaunchReport), NkiError> {
        let (k, m, n) = kmn;
        let lhs_t = random_f32(k, m, 11).mapv(|x| T::from_f32(x).to_f32());
        let rhs = random_f32(k, n, 12).mapv(|x| T::from_f32(x).to_f32());
        let want = lhs_t.t().dot(&rhs);
        let (lh, rh) = (
            Hbm::from_array(&lhs_t.mapv(T::from_f32))?,
            Hbm::from_array(&rhs.mapv(T::from_f32))?,
        );
        let (atol, rtol) = TOLERANCE;
        let (out, report) = self.run(launch, &lh, &rh)?;
        let cmp = if report.mode != Mode::Estimate {
            allclose(&out.to_f32_array()?, &want, atol, rtol)
        } else {
            Ok(())
        };
        Ok((cmp, report))
    }

    /// Models the version on `target` at `kmn = (K, M, N)` without values (estimate mode on
    /// shape-only tensors: nothing big is allocated).
    pub fn estimate<T: Element>(
        self,
        target: Target,
        kmn: (usize, usize, usize),
    ) -> Result<Profile, NkiError> {
        let (k, m, n) = kmn;
        let (lh, rh) = (Hbm::<T>::shape_only([k, m]), Hbm::<T>::shape_only([k, n]));
        let launch = Launch::new(1).target(target).mode(Mode::Estimate);
        let (_, report) = self.run(launch, &lh, &rh)?;
        report.profile.ok_or_else(|| {
            NkiError::new(
                ErrorKind::InvalidArgument,
                self.name(),
                "an estimate-mode launch returned no profile".to_string(),
            )
        })
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
