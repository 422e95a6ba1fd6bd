//! Trace-time integers as affine forms over unknown symbols, so that extents such
//! as `(i + 1) * 128 - i * 128` are known to be 128 even when `i` is not.

/// `k + Σ coef · sym`, or unknown.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Val(Option<Lin>);

#[derive(Clone, Debug, PartialEq, Eq, Default)]
struct Lin {
    /// Sorted by symbol, no zero coefficients.
    terms: Vec<(u32, i64)>,
    k: i64,
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

    fn combine(&self, other: &Val, sign: i64) -> Val {
        let (Some(a), Some(b)) = (&self.0, &other.0) else {
            return Val(None);
        };
        let mut terms = a.terms.clone();
        for &(s, c) in &b.terms {
            match terms.binary_search_by_key(&s, |t| t.0) {
                Ok(i) => terms[i].1 = terms[i].1.saturating_add(sign.saturating_mul(c)),
                Err(i) => terms.insert(i, (s, sign.saturating_mul(c))),
            }
        }
        terms.retain(|t| t.1 != 0);
        Val(Some(Lin { terms, k: a.k.saturating_add(sign.saturating_mul(b.k)) }))
    }

    pub fn add(&self, o: &Val) -> Val {
        self.combine(o, 1)
    }

    pub fn sub(&self, o: &Val) -> Val {
        self.combine(o, -1)
    }

    pub fn mul(&self, o: &Val) -> Val {
        match (self.as_const(), o.as_const()) {
            (_, Some(c)) => self.scale(c),
            (Some(c), _) => o.scale(c),
            _ => Val(None),
        }
    }

    fn scale(&self, c: i64) -> Val {
        Val(self.0.as_ref().map(|l| Lin {
            terms: l.terms.iter().map(|&(s, x)| (s, x.saturating_mul(c))).filter(|t| t.1 != 0).collect(),
            k: l.k.saturating_mul(c),
        }))
    }

    /// Python floor division (`None` on division by zero).
    pub fn floordiv(&self, o: &Val) -> Option<Val> {
        match (self.as_const(), o.as_const()) {
            (_, Some(0)) => None,
            (Some(a), Some(b)) => Some(Val::konst(a.div_euclid(b) - i64::from(b < 0 && a.rem_euclid(b) != 0))),
            _ => Some(Val(None)),
        }
    }

    /// Python modulo (`None` on division by zero).
    pub fn floormod(&self, o: &Val) -> Option<Val> {
        match (self.as_const(), o.as_const()) {
            (_, Some(0)) => None,
            (Some(a), Some(b)) => Some(Val::konst(a - b * (a.div_euclid(b) - i64::from(b < 0 && a.rem_euclid(b) != 0)))),
            _ => Some(Val(None)),
        }
    }

    pub fn neg(&self) -> Val {
        Val::konst(0).sub(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn affine_extents_cancel() {
        let i = Val::symbol(1);
        let hi = i.add(&Val::konst(1)).mul(&Val::konst(128));
        let lo = i.mul(&Val::konst(128));
        assert_eq!(hi.sub(&lo).as_const(), Some(128));
        assert_eq!(i.mul(&i).as_const(), None);
        assert_eq!(Val::konst(-7).floordiv(&Val::konst(2)).unwrap().as_const(), Some(-4));
        assert_eq!(Val::konst(-7).floormod(&Val::konst(2)).unwrap().as_const(), Some(1));
        assert_eq!(Val::konst(7).floormod(&Val::konst(-2)).unwrap().as_const(), Some(-1));
        assert!(Val::konst(1).floordiv(&Val::konst(0)).is_none());
    }
}
