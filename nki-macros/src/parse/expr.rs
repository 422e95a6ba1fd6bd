//! syn expressions → DSL expressions.

use super::parser::Parser;
use super::pat::parse_pat;
use super::span::expr_span;
use crate::ast::{Arg, BinOp, CastTo, Expr, ExprKind, IndexItem, RangeIter, RangeKind, Spn, UnOp};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;

fn invalid(span: Spn) -> Expr {
    Expr { kind: ExprKind::Invalid, span }
}

fn path_segments(p: &syn::Path) -> Vec<String> {
    p.segments.iter().map(|s| s.ident.to_string()).collect()
}

/// Parses an expression; unsupported constructs are reported and become `Invalid`,
/// and so does nesting past the bound.
pub fn parse_expr(e: &syn::Expr, cx: &mut Parser<'_>) -> Expr {
    let span = expr_span(e);
    cx.nested(span, |cx| parse_node(e, span, cx)).unwrap_or_else(|| invalid(span))
}

fn parse_node(e: &syn::Expr, span: Spn, cx: &mut Parser<'_>) -> Expr {
    let kind = match e {
        syn::Expr::Lit(l) => match parse_lit(&l.lit, cx) {
            Some(k) => k,
            None => return invalid(span),
        },
        syn::Expr::Path(p) => {
            if p.qself.is_some() {
                cx.error(span, "qualified paths (`<T as Trait>::x`) are not supported in kernels");
                return invalid(span);
            }
            let segs = path_segments(&p.path);
            match segs.as_slice() {
                [one] if one == "None" => ExprKind::None,
                [_] => ExprKind::Var(p.path.segments[0].ident.clone()),
                _ => ExprKind::Path(segs),
            }
        }
        // Parentheses and references leave no node, so they add no level (the raw
        // tokens' bound limits how many there can be).
        syn::Expr::Paren(p) => return parse_node(&p.expr, expr_span(&p.expr), cx),
        syn::Expr::Group(g) => return parse_node(&g.expr, expr_span(&g.expr), cx),
        syn::Expr::Reference(r) => {
            if r.mutability.is_some() {
                cx.error(span, "`&mut` is not needed in kernels: ops write through their `dst` tensor");
                return invalid(span);
            }
            return parse_node(&r.expr, expr_span(&r.expr), cx);
        }
        syn::Expr::Unary(u) => {
            let inner = Box::new(parse_expr(&u.expr, cx));
            match u.op {
                syn::UnOp::Neg(_) => ExprKind::Unary(UnOp::Neg, inner),
                syn::UnOp::Not(_) => ExprKind::Unary(UnOp::Not, inner),
                _ => {
                    cx.error(span, "dereferencing is not supported in kernels: tensors and scalars are used by value");
                    return invalid(span);
                }
            }
        }
        syn::Expr::Binary(b) => {
            let Some(op) = bin_op(&b.op) else {
                cx.error(b.op.span(), "this operator is not supported in kernel expressions (use + - * / % << >> == != < <= > >= && ||; compound assignment only as a statement)");
                return invalid(span);
            };
            ExprKind::Binary(op, Box::new(parse_expr(&b.left, cx)), Box::new(parse_expr(&b.right, cx)))
        }
        syn::Expr::Call(c) => {
            let syn::Expr::Path(p) = &*c.func else {
                cx.error(c.func.span(), "only named functions can be called in kernels");
                return invalid(span);
            };
            let path = path_segments(&p.path);
            if let Some(msg) = statement_form(&path) {
                cx.error(span, msg);
                return invalid(span);
            }
            let args = parse_args(&c.args, cx);
            if path == ["Some"] {
                match <[Arg; 1]>::try_from(args) {
                    Ok([a]) if a.name.is_none() => ExprKind::Some(Box::new(a.value)),
                    _ => {
                        cx.error(span, "`Some` takes one value");
                        return invalid(span);
                    }
                }
            } else {
                ExprKind::Call { path, path_span: Spn::of(p), args }
            }
        }
        syn::Expr::MethodCall(m) if m.method == "collect" => match parse_comprehension(m, cx) {
            Some(k) => k,
            None => return invalid(span),
        },
        syn::Expr::MethodCall(m) => {
            if m.turbofish.is_some() {
                cx.error(m.turbofish.span(), "turbofish type arguments are not supported in kernels");
            }
            ExprKind::Method { recv: Box::new(parse_expr(&m.receiver, cx)), name: m.method.clone(), args: parse_args(&m.args, cx) }
        }
        syn::Expr::Index(ix) => ExprKind::Index { base: Box::new(parse_expr(&ix.expr, cx)), items: parse_index(&ix.index, cx) },
        syn::Expr::Tuple(t) => ExprKind::Tuple(t.elems.iter().map(|x| parse_expr(x, cx)).collect()),
        syn::Expr::Array(a) => ExprKind::List(a.elems.iter().map(|x| parse_expr(x, cx)).collect()),
        syn::Expr::Repeat(r) => ExprKind::Repeat(Box::new(parse_expr(&r.expr, cx)), Box::new(parse_expr(&r.len, cx))),
        syn::Expr::Cast(c) => {
            let to = match &*c.ty {
                syn::Type::Path(p) if p.path.is_ident("f64") => CastTo::Float,
                syn::Type::Path(p) if p.path.is_ident("i64") => CastTo::Int,
                other => {
                    cx.error(other.span(), "only `as f64` and `as i64` casts are supported in kernels");
                    return invalid(span);
                }
            };
            ExprKind::Cast(Box::new(parse_expr(&c.expr, cx)), to)
        }
        syn::Expr::If(i) => {
            let (Some((_, els)), false) = (&i.else_branch, matches!(&*i.cond, syn::Expr::Let(_))) else {
                cx.error(
                    span,
                    "an `if` used as a value needs an `else` branch and a plain condition (it becomes Python's `a if cond else b`)",
                );
                return invalid(span);
            };
            let then = single_value(&i.then_branch.stmts, span, cx);
            let otherwise = match &**els {
                syn::Expr::Block(b) => single_value(&b.block.stmts, span, cx),
                other => parse_expr(other, cx),
            };
            ExprKind::If(Box::new(parse_expr(&i.cond, cx)), Box::new(then), Box::new(otherwise))
        }
        syn::Expr::Struct(st) if st.qself.is_none() && st.path.get_ident().is_some_and(|n| cx.objects.iter().any(|o| n == o)) => {
            let defaults = st.rest.as_deref().is_some_and(|r| is_default_call(r, &st.path));
            if let Some(r) = st.rest.as_ref().filter(|_| !defaults) {
                cx.error(
                    r.span(),
                    "a parameter bundle's `..` takes `Default::default()` (the fields' declared #[default]s); any other base is not supported",
                );
            }
            let fields = st
                .fields
                .iter()
                .filter_map(|f| match &f.member {
                    syn::Member::Named(n) => Some((n.clone(), parse_expr(&f.expr, cx))),
                    syn::Member::Unnamed(i) => {
                        cx.error(i.span(), "a parameter bundle's fields are named");
                        None
                    }
                })
                .collect();
            ExprKind::Struct(st.path.segments[0].ident.clone(), fields, defaults)
        }
        syn::Expr::Field(f) => match &f.member {
            syn::Member::Unnamed(idx) => ExprKind::Field(Box::new(parse_expr(&f.base, cx)), idx.index as usize),
            // A bundle's field; the checker refuses it on anything else.
            syn::Member::Named(n) => ExprKind::Attr(Box::new(parse_expr(&f.base, cx)), n.clone()),
        },
        syn::Expr::Macro(m) if m.mac.path.is_ident("vec") => {
            match m.mac.parse_body_with(Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated) {
                Ok(items) => ExprKind::List(items.iter().map(|x| parse_expr(x, cx)).collect()),
                Err(e) => {
                    cx.push(e);
                    return invalid(span);
                }
            }
        }
        syn::Expr::Macro(m) if m.mac.path.is_ident("s") => {
            cx.error(span, "`s![...]` only appears inside an index: `tile[s![0..128, ..]]`");
            return invalid(span);
        }
        other => {
            cx.error(span, unsupported_message(other));
            return invalid(span);
        }
    };
    Expr { kind, span }
}

