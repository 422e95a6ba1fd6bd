"""The element-wise tile functions: every operator token called on tiles
(`nl.add(a, b)`, `nl.exp(x, dtype=nl.bfloat16)`), plus `nl.where`.

Operands are tiles or numbers and broadcast as in NumPy; the result is a new
SBUF tile of the broadcast shape in `dtype` (default: `operands.result_dtype`).
Comparisons give 1.0 / 0.0. Integer tiles under an integer ALU op
(`alu.INT_OPS`) compute exactly and saturate into the result dtype; `invert`
flips the bits of the result dtype's width (`hi - v` for an unsigned one).
"""

import numpy as np

from ..alu import INT_OPS, OPS, Op
from ..errors import NkiError
from ..runtime import instruction
from ..tensor import NkiTensor
from .operands import new_cells_tile, new_tile, on_chip, result_dtype, values


@instruction
def on_tiles(op, args, dtype):
    """`op` applied element-wise to tile / number operands `args`."""
    name = f"nl.{op.name}"
    if len(args) != op.arity:
        raise NkiError(name, f"takes {op.arity} operand{'s' if op.arity > 1 else ''}, got {len(args)}")
    tiles = [on_chip(name, f"operand {i}", a) for i, a in enumerate(args) if isinstance(a, NkiTensor)]
    out_dtype = dtype or result_dtype(tiles)
    try:
        shape = np.broadcast_shapes(*(t.shape for t in tiles))
    except ValueError:
        raise NkiError(name, "operand shapes " + " and ".join(str(list(t.shape)) for t in tiles) +
                       " do not broadcast") from None
    exact = op in INT_OPS and not out_dtype.is_float and all(not t.dtype.is_float for t in tiles) and \
        all(isinstance(a, NkiTensor) or float(a).is_integer() for a in args)
    if exact:
        ints = [a.dtype.to_int(a.read_cells()) if isinstance(a, NkiTensor) else np.int64(a) for a in args]
        out = np.broadcast_to(INT_OPS[op](*ints).astype(np.int64), shape)
        if op is OPS["invert"] and out_dtype.lo == 0:
            # NOT of an unsigned value flips the bits of its width: hi - v.
            out = out & out_dtype.hi
        return new_cells_tile(name, out_dtype.saturate(out), out_dtype)
    vals = [values(name, f"operand {i}", a) for i, a in enumerate(args)]
    return new_tile(name, np.broadcast_to(op(*vals), shape).astype(np.float32), out_dtype)


Op.on_tiles = on_tiles


@instruction
def where(condition, x, y, dtype=None):
    """`x` where `condition` is nonzero, else `y` (tiles or numbers, broadcast)."""
    op = "nl.where"
    tiles = [on_chip(op, r, t) for r, t in (("condition", condition), ("x", x), ("y", y)) if isinstance(t, NkiTensor)]
    branches = [t for t in (x, y) if isinstance(t, NkiTensor)]
    out_dtype = dtype or (result_dtype(branches) if branches else result_dtype(tiles))
    c, a, b = (values(op, r, t) for r, t in (("condition", condition), ("x", x), ("y", y)))
    try:
        out = np.where(c != 0, a, b).astype(np.float32)
    except ValueError:
        raise NkiError(op, "condition, x and y do not broadcast to one shape") from None
    return new_tile(op, out, out_dtype)

