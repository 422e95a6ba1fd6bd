"""Replica groups and the rendezvous every collective goes through.

A collective is a rendezvous: every program of every rank of the caller's
group must issue the same collective in the same order; the last to arrive
reads every source, then writes every destination. Program p of a rank works
with program p of the other ranks.
"""

from ..errors import NkiError
from ..objects import NKIObject
from ..runtime import current
from ..tensor import PSUM, NkiTensor


class ReplicaGroup(NKIObject):
    """`ncc.ReplicaGroup(groups)`: disjoint groups of ranks. For ring collectives
    each group is a ring in send order (a rank sends to the next, the last to the
    first); for the others the order is the members' order (gather slots, scatter
    chunks, reduction order). No groups means one group of every rank."""

    def __init__(self, groups=()):
        self.groups = [[int(r) for r in g] for g in groups]

    def __repr__(self):
        return f"ReplicaGroup({self.groups})"

    def ring_of(self, op, rank, num_ranks):
        """The group holding `rank` in a launch of `num_ranks` ranks."""
        if not isinstance(self, ReplicaGroup):
            raise NkiError(op, f"replica_group must be an ncc.ReplicaGroup, got {self!r}")
        if not self.groups:
            return list(range(num_ranks))
        flat = [r for g in self.groups for r in g]
        bad = [r for i, r in enumerate(flat) if not 0 <= r < num_ranks or r in flat[:i]]
        if bad:
            raise NkiError(op, f"invalid replica_group = {self.groups}: ranks must be distinct and in "
                               f"0..{num_ranks}; rank {bad[0]} is not")
        for g in self.groups:
            if rank in g:
                return g
        raise NkiError(op, f"invalid replica_group = {self.groups}: rank {rank} is in none of the groups")


def group_of(op, replica_group):
    """(program, the caller's group) for `replica_group`."""
    if not isinstance(replica_group, ReplicaGroup):
        raise NkiError(op, f"replica_group must be an ncc.ReplicaGroup, got {replica_group!r}")
    prog = current()
    prog.begin_op(op)
    return prog, replica_group.ring_of(op, prog.rank, prog.world.ranks)


def join(op, prog, ranks, payload, complete):
    """Joins the next collective over `ranks` as `op`."""
    try:
        prog.collective(ranks, op.removeprefix("ncc."), payload, complete)
    except NkiError as e:
        e.op = e.op or op
        raise


def tensors(op, role, value, count=None, hbm_only=False):
    """A list of tensors (`srcs` / `dsts`), all in HBM or all in SBUF; several
    (coalesced) only in HBM."""
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    if not items or (count is not None and len(items) != count):
        raise NkiError(op, f"{role} must be a list of {count or 'one or more'} tensors, got {value!r}")
    for t in items:
        if not isinstance(t, NkiTensor):
            raise NkiError(op, f"{role} must hold tensors, got {t!r}")
        if t.buffer is PSUM or (hbm_only and t.buffer.on_chip):
            raise NkiError(op, f"{role}: {t.describe()} must be in HBM{'' if hbm_only else ' or SBUF'}")
        t.check_bounds(op)
    if len({t.buffer.on_chip for t in items}) > 1:
        raise NkiError(op, f"{role} mixes HBM and SBUF tensors; use one memory space")
    if len(items) > 1 and items[0].buffer.on_chip:
        raise NkiError(op, f"{role}: coalesced collectives (several tensors) need HBM tensors")
    return items
