//! Slice-level ALU kernels: one `match` per slice, tight loops inside so they
//! vectorise, compiled for the CPU's widest vectors ([`crate::numeric::wide`]).

use crate::language::NlOp;
use crate::numeric::wide::wide_fn;

macro_rules! binary_loops {
    ($op:expr, $out:ident, $a:ident, $b:ident, $ai:expr, $bi:expr) => {{
        let n = $out.len();
        let flag = |c: bool| if c { 1.0f32 } else { 0.0 };
        match $op {
            NlOp::Add => {
                for i in 0..n {
                    $out[i] = $ai(i) + $bi(i)
                }
            }
            NlOp::Subtract => {
                for i in 0..n {
                    $out[i] = $ai(i) - $bi(i)
                }
            }
            NlOp::Multiply => {
                for i in 0..n {
                    $out[i] = $ai(i) * $bi(i)
                }
            }
            NlOp::Maximum => {
                for i in 0..n {
                    $out[i] = $ai(i).max($bi(i))
                }
            }
            NlOp::Minimum => {
                for i in 0..n {
                    $out[i] = $ai(i).min($bi(i))
                }
            }
            NlOp::Less => {
                for i in 0..n {
                    $out[i] = flag($ai(i) < $bi(i))
                }
            }
            NlOp::GreaterEqual => {
                for i in 0..n {
                    $out[i] = flag($ai(i) >= $bi(i))
                }
            }
            op => {
                for i in 0..n {
                    $out[i] = op.apply2($ai(i), $bi(i))
                }
            }
        }
    }};
}

wide_fn! {
    /// `out[i] = a[i] op b[i]`.
    pub(crate) fn binary(op: NlOp, a: &[f32], b: &[f32], out: &mut [f32]) = binary_generic;
}

#[inline(always)]
fn binary_generic(op: NlOp, a: &[f32], b: &[f32], out: &mut [f32]) {
    let (a, b) = (&a[..out.len()], &b[..out.len()]);
    binary_loops!(op, out, a, b, |i: usize| a[i], |i: usize| b[i])
}

wide_fn! {
    /// `out[i] = a[i] op s`, or `s op a[i]` when `reverse`.
    pub(crate) fn with_scalar(op: NlOp, a: &[f32], s: f32, reverse: bool, out: &mut [f32]) = with_scalar_generic;
}

#[inline(always)]
fn with_scalar_generic(op: NlOp, a: &[f32], s: f32, reverse: bool, out: &mut [f32]) {
    let a = &a[..out.len()];
    if reverse {
        binary_loops!(op, out, a, s, |_i: usize| s, |i: usize| a[i])
    } else {
        binary_loops!(op, out, a, s, |i: usize| a[i], |_i: usize| s)
    }
}

/// One tensor-scalar stage in place: a unary `op` maps each element (ignoring
/// `s`), a two-operand one computes `x[i] op s` (or `s op x[i]` when `reverse`).
pub(crate) fn stage(op: NlOp, x: &mut [f32], s: f32, reverse: bool) {
    if op.is_unary() {
        x.iter_mut().for_each(|v| *v = op.apply1(*v));
    } else {
        with_scalar_in_place(op, x, s, reverse);
    }
}

/// [`stage`] of the row `src` into `out`: the row is read where it lies
/// rather than copied into `out` first (the same arithmetic, one pass fewer).
pub(crate) fn stage_from(op: NlOp, src: &[f32], out: &mut [f32], s: f32, reverse: bool) {
    if op.is_unary() {
        out.iter_mut().zip(src).for_each(|(o, &v)| *o = op.apply1(v));
    } else {
        with_scalar(op, src, s, reverse, out);
    }
}

/// Checks the op of an instruction that combines data with a scalar operand and
/// takes ALU ops only: a two-operand ALU op, or one of the ALU table's unary ops,
/// whose operand the docs require to be `None` or 0.
pub(crate) fn check_alu_scalar_op(op: &str, role: &str, o: NlOp, operand_role: &str, operand: super::Operand<'_>) -> crate::Result<()> {
    if o.is_unary() && !o.is_alu_unary() {
        return Err(crate::NkiError::constraint(
            op,
            format!(
                "{role}={o} is an activation function; this op takes an ALU op such as nl.add, or a unary ALU op ({})",
                alu_unary_list()
            ),
        ));
    }
    if o.is_alu_unary() && !matches!(operand, super::Operand::Scalar(v) if v == 0.0) {
        return Err(crate::NkiError::constraint(op, format!("{operand_role} must be None or 0 when {role} is the unary op {o}")));
    }
    Ok(())
}

/// The ALU table's unary ops, as `nl.abs, nl.square, ...` for messages.
fn alu_unary_list() -> String {
    nki_spec::constants::ALU_UNARY_TOKENS.iter().map(|t| format!("nl.{t}")).collect::<Vec<_>>().join(", ")
}

