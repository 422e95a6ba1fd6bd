//! `#[nki_module]`: the module-level constants of a group of kernels.
//!
//! A proc macro sees only the item it is attached to, so the module around the
//! kernels is the item: every `const` in it (of a kernel type: `i64`, `f64`,
//! `bool`, `Dtype`, holding a literal) becomes a Python module constant,
//! registered for the package, and each `#[nki_kernel]` / `#[nki_helper]` in it
//! receives the constants (as `__module { .. }`) so its body can use them by name
//! with their types and values.

mod imports;

use crate::ast::{ModuleConst, ObjectDef};
use crate::check::{check_consts, check_objects};
use crate::diag::Diagnostics;
use crate::emit::{
    python,
    rust::{const_registration, typed_default},
};
use crate::parse::{PARAMS_ATTR, is_param_group, parse_consts, parse_enums, parse_objects};
use proc_macro2::TokenStream;
use quote::quote;
use syn::spanned::Spanned;

/// The lines of an item's doc comment.
fn doc_lines(attrs: &[syn::Attribute]) -> Vec<String> {
    attrs
        .iter()
        .filter_map(|a| match &a.meta {
            syn::Meta::NameValue(nv) if nv.path.is_ident("doc") => match &nv.value {
                syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) => Some(s.value()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// Expands `#[nki_module]` on `item`. A module that imports constants, bundles
/// or enums of other `#[nki_module]`s first asks each of them for its items
/// (see [`import_step`]); the module is expanded once all have answered.
pub fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut diag = Diagnostics::default();
    let export = export_name(attr, &mut diag);
    let mut m: syn::ItemMod = match syn::parse2(item.clone()) {
        Ok(m) => m,
        Err(_) => {
            let err = syn::Error::new(item.span(), "#[nki_module] applies to a module").to_compile_error();
            return quote!(#err #item);
        }
    };
    let Some((_, items)) = &m.content else {
        let err = syn::Error::new(m.span(), "#[nki_module] applies to an inline module, `mod name { .. }`").to_compile_error();
        return quote!(#err #m);
    };
    let wanted = imports::wanted(items, &mut diag);
    // The export travels with the module through the imports' steps.
    if let Some(name) = export {
        m.attrs.push(syn::parse_quote!(#[nki_module_export(#name)]));
    }
    if wanted.is_empty() {
        return expand_with(m, &[], diag);
    }
    let errors = diag.to_tokens();
    let ask = imports::ask(&wanted, &[], quote!(#m));
    quote!(#errors #ask)
}

/// The last step of `#[nki_module]`'s imports, `__nki_import!`: one module's
/// answer. Checks the names asked of it, then asks the next module or, when
/// none is left, expands the importing module with everything imported.
pub fn import_step(input: TokenStream) -> TokenStream {
    let mut diag = Diagnostics::default();
    let Some(step) = imports::Step::parse(input, &mut diag) else {
        return diag.to_tokens();
    };
    let (got, pending, module) = step.answer(&mut diag);
    if !pending.is_empty() {
        let errors = diag.to_tokens();
        let ask = imports::ask(&pending, &got, module);
        return quote!(#errors #ask);
    }
    match syn::parse2::<syn::ItemMod>(module.clone()) {
        Ok(m) if m.content.is_some() => expand_with(m, &got, diag),
        _ => {
            let errors = diag.to_tokens();
            quote!(#errors #module)
        }
    }
}

/// The `name` of `#[nki_module(export = name)]` (none for `#[nki_module]`).
fn export_name(attr: TokenStream, diag: &mut Diagnostics) -> Option<syn::Ident> {
    if attr.is_empty() {
        return None;
    }
    let span = attr.span();
    match syn::parse2::<syn::MetaNameValue>(attr) {
        Ok(syn::MetaNameValue { path, value: syn::Expr::Path(p), .. }) if path.is_ident("export") && p.path.get_ident().is_some() => {
            p.path.get_ident().cloned()
        }
        _ => {
            diag.error(
                span,
                "#[nki_module] takes no arguments but `export = name`: other crates then import its items by a path ending in `name`",
            );
            None
        }
    }
}

/// Expands the `#[nki_module]` `m` with the items `imported` from other modules
/// (each with the path of the module that declares it).
fn expand_with(mut m: syn::ItemMod, imported: &[(syn::Path, Vec<syn::Item>)], mut diag: Diagnostics) -> TokenStream {
    let mut export = None;
    m.attrs.retain(|a| {
        let marker = a.path().is_ident("nki_module_export");
        if marker {
            export = a.parse_args::<syn::Ident>().ok();
        }
        !marker
    });
    let Some((_, items)) = &mut m.content else { return quote!(#m) };
    let (mut imported_enums, mut imported_structs) = (Vec::new(), Vec::new());
    for (_, list) in imported {
        for item in list {
            match item {
                syn::Item::Enum(e) => imported_enums.push(e.clone()),
                // A parameter group is no bundle: no field holds one.
                syn::Item::Struct(s) if is_param_group(s) => {}
                syn::Item::Struct(s) => imported_structs.push(s.ident.to_string()),
                _ => {}
            }
        }
    }
    let consts: Vec<syn::ItemConst> = items
        .iter()
        .filter_map(|i| match i {
            syn::Item::Const(c) => Some(c.clone()),
            _ => None,
        })
        .collect();
    // One at a time, so that a constant whose type is refused drops out alone.
    let parsed: Vec<(&syn::ItemConst, ModuleConst)> =
        consts.iter().filter_map(|c| parse_consts(std::slice::from_ref(c), &mut diag).pop().map(|k| (c, k))).collect();
    check_consts(&parsed.iter().map(|(_, k)| k).collect::<Vec<_>>(), &mut diag);
    // The enums: `#[nki_enum]` enums, which stay Rust enums (copyable); bundle
    // fields may hold them.
    let mut enum_items: Vec<syn::ItemEnum> = Vec::new();
    for item in items.iter_mut() {
        let syn::Item::Enum(e) = item else { continue };
        let before = e.attrs.len();
        e.attrs.retain(|a| a.path().segments.last().is_none_or(|p| p.ident != "nki_enum"));
        if e.attrs.len() != before {
            enum_items.push(e.clone());
            // Kernels copy and compare members: the derives the enum lacks.
            let derived: Vec<String> = e
                .attrs
                .iter()
                .filter(|a| a.path().is_ident("derive"))
                .filter_map(|a| a.parse_args_with(syn::punctuated::Punctuated::<syn::Path, syn::Token![,]>::parse_terminated).ok())
                .flatten()
                .filter_map(|p| p.segments.last().map(|s| s.ident.to_string()))
                .collect();
            let missing = ["Clone", "Copy", "Debug", "PartialEq", "Eq"]
                .into_iter()
                .filter(|d| !derived.iter().any(|x| x == d))
                .map(|d| syn::Ident::new(d, proc_macro2::Span::call_site()));
            e.attrs.push(syn::parse_quote!(#[derive(#(#missing),*)]));
            // Python's member names are the variants' names, verbatim (`GELU_Tanh_Approx`).
            e.attrs.push(syn::parse_quote!(#[allow(non_camel_case_types)]));
        }
    }
    let enums = parse_enums(&enum_items, &mut diag);
    // Bundles' fields may hold imported enums and bundles, checked where declared.
    let all_enums: Vec<crate::ast::EnumDef> = parse_enums(&imported_enums, &mut Diagnostics::default())
        .into_iter()
        .chain(parse_enums(&enum_items, &mut Diagnostics::default()))
        .collect();
    // The bundles: `#[nki_object]` structs, which stay Rust structs (cloneable),
    // and the parameter groups: `#[nki_params]` structs, which `#[spread]` reads.
    let (mut structs, mut groups): (Vec<syn::ItemStruct>, Vec<syn::ItemStruct>) = (Vec::new(), Vec::new());
    for item in items.iter_mut() {
        let syn::Item::Struct(s) = item else { continue };
        let group = take_marker(s, PARAMS_ATTR);
        if !group && !take_marker(s, "nki_object") {
            continue;
        }
        // The parser reads the fields' attributes from this copy (a bundle's
        // `#[default(..)]`s reach Rust as an `impl Default` below).
        if group {
            groups.push(s.clone())
        } else {
            structs.push(s.clone())
        }
        // Rust keeps the fields' docs; the parser reports any other attribute.
        // A tensor field declared in its memory space (`Hbm`) is a tensor.
        for f in s.fields.iter_mut() {
            f.attrs.retain(|a| a.path().is_ident("doc"));
            spaces_to_tensor(&mut f.ty, crate::bounds::MAX_NESTING);
        }
        // A bundle is a value kernels copy; a group names parameters, and nothing builds it.
        s.attrs.push(if group { syn::parse_quote!(#[allow(dead_code)]) } else { syn::parse_quote!(#[derive(Clone, Debug)]) });
    }
    let objects = parse_objects(&structs, &imported_structs, &all_enums, false, &mut diag);
    // A group's fields take a bundle's attributes, reported here once.
    parse_objects(&groups, &imported_structs, &all_enums, true, &mut diag);
    check_objects(&objects, &all_enums, &mut diag);
    // Each function gets the constants and bundles without their docs and attributes.
    let bare: Vec<TokenStream> = consts
        .iter()
        .map(|c| {
            let (name, ty, value) = (&c.ident, &c.ty, &c.expr);
            quote!(const #name: #ty = #value;)
        })
        .chain(structs.iter().map(|s| bare_struct(s, quote!())))
        // The parameter groups, marked: `#[spread]` reads them, nothing registers them.
        .chain(groups.iter().map(|s| {
            let marker = syn::Ident::new(PARAMS_ATTR, proc_macro2::Span::call_site());
            bare_struct(s, quote!(#[#marker]))
        }))
        .chain(enum_items.iter().map(|e| {
            let (name, variants) = (
                &e.ident,
                e.variants.iter().map(|v| {
                    let (n, d) = (&v.ident, v.discriminant.as_ref().map(|(eq, d)| quote!(#eq #d)));
                    quote!(#n #d)
                }),
            );
            quote!(enum #name { #(#variants),* })
        }))
        .collect();
    // What other modules import: this module's own items, as functions get them.
    items.extend(imports::answer_macro(&bare, export.as_ref()));
    let imported_args = imported.iter().map(|(path, list)| quote!((#path) { #(#list)* }));
    let imported_args = quote!(__imports { #(#imported_args)* });
    for item in items.iter_mut() {
        let syn::Item::Fn(f) = item else { continue };
        for a in &mut f.attrs {
            let is_nki = a.path().segments.last().is_some_and(|s| s.ident == "nki_kernel" || s.ident == "nki_helper");
            if !is_nki {
                continue;
            }
            let path = a.path().clone();
            let args = match &a.meta {
                syn::Meta::List(l) => {
                    let t = &l.tokens;
                    quote!(#t, __module { #(#bare)* }, #imported_args)
                }
                _ => quote!(__module { #(#bare)* }, #imported_args),
            };
            *a = syn::parse_quote!(#[#path(#args)]);
        }
    }
    for (c, k) in &parsed {
        let docs: String = doc_lines(&c.attrs).iter().map(|l| format!("#{l}\n")).collect();
        let source = format!("{docs}{}", python::module_const(k));
        items.push(registration(&c.ident, quote!(Constant), &source, &[]));
    }
    for (s, o) in structs.iter().zip(&objects) {
        let field_docs: Vec<Vec<String>> = s.fields.iter().map(|f| doc_lines(&f.attrs)).collect();
        let source = python::object_class(o, &doc_lines(&s.attrs), &field_docs);
        items.push(registration(&s.ident, quote!(Object), &source, &field_types(o, imported)));
        items.push(as_arg_impl(&s.ident));
        // A broken default was reported above; a stand-in would only repeat it.
        if let Some(item) = default_impl(o).filter(|_| !diag.has_errors()) {
            items.push(item);
        }
    }
    for (item, e) in enum_items.iter().zip(&enums) {
        let member_docs: Vec<Vec<String>> = item.variants.iter().map(|v| doc_lines(&v.attrs)).collect();
        let source = python::enum_class(e, &doc_lines(&item.attrs), &member_docs);
        items.push(registration(&item.ident, quote!(Enum), &source, &[]));
        items.push(py_enum_impl(item));
    }
    let errors = diag.to_tokens();
    quote!(#errors #m)
}

/// Rewrites the memory-space tensor types of a bundle field (`Hbm`,
/// `Option<Hbm>`), which only the DSL knows, to the Rust tensor, down to
/// `depth` levels of generic arguments (the parser reports deeper types).
/// Removes the attribute `marker` (by its last path segment) from `s`; whether
/// `s` had it.
fn take_marker(s: &mut syn::ItemStruct, marker: &str) -> bool {
    let before = s.attrs.len();
    s.attrs.retain(|a| a.path().segments.last().is_none_or(|p| p.ident != marker));
    s.attrs.len() != before
}

/// A bundle or a group as the functions get it: its fields with the
/// attributes the parser reads, after `marker`.
fn bare_struct(s: &syn::ItemStruct, marker: TokenStream) -> TokenStream {
    let name = &s.ident;
    let fields = s.fields.iter().map(|f| {
        let (n, t) = (&f.ident, &f.ty);
        let attrs = f.attrs.iter().filter(|a| ["default", "dtypes", "range"].iter().any(|k| a.path().is_ident(k)));
        quote!(#(#attrs)* #n: #t)
    });
    quote!(#marker struct #name { #(#fields),* })
}

fn spaces_to_tensor(ty: &mut syn::Type, depth: usize) {
    let syn::Type::Path(p) = ty else { return };
    if depth == 0 {
        return;
    }
    let Some(seg) = p.path.segments.last_mut() else { return };
    match &mut seg.arguments {
        syn::PathArguments::None if p.qself.is_none() && ["Hbm", "Sbuf", "Psum"].iter().any(|s| seg.ident == s) => {
            *ty = syn::parse_quote!(::nki::Tensor);
        }
        syn::PathArguments::AngleBracketed(a) => a.args.iter_mut().for_each(|g| {
            if let syn::GenericArgument::Type(t) = g {
                spaces_to_tensor(t, depth - 1);
            }
        }),
        _ => {}
    }
}

/// A bundle a call returns, passed straight to a helper (`apply(t, make(..))`):
/// the macro cannot type the result, so the callee's parameter, a bundle by
/// reference, picks this conversion as it does a tensor's.
fn as_arg_impl(name: &syn::Ident) -> syn::Item {
    syn::parse_quote! {
        impl<'a> ::nki::__rt::AsArg<'a, &'a #name> for #name {
            fn as_arg(&'a self) -> &'a #name {
                self
            }
        }
    }
}

/// `impl nki::emit::PyEnum` of an `#[nki_enum]`: its Python class and members
/// (its plain variants; one holding data was reported, and the wildcard arm
/// keeps it from cascading).
fn py_enum_impl(e: &syn::ItemEnum) -> syn::Item {
    let (name, class) = (&e.ident, e.ident.to_string());
    let members: Vec<&syn::Ident> = e.variants.iter().filter(|v| matches!(v.fields, syn::Fields::Unit)).map(|v| &v.ident).collect();
    let rest = (members.len() != e.variants.len()).then(|| quote!(_ => "",));
    let names = members.iter().map(|m| m.to_string());
    syn::parse_quote! {
        impl ::nki::emit::PyEnum for #name {
            const CLASS: &'static str = #class;
            const MEMBERS: &'static [&'static str] = &[#(#names),*];
            const ALL: &'static [Self] = &[#(#name::#members),*];
            fn member(self) -> &'static str {
                match self {
                    #(#name::#members => ::core::stringify!(#members),)*
                    #rest
                }
            }
        }
    }
}

/// `impl Default` of a bundle whose every field has a `#[default(..)]`: the
/// dataclass's defaults, in Rust.
fn default_impl(o: &ObjectDef) -> Option<syn::Item> {
    let fields = o
        .fields
        .iter()
        .zip(&o.defaults)
        .map(|((n, t), d)| {
            let v = typed_default(d.as_ref()?, t);
            Some(quote!(#n: #v))
        })
        .collect::<Option<Vec<_>>>()?;
    let name = &o.name;
    Some(syn::parse_quote! {
        impl ::core::default::Default for #name {
            /// The dataclass's defaults.
            fn default() -> Self {
                #name { #(#fields),* }
            }
        }
    })
}

/// The registrations of the bundles and enums the fields of `o` hold: the
/// Python defines (or imports) them before the dataclass.
fn field_types(o: &ObjectDef, imported: &[(syn::Path, Vec<syn::Item>)]) -> Vec<TokenStream> {
    let mut names: Vec<&syn::Ident> = Vec::new();
    for (_, t) in &o.fields {
        crate::emit::rust::bundles_in(t, &mut names);
    }
    names.dedup();
    names
        .into_iter()
        .map(|name| {
            let reg = const_registration(name);
            match imports::declared_in(imported, name) {
                Some(path) => quote!(&#path::#reg),
                None => quote!(&#reg),
            }
        })
        .collect()
}

/// The `nki emit` registration of a module constant or parameter bundle named
/// `ident`, of `FunctionKind::<kind>`, emitted as `source`, after `deps`.
fn registration(ident: &syn::Ident, kind: TokenStream, source: &str, deps: &[TokenStream]) -> syn::Item {
    let (reg, name) = (const_registration(ident), ident.to_string());
    syn::parse_quote! {
        /// Registration of this module item for `nki emit`.
        #[doc(hidden)]
        pub static #reg: ::nki::emit::FunctionInfo = ::nki::emit::FunctionInfo {
            deps: &[#(#deps),*],
            ..::nki::emit::FunctionInfo::item(
                ::nki::emit::FunctionKind::#kind,
                #name,
                #source,
                ::core::module_path!(),
                ::core::file!(),
            )
        };
    }
}
