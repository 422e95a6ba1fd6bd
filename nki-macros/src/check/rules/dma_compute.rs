//! The rule of `nisa.dma_compute`: the documented `nl::add` reduction and unit
//! scales, 1 to 16 sources, none in PSUM, each with `dst`'s element count.

use crate::ast::Space;
use crate::check::site::CallSite;
use crate::check::types::{TensorTy, Ty, known_product};
use crate::diag::Diagnostics;
use nki_spec::constants::DMA_COMPUTE_MAX_SRCS;

pub fn check(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    if let Some(a) = site.arg("reduce_op")
        && let Ty::Op(_, Some(n)) = &a.ty
        && *n != "add"
    {
        diag.error(
            a.expr.span,
            format!("reduce_op of nisa.dma_compute must be nl::add (the only reduction the DMA engines do), not nl::{n}"),
        );
    }
    let Some(srcs) = site.arg("srcs") else { return Ty::Unit };
    let (Ty::List(ts) | Ty::Tuple(ts)) = &srcs.ty else { return Ty::Unit };
    if ts.is_empty() || ts.len() > DMA_COMPUTE_MAX_SRCS {
        diag.error(
            srcs.expr.span,
            format!("srcs of nisa.dma_compute holds {} tensors; it must hold 1 to {DMA_COMPUTE_MAX_SRCS}", ts.len()),
        );
    }
    if let Some(a) = site.arg("scales")
        && let Ty::List(cs) | Ty::Tuple(cs) = &a.ty
    {
        let values: Vec<Option<f64>> = match &a.expr.kind {
            crate::ast::ExprKind::List(es) | crate::ast::ExprKind::Tuple(es) => es.iter().map(literal_number).collect(),
            _ => Vec::new(),
        };
        if cs.len() != ts.len() || values.iter().flatten().any(|&v| v != 1.0) {
            diag.error(
                a.expr.span,
                format!("scales of nisa.dma_compute must be one 1.0 per source ({} sources): the DMA engines do not scale", ts.len()),
            );
        }
    }
    let count = |t: &TensorTy| known_product(t.shape.as_ref()?)?.ok();
    let dst = site.tensor("dst").and_then(|(d, _)| count(d));
    for (i, t) in ts.iter().enumerate() {
        let Ty::Tensor(t) = t else { continue };
        if t.space == Some(Space::Psum) {
            diag.error(srcs.expr.span, format!("srcs[{i}] of nisa.dma_compute is in PSUM, which DMA cannot access; copy it to SBUF first"));
        }
        if let (Some(d), Some(n)) = (dst, count(t))
            && d != n
        {
            diag.error(
                srcs.expr.span,
                format!("srcs[{i}] of nisa.dma_compute holds {n} elements but {} holds {d}; the counts must match", site.label("dst")),
            );
        }
    }
    Ty::Unit
}

/// The value of a number literal (`1.0`, `1`, `-1.0`).
fn literal_number(e: &crate::ast::Expr) -> Option<f64> {
    use crate::ast::{ExprKind, UnOp};
    match &e.kind {
        ExprKind::Float(v) => Some(*v),
        ExprKind::Int(v) => Some(*v as f64),
        ExprKind::Unary(UnOp::Neg, x) => literal_number(x).map(|v| -v),
        _ => None,
    }
}
