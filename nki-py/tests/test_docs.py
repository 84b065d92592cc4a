"""Kernels from NKI's 0.7 / 0.8 documentation (tutorials and the nki.isa reference pages'
examples), written as the documentation writes them, each against NumPy with the
tolerances the public tests use."""

import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

import nki_rs


# --- Getting started: tensor addition -------------------------------------------------

@nki.jit
def nki_tensor_add_kernel(a_input, b_input):
    """Element-wise addition of two [N, M] tensors, one [128, M] tile per iteration."""
    c_output = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)
    P = nl.tile_size.pmax
    for p in nl.affine_range(a_input.shape[0] // P):
        a_tile = nl.ndarray((P, a_input.shape[1]), dtype=a_input.dtype, buffer=nl.sbuf)
        b_tile = nl.ndarray((P, b_input.shape[1]), dtype=b_input.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a_tile, src=a_input[p * P:(p + 1) * P, :])
        nisa.dma_copy(dst=b_tile, src=b_input[p * P:(p + 1) * P, :])
        c_tile = nl.ndarray((P, a_input.shape[1]), dtype=a_input.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=c_tile, data1=a_tile, data2=b_tile, op=nl.add)
        nisa.dma_copy(dst=c_output[p * P:(p + 1) * P, :], src=c_tile)
    return c_output


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_tensor_add(rng, dtype):
    a = rng.random((256, 1024)).astype(dtype)
    b = rng.random((256, 1024)).astype(dtype)
    out = nki_rs.simulate(nki_tensor_add_kernel, a, b)
    np.testing.assert_allclose(out.astype(np.float32), (a.astype(np.float32) + b.astype(np.float32)),
                               atol=1e-4, rtol=1e-2)


@nki.jit
def nki_tensor_add_load_store(a_input, b_input):
    """The same with the nl.load / nl.store wrappers."""
    c_output = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)
    for p in nl.affine_range(a_input.shape[0] // 128):
        a_tile = nl.load(a_input[p * 128:(p + 1) * 128, :])
        b_tile = nl.load(b_input[p * 128:(p + 1) * 128, :])
        c_tile = nl.add(a_tile, b_tile)
        nl.store(c_output[p * 128:(p + 1) * 128, :], value=c_tile)
    return c_output


def test_tensor_add_with_load_and_store(rng):
    a = rng.random((256, 512)).astype(np.float16)
    b = rng.random((256, 512)).astype(np.float16)
    np.testing.assert_allclose(nki_rs.simulate(nki_tensor_add_load_store, a, b), a + b, atol=1e-4, rtol=1e-2)


# --- Matrix multiplication tutorial ---------------------------------------------------

@nki.jit
def nki_matmul_basic_(lhsT, rhs):
    """A 64x128x512 matrix multiplication."""
    K, M = lhsT.shape
    K_, N = rhs.shape
    assert K == K_ and K == 128 and M == 64 and N == 512
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    lhs_tile = nl.ndarray(lhsT.shape, dtype=lhsT.dtype, buffer=nl.sbuf)
    rhs_tile = nl.ndarray(rhs.shape, dtype=rhs.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=lhs_tile, src=lhsT)
    nisa.dma_copy(dst=rhs_tile, src=rhs)
    result_psum = nl.ndarray(result.shape, dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(result_psum, lhs_tile, rhs_tile)
    result_sbuf = nl.ndarray(result_psum.shape, dtype=result.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=result_sbuf, src=result_psum)
    nisa.dma_copy(dst=result, src=result_sbuf)
    return result


def test_matmul_basic(rng):
    lhs = rng.standard_normal((64, 128)).astype(ml_dtypes.bfloat16)
    rhs = rng.standard_normal((128, 512)).astype(ml_dtypes.bfloat16)
    out = nki_rs.simulate(nki_matmul_basic_, np.ascontiguousarray(lhs.T), rhs)
    ref = lhs.astype(np.float32) @ rhs.astype(np.float32)
    np.testing.assert_allclose(out.astype(np.float32), ref, atol=1e-4, rtol=1e-2)


@nki.jit
def nki_matmul_tiled_(lhsT, rhs):
    """Tiled: one PSUM accumulation group per [128, 512] output tile."""
    K, M = lhsT.shape
    K_, N = rhs.shape
    assert K == K_
    TILE_M = nl.tile_size.gemm_stationary_fmax
    TILE_K = nl.tile_size.pmax
    TILE_N = nl.tile_size.gemm_moving_fmax
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TILE_M):
        for n in nl.affine_range(N // TILE_N):
            res_psum = nl.ndarray((TILE_M, TILE_N), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TILE_K):
                lhsT_tile = nl.ndarray((TILE_K, TILE_M), dtype=lhsT.dtype, buffer=nl.sbuf)
                rhs_tile = nl.ndarray((TILE_K, TILE_N), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=lhsT_tile, src=lhsT[k * TILE_K:(k + 1) * TILE_K, m * TILE_M:(m + 1) * TILE_M])
                nisa.dma_copy(dst=rhs_tile, src=rhs[k * TILE_K:(k + 1) * TILE_K, n * TILE_N:(n + 1) * TILE_N])
                nisa.nc_matmul(dst=res_psum, stationary=lhsT_tile, moving=rhs_tile)
            res_sb = nl.ndarray(res_psum.shape, dtype=result.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res_sb, src=res_psum)
            nisa.dma_copy(dst=result[m * TILE_M:(m + 1) * TILE_M, n * TILE_N:(n + 1) * TILE_N], src=res_sb)
    return result


@nki.jit
def nki_matmul_hoist_load_(lhsT, rhs):
    """Tiled, with the loads hoisted out of the innermost loop."""
    K, M = lhsT.shape
    K_, N = rhs.shape
    TILE_M = nl.tile_size.gemm_stationary_fmax
    TILE_K = nl.tile_size.pmax
    TILE_N = nl.tile_size.gemm_moving_fmax
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TILE_M):
        lhsT_tiles = []
        for k in nl.affine_range(K // TILE_K):
            lhsT_tile = nl.ndarray(shape=(TILE_K, TILE_M), dtype=lhsT.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=lhsT_tile, src=lhsT[k * TILE_K:(k + 1) * TILE_K, m * TILE_M:(m + 1) * TILE_M])
            lhsT_tiles.append(lhsT_tile)
        for n in nl.affine_range(N // TILE_N):
            rhs_tiles = []
            for k in nl.affine_range(K // TILE_K):
                rhs_tile = nl.ndarray(shape=(TILE_K, TILE_N), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=rhs_tile, src=rhs[k * TILE_K:(k + 1) * TILE_K, n * TILE_N:(n + 1) * TILE_N])
                rhs_tiles.append(rhs_tile)
            res_psum = nl.ndarray(shape=(TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TILE_K):
                nisa.nc_matmul(dst=res_psum, stationary=lhsT_tiles[k], moving=rhs_tiles[k])
            res_sb = nl.ndarray(shape=(TILE_M, TILE_N), dtype=result.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res_sb, src=res_psum)
            nisa.dma_copy(dst=result[m * TILE_M:(m + 1) * TILE_M, n * TILE_N:(n + 1) * TILE_N], src=res_sb)
    return result


@nki.jit
def nki_matmul_block_free_dimension_(lhsT, rhs):
    """Blocks of 2 x 2 tiles over the free dimensions."""
    K, M = lhsT.shape
    K_, N = rhs.shape
    TILE_M = nl.tile_size.gemm_stationary_fmax
    TILE_K = nl.tile_size.pmax
    TILE_N = nl.tile_size.gemm_moving_fmax
    TILES_IN_BLOCK_M = 2
    TILES_IN_BLOCK_N = 2
    BLOCK_M = TILE_M * TILES_IN_BLOCK_M
    BLOCK_N = TILE_N * TILES_IN_BLOCK_N
    assert M % BLOCK_M == 0 and N % BLOCK_N == 0
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // BLOCK_M):
        lhsT_tiles = []
        for bm in nl.affine_range(TILES_IN_BLOCK_M):
            lhsT_tiles_internal = []
            for k in nl.affine_range(K // TILE_K):
                lhsT_tile = nl.ndarray(shape=(TILE_K, TILE_M), dtype=lhsT.dtype, buffer=nl.sbuf)
                col = (m * TILES_IN_BLOCK_M + bm) * TILE_M
                nisa.dma_copy(dst=lhsT_tile, src=lhsT[k * TILE_K:(k + 1) * TILE_K, col:col + TILE_M])
                lhsT_tiles_internal.append(lhsT_tile)
            lhsT_tiles.append(lhsT_tiles_internal)
        for n in nl.affine_range(N // BLOCK_N):
            rhs_tiles = []
            for bn in nl.affine_range(TILES_IN_BLOCK_N):
                rhs_tiles_internal = []
                for k in nl.affine_range(K // TILE_K):
                    rhs_tile = nl.ndarray(shape=(TILE_K, TILE_N), dtype=rhs.dtype, buffer=nl.sbuf)
                    col = (n * TILES_IN_BLOCK_N + bn) * TILE_N
                    nisa.dma_copy(dst=rhs_tile, src=rhs[k * TILE_K:(k + 1) * TILE_K, col:col + TILE_N])
                    rhs_tiles_internal.append(rhs_tile)
                rhs_tiles.append(rhs_tiles_internal)
            for bm in nl.affine_range(TILES_IN_BLOCK_M):
                for bn in nl.affine_range(TILES_IN_BLOCK_N):
                    result_tile = nl.ndarray(shape=(TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
                    for k in nl.affine_range(K // TILE_K):
                        nisa.nc_matmul(dst=result_tile, stationary=lhsT_tiles[bm][k], moving=rhs_tiles[bn][k])
                    result_tmp = nl.ndarray(shape=result_tile.shape, dtype=result.dtype, buffer=nl.sbuf)
                    nisa.tensor_copy(dst=result_tmp, src=result_tile)
                    r = (m * TILES_IN_BLOCK_M + bm) * TILE_M
                    c = (n * TILES_IN_BLOCK_N + bn) * TILE_N
                    nisa.dma_copy(dst=result[r:r + TILE_M, c:c + TILE_N], src=result_tmp)
    return result


@pytest.mark.parametrize("kernel", [nki_matmul_tiled_, nki_matmul_hoist_load_, nki_matmul_block_free_dimension_])
def test_matmul_tutorial_versions(rng, kernel):
    lhs = rng.standard_normal((256, 384)).astype(ml_dtypes.bfloat16)
    rhs = rng.standard_normal((384, 1024)).astype(ml_dtypes.bfloat16)
    out = nki_rs.simulate(kernel, np.ascontiguousarray(lhs.T), rhs)
    ref = (lhs.astype(np.float32) @ rhs.astype(np.float32)).astype(ml_dtypes.bfloat16)
    np.testing.assert_allclose(out.astype(np.float32), ref.astype(np.float32), atol=1e-4, rtol=1e-2)


def test_matmul_tutorial_versions_rank_as_the_tutorial_says():
    """The tutorial's point: hoisting the loads and blocking the free dimensions each cut
    the modelled time of the tiled kernel."""
    shapes = (nki_rs.Shaped((1024, 512), "bfloat16"), nki_rs.Shaped((1024, 2048), "bfloat16"))
    tiled, hoisted, blocked = (nki_rs.estimate(k, *shapes).latency_ns for k in
                               (nki_matmul_tiled_, nki_matmul_hoist_load_, nki_matmul_block_free_dimension_))
    assert hoisted < tiled and blocked < tiled, (tiled, hoisted, blocked)


# --- nki.isa reference examples -------------------------------------------------------

@nki.jit
def tensor_tensor_example(a, b):
    a_tile = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    b_tile = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a_tile, src=a)
    nisa.dma_copy(dst=b_tile, src=b)
    c_tile = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=c_tile, data1=a_tile, data2=b_tile, op=nl.add)
    c = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=c, src=c_tile)
    return c


def test_isa_tensor_tensor(rng):
    a = rng.random((128, 512), dtype=np.float32) * 100
    b = rng.random((128, 512), dtype=np.float32) * 100
    assert np.allclose(nki_rs.simulate(tensor_tensor_example, a, b), a + b)


@nki.jit
def tensor_scalar_example(a, c, e, f):
    """a - 1; 1 - c; e * f + 2.5 with f a per-partition column."""
    out_a = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    out_c = nl.ndarray(c.shape, dtype=c.dtype, buffer=nl.shared_hbm)
    out_e = nl.ndarray(e.shape, dtype=e.dtype, buffer=nl.shared_hbm)
    a_t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a_t, src=a)
    b_t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=b_t, data=a_t, op0=nl.subtract, operand0=1.0)
    nisa.dma_copy(dst=out_a, src=b_t)
    c_t = nl.ndarray(c.shape, dtype=c.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=c_t, src=c)
    d_t = nl.ndarray(c.shape, dtype=c.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=d_t, data=c_t, op0=nl.subtract, operand0=1.0, reverse0=True)
    nisa.dma_copy(dst=out_c, src=d_t)
    e_t = nl.ndarray(e.shape, dtype=e.dtype, buffer=nl.sbuf)
    f_t = nl.ndarray(f.shape, dtype=f.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=e_t, src=e)
    nisa.dma_copy(dst=f_t, src=f)
    g_t = nl.ndarray(e.shape, dtype=e.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=g_t, data=e_t, op0=nl.multiply, operand0=f_t, op1=nl.add, operand1=2.5)
    nisa.dma_copy(dst=out_e, src=g_t)
    return out_a, out_c, out_e


def test_isa_tensor_scalar(rng):
    a, c, e = (rng.random((64, 1024), dtype=np.float32) * 100 for _ in range(3))
    f = rng.random((64, 1), dtype=np.float32) * 100
    out_a, out_c, out_e = nki_rs.simulate(tensor_scalar_example, a, c, e, f)
    assert np.allclose(out_a, a - 1)
    assert np.allclose(out_c, 1 - c)
    assert np.allclose(out_e, e * f + 2.5)


@nki.jit
def activation_example(a, b, bias):
    """exp(a); exp(b * 2.0 + bias) with a per-partition bias."""
    out_a = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    out_b = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.shared_hbm)
    a_t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a_t, src=a)
    r = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.activation(dst=r, op=nl.exp, data=a_t)
    nisa.dma_copy(dst=out_a, src=r)
    b_t = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.sbuf)
    bias_t = nl.ndarray(bias.shape, dtype=bias.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=b_t, src=b)
    nisa.dma_copy(dst=bias_t, src=bias)
    s = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.sbuf)
    nisa.activation(dst=s, op=nl.exp, data=b_t, bias=bias_t, scale=2.0)
    nisa.dma_copy(dst=out_b, src=s)
    return out_a, out_b


def test_isa_activation(rng):
    a = rng.random((128, 1024), dtype=np.float32)
    b = rng.random((128, 512), dtype=np.float32)
    bias = rng.random((128, 1), dtype=np.float32)
    out_a, out_b = nki_rs.simulate(activation_example, a, b, bias)
    np.testing.assert_allclose(out_a, np.exp(a), rtol=1e-5)
    np.testing.assert_allclose(out_b, np.exp(b * 2.0 + bias), rtol=1e-5)


@nki.jit
def tensor_reduce_example(a):
    a_t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a_t, src=a)
    r = nl.ndarray((a.shape[0], 1), dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=r, op=nl.add, data=a_t, axis=(1,), keepdims=True)
    out = nl.ndarray((a.shape[0], 1), dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=r)
    return out


def test_isa_tensor_reduce(rng):
    a = rng.random((128, 512), dtype=np.float32) * 100
    assert np.allclose(nki_rs.simulate(tensor_reduce_example, a), a.sum(axis=1, keepdims=True))


@nki.jit
def reciprocal_example(a):
    a_t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a_t, src=a)
    r = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.reciprocal(dst=r, data=a_t)
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=r)
    return out


