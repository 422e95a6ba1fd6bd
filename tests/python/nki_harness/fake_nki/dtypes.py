"""NKI element types (`nl.float32`, `nl.bfloat16`, ...) and value encoding.

Every tensor keeps its cells in one flat NumPy array: float32 for the float
dtypes (a bf16 tensor holds float32 values that, in `hardware` precision, are
exactly representable in bf16), int64 for the integer dtypes (holding the
integer itself, always inside the dtype's range).
"""

import ml_dtypes
import numpy as np


class DType:
    """One NKI dtype: its name, size in bytes, and how values round into it."""

    def __init__(self, name, size, rounding=None, int_range=None):
        self.name = name
        self.size = size
        self.is_float = int_range is None
        self._rounding = rounding
        self.lo, self.hi = int_range if int_range else (None, None)

    def __repr__(self):
        return f"nl.{self.name}"

    @property
    def cell_type(self):
        """NumPy type of the cells that store this dtype."""
        return np.float32 if self.is_float else np.int64

    def round(self, values):
        """float32 `values` rounded (to nearest even) to this float dtype."""
        if self._rounding is None:
            return values
        return values.astype(self._rounding).astype(np.float32)

    def encode(self, values, round_floats):
        """float32 `values` as cells: floats rounded when `round_floats`; integers
        rounded half to even and saturated (NaN becomes 0), whatever the precision."""
        values = np.asarray(values, dtype=np.float32)
        if self.is_float:
            return self.round(values) if round_floats else values
        return self.saturate(np.nan_to_num(np.rint(values.astype(np.float64)), nan=0.0))

    def saturate(self, values):
        """Integer (or integral float) `values` clipped to this integer dtype's range."""
        return np.clip(values, self.lo, self.hi).astype(np.int64)

    def decode(self, cells):
        """Cells as the float32 values the compute engines see."""
        return np.asarray(cells).astype(np.float32)

    def to_int(self, cells):
        """Cells as exact integers (floats truncate toward zero, NaN becomes 0)."""
        if self.is_float:
            return np.trunc(np.nan_to_num(cells.astype(np.float64), nan=0.0)).astype(np.int64)
        return cells.astype(np.int64)

    def uninitialised(self):
        """Fill of a fresh allocation: NaN for floats, a fixed saturated pattern for ints."""
        return np.float32(np.nan) if self.is_float else self.saturate(0x5A5A5A5A)


def _int(name, bits, signed):
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    return DType(name, bits // 8, int_range=(lo, hi))


DTYPES = {
    d.name: d
    for d in [
        DType("float32", 4),
        DType("bfloat16", 2, ml_dtypes.bfloat16),
        DType("float16", 2, np.float16),
        DType("float8_e4m3", 1, ml_dtypes.float8_e4m3),
        DType("float8_e4m3fn", 1, ml_dtypes.float8_e4m3fn),
        DType("float8_e5m2", 1, ml_dtypes.float8_e5m2),
        _int("int32", 32, True),
        _int("uint32", 32, False),
        _int("int16", 16, True),
        _int("uint16", 16, False),
        _int("int8", 8, True),
        _int("uint8", 8, False),
    ]
}


def convert(cells, src, dst, round_floats):
    """Cells of dtype `src` as cells of `dst`: a raw copy for equal dtypes, else
    through the float32 value (the DMA / compute-engine cast)."""
    if src is dst:
        return cells.copy()
    return dst.encode(src.decode(cells), round_floats)
