"""Operator tokens (`nl.add`, `nl.exp`, ...) and their float32 semantics.

Binary (ALU) tokens combine two float32 arrays, comparisons giving 1.0 / 0.0;
`maximum` / `minimum` return the non-NaN operand when one is NaN. Unary tokens
are the Scalar-engine activation functions. Reductions fold rows in a fixed
order: sums use eight interleaved partial sums, max / min propagate NaN.
"""

import inspect
import math

import numpy as np

from .errors import NkiError

_F32 = np.float32


class Op:
    """One token; `arity` is 2 for ALU ops and 1 for activation functions.

    Called with NumPy arrays it computes in float32. Called with a tensor (as
    `nl.add(a, b)` in a kernel) it is the `nki.language` tile function: see
    `language.elementwise`, which installs itself as `Op.on_tiles`.
    """

    on_tiles = None

    def __init__(self, name, arity, fn):
        self.name = name
        self.arity = arity
        self._fn = fn
        kinds = inspect.Parameter.POSITIONAL_OR_KEYWORD
        names = ("x", "y")[:arity]
        self.__signature__ = inspect.Signature([inspect.Parameter(n, kinds) for n in names] +
                                               [inspect.Parameter("dtype", kinds, default=None)])

    def __repr__(self):
        return f"nl.{self.name}"

    def __call__(self, *args, dtype=None, **named):
        args = args + tuple(named.pop(n) for n in ("x", "y")[len(args):self.arity] if n in named)
        if named:
            raise TypeError(f"nl.{self.name}() got unexpected keyword arguments {sorted(named)}")
        if Op.on_tiles is not None and any(hasattr(a, "storage") for a in args):
            return Op.on_tiles(self, args, dtype)
        return np.asarray(self._fn(*args), dtype=_F32)


def _flag(cond):
    return cond.astype(_F32)


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _f64(fn):
    """`fn` evaluated in float64 on float32 inputs (rounded once to float32)."""
    return lambda x: fn(np.asarray(x, dtype=np.float64))


def _bits(fn):
    """A bitwise op on the integer values of its (float32) operands."""
    def op(*xs):
        ints = [np.trunc(np.nan_to_num(np.asarray(x, dtype=np.float64), nan=0.0)).astype(np.int64) for x in xs]
        return fn(*ints).astype(np.float64)
    return op


def _gelu(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _gelu_dx(x):
    return 0.5 * (1.0 + _erf(x / math.sqrt(2.0))) + x * np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)


def _softplus(x):
    return np.logaddexp(0.0, x)


_SIGMOID_GELU = 1.702

_BINARY = {
    "add": lambda a, b: a + b,
    "subtract": lambda a, b: a - b,
    "multiply": lambda a, b: a * b,
    "divide": lambda a, b: a / b,
    "maximum": np.fmax,
    "minimum": np.fmin,
    "power": np.power,
    "abs_max": lambda a, b: np.fmax(np.abs(a), np.abs(b)),
    "abs_min": lambda a, b: np.fmin(np.abs(a), np.abs(b)),
    "fmod": np.fmod,
    "mod": np.mod,
    "less": lambda a, b: _flag(a < b),
    "less_equal": lambda a, b: _flag(a <= b),
    "greater": lambda a, b: _flag(a > b),
    "greater_equal": lambda a, b: _flag(a >= b),
    "equal": lambda a, b: _flag(a == b),
    "not_equal": lambda a, b: _flag(a != b),
    "logical_and": lambda a, b: _flag((a != 0) & (b != 0)),
    "logical_or": lambda a, b: _flag((a != 0) | (b != 0)),
    "logical_xor": lambda a, b: _flag((a != 0) ^ (b != 0)),
    "bitwise_and": _bits(np.bitwise_and),
    "bitwise_or": _bits(np.bitwise_or),
    "bitwise_xor": _bits(np.bitwise_xor),
    "left_shift": _bits(np.left_shift),
    "right_shift": _bits(np.right_shift),
    # `average` is a reduction token (tensor_partition_reduce); as a binary op it is the mean of two.
    "average": lambda a, b: (a + b) * _F32(0.5),
    # `bypass` skips a pipeline stage: it passes its first operand through.
    "bypass": lambda a, b=None: a,
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
    "sign": np.sign,
    "ceil": np.ceil,
    "floor": np.floor,
    "trunc": np.trunc,
    "sin": _f64(np.sin),
    "cos": _f64(np.cos),
    "tan": _f64(np.tan),
    "arctan": _f64(np.arctan),
    "tanh": np.tanh,
    "sigmoid": lambda x: _F32(1) / (_F32(1) + np.exp(-x)),
    "relu": lambda x: np.fmax(x, _F32(0)),
    "silu": lambda x: x / (_F32(1) + np.exp(-x)),
    "silu_dx": _f64(lambda x: _sigmoid(x) * (1.0 + x * (1.0 - _sigmoid(x)))),
    "gelu": _f64(_gelu),
    "gelu_dx": _f64(_gelu_dx),
    "gelu_apprx_tanh": _f64(lambda x: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))),
    "gelu_apprx_sigmoid": _f64(lambda x: x * _sigmoid(_SIGMOID_GELU * x)),
    "gelu_apprx_sigmoid_dx": _f64(lambda x: _sigmoid(_SIGMOID_GELU * x) * (
        1.0 + _SIGMOID_GELU * x * (1.0 - _sigmoid(_SIGMOID_GELU * x)))),
    "erf": _f64(_erf),
    "erf_dx": _f64(lambda x: 2.0 / math.sqrt(math.pi) * np.exp(-x * x)),
    "softplus": _f64(_softplus),
    "mish": _f64(lambda x: x * np.tanh(_softplus(x))),
    "logical_not": lambda x: _flag(x == 0),
    "invert": _bits(np.invert),
    # PReLU with its slope 0 unless an instruction passes relu_param (see `prelu`).
    "prelu": lambda x: np.where(x >= 0, x, _F32(0) * x),
}

