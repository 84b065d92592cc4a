"""NumPy arrays to and from nki-core's HBM tensors, as bit patterns.

bfloat16 and fp8 arrays come and go as ``ml_dtypes`` arrays when ``ml_dtypes`` is installed;
otherwise their bit patterns travel in ``uint16`` / ``uint8`` arrays (wrap an input in
``Bits(array, "bfloat16")`` to say what its bits are).
"""

import numpy as np

from . import _nki

try:
    import ml_dtypes
except ImportError:  # pragma: no cover - exercised only without ml_dtypes
    ml_dtypes = None

_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32}
# NKI dtypes NumPy has under the same name.
_NUMPY_NAMES = ("float32", "float16", "int8", "int16", "int32", "uint8", "uint16", "uint32", "bool")
# NKI dtypes ml_dtypes has under the same name (same formats).
_ML_NAMES = ("bfloat16", "float8_e4m3", "float8_e5m2", "float8_e4m3fn", "float8_e8m0fnu")


class Bits:
    """An input given as bit patterns: ``Bits(np.array([...], np.uint16), "bfloat16")``."""

    def __init__(self, array, dtype):
        self.array = np.asarray(array)
        self.dtype = str(getattr(dtype, "name", dtype))


class Shaped:
    """A shape and a dtype without values: an input of ``estimate``."""

    def __init__(self, shape, dtype="float32"):
        self.shape = tuple(int(d) for d in shape)
        self.dtype = nki_dtype(dtype)


def nki_dtype(dtype):
    """NKI's name of a NumPy / ml_dtypes / nl dtype."""
    name = getattr(dtype, "name", None)
    if not isinstance(name, str):
        try:
            name = np.dtype(dtype).name
        except TypeError:
            name = str(dtype)
    if name in _NUMPY_NAMES or name in _ML_NAMES or name == "tfloat32":
        return name
    raise TypeError(f"nki_rs has no NKI dtype for {dtype!r}")


def to_device(value, shape_only=False):
    """An ``HbmTensor`` holding ``value`` (an array, ``Bits`` or ``Shaped``); ``shape_only``
    keeps only its shape and dtype."""
    if isinstance(value, Shaped):
        return _nki.HbmTensor.shape_only(value.dtype, list(value.shape))
    if isinstance(value, Bits):
        arr, dtype = np.ascontiguousarray(value.array), value.dtype
    else:
        arr = np.ascontiguousarray(value)
        dtype = nki_dtype(arr.dtype)
    if shape_only:
        return _nki.HbmTensor.shape_only(dtype, list(arr.shape))
    bits = arr.reshape(-1).view(_UINT[arr.dtype.itemsize])
    return _nki.HbmTensor.from_bits(dtype, list(arr.shape), bits)


def from_device(t):
    """The values of ``HbmTensor`` ``t`` as a NumPy array of its dtype (bit patterns for a
    dtype NumPy does not have, without ``ml_dtypes``)."""
    bits = t.bits()
    name = t.dtype
    if name in _NUMPY_NAMES:
        out = bits.view(np.dtype(name))
    elif ml_dtypes is not None and hasattr(ml_dtypes, name):
        out = bits.view(getattr(ml_dtypes, name))
    else:
        out = bits
    return out.reshape(t.shape)


def is_array(value):
    """True for what becomes an HBM tensor argument."""
    return isinstance(value, (np.ndarray, Bits, Shaped))
