//! `#[spec_options]`: ties an emulator options struct to the spec rows that use it.
//!
//! The macro emits `OptsStruct { field: value, .. }` from a row's optional
//! parameters, so each implemented row's optional parameters (those nki-rs
//! supports) and the fields of its options struct must be the same names. The
//! attribute compares them when `nki-core` compiles and names the difference.
//! `var`, the variable the macro passes to rows whose binding takes it
//! (`nki_spec::Binding::var`), is a field of those rows' structs; other fields
//! the macro fills itself (not official parameters) are listed in the
//! attribute: `#[spec_options(field)]`.

use proc_macro2::TokenStream;
use quote::quote;
use std::collections::BTreeSet;

/// Checks the struct `item` against every spec row whose options struct it is.
pub fn check(attr: TokenStream, item: TokenStream) -> TokenStream {
    let parsed: syn::ItemStruct = match syn::parse2(item.clone()) {
        Ok(s) => s,
        Err(e) => return e.to_compile_error(),
    };
    let name = parsed.ident.to_string();
    let internal: BTreeSet<String> = attr
        .into_iter()
        .filter_map(|t| match t {
            proc_macro2::TokenTree::Ident(i) => Some(i.to_string()),
            _ => None,
        })
        .collect();
    let fields: BTreeSet<String> =
        parsed.fields.iter().filter_map(|f| f.ident.as_ref().map(|i| i.to_string())).filter(|f| !internal.contains(f)).collect();
    let mut errors = Vec::new();
    let mut rows = 0;
    for op in nki_spec::ops() {
        let Some(bind) = op.binding() else { continue };
        if bind.opts.rsplit("::").next() != Some(name.as_str()) {
            continue;
        }
        rows += 1;
        let mut params: BTreeSet<String> =
            op.optional_params().filter(|p| p.kind != nki_spec::Kind::Planned).map(|p| p.name.to_string()).collect();
        // The variable a call is bound to, which the macro passes when the row says so.
        if bind.var {
            params.insert("var".to_string());
        }
        if params != fields {
            let missing: Vec<&String> = params.difference(&fields).collect();
            let extra: Vec<&String> = fields.difference(&params).collect();
            errors.push(format!(
                "{name} does not match the spec row of {}: fields missing {missing:?}, fields not in the row {extra:?}",
                op.official_name()
            ));
        }
    }
    if rows == 0 {
        errors.push(format!("no implemented spec row names {name} as its options struct"));
    }
    let errs = errors.iter().map(|m| quote!(::core::compile_error!(#m);));
    quote!(#item #(#errs)*)
}