def test_isa_reciprocal(rng):
    a = rng.random((128, 512), dtype=np.float32) * 100 + 1
    assert np.allclose(nki_rs.simulate(reciprocal_example, a), 1 / a)


@nki.jit
def memset_example():
    a = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=a, value=0.2)
    out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=a)
    return out


def test_isa_memset():
    assert np.allclose(nki_rs.simulate(memset_example), np.full((128, 128), 0.2, np.float32))


@nki.jit
def tensor_copy_example(src):
    x = nl.ndarray(src.shape, dtype=src.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=src)
    y = nl.ndarray(src.shape, dtype=src.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=y, src=x)
    out = nl.ndarray(src.shape, dtype=src.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=y)
    return out


def test_isa_tensor_copy(rng):
    a = rng.random((8, 8), dtype=np.float32)
    np.testing.assert_array_equal(nki_rs.simulate(tensor_copy_example, a), a)


@nki.jit
def nc_matmul_example(a_T, b, c_T, d):
    """[128, 128].T @ [128, 512], and a K = 256 product accumulated in PSUM."""
    out1 = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    out2 = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    a_t = nl.ndarray(a_T.shape, dtype=a_T.dtype, buffer=nl.sbuf)
    b_t = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a_t, src=a_T)
    nisa.dma_copy(dst=b_t, src=b)
    p = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=p, stationary=a_t, moving=b_t)
    s = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=s, src=p)
    nisa.dma_copy(dst=out1, src=s)
    acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    for k in nl.affine_range(2):
        c_t = nl.ndarray((128, 128), dtype=c_T.dtype, buffer=nl.sbuf)
        d_t = nl.ndarray((128, 512), dtype=d.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=c_t, src=c_T[k * 128:(k + 1) * 128, :])
        nisa.dma_copy(dst=d_t, src=d[k * 128:(k + 1) * 128, :])
        nisa.nc_matmul(dst=acc, stationary=c_t, moving=d_t)
    s2 = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=s2, src=acc)
    nisa.dma_copy(dst=out2, src=s2)
    return out1, out2


