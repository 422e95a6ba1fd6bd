"""Synchronisation and registers: `core_barrier`, `register_*`, `get_nc_version`."""

from ..errors import NkiError
from ..registers import VirtualRegister
from ..runtime import current, instruction
from ..tensor import SBUF, SHARED_HBM, NkiTensor, describe
from .enums import engine as _engine
from .enums import member, nc_version


def core_barrier(data, cores, engine=None, name=None):
    """Both programs of an LNC2 pair wait until both arrive; writes to the
    shared-HBM `data` before the barrier are visible to both after. `data`
    may also be an SBUF tile, which each program keeps for itself: the
    barrier then only synchronises (SEMANTICS.md). trn2 and later."""
    op = "nisa.core_barrier"
    prog = current()
    prog.begin_op(op)
    member(op, "engine", engine, _engine, None)
    if not prog.hw.has_core_barrier:
        raise NkiError(op, f"core_barrier needs trn2 or later; the launch targets {prog.hw.name}")
    if list(cores) != [0, 1]:
        raise NkiError(op, f"cores must be (0, 1), got {cores!r}")
    if prog.num_programs != 2:
        raise NkiError(op, "core_barrier synchronises an LNC2 pair, but the kernel was launched without an LNC2 grid")
    if not isinstance(data, NkiTensor) or data.buffer not in (SHARED_HBM, SBUF):
        raise NkiError(op, f"data {describe(data)} must be a "
                           "shared_hbm tensor or an SBUF tile")
    try:
        prog.core_barrier()
    except NkiError as e:
        e.op = e.op or op
        raise


@instruction
def register_alloc(x=None):
    """A new register holding `x`: 0 when absent, an integer, or the integer a
    one-element SBUF / HBM tensor holds (loaded as by `register_load`)."""
    if isinstance(x, NkiTensor):
        return VirtualRegister(x.scalar_value("nisa.register_alloc", "x"))
    return VirtualRegister(0 if x is None else x)


def _register(op, role, r):
    if not isinstance(r, VirtualRegister):
        raise NkiError(op, f"{role} must be a VirtualRegister, got {describe(r)}")
    return r


@instruction
def register_move(dst, src):
    """`dst = src` (a register or an integer)."""
    op = "nisa.register_move"
    _register(op, "dst", dst).set(op, src.value if isinstance(src, VirtualRegister) else src)


@instruction
def register_load(dst, src):
    """Loads the integer held by the one-element SBUF / HBM tensor `src`."""
    op = "nisa.register_load"
    _register(op, "dst", dst).set(op, src.scalar_value(op, "src"))


@instruction
def register_store(dst, src):
    """Writes the register `src` into the one-element SBUF / HBM tensor `dst`."""
    op = "nisa.register_store"
    dst.check_single(op, "dst")
    value = _register(op, "src", src).value
    t = dst.dtype
    dst.write_cells(t.encode(float(value), current().rounds) if t.is_float else t.saturate(value), op)


def get_nc_version():
    """The NeuronCore version of the launch: 2 (trn1), 3 (trn2) or 4 (trn3)."""
    return nc_version(current().hw.nc_version)


def get_nc_sub_version():
    """The silicon revision within the NeuronCore version: always 0 (the first)."""
    return 0
