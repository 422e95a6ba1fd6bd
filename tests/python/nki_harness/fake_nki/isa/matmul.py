"""Tensor engine: `nc_matmul` and `nc_transpose`."""

import numpy as np

from ..dtypes import DTYPES
from ..errors import NkiError
from ..hw import GENERATIONS
from ..runtime import current, instruction
from ..tensor import MATMUL, PSUM, SBUF, UNWRITTEN, NkiTensor
from ..tile import Tile
from .enums import engine as _engine
from .enums import matmul_perf_mode as _perf_mode
from .enums import member

_F32, _BF16 = DTYPES["float32"], DTYPES["bfloat16"]


def _in(op, role, t, buffer):
    if isinstance(t, NkiTensor) and t.buffer is not buffer:
        hint = "the Tensor Engine writes only PSUM" if buffer is PSUM else "the Tensor Engine reads only SBUF"
        raise NkiError(op, f"{role} {t.describe()} must be in {buffer.label} ({hint})")


@instruction
def nc_matmul(dst, stationary, moving, is_stationary_onezero=False, is_moving_onezero=False, is_transpose=False,
              accumulate=None, tile_position=None, tile_size=None, perf_mode=None, name=None):
    """`dst = stationary^T . moving` on the Tensor engine, contracting over the
    partition dim in float32 into PSUM.

    `accumulate=False` overwrites, `True` adds onto dst, `None` lets the compiler
    infer the flag: it overwrites the cells no write has touched since the PSUM
    tensor was allocated and adds onto the others (a memset's included); the
    docs' limits on what `True` may add onto are errors (see `_added_cells`).
    `is_transpose=True` writes `stationary^T` bit-exactly (dst keeps the input
    dtype). `perf_mode=double_row` contracts over the partition dim and the first
    free dim (of 2). The one-zero hints and tile position / size
    have no numeric effect.
    """
    op = "nisa.nc_matmul"
    rows = _double_row_pairs(op, member(op, "perf_mode", perf_mode, _perf_mode, None), stationary, moving)
    _in(op, "dst", dst, PSUM)
    _in(op, "stationary", stationary, SBUF)
    _in(op, "moving", moving, SBUF)
    st, mv, dt = Tile(op, "stationary", stationary), Tile(op, "moving", moving), Tile(op, "dst", dst)
    hw = current().hw
    if st.np != mv.np:
        raise NkiError(op, f"stationary {stationary.describe()} has {st.np} partitions but moving "
                           f"{moving.describe()} has {mv.np}: the contraction (partition) dims must match")
    if st.nf // rows > hw.gemm_stationary_fmax:
        raise NkiError(op, f"stationary {stationary.describe()} has free size {st.nf // rows} > gemm_stationary_fmax "
                           f"{hw.gemm_stationary_fmax}")
    moving_max = hw.gemm_moving_fmax_bf16_dst if dst.dtype is _BF16 and hw.gemm_moving_fmax_bf16_dst else \
        hw.gemm_moving_fmax
    if mv.nf // rows > moving_max:
        raise NkiError(op, f"moving {moving.describe()} has free size {mv.nf} > gemm_moving_fmax {moving_max} on "
                           f"{hw.name}")
    for role, t in (("stationary", stationary), ("moving", moving)):
        if not t.dtype.is_float:
            raise NkiError(op, f"{role} {t.describe()} must be a float dtype")
    if (stationary.dtype is _F32) != (moving.dtype is _F32):
        raise NkiError(op, f"stationary is {stationary.dtype.name} and moving is {moving.dtype.name}: if either "
                           "operand is float32 both must be")
    m, k = st.nf // rows, st.np
    n = k if is_transpose else mv.nf // rows
    if (dt.np, dt.nf) != (m, n):
        raise NkiError(op, f"dst {dst.describe()} is {dt.np} partitions x {dt.nf} elements but stationary^T.moving "
                           f"is {m} x {n} (stationary free x moving free)")
    if is_transpose:
        if dst.dtype is not stationary.dtype:
            raise NkiError(op, f"with is_transpose, dst must have the input dtype {stationary.dtype.name}, it is "
                               f"{dst.dtype.name}")
        dt.write_raw(st.read_raw().T, matmul=True)
        return
    if not (dst.dtype is _F32 or (dst.dtype is _BF16 and hw.has_bf16_psum)):
        raise NkiError(op, f"dst {dst.describe()} must be float32{' or bfloat16' if hw.has_bf16_psum else ''} on "
                           f"{hw.name}")
    # double_row contracts over (partition, first free dim): row (p, j) of each operand
    product = k_ordered_product(st.read().reshape(k * rows, m), mv.read().reshape(k * rows, n))
    dt.write(accumulated(op, product, dst, dt, accumulate, hw), current().rounds, matmul=True)