def test_isa_nc_matmul(rng):
    a_T = rng.random((128, 128), dtype=np.float32)
    b = rng.random((128, 512), dtype=np.float32)
    c_T = rng.random((256, 128), dtype=np.float32)
    d = rng.random((256, 512), dtype=np.float32)
    out1, out2 = nki_rs.simulate(nc_matmul_example, a_T, b, c_T, d)
    np.testing.assert_allclose(out1, a_T.T @ b, rtol=1e-5)
    np.testing.assert_allclose(out2, c_T.T @ d, rtol=1e-5)


@nki.jit
def nc_transpose_example(a, b):
    """[128, 64] on TensorE (through PSUM) and [32, 2] on VectorE."""
    out_a = nl.ndarray((a.shape[1], a.shape[0]), dtype=a.dtype, buffer=nl.shared_hbm)
    out_b = nl.ndarray((b.shape[1], b.shape[0]), dtype=b.dtype, buffer=nl.shared_hbm)
    a_t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a_t, src=a)
    at_p = nl.ndarray((a.shape[1], a.shape[0]), dtype=a.dtype, buffer=nl.psum)
    nisa.nc_transpose(dst=at_p, data=a_t, engine=nisa.tensor_engine)
    at_s = nl.ndarray(at_p.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=at_s, src=at_p)
    nisa.dma_copy(dst=out_a, src=at_s)
    b_t = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=b_t, src=b)
    bt = nl.ndarray((b.shape[1], b.shape[0]), dtype=b.dtype, buffer=nl.sbuf)
    nisa.nc_transpose(dst=bt, data=b_t, engine=nisa.vector_engine)
    nisa.dma_copy(dst=out_b, src=bt)
    return out_a, out_b


