"""Vector-engine scans along the free elements of each partition:
`tensor_tensor_scan` and `tensor_scalar_cumulative` (in float32)."""

import numpy as np

from ..alu import OPS, check_op
from ..errors import NkiError
from ..runtime import current, instruction
from ..tensor import PSUM
from ..tile import Tile, column, same_geometry
from .enums import member
from .enums import reduce_cmd as _reduce_cmd


@instruction
def tensor_tensor_scan(dst, data0, data1, initial, op0, op1, reverse0=False, reverse1=False, name=None):
    """`r[i] = op1(op0(data0[i], r[i - 1]), data1[i])` from `r[-1] = initial`
    (a number or a (P, 1) column); `reverse0` / `reverse1` swap an op's operands."""
    op = "nisa.tensor_tensor_scan"
    check_op(op, "op0", op0, arity=2)
    check_op(op, "op1", op1, arity=2)
    a, b, d = Tile(op, "data0", data0), Tile(op, "data1", data1), Tile(op, "dst", dst)
    same_geometry(op, "data0", a, "data1", b)
    same_geometry(op, "dst", d, "data0", a)
    if data0.buffer is PSUM and data1.buffer is PSUM:
        raise NkiError(op, "data0 and data1 cannot both be in PSUM")
    x, y = a.read(), b.read()
    r = np.broadcast_to(column(op, "initial", initial, a.np), (a.np, 1))[:, 0].astype(np.float32)
    out = np.empty_like(x)
    for i in range(a.nf):
        t = op0(r, x[:, i]) if reverse0 else op0(x[:, i], r)
        r = op1(y[:, i], t) if reverse1 else op1(t, y[:, i])
        out[:, i] = r
    d.write(out, current().rounds)


_CUMULATIVE = {"add": 0.0, "subtract": 0.0, "multiply": 1.0, "maximum": -np.inf, "minimum": np.inf}


@instruction
def tensor_scalar_cumulative(dst, src, op0, op1, imm0, imm1=None, reduce_cmd=None, name=None):
    """`reg = op1(op0(src[i], imm0), reg); dst[i] = reg` along each partition.
    `reg` starts per `reduce_cmd` (default reset_reduce): op1's identity, the
    Vector accumulators (`reduce`) or `imm1` (`load_reduce`); its final value
    stays in the Vector accumulators."""
    op = "nisa.tensor_scalar_cumulative"
    check_op(op, "op0", op0, arity=2)
    check_op(op, "op1", op1, arity=2)
    if op1.name not in _CUMULATIVE:
        raise NkiError(op, f"op1 must be nl.add, nl.subtract, nl.multiply, nl.maximum or nl.minimum, got {op1!r}")
    cmd = member(op, "reduce_cmd", reduce_cmd, _reduce_cmd, _reduce_cmd.reset_reduce)
    if cmd not in (_reduce_cmd.reset_reduce, _reduce_cmd.reduce, _reduce_cmd.load_reduce):
        raise NkiError(op, f"reduce_cmd must be reset_reduce, reduce or load_reduce, got {cmd.name}")
    if (imm1 is not None) != (cmd is _reduce_cmd.load_reduce):
        raise NkiError(op, "imm1 must be given exactly when reduce_cmd is load_reduce")
    s, d = Tile(op, "src", src), Tile(op, "dst", dst)
    same_geometry(op, "dst", d, "src", s)
    for role, t in (("src", src), ("dst", dst)):
        if t.dtype.name in ("int32", "uint32", "tfloat32"):
            raise NkiError(op, f"{role} {t.describe()}: {t.dtype.name} is not a supported dtype of this instruction")
    prog = current()
    if cmd is _reduce_cmd.reset_reduce:
        reg = np.full(s.np, _CUMULATIVE[op1.name], dtype=np.float32)
    elif cmd is _reduce_cmd.reduce:
        reg = prog.vector_acc[:s.np].copy()
    else:
        reg = np.broadcast_to(column(op, "imm1", imm1, s.np), (s.np, 1))[:, 0].astype(np.float32)
    x, c = s.read(), column(op, "imm0", imm0, s.np)
    c = np.broadcast_to(c, (s.np, 1))[:, 0]
    out = np.empty_like(x)
    for i in range(s.nf):
        reg = op1(op0(x[:, i], c), reg)
        out[:, i] = reg
    prog.vector_acc[:s.np] = reg
    d.write(out, prog.rounds)


_PARTITION_REDUCE = ("add", "average", "maximum", "bitwise_or", "bitwise_and")


@instruction
def tensor_partition_reduce(dst, op, data, name=None):
    """dst (1 partition) = `op` folded over the partitions of data, in partition
    order (nl.add, nl.average = sum / P, nl.maximum, nl.bitwise_or, nl.bitwise_and);
    GpSimd engine, SBUF only."""
    name_ = "nisa.tensor_partition_reduce"
    check_op(name_, "op", op, arity=2)
    if op.name not in _PARTITION_REDUCE:
        raise NkiError(name_, f"op must be one of {', '.join('nl.' + n for n in _PARTITION_REDUCE)}, got {op!r}")
    x, d = Tile(name_, "data", data), Tile(name_, "dst", dst)
    for role, t in (("data", data), ("dst", dst)):
        if t.buffer is PSUM:
            raise NkiError(name_, f"{role} {t.describe()} cannot be in PSUM: the GpSimd engine cannot access PSUM")
    if (d.np, d.nf) != (1, x.nf):
        raise NkiError(name_, f"dst {dst.describe()} must be 1 partition x {x.nf} elements, it is {d.np} x {d.nf}")
    v = x.read()
    fold = OPS["add"] if op.name == "average" else op
    acc = v[0]
    for p in range(1, x.np):
        acc = fold(acc, v[p])
    if op.name == "average":
        acc = acc / np.float32(x.np)
    d.write(acc.reshape(1, -1), current().rounds)
