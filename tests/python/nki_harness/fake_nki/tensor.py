"""Tensors: strided views over flat storages in HBM, SBUF and PSUM.

A view is (storage, offset, shape, strides), offsets and strides counted in
cells of the storage laid out row-major. Indexing, `reshape`, `.ap`,
`broadcast`, `expand_dim`, `select` and `slice` make new views of the same
cells. On-chip tensors (SBUF / PSUM) keep dim 0 as the partition dim: an
integer index on it keeps a unit dim, and it can never be broadcast, expanded,
selected or reshaped away, and an integer index on a free dim drops it unless
that would leave fewer than two dims (`t[:, g]` is a (P, 1) column). HBM
tensors index like NumPy arrays.
"""

import itertools
import math
import operator

import numpy as np

from .errors import NkiError
from .registers import VirtualRegister

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
    whether a matmul may accumulate onto it. They hold their program's PSUM banks
    (`memory.PsumBanks`) from the first access to their cells until they are freed.
    """

    def __init__(self, name, dtype, buffer, shape, cells, banks=None):
        self.id = next(_ids)
        self.name = name
        self.dtype = dtype
        self.buffer = buffer
        self.shape = tuple(shape)
        self._cells = cells
        self._banks = banks
        self._lease = None
        self.writer = np.zeros(cells.size, dtype=np.int16) if buffer is PSUM else None
        self._others = []

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
        """The flat cells; the first access takes a PSUM storage's banks."""
        if self._lease is None and self._banks is not None:
            self._lease = self._banks.lease(self)
        return self._cells

    def __del__(self):
        if getattr(self, "_lease", None) is not None:
            self._banks.release(self._lease)

    def load(self, idx):
        """The cells at flat indices `idx`."""
        return self.cells[idx]

    def store(self, idx, cells):
        """Writes `cells` at flat indices `idx`."""
        self.cells[idx] = np.reshape(cells, np.shape(idx))

    @property
    def partition_cells(self):
        """Cells per partition of an on-chip storage (all cells for HBM)."""
        return math.prod(self.shape[1:]) if self.buffer.on_chip else self._cells.size


def allocate(name, dtype, buffer, shape, banks=None):
    """A fresh row-major tensor filled with the dtype's uninitialised pattern
    (a PSUM tensor accounted in `banks`, its program's `memory.PsumBanks`)."""
    cells = np.full(math.prod(shape), dtype.uninitialised(), dtype=dtype.cell_type)
    return NkiTensor(Storage(name, dtype, buffer, shape, cells, banks))


def from_cells(name, dtype, buffer, cells):
    """A tensor over ready-made cells (an n-d array of the dtype's cell type)."""
    return NkiTensor(Storage(name, dtype, buffer, cells.shape, cells.reshape(-1)))


def row_major_strides(shape):
    """Row-major strides (in cells) of `shape`."""
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= n
    return tuple(reversed(strides))


def _int(op, role, v):
    try:
        return operator.index(v)
    except TypeError:
        raise NkiError(op, f"{role} must be an integer, got {v!r}") from None


