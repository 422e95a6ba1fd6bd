"""DMA: `dma_copy` (with dtype cast) and `dma_transpose`."""

import math

import numpy as np

from ..dtypes import convert
from ..errors import NkiError
from ..runtime import current, instruction
from ..tensor import PSUM, SBUF, NkiTensor, describe
from .enums import dge_mode as _dge_mode
from .enums import engine as _engine
from .enums import member
from .enums import oob_mode as _oob_mode


def dma_operand(op, role, t, skip_oob=False):
    """Refuses `t` as a DMA operand of `op` unless it is a tensor outside PSUM
    within its bounds (shared with `dma_compute`)."""
    if not isinstance(t, NkiTensor):
        raise NkiError(op, f"{role} must be a tensor, got {t!r}")
    if t.buffer is PSUM:
        raise NkiError(op, f"{role} {t.describe()} is in PSUM, which DMA cannot access; move PSUM data to SBUF "
                           "with nisa.tensor_copy first")
    if not (skip_oob and t.is_indirect()):  # skipped rows are checked per row when the transfer runs
        t.check_bounds(op)


def _transfer(op, dst, dst_idx, src, src_idx):
    """Moves src cells `src_idx` to dst cells `dst_idx` (both in logical order),
    casting through float32, leaving out every pair with a skipped (-1) side."""
    keep = (src_idx >= 0) & (dst_idx >= 0)
    cells = convert(src.storage.load(src_idx[keep]), src.dtype, dst.dtype, current().rounds)
    dst.storage.store(dst_idx[keep], cells)
    dst.storage.record_write(dst_idx[keep], op)


@instruction
def dma_copy(dst, src, priority=None, oob_mode=None, dge_mode=None, engine=None, name=None):
    """`dst = src` element by element (equal element counts, paired in row-major
    order), casting through float32 when the dtypes differ. HBM and SBUF only.
    With `oob_mode=skip`, the out-of-bound rows of an indirect (vector_offset)
    src or dst are not transferred."""
    op = "nisa.dma_copy"
    skip = member(op, "oob_mode", oob_mode, _oob_mode, _oob_mode.error) is _oob_mode.skip
    dma_operand(op, "src", src, skip)
    dma_operand(op, "dst", dst, skip)
    member(op, "engine", engine, _engine, None)
    if src.size != dst.size:
        raise NkiError(op, f"src {src.describe()} has {src.size} elements but dst {dst.describe()} has {dst.size}; "
                           "they must match")
    if member(op, "dge_mode", dge_mode, _dge_mode, None) is _dge_mode.hwdge and src.dtype is not dst.dtype:
        raise NkiError(op, f"dge_mode=hwdge moves raw bytes and cannot cast {src.dtype.name} to {dst.dtype.name}; "
                           "use equal dtypes or another DGE mode")
    _transfer(op, dst, dst.cell_index(skip).reshape(-1), src, src.cell_index(skip).reshape(-1))


_PERMUTATIONS = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}


def _hwdge_limits(op, src):
    """The hardware-DGE transpose limits of the NKI 2.32 docstring: NeuronCore-v3
    or newer, a 2-byte dtype, and 16 rows for a 2-d src, or a leading dim in
    {1, 2, 4, 8, 16} whose product with src.shape[-2] is a multiple of 16 for a
    3-d or 4-d src. (Its src.shape[-1] <= 128 is dst's partition dim, which an
    SBUF tile bounds already.)"""
    hw = current().hw
    if hw.nc_version < 3:
        raise NkiError(op, f"dge_mode: hwdge on {hw.name}; the hardware DGE exists on NeuronCore-v3 (trn2) and newer")
    if src.dtype.size != 2:
        raise NkiError(op, f"src: {src.dtype.name} has {src.dtype.size}-byte elements; dge_mode=hwdge transposes "
                           "2-byte dtypes only")
    lead, rows = src.shape[0], src.shape[-2]
    if src.ndim == 2 and lead != 16:
        raise NkiError(op, f"src: shape {list(src.shape)} has {lead} rows; dge_mode=hwdge needs exactly 16 rows in "
                           "a 2-d src")
    if src.ndim > 2 and lead not in (1, 2, 4, 8, 16):
        raise NkiError(op, f"src: shape {list(src.shape)} leads with {lead}; dge_mode=hwdge needs src.shape[0] in "
                           "{1, 2, 4, 8, 16} for a 3-d or 4-d src")
    if src.ndim > 2 and (lead * rows) % 16:
        raise NkiError(op, f"src: shape {list(src.shape)} gives src.shape[0] * src.shape[-2] = {lead * rows}; "
                           "dge_mode=hwdge needs a multiple of 16 for a 3-d or 4-d src")