OPS = {name: Op(name, 2, fn) for name, fn in _BINARY.items()}
OPS.update({name: Op(name, 1, fn) for name, fn in _UNARY.items()})


def prelu(x, alpha):
    """PReLU: `x` where x >= 0, `alpha * x` elsewhere (float32)."""
    return np.where(x >= 0, x, np.float32(alpha) * x).astype(_F32)


# Exact integer semantics of the ALU ops on int32 / uint32 operands.
INT_OPS = {
    OPS["add"]: np.add, OPS["subtract"]: np.subtract, OPS["multiply"]: np.multiply,
    OPS["maximum"]: np.maximum, OPS["minimum"]: np.minimum, OPS["less"]: np.less,
    OPS["less_equal"]: np.less_equal, OPS["greater"]: np.greater, OPS["greater_equal"]: np.greater_equal,
    OPS["equal"]: np.equal, OPS["not_equal"]: np.not_equal, OPS["bitwise_and"]: np.bitwise_and,
    OPS["bitwise_or"]: np.bitwise_or, OPS["bitwise_xor"]: np.bitwise_xor, OPS["left_shift"]: np.left_shift,
    OPS["right_shift"]: np.right_shift, OPS["invert"]: np.invert,
}

# The "Arithmetic Unary" rows of the docs' ALU operator table: the unary tokens
# that the ALU instructions combining data with a scalar operand also take as
# their op (the operand is then ignored and must be None or 0).
ALU_UNARY = tuple(OPS[n] for n in ("abs", "square", "relu", "rsqrt", "reciprocal"))

COMPARISONS = {OPS[n] for n in ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal")}
REDUCTIONS = {OPS[n]: v for n, v in (("add", 0.0), ("multiply", 1.0), ("maximum", -np.inf), ("minimum", np.inf))}


def check_op(op_name, role, value, arity=None):
    """Raises unless `value` is a token (of `arity` when given)."""
    if not isinstance(value, Op):
        raise NkiError(op_name, f"{role} must be an nl operator token such as nl.add, got {value!r}")
    if value is OPS["bypass"]:
        return
    if arity == 2 and value.arity != 2:
        raise NkiError(op_name, f"{role}={value} is an activation function; this op takes an ALU op such as "
                                "nl.add or nl.multiply")
    if arity == 1 and value.arity != 1:
        raise NkiError(op_name, f"{role}={value} is an ALU op; activation takes an activation function such as "
                                "nl.exp or nl.copy")


def check_alu_scalar_op(op_name, role, value, operand_role, operand):
    """Raises unless `value` is an ALU op for an instruction with a scalar operand:
    a two-operand ALU token, or one of `ALU_UNARY` with `operand` None or 0."""
    check_op(op_name, role, value)
    unary = ", ".join(repr(o) for o in ALU_UNARY)
    if value.arity == 1 and value not in ALU_UNARY:
        raise NkiError(op_name, f"{role}={value} is an activation function; this op takes an ALU op such as nl.add, "
                                f"or a unary ALU op ({unary})")
    if value in ALU_UNARY and not (operand is None or (isinstance(operand, (int, float)) and operand == 0)):
        raise NkiError(op_name, f"{operand_role} must be None or 0 when {role} is the unary op {value}")


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