/// `(a..b).map(|i| x).collect()` (optionally `collect::<Vec<_>>()`): a list of
/// one `x` per index of a trace-time range.
fn parse_comprehension(m: &syn::ExprMethodCall, cx: &mut Parser<'_>) -> Option<ExprKind> {
    const FORM: &str =
        "a list in kernels is built as `(0..n).map(|i| x).collect()` over a trace-time range (Python's `[x for i in range(n)]`)";
    if let Some(t) = &m.turbofish
        && !matches!(t.args.first(), Some(syn::GenericArgument::Type(syn::Type::Path(p))) if p.path.is_ident("Vec") || p.path.segments.last().is_some_and(|s| s.ident == "Vec"))
    {
        cx.error(t.span(), "a kernel's list collects into a `Vec`: `.collect::<Vec<_>>()` or `.collect()`");
    }
    let syn::Expr::MethodCall(map) = &*m.receiver else {
        cx.error(expr_span(&m.receiver), FORM);
        return None;
    };
    let (true, [syn::Expr::Closure(cl)], true) = (map.method == "map", map.args.iter().collect::<Vec<_>>().as_slice(), m.args.is_empty())
    else {
        cx.error(expr_span(&syn::Expr::MethodCall(m.clone())), FORM);
        return None;
    };
    let iter = parse_range(&map.receiver, cx)?;
    if iter.kind != crate::ast::RangeKind::Plain {
        cx.error(iter.span, format!("{FORM}; the range is a Rust range `a..b` or `(a..b).step_by(s)`"));
        return None;
    }
    if cl.inputs.len() != 1 || cl.capture.is_some() || cl.asyncness.is_some() || !matches!(cl.output, syn::ReturnType::Default) {
        cx.error(
            cl.or1_token.span,
            "the closure of a list takes one parameter, the index (`|i|` or `|_|`), and no modifiers or return type",
        );
        return None;
    }
    let var = parse_pat(&cl.inputs[0], cx);
    let body = match &*cl.body {
        syn::Expr::Block(b) => match b.block.stmts.as_slice() {
            [syn::Stmt::Expr(e, None)] if b.label.is_none() => parse_expr(e, cx),
            _ => {
                cx.error(
                    expr_span(&cl.body),
                    "each element of a list is one expression (`|i| nl::ndarray(..)`): Python writes it `[x for i in range(n)]`; put statements in a #[nki_helper] that returns the element",
                );
                return None;
            }
        },
        other => parse_expr(other, cx),
    };
    Some(ExprKind::Comprehension { var, iter: Box::new(iter), body: Box::new(body) })
}

