//! The `.npy` element types nki-rs reads and writes, and the NKI dtype each loads as.

use crate::Dtype;

/// An element type of a `.npy` file (its `descr`). Little-endian only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NpyType {
    /// `<f4`, loads as float32.
    F32,
    /// `<f8`, loads as float32: rounded to nearest; a finite value beyond the
    /// float32 range is an error, not an infinity.
    F64,
    /// `<f2`, loads as float16.
    F16,
    /// ml_dtypes' bfloat16 (NumPy stores it as the 2-byte void `<V2`), loads as bfloat16.
    Bf16,
    /// `<i4`, loads as int32.
    I32,
    /// `<i8`, loads as int32; a value outside the int32 range is an error.
    I64,
    /// `<u4`, loads as uint32.
    U32,
    /// `<i2`, loads as int16.
    I16,
    /// `<u2`, loads as uint16.
    U16,
    /// `|i1`, loads as int8.
    I8,
    /// `|u1`, loads as uint8.
    U8,
    /// `|b1`, loads as uint8 0 or 1 (any non-zero byte is true, as in NumPy).
    Bool,
}

impl NpyType {
    /// Every type, in a stable order.
    pub const ALL: [NpyType; 12] = [
        NpyType::F32,
        NpyType::F64,
        NpyType::F16,
        NpyType::Bf16,
        NpyType::I32,
        NpyType::I64,
        NpyType::U32,
        NpyType::I16,
        NpyType::U16,
        NpyType::I8,
        NpyType::U8,
        NpyType::Bool,
    ];

