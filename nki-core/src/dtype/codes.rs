//! Bit codes of the 8-bit and 4-bit float formats, for the packed MX dtypes
//! whose cells hold raw codes rather than values.
//!
//! ```
//! use nki_core::{Dtype, dtype::{fp4_decode, fp8_decode, fp8_encode}};
//! assert_eq!(fp8_encode(Dtype::Fp8E4m3Fn, 448.0), Some(0x7e));
//! assert_eq!(fp8_decode(Dtype::Fp8E5m2, 0xbc), Some(-1.0));
//! assert_eq!(fp4_decode(0xf), -6.0);
//! ```

use super::Dtype;

/// Exponent bias, mantissa bits and special codes of an 8-bit float dtype.
struct Fp8Codes {
    bias: i32,
    man_bits: u32,
    /// The code of positive NaN (the sign bit added for negative NaN).
    nan: u8,
    /// The code of +infinity, for the formats that have one.
    inf: Option<u8>,
}

const fn fp8(dtype: Dtype) -> Option<Fp8Codes> {
    match dtype {
        Dtype::Fp8E4m3Fn => Some(Fp8Codes { bias: 7, man_bits: 3, nan: 0x7f, inf: None }),
        Dtype::Fp8E4m3 => Some(Fp8Codes { bias: 7, man_bits: 3, nan: 0x7c, inf: Some(0x78) }),
        Dtype::Fp8E5m2 => Some(Fp8Codes { bias: 15, man_bits: 2, nan: 0x7e, inf: Some(0x7c) }),
        _ => None,
    }
}

/// The value of the 8-bit `code` of `dtype` (`None` for a dtype that is not an
/// 8-bit float with a mantissa).
pub fn fp8_decode(dtype: Dtype, code: u8) -> Option<f32> {
    let f = fp8(dtype)?;
    let sign = if code & 0x80 != 0 { -1.0 } else { 1.0 };
    let mag = code & 0x7f;
    if f.inf == Some(mag) {
        return Some(sign * f32::INFINITY);
    }
    if mag == f.nan || (f.inf.is_some() && mag > f.inf.unwrap_or(0x7f)) {
        return Some(f32::NAN);
    }
    let e = i32::from(mag >> f.man_bits);
    let m = f32::from(mag & ((1 << f.man_bits) - 1) as u8);
    let unit = 2f32.powi(-(f.man_bits as i32));
    Some(sign * if e == 0 { m * unit * 2f32.powi(1 - f.bias) } else { (1.0 + m * unit) * 2f32.powi(e - f.bias) })
}

/// The code of `value`, which must be a value of `dtype` (as [`round_f32`](super::round_f32)
/// leaves it): `None` for another dtype or a value the format does not hold.
pub fn fp8_encode(dtype: Dtype, value: f32) -> Option<u8> {
    let f = fp8(dtype)?;
    let sign = if value.is_sign_negative() { 0x80u8 } else { 0 };
    if value.is_nan() {
        return Some(sign | f.nan);
    }
    if value.is_infinite() {
        return f.inf.map(|c| sign | c);
    }
    let a = f64::from(value.abs());
    if a == 0.0 {
        return Some(sign);
    }
    let e = ((a.to_bits() >> 52) as i32) - 1023;
    let min_e = 1 - f.bias;
    let (exp_field, man) = if e < min_e {
        (0, a / 2f64.powi(min_e - f.man_bits as i32))
    } else {
        (e + f.bias, (a / 2f64.powi(e) - 1.0) * f64::from(1u32 << f.man_bits))
    };
    let top = if f.inf.is_some() { (0x7f >> f.man_bits) - 1 } else { 0x7f >> f.man_bits };
    if man.fract() != 0.0 || exp_field > top || man >= f64::from(1u32 << f.man_bits) {
        return None;
    }
    let code = sign | ((exp_field as u8) << f.man_bits) | man as u8;
    (fp8_decode(dtype, code) == Some(value)).then_some(code)
}

/// The value of a 4-bit float4_e2m1fn `code` (sign, 2 exponent bits with bias 1,
/// 1 mantissa bit; no infinities or NaN).
pub fn fp4_decode(code: u8) -> f32 {
    let e = i32::from((code >> 1) & 3);
    let m = f32::from(code & 1);
    let mag = if e == 0 { m * 0.5 } else { (1.0 + m * 0.5) * 2f32.powi(e - 1) };
    if code & 8 != 0 { -mag } else { mag }
}
