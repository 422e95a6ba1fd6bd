//! Deterministic test inputs from a 64-bit linear congruential generator
//! (Knuth's MMIX constants), independent of the code under test; shared with
//! the root package's tests.

/// Deterministic values in `[lo, hi)` from a 64-bit LCG (independent of the code under test).
pub fn uniform(n: usize, seed: u64, lo: f64, hi: f64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(1);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            lo + (hi - lo) * ((s >> 11) as f64 / (1u64 << 53) as f64)
        })
        .collect()
}
