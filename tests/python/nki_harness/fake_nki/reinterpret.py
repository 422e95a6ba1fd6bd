"""`NkiTensor.view(dtype)`: the same bytes seen as another dtype.

A reinterpreted storage shares its base storage's bytes: it decodes them on
every read and re-encodes the base cells on every write. On-chip storages are
reinterpreted partition by partition. Float cells become bytes through their
dtype, so in fp32 precision a low-precision float cell is rounded to its dtype
when its bytes are read.
"""

import numpy as np

from . import races, undefined
from .errors import NkiError
from .tensor import PSUM, NkiTensor, cells_of


class ReinterpretedStorage:
    """The cells of `base` read as `dtype`."""

    def __init__(self, op, base, dtype):
        if base.buffer is PSUM:
            raise NkiError(op, f"'{base.name}' is in PSUM; this executor reinterprets SBUF and HBM tensors only")
        total = base.cells.size * base.dtype.size
        parts = base.shape[0] if base.buffer.on_chip else 1
        if (total // parts) % dtype.size:
            raise NkiError(op, f"'{base.name}' holds {total // parts} bytes per partition, not a whole number of "
                               f"{dtype.name} elements")
        self.base = base
        self.id = base.id
        self.name = base.name
        self.dtype = dtype
        self.buffer = base.buffer
        count = total // dtype.size
        self.shape = (parts, count // parts) if base.buffer.on_chip else (count,)
        self.writer = None

    def _all(self):
        raw = self.base.dtype.to_bits(self.base.cells).view(np.uint8)
        return self.dtype.from_bits(raw.view(self.dtype.bits_type))

    @property
    def cells(self):
        """A decoded copy of every cell (writes go through `store`)."""
        return self._all()

    @property
    def partition_cells(self):
        return self.shape[1] if self.buffer.on_chip else self.shape[0]

    def _base_cells(self, idx):
        """The base cells holding the bytes of cells `idx` (in their order; with a
        last dim of the size ratio when a cell spans several base cells)."""
        a, b = self.base.dtype.size, self.dtype.size
        if b <= a:
            return idx * b // a
        return idx[..., None] * (b // a) + np.arange(b // a)

    def load(self, idx, kept=False):
        self.base.touched(idx, False, self.dtype.size, self.partition_cells)
        idx = cells_of(idx)
        if not kept:
            races.check(self.base, self._base_cells(idx))
        if self.base.unwritten is not None and not kept:
            cells = self._base_cells(idx)
            undefined.check(self.base, cells, self.base.unwritten[cells])
        return self._all()[idx]

    def store(self, idx, cells):
        """Writes cells through the base's bytes; a base cell any of whose bytes is
        written counts as written."""
        self.base.touched(idx, True, self.dtype.size, self.partition_cells)
        idx = cells_of(idx)
        self.base.mark_written(self._base_cells(idx))
        everything = self._all()
        everything[idx] = np.reshape(cells, np.shape(idx))
        raw = self.dtype.to_bits(everything).view(np.uint8)
        base_cells = self.base.dtype.from_bits(raw.view(self.base.dtype.bits_type))
        races.check(self.base, self._base_cells(idx), base_cells[self._base_cells(idx)])
        self.base.cells[:] = base_cells

    def record_write(self, idx, op, matmul=False):
        """PSUM is never reinterpreted, so there is nothing to record."""


def reinterpret(op, t, dtype):
    """View `t` as `dtype`; its last dim must be contiguous and scales by the size ratio."""
    from .dtypes import DType

    if not isinstance(dtype, DType):
        raise NkiError(op, f"dtype must be an nl dtype, got {dtype!r}")
    if dtype is t.dtype:
        return t
    if isinstance(t.storage, ReinterpretedStorage):
        raise NkiError(op, f"'{t.name}' is already reinterpreted as {t.dtype.name}; reinterpret the original tensor")
    if t.shape[-1] > 1 and t.strides[-1] != 1:
        raise NkiError(op, f"the last dim of '{t.name}' {list(t.shape)} has stride {t.strides[-1]}; it must be "
                           "contiguous to be reinterpreted")
    a, b = t.dtype.size, dtype.size
    storage = ReinterpretedStorage(op, t.storage, dtype)
    if b <= a:
        r = a // b
        shape, strides, offset = t.shape[:-1] + (t.shape[-1] * r,), [s * r for s in t.strides[:-1]] + [1], t.offset * r
    else:
        r = b // a
        if t.shape[-1] % r or any(s % r for s in t.strides[:-1]) or t.offset % r:
            raise NkiError(op, f"'{t.name}' {list(t.shape)} {t.dtype.name} does not split into whole {dtype.name} "
                               f"elements (the last dim and the layout must be multiples of {r})")
        shape = t.shape[:-1] + (t.shape[-1] // r,)
        strides, offset = [s // r for s in t.strides[:-1]] + [1], t.offset // r
    return NkiTensor(storage, offset, shape, strides)
