//! `erf` in float64 to a few units in the last place, tails included, so the
//! activations built on it (`gelu`, `gelu_dx`, `erf`) round to the float32 the
//! executor's `math.erf` gives. (A 7-digit approximation leaves `gelu`'s
//! negative tail, where `1 + erf` cancels, wrong in its float32 digits.)

use std::f64::consts::PI;

/// From here on `erfc`'s continued fraction converges fast; below it the
/// series of positive terms.
const CONTINUED_FRACTION_FROM: f64 = 2.0;
/// Levels of the continued fraction (float64 accuracy from `CONTINUED_FRACTION_FROM`).
const CONTINUED_FRACTION_DEPTH: u32 = 60;

/// The error function.
pub fn erf(x: f64) -> f64 {
    let z = x.abs();
    if z.is_nan() {
        return x;
    }
    let v = if z < CONTINUED_FRACTION_FROM { erf_series(z) } else { 1.0 - erfc_continued_fraction(z) };
    v.copysign(x)
}

/// `erf(z) = 2/√π · e^(-z²) · Σ_n (2z²)^n · z / (1·3·…·(2n+1))` for `z >= 0`:
/// every term positive, so nothing cancels.
fn erf_series(z: f64) -> f64 {
    let q = 2.0 * z * z;
    let (mut term, mut sum, mut n) = (z, z, 0.0);
    while term > 1e-17 * sum {
        n += 1.0;
        term *= q / (2.0 * n + 1.0);
        sum += term;
    }
    2.0 / PI.sqrt() * (-z * z).exp() * sum
}

/// `erfc(z) = e^(-z²)/√π / (z + (1/2)/(z + (2/2)/(z + (3/2)/(z + …))))` for
/// `z >= CONTINUED_FRACTION_FROM`, evaluated from the deepest level up.
fn erfc_continued_fraction(z: f64) -> f64 {
    let mut f = z;
    for n in (1..=CONTINUED_FRACTION_DEPTH).rev() {
        f = z + f64::from(n) / 2.0 / f;
    }
    (-z * z).exp() / PI.sqrt() / f
}
