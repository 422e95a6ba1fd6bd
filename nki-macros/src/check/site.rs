//! A call as the rules see it: the arguments by parameter, the target's limits.

use super::limits::{Generation, HwLimits};
use super::types::{TensorTy, Ty};
use crate::ast::{Expr, ExprKind, Spn};
use crate::diag::Diagnostics;
use crate::vocab::FnSpec;

/// A vocabulary function's static rule: reports violations, returns the result
/// type for functions whose result depends on their arguments.
pub type Check = fn(&mut Diagnostics, &CallSite<'_>) -> Ty;

/// One argument as seen by a rule.
pub struct ArgInfo<'a> {
    pub ty: Ty,
    pub expr: &'a Expr,
}

/// A call as seen by a rule: arguments by parameter position.
pub struct CallSite<'a> {
    pub spec: &'static FnSpec,
    pub args: Vec<Option<ArgInfo<'a>>>,
    pub hw: HwLimits,
    pub target: Generation,
}

impl<'a> CallSite<'a> {
    /// The argument of the parameter `name`.
    pub fn arg(&self, name: &str) -> Option<&ArgInfo<'a>> {
        let i = self.spec.params.iter().position(|p| p.name == name)?;
        self.args.get(i)?.as_ref()
    }

    /// The tensor facts of the argument `name`, when it is a tensor.
    pub fn tensor(&self, name: &str) -> Option<(&TensorTy, Spn)> {
        match self.arg(name)? {
            ArgInfo { ty: Ty::Tensor(t), expr } => Some((t, expr.span)),
            _ => None,
        }
    }

    /// A readable name for the argument `name`: the variable, or the parameter.
    pub fn label(&self, name: &str) -> String {
        match self.arg(name).map(|a| &a.expr.kind) {
            Some(ExprKind::Var(v)) => format!("`{v}`"),
            Some(ExprKind::Index { base, .. }) => match &base.kind {
                ExprKind::Var(v) => format!("`{v}[...]`"),
                _ => format!("`{name}`"),
            },
            _ => format!("`{name}`"),
        }
    }
}