def k_ordered_product(a, b):
    """`a^T . b` for float32 `a` (K, M) and `b` (K, N), each element's products
    added in k order from zero, one rounding to float32 per step (a fused
    multiply-add): the emulator's GEMM. A BLAS `np.matmul` adds in an order of
    its own that depends on the machine's kernels, so its last bits would
    depend on the machine. When every product is exact in float32
    (`_products_exact_in_float32`: bfloat16, float16 or float8 values) the
    steps run in float32, where `acc + a*b` then rounds once; otherwise the
    product and the running sum meet in float64 (the product is exact there)
    and round to float32."""
    acc = np.zeros((a.shape[1], b.shape[1]), np.float32)
    if _products_exact_in_float32(a) and _products_exact_in_float32(b):
        a32, b32 = a.astype(np.float32, copy=False), b.astype(np.float32, copy=False)
        step = np.empty(acc.shape, np.float32)
        for k in range(a.shape[0]):
            np.multiply.outer(a32[k], b32[k], out=step)
            np.add(acc, step, out=acc)
        return acc
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    step = np.empty(acc.shape)
    for k in range(a.shape[0]):
        np.multiply.outer(a64[k], b64[k], out=step)
        # Added in float64, cast to float32 on the way out.
        np.add(step, acc, out=acc, casting="same_kind")
    return acc


# Significands of at most 12 bits multiply to at most 24 (exact in float32);
# magnitudes within 2^±62 keep the products normal and finite.
_SHORT_SIGNIFICAND_MASK = np.uint32((1 << 12) - 1)
_EXACT_PRODUCT_EXPONENT = 62


def _products_exact_in_float32(x):
    """Whether the products of `x`'s values with any such values are exact in
    float32: every value zero or normal with a significand of at most 12 bits
    and a magnitude within 2^-62..2^62 (what bfloat16, float16 and float8 data
    held in float32 are). Then the cheaper float32 steps of
    `k_ordered_product` give its result exactly."""
    x = np.asarray(x, np.float32)
    if np.any(x.view(np.uint32) & _SHORT_SIGNIFICAND_MASK):
        return False
    mag = np.abs(x[x != 0])
    lo, hi = 2.0 ** -_EXACT_PRODUCT_EXPONENT, 2.0 ** _EXACT_PRODUCT_EXPONENT
    return mag.size == 0 or bool(mag.min() >= lo and mag.max() <= hi)


def _double_row_pairs(op, mode, stationary, moving):
    """Rows of the contraction each partition holds: 2 in `double_row` mode (the
    docs: the contraction is split between the partition dim and a first free dim
    of 2, on float8 operands, from NeuronCore-v3), else 1."""
    if mode is not _perf_mode.double_row:
        return 1
    hw = current().hw
    if hw.nc_version < 3:
        raise NkiError(op, f"perf_mode=double_row needs NeuronCore-v3 or later; the launch targets {hw.name}")
    for role, t in (("stationary", stationary), ("moving", moving)):
        if t.ndim < 3 or t.shape[1] != 2:
            raise NkiError(op, f"with perf_mode=double_row, {role} {t.describe()} must have a first free dim of 2")
        if t.dtype.name not in ("float8_e4m3", "float8_e5m2", "float8_e4m3fn"):
            raise NkiError(op, f"with perf_mode=double_row, {role} {t.describe()} must be a float8 tile")
    return 2


def _first_element(dst, dt, hits):
    """The index in view `dst` of the first True of the (np, nf) mask `hits`."""
    p, f = np.argwhere(hits)[0]
    return [int(i) for i in np.unravel_index(p * dt.nf + f, dst.shape)]


def accumulated(op, product, dst, dt, accumulate, hw):
    """`product` (float32, (np, nf)) plus what `dst` holds where the matmul adds
    onto it (`_added_cells`); only those cells of `dst` are read."""
    added = _added_cells(op, dst, dt, accumulate, hw)
    out = product.astype(np.float32, copy=True)
    out[added] += dt.read_where(added)
    return out


