//! Lists built from a trace-time range: `(0..n).map(|i| x).collect()`, Python's
//! `[x for i in range(n)]`, as NKI kernels keep their PSUM accumulators and
//! per-tile statistics.

use super::*;

impl Checker<'_> {
    /// The list of one `body` per index of `iter`: a list of known length when
    /// the range's length is known, otherwise a list of unknown length
    /// ([`Ty::Seq`]) whose elements all have the body's type.
    pub(super) fn comprehension(&mut self, var: &Pat, iter: &crate::ast::RangeIter, body: &Expr, span: Spn) -> Ty {
        self.range_bounds(iter);
        let element = self.scoped(|c| {
            let t = c.fresh(Ty::Int(Val::unknown()));
            c.bind(var, t);
            c.expr(body)
        });
        let (start, stop) = (self.info.ty(&iter.start).const_int(), self.info.ty(&iter.stop).const_int());
        let step = iter.step.as_ref().map_or(Some(1), |s| self.info.ty(s).const_int());
        let (Some(start), Some(stop), Some(step)) = (start, stop, step) else {
            return Ty::Seq(Box::new(element));
        };
        let Some(len) = stop.checked_sub(start).map(|n| value::slice_len(n, step)) else {
            return Ty::Seq(Box::new(element));
        };
        let elements = u128::from(len.unsigned_abs()) * (element.footprint().0 as u128 + 1);
        if elements > MAX_ELEMENTS as u128 {
            self.diag.error(
                span,
                format!(
                    "this list holds {elements} elements; lists and tuples in kernels hold at most {MAX_ELEMENTS} (nested ones counted)"
                ),
            );
            return Ty::Unknown;
        }
        self.bounded(Ty::List(vec![element; len as usize]), span)
    }
}
