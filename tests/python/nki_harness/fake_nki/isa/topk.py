"""GpSimd: `topk`. Values rank as in `top8` (NaN above every number, the lower
position first on ties)."""

import numpy as np
from ..errors import NkiError
from ..runtime import current, instruction
from ..tensor import SBUF, NkiTensor, describe
from ..tile import Tile
from .top8 import largest, rank_key


_SNAKE = 16


_K_MAX = 32767


@instruction
def topk(val_dst, idx_dst, src, n, name=None):
    """Each group of 16 partitions holds one snake of `n` bf16 values (element e
    at partition e % 16, column e // 16); every partition of the group receives
    the group's K largest values in ascending order (equal values by position)
    and their snake positions."""
    op = "nisa.topk"
    for role, t, dtype in (("src", src, "bfloat16"), ("val_dst", val_dst, "bfloat16"), ("idx_dst", idx_dst, "uint32")):
        if not isinstance(t, NkiTensor) or t.buffer is not SBUF or t.dtype.name != dtype:
            raise NkiError(op, f"{role} must be a {dtype} SBUF tile, got {describe(t)}")
    s, vd, idd = Tile(op, "src", src), Tile(op, "val_dst", val_dst), Tile(op, "idx_dst", idx_dst)
    k = vd.nf
    if s.np % _SNAKE or (vd.np, idd.np, idd.nf) != (s.np, s.np, k):
        raise NkiError(op, f"src, val_dst and idx_dst must share a partition count that is a multiple of 16, and "
                           f"val_dst / idx_dst must both be [P, K]; got {s.np}, {vd.np} x {k}, {idd.np} x {idd.nf}")
    if not 8 <= n < 65536 or not 1 <= k <= min(n, _K_MAX) or s.nf * _SNAKE < n:
        raise NkiError(op, f"n = {n}, K = {k}: need 8 <= n < 65536, 1 <= K <= n, K <= {_K_MAX} and src free size >= ceil(n / 16) "
                           f"(it is {s.nf})")
    v = s.read()
    vals, idxs = np.zeros((s.np, k), dtype=np.float32), np.zeros((s.np, k), dtype=np.int64)
    for g in range(0, s.np, _SNAKE):
        snake = v[g:g + _SNAKE].T.reshape(-1)[:n]
        best = largest(snake, k)
        best = best[np.lexsort((best, rank_key(snake[best])[0]))]
        vals[g:g + _SNAKE], idxs[g:g + _SNAKE] = snake[best], best
    vd.write(vals, current().rounds)
    idd.write_raw(idxs)