def test_isa_nc_transpose(rng):
    a = rng.random((128, 64), dtype=np.float32)
    b = rng.random((32, 2), dtype=np.float32)
    out_a, out_b = nki_rs.simulate(nc_transpose_example, a, b)
    np.testing.assert_array_equal(out_a, a.T)
    np.testing.assert_array_equal(out_b, b.T)


@nki.jit
def iota_example():
    """0..511 on one partition; p * 512 + j on 128 partitions."""
    a = nl.ndarray((1, 512), dtype=nl.int32, buffer=nl.sbuf)
    nisa.iota(dst=a, pattern=[[1, 512]], offset=0)
    b = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.iota(dst=b, pattern=[[1, 512]], offset=0, channel_multiplier=512)
    out_a = nl.ndarray((1, 512), dtype=nl.int32, buffer=nl.shared_hbm)
    out_b = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out_a, src=a)
    nisa.dma_copy(dst=out_b, src=b)
    return out_a, out_b


def test_isa_iota():
    a, b = nki_rs.simulate(iota_example)
    np.testing.assert_array_equal(a, np.arange(512, dtype=np.int32)[None, :])
    np.testing.assert_array_equal(b, np.arange(128 * 512, dtype=np.float32).reshape(128, 512))


@nki.jit
def bn_stats_aggr_example(a):
    """Mean and variance of each row, from bn_stats over 512-element pieces."""
    P, F = a.shape
    n = F // nl.tile_size.bn_stats_fmax
    a_t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a_t, src=a)
    stats = nl.ndarray((P, 6 * n), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(n):
        nisa.bn_stats(dst=stats[:, 6 * i:6 * (i + 1)], data=a_t[:, i * 512:(i + 1) * 512])
    mv = nl.ndarray((P, 2), dtype=nl.float32, buffer=nl.sbuf)
    nisa.bn_aggr(dst=mv, data=stats)
    out = nl.ndarray((P, 2), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=mv)
    return out


def test_isa_bn_stats_and_bn_aggr(rng):
    a = rng.random((128, 1024), dtype=np.float32) * 100
    mv = nki_rs.simulate(bn_stats_aggr_example, a)
    np.testing.assert_allclose(mv[:, 0], a.mean(axis=1), rtol=1e-5)
    np.testing.assert_allclose(mv[:, 1], a.var(axis=1), rtol=1e-4)


@nki.jit
def scalar_tensor_tensor_example(a, b, c):
    """(a * b_col) + c."""
    a_t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    b_t = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.sbuf)
    c_t = nl.ndarray(c.shape, dtype=c.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a_t, src=a)
    nisa.dma_copy(dst=b_t, src=b)
    nisa.dma_copy(dst=c_t, src=c)
    r = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.scalar_tensor_tensor(dst=r, data=a_t, op0=nl.multiply, operand0=b_t, op1=nl.add, operand1=c_t)
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=r)
    return out


