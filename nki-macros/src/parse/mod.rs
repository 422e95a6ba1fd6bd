//! Parse: syn's `ItemFn` → the DSL's own tree, reporting every unsupported construct
//! at its span.

mod expr;
mod parser;
mod pat;
mod span;
mod spread;
mod stmt;
mod tokens;
mod types;

pub use spread::{PARAMS_ATTR, is_param_group, spread_params};
pub use tokens::check_token_nesting;

use crate::ast::{EnumDef, FnKind, Function, ModuleConst, ObjectDef, Param, Spn, TypeAnn};
use crate::diag::Diagnostics;
use expr::parse_expr;
use parser::Parser;
use types::parse_type;

/// Parses the `const` items of an `#[nki_module]`: a DSL type and a literal value.
pub fn parse_consts(items: &[syn::ItemConst], diag: &mut Diagnostics) -> Vec<ModuleConst> {
    let cx = &mut Parser::new(diag, Vec::new(), Vec::new());
    items
        .iter()
        .filter_map(|c| {
            cx.start_statement();
            let ty = parse_type(&c.ty, cx)?;
            Some(ModuleConst { name: c.ident.clone(), ty, init: parse_expr(&c.expr, cx) })
        })
        .collect()
}

/// Parses the `#[nki_object]` structs of an `#[nki_module]`: named fields of
/// kernel types, the module's enums `enums` and bundles among them.
///
/// Parameter groups (`#[nki_params]`, `groups` set) are read by the same rules,
/// and their fields may also take `#[range(..)]`: a group is only ever spread
/// into parameters, which check it.
pub fn parse_objects(
    items: &[syn::ItemStruct],
    others: &[String],
    enums: &[EnumDef],
    groups: bool,
    diag: &mut Diagnostics,
) -> Vec<ObjectDef> {
    // A field may hold another bundle: one of these or of `others` (imported).
    let names = items.iter().map(|s| s.ident.to_string()).chain(others.iter().cloned()).collect();
    let cx = &mut Parser::new(diag, names, enum_names(enums));
    let mut out = Vec::new();
    for s in items {
        if !s.generics.params.is_empty() {
            cx.error(Spn::of(&s.generics), "a parameter bundle takes no generic parameters");
        }
        let syn::Fields::Named(named) = &s.fields else {
            cx.error(
                Spn::of(&s.fields),
                "a parameter bundle has named fields (`struct Cfg { tile: i64 }`): they become the dataclass's fields",
            );
            continue;
        };
        let (mut fields, mut defaults, mut field_dtypes) = (Vec::new(), Vec::new(), Vec::new());
        for f in &named.named {
            cx.start_statement();
            let (mut default, mut dtypes, mut range) = (None, Vec::new(), Vec::new());
            for a in &f.attrs {
                if groups && a.path().is_ident("range") {
                    range = parse_range(a, cx);
                } else if !default_or_dtypes(a, &mut default, &mut dtypes, cx) && !a.path().is_ident("doc") {
                    cx.error(
                        Spn::of(a),
                        if groups {
                            "the field attributes of a parameter group are #[default(value)], #[dtypes(float32, ...)] and #[range(>= 0.0, < 1.0)], as a parameter's"
                        } else {
                            "the field attributes of a parameter bundle are #[default(value)], the dataclass's default, and #[dtypes(float32, ...)], the dtypes a tensor field accepts (a #[range] belongs to a parameter, or an #[nki_params] group's field)"
                        },
                    );
                }
            }
            if let (Some(name), Some(ty)) = (f.ident.clone(), parse_type(&f.ty, cx)) {
                if !dtypes.is_empty() && !ty.holds_tensor() {
                    cx.error(Spn::of(&f.ty), "#[dtypes(...)] applies to tensor fields only");
                    dtypes.clear();
                }
                if !range.is_empty() && !matches!(ty.item(), TypeAnn::Int(_) | TypeAnn::Float(_)) {
                    cx.error(Spn::of(&f.ty), "#[range(...)] applies to int and float fields only");
                }
                fields.push((name, ty));
                defaults.push(default);
                field_dtypes.push(dtypes);
            }
        }
        out.push(ObjectDef { name: s.ident.clone(), fields, defaults, dtypes: field_dtypes });
    }
    out
}

