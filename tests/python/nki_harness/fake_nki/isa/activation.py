"""Scalar engine: `activation` and `activation_reduce`."""

import numpy as np

from ..alu import OPS, check_op, reduce_rows
from ..errors import NkiError
from ..runtime import current, instruction
from ..tensor import NkiTensor
from ..tile import Tile, column, same_geometry
from .enums import member
from .enums import reduce_cmd as _reduce_cmd
from .reduce import accumulate, write_reduce_res


def _activate(name, dst, op, data, bias, scale, reduce_op, reduce_res, reduce_cmd):
    check_op(name, "op", op, arity=1)
    x, d = Tile(name, "data", data), Tile(name, "dst", dst)
    same_geometry(name, "dst", d, "data", x)
    prog = current()
    s = column(name, "scale", scale, x.np)
    if bias is not None and not isinstance(bias, NkiTensor) and not prog.hw.has_scalar_activation_bias:
        raise NkiError(name, f"a scalar bias needs trn2 or later; on {prog.hw.name} pass a (P, 1) column")
    b = np.float32(0) if bias is None else column(name, "bias", bias, x.np)
    cmd = member(name, "reduce_cmd", reduce_cmd, _reduce_cmd, _reduce_cmd.idle)
    reduces = reduce_op is not None or reduce_res is not None or cmd is not _reduce_cmd.idle
    if reduce_op is not None and reduce_op is not OPS["add"]:
        raise NkiError(name, f"reduce_op must be nl.add on the Scalar engine, got {reduce_op!r}")
    if cmd is _reduce_cmd.load_reduce:
        raise NkiError(name, "reduce_cmd=load_reduce is not available on the Scalar engine")
    out = op(x.read() * s + b)
    d.write(out, prog.rounds)
    if reduces:
        regs = accumulate(prog.scalar_acc, OPS["add"], cmd, reduce_rows(OPS["add"], out, 0.0))
        if reduce_res is not None:
            write_reduce_res(name, reduce_res, regs)


@instruction
def activation(dst, op, data, bias=None, scale=1.0, reduce_op=None, reduce_res=None, reduce_cmd=None, name=None):
    """`dst = op(data * scale + bias)` in float32 (multiply, then add), rounded once
    to `dst.dtype`. With a reduction, each row's float32 outputs are summed into
    the Scalar engine accumulators per `reduce_cmd` (default `idle`), and
    `reduce_res` (if given) receives them."""
    _activate("nisa.activation", dst, op, data, bias, scale, reduce_op, reduce_res, reduce_cmd)


@instruction
def activation_reduce(dst, op, data, reduce_op, reduce_res, bias=None, scale=1.0, name=None):
    """`activation` with `reduce_cmd=reset_reduce`: `reduce_res` receives each row's sum."""
    _activate("nisa.activation_reduce", dst, op, data, bias, scale, reduce_op, reduce_res,
              _reduce_cmd.reset_reduce)
