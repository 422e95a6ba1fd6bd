"""Vector engine: `select_reduce`, a predicated choice with an optional row
reduction. A predicate element is true when nonzero (`reverse_pred` flips it)."""

import numpy as np
from ..alu import OPS, reduce_rows
from ..errors import NkiError
from ..runtime import current, instruction
from ..tile import Tile, column, same_geometry
from .enums import member
from .enums import reduce_cmd as _reduce_cmd
from .predicated import not_both_psum, predicate_tile
from .reduce import accumulate, write_reduce_res


@instruction
def select_reduce(dst, predicate, on_true, on_false, reduce_res=None, reduce_cmd=None, reduce_op=None,
                  reverse_pred=False, name=None):
    """dst = on_true where the predicate holds, else on_false (a number or a (P, 1)
    column); with a reduce_cmd other than idle each row's maximum folds into the
    Vector accumulators, which `reduce_res` (if given) receives."""
    op = "nisa.select_reduce"
    t, d = Tile(op, "on_true", on_true), Tile(op, "dst", dst)
    same_geometry(op, "dst", d, "on_true", t)
    if on_true.dtype.name in ("tfloat32", "int32", "uint32"):
        raise NkiError(op, f"on_true {on_true.describe()}: {on_true.dtype.name} is not supported")
    keep, _ = predicate_tile(op, predicate, ("int8", "uint8", "int16", "uint16"), reverse_pred, ("on_true", t))
    not_both_psum(op, "on_true", on_true, "predicate", predicate)
    reduce_op = OPS["maximum"] if reduce_op is None else reduce_op
    if reduce_op is not OPS["maximum"]:
        raise NkiError(op, f"reduce_op must be nl.maximum, got {reduce_op!r}")
    cmd = member(op, "reduce_cmd", reduce_cmd, _reduce_cmd, _reduce_cmd.idle)
    out = np.where(keep, t.read(), column(op, "on_false", on_false, t.np)).astype(np.float32)
    prog = current()
    d.write(out, prog.rounds)
    if cmd is not _reduce_cmd.idle:
        regs = accumulate(prog.vector_acc, reduce_op, cmd, reduce_rows(reduce_op, out, -np.inf))
        if reduce_res is not None:
            write_reduce_res(op, reduce_res, regs)
    elif reduce_res is not None:
        raise NkiError(op, "reduce_res needs a reduce_cmd other than idle")
