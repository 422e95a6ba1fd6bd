"""Operands of the `nki.language` tile functions: on-chip tensors read as
values, numbers, the result dtype of mixed operands and fresh result tiles.

Tile functions compute like the engines: in float32 (integer tiles combined by
an integer ALU op stay exact), rounded once into the result's dtype.
"""

import numpy as np

from ..dtypes import DTYPES
from ..errors import NkiError
from ..runtime import current
from ..tensor import SBUF, NkiTensor
from ..tile import on_chip_tensor
from .allocation import ndarray


def on_chip(op, role, x):
    """Raises unless `x` is an SBUF / PSUM tensor inside its storage."""
    on_chip_tensor(op, role, x, "a tile", "nl.load it first")
    return x


def values(op, role, x):
    """A tile's values (float32, shaped like it) or a number as float32."""
    if isinstance(x, NkiTensor):
        return on_chip(op, role, x).dtype.decode(x.read_cells())
    if isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool):
        return np.float32(x)
    raise NkiError(op, f"{role} must be a tile or a number, got {x!r}")


def result_dtype(tiles):
    """The dtype of a result of `tiles` when none is asked for: their common
    dtype, else the float one of most bytes (float32 for bf16 with fp16), else
    the integer one of most bytes."""
    kinds = list(dict.fromkeys(t.dtype for t in tiles))
    if len(kinds) == 1:
        return kinds[0]
    floats = [d for d in kinds if d.is_float]
    pool = floats or kinds
    widest = max(d.size for d in pool)
    best = [d for d in pool if d.size == widest]
    return best[0] if len(best) == 1 else DTYPES["float32"] if floats else DTYPES["int32"]


def new_tile(op, values_, dtype, buffer=SBUF, name=""):
    """A new tile holding float32 `values_` encoded as `dtype`."""
    t = ndarray(values_.shape, dtype, buffer, name or op.removeprefix("nl."))
    t.write_cells(dtype.encode(values_, current().rounds), op)
    return t


def new_cells_tile(op, cells, dtype, buffer=SBUF):
    """A new tile holding ready-made cells of `dtype`."""
    t = ndarray(cells.shape, dtype, buffer, op.removeprefix("nl."))
    t.write_cells(cells, op)
    return t
