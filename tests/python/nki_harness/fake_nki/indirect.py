"""Indirect views: per-partition row offsets (`vector_select`, `.ap(vector_offset=)`),
tensor indirection (`.indirect(index)`), and `.ap(scalar_offset=)` views whose
dynamic start moves rows out of bounds.

Their cells depend on offsets held in a tensor, so an indirect view resolves
them each time an instruction uses it (the offsets an instruction sees are the
ones in memory when it runs). An offset outside the tensor is an error, unless
the instruction skips out-of-bound rows (`oob_mode=skip`): then the cells of
those rows resolve to -1 and the instruction leaves them out.
"""

import numpy as np

from .errors import NkiError
from .runtime import current
from .tensor import SBUF, NkiTensor, describe

# Offsets of a tensor indirection come from the index tile in groups of this many
# partitions (the Vector / Scalar / GpSimd group; see `tensor_indirection`).
TI_GROUP = 16


def _offsets(op, t, rows, role):
    """The integer values of the (rows, 1) SBUF tensor `t`."""
    if not isinstance(t, NkiTensor) or t.buffer is not SBUF or t.dtype.is_float:
        raise NkiError(op, f"{role} must be an integer SBUF tensor, got {describe(t)}")
    if t.size != rows:
        raise NkiError(op, f"{role} {t.describe()} must hold one offset per partition ({rows})")
    t.check_bounds(op)
    return t.dtype.to_int(t.read_cells()).reshape(rows)


def _rows_checked(op, idx, valid, skip, what, skippable=True):
    """`idx` (rows first) with the rows not `valid` set to -1 when `skip`, else an
    error naming the first of them (and oob_mode=skip when it would apply)."""
    if valid.all():
        return idx
    if not skip:
        hint = "; oob_mode=skip would skip it" if skippable else ""
        raise NkiError(op, f"{what(int(np.flatnonzero(~valid)[0]))} (out of bounds{hint})")
    idx = idx.copy()
    idx[~valid] = -1
    return idx


def vector_select(t, dim, vector_offset):
    """Partition p of the result is row `vector_offset[p]` of HBM tensor `t`'s dim 0."""
    op = "vector_select"
    if dim != 0 or t.buffer.on_chip:
        raise NkiError(op, f"vector_select takes dim 0 of an HBM tensor; got dim {dim} of {t.describe()}")
    if not isinstance(vector_offset, NkiTensor) or vector_offset.ndim < 1:
        raise NkiError(op, f"vector_offset must be a (P, 1) SBUF tensor, got {vector_offset!r}")
    rows = vector_offset.shape[0]
    inner = NkiTensor(t.storage, t.offset, t.shape[1:], t.strides[1:])

    def resolve(skip=False):
        offs = _offsets(op, vector_offset, rows, "vector_offset")
        idx = offs.reshape((rows,) + (1,) * inner.ndim) * t.strides[0] + inner.cell_index()
        return _rows_checked(op, idx, (offs >= 0) & (offs < t.shape[0]), skip,
                             lambda r: f"vector_offset selects row {offs[r]} of {t.describe()}, which has "
                                       f"{t.shape[0]} rows")

    return NkiTensor(t.storage, t.offset, (rows,) + t.shape[1:], (0,) + t.strides[1:], resolve)


def by_vector_offset(op, view, vector_offset, stride):
    """`view` whose first dim is indirect: its element r addresses
    `offsets[r] * stride` instead of `r * step`, the offsets being the values of
    `vector_offset` in column-major order (`indices.T.flatten()`), the first
    `view.shape[0]` of them."""
    rows = view.shape[0]
    if not isinstance(vector_offset, NkiTensor) or vector_offset.size < rows:
        raise NkiError(op, f"vector_offset must be an integer SBUF tensor with at least {rows} values, got "
                           f"{describe(vector_offset)}")
    lift = (rows,) + (1,) * (view.ndim - 1)

    def resolve(skip=False):
        table = _offsets(op, vector_offset, vector_offset.size, "vector_offset")
        offs = table.reshape(vector_offset.shape).T.reshape(-1)[:rows] if vector_offset.ndim == 2 else table[:rows]
        idx = view.cell_index() + (offs * stride - np.arange(rows) * view.strides[0]).reshape(lift)
        flat = idx.reshape(rows, -1)
        count = view.storage.cells.size
        return _rows_checked(op, idx, (flat.min(axis=1) >= 0) & (flat.max(axis=1) < count), skip,
                             lambda r: f"vector_offset {offs[r]} moves row {r} of the view of '{view.name}' outside "
                                       f"its {count} cells")

    return NkiTensor(view.storage, view.offset, view.shape, view.strides, resolve)


def out_of_bounds_rows(op, view, why, skippable):
    """`view` (an access pattern) some of whose rows (elements of the first dim)
    lie outside the storage, `why` naming the cause: using it is an error, except
    in a DMA with `oob_mode=skip` when the rows moved out by a dynamic start are
    `skippable`, which leaves those rows out."""
    count = view.storage.cells.size
    rows = view.shape[0]
    direct = NkiTensor(view.storage, view.offset, view.shape, view.strides)

    def resolve(skip=False):
        idx = direct.cell_index()
        flat = idx.reshape(rows, -1)
        return _rows_checked(op, idx, (flat.min(axis=1) >= 0) & (flat.max(axis=1) < count), skip and skippable,
                             lambda r: f"{why} puts row {r} of the view of '{view.name}' outside its {count} cells",
                             skippable)

    return NkiTensor(view.storage, view.offset, view.shape, view.strides, resolve)


def tensor_indirection(t, index, num_elem):
    """Column i of the (P, num_elem) result is free element `index[i % 16, i // 16]`
    of each partition of on-chip `t` (whose free dims must be contiguous)."""
    op = "indirect"
    hw = current().hw
    if hw.nc_version < 4:
        raise NkiError(op, f"tensor indirection needs NeuronCore-v4 (trn3) or later; the launch targets {hw.name}")
    if not t.buffer.on_chip or not t.is_contiguous():
        raise NkiError(op, f"{t.describe()} must be an on-chip tensor with contiguous free dims")
    if not isinstance(index, NkiTensor) or index.buffer is not SBUF or index.dtype.is_float or index.ndim != 2:
        raise NkiError(op, f"index must be a 2-d integer SBUF tensor, got {index!r}")
    if index.shape[0] != t.shape[0]:
        raise NkiError(op, f"index {index.describe()} must have {t.shape[0]} partitions like {t.describe()}")
    n = index.size if num_elem is None else int(num_elem)
    if not 1 <= n <= index.size:
        raise NkiError(op, f"num_elem {num_elem} must be in 1..={index.size}")
    width = int(np.prod(t.shape[1:]))
    base = t.offset + np.arange(t.shape[0], dtype=np.int64)[:, None] * t.strides[0]

    def resolve(skip=False):
        table = index.dtype.to_int(index.read_cells())
        cols = np.array([table[i % TI_GROUP, i // TI_GROUP] for i in range(n)], dtype=np.int64)
        bad = [int(c) for c in cols if not 0 <= c < width]
        if bad:
            raise NkiError(op, f"index holds offset {bad[0]}, outside the {width} free elements of {t.describe()}")
        return base + cols[None, :]

    return NkiTensor(t.storage, t.offset, (t.shape[0], n), (t.strides[0], 0), resolve)
