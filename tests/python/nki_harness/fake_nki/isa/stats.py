"""Vector-engine statistics: `bn_stats` and `bn_aggr`.

`bn_stats` writes per partition (count, mean, variance * count) of the even
free elements, then of the odd ones; `bn_aggr` merges any number of such
triples into (mean, variance), the population variance of all elements. Both
compute in float32: means as sums over counts, M2 as the sum of squared
deviations from the group mean, merged with the parallel-variance formula.
"""

import numpy as np

from ..alu import OPS, reduce_rows
from ..errors import NkiError
from ..runtime import current, instruction
from ..tile import Tile

_F32 = np.float32


def _triple(x):
    """(count, mean, M2) of each row of `x` (float32 rows x n)."""
    n = x.shape[1]
    if n == 0:
        zero = np.zeros(x.shape[0], dtype=_F32)
        return zero, zero, zero
    mean = reduce_rows(OPS["add"], x, 0.0) / _F32(n)
    dev = (x - mean[:, None]).astype(_F32)
    return np.full(x.shape[0], n, dtype=_F32), mean, reduce_rows(OPS["add"], dev * dev, 0.0)


@instruction
def bn_stats(dst, data, name=None):
    """dst[p] = (count, mean, var * count) of data[p]'s even elements, then of its odd ones."""
    op = "nisa.bn_stats"
    x, d = Tile(op, "data", data), Tile(op, "dst", dst)
    hw = current().hw
    if x.nf > hw.bn_stats_fmax:
        raise NkiError(op, f"data {data.describe()} has {x.nf} elements per partition > bn_stats_fmax "
                           f"{hw.bn_stats_fmax}")
    if (d.np, d.nf) != (x.np, 6):
        raise NkiError(op, f"dst {dst.describe()} must be {x.np} partitions x 6 elements, it is {d.np} x {d.nf}")
    v = x.read()
    out = np.stack(_triple(v[:, 0::2]) + _triple(v[:, 1::2]), axis=1)
    d.write(out, current().rounds)


@instruction
def bn_aggr(dst, data, name=None):
    """dst[p] = (mean, variance) of every element the bn_stats triples of data[p] describe."""
    op = "nisa.bn_aggr"
    x, d = Tile(op, "data", data), Tile(op, "dst", dst)
    if x.nf % 3:
        raise NkiError(op, f"data {data.describe()} has {x.nf} elements per partition, not whole "
                           "(count, mean, var * count) triples")
    if (d.np, d.nf) != (x.np, 2):
        raise NkiError(op, f"dst {dst.describe()} must be {x.np} partitions x 2 elements, it is {d.np} x {d.nf}")
    t = x.read().reshape(x.np, -1, 3)
    count, mean, m2 = t[:, :, 0], t[:, :, 1], t[:, :, 2]
    n = reduce_rows(OPS["add"], count, 0.0)
    safe = np.where(n > 0, n, _F32(1))
    mu = reduce_rows(OPS["add"], (count * mean).astype(_F32), 0.0) / safe
    spread = (m2 + count * (mean - mu[:, None]) ** 2).astype(_F32)
    var = reduce_rows(OPS["add"], spread, 0.0) / safe
    d.write(np.stack([mu, var], axis=1), current().rounds)
