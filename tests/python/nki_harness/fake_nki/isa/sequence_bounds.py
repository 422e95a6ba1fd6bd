"""GpSimd: `sequence_bounds`."""

import numpy as np
from ..errors import NkiError
from ..runtime import current, instruction
from ..tensor import NkiTensor
from .gather import sbuf_operand


@instruction
def sequence_bounds(dst, segment_ids, name=None):
    """For (1, n) segment ids: dst[0, 0, i] is the first position of i's segment
    and dst[0, 1, i] one past its last; padding (id 0) gets n and -1."""
    op = "nisa.sequence_bounds"
    s = sbuf_operand(op, "segment_ids", segment_ids)
    if not isinstance(dst, NkiTensor) or dst.shape != (1, 2, s.nf):
        raise NkiError(op, f"dst must have shape [1, 2, {s.nf}], got {dst!r}")
    d = sbuf_operand(op, "dst", dst)
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
