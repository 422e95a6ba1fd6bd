//! The OCP microscaling (MX) element formats as the float64 references read
//! them, written from the format's description: codes to values, and the
//! on-chip quantization of 32-value groups to `float8_e4m3fn`.

/// The value of a `float8_e4m3fn` code: sign, 4 exponent bits of bias 7, 3
/// mantissa bits (no NaN codes here).
pub fn e4m3fn(code: u32) -> f64 {
    let sign = if code & 0x80 != 0 { -1.0 } else { 1.0 };
    let (e, m) = (((code >> 3) & 0xf) as i32, f64::from(code & 7) / 8.0);
    if e == 0 { sign * m * 2f64.powi(-6) } else { sign * (1.0 + m) * 2f64.powi(e - 7) }
}

/// `v` rounded to nearest even in `float8_e4m3fn` (inside its range).
pub fn round_e4m3fn(v: f64) -> f64 {
    if v == 0.0 {
        return 0.0;
    }
    let q = 2f64.powf(v.abs().log2().floor().max(-6.0) - 3.0);
    (v / q).round_ties_even() * q
}

/// `values` quantized in place per 32 consecutive values: the group's scale
/// `2^(floor(log2 amax) - 7)`, each value divided by it, rounded to nearest
/// even in `float8_e4m3fn` and multiplied back.
pub fn quantize_e4m3fn_groups(values: &mut [f64]) {
    for g in values.chunks_mut(32) {
        let amax = g.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let e = if amax > 0.0 { amax.log2().floor() - 7.0 } else { -127.0 };
        g.iter_mut().for_each(|v| *v = round_e4m3fn(*v / 2f64.powf(e)) * 2f64.powf(e));
    }
}

/// The value of a `float8_e5m2` code: sign, 5 exponent bits of bias 15, 2
/// mantissa bits (finite codes only).
pub fn e5m2(code: u32) -> f64 {
    let sign = if code & 0x80 != 0 { -1.0 } else { 1.0 };
    let (e, m) = (((code >> 2) & 0x1f) as i32, f64::from(code & 3) / 4.0);
    if e == 0 { sign * m * 2f64.powi(-14) } else { sign * (1.0 + m) * 2f64.powi(e - 15) }
}

/// The value of a `float4_e2m1fn` code: sign, 2 exponent bits of bias 1, 1
/// mantissa bit (0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives).
pub fn e2m1fn(code: u32) -> f64 {
    let sign = if code & 0x8 != 0 { -1.0 } else { 1.0 };
    let (e, m) = (((code >> 1) & 0x3) as i32, f64::from(code & 1) / 2.0);
    if e == 0 { sign * m } else { sign * (1.0 + m) * 2f64.powi(e - 1) }
}

/// Rows of `h` values in the pre-swizzled order of the MX kernels' input:
/// position `k·h/4 + t·128 + p` of a row holds its hidden element `512t + 4p + k`.
pub fn swizzle_4h(v: &[f64], h: usize) -> Vec<f64> {
    v.chunks(h)
        .flat_map(|row| {
            (0..h).map(move |pos| {
                let (k, rest) = (pos / (h / 4), pos % (h / 4));
                row[512 * (rest / 128) + 4 * (rest % 128) + k]
            })
        })
        .collect()
}

/// Rows of `h` values in the `MX_INTERLEAVED` position order (the documented
/// `arange(H).reshape(2, H/4, 2).transpose(1, 0, 2)`): position `4r + 2j + m`
/// holds hidden element `j·h/2 + 2r + m`.
pub fn interleave_4h(v: &[f64], h: usize) -> Vec<f64> {
    v.chunks(h).flat_map(|row| (0..h).map(move |pos| row[(pos % 4 / 2) * (h / 2) + 2 * (pos / 4) + pos % 2])).collect()
}

/// `[h][i]` byte codes packed four hidden rows a word, `[h/4][i]`: byte `k`
/// of `(r, c)` is the code of hidden row `4r + k`.
pub fn pack_x4_rows(codes: &[u32], h: usize, i: usize) -> Vec<i64> {
    (0..h / 4 * i).map(|at| (0..4).map(|k| i64::from(codes[(4 * (at / i) + k) * i + at % i]) << (8 * k)).sum()).collect()
}
