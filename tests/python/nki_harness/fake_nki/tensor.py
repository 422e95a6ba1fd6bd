"""Tensors: strided views over flat storages in HBM, SBUF and PSUM.

A view is (storage, offset, shape, strides), offsets and strides counted in
cells of the storage laid out row-major. Indexing and the view methods
(`views.py`) make new views of the same cells. On-chip tensors (SBUF / PSUM) keep dim 0 as the partition dim: an
integer index on it keeps a unit dim, and it can never be broadcast, expanded,
selected or reshaped away, and an integer index on a free dim drops it unless
that would leave fewer than two dims (`t[:, g]` is a (P, 1) column). HBM
tensors index like NumPy arrays.
"""

import itertools
import math

import numpy as np

from . import races, undefined
from .errors import NkiError
from .memory import Grid
from .layout import as_int as _int
from .layout import cell_range, row_major_strides
from .views import TensorViews

_ids = itertools.count(1)

UNWRITTEN = 0
MATMUL = 1
_FIRST_OTHER = 2


class Buffer:
    """A memory space (`nl.sbuf`, `nl.psum`, `nl.private_hbm`, `nl.shared_hbm`)."""

    def __init__(self, name, label, on_chip):
        self.name = name
        self.label = label
        self.on_chip = on_chip

    def __repr__(self):
        return f"nl.{self.name}"


SBUF = Buffer("sbuf", "SBUF", True)
PSUM = Buffer("psum", "PSUM", True)
PRIVATE_HBM = Buffer("private_hbm", "private HBM", False)
SHARED_HBM = Buffer("shared_hbm", "shared HBM", False)


class Storage:
    """One allocation: its cells (flat), dtype, memory space and shape.

    PSUM storages also record which instruction last wrote each cell since
    allocation (`writer`): UNWRITTEN, MATMUL (a Tensor Engine matmul), or a code
    for a named non-matmul instruction. `nc_matmul(accumulate=None)` overwrites the
    unwritten cells and accumulates onto the others, and what wrote a cell decides
    whether a matmul may accumulate onto it. On-chip storages are tiles of their
    program's memory (`memory.Memory`): every load and store is a touch.
    """

    def __init__(self, name, dtype, buffer, shape, cells, memory=None, address=None, fresh=False):
        self.id = next(_ids)
        self.name = name
        self.dtype = dtype
        self.buffer = buffer
        self.shape = tuple(shape)
        self._cells = cells
        # The cells nothing has written yet (None: every cell is written).
        self.unwritten = np.ones(cells.size, dtype=bool) if fresh else None
        self.writer = np.zeros(cells.size, dtype=np.int16) if buffer is PSUM else None
        self._others = []
        self.tile = memory.allocate(self, address) if memory is not None else None

    def record_write(self, idx, op, matmul=False):
        """Notes that instruction `op` (a Tensor Engine matmul when `matmul`) wrote PSUM cells `idx`."""
        if self.writer is None:
            return
        if matmul:
            self.writer[idx] = MATMUL
            return
        if op not in self._others:
            self._others.append(op)
        self.writer[idx] = _FIRST_OTHER + self._others.index(op)

    def other_writers(self, codes):
        """The distinct non-matmul instructions among writer `codes`, in order of first use."""
        return [self._others[c - _FIRST_OTHER] for c in np.unique(codes) if c >= _FIRST_OTHER]

    @property
    def cells(self):
        """The flat cells (no touch: for shapes, bounds and whole-storage byte views)."""
        return self._cells

    def __del__(self):
        if getattr(self, "tile", None) is not None:
            self.tile.close()

    def touched(self, idx, write, size=None, row=None):
        """Records an instruction's read (or write) of cells `idx` (cells of `size`
        bytes in partitions of `row` cells: a byte view's; by default its own)."""
        if self.tile is not None:
            self.tile.memory.touch(self.tile, idx, write, size or self.dtype.size, row or self.partition_cells)

    def load(self, idx, kept=False):
        """The cells at flat indices `idx` (an array, or a `memory.Grid` of one);
        unwritten ones are reported (`undefined.check`), unless `kept`: the
        cells an instruction leaves as they are where it writes a tile."""
        self.touched(idx, False)
        idx = cells_of(idx)
        if not kept:
            races.check(self, idx)
        if self.unwritten is not None and not kept:
            undefined.check(self, idx, self.unwritten[idx])
        return self._cells[idx]

    def store(self, idx, cells):
        """Writes `cells` at flat indices `idx` (an array, or a `memory.Grid` of one)."""
        self.touched(idx, True)
        idx = cells_of(idx)
        races.check(self, idx, cells)
        self._cells[idx] = np.reshape(cells, np.shape(idx))
        self.mark_written(idx)

    def mark_written(self, idx):
        """Notes that cells `idx` hold written values; once all are, the mask goes
        (loads of a written storage skip the check)."""
        if self.unwritten is not None:
            self.unwritten[idx] = False
            if not self.unwritten.any():
                self.unwritten = None

    @property
    def partition_cells(self):
        """Cells per partition of an on-chip storage (all cells for HBM)."""
        return math.prod(self.shape[1:]) if self.buffer.on_chip else self._cells.size


