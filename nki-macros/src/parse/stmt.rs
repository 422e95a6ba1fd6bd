//! syn statements → DSL statements.

use super::expr::{assign_op, parse_args, parse_expr, parse_range, unsupported_message};
use super::parser::Parser;
use super::pat::parse_pat;
use super::span::{block_span, expr_span};
use super::types::parse_type;
use crate::ast::{Arg, BinOp, Block, Cond, Expr, ExprKind, FmtPiece, FmtString, Jump, Region, RegionForm, Spn, Stmt};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;

/// Parses a block; its last expression without `;` becomes the tail value. A
/// block nested past the bound is reported and parsed as empty.
pub fn parse_block(block: &syn::Block, cx: &mut Parser<'_>) -> Block {
    cx.nested(block_span(block), |cx| parse_stmts(block, cx)).unwrap_or(Block { stmts: Vec::new(), tail: None })
}

fn parse_stmts(block: &syn::Block, cx: &mut Parser<'_>) -> Block {
    let mut out = Block { stmts: Vec::new(), tail: None };
    let n = block.stmts.len();
    for (i, s) in block.stmts.iter().enumerate() {
        cx.start_statement();
        match s {
            syn::Stmt::Expr(e, None) if i + 1 == n && (is_value(e) || is_value_if(e)) => out.tail = Some(parse_expr(e, cx)),
            _ => parse_stmt(s, &mut out.stmts, cx),
        }
    }
    out
}

/// Whether a trailing expression is a value rather than a statement-like expression.
fn is_value(e: &syn::Expr) -> bool {
    !matches!(
        e,
        syn::Expr::ForLoop(_)
            | syn::Expr::If(_)
            | syn::Expr::Match(_)
            | syn::Expr::While(_)
            | syn::Expr::Loop(_)
            | syn::Expr::Block(_)
            | syn::Expr::Macro(_)
            | syn::Expr::Break(_)
            | syn::Expr::Continue(_)
    ) && region_form(e).is_none()
}

/// Whether a block's trailing `if` is its value rather than a statement: it has
/// an `else` and its first branch ends in a value (`if c { a } else { b }` as a
/// helper's result, Python's `a if c else b`). An `if` whose branches end in `;`
/// stays a statement.
fn is_value_if(e: &syn::Expr) -> bool {
    let syn::Expr::If(i) = e else { return false };
    i.else_branch.is_some() && matches!(i.then_branch.stmts.last(), Some(syn::Stmt::Expr(x, None)) if is_value(x) || is_value_if(x))
}

/// The form of `nl::fori_loop(..)` / `nl::while_loop(..)` / `nl::no_reorder(..)`.
fn region_form(e: &syn::Expr) -> Option<RegionForm> {
    let syn::Expr::Call(c) = e else { return None };
    let syn::Expr::Path(p) = &*c.func else { return None };
    let segs: Vec<String> = p.path.segments.iter().map(|s| s.ident.to_string()).collect();
    RegionForm::of(&segs)
}

