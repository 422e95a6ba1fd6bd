"""A NumPy stand-in for the `nki` package (NKI 2.x), used to run emitted kernels
op by op with the nki-rs emulator's semantics.

`install()` registers it as `nki`, `nki.language`, `nki.isa` and
`nki.collectives` in `sys.modules`; `launch()` runs a `@nki.jit` kernel over
ranks and LNC programs.
"""

import sys

from . import collectives, isa, language
from .runtime import current, launch

__all__ = ["jit", "launch", "install", "Kernel", "language", "isa", "collectives"]


class Kernel:
    """A `@nki.jit` kernel. Inside a running kernel, calling it (or `kernel[n]`) is
    an ordinary inline call in the caller's program; `launch()` starts it."""

    def __init__(self, fn, grid=None):
        self.fn = fn
        self.grid = grid
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__

    def __getitem__(self, grid):
        if isinstance(grid, tuple) or not isinstance(grid, int) or grid < 1:
            raise TypeError(f"a kernel's launch grid is one positive int (kernel[2]), got {grid!r}")
        return Kernel(self.fn, grid)

    def __call__(self, *args, **kwargs):
        current()
        return self.fn(*args, **kwargs)

    def launch_parts(self):
        """(function, grid) for `launch`."""
        return self.fn, self.grid


def jit(fn):
    """`@nki.jit`: marks `fn` as a kernel."""
    return Kernel(fn)


def install():
    """Makes `import nki`, `nki.language`, `nki.isa` and `nki.collectives` load this fake."""
    me = sys.modules[__name__]
    sys.modules["nki"] = me
    sys.modules["nki.language"] = language
    sys.modules["nki.isa"] = isa
    sys.modules["nki.collectives"] = collectives
