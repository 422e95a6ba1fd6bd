//! Round-to-nearest-even conversion of `f32` values to narrower float formats.
//!
//! The result is returned as the `f32` holding the rounded value, which is how the
//! emulator stores narrow floats. Overflow follows the IEEE rule of each format:
//! to infinity where the format has one, to NaN where it does not (`float8_e4m3fn`).

use super::Dtype;
use half::f16;

/// Rounds one value to `dtype` (identity for `f32` and integer dtypes).
///
/// ```
/// use nki_core::{Dtype, dtype::round_f32};
/// assert_eq!(round_f32(Dtype::Bf16, 1.0 + 1.0 / 256.0), 1.0); // tie rounds to even
/// assert_eq!(round_f32(Dtype::F16, 65520.0), f32::INFINITY);
/// ```
#[inline]
pub fn round_f32(dtype: Dtype, x: f32) -> f32 {
    match dtype {
        Dtype::Bf16 => bf16_round(x),
        Dtype::F16 => f16::from_f32(x).to_f32(),
        Dtype::Fp8E4m3 => Fp8::E4M3.round(x),
        Dtype::Fp8E4m3Fn => Fp8::E4M3FN.round(x),
        Dtype::Fp8E5m2 => Fp8::E5M2.round(x),
        Dtype::Tf32 => tf32_round(x),
        Dtype::Fp8E8m0 => e8m0_round(x),
        _ => x,
    }
}

/// Rounds every value of `xs` in place to `dtype`.
pub fn round_slice(dtype: Dtype, xs: &mut [f32]) {
    match dtype {
        Dtype::Bf16 => bf16_round_slice(xs),
        Dtype::F16 => {
            use half::slice::HalfFloatSliceExt;
            let mut buf = [f16::ZERO; 256];
            for chunk in xs.chunks_mut(256) {
                let b = &mut buf[..chunk.len()];
                b.convert_from_f32_slice(chunk);
                b.convert_to_f32_slice(chunk);
            }
        }
        Dtype::Fp8E4m3 | Dtype::Fp8E4m3Fn | Dtype::Fp8E5m2 | Dtype::Tf32 | Dtype::Fp8E8m0 => {
            xs.iter_mut().for_each(|x| *x = round_f32(dtype, *x))
        }
        _ => {}
    }
}

crate::numeric::wide::wide_fn! {
    /// [`bf16_round`] over a slice, compiled for the widest vector unit.
    fn bf16_round_slice(xs: &mut [f32]) = bf16_round_each;
}

#[inline(always)]
fn bf16_round_each(xs: &mut [f32]) {
    for x in xs {
        *x = bf16_round(*x);
    }
}

/// bfloat16 round-to-nearest-even on the bit pattern; quiets NaNs. Branch-free
/// (a select between the two results) so that slice loops vectorise.
#[inline(always)]
fn bf16_round(x: f32) -> f32 {
    let b = x.to_bits();
    let quiet = (b | 0x0040_0000) & 0xffff_0000;
    let lsb = (b >> 16) & 1;
    let nearest = b.wrapping_add(0x7fff + lsb) & 0xffff_0000;
    f32::from_bits(if b & 0x7fff_ffff > 0x7f80_0000 { quiet } else { nearest })
}

/// tfloat32 round-to-nearest-even to 10 mantissa bits on the bit pattern
/// (a carry into the exponent gives the next binade, or infinity); NaN and
/// infinities pass unchanged.
#[inline(always)]
fn tf32_round(x: f32) -> f32 {
    if !x.is_finite() {
        return x;
    }
    let b = x.to_bits();
    let lsb = (b >> 13) & 1;
    f32::from_bits(b.wrapping_add(0x0fff + lsb) & 0xffff_e000)
}

/// float8_e8m0fnu: the power of two nearest `x` on the linear scale, ties up
/// (as `ml_dtypes` converts: there is no mantissa to round to even). Values
/// below 2^-127 give 2^-127 (there is no zero); zero, negatives, infinities,
/// NaN and values that round above 2^127 give NaN.
fn e8m0_round(x: f32) -> f32 {
    if x.is_nan() || x <= 0.0 || x.is_infinite() {
        return f32::NAN;
    }
    // f64 holds every f32, subnormals included, as a normal number.
    let bits = f64::from(x).to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i32 - 1023 + ((bits >> 51) & 1) as i32;
    match exp {
        e if e > 127 => f32::NAN,
        e => (2f64).powi(e.max(-127)) as f32,
    }
}

