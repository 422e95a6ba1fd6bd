//! The rule of `nl.shared_constant`: its `constant` is a literal known at trace
//! time, a number or a rectangular nested list of numbers, stored as float32 in
//! a shared-HBM tensor of the literal's shape (a number is shape `[1]`).

use super::CallSite;
use super::types::{TensorTy, Ty};
use super::value::Val;
use crate::ast::{Expr, ExprKind, Space, UnOp};
use crate::diag::Diagnostics;

/// The shape and row-major values of a constant literal, or why it is not one.
pub fn literal(e: &Expr) -> Result<(Vec<usize>, Vec<f64>), String> {
    let mut values = Vec::new();
    let shape = dims(e, &mut values)?;
    Ok((if shape.is_empty() { vec![1] } else { shape }, values))
}

/// Appends `e`'s numbers to `values` and returns its dims.
fn dims(e: &Expr, values: &mut Vec<f64>) -> Result<Vec<usize>, String> {
    match &e.kind {
        ExprKind::List(items) | ExprKind::Tuple(items) => {
            let Some((first, rest)) = items.split_first() else { return Err("an empty list has no shape".into()) };
            let inner = dims(first, values)?;
            for (i, item) in rest.iter().enumerate() {
                let d = dims(item, values)?;
                if d != inner {
                    return Err(format!("the list is ragged: item {} has shape {d:?} but item 0 has {inner:?}", i + 1));
                }
            }
            Ok([vec![items.len()], inner].concat())
        }
        _ => {
            values.push(number(e).ok_or("every element must be a number literal")?);
            Ok(Vec::new())
        }
    }
}

/// A number literal, possibly negated.
fn number(e: &Expr) -> Option<f64> {
    match &e.kind {
        ExprKind::Int(v) => Some(*v as f64),
        ExprKind::Float(v) => Some(*v),
        ExprKind::Unary(UnOp::Neg, x) => number(x).map(|v| -v),
        _ => None,
    }
}

/// Checks the literal; the result is a float32 shared-HBM tensor of its shape.
pub fn check(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    let shape = site.arg("constant").and_then(|a| match literal(a.expr) {
        Ok((shape, _)) => Some(shape.iter().map(|&d| Val::konst(d as i64)).collect()),
        Err(why) => {
            diag.error(
                a.expr.span,
                format!("constant of nl.shared_constant must be a number or a rectangular nested list of numbers: {why}"),
            );
            None
        }
    });
    Ty::Tensor(TensorTy { space: Some(Space::Hbm), shape, dtype: Some("float32") })
}
