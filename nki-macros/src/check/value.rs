//! Trace-time integers as affine forms over unknown symbols, so that extents such
//! as `(i + 1) * 128 - i * 128` are known to be 128 even when `i` is not.
//!
//! Arithmetic is checked: an operation on known values whose result does not fit
//! an `i64` is an [`EvalError`] (the emulation would fail there too), while a
//! coefficient of an unknown symbol that overflows only makes the value unknown.

/// `k + Σ coef · sym`, or unknown.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Val(Option<Lin>);

#[derive(Clone, Debug, PartialEq, Eq, Default)]
struct Lin {
    /// Sorted by symbol, no zero coefficients.
    terms: Vec<(u32, i64)>,
    k: i64,
}

/// Why an operation on known integers has no value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EvalError {
    DivisionByZero,
    /// A shift by a negative count (Python's `ValueError`).
    NegativeShift,
    /// The result does not fit an `i64`.
    Overflow,
}

impl Val {
    /// A known constant.
    pub fn konst(k: i64) -> Val {
        Val(Some(Lin { terms: Vec::new(), k }))
    }

    /// An unknown value.
    pub fn unknown() -> Val {
        Val(None)
    }

    /// An opaque symbol.
    pub fn symbol(id: u32) -> Val {
        Val(Some(Lin { terms: vec![(id, 1)], k: 0 }))
    }

    /// The constant, when the value is known.
    pub fn as_const(&self) -> Option<i64> {
        match &self.0 {
            Some(l) if l.terms.is_empty() => Some(l.k),
            _ => None,
        }
    }

    /// `op` on two constants, or the affine form `sym` computes (unknown if a
    /// coefficient overflows).
    fn arith(&self, o: &Val, op: fn(i64, i64) -> Option<i64>, sym: impl FnOnce(&Lin, &Lin) -> Option<Lin>) -> Result<Val, EvalError> {
        match (self.as_const(), o.as_const(), &self.0, &o.0) {
            (Some(a), Some(b), _, _) => op(a, b).map(Val::konst).ok_or(EvalError::Overflow),
            (_, _, Some(a), Some(b)) => Ok(Val(sym(a, b))),
            _ => Ok(Val(None)),
        }
    }

    fn combine(a: &Lin, b: &Lin, sign: i64) -> Option<Lin> {
        let mut terms = a.terms.clone();
        for &(s, c) in &b.terms {
            let c = sign.checked_mul(c)?;
            match terms.binary_search_by_key(&s, |t| t.0) {
                Ok(i) => terms[i].1 = terms[i].1.checked_add(c)?,
                Err(i) => terms.insert(i, (s, c)),
            }
        }
        terms.retain(|t| t.1 != 0);
        Some(Lin { terms, k: a.k.checked_add(sign.checked_mul(b.k)?)? })
    }

    fn scale(l: &Lin, c: i64) -> Option<Lin> {
        let terms = l.terms.iter().map(|&(s, x)| Some((s, x.checked_mul(c)?))).collect::<Option<Vec<_>>>()?;
        Some(Lin { terms: terms.into_iter().filter(|t| t.1 != 0).collect(), k: l.k.checked_mul(c)? })
    }

    pub fn add(&self, o: &Val) -> Result<Val, EvalError> {
        self.arith(o, i64::checked_add, |a, b| Val::combine(a, b, 1))
    }

    pub fn sub(&self, o: &Val) -> Result<Val, EvalError> {
        self.arith(o, i64::checked_sub, |a, b| Val::combine(a, b, -1))
    }

    pub fn mul(&self, o: &Val) -> Result<Val, EvalError> {
        let (x, y) = (self.as_const(), o.as_const());
        self.arith(o, i64::checked_mul, |a, b| match (x, y) {
            (_, Some(c)) => Val::scale(a, c),
            (Some(c), _) => Val::scale(b, c),
            _ => None,
        })
    }

    pub fn neg(&self) -> Result<Val, EvalError> {
        Val::konst(0).sub(self)
    }

    /// Python floor division `a // b`.
    pub fn floordiv(&self, o: &Val) -> Result<Val, EvalError> {
        if o.as_const() == Some(0) {
            return Err(EvalError::DivisionByZero);
        }
        self.arith(o, floordiv, |_, _| None)
    }

    /// Python modulo `a % b` (the sign of `b`).
    pub fn floormod(&self, o: &Val) -> Result<Val, EvalError> {
        if o.as_const() == Some(0) {
            return Err(EvalError::DivisionByZero);
        }
        self.arith(o, floormod, |_, _| None)
    }

    /// Python's `a << b`.
    pub fn shl(&self, o: &Val) -> Result<Val, EvalError> {
        if o.as_const().is_some_and(|b| b < 0) {
            return Err(EvalError::NegativeShift);
        }
        self.arith(o, shl, |_, _| None)
    }

    /// Python's `a >> b` (rounds toward negative infinity).
    pub fn shr(&self, o: &Val) -> Result<Val, EvalError> {
        if o.as_const().is_some_and(|b| b < 0) {
            return Err(EvalError::NegativeShift);
        }
        self.arith(o, |a, b| Some(a >> b.min(63)), |_, _| None)
    }

