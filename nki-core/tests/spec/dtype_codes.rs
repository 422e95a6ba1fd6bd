//! Every code of the 8-bit float dtypes, decoded by a reader written from the
//! OCP 8-bit float and microscaling (MX) specifications, is a value the
//! emulator's rounding keeps, and values between two neighbouring codes round
//! to the nearer one (ties to the even code; float8_e8m0fnu, which has no
//! mantissa, ties up as `ml_dtypes` does). tfloat32 rounds to 10 mantissa bits.

use nki_core::Dtype;
use nki_core::dtype::{fp4_decode, fp8_decode, fp8_encode, round_f32};

/// An 8-bit float layout: exponent and mantissa widths, bias, and how the top
/// exponent is used.
#[derive(Clone, Copy)]
struct Layout {
    exp_bits: u32,
    man_bits: u32,
    bias: i32,
    /// IEEE-style: the top exponent holds infinities (mantissa 0) and NaNs.
    ieee_top: bool,
}

/// The value of `code` (sign, exponent, mantissa from the top bit down).
fn decode(l: Layout, code: u32) -> f64 {
    let sign = if code >> (l.exp_bits + l.man_bits) & 1 == 1 { -1.0 } else { 1.0 };
    let e = (code >> l.man_bits) & ((1 << l.exp_bits) - 1);
    let m = code & ((1 << l.man_bits) - 1);
    let top = (1 << l.exp_bits) - 1;
    let frac = f64::from(m) / f64::from(1u32 << l.man_bits);
    if l.ieee_top && e == top {
        return if m == 0 { sign * f64::INFINITY } else { f64::NAN };
    }
    // OCP E4M3: S.1111.111 is NaN, every other code is a number (E2M1 has no NaN).
    if !l.ieee_top && l.exp_bits == 4 && e == top && m == (1 << l.man_bits) - 1 {
        return f64::NAN;
    }
    if e == 0 { sign * frac * 2f64.powi(1 - l.bias) } else { sign * (1.0 + frac) * 2f64.powi(e as i32 - l.bias) }
}

const E4M3FN: Layout = Layout { exp_bits: 4, man_bits: 3, bias: 7, ieee_top: false };
const E4M3: Layout = Layout { exp_bits: 4, man_bits: 3, bias: 7, ieee_top: true };
const E5M2: Layout = Layout { exp_bits: 5, man_bits: 2, bias: 15, ieee_top: true };

const E2M1: Layout = Layout { exp_bits: 2, man_bits: 1, bias: 1, ieee_top: false };

/// float8_e8m0fnu: 2^(code - 127), code 0xFF NaN (OCP MX scale type).
fn decode_e8m0(code: u32) -> f64 {
    if code == 0xff { f64::NAN } else { 2f64.powi(code as i32 - 127) }
}

fn same(a: f32, b: f64) -> bool {
    (a.is_nan() && b.is_nan()) || (f64::from(a) == b && a.is_sign_negative() == b.is_sign_negative())
}

/// Every code is kept; every midpoint of two neighbouring positive codes rounds
/// to `tie(lower code, upper code)` (mirrored for the signed types), and points
/// just off it to the nearer code.
fn check(dtype: Dtype, codes: u32, decode: impl Fn(u32) -> f64, tie: impl Fn(u32, u32) -> u32) {
    for c in 0..codes {
        let v = decode(c);
        assert!(same(round_f32(dtype, v as f32), v), "{dtype}: code {c:#04x} = {v} is not kept");
    }
    let mut pos: Vec<(f64, u32)> = (0..codes).map(|c| (decode(c), c)).filter(|(v, _)| v.is_finite() && *v > 0.0).collect();
    pos.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap());
    for w in pos.windows(2) {
        let ((lo, cl), (hi, ch)) = (w[0], w[1]);
        let mid = (lo + hi) / 2.0;
        let want = decode(tie(cl, ch));
        assert!(same(round_f32(dtype, mid as f32), want), "{dtype}: midpoint {mid} of {lo} and {hi}");
        let eps = (hi - lo) / 64.0;
        assert!(same(round_f32(dtype, (mid - eps) as f32), lo), "{dtype}: just below {mid}");
        assert!(same(round_f32(dtype, (mid + eps) as f32), hi), "{dtype}: just above {mid}");
        if dtype != Dtype::Fp8E8m0 {
            assert!(same(round_f32(dtype, -mid as f32), -want), "{dtype}: negative midpoint {mid}");
        }
    }
}

