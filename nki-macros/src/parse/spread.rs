//! Parameter groups: `#[spread] name: Bundle` stands for the fields of an
//! `#[nki_object]` bundle as parameters of their own, in the bundle's order,
//! with its fields' `#[default]`s and `#[dtypes]`; the body starts by building
//! `name` from them (`_` builds nothing). `#[spread(prefix = "rope_")]`
//! names each parameter with a prefix before its field's name, and
//! `#[spread(field = param)]` names one field's parameter outright: the
//! library's signatures read one bundle twice (`rmsnorm_QK_pre_rope_eps`,
//! `rmsnorm_QK_post_rope_eps`) or name a field otherwise than its bundle does.
//! `#[spread(from = a, to = b)] _: Bundle` declares the run of fields `a` to
//! `b` only (bound to `_`): a signature that interrupts a bundle's fields
//! with another parameter spreads it in two parts.
//!
//! Library kernels repeat long drop-in signatures (the MoE kernels share some
//! twenty parameters); a group declares a run of them once. The rewrite is of
//! the Rust function itself, before parsing, so the Python `def`, the Rust
//! `Call`, the registry and every check see plain parameters.

use crate::ast::Spn;
use crate::diag::Diagnostics;
use proc_macro2::TokenStream;
use quote::quote;

/// The attribute that marks a parameter group.
const SPREAD: &str = "spread";

/// The attribute that declares a struct a parameter group (`#[nki_params]`),
/// kept on the bare struct `#[nki_module]` passes its functions and importers.
pub const PARAMS_ATTR: &str = "nki_params";

/// Whether a struct `#[nki_module]` passed along is a parameter group.
pub fn is_param_group(s: &syn::ItemStruct) -> bool {
    s.attrs.iter().any(|a| a.path().is_ident(PARAMS_ATTR))
}

