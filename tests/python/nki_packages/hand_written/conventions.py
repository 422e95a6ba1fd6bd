"""Kernels that use conventions real NKI code relies on beyond the official
stubs: the isa enums imported from `nki.isa.constants`, `nki.dtype` annotations
and dtype lookups by `str()`, `nki.typing` annotations (also under its
`neuronxcc.nki.typing` path), a unary ALU operator (`nl.abs`) as the op of a
tensor-scalar instruction, DMA writes at a dynamic start that `oob_mode.skip`
drops when out of bounds, access patterns built past the end but only used in
range, fp8 matmuls in `double_row` mode, and PSUM tensors wider than a bank,
written one bank per matmul.
"""

import neuronxcc.nki.typing as legacy_nt

import nki
import nki.isa as nisa
import nki.language as nl
import nki.typing as nt
from nki.isa import constants as isa_constants
from nki.isa.constants import oob_mode

# Dtypes by their plain names, as kernels look them up (`str(nl.bfloat16)` is "bfloat16").
_BY_NAME = {str(d): d for d in (nl.float32, nl.bfloat16, nl.float16)}


@nki.jit
def row_abs_max(x: nt.tensor[128, 64]):
    """Per row of a (P, F) tensor: |x| element-wise and max |x| over the row, with
    `nl.abs` as the ALU op of tensor_scalar_reduce (its operand must be 0)."""
    rows, cols = x.shape
    tile = nl.load(x)
    magnitudes = nl.ndarray((rows, cols), dtype=nl.float32, buffer=nl.sbuf)
    peak = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar_reduce(dst=magnitudes, data=tile, op0=nl.abs, operand0=0.0, reduce_op=nl.maximum,
                              reduce_res=peak)
    abs_out = nl.ndarray((rows, cols), dtype=nl.float32, buffer=nl.shared_hbm)
    peak_out = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(abs_out, magnitudes)
    nl.store(peak_out, peak)
    return abs_out, peak_out


@nki.jit
def cast_to(x, dtype: nki.dtype = nl.bfloat16):
    """`x` rounded to `dtype`, found by its plain name: `str(dtype)`."""
    target = _BY_NAME[str(dtype)]
    tile = nl.load(x)
    cast = nl.ndarray(x.shape, dtype=target, buffer=nl.sbuf)
    nisa.tensor_copy(dst=cast, src=tile)
    out = nl.ndarray(x.shape, dtype=target, buffer=nl.shared_hbm)
    nl.store(out, cast)
    return out


@nki.jit
def place_rows(x: legacy_nt.mutable_tensor, offsets, out_rows):
    """Row r of the (R, F) tensor `x` lands at row `offsets[r]` of an
    (out_rows, F) output of -1s, by a DMA at a dynamic start (`scalar_offset`);
    rows whose offset lies outside the output are skipped (`oob_mode.skip`)."""
    rows, cols = x.shape
    out = nl.ndarray((out_rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    fill = nl.ndarray((out_rows, cols), dtype=x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=fill, value=-1.0)
    nisa.dma_copy(dst=out, src=fill)
    table = nl.ndarray((1, rows), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=table, src=offsets.reshape((1, rows)))
    for r in nl.sequential_range(rows):
        row = nl.ndarray((1, cols), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=row, src=x[r:r + 1, :])
        dst = out.ap(pattern=[[cols, 1], [1, cols]], offset=0, scalar_offset=table[0:1, r:r + 1], indirect_dim=0)
        nisa.dma_copy(dst=dst, src=row, oob_mode=oob_mode.skip, dge_mode=isa_constants.dge_mode.swdge)
    return out


@nki.jit
def column_pairs(x, group):
    """Sums of `group` adjacent columns of a (P, F) tensor, F a multiple of `group`
    but the loop running one group past the end: the view of that last group is
    built (past the end) but only used when in range, as kernels guard partial tiles."""
    rows, cols = x.shape
    tile = nl.load(x)
    sums = nl.ndarray((rows, cols // group), dtype=nl.float32, buffer=nl.sbuf)
    for g in nl.static_range(cols // group + 1):
        window = tile.ap(pattern=[[cols, rows], [1, group]], offset=g * group)
        if g < cols // group:
            nisa.tensor_reduce(dst=sums[:, g:g + 1], op=nl.add, data=window, axis=1)
    out = nl.ndarray((rows, cols // group), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, sums)
    return out


@nki.jit
def fp8_matmul_double_row(a, b):
    """`a.T @ b` for float8 a (256, M) and b (256, N): the 256-long contraction
    sits in 128 partitions x 2 rows (`matmul_perf_mode.double_row`)."""
    k, m = a.shape
    n = b.shape[1]
    st = nl.ndarray((k // 2, 2, m), dtype=a.dtype, buffer=nl.sbuf)
    mv = nl.ndarray((k // 2, 2, n), dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=st, src=a.reshape((k // 2, 2, m)))
    nisa.dma_copy(dst=mv, src=b.reshape((k // 2, 2, n)))
    acc = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=st, moving=mv, perf_mode=isa_constants.matmul_perf_mode.double_row)
    res = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    out = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, res)
    return out


@nki.jit
def wide_psum_matmul(a, b):
    """`a.T @ b` for a (K, M) and b (K, N), K <= 128 and N a multiple of 512: the
    (M, N) fp32 result lives in one PSUM tensor spanning N / 512 banks, each bank
    written by its own matmul (at most `gemm_moving_fmax` columns), and leaves PSUM
    in one copy."""
    k, m = a.shape
    n = b.shape[1]
    bank = nl.tile_size.psum_bank_fmax
    st = nl.load(a)
    mv = nl.load(b)
    acc = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.psum)
    for j in nl.static_range(n // bank):
        nisa.nc_matmul(dst=acc[:, j * bank:(j + 1) * bank], stationary=st, moving=mv[:, j * bank:(j + 1) * bank])
    res = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    out = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, res)
    return out
