"""Predicated Vector-engine copies: `tensor_copy_predicated` and
`select_reduce`. A predicate element is true when nonzero (`reverse_pred`
flips it)."""

import numpy as np

from ..alu import OPS, reduce_rows
from ..errors import NkiError
from ..runtime import current, instruction
from ..tensor import PSUM, NkiTensor
from ..tile import Tile, column, same_geometry
from .enums import member
from .enums import reduce_cmd as _reduce_cmd
from .reduce import accumulate, write_reduce_res


def _predicate(op, predicate, dtypes, reverse, geometry):
    p = Tile(op, "predicate", predicate)
    if predicate.dtype.name not in dtypes:
        raise NkiError(op, f"predicate {predicate.describe()} must be one of {', '.join(dtypes)}")
    same_geometry(op, "predicate", p, geometry[0], geometry[1])
    return (p.read_raw() != 0) ^ bool(reverse), p


def _not_both_psum(op, ra, a, rb, b):
    if isinstance(a, NkiTensor) and a.buffer is PSUM and b.buffer is PSUM:
        raise NkiError(op, f"{ra} and {rb} cannot both be in PSUM")


@instruction
def tensor_copy_predicated(dst, src, predicate, reverse_pred=False, name=None):
    """dst = src (a tile of dst's dtype, or a number) where the predicate holds;
    dst keeps its value elsewhere."""
    op = "nisa.tensor_copy_predicated"
    d = Tile(op, "dst", dst)
    keep, _ = _predicate(op, predicate, ("uint8", "uint16", "uint32"), reverse_pred, ("dst", d))
    _not_both_psum(op, "src", src, "predicate", predicate)
    if isinstance(src, NkiTensor):
        s = Tile(op, "src", src)
        same_geometry(op, "dst", d, "src", s)
        if src.dtype is not dst.dtype:
            raise NkiError(op, f"src is {src.dtype.name} but dst is {dst.dtype.name}; they must match")
        new = s.read_raw()
    else:
        new = np.broadcast_to(dst.dtype.encode(np.float32(column(op, "src", src, d.np)), current().rounds),
                              (d.np, d.nf))
    d.write_raw(np.where(keep, new, d.read_raw()))


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
    keep, _ = _predicate(op, predicate, ("int8", "uint8", "int16", "uint16"), reverse_pred, ("on_true", t))
    _not_both_psum(op, "on_true", on_true, "predicate", predicate)
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