@instruction
def dma_transpose(dst, src, axes=None, priority=None, dge_mode=None, oob_mode=None, name=None):
    """`dst[i_0..i_n] = src[j]` with `j[axes[t]] = i_t`: dst in SBUF, src in HBM or
    SBUF, equal dtypes, `dst.shape` the permuted `src.shape` (rank included). A
    direct source takes dge_mode unknown, hwdge (which adds its limits) or none; an
    indirect one (a vector_offset view: a gather-transpose) takes unknown or
    swdge and its own limits, and is the only kind that may use oob_mode=skip
    (dst keeps the elements whose source rows are out of bounds)."""
    op = "nisa.dma_transpose"
    if not isinstance(dst, NkiTensor) or dst.buffer is not SBUF:
        raise NkiError(op, f"dst {describe(dst)} must be in SBUF")
    oob = member(op, "oob_mode", oob_mode, _oob_mode, _oob_mode.error)
    dma_operand(op, "src", src, oob is _oob_mode.skip)
    mode = member(op, "dge_mode", dge_mode, _dge_mode, _dge_mode.unknown)
    if src.dtype is not dst.dtype:
        raise NkiError(op, f"src is {src.dtype.name} but dst is {dst.dtype.name}; dma_transpose does not cast")
    dst.check_bounds(op)
    if axes is None:
        if src.ndim not in _PERMUTATIONS:
            raise NkiError(op, f"src {src.describe()} must be 2-, 3- or 4-d")
        axes = _PERMUTATIONS[src.ndim]
    axes = tuple(axes)
    if axes not in _PERMUTATIONS.values() or len(axes) != src.ndim:
        raise NkiError(op, f"axes {list(axes)} are not a supported permutation of a {src.ndim}-d src "
                           "(use (1,0), (2,1,0) or (3,1,2,0))")
    want = tuple(src.shape[a] for a in axes)
    if dst.shape != want:
        raise NkiError(op, f"dst {dst.describe()} must have shape {list(want)}: src shape {list(src.shape)} permuted "
                           f"by axes {list(axes)}, rank included")
    if src.is_indirect():
        _indirect_limits(op, src, mode)
    else:
        if mode is _dge_mode.swdge:
            raise NkiError(op, "dge_mode: swdge is not valid for a direct transpose, which takes unknown, hwdge or "
                               "none (swdge serves indirect vector_offset sources)")
        if oob is _oob_mode.skip:
            raise NkiError(op, "oob_mode: skip is only valid for an indirect (vector_offset) src")
        if mode is _dge_mode.hwdge:
            _hwdge_limits(op, src)
    src_idx = np.transpose(src.cell_index(oob is _oob_mode.skip), axes).reshape(math.prod(want))
    _transfer(op, dst, dst.cell_index().reshape(-1), src, src_idx)


def _indirect_limits(op, src, mode):
    """The gather-transpose limits of the docstring that concern the source."""
    hw = current().hw
    if mode not in (_dge_mode.unknown, _dge_mode.swdge):
        raise NkiError(op, f"dge_mode: {mode.name} is not valid for an indirect transpose, which takes unknown or "
                           "swdge")
    if hw.nc_version < 3:
        raise NkiError(op, f"an indirect transpose needs trn2 or later; the launch targets {hw.name}")
    if src.buffer.on_chip or src.dtype.size != 2:
        raise NkiError(op, f"src {src.describe()}: an indirect transpose reads a 2-byte dtype from HBM")
    if src.shape[0] % 16 or src.shape[-1] > 128:
        raise NkiError(op, f"src shape {list(src.shape)}: an indirect transpose needs src.shape[0] divisible by 16 "
                           "and src.shape[-1] <= 128")
    if src.ndim == 4 and 1 not in src.shape[1:3]:
        raise NkiError(op, f"src shape {list(src.shape)}: a 4-d indirect transpose needs dim 1 or 2 to be 1")
