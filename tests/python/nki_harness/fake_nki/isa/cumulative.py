"""Vector engine: `tensor_scalar_cumulative`, a running reduction along the
free elements of each partition (in float32)."""

import numpy as np
from ..alu import check_op
from ..errors import NkiError
from ..runtime import current, instruction
from ..tile import Tile, column, same_geometry
from .enums import member
from .enums import reduce_cmd as _reduce_cmd


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