/// Parameters of an 8-bit float format.
struct Fp8 {
    mantissa_bits: i32,
    min_normal_exp: i32,
    max_finite: f32,
    has_inf: bool,
}

impl Fp8 {
    const E4M3: Fp8 = Fp8 { mantissa_bits: 3, min_normal_exp: -6, max_finite: 240.0, has_inf: true };
    const E4M3FN: Fp8 = Fp8 { mantissa_bits: 3, min_normal_exp: -6, max_finite: 448.0, has_inf: false };
    const E5M2: Fp8 = Fp8 { mantissa_bits: 2, min_normal_exp: -14, max_finite: 57344.0, has_inf: true };

    fn round(&self, x: f32) -> f32 {
        if x.is_nan() || x == 0.0 {
            return x;
        }
        let overflow = if self.has_inf { f32::INFINITY.copysign(x) } else { f32::NAN };
        if x.is_infinite() {
            return overflow;
        }
        let a = f64::from(x.abs());
        let exp = (((x.to_bits() >> 23) & 0xff) as i32 - 127).max(self.min_normal_exp);
        let quantum = (2f64).powi(exp - self.mantissa_bits);
        let q = (a / quantum).round_ties_even() * quantum;
        if q > f64::from(self.max_finite) { overflow } else { (q as f32).copysign(x) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::bf16;

    #[test]
    fn bf16_scalar_and_slice_match_half_on_a_dense_sweep() {
        // A sweep of every 4093rd bit pattern, then values it does not hit
        // exactly: infinities, the largest finite value, -0, a signalling NaN and
        // last a tie, so the vector loops' tail (the length is not a multiple of
        // 16) ends on a value that rounding changes.
        let specials = [f32::INFINITY, f32::NEG_INFINITY, f32::MAX, -0.0, f32::from_bits(0x7f80_0001), 1.0 + 1.0 / 256.0];
        let sweep = (0..u32::MAX / 4093).map(|i| f32::from_bits(i * 4093));
        let xs: Vec<f32> = sweep.chain(specials).collect();
        let mut sliced = xs.clone();
        round_slice(Dtype::Bf16, &mut sliced);
        for (&x, &from_slice) in xs.iter().zip(&sliced) {
            let want = bf16::from_f32(x).to_f32();
            for got in [round_f32(Dtype::Bf16, x), from_slice] {
                assert!(got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()), "{x:e}");
            }
        }
    }

    #[test]
    fn f16_slice_matches_scalar() {
        let mut xs: Vec<f32> = (0..1000).map(|i| (i as f32 - 500.0) * 0.37 + 1e-3).collect();
        let want: Vec<f32> = xs.iter().map(|&x| round_f32(Dtype::F16, x)).collect();
        round_slice(Dtype::F16, &mut xs);
        assert_eq!(xs, want);
    }

    #[test]
    fn fp8_formats_round_and_overflow() {
        assert_eq!(round_f32(Dtype::Fp8E4m3Fn, 448.0), 448.0);
        assert!(round_f32(Dtype::Fp8E4m3Fn, 480.0).is_nan());
        assert_eq!(round_f32(Dtype::Fp8E4m3Fn, 460.0), 448.0);
        assert_eq!(round_f32(Dtype::Fp8E4m3, 250.0), f32::INFINITY);
        assert_eq!(round_f32(Dtype::Fp8E5m2, -1.3), -1.25);
        // Subnormal grid of e4m3: multiples of 2^-9.
        assert_eq!(round_f32(Dtype::Fp8E4m3, 3.0 * 2f32.powi(-10)), 2.0 * 2f32.powi(-9));
        assert_eq!(round_f32(Dtype::Fp8E4m3, 1.0625), 1.0);
        assert_eq!(round_f32(Dtype::Fp8E4m3, 1.1875), 1.25);
    }
}