    /// The `descr` string NumPy writes for this type.
    pub const fn descr(self) -> &'static str {
        match self {
            NpyType::F32 => "<f4",
            NpyType::F64 => "<f8",
            NpyType::F16 => "<f2",
            NpyType::Bf16 => "<V2",
            NpyType::I32 => "<i4",
            NpyType::I64 => "<i8",
            NpyType::U32 => "<u4",
            NpyType::I16 => "<i2",
            NpyType::U16 => "<u2",
            NpyType::I8 => "|i1",
            NpyType::U8 => "|u1",
            NpyType::Bool => "|b1",
        }
    }

    /// The type of a header's `descr`, or why it is not read.
    pub fn from_descr(descr: &str) -> Result<NpyType, String> {
        if let Some(t) = NpyType::ALL.into_iter().find(|t| t.descr() == descr) {
            return Ok(t);
        }
        match descr {
            "<u1" => Ok(NpyType::U8),
            "<i1" => Ok(NpyType::I8),
            d if d.starts_with('>') => Err(format!("big-endian element type '{d}' is not supported; save with .astype('<{}')", &d[1..])),
            d => Err(format!(
                "unsupported element type '{d}' (float32, float64, float16, bfloat16, int32, int64, uint32, int16, uint16, int8, uint8 or bool are read)"
            )),
        }
    }

    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            NpyType::F64 | NpyType::I64 => 8,
            NpyType::F32 | NpyType::I32 | NpyType::U32 => 4,
            NpyType::F16 | NpyType::Bf16 | NpyType::I16 | NpyType::U16 => 2,
            NpyType::I8 | NpyType::U8 | NpyType::Bool => 1,
        }
    }

    /// The NKI dtype a file of this type loads as.
    pub const fn dtype(self) -> Dtype {
        match self {
            NpyType::F32 | NpyType::F64 => Dtype::F32,
            NpyType::F16 => Dtype::F16,
            NpyType::Bf16 => Dtype::Bf16,
            NpyType::I32 | NpyType::I64 => Dtype::I32,
            NpyType::U32 => Dtype::U32,
            NpyType::I16 => Dtype::I16,
            NpyType::U16 => Dtype::U16,
            NpyType::I8 => Dtype::I8,
            NpyType::U8 | NpyType::Bool => Dtype::U8,
        }
    }

    /// The type a tensor of `dtype` is written as: its own element type where
    /// `.npy` has one (bfloat16 as ml_dtypes stores it), float32 for the other
    /// floats (float8, tfloat32: exact widening), and the unsigned integer of
    /// the storage width for the packed MX dtypes (their raw codes).
    pub const fn of_dtype(dtype: Dtype) -> NpyType {
        match dtype {
            Dtype::F16 => NpyType::F16,
            Dtype::Bf16 => NpyType::Bf16,
            Dtype::I32 => NpyType::I32,
            Dtype::U32 | Dtype::Fp8E5m2x4 | Dtype::Fp8E4m3Fnx4 => NpyType::U32,
            Dtype::I16 => NpyType::I16,
            Dtype::U16 | Dtype::Fp4E2m1Fnx4 => NpyType::U16,
            Dtype::I8 => NpyType::I8,
            Dtype::U8 => NpyType::U8,
            Dtype::F32 | Dtype::Tf32 | Dtype::Fp8E4m3 | Dtype::Fp8E4m3Fn | Dtype::Fp8E5m2 | Dtype::Fp8E8m0 => NpyType::F32,
        }
    }

    /// The unsigned integer type whose values are the raw codes of `dtype`,
    /// for the dtypes `.npy` has no element type of its own for: `uint8` for
    /// the 8-bit floats with a mantissa (`float8_e4m3`, `float8_e4m3fn`,
    /// `float8_e5m2`), and for the packed MX dtypes the integer of their
    /// storage width (`uint32` for `float8_*_x4`, `uint16` for
    /// `float4_e2m1fn_x4`: element `k` in byte or nibble `k`, the first in the
    /// lowest, as `.view(np.uint32)` of the packed array gives them and as
    /// packed outputs are written). `None` for any other dtype.
    pub const fn codes_of(dtype: Dtype) -> Option<NpyType> {
        match dtype {
            Dtype::Fp8E4m3 | Dtype::Fp8E4m3Fn | Dtype::Fp8E5m2 => Some(NpyType::U8),
            Dtype::Fp8E5m2x4 | Dtype::Fp8E4m3Fnx4 => Some(NpyType::U32),
            Dtype::Fp4E2m1Fnx4 => Some(NpyType::U16),
            _ => None,
        }
    }

    /// The NumPy name of this type (`float32`, `bfloat16` for ml_dtypes' type, `bool`).
    pub const fn name(self) -> &'static str {
        match self {
            NpyType::F64 => "float64",
            NpyType::I64 => "int64",
            NpyType::Bool => "bool",
            t => t.dtype().nl_name(),
        }
    }

    /// Appends the values of `bytes` (whole elements, little-endian) to `out`,
    /// exact in `f64` except for `<i8` magnitudes above 2^53.
    pub(super) fn decode(self, bytes: &[u8], out: &mut Vec<f64>) {
        fn each<const N: usize>(bytes: &[u8], out: &mut Vec<f64>, f: impl Fn([u8; N]) -> f64) {
            out.extend(bytes.chunks_exact(N).map(|b| f(b.try_into().expect("chunks_exact yields N bytes"))));
        }
        match self {
            NpyType::F32 => each(bytes, out, |b| f64::from(f32::from_le_bytes(b))),
            NpyType::F64 => each(bytes, out, f64::from_le_bytes),
            NpyType::F16 => each(bytes, out, |b| half::f16::from_le_bytes(b).to_f64()),
            NpyType::Bf16 => each(bytes, out, |b| half::bf16::from_le_bytes(b).to_f64()),
            NpyType::I32 => each(bytes, out, |b| f64::from(i32::from_le_bytes(b))),
            NpyType::I64 => each(bytes, out, |b| i64::from_le_bytes(b) as f64),
            NpyType::U32 => each(bytes, out, |b| f64::from(u32::from_le_bytes(b))),
            NpyType::I16 => each(bytes, out, |b| f64::from(i16::from_le_bytes(b))),
            NpyType::U16 => each(bytes, out, |b| f64::from(u16::from_le_bytes(b))),
            NpyType::I8 => each(bytes, out, |b| f64::from(i8::from_le_bytes(b))),
            NpyType::U8 => each(bytes, out, |[b]: [u8; 1]| f64::from(b)),
            NpyType::Bool => each(bytes, out, |[b]: [u8; 1]| f64::from(u8::from(b != 0))),
        }
    }

    /// `v` as the storage cell of this type's [`dtype`](Self::dtype), or why it
    /// cannot be held there.
    pub(super) fn cell(self, v: f64) -> Result<f32, String> {
        let d = self.dtype();
        if d.is_float() {
            let f = v as f32;
            if v.is_finite() && !f.is_finite() {
                return Err(format!("{v:e} overflows {d}"));
            }
            Ok(d.f32_to_cell(f, true))
        } else {
            let (lo, hi) = d.int_range();
            if v < lo as f64 || v > hi as f64 {
                return Err(format!("{v} does not fit {d}"));
            }
            Ok(d.i64_to_cell(v as i64))
        }
    }

    /// Appends `v` encoded as this type (float to integer conversions saturate).
    pub(super) fn encode(self, v: f64, out: &mut Vec<u8>) {
        match self {
            NpyType::F32 => out.extend_from_slice(&(v as f32).to_le_bytes()),
            NpyType::F64 => out.extend_from_slice(&v.to_le_bytes()),
            NpyType::F16 => out.extend_from_slice(&half::f16::from_f64(v).to_le_bytes()),
            NpyType::Bf16 => out.extend_from_slice(&half::bf16::from_f64(v).to_le_bytes()),
            NpyType::I32 => out.extend_from_slice(&(v as i32).to_le_bytes()),
            NpyType::I64 => out.extend_from_slice(&(v as i64).to_le_bytes()),
            NpyType::U32 => out.extend_from_slice(&(v as u32).to_le_bytes()),
            NpyType::I16 => out.extend_from_slice(&(v as i16).to_le_bytes()),
            NpyType::U16 => out.extend_from_slice(&(v as u16).to_le_bytes()),
            NpyType::I8 => out.extend_from_slice(&(v as i8).to_le_bytes()),
            NpyType::U8 => out.push(v as u8),
            NpyType::Bool => out.push(u8::from(v != 0.0)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_round_trips_its_bytes() {
        for t in NpyType::ALL {
            assert_eq!(NpyType::from_descr(t.descr()), Ok(t));
            let values: &[f64] = match t.dtype() {
                Dtype::U8 | Dtype::U16 | Dtype::U32 => &[0.0, 1.0, 100.0],
                Dtype::I32 | Dtype::I16 | Dtype::I8 => &[0.0, 1.0, -2.0, 100.0],
                _ => &[0.0, 1.0, -2.0, 3.5, 100.0],
            };
            for &v in values {
                let want = if t == NpyType::Bool { f64::from(u8::from(v != 0.0)) } else { v };
                let mut bytes = Vec::new();
                t.encode(v, &mut bytes);
                assert_eq!(bytes.len(), t.size(), "{t:?}");
                let mut back = Vec::new();
                t.decode(&bytes, &mut back);
                assert_eq!(back, [want], "{t:?} {v}");
            }
        }
    }

    #[test]
    fn values_the_dtype_cannot_hold_are_errors_not_garbage() {
        assert!(NpyType::F64.cell(1e300).unwrap_err().contains("overflows float32"));
        assert!(NpyType::F64.cell(f64::INFINITY).unwrap().is_infinite(), "an infinity stays one");
        assert!(NpyType::I64.cell(3e9).unwrap_err().contains("does not fit int32"));
        assert_eq!(Dtype::I32.cell_to_i64(NpyType::I64.cell(-7.0).unwrap()), -7);
        assert_eq!(NpyType::F64.cell(0.1).unwrap(), 0.1f32);
    }

    #[test]
    fn unsupported_descrs_say_what_is_read() {
        assert!(NpyType::from_descr(">f4").unwrap_err().contains("astype('<f4')"));
        assert!(NpyType::from_descr("<c8").unwrap_err().contains("unsupported element type '<c8'"));
        assert!(NpyType::from_descr("|O").unwrap_err().contains("unsupported"));
        assert_eq!(NpyType::from_descr("<u1"), Ok(NpyType::U8));
    }
}
