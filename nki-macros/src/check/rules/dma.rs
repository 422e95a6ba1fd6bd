//! Rules of the DMA moves. `dma_copy`: equal element counts. `dma_transpose`:
//! the op's documented rules, the emulator's own table (included by path),
//! reported at the offending argument whenever the shapes, dtypes, axes and
//! modes they need are known at compile time.

#[path = "../../../../nki-core/src/isa/dma/transpose_rules.rs"]
#[allow(dead_code)]
mod transpose_rules;

use crate::ast::ExprKind;
use crate::check::operands::{dtype_bytes, same_count};
use crate::check::site::{ArgInfo, CallSite};
use crate::check::types::Ty;
use crate::check::value::Val;
use crate::diag::Diagnostics;
use transpose_rules::{Axes, Dge, Dim, TransposeCall};

/// The member name of an enum argument written as a path (`nisa::dge_mode::hwdge`).
fn member(arg: &ArgInfo<'_>) -> Option<String> {
    match &arg.expr.kind {
        ExprKind::Path(p) => p.last().cloned(),
        _ => None,
    }
}

/// Reports every rule of [`transpose_rules`] the call is known to break.
pub fn check(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    let shape = |name: &str| -> Option<Vec<Dim>> { Some(site.tensor(name)?.0.shape.as_ref()?.iter().map(Val::as_const).collect()) };
    let dtype = |name: &str| site.tensor(name).and_then(|(t, _)| t.dtype);
    let (src_shape, dst_shape) = (shape("src"), shape("dst"));
    let given: Option<Vec<Dim>> = site.arg("axes").and_then(|a| match &a.ty {
        Ty::Tuple(items) | Ty::List(items) => Some(items.iter().map(Ty::const_int).collect()),
        Ty::Shape(Some(dims)) => Some(dims.iter().map(Val::as_const).collect()),
        _ => None,
    });
    let axes = match (site.arg("axes"), &given) {
        (None, _) => Axes::Default,
        (Some(_), Some(a)) => Axes::Given(a),
        (Some(_), None) => Axes::Unknown,
    };
    let target = site.target.to_string();
    let call = TransposeCall {
        src_shape: src_shape.as_deref(),
        dst_shape: dst_shape.as_deref(),
        src_dtype: dtype("src"),
        dst_dtype: dtype("dst"),
        element_bytes: dtype("src").map(dtype_bytes),
        axes,
        dge: site.arg("dge_mode").map_or(Some(Dge::Unknown), |a| member(a).as_deref().and_then(Dge::from_name)),
        oob_skip: site.arg("oob_mode").map_or(Some(false), |a| member(a).map(|m| m == "skip")),
        has_hwdge: site.hw.has_hwdge,
        target: &target,
    };
    for (rule, values) in call.violations() {
        let operand = rule.operand();
        let Some(arg) = site.arg(operand).or_else(|| site.arg("src")) else {
            continue;
        };
        diag.error(arg.expr.span, format!("nisa.dma_transpose {}: {values}; {}", site.label(operand), rule.message()));
    }
    Ty::Unit
}

/// `dma_copy`: equal element counts when known.
pub fn dma_copy(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    same_count(diag, site, "src")
}