/// `nl::fori_loop(lower, upper, |i| { .. }, step)`, `nl::while_loop(init, |r| { ..; r })`,
/// `nl::no_reorder(|| { .. })`: the closure is the body; the other arguments are
/// ordinary call arguments, bound to the official parameters by the checker.
fn parse_region(c: &syn::ExprCall, form: RegionForm, span: Spn, cx: &mut Parser<'_>) -> Option<Region> {
    let path_span = expr_span(&c.func);
    let name = form.name();
    let mut closure = None;
    let mut rest = Punctuated::<syn::Expr, syn::Token![,]>::new();
    let mut slot = None;
    for a in &c.args {
        let (kw, value) = match a {
            syn::Expr::Assign(asg) => match &*asg.left {
                syn::Expr::Path(p) if p.path.get_ident().is_some() => (p.path.get_ident().cloned(), &*asg.right),
                _ => (None, a),
            },
            _ => (None, a),
        };
        match value {
            syn::Expr::Closure(cl) if closure.is_none() => {
                closure = Some(cl);
                slot = Some((rest.len(), kw));
            }
            _ => rest.push(a.clone()),
        }
    }
    let mut args = parse_args(&rest, cx);
    let Some(cl) = closure else {
        let how = match form {
            RegionForm::Fori => "nl::fori_loop(lower, upper, |i| { .. })",
            RegionForm::While => "nl::while_loop(init, |r| { ..; r })",
            RegionForm::NoReorder => "nl::no_reorder(|| { .. })",
        };
        cx.error(span, format!("the body of nl::{name} is written as a closure: `{how}`"));
        return None;
    };
    if let Some((at, kw)) = slot {
        args.insert(at, Arg { name: kw, value: Expr { kind: ExprKind::Invalid, span: expr_span(&syn::Expr::Closure(cl.clone())) } });
    }
    if form == RegionForm::NoReorder {
        // The closure is how Rust writes Python's `with` block, not an argument.
        args.retain(|a| !matches!(a.value.kind, ExprKind::Invalid));
    }
    if cl.asyncness.is_some() || cl.movability.is_some() || cl.capture.is_some() || cl.constness.is_some() || cl.lifetimes.is_some() {
        cx.error(cl.or1_token.span, "the body closure takes no modifiers (`move`, `async`, ...)");
    }
    if !matches!(cl.output, syn::ReturnType::Default) {
        cx.error(cl.output.span(), "the body closure's type is implied; remove the return type");
    }
    let want = usize::from(form != RegionForm::NoReorder);
    if cl.inputs.len() != want {
        let what = match form {
            RegionForm::Fori => "one parameter, the loop's index register (`|i|`)",
            RegionForm::While => "one parameter, the condition register (`|r|`)",
            RegionForm::NoReorder => "no parameters (`|| { .. }`)",
        };
        cx.error(cl.inputs.span(), format!("the body of nl::{name} takes {what}"));
    }
    let var = cl.inputs.first().map(|p| parse_pat(p, cx));
    let body = match &*cl.body {
        syn::Expr::Block(b) if b.label.is_none() => parse_block(&b.block, cx),
        other => Block { stmts: Vec::new(), tail: Some(parse_expr(other, cx)) },
    };
    Some(Region { form, args, var, body, path_span, span })
}

fn parse_stmt(s: &syn::Stmt, out: &mut Vec<Stmt>, cx: &mut Parser<'_>) {
    match s {
        syn::Stmt::Local(l) => {
            let span = Spn { start: l.let_token.span, end: l.semi_token.span };
            if let Some(init) = &l.init
                && init.diverge.is_some()
            {
                cx.error(span, "`let ... else` is not supported in kernels");
                return;
            }
            let (pat, ty) = match &l.pat {
                syn::Pat::Type(t) => (parse_pat(&t.pat, cx), parse_type(&t.ty, cx)),
                p => (parse_pat(p, cx), None),
            };
            let Some(init) = &l.init else {
                cx.error(span, "a `let` in a kernel needs a value: NKI tensors are created with nl::ndarray(...)");
                return;
            };
            out.push(Stmt::Let { pat, ty, init: parse_expr(&init.expr, cx), span });
        }
        syn::Stmt::Item(item) => {
            cx.error(item.span(), "items cannot be declared inside a kernel; define helper functions outside it with #[nki_helper]");
        }
        syn::Stmt::Macro(m) => parse_macro_stmt(&m.mac, out, cx),
        syn::Stmt::Expr(e, _) => parse_expr_stmt(e, out, cx),
    }
}

