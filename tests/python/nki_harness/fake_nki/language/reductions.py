"""Reductions over the trailing free axes of a tile (`nl.sum`, `max`, `min`,
`mean`, `prod`, `var`, `all`) and the normalisations built on them
(`nl.softmax`, `nl.rms_norm`).

Each row (the reduced axes flattened) folds in float32 in the engines' fixed
order (`alu.reduce_rows`: sums in eight interleaved lanes); `mean` divides the
sum by the count, `var` is the mean squared deviation from the mean (two
passes, no Bessel correction).
"""

import math

import numpy as np

from ..alu import OPS, reduce_rows
from ..errors import NkiError
from ..runtime import instruction
from .operands import new_tile, on_chip, values


def _axes(op, x, axis):
    nd = x.ndim
    axes = sorted(a + nd if a < 0 else a for a in (axis if isinstance(axis, (tuple, list)) else (axis,)))
    if not axes or axes[0] < 1 or axes != list(range(axes[0], nd)):
        raise NkiError(op, f"axis {axis} of {x.describe()} must name the last free dims, ending at dim {nd - 1} "
                           "(the partition dim 0 cannot be reduced)")
    return axes


def _rows(op, x, axis):
    """(values as rows x reduced elements, kept shape, reduced axes)."""
    on_chip(op, "x", x)
    axes = _axes(op, x, axis)
    inner = math.prod(x.shape[a] for a in axes)
    vals = values(op, "x", x).reshape(-1, inner)
    return vals, axes


def _shaped(x, axes, rows, keepdims):
    kept = [1 if d in axes else n for d, n in enumerate(x.shape)] if keepdims else \
        [n for d, n in enumerate(x.shape) if d not in axes]
    return rows.reshape(kept or [1])


_FOLDS = {
    "sum": lambda v: reduce_rows(OPS["add"], v, 0.0),
    "max": lambda v: reduce_rows(OPS["maximum"], v, -np.inf),
    "min": lambda v: reduce_rows(OPS["minimum"], v, np.inf),
    "prod": lambda v: reduce_rows(OPS["multiply"], v, 1.0),
    "all": lambda v: np.all(v != 0, axis=1).astype(np.float32),
    "mean": lambda v: reduce_rows(OPS["add"], v, 0.0) / np.float32(v.shape[1]),
}


@instruction
def _reduce(kind, x, axis, dtype, keepdims):
    op = f"nl.{kind}"
    vals, axes = _rows(op, x, axis)
    return new_tile(op, _shaped(x, axes, _FOLDS[kind](vals), keepdims), dtype or x.dtype)


def sum(x, axis, dtype=None, keepdims=False):  # noqa: A001  (nl.sum)
    """Sum over the trailing free `axis` (int or tuple)."""
    return _reduce("sum", x, axis, dtype, keepdims)


def max(x, axis, dtype=None, keepdims=False):  # noqa: A001  (nl.max)
    """Maximum over the trailing free `axis` (NaN propagates)."""
    return _reduce("max", x, axis, dtype, keepdims)


def min(x, axis, dtype=None, keepdims=False):  # noqa: A001  (nl.min)
    """Minimum over the trailing free `axis` (NaN propagates)."""
    return _reduce("min", x, axis, dtype, keepdims)


def prod(x, axis, dtype=None, keepdims=False):
    """Product over the trailing free `axis`."""
    return _reduce("prod", x, axis, dtype, keepdims)


def mean(x, axis, dtype=None, keepdims=False):
    """Mean over the trailing free `axis`, in float32."""
    return _reduce("mean", x, axis, dtype, keepdims)


def all(x, axis, dtype=None):  # noqa: A001  (nl.all)
    """1 where every element over `axis` is nonzero, else 0."""
    return _reduce("all", x, axis, dtype, False)


@instruction
def var(x, axis, dtype=None, keepdims=False):
    """Population variance over the trailing free `axis`; the result always
    keeps the reduced dims (as documented)."""
    op = "nl.var"
    vals, axes = _rows(op, x, axis)
    mu = _FOLDS["mean"](vals)
    dev = (vals - mu[:, None]).astype(np.float32)
    return new_tile(op, _shaped(x, axes, _FOLDS["mean"](dev * dev), True), dtype or x.dtype)


@instruction
def softmax(x, axis=-1, dtype=None):
    """`exp(x - max) / sum(exp(x - max))` over the trailing free `axis`."""
    op = "nl.softmax"
    vals, axes = _rows(op, x, axis)
    e = np.exp(vals - _FOLDS["max"](vals)[:, None]).astype(np.float32)
    out = e / _FOLDS["sum"](e)[:, None]
    return new_tile(op, out.reshape(x.shape), dtype or x.dtype)


@instruction
def rms_norm(x, w, axis, n, epsilon=1e-06, dtype=None, compute_dtype=None):
    """`x / sqrt(sum(x^2 over axis) / n + epsilon) * w` (`w` broadcasts against
    x), in float32 (`compute_dtype` is accepted; the math is float32)."""
    op = "nl.rms_norm"
    vals, axes = _rows(op, x, axis)
    ms = _FOLDS["sum"](vals * vals) / np.float32(n) + np.float32(epsilon)
    normed = (vals / np.sqrt(ms)[:, None]).reshape(x.shape)
    try:
        out = normed * values(op, "w", w)
    except ValueError:
        raise NkiError(op, f"w {w.describe()} does not broadcast against x {x.describe()}") from None
    return new_tile(op, out.astype(np.float32), dtype or x.dtype)
