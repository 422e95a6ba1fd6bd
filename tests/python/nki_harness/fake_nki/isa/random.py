"""Random numbers: `rng`, `rand2`, `dropout`, `set_rng_seed`,
`rand_set_state`, `rand_get_state` on the per-lane XORWOW generators of
`rng.py` (lane = partition of the instruction's tile)."""

import numpy as np

from .. import rng as prng
from ..errors import NkiError
from ..runtime import current, instruction
from ..tensor import PSUM, NkiTensor, describe
from ..tile import Tile, column, same_geometry
from .enums import engine as _engine
from .enums import member


def _lanes(prog, engine, tile):
    return prog.rng[engine][tile.p0:tile.p0 + tile.np]


def draws(prog, engine, tile):
    """(np, nf) 32-bit draws for `tile`, advancing its lanes' generators."""
    state = _lanes(prog, engine, tile)
    out = prng.draw(state, tile.nf)
    prog.rng[engine][tile.p0:tile.p0 + tile.np] = state
    return out


def _engine_name(op, prog, value, default, allowed_from):
    eng = member(op, "engine", value, _engine, default)
    if eng not in allowed_from:
        raise NkiError(op, f"engine {eng.name} has no random generator here; use "
                           f"{' or '.join(e.name for e in allowed_from)}")
    need = allowed_from[eng]
    if prog.hw.nc_version < need:
        raise NkiError(op, f"engine {eng.name} needs NeuronCore-v{need}; the launch targets {prog.hw.name}")
    return eng.name


@instruction
def rng(dst, engine=None, name=None):
    """Fills the integer tile `dst` with 32 random bits per element, keeping the
    low bits that fit its dtype."""
    op = "nisa.rng"
    prog = current()
    eng = _engine_name(op, prog, engine, _engine.vector, {_engine.vector: 2, _engine.gpsimd: 3})
    d = Tile(op, "dst", dst)
    if dst.dtype.is_float or dst.dtype.packs or dst.dtype.boolean:
        raise NkiError(op, f"dst {dst.describe()} must have an integer dtype (int8..uint32)")
    if eng == "gpsimd" and dst.buffer is PSUM:
        raise NkiError(op, f"dst {dst.describe()} is in PSUM, which the GpSimd engine cannot access")
    d.write_raw(dst.dtype.from_bits(draws(prog, eng, d) & np.uint32((1 << (8 * dst.dtype.size)) - 1)))


@instruction
def rand2(dst, min, max, name=None):  # noqa: A002  (the documented parameter names)
    """Fills `dst` with `min + u * (max - min)`, u uniform in [0, 1) from the Vector
    lanes; `min` / `max` are numbers or (P, 1) columns. NeuronCore-v4+."""
    op = "nisa.rand2"
    prog = current()
    if prog.hw.nc_version < 4:
        raise NkiError(op, f"rand2 needs NeuronCore-v4 (trn3); the launch targets {prog.hw.name}")
    d = Tile(op, "dst", dst)
    lo, hi = column(op, "min", min, d.np), column(op, "max", max, d.np)
    if np.any(np.broadcast_to(lo, (d.np, 1)) >= np.broadcast_to(hi, (d.np, 1))):
        raise NkiError(op, "min must be less than max")
    u = prng.uniform(draws(prog, "vector", d))
    d.write(lo + u * (hi - lo), prog.rounds)


@instruction
def dropout(dst, data, prob, name=None):
    """`dst = data` where a uniform draw u >= prob, 0 elsewhere (no rescaling);
    `prob` a number or a (P, 1) column."""
    op = "nisa.dropout"
    x, d = Tile(op, "data", data), Tile(op, "dst", dst)
    same_geometry(op, "dst", d, "data", x)
    if dst.dtype is not data.dtype:
        raise NkiError(op, f"dst is {dst.dtype.name} but data is {data.dtype.name}; they must match")
    if isinstance(prob, NkiTensor) and not data.dtype.is_float and prob.dtype.name != "float32":
        raise NkiError(op, f"prob is {prob.dtype.name} but data is {data.dtype.name}: probabilities for integer "
                           "data must be float32")
    apply_dropout(current(), x, d, column(op, "prob", prob, x.np))


def apply_dropout(prog, x, d, prob):
    """Writes tile `x` into tile `d` with elements dropped where u < prob."""
    keep = prng.uniform(draws(prog, "vector", x)) >= prob
    d.write(np.where(keep, x.read(), np.float32(0)), prog.rounds)


def seed_of(op, role, t):
    """The 32-bit seed held by `t`, a [1, 1] SBUF or PSUM tensor of a 32-bit dtype."""
    if not isinstance(t, NkiTensor) or not t.buffer.on_chip or t.size != 1 or t.dtype.size != 4:
        raise NkiError(op, f"{role} must be a [1, 1] 32-bit SBUF or PSUM tensor, got "
                           f"{describe(t)}")
    return int(t.dtype.to_bits(t.read_cells()).reshape(-1)[0])


def seed_vector(prog, seed):
    """Seeds every Vector lane from `seed`."""
    prog.rng["vector"] = prng.seeded(seed, prog.hw.pmax, "vector")


@instruction
def set_rng_seed(src_seeds, name=None):
    """Seeds the Vector engine's generators from the 32-bit value in `src_seeds`."""
    prog = current()
    seed_vector(prog, seed_of("nisa.set_rng_seed", "src_seeds", src_seeds))


def _state_tile(op, prog, role, t, engine):
    eng = _engine_name(op, prog, engine, _engine.gpsimd, {_engine.gpsimd: 3, _engine.vector: 4})
    tile = Tile(op, role, t)
    width = prng.STREAMS[eng] * prng.WORDS
    if t.dtype.name != "uint32" or tile.nf != width:
        raise NkiError(op, f"{role} {t.describe()} must be uint32 with {width} elements per partition (the "
                           f"{eng} XORWOW state)")
    if eng == "gpsimd" and t.buffer is PSUM:
        raise NkiError(op, f"{role} {t.describe()} is in PSUM, which the GpSimd engine cannot access")
    return eng, tile


@instruction
def rand_set_state(src_seeds, engine=None, name=None):
    """Loads each lane's XORWOW state from its partition of `src_seeds`."""
    op = "nisa.rand_set_state"
    prog = current()
    eng, tile = _state_tile(op, prog, "src_seeds", src_seeds, engine)
    if src_seeds.buffer is PSUM:
        raise NkiError(op, f"src_seeds {src_seeds.describe()} must be in SBUF")
    prog.rng[eng][tile.p0:tile.p0 + tile.np] = tile.read_raw().astype(np.uint32)


@instruction
def rand_get_state(dst, engine=None, name=None):
    """Stores each lane's XORWOW state into its partition of `dst`."""
    prog = current()
    eng, tile = _state_tile("nisa.rand_get_state", prog, "dst", dst, engine)
    tile.write_raw(prog.rng[eng][tile.p0:tile.p0 + tile.np].astype(np.int64))