class NkiTensor:
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
        """True when every element is nonzero, so `assert nl.equal(a, b)` checks a tile."""
        return bool(np.all(self.dtype.decode(self.read_cells()) != 0))

    def describe(self):
        """`'name' [128, 512] bfloat16 in SBUF`, for messages."""
        return f"'{self.name}' {list(self.shape)} {self.dtype.name} in {self.buffer.label}"

    # -- cell addressing ----------------------------------------------------------

    def _view(self, offset, shape, strides):
        return NkiTensor(self.storage, offset, shape, strides)

    def cell_index(self):
        """The storage cell of every element, as an int array of the view's shape."""
        if self._resolve is not None:
            return self._resolve()
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

    def read_cells(self):
        """The view's cells in logical (row-major) order, shaped like the view."""
        return self.storage.load(self.cell_index())

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

    def reshape(self, shape):
        """The same elements with a new shape (the view must be contiguous; on-chip
        views keep their partition dim and only their free dims need be contiguous)."""
        self._direct("reshape")
        shape = tuple(_int("reshape", "a dim", n) for n in shape)
        if math.prod(shape) != self.size:
            raise NkiError("reshape", f"cannot reshape '{self.name}' {list(self.shape)} ({self.size} elements) to "
                                      f"{list(shape)} ({math.prod(shape)} elements)")
        if self.buffer.on_chip:
            if shape[:1] != self.shape[:1]:
                raise NkiError("reshape", f"reshape of on-chip '{self.name}' {list(self.shape)} to {list(shape)} "
                                          f"must keep the partition dim {self.shape[0]}")
            free = (self.shape[1:], self.strides[1:])
            if math.prod(free[0]) > 1 and not is_contiguous(*free):
                raise NkiError("reshape", f"the free dims of '{self.name}' {list(self.shape)} are not contiguous, "
                                          "so it cannot be reshaped")
            return self._view(self.offset, shape, self.strides[:1] + row_major_strides(shape[1:]))
        if self.size > 1 and not is_contiguous(self.shape, self.strides):
            raise NkiError("reshape", f"view of '{self.name}' {list(self.shape)} is not contiguous, so it cannot be "
                                      "reshaped")
        return self._view(self.offset, shape, row_major_strides(shape))

    def ap(self, pattern, offset=None, scalar_offset=None, vector_offset=None, indirect_dim=0, dtype=None):
        """An explicit access pattern `[[step, count], ...]` over the storage.

        The view starts at this view's offset plus `offset` (default 0). With
        `dtype`, the storage is reinterpreted as that dtype first and the pattern,
        offsets and strides count its elements. A `scalar_offset` (a register or a
        one-element tensor) moves the start by its value times the stride of dim
        `indirect_dim` of this view; a `vector_offset` ((P, 1) tensor) moves
        partition p's start by its p-th value times that stride, read when an
        instruction uses the view. For on-chip tensors the first pair is the
        partition dim.
        """
        self._direct("ap")
        pairs = [(_int("ap", "a pattern step", st), _int("ap", "a pattern count", c)) for st, c in pattern]
        if not pairs or any(c < 1 for _, c in pairs):
            raise NkiError("ap", f"access pattern {pattern} on '{self.name}' needs at least one [step, count] pair "
                                 "with count >= 1")
        base_view = self if dtype is None or dtype is self.dtype else self._reinterpreted("ap(dtype=)", dtype)
        base = base_view.offset + (0 if offset is None else _int("ap", "offset", offset))
        if scalar_offset is not None or vector_offset is not None:
            if not 0 <= indirect_dim < self.ndim:
                raise NkiError("ap", f"indirect_dim {indirect_dim} is not a dim of '{self.name}' {list(self.shape)}")
            stride = base_view.strides[indirect_dim] if base_view.ndim > indirect_dim else 1
        if scalar_offset is not None:
            if isinstance(scalar_offset, VirtualRegister):
                value = scalar_offset.value
            else:
                value = scalar_offset.scalar_value("ap(scalar_offset=)", "scalar_offset")
            base += value * stride
        view = NkiTensor(base_view.storage, base, [c for _, c in pairs], [st for st, _ in pairs])
        if vector_offset is not None:
            from .indirect import by_vector_offset

            return by_vector_offset("ap(vector_offset=)", view, vector_offset, stride)
        view.check_bounds("access pattern")
        return view

    # -- shape views (no data moves) ----------------------------------------------

    def _direct(self, op):
        if self._resolve is not None:
            raise NkiError(op, f"'{self.name}' is an indirect view (dynamic select, vector_select, indirect or "
                               "ap with a vector_offset); it cannot be viewed again")

    def _check_dim(self, op, dim):
        self._direct(op)
        if not 0 <= dim < self.ndim:
            raise NkiError(op, f"dim {dim} does not exist in '{self.name}' {list(self.shape)}")

    def _free_dim(self, op, dim, what):
        self._check_dim(op, dim)
        if self.buffer.on_chip and dim == 0:
            raise NkiError(op, f"the partition dim of on-chip '{self.name}' cannot be {what}")

    def is_contiguous(self):
        """Whether the view covers its storage in row-major order (the free dims
        only, for on-chip tensors)."""
        if self.buffer.on_chip:
            return is_contiguous(self.shape[1:], self.strides[1:])
        return is_contiguous(self.shape, self.strides)

    def get_pattern(self):
        """The view as an access pattern `[[stride, count], ...]`."""
        return [[st, n] for st, n in zip(self.strides, self.shape)]

    def is_indirect(self):
        """Whether the view uses indirect (run-time) addressing."""
        return self._resolve is not None

    def permute(self, dims):
        """The dims reordered (`dims` a permutation; on-chip: the partition dim stays first)."""
        self._direct("permute")
        dims = tuple(_int("permute", "a dim", d) for d in dims)
        if sorted(dims) != list(range(self.ndim)):
            raise NkiError("permute", f"dims {list(dims)} are not a permutation of the {self.ndim} dims of "
                                      f"'{self.name}'")
        if self.buffer.on_chip and dims[0] != 0:
            raise NkiError("permute", f"dims {list(dims)} move the partition dim of on-chip '{self.name}'; "
                                      "dims[0] must be 0")
        return self._view(self.offset, [self.shape[d] for d in dims], [self.strides[d] for d in dims])

    def broadcast(self, dim, size):
        """Repeats the unit dim `dim` `size` times (stride 0)."""
        self._free_dim("broadcast", dim, "broadcast")
        if self.shape[dim] != 1:
            raise NkiError("broadcast", f"dim {dim} of '{self.name}' {list(self.shape)} has extent {self.shape[dim]}, "
                                        "only a unit dim can be broadcast")
        shape, strides = list(self.shape), list(self.strides)
        shape[dim], strides[dim] = _int("broadcast", "size", size), 0
        return self._view(self.offset, shape, strides)

    def expand_dim(self, dim):
        """Inserts a unit dim before `dim`."""
        self._direct("expand_dim")
        if not 0 <= dim <= self.ndim or (self.buffer.on_chip and dim == 0):
            raise NkiError("expand_dim", f"cannot insert a dim at position {dim} of '{self.name}' "
                                         f"{list(self.shape)}")
        return self._view(self.offset, self.shape[:dim] + (1,) + self.shape[dim:],
                          self.strides[:dim] + (0,) + self.strides[dim:])

    def squeeze_dim(self, dim):
        """Removes the unit dim `dim`."""
        self._free_dim("squeeze_dim", dim, "squeezed")
        if self.shape[dim] != 1:
            raise NkiError("squeeze_dim", f"dim {dim} of '{self.name}' {list(self.shape)} has extent "
                                          f"{self.shape[dim]}; only a unit dim can be squeezed")
        return self._view(self.offset, self.shape[:dim] + self.shape[dim + 1:],
                          self.strides[:dim] + self.strides[dim + 1:])

    def reshape_dim(self, dim, shape):
        """Splits dim `dim` into `shape` (one entry may be -1, inferred)."""
        self._check_dim("reshape_dim", dim)
        sizes = [_int("reshape_dim", "a size", n) for n in shape]
        n = self.shape[dim]
        if sizes.count(-1) > 1 or any(k < 1 and k != -1 for k in sizes):
            raise NkiError("reshape_dim", f"shape {list(shape)} may hold one -1 and otherwise positive sizes")
        known = math.prod(k for k in sizes if k != -1)
        if -1 in sizes:
            if n % known:
                raise NkiError("reshape_dim", f"cannot split dim {dim} (extent {n}) of '{self.name}' into "
                                              f"{list(shape)}")
            sizes[sizes.index(-1)] = n // known
        if math.prod(sizes) != n:
            raise NkiError("reshape_dim", f"shape {list(shape)} holds {math.prod(sizes)} elements but dim {dim} of "
                                          f"'{self.name}' {list(self.shape)} has {n}")
        if self.buffer.on_chip and dim == 0 and len(sizes) != 1:
            raise NkiError("reshape_dim", f"the partition dim of on-chip '{self.name}' cannot be split")
        strides = [self.strides[dim] * st for st in row_major_strides(sizes)]
        return self._view(self.offset, self.shape[:dim] + tuple(sizes) + self.shape[dim + 1:],
                          self.strides[:dim] + tuple(strides) + self.strides[dim + 1:])

    def flatten_dims(self, start_dim, end_dim):
        """Merges dims `start_dim..=end_dim`, which must be contiguous in storage."""
        self._check_dim("flatten_dims", start_dim)
        self._check_dim("flatten_dims", end_dim)
        if self.buffer.on_chip and start_dim == 0:
            raise NkiError("flatten_dims", f"the partition dim of on-chip '{self.name}' cannot be merged")
        if end_dim < start_dim:
            raise NkiError("flatten_dims", f"cannot merge dims {start_dim}..={end_dim} of '{self.name}': the start "
                                           "is past the end")
        dims = (self.shape[start_dim:end_dim + 1], self.strides[start_dim:end_dim + 1])
        inner = [(n, st) for n, st in zip(*dims) if n != 1]
        if any(st != inner[i + 1][0] * inner[i + 1][1] for i, (_, st) in enumerate(inner[:-1])):
            raise NkiError("flatten_dims", f"dims {start_dim}..={end_dim} of '{self.name}' {list(self.shape)} are "
                                           "not contiguous in storage, so they cannot be merged")
        stride = inner[-1][1] if inner else 1
        return self._view(self.offset, self.shape[:start_dim] + (math.prod(dims[0]),) + self.shape[end_dim + 1:],
                          self.strides[:start_dim] + (stride,) + self.strides[end_dim + 1:])

    def rearrange(self, src_pattern, dst_pattern, fixed_sizes=None):
        """einops-style: splits the grouped dims of `src_pattern` (sizes from
        `fixed_sizes`, one inferred), reorders by name, merges the groups of
        `dst_pattern`."""
        from .rearrange import rearrange

        self._direct("rearrange")
        return rearrange(self, src_pattern, dst_pattern, fixed_sizes or {})

    def view(self, dtype):
        """The same bytes as `dtype`: the last dim (contiguous) scales by the size ratio."""
        self._direct("view")
        return self._reinterpreted("view", dtype)

    reinterpret_cast = view

    def _reinterpreted(self, op, dtype):
        from .reinterpret import reinterpret

        return reinterpret(op, self, dtype)

    def select(self, dim, index):
        """Position `index` of `dim`, dropping the dim; a one-element tensor index
        is read when the view is made (a dynamic select)."""
        self._check_dim("select", dim)
        if self.buffer.on_chip and dim == 0:
            raise NkiError("select", f"the partition dim of '{self.name}' cannot be selected away")
        if isinstance(index, NkiTensor):
            index = index.scalar_value("select", "a dynamic index")
        return self[(slice(None),) * dim + (index,)]

    def vector_select(self, dim, vector_offset):
        """Partition p of the result is row `vector_offset[p]` of dim 0 (HBM only)."""
        from .indirect import vector_select

        self._check_dim("vector_select", dim)
        return vector_select(self, dim, vector_offset)

    def indirect(self, index, num_elem=None):
        """Tensor indirection (trn3+): column i of the (P, num_elem) result is
        column `index[i % 16, i // 16]` of this view."""
        from .indirect import tensor_indirection

        self._direct("indirect")
        return tensor_indirection(self, index, num_elem)

    def slice(self, dim, start, end, step=1):
        """`start:end:step` along `dim`."""
        self._check_dim("slice", dim)
        return self[(slice(None),) * dim + (slice(start, end, step),)]


def describe(value):
    """A tensor's `describe()`, anything else's repr, for messages."""
    return value.describe() if isinstance(value, NkiTensor) else repr(value)


def cell_range(offset, shape, strides):
    """(lowest, highest) cell of a strided layout, or None when it is empty."""
    if 0 in shape:
        return None
    lo = hi = offset
    for n, s in zip(shape, strides):
        span = (n - 1) * s
        lo, hi = (lo + span, hi) if span < 0 else (lo, hi + span)
    return lo, hi


def is_contiguous(shape, strides):
    """Whether the elements occupy consecutive cells in logical order."""
    dims = [(n, s) for n, s in zip(shape, strides) if n != 1]
    return all(s == dims[i + 1][0] * dims[i + 1][1] for i, (_, s) in enumerate(dims[:-1])) and \
        (not dims or dims[-1][1] == 1)
