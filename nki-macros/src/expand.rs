//! The macro pipeline: parse → check → emit, with a stand-in item on errors.

use crate::ast::{EnumDef, FnKind, ObjectDef};
use crate::check::{self, Generation};
use crate::diag::Diagnostics;
use crate::emit::{python, rust};
use crate::parse::{check_token_nesting, is_param_group, parse_consts, parse_enums, parse_function, parse_objects, spread_params};
use proc_macro2::{Delimiter, Group, TokenStream, TokenTree};
use quote::ToTokens;
use syn::spanned::Spanned;

/// The items `#[nki_module]` passes to each function: constants, bundles, enums,
/// its own and those it imports from other modules.
#[derive(Default)]
struct ModuleItems {
    consts: Vec<syn::ItemConst>,
    structs: Vec<syn::ItemStruct>,
    /// The parameter groups (`#[nki_params]`), which only `#[spread]` reads.
    groups: Vec<syn::ItemStruct>,
    enums: Vec<syn::ItemEnum>,
    /// The imported ones among the above: name and declaring module.
    imports: Vec<(String, syn::Path)>,
}

impl ModuleItems {
    /// Adds a constant, bundle or enum; anything else is an error at it.
    fn push(&mut self, item: syn::Item) -> syn::Result<()> {
        match item {
            syn::Item::Const(c) => self.consts.push(c),
            syn::Item::Struct(s) if is_param_group(&s) => self.groups.push(s),
            syn::Item::Struct(s) => self.structs.push(s),
            syn::Item::Enum(e) => self.enums.push(e),
            other => return Err(syn::Error::new(other.span(), "`__module` holds constants, bundles and enums")),
        }
        Ok(())
    }
}

