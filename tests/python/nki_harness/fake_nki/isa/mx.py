"""OCP microscaling (MX): `quantize_mx` and `nc_matmul_mx` (NeuronCore-v4+).

A scale group is 8 partitions x 4 free elements: element k of packed value
(p, j) of an x4 tile is source element (p, 4j + k), and the group of packed
values (8g..8g+7, j) shares scale (g, j). So a (P, F) source quantizes to a
(P, F / 4) x4 tile and P / 8 rows of F / 4 scales. Scales stay in the SBUF
quadrant their group came from: group g is row 32 (g // 4) + g % 4 of the scale
tile (the MXFP deep dive's "oversize" layout when the data span several
quadrants), and a scale tile starts at offset 0, 4, 8 or 12 of its quadrant.
A scale is a power of two: in float8_e8m0fnu its value, in uint8 its biased
exponent (value = 2^(b - 127)).
"""

import numpy as np

from ..dtypes import PACKED
from ..errors import NkiError
from ..runtime import current, instruction
from ..tensor import PSUM, SBUF, NkiTensor, describe
from ..tile import Tile
from .matmul import accumulated

GROUP_PARTITIONS, GROUP_ELEMENTS, QUADRANT = 8, 4, 32
# Scale rows a quadrant holds; offsets within a quadrant a scale tile may start at.
QUADRANT_SCALES, SCALE_OFFSETS = QUADRANT // GROUP_PARTITIONS, (0, 4, 8, 12)
# Largest unbiased exponent of each MX element type (the quantize_mx docs' E_max).
_EMAX = {"float8_e4m3fn_x4": 8, "float8_e5m2_x4": 15}
_SCALE_DTYPES = ("float8_e8m0fnu", "uint8")


def _needs_v4(op):
    hw = current().hw
    if hw.nc_version < 4:
        raise NkiError(op, f"{op.removeprefix('nisa.')} needs NeuronCore-v4 (trn3); the launch targets {hw.name}")


def _in(op, role, t, buffer):
    if not isinstance(t, NkiTensor) or t.buffer is not buffer:
        raise NkiError(op, f"{role} {describe(t)} must be in "
                           f"{buffer.label}")
    return Tile(op, role, t)


def scale_row(g):
    """The scale-tile row of group g: row g % 4 of the group's quadrant."""
    return g // QUADRANT_SCALES * QUADRANT + g % QUADRANT_SCALES


def _scale_tiles(op, role, t, groups, nf):
    """The scale operand of `groups` x `nf` scales as one (rows, nf) tile per
    quadrant, in group order."""
    s = _in(op, role, t, SBUF)
    if t.dtype.name not in _SCALE_DTYPES:
        raise NkiError(op, f"{role} {t.describe()} must be float8_e8m0fnu or uint8")
    need = scale_row(groups - 1) + 1
    if s.nf != nf or s.np < need:
        raise NkiError(op, f"{role} {t.describe()} must be at least {need} partitions x {nf} elements (one scale per "
                           "8 partitions x 4 elements, kept in the group's quadrant: group g at row 32 (g // 4) + "
                           f"g % 4), it is {s.np} x {s.nf}")
    if s.p0 % QUADRANT not in SCALE_OFFSETS:
        raise NkiError(op, f"{role} {t.describe()} starts at partition {s.p0}: a scale tile starts at offset 0, 4, 8 "
                           "or 12 of a quadrant")
    return [Tile(op, role, t[scale_row(g):scale_row(g) + min(QUADRANT_SCALES, groups - g)])
            for g in range(0, groups, QUADRANT_SCALES)]


def scale_exponents(tiles):
    """The unbiased exponents held by a scale operand's quadrant tiles, (groups, nf)."""
    raw = [t.read_raw() if not t.dtype.is_float else t.dtype.to_bits(t.read_raw()) for t in tiles]
    return np.concatenate(raw).astype(np.int64) - 127


def unpack(tile):
    """An x4 tile's elements as float32, shape (np, nf, 4)."""
    elem, n, bits = tile.dtype.packs
    raw = tile.read_raw().astype(np.uint64)
    fields = [(raw >> np.uint64(k * bits)) & np.uint64((1 << bits) - 1) for k in range(n)]
    codes = np.stack(fields, axis=-1)
    if bits == 8:
        return codes.astype(np.uint8).view(elem).astype(np.float32)
    return _fp4(codes)


def _fp4(codes):
    """float4_e2m1fn codes as float32 (sign, 2 exponent bits, 1 mantissa bit)."""
    table = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6], dtype=np.float32)
    mag = table[(codes & 7).astype(np.int64)]
    return np.where(codes & 8, -mag, mag).astype(np.float32)


