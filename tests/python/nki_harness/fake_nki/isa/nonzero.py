"""GpSimd: `nonzero_with_count`."""

import numpy as np
from ..errors import NkiError
from ..runtime import current, instruction
from .gather import GPSIMD_CORE, sbuf_operand


@instruction
def nonzero_with_count(dst, src, index_offset=0, padding_val=-1, name=None):
    """On partitions 0, 16, ..., 112 only: dst[p] = the positions of src[p]'s
    nonzero elements plus `index_offset`, then `padding_val`, then the count."""
    op = "nisa.nonzero_with_count"
    prog = current()
    if prog.hw.nc_version < 3:
        raise NkiError(op, f"nonzero_with_count needs NeuronCore-v3 or later; the launch targets {prog.hw.name}")
    s, d = sbuf_operand(op, "src", src), sbuf_operand(op, "dst", dst)
    if src.dtype.name not in ("float32", "int32") or dst.dtype.name != "int32":
        raise NkiError(op, "src must be float32 or int32 and dst int32")
    if d.np != s.np or d.nf != s.nf + 1:
        raise NkiError(op, f"dst {dst.describe()} must be {s.np} partitions x {s.nf + 1} elements (one more than src)")
    vals, out = s.read(), d.read_kept()
    for p in (p for p in range(s.np) if (s.p0 + p) % GPSIMD_CORE == 0):  # each core's first physical partition
        hits = np.flatnonzero(vals[p] != 0)
        row = np.full(s.nf + 1, int(padding_val), dtype=np.int64)
        row[:hits.size] = hits + int(index_offset)
        row[-1] = hits.size
        out[p] = dst.dtype.saturate(row)
    d.write_raw(out)