/// Reads `#[nki_kernel]` / `#[nki_kernel(target = "trn3")]`, and the constants,
/// bundles and enums `#[nki_module]` passes in as `__module { const ..; }`.
fn parse_attr(attr: TokenStream, diag: &mut Diagnostics) -> (Generation, ModuleItems) {
    let mut target = Generation::Trn2;
    let mut module = ModuleItems::default();
    if attr.is_empty() {
        return (target, module);
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
        } else if meta.path.is_ident("__module") {
            let content;
            syn::braced!(content in meta.input);
            while !content.is_empty() {
                module.push(content.parse::<syn::Item>()?)?;
            }
            Ok(())
        } else if meta.path.is_ident("__imports") {
            // `(crate::a::b) { items }` per module imported from.
            let content;
            syn::braced!(content in meta.input);
            while !content.is_empty() {
                let (path, items);
                syn::parenthesized!(path in content);
                let path: syn::Path = path.parse()?;
                syn::braced!(items in content);
                while !items.is_empty() {
                    let item: syn::Item = items.parse()?;
                    if let syn::Item::Const(syn::ItemConst { ident, .. })
                    | syn::Item::Struct(syn::ItemStruct { ident, .. })
                    | syn::Item::Enum(syn::ItemEnum { ident, .. }) = &item
                    {
                        module.imports.push((ident.to_string(), path.clone()));
                    }
                    module.push(item)?;
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
    (target, module)
}

/// `item` with its body (the last brace group) emptied: what is left of a function
/// whose body is nested too deeply to parse, enough for a stand-in.
fn without_body(item: &TokenStream) -> TokenStream {
    let mut tokens: Vec<TokenTree> = item.clone().into_iter().collect();
    if let Some(TokenTree::Group(body)) =
        tokens.iter_mut().rev().find(|t| matches!(t, TokenTree::Group(g) if g.delimiter() == Delimiter::Brace))
    {
        let mut empty = Group::new(Delimiter::Brace, TokenStream::new());
        empty.set_span(body.span());
        *body = empty;
    }
    tokens.into_iter().collect()
}

/// Whether `tokens` hold a path segment that is a Rust keyword (`nl::where`),
/// which rustc rejects, suggesting the raw identifier, before any macro runs.
fn has_keyword_path(tokens: &TokenStream) -> bool {
    let tokens: Vec<TokenTree> = tokens.clone().into_iter().collect();
    tokens.iter().enumerate().any(|(i, t)| match t {
        TokenTree::Group(g) => has_keyword_path(&g.stream()),
        TokenTree::Ident(id) => {
            i >= 2
                && matches!(&tokens[i - 1], TokenTree::Punct(p) if p.as_char() == ':')
                && matches!(&tokens[i - 2], TokenTree::Punct(p) if p.as_char() == ':')
                && syn::parse2::<syn::Ident>(id.to_token_stream()).is_err()
        }
        _ => false,
    })
}

/// The stand-in for a function whose body could not be parsed: its signature with
/// an empty body, reporting only `diag` (the body's own errors are rustc's).
fn expand_stand_in(
    kind: FnKind,
    signature: TokenStream,
    module: ModuleItems,
    objects: Vec<ObjectDef>,
    enums: Vec<EnumDef>,
    target: Generation,
    mut diag: Diagnostics,
) -> TokenStream {
    let Ok(mut item_fn) = syn::parse2::<syn::ItemFn>(signature) else {
        return diag.to_tokens();
    };
    let groups = spread_params(&mut item_fn, &module.structs, &module.groups, &mut diag);
    let mut quiet = Diagnostics::default();
    let mut f = parse_function(&item_fn, kind, &objects, &enums, &mut quiet);
    f.objects = objects;
    f.enums = enums;
    f.imports = module.imports;
    let info = check::check(&f, target, &mut quiet);
    let errors = diag.to_tokens();
    let stub = rust::emit(&f, &info, "", &[], true);
    quote::quote!(#errors #stub #groups)
}

/// Expands `#[nki_kernel]` (or `#[nki_helper]`) on `item`.
pub fn expand(kind: FnKind, attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut diag = Diagnostics::default();
    let (target, module) = match check_token_nesting(&attr) {
        Ok(()) => parse_attr(attr, &mut diag),
        Err(e) => {
            diag.push(e);
            (Generation::Trn2, ModuleItems::default())
        }
    };
    // Tokens nested past the bound are not handed to syn; a function whose
    // signature is still within it gets a stand-in, so callers see no cascade.
    let item = match check_token_nesting(&item) {
        Ok(()) => item,
        Err(e) => {
            diag.push(e);
            let signature = without_body(&item);
            if check_token_nesting(&signature).is_err() {
                return diag.to_tokens();
            }
            signature
        }
    };
    // The module's constants, bundles and enums were reported by `#[nki_module]`, once.
    let enums = parse_enums(&module.enums, &mut Diagnostics::default());
    let mut objects = parse_objects(&module.structs, &[], &enums, false, &mut Diagnostics::default());
    let mut quiet = Diagnostics::default();
    crate::check::check_objects(&objects, &enums, &mut quiet);
    if quiet.has_errors() {
        // Broken field defaults: callers give every field, so nothing cascades.
        objects.iter_mut().for_each(|o| o.defaults.iter_mut().for_each(|d| *d = None));
    }
    let mut item_fn: syn::ItemFn = match syn::parse2(item.clone()) {
        Ok(f) => f,
        Err(body_error) => {
            // A function whose body alone fails to parse: rustc has already reported
            // a keyword in a path (`nl::where`, with its `r#where` fix); anything
            // else is syn's error. The stand-in keeps callers from cascading.
            let signature = without_body(&item);
            if syn::parse2::<syn::ItemFn>(signature.clone()).is_ok() {
                let mut quiet = Diagnostics::default();
                if !has_keyword_path(&item) {
                    quiet.push(body_error);
                }
                return expand_stand_in(kind, signature, module, objects, enums, target, quiet);
            }
            let what = if kind == FnKind::Kernel { "#[nki_kernel]" } else { "#[nki_helper]" };
            let err = syn::Error::new(item.span(), format!("{what} applies to a function")).to_compile_error();
            return quote::quote!(#err #item);
        }
    };
    let groups = spread_params(&mut item_fn, &module.structs, &module.groups, &mut diag);
    let mut f = parse_function(&item_fn, kind, &objects, &enums, &mut diag);
    f.consts = parse_consts(&module.consts, &mut Diagnostics::default());
    f.objects = objects;
    f.enums = enums;
    f.imports = module.imports;
    let info = check::check(&f, target, &mut diag);
    if diag.has_errors() {
        let errors = diag.to_tokens();
        let stub = rust::emit(&f, &info, "", &[], true);
        return quote::quote!(#errors #stub #groups);
    }
    let (py, lines) = python::emit(&f, &info);
    let function = rust::emit(&f, &info, &py, &lines, false);
    quote::quote!(#function #groups)
}