fn parse_expr_stmt(e: &syn::Expr, out: &mut Vec<Stmt>, cx: &mut Parser<'_>) {
    let span = expr_span(e);
    match e {
        syn::Expr::ForLoop(f) => {
            if f.label.is_some() {
                cx.error(f.label.span(), "loop labels are not supported in kernels");
            }
            let var = parse_pat(&f.pat, cx);
            let Some(iter) = parse_range(&f.expr, cx) else { return };
            let body = parse_block(&f.body, cx);
            if let Some(t) = &body.tail {
                cx.error(t.span, "a loop body cannot end in a value; add `;`");
            }
            out.push(Stmt::For { var, iter: Box::new(iter), body, span });
        }
        syn::Expr::If(_) => {
            if let Some(s) = parse_if(e, cx) {
                out.push(s);
            }
        }
        syn::Expr::Match(m) => {
            if let Some(s) = parse_match(m, span, cx) {
                out.push(s);
            }
        }
        syn::Expr::Block(b) => {
            if b.label.is_some() {
                cx.error(span, "block labels are not supported in kernels");
            }
            // A nested block's statements run in order in the emitted Python; scoping is
            // checked by the type checker.
            let inner = parse_block(&b.block, cx);
            out.extend(inner.stmts);
            if let Some(t) = inner.tail {
                out.push(Stmt::Expr(t));
            }
        }
        syn::Expr::Assign(a) => match &*a.left {
            syn::Expr::Path(p) if p.path.get_ident().is_some() => {
                out.push(Stmt::Assign { name: p.path.segments[0].ident.clone(), op: None, value: parse_expr(&a.right, cx), span })
            }
            other => {
                cx.error(other.span(), "only plain variables can be assigned in kernels; tensors are written by ops through their `dst`")
            }
        },
        syn::Expr::Binary(b) if assign_op(&b.op).is_some() => match &*b.left {
            syn::Expr::Path(p) if p.path.get_ident().is_some() => out.push(Stmt::Assign {
                name: p.path.segments[0].ident.clone(),
                op: assign_op(&b.op),
                value: parse_expr(&b.right, cx),
                span,
            }),
            other => cx.error(other.span(), "only plain variables can be assigned in kernels"),
        },
        syn::Expr::Continue(c) => {
            if let Some(l) = &c.label {
                cx.error(l.span(), "loop labels are not supported in kernels");
            }
            out.push(Stmt::Jump(Jump::Continue, span));
        }
        syn::Expr::Break(b) => {
            if let Some(l) = &b.label {
                cx.error(l.span(), "loop labels are not supported in kernels");
            }
            if let Some(v) = &b.expr {
                cx.error(v.span(), "`break` in a kernel's `for` loop carries no value");
            }
            out.push(Stmt::Jump(Jump::Break, span));
        }
        syn::Expr::Return(r) => out.push(Stmt::Return(r.expr.as_deref().map(|x| parse_expr(x, cx)), span)),
        syn::Expr::Macro(m) => parse_macro_stmt(&m.mac, out, cx),
        syn::Expr::Call(c) if region_form(e).is_some() => {
            if let Some(form) = region_form(e)
                && let Some(r) = parse_region(c, form, span, cx)
            {
                out.push(Stmt::Region(Box::new(r)));
            }
        }
        syn::Expr::While(_) | syn::Expr::Loop(_) | syn::Expr::Closure(_) | syn::Expr::Unsafe(_) => cx.error(span, unsupported_message(e)),
        other => out.push(Stmt::Expr(parse_expr(other, cx))),
    }
}

