"""DMA engines: `dma_compute`, an element-wise reduction of scaled sources."""

import numpy as np
from ..errors import NkiError
from ..runtime import current, instruction
from .dma import dma_operand
from .enums import member
from .enums import oob_mode as _oob_mode


_DMA_COMPUTE_MAX_SRCS = 16


@instruction
def dma_compute(dst, srcs, reduce_op, scales=None, unique_indices=True, oob_mode=None, name=None):
    """`dst = srcs[0] * scales[0] + srcs[1] * scales[1] + ...` element by element in
    float32, summed in list order (only nl.add and unit scales are documented).
    Indirect views (vector_offset) give the scatter / gather read-modify-write forms;
    with `oob_mode=skip` their out-of-bound rows are left out."""
    from ..alu import OPS

    op = "nisa.dma_compute"
    skip = member(op, "oob_mode", oob_mode, _oob_mode, _oob_mode.error) is _oob_mode.skip
    if reduce_op is not OPS["add"]:
        raise NkiError(op, f"reduce_op must be nl.add, got {reduce_op!r}")
    srcs = list(srcs)
    if not 1 <= len(srcs) <= _DMA_COMPUTE_MAX_SRCS:
        raise NkiError(op, f"srcs must hold 1..={_DMA_COMPUTE_MAX_SRCS} tensors, it holds {len(srcs)}")
    scales = [1.0] * len(srcs) if scales is None else list(scales)
    if len(scales) != len(srcs) or any(float(c) != 1.0 for c in scales):
        raise NkiError(op, f"scales must be one 1.0 per source, got {scales}")
    if not unique_indices:
        raise NkiError(op, "unique_indices=False is not supported (non-unique scatter indices)")
    dma_operand(op, "dst", dst, skip)
    for i, s in enumerate(srcs):
        dma_operand(op, f"srcs[{i}]", s, skip)
        if s.size != dst.size:
            raise NkiError(op, f"srcs[{i}] {s.describe()} has {s.size} elements but dst {dst.describe()} has "
                               f"{dst.size}")
    # Every index is resolved before any write: in the read-modify-write forms dst is also a source.
    dst_idx = dst.cell_index(skip).reshape(-1)
    src_idx = [s.cell_index(skip).reshape(-1) for s in srcs]
    keep = (dst_idx >= 0) & np.logical_and.reduce([i >= 0 for i in src_idx])
    total = None
    for s, idx in zip(srcs, src_idx):
        v = s.dtype.decode(s.storage.load(idx[keep]))
        total = v if total is None else (total + v).astype(np.float32)
    dst.storage.store(dst_idx[keep], dst.dtype.encode(total, current().rounds))
    dst.storage.record_write(dst_idx[keep], op)
