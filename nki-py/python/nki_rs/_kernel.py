"""Kernels: ``nki.jit``, ``simulate`` and ``estimate``."""

import functools
import inspect

from . import _nki
from ._arrays import from_device, is_array, to_device


class Kernel:
    """A kernel function (``@nki.jit``). ``kernel[2]`` launches it on a logical NeuronCore of
    two physical cores (LNC=2: each core runs the kernel, ``nl.program_id(0)`` its index);
    calling it outside a kernel simulates it on NumPy arrays and returns its outputs."""

    def __init__(self, fn, grid=1, options=None):
        self.fn = fn
        self.grid = grid
        self.options = dict(options or {})
        functools.update_wrapper(self, fn)

    def __getitem__(self, grid):
        if isinstance(grid, tuple):
            if len(grid) != 1:
                raise _grid_error(grid)
            grid = grid[0]
        return Kernel(self.fn, grid, self.options)

    def __call__(self, *args, **kwargs):
        if _nki.in_kernel():
            return self.fn(*args, **kwargs)
        return simulate(self, *args, **kwargs)

    def __repr__(self):
        return f"nki_rs.Kernel({self.fn.__qualname__}, grid={self.grid})"


def _grid_error(grid):
    from .errors import InvalidGridError

    return InvalidGridError(f"kernel{list(grid)}: an NKI 0.7/0.8 grid is one number", kind="InvalidGrid")


def jit(fn=None, **options):
    """``@nki.jit`` / ``@nki.jit(...)``: marks a kernel function."""
    if fn is None:
        return lambda f: Kernel(f, options=options)
    return Kernel(fn, options=options)


def _kernel_of(kernel):
    if isinstance(kernel, Kernel):
        return kernel
    if callable(kernel):
        return Kernel(kernel)
    raise TypeError(f"{kernel!r} is not a kernel function")


def _launch(kernel, args, kwargs, mode, target):
    k = _kernel_of(kernel)
    try:
        bound = inspect.signature(k.fn).bind(*args, **kwargs)
    except TypeError as e:
        raise TypeError(f"{k.fn.__qualname__}: {e}") from None
    shape_only = mode == "estimate"
    names = {}
    for name, value in bound.arguments.items():
        if is_array(value):
            t = to_device(value, shape_only)
            t.set_name(name)
            names[name] = t
        else:
            names[name] = value
    bound.arguments.update(names)
    outputs, profile = _nki.launch(
        k.fn, list(bound.args), dict(bound.kwargs), k.grid, mode, target
    )
    return outputs, profile


def _values(outputs, returned_one):
    arrays = [from_device(t) for t in outputs]
    if returned_one:
        return arrays[0] if arrays else None
    return tuple(arrays)


def simulate(kernel, *args, profile=False, target="trn2", **kwargs):
    """Runs ``kernel`` on NumPy inputs and returns its outputs as NumPy arrays (one array
    for a kernel returning one tensor, a tuple for a tuple). With ``profile=True``, returns
    ``(outputs, profile)``: the modelled timeline on ``target`` (``trn1``, ``trn2``,
    ``trn3``)."""
    mode = "simulate" if profile else "execute"
    outputs, prof = _launch(kernel, args, kwargs, mode, target)
    values = _values(outputs, len(outputs) == 1)
    return (values, prof) if profile else values


def estimate(kernel, *args, target="trn2", **kwargs):
    """The modelled profile of ``kernel`` on ``target`` without computing values: inputs are
    NumPy arrays (only their shapes and dtypes count) or ``Shaped(shape, dtype)``."""
    _, prof = _launch(kernel, args, kwargs, "estimate", target)
    return prof