def test_isa_scalar_tensor_tensor(rng):
    a, c = rng.random((128, 512), dtype=np.float32), rng.random((128, 512), dtype=np.float32)
    b = rng.random((128, 1), dtype=np.float32)
    np.testing.assert_allclose(nki_rs.simulate(scalar_tensor_tensor_example, a, b, c), a * b + c, rtol=1e-6)


# --- Tutorials: softmax, RMSNorm, LayerNorm -------------------------------------------

@nki.jit
def softmax_kernel(logits):
    """Row softmax: max, subtract, exp, sum, reciprocal, scale."""
    P, F = logits.shape
    probs_out = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=logits)
    row_max = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    shifted = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.sbuf)
    exp_vals = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.sbuf)
    sum_exp = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    sum_exp_reciprocal = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    probs = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=row_max, op=nl.maximum, data=x, axis=1, keepdims=True)
    nisa.tensor_scalar(dst=shifted, data=x, op0=nl.subtract, operand0=row_max)
    nisa.activation(dst=exp_vals, data=shifted, op=nl.exp)
    nisa.tensor_reduce(dst=sum_exp, data=exp_vals, op=nl.add, axis=1, keepdims=True)
    nisa.reciprocal(dst=sum_exp_reciprocal, data=sum_exp)
    nisa.tensor_scalar(dst=probs, data=exp_vals, op0=nl.multiply, operand0=sum_exp_reciprocal)
    nisa.dma_copy(dst=probs_out, src=probs)
    return probs_out


