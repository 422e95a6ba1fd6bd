"""Allocation: `nl.ndarray` and the filled constructors (`zeros`, `ones`,
`full`, `*_like`, `shared_constant`, `shared_identity_matrix`)."""

import math
import operator
from pathlib import Path

import numpy as np

from ..dtypes import DTYPES, DType
from ..errors import NkiError
from ..runtime import current, instruction
from ..tensor import PSUM, SHARED_HBM, NkiTensor, allocate
from .buffers import SBUF, as_buffer


@instruction
def ndarray(shape, dtype, buffer=SBUF, name="", address=None):
    """A new uninitialised tensor (floats read as NaN until written).

    On-chip tensors hold at most `pmax` partitions. A PSUM tensor may span several
    2 KiB banks per partition, up to all of PSUM (a matmul still writes at most
    `gemm_moving_fmax` columns). They are tiles of their program's memory
    (see `memory`): they hold SBUF bytes or PSUM banks from their first use to
    their last, and `address=(partition, byte)` places one at fixed bytes, which
    it shares with every tile whose placement overlaps (a PSUM address starts a
    bank). The n-th `shared_hbm` allocation of a program is one tensor for every
    program of its rank.
    """
    op = "nl.ndarray"
    prog = current()
    label = name or "tensor"
    try:
        dims = tuple(operator.index(d) for d in shape)
    except TypeError:
        raise NkiError(op, f"tensor '{label}' has shape {shape!r}; dims must be integers") from None
    if not dims or min(dims) < 1:
        raise NkiError(op, f"tensor '{label}' has shape {list(dims)}; every dim must be at least 1")
    if not isinstance(dtype, DType):
        raise NkiError(op, f"dtype of '{label}' must be an nl dtype such as nl.float32, got {dtype!r}")
    buffer = as_buffer(op, f"buffer of '{label}'", buffer)
    if buffer.on_chip:
        if dims[0] > prog.hw.pmax:
            raise NkiError(op, f"{buffer.label} tensor '{label}' has partition dim {dims[0]} > pmax {prog.hw.pmax} "
                               "(dim 0 of an on-chip tensor is the partition dim)")
        per_partition = math.prod(dims[1:]) * dtype.size
        if buffer is PSUM and per_partition > prog.hw.psum_banks * prog.hw.psum_bank_bytes:
            raise NkiError(op, f"PSUM tensor '{label}' {list(dims)} {dtype.name} needs {per_partition} B per "
                               f"partition, more than PSUM holds on {prog.hw.name} "
                               f"({prog.hw.psum_banks} banks of {prog.hw.psum_bank_bytes} B)")
    if buffer.on_chip:
        return allocate(label, dtype, buffer, dims, prog.memory, address)
    if buffer is not SHARED_HBM:
        return allocate(label, dtype, buffer, dims)

    def check(t):
        if t.shape != dims or t.dtype is not dtype:
            raise NkiError(op, f"programs of one rank allocated different shared_hbm tensors at the same point: "
                               f"'{label}' {list(dims)} {dtype.name} vs {t.describe()}")

    return prog.shared_allocation(lambda: allocate(label, dtype, buffer, dims), check)


def _fill(op, t, value):
    """Writes `value` into every element of the new tensor `t`."""
    d = t.dtype
    cells = d.encode(np.full(t.shape, value, dtype=np.float32), current().rounds)
    t.write_cells(cells, op)
    return t


@instruction
def _filled(op, shape, value, dtype, buffer, name):
    return _fill(op, ndarray(shape, dtype, buffer, name), value)


def zeros(shape, dtype, buffer=SBUF, name=""):
    """A new tensor of zeros."""
    return _filled("nl.zeros", shape, 0.0, dtype, buffer, name)


def ones(shape, dtype, buffer=SBUF, name=""):
    """A new tensor of ones."""
    return _filled("nl.ones", shape, 1.0, dtype, buffer, name)


def full(shape, fill_value, dtype, buffer=SBUF, name=""):
    """A new tensor holding `fill_value` everywhere (rounded to `dtype`)."""
    return _filled("nl.full", shape, float(fill_value), dtype, buffer, name)


def _like(op, x, dtype, buffer):
    if not isinstance(x, NkiTensor):
        raise NkiError(op, f"x must be a tensor, got {x!r}")
    return x.shape, dtype or x.dtype, x.buffer if buffer is None else buffer


def zeros_like(x, dtype=None, buffer=None, name=""):
    """Zeros shaped like `x` (its dtype and buffer unless given)."""
    shape, dtype, buffer = _like("nl.zeros_like", x, dtype, buffer)
    return zeros(shape, dtype, buffer, name)


def empty_like(x, dtype=None, buffer=None, name=""):
    """An uninitialised tensor shaped like `x` (its dtype and buffer unless given)."""
    shape, dtype, buffer = _like("nl.empty_like", x, dtype, buffer)
    return ndarray(shape, dtype, buffer, name)


# NKI dtypes of NumPy arrays; float64 and int64 arrays (NumPy's defaults) store
# as float32 and int32.
_NUMPY_DTYPES = {"float64": "float32", "int64": "int32", "bool": "bool_"}
_NUMPY_DTYPES.update((name, name) for name in ("float32", "float16", "bfloat16", "int32", "int16", "int8", "uint32",
                                               "uint16", "uint8", "float8_e4m3", "float8_e4m3fn", "float8_e5m2",
                                               "float8_e8m0fnu"))


def numpy_dtype(op, np_dtype):
    """The NKI dtype of a NumPy dtype."""
    name = _NUMPY_DTYPES.get(np.dtype(np_dtype).name)
    if name is None:
        raise NkiError(op, f"NumPy dtype {np.dtype(np_dtype).name} has no NKI dtype "
                           f"(supported: {', '.join(sorted(_NUMPY_DTYPES))})")
    return DTYPES[name]


@instruction
def shared_constant(constant):
    """A shared-HBM tensor holding `constant` (an array or a `.npy` path), one per
    rank: both programs of an LNC2 pair see the same tensor."""
    op = "nl.shared_constant"
    array = np.load(constant) if isinstance(constant, (str, Path)) else np.asarray(constant)
    dtype = numpy_dtype(op, array.dtype)
    shape = array.shape or (1,)
    values = array.reshape(shape)
    cells = dtype.encode(values.astype(np.float32), True) if dtype.is_float or dtype.boolean \
        else dtype.saturate(values.astype(np.int64))

    def make():
        t = allocate("constant", dtype, SHARED_HBM, shape)
        t.write_cells(cells, op)
        return t

    def check(t):
        if t.shape != shape or not np.array_equal(t.read_cells(), cells, equal_nan=True):
            raise NkiError(op, "programs of one rank created different shared constants at the same point")

    return current().shared_allocation(make, check)


@instruction
def shared_identity_matrix(n, dtype=DTYPES["uint8"], dst=None):
    """An n x n identity matrix in SBUF (written into `dst` when given)."""
    op = "nl.shared_identity_matrix"
    n = operator.index(n)
    if dst is None:
        dst = ndarray((n, n), dtype, SBUF, "identity")
    elif not isinstance(dst, NkiTensor) or dst.shape != (n, n):
        raise NkiError(op, f"dst must be an ({n}, {n}) tensor, got {dst!r}")
    dst.write_cells(dst.dtype.encode(np.eye(n, dtype=np.float32), True), op)
    return dst