/// Parses the `#[nki_enum]` enums of an `#[nki_module]`: unit variants whose
/// integer discriminants, written or counted as Rust counts them, are the
/// Python members' values.
pub fn parse_enums(items: &[syn::ItemEnum], diag: &mut Diagnostics) -> Vec<EnumDef> {
    let mut out = Vec::new();
    for e in items {
        if !e.generics.params.is_empty() {
            diag.error(Spn::of(&e.generics), "an #[nki_enum] takes no generic parameters");
        }
        let mut members = Vec::new();
        for v in &e.variants {
            if !matches!(v.fields, syn::Fields::Unit) {
                diag.error(
                    Spn::of(&v.fields),
                    format!("`{}::{}` holds data; an #[nki_enum] has plain members, `{} = 0`", e.ident, v.ident, v.ident),
                );
                continue;
            }
            // Rust's rule for a member without a value: one more than the
            // member before it, 0 for the first.
            let implicit = members.last().map_or(Some(0), |(_, prev): &(syn::Ident, i64)| prev.checked_add(1));
            match &v.discriminant {
                Some((_, d)) => match int_literal(d) {
                    Some(value) => members.push((v.ident.clone(), value)),
                    None => diag.error(
                        Spn::of(d),
                        format!("the value of `{}::{}` must be an integer literal: it becomes the Python member's value", e.ident, v.ident),
                    ),
                },
                None => match implicit {
                    Some(value) => members.push((v.ident.clone(), value)),
                    None => diag.error(Spn::of(&v.ident), format!("`{}::{}` would follow i64::MAX: give it a value", e.ident, v.ident)),
                },
            }
        }
        if e.variants.is_empty() {
            diag.error(Spn::of(&e.ident), format!("`{}` has no members; an #[nki_enum] needs at least one", e.ident));
        }
        out.push(EnumDef { name: e.ident.clone(), members });
    }
    out
}

/// Each enum's name with its members' names, as the parser and checker know them.
pub fn enum_names(enums: &[EnumDef]) -> Vec<(String, Vec<String>)> {
    enums.iter().map(|e| (e.name.to_string(), e.members.iter().map(|(m, _)| m.to_string()).collect())).collect()
}

/// The value of an integer literal, possibly negated, that fits an `i64`.
fn int_literal(e: &syn::Expr) -> Option<i64> {
    match e {
        syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Int(i), .. }) if i.suffix().is_empty() || i.suffix() == "i64" => i.base10_parse().ok(),
        syn::Expr::Unary(syn::ExprUnary { op: syn::UnOp::Neg(_), expr, .. }) => match &**expr {
            syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Int(i), .. }) if i.suffix().is_empty() || i.suffix() == "i64" => {
                i.base10_parse::<i128>().ok().and_then(|v| i64::try_from(-v).ok())
            }
            _ => None,
        },
        syn::Expr::Paren(p) => int_literal(&p.expr),
        syn::Expr::Group(g) => int_literal(&g.expr),
        _ => None,
    }
}

