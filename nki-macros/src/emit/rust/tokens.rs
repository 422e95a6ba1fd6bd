//! Token builders the emulation and its launcher share: the generated code's
//! own names, Rust types of annotated values, and literal values.

use crate::ast::TypeAnn;
use crate::vocab::{Constant, lookup_constant};
use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};

/// Names the generated code binds for itself; mixed-site hygiene keeps them apart
/// from the user's variables.
pub fn ctx_ident() -> syn::Ident {
    syn::Ident::new("ctx", Span::mixed_site())
}

/// The path `::nki::{path}` of a runtime item.
pub fn rt_path(path: &str) -> TokenStream {
    let segs = path.split("::").map(|s| format_ident!("{}", s));
    quote!(::nki #(::#segs)*)
}

/// The Rust type of a local value of the annotated type, spanned at the annotation.
pub fn local_type(t: &TypeAnn) -> TokenStream {
    let ty = match t {
        TypeAnn::Tensor(..) => quote!(::nki::Tensor),
        TypeAnn::Int(_) => quote!(i64),
        TypeAnn::Float(_) => quote!(f64),
        TypeAnn::Bool(_) => quote!(bool),
        TypeAnn::Dtype(_) => quote!(::nki::Dtype),
        TypeAnn::Str(_) => quote!(::std::string::String),
        TypeAnn::Groups(_) => quote!(::std::vec::Vec<::std::vec::Vec<i64>>),
        TypeAnn::ReplicaGroup(_) => quote!(::nki::ncc::ReplicaGroup),
        TypeAnn::List(item, _) => {
            let i = local_type(item);
            quote!(::std::vec::Vec<#i>)
        }
        TypeAnn::Option(inner, _) => {
            let i = local_type(inner);
            quote!(::core::option::Option<#i>)
        }
        TypeAnn::Tuple(items, _) => {
            let ts = items.iter().map(local_type);
            quote!((#(#ts,)*))
        }
        TypeAnn::Outputs(_) => quote!(::nki::Outputs),
        TypeAnn::Object(name, _) | TypeAnn::PyEnum(name, _) => quote!(#name),
        TypeAnn::Register(_) => quote!(::nki::nisa::Register),
    };
    quote_spanned!(t.span().start=> #ty)
}

/// The Rust type of a parameter (tensors by reference).
pub fn param_type(t: &TypeAnn) -> TokenStream {
    match t {
        TypeAnn::Tensor(..) => quote!(&'a ::nki::Tensor),
        TypeAnn::Str(_) => quote!(&'a str),
        TypeAnn::Object(name, _) => quote!(&'a #name),
        TypeAnn::Option(inner, _) if matches!(**inner, TypeAnn::Tensor(..)) => {
            quote!(::core::option::Option<&'a ::nki::Tensor>)
        }
        other => local_type(other),
    }
}

/// The bounds of a parameter's range as `nki::spec::contract::Bound` values.
pub fn bound_tokens(bounds: &[nki_spec::contract::Bound]) -> Vec<TokenStream> {
    use nki_spec::contract::Bound;
    bounds
        .iter()
        .map(|b| {
            let v = b.value();
            let variant = match b {
                Bound::Ge(_) => quote!(Ge),
                Bound::Gt(_) => quote!(Gt),
                Bound::Le(_) => quote!(Le),
                Bound::Lt(_) => quote!(Lt),
            };
            quote!(::nki::spec::contract::Bound::#variant(#v))
        })
        .collect()
}

/// A member of an `#[nki_enum]` (`RouterActFnType::SOFTMAX`), named as in the
/// module that declares the enum.
pub fn member_tokens(p: &[String]) -> TokenStream {
    let segs = p.iter().map(|s| format_ident!("{}", s));
    quote!(#(#segs)::*)
}

/// A trace-time float; the infinities have no literal.
pub fn float_tokens(v: f64) -> TokenStream {
    match v {
        f64::INFINITY => quote!(::core::f64::INFINITY),
        f64::NEG_INFINITY => quote!(::core::f64::NEG_INFINITY),
        v if v.is_nan() => quote!(::core::f64::NAN),
        v => quote!(#v),
    }
}

pub fn constant_tokens(p: &[String]) -> TokenStream {
    match lookup_constant(p) {
        Some(Constant::Float(v)) => float_tokens(v),
        Some(Constant::Int(v)) => quote!(#v),
        _ => {
            let segs = p.iter().map(|s| format_ident!("{}", s));
            quote!(::nki #(::#segs)*)
        }
    }
}