#[test]
fn fp8_codes_round_trip_and_midpoints_round_to_even() {
    let even = |a: u32, b: u32| if a.is_multiple_of(2) { a } else { b };
    check(Dtype::Fp8E4m3Fn, 256, |c| decode(E4M3FN, c), even);
    check(Dtype::Fp8E4m3, 256, |c| decode(E4M3, c), even);
    check(Dtype::Fp8E5m2, 256, |c| decode(E5M2, c), even);
}

#[test]
fn e8m0_codes_round_trip_ties_go_up_and_non_positive_values_are_nan() {
    check(Dtype::Fp8E8m0, 256, decode_e8m0, |_, hi| hi);
    for v in [0.0f32, -0.0, -1.0, f32::INFINITY, f32::NEG_INFINITY, 1.5 * 2f32.powi(127)] {
        assert!(round_f32(Dtype::Fp8E8m0, v).is_nan(), "{v}");
    }
    // There is no zero: tiny values, f32 subnormals included, give the smallest scale.
    for v in [1e-45f32, 2f32.powi(-130), 2f32.powi(-128)] {
        assert_eq!(round_f32(Dtype::Fp8E8m0, v), 2f32.powi(-127), "{v}");
    }
}

/// tfloat32 from float64 arithmetic: the nearest multiple of the value's
/// quantum 2^(exponent - 10), ties to even, beyond the f32 range infinity.
fn tf32_reference(x: f32) -> f32 {
    if !x.is_finite() || x == 0.0 {
        return x;
    }
    let v = f64::from(x);
    let exp = (((f64::from(x.abs())).to_bits() >> 52) as i32 - 1023).max(-126);
    let q = 2f64.powi(exp - 10);
    let r = (v / q).round_ties_even() * q;
    if r.abs() > f64::from(f32::MAX) { f32::INFINITY.copysign(x) } else { r as f32 }
}

#[test]
fn tf32_rounds_to_ten_mantissa_bits_on_a_dense_sweep() {
    let mut bits: u32 = 0;
    while let Some(next) = bits.checked_add(997) {
        let x = f32::from_bits(bits);
        let (got, want) = (round_f32(Dtype::Tf32, x), tf32_reference(x));
        assert!(got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()), "{x:e}: got {got:e}, want {want:e}");
        bits = next;
    }
    // A tie: 1 + 2^-11 lies halfway between 1 and 1 + 2^-10 and goes to the even 1.
    assert_eq!(round_f32(Dtype::Tf32, 1.0 + 2f32.powi(-11)), 1.0);
    assert_eq!(round_f32(Dtype::Tf32, 1.0 + 3.0 * 2f32.powi(-11)), 1.0 + 2.0 * 2f32.powi(-10));
}

#[test]
fn fp8_codes_decode_as_the_ocp_formats_and_encode_back() {
    for (dtype, layout) in [(Dtype::Fp8E4m3Fn, E4M3FN), (Dtype::Fp8E4m3, E4M3), (Dtype::Fp8E5m2, E5M2)] {
        for c in 0..=255u8 {
            let want = decode(layout, u32::from(c));
            let got = fp8_decode(dtype, c).expect("an 8-bit float dtype");
            assert!(same(got, want), "{dtype}: code {c:#04x} decodes to {got}, the format says {want}");
            if !want.is_nan() {
                assert_eq!(fp8_encode(dtype, got), Some(c), "{dtype}: {got} encodes back");
            }
        }
        // A value between two codes has no code; NaN has the format's own.
        assert_eq!(fp8_encode(dtype, 1.0 + 1.0 / 64.0), None);
        assert!(fp8_decode(dtype, fp8_encode(dtype, f32::NAN).unwrap()).unwrap().is_nan());
    }
    assert_eq!(fp8_decode(Dtype::F32, 0), None);
}

#[test]
fn fp4_codes_decode_as_the_ocp_e2m1_format() {
    for c in 0..16u8 {
        let want = decode(E2M1, u32::from(c));
        assert!(same(fp4_decode(c), want), "code {c:#03x}: got {}, want {want}", fp4_decode(c));
    }
    let positives: Vec<f32> = (0..8).map(fp4_decode).collect();
    assert_eq!(positives, [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]);
}