/// Why a loop form or scoped region cannot be used as a value.
fn statement_form(path: &[String]) -> Option<String> {
    let [m, name] = path else { return None };
    if m != "nl" {
        return None;
    }
    match name.as_str() {
        "affine_range" | "sequential_range" | "static_range" | "dynamic_range" => {
            Some(format!("nl::{name}(..) is a loop range: write `for i in nl::{name}(..) {{ .. }}`"))
        }
        "fori_loop" | "while_loop" | "no_reorder" => {
            Some(format!("nl::{name}(..) is a statement of its own, not a value: write `nl::{name}(..);`"))
        }
        _ => None,
    }
}

/// Whether `e` is `Default::default()` or `<bundle>::default()`, a call with no
/// arguments: the fields a bundle literal leaves out take their declared
/// defaults.
fn is_default_call(e: &syn::Expr, bundle: &syn::Path) -> bool {
    let syn::Expr::Call(c) = e else { return false };
    let syn::Expr::Path(p) = &*c.func else { return false };
    let names: Vec<String> = p.path.segments.iter().map(|s| s.ident.to_string()).collect();
    let owner = bundle.get_ident().map(|i| i.to_string());
    c.args.is_empty()
        && p.qself.is_none()
        && matches!(names.as_slice(), [o, d] if d == "default" && (o == "Default" || Some(o) == owner.as_ref()))
}

/// Explains what to write instead of an unsupported expression.
pub fn unsupported_message(e: &syn::Expr) -> &'static str {
    match e {
        syn::Expr::Closure(_) => {
            "closures are only the bodies of nl::fori_loop, nl::while_loop and nl::no_reorder and the element of a list, `(0..n).map(|i| x).collect()`, in kernels; write a #[nki_helper] function instead"
        }
        syn::Expr::While(_) => {
            "`while` loops are not supported in kernels: write `for i in 0..n` over a range (unrolled at trace time) or a device loop, nl::while_loop(reg, |r| { ..; r })"
        }
        syn::Expr::Loop(_) => "`loop` is not supported in kernels: NKI unrolls loops at trace time, write `for i in 0..n` over a range",
        syn::Expr::Match(_) => "`match` is not supported in kernels: write `if` / `else if` chains",
        syn::Expr::Try(_) => "`?` is not needed in kernels: every NKI op already propagates its error",
        syn::Expr::Async(_) | syn::Expr::Await(_) => "async code is not supported in kernels",
        syn::Expr::Unsafe(_) => "`unsafe` is not supported in kernels",
        syn::Expr::Struct(_) => {
            "struct literals are not supported in kernels except for the #[nki_object] bundles of their #[nki_module]: pass tensors and scalars as parameters"
        }
        syn::Expr::Break(_) | syn::Expr::Continue(_) => "`break` and `continue` are statements of a loop body, not values",
        syn::Expr::Range(_) => "ranges only appear as a `for` loop's range or inside `s![...]`",
        syn::Expr::Block(_) => "a block is not a value in kernels; bind its result with `let` in the enclosing block",
        syn::Expr::Assign(_) => "assignment is a statement in kernels, not a value",
        syn::Expr::Let(_) => "`let` expressions only appear as `if let Some(x) = value`",
        syn::Expr::Macro(_) => "only `assert!`, `assert_eq!`, `s!` and `vec!` macros are supported in kernels",
        _ => "this expression is not supported in kernels",
    }
}