def cells_of(idx):
    """The index array of `idx` (an array or a `memory.Grid`)."""
    return idx.cells if isinstance(idx, Grid) else idx


def allocate(name, dtype, buffer, shape, memory=None, address=None):
    """A fresh row-major tensor, every cell unwritten (the dtype's fill; an
    on-chip one a tile of `memory`, its program's `memory.Memory`, placed at
    `address` when given)."""
    cells = np.full(math.prod(shape), dtype.uninitialised(), dtype=dtype.cell_type)
    return NkiTensor(Storage(name, dtype, buffer, shape, cells, memory, address, fresh=True))


def from_cells(name, dtype, buffer, cells):
    """A tensor over ready-made cells (an n-d array of the dtype's cell type)."""
    return NkiTensor(Storage(name, dtype, buffer, cells.shape, cells.reshape(-1)))


class NkiTensor(TensorViews):
    """A view of a tensor (`nki.language.NkiTensor`)."""

    def __init__(self, storage, offset=0, shape=None, strides=None, indirect=None):
        self.storage = storage
        self._offset = offset
        self._shape = tuple(storage.shape if shape is None else shape)
        self._strides = tuple(row_major_strides(self._shape) if strides is None else strides)
        # An indirect view resolves its cells when an instruction uses it: a
        # function returning the cell index array (see `indirect.py`).
        self._resolve = indirect

    # -- properties -------------------------------------------------------------

    @property
    def shape(self):
        """The view's dims."""
        return self._shape

    @property
    def strides(self):
        """The step, in storage elements, of each dim."""
        return self._strides

    @property
    def offset(self):
        """The storage element of the view's first element."""
        return self._offset

    @property
    def dtype(self):
        return self.storage.dtype

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def base_tensor(self):
        """The whole allocation this view was cut from, in the shape and dtype
        it was allocated with (through a `view(dtype)` to the bytes' owner)."""
        storage = self.storage
        while hasattr(storage, "base"):
            storage = storage.base
        return NkiTensor(storage)

    @property
    def buffer(self):
        return self.storage.buffer

    @property
    def name(self):
        return self.storage.name

    @property
    def size(self):
        return math.prod(self.shape)

    def __repr__(self):
        return f"NkiTensor({self.describe()})"

    def __bool__(self):
        """Always true: while a kernel is traced a tensor is an object whose
        values are not known, and kernels test a tensor's presence with it."""
        return True

    def describe(self):
        """`'name' [128, 512] bfloat16 in SBUF`, for messages."""
        return f"'{self.name}' {list(self.shape)} {self.dtype.name} in {self.buffer.label}"

    # -- cell addressing ----------------------------------------------------------

    def _view(self, offset, shape, strides):
        return NkiTensor(self.storage, offset, shape, strides)

    def cell_index(self, skip_oob=False):
        """The storage cell of every element, as an int array of the view's shape
        (-1 for the out-of-bound rows of an indirect view when `skip_oob`)."""
        if self._resolve is not None:
            return self._resolve(skip_oob)
        idx = np.array(self.offset, dtype=np.int64)
        for n, s in zip(self.shape, self.strides):
            idx = idx[..., None] + np.arange(n, dtype=np.int64) * s
        return idx

    def cell_range(self):
        """(lowest, highest) cell the view touches, or None when it is empty."""
        if self._resolve is not None:
            idx = self.cell_index()
            return (int(idx.min()), int(idx.max())) if idx.size else None
        return cell_range(self.offset, self.shape, self.strides)

    def check_bounds(self, what):
        """Raises unless every element lies inside the storage."""
        r = self.cell_range()
        count = self.storage.cells.size
        if r and (r[0] < 0 or r[1] >= count):
            raise NkiError(what, f"view of '{self.name}' reaches cells {r[0]}..={r[1]}, outside the tensor's "
                                 f"{count} cells (allocation shape {list(self.storage.shape)})")

    def read_cells(self, kept=False):
        """The view's cells in logical (row-major) order, shaped like the view
        (`kept`: as they stand, for a write that leaves some of them as they are,
        which is not a read of them)."""
        return self.storage.load(self.cell_index(), kept)

    def write_cells(self, cells, op):
        """Stores cells (logical order) into the view on behalf of instruction `op`."""
        idx = self.cell_index()
        self.storage.store(idx, cells)
        self.storage.record_write(idx, op)

    def check_single(self, op, role):
        """Raises unless the view is one element of an SBUF or HBM tensor."""
        self.check_bounds(op)
        if self.size != 1:
            raise NkiError(op, f"{role} {self.describe()} must hold exactly one element")
        if self.buffer is PSUM:
            raise NkiError(op, f"{role} {self.describe()} must be in SBUF or HBM")

    def scalar_value(self, op, role):
        """The integer held by a one-element SBUF / HBM tensor (a dynamic offset or register source)."""
        self.check_single(op, role)
        return int(self.dtype.to_int(self.read_cells()).reshape(-1)[0])

    # -- views --------------------------------------------------------------------

    def __getitem__(self, key):
        key = key if isinstance(key, tuple) else (key,)
        self._direct("index")
        if any(k is Ellipsis for k in key):
            at = [i for i, k in enumerate(key) if k is Ellipsis]
            if len(at) > 1:
                raise NkiError("index", f"an index may hold one Ellipsis (...), got {key!r}")
            fill = (slice(None),) * max(self.ndim - (len(key) - 1), 0)
            key = key[:at[0]] + fill + key[at[0] + 1:]
        if len(key) > self.ndim:
            raise NkiError("index", f"{len(key)} indices given for the {self.ndim}-d tensor '{self.name}' "
                                    f"{list(self.shape)}")
        offset, shape, strides, dropped = self.offset, [], [], None
        for d, (n, stride) in enumerate(zip(self.shape, self.strides)):
            item = key[d] if d < len(key) else slice(None)
            if isinstance(item, slice):
                start, stop, step = (None if v is None else _int("index", "a slice bound", v)
                                     for v in (item.start, item.stop, item.step))
                step = 1 if step is None else step
                s = 0 if start is None else start + n if start < 0 else start
                e = n if stop is None else stop + n if stop < 0 else stop
                if step < 1 or s < 0 or e > n or s > e:
                    raise NkiError("index", f"slice {item.start}:{item.stop}:{step} is out of range for dim {d} "
                                            f"(extent {n}) of '{self.name}' {list(self.shape)}")
                offset += s * stride
                shape.append(-(-(e - s) // step))
                strides.append(stride * step)
            else:
                i = _int("index", "an index", item)
                p = i + n if i < 0 else i
                if not 0 <= p < n:
                    raise NkiError("index", f"index {i} is out of range for dim {d} of '{self.name}' "
                                            f"{list(self.shape)}")
                offset += p * stride
                if self.buffer.on_chip and d == 0:
                    shape.append(1)
                    strides.append(stride)
                else:
                    dropped = stride
        if self.buffer.on_chip and len(shape) < 2 and dropped is not None:
            shape.append(1)
            strides.append(dropped)
        return self._view(offset, shape, strides)

    def __setitem__(self, key, value):
        """`t[key] = value`: writes a tensor's elements (paired in row-major order,
        cast through float32 when the dtypes differ) or a number into the view."""
        from .assign import assign

        assign(self[key], value)

def describe(value):
    """A tensor's `describe()`, anything else's repr, for messages."""
    return value.describe() if isinstance(value, NkiTensor) else repr(value)
