//! The macro pipeline: parse → check → emit, with a stand-in item on errors.

use crate::ast::FnKind;
use crate::check::{self, Generation};
use crate::diag::Diagnostics;
use crate::emit::{python, rust};
use crate::parse::parse_function;
use proc_macro2::TokenStream;
use syn::spanned::Spanned;

/// Reads `#[nki_kernel]` / `#[nki_kernel(target = "trn3")]`.
fn parse_attr(attr: TokenStream, diag: &mut Diagnostics) -> Generation {
    let mut target = Generation::Trn2;
    if attr.is_empty() {
        return target;
    }
    let parser = syn::meta::parser(|meta| {
        if meta.path.is_ident("target") {
            let lit: syn::LitStr = meta.value()?.parse()?;
            match Generation::parse(&lit.value()) {
                Some(g) => target = g,
                None => {
                    return Err(meta.error(format!("unknown target `{}`: use \"trn1\", \"trn2\" or \"trn3\"", lit.value())));
                }
            }
            Ok(())
        } else {
            Err(meta.error("unknown argument: the only one is `target = \"trn2\"` (the generation whose limits are checked)"))
        }
    });
    if let Err(e) = syn::parse::Parser::parse2(parser, attr) {
        diag.push(e);
    }
    target
}

/// Expands `#[nki_kernel]` (or `#[nki_helper]`) on `item`.
pub fn expand(kind: FnKind, attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut diag = Diagnostics::default();
    let target = parse_attr(attr, &mut diag);
    let item_fn: syn::ItemFn = match syn::parse2(item.clone()) {
        Ok(f) => f,
        Err(_) => {
            let what = if kind == FnKind::Kernel { "#[nki_kernel]" } else { "#[nki_helper]" };
            let err = syn::Error::new(item.span(), format!("{what} applies to a function")).to_compile_error();
            return quote::quote!(#err #item);
        }
    };
    let f = parse_function(&item_fn, kind, &mut diag);
    let info = check::check(&f, target, &mut diag);
    if diag.has_errors() {
        let errors = diag.to_tokens();
        let stub = rust::emit(&f, &info, "", true);
        return quote::quote!(#errors #stub);
    }
    let py = python::emit(&f, &info);
    rust::emit(&f, &info, &py, false)
}
