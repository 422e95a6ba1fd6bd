"""Top-8 instructions: `max8`, `nc_find_index8`, `nc_match_replace8`.

Values compare in float32. NaN ranks above every number. Where the docs leave
ties open, the lower position wins (see SEMANTICS.md).
"""

import numpy as np

from ..errors import NkiError
from ..runtime import current, instruction
from ..tile import Tile

_MIN_NF, _MAX_NF = 8, 16384


def rank_key(x):
    """A sort key putting NaN above +inf (descending sorts use -key)."""
    return np.where(np.isnan(x), np.inf, x), np.isnan(x)


def largest(row, k):
    """Positions of the k largest values of `row`, largest first, lower position first on ties."""
    value, nan = rank_key(row)
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
    d.write(np.stack([v[p, largest(v[p], 8)] for p in range(s.np)]), current().rounds)


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
