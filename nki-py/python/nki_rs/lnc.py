"""``nki.lnc`` on nki-rs: the two physical cores of a logical NeuronCore (``kernel[2]``)
exchanging tiles (``sendrecv``, ``sendrecv_compute``) and waiting for each other
(``core_barrier``)."""

from . import _nki

_m = _nki.lnc
globals().update({k: getattr(_m, k) for k in dir(_m) if not k.startswith("__")})

del _m
