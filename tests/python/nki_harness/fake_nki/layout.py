"""Strided layouts: row-major strides, the cell range of a layout, contiguity,
and integer arguments of view methods."""

import operator

from .errors import NkiError


def row_major_strides(shape):
    """Row-major strides (in cells) of `shape`."""
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= n
    return tuple(reversed(strides))


def as_int(op, role, v):
    """`v` as an int, or an error naming `role` of `op`."""
    try:
        return operator.index(v)
    except TypeError:
        raise NkiError(op, f"{role} must be an integer, got {v!r}") from None


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
