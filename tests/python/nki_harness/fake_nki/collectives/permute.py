"""Ring permutes (`collective_permute_implicit`, `_reduce`, the current
processing rank) and the explicit `collective_permute`."""

from ..alu import OPS, check_op
from ..dtypes import DTYPES, convert
from ..errors import NkiError
from ..registers import VirtualRegister
from ..runtime import current
from ..tensor import PSUM, NkiTensor
from .groups import group_of, join, tensors


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
    prog, ring = group_of(op, replica_group)
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

    join(op, prog, ring, part, complete)


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
    prog, ring = group_of(op, replica_group)
    return VirtualRegister(ring[(ring.index(prog.rank) - int(iteration_id)) % len(ring)])


def collective_permute(srcs, dsts, source_target_pairs, priority=None, name=None):
    """For each (source, target) pair, the target's dst receives the source's src
    (HBM, one tensor each); a rank no pair targets keeps its dst. Every rank of
    the launch issues it."""
    op = "ncc.collective_permute"
    src = tensors(op, "srcs", srcs, 1, hbm_only=True)[0]
    dst = tensors(op, "dsts", dsts, 1, hbm_only=True)[0]
    prog = current()
    prog.begin_op(op)
    pairs = [(int(s), int(t)) for s, t in source_target_pairs]
    ranks = prog.world.ranks
    targets = [t for _, t in pairs]
    bad = [r for pair in pairs for r in pair if not 0 <= r < ranks]
    if bad or len(set(targets)) != len(targets):
        raise NkiError(op, f"source_target_pairs {pairs} must name ranks in 0..{ranks} and each target once")
    if src.size != dst.size or src.dtype is not dst.dtype:
        raise NkiError(op, f"src {src.describe()} and dst {dst.describe()} must have the same element count and "
                           "dtype")

    def complete(parts):
        by_slot = {(rank, program): (s, d) for rank, program, s, d in parts}
        moves = [(by_slot[(t, p)][1], by_slot[(s, p)][0].read_cells()) for s, t in pairs
                 for p in range(prog.world.programs)]
        for d, cells in moves:
            d.write_cells(cells.reshape(-1), op)

    join(op, prog, list(range(ranks)), (prog.rank, prog.program, src, dst), complete)