@instruction
def quantize_mx(dst, src, dst_scale, name=None):
    """Quantizes fp16 / bf16 `src` to MXFP8: per group, scale
    `X = 2^(floor(log2(max |v|)) - (E_max - 1))` (2^-127 for an all-zero group),
    elements `v / X` rounded to nearest even in the x4 element type. A group
    holding NaN gets NaN elements and the NaN scale (0xFF)."""
    op = "nisa.quantize_mx"
    _needs_v4(op)
    s = _in(op, "src", src, SBUF)
    d = _in(op, "dst", dst, SBUF)
    if src.dtype.name not in ("float16", "bfloat16"):
        raise NkiError(op, f"src {src.describe()} must be float16 or bfloat16")
    if dst.dtype.name not in _EMAX:
        raise NkiError(op, f"dst {dst.describe()} must be float8_e5m2_x4 or float8_e4m3fn_x4")
    if s.np % 32 or s.nf % GROUP_ELEMENTS:
        raise NkiError(op, f"src {src.describe()} must have a multiple of 32 partitions and of 4 elements each")
    if (d.np, d.nf) != (s.np, s.nf // GROUP_ELEMENTS):
        raise NkiError(op, f"dst {dst.describe()} must be {s.np} x {s.nf // GROUP_ELEMENTS} (a quarter of src's "
                           "free size)")
    sc = _scale_tiles(op, "dst_scale", dst_scale, s.np // GROUP_PARTITIONS, s.nf // GROUP_ELEMENTS)
    v = s.read().astype(np.float64).reshape(s.np // GROUP_PARTITIONS, GROUP_PARTITIONS, d.nf, GROUP_ELEMENTS)
    amax = np.abs(v).max(axis=(1, 3))
    poisoned = np.isnan(amax)
    with np.errstate(divide="ignore", invalid="ignore"):
        exp = np.where(amax > 0, np.floor(np.log2(np.where(amax > 0, amax, 1))) - (_EMAX[dst.dtype.name] - 1), -127)
    exp = np.clip(np.where(poisoned, 0, exp), -127, 127).astype(np.int64)
    scaled = np.where(poisoned[:, None, :, None], np.nan, v / np.exp2(exp)[:, None, :, None])
    elem = PACKED[dst.dtype.name][0]
    codes = scaled.astype(np.float32).astype(elem).view(np.uint8).astype(np.uint64)
    packed = sum(codes[..., k] << np.uint64(8 * k) for k in range(GROUP_ELEMENTS))
    d.write_raw(packed.reshape(s.np, d.nf).astype(np.int64))
    biased = np.where(poisoned, 255, exp + 127)
    cells = biased if not dst_scale.dtype.is_float else dst_scale.dtype.from_bits(biased)
    for q, tile in enumerate(sc):
        tile.write_raw(cells[q * QUADRANT_SCALES:q * QUADRANT_SCALES + tile.np])


@instruction
def nc_matmul_mx(dst, stationary, moving, stationary_scale, moving_scale, tile_position=None, tile_size=None,
                 accumulate=None, name=None):
    """`dst[m, n] = sum over partitions k and packed slots j of
    st[k, m, j] * 2^e_st[k // 8, m] * mv[k, n, j] * 2^e_mv[k // 8, n]` into PSUM,
    accumulating as `nc_matmul` does. Tile position / size have no numeric effect.

    The sum is defined, not left to a BLAS order: elements dequantize to float32,
    each group's 32 products (8 partitions x 4 slots) are summed in float64 (exact
    for float8_e4m3fn and float4 elements, whatever the order), the group sums are
    added in float64 in group order, and the total rounds once to float32."""
    op = "nisa.nc_matmul_mx"
    _needs_v4(op)
    st, mv = _in(op, "stationary", stationary, SBUF), _in(op, "moving", moving, SBUF)
    dt = _in(op, "dst", dst, PSUM)
    for role, t in (("stationary", stationary), ("moving", moving)):
        if not t.dtype.packs:
            raise NkiError(op, f"{role} {t.describe()} must be float8_e5m2_x4, float8_e4m3fn_x4 or float4_e2m1fn_x4")
    if st.np != mv.np or st.np % 32:
        raise NkiError(op, f"stationary and moving must share a partition count that is a multiple of 32 "
                           f"(got {st.np} and {mv.np})")
    if st.nf % 2 or st.nf > 128:
        raise NkiError(op, f"stationary free size {st.nf} must be even and at most 128")
    if dst.dtype.name not in ("float32", "bfloat16"):
        raise NkiError(op, f"dst {dst.describe()} must be float32 or bfloat16")
    limit = 4096 if dst.dtype.name == "float32" else 8192
    if mv.nf > limit:
        raise NkiError(op, f"moving free size {mv.nf} > {limit} for a {dst.dtype.name} dst")
    if (dt.np, dt.nf) != (st.nf, mv.nf):
        raise NkiError(op, f"dst {dst.describe()} must be {st.nf} x {mv.nf} (stationary free x moving free)")
    groups = st.np // GROUP_PARTITIONS
    ss = _scale_tiles(op, "stationary_scale", stationary_scale, groups, st.nf)
    ms = _scale_tiles(op, "moving_scale", moving_scale, groups, mv.nf)
    a = unpack(st) * np.exp2(np.repeat(scale_exponents(ss), GROUP_PARTITIONS, axis=0))[:, :, None]
    b = unpack(mv) * np.exp2(np.repeat(scale_exponents(ms), GROUP_PARTITIONS, axis=0))[:, :, None]
    # Per group, its 32 rows 4k + j of partitions and slots, as float32 values held in float64.
    rows = lambda x: x.astype(np.float32).astype(np.float64).transpose(0, 2, 1).reshape(
        groups, GROUP_PARTITIONS * GROUP_ELEMENTS, x.shape[1])
    per_group = np.matmul(rows(a).transpose(0, 2, 1), rows(b))
    total = np.zeros(per_group.shape[1:])
    for g in range(groups):
        total = total + per_group[g]
    product = total.astype(np.float32)
    dt.write(accumulated(op, product, dst, dt, accumulate, current().hw), current().rounds, matmul=True)