fn single_value(stmts: &[syn::Stmt], span: Spn, cx: &mut Parser<'_>) -> Expr {
    match stmts {
        [syn::Stmt::Expr(e, None)] => parse_expr(e, cx),
        _ => {
            cx.error(
                span,
                "each branch of an `if` used as a value is one expression (it becomes Python's `a if cond else b`): bind what a branch needs with `let` before the `if`, or build the value in a #[nki_helper]",
            );
            invalid(span)
        }
    }
}

fn parse_lit(l: &syn::Lit, cx: &mut Parser<'_>) -> Option<ExprKind> {
    Some(match l {
        syn::Lit::Int(i) => match i.base10_parse::<i64>() {
            Ok(v) if matches!(i.suffix(), "" | "i64") => ExprKind::Int(v),
            Ok(_) => {
                cx.error(i.span(), "integer literals in kernels are `i64`; drop the suffix");
                return None;
            }
            Err(e) => {
                cx.push(e);
                return None;
            }
        },
        syn::Lit::Float(f) => match f.base10_parse::<f64>() {
            Ok(v) if !v.is_finite() => {
                cx.error(
                    f.span(),
                    format!("`{f}` is beyond the range of f64 (it would be infinite); float literals in kernels are finite f64 values"),
                );
                return None;
            }
            Ok(v) if matches!(f.suffix(), "" | "f64") => ExprKind::Float(v),
            Ok(_) => {
                cx.error(f.span(), "float literals in kernels are `f64`; drop the suffix");
                return None;
            }
            Err(e) => {
                cx.push(e);
                return None;
            }
        },
        syn::Lit::Bool(b) => ExprKind::Bool(b.value),
        syn::Lit::Str(s) => ExprKind::Str(s.value()),
        other => {
            cx.error(other.span(), "only integer, float, bool and string literals are supported in kernels");
            return None;
        }
    })
}

fn bin_op(op: &syn::BinOp) -> Option<BinOp> {
    Some(match op {
        syn::BinOp::Add(_) => BinOp::Add,
        syn::BinOp::Sub(_) => BinOp::Sub,
        syn::BinOp::Mul(_) => BinOp::Mul,
        syn::BinOp::Div(_) => BinOp::Div,
        syn::BinOp::Rem(_) => BinOp::Rem,
        syn::BinOp::Shl(_) => BinOp::Shl,
        syn::BinOp::Shr(_) => BinOp::Shr,
        syn::BinOp::Eq(_) => BinOp::Eq,
        syn::BinOp::Ne(_) => BinOp::Ne,
        syn::BinOp::Lt(_) => BinOp::Lt,
        syn::BinOp::Le(_) => BinOp::Le,
        syn::BinOp::Gt(_) => BinOp::Gt,
        syn::BinOp::Ge(_) => BinOp::Ge,
        syn::BinOp::And(_) => BinOp::And,
        syn::BinOp::Or(_) => BinOp::Or,
        _ => return None,
    })
}

/// The compound-assignment operators (`+=`, ...) as DSL operators.
pub fn assign_op(op: &syn::BinOp) -> Option<BinOp> {
    Some(match op {
        syn::BinOp::AddAssign(_) => BinOp::Add,
        syn::BinOp::SubAssign(_) => BinOp::Sub,
        syn::BinOp::MulAssign(_) => BinOp::Mul,
        syn::BinOp::DivAssign(_) => BinOp::Div,
        syn::BinOp::RemAssign(_) => BinOp::Rem,
        _ => return None,
    })
}

