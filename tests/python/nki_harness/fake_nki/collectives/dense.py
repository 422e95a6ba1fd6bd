"""Group collectives over fixed-size tensors: `all_reduce`, `all_gather`,
`reduce_scatter`, `all_to_all`, and `rank_id`.

Reductions fold the members' float32 values left to right in the group's
member order and round once into the destination dtype; moves are bit-exact
(equal dtypes). Coalesced lists pair srcs[i] with dsts[i].
"""

import numpy as np

from ..alu import check_op
from ..errors import NkiError
from ..registers import VirtualRegister
from ..runtime import current
from .groups import group_of, join, tensors

_REDUCE_OPS = ("add", "maximum", "minimum")


def _reduce_op(op, value):
    check_op(op, "op", value, arity=2)
    if value.name not in _REDUCE_OPS:
        raise NkiError(op, f"op must be nl.add, nl.maximum or nl.minimum, got {value!r}")
    return value


def _pairs(op, srcs, dsts):
    s, d = tensors(op, "srcs", srcs), tensors(op, "dsts", dsts)
    if len(s) != len(d):
        raise NkiError(op, f"srcs has {len(s)} tensors but dsts has {len(d)}")
    return list(zip(s, d))


def _split_dim(op, t, dim, parts, role):
    """`t`'s cells cut into `parts` equal chunks along `dim`, in order."""
    if not 0 <= dim < t.ndim:
        raise NkiError(op, f"collective_dim {dim} is not a dim of {role} {t.describe()}")
    if t.shape[dim] % parts:
        raise NkiError(op, f"{role} {t.describe()}: dim {dim} ({t.shape[dim]}) does not split into {parts} equal "
                           "chunks")
    return np.split(t.read_cells(), parts, axis=dim)


def _check_dim(op, dim, t):
    allowed = (0, 1) if t.buffer.on_chip and t.ndim == 2 else (0,)
    if dim not in allowed:
        raise NkiError(op, f"collective_dim {dim}: only {allowed} is supported for {t.describe()}")


def _run(op, replica_group, payload, complete):
    prog, group = group_of(op, replica_group)
    join(op, prog, group, (prog.rank, prog.program, payload),
         lambda parts: complete(group, {(r, p): x for r, p, x in parts}, prog))


def all_reduce(srcs, dsts, replica_group, op, priority=None, name=None):
    """Every member's dst = the members' srcs combined with `op`."""
    name_ = "ncc.all_reduce"
    fold = _reduce_op(name_, op)
    pairs = _pairs(name_, srcs, dsts)
    for s, d in pairs:
        if s.size != d.size:
            raise NkiError(name_, f"src {s.describe()} and dst {d.describe()} must have the same element count")

    def complete(group, parts, prog):
        for p in range(prog.world.programs):
            for i in range(len(pairs)):
                values = [parts[(r, p)][i][0] for r in group]
                acc = values[0].dtype.decode(values[0].read_cells()).reshape(-1)
                for s in values[1:]:
                    acc = fold(acc, s.dtype.decode(s.read_cells()).reshape(-1))
                for r in group:
                    d = parts[(r, p)][i][1]
                    d.write_cells(d.dtype.encode(acc, prog.rounds), name_)

    _run(name_, replica_group, pairs, complete)


def _moves(op, pairs):
    for s, d in pairs:
        if s.dtype is not d.dtype:
            raise NkiError(op, f"src {s.describe()} and dst {d.describe()} must have the same dtype")


def all_gather(srcs, dsts, replica_group, collective_dim, priority=None, name=None):
    """Every member's dst = the members' srcs concatenated along `collective_dim`
    in member order."""
    op = "ncc.all_gather"
    pairs = _pairs(op, srcs, dsts)
    _moves(op, pairs)
    for s, d in pairs:
        _check_dim(op, collective_dim, s)

    def complete(group, parts, prog):
        for p in range(prog.world.programs):
            for i, (s0, _) in enumerate(pairs):
                cells = np.concatenate([parts[(r, p)][i][0].read_cells() for r in group], axis=collective_dim)
                for r in group:
                    d = parts[(r, p)][i][1]
                    if d.shape != cells.shape:
                        raise NkiError(op, f"dst {d.describe()} must have shape {list(cells.shape)} (the "
                                           f"{len(group)} srcs concatenated along dim {collective_dim})")
                    d.write_cells(cells, op)

    _run(op, replica_group, pairs, complete)


def reduce_scatter(srcs, dsts, replica_group, collective_dim, op, priority=None, name=None):
    """Member i's dst = chunk i (along `collective_dim`) of the members' srcs
    combined with `op`."""
    name_ = "ncc.reduce_scatter"
    fold = _reduce_op(name_, op)
    pairs = _pairs(name_, srcs, dsts)
    if collective_dim != 0:
        raise NkiError(name_, f"collective_dim {collective_dim}: only 0 is supported")

    def complete(group, parts, prog):
        for p in range(prog.world.programs):
            for i in range(len(pairs)):
                values = [parts[(r, p)][i][0] for r in group]
                acc = values[0].dtype.decode(values[0].read_cells())
                for s in values[1:]:
                    acc = fold(acc, s.dtype.decode(s.read_cells()))
                if acc.shape[0] % len(group):
                    raise NkiError(name_, f"src dim 0 ({acc.shape[0]}) does not split into {len(group)} chunks")
                for k, r in enumerate(np.split(acc, len(group), axis=0)):
                    d = parts[(group[k], p)][i][1]
                    if d.size != r.size:
                        raise NkiError(name_, f"dst {d.describe()} must hold {r.size} elements (one chunk)")
                    d.write_cells(d.dtype.encode(r.reshape(-1), prog.rounds), name_)

    _run(name_, replica_group, pairs, complete)


def all_to_all(srcs, dsts, replica_group, collective_dim, priority=None, name=None):
    """Chunk j (along `collective_dim`) of member i's dst = chunk i of member j's
    src. HBM tensors only."""
    op = "ncc.all_to_all"
    pairs = list(zip(tensors(op, "srcs", srcs, hbm_only=True), tensors(op, "dsts", dsts, hbm_only=True)))
    _moves(op, pairs)
    if collective_dim != 0:
        raise NkiError(op, f"collective_dim {collective_dim}: only 0 is supported")

    def complete(group, parts, prog):
        n = len(group)
        for p in range(prog.world.programs):
            for i in range(len(pairs)):
                chunks = {r: _split_dim(op, parts[(r, p)][i][0], 0, n, "src") for r in group}
                for k, r in enumerate(group):
                    d = parts[(r, p)][i][1]
                    cells = np.concatenate([chunks[j][k] for j in group], axis=0)
                    if d.shape != cells.shape:
                        raise NkiError(op, f"dst {d.describe()} must have shape {list(cells.shape)}")
                    d.write_cells(cells, op)

    _run(op, replica_group, pairs, complete)


def rank_id(name=None):
    """A register holding this rank's id in the launch."""
    return VirtualRegister(current().rank)