/// Rewrites every `#[spread]` parameter of `item` into the fields of its bundle
/// (one of `structs`, the bundles the module passes in) and prepends the
/// binding of each named group to the body. Returns an item naming each
/// group's type, so its import stays used where no binding reads it.
pub fn spread_params(
    item: &mut syn::ItemFn,
    structs: &[syn::ItemStruct],
    param_groups: &[syn::ItemStruct],
    diag: &mut Diagnostics,
) -> TokenStream {
    if !item.sig.inputs.iter().any(|a| matches!(a, syn::FnArg::Typed(pt) if is_spread(pt))) {
        return TokenStream::new();
    }
    let mut groups: Vec<syn::Type> = Vec::new();
    let mut inputs = syn::punctuated::Punctuated::<syn::FnArg, syn::Token![,]>::new();
    let mut bindings: Vec<syn::Stmt> = Vec::new();
    // The parameters' names so far, plain and spread.
    let mut seen: Vec<String> = Vec::new();
    for input in std::mem::take(&mut item.sig.inputs) {
        let syn::FnArg::Typed(pt) = &input else {
            inputs.push(input);
            continue;
        };
        if !is_spread(pt) {
            let fresh = match &*pt.pat {
                syn::Pat::Ident(id) => declare(&mut seen, &id.ident, Spn::of(&id.ident), diag),
                _ => true,
            };
            if fresh {
                inputs.push(input);
            }
            continue;
        }
        let naming = pt.attrs.iter().find(|a| a.path().is_ident(SPREAD)).map(|a| naming(a, diag)).unwrap_or_default();
        if let Some(a) = pt.attrs.iter().find(|a| !a.path().is_ident(SPREAD)) {
            diag.error(Spn::of(a), "a #[spread] group takes its fields' attributes from the bundle: it has no others");
        }
        let (bundle, group) = match (bundle_of(&pt.ty, structs), bundle_of(&pt.ty, param_groups)) {
            (Some(b), _) => (b, false),
            (None, Some(g)) => (g, true),
            (None, None) => {
                diag.error(
                    Spn::of(&pt.ty),
                    "#[spread] takes an #[nki_object] bundle of this module or one it imports, or an #[nki_params] group of this module, by its name",
                );
                continue;
            }
        };
        groups.push((*pt.ty).clone());
        // The fields are named where the group is: a bundle imported through
        // a `macro_rules!` answer carries its hygiene, and the body could not
        // read a parameter named with it.
        let at = syn::spanned::Spanned::span(&pt.ty);
        let Some(run) = naming.run(bundle, diag) else { continue };
        let fields: Vec<(&syn::Field, syn::Ident)> = run
            .iter()
            .copied()
            .filter_map(|f| {
                let field = f.ident.as_ref()?;
                let Some(mut name) = naming.param(field) else {
                    diag.error(Spn::of(&pt.ty), format!("the prefix makes field `{field}`'s parameter a Rust keyword"));
                    return None;
                };
                name.set_span(at);
                Some((f, name))
            })
            .collect();
        for (field, _) in naming.renames.iter().filter(|(field, _)| !run.iter().any(|f| f.ident.as_ref() == Some(field))) {
            diag.error(Spn::of(field), format!("`{}` has no field `{field}` in this group to name", bundle.ident));
        }
        for (f, name) in &fields {
            let (attrs, ty) = (&f.attrs, &f.ty);
            // A repeated name is dropped: one error, no cascade from rustc.
            if declare(&mut seen, name, Spn::of(&pt.ty), diag) {
                inputs.push(syn::parse_quote!(#(#attrs)* #name: #ty));
            }
        }
        match &*pt.pat {
            // A field without its parameter was reported: no binding to cascade from.
            _ if fields.len() < run.len() => {}
            syn::Pat::Wild(_) => {}
            syn::Pat::Ident(id) if group => diag
                .error(Spn::of(id), format!("`{}` is a parameter group (#[nki_params]), not a bundle: it is spread as `_`", bundle.ident)),
            syn::Pat::Ident(id) if run.len() < bundle.fields.len() => diag.error(
                Spn::of(id),
                format!("a group of part of `{}`'s fields binds `_`: a bundle is not built from part of its fields", bundle.ident),
            ),
            syn::Pat::Ident(id) if id.by_ref.is_none() && id.subpat.is_none() => {
                let (binding, class) = (&id.ident, &bundle.ident);
                let names = fields.iter().map(|(_, n)| n);
                let members = fields.iter().map(|(f, _)| &f.ident);
                bindings.push(syn::parse_quote!(let #binding = #class { #(#members: #names),* };));
            }
            other => {
                diag.error(Spn::of(other), "a #[spread] group is bound to a plain name, or to `_` when the body reads only its fields")
            }
        }
    }
    item.sig.inputs = inputs;
    if !bindings.is_empty() {
        let rest = std::mem::take(&mut item.block.stmts);
        item.block.stmts = bindings.into_iter().chain(rest).collect();
    }
    quote! {
        const _: ( #(::core::marker::PhantomData<#groups>,)* ) = ( #(::core::marker::PhantomData::<#groups>,)* );
    }
}

/// Which of a bundle's fields a group declares (`from`, `to`: a run of them,
/// both ends included) and how it names their parameters: `prefix` before
/// each field's name, or a name of its own for a renamed field.
#[derive(Default)]
struct Naming {
    prefix: String,
    renames: Vec<(syn::Ident, syn::Ident)>,
    from: Option<syn::Ident>,
    to: Option<syn::Ident>,
}

impl Naming {
    /// The fields of `bundle` the group declares; `None` (reported) when an
    /// end names no field or the run is empty.
    fn run<'b>(&self, bundle: &'b syn::ItemStruct, diag: &mut Diagnostics) -> Option<Vec<&'b syn::Field>> {
        let fields: Vec<&syn::Field> = bundle.fields.iter().collect();
        if fields.is_empty() && self.from.is_none() && self.to.is_none() {
            return Some(fields);
        }
        let mut position = |end: &Option<syn::Ident>, default: usize| match end {
            None => Some(default),
            Some(name) => {
                let at = fields.iter().position(|f| f.ident.as_ref() == Some(name));
                if at.is_none() {
                    diag.error(Spn::of(name), format!("`{}` has no field `{name}`", bundle.ident));
                }
                at
            }
        };
        let (first, last) = (position(&self.from, 0)?, position(&self.to, fields.len().saturating_sub(1))?);
        if first > last {
            let at = self.to.as_ref().map_or_else(|| Spn::of(&bundle.ident), Spn::of);
            diag.error(at, format!("`{}`'s fields from `from` to `to` are none: `to` comes before `from`", bundle.ident));
            return None;
        }
        fields.get(first..=last).map(<[_]>::to_vec)
    }

    /// The parameter that stands for `field`; `None` when the prefix makes
    /// its name a keyword.
    fn param(&self, field: &syn::Ident) -> Option<syn::Ident> {
        match self.renames.iter().find(|(f, _)| f == field) {
            Some((_, param)) => Some(param.clone()),
            None if self.prefix.is_empty() => Some(field.clone()),
            None => syn::parse_str(&format!("{}{}", self.prefix, syn::ext::IdentExt::unraw(field))).ok(),
        }
    }
}

/// Reads the arguments of `#[spread(...)]`: `prefix = "text"` and
/// `field = param` pairs (none for a bare `#[spread]`).
fn naming(attr: &syn::Attribute, diag: &mut Diagnostics) -> Naming {
    let mut naming = Naming::default();
    if matches!(attr.meta, syn::Meta::Path(_)) {
        return naming;
    }
    const FORM: &str = "#[spread] takes `from = field`, `to = field`, `prefix = \"text\"` and `field = parameter` pairs";
    let pairs = match attr.parse_args_with(syn::punctuated::Punctuated::<syn::MetaNameValue, syn::Token![,]>::parse_terminated) {
        Ok(pairs) => pairs,
        Err(e) => {
            diag.error(Spn::from(e.span()), FORM);
            return naming;
        }
    };
    for pair in pairs {
        let (key, value) = (pair.path.get_ident(), &pair.value);
        match (key, value) {
            (Some(k), syn::Expr::Path(p)) if (k == "from" || k == "to") && p.path.get_ident().is_some() => {
                let end = p.path.get_ident().cloned();
                if k == "from" { naming.from = end } else { naming.to = end }
            }
            (Some(k), syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. })) if k == "prefix" => {
                let text = s.value();
                if syn::parse_str::<syn::Ident>(&format!("{text}x")).is_err() {
                    diag.error(Spn::of(s), "a #[spread] prefix begins a parameter's name: a letter or `_`, then letters, digits or `_`");
                } else {
                    naming.prefix = text;
                }
            }
            (Some(field), syn::Expr::Path(p)) if p.path.get_ident().is_some() && p.attrs.is_empty() => {
                if let Some(param) = p.path.get_ident() {
                    naming.renames.push((field.clone(), param.clone()));
                }
            }
            _ => diag.error(Spn::of(&pair), FORM),
        }
    }
    naming
}

fn is_spread(pt: &syn::PatType) -> bool {
    pt.attrs.iter().any(|a| a.path().is_ident(SPREAD))
}

/// The bundle a group's type names: a bare name (or a path ending in one).
fn bundle_of<'s>(ty: &syn::Type, structs: &'s [syn::ItemStruct]) -> Option<&'s syn::ItemStruct> {
    let syn::Type::Path(p) = ty else { return None };
    let last = p.path.segments.last().filter(|s| s.arguments.is_none() && p.qself.is_none())?;
    structs.iter().find(|s| s.ident == last.ident)
}

/// Records parameter `name` (declared at `at`: a group's fields at the
/// group), whether it is new; a name declared before is reported there, and
/// the caller drops it (rustc would say "bound more than once" at the
/// bundle's field, then cascade).
fn declare(seen: &mut Vec<String>, name: &syn::Ident, at: Spn, diag: &mut Diagnostics) -> bool {
    let name = name.to_string();
    if seen.contains(&name) {
        diag.error(at, format!("parameter `{name}` is declared twice: a #[spread] group's field and another parameter or group"));
        return false;
    }
    seen.push(name);
    true
}