def test_softmax():
    logits = np.array([[1, 2, 3, 4, 5], [5, 4, 3, 2, 1]], np.float32)
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    np.testing.assert_allclose(nki_rs.simulate(softmax_kernel, logits), e / e.sum(axis=1, keepdims=True),
                               rtol=1e-5, atol=1e-5)


@nki.jit
def nki_rmsnorm_kernel(a_tensor, g_tensor):
    """out = a * rsqrt(mean(a^2, 1)) * g, one [128, F] tile of rows per iteration."""
    out_tensor = nl.ndarray(a_tensor.shape, dtype=a_tensor.dtype, buffer=nl.shared_hbm)
    N, F = a_tensor.shape
    g_tile = nl.ndarray((128, F), dtype=g_tensor.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=g_tile, src=g_tensor.reshape((1, F)).broadcast(0, 128))
    for i in nl.affine_range(N // 128):
        a_tile = nl.ndarray((128, F), dtype=a_tensor.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a_tile, src=a_tensor[i * 128:(i + 1) * 128, :])
        sq = nl.ndarray((128, F), dtype=nl.float32, buffer=nl.sbuf)
        ss = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=sq, op=nl.square, data=a_tile, reduce_op=nl.add, reduce_res=ss)
        rms = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=rms, op=nl.rsqrt, data=ss, scale=1.0 / F)
        out_tile = nl.ndarray((128, F), dtype=a_tensor.dtype, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(dst=out_tile, data=a_tile, op0=nl.multiply, operand0=rms,
                                  op1=nl.multiply, operand1=g_tile)
        nisa.dma_copy(dst=out_tensor[i * 128:(i + 1) * 128, :], src=out_tile)
    return out_tensor


def test_rmsnorm(rng):
    a = rng.random((256, 512), dtype=np.float32)
    g = rng.random((512,), dtype=np.float32)
    ref = a / np.sqrt(np.mean(a * a, axis=1, keepdims=True)) * g
    np.testing.assert_allclose(nki_rs.simulate(nki_rmsnorm_kernel, a, g), ref, atol=1e-4, rtol=1e-2)


@nki.jit
def nki_layernorm_kernel(input_tensor, epsilon, gamma_vector, beta_vector):
    """(x - mean) / sqrt(var + eps) * gamma + beta, statistics from bn_stats / bn_aggr."""
    output_tensor = nl.ndarray(input_tensor.shape, dtype=input_tensor.dtype, buffer=nl.shared_hbm)
    N, F = input_tensor.shape
    gamma = nl.ndarray((128, F), dtype=gamma_vector.dtype, buffer=nl.sbuf)
    beta = nl.ndarray((128, F), dtype=beta_vector.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=gamma, src=gamma_vector.reshape((1, F)).broadcast(0, 128))
    nisa.dma_copy(dst=beta, src=beta_vector.reshape((1, F)).broadcast(0, 128))
    for i in nl.affine_range(N // 128):
        x = nl.ndarray((128, F), dtype=input_tensor.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x, src=input_tensor[i * 128:(i + 1) * 128, :])
        stats = nl.ndarray((128, 6), dtype=nl.float32, buffer=nl.sbuf)
        nisa.bn_stats(dst=stats, data=x)
        mv = nl.ndarray((128, 2), dtype=nl.float32, buffer=nl.sbuf)
        nisa.bn_aggr(dst=mv, data=stats)
        var_eps = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=var_eps, data=mv[:, 1:2], op0=nl.add, operand0=epsilon)
        rstd = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=rstd, op=nl.rsqrt, data=var_eps)
        y = nl.ndarray((128, F), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=y, data=x, op0=nl.subtract, operand0=mv[:, 0:1], op1=nl.multiply, operand1=rstd)
        z = nl.ndarray((128, F), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=z, data1=y, data2=gamma, op=nl.multiply)
        out = nl.ndarray((128, F), dtype=input_tensor.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=out, data1=z, data2=beta, op=nl.add)
        nisa.dma_copy(dst=output_tensor[i * 128:(i + 1) * 128, :], src=out)
    return output_tensor


def test_layernorm(rng):
    x = rng.standard_normal((256, 500)).astype(np.float32)
    gamma = rng.standard_normal((500,)).astype(np.float32)
    beta = rng.standard_normal((500,)).astype(np.float32)
    ref = (x - x.mean(axis=1, keepdims=True)) / np.sqrt(x.var(axis=1, keepdims=True) + 1e-5) * gamma + beta
    out = nki_rs.simulate(nki_layernorm_kernel, x, 1e-5, gamma, beta)
    np.testing.assert_allclose(out, ref, atol=1e-3, rtol=1e-2)