fn parse_if(e: &syn::Expr, cx: &mut Parser<'_>) -> Option<Stmt> {
    let span = expr_span(e);
    let mut branches = Vec::new();
    let mut cur = e;
    loop {
        let syn::Expr::If(i) = cur else {
            cx.error(cur.span(), "expected an `if`");
            return None;
        };
        let cond = match &*i.cond {
            syn::Expr::Let(l) => match &*l.pat {
                syn::Pat::TupleStruct(ts) if ts.path.is_ident("Some") && ts.elems.len() == 1 => match &ts.elems[0] {
                    syn::Pat::Ident(id) => Cond::LetSome(id.ident.clone(), parse_expr(&l.expr, cx)),
                    other => {
                        cx.error(other.span(), "write `if let Some(name) = value`");
                        return None;
                    }
                },
                other => {
                    cx.error(other.span(), "only `if let Some(name) = value` is supported in kernels");
                    return None;
                }
            },
            c => Cond::Expr(parse_expr(c, cx)),
        };
        let body = parse_block(&i.then_branch, cx);
        if let Some(t) = &body.tail {
            cx.error(
                t.span,
                "an `if` statement's branch cannot end in a value; add `;` (or use `if` as a value with single-expression branches)",
            );
        }
        branches.push((cond, body));
        match &i.else_branch {
            None => {
                return Some(Stmt::If { branches, otherwise: None, span });
            }
            Some((_, els)) => match &**els {
                syn::Expr::If(_) => cur = els,
                syn::Expr::Block(b) => {
                    let body = parse_block(&b.block, cx);
                    if let Some(t) = &body.tail {
                        cx.error(t.span, "an `else` branch cannot end in a value; add `;`");
                    }
                    return Some(Stmt::If { branches, otherwise: Some(body), span });
                }
                other => {
                    cx.error(other.span(), "unsupported `else` branch");
                    return None;
                }
            },
        }
    }
}

/// `match v { E::A => { .. } E::B | E::C => { .. } _ => { .. } }` on a variable
/// holding an `#[nki_enum]` member, or a bundle's field (`match kargs.norm_type`):
/// an `if` / `elif` chain comparing `v` with the members of each arm (`else` for
/// `_`). Without `_` the arms must name every member.
fn parse_match(m: &syn::ExprMatch, span: Spn, cx: &mut Parser<'_>) -> Option<Stmt> {
    let var_span = expr_span(&m.expr);
    let ident = |e: &syn::Expr| match e {
        syn::Expr::Path(p) if p.qself.is_none() => p.path.get_ident().cloned(),
        _ => None,
    };
    let (var, field) = match &*m.expr {
        syn::Expr::Field(f) if let (Some(v), syn::Member::Named(n)) = (ident(&f.base), &f.member) => (v, Some(n.clone())),
        other => match ident(other) {
            Some(v) => (v, None),
            None => {
                cx.error(
                    var_span,
                    "`match` in kernels matches a variable or bundle field holding an #[nki_enum] member: bind the value with `let` first",
                );
                return None;
            }
        },
    };
    // The scrutinee, once per arm's test.
    let scrutinee = || {
        let v = Expr { kind: ExprKind::Var(var.clone()), span: var_span };
        match &field {
            Some(n) => Expr { kind: ExprKind::Attr(Box::new(v), n.clone()), span: var_span },
            None => v,
        }
    };
    let (mut branches, mut otherwise, mut class, mut covered) = (Vec::new(), None, None::<String>, Vec::<String>::new());
    for arm in &m.arms {
        if let Some((_, g)) = &arm.guard {
            cx.error(expr_span(g), "`match` arms in kernels take no guards: test inside the arm");
            return None;
        }
        if otherwise.is_some() {
            cx.error(Spn::of(&arm.pat), "this arm follows `_` and is never reached");
            return None;
        }
        let body = match &*arm.body {
            syn::Expr::Block(b) if b.label.is_none() => parse_block(&b.block, cx),
            other => {
                let mut out = Vec::new();
                parse_expr_stmt(other, &mut out, cx);
                Block { stmts: out, tail: None }
            }
        };
        if let Some(t) = &body.tail {
            cx.error(t.span, "a `match` arm in a kernel is a statement and cannot end in a value; add `;`");
        }
        let pats: Vec<&syn::Pat> = match &arm.pat {
            syn::Pat::Or(o) => o.cases.iter().collect(),
            p => vec![p],
        };
        if let [syn::Pat::Wild(_)] = pats.as_slice() {
            otherwise = Some(body);
            continue;
        }
        let mut cond: Option<Expr> = None;
        for p in pats {
            let syn::Pat::Path(path) = p else {
                cx.error(Spn::of(p), "a `match` arm in a kernel names enum members (`Act::SOFTMAX`, `Act::A | Act::B`) or is `_`");
                return None;
            };
            let segs: Vec<String> = path.path.segments.iter().map(|s| s.ident.to_string()).collect();
            let pspan = Spn::of(p);
            let [c, member] = segs.as_slice() else {
                cx.error(pspan, "a `match` arm in a kernel names an enum member as `Enum::MEMBER`");
                return None;
            };
            let Some((_, members)) = cx.enums.iter().find(|(n, _)| n == c) else {
                cx.error(pspan, format!("`{c}` is not an #[nki_enum] of this module"));
                return None;
            };
            if !members.contains(member) {
                let msg = format!("`{c}` has no member `{member}`; its members are {}", members.join(", "));
                cx.error(pspan, msg);
                return None;
            }
            match &class {
                Some(k) if k != c => {
                    cx.error(pspan, format!("this arm names a member of `{c}`, the others of `{k}`"));
                    return None;
                }
                _ => class = Some(c.clone()),
            }
            if covered.contains(member) {
                cx.error(pspan, format!("`{c}::{member}` is matched twice"));
                return None;
            }
            covered.push(member.clone());
            let test = Expr {
                kind: ExprKind::Binary(BinOp::Eq, Box::new(scrutinee()), Box::new(Expr { kind: ExprKind::Path(segs), span: pspan })),
                span: pspan,
            };
            cond = Some(match cond {
                None => test,
                Some(prev) => Expr { kind: ExprKind::Binary(BinOp::Or, Box::new(prev), Box::new(test)), span: pspan },
            });
        }
        if let Some(c) = cond {
            branches.push((Cond::Expr(c), body));
        }
    }
    if otherwise.is_none()
        && let Some(c) = &class
        && let Some((_, members)) = cx.enums.iter().find(|(n, _)| n == c)
    {
        let missing: Vec<String> = members.iter().filter(|m| !covered.contains(m)).map(|m| format!("{c}::{m}")).collect();
        if !missing.is_empty() {
            cx.error(span, format!("this `match` does not cover {}: add an arm for each, or `_`", missing.join(", ")));
            return None;
        }
    }
    if branches.is_empty() {
        cx.error(span, "a `match` in a kernel needs an arm naming an enum member");
        return None;
    }
    Some(Stmt::If { branches, otherwise, span })
}

