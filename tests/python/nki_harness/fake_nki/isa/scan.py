"""Vector-engine scan along the free elements of each partition:
`tensor_tensor_scan` (in float32)."""

import numpy as np

from ..alu import check_op
from ..errors import NkiError
from ..runtime import current, instruction
from ..tensor import PSUM
from ..tile import binary_tiles, column


@instruction
def tensor_tensor_scan(dst, data0, data1, initial, op0, op1, reverse0=False, reverse1=False, name=None):
    """`r[i] = op1(op0(data0[i], r[i - 1]), data1[i])` from `r[-1] = initial`
    (a number or a (P, 1) column); `reverse0` / `reverse1` swap an op's operands."""
    op = "nisa.tensor_tensor_scan"
    check_op(op, "op0", op0, arity=2)
    check_op(op, "op1", op1, arity=2)
    a, b, d = binary_tiles(op, dst, "data0", data0, "data1", data1)
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
