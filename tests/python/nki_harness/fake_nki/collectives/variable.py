"""Variable-size collectives over flat element buffers: `all_to_all_v` and
`all_gather_v`, sized by a uint32 metadata tensor.

Metadata is (rows, G) in HBM or (1, rows, G) in SBUF, G the group size, rows 3
or 4: send counts, send displacements, receive counts (written by the
collective unless `recv_counts_known`), receive displacements (read when
`has_rdispls`). Column r is the r-th member of the group. Without receive
displacements the chunk from member s lands at `s * (dst elements / G)`. A
chunk that does not fit its source or destination is an error.
"""

import numpy as np

from ..errors import NkiError
from ..runtime import current
from ..tensor import NkiTensor, describe
from .groups import group_of, join, tensors


def _metadata(op, t, size, has_rdispls):
    rows = 4 if has_rdispls else 3
    ok = isinstance(t, NkiTensor) and t.dtype.name == "uint32" and (
        t.shape == (rows, size) if not t.buffer.on_chip else t.shape == (1, rows, size))
    if not ok:
        raise NkiError(op, f"metadata_tensor must be uint32 of shape ({rows}, {size}) in HBM or (1, {rows}, {size}) "
                           f"in SBUF, got {describe(t)}")
    return t


def _table(t):
    return t.read_cells().reshape(-1, t.shape[-1]).astype(np.int64)


def _exchange(op, srcs, dsts, replica_group, metadata_tensor, recv_counts_known, has_rdispls, chunk_of):
    """Runs a variable collective: `chunk_of(table, r)` is (displacement, count)
    of what a member with metadata `table` sends to member r."""
    src = tensors(op, "srcs", srcs, 1, hbm_only=True)[0]
    dst = tensors(op, "dsts", dsts, 1, hbm_only=True)[0]
    if src.dtype is not dst.dtype:
        raise NkiError(op, f"src {src.describe()} and dst {dst.describe()} must have the same dtype")
    prog, group = group_of(op, replica_group)
    n = len(group)
    meta = _metadata(op, metadata_tensor, n, has_rdispls)

    def complete(parts):
        by = {(r, p): x for r, p, x in parts}
        for p in range(prog.world.programs):
            sent = {}
            for i, r in enumerate(group):
                s, _, m = by[(r, p)]
                table, flat = _table(m), s.read_cells().reshape(-1)
                for j in range(n):
                    start, count = chunk_of(table, j)
                    if start < 0 or start + count > flat.size:
                        raise NkiError(op, f"rank {r} sends elements {start}..{start + count} of a {flat.size}-element "
                                           "src")
                    sent[(i, j)] = flat[start:start + count]
            for j, r in enumerate(group):
                _, d, m = by[(r, p)]
                table, out = _table(m), d.read_cells(kept=True).reshape(-1).copy()
                slot = out.size // n
                counts = []
                for i in range(n):
                    chunk = sent[(i, j)]
                    at = int(table[3, i]) if has_rdispls else i * slot
                    room = out.size - at if has_rdispls else slot
                    if at < 0 or chunk.size > room:
                        raise NkiError(op, f"rank {r} receives {chunk.size} elements from member {i} at {at}, which do "
                                           f"not fit its {out.size}-element dst")
                    out[at:at + chunk.size] = chunk
                    counts.append(chunk.size)
                d.write_cells(out, op)
                if not recv_counts_known:
                    table[2, :] = counts
                    m.write_cells(table.reshape(m.shape), op)

    join(op, prog, group, (prog.rank, prog.program, (src, dst, meta)), complete)


def all_to_all_v(srcs, dsts, replica_group, metadata_tensor, recv_counts_known=False, has_rdispls=False,
                 priority=None, name=None):
    """Member i sends `src[send_displs[j] : + send_counts[j]]` to member j."""
    _exchange("ncc.all_to_all_v", srcs, dsts, replica_group, metadata_tensor, recv_counts_known, has_rdispls,
              lambda table, j: (int(table[1, j]), int(table[0, j])))


def all_gather_v(srcs, dsts, replica_group, metadata_tensor, recv_counts_known=False, has_rdispls=False,
                 priority=None, name=None):
    """Every member sends `src[send_displ : + send_count]` (column 0 of rows 0 / 1)
    to every member. As documented: no receive displacements, LNC2 launches and
    groups of exactly 4 ranks."""
    op = "ncc.all_gather_v"
    prog = current()
    if has_rdispls:
        raise NkiError(op, "has_rdispls=True is not supported")
    if prog.num_programs != 2:
        raise NkiError(op, "all_gather_v runs only in LNC2 launches (kernel[2])")
    lists = getattr(replica_group, "groups", None) or [list(range(prog.world.ranks))]
    if any(len(g) != 4 for g in lists):
        raise NkiError(op, f"every rank list of the replica group must hold exactly 4 ranks, got {lists}")
    _exchange(op, srcs, dsts, replica_group, metadata_tensor, recv_counts_known, False,
              lambda table, j: (int(table[1, 0]), int(table[0, 0])))