wide_fn! {
    /// Applies `op` in place: `x[i] = x[i] op s` (or `s op x[i]` when `reverse`).
    pub(crate) fn with_scalar_in_place(op: NlOp, x: &mut [f32], s: f32, reverse: bool) = with_scalar_in_place_generic;
}

#[inline(always)]
fn with_scalar_in_place_generic(op: NlOp, x: &mut [f32], s: f32, reverse: bool) {
    let n = x.len();
    let flag = |c: bool| if c { 1.0f32 } else { 0.0 };
    macro_rules! go {
        ($f:expr) => {
            for i in 0..n {
                let v = x[i];
                x[i] = if reverse { $f(s, v) } else { $f(v, s) };
            }
        };
    }
    match op {
        NlOp::Add => go!(|a: f32, b: f32| a + b),
        NlOp::Subtract => go!(|a: f32, b: f32| a - b),
        NlOp::Multiply => go!(|a: f32, b: f32| a * b),
        NlOp::Maximum => go!(|a: f32, b: f32| a.max(b)),
        NlOp::Minimum => go!(|a: f32, b: f32| a.min(b)),
        NlOp::Greater => go!(|a: f32, b: f32| flag(a > b)),
        op => go!(|a: f32, b: f32| op.apply2(a, b)),
    }
}

wide_fn! {
    /// Folds `xs` with the reduction `op`, starting from `init`.
    pub(crate) fn reduce(op: NlOp, xs: &[f32], init: f32) -> f32 = reduce_generic;
}

#[inline(always)]
fn reduce_generic(op: NlOp, xs: &[f32], init: f32) -> f32 {
    match op {
        NlOp::Add => {
            // Eight partial sums keep the loop vectorised; the order differs from a
            // serial sum only by fp32 rounding, as hardware reductions do.
            let mut acc = [0f32; 8];
            let chunks = xs.chunks_exact(8);
            let rest = chunks.remainder();
            for c in chunks {
                for k in 0..8 {
                    acc[k] += c[k];
                }
            }
            init + acc.iter().sum::<f32>() + rest.iter().sum::<f32>()
        }
        NlOp::Maximum => extremum(xs, init, |a, b| if b > a { b } else { a }),
        NlOp::Minimum => extremum(xs, init, |a, b| if b < a { b } else { a }),
        op => xs.iter().fold(init, |a, &b| op.apply2(a, b)),
    }
}

/// Max or min of `init` and `xs` (`pick(acc, x)` keeps the better of two
/// non-NaN values, and `acc` when `x` is NaN), NaN if any value is NaN.
/// Sixteen lanes fold every sixteenth value, so the loop compiles to vector
/// compares and blends; NaNs are noted beside the lanes, off the chain of
/// dependent folds, which is then one `vmaxps`/`vminps` per sixteen values.
#[inline(always)]
fn extremum(xs: &[f32], init: f32, pick: impl Fn(f32, f32) -> f32) -> f32 {
    const L: usize = 16;
    let mut acc = [init; L];
    let mut nan = [false; L];
    let chunks = xs.chunks_exact(L);
    let rest = chunks.remainder();
    for c in chunks {
        for k in 0..L {
            nan[k] |= c[k].is_nan();
            acc[k] = pick(acc[k], c[k]);
        }
    }
    if init.is_nan() || nan.contains(&true) {
        return f32::NAN;
    }
    let mut r = init;
    for &v in acc.iter().chain(rest) {
        if v.is_nan() {
            return f32::NAN;
        }
        r = pick(r, v);
    }
    r
}