/// Call arguments: positional values and `name = value` keywords.
pub fn parse_args(args: &Punctuated<syn::Expr, syn::Token![,]>, cx: &mut Parser<'_>) -> Vec<Arg> {
    args.iter()
        .map(|a| match a {
            syn::Expr::Assign(asg) => match &*asg.left {
                syn::Expr::Path(p) if p.path.get_ident().is_some() => {
                    Arg { name: p.path.get_ident().cloned(), value: parse_expr(&asg.right, cx) }
                }
                other => {
                    cx.error(other.span(), "a keyword argument is written `name = value`");
                    Arg { name: None, value: invalid(expr_span(a)) }
                }
            },
            other => Arg { name: None, value: parse_expr(other, cx) },
        })
        .collect()
}

/// The items of `t[...]`: `s![a..b, .., i, nl::ds(x, n), a..b;step]` or a single index.
fn parse_index(index: &syn::Expr, cx: &mut Parser<'_>) -> Vec<IndexItem> {
    if let syn::Expr::Macro(m) = index
        && m.mac.path.is_ident("s")
    {
        let parser = |input: syn::parse::ParseStream<'_>| -> syn::Result<Vec<(syn::Expr, Option<syn::Expr>)>> {
            let mut items = Vec::new();
            while !input.is_empty() {
                let e: syn::Expr = input.parse()?;
                let step = if input.peek(syn::Token![;]) {
                    input.parse::<syn::Token![;]>()?;
                    Some(input.parse()?)
                } else {
                    None
                };
                items.push((e, step));
                if input.is_empty() {
                    break;
                }
                input.parse::<syn::Token![,]>()?;
            }
            Ok(items)
        };
        return match m.mac.parse_body_with(parser) {
            Ok(items) => items.iter().map(|(e, step)| index_item(e, step.as_ref(), cx)).collect(),
            Err(e) => {
                cx.push(e);
                Vec::new()
            }
        };
    }
    vec![index_item(index, None, cx)]
}

/// `e` without the parentheses around it.
fn strip_parens(e: &syn::Expr) -> &syn::Expr {
    match e {
        syn::Expr::Paren(p) => strip_parens(&p.expr),
        other => other,
    }
}

fn index_item(e: &syn::Expr, step: Option<&syn::Expr>, cx: &mut Parser<'_>) -> IndexItem {
    let span = expr_span(e);
    match e {
        syn::Expr::Paren(p) => index_item(&p.expr, step, cx),
        // `(a..b).step_by(s)`, the loop's spelling of `a..b;s`.
        syn::Expr::MethodCall(m)
            if m.method == "step_by" && m.args.len() == 1 && matches!(strip_parens(&m.receiver), syn::Expr::Range(_)) =>
        {
            if let Some(s) = step {
                cx.error(s.span(), "this range already steps with `.step_by(..)`; give one step");
            }
            match index_item(strip_parens(&m.receiver), Some(&m.args[0]), cx) {
                IndexItem::Range { start, stop, step, .. } => IndexItem::Range { start, stop, step, span },
                other => other,
            }
        }
        syn::Expr::Range(r) => {
            let inclusive = matches!(r.limits, syn::RangeLimits::Closed(_));
            let stop = r.end.as_deref().map(|x| {
                let s = parse_expr(x, cx);
                if inclusive {
                    let sp = s.span;
                    Expr { kind: ExprKind::Binary(BinOp::Add, Box::new(s), Box::new(Expr { kind: ExprKind::Int(1), span: sp })), span: sp }
                } else {
                    s
                }
            });
            IndexItem::Range { start: r.start.as_deref().map(|x| parse_expr(x, cx)), stop, step: step.map(|s| parse_expr(s, cx)), span }
        }
        syn::Expr::Call(c) if matches!(&*c.func, syn::Expr::Path(p) if path_segments(&p.path) == ["nl", "ds"]) => {
            let args: Vec<Expr> = c.args.iter().map(|a| parse_expr(a, cx)).collect();
            match <[Expr; 2]>::try_from(args) {
                Ok([start, size]) => IndexItem::Ds { start, size, span },
                Err(_) => {
                    cx.error(span, "nl::ds takes (start, size)");
                    IndexItem::At(invalid(span))
                }
            }
        }
        other => {
            if let Some(s) = step {
                cx.error(s.span(), "a `;step` only follows a range such as `0..n;2`");
            }
            IndexItem::At(parse_expr(other, cx))
        }
    }
}

