"""Each instruction through nki_rs, its values against NumPy."""

import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

import nki_rs


def load(t, dtype=None):
    """An SBUF copy of HBM tensor `t`."""
    x = nl.ndarray(t.shape, dtype=dtype or t.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=t)
    return x


def store(x, dtype=None):
    """A shared-HBM copy of SBUF tensor `x` (the kernel's output)."""
    out = nl.ndarray(x.shape, dtype=dtype or x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=x)
    return out


@nki.jit
def binary_kernel(a, b, op):
    x, y = load(a), load(b)
    z = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=z, data1=x, data2=y, op=op)
    return store(z)


@pytest.mark.parametrize(
    "op,ref",
    [(nl.add, np.add), (nl.subtract, np.subtract), (nl.multiply, np.multiply),
     (nl.maximum, np.maximum), (nl.minimum, np.minimum)],
)
def test_tensor_tensor(rng, op, ref):
    a = rng.standard_normal((128, 512)).astype(np.float32)
    b = rng.standard_normal((128, 512)).astype(np.float32)
    np.testing.assert_array_equal(nki_rs.simulate(binary_kernel, a, b, op), ref(a, b))


@nki.jit
def scalar_kernel(a, col):
    x, c = load(a), load(col)
    y = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    # (x - c) * 2.5, then 1 - that
    nisa.tensor_scalar(dst=y, data=x, op0=nl.subtract, operand0=c, op1=nl.multiply, operand1=2.5)
    z = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=z, data=y, op0=nl.subtract, operand0=1.0, reverse0=True)
    return store(z)


def test_tensor_scalar_with_a_column_and_reversed_operands(rng):
    a = rng.random((64, 1024), dtype=np.float32) * 100
    col = rng.random((64, 1), dtype=np.float32)
    out = nki_rs.simulate(scalar_kernel, a, col)
    np.testing.assert_allclose(out, 1 - (a - col) * np.float32(2.5), rtol=1e-6)


@nki.jit
def activation_kernel(a, bias):
    x, b = load(a), load(bias)
    y = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=y, op=nl.exp, data=x, bias=b, scale=0.5)
    return store(y)


def test_activation_scale_and_bias(rng):
    a = rng.random((128, 512), dtype=np.float32)
    bias = rng.random((128, 1), dtype=np.float32)
    out = nki_rs.simulate(activation_kernel, a, bias)
    np.testing.assert_allclose(out, np.exp(a * 0.5 + bias), rtol=1e-5)


@nki.jit
def matmul_kernel(lhsT, rhs):
    K, M = lhsT.shape
    _, N = rhs.shape
    result = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.psum)
    for k in nl.affine_range(K // 128):
        s = nl.ndarray((128, M), dtype=lhsT.dtype, buffer=nl.sbuf)
        m = nl.ndarray((128, N), dtype=rhs.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=lhsT[k * 128:(k + 1) * 128, :])
        nisa.dma_copy(dst=m, src=rhs[k * 128:(k + 1) * 128, :])
        nisa.nc_matmul(dst=acc, stationary=s, moving=m)
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=out, src=acc)
    nisa.dma_copy(dst=result, src=out)
    return result


def test_nc_matmul_accumulates_over_k_in_psum(rng):
    lhsT = rng.standard_normal((256, 128)).astype(np.float32)
    rhs = rng.standard_normal((256, 512)).astype(np.float32)
    np.testing.assert_allclose(nki_rs.simulate(matmul_kernel, lhsT, rhs), lhsT.T @ rhs, rtol=1e-4, atol=1e-4)


@nki.jit
def copy_cast_kernel(a):
    x = load(a)
    y = nl.ndarray(a.shape, dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.tensor_copy(dst=y, src=x, engine=nisa.engine.scalar)
    return store(y)


def test_tensor_copy_casts_to_bfloat16_with_rounding_to_nearest_even(rng):
    a = rng.standard_normal((8, 8)).astype(np.float32)
    out = nki_rs.simulate(copy_cast_kernel, a)
    assert out.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(out, a.astype(ml_dtypes.bfloat16))


@nki.jit
def memset_iota_kernel(n):
    m = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=m, value=0.2)
    i = nl.ndarray((128, n), dtype=nl.int32, buffer=nl.sbuf)
    nisa.iota(dst=i, pattern=[[1, n]], offset=3, channel_multiplier=n)
    return store(m), store(i)


