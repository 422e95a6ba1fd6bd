"""GpSimd data movement within SBUF: `nc_n_gather` and `local_gather`. Data
moves bit-exactly."""

import numpy as np

from ..errors import NkiError
from ..runtime import instruction
from ..tensor import SBUF, NkiTensor, describe
from ..tile import Tile

GPSIMD_CORE = 16  # SBUF partitions per GpSimd core


def sbuf_operand(op, role, t):
    """`t` as a tile, checked to be in SBUF, which the GpSimd engine reads."""
    if not isinstance(t, NkiTensor) or t.buffer is not SBUF:
        raise NkiError(op, f"{role} {describe(t)} must be in SBUF (the "
                           "GpSimd engine cannot access PSUM)")
    return Tile(op, role, t)


def _operands(op, dst, data_role, data, index_role, index, index_dtype):
    """The (data, index, dst) tiles of a gather: all in SBUF, the index of
    `index_dtype`, `dst` of the data's dtype (the move is bit-exact)."""
    x, i, d = sbuf_operand(op, data_role, data), sbuf_operand(op, index_role, index), sbuf_operand(op, "dst", dst)
    if index.dtype.name != index_dtype:
        raise NkiError(op, f"{index_role} {index.describe()} must be {index_dtype}")
    if dst.dtype is not data.dtype:
        raise NkiError(op, f"dst is {dst.dtype.name} but {data_role} is {data.dtype.name}; they must match")
    return x, i, d


def _indices(op, role, tile, limit):
    idx = tile.read_raw().astype(np.int64)
    if idx.size and (idx.min() < 0 or idx.max() >= limit):
        raise NkiError(op, f"{role} holds {int(idx.min())}..={int(idx.max())}, outside 0..{limit}")
    return idx


@instruction
def nc_n_gather(dst, data, indices, name=None):
    """dst[p, j] = data[p, indices[p, j]] (data's free dims flattened per partition)."""
    op = "nisa.nc_n_gather"
    x, i, d = _operands(op, dst, "data", data, "indices", indices, "uint32")
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
    s, i, d = _operands(op, dst, "src_buffer", src_buffer, "index", index, "uint16")
    if s.np != i.np or s.np % GPSIMD_CORE:
        raise NkiError(op, f"src_buffer and index must share a partition count that is a multiple of 16 "
                           f"(got {s.np} and {i.np})")
    if num_elem_per_idx not in (1, 2, 4, 8, 16, 32):
        raise NkiError(op, f"num_elem_per_idx must be 1, 2, 4, 8, 16 or 32, got {num_elem_per_idx}")
    per_core = GPSIMD_CORE * i.nf
    valid = per_core if num_valid_indices is None else int(num_valid_indices)
    if not 1 <= valid <= min(per_core, 4096):
        raise NkiError(op, f"num_valid_indices {valid} must be in 1..={min(per_core, 4096)}")
    if d.np != s.np or d.nf != valid * num_elem_per_idx:
        raise NkiError(op, f"dst {dst.describe()} must be {s.np} partitions x {valid * num_elem_per_idx} elements")
    src, table = s.read_raw(), _indices(op, "index", i, s.nf - num_elem_per_idx + 1)
    out = np.empty((s.np, valid * num_elem_per_idx), dtype=src.dtype)
    span = np.arange(num_elem_per_idx)
    for c in range(0, s.np, GPSIMD_CORE):
        offsets = table[c:c + GPSIMD_CORE].flatten(order="F")[:valid]
        out[c:c + GPSIMD_CORE] = src[c:c + GPSIMD_CORE][:, (offsets[:, None] + span[None, :]).reshape(-1)]
    d.write_raw(out)
