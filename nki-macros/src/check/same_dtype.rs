//! The spec's rule that an op does not cast ([`nki_spec::SameDtype`]): reported
//! at the output when both dtypes are known at compile time, with the message
//! the emulator gives at run time.

use super::CallSite;
use crate::ast::ExprKind;
use crate::diag::Diagnostics;

/// Reports a call whose output and input dtypes are known and differ, when the
/// rule's condition (a `True` literal) holds.
pub fn check(diag: &mut Diagnostics, site: &CallSite<'_>) {
    let Some(rule) = site.spec.same_dtype else { return };
    if let Some(flag) = rule.when
        && !matches!(site.arg(flag).map(|a| &a.expr.kind), Some(ExprKind::Bool(true)))
    {
        return;
    }
    let dtype = |name: &str| site.tensor(name).and_then(|(t, span)| Some((t.dtype?, span)));
    if let (Some((d, span)), Some((s, _))) = (dtype(rule.dst), dtype(rule.src))
        && d != s
    {
        diag.error(span, format!("{}: {}", site.spec.py, rule.message(&site.label(rule.dst), d, s)));
    }
}
