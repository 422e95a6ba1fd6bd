"""Top-value instructions: `max8`, `nc_find_index8`, `nc_match_replace8`, `topk`.

Values compare in float32. NaN ranks above every number. Where the docs leave
ties open, the lower position wins (see SEMANTICS.md).
"""

import numpy as np

from ..errors import NkiError
from ..runtime import current, instruction
from ..tensor import SBUF, NkiTensor, describe
from ..tile import Tile

_MIN_NF, _MAX_NF = 8, 16384


def _rank_key(x):
    """A sort key putting NaN above +inf (descending sorts use -key)."""
    return np.where(np.isnan(x), np.inf, x), np.isnan(x)


def _largest(row, k):
    """Positions of the k largest values of `row`, largest first, lower position first on ties."""
    value, nan = _rank_key(row)
    return np.lexsort((np.arange(row.size), -value, ~nan))[:k]


def _source(op, role, t):
    s = Tile(op, role, t)
    if not _MIN_NF <= s.nf <= _MAX_NF:
        raise NkiError(op, f"{role} {t.describe()} has {s.nf} elements per partition; it must have "
                           f"{_MIN_NF}..={_MAX_NF}")
    return s


def _eight(op, role, t, np_):
    d = Tile(op, role, t)
    if (d.np, d.nf) != (np_, 8):
        raise NkiError(op, f"{role} {t.describe()} must be {np_} partitions x 8 elements, it is {d.np} x {d.nf}")
    return d


@instruction
def max8(dst, src, name=None):
    """dst[p] = the 8 largest values of src[p], in descending order."""
    op = "nisa.max8"
    s = _source(op, "src", src)
    d = _eight(op, "dst", dst, s.np)
    v = s.read()
    d.write(np.stack([v[p, _largest(v[p], 8)] for p in range(s.np)]), current().rounds)


def _index_dtype(op, t):
    if t.dtype.name not in ("uint16", "uint32"):
        raise NkiError(op, f"{t.describe()} must be uint16 or uint32")
    return t.dtype.hi


def _claim(row, value, taken):
    """The first position of `value` in `row` not yet in `taken`, or None."""
    for i in np.flatnonzero(row == value):
        if i not in taken:
            taken.add(int(i))
            return int(i)
    return None


@instruction
def nc_find_index8(dst, data, vals, name=None):
    """dst[p, k] = the position of the first occurrence of vals[p, k] in data[p]
    (all ones when absent); equal vals take successive occurrences in order k = 0..7."""
    op = "nisa.nc_find_index8"
    s = _source(op, "data", data)
    v = _eight(op, "vals", vals, s.np)
    d = _eight(op, "dst", dst, s.np)
    missing = _index_dtype(op, dst)
    rows, wanted = s.read(), v.read()
    out = np.full((s.np, 8), missing, dtype=np.int64)
    for p in range(s.np):
        taken = set()
        for k in range(8):
            i = _claim(rows[p], wanted[p, k], taken)
            out[p, k] = missing if i is None else i
    d.write_raw(out)


@instruction
def nc_match_replace8(dst, data, vals, imm, dst_idx=None, name=None):
    """dst = data with the first occurrence of each vals[p, k] replaced by `imm`,
    vals taken in order k = 7..0 (so equal vals take successive occurrences from
    the highest k down); dst_idx[p, k] receives the position (all ones when absent)."""
    op = "nisa.nc_match_replace8"
    s = _source(op, "data", data)
    v = _eight(op, "vals", vals, s.np)
    d = Tile(op, "dst", dst)
    if (d.np, d.nf) != (s.np, s.nf):
        raise NkiError(op, f"dst {dst.describe()} must have data's geometry {s.np} x {s.nf}")
    rows, wanted = s.read(), v.read()
    idx = Tile(op, "dst_idx", dst_idx) if dst_idx is not None else None
    missing = _index_dtype(op, dst_idx) if dst_idx is not None else 0
    out, found = rows.copy(), np.full((s.np, 8), missing, dtype=np.int64)
    for p in range(s.np):
        taken = set()
        for k in reversed(range(8)):
            i = _claim(rows[p], wanted[p, k], taken)
            if i is not None:
                out[p, i] = np.float32(imm)
                found[p, k] = i
    d.write(out, current().rounds)
    if idx is not None:
        if (idx.np, idx.nf) != (s.np, 8):
            raise NkiError(op, f"dst_idx {dst_idx.describe()} must be {s.np} partitions x 8 elements")
        idx.write_raw(found)


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
        best = _largest(snake, k)
        best = best[np.lexsort((best, _rank_key(snake[best])[0]))]
        vals[g:g + _SNAKE], idxs[g:g + _SNAKE] = snake[best], best
    vd.write(vals, current().rounds)
    idd.write_raw(idxs)
