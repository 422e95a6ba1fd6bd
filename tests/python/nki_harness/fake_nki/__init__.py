"""A NumPy implementation of the `nki` package (NKI 2.x), written from the
public API documentation: it runs any NKI kernel (ours or hand-written) op by
op on the CPU and checks the hardware rules each op documents.

`install()` registers it as `nki`, `nki.language`, `nki.isa` (with
`nki.isa.constants`), `nki.collectives` and `nki.typing` in `sys.modules`; `nki.dtype` is the
class of the dtypes (`nl.float32`, ...); `launch()` runs a `@nki.jit` kernel over
ranks and LNC programs; `simulate(kernel)(*arrays)` runs one rank on NumPy
arrays as `nki.simulate` does. Semantic choices the docs leave open are listed
in `../SEMANTICS.md`.
"""

import importlib.util
import os
import sys
import types
from dataclasses import dataclass  # noqa: F401  (re-exported, as nki does)
from enum import Enum  # noqa: F401

import numpy as np

from . import collectives, isa, language, typing
from .dtypes import DType as dtype
from .runtime import _local, current, launch

__all__ = ["jit", "simulate", "launch", "install", "Kernel", "dtype", "language", "isa", "collectives", "typing"]

# NEURON_PLATFORM_TARGET_OVERRIDE values (as `nki.jit` documents them) per generation.
TARGETS = {"trn1": "trn1", "inf2": "trn1", "gen2": "trn1", "trn2": "trn2", "gen3": "trn2", "trn3": "trn3",
           "gen4": "trn3"}


class Kernel:
    """A `@nki.jit` kernel. Inside a running kernel, calling it (or `kernel[n]`) is
    an ordinary inline call in the caller's program; `launch()` starts it, and so
    does calling it with NumPy arrays outside a kernel (see `simulate`)."""

    def __init__(self, fn, grid=None):
        self.fn = fn
        self.grid = grid
        self.__name__ = getattr(fn, "__name__", "kernel")
        self.__doc__ = fn.__doc__

    def __getitem__(self, grid):
        if isinstance(grid, tuple) and len(grid) == 1:
            grid = grid[0]
        if isinstance(grid, bool) or not isinstance(grid, int) or grid < 1:
            raise TypeError(f"a kernel's launch grid is one positive int (kernel[2]), got {grid!r}")
        return Kernel(self.fn, grid)

    def __call__(self, *args, **kwargs):
        if getattr(_local, "program", None) is None and any(
                isinstance(a, np.ndarray) for a in (*args, *kwargs.values())):
            return simulate(self)(*args, **kwargs)  # `kernel(np_array)` runs standalone, as nki.jit documents
        current()
        return self.fn(*args, **kwargs)

    def launch_parts(self):
        """(function, grid) for `launch`."""
        return self.fn, self.grid


def jit(fn=None, **kwargs):
    """`@nki.jit` / `@nki.jit(...)`: marks `fn` as a kernel (options are accepted
    and have no effect on the CPU)."""
    if fn is None:
        return lambda f: Kernel(f)
    return fn if isinstance(fn, Kernel) else Kernel(fn)


def simulate(kernel):
    """`nki.simulate(kernel)(*arrays, **kwargs)`: runs the kernel as one rank on
    NumPy inputs (placed in shared HBM, dtype from the array's) and returns its
    outputs as NumPy arrays. The target is NEURON_PLATFORM_TARGET_OVERRIDE
    (default trn2); NKI_PRECISE_FP=1 rounds every result to its dtype."""
    from .language.allocation import numpy_dtype
    from .tensor import SHARED_HBM, NkiTensor, from_cells

    target = kernel if isinstance(kernel, Kernel) else Kernel(kernel)

    def tensor(value):
        if not isinstance(value, np.ndarray):
            return value
        dtype = numpy_dtype("nki.simulate", value.dtype)
        cells = dtype.encode(value.astype(np.float32), True) if dtype.is_float or dtype.boolean \
            else dtype.saturate(value.astype(np.int64))
        return from_cells("input", dtype, SHARED_HBM, np.asarray(cells).reshape(value.shape or (1,)))

    def array(value):
        if isinstance(value, NkiTensor):
            return value.dtype.decode(value.read_cells()) if value.dtype.is_float else value.read_cells()
        if isinstance(value, (tuple, list)):
            return type(value)(array(v) for v in value)
        return value

    def run(*args, **kwargs):
        generation = TARGETS.get(os.environ.get("NEURON_PLATFORM_TARGET_OVERRIDE", "trn2"), "trn2")
        precision = "hardware" if os.environ.get("NKI_PRECISE_FP") == "1" else "fp32"
        result = launch(target, [[tensor(a) for a in args]], [{k: tensor(v) for k, v in kwargs.items()}],
                        precision, generation)[0]
        return array(result)

    return run


def install():
    """Makes `import nki`, `nki.language`, `nki.isa` and `nki.collectives` load this package."""
    me = sys.modules[__name__]
    sys.modules["nki"] = me
    sys.modules["nki.language"] = language
    sys.modules["nki.isa"] = isa
    sys.modules["nki.isa.constants"] = isa.constants
    sys.modules["nki.collectives"] = collectives
    sys.modules["nki.typing"] = typing
    if "neuronxcc" not in sys.modules and importlib.util.find_spec("neuronxcc") is None:
        # Kernels written against the compiler's package import the typing module by
        # its older path (`import neuronxcc.nki.typing as nt`): without the compiler,
        # that path names this one.
        legacy, legacy_nki = types.ModuleType("neuronxcc"), types.ModuleType("neuronxcc.nki")
        legacy.nki, legacy_nki.typing = legacy_nki, typing
        sys.modules.update({"neuronxcc": legacy, "neuronxcc.nki": legacy_nki, "neuronxcc.nki.typing": typing})
