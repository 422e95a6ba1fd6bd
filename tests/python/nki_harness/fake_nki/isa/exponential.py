"""Vector engine: `exponential`."""

import numpy as np
from ..alu import OPS, reduce_rows
from ..errors import NkiError
from ..runtime import current, instruction
from ..tile import Tile, column, same_geometry
from .enums import member
from .enums import reduce_cmd as _reduce_cmd
from .reduce import accumulate, write_reduce_res


@instruction
def exponential(dst, src, max_value=0.0, reduce_res=None, reduce_cmd=None, reduce_init=0.0, name=None):
    """`dst = exp(src - max_value)` in float32 on the Vector engine (`max_value` a
    number or a (P, 1) column); with a reduce_cmd, each row's float32 results are
    summed into the Vector accumulators (`load_reduce` starts from `reduce_init`).
    NeuronCore-v4+."""
    op = "nisa.exponential"
    prog = current()
    if prog.hw.nc_version < 4:
        raise NkiError(op, f"exponential needs NeuronCore-v4 (trn3); the launch targets {prog.hw.name}")
    x, d = Tile(op, "src", src), Tile(op, "dst", dst)
    same_geometry(op, "dst", d, "src", x)
    if src.ndim > 4 or dst.ndim > 4:
        raise NkiError(op, "src and dst must be at most 4-d")
    cmd = member(op, "reduce_cmd", reduce_cmd, _reduce_cmd, _reduce_cmd.idle)
    if cmd is _reduce_cmd.reset:
        raise NkiError(op, "reduce_cmd must be idle, reset_reduce, reduce or load_reduce")
    init = column(op, "reduce_init", reduce_init, x.np)
    if cmd is not _reduce_cmd.load_reduce and np.any(init != 0):
        raise NkiError(op, "reduce_init must be 0.0 unless reduce_cmd is load_reduce")
    out = OPS["exp"](x.read() - column(op, "max_value", max_value, x.np))
    d.write(out, prog.rounds)
    if cmd is not _reduce_cmd.idle:
        regs = accumulate(prog.vector_acc, OPS["add"], cmd, reduce_rows(OPS["add"], out, 0.0), init)
        if reduce_res is not None:
            write_reduce_res(op, reduce_res, regs)
    elif reduce_res is not None:
        raise NkiError(op, "reduce_res needs a reduce_cmd other than idle")
