"""Free-axis reductions (`tensor_reduce`, `tensor_scalar_reduce`) and the
engines' accumulator registers that `reduce_cmd` drives.

Each program has two register files of `pmax` float32 values, NaN until reset:
the Vector engine's (`tensor_scalar_reduce`, `range_select`) and the Scalar
engine's (`activation`, `activation_reduce`). Register `i` belongs to partition
row `i` of the instruction's tile.
"""

import math

import numpy as np

from ..alu import check_alu_scalar_op, check_reduction, combine, identity, reduce_rows
from ..errors import NkiError
from ..runtime import current, instruction
from ..tile import Tile, column, same_geometry
from .enums import member
from .enums import reduce_cmd as _reduce_cmd


def accumulate(regs, op, cmd, row_values, init=None):
    """Applies `cmd` to the first `len(row_values)` registers of `regs` given each
    row's reduction; returns their new values."""
    n = len(row_values)
    if cmd is _reduce_cmd.reset:
        regs[:n] = identity(op)
    elif cmd is _reduce_cmd.reduce:
        regs[:n] = combine(op, regs[:n], row_values)
    elif cmd is _reduce_cmd.reset_reduce:
        regs[:n] = combine(op, identity(op), row_values)
    elif cmd is _reduce_cmd.load_reduce:
        regs[:n] = combine(op, np.broadcast_to(np.nan if init is None else init, (n, 1))[:, 0], row_values)
    return regs[:n].copy()


def write_reduce_res(op, res, values, negate=False):
    """Writes register values into the (P, 1) tile `res` (negated when asked)."""
    tile = Tile(op, "reduce_res", res)
    if (tile.np, tile.nf) != (len(values), 1):
        raise NkiError(op, f"reduce_res {res.describe()} must be a ({len(values)}, 1) column, it is "
                           f"{tile.np} x {tile.nf}")
    tile.write((-values if negate else values).reshape(-1, 1), current().rounds)


@instruction
def tensor_reduce(dst, op, data, axis, negate=False, keepdims=False, name=None):
    """Reduces the trailing free dims `axis` of `data` with `op` in float32
    (`negate` flips the sign; `keepdims` has no numeric effect)."""
    name_ = "nisa.tensor_reduce"
    check_reduction(name_, op)
    x, d = Tile(name_, "data", data), Tile(name_, "dst", dst)
    nd = data.ndim
    axes = sorted(a + nd if a < 0 else a for a in (axis if isinstance(axis, (tuple, list)) else (axis,)))
    trailing = bool(axes) and axes[0] >= 1 and axes == list(range(axes[0], axes[0] + len(axes))) \
        and axes[-1] == nd - 1
    if not trailing:
        raise NkiError(name_, f"axis {axis} of data {data.describe()} must name the last free dims, ending at dim "
                              f"{nd - 1} (the partition dim 0 cannot be reduced)")
    inner = math.prod(data.shape[a] for a in axes)
    outer = x.nf // max(inner, 1)
    if (d.np, d.nf) != (x.np, outer):
        raise NkiError(name_, f"dst {dst.describe()} must hold {x.np} partitions x {outer} elements (the data's "
                              f"unreduced free dims), it holds {d.np} x {d.nf}")
    rows = reduce_rows(op, x.read().reshape(x.np * outer, inner), identity(op))
    d.write((-rows if negate else rows).reshape(d.np, d.nf), current().rounds)


@instruction
def tensor_scalar_reduce(dst, data, op0, operand0, reduce_op, reduce_res=None, reverse0=False, reduce_cmd=None,
                         reduce_init=None, reduce_res_negate=False, name=None):
    """`dst = data op0 operand0`; each row's float32 results fold into the Vector
    engine accumulators with `reduce_op` per `reduce_cmd` (default `reset_reduce`),
    and `reduce_res` (if given) receives them."""
    op = "nisa.tensor_scalar_reduce"
    check_reduction(op, reduce_op)
    check_alu_scalar_op(op, "op0", op0, "operand0", operand0)
    if reverse0:
        raise NkiError(op, "reverse0=True is not supported by tensor_scalar_reduce")
    cmd = member(op, "reduce_cmd", reduce_cmd, _reduce_cmd, _reduce_cmd.reset_reduce)
    if (reduce_init is not None) != (cmd is _reduce_cmd.load_reduce):
        raise NkiError(op, "reduce_init must be given exactly when reduce_cmd is load_reduce")
    x, d = Tile(op, "data", data), Tile(op, "dst", dst)
    same_geometry(op, "dst", d, "data", x)
    out = op0(x.read()) if op0.arity == 1 else op0(x.read(), column(op, "operand0", operand0, x.np))
    init = None if reduce_init is None else column(op, "reduce_init", reduce_init, x.np)
    rows = reduce_rows(reduce_op, out, identity(reduce_op))
    d.write(out, current().rounds)
    regs = accumulate(current().vector_acc, reduce_op, cmd, rows, init)
    if reduce_res is not None:
        write_reduce_res(op, reduce_res, regs, reduce_res_negate)
