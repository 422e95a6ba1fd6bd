//! Rules of the predicated copy `tensor_copy_predicated`.

use crate::ast::Space;
use crate::check::operands::same_geometry;
use crate::check::site::CallSite;
use crate::check::types::Ty;
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
