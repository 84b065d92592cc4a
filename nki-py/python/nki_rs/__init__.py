"""nki_rs: NKI Python kernels on any CPU, through nki-rs.

A kernel written for NKI 0.7 / 0.8 (``import nki; import nki.language as nl; import
nki.isa as nisa``) runs unchanged after ``nki_rs.install()``: calling it traces it, each
``nl.*`` / ``nisa.*`` call going to the nki-core instruction a Rust kernel uses. You get the
values the hardware computes (``simulate``), the Neuron compiler's checks as ``NkiError``
exceptions naming your kernel's line, and a modelled NeuronCore timeline (``estimate``,
``simulate(..., profile=True)``).
"""

import os as _os
import sys as _sys
import types as _types

from . import _nki

_nki._set_package_dir(_os.path.dirname(_os.path.abspath(__file__)) + _os.sep)

from . import errors, isa, language, lnc  # noqa: E402
from ._arrays import Bits, Shaped  # noqa: E402
from ._kernel import Kernel, estimate, jit, simulate  # noqa: E402
from .errors import NkiError  # noqa: E402

Profile = _nki.Profile

__all__ = [
    "Bits", "Kernel", "NkiError", "Profile", "Shaped", "errors", "estimate", "install",
    "isa", "jit", "language", "lnc", "simulate",
]


def install():
    """Makes ``import nki``, ``import nki.language``, ``import nki.isa`` and ``import nki.lnc``
    give nki_rs's modules, so kernel files written for NKI run unchanged. Returns the ``nki``
    module."""
    existing = _sys.modules.get("nki")
    if existing is not None and getattr(existing, "__nki_rs__", False):
        return existing
    nki = _types.ModuleType("nki", "NKI on nki-rs (installed by nki_rs.install()).")
    nki.__nki_rs__ = True
    nki.__path__ = []
    nki.jit = jit
    nki.language = language
    nki.isa = isa
    nki.lnc = lnc
    nki.simulate = simulate
    nki.estimate = estimate
    nki.errors = errors
    _sys.modules["nki"] = nki
    _sys.modules["nki.language"] = language
    _sys.modules["nki.isa"] = isa
    _sys.modules["nki.lnc"] = lnc
    return nki
