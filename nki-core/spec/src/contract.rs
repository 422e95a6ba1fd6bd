//! The contract of a kernel parameter: the dtypes a tensor parameter accepts
//! and the documented range of a scalar one.
//!
//! A kernel declares them once, beside its parameters (`#[dtypes(int32)]`,
//! `#[range(>= 0.0, < 1.0)]`); a tensor parameter that declares no dtypes takes
//! [`FLOAT_DATA`]. The `#[nki_kernel]` macro turns the declaration into the
//! emitted kernel's asserts, the Rust function's checks and the registry entry
//! the `nki run` command checks its inputs against, so all three refuse the
//! same values with the same rule.

/// The dtypes a kernel's tensor parameter takes unless it declares others: the
/// float dtypes that hold plain numbers. Integer and bool data (and the packed
/// MX and scale dtypes) must be declared by the parameters that take them.
pub const FLOAT_DATA: &[&str] = &["float32", "bfloat16", "float16", "tfloat32", "float8_e4m3", "float8_e4m3fn", "float8_e5m2"];

/// One bound of a scalar parameter's range.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Bound {
    /// `value >= x`.
    Ge(f64),
    /// `value > x`.
    Gt(f64),
    /// `value <= x`.
    Le(f64),
    /// `value < x`.
    Lt(f64),
}

impl Bound {
    /// Whether `v` is within this bound (NaN never is).
    pub fn holds(self, v: f64) -> bool {
        match self {
            Bound::Ge(x) => v >= x,
            Bound::Gt(x) => v > x,
            Bound::Le(x) => v <= x,
            Bound::Lt(x) => v < x,
        }
    }

    /// The Python comparison operator.
    pub const fn operator(self) -> &'static str {
        match self {
            Bound::Ge(_) => ">=",
            Bound::Gt(_) => ">",
            Bound::Le(_) => "<=",
            Bound::Lt(_) => "<",
        }
    }

    /// The bound's value.
    pub const fn value(self) -> f64 {
        match self {
            Bound::Ge(x) | Bound::Gt(x) | Bound::Le(x) | Bound::Lt(x) => x,
        }
    }

    fn is_lower(self) -> bool {
        matches!(self, Bound::Ge(_) | Bound::Gt(_))
    }
}

/// Whether `v` is within every bound.
pub fn in_range(bounds: &[Bound], v: f64) -> bool {
    bounds.iter().all(|b| b.holds(v))
}

/// The range as messages state it: `in [0, 1)` for a lower and an upper bound,
/// `>= 1` or `< 8` for one, bounds joined by `and` otherwise.
pub fn range_rule(bounds: &[Bound]) -> String {
    match bounds {
        [lo, hi] if lo.is_lower() && !hi.is_lower() => {
            let open = if matches!(lo, Bound::Ge(_)) { '[' } else { '(' };
            let close = if matches!(hi, Bound::Le(_)) { ']' } else { ')' };
            format!("in {open}{}, {}{close}", number(lo.value()), number(hi.value()))
        }
        _ => bounds.iter().map(|b| format!("{} {}", b.operator(), number(b.value()))).collect::<Vec<_>>().join(" and "),
    }
}

/// A bound as messages show it: plainly, or in exponent form when very large or small.
fn number(v: f64) -> String {
    if v != 0.0 && !(1e-4..1e16).contains(&v.abs()) { format!("{v:e}") } else { format!("{v}") }
}

/// `names` as a list in prose: `a`, `a or b`, `a, b or c`.
pub fn either(names: &[&str]) -> String {
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => names.concat(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_read_as_intervals_or_comparisons() {
        assert_eq!(range_rule(&[Bound::Ge(0.0), Bound::Lt(1.0)]), "in [0, 1)");
        assert_eq!(range_rule(&[Bound::Gt(0.0), Bound::Le(1.0)]), "in (0, 1]");
        assert_eq!(range_rule(&[Bound::Ge(1.0)]), ">= 1");
        assert_eq!(range_rule(&[Bound::Gt(0.5)]), "> 0.5");
        assert_eq!(range_rule(&[Bound::Gt(0.0), Bound::Le(f64::from(f32::MAX))]), "in (0, 3.4028234663852886e38]");
        assert_eq!(range_rule(&[Bound::Ge(1e-30)]), ">= 1e-30");
        assert!(in_range(&[Bound::Ge(0.0), Bound::Lt(1.0)], 0.0) && !in_range(&[Bound::Ge(0.0), Bound::Lt(1.0)], 1.0));
        assert!(!in_range(&[Bound::Ge(0.0)], f64::NAN));
        assert_eq!(either(&["float32", "bfloat16", "float16"]), "float32, bfloat16 or float16");
        assert_eq!(either(&["int32"]), "int32");
    }
}
