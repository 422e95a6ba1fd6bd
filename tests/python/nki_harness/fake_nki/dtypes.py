"""NKI element types (`nl.float32`, `nl.bfloat16`, ...) and value encoding.

Every tensor keeps its cells in one flat NumPy array: float32 for the float
dtypes (a bf16 tensor holds float32 values that, in `hardware` precision, are
exactly representable in bf16), int64 for the integer dtypes (holding the
integer itself, always inside the dtype's range) and for the packed MX dtypes
(holding the element's raw bits; see `PACKED`). `to_bits` / `from_bits` give
every dtype's bytes, for `NkiTensor.view`.
"""

import ml_dtypes
import numpy as np

from .errors import NkiError


# The high bits of the float32 NaN a cell of an 8-bit float dtype holds for a
# NaN code: the code sits in its low byte, so bytes read through a float8 view
# and written back unchanged (a DMA of packed bytes, such as an fp32 scale stored
# as four float8_e4m3 elements) keep every NaN code instead of collapsing them.
_FP8_NAN_BITS = np.uint32(0x7FC00000)


def _round_tf32(values):
    """float32 values rounded (to nearest even) to 10 mantissa bits."""
    bits = np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    finite = np.isfinite(np.asarray(values, dtype=np.float32))
    rounded = (bits + 0x0FFF + ((bits >> 13) & 1)) & 0xFFFFE000
    return np.where(finite, rounded, bits).astype(np.uint32).view(np.float32)


class DType:
    """One NKI dtype: its name, size in bytes, how values round into it, and
    (for packed MX dtypes) the element type and count it packs."""

    def __init__(self, name, size, rounding=None, int_range=None, packs=None, boolean=False):
        self.name = name
        self.size = size
        self.is_float = int_range is None and packs is None
        self._rounding = rounding
        self.lo, self.hi = int_range if int_range else (0, (1 << (8 * size)) - 1) if packs else (None, None)
        self.packs = packs
        self.boolean = boolean

    def __repr__(self):
        return f"nl.{self.name}"

    def __str__(self):
        # NKI's dtypes are named by their plain string (the stubs: `DType = str`), and
        # kernels look dtypes up by it (`str(dtype) == "bfloat16"`).
        return self.name

    @property
    def cell_type(self):
        """NumPy type of the cells that store this dtype."""
        return np.float32 if self.is_float else np.int64

    def round(self, values):
        """float32 `values` rounded (to nearest even) to this float dtype."""
        if self._rounding is None:
            return values
        if callable(self._rounding) and not isinstance(self._rounding, type):
            return self._rounding(values)
        rounded = values.astype(self._rounding).astype(np.float32)
        if self.size == 1:
            # A NaN carrying its 8-bit code stays that NaN.
            return np.where(self._carried_nan(values), values, rounded)
        return rounded

    def _carried_nan(self, cells):
        """Which float32 `cells` are NaNs carrying one of this 8-bit dtype's NaN codes."""
        bits = np.asarray(cells, dtype=np.float32).view(np.uint32)
        codes = (bits & np.uint32(0xFF)).astype(np.uint8)
        return ((bits & ~np.uint32(0xFF)) == _FP8_NAN_BITS) & np.isnan(codes.view(self._rounding).astype(np.float32))

    def _not_packed(self):
        if self.packs:
            raise NkiError(None, f"{self.name} packs {self.packs[1]} {self.packs[0].__name__} values per element; "
                                 "only data movement, nisa.quantize_mx and nisa.nc_matmul_mx handle it")

    def encode(self, values, round_floats):
        """float32 `values` as cells: floats rounded when `round_floats`; integers
        rounded half to even and saturated (NaN becomes 0), whatever the precision;
        bool_ is 1 for every nonzero value."""
        self._not_packed()
        values = np.asarray(values, dtype=np.float32)
        if self.is_float:
            return self.round(values) if round_floats else values
        if self.boolean:
            return (np.nan_to_num(values, nan=0.0) != 0).astype(np.int64)
        return self.saturate(np.nan_to_num(np.rint(values.astype(np.float64)), nan=0.0))

    def saturate(self, values):
        """Integer (or integral float) `values` clipped to this integer dtype's range."""
        return np.clip(values, self.lo, self.hi).astype(np.int64)

    def decode(self, cells):
        """Cells as the float32 values the compute engines see."""
        self._not_packed()
        return np.asarray(cells).astype(np.float32)

    def to_int(self, cells):
        """Cells as exact integers (floats truncate toward zero, NaN becomes 0)."""
        if self.is_float:
            return np.trunc(np.nan_to_num(cells.astype(np.float64), nan=0.0)).astype(np.int64)
        return cells.astype(np.int64)

    def uninitialised(self):
        """Fill of a fresh allocation: the cell whose bits are all zero (0 for ints
        and the float dtypes; reads of it are reported, see `undefined.py`)."""
        return self.from_bits(np.zeros(1, dtype=self.bits_type))[0]

    @property
    def bits_type(self):
        """The unsigned NumPy integer of the dtype's size."""
        return {1: np.uint8, 2: np.uint16, 4: np.uint32}[self.size]

    def to_bits(self, cells):
        """The raw bits of every cell, as unsigned integers of the dtype's size."""
        cells = np.asarray(cells)
        if not self.is_float:
            return (cells.astype(np.int64) & ((1 << (8 * self.size)) - 1)).astype(self.bits_type)
        stored = _round_tf32(cells) if self.name == "tfloat32" else cells.astype(self._rounding or np.float32)
        if self.size == 1:
            codes = (np.asarray(cells, dtype=np.float32).view(np.uint32) & np.uint32(0xFF)).astype(np.uint8)
            return np.where(self._carried_nan(cells), codes, stored.view(np.uint8))
        return stored.view(self.bits_type)

    def from_bits(self, bits):
        """Cells holding the values whose raw bits are `bits`."""
        bits = np.asarray(bits).astype(self.bits_type)
        if self.is_float:
            store = np.float32 if self.name == "tfloat32" else self._rounding or np.float32
            values = bits.view(store).astype(np.float32)
            if self.size == 1:
                return np.where(np.isnan(values), (bits.astype(np.uint32) | _FP8_NAN_BITS).view(np.float32), values)
            return values
        if self.lo < 0:
            return bits.astype(np.int64) - ((bits.astype(np.int64) >> (8 * self.size - 1)) << (8 * self.size))
        return bits.astype(np.int64)


