//! Parameter and `let` type annotations.

use super::parser::Parser;
use crate::ast::{Space, Spn, TypeAnn};

const KNOWN: &str =
    "Hbm, Sbuf, Psum, Tensor, i64, f64, bool, Dtype, Groups, ReplicaGroup, Outputs, Register, &str, Option<T>, Vec<T> or a tuple of these";

/// Parses a type annotation, reporting unsupported types (and nesting past the bound).
pub fn parse_type(ty: &syn::Type, cx: &mut Parser<'_>) -> Option<TypeAnn> {
    let span = Spn::of(ty);
    cx.nested(span, |cx| parse_node(ty, span, cx)).flatten()
}

fn parse_node(ty: &syn::Type, span: Spn, cx: &mut Parser<'_>) -> Option<TypeAnn> {
    match ty {
        syn::Type::Reference(r) => match &*r.elem {
            syn::Type::Path(p) if p.path.is_ident("str") => Some(TypeAnn::Str(span)),
            inner => parse_type(inner, cx),
        },
        syn::Type::Paren(p) => parse_type(&p.elem, cx),
        syn::Type::Slice(s) => Some(TypeAnn::List(Box::new(parse_type(&s.elem, cx)?), span)),
        syn::Type::Tuple(t) => {
            let items: Option<Vec<TypeAnn>> = t.elems.iter().map(|e| parse_type(e, cx)).collect();
            Some(TypeAnn::Tuple(items?, span))
        }
        syn::Type::Path(p) if p.qself.is_none() => {
            let seg = p.path.segments.last()?;
            let name = seg.ident.to_string();
            let generic = match &seg.arguments {
                syn::PathArguments::AngleBracketed(a) => a.args.first(),
                _ => None,
            };
            Some(match (name.as_str(), generic) {
                ("Hbm", None) => TypeAnn::Tensor(Some(Space::Hbm), span),
                ("Sbuf", None) => TypeAnn::Tensor(Some(Space::Sbuf), span),
                ("Psum", None) => TypeAnn::Tensor(Some(Space::Psum), span),
                ("Tensor", None) => TypeAnn::Tensor(None, span),
                ("i64", None) => TypeAnn::Int(span),
                ("f64", None) => TypeAnn::Float(span),
                ("bool", None) => TypeAnn::Bool(span),
                ("Dtype", None) => TypeAnn::Dtype(span),
                ("Groups", None) => TypeAnn::Groups(span),
                ("ReplicaGroup", None) => TypeAnn::ReplicaGroup(span),
                ("Outputs", None) => TypeAnn::Outputs(span),
                ("Register", None) => TypeAnn::Register(span),
                ("Option", Some(syn::GenericArgument::Type(inner))) => TypeAnn::Option(Box::new(parse_type(inner, cx)?), span),
                ("Vec", Some(syn::GenericArgument::Type(inner))) => TypeAnn::List(Box::new(parse_type(inner, cx)?), span),
                ("usize" | "u32" | "i32" | "u64" | "isize", None) => {
                    cx.error(
                        span,
                        format!(
                            "use `i64` for integers in kernels: trace-time integers are Python ints, `{name}` has no Python counterpart"
                        ),
                    );
                    return None;
                }
                (n, None) if cx.objects.iter().any(|o| o == n) => TypeAnn::Object(seg.ident.clone(), span),
                (n, None) if cx.enums.iter().any(|(o, _)| o == n) => TypeAnn::PyEnum(seg.ident.clone(), span),
                ("f32", None) => {
                    cx.error(span, "use `f64` for trace-time floats (they are Python floats); tile element types are chosen with a Dtype such as nl::float32");
                    return None;
                }
                _ => {
                    cx.error(span, format!("unsupported type in a kernel: expected {KNOWN}"));
                    return None;
                }
            })
        }
        syn::Type::TraitObject(_) | syn::Type::ImplTrait(_) => {
            cx.error(
                span,
                format!(
                    "trait objects and `impl Trait` are not supported in kernels: NKI kernels are traced with concrete values; use {KNOWN}"
                ),
            );
            None
        }
        _ => {
            cx.error(span, format!("unsupported type in a kernel: expected {KNOWN}"));
            None
        }
    }
}
