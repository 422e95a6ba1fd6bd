//! NKI data types and their exact value semantics.
//!
//! Every tensor cell is stored in a 32-bit slot. Floating-point dtypes keep an `f32`
//! whose value is exactly representable in the dtype (the emulator rounds on every
//! write in `hardware` precision); integer dtypes keep the integer's bit pattern.

mod codes;
mod round;

pub use codes::{fp4_decode, fp8_decode, fp8_encode};
pub use round::{round_f32, round_slice};

use std::fmt;

/// An NKI element type (`nl.float32`, `nl.bfloat16`, ...).
///
/// ```
/// use nki_core::Dtype;
/// assert_eq!(Dtype::Bf16.size_bytes(), 2);
/// assert_eq!(Dtype::Bf16.python_name(), "nl.bfloat16");
/// assert_eq!(Dtype::from_python_name("float16"), Some(Dtype::F16));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dtype {
    /// IEEE binary32.
    F32,
    /// bfloat16: 8 exponent bits, 7 mantissa bits.
    Bf16,
    /// IEEE binary16.
    F16,
    /// 8-bit float, 4 exponent bits, IEEE-style infinities (`nl.float8_e4m3`).
    Fp8E4m3,
    /// 8-bit float, 4 exponent bits, no infinities, max 448 (`nl.float8_e4m3fn`).
    Fp8E4m3Fn,
    /// 8-bit float, 5 exponent bits (`nl.float8_e5m2`).
    Fp8E5m2,
    /// binary32 storage with 10 mantissa bits (`nl.tfloat32`).
    Tf32,
    /// 8-bit unsigned power of two 2^-127..=2^127, NaN at 0xFF: the OCP MX scale
    /// type (`nl.float8_e8m0fnu`).
    Fp8E8m0,
    /// Four float8_e5m2 codes in 32 bits, the first in the lowest byte (`nl.float8_e5m2_x4`).
    Fp8E5m2x4,
    /// Four float8_e4m3fn codes in 32 bits, the first in the lowest byte (`nl.float8_e4m3fn_x4`).
    Fp8E4m3Fnx4,
    /// Four float4_e2m1fn codes in 16 bits, the first in the lowest nibble (`nl.float4_e2m1fn_x4`).
    Fp4E2m1Fnx4,
    /// Signed 32-bit integer.
    I32,
    /// Unsigned 32-bit integer.
    U32,
    /// Signed 16-bit integer.
    I16,
    /// Unsigned 16-bit integer.
    U16,
    /// Signed 8-bit integer.
    I8,
    /// Unsigned 8-bit integer.
    U8,
}

impl Dtype {
    /// Every dtype, in a stable order.
    pub const ALL: [Dtype; 17] = [
        Dtype::F32,
        Dtype::Bf16,
        Dtype::F16,
        Dtype::Fp8E4m3,
        Dtype::Fp8E4m3Fn,
        Dtype::Fp8E5m2,
        Dtype::Tf32,
        Dtype::Fp8E8m0,
        Dtype::Fp8E5m2x4,
        Dtype::Fp8E4m3Fnx4,
        Dtype::Fp4E2m1Fnx4,
        Dtype::I32,
        Dtype::U32,
        Dtype::I16,
        Dtype::U16,
        Dtype::I8,
        Dtype::U8,
    ];

    /// Bytes one element occupies on the device.
    pub const fn size_bytes(self) -> usize {
        match self {
            Dtype::F32 | Dtype::Tf32 | Dtype::I32 | Dtype::U32 | Dtype::Fp8E5m2x4 | Dtype::Fp8E4m3Fnx4 => 4,
            Dtype::Bf16 | Dtype::F16 | Dtype::I16 | Dtype::U16 | Dtype::Fp4E2m1Fnx4 => 2,
            Dtype::Fp8E4m3 | Dtype::Fp8E4m3Fn | Dtype::Fp8E5m2 | Dtype::Fp8E8m0 | Dtype::I8 | Dtype::U8 => 1,
        }
    }

    /// True for the floating-point dtypes.
    pub const fn is_float(self) -> bool {
        matches!(
            self,
            Dtype::F32 | Dtype::Bf16 | Dtype::F16 | Dtype::Fp8E4m3 | Dtype::Fp8E4m3Fn | Dtype::Fp8E5m2 | Dtype::Tf32 | Dtype::Fp8E8m0
        )
    }

