//! Emit (b): the Rust emulation of a kernel or helper, plus its companion module
//! (`NKI_SOURCE`, `INFO`, and the `Call` launcher).
//!
//! Every fallible op is wrapped so its error carries the user's file and line;
//! tokens are spanned at the user's code so type errors point there.

mod call;
mod expr;
mod launcher;

pub use launcher::typed_default;
mod method;
mod stmt;
mod tokens;

use crate::ast::{
    Arg, BinOp, Block, CastTo, Cond, Expr, ExprKind, FmtPiece, FnKind, Function, IndexItem, Pat, RangeKind, Region, RegionForm, Stmt,
    TypeAnn, UnOp,
};
use crate::check::{Info, Resolved, Ty};
use crate::vocab::{Binding, FnSpec, Kind};
use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use tokens::{bound_tokens, constant_tokens, ctx_ident, float_tokens, local_type, member_tokens, param_type, rt_path};

/// Everything generated for one function. With `stub`, the body is replaced by an
/// unreachable stand-in (used next to compile errors, so callers still type-check).
/// `py_lines` holds the Rust span of each line of `py_source`.
pub fn emit(f: &Function, info: &Info, py_source: &str, py_lines: &[Span], stub: bool) -> TokenStream {
    let ctx = ctx_ident();
    let name = &f.name;
    let vis = &f.vis;
    let docs = f.docs.iter().map(|d| quote!(#[doc = #d]));
    let ret = f.ret.as_ref().map_or(quote!(()), local_type);
    let params: Vec<TokenStream> = f
        .params
        .iter()
        .map(|p| {
            let (n, t) = (&p.name, param_type(&p.ty));
            quote!(#n: #t)
        })
        .collect();
    let rebinds = f.params.iter().map(|p| {
        let n = &p.name;
        match &p.ty {
            TypeAnn::Tensor(..) => quote!(let #n: ::nki::Tensor = ::core::clone::Clone::clone(#n);),
            TypeAnn::Option(inner, _) if matches!(**inner, TypeAnn::Tensor(..)) => {
                quote!(let #n: ::core::option::Option<::nki::Tensor> = #n.cloned();)
            }
            TypeAnn::Str(_) => {
                quote!(let #n: ::std::string::String = ::std::string::ToString::to_string(#n);)
            }
            TypeAnn::Object(o, _) => quote!(let #n: #o = ::core::clone::Clone::clone(#n);),
            _ => quote!(),
        }
    });
    let kernel = name.to_string();
    let dtype_checks = f.params.iter().filter(|p| !p.dtypes.is_empty()).map(|p| {
        let (n, param, accepted) = (&p.name, p.name.to_string(), &p.dtypes);
        // The error points at the parameter's declaration, where its contract is.
        let check = fallible(n.span(), quote!(::nki::__rt::check_dtype(t, #kernel, #param, &[#(#accepted),*])));
        let check = quote!(#check;);
        match &p.ty {
            TypeAnn::Option(..) => quote!(if let ::core::option::Option::Some(t) = &#n { #check }),
            _ => quote!({ let t = &#n; #check }),
        }
    });
    // A kernel's bundle parameter's tensor fields, nested ones included, by path.
    let field_dtype_checks: Vec<TokenStream> = match f.kind {
        FnKind::Kernel => f
            .params
            .iter()
            .filter_map(|p| {
                let o = crate::ast::bundle_in(&f.objects, &p.ty)?;
                let fields = o.param_fields(&f.objects, &p.name.to_string());
                let n = &p.name;
                Some(bundle_dtype_checks(&fields, quote!(#n), matches!(p.ty, TypeAnn::Option(..)), &kernel, n.span()))
            })
            .collect(),
        FnKind::Helper => Vec::new(),
    };
    let range_checks = f.params.iter().filter(|p| !p.range.is_empty()).map(|p| {
        let (n, param, bounds) = (&p.name, p.name.to_string(), bound_tokens(&p.range));
        let check = fallible(n.span(), quote!(::nki::__rt::check_range(v as f64, #kernel, #param, &[#(#bounds),*])));
        let check = quote!(#check;);
        match &p.ty {
            TypeAnn::Option(..) => quote!(if let ::core::option::Option::Some(v) = #n { #check }),
            _ => quote!({ let v = #n; #check }),
        }
    });
    let body = if stub {
        quote!(::core::unimplemented!("this kernel did not compile"))
    } else {
        let mut rs = Rs { info, ctx: ctx.clone(), var: None, call_checks: Vec::new() };
        let body = rs.block(&f.body, true);
        let checks = rs.call_checks;
        quote!(#(#checks)* #body)
    };
    let call = launcher::builder(f, &ret);
    // The launcher names the bundle and enum types its parameters take and it
    // returns, and the enums of those bundles' fields (the entry's defaults).
    let mut bundle_types: Vec<&syn::Ident> = Vec::new();
    for t in f.params.iter().map(|p| &p.ty).chain(f.ret.as_ref()) {
        bundles_in(t, &mut bundle_types);
    }
    // Nested bundles' too, as deep as a bundle parameter's fields are read.
    for _ in 0..crate::bounds::MAX_BUNDLE_NESTING {
        let taken: Vec<&syn::Ident> = bundle_types.clone();
        for o in f.objects.iter().filter(|o| taken.contains(&&o.name)) {
            o.fields.iter().for_each(|(_, t)| bundles_in(t, &mut bundle_types));
        }
        bundle_types.sort();
        bundle_types.dedup();
    }
    let bundles = bundle_types.iter().map(|o| quote!(#[allow(unused_imports)] use super::#o;));
    let info_item = info_static(f, info, py_lines);
    let kind_doc = match f.kind {
        FnKind::Kernel => {
            format!("The NKI source of the kernel [`{name}`](fn@{name}), its registration, and a launcher with its Python defaults.")
        }
        FnKind::Helper => format!("The NKI source of the helper [`{name}`](fn@{name}) and a caller with its Python defaults."),
    };
    quote! {
        #(#docs)*
        #[allow(unused_mut, unused_variables, unused_parens, unused_braces, clippy::all, clippy::pedantic)]
        #vis fn #name<'a>(#ctx: &::nki::Ctx, #(#params),*) -> ::nki::Result<#ret> {
            #(#rebinds)*
            #(#dtype_checks)*
            #(#field_dtype_checks)*
            #(#range_checks)*
            #body
        }

        #[doc = #kind_doc]
        #vis mod #name {
            #(#bundles)*
            /// The emitted NKI 2.x Python definition.
            pub const NKI_SOURCE: &str = #py_source;
            #info_item
            #call
        }
    }
}

/// The dtype checks of the tensor fields among `fields` of the bundle
/// `value` (an `Option` of it when `optional`), nested bundles' included,
/// each reported at `span` (the parameter's declaration) under the field's
/// path.
fn bundle_dtype_checks(
    fields: &[crate::ast::BundleField<'_>],
    value: TokenStream,
    optional: bool,
    kernel: &str,
    span: Span,
) -> TokenStream {
    let b = syn::Ident::new("__bundle", Span::mixed_site());
    let checks = fields.iter().map(|field| {
        let name = field.name;
        if let Some((_, sub)) = &field.nested {
            return bundle_dtype_checks(sub, quote!(#b.#name), field.optional(), kernel, span);
        }
        if !field.ty.holds_tensor() {
            return quote!();
        }
        let (path, accepted) = (&field.path, field.dtypes);
        let check = fallible(span, quote!(::nki::__rt::check_dtype(t, #kernel, #path, &[#(#accepted),*])));
        match field.ty {
            TypeAnn::Option(..) => quote!(if let ::core::option::Option::Some(t) = &#b.#name { #check; }),
            _ => quote!({ let t = &#b.#name; #check; }),
        }
    });
    if optional {
        quote!(if let ::core::option::Option::Some(#b) = &#value { #(#checks)* })
    } else {
        quote!({ let #b = &#value; #(#checks)* })
    }
}

/// The bundle and enum types `t` names (itself, or inside a tuple or option).
pub fn bundles_in<'t>(t: &'t TypeAnn, out: &mut Vec<&'t syn::Ident>) {
    match t {
        TypeAnn::Object(o, _) | TypeAnn::PyEnum(o, _) => out.push(o),
        TypeAnn::Option(inner, _) => bundles_in(inner, out),
        TypeAnn::Tuple(items, _) => items.iter().for_each(|i| bundles_in(i, out)),
        _ => {}
    }
}

/// The static registering the module constant or bundle `name` (`__NKI_CONST_TILE`).
pub fn const_registration(name: &syn::Ident) -> syn::Ident {
    format_ident!("__NKI_CONST_{}", name.to_string().to_uppercase())
}

fn info_static(f: &Function, info: &Info, py_lines: &[Span]) -> TokenStream {
    let name = f.name.to_string();
    let kind = match f.kind {
        FnKind::Kernel => quote!(::nki::emit::FunctionKind::Kernel),
        FnKind::Helper => quote!(::nki::emit::FunctionKind::Helper),
    };
    let deps = info.deps.iter().map(|(path, at)| {
        // Spanned at the call: a callee rustc cannot find is reported there.
        let mut segs: Vec<syn::Ident> = Vec::new();
        if path.first().map(String::as_str) != Some("crate") {
            segs.push(format_ident!("super", span = *at));
        }
        for (i, s) in path.iter().enumerate() {
            if i == 0 && s == "self" {
                continue;
            }
            segs.push(format_ident!("{}", s, span = *at));
        }
        quote!(&#(#segs)::*::INFO)
    });
    // Enums before bundles: a bundle's field may default to a member.
    // Those of another module: by its path (the Python imports them).
    let consts =
        f.consts.iter().map(|k| &k.name).chain(f.enums.iter().map(|e| &e.name)).chain(f.objects.iter().map(|o| &o.name)).map(|name| {
            let reg = const_registration(name);
            match f.imports.iter().find(|(n, _)| *name == n) {
                Some((_, module)) => quote!(&#module::#reg),
                None => quote!(&super::#reg),
            }
        });
    // The message constants of other modules: their registrations, so the
    // Python imports them.
    let imports = info.message_imports.iter().map(|path| {
        let (module, name) = path.split_at(path.len() - 1);
        let module = module.iter().map(|s| format_ident!("{}", s));
        let reg = const_registration(&format_ident!("{}", name[0]));
        quote!(&#(#module)::*::#reg)
    });
    // The package's `check_contract` helper, which the Python calls first.
    let contract = crate::emit::python::contract_call(f).map(|_| quote!(&::nki::emit::CHECK_CONTRACT)).into_iter();
    let math = info.uses_math;
    let params = launcher::param_infos(f, info);
    let outputs = match &f.ret {
        None => quote!(::core::option::Option::Some(0)),
        Some(TypeAnn::Tensor(..)) => quote!(::core::option::Option::Some(1)),
        Some(TypeAnn::Tuple(items, _)) if items.iter().all(|t| matches!(t, TypeAnn::Tensor(..))) => {
            let n = items.len();
            quote!(::core::option::Option::Some(#n))
        }
        Some(_) => quote!(::core::option::Option::None),
    };
    let (entry_fn, entry) = match launcher::entry(f) {
        Some(body) => (body, quote!(::core::option::Option::Some(__entry))),
        None => (quote!(), quote!(::core::option::Option::None)),
    };
    // A kernel adds itself to the program's registry (`nki list`, `nki emit`, `nki run`).
    let register = match f.kind {
        FnKind::Kernel => quote! {
            #[::nki::__linkme::distributed_slice(::nki::emit::KERNELS)]
            #[linkme(crate = ::nki::__linkme)]
            static __REGISTERED: &::nki::emit::FunctionInfo = &INFO;
        },
        FnKind::Helper => quote!(),
    };
    // `line!()` at each line's Rust span is that line's number in the user's file.
    let lines = py_lines.iter().map(|&span| quote_spanned!(span=> ::core::line!()));
    quote! {
        #entry_fn
        #register

        /// Registration of this function for `nki emit`.
        pub static INFO: ::nki::emit::FunctionInfo = ::nki::emit::FunctionInfo {
            name: #name,
            kind: #kind,
            source: NKI_SOURCE,
            module_path: ::core::module_path!(),
            file: ::core::file!(),
            lines: &[#(#lines),*],
            deps: &[#(#deps,)* #(#imports,)* #(#consts,)* #(#contract),*],
            uses_math: #math,
            params: &[#(#params),*],
            outputs: #outputs,
            entry: #entry,
        };
    }
}

struct Rs<'a> {
    info: &'a Info,
    ctx: syn::Ident,
    /// The variable the call being emitted is bound to (`let acc = nl::ndarray(..)`),
    /// passed as `var` to ops whose binding takes it.
    var: Option<String>,
    /// The compile-time checks of calls of other DSL functions (see `call`),
    /// emitted as items at the top of the body so they add no nesting.
    call_checks: Vec<TokenStream>,
}

/// Wraps a fallible call so its error records the user's file and line.
fn fallible(span: Span, call: TokenStream) -> TokenStream {
    quote_spanned!(span=> ::nki::__rt::at(#call, ::core::file!(), ::core::line!())?)
}