fn parse_macro_stmt(mac: &syn::Macro, out: &mut Vec<Stmt>, cx: &mut Parser<'_>) {
    let span = Spn { start: Spn::of(&mac.path).start, end: mac.delimiter.span().close() };
    let name = mac.path.get_ident().map(|i| i.to_string()).unwrap_or_default();
    if name != "assert" && name != "assert_eq" && name != "assert_ne" {
        cx.error(span, "only `assert!`, `assert_eq!` and `assert_ne!` can be used as statements in kernels (they become Python asserts)");
        return;
    }
    let args = match mac.parse_body_with(Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated) {
        Ok(a) => a,
        Err(e) => {
            cx.push(e);
            return;
        }
    };
    let mut it = args.iter();
    let cond = match name.as_str() {
        "assert" => match it.next() {
            Some(c) => parse_expr(c, cx),
            None => {
                cx.error(span, "assert! needs a condition");
                return;
            }
        },
        _ => {
            let (Some(a), Some(b)) = (it.next(), it.next()) else {
                cx.error(span, format!("{name}! needs two values"));
                return;
            };
            let op = if name == "assert_eq" { crate::ast::BinOp::Eq } else { crate::ast::BinOp::Ne };
            Expr { kind: ExprKind::Binary(op, Box::new(parse_expr(a, cx)), Box::new(parse_expr(b, cx))), span }
        }
    };
    let rest: Vec<&syn::Expr> = it.collect();
    let msg = match rest.split_first() {
        None => None,
        Some((syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }), fmt_args)) => parse_format(s, fmt_args, cx),
        Some((syn::Expr::Path(p), [])) if p.qself.is_none() && p.path.get_ident().is_some() => {
            p.path.get_ident().map(|name| FmtString { pieces: vec![FmtPiece::Const(name.clone())] })
        }
        Some((syn::Expr::Path(p), [])) if p.qself.is_none() && crate_const_path(&p.path) => {
            Some(FmtString { pieces: vec![FmtPiece::Shared(p.path.clone())] })
        }
        Some((other, _)) => {
            cx.error(
                other.span(),
                "the assert message must be a string literal, optionally with {} arguments, the name of a module `&str` constant, or `crate::module::NAME` naming one of another #[nki_module]",
            );
            None
        }
    };
    out.push(Stmt::Assert { cond, msg, span });
}