def test_memset_and_iota():
    m, i = nki_rs.simulate(memset_iota_kernel, 16)
    np.testing.assert_array_equal(m, np.full((128, 128), 0.2, np.float32))
    assert i.dtype == np.int32
    np.testing.assert_array_equal(i, 3 + np.arange(128 * 16, dtype=np.int32).reshape(128, 16))


@nki.jit
def reduce_transpose_kernel(a):
    x = load(a)
    s = nl.ndarray((a.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=s, op=nl.add, data=x, axis=1)
    t = nl.ndarray((a.shape[1], a.shape[0]), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_transpose(dst=t, data=x)
    t_sb = nl.ndarray(t.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=t_sb, src=t)
    return store(s), store(t_sb)


def test_tensor_reduce_and_nc_transpose(rng):
    a = rng.random((128, 64), dtype=np.float32)
    s, t = nki_rs.simulate(reduce_transpose_kernel, a)
    np.testing.assert_allclose(s[:, 0], a.sum(axis=1), rtol=1e-5)
    np.testing.assert_array_equal(t, a.T)


@nki.jit
def slicing_kernel(a):
    out = nl.ndarray((a.shape[0], 4), dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.ndarray((a.shape[0], 4), dtype=a.dtype, buffer=nl.sbuf)
    # every other column of columns 2..9, and then the last column through nl.ds
    nisa.dma_copy(dst=x[:, 0:3], src=a[:, 2:8:2])
    nisa.dma_copy(dst=x[..., nl.ds(3, 1)], src=a[:, -1:])
    nisa.dma_copy(dst=out, src=x)
    return out


def test_slices_steps_negative_indices_and_ds(rng):
    a = rng.random((32, 10), dtype=np.float32)
    out = nki_rs.simulate(slicing_kernel, a)
    np.testing.assert_array_equal(out, np.concatenate([a[:, 2:8:2], a[:, -1:]], axis=1))


@nki.jit
def loops_kernel(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    acc = nl.ndarray((a.shape[0], a.shape[1] // 4), dtype=a.dtype, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    w = a.shape[1] // 4
    for j in nl.sequential_range(4):
        t = nl.ndarray(acc.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[:, j * w:(j + 1) * w])
        nisa.tensor_tensor(dst=acc, data1=acc, data2=t, op=nl.add)
    for j in nl.static_range(4):
        nisa.dma_copy(dst=out[:, j * w:(j + 1) * w], src=acc)
    return out


def test_sequential_and_static_ranges(rng):
    a = rng.random((16, 64), dtype=np.float32)
    w = 16
    acc = np.zeros((16, w), np.float32)
    for j in range(4):
        acc = acc + a[:, j * w:(j + 1) * w]
    np.testing.assert_allclose(nki_rs.simulate(loops_kernel, a), np.tile(acc, 4), rtol=1e-6)


def test_nl_operators_return_new_tiles(rng):
    @nki.jit
    def k(a, b):
        x, y = load(a), load(b)
        return store(nl.exp(nl.multiply(nl.add(x, y), 0.5)))

    a, b = rng.random((4, 8), dtype=np.float32), rng.random((4, 8), dtype=np.float32)
    np.testing.assert_allclose(nki_rs.simulate(k, a, b), np.exp((a + b) * np.float32(0.5)), rtol=1e-6)


def test_bit_pattern_inputs_and_outputs_without_ml_dtypes(monkeypatch, rng):
    from nki_rs import _arrays

    a = rng.standard_normal((16, 16)).astype(ml_dtypes.bfloat16)
    bits = a.view(np.uint16)
    monkeypatch.setattr(_arrays, "ml_dtypes", None)
    out = nki_rs.simulate(binary_kernel, nki_rs.Bits(bits, "bfloat16"), nki_rs.Bits(bits, "bfloat16"), nl.add)
    assert out.dtype == np.uint16
    np.testing.assert_array_equal(out.view(ml_dtypes.bfloat16), (a.astype(np.float32) * 2).astype(ml_dtypes.bfloat16))


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3, ml_dtypes.float8_e5m2, np.int32, np.uint8])
def test_dtypes_round_trip_exactly(rng, dtype):
    @nki.jit
    def copy(a):
        return store(load(a))

    a = (rng.standard_normal((4, 32)) * 8).astype(dtype)
    out = nki_rs.simulate(copy, a)
    assert out.dtype == a.dtype
    np.testing.assert_array_equal(out.view(np.uint8), a.view(np.uint8))


def test_a_jit_kernel_called_outside_a_kernel_simulates_it(rng):
    a = rng.random((128, 64), dtype=np.float32)
    np.testing.assert_array_equal(binary_kernel(a, a, nl.add), a + a)


@nki.jit
def scan_kernel(a, b):
    x, y = load(a), load(b)
    z = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    # r[i] = r[i-1] * x[i] + y[i], r[-1] = 0: a running sum of y when x is all ones
    nisa.tensor_tensor_scan(dst=z, data0=x, data1=y, initial=0.0, op0=nl.multiply, op1=nl.add)
    return store(z)


def test_tensor_tensor_scan_is_a_running_sum(rng):
    ones = np.ones((128, 256), np.float32)
    y = rng.integers(-8, 8, (128, 256)).astype(np.float32)
    np.testing.assert_array_equal(nki_rs.simulate(scan_kernel, ones, y), np.cumsum(y, axis=1))


@nki.jit
def activation_reduce_kernel(a):
    x = load(a)
    sq = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    total = nl.ndarray((a.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation_reduce(dst=sq, op=nl.square, data=x, reduce_op=nl.add, reduce_res=total)
    return store(sq), store(total)


def test_activation_reduce_sums_each_partition(rng):
    a = rng.integers(-4, 5, (64, 128)).astype(np.float32)
    sq, total = nki_rs.simulate(activation_reduce_kernel, a)
    np.testing.assert_array_equal(sq, a * a)
    np.testing.assert_array_equal(total, (a * a).sum(axis=1, keepdims=True))


@nki.jit
def top8_kernel(a):
    x = load(a)
    top = nl.ndarray((a.shape[0], 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.max8(dst=top, src=x)
    idx = nl.ndarray((a.shape[0], 8), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.nc_find_index8(dst=idx, data=x, vals=top)
    return store(top), store(idx)


def test_max8_and_nc_find_index8_give_the_top_eight_and_where_they_are(rng):
    a = np.stack([rng.permutation(64) for _ in range(16)]).astype(np.float32)
    top, idx = nki_rs.simulate(top8_kernel, a)
    want = -np.sort(-a, axis=1)[:, :8]
    np.testing.assert_array_equal(top, want)
    np.testing.assert_array_equal(np.take_along_axis(a, idx.astype(np.int64), axis=1), want)


@nki.jit
def broadcast_kernel(row):
    r = load(row)
    b = nl.broadcast_to(r, shape=(128, row.shape[1]))
    return store(b)


def test_broadcast_to_replicates_a_row_across_partitions(rng):
    row = rng.standard_normal((1, 300)).astype(np.float32)
    np.testing.assert_array_equal(nki_rs.simulate(broadcast_kernel, row), np.repeat(row, 128, 0))


@nki.jit
def reductions_kernel(a):
    x = load(a)
    s = nl.sum(x, axis=1, keepdims=True)
    m = nl.max(x, axis=[1])
    avg = nl.mean(x, axis=-1, keepdims=True)
    return store(s), store(m), store(avg)


def test_nl_reductions_along_the_free_axis(rng):
    a = rng.integers(-50, 50, (128, 64)).astype(np.float32)
    s, m, avg = nki_rs.simulate(reductions_kernel, a)
    np.testing.assert_array_equal(s, a.sum(axis=1, keepdims=True))
    np.testing.assert_array_equal(m.reshape(-1), a.max(axis=1))
    np.testing.assert_allclose(avg, a.mean(axis=1, keepdims=True), rtol=1e-6)


@nki.jit
def nl_matmul_kernel(a, b):
    x, y = load(a), load(b)
    p = nl.matmul(x, y, transpose_x=True)
    t = nl.transpose(x)
    ps = nl.ndarray(p.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=ps, src=p)
    ts = nl.ndarray(t.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=ts, src=t)
    return store(ps), store(ts)


def test_nl_matmul_and_transpose(rng):
    a = rng.integers(-4, 5, (128, 64)).astype(np.float32)
    b = rng.integers(-4, 5, (128, 256)).astype(np.float32)
    p, t = nki_rs.simulate(nl_matmul_kernel, a, b)
    np.testing.assert_array_equal(p, a.T @ b)
    np.testing.assert_array_equal(t, a.T)
