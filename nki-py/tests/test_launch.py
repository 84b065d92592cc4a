"""Launches: ``kernel[2]`` runs the kernel on the two physical cores of a logical NeuronCore
(LNC=2), each with ``nl.program_id(0)`` its core, as NKI's simulator runs it on two threads;
the cores exchange tiles and wait for each other with ``nki.lnc``. Nothing hangs: a core
waiting for a call the other never makes is a ``DeadlockError``."""

import faulthandler
import sys

import nki
import nki.isa as nisa
import nki.language as nl
import nki.lnc
import numpy as np
import pytest

import nki_rs


@pytest.fixture(autouse=True)
def no_hang():
    """A launch that hangs ends the test process with its threads' tracebacks instead."""
    # To the process's own stderr: pytest's capture of the test's is gone when it fires.
    faulthandler.dump_traceback_later(120, exit=True, file=sys.__stderr__)
    yield
    faulthandler.cancel_dump_traceback_later()


@nki.jit
def add_rows(a, b):
    """Each core adds its share of the 128-row tiles (NKI's SPMD idiom)."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    tiles = a.shape[0] // 128
    for t in range(nl.program_id(0), tiles, nl.num_programs(0)):
        rows = nl.ds(t * 128, 128)
        x = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        y = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x, src=a[rows, :])
        nisa.dma_copy(dst=y, src=b[rows, :])
        nisa.tensor_tensor(dst=x, data1=x, data2=y, op=nl.add)
        nisa.dma_copy(dst=out[rows, :], src=x)
    return out


def test_kernel_2_runs_one_instance_per_core_and_splits_the_work(rng):
    a = rng.standard_normal((512, 256)).astype(np.float32)
    b = rng.standard_normal((512, 256)).astype(np.float32)
    np.testing.assert_array_equal(add_rows[2](a, b), a + b)
    one = nki_rs.estimate(add_rows[1], a, b)
    two = nki_rs.estimate(add_rows[2], a, b)
    # Two cores share the tiles: each core's timeline holds half of them.
    assert two.latency_ns < one.latency_ns, (one.latency_ns, two.latency_ns)
    assert add_rows[(2,)](a, b).shape == a.shape


@nki.jit
def matmul_lnc2(at, b):
    """``at.T @ b``: core ``me`` contracts its half of K, the cores swap partial products
    with ``nki.lnc.sendrecv`` and each stores its half of the rows."""
    k, m = at.shape
    n = b.shape[1]
    me = nl.program_id(0)
    out = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    a_part = nl.ndarray((128, m), dtype=nl.float32, buffer=nl.sbuf)
    b_part = nl.ndarray((128, n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=a_part, src=at[me * 128:me * 128 + 128, :])
    nisa.dma_copy(dst=b_part, src=b[me * 128:me * 128 + 128, :])
    ps = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=ps, stationary=a_part, moving=b_part)
    mine = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=mine, src=ps)
    theirs = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.sbuf)
    nki.lnc.sendrecv(src=mine, dst=theirs, send_to_rank=1 - me, recv_from_rank=1 - me)
    total = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=total, data1=mine, data2=theirs, op=nl.add)
    half = m // 2
    nisa.dma_copy(dst=out[me * half:me * half + half, :], src=total[me * half:me * half + half, :])
    return out


def test_lnc2_cores_exchange_partial_products(rng):
    at = rng.standard_normal((256, 128)).astype(np.float32)
    b = rng.standard_normal((256, 512)).astype(np.float32)
    out, profile = nki_rs.simulate(matmul_lnc2[2], at, b, profile=True)
    np.testing.assert_allclose(out, at.T.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    est = nki_rs.estimate(matmul_lnc2[2], at, b)
    assert est.latency_ns == pytest.approx(profile.latency_ns, rel=1e-9)


@nki.jit
def barrier_kernel(a, deprecated):
    me = nl.program_id(0)
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.ndarray((64, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a[me * 64:me * 64 + 64, :])
    nisa.dma_copy(dst=out[me * 64:me * 64 + 64, :], src=x)
    if deprecated:
        nisa.core_barrier(x)
    else:
        nki.lnc.core_barrier(data=x, cores=(0, 1))
    nisa.dma_copy(dst=x, src=a[me * 64:me * 64 + 64, :])
    return out


def test_core_barrier_0_8_and_the_deprecated_0_7_call(rng):
    a = rng.standard_normal((128, 64)).astype(np.float32)
    np.testing.assert_array_equal(barrier_kernel[2](a, False), a)
    # Each core's timeline waits at the barrier for the other's.
    assert nki_rs.estimate(barrier_kernel[2], a, False).instructions > 0
    with pytest.warns(DeprecationWarning, match="nki.lnc.core_barrier"):
        np.testing.assert_array_equal(barrier_kernel[2](a, True), a)


@nki.jit
def skipped_barrier(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    if nl.program_id(0) == 0:
        nki.lnc.core_barrier(data=x)
    nisa.dma_copy(dst=out, src=x)
    return out


@nki.jit
def failing_core(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    if nl.program_id(0) == 1:
        raise ValueError("core 1 gives up")
    nki.lnc.core_barrier(data=x)
    nisa.dma_copy(dst=out, src=x)
    return out


def test_a_barrier_one_core_never_reaches_is_an_error_not_a_hang(rng):
    a = rng.standard_normal((128, 64)).astype(np.float32)
    with pytest.raises(nki_rs.errors.DeadlockError) as e:
        skipped_barrier[2](a)
    assert e.value.line == skipped_barrier.fn.__code__.co_firstlineno + 6
    assert e.value.program_id == [0]
    # A core that raises while the other waits: its exception is the launch's.
    with pytest.raises(ValueError, match="core 1 gives up"):
        failing_core[2](a)


def test_a_grid_nki_has_not_is_an_invalid_grid_error(rng):
    a = rng.standard_normal((128, 64)).astype(np.float32)
    with pytest.raises(nki_rs.errors.InvalidGridError, match="kernel\\[1\\] or kernel\\[2\\]"):
        add_rows[3](a, a)
    with pytest.raises(nki_rs.errors.InvalidGridError):
        add_rows[2, 2](a, a)
