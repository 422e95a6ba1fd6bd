"""Data movement and layout tile functions: `nl.load`, `nl.store`,
`nl.load_transpose2d`, `nl.transpose`, `nl.matmul`, `nl.expand_dims`,
`nl.broadcast_to` and `nl.gather_flattened`.

`load` / `store` are DMA copies (a cast goes through float32). `transpose` and
`matmul` run on the Tensor engine: they read SBUF and return a new PSUM tile
(float32 for `matmul`), which counts as matmul-written for accumulation rules.
"""

import numpy as np

from ..dtypes import DTYPES, convert
from ..errors import NkiError
from ..runtime import current, instruction
from ..tensor import PSUM, SBUF, NkiTensor, describe
from ..tile import Tile
from .allocation import ndarray
from .operands import new_cells_tile, new_tile, on_chip, values


def _hbm(op, role, t):
    if not isinstance(t, NkiTensor) or t.buffer.on_chip:
        raise NkiError(op, f"{role} must be an HBM tensor, got {describe(t)}")
    t.check_bounds(op)
    return t


@instruction
def load(src, dtype=None):
    """A new SBUF tile holding `src` (HBM), cast to `dtype` when given."""
    op = "nl.load"
    _hbm(op, "src", src)
    out = dtype or src.dtype
    return new_cells_tile(op, convert(src.read_cells(), src.dtype, out, current().rounds), out)


@instruction
def store(dst, value):
    """Writes the SBUF tile `value` into HBM `dst` (equal shapes; cast to dst's dtype)."""
    op = "nl.store"
    _hbm(op, "dst", dst)
    on_chip(op, "value", value)
    if value.buffer is PSUM:
        raise NkiError(op, f"value {value.describe()} is in PSUM, which DMA cannot access; copy it to SBUF first")
    if value.size != dst.size:
        raise NkiError(op, f"value {value.describe()} has {value.size} elements but dst {dst.describe()} has "
                           f"{dst.size}")
    dst.write_cells(convert(value.read_cells(), value.dtype, dst.dtype, current().rounds), op)


@instruction
def load_transpose2d(src, dtype=None):
    """A new SBUF tile holding the 2-d HBM `src` transposed."""
    op = "nl.load_transpose2d"
    _hbm(op, "src", src)
    if src.ndim != 2:
        raise NkiError(op, f"src {src.describe()} must be 2-d")
    out = dtype or src.dtype
    return new_cells_tile(op, convert(src.read_cells().T.copy(), src.dtype, out, current().rounds), out)


def _tensor_engine_operand(op, role, x, fmax):
    on_chip(op, role, x)
    if x.buffer is not SBUF or x.ndim != 2:
        raise NkiError(op, f"{role} {x.describe()} must be a 2-d SBUF tile (the Tensor engine reads SBUF)")
    if x.shape[1] > fmax:
        raise NkiError(op, f"{role} {x.describe()} has free size {x.shape[1]} > {fmax}")
    return values(op, role, x)


def _psum_result(op, product, dtype):
    t = ndarray(product.shape, dtype, PSUM, op.removeprefix("nl."))
    Tile(op, "result", t).write(product, current().rounds, matmul=True)
    return t


@instruction
def transpose(x, dtype=None):
    """A new PSUM tile holding the 2-d SBUF tile `x` (at most 128 x 128) transposed."""
    op = "nl.transpose"
    hw = current().hw
    vals = _tensor_engine_operand(op, "x", x, hw.pe_transpose_max)
    return _psum_result(op, vals.T.copy(), dtype or x.dtype)


@instruction
def matmul(x, y, transpose_x=False):
    """`x @ y` (or `x.T @ y` with `transpose_x`) into a new float32 PSUM tile, in
    float32. The contraction runs over the partitions of `x.T` and `y`."""
    op = "nl.matmul"
    hw = current().hw
    a = _tensor_engine_operand(op, "x", x, hw.gemm_stationary_fmax if transpose_x else hw.pmax)
    b = _tensor_engine_operand(op, "y", y, hw.gemm_moving_fmax)
    stationary = a if transpose_x else a.T
    if stationary.shape[0] != b.shape[0]:
        raise NkiError(op, f"x {x.describe()}{' (transposed)' if not transpose_x else ''} and y {y.describe()} "
                           "do not share the contraction dim")
    if stationary.shape[1] > hw.gemm_stationary_fmax:
        raise NkiError(op, f"x gives {stationary.shape[1]} output partitions > {hw.gemm_stationary_fmax}")
    return _psum_result(op, np.matmul(stationary.T, b).astype(np.float32), DTYPES["float32"])


def expand_dims(x, axis):
    """A view of `x` with a unit dim inserted at `axis`."""
    if not isinstance(x, NkiTensor):
        raise NkiError("nl.expand_dims", f"x must be a tile, got {x!r}")
    return x.expand_dim(axis + x.ndim + 1 if axis < 0 else axis)


@instruction
def broadcast_to(x, shape, dtype=None):
    """A new tile of `shape` (same rank as x) repeating x's unit dims."""
    op = "nl.broadcast_to"
    vals = values(op, "x", on_chip(op, "x", x))
    shape = tuple(int(n) for n in shape)
    if len(shape) != x.ndim:
        raise NkiError(op, f"shape {list(shape)} must have the rank of x {x.describe()}")
    if shape == x.shape and (dtype is None or dtype is x.dtype):
        return x
    try:
        out = np.broadcast_to(vals, shape)
    except ValueError:
        raise NkiError(op, f"x {x.describe()} does not broadcast to {list(shape)}") from None
    return new_tile(op, out.astype(np.float32), dtype or x.dtype, x.buffer)


@instruction
def gather_flattened(data, indices, axis=0, dtype=None):
    """`out[p, j...] = data[p, flat(indices[p, j...])]`: per partition, the free
    dims of data flattened and indexed by the integer tile `indices`."""
    op = "nl.gather_flattened"
    on_chip(op, "data", data)
    on_chip(op, "indices", indices)
    if axis != 0:
        raise NkiError(op, f"axis {axis}: only 0 (gather within each partition) is supported")
    if indices.dtype.is_float or indices.shape[0] != data.shape[0]:
        raise NkiError(op, f"indices {indices.describe()} must be an integer tile with {data.shape[0]} partitions")
    rows = data.read_cells().reshape(data.shape[0], -1)
    idx = indices.dtype.to_int(indices.read_cells()).reshape(indices.shape[0], -1)
    if idx.size and (idx.min() < 0 or idx.max() >= rows.shape[1]):
        raise NkiError(op, f"indices hold {int(idx.min())}..={int(idx.max())}, outside 0..{rows.shape[1]}")
    cells = np.take_along_axis(rows, idx, axis=1).reshape(indices.shape)
    out = dtype or data.dtype
    return new_cells_tile(op, convert(cells, data.dtype, out, current().rounds), out)