def _added_cells(op, dst, dt, accumulate, hw):
    """The (np, nf) cells of `dst` the matmul adds its product onto.

    The nc_matmul docs allow accumulate=True only onto what an earlier write
    initialised (onto PSUM nothing wrote it is undefined on every target), and on
    NeuronCore-v2/-v3 only onto what a matmul wrote: onto values of a memset, a
    copy or any other non-matmul instruction it is undefined there. accumulate=None
    is the compiler's inference ("first write overwrites, subsequent writes
    accumulate"): it adds onto every cell written since allocation, a memset's
    included, on every target (the NKI library's attention_bwd zeroes its dQ tile
    that way).
    """
    if accumulate is not None and not accumulate:
        return np.zeros(dt.index.shape, dtype=bool)
    writer = dst.storage.writer[dt.index]
    unwritten = writer == UNWRITTEN
    if accumulate and unwritten.any():
        raise NkiError(op, f"accumulate=True adds onto {dst.describe()}, but {int(unwritten.sum())} of its {dst.size} "
                           f"elements (the first at {_first_element(dst, dt, unwritten)}) have not been written since "
                           "the tensor was allocated: accumulating onto uninitialised PSUM is undefined behaviour on "
                           "every generation; begin the accumulation with accumulate=False or accumulate=None")
    other = (writer != UNWRITTEN) & (writer != MATMUL)
    if accumulate and other.any() and not hw.has_accumulate_onto_non_matmul_psum:
        allowed = ", ".join(h.name for h in GENERATIONS.values() if h.has_accumulate_onto_non_matmul_psum)
        raise NkiError(op, f"accumulate=True adds onto {dst.describe()}, but {int(other.sum())} of its "
                           f"{dst.size} elements (the first at {_first_element(dst, dt, other)}) were last written by "
                           f"{' and '.join(dst.storage.other_writers(writer[other]))}, not by a matmul: a matmul "
                           f"accumulating onto PSUM that a non-matmul instruction initialised is undefined behaviour "
                           f"on {hw.name} (defined on {allowed}); let a matmul write those cells first "
                           "(accumulate=False), or leave accumulate=None for the compiler to infer")
    return ~unwritten


@instruction
def nc_transpose(dst, data, engine=None, name=None):
    """Swaps the partition dim and the flattened free dims of `data`, bit-exactly
    (`dst` has `data`'s dtype). The Tensor engine (SBUF to PSUM) handles up to
    128 x 128, the Vector engine up to 32 x 32; by default the Tensor engine is
    used for SBUF-to-PSUM and the Vector engine otherwise."""
    op = "nisa.nc_transpose"
    src, dt = Tile(op, "data", data), Tile(op, "dst", dst)
    if data.dtype is not dst.dtype:
        raise NkiError(op, f"dst {dst.describe()} must have the dtype of data ({data.dtype.name})")
    if (dt.np, dt.nf) != (src.nf, src.np):
        raise NkiError(op, f"data {data.describe()} is {src.np} x {src.nf}, so dst must be {src.nf} x {src.np}; "
                           f"dst {dst.describe()} is {dt.np} x {dt.nf}")
    hw = current().hw
    eng = member(op, "engine", engine, _engine, _engine.unknown)
    if eng is _engine.unknown:
        eng = _engine.tensor if data.buffer is SBUF and dst.buffer is PSUM else _engine.vector
    if eng is _engine.tensor:
        _in(op, "data", data, SBUF)
        _in(op, "dst", dst, PSUM)
        limit = hw.pe_transpose_max
    elif eng is _engine.vector:
        limit = hw.vector_transpose_max
    else:
        raise NkiError(op, f"engine {eng.name} cannot transpose; use engine.tensor or engine.vector")
    if src.np > limit or src.nf > limit:
        raise NkiError(op, f"data {data.describe()} is {src.np} x {src.nf}, larger than the {limit} x {limit} a "
                           f"{eng.name}-engine transpose handles")
    # On the Tensor Engine a transpose is a matmul against the identity, and its PSUM
    # cells count as matmul-written.
    dt.write_raw(src.read_raw().T, matmul=eng is _engine.tensor)
