"""`nki.collectives` (`ncc`): ring permutes between ranks.

A collective is a rendezvous: every program of every rank in the caller's ring
must issue the same collective in the same order; the last to arrive reads
every source, then writes every destination. Program p of a rank pairs with
program p of its ring neighbours.
"""

from .alu import OPS, check_op
from .dtypes import DTYPES, convert
from .errors import NkiError
from .registers import VirtualRegister
from .runtime import current
from .tensor import PSUM, NkiTensor


class ReplicaGroup:
    """`ncc.ReplicaGroup(groups)`: disjoint rings of ranks, each in send order (a
    rank sends to the next, the last to the first). No groups means one ring of
    every rank of the launch."""

    def __init__(self, groups):
        self.groups = [[int(r) for r in g] for g in groups]

    def __repr__(self):
        return f"ReplicaGroup({self.groups})"

    def ring_of(self, op, rank, num_ranks):
        """The ring holding `rank` in a launch of `num_ranks` ranks."""
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


def _channels(op, channel_ids):
    ids = [0] if channel_ids is None else list(channel_ids)
    if not ids or ids != list(range(len(ids))) or len(ids) > 4:
        raise NkiError(op, f"channel_ids {ids} must be 0, 1, ... (at most 4 channels)")
    return len(ids)


def _per_channel(op, what, by_channel, channels):
    if len(by_channel) != channels:
        raise NkiError(op, f"{what} has {len(by_channel)} channels but channel_ids names {channels}")
    out = []
    for c, tensors in enumerate(by_channel):
        if len(tensors) != 1:
            raise NkiError(op, f"{what}[{c}] must hold exactly one tensor (coalescing is not supported), it holds "
                               f"{len(tensors)}")
        t = tensors[0]
        if not isinstance(t, NkiTensor):
            raise NkiError(op, f"{what}[{c}] must hold a tensor, got {t!r}")
        if t.buffer is PSUM:
            raise NkiError(op, f"{t.describe()} is in PSUM; collectives move HBM or SBUF tensors")
        t.check_bounds(op)
        out.append(t)
    return out


def _permute(op, srcs, dsts, replica_group, reduce_op):
    """Sends each channel's sources (combined with `reduce_op` when given) from
    every rank to its ring successor's destination."""
    prog = current()
    prog.begin_op()
    ring = replica_group.ring_of(op, prog.rank, prog.world.ranks)
    for c, (ss, d) in enumerate(zip(srcs, dsts)):
        for s in ss:
            if s.size != d.size or (reduce_op is None and s.dtype is not d.dtype):
                raise NkiError(op, f"channel {c}: src {s.describe()} and dst {d.describe()} must have the same "
                                   "element count and dtype")
    part = (prog.rank, prog.program, srcs, dsts)

    def complete(parts):
        by_slot = {(rank, program): (s, d) for rank, program, s, d in parts}
        writes = []
        for rank, program, _, dst_list in parts:
            pred = ring[(ring.index(rank) - 1) % len(ring)]
            for (pred_srcs, dst) in zip(by_slot[(pred, program)][0], dst_list):
                if reduce_op is None:
                    vals, dtype = pred_srcs[0].read_cells(), pred_srcs[0].dtype
                else:
                    a, b = (s.dtype.decode(s.read_cells()) for s in pred_srcs)
                    vals, dtype = reduce_op(a.reshape(-1), b.reshape(-1)), DTYPES["float32"]
                writes.append((dst, vals, dtype))
        for dst, vals, dtype in writes:
            dst.write_cells(convert(vals.reshape(-1), dtype, dst.dtype, prog.rounds), op)

    try:
        prog.collective(ring, op.removeprefix("ncc."), part, complete)
    except NkiError as e:
        e.op = e.op or op
        raise


def collective_permute_implicit(srcs_by_channel, dsts_by_channel, replica_group, channel_ids=None, priority=None,
                                name=None):
    """Every rank sends each channel's source to its ring successor: a rank's
    destination receives its predecessor's source."""
    op = "ncc.collective_permute_implicit"
    n = _channels(op, channel_ids)
    srcs = [[t] for t in _per_channel(op, "srcs_by_channel", srcs_by_channel, n)]
    _permute(op, srcs, _per_channel(op, "dsts_by_channel", dsts_by_channel, n), replica_group, None)


def collective_permute_implicit_reduce(srcs0_by_channel, srcs1_by_channel, dsts_by_channel, replica_group, op,
                                       channel_ids=None, priority=None, name=None):
    """Every rank combines its two sources element-wise with `op` (nl.add,
    nl.maximum or nl.minimum, in float32) and sends the result to its ring successor."""
    name_ = "ncc.collective_permute_implicit_reduce"
    check_op(name_, "op", op)
    if op not in (OPS["add"], OPS["maximum"], OPS["minimum"]):
        raise NkiError(name_, f"op must be nl.add, nl.maximum or nl.minimum, got {op!r}")
    n = _channels(name_, channel_ids)
    s0 = _per_channel(name_, "srcs0_by_channel", srcs0_by_channel, n)
    s1 = _per_channel(name_, "srcs1_by_channel", srcs1_by_channel, n)
    _permute(name_, [[a, b] for a, b in zip(s0, s1)], _per_channel(name_, "dsts_by_channel", dsts_by_channel, n),
             replica_group, op)


def collective_permute_implicit_current_processing_rank_id(iteration_id, replica_group, channel_id=None, name=None):
    """A register holding the rank whose data this rank holds after `iteration_id`
    ring steps: its own rank at step 0, then its predecessors (global rank ids)."""
    op = "ncc.collective_permute_implicit_current_processing_rank_id"
    prog = current()
    prog.begin_op()
    ring = replica_group.ring_of(op, prog.rank, prog.world.ranks)
    return VirtualRegister(ring[(ring.index(prog.rank) - int(iteration_id)) % len(ring)])
