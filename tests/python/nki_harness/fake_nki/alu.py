"""Operator tokens (`nl.add`, `nl.exp`, ...) and their float32 semantics.

Binary (ALU) tokens combine two float32 arrays, comparisons giving 1.0 / 0.0;
`maximum` / `minimum` return the non-NaN operand when one is NaN. Unary tokens
are the Scalar-engine activation functions. Reductions fold rows in a fixed
order: sums use eight interleaved partial sums, max / min propagate NaN.
"""

import math

import numpy as np

from .errors import NkiError

_F32 = np.float32


class Op:
    """One token; `arity` is 2 for ALU ops and 1 for activation functions."""

    def __init__(self, name, arity, fn):
        self.name = name
        self.arity = arity
        self._fn = fn

    def __repr__(self):
        return f"nl.{self.name}"

    def __call__(self, *args):
        return np.asarray(self._fn(*args), dtype=_F32)


def _flag(cond):
    return cond.astype(_F32)


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


_BINARY = {
    "add": lambda a, b: a + b,
    "subtract": lambda a, b: a - b,
    "multiply": lambda a, b: a * b,
    "divide": lambda a, b: a / b,
    "maximum": np.fmax,
    "minimum": np.fmin,
    "power": np.power,
    "less": lambda a, b: _flag(a < b),
    "less_equal": lambda a, b: _flag(a <= b),
    "greater": lambda a, b: _flag(a > b),
    "greater_equal": lambda a, b: _flag(a >= b),
    "equal": lambda a, b: _flag(a == b),
    "not_equal": lambda a, b: _flag(a != b),
    "logical_and": lambda a, b: _flag((a != 0) & (b != 0)),
    "logical_or": lambda a, b: _flag((a != 0) | (b != 0)),
}

_UNARY = {
    "exp": np.exp,
    "log": np.log,
    "copy": lambda x: x,
    "reciprocal": lambda x: _F32(1) / x,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: _F32(1) / np.sqrt(x),
    "square": lambda x: x * x,
    "abs": np.abs,
    "negative": np.negative,
    "tanh": np.tanh,
    "sigmoid": lambda x: _F32(1) / (_F32(1) + np.exp(-x)),
    "relu": lambda x: np.fmax(x, _F32(0)),
    "silu": lambda x: x / (_F32(1) + np.exp(-x)),
    "gelu": lambda x: 0.5 * x.astype(np.float64) * (1.0 + _erf(x.astype(np.float64) / math.sqrt(2.0))),
}

OPS = {name: Op(name, 2, fn) for name, fn in _BINARY.items()}
OPS.update({name: Op(name, 1, fn) for name, fn in _UNARY.items()})

COMPARISONS = {OPS[n] for n in ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal")}
REDUCTIONS = {OPS[n]: v for n, v in (("add", 0.0), ("multiply", 1.0), ("maximum", -np.inf), ("minimum", np.inf))}


def check_op(op_name, role, value, arity=None):
    """Raises unless `value` is a token (of `arity` when given)."""
    if not isinstance(value, Op):
        raise NkiError(op_name, f"{role} must be an nl operator token such as nl.add, got {value!r}")
    if arity == 2 and value.arity != 2:
        raise NkiError(op_name, f"{role}={value} is an activation function; this op takes an ALU op such as "
                                "nl.add or nl.multiply")
    if arity == 1 and value.arity != 1:
        raise NkiError(op_name, f"{role}={value} is an ALU op; activation takes an activation function such as "
                                "nl.exp or nl.copy")


def check_reduction(op_name, value):
    """Raises unless `value` can reduce (add, multiply, maximum, minimum)."""
    check_op(op_name, "reduce op", value)
    if value not in REDUCTIONS:
        raise NkiError(op_name, f"{value} cannot reduce; use nl.add, nl.maximum, nl.minimum or nl.multiply")


def identity(op):
    """The identity element of a reduction token."""
    return _F32(REDUCTIONS[op])


def combine(op, a, b):
    """`op(a, b)` for folding into the accumulator registers: a max propagates NaN."""
    if op is OPS["maximum"]:
        return np.maximum(a, b).astype(_F32)
    return op(a, b)


def reduce_rows(op, x, init):
    """Folds each row of the float32 matrix `x` with the reduction `op`, from `init`."""
    rows, n = x.shape
    if op is OPS["add"]:
        lanes = np.zeros((rows, 8), dtype=_F32)
        whole = n - n % 8
        for k in range(0, whole, 8):
            lanes += x[:, k:k + 8]
        lane_sum = np.zeros(rows, dtype=_F32)
        for k in range(8):
            lane_sum += lanes[:, k]
        tail = np.zeros(rows, dtype=_F32)
        for k in range(whole, n):
            tail += x[:, k]
        return (_F32(init) + lane_sum) + tail
    if op is OPS["multiply"]:
        acc = np.full(rows, init, dtype=_F32)
        for k in range(n):
            acc *= x[:, k]
        return acc
    pick = np.maximum if op is OPS["maximum"] else np.minimum
    return pick(_F32(init), pick.reduce(x, axis=1)).astype(_F32)
