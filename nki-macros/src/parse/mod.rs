//! Parse: syn's `ItemFn` → the DSL's own tree, reporting every unsupported construct
//! at its span.

mod expr;
mod stmt;
mod types;

pub use expr::parse_expr;
pub use types::parse_type;

use crate::ast::{FnKind, Function, Param, Spn};
use crate::diag::Diagnostics;

/// Parses a kernel or helper function.
pub fn parse_function(item: &syn::ItemFn, kind: FnKind, diag: &mut Diagnostics) -> Function {
    let sig = &item.sig;
    let what = match kind {
        FnKind::Kernel => "an #[nki_kernel]",
        FnKind::Helper => "an #[nki_helper]",
    };
    if let Some(c) = &sig.constness {
        diag.error(Spn::of(c), format!("{what} function cannot be `const`"));
    }
    if let Some(a) = &sig.asyncness {
        diag.error(Spn::of(a), format!("{what} function cannot be `async`"));
    }
    if let Some(u) = &sig.unsafety {
        diag.error(Spn::of(u), format!("{what} function cannot be `unsafe`"));
    }
    if let Some(abi) = &sig.abi {
        diag.error(Spn::of(abi), format!("{what} function cannot have an ABI"));
    }
    if !sig.generics.params.is_empty() {
        diag.error(
            Spn::of(&sig.generics),
            format!("{what} function takes no generic parameters: shapes and dtypes are read at trace time with `.shape()` and `.dtype()`"),
        );
    }
    if let Some(v) = &sig.variadic {
        diag.error(Spn::of(v), "variadic functions are not supported");
    }
    let docs = item
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .filter_map(|a| match &a.meta {
            syn::Meta::NameValue(nv) => match &nv.value {
                syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) => Some(s.value()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    for a in &item.attrs {
        if !a.path().is_ident("doc") && !a.path().is_ident("allow") {
            diag.error(Spn::of(a), format!("attribute not supported on {what} function (doc comments and #[allow] are)"));
        }
    }
    let mut params = Vec::new();
    for input in &sig.inputs {
        let syn::FnArg::Typed(pt) = input else {
            diag.error(Spn::of(input), format!("{what} function cannot take `self`"));
            continue;
        };
        let syn::Pat::Ident(id) = &*pt.pat else {
            diag.error(Spn::of(&pt.pat), "kernel parameters must be plain names");
            continue;
        };
        let mut default = None;
        for a in &pt.attrs {
            if a.path().is_ident("default") {
                match a.parse_args::<syn::Expr>() {
                    Ok(e) => default = Some(parse_expr(&e, diag)),
                    Err(e) => diag.push(e),
                }
            } else {
                diag.error(Spn::of(a), "the only parameter attribute is #[default(value)]: the Python default of the parameter");
            }
        }
        if let Some(ty) = parse_type(&pt.ty, diag) {
            params.push(Param { name: id.ident.clone(), ty, default });
        }
    }
    let ret = match &sig.output {
        syn::ReturnType::Default => None,
        syn::ReturnType::Type(_, ty) => parse_type(ty, diag),
    };
    let body = stmt::parse_block(&item.block, diag);
    Function { kind, vis: item.vis.clone(), name: sig.ident.clone(), docs, params, ret, body }
}
