//! Rules of `tensor_reduce`.

use crate::check::site::CallSite;
use crate::check::types::Ty;
use crate::diag::Diagnostics;

/// `tensor_reduce`: never the partition dim.
pub fn tensor_reduce(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    if let Some(a) = site.arg("axis") {
        let axes: Vec<Option<i64>> = match &a.ty {
            Ty::Int(v) => vec![v.as_const()],
            Ty::Tuple(items) | Ty::List(items) => items.iter().map(Ty::const_int).collect(),
            _ => Vec::new(),
        };
        if axes.contains(&Some(0)) {
            diag.error(a.expr.span, "tensor_reduce cannot reduce axis 0, the partition dim; reduce free dims (1, 2, ...) instead");
        }
    }
    Ty::Unit
}
