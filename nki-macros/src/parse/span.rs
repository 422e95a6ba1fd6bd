//! Source ranges of expressions and blocks, read from their first and last
//! tokens without printing them: printing a node costs its whole size, and a
//! range is asked for at every level of a deep tree.

use crate::ast::Spn;
use proc_macro2::Span;
use syn::spanned::Spanned;

/// The range of an expression.
pub fn expr_span(e: &syn::Expr) -> Spn {
    Spn { start: first_token(e), end: last_token(e) }
}

/// The range of a block, brace to brace.
pub fn block_span(b: &syn::Block) -> Spn {
    Spn { start: b.brace_token.span.open(), end: b.brace_token.span.close() }
}

/// Walks down the left edge of the tree (iteratively) to its first token.
fn first_token(mut e: &syn::Expr) -> Span {
    loop {
        e = match e {
            syn::Expr::Binary(x) => &x.left,
            syn::Expr::MethodCall(x) => &x.receiver,
            syn::Expr::Call(x) => &x.func,
            syn::Expr::Index(x) => &x.expr,
            syn::Expr::Field(x) => &x.base,
            syn::Expr::Cast(x) => &x.expr,
            syn::Expr::Try(x) => &x.expr,
            syn::Expr::Await(x) => &x.base,
            syn::Expr::Assign(x) => &x.left,
            syn::Expr::Range(syn::ExprRange { start: Some(x), .. }) => x,
            syn::Expr::Unary(x) => return x.op.span(),
            syn::Expr::Reference(x) => return x.and_token.span,
            syn::Expr::Paren(x) => return x.paren_token.span.open(),
            syn::Expr::Tuple(x) => return x.paren_token.span.open(),
            syn::Expr::Array(x) => return x.bracket_token.span.open(),
            syn::Expr::Repeat(x) => return x.bracket_token.span.open(),
            syn::Expr::Lit(x) => return x.lit.span(),
            syn::Expr::If(x) => return x.if_token.span,
            // Short nodes and constructs the parser rejects: printing them once is fine.
            other => return Spn::of(other).start,
        };
    }
}

/// Walks down the right edge of the tree (iteratively) to its last token.
fn last_token(mut e: &syn::Expr) -> Span {
    loop {
        e = match e {
            syn::Expr::Binary(x) => &x.right,
            syn::Expr::Unary(x) => &x.expr,
            syn::Expr::Reference(x) => &x.expr,
            syn::Expr::Assign(x) => &x.right,
            syn::Expr::Range(syn::ExprRange { end: Some(x), .. }) => x,
            syn::Expr::If(syn::ExprIf { else_branch: Some((_, x)), .. }) => x,
            syn::Expr::If(x) => return x.then_branch.brace_token.span.close(),
            syn::Expr::MethodCall(x) => return x.paren_token.span.close(),
            syn::Expr::Call(x) => return x.paren_token.span.close(),
            syn::Expr::Index(x) => return x.bracket_token.span.close(),
            syn::Expr::Paren(x) => return x.paren_token.span.close(),
            syn::Expr::Tuple(x) => return x.paren_token.span.close(),
            syn::Expr::Array(x) => return x.bracket_token.span.close(),
            syn::Expr::Repeat(x) => return x.bracket_token.span.close(),
            syn::Expr::Block(x) => return x.block.brace_token.span.close(),
            syn::Expr::ForLoop(x) => return x.body.brace_token.span.close(),
            syn::Expr::Lit(x) => return x.lit.span(),
            syn::Expr::Cast(x) => return Spn::of(&x.ty).end,
            syn::Expr::Field(x) => return Spn::of(&x.member).end,
            syn::Expr::Try(x) => return x.question_token.span,
            other => return Spn::of(other).end,
        };
    }
}
