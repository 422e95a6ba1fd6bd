//! Rules of `affine_select` and `range_select`.

use crate::ast::ExprKind;
use crate::check::operands::same_geometry;
use crate::check::site::CallSite;
use crate::check::types::Ty;
use crate::diag::Diagnostics;

/// `affine_select`: dst and on_true_tile alike.
pub fn affine_select(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    same_geometry(diag, site, "dst", "on_true_tile");
    Ty::Unit
}

/// `range_select`: the fill value is fixed by the hardware.
pub fn range_select(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    same_geometry(diag, site, "dst", "on_true_tile");
    if let Some(a) = site.arg("on_false_value") {
        let v = match &a.expr.kind {
            ExprKind::Float(v) => Some(*v),
            ExprKind::Unary(crate::ast::UnOp::Neg, x) => match x.kind {
                ExprKind::Float(v) => Some(-v),
                _ => None,
            },
            ExprKind::Path(p) if p == &["f32", "MIN"] => Some(f32::MIN as f64),
            _ => None,
        };
        if let Some(v) = v.filter(|&v| v as f32 != f32::MIN) {
            diag.error(a.expr.span, format!("range_select's on_false_value must be FLOAT32_MIN (f32::MIN = -3.4028235e38), the only fill the hardware supports; got {v:e}"));
        }
    }
    Ty::Unit
}