/// Whether `path` is `crate::a::b::NAME`: plain segments below the crate root
/// (a constant of another `#[nki_module]`, wherever the kernel sits).
fn crate_const_path(path: &syn::Path) -> bool {
    path.leading_colon.is_none()
        && path.segments.len() >= 3
        && path.segments.first().is_some_and(|s| s.ident == "crate")
        && path.segments.iter().all(|s| s.arguments.is_none())
}

/// Parses a format string with `{}`, `{name}` and `{:?}` placeholders.
fn parse_format(lit: &syn::LitStr, args: &[&syn::Expr], cx: &mut Parser<'_>) -> Option<FmtString> {
    let text = lit.value();
    let mut pieces = Vec::new();
    let mut buf = String::new();
    let mut next_arg = 0;
    let mut chars = text.chars().peekable();
    let named: Vec<(String, &syn::Expr)> = args
        .iter()
        .filter_map(|a| match a {
            syn::Expr::Assign(asg) => match &*asg.left {
                syn::Expr::Path(p) => p.path.get_ident().map(|i| (i.to_string(), &*asg.right)),
                _ => None,
            },
            _ => None,
        })
        .collect();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                buf.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                buf.push('}');
            }
            '{' => {
                let mut spec = String::new();
                for c in chars.by_ref() {
                    if c == '}' {
                        break;
                    }
                    spec.push(c);
                }
                let name = spec.split(':').next().unwrap_or("").trim().to_string();
                if !spec.contains(':') || spec.ends_with(":?") {
                    // Plain and debug formatting print the same in Python.
                } else {
                    cx.error(lit.span(), format!("format spec `{{{spec}}}` is not supported in kernel asserts; use `{{}}` or `{{name}}`"));
                    return None;
                }
                let value = if name.is_empty() {
                    let Some(a) = args.get(next_arg) else {
                        cx.error(lit.span(), "more `{}` placeholders than arguments");
                        return None;
                    };
                    next_arg += 1;
                    parse_expr(a, cx)
                } else if let Ok(i) = name.parse::<usize>() {
                    let Some(a) = args.get(i) else {
                        cx.error(lit.span(), format!("placeholder `{{{i}}}` has no argument {i}"));
                        return None;
                    };
                    parse_expr(a, cx)
                } else if let Some((_, e)) = named.iter().find(|(n, _)| *n == name) {
                    parse_expr(e, cx)
                } else if let Ok(mut var) = syn::parse_str::<syn::Ident>(&name) {
                    var.set_span(lit.span());
                    Expr { kind: ExprKind::Var(var), span: lit.span().into() }
                } else {
                    cx.error(lit.span(), format!("placeholder `{{{name}}}` must name a variable"));
                    return None;
                };
                if !buf.is_empty() {
                    pieces.push(FmtPiece::Text(std::mem::take(&mut buf)));
                }
                pieces.push(FmtPiece::Arg(value));
            }
            c => buf.push(c),
        }
    }
    if !buf.is_empty() {
        pieces.push(FmtPiece::Text(buf));
    }
    Some(FmtString { pieces })
}