/// Parses a kernel or helper function, whose types may name the bundles
/// `objects` and the enums `enums`.
pub fn parse_function(item: &syn::ItemFn, kind: FnKind, objects: &[ObjectDef], enums: &[EnumDef], diag: &mut Diagnostics) -> Function {
    let objects = objects.iter().map(|o| o.name.to_string()).collect();
    let cx = &mut Parser::new(diag, objects, enum_names(enums));
    let sig = &item.sig;
    let what = match kind {
        FnKind::Kernel => "an #[nki_kernel]",
        FnKind::Helper => "an #[nki_helper]",
    };
    if let Some(c) = &sig.constness {
        cx.error(Spn::of(c), format!("{what} function cannot be `const`"));
    }
    if let Some(a) = &sig.asyncness {
        cx.error(Spn::of(a), format!("{what} function cannot be `async`"));
    }
    if let Some(u) = &sig.unsafety {
        cx.error(Spn::of(u), format!("{what} function cannot be `unsafe`"));
    }
    if let Some(abi) = &sig.abi {
        cx.error(Spn::of(abi), format!("{what} function cannot have an ABI"));
    }
    if !sig.generics.params.is_empty() {
        cx.error(
            Spn::of(&sig.generics),
            format!("{what} function takes no generic parameters: shapes and dtypes are read at trace time with `.shape()` and `.dtype()`"),
        );
    }
    if let Some(v) = &sig.variadic {
        cx.error(Spn::of(v), "variadic functions are not supported");
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
            cx.error(Spn::of(a), format!("attribute not supported on {what} function (doc comments and #[allow] are)"));
        }
    }
    let mut params = Vec::new();
    for input in &sig.inputs {
        cx.start_statement();
        let syn::FnArg::Typed(pt) = input else {
            cx.error(Spn::of(input), format!("{what} function cannot take `self`"));
            continue;
        };
        let syn::Pat::Ident(id) = &*pt.pat else {
            cx.error(Spn::of(&pt.pat), "kernel parameters must be plain names");
            continue;
        };
        let mut default = None;
        let mut dtypes = Vec::new();
        let mut range = Vec::new();
        for a in &pt.attrs {
            if a.path().is_ident("range") {
                range = parse_range(a, cx);
            } else if !default_or_dtypes(a, &mut default, &mut dtypes, cx) {
                cx.error(
                    Spn::of(a),
                    "the parameter attributes are #[default(value)], the Python default, #[dtypes(float32, ...)], the dtypes a tensor accepts, and #[range(>= 0.0, < 1.0)], the values an int or float takes",
                );
            }
        }
        if let Some(ty) = parse_type(&pt.ty, cx) {
            let tensor = ty.holds_tensor();
            if !dtypes.is_empty() && !tensor {
                cx.error(Spn::of(&pt.ty), "#[dtypes(...)] applies to tensor parameters only");
                dtypes.clear();
            }
            if !range.is_empty() && !matches!(ty.item(), TypeAnn::Int(_) | TypeAnn::Float(_)) {
                cx.error(Spn::of(&pt.ty), "#[range(...)] applies to int and float parameters only");
                range.clear();
            }
            // A group is built by the caller: no literal stands for one.
            if let (TypeAnn::ReplicaGroup(_), Some(d)) = (&ty, &default) {
                cx.error(d.span, "a ReplicaGroup parameter has no default: the caller passes its ncc.ReplicaGroup");
                default = None;
            }
            // A kernel's tensor takes float data unless it declares otherwise.
            if tensor && dtypes.is_empty() && kind == FnKind::Kernel {
                dtypes = nki_spec::contract::FLOAT_DATA.to_vec();
            }
            params.push(Param { name: id.ident.clone(), ty, default, dtypes, range });
        }
    }
    let ret = match &sig.output {
        syn::ReturnType::Default => None,
        syn::ReturnType::Type(_, ty) => parse_type(ty, cx),
    };
    let body = stmt::parse_block(&item.block, cx);
    Function {
        kind,
        vis: item.vis.clone(),
        name: sig.ident.clone(),
        docs,
        params,
        ret,
        body,
        consts: Vec::new(),
        objects: Vec::new(),
        enums: Vec::new(),
        imports: Vec::new(),
    }
}

