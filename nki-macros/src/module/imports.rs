//! Imports across `#[nki_module]`s: `use crate::a::b::{NAME, Bundle};` in one
//! module gives its kernels and helpers the constants, bundles and enums of the
//! `#[nki_module]` `crate::a::b`, as if declared beside them; the emitted Python
//! imports them from that module (`from .b import NAME, Bundle`).
//!
//! A proc macro sees only its own item, so the modules talk through macros:
//! every `#[nki_module]` defines `__nki_module_items!`, which hands its items
//! (what its own functions receive) to `__nki_import!` together with whatever
//! the caller passed. An importing module asks the first module it imports
//! from; each answer ([`Step`]) checks the names asked, then asks the next
//! module, and the last one expands the importing module with all it got.
//! Helper functions need none of this: a call is resolved by rustc, and the
//! callee's registration carries its Python module.
//!
//! Another crate's module is asked the same way, through the macro it exports
//! when declared `#[nki_module(export = name)]`: a `#[macro_export]` macro
//! lives at its crate's root, so `use other::a::name::Cfg;` asks
//! `other::__nki_module_items_name!` (rustc refuses a macro-expanded export
//! reached by a module path from its own crate, so the crate's own modules
//! keep asking the module's `__nki_module_items!`).

use crate::diag::Diagnostics;
use crate::parse::parse_consts;
use proc_macro2::{Delimiter, TokenStream, TokenTree};
use quote::quote;

/// Items imported from other modules, grouped by the path of the module that
/// declares them.
pub type Imported = Vec<(syn::Path, Vec<syn::Item>)>;

/// The names a module imports from one other module.
pub struct Wanted {
    module: syn::Path,
    names: Vec<syn::Ident>,
}

/// Crates whose items are never `#[nki_module]` items: an import from them
/// is left to rustc.
const NOT_DSL_CRATES: &[&str] = &["std", "core", "alloc", "nki", "nki_core", "nki_spec", "self", "super"];

/// The name under which a module declared `#[nki_module(export = name)]`
/// exports its items to other crates.
pub fn export_macro(name: &syn::Ident) -> syn::Ident {
    quote::format_ident!("__nki_module_items_{}", name)
}

/// Whether `name` is a constant's or a type's (`P_MAX`, `Cfg`), not a function's.
fn is_item_name(name: &syn::Ident) -> bool {
    name.to_string().chars().next().is_some_and(|c| c.is_ascii_uppercase())
}

fn path_text(path: &syn::Path) -> String {
    path.segments.iter().map(|s| s.ident.to_string()).collect::<Vec<_>>().join("::")
}

/// The constants and types `items` import by `use crate::..::NAME`, grouped by
/// module, in order. Functions (`snake_case`) are left to rustc.
pub fn wanted(items: &[syn::Item], diag: &mut Diagnostics) -> Vec<Wanted> {
    let mut out: Vec<Wanted> = Vec::new();
    for item in items {
        let syn::Item::Use(u) = item else { continue };
        if u.leading_colon.is_none() {
            walk(&u.tree, &mut Vec::new(), &mut out, diag);
        }
    }
    out
}

fn walk(tree: &syn::UseTree, prefix: &mut Vec<syn::Ident>, out: &mut Vec<Wanted>, diag: &mut Diagnostics) {
    // This crate's modules, and another crate's (whose exported macro answers).
    let from_crate = prefix.len() >= 2 && !NOT_DSL_CRATES.iter().any(|c| prefix[0] == *c);
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.clone());
            walk(&p.tree, prefix, out, diag);
            prefix.pop();
        }
        syn::UseTree::Group(g) => g.items.iter().for_each(|t| walk(t, prefix, out, diag)),
        syn::UseTree::Name(n) if from_crate && is_item_name(&n.ident) => {
            let module: syn::Path =
                syn::Path { leading_colon: None, segments: prefix.iter().map(|i| syn::PathSegment::from(i.clone())).collect() };
            match out.iter_mut().find(|w| path_text(&w.module) == path_text(&module)) {
                Some(w) => w.names.push(n.ident.clone()),
                None => out.push(Wanted { module, names: vec![n.ident.clone()] }),
            }
        }
        syn::UseTree::Rename(r) if from_crate && is_item_name(&r.ident) => diag.error(
            r.rename.span(),
            format!("import `{}` under its own name: the emitted Python imports it from its module as `{}`", r.ident, r.ident),
        ),
        _ => {}
    }
}

