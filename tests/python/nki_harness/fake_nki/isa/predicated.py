"""Predicated Vector-engine copy: `tensor_copy_predicated`. A predicate element
is true when nonzero (`reverse_pred` flips it)."""

import numpy as np

from ..errors import NkiError
from ..runtime import current, instruction
from ..tensor import PSUM, NkiTensor
from ..tile import Tile, column, same_geometry


def predicate_tile(op, predicate, dtypes, reverse, geometry):
    """The predicate as a boolean array (`reverse` flips it), checked for dtype and geometry."""
    p = Tile(op, "predicate", predicate)
    if predicate.dtype.name not in dtypes:
        raise NkiError(op, f"predicate {predicate.describe()} must be one of {', '.join(dtypes)}")
    same_geometry(op, "predicate", p, geometry[0], geometry[1])
    return (p.read_raw() != 0) ^ bool(reverse), p


def not_both_psum(op, ra, a, rb, b):
    """Refuses two inputs in PSUM (the engine reads at most one from it)."""
    if isinstance(a, NkiTensor) and a.buffer is PSUM and b.buffer is PSUM:
        raise NkiError(op, f"{ra} and {rb} cannot both be in PSUM")


@instruction
def tensor_copy_predicated(dst, src, predicate, reverse_pred=False, name=None):
    """dst = src (a tile of dst's dtype, or a number) where the predicate holds;
    dst keeps its value elsewhere."""
    op = "nisa.tensor_copy_predicated"
    d = Tile(op, "dst", dst)
    keep, _ = predicate_tile(op, predicate, ("uint8", "uint16", "uint32"), reverse_pred, ("dst", d))
    not_both_psum(op, "src", src, "predicate", predicate)
    if isinstance(src, NkiTensor):
        s = Tile(op, "src", src)
        same_geometry(op, "dst", d, "src", s)
        if src.dtype is not dst.dtype:
            raise NkiError(op, f"src is {src.dtype.name} but dst is {dst.dtype.name}; they must match")
        new = s.read_raw()
    else:
        new = np.broadcast_to(dst.dtype.encode(np.float32(column(op, "src", src, d.np)), current().rounds),
                              (d.np, d.nf))
    d.write_raw(np.where(keep, new, d.read_kept()))