/// `max` that propagates NaN (a NaN anywhere in a row shows up in its max).
#[inline(always)]
pub(crate) fn max_nan(a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() { f32::NAN } else { a.max(b) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slice_kernels_agree_with_scalar_semantics() {
        let a: Vec<f32> = (0..37).map(|i| i as f32 * 0.5 - 7.0).collect();
        let b: Vec<f32> = (0..37).map(|i| (i % 5) as f32).collect();
        for op in NlOp::ALL.into_iter().filter(|o| o.is_binary()) {
            let mut out = vec![0f32; a.len()];
            binary(op, &a, &b, &mut out);
            for i in 0..a.len() {
                let want = op.apply2(a[i], b[i]);
                assert!(out[i] == want || (out[i].is_nan() && want.is_nan()), "{op} {i}");
            }
            with_scalar(op, &a, 2.0, true, &mut out);
            assert!(out[3] == op.apply2(2.0, a[3]) || out[3].is_nan(), "{op}");
            let mut x = a.clone();
            with_scalar_in_place(op, &mut x, 2.0, false);
            assert!(x[4] == op.apply2(a[4], 2.0) || x[4].is_nan(), "{op}");
        }
        assert_eq!(reduce(NlOp::Add, &b, 1.0), 1.0 + b.iter().sum::<f32>());
        assert_eq!(reduce(NlOp::Maximum, &a, f32::NEG_INFINITY), 11.0);
        assert!(reduce(NlOp::Maximum, &[1.0, f32::NAN], f32::NEG_INFINITY).is_nan());
        // Long enough for the lane loop: NaN in a lane, the extreme in the tail.
        let mut long: Vec<f32> = (0..40).map(|i| ((i * 7) % 23) as f32 - 5.0).collect();
        assert_eq!(reduce(NlOp::Maximum, &long, f32::MIN), 17.0);
        assert_eq!(reduce(NlOp::Minimum, &long, f32::MAX), -5.0);
        long[39] = 99.0;
        assert_eq!(reduce(NlOp::Maximum, &long, f32::MIN), 99.0);
        long[5] = f32::NAN;
        assert!(reduce(NlOp::Maximum, &long, f32::MIN).is_nan());
        assert!(reduce(NlOp::Minimum, &long, f32::MAX).is_nan());
        assert!(reduce(NlOp::Maximum, &[1.0; 20], f32::NAN).is_nan());
    }

    /// The kernels as the CPU runs them (AVX-512 or AVX2 where it has them)
    /// give the bits the baseline build of the same body gives.
    #[test]
    fn wide_builds_are_bit_identical_to_the_baseline() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || crate::test_rng::xorshift(&mut state);
        // Signed zeros, NaNs and a spread of magnitudes, in rows of odd lengths.
        let mut value = || match next() % 16 {
            0 => 0.0,
            1 => -0.0,
            2 => f32::NAN,
            r => (r as f32 - 8.0) * f32::from_bits(0x3000_0000 + (next() % 0x1800_0000) as u32),
        };
        let same = |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
        for n in [0, 1, 15, 16, 17, 100, 1000, 4099] {
            let a: Vec<f32> = (0..n).map(|_| value()).collect();
            let b: Vec<f32> = (0..n).map(|_| value()).collect();
            let s = value();
            for op in NlOp::ALL.into_iter().filter(|o| o.is_binary()) {
                let (mut wide, mut base) = (vec![0f32; n], vec![0f32; n]);
                binary(op, &a, &b, &mut wide);
                binary_generic(op, &a, &b, &mut base);
                assert!(same(&wide, &base), "binary {op:?} n {n}");
                for reverse in [false, true] {
                    with_scalar(op, &a, s, reverse, &mut wide);
                    with_scalar_generic(op, &a, s, reverse, &mut base);
                    assert!(same(&wide, &base), "with_scalar {op:?} n {n}");
                    let (mut wide, mut base) = (a.clone(), a.clone());
                    with_scalar_in_place(op, &mut wide, s, reverse);
                    with_scalar_in_place_generic(op, &mut base, s, reverse);
                    assert!(same(&wide, &base), "with_scalar_in_place {op:?} n {n}");
                }
            }
            let finite: Vec<f32> = a.iter().map(|&x| if x.is_nan() { 1.5 } else { x }).collect();
            for op in [NlOp::Add, NlOp::Maximum, NlOp::Minimum] {
                for xs in [&a, &finite] {
                    let (wide, base) = (reduce(op, xs, op.identity()), reduce_generic(op, xs, op.identity()));
                    assert_eq!(wide.to_bits(), base.to_bits(), "reduce {op:?} n {n}");
                }
            }
        }
    }

    /// The exponentials' fused row sum is this reduction's, bit for bit, over
    /// every length around the chunk sizes, with values whose sums round, in
    /// the wide build and the baseline.
    #[test]
    fn the_fused_exp_sum_adds_as_the_row_reduction_does() {
        use crate::numeric::exp::{exp_affine, exp_affine_sum, exp_affine_sum_generic};
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for n in (0..80).chain([127, 128, 129, 511, 512, 513, 2048]) {
            let xs: Vec<f32> = (0..n).map(|_| (crate::test_rng::xorshift(&mut state) % 20_000) as f32 / 1000.0 - 12.0).collect();
            let (mut fused, mut apart, mut base) = (vec![0f32; n], vec![0f32; n], vec![0f32; n]);
            let sum = exp_affine_sum(&xs, &mut fused, 1.3, -0.7);
            exp_affine(&xs, &mut apart, 1.3, -0.7);
            assert_eq!(fused, apart, "n {n}");
            assert_eq!(sum.to_bits(), reduce(NlOp::Add, &apart, 0.0).to_bits(), "n {n}");
            assert_eq!(exp_affine_sum_generic(&xs, &mut base, 1.3, -0.7).to_bits(), sum.to_bits(), "n {n}: the baseline build");
        }
    }
}
