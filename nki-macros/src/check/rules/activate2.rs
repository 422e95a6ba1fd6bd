//! Rule of `activate2`: the documented tensor-scalar stages, `reverse*` only on
//! a set stage, a documented reduction, `dst` shaped like `data`.

use crate::ast::ExprKind;
use crate::check::operands::same_geometry;
use crate::check::site::CallSite;
use crate::check::types::Ty;
use crate::diag::Diagnostics;

/// The `(op0, op1)` pairs the docs list.
const STAGES: [(&str, &str); 6] = [
    ("multiply", "add"),
    ("multiply", "subtract"),
    ("multiply", "bypass"),
    ("add", "bypass"),
    ("subtract", "bypass"),
    ("bypass", "bypass"),
];

/// The reductions the docs list.
const REDUCTIONS: [&str; 5] = ["add", "maximum", "minimum", "abs_max", "abs_min"];

/// The token passed as `role`, when known.
fn token(site: &CallSite<'_>, role: &str) -> Option<&'static str> {
    match site.arg(role)?.ty {
        Ty::Op(_, Some(n)) => Some(n),
        _ => None,
    }
}

/// `activate2`: see the module docs.
pub fn check(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    same_geometry(diag, site, "data", "dst");
    let (op0, op1) = (token(site, "op0"), token(site, "op1"));
    if let (Some(a), Some(b), Some(arg)) = (op0, op1, site.arg("op1"))
        && !STAGES.contains(&(a, b))
    {
        let listed: Vec<String> = STAGES.iter().map(|(x, y)| format!("(nl.{x}, nl.{y})")).collect();
        diag.error(
            arg.expr.span,
            format!("(op0, op1) = (nl.{a}, nl.{b}) is not a tensor-scalar stage of {}; use one of {}", site.spec.py, listed.join(", ")),
        );
    }
    for (flag, stage, op) in [("reverse0", "op0", op0), ("reverse1", "op1", op1)] {
        if let Some(a) = site.arg(flag)
            && matches!(a.expr.kind, ExprKind::Bool(true))
            && op == Some("bypass")
        {
            diag.error(a.expr.span, format!("{flag} = true needs {stage} to be set, but {stage} is nl.bypass"));
        }
    }
    if let (Some(r), Some(arg)) = (token(site, "reduce_op"), site.arg("reduce_op"))
        && !REDUCTIONS.contains(&r)
    {
        diag.error(
            arg.expr.span,
            format!(
                "reduce_op=nl.{r} is not a reduction of {}; use nl.add, nl.maximum, nl.minimum, nl.abs_max or nl.abs_min",
                site.spec.py
            ),
        );
    }
    Ty::Unit
}
