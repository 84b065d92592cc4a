"""Kernels in these tests are written as NKI's documentation writes them: `import nki`,
`nki.language as nl`, `nki.isa as nisa`, which `nki_rs.install()` makes resolve to nki_rs."""

import numpy as np
import pytest

import nki_rs

nki_rs.install()


@pytest.fixture
def rng():
    return np.random.default_rng(7)
