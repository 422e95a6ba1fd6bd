"""Element-wise ops of the Vector / Scalar / GpSimd engines: `tensor_copy`,
`memset`, `tensor_tensor`, `tensor_scalar`, `scalar_tensor_tensor`, `reciprocal`.

Arithmetic runs in float32 and rounds once to the destination dtype (in
`hardware` precision); `tensor_tensor` on all-int32/uint32 operands is exact
integer math, as on GpSimd.
"""

import numpy as np

from ..alu import INT_OPS, OPS, check_op
from ..dtypes import DTYPES
from ..errors import NkiError
from ..runtime import current, instruction
from ..tensor import PSUM
from ..tile import Tile, binary_tiles, column, not_psum, same_geometry
from .enums import engine as _engine
from .enums import member


def _reach(op, eng, tiles):
    if eng is _engine.gpsimd:
        for role, t in tiles:
            not_psum(op, role, t.tensor, "the GpSimd engine cannot access PSUM")


def _one_psum_input(op, ra, a, rb, b):
    if a.tensor.buffer is PSUM and b.tensor.buffer is PSUM:
        raise NkiError(op, f"{ra} {a.tensor.describe()} and {rb} {b.tensor.describe()} are both in PSUM; at most "
                           "one input of this op may be in PSUM")


@instruction
def tensor_copy(dst, src, engine=None, name=None):
    """On-chip copy: bit-exact for equal dtypes, through float32 otherwise."""
    op = "nisa.tensor_copy"
    s, d = Tile(op, "src", src), Tile(op, "dst", dst)
    same_geometry(op, "dst", d, "src", s)
    eng = member(op, "engine", engine, _engine, _engine.unknown)
    _reach(op, eng, [("src", s), ("dst", d)])
    if eng is _engine.scalar and current().hw.nc_version < 3:
        raise NkiError(op, "the Scalar engine has no tensor_copy on trn1; use nisa.activation with op=nl.copy")
    if src.dtype is dst.dtype:
        d.write_raw(s.read_raw())
    else:
        d.write(s.read(), current().rounds)


@instruction
def memset(dst, value, engine=None, name=None):
    """Fills an on-chip tile with a constant (an integer for integer dtypes)."""
    op = "nisa.memset"
    d = Tile(op, "dst", dst)
    _reach(op, member(op, "engine", engine, _engine, _engine.unknown), [("dst", d)])
    value = float(value)
    if dst.dtype.packs and value != 0:
        raise NkiError(op, f"dst {dst.describe()} packs four MX values per element; nisa.memset fills it with zeros "
                           f"only (all bits clear), got {value}")
    if dst.dtype.is_float:
        cell = dst.dtype.encode(np.float32(value), current().rounds)
    elif value.is_integer():
        cell = dst.dtype.saturate(int(value))
    else:
        raise NkiError(op, f"value {value} is not an integer but dst {dst.describe()} has an integer dtype")
    d.write_raw(np.full((d.np, d.nf), cell, dtype=dst.dtype.cell_type))


_INT32 = (DTYPES["int32"], DTYPES["uint32"])


@instruction
def tensor_tensor(dst, data1, data2, op, engine=None, name=None):
    """`dst = data1 op data2` element-wise."""
    name_ = "nisa.tensor_tensor"
    check_op(name_, "op", op, arity=2)
    a, b, d = binary_tiles(name_, dst, "data1", data1, "data2", data2)
    _one_psum_input(name_, "data1", a, "data2", b)
    _reach(name_, member(name_, "engine", engine, _engine, _engine.unknown),
           [("data1", a), ("data2", b), ("dst", d)])
    if all(t.dtype in _INT32 for t in (a, b, d)) and op in INT_OPS:
        d.write_raw(dst.dtype.saturate(INT_OPS[op](a.read_raw(), b.read_raw()).astype(np.int64)))
    else:
        d.write(op(a.read(), b.read()), current().rounds)


def _stage(op, x, operand, reverse):
    if op.arity == 1:
        return op(x)
    return op(operand, x) if reverse else op(x, operand)


@instruction
def tensor_scalar(dst, data, op0, operand0, reverse0=False, op1=None, operand1=None, reverse1=False, engine=None,
                  name=None):
    """`dst = (data op0 operand0) op1 operand1`; operands are scalars or (P, 1)
    columns, `reverse*` swaps an op's operands, unary ops ignore their operand."""
    op = "nisa.tensor_scalar"
    x, d = Tile(op, "data", data), Tile(op, "dst", dst)
    same_geometry(op, "dst", d, "data", x)
    _reach(op, member(op, "engine", engine, _engine, _engine.unknown), [("data", x), ("dst", d)])
    check_op(op, "op0", op0)
    c0 = column(op, "operand0", operand0, x.np)
    if (op1 is None) != (operand1 is None):
        raise NkiError(op, "op1 and operand1 must be given together")
    out = _stage(op0, x.read(), c0, reverse0)
    if op1 is not None:
        check_op(op, "op1", op1)
        out = _stage(op1, out, column(op, "operand1", operand1, x.np), reverse1)
    d.write(out, current().rounds)


@instruction
def scalar_tensor_tensor(dst, data, op0, operand0, op1, operand1, reverse0=False, reverse1=False, name=None):
    """`dst = (data op0 operand0) op1 operand1`: `operand0` a scalar or (P, 1)
    column, `operand1` a full tile."""
    op = "nisa.scalar_tensor_tensor"
    check_op(op, "op0", op0, arity=2)
    check_op(op, "op1", op1, arity=2)
    x, y, d = binary_tiles(op, dst, "data", data, "operand1", operand1)
    _one_psum_input(op, "data", x, "operand1", y)
    t = _stage(op0, x.read(), column(op, "operand0", operand0, x.np), reverse0)
    d.write(_stage(op1, t, y.read(), reverse1), current().rounds)


@instruction
def reciprocal(dst, data, name=None):
    """`dst = 1 / data` in float32 on the Vector engine."""
    op = "nisa.reciprocal"
    x, d = Tile(op, "data", data), Tile(op, "dst", dst)
    same_geometry(op, "dst", d, "data", x)
    d.write(OPS["reciprocal"](x.read()), current().rounds)
