//! Patterns: the names a `let`, a `for` loop or a closure binds.

use super::parser::Parser;
use crate::ast::{Pat, Spn};
use syn::spanned::Spanned;

/// The names `p` binds: plain names, `_`, tuples and shape lists.
pub(super) fn parse_pat(p: &syn::Pat, cx: &mut Parser<'_>) -> Pat {
    match p {
        syn::Pat::Ident(i) => {
            if i.by_ref.is_some() || i.subpat.is_some() {
                cx.error(p.span(), "only plain names can be bound in kernels");
            }
            Pat::Ident(i.ident.clone(), i.mutability.is_some())
        }
        syn::Pat::Tuple(t) => Pat::Tuple(t.elems.iter().map(|x| parse_pat(x, cx)).collect(), Spn::of(p)),
        syn::Pat::Slice(s) => Pat::Slice(s.elems.iter().map(|x| parse_pat(x, cx)).collect(), Spn::of(p)),
        syn::Pat::Wild(_) => Pat::Wild,
        syn::Pat::Paren(x) => parse_pat(&x.pat, cx),
        other => {
            cx.error(other.span(), "only names, `_`, tuples `(a, b)` and shape lists `[a, b]` can be bound in kernels");
            Pat::Wild
        }
    }
}