    /// The name NKI gives this dtype inside `nki.language`, e.g. `"bfloat16"`.
    pub const fn nl_name(self) -> &'static str {
        match self {
            Dtype::F32 => "float32",
            Dtype::Bf16 => "bfloat16",
            Dtype::F16 => "float16",
            Dtype::Fp8E4m3 => "float8_e4m3",
            Dtype::Fp8E4m3Fn => "float8_e4m3fn",
            Dtype::Fp8E5m2 => "float8_e5m2",
            Dtype::Tf32 => "tfloat32",
            Dtype::Fp8E8m0 => "float8_e8m0fnu",
            Dtype::Fp8E5m2x4 => "float8_e5m2_x4",
            Dtype::Fp8E4m3Fnx4 => "float8_e4m3fn_x4",
            Dtype::Fp4E2m1Fnx4 => "float4_e2m1fn_x4",
            Dtype::I32 => "int32",
            Dtype::U32 => "uint32",
            Dtype::I16 => "int16",
            Dtype::U16 => "uint16",
            Dtype::I8 => "int8",
            Dtype::U8 => "uint8",
        }
    }

    /// The Python expression for this dtype in emitted kernels, e.g. `"nl.bfloat16"`.
    pub fn python_name(self) -> String {
        format!("nl.{}", self.nl_name())
    }

    /// Parses an `nl` dtype name, with or without the `nl.` prefix.
    pub fn from_python_name(name: &str) -> Option<Dtype> {
        let bare = name.strip_prefix("nl.").unwrap_or(name);
        Dtype::ALL.into_iter().find(|d| d.nl_name() == bare)
    }

    /// Converts a stored cell to the `f32` value it represents.
    #[inline]
    pub fn cell_to_f32(self, cell: f32) -> f32 {
        match self {
            Dtype::I32 | Dtype::I16 | Dtype::I8 => cell.to_bits() as i32 as f32,
            Dtype::U32 | Dtype::U16 | Dtype::U8 | Dtype::Fp8E5m2x4 | Dtype::Fp8E4m3Fnx4 | Dtype::Fp4E2m1Fnx4 => cell.to_bits() as f32,
            _ => cell,
        }
    }

    /// Converts a stored cell to the exact integer it holds (floats are truncated toward zero).
    #[inline]
    pub fn cell_to_i64(self, cell: f32) -> i64 {
        match self {
            Dtype::I32 | Dtype::I16 | Dtype::I8 => cell.to_bits() as i32 as i64,
            Dtype::U32 | Dtype::U16 | Dtype::U8 | Dtype::Fp8E5m2x4 | Dtype::Fp8E4m3Fnx4 | Dtype::Fp4E2m1Fnx4 => cell.to_bits() as i64,
            _ => cell as i64,
        }
    }

    /// Encodes an `f32` value as a cell of this dtype.
    ///
    /// Floats are rounded to nearest-even when `round` is set (the `hardware`
    /// precision model); integers always round to nearest-even and saturate.
    #[inline]
    pub fn f32_to_cell(self, v: f32, round: bool) -> f32 {
        if self.is_float() {
            if round { round_f32(self, v) } else { v }
        } else {
            self.i64_to_cell(v.round_ties_even().clamp(i64::MIN as f32, i64::MAX as f32) as i64)
        }
    }

    /// Encodes an integer as a cell of this dtype, saturating at the dtype's range.
    #[inline]
    pub fn i64_to_cell(self, v: i64) -> f32 {
        let (lo, hi) = self.int_range();
        let c = v.clamp(lo, hi);
        match self {
            Dtype::I32 | Dtype::I16 | Dtype::I8 => f32::from_bits(c as i32 as u32),
            Dtype::U32 | Dtype::U16 | Dtype::U8 | Dtype::Fp8E5m2x4 | Dtype::Fp8E4m3Fnx4 | Dtype::Fp4E2m1Fnx4 => f32::from_bits(c as u32),
            _ => v as f32,
        }
    }

    /// Inclusive value range of an integer dtype (the full `i64` range for floats).
    pub const fn int_range(self) -> (i64, i64) {
        match self {
            Dtype::I32 => (i32::MIN as i64, i32::MAX as i64),
            Dtype::U32 | Dtype::Fp8E5m2x4 | Dtype::Fp8E4m3Fnx4 => (0, u32::MAX as i64),
            Dtype::Fp4E2m1Fnx4 => (0, u16::MAX as i64),
            Dtype::I16 => (i16::MIN as i64, i16::MAX as i64),
            Dtype::U16 => (0, u16::MAX as i64),
            Dtype::I8 => (i8::MIN as i64, i8::MAX as i64),
            Dtype::U8 => (0, u8::MAX as i64),
            _ => (i64::MIN, i64::MAX),
        }
    }
}

impl Dtype {
    /// For a packed MX dtype, the element it packs and the bits of one element
    /// (four elements per value): `float8_e4m3fn_x4` packs 8-bit `float8_e4m3fn`
    /// codes; `float4_e2m1fn_x4` packs 4-bit codes, which have no dtype of their own.
    pub const fn packs(self) -> Option<(Option<Dtype>, u32)> {
        match self {
            Dtype::Fp8E5m2x4 => Some((Some(Dtype::Fp8E5m2), 8)),
            Dtype::Fp8E4m3Fnx4 => Some((Some(Dtype::Fp8E4m3Fn), 8)),
            Dtype::Fp4E2m1Fnx4 => Some((None, 4)),
            _ => None,
        }
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.nl_name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for d in Dtype::ALL {
            assert_eq!(Dtype::from_python_name(&d.python_name()), Some(d));
        }
        assert_eq!(Dtype::from_python_name("nl.float64"), None);
    }

    #[test]
    fn integer_cells_are_exact_and_saturate() {
        let big = i32::MAX as i64 - 3;
        assert_eq!(Dtype::I32.cell_to_i64(Dtype::I32.i64_to_cell(big)), big);
        assert_eq!(Dtype::I32.cell_to_i64(Dtype::I32.i64_to_cell(-7)), -7);
        assert_eq!(Dtype::U8.cell_to_i64(Dtype::U8.i64_to_cell(300)), 255);
        assert_eq!(Dtype::I8.cell_to_f32(Dtype::I8.f32_to_cell(-2.5, true)), -2.0);
        assert_eq!(Dtype::U32.cell_to_i64(Dtype::U32.f32_to_cell(-1.0, true)), 0);
    }
}