/// Reads `a` into `default` or `dtypes` when it is `#[default(value)]` or
/// `#[dtypes(float32, ...)]`, the attributes kernel parameters and bundle
/// fields both take; `false` for any other attribute.
fn default_or_dtypes(
    a: &syn::Attribute,
    default: &mut Option<crate::ast::Expr>,
    dtypes: &mut Vec<&'static str>,
    cx: &mut Parser<'_>,
) -> bool {
    if a.path().is_ident("default") {
        match a.parse_args::<syn::Expr>() {
            Ok(e) => *default = Some(parse_expr(&e, cx)),
            Err(e) => cx.push(e),
        }
    } else if a.path().is_ident("dtypes") {
        *dtypes = parse_dtypes(a, cx);
    } else {
        return false;
    }
    true
}

/// `#[range(>= 0.0, < 1.0)]`: the bounds of an int or float parameter, each a
/// comparison with a number literal.
fn parse_range(attr: &syn::Attribute, cx: &mut Parser<'_>) -> Vec<nki_spec::contract::Bound> {
    use nki_spec::contract::Bound;
    let bound = |input: syn::parse::ParseStream<'_>| -> syn::Result<Bound> {
        let make: fn(f64) -> Bound = if input.peek(syn::Token![>=]) {
            input.parse::<syn::Token![>=]>()?;
            Bound::Ge
        } else if input.peek(syn::Token![<=]) {
            input.parse::<syn::Token![<=]>()?;
            Bound::Le
        } else if input.peek(syn::Token![>]) {
            input.parse::<syn::Token![>]>()?;
            Bound::Gt
        } else if input.peek(syn::Token![<]) {
            input.parse::<syn::Token![<]>()?;
            Bound::Lt
        } else {
            return Err(input.error("a bound is `>=`, `>`, `<=` or `<` and a number, as in #[range(>= 0.0, < 1.0)]"));
        };
        let negative = input.parse::<Option<syn::Token![-]>>()?.is_some();
        let lit: syn::Lit = input.parse()?;
        let v = match &lit {
            syn::Lit::Int(i) => i.base10_parse::<i64>()? as f64,
            syn::Lit::Float(f) => f.base10_parse::<f64>()?,
            _ => return Err(syn::Error::new(lit.span(), "a bound is a number literal")),
        };
        if !v.is_finite() {
            return Err(syn::Error::new(lit.span(), "a bound is a finite number (this literal overflows f64)"));
        }
        Ok(make(if negative { -v } else { v }))
    };
    match attr.parse_args_with(|input: syn::parse::ParseStream<'_>| {
        syn::punctuated::Punctuated::<Bound, syn::Token![,]>::parse_terminated_with(input, bound)
    }) {
        Ok(b) if b.is_empty() => {
            cx.error(Spn::of(attr), "#[range(...)] lists at least one bound");
            Vec::new()
        }
        Ok(b) => b.into_iter().collect(),
        Err(e) => {
            cx.push(e);
            Vec::new()
        }
    }
}

/// `#[dtypes(float32, nl::bfloat16)]`: the `nl` dtypes a tensor parameter accepts.
fn parse_dtypes(attr: &syn::Attribute, cx: &mut Parser<'_>) -> Vec<&'static str> {
    let paths = match attr.parse_args_with(syn::punctuated::Punctuated::<syn::Path, syn::Token![,]>::parse_terminated) {
        Ok(p) => p,
        Err(e) => {
            cx.push(e);
            return Vec::new();
        }
    };
    let mut names = Vec::new();
    for path in &paths {
        let name = path.segments.last().map(|s| s.ident.to_string()).unwrap_or_default();
        match nki_spec::constants::implemented_dtypes().find(|d| *d == name) {
            Some(d) => names.push(d),
            None => {
                let hint = crate::diag::did_you_mean(&name, nki_spec::constants::implemented_dtypes())
                    .map(|s| format!("; did you mean `{s}`?"))
                    .unwrap_or_default();
                cx.error(Spn::of(path), format!("`{name}` is not an nl dtype{hint}"));
            }
        }
    }
    if names.is_empty() && paths.is_empty() {
        cx.error(Spn::of(attr), "#[dtypes(...)] lists at least one dtype");
    }
    names
}
