"""Partition-major access to on-chip operands of the compute engines.

An SBUF / PSUM operand is seen as `np` partitions of `nf` elements (dim 0 is
the partition dim, the free dims flatten in logical order). Ops read whole
tiles as (np, nf) arrays, compute in float32, then write, so an input that
aliases the destination is always read before it is overwritten.
"""

import math

import numpy as np

from .errors import NkiError
from .layout import cell_range
from .memory import Grid
from .registers import TRACE_TIME, VirtualRegister
from .tensor import PSUM, NkiTensor


def on_chip_tensor(op, role, t, noun, hint):
    """Raises unless `t` is an SBUF / PSUM tensor inside its storage; `noun`
    names what `op` takes, `hint` how HBM data gets on chip."""
    if not isinstance(t, NkiTensor):
        raise NkiError(op, f"{role} must be {noun}, got {t!r}")
    if not t.buffer.on_chip:
        raise NkiError(op, f"{role} {t.describe()} must be in SBUF or PSUM: compute engines cannot access HBM "
                           f"({hint})")
    t.check_bounds(op)


class Tile:
    """An on-chip tensor `t` seen as partitions x free elements; `role` names it in messages."""

    def __init__(self, op, role, t):
        on_chip_tensor(op, role, t, "a tensor", "use nisa.dma_copy")
        pc = max(t.storage.partition_cells, 1)
        np_, pstride = (t.shape[0], t.strides[0]) if t.ndim else (1, 0)
        lo, hi = cell_range(0, t.shape[1:], t.strides[1:]) or (0, 0)
        in_row = t.offset % pc
        aligned = np_ <= 1 or (pstride > 0 and pstride % pc == 0)
        if not aligned or in_row + lo < 0 or in_row + hi >= pc:
            raise NkiError(op, f"{role} {t.describe()} is not a partition-major view: dim 0 must step whole "
                               "partitions and the free dims must stay inside one partition")
        self.op = op
        self.tensor = t
        self.np = np_
        self.nf = math.prod(t.shape[1:])
        self.p0 = t.offset // pc
        self.index = t.cell_index().reshape(self.np, self.nf)
        # A strided view's columns are the same in every partition; an indirect
        # view's are not.
        self.cells = Grid(self.index) if t._resolve is None else self.index

    @property
    def dtype(self):
        return self.tensor.dtype

    def read(self):
        """The tile's values as float32, shape (np, nf)."""
        return self.dtype.decode(self.read_raw())

    def read_raw(self):
        """The tile's cells, shape (np, nf)."""
        return self.tensor.storage.load(self.cells)

    def read_kept(self):
        """The tile's cells as they stand, for an instruction that writes the tile
        but leaves some cells as they are: keeping a cell is not a read of it."""
        return self.tensor.storage.load(self.cells, kept=True)

    def read_where(self, mask):
        """The float32 values of the elements where the (np, nf) `mask` is set
        (only those are read), in row-major order."""
        if not mask.any():
            return np.zeros(0, dtype=np.float32)
        return self.dtype.decode(self.tensor.storage.load(self.index[mask]))

    def write(self, values, round_floats, matmul=False):
        """Encodes float32 `values` (np, nf) into the tile's dtype and stores them."""
        self.write_raw(self.dtype.encode(values, round_floats), matmul)

    def write_raw(self, cells, matmul=False):
        """Stores cells of the tile's own dtype (a bit-exact move), recording the
        tile's op, or a Tensor Engine matmul when `matmul`, as their PSUM writer."""
        st = self.tensor.storage
        st.store(self.cells, cells)
        st.record_write(self.index, self.op, matmul)


def same_geometry(op, ra, a, rb, b):
    """Raises unless tiles `a` and `b` have equal partition counts and free sizes."""
    if (a.np, a.nf) != (b.np, b.nf):
        raise NkiError(op, f"{ra} {a.tensor.describe()} is {a.np} partitions x {a.nf} elements but {rb} "
                           f"{b.tensor.describe()} is {b.np} x {b.nf}; they must match")


def binary_tiles(op, dst, ra, a, rb, b):
    """The tiles of inputs `a` and `b` and of `dst`, checked to share one geometry."""
    ta, tb, td = Tile(op, ra, a), Tile(op, rb, b), Tile(op, "dst", dst)
    same_geometry(op, ra, ta, rb, tb)
    same_geometry(op, "dst", td, ra, ta)
    return ta, tb, td


def not_psum(op, role, t, why):
    """Raises when `t` is in PSUM, which the engine cannot reach."""
    if t.buffer is PSUM:
        raise NkiError(op, f"{role} {t.describe()} cannot be in PSUM: {why}")


def column(op, role, operand, np_):
    """A scalar-or-(P, 1) operand as float32, shaped to broadcast over an (np, nf) tile."""
    if isinstance(operand, NkiTensor):
        c = Tile(op, role, operand)
        if (c.np, c.nf) != (np_, 1):
            raise NkiError(op, f"{role} {operand.describe()} must be a ({np_}, 1) column (one value per partition), "
                               f"it is {c.np} partitions x {c.nf} elements")
        return c.read()
    if isinstance(operand, (int, float, np.integer, np.floating)) and not isinstance(operand, bool):
        return np.float32(operand)
    if isinstance(operand, VirtualRegister):
        raise NkiError(op, f"{role}: {TRACE_TIME}")
    raise NkiError(op, f"{role} must be a number or a ({np_}, 1) tensor, got {operand!r}")
