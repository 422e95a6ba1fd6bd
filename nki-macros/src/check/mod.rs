//! Check: type inference over the DSL tree, argument resolution against the
//! vocabulary, and the static hardware rules. Errors are accumulated; what the
//! emitters need (types, resolved calls, dependencies) is recorded in [`Info`].

pub mod dma_transpose;
mod limits;
mod methods;
pub mod rules;
mod stats;
mod types;
mod value;

pub use limits::{Generation, HwLimits};
pub use types::{TensorTy, Ty};
pub use value::{EvalError, Val};

use crate::ast::{Arg, BinOp, Block, CastTo, Cond, Expr, ExprKind, FmtPiece, Function, IndexItem, Pat, Space, Spn, Stmt, UnOp};
use crate::bounds::{MAX_ELEMENTS, MAX_NESTING};
use crate::diag::{Diagnostics, did_you_mean};
use crate::vocab::{self, Binding, Constant, FnSpec, Kind, OpClass, Param, Returns, Spaces};
use std::collections::HashMap;

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

/// How a call was resolved.
pub enum Resolved {
    /// A vocabulary function; `slots[i]` is the argument index bound to parameter `i`.
    Vocab { spec: &'static FnSpec, bind: &'static Binding, slots: Vec<Option<usize>> },
    /// A tensor method.
    Method { spec: &'static FnSpec, bind: &'static Binding, slots: Vec<Option<usize>> },
    /// Another `#[nki_kernel]` / `#[nki_helper]` function.
    User,
}

/// What the checker learned, for the emitters.
#[derive(Default)]
pub struct Info {
    types: HashMap<usize, Ty>,
    calls: HashMap<usize, Resolved>,
    /// Other kernel/helper functions this one calls (their Rust paths).
    pub deps: Vec<Vec<String>>,
    /// Whether the emitted Python needs `import math`.
    pub uses_math: bool,
}

fn key(e: &Expr) -> usize {
    e as *const Expr as usize
}

impl Info {
    /// The inferred type of an expression.
    pub fn ty(&self, e: &Expr) -> &Ty {
        self.types.get(&key(e)).unwrap_or(&Ty::Unknown)
    }

    /// The resolution of a call or method expression.
    pub fn call(&self, e: &Expr) -> Option<&Resolved> {
        self.calls.get(&key(e))
    }
}

struct Var {
    name: String,
    ty: Ty,
    mutable: bool,
}

struct Checker<'d> {
    diag: &'d mut Diagnostics,
    info: Info,
    scopes: Vec<Vec<Var>>,
    next_sym: u32,
    ret: Option<Ty>,
    target: Generation,
}

/// Checks a function; returns what the emitters need.
pub fn check(f: &Function, target: Generation, diag: &mut Diagnostics) -> Info {
    let mut c =
        Checker { diag, info: Info::default(), scopes: vec![Vec::new()], next_sym: 0, ret: f.ret.as_ref().map(Ty::from_ann), target };
    let mut seen_default = false;
    for p in &f.params {
        let declared = Ty::from_ann(&p.ty);
        let has_default = f.is_optional(p);
        if seen_default && !has_default {
            c.diag.error(
                p.name.span(),
                format!(
                    "`{}` has no default but follows a parameter with one; Python requires parameters with defaults to come last",
                    p.name
                ),
            );
        }
        seen_default |= has_default;
        if BUILDER_RESERVED.contains(&p.name.to_string().as_str()) {
            c.diag.error(p.name.span(), format!("`{}` is reserved for the generated launcher; choose another parameter name", p.name));
        }
        if let Some(d) = &p.default {
            let t = c.expr(d);
            // `Invalid` was reported by the parser (e.g. a float literal beyond f64).
            let literal = matches!(
                d.kind,
                ExprKind::Int(_)
                    | ExprKind::Float(_)
                    | ExprKind::Bool(_)
                    | ExprKind::Str(_)
                    | ExprKind::None
                    | ExprKind::Path(_)
                    | ExprKind::Invalid
            ) || matches!(&d.kind, ExprKind::Unary(UnOp::Neg, x) if matches!(x.kind, ExprKind::Int(_) | ExprKind::Float(_) | ExprKind::Invalid));
            if !literal {
                c.diag.error(
                    d.span,
                    "a parameter default must be a literal (a number, bool, string, None or an nl constant): it becomes the Python default",
                );
            } else if !t.fits(&declared) {
                c.diag.error(d.span, format!("default {} does not fit the parameter type", t.describe()));
            }
        }
        let ty = c.fresh(declared);
        c.declare(&p.name, ty, false, p.name.span());
    }
    let want = c.ret.clone();
    let tail = c.block(&f.body);
    match (&want, tail) {
        (Some(w), Some((t, span))) if !t.fits(w) => {
            c.diag.error(span, format!("this returns {} but the function declares {}", t.describe(), w.describe()))
        }
        (None, Some((t, span))) if !matches!(t, Ty::Unit | Ty::Unknown) => c
            .diag
            .error(span, format!("this function declares no return type but its body ends in {}; add `;` or a return type", t.describe())),
        _ => {}
    }
    c.info
}

