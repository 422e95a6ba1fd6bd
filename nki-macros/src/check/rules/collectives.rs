//! Rules of the group collectives `all_reduce`, `all_gather`, `reduce_scatter`,
//! `all_to_all` and `collective_permute`.

use crate::ast::Space;
use crate::check::site::CallSite;
use crate::check::types::Ty;
use crate::diag::Diagnostics;

/// The group collectives: a reducing one reduces with `nl::add`, `nl::maximum` or
/// `nl::minimum`; a known `collective_dim` is one the op supports (0, or 0 and 1
/// for `all_gather`); no tensor in PSUM, and `all_to_all` and
/// `collective_permute` move HBM tensors only.
pub fn collective(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    let op = site.spec.py;
    if let Some(a) = site.arg("op")
        && let Ty::Op(_, Some(n)) = &a.ty
        && !matches!(*n, "add" | "maximum" | "minimum")
    {
        diag.error(a.expr.span, format!("op of {op} must be nl::add, nl::maximum or nl::minimum, not nl::{n}"));
    }
    let hbm_only = matches!(op, "ncc.all_to_all" | "ncc.collective_permute");
    let dims: &[i64] = if op == "ncc.all_gather" { &[0, 1] } else { &[0] };
    if let Some(a) = site.arg("collective_dim")
        && let Some(d) = a.ty.const_int()
        && !dims.contains(&d)
    {
        diag.error(a.expr.span, format!("collective_dim of {op} must be one of {dims:?}, not {d}"));
    }
    for role in ["srcs", "dsts"] {
        let Some(a) = site.arg(role) else { continue };
        let (Ty::List(ts) | Ty::Tuple(ts)) = &a.ty else { continue };
        for t in ts {
            let Ty::Tensor(t) = t else { continue };
            match t.space {
                Some(Space::Psum) => {
                    diag.error(a.expr.span, format!("{role} of {op} holds a PSUM tensor; collectives move HBM or SBUF tensors"))
                }
                Some(Space::Sbuf) if hbm_only => {
                    diag.error(a.expr.span, format!("{role} of {op} holds an SBUF tensor; it moves HBM tensors only"))
                }
                _ => {}
            }
        }
    }
    Ty::Unit
}
