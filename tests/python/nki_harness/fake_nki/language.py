"""`nki.language` (`nl`): allocation, the SPMD grid, tile-size constants, dtypes,
memory spaces, `ds`, loop ranges and operator tokens."""

import math
import operator
from types import SimpleNamespace

from .alu import OPS
from .dtypes import DTYPES, DType
from .errors import NkiError
from .runtime import current, instruction
from .tensor import PRIVATE_HBM, PSUM, SBUF, SHARED_HBM, Buffer, allocate
from .tensor import NkiTensor  # noqa: F401  (nl.NkiTensor, the tensor type)

sbuf, psum, hbm, private_hbm, shared_hbm = SBUF, PSUM, PRIVATE_HBM, PRIVATE_HBM, SHARED_HBM
globals().update(DTYPES)
globals().update(OPS)

tile_size = SimpleNamespace(pmax=128, psum_fmax=512, psum_bank_fmax=512, psum_bank_fmax_bytes=2048,
                            gemm_stationary_fmax=128, gemm_moving_fmax=512)


@instruction
def ndarray(shape, dtype, buffer=SBUF, name="", address=None):
    """A new uninitialised tensor (floats read as NaN until written).

    On-chip tensors hold at most `pmax` partitions and a PSUM tensor fits one 2 KiB
    bank per partition; PSUM tensors take whole banks of their program's PSUM from
    their first use (see `memory`). `address` is accepted; placement is not
    emulated. The n-th `shared_hbm` allocation of a program is one tensor for every
    program of its rank.
    """
    op = "nl.ndarray"
    prog = current()
    label = name or "tensor"
    try:
        dims = tuple(operator.index(d) for d in shape)
    except TypeError:
        raise NkiError(op, f"tensor '{label}' has shape {shape!r}; dims must be integers") from None
    if not dims or min(dims) < 1:
        raise NkiError(op, f"tensor '{label}' has shape {list(dims)}; every dim must be at least 1")
    if not isinstance(dtype, DType):
        raise NkiError(op, f"dtype of '{label}' must be an nl dtype such as nl.float32, got {dtype!r}")
    if not isinstance(buffer, Buffer):
        raise NkiError(op, f"buffer of '{label}' must be nl.sbuf, nl.psum, nl.hbm, nl.private_hbm or nl.shared_hbm, "
                           f"got {buffer!r}")
    if buffer.on_chip:
        if dims[0] > prog.hw.pmax:
            raise NkiError(op, f"{buffer.label} tensor '{label}' has partition dim {dims[0]} > pmax {prog.hw.pmax} "
                               "(dim 0 of an on-chip tensor is the partition dim)")
        per_partition = math.prod(dims[1:]) * dtype.size
        if buffer is PSUM and per_partition > prog.hw.psum_tile_max_bytes:
            raise NkiError(op, f"PSUM tensor '{label}' {list(dims)} {dtype.name} needs {per_partition} B per "
                               f"partition, more than a PSUM tile holds on {prog.hw.name} "
                               f"({prog.hw.psum_tile_max_bytes} B = {prog.hw.psum_tile_max_bytes // 4} fp32)")
    if buffer is not SHARED_HBM:
        return allocate(label, dtype, buffer, dims, prog.psum if buffer is PSUM else None)

    def check(t):
        if t.shape != dims or t.dtype is not dtype:
            raise NkiError(op, f"programs of one rank allocated different shared_hbm tensors at the same point: "
                               f"'{label}' {list(dims)} {dtype.name} vs {t.describe()}")

    return prog.shared_allocation(lambda: allocate(label, dtype, buffer, dims), check)


def _axis(op, axis):
    if axis != 0:
        raise NkiError(op, f"axis {axis} does not exist: the launch grid has {1 if current().grid else 0} dims")


def program_id(axis=0):
    """This program's index in the LNC grid (0 without a grid)."""
    _axis("nl.program_id", axis)
    return current().program


def num_programs(axes=0):
    """The grid size (1 without a grid)."""
    _axis("nl.num_programs", axes)
    return current().num_programs


def program_ndim():
    """1 when launched with a grid (`kernel[n]`), 0 without."""
    return 1 if current().grid else 0


def ds(start, size):
    """`size` positions from `start`, for indexing: `t[nl.ds(s, n)]` is `t[s:s + n]`."""
    return slice(start, start + size)


def affine_range(start, stop=None, step=1):
    """A trace-time loop range (`range` with NKI's name)."""
    return range(start, stop, step) if stop is not None else range(start)


sequential_range = static_range = affine_range