impl Checker<'_> {
    /// Gives unknown integers a fresh symbol so affine facts about them survive.
    fn fresh(&mut self, t: Ty) -> Ty {
        match t {
            Ty::Int(v) if v.as_const().is_none() => {
                self.next_sym += 1;
                Ty::Int(Val::symbol(self.next_sym))
            }
            other => other,
        }
    }

    fn lookup(&self, name: &str) -> Option<&Var> {
        self.scopes.iter().rev().flat_map(|s| s.iter().rev()).find(|v| v.name == name)
    }

    fn declare(&mut self, name: &syn::Ident, ty: Ty, mutable: bool, span: proc_macro2::Span) {
        let n = name.to_string();
        if PYTHON_RESERVED.contains(&n.as_str()) {
            self.diag.error(
                span,
                format!("`{n}` is a Python keyword or a name the emitted kernel uses (range, min, nl, nisa, ...); choose another name"),
            );
        }
        let depth = self.scopes.len();
        let outer = self.scopes[..depth - 1].iter().any(|s| s.iter().any(|v| v.name == n));
        if outer {
            self.diag.error(
                span,
                format!("`{n}` shadows a variable of an enclosing block; Python has function scope, so the emitted kernel would overwrite the outer `{n}`: use a new name"),
            );
        }
        if let Some(scope) = self.scopes.last_mut() {
            scope.push(Var { name: n, ty, mutable });
        }
    }

    fn scoped<R>(&mut self, f: impl FnOnce(&mut Self) -> R) -> R {
        self.scopes.push(Vec::new());
        let r = f(self);
        self.scopes.pop();
        r
    }

    /// Checks a block; returns the tail's type and span.
    fn block(&mut self, b: &Block) -> Option<(Ty, Spn)> {
        for s in &b.stmts {
            self.stmt(s);
        }
        b.tail.as_ref().map(|t| (self.expr(t), t.span))
    }

    fn stmt(&mut self, s: &Stmt) {
        match s {
            Stmt::Let { pat, ty, init, .. } => {
                let mut t = self.expr(init);
                if let Some(ann) = ty {
                    let want = Ty::from_ann(ann);
                    if !t.fits(&want) {
                        self.diag.error(init.span, format!("expected {} but this is {}", want.describe(), t.describe()));
                    }
                    if t.is_unknown() {
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
            Stmt::For { var, iter, body, .. } => {
                for e in [Some(&iter.start), Some(&iter.stop), iter.step.as_ref()].into_iter().flatten() {
                    let t = self.expr(e);
                    if !t.is_int() && !t.is_unknown() {
                        self.diag.error(e.span, format!("loop bounds are integers, this is {}", t.describe()));
                    }
                }
                if let Some(step) = &iter.step
                    && let Some(v) = self.info.ty(step).const_int()
                    && v <= 0
                {
                    self.diag.error(step.span, format!("the step of a kernel loop must be positive, got {v}"));
                }
                self.scoped(|c| {
                    let t = c.fresh(Ty::Int(Val::unknown()));
                    c.bind(var, t);
                    if let Some((_, span)) = c.block(body) {
                        c.diag.error(span, "a loop body cannot end in a value");
                    }
                });
            }
            Stmt::If { branches, otherwise, .. } => {
                for (cond, body) in branches {
                    match cond {
                        Cond::Expr(e) => {
                            let t = self.expr(e);
                            if !matches!(t, Ty::Bool | Ty::Unknown | Ty::Opaque) {
                                self.diag.error(e.span, format!("an `if` condition must be a bool, this is {}", t.describe()));
                            }
                            self.scoped(|c| c.block(body));
                        }
                        Cond::LetSome(name, e) => {
                            let t = self.expr(e);
                            if !matches!(e.kind, ExprKind::Var(_)) {
                                self.diag.error(e.span, "write `if let Some(x) = variable`: bind the value to a variable first");
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
                                        s.push(Var { name: name.to_string(), ty: inner, mutable: false });
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
            Stmt::Assert { cond, msg, .. } => {
                let t = self.expr(cond);
                if !matches!(t, Ty::Bool | Ty::Unknown | Ty::Opaque) {
                    self.diag.error(cond.span, format!("an assert condition must be a bool, this is {}", t.describe()));
                }
                for p in msg.iter().flat_map(|m| &m.pieces) {
                    if let FmtPiece::Arg(e) = p {
                        self.expr(e);
                    }
                }
            }
            Stmt::Return(e, span) => {
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

    fn bind(&mut self, pat: &Pat, t: Ty) {
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

    fn undefined(&mut self, name: &syn::Ident) {
        let n = name.to_string();
        let names: Vec<String> = self.scopes.iter().flatten().map(|v| v.name.clone()).collect();
        let hint = did_you_mean(&n, names.iter().map(String::as_str)).map(|s| format!("; did you mean `{s}`?")).unwrap_or_default();
        self.diag.error(name.span(), format!("cannot find `{n}` in this kernel{hint}"));
    }

    fn record(&mut self, e: &Expr, t: Ty) -> Ty {
        self.info.types.insert(key(e), t.clone());
        t
    }

    fn expr(&mut self, e: &Expr) -> Ty {
        let t = self.expr_inner(e);
        self.record(e, t)
    }

    fn expr_inner(&mut self, e: &Expr) -> Ty {
        match &e.kind {
            ExprKind::Invalid => Ty::Unknown,
            ExprKind::Int(v) => Ty::Int(Val::konst(*v)),
            ExprKind::Float(_) => Ty::Float,
            ExprKind::Bool(_) => Ty::Bool,
            ExprKind::Str(_) => Ty::Str,
            ExprKind::None => Ty::None,
            ExprKind::Var(name) => match self.lookup(&name.to_string()) {
                Some(v) => v.ty.clone(),
                None => {
                    self.undefined(name);
                    Ty::Unknown
                }
            },
            ExprKind::Path(p) => self.constant(p, e.span),
            ExprKind::Unary(op, x) => {
                let t = self.expr(x);
                match (op, t) {
                    (UnOp::Neg, Ty::Int(v)) => {
                        let r = v.neg();
                        Ty::Int(self.evaluated(r, e.span, || format!("-({})", show(&v))))
                    }
                    (UnOp::Neg, Ty::Float) => Ty::Float,
                    (UnOp::Not, Ty::Bool) => Ty::Bool,
                    (_, t @ (Ty::Unknown | Ty::Opaque)) => t,
                    (op, t) => {
                        let what = if *op == UnOp::Neg { "negate" } else { "apply `!` to" };
                        self.diag.error(e.span, format!("cannot {what} {}", t.describe()));
                        Ty::Unknown
                    }
                }
            }
            ExprKind::Binary(op, a, b) => {
                let (ta, tb) = (self.expr(a), self.expr(b));
                self.binary(*op, &ta, &tb, e.span)
            }
            ExprKind::Call { path, path_span, args } => self.call(e, path, *path_span, args),
            ExprKind::Method { recv, name, args } => self.method(e, recv, name, args),
            ExprKind::Index { base, items } => self.index(base, items, e.span),
            ExprKind::Tuple(items) => {
                let t = Ty::Tuple(items.iter().map(|x| self.expr(x)).collect());
                self.bounded(t, e.span)
            }
            ExprKind::List(items) => {
                let t = Ty::List(items.iter().map(|x| self.expr(x)).collect());
                self.bounded(t, e.span)
            }
            ExprKind::Repeat(x, n) => {
                let t = self.expr(x);
                let nt = self.expr(n);
                match nt.const_int() {
                    Some(k) if k < 0 => {
                        self.diag.error(n.span, format!("the length of `[x; n]` cannot be negative, got {k}"));
                        Ty::Unknown
                    }
                    // The size is checked before the element types are repeated.
                    Some(k) => {
                        let elements = u128::from(k.unsigned_abs()) * (t.footprint().0 as u128 + 1);
                        if elements > MAX_ELEMENTS as u128 {
                            self.diag.error(
                                n.span,
                                format!("`[x; {k}]` holds {elements} elements; lists and tuples in kernels hold at most {MAX_ELEMENTS} (nested ones counted)"),
                            );
                            Ty::Unknown
                        } else {
                            self.bounded(Ty::List(vec![t; k as usize]), e.span)
                        }
                    }
                    // An invalid length was reported already.
                    None if nt.is_unknown() => Ty::Unknown,
                    None => {
                        self.diag.error(n.span, "the length of `[x; n]` must be a constant");
                        Ty::Unknown
                    }
                }
            }
            ExprKind::Cast(x, to) => {
                let t = self.expr(x);
                if !matches!(t, Ty::Int(_) | Ty::Float | Ty::Bool | Ty::Unknown | Ty::Opaque) {
                    self.diag.error(x.span, format!("cannot cast {} to a number", t.describe()));
                }
                match (to, t) {
                    (CastTo::Int, Ty::Int(v)) => Ty::Int(v),
                    (CastTo::Int, _) => Ty::Int(Val::unknown()),
                    (CastTo::Float, _) => Ty::Float,
                }
            }
            ExprKind::If(c, a, b) => {
                let tc = self.expr(c);
                if !matches!(tc, Ty::Bool | Ty::Unknown | Ty::Opaque) {
                    self.diag.error(c.span, format!("a condition must be a bool, this is {}", tc.describe()));
                }
                let (ta, tb) = (self.expr(a), self.expr(b));
                ta.join(&tb)
            }
            ExprKind::Some(x) => {
                let t = Ty::Option(Box::new(self.expr(x)));
                self.bounded(t, e.span)
            }
            ExprKind::Field(x, i) => match self.expr(x) {
                Ty::Tuple(items) | Ty::List(items) => match items.get(*i) {
                    Some(t) => t.clone(),
                    None => {
                        self.diag.error(e.span, format!("this tuple has {} elements, there is no `.{i}`", items.len()));
                        Ty::Unknown
                    }
                },
                t @ (Ty::Unknown | Ty::Opaque) => t,
                other => {
                    self.diag.error(e.span, format!("`.{i}` needs a tuple, this is {}", other.describe()));
                    Ty::Unknown
                }
            },
        }
    }

    fn constant(&mut self, p: &[String], span: Spn) -> Ty {
        match vocab::lookup_constant(p) {
            Some(Constant::Dtype(d)) => Ty::Dtype(Some(d)),
            Some(Constant::Buffer(b)) => Ty::Buffer(Some(b)),
            Some(Constant::Op(c, n)) => Ty::Op(c, Some(n)),
            Some(Constant::Int(v)) => Ty::Int(Val::konst(v)),
            Some(Constant::Float(_)) => Ty::Float,
            Some(Constant::Enum(e, _)) => Ty::Enum(e),
            None => {
                let joined = p.join("::");
                if vocab::lookup_function(p).is_some() {
                    self.diag.error(span, format!("`{joined}` is a function; call it with arguments"));
                } else {
                    let names = vocab::constant_names();
                    let hint = did_you_mean(&joined, names.iter().map(String::as_str))
                        .map(|s| format!("; did you mean `{s}`?"))
                        .unwrap_or_default();
                    self.diag.error(span, format!("`{joined}` is not part of the NKI vocabulary{hint}"));
                }
                Ty::Unknown
            }
        }
    }

    /// `t`, unless the value holds more than [`MAX_ELEMENTS`] elements or its type
    /// nests deeper than [`MAX_NESTING`] (through variables, `(a, a)` doubles
    /// with every statement), which is reported at `span`.
    fn bounded(&mut self, t: Ty, span: Spn) -> Ty {
        let (elements, depth) = t.footprint();
        if elements > MAX_ELEMENTS {
            self.diag.error(
                span,
                format!(
                    "this value holds {elements} elements; lists and tuples in kernels hold at most {MAX_ELEMENTS} (nested ones counted)"
                ),
            );
            return Ty::Unknown;
        }
        if depth > MAX_NESTING {
            self.diag
                .error(span, format!("this value nests lists, tuples and Options {depth} deep; kernels nest at most {MAX_NESTING} levels"));
            return Ty::Unknown;
        }
        t
    }

    /// The result of checked arithmetic on trace-time integers; an overflow or a
    /// division by zero is reported at `span`, with the operation `what` performed.
    fn evaluated(&mut self, result: Result<Val, EvalError>, span: Spn, what: impl FnOnce() -> String) -> Val {
        match result {
            Ok(v) => v,
            Err(EvalError::DivisionByZero) => {
                self.diag.error(span, "division by zero");
                Val::unknown()
            }
            Err(EvalError::Overflow) => {
                self.diag.error(
                    span,
                    format!("integer overflow: `{}` does not fit in an i64 (trace-time integers are i64 in the emulation)", what()),
                );
                Val::unknown()
            }
        }
    }

    fn arith(&mut self, op: BinOp, a: &Ty, b: &Ty, span: Spn) -> Ty {
        match (a, b) {
            (Ty::Unknown, _) | (_, Ty::Unknown) => Ty::Unknown,
            (Ty::Opaque, Ty::Float) | (Ty::Float, Ty::Opaque) => Ty::Float,
            (Ty::Opaque, _) | (_, Ty::Opaque) if matches!(op, BinOp::Div | BinOp::Rem) => {
                self.diag.error(
                    span,
                    "cannot tell whether this is integer division (Python `//`) or float division (`/`): give the other function's result a type, e.g. `let n: i64 = helper(...)`",
                );
                Ty::Unknown
            }
            (Ty::Opaque, _) | (_, Ty::Opaque) => Ty::Opaque,
            (Ty::Int(x), Ty::Int(y)) => {
                let r = match op {
                    BinOp::Add => x.add(y),
                    BinOp::Sub => x.sub(y),
                    BinOp::Mul => x.mul(y),
                    BinOp::Div => x.floordiv(y),
                    BinOp::Rem => x.floormod(y),
                    _ => Ok(Val::unknown()),
                };
                Ty::Int(self.evaluated(r, span, || format!("{} {} {}", show(x), op.symbol(), show(y))))
            }
            (Ty::Int(_) | Ty::Float, Ty::Int(_) | Ty::Float) => Ty::Float,
            (Ty::Tensor(_), _) | (_, Ty::Tensor(_)) => {
                self.diag.error(
                    span,
                    "tensors are not combined with operators in kernels: use an ISA op, e.g. nisa::tensor_tensor(dst, a, b, nl::add)",
                );
                Ty::Unknown
            }
            _ => {
                self.diag.error(span, format!("cannot apply arithmetic to {} and {}", a.describe(), b.describe()));
                Ty::Unknown
            }
        }
    }

    fn binary(&mut self, op: BinOp, a: &Ty, b: &Ty, span: Spn) -> Ty {
        if op.is_arith() {
            return self.arith(op, a, b, span);
        }
        if matches!(op, BinOp::And | BinOp::Or) {
            for t in [a, b] {
                if !matches!(t, Ty::Bool | Ty::Unknown | Ty::Opaque) {
                    self.diag.error(span, format!("`&&` and `||` take bools, not {}", t.describe()));
                }
            }
            return Ty::Bool;
        }
        let comparable = match (a, b) {
            (Ty::Unknown | Ty::Opaque, _) | (_, Ty::Unknown | Ty::Opaque) => true,
            (Ty::Int(_) | Ty::Float, Ty::Int(_) | Ty::Float) => true,
            (Ty::Tensor(_), _) | (_, Ty::Tensor(_)) => false,
            (x, y) => matches!(op, BinOp::Eq | BinOp::Ne) && std::mem::discriminant(x) == std::mem::discriminant(y),
        };
        if !comparable {
            self.diag.error(span, format!("cannot compare {} with {}", a.describe(), b.describe()));
        }
        Ty::Bool
    }

    fn call(&mut self, e: &Expr, path: &[String], path_span: Spn, args: &[Arg]) -> Ty {
        let arg_tys: Vec<Ty> = args.iter().map(|a| self.expr(&a.value)).collect();
        if path == ["Outputs"] {
            for (a, t) in args.iter().zip(&arg_tys) {
                if a.name.is_some() || !(t.is_tensor() || t.is_unknown()) {
                    self.diag.error(a.value.span, format!("Outputs(...) takes the returned tensors, this is {}", t.describe()));
                }
            }
            if args.is_empty() {
                self.diag.error(e.span, "Outputs(...) needs at least one tensor");
            }
            return Ty::Outputs;
        }
        if let Some(spec) = vocab::lookup_function(path) {
            let Some(bind) = spec.binding() else {
                self.diag.error(path_span, planned(&spec.official_name(), spec.summary));
                return Ty::Unknown;
            };
            let slots = self.resolve(spec.py, spec.params, args, e.span);
            let site = self.site(spec, &slots, args, &arg_tys);
            let ret = spec.rule.map(|r| rules::rule(r)(self.diag, &site));
            self.info.calls.insert(key(e), Resolved::Vocab { spec, bind, slots });
            return match bind.returns {
                Returns::Unit => Ty::Unit,
                Returns::Int => Ty::Int(Val::unknown()),
                Returns::Register => Ty::Register,
                Returns::ReplicaGroup => Ty::ReplicaGroup,
                Returns::Custom => ret.unwrap_or(Ty::Unknown),
            };
        }
        if matches!(path.first().map(String::as_str), Some("nl" | "nisa" | "ncc")) {
            let module = &path[0];
            let joined = path.join("::");
            let names = vocab::names_in(module);
            let hint = path
                .last()
                .and_then(|last| did_you_mean(last, names.iter().copied()))
                .map(|s| format!("; did you mean `{module}::{s}`?"))
                .unwrap_or_default();
            self.diag.error(path_span, format!("`{joined}` is not part of the NKI vocabulary nki-rs supports{hint}"));
            return Ty::Unknown;
        }
        self.info.calls.insert(key(e), Resolved::User);
        if !self.info.deps.iter().any(|d| d == path) {
            self.info.deps.push(path.to_vec());
        }
        Ty::Opaque
    }

    /// Binds arguments to parameters (positional first, then keywords), reporting
    /// unknown, duplicate, extra and missing arguments.
    fn resolve(&mut self, what: &str, params: &[Param], args: &[Arg], span: Spn) -> Vec<Option<usize>> {
        let mut slots: Vec<Option<usize>> = vec![None; params.len()];
        let mut positional = 0;
        for (i, a) in args.iter().enumerate() {
            match &a.name {
                None => {
                    if positional >= params.len() {
                        self.diag.error(a.value.span, format!("{what} takes at most {} arguments", params.len()));
                    } else {
                        slots[positional] = Some(i);
                    }
                    positional += 1;
                }
                Some(n) => {
                    let name = n.to_string();
                    match params.iter().position(|p| p.name == name) {
                        Some(pi) if slots[pi].is_some() => self.diag.error(n.span(), format!("`{name}` is given twice to {what}")),
                        Some(pi) => slots[pi] = Some(i),
                        None => {
                            let hint = did_you_mean(&name, params.iter().map(|p| p.name))
                                .map(|s| format!("; did you mean `{s}`?"))
                                .unwrap_or_default();
                            let all: Vec<&str> = params.iter().map(|p| p.name).collect();
                            self.diag
                                .error(n.span(), format!("{what} has no parameter `{name}`{hint} (its parameters are {})", all.join(", ")));
                        }
                    }
                }
            }
        }
        for (p, s) in params.iter().zip(&slots) {
            if p.required && s.is_none() {
                self.diag.error(span, format!("{what} is missing its argument `{}`", p.name));
            }
        }
        slots
    }

    fn site<'a>(&mut self, spec: &'static FnSpec, slots: &[Option<usize>], args: &'a [Arg], tys: &[Ty]) -> CallSite<'a> {
        let mut out = Vec::with_capacity(slots.len());
        for (p, s) in spec.params.iter().zip(slots) {
            out.push(s.map(|i| {
                self.kind(spec.py, p, &tys[i], &args[i].value);
                ArgInfo { ty: tys[i].clone(), expr: &args[i].value }
            }));
        }
        CallSite { spec, args: out, hw: self.target.limits(), target: self.target }
    }

    /// Checks that an argument's type suits its parameter kind.
    fn kind(&mut self, what: &str, p: &Param, t: &Ty, e: &Expr) {
        if t.is_unknown() {
            return;
        }
        let name = p.name;
        let expect = |d: &mut Diagnostics, want: &str| {
            d.error(e.span, format!("`{name}` of {what} must be {want}, but this is {}", t.describe()));
        };
        match (p.kind, t) {
            (Kind::Tensor(spaces), Ty::Tensor(tt)) => {
                if let Some(space) = tt.space
                    && let Some(why) = space_violation(spaces, space)
                {
                    self.diag.error(e.span, format!("`{name}` of {what} {why}, but this is {} tensor", space.with_article()));
                }
            }
            (Kind::Tensor(_), _) => expect(self.diag, "a tensor"),
            (Kind::Operand, Ty::Int(_) | Ty::Float | Ty::Tensor(_)) => {}
            (Kind::Operand, _) => expect(self.diag, "a number or a (P, 1) tensor"),
            (Kind::Op(class), Ty::Op(c, n)) => {
                let ok = match class {
                    OpClass::Any => true,
                    OpClass::Alu => *c == OpClass::Alu,
                    OpClass::Act => *c == OpClass::Act,
                };
                if !ok {
                    let want = if class == OpClass::Act {
                        "an activation function such as nl::exp or nl::copy"
                    } else {
                        "an ALU op such as nl::add or nl::maximum"
                    };
                    self.diag.error(e.span, format!("`{name}` of {what} must be {want}, but nl::{} is not", n.unwrap_or("?")));
                }
            }
            (Kind::Op(_), _) => expect(self.diag, "an operator token such as nl::add or nl::exp"),
            (Kind::Int, Ty::Int(_)) | (Kind::Float, Ty::Int(_) | Ty::Float) | (Kind::Bool, Ty::Bool) => {}
            (Kind::Int, _) => expect(self.diag, "an integer"),
            (Kind::Float, _) => expect(self.diag, "a number"),
            (Kind::Bool, _) => expect(self.diag, "a bool"),
            (Kind::OptBool, Ty::Bool | Ty::None) => {}
            (Kind::OptBool, Ty::Option(i)) if matches!(**i, Ty::Bool | Ty::Unknown | Ty::Opaque) => {}
            (Kind::OptBool, _) => expect(self.diag, "a bool or None"),
            (Kind::Dtype, Ty::Dtype(_)) | (Kind::Buffer, Ty::Buffer(_)) | (Kind::Str, Ty::Str) => {}
            (Kind::Dtype, _) => expect(self.diag, "a dtype such as nl::float32"),
            (Kind::Buffer, _) => expect(self.diag, "a buffer such as nl::sbuf"),
            (Kind::Str, _) => expect(self.diag, "a string"),
            (Kind::Enum(en), Ty::Enum(got)) if en == *got => {}
            (Kind::Enum(en), _) => expect(self.diag, &format!("a nisa::{en} member")),
            (Kind::Pattern, Ty::List(items) | Ty::Tuple(items)) => {
                let pair = |t: &Ty| match t {
                    Ty::List(x) | Ty::Tuple(x) => x.len() == 2 && x.iter().all(|v| v.is_int() || v.is_unknown()),
                    Ty::Unknown => true,
                    _ => false,
                };
                if items.is_empty() || !items.iter().all(pair) {
                    expect(self.diag, "an access pattern [[step, count], ...]");
                }
            }
            (Kind::Pattern, _) => expect(self.diag, "an access pattern [[step, count], ...]"),
            (Kind::Ints, Ty::Shape(_)) => {}
            (Kind::Ints, Ty::List(items) | Ty::Tuple(items)) if items.iter().all(|v| v.is_int() || v.is_unknown()) => {}
            (Kind::Ints, _) => expect(self.diag, "a list of integers"),
            (Kind::Axis, Ty::Int(_)) => {}
            (Kind::Axis, Ty::List(items) | Ty::Tuple(items)) if items.iter().all(|v| v.is_int() || v.is_unknown()) => {}
            (Kind::Axis, _) => expect(self.diag, "an axis or a tuple of axes"),
            (Kind::Pair, Ty::Tuple(items) | Ty::List(items)) if items.len() == 2 && items.iter().all(|v| v.is_int() || v.is_unknown()) => {}
            (Kind::Pair, _) => expect(self.diag, "a pair of integers"),
            (Kind::RegisterSource, Ty::Register | Ty::Int(_)) => {}
            (Kind::RegisterSource, _) => expect(self.diag, "a register or an integer"),
            (Kind::DynamicOffset, Ty::Register | Ty::Tensor(_)) => {}
            (Kind::DynamicOffset, _) => expect(self.diag, "a register or a one-element SBUF tensor"),
            (Kind::Register, Ty::Register) | (Kind::ReplicaGroup, Ty::ReplicaGroup) => {}
            (Kind::Register, _) => expect(self.diag, "a register"),
            (Kind::ReplicaGroup, _) => expect(self.diag, "a replica group (ncc::ReplicaGroup(...))"),
            (Kind::Groups, t) if t.fits(&Ty::Groups) => {}
            (Kind::Groups, _) => expect(self.diag, "replica group rings such as [[0, 1, 2, 3]]"),
            (Kind::TensorLists, Ty::List(chs) | Ty::Tuple(chs))
                if chs.iter().all(|c| matches!(c, Ty::List(ts) | Ty::Tuple(ts) if ts.iter().all(|t| t.is_tensor() || t.is_unknown()))) => {}
            (Kind::TensorLists, _) => expect(self.diag, "one list of tensors per channel, e.g. [[buf]]"),
            (Kind::Tensors, Ty::List(ts) | Ty::Tuple(ts)) if ts.iter().all(|t| t.is_tensor() || t.is_unknown()) => {}
            (Kind::Tensors, _) => expect(self.diag, "a list of tensors"),
            (Kind::Callable | Kind::Planned, _) => {
                self.diag.error(e.span, format!("`{name}` of {what} is part of NKI 2.32, but nki-rs does not support it yet"));
            }
        }
    }

    fn index(&mut self, base: &Expr, items: &[IndexItem], span: Spn) -> Ty {
        let bt = self.expr(base);
        let mut item_tys: Vec<rules::IndexTy> = Vec::new();
        for it in items {
            let t = match it {
                IndexItem::At(x) => rules::IndexTy::At(self.int_of(x), x.span),
                IndexItem::Range { start, stop, step, span } => {
                    let s = start.as_ref().map(|x| self.int_of(x));
                    let e = stop.as_ref().map(|x| self.int_of(x));
                    let st = step.as_ref().map(|x| self.int_of(x));
                    rules::IndexTy::Range(s, e, st, *span)
                }
                IndexItem::Ds { start, size, span } => {
                    let s = self.int_of(start);
                    let n = self.int_of(size);
                    let end = s.add(&n);
                    let end = self.evaluated(end, *span, || format!("{} + {}", show(&s), show(&n)));
                    rules::IndexTy::Range(Some(s), Some(end), None, *span)
                }
            };
            item_tys.push(t);
        }
        match bt {
            Ty::Tensor(tt) => rules::index_tensor(self.diag, &tt, &item_tys, span),
            // One ring of a replica group: a list of rank ids, typed like a shape.
            Ty::Groups if items.len() == 1 && matches!(items[0], IndexItem::At(_)) => Ty::Shape(None),
            Ty::Shape(_) | Ty::Tuple(_) | Ty::List(_) if items.len() == 1 && matches!(items[0], IndexItem::At(_)) => {
                let rules::IndexTy::At(v, s) = &item_tys[0] else {
                    return Ty::Unknown;
                };
                match (&bt, v.as_const()) {
                    (Ty::Shape(Some(d)), Some(i)) => {
                        let idx = if i < 0 { i + d.len() as i64 } else { i };
                        match d.get(idx as usize).filter(|_| idx >= 0) {
                            Some(v) => Ty::Int(v.clone()),
                            None => {
                                self.diag.error(*s, format!("index {i} is out of range for a shape of rank {}", d.len()));
                                Ty::Unknown
                            }
                        }
                    }
                    (Ty::Shape(_), _) => Ty::Int(Val::unknown()),
                    (Ty::Tuple(ts) | Ty::List(ts), Some(i)) => ts.get(i as usize).cloned().unwrap_or(Ty::Unknown),
                    _ => Ty::Unknown,
                }
            }
            t @ (Ty::Unknown | Ty::Opaque) => t,
            Ty::Shape(_) => {
                self.diag.error(span, "a shape is indexed with one integer: `t.shape()[0]`");
                Ty::Unknown
            }
            other => {
                self.diag.error(base.span, format!("cannot index {}", other.describe()));
                Ty::Unknown
            }
        }
    }

    fn int_of(&mut self, e: &Expr) -> Val {
        match self.expr(e) {
            Ty::Int(v) => v,
            Ty::Unknown => Val::unknown(),
            other => {
                self.diag.error(e.span, format!("indices are integers, this is {}", other.describe()));
                Val::unknown()
            }
        }
    }
}

/// A trace-time integer for messages: its value, or `?`.
/// The message for a call of an official op nki-rs does not implement yet.
fn planned(official: &str, summary: &str) -> String {
    format!("`{official}` ({summary}) is part of NKI 2.32, but nki-rs does not implement it yet; `nki ops` lists what kernels can call")
}

fn show(v: &Val) -> String {
    v.as_const().map_or("?".into(), |c| c.to_string())
}

/// Names that would break or shadow something in the emitted Python.
const PYTHON_RESERVED: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del", "elif", "else", "except",
    "finally", "for", "from", "global", "if", "import", "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try",
    "while", "with", "yield", "range", "min", "max", "len", "abs", "int", "float", "math", "nki", "nl", "nisa", "ncc",
];

/// Parameter names the generated `Call` builder uses for itself.
const BUILDER_RESERVED: &[&str] = &["new", "run", "launch"];

/// Mutable variables change, so their value is not known statically.
fn forget_value(t: Ty) -> Ty {
    match t {
        Ty::Int(_) => Ty::Int(Val::unknown()),
        Ty::Tensor(tt) => Ty::Tensor(TensorTy { shape: None, ..tt }),
        other => other,
    }
}

/// Why a tensor in `space` cannot be passed where `spaces` are accepted.
fn space_violation(spaces: Spaces, space: Space) -> Option<&'static str> {
    match (spaces, space) {
        (Spaces::Any, _) => None,
        (Spaces::OnChip, Space::Hbm) => {
            Some("must be in SBUF or PSUM (compute engines cannot access HBM: load it into an SBUF tile with nisa::dma_copy)")
        }
        (Spaces::Sbuf, Space::Sbuf) | (Spaces::Psum, Space::Psum) | (Spaces::SharedHbm, Space::Hbm) => None,
        (Spaces::Sbuf, _) => Some("must be in SBUF"),
        (Spaces::Psum, _) => Some("must be in PSUM (the Tensor Engine writes its results only to PSUM)"),
        (Spaces::SharedHbm, _) => Some("must be a shared_hbm tensor"),
        (Spaces::Dma, Space::Psum) => Some(
            "cannot be in PSUM: DMA cannot access PSUM, so move PSUM data to SBUF with nisa::tensor_copy first (and DMA the SBUF tile)",
        ),
        _ => None,
    }
}
