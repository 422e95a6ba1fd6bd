//! Statements and blocks: bindings, patterns, loops, conditionals, assertions.

use super::*;

impl Checker<'_> {
    /// Checks a block; returns the tail's type and span.
    pub(super) fn block(&mut self, b: &Block) -> Option<(Ty, Spn)> {
        for s in &b.stmts {
            self.stmt(s);
        }
        b.tail.as_ref().map(|t| (self.expr(t), t.span))
    }

    pub(super) fn stmt(&mut self, s: &Stmt) {
        match s {
            Stmt::Let { pat, ty, init, .. } => {
                let mut t = self.expr(init);
                if let Some(ann) = ty {
                    let want = Ty::from_ann(ann);
                    if !t.fits(&want) {
                        self.diag.error(init.span, format!("expected {} but this is {}", want.describe(), t.describe()));
                    }
                    // `let x: Option<T> = None` declares the Option it will hold.
                    if t.is_unknown() || matches!(t, Ty::None) {
                        t = want;
                    }
                }
                self.bind(pat, t);
            }
            Stmt::Assign { name, op, value, .. } => {
                let vt = self.expr(value);
                let Some(var) = self.lookup(&name.to_string()) else {
                    self.undefined(name);
                    return;
                };
                let (mutable, cur) = (var.mutable, var.ty.clone());
                self.outer_assignment(name);
                if !mutable {
                    self.diag.error(name.span(), format!("cannot assign twice to `{name}`; declare it with `let mut {name}`"));
                }
                let result = match op {
                    Some(o) => self.arith(*o, &cur, &vt, value.span),
                    None => vt,
                };
                if !result.fits(&cur) {
                    self.diag.error(value.span, format!("`{name}` holds {} but this assigns {}", cur.describe(), result.describe()));
                }
            }
            Stmt::Expr(e) => {
                self.expr(e);
            }
            Stmt::For { var, iter, body, .. } => self.for_loop(var, iter, body),
            Stmt::If { branches, otherwise, .. } => {
                for (cond, body) in branches {
                    match cond {
                        Cond::Expr(e) => {
                            let t = self.expr(e);
                            self.condition(&t, e.span, "an `if` condition");
                            self.scoped(|c| c.block(body));
                        }
                        Cond::LetSome(name, e) => {
                            let t = self.expr(e);
                            // Python tests the value, then binds it: a name or a
                            // bundle's field path reads the same value twice.
                            if !is_path(e) {
                                self.diag.error(
                                    e.span,
                                    "write `if let Some(x) = variable` (or a bundle's field, `cfg.bias`): bind the value to a variable first",
                                );
                            }
                            let inner = match t {
                                Ty::Option(i) => *i,
                                t @ (Ty::Unknown | Ty::Opaque) => t,
                                other => {
                                    self.diag.error(e.span, format!("`if let Some(..)` needs an Option, this is {}", other.describe()));
                                    Ty::Unknown
                                }
                            };
                            let same_name = matches!(&e.kind, ExprKind::Var(v) if v == name);
                            self.scoped(|c| {
                                if same_name {
                                    if let Some(s) = c.scopes.last_mut() {
                                        s.push(Var { name: name.to_string(), ty: inner, mutable: false, frozen: false });
                                    }
                                } else {
                                    c.declare(name, inner, false, name.span());
                                }
                                c.block(body)
                            });
                        }
                    }
                }
                if let Some(b) = otherwise {
                    self.scoped(|c| c.block(b));
                }
            }
            Stmt::Region(r) => self.region(r),
            Stmt::Assert { cond, msg, .. } => {
                let t = self.expr(cond);
                self.condition(&t, cond.span, "an assert condition");
                for p in msg.iter().flat_map(|m| &m.pieces) {
                    if let FmtPiece::Arg(e) = p
                        && matches!(self.expr(e), Ty::Register)
                    {
                        self.diag.error(e.span, registers::TRACE_TIME);
                    }
                    if let FmtPiece::Const(name) = p {
                        self.const_message(name);
                    }
                    if let FmtPiece::Shared(path) = p {
                        self.shared_message(path);
                    }
                }
            }
            Stmt::Jump(jump, span) => {
                let kw = jump.keyword();
                match self.loop_body {
                    None => self.diag.error(*span, format!("`{kw}` belongs in the body of a `for` loop")),
                    Some(None) => {}
                    Some(Some("no_reorder")) => self.diag.error(
                        *span,
                        format!("`{kw}` cannot leave the body of nl::no_reorder: put the region inside an `if` in the loop's body instead"),
                    ),
                    Some(Some(name)) => self.diag.error(
                        *span,
                        format!(
                            "`{kw}` cannot leave the body of nl::{name}: it {}, and NKI has no `{kw}` on the device; put the rest of the body under an `if`",
                            regions::device_body_why(name)
                        ),
                    ),
                }
            }
            Stmt::Return(e, span) => {
                if let Some((name, _)) = self.device_body {
                    self.diag.error(*span, format!("`return` cannot leave the body of nl::{name}: it {}", regions::device_body_why(name)));
                }
                let t = e.as_ref().map_or(Ty::Unit, |e| self.expr(e));
                match &self.ret {
                    Some(want) if !t.fits(want) => {
                        self.diag.error(*span, format!("this returns {} but the function declares {}", t.describe(), want.describe()))
                    }
                    None if !matches!(t, Ty::Unit | Ty::Unknown) => self.diag.error(*span, "this function declares no return type"),
                    _ => {}
                }
            }
        }
    }

    pub(super) fn bind(&mut self, pat: &Pat, t: Ty) {
        match pat {
            Pat::Ident(name, mutable) => {
                let t = if *mutable { forget_value(t) } else { t };
                let t = self.fresh(t);
                self.declare(name, t, *mutable, name.span());
            }
            Pat::Wild => {}
            Pat::Tuple(items, span) | Pat::Slice(items, span) => {
                let parts: Vec<Ty> = match t {
                    Ty::Tuple(ts) | Ty::List(ts) => ts,
                    Ty::Shape(Some(dims)) => dims.into_iter().map(Ty::Int).collect(),
                    Ty::Shape(None) => vec![Ty::Int(Val::unknown()); items.len()],
                    Ty::Unknown => vec![Ty::Unknown; items.len()],
                    Ty::Opaque => vec![Ty::Opaque; items.len()],
                    other => {
                        self.diag.error(*span, format!("cannot destructure {}", other.describe()));
                        vec![Ty::Unknown; items.len()]
                    }
                };
                if parts.len() != items.len() {
                    self.diag.error(*span, format!("this pattern binds {} values but the value has {}", items.len(), parts.len()));
                }
                for (p, t) in items.iter().zip(parts.into_iter().chain(std::iter::repeat(Ty::Unknown))) {
                    self.bind(p, t);
                }
            }
        }
    }

    pub(super) fn undefined(&mut self, name: &syn::Ident) {
        let n = name.to_string();
        let names: Vec<String> = self.scopes.iter().flatten().map(|v| v.name.clone()).collect();
        let hint = did_you_mean(&n, names.iter().map(String::as_str)).map(|s| format!("; did you mean `{s}`?")).unwrap_or_default();
        self.diag.error(name.span(), format!("cannot find `{n}` in this kernel{hint}"));
    }
}

/// A variable or a field path of one (`io.ring.bias`): an expression Python may
/// evaluate twice for the same value.
fn is_path(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Var(_) => true,
        ExprKind::Attr(base, _) => is_path(base),
        _ => false,
    }
}
