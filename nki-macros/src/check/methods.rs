//! Method calls: tensor methods resolved against their parameter table, scalar
//! methods (integers, floats, Options, shapes) against theirs, with their
//! arguments' number and types checked and known integers evaluated.

use super::{Checker, Resolved, Ty, Val, key, views};
use crate::ast::{Arg, Expr, ExprKind};
use crate::diag::did_you_mean;
use crate::vocab::{self, ArgKind, Receiver};

/// The scalar receiver a type stands for.
fn receiver(t: &Ty) -> Option<Receiver> {
    match t {
        Ty::Int(_) => Some(Receiver::Int),
        Ty::Float => Some(Receiver::Float),
        Ty::Option(_) | Ty::None => Some(Receiver::Option),
        Ty::Shape(_) | Ty::Groups | Ty::List(_) | Ty::Seq(_) => Some(Receiver::Sequence),
        _ => None,
    }
}

impl Checker<'_> {
    pub(super) fn method(&mut self, e: &Expr, recv: &Expr, name: &syn::Ident, args: &[Arg]) -> Ty {
        let rt = self.expr(recv);
        let arg_tys: Vec<Ty> = args.iter().map(|a| self.expr(&a.value)).collect();
        let n = name.to_string();
        match &rt {
            Ty::Tensor(tt) => {
                let Some(spec) = vocab::lookup_method(&n) else {
                    let hint = did_you_mean(&n, vocab::method_names()).map(|s| format!("; did you mean `.{s}()`?")).unwrap_or_default();
                    self.diag.error(name.span(), format!("tensors have no method `.{n}()`{hint}"));
                    return Ty::Unknown;
                };
                let Some(bind) = spec.binding() else {
                    self.diag.error(name.span(), super::call::planned(&spec.official_name(), spec.summary));
                    return Ty::Unknown;
                };
                self.generation_check(spec, name.span().into());
                let slots = self.resolve(&format!("`.{n}()`"), spec.params, args, e.span);
                for (p, s) in spec.params.iter().zip(&slots) {
                    if let Some(i) = s {
                        self.kind(&format!("`.{n}()`"), p, &arg_tys[*i], &args[*i].value);
                    }
                }
                let arg = |pname: &str| {
                    spec.params.iter().position(|p| p.name == pname).and_then(|i| slots[i]).map(|i| (&arg_tys[i], &args[i].value))
                };
                let indirect = match n.as_str() {
                    "ap" if arg("vector_offset").is_some() => Some("an `.ap(vector_offset = ..)`"),
                    "vector_select" => Some("a `.vector_select()`"),
                    _ => None,
                };
                if let Some(what) = indirect {
                    let direct = self.dma_operands.contains(&key(e));
                    views::vector_offset_view(self.diag, what, direct, arg("scalar_offset").is_some(), e.span);
                }
                let t = views::tensor_method(self.diag, tt, &n, &arg, e.span);
                self.info.calls.insert(key(e), Resolved::Method { spec, bind, slots });
                t
            }
            Ty::Unknown => Ty::Unknown,
            Ty::Opaque => {
                self.diag.error(name.span(), format!("cannot call `.{n}()` on the result of another function without knowing its type: bind it with a type, e.g. `let t: Tensor = helper(...)`"));
                Ty::Unknown
            }
            other => match receiver(other) {
                Some(r) => self.scalar_method(r, e, recv, &rt, name, args, &arg_tys),
                None => {
                    self.diag.error(name.span(), format!("no method `.{n}()` on {}", other.describe()));
                    Ty::Unknown
                }
            },
        }
    }

    /// A method of an integer, float, Option, shape or replica groups.
    #[allow(clippy::too_many_arguments)]
    fn scalar_method(&mut self, r: Receiver, e: &Expr, recv: &Expr, rt: &Ty, name: &syn::Ident, args: &[Arg], arg_tys: &[Ty]) -> Ty {
        let n = name.to_string();
        let Some(spec) = vocab::lookup_scalar_method(r, &n) else {
            let extra = if r == Receiver::Option { " (or `if let Some(x) = ...`)" } else { "" };
            self.diag
                .error(name.span(), format!("{} in kernels support {}{extra}, not `.{n}()`", r.plural(), vocab::scalar_method_list(r)));
            return Ty::Unknown;
        };
        let inner = match rt {
            Ty::Option(i) => (**i).clone(),
            _ => Ty::Unknown,
        };
        let want = |k: ArgKind| match k {
            ArgKind::Int => "an integer".to_string(),
            ArgKind::Number => "a number".to_string(),
            ArgKind::Inner => format!("a value of the Option's type, {}", inner.describe()),
        };
        let takes = match spec.args {
            [] => "no arguments".to_string(),
            [one] => format!("one argument ({})", want(*one)),
            kinds => format!("{} arguments ({})", kinds.len(), kinds.iter().map(|&k| want(k)).collect::<Vec<_>>().join(", ")),
        };
        let fits = |k: ArgKind, t: &Ty| match k {
            ArgKind::Int => t.is_int() || t.is_unknown(),
            ArgKind::Number => t.fits(&Ty::Float),
            ArgKind::Inner => t.fits(&inner),
        };
        let arity_ok = args.len() == spec.args.len() && args.iter().all(|a| a.name.is_none());
        if !arity_ok || !spec.args.iter().zip(arg_tys).all(|(&k, t)| fits(k, t)) {
            self.diag.error(name.span(), format!("`.{n}()` on {} takes {takes}", rt.describe()));
            return Ty::Unknown;
        }
        if n == "unwrap_or" && !matches!(recv.kind, ExprKind::Var(_)) {
            // Python has no `??`: the receiver appears twice in `x if x is not None else d`.
            self.diag.error(
                recv.span,
                "bind the Option to a variable before `.unwrap_or()`: it becomes `x if x is not None else default` in Python",
            );
            return Ty::Unknown;
        }
        let other = match arg_tys.first() {
            Some(Ty::Int(b)) => b.clone(),
            _ => Val::unknown(),
        };
        match (rt, n.as_str()) {
            (Ty::Int(v), "min" | "max" | "div_ceil" | "abs") => {
                let (a, b) = (v.as_const(), other.as_const());
                let result = match n.as_str() {
                    "min" => Ok(a.zip(b).map_or(Val::unknown(), |(a, b)| Val::konst(a.min(b)))),
                    "max" => Ok(a.zip(b).map_or(Val::unknown(), |(a, b)| Val::konst(a.max(b)))),
                    "div_ceil" => v.div_ceil(&other),
                    _ => v.abs(),
                };
                let show = |x: Option<i64>| x.map_or("?".into(), |x| x.to_string());
                let arg = if spec.args.is_empty() { String::new() } else { show(b) };
                Ty::Int(self.evaluated(result, e.span, || format!("({}).{n}({arg})", show(a))))
            }
            (Ty::Int(_), _) => Ty::Int(Val::unknown()),
            (Ty::Float, "sqrt" | "exp" | "ln") => {
                self.info.uses_math = true;
                Ty::Float
            }
            (Ty::Float, _) => Ty::Float,
            (_, "is_some" | "is_none") => Ty::Bool,
            (Ty::None, _) => arg_tys.first().cloned().unwrap_or(Ty::Unknown),
            (Ty::Option(i), _) => (**i).clone(),
            (Ty::Shape(Some(d)), _) => Ty::Int(Val::konst(d.len() as i64)),
            (Ty::List(items), _) => Ty::Int(Val::konst(items.len() as i64)),
            _ => Ty::Int(Val::unknown()),
        }
    }
}
