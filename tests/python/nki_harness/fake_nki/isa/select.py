"""Index-driven ops: `iota`, `affine_select`, `range_select`."""

import math

import numpy as np

from ..alu import COMPARISONS, OPS, check_op, reduce_rows
from ..errors import NkiError
from ..runtime import current, instruction
from ..tensor import SBUF, NkiTensor, describe
from ..tile import Tile, column, same_geometry
from .enums import member
from .enums import reduce_cmd as _reduce_cmd
from .reduce import accumulate, write_reduce_res

FLOAT32_MIN = float(np.finfo(np.float32).min)


def _wrap32(v):
    """Integers wrapped to signed 32 bits, as the hardware's int32 arithmetic does."""
    return (np.asarray(v, dtype=np.int64) + (1 << 31)) % (1 << 32) - (1 << 31)


def _in_sbuf(op, role, t):
    if not isinstance(t, NkiTensor) or t.buffer is not SBUF:
        raise NkiError(op, f"{role} {describe(t)} must be in SBUF "
                           "(the GpSimd engine cannot access PSUM)")


def _affine(op, pattern, offset, channel_multiplier, tile):
    """`offset + p * channel_multiplier + sum(step_k * i_k)` in int32 for every
    element of `tile` (partition p, free elements in row-major pattern order)."""
    pairs = [(int(s), int(c)) for s, c in pattern]
    if len(pairs) > 4:
        raise NkiError(op, f"pattern {pattern} has {len(pairs)} dims; at most 4 are supported")
    n = math.prod(c for _, c in pairs)
    if n < 0 or n != tile.nf:
        raise NkiError(op, f"pattern {pattern} covers {n} elements but the tile has {tile.nf} per partition")
    free = np.zeros((), dtype=np.int64)
    for step, count in pairs:
        free = free[..., None] + _wrap32(step) * np.arange(count, dtype=np.int64)
    chan = _wrap32(offset) + _wrap32(channel_multiplier) * np.arange(tile.np, dtype=np.int64)
    return _wrap32(chan[:, None] + free.reshape(1, -1))


@instruction
def iota(dst, pattern, offset=0, channel_multiplier=0, name=None):
    """Fills an SBUF tile with `offset + p * channel_multiplier + sum(step_k * i_k)`,
    computed in int32 and cast to `dst.dtype` (float tiles round per the precision)."""
    op = "nisa.iota"
    _in_sbuf(op, "dst", dst)
    d = Tile(op, "dst", dst)
    values = _affine(op, pattern, offset, channel_multiplier, d)
    d.write_raw(dst.dtype.encode(values.astype(np.float32), current().rounds) if dst.dtype.is_float
                else dst.dtype.saturate(values))


@instruction
def affine_select(dst, pattern, channel_multiplier, on_true_tile, on_false_value, cmp_op=None, offset=0, name=None):
    """Keeps `on_true_tile` where `cmp_op(offset + p * channel_multiplier +
    sum(step_k * i_k), 0)` holds (default `nl.equal`), `on_false_value` elsewhere."""
    op = "nisa.affine_select"
    _in_sbuf(op, "dst", dst)
    _in_sbuf(op, "on_true_tile", on_true_tile)
    cmp = OPS["equal"] if cmp_op is None else cmp_op
    _comparison(op, "cmp_op", cmp)
    t, d = Tile(op, "on_true_tile", on_true_tile), Tile(op, "dst", dst)
    same_geometry(op, "dst", d, "on_true_tile", t)
    keep = cmp(_affine(op, pattern, offset, channel_multiplier, d).astype(np.float32), np.float32(0)) != 0
    d.write(np.where(keep, t.read(), np.float32(on_false_value)), current().rounds)


def _comparison(op, role, value):
    check_op(op, role, value)
    if value not in COMPARISONS:
        raise NkiError(op, f"{role}={value} is not a comparison (use nl.equal, nl.less, nl.less_equal, nl.greater or "
                           "nl.greater_equal)")


@instruction
def range_select(dst, on_true_tile, comp_op0, comp_op1, bound0, bound1, reduce_cmd=None, reduce_res=None,
                 reduce_op=None, range_start=0, on_false_value=None, name=None):
    """Keeps element j of row p where `comp_op0(range_start + j, bound0[p])` and
    `comp_op1(range_start + j, bound1[p])` hold (in float32), FLOAT32_MIN
    elsewhere, and max-reduces each row's float32 results into the Vector engine
    accumulators per `reduce_cmd` (default `reset_reduce`). trn2 and later."""
    op = "nisa.range_select"
    prog = current()
    if not prog.hw.has_range_select:
        raise NkiError(op, f"range_select needs trn2 or later; the launch targets {prog.hw.name}")
    _comparison(op, "comp_op0", comp_op0)
    _comparison(op, "comp_op1", comp_op1)
    if on_false_value is not None and np.float32(on_false_value) != np.float32(FLOAT32_MIN):
        raise NkiError(op, f"on_false_value must be FLOAT32_MIN (-3.4028235e38), got {on_false_value}")
    reduce_op = OPS["maximum"] if reduce_op is None else reduce_op
    if reduce_op is not OPS["maximum"]:
        raise NkiError(op, f"reduce_op must be nl.maximum, got {reduce_op!r}")
    t, d = Tile(op, "on_true_tile", on_true_tile), Tile(op, "dst", dst)
    same_geometry(op, "dst", d, "on_true_tile", t)
    if not on_true_tile.dtype.is_float:
        raise NkiError(op, f"on_true_tile {on_true_tile.describe()} must be a float tile")
    if range_start < 0 or range_start + d.nf > 1 << 24:
        raise NkiError(op, f"range_start {range_start} + {d.nf} elements must stay within [0, 2^24) so indices are "
                           "exact in fp32")
    for role, b in (("bound0", bound0), ("bound1", bound1)):
        if not isinstance(b, NkiTensor):
            raise NkiError(op, f"{role} must be a ({t.np}, 1) tensor, got {b!r}")
    lo, hi = column(op, "bound0", bound0, t.np), column(op, "bound1", bound1, t.np)
    idx = (range_start + np.arange(d.nf)).astype(np.float32)[None, :]
    keep = (comp_op0(idx, lo) != 0) & (comp_op1(idx, hi) != 0)
    out = np.where(keep, t.read(), np.float32(FLOAT32_MIN))
    d.write(out, prog.rounds)
    cmd = member(op, "reduce_cmd", reduce_cmd, _reduce_cmd, _reduce_cmd.reset_reduce)
    regs = accumulate(prog.vector_acc, reduce_op, cmd, reduce_rows(reduce_op, out, -np.inf))
    if reduce_res is not None:
        write_reduce_res(op, reduce_res, regs)
