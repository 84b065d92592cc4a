"""``nki.isa`` (``nisa``) on nki-rs: the engine instructions, destination first."""

import warnings as _warnings
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

#: ``nisa.dma_engine.dma`` (the shared DMA engines) and ``nisa.dma_engine.gpsimd_dma``
#: (GpSimdE's integrated DMA), the engines of ``sendrecv``.
dma_engine = _Namespace(dma=_m._dma_engine_dma, gpsimd_dma=_m._dma_engine_gpsimd_dma)


def _deprecated(name, call):
    def wrapper(*args, **kwargs):
        _warnings.warn(f"nisa.{name} is deprecated in NKI 0.8: use nki.lnc.{name}",
                       DeprecationWarning, stacklevel=2)
        return call(*args, **kwargs)

    wrapper.__name__ = name
    wrapper.__doc__ = call.__doc__
    return wrapper


#: 0.7's LNC calls, deprecated in NKI 0.8 for ``nki.lnc``'s (a ``DeprecationWarning``).
core_barrier = _deprecated("core_barrier", _m.core_barrier)
sendrecv = _deprecated("sendrecv", _m.sendrecv)

del _m
