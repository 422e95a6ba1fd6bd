//! Vectorised `exp` for `f32` slices, the emulator's hottest transcendental.
//!
//! Cody–Waite range reduction with a degree-6 polynomial (max error about 2 ulp);
//! exact at 0, `+inf` above `ln(f32::MAX)`, 0 below `-87.34` (results that would be
//! subnormal are flushed, as the Scalar Engine does), NaN passes through. Slices go
//! sixteen values at a time, branch-free within a chunk so that it vectorises (one
//! branch per chunk picks the plain path, `exp16`), compiled for AVX-512 / AVX2 when
//! the CPU has them ([`super::wide`]).

const LOG2E: f32 = std::f32::consts::LOG2_E;
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
const MAX_X: f32 = 88.722_83;
const MIN_X: f32 = -87.336_54;
const ROUND: f32 = 12_582_912.0; // 1.5 * 2^23: adding it rounds to an integer.

/// Below this every step of [`exp_one`] past the clamp is the plain formula:
/// `n` stays at most 127, so neither the doubling nor the exponent's cap
/// applies (both start from `ln(2)·127.5 ≈ 88.38`).
const PLAIN_MAX_X: f32 = 88.0;

/// `(y, t)` with `exp(xc) ≈ y · 2^n`, `n = t - ROUND` the rounded `xc / ln 2` and
/// `y` the polynomial for `exp(xc - n·ln 2)`, for `xc` in `[MIN_X, MAX_X]`.
#[inline(always)]
fn reduced(xc: f32) -> (f32, f32) {
    let t = xc * LOG2E + ROUND;
    let n = t - ROUND;
    let r = xc - n * LN2_HI - n * LN2_LO;
    let mut p = 1.987_569_1e-4_f32;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 0.5;
    (p * r * r + r + 1.0, t)
}

/// `2^n` for the `t` of [`reduced`], `n` at most 127.
#[inline(always)]
fn pow2(t: f32) -> f32 {
    f32::from_bits(((t.to_bits() as i32 - 0x4B40_0000 + 127) << 23) as u32)
}

#[inline(always)]
fn exp_one(x: f32) -> f32 {
    let xc = x.clamp(MIN_X, MAX_X);
    let (y, t) = reduced(xc);
    // From ln(2)·127.5 up to ln(f32::MAX), `n` is 128 and 2^128 is no f32:
    // there `y` is doubled (exactly) and scaled by 2^127.
    let y = if t - ROUND > 127.0 { y + y } else { y };
    let v = y * pow2(t.min(ROUND + 127.0));
    let v = if x > MAX_X { f32::INFINITY } else { v };
    let v = if x < MIN_X { 0.0 } else { v };
    if x.is_nan() { x } else { v }
}

/// [`exp_one`] of 16 values: without its clamps and special cases when every
/// value lies in `[MIN_X, PLAIN_MAX_X]` (where they change nothing, so the bits
/// are the same), which takes about a fifth off the common case.
#[inline(always)]
fn exp16(a: &[f32; 16]) -> [f32; 16] {
    let mut plain = true;
    for &x in a {
        plain &= (MIN_X..=PLAIN_MAX_X).contains(&x);
    }
    let mut v = [0f32; 16];
    if plain {
        for (v, &x) in v.iter_mut().zip(a) {
            let (y, t) = reduced(x);
            *v = y * pow2(t);
        }
    } else {
        for (v, &x) in v.iter_mut().zip(a) {
            *v = exp_one(x);
        }
    }
    v
}

/// `out = exp(xs * scale + bias)` sixteen at a time, then one at a time.
#[inline(always)]
fn exp_affine_into(xs: &[f32], out: &mut [f32], scale: f32, bias: f32) {
    let whole = out.len() / 16 * 16;
    for (o, x) in out[..whole].chunks_exact_mut(16).zip(xs[..whole].chunks_exact(16)) {
        let mut a = [0f32; 16];
        for (a, &x) in a.iter_mut().zip(x) {
            *a = x * scale + bias;
        }
        o.copy_from_slice(&exp16(&a));
    }
    for (o, &x) in out[whole..].iter_mut().zip(&xs[whole..]) {
        *o = exp_one(x * scale + bias);
    }
}

#[inline(always)]
fn exp_map_generic(xs: &[f32], out: &mut [f32], scale: f32, bias: f32) {
    debug_assert_eq!(xs.len(), out.len());
    exp_affine_into(xs, out, scale, bias);
}

