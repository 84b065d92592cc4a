"""The timing model from Python: estimate, simulate(profile=True), and the profile's
outputs."""

import json

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

import nki_rs


@nki.jit
def matmul_tiled(lhsT, rhs):
    K, M = lhsT.shape
    _, N = rhs.shape
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // 128):
        for n in nl.affine_range(N // 512):
            res_psum = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // 128):
                lhsT_tile = nl.ndarray((128, 128), dtype=lhsT.dtype, buffer=nl.sbuf)
                rhs_tile = nl.ndarray((128, 512), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=lhsT_tile, src=lhsT[k * 128:(k + 1) * 128, m * 128:(m + 1) * 128])
                nisa.dma_copy(dst=rhs_tile, src=rhs[k * 128:(k + 1) * 128, n * 512:(n + 1) * 512])
                nisa.nc_matmul(dst=res_psum, stationary=lhsT_tile, moving=rhs_tile)
            res_sb = nl.ndarray(res_psum.shape, dtype=result.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res_sb, src=res_psum)
            nisa.dma_copy(dst=result[m * 128:(m + 1) * 128, n * 512:(n + 1) * 512], src=res_sb)
    return result


def test_estimate_needs_only_shapes_and_matches_simulate():
    lhsT = np.random.default_rng(1).random((256, 256), dtype=np.float32)
    rhs = np.random.default_rng(2).random((256, 1024), dtype=np.float32)
    est = nki_rs.estimate(matmul_tiled, nki_rs.Shaped(lhsT.shape, "float32"), nki_rs.Shaped(rhs.shape, np.float32))
    out, sim = nki_rs.simulate(matmul_tiled, lhsT, rhs, profile=True)
    np.testing.assert_allclose(out, lhsT.T @ rhs, rtol=1e-4)
    assert est.latency_ns > 0
    # The same records, so the same modelled time, with or without values.
    assert sim.latency_ns == est.latency_ns
    assert sim.instructions == est.instructions == 2 * 2 * (2 * 3 + 2)
    assert est.target == "trn2"
    assert sum(p for _, _, p in est.bounds) == np.float64(sum(p for _, _, p in est.bounds))
    assert est.bottleneck == est.bounds[0][0]


def test_the_profile_names_the_kernel_lines_and_targets_differ():
    shapes = (nki_rs.Shaped((512, 512), "bfloat16"), nki_rs.Shaped((512, 2048), "bfloat16"))
    trn1 = nki_rs.estimate(matmul_tiled, *shapes, target="trn1")
    trn2 = nki_rs.estimate(matmul_tiled, *shapes, target="trn2")
    assert trn1.target == "trn1" and trn1.latency_ns != trn2.latency_ns
    assert all(loc.startswith(__file__ + ":") for loc, *_ in trn2.top_lines)
    assert "nisa.nc_matmul" in {api for _, api, *_ in trn2.top_lines}
    assert "latency" in str(trn2)


def test_json_html_and_chrome_trace(tmp_path):
    p = nki_rs.estimate(matmul_tiled, nki_rs.Shaped((128, 128), "bfloat16"), nki_rs.Shaped((128, 512), "bfloat16"))
    summary = json.loads(p.to_json())
    assert summary["latency_ns"] == p.latency_ns
    p.write_html(tmp_path / "p.html")
    assert "<html" in (tmp_path / "p.html").read_text().lower()
    p.write_chrome_trace(tmp_path / "t.json")
    trace = json.loads((tmp_path / "t.json").read_text())
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    assert any("nc_matmul" in json.dumps(e) for e in events)


def test_a_profile_without_values_is_an_error_only_when_values_are_read():
    @nki.jit
    def copy(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        x = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x, src=a)
        nisa.dma_copy(dst=out, src=x)
        return out

    p = nki_rs.estimate(copy, np.zeros((128, 64), np.float32))
    assert p.instructions == 2


@nki.jit
def add_loop(a, b):
    c = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[0] // 128):
        x = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        y = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x, src=a[i * 128:(i + 1) * 128, :])
        nisa.dma_copy(dst=y, src=b[i * 128:(i + 1) * 128, :])
        z = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=z, data1=x, data2=y, op=nl.add)
        nisa.dma_copy(dst=c[i * 128:(i + 1) * 128, :], src=z)
    return c


def test_a_loop_body_holds_one_iterations_tiles_as_a_rust_kernel_does():
    """x, y, z of [128, 512] fp32 are 3 x 2048 bytes per partition: the previous
    iteration's tiles, still bound to the Python names, do not count."""
    shape = nki_rs.Shaped((512, 512), "float32")
    p = nki_rs.estimate(add_loop, shape, shape)
    assert p.sbuf_peak_bytes == 3 * 512 * 4
    assert p.psum_peak_bytes == 0


@nki.jit
def copy_small_tiles(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[0] // 128):
        t = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[i * 128:(i + 1) * 128, :])  # 1 KiB rows: small descriptors
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=t)
    return out


def test_the_performance_bounds_table_and_its_findings_name_the_python_line():
    prof = nki_rs.estimate(copy_small_tiles, nki_rs.Shaped((512, 512), "bfloat16"))
    b = prof.performance_bounds
    names = [name for name, _, _ in b["table"]]
    assert names == ["memory_bound", "memory_bound_ideal", "compute_bound",
                     "compute_bound_ideal", "perfect_pipeline"]
    # Each input byte read once and each output byte written once: 2 x 512 KiB.
    assert b["bytes_ideal"] == 2 * 512 * 512 * 2
    assert b["bytes_moved"] >= b["bytes_ideal"]
    assert b["memory_bound_ns"] >= b["memory_bound_ideal_ns"] > 0
    assert b["compute_bound_ns"] == 0
    assert b["perfect_pipeline_ns"] == b["memory_bound_ns"]
    small = [f for f in b["findings"] if "4 KiB" in f["kind"]]
    assert small, b["findings"]
    line = copy_small_tiles.fn.__code__.co_firstlineno + 5
    assert any(f["location"].startswith(f"{__file__}:{line}:") for f in small), small
