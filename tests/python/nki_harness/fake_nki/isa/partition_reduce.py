"""GpSimd: `tensor_partition_reduce`."""

import numpy as np
from ..alu import OPS, check_op
from ..errors import NkiError
from ..runtime import current, instruction
from ..tensor import PSUM
from ..tile import Tile


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