/// [`exp_affine`] that also returns the sum of `out`, added in the order
/// [`crate::isa::alu::reduce`] adds a row (eight lanes over chunks of eight,
/// the lanes in order, then the cells past the last whole chunk): the same
/// bits, but the additions wait on nothing a second pass would reread, and
/// overlap the next chunk's exponentials.
#[inline(always)]
pub(crate) fn exp_affine_sum_generic(xs: &[f32], out: &mut [f32], scale: f32, bias: f32) -> f32 {
    let n = out.len();
    let xs = &xs[..n];
    let mut acc = [0f32; 8];
    let whole = n / 16 * 16;
    for (o, x) in out[..whole].chunks_exact_mut(16).zip(xs[..whole].chunks_exact(16)) {
        let mut a = [0f32; 16];
        for (a, &x) in a.iter_mut().zip(x) {
            *a = x * scale + bias;
        }
        let v = exp16(&a);
        o.copy_from_slice(&v);
        for k in 0..8 {
            acc[k] += v[k];
        }
        for k in 0..8 {
            acc[k] += v[8 + k];
        }
    }
    let rest = &mut out[whole..];
    for (o, &x) in rest.iter_mut().zip(&xs[whole..]) {
        *o = exp_one(x * scale + bias);
    }
    let eights = rest.len() / 8 * 8;
    for c in rest[..eights].chunks_exact(8) {
        for k in 0..8 {
            acc[k] += c[k];
        }
    }
    0.0 + acc.iter().sum::<f32>() + rest[eights..].iter().sum::<f32>()
}

#[inline(always)]
fn exp_inplace_generic(xs: &mut [f32]) {
    let mut chunks = xs.chunks_exact_mut(16);
    for c in &mut chunks {
        let mut a = [0f32; 16];
        a.copy_from_slice(c);
        c.copy_from_slice(&exp16(&a));
    }
    for x in chunks.into_remainder() {
        *x = exp_one(*x);
    }
}

super::wide::wide_fn! {
    /// `out[i] = exp(xs[i] * scale + bias)`.
    pub fn exp_affine(xs: &[f32], out: &mut [f32], scale: f32, bias: f32) = exp_map_generic;
}

super::wide::wide_fn! {
    /// `out[i] = exp(xs[i] * scale + bias)`, returning the sum of `out` as the
    /// row reduction adds it.
    pub fn exp_affine_sum(xs: &[f32], out: &mut [f32], scale: f32, bias: f32) -> f32 = exp_affine_sum_generic;
}

super::wide::wide_fn! {
    /// `xs[i] = exp(xs[i])`.
    pub fn exp_in_place(xs: &mut [f32]) = exp_inplace_generic;
}

/// Scalar `exp` with the same accuracy as the slice versions.
pub fn exp(x: f32) -> f32 {
    exp_one(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ulp_err(got: f32, want: f64) -> f64 {
        let w = want as f32;
        let ulp = (f32::from_bits(w.to_bits() + 1) - w) as f64;
        ((got as f64) - want).abs() / ulp
    }

    #[test]
    fn accurate_to_a_few_ulp_over_the_normal_range() {
        // Up to ln(f32::MAX), whose last half octave needs 2^128.
        let xs: Vec<f32> = (0..200_001).map(|i| -87.0 + 175.72 * i as f32 / 200_000.0).collect();
        assert!(xs[200_000] <= MAX_X);
        let mut out = vec![0f32; xs.len()];
        exp_affine(&xs, &mut out, 1.0, 0.0);
        let worst = xs.iter().zip(&out).map(|(&x, &y)| ulp_err(y, (x as f64).exp())).fold(0.0, f64::max);
        assert!(worst <= 3.0, "worst error {worst} ulp");
    }

    #[test]
    fn chunks_inside_the_plain_range_give_the_clamped_formulas_bits() {
        // Whole chunks of plain values (the fast path), chunks mixing in one
        // value at each edge of the plain range or past it (the general path),
        // and the values a chunk ends in: every result as `exp` of that value.
        let edges = [MIN_X, f32::from_bits(MIN_X.to_bits() + 1), PLAIN_MAX_X, 88.1, 88.5, MAX_X, 89.0, -88.0, f32::NAN, f32::NEG_INFINITY];
        let mut xs: Vec<f32> = (0..4096).map(|i| MIN_X + (PLAIN_MAX_X - MIN_X) * i as f32 / 4095.0).collect();
        for (chunk, &edge) in edges.iter().enumerate() {
            xs[16 * (2 * chunk + 1) + chunk % 16] = edge;
        }
        xs.extend(edges);
        let mut out = vec![0f32; xs.len()];
        let sum = exp_affine_sum(&xs[..4096], &mut out[..4096], 1.0, 0.0);
        exp_affine(&xs[4096..], &mut out[4096..], 1.0, 0.0);
        let mut in_place = xs.clone();
        exp_in_place(&mut in_place);
        for (i, &x) in xs.iter().enumerate() {
            let want = exp(x).to_bits();
            assert_eq!(out[i].to_bits(), want, "exp({x}) at {i}");
            assert_eq!(in_place[i].to_bits(), want, "exp({x}) in place at {i}");
        }
        assert!(sum.is_nan(), "a NaN input makes the sum NaN");
    }

    #[test]
    fn special_values() {
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(-3.402_823_5e38), 0.0);
        assert_eq!(exp(100.0), f32::INFINITY);
        assert!(exp(f32::NAN).is_nan());
        let mut v = vec![0.0, 1.0, -1.0, f32::NEG_INFINITY];
        exp_in_place(&mut v);
        assert_eq!(v[0], 1.0);
        assert!((v[1] - std::f32::consts::E).abs() < 1e-6 && v[3] == 0.0);
    }
}
