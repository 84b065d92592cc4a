"""The round trip with the emitter: every module `cargo run --release --example emit -- all`
writes runs through nki_rs (launched as the Rust kernel was: kernel[2] for the LNC=2 ones) to
the Rust kernel's outputs bit for bit, and nki_rs models it within 1 % of the Rust kernel's
latency (both on trn2)."""

import importlib.util
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import nki_rs

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


@pytest.fixture(scope="module")
def emitted(tmp_path_factory):
    """The folder the emit example wrote every example it emits into."""
    if shutil.which("cargo") is None:
        pytest.skip("cargo is needed to emit the examples")
    out = tmp_path_factory.mktemp("emitted")
    run = subprocess.run(
        ["cargo", "run", "--release", "--quiet", "--example", "emit", "--", "all", str(out)],
        cwd=ROOT, capture_output=True, text=True, env=dict(os.environ, CARGO_INCREMENTAL="1"))
    # Exit status 1 only says some example was refused; each refusal is one printed line.
    assert run.returncode in (0, 1), run.stderr
    return out, run.stdout


def load_module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def drivers(folder):
    return sorted(f[:-len("_run.py")] for f in os.listdir(folder) if f.endswith("_run.py"))


def test_the_tutorial_kernels_are_emitted(emitted):
    folder, printed = emitted
    names = drivers(folder)
    for want in ["tensor_add", "tensor_add_lnc2", "lnc2", "mm_single_tile", "mm_tiled", "mm_hoisted", "mm_blocked_free",
                 "mm_fully_blocked", "cumsum", "rmsnorm_quant", "layernorm_tkg", "rope",
                 "qkv_tkg", "attention_tkg", "mlp_tkg", "router_topk"]:
        assert want in names, printed


def test_every_emitted_module_runs_through_nki_rs_to_the_same_values_and_time(emitted):
    folder, _ = emitted
    nki_rs.install()
    for name in drivers(folder):
        driver = load_module(os.path.join(folder, name + "_run.py"), name + "_run")
        kernel = getattr(load_module(os.path.join(folder, name + ".py"), name), name)
        # The launch the Rust kernel ran: kernel[2] on both cores of a logical NeuronCore.
        if driver.GRID != 1:
            kernel = kernel[driver.GRID]
        inputs = [driver.load("in", n, d) for n, d in driver.INPUTS]
        outs, profile = nki_rs.simulate(kernel, *inputs, profile=True)
        if not isinstance(outs, (tuple, list)):
            outs = (outs,)
        assert len(outs) == len(driver.OUTPUTS), name
        for got, (n, d) in zip(outs, driver.OUTPUTS):
            want = driver.load("out", n, d).astype(np.float64)
            got = np.asarray(got).astype(np.float64)
            assert got.shape == want.shape, (name, n)
            assert np.array_equal(got, want, equal_nan=True), (name, n)
        with open(os.path.join(folder, name + "_data", "nki_rs.json")) as f:
            rust = json.load(f)
        assert rust["target"] == "trn2", name
        est = nki_rs.estimate(kernel, *inputs, target="trn2")
        for modelled in (profile.latency_ns, est.latency_ns):
            assert abs(modelled - rust["latency_ns"]) <= 0.01 * rust["latency_ns"], (
                name, modelled, rust["latency_ns"])
