"""Random tile functions: `nl.rand`, `nl.random_seed`, `nl.dropout`, drawing
from the Vector engine's generators (see `rng.py`)."""

from .. import rng as prng
from ..isa.random import apply_dropout, seed_of, seed_vector
from ..runtime import current, instruction
from ..tile import Tile, column
from .allocation import SBUF, ndarray
from .operands import on_chip


@instruction
def rand(shape, dtype, buffer=SBUF, name=""):
    """A new tensor of uniform values in [0, 1): row p of an on-chip tensor draws
    from Vector lane p; an HBM tensor draws its elements in order from lane 0."""
    t = ndarray(shape, dtype, buffer, name or "rand")
    prog = current()
    rows = t.shape[0] if t.buffer.on_chip else 1
    lanes = prog.rng["vector"][:rows]
    u = prng.uniform(prng.draw(lanes, t.size // rows))
    prog.rng["vector"][:rows] = lanes
    t.write_cells(t.dtype.encode(u.reshape(t.shape), prog.rounds), "nl.rand")
    return t


@instruction
def random_seed(seed):
    """Seeds the Vector generators from the 32-bit value of `seed`, a [1, 1] SBUF
    or PSUM tensor of a 32-bit dtype (as the docs require)."""
    seed_vector(current(), seed_of("nl.random_seed", "seed", seed))


@instruction
def dropout(x, rate, dtype=None):
    """A new tile: `x` with each element zeroed where a uniform draw is below
    `rate` (a number or a (P, 1) column); no rescaling."""
    op = "nl.dropout"
    on_chip(op, "x", x)
    out = ndarray(x.shape, dtype or x.dtype, SBUF, "dropout")
    src = Tile(op, "x", x)
    apply_dropout(current(), src, Tile(op, "result", out), column(op, "rate", rate, src.np))
    return out