    /// `ceil(a / b)`, as the emulation computes it: `-((-a) // b)`.
    pub fn div_ceil(&self, o: &Val) -> Result<Val, EvalError> {
        self.neg()?.floordiv(o)?.neg()
    }

    /// `|a|`.
    pub fn abs(&self) -> Result<Val, EvalError> {
        match self.as_const() {
            Some(a) => a.checked_abs().map(Val::konst).ok_or(EvalError::Overflow),
            None => Ok(Val(None)),
        }
    }
}

/// `a // b` rounded toward negative infinity; `None` when it does not fit (or `b` is 0).
fn floordiv(a: i64, b: i64) -> Option<i64> {
    let q = a.checked_div(b)?;
    // `checked_div` truncates; step down when the exact quotient is negative and inexact.
    if a.checked_rem(b)? != 0 && (a < 0) != (b < 0) { q.checked_sub(1) } else { Some(q) }
}

/// `a << b` for `b >= 0`; `None` when the result does not fit.
fn shl(a: i64, b: i64) -> Option<i64> {
    if a == 0 {
        return Some(0);
    }
    let r = a.checked_shl(u32::try_from(b).ok().filter(|&b| b < 64)?)?;
    (r >> b == a).then_some(r)
}

/// `a % b` with the sign of `b`; `None` when `a // b` does not fit (or `b` is 0).
fn floormod(a: i64, b: i64) -> Option<i64> {
    let r = a.checked_rem(b)?;
    // `r` and `b` have opposite signs here, so the sum cannot overflow.
    Some(if r != 0 && (r < 0) != (b < 0) { r + b } else { r })
}

/// The number of elements of a slice spanning `len` values with a positive `step`.
pub fn slice_len(len: i64, step: i64) -> i64 {
    if len <= 0 || step <= 0 { 0 } else { (len - 1) / step + 1 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(v: i64) -> Val {
        Val::konst(v)
    }

    #[test]
    fn affine_extents_cancel() {
        let i = Val::symbol(1);
        let hi = i.add(&k(1)).unwrap().mul(&k(128)).unwrap();
        let lo = i.mul(&k(128)).unwrap();
        assert_eq!(hi.sub(&lo).unwrap().as_const(), Some(128));
        assert_eq!(i.mul(&i).unwrap().as_const(), None);
    }

    #[test]
    fn division_follows_python() {
        // Python: -7 // 2 == -4, -7 % 2 == 1, 7 % -2 == -1, 7 // -2 == -4, -6 // 3 == -2.
        let cases = [(-7, 2, -4, 1), (7, -2, -4, -1), (-6, 3, -2, 0), (7, 2, 3, 1), (-7, -2, 3, -1)];
        for (a, b, q, r) in cases {
            assert_eq!(k(a).floordiv(&k(b)).unwrap().as_const(), Some(q), "{a} // {b}");
            assert_eq!(k(a).floormod(&k(b)).unwrap().as_const(), Some(r), "{a} % {b}");
        }
        assert_eq!(k(1).floordiv(&k(0)), Err(EvalError::DivisionByZero));
        assert_eq!(Val::symbol(1).floormod(&k(0)), Err(EvalError::DivisionByZero));
        assert_eq!(k(7).div_ceil(&k(2)).unwrap().as_const(), Some(4));
        assert_eq!(k(-7).div_ceil(&k(2)).unwrap().as_const(), Some(-3));
        assert_eq!((slice_len(10, 3), slice_len(9, 3), slice_len(0, 3), slice_len(-4, 1)), (4, 3, 0, 0));
        assert_eq!(slice_len(i64::MAX, i64::MAX), 1);
    }

    #[test]
    fn overflow_of_known_values_is_an_error() {
        let (max, min) = (k(i64::MAX), k(i64::MIN));
        assert_eq!(max.add(&k(1)), Err(EvalError::Overflow));
        assert_eq!(min.sub(&k(1)), Err(EvalError::Overflow));
        assert_eq!(max.mul(&k(2)), Err(EvalError::Overflow));
        assert_eq!(min.neg(), Err(EvalError::Overflow));
        assert_eq!(min.abs(), Err(EvalError::Overflow));
        // The emulation computes i64 // and % and fails on these, although Python would not.
        assert_eq!(min.floordiv(&k(-1)), Err(EvalError::Overflow));
        assert_eq!(min.floormod(&k(-1)), Err(EvalError::Overflow));
        assert_eq!(min.div_ceil(&k(2)), Err(EvalError::Overflow));
        // In range at the edges.
        assert_eq!(min.floordiv(&k(1)).unwrap().as_const(), Some(i64::MIN));
        assert_eq!(min.floormod(&k(3)).unwrap().as_const(), Some(1));
        assert_eq!(max.sub(&max).unwrap().as_const(), Some(0));
    }

    #[test]
    fn overflowing_coefficients_make_the_value_unknown() {
        let i = Val::symbol(1);
        let big = i.mul(&k(i64::MAX)).unwrap();
        assert_eq!(big.add(&big), Ok(Val::unknown()));
        assert_eq!(i.add(&k(i64::MAX)).unwrap().add(&k(1)), Ok(Val::unknown()));
        assert_eq!(big.sub(&big).unwrap().as_const(), Some(0));
    }
}