def _int(name, bits, signed):
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    return DType(name, bits // 8, int_range=(lo, hi))


# Packed MX dtypes: (element type, elements per packed value, bits per element).
# Element k of a packed value sits in bits [k * bits, (k + 1) * bits): the first
# element in the lowest byte (or nibble).
PACKED = {
    "float8_e5m2_x4": (ml_dtypes.float8_e5m2, 4, 8),
    "float8_e4m3fn_x4": (ml_dtypes.float8_e4m3fn, 4, 8),
    "float4_e2m1fn_x4": (ml_dtypes.float4_e2m1fn, 4, 4),
}

DTYPES = {
    d.name: d
    for d in [
        DType("float32", 4),
        DType("tfloat32", 4, _round_tf32),
        DType("bfloat16", 2, ml_dtypes.bfloat16),
        DType("float16", 2, np.float16),
        DType("float8_e4m3", 1, ml_dtypes.float8_e4m3),
        DType("float8_e4m3fn", 1, ml_dtypes.float8_e4m3fn),
        DType("float8_e5m2", 1, ml_dtypes.float8_e5m2),
        DType("float8_e8m0fnu", 1, ml_dtypes.float8_e8m0fnu),
        _int("int32", 32, True),
        _int("uint32", 32, False),
        _int("int16", 16, True),
        _int("uint16", 16, False),
        _int("int8", 8, True),
        _int("uint8", 8, False),
        DType("bool_", 1, int_range=(0, 1), boolean=True),
    ] + [DType(name, n * bits // 8, packs=(elem, n, bits)) for name, (elem, n, bits) in PACKED.items()]
}


def convert(cells, src, dst, round_floats):
    """Cells of dtype `src` as cells of `dst`: a raw copy for equal dtypes, else
    through the float32 value (the DMA / compute-engine cast)."""
    if src is dst:
        return cells.copy()
    return dst.encode(src.decode(cells), round_floats)
