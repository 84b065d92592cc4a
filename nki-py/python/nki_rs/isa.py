"""``nki.isa`` (``nisa``) on nki-rs: the engine instructions, destination first."""

from types import SimpleNamespace as _Namespace

from . import _nki

_m = _nki.isa
globals().update({k: getattr(_m, k) for k in dir(_m) if not k.startswith("__")})

#: ``nisa.engine.vector``, ... (``unknown``: the compiler's choice).
engine = _Namespace(
    tensor=_m.tensor_engine,
    vector=_m.vector_engine,
    scalar=_m.scalar_engine,
    gpsimd=_m.gpsimd_engine,
    sync=_m.sync_engine,
    dma=_m.dma_engine,
    unknown=_m.unknown_engine,
)

del _m
