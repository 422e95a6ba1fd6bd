//! Rules of `select_reduce`.

use crate::check::operands::two_inputs;
use crate::check::site::CallSite;
use crate::check::types::Ty;
use crate::diag::Diagnostics;

/// `select_reduce`: `dst`, `on_true` and `predicate` of one geometry, a small
/// integer predicate, `nl.maximum` as the reduction, not both inputs in PSUM.
pub fn select_reduce(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    two_inputs(diag, site, "on_true", "predicate");
    if let Some((m, sm)) = site.tensor("predicate")
        && let Some(d) = m.dtype
        && !matches!(d, "int8" | "uint8" | "int16" | "uint16")
    {
        diag.error(
            sm,
            format!("{} of nisa.select_reduce must be nl.int8, nl.uint8, nl.int16 or nl.uint16, not nl.{d}", site.label("predicate")),
        );
    }
    if let Some(a) = site.arg("reduce_op")
        && let Ty::Op(_, Some(n)) = &a.ty
        && *n != "maximum"
    {
        diag.error(a.expr.span, format!("reduce_op of nisa.select_reduce must be nl::maximum, not nl::{n}"));
    }
    Ty::Unit
}
