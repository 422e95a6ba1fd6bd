//! Rules of the predicated selections `tensor_copy_predicated` and `select_reduce`.

use super::CallSite;
use super::rules::{same_geometry, two_inputs};
use super::types::Ty;
use crate::ast::Space;
use crate::diag::Diagnostics;

/// `tensor_copy_predicated`: `dst`, a tensor `src` and `predicate` of one
/// geometry, an unsigned-integer predicate, `src` in `dst`'s dtype, not both
/// `src` and `predicate` in PSUM.
pub fn copy_predicated(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    same_geometry(diag, site, "dst", "predicate");
    if let Some((m, sm)) = site.tensor("predicate")
        && let Some(d) = m.dtype
        && !matches!(d, "uint8" | "uint16" | "uint32")
    {
        diag.error(
            sm,
            format!("{} of nisa.tensor_copy_predicated must be nl.uint8, nl.uint16 or nl.uint32, not nl.{d}", site.label("predicate")),
        );
    }
    if site.tensor("src").is_some() {
        same_geometry(diag, site, "dst", "src");
        if let (Some((d, _)), Some((s, ss))) = (site.tensor("dst"), site.tensor("src"))
            && let (Some(a), Some(b)) = (d.dtype, s.dtype)
            && a != b
        {
            diag.error(
                ss,
                format!("{} of nisa.tensor_copy_predicated is nl.{b} but dst is nl.{a}; they must share a dtype", site.label("src")),
            );
        }
        if let (Some((s, _)), Some((m, sm))) = (site.tensor("src"), site.tensor("predicate"))
            && s.space == Some(Space::Psum)
            && m.space == Some(Space::Psum)
        {
            diag.error(sm, "src and predicate of nisa.tensor_copy_predicated are both in PSUM; at most one may be in PSUM");
        }
    }
    Ty::Unit
}

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
