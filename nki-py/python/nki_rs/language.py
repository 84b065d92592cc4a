"""``nki.language`` (``nl``) on nki-rs: tensors, buffers, dtypes, loops and operators."""

from types import SimpleNamespace as _Namespace

from . import _nki

_m = _nki.language
globals().update({k: getattr(_m, k) for k in dir(_m) if not k.startswith("__")})

#: Tile-size limits (``nl.tile_size.pmax``, ...).
tile_size = _Namespace(**_m._tile_size)

del _m