/// The range of a `for` loop or of a list's `.map(..)`: `a..b`, with
/// `.rev()` and `.step_by(s)`, or an `nl` range function.
pub(super) fn parse_range(e: &syn::Expr, cx: &mut Parser<'_>) -> Option<RangeIter> {
    let span = expr_span(e);
    cx.nested(span, |cx| parse_range_node(e, span, cx)).flatten()
}

fn parse_range_node(e: &syn::Expr, span: Spn, cx: &mut Parser<'_>) -> Option<RangeIter> {
    let bad = |cx: &mut Parser<'_>| {
        cx.error(
            span,
            "a kernel `for` loop runs over `a..b`, `(a..b).step_by(s)`, `(a..b).rev()`, nl::affine_range / nl::sequential_range / nl::static_range(...) (unrolled at trace time) or nl::dynamic_range(...) (a device loop)",
        );
        None
    };
    match e {
        syn::Expr::Paren(p) => parse_range(&p.expr, cx),
        syn::Expr::Range(r) => {
            if matches!(r.limits, syn::RangeLimits::Closed(_)) {
                cx.error(span, "use a half-open range `a..b` (Python's range excludes its end)");
                return None;
            }
            let (Some(start), Some(stop)) = (&r.start, &r.end) else {
                return bad(cx);
            };
            Some(RangeIter {
                kind: RangeKind::Plain,
                start: parse_expr(start, cx),
                stop: parse_expr(stop, cx),
                step: None,
                rev: false,
                span,
            })
        }
        syn::Expr::MethodCall(m) if m.method == "rev" && m.args.is_empty() => {
            let mut inner = parse_range(&m.receiver, cx)?;
            if inner.step.is_some() {
                cx.error(
                    span,
                    "`.rev()` goes before `.step_by(s)`: `(a..b).rev().step_by(s)` counts down from `b - 1` (Python's `range(b - 1, a - 1, -s)`)",
                );
                return None;
            }
            if inner.kind != RangeKind::Plain || inner.rev {
                return bad(cx);
            }
            inner.rev = true;
            inner.span = span;
            Some(inner)
        }
        syn::Expr::MethodCall(m) if m.method == "step_by" && m.args.len() == 1 => {
            let mut inner = parse_range(&m.receiver, cx)?;
            if inner.kind != RangeKind::Plain || inner.step.is_some() {
                return bad(cx);
            }
            inner.step = Some(parse_expr(&m.args[0], cx));
            inner.span = span;
            Some(inner)
        }
        syn::Expr::Call(c) => {
            let syn::Expr::Path(p) = &*c.func else {
                return bad(cx);
            };
            let segs: Vec<String> = p.path.segments.iter().map(|s| s.ident.to_string()).collect();
            let kind = match segs.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
                ["nl", "affine_range"] => "affine_range",
                ["nl", "sequential_range"] => "sequential_range",
                ["nl", "static_range"] => "static_range",
                ["nl", "dynamic_range"] => "dynamic_range",
                _ => return bad(cx),
            };
            // Positional in the official order (start, stop, step), then keywords by name.
            let mut slots: [Option<Expr>; 3] = [None, None, None];
            let mut positional = 0;
            for a in parse_args(&c.args, cx) {
                let at = match &a.name {
                    None => {
                        positional += 1;
                        positional - 1
                    }
                    Some(n) => match ["start", "stop", "step"].iter().position(|p| n == p) {
                        Some(i) => i,
                        None => {
                            cx.error(n.span(), format!("nl.{kind} has no parameter `{n}`; its parameters are start, stop, step"));
                            continue;
                        }
                    },
                };
                match slots.get_mut(at) {
                    Some(s @ None) => *s = Some(a.value),
                    Some(Some(_)) => cx.error(a.value.span, format!("nl.{kind} got two values for one parameter")),
                    None => cx.error(a.value.span, format!("nl.{kind} takes at most 3 arguments (start, stop, step)")),
                }
            }
            let zero = |s: Spn| Expr { kind: ExprKind::Int(0), span: s };
            match slots {
                [Some(stop), None, step] => Some(RangeIter { kind: RangeKind::Nl(kind), start: zero(span), stop, step, rev: false, span }),
                [Some(start), Some(stop), step] => Some(RangeIter { kind: RangeKind::Nl(kind), start, stop, step, rev: false, span }),
                [None, ..] => {
                    cx.error(span, format!("nl.{kind} needs `start` (the stop when it is the only bound)"));
                    None
                }
            }
        }
        _ => bad(cx),
    }
}