/// Asks the module of `wanted[0]` for its items; the answer carries the rest.
pub fn ask(wanted: &[Wanted], got: &[(syn::Path, Vec<syn::Item>)], module: TokenStream) -> TokenStream {
    let Some((first, rest)) = wanted.split_first() else { return module };
    let (path, names) = (&first.module, &first.names);
    // rustc's error for a module that is not an #[nki_module] points at the `use`.
    let span = names.first().map_or_else(proc_macro2::Span::call_site, syn::Ident::span);
    let mac = match path.segments.first() {
        Some(krate) if krate.ident != "crate" => {
            // Another crate's module: the macro at that crate's root, named by the module.
            let (krate, module) = (&krate.ident, path.segments.last().map_or(&krate.ident, |s| &s.ident));
            let mac = export_macro(module);
            let mac = syn::Ident::new(&mac.to_string(), span);
            quote!(::#krate::#mac)
        }
        _ => {
            let mac = syn::Ident::new("__nki_module_items", span);
            quote!(#path::#mac)
        }
    };
    let pending = rest.iter().map(|w| {
        let (p, n) = (&w.module, &w.names);
        quote!((#p) [#(#n)*])
    });
    let got = got.iter().map(|(p, items)| quote!((#p) { #(#items)* }));
    quote!(#mac! { (#path) [#(#names)*] { #(#got)* } [#(#pending)*] #module })
}

/// `__nki_module_items!` of a module whose functions receive `bare`: the answer
/// to a module importing from it; with `export`, the same answer for other
/// crates at the crate's root.
pub fn answer_macro(bare: &[TokenStream], export: Option<&syn::Ident>) -> Vec<syn::Item> {
    let mut items: Vec<syn::Item> = vec![
        syn::parse_quote! {
            #[doc(hidden)]
            #[allow(unused_macros)]
            macro_rules! __nki_module_items {
                ($($rest:tt)*) => { ::nki::__nki_import! { { #(#bare)* } $($rest)* } };
            }
        },
        syn::parse_quote! {
            #[doc(hidden)]
            #[allow(unused_imports)]
            pub(crate) use __nki_module_items;
        },
    ];
    if let Some(name) = export {
        let mac = export_macro(name);
        items.push(syn::parse_quote! {
            #[doc(hidden)]
            #[macro_export]
            macro_rules! #mac {
                ($($rest:tt)*) => { ::nki::__nki_import! { { #(#bare)* } $($rest)* } };
            }
        });
    }
    items
}

/// The module declaring `name`, among those `imported` from.
pub fn declared_in<'p>(imported: &'p [(syn::Path, Vec<syn::Item>)], name: &syn::Ident) -> Option<&'p syn::Path> {
    imported.iter().find(|(_, items)| items.iter().any(|i| item_name(i) == Some(name))).map(|(p, _)| p)
}

fn item_name(item: &syn::Item) -> Option<&syn::Ident> {
    match item {
        syn::Item::Const(c) => Some(&c.ident),
        syn::Item::Struct(s) => Some(&s.ident),
        syn::Item::Enum(e) => Some(&e.ident),
        _ => None,
    }
}

/// One module's answer: `{ its items } (its path) [names asked] { got so far }
/// [modules still to ask] the importing module`.
pub struct Step {
    items: Vec<syn::Item>,
    module: syn::Path,
    names: Vec<syn::Ident>,
    got: Imported,
    pending: Vec<Wanted>,
    rest: TokenStream,
}

fn group(t: Option<TokenTree>, d: Delimiter) -> Option<TokenStream> {
    match t {
        Some(TokenTree::Group(g)) if g.delimiter() == d => Some(g.stream()),
        _ => None,
    }
}

/// `(path) { items }` or `(path) [names]` pairs.
fn pairs(tokens: TokenStream, d: Delimiter) -> Option<Vec<(syn::Path, TokenStream)>> {
    let mut it = tokens.into_iter();
    let mut out = Vec::new();
    while let Some(t) = it.next() {
        let path: syn::Path = syn::parse2(group(Some(t), Delimiter::Parenthesis)?).ok()?;
        out.push((path, group(it.next(), d)?));
    }
    Some(out)
}

fn items(tokens: TokenStream) -> Option<Vec<syn::Item>> {
    syn::parse2::<syn::File>(tokens).ok().map(|f| f.items)
}

fn idents(tokens: TokenStream) -> Option<Vec<syn::Ident>> {
    tokens.into_iter().map(|t| if let TokenTree::Ident(i) = t { Some(i) } else { None }).collect()
}

impl Step {
    pub fn parse(input: TokenStream, diag: &mut Diagnostics) -> Option<Step> {
        let mut it = input.into_iter();
        let step = (|| {
            let items = items(group(it.next(), Delimiter::Brace)?)?;
            let module = syn::parse2(group(it.next(), Delimiter::Parenthesis)?).ok()?;
            let names = idents(group(it.next(), Delimiter::Bracket)?)?;
            let got = pairs(group(it.next(), Delimiter::Brace)?, Delimiter::Brace)?
                .into_iter()
                .map(|(p, t)| Some((p, self::items(t)?)))
                .collect::<Option<Vec<_>>>()?;
            let pending = pairs(group(it.next(), Delimiter::Bracket)?, Delimiter::Bracket)?
                .into_iter()
                .map(|(module, t)| Some(Wanted { module, names: idents(t)? }))
                .collect::<Option<Vec<_>>>()?;
            Some(Step { items, module, names, got, pending, rest: TokenStream::new() })
        })();
        match step {
            Some(mut s) => {
                s.rest = it.collect();
                Some(s)
            }
            None => {
                diag.error(proc_macro2::Span::call_site(), "`__nki_import!` is a step of #[nki_module]'s imports, not for direct use");
                None
            }
        }
    }

    /// Checks that every name asked is a constant, bundle or enum kernels can
    /// use: what was got so far with this module's items, the modules still
    /// to ask, the importing module.
    pub fn answer(self, diag: &mut Diagnostics) -> (Imported, Vec<Wanted>, TokenStream) {
        let path = path_text(&self.module);
        let mut mine = Vec::new();
        for name in &self.names {
            match self.items.iter().find(|i| item_name(i) == Some(name)) {
                None => diag.error(
                    name.span(),
                    format!("`{name}` is not a constant, #[nki_object] or #[nki_enum] of the #[nki_module] `{path}`: kernels can import only those"),
                ),
                Some(syn::Item::Const(c)) if parse_consts(std::slice::from_ref(c), &mut Diagnostics::default()).is_empty() => diag.error(
                    name.span(),
                    format!("`{path}::{name}` is not a constant kernels can use: it must be an i64, f64, bool, Dtype or &str holding a literal"),
                ),
                Some(item) => mine.push(item.clone()),
            }
        }
        let mut got = self.got;
        if !mine.is_empty() {
            got.push((self.module, mine));
        }
        (got, self.pending, self.rest)
    }
}
