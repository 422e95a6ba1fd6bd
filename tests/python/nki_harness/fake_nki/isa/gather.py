"""GpSimd data movement within SBUF: `nc_n_gather`, `local_gather`,
`nonzero_with_count` and `sequence_bounds`. Data moves bit-exactly."""

import numpy as np

from ..errors import NkiError
from ..runtime import current, instruction
from ..tensor import SBUF, NkiTensor, describe
from ..tile import Tile

_CORE = 16  # SBUF partitions per GpSimd core


def _sbuf(op, role, t):
    if not isinstance(t, NkiTensor) or t.buffer is not SBUF:
        raise NkiError(op, f"{role} {describe(t)} must be in SBUF (the "
                           "GpSimd engine cannot access PSUM)")
    return Tile(op, role, t)


def _indices(op, role, tile, limit):
    idx = tile.read_raw().astype(np.int64)
    if idx.size and (idx.min() < 0 or idx.max() >= limit):
        raise NkiError(op, f"{role} holds {int(idx.min())}..={int(idx.max())}, outside 0..{limit}")
    return idx


@instruction
def nc_n_gather(dst, data, indices, name=None):
    """dst[p, j] = data[p, indices[p, j]] (data's free dims flattened per partition)."""
    op = "nisa.nc_n_gather"
    x, i, d = _sbuf(op, "data", data), _sbuf(op, "indices", indices), _sbuf(op, "dst", dst)
    if indices.dtype.name != "uint32":
        raise NkiError(op, f"indices {indices.describe()} must be uint32")
    if dst.dtype is not data.dtype:
        raise NkiError(op, f"dst is {dst.dtype.name} but data is {data.dtype.name}; they must match")
    if not x.np == i.np == d.np or i.nf != d.nf:
        raise NkiError(op, "data, indices and dst must share the partition count, and dst must have as many "
                           "elements per partition as indices")
    d.write_raw(np.take_along_axis(x.read_raw(), _indices(op, "indices", i, x.nf), axis=1))


@instruction
def local_gather(dst, src_buffer, index, num_elem_per_idx=1, num_valid_indices=None, name=None):
    """Per 16-partition GpSimd core: the core's index values, read down the
    partitions column by column (the first `num_valid_indices` of them), are
    free-element offsets; every partition of the core copies `num_elem_per_idx`
    elements from each offset of its own row, in index order."""
    op = "nisa.local_gather"
    s, i, d = _sbuf(op, "src_buffer", src_buffer), _sbuf(op, "index", index), _sbuf(op, "dst", dst)
    if index.dtype.name != "uint16":
        raise NkiError(op, f"index {index.describe()} must be uint16")
    if dst.dtype is not src_buffer.dtype:
        raise NkiError(op, f"dst is {dst.dtype.name} but src_buffer is {src_buffer.dtype.name}; they must match")
    if s.np != i.np or s.np % _CORE:
        raise NkiError(op, f"src_buffer and index must share a partition count that is a multiple of 16 "
                           f"(got {s.np} and {i.np})")
    if num_elem_per_idx not in (1, 2, 4, 8, 16, 32):
        raise NkiError(op, f"num_elem_per_idx must be 1, 2, 4, 8, 16 or 32, got {num_elem_per_idx}")
    per_core = _CORE * i.nf
    valid = per_core if num_valid_indices is None else int(num_valid_indices)
    if not 1 <= valid <= min(per_core, 4096):
        raise NkiError(op, f"num_valid_indices {valid} must be in 1..={min(per_core, 4096)}")
    if d.np != s.np or d.nf != valid * num_elem_per_idx:
        raise NkiError(op, f"dst {dst.describe()} must be {s.np} partitions x {valid * num_elem_per_idx} elements")
    src, table = s.read_raw(), _indices(op, "index", i, s.nf - num_elem_per_idx + 1)
    out = np.empty((s.np, valid * num_elem_per_idx), dtype=src.dtype)
    span = np.arange(num_elem_per_idx)
    for c in range(0, s.np, _CORE):
        offsets = table[c:c + _CORE].flatten(order="F")[:valid]
        out[c:c + _CORE] = src[c:c + _CORE][:, (offsets[:, None] + span[None, :]).reshape(-1)]
    d.write_raw(out)


@instruction
def nonzero_with_count(dst, src, index_offset=0, padding_val=-1, name=None):
    """On partitions 0, 16, ..., 112 only: dst[p] = the positions of src[p]'s
    nonzero elements plus `index_offset`, then `padding_val`, then the count."""
    op = "nisa.nonzero_with_count"
    prog = current()
    if prog.hw.nc_version < 3:
        raise NkiError(op, f"nonzero_with_count needs NeuronCore-v3 or later; the launch targets {prog.hw.name}")
    s, d = _sbuf(op, "src", src), _sbuf(op, "dst", dst)
    if src.dtype.name not in ("float32", "int32") or dst.dtype.name != "int32":
        raise NkiError(op, "src must be float32 or int32 and dst int32")
    if d.np != s.np or d.nf != s.nf + 1:
        raise NkiError(op, f"dst {dst.describe()} must be {s.np} partitions x {s.nf + 1} elements (one more than src)")
    vals, out = s.read(), d.read_raw()
    for p in (p for p in range(s.np) if (s.p0 + p) % _CORE == 0):  # each core's first physical partition
        hits = np.flatnonzero(vals[p] != 0)
        row = np.full(s.nf + 1, int(padding_val), dtype=np.int64)
        row[:hits.size] = hits + int(index_offset)
        row[-1] = hits.size
        out[p] = dst.dtype.saturate(row)
    d.write_raw(out)


@instruction
def sequence_bounds(dst, segment_ids, name=None):
    """For (1, n) segment ids: dst[0, 0, i] is the first position of i's segment
    and dst[0, 1, i] one past its last; padding (id 0) gets n and -1."""
    op = "nisa.sequence_bounds"
    s = _sbuf(op, "segment_ids", segment_ids)
    if not isinstance(dst, NkiTensor) or dst.shape != (1, 2, s.nf):
        raise NkiError(op, f"dst must have shape [1, 2, {s.nf}], got {dst!r}")
    d = _sbuf(op, "dst", dst)
    for role, t in (("segment_ids", segment_ids), ("dst", dst)):
        if t.dtype.name not in ("float32", "int32"):
            raise NkiError(op, f"{role} {t.describe()} must be float32 or int32")
    if s.np != 1:
        raise NkiError(op, f"segment_ids {segment_ids.describe()} must have one partition")
    ids = s.read()[0]
    n = ids.size
    start, end = np.empty(n), np.empty(n)
    for i in range(n):
        start[i] = n if ids[i] == 0 else start[i - 1] if i and ids[i] == ids[i - 1] else i
    for i in reversed(range(n)):
        end[i] = -1 if ids[i] == 0 else end[i + 1] if i < n - 1 and ids[i] == ids[i + 1] else i + 1
    d.write(np.concatenate([start, end]).astype(np.float32).reshape(1, -1), current().rounds)
