//! The `Call` launcher of a kernel: its Python defaults as builder methods.

use super::tokens::{bound_tokens, constant_tokens, ctx_ident, float_tokens, local_type, member_tokens, param_type};
use crate::ast::{
    BundleField, BundleLeaf, Expr, ExprKind, FnKind, Function, ObjectDef, Pat, Stmt, TypeAnn, UnOp, bundle_in, bundle_leaves,
};
use crate::check::{Info, Ty};
use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote};

/// The `Call` builder: required parameters in `new`, a setter per optional one.
pub(super) fn builder(f: &Function, ret: &TokenStream) -> TokenStream {
    let name = &f.name;
    let is_required = |p: &crate::ast::Param| !f.may_omit(p);
    let fields = f.params.iter().map(|p| {
        let (n, t) = (&p.name, param_type(&p.ty));
        quote!(#n: #t)
    });
    let req: Vec<&crate::ast::Param> = f.params.iter().filter(|p| is_required(p)).collect();
    let new_args = req.iter().map(|p| {
        let (n, t) = (&p.name, param_type(&p.ty));
        quote!(#n: #t)
    });
    // The Python binding of positional arguments, for calls from other DSL
    // functions: every parameter without a Python default in signature order,
    // an `Option` before a required parameter included (`None` passed), as the
    // emitted Python call binds them.
    let positional: Vec<&crate::ast::Param> = f.params.iter().filter(|p| !f.is_optional(p)).collect();
    let n_positional = positional.len();
    let names = |ps: &mut dyn Iterator<Item = &crate::ast::Param>| ps.map(|p| p.name.to_string()).collect::<Vec<_>>().join(", ");
    let others = names(&mut f.params.iter().filter(|p| f.is_optional(p)));
    let call_form = format!(
        "`{name}` is called as its Python signature binds arguments: its parameters without a default ({}) positionally, in this order, `None` for an `Option` among them{}",
        names(&mut positional.iter().copied()),
        if others.is_empty() { String::new() } else { format!(", and the others ({others}) by keyword") }
    );
    let positional_args = positional.iter().map(|p| {
        let n = &p.name;
        let t = match &p.ty {
            TypeAnn::Option(inner, _) if !is_required(p) => {
                let it = option_item_type(inner);
                quote!(impl ::core::convert::Into<::core::option::Option<#it>>)
            }
            other => param_type(other),
        };
        quote!(#n: #t)
    });
    let positional_inits = f.params.iter().map(|p| {
        let n = &p.name;
        match (f.is_optional(p), is_required(p)) {
            (false, true) => quote!(#n),
            (false, false) => quote!(#n: ::core::convert::Into::into(#n)),
            (true, _) => default_init(p),
        }
    });
    let inits = f.params.iter().map(|p| {
        let n = &p.name;
        if is_required(p) {
            return quote!(#n);
        }
        default_init(p)
    });
    let setters = f.params.iter().filter(|p| !is_required(p)).map(|p| {
        let n = &p.name;
        let doc = format!("Sets `{n}` (Python default applies otherwise).");
        match &p.ty {
            TypeAnn::Option(inner, _) => {
                let it = option_item_type(inner);
                quote! {
                    #[doc = #doc]
                    pub fn #n(mut self, value: impl ::core::convert::Into<::core::option::Option<#it>>) -> Self {
                        self.#n = value.into();
                        self
                    }
                }
            }
            other => {
                let t = param_type(other);
                quote! {
                    #[doc = #doc]
                    pub fn #n(mut self, value: #t) -> Self {
                        self.#n = value;
                        self
                    }
                }
            }
        }
    });
    let args = f.params.iter().map(|p| {
        let n = &p.name;
        match &p.ty {
            TypeAnn::Groups(_) | TypeAnn::ReplicaGroup(_) | TypeAnn::Register(_) | TypeAnn::List(..) => {
                quote!(::core::clone::Clone::clone(&self.#n))
            }
            TypeAnn::Option(inner, _) if matches!(**inner, TypeAnn::Groups(_) | TypeAnn::ReplicaGroup(_) | TypeAnn::Object(..)) => {
                quote!(::core::clone::Clone::clone(&self.#n))
            }
            _ => quote!(self.#n),
        }
    });
    let ctx = ctx_ident();
    let launch = (f.kind == FnKind::Kernel).then(|| {
        quote! {
            /// Runs the kernel in the emulator on every program of `launch` and returns
            /// the first program's outputs.
            pub fn launch(&self, launch: &::nki::Launch) -> ::nki::Result<#ret> {
                launch.run(|#ctx| self.run(#ctx))
            }
        }
    });
    // A returned tile takes the name of the caller's variable bound to it.
    let bound = match f.ret {
        Some(TypeAnn::Tensor(..)) => quote!(self.run(#ctx).map(|t| ::nki::Tensor::bound(t, var))),
        _ => quote!({
            let _ = var;
            self.run(#ctx)
        }),
    };
    quote! {
        /// Arguments of one call, with the Python defaults of the optional ones.
        #[derive(Clone)]
        pub struct Call<'a> {
            #(#fields,)*
            _lifetime: ::core::marker::PhantomData<&'a ()>,
        }

        impl<'a> Call<'a> {
            /// How many positional arguments a call from another DSL function passes.
            #[doc(hidden)]
            pub const __POSITIONAL: usize = #n_positional;
            /// How to call the function from another DSL function.
            #[doc(hidden)]
            pub const __CALL_FORM: &'static str = #call_form;

            /// The required arguments; the optional ones take their defaults.
            #[allow(clippy::too_many_arguments)]
            pub fn new(#(#new_args),*) -> Self {
                Call { #(#inits,)* _lifetime: ::core::marker::PhantomData }
            }

            /// The arguments bound as the emitted Python binds positional ones: every
            /// parameter without a Python default, in order (`None` for an `Option`
            /// among them); the others take their defaults.
            #[doc(hidden)]
            #[allow(clippy::too_many_arguments)]
            pub fn __positional(#(#positional_args),*) -> Self {
                Call { #(#positional_inits,)* _lifetime: ::core::marker::PhantomData }
            }

            #(#setters)*

            /// Runs the function in the program `ctx`.
            pub fn run(&self, #ctx: &::nki::Ctx) -> ::nki::Result<#ret> {
                super::#name(#ctx, #(#args),*)
            }

            /// Runs the function in the program `ctx` for the kernel variable `var`
            /// bound to its result, which names a returned tile in messages.
            #[doc(hidden)]
            pub fn __run_bound(&self, #ctx: &::nki::Ctx, var: &'static str) -> ::nki::Result<#ret> {
                #bound
            }

            #launch
        }
    }
}

/// The field initializer of a parameter left to its default (`None` for an `Option` without one).
fn default_init(p: &crate::ast::Param) -> TokenStream {
    let n = &p.name;
    let v = match &p.default {
        None => quote!(::core::option::Option::None),
        Some(d) => typed_default(d, &p.ty),
    };
    quote!(#n: #v)
}

/// The Rust value of a default of type `ty`: an `Option`'s default other than
/// `None` is `Some` of it.
pub fn typed_default(d: &Expr, ty: &TypeAnn) -> TokenStream {
    some_if_option(default_value(d, ty), ty, !matches!(d.kind, ExprKind::None))
}

/// `value` as a value of type `ty`: wrapped in `Some` when `ty` is an `Option`
/// and `wrap` (the value is of its item type).
fn some_if_option(value: TokenStream, ty: &TypeAnn, wrap: bool) -> TokenStream {
    if wrap && matches!(ty, TypeAnn::Option(..)) { quote!(::core::option::Option::Some(#value)) } else { value }
}

/// The type an `Option` parameter's value takes in the launcher: a tensor by reference.
fn option_item_type(inner: &TypeAnn) -> TokenStream {
    match inner {
        TypeAnn::Tensor(..) => quote!(&'a ::nki::Tensor),
        other => local_type(other),
    }
}

/// The Rust value of a parameter's (or bundle field's) default.
fn default_value(d: &Expr, ty: &TypeAnn) -> TokenStream {
    let float = matches!(ty, TypeAnn::Float(_)) || matches!(ty, TypeAnn::Option(i, _) if matches!(**i, TypeAnn::Float(_)));
    match &d.kind {
        ExprKind::Int(v) if float => {
            let f = *v as f64;
            quote!(#f)
        }
        ExprKind::Int(v) => quote!(#v),
        ExprKind::Float(v) => float_tokens(*v),
        ExprKind::Bool(b) => quote!(#b),
        ExprKind::Str(s) => quote!(#s),
        ExprKind::None => quote!(::core::option::Option::None),
        ExprKind::Unary(UnOp::Neg, x) => {
            let inner = default_value(x, ty);
            quote!(-#inner)
        }
        ExprKind::Path(p)
            if matches!(ty, TypeAnn::PyEnum(..)) || matches!(ty, TypeAnn::Option(i, _) if matches!(**i, TypeAnn::PyEnum(..))) =>
        {
            member_tokens(p)
        }
        ExprKind::Path(p) => constant_tokens(p),
        ExprKind::Tuple(items) => {
            let parts = items.iter().enumerate().map(|(i, x)| match ty {
                TypeAnn::Tuple(tys, _) if i < tys.len() => default_value(x, &tys[i]),
                _ => default_value(x, ty),
            });
            quote!((#(#parts,)*))
        }
        _ => quote!(::core::default::Default::default()),
    }
}

/// The registry's name for what a parameter of type `ty` holds (for `Option<T>`,
/// what `T` holds), if a value chosen at run time can stand for it.
fn param_kind(ty: &TypeAnn) -> Option<TokenStream> {
    let kind = match ty {
        TypeAnn::Tensor(..) => quote!(Tensor),
        TypeAnn::Int(_) => quote!(Int),
        TypeAnn::Float(_) => quote!(Float),
        TypeAnn::Bool(_) => quote!(Bool),
        TypeAnn::Dtype(_) => quote!(Dtype),
        TypeAnn::Str(_) => quote!(Str),
        TypeAnn::Groups(_) => quote!(Groups),
        TypeAnn::ReplicaGroup(_) => quote!(ReplicaGroup),
        TypeAnn::PyEnum(e, _) => {
            return Some(quote!(::nki::emit::ParamKind::Enum {
                class: <#e as ::nki::emit::PyEnum>::CLASS,
                members: <#e as ::nki::emit::PyEnum>::MEMBERS,
            }));
        }
        TypeAnn::Option(inner, _) if !matches!(**inner, TypeAnn::Option(..)) => return param_kind(inner),
        // A tuple of numbers and bools, or of such tuples: its items' text has no
        // separator of its own, so the command line reads it item by item.
        TypeAnn::Tuple(items, _) if !items.is_empty() => {
            let items = items.iter().map(tuple_item_kind).collect::<Option<Vec<_>>>()?;
            return Some(quote!(::nki::emit::ParamKind::Tuple { items: &[#(#items),*] }));
        }
        _ => return None,
    };
    Some(quote!(::nki::emit::ParamKind::#kind))
}

/// The registry's kind of a tuple's item, if a tuple parameter may hold it.
fn tuple_item_kind(ty: &TypeAnn) -> Option<TokenStream> {
    match ty {
        TypeAnn::Int(_) | TypeAnn::Float(_) | TypeAnn::Bool(_) | TypeAnn::Tuple(..) => param_kind(ty),
        _ => None,
    }
}

/// The bundle parameter `p` takes, if it takes one, with its fields by path.
fn bundle_fields<'f>(f: &'f Function, p: &crate::ast::Param) -> Option<(&'f ObjectDef, Vec<BundleField<'f>>)> {
    bundle_in(&f.objects, &p.ty).map(|o| (o, o.param_fields(&f.objects, &p.name.to_string())))
}

/// The registry's `ParamInfo` of each parameter whose kind it can name; a bundle
/// parameter `cfg` is flattened into one per field, named `cfg.field` (a nested
/// bundle's `cfg.inner.field`).
pub(super) fn param_infos(f: &Function, info: &Info) -> Vec<TokenStream> {
    let some_str = |d: Option<String>| match d {
        Some(d) => quote!(::core::option::Option::Some(#d)),
        None => quote!(::core::option::Option::None),
    };
    let defaults = crate::emit::python::param_defaults(f, info);
    let mut infos = Vec::new();
    for (p, default) in f.params.iter().zip(defaults) {
        let leaves = bundle_leaves(&f.objects, p);
        if !leaves.is_empty() {
            for BundleLeaf { field, class, optional_bundles: enclosing } in leaves {
                let Some(kind) = param_kind(field.ty) else { continue };
                let (name, bundle) = (&field.path, class.to_string());
                let default = field.default.map(|d| crate::emit::python::field_default(d, field.ty));
                let (optional, default) = (default.is_some(), some_str(default));
                let dtypes = if field.ty.holds_tensor() { field.dtypes } else { &[] };
                infos.push(quote!(::nki::emit::ParamInfo {
                    optional: #optional, default: #default, dtypes: &[#(#dtypes),*], bundle: ::core::option::Option::Some(#bundle),
                    optional_bundles: &[#(#enclosing),*],
                    ..::nki::emit::ParamInfo::required(#name, #kind)
                }));
            }
            continue;
        }
        let Some(kind) = param_kind(&p.ty) else { continue };
        let (name, optional, default, dtypes) = (p.name.to_string(), f.may_omit(p), some_str(default), &p.dtypes);
        let range = bound_tokens(&p.range);
        let (shape, checks) = contract(f, info, &name);
        infos.push(quote!(::nki::emit::ParamInfo {
            name: #name, kind: #kind, optional: #optional, default: #default, dtypes: &[#(#dtypes),*], range: &[#(#range),*],
            bundle: ::core::option::Option::None, optional_bundles: &[], shape: #shape, checks: &[#(#checks),*]
        }));
    }
    infos
}

/// The shape contract of the parameter `param` as the kernel states it at the
/// top of its body: the dims `let [n, d] = param.shape();` names (as `[n, d]`)
/// and the messages of the top-level asserts that read `param`, those dims, or
/// `param` as a field of a bundle built at the top (a `#[spread]` group's
/// binding: `rope.cos` reads `cos`).
fn contract(f: &Function, info: &Info, param: &str) -> (String, Vec<TokenStream>) {
    let mut of = Readings { names: vec![param.to_string()], fields: Vec::new() };
    let mut shape = String::new();
    for s in &f.body.stmts {
        match s {
            Stmt::Let { pat: Pat::Slice(items, _), init, .. }
                if let ExprKind::Method { recv, name, .. } = &init.kind
                    && name == "shape"
                    && matches!(&recv.kind, ExprKind::Var(v) if v == param) =>
            {
                let dims: Vec<String> = items.iter().map(|p| if let Pat::Ident(i, _) = p { i.to_string() } else { "_".into() }).collect();
                shape = format!("[{}]", dims.join(", "));
                of.names.extend(dims);
            }
            Stmt::Let { pat: Pat::Ident(binding, _), init, .. } if let ExprKind::Struct(_, fields, _) = &init.kind => {
                let from_param = fields.iter().filter(|(_, e)| matches!(&e.kind, ExprKind::Var(v) if v == param));
                of.fields.extend(from_param.map(|(field, _)| (binding.to_string(), field.to_string())));
            }
            _ => {}
        }
    }
    let checks = f
        .body
        .stmts
        .iter()
        .filter_map(|s| match s {
            Stmt::Assert { cond, msg: Some(msg), .. } if of.read_by(cond) => Some(message_text(info, msg)),
            _ => None,
        })
        .collect();
    (shape, checks)
}

/// The variables that stand for one parameter, and the `(bundle, field)`
/// pairs that hold it.
struct Readings {
    names: Vec<String>,
    fields: Vec<(String, String)>,
}

impl Readings {
    /// Whether `e` reads the parameter.
    fn read_by(&self, e: &Expr) -> bool {
        let any = |es: &[Expr]| es.iter().any(|e| self.read_by(e));
        match &e.kind {
            ExprKind::Var(v) => self.names.iter().any(|n| v == n),
            ExprKind::Attr(x, field) if matches!(&x.kind, ExprKind::Var(b) if self.fields.iter().any(|(fb, ff)| b == fb && field == ff)) => {
                true
            }
            ExprKind::Unary(_, x) | ExprKind::Cast(x, _) | ExprKind::Some(x) | ExprKind::Field(x, _) | ExprKind::Attr(x, _) => {
                self.read_by(x)
            }
            ExprKind::Binary(_, a, b) | ExprKind::Repeat(a, b) => self.read_by(a) || self.read_by(b),
            ExprKind::If(c, a, b) => self.read_by(c) || self.read_by(a) || self.read_by(b),
            ExprKind::Call { args, .. } => args.iter().any(|a| self.read_by(&a.value)),
            ExprKind::Method { recv, args, .. } => self.read_by(recv) || args.iter().any(|a| self.read_by(&a.value)),
            ExprKind::Index { base, .. } => self.read_by(base),
            ExprKind::Tuple(items) | ExprKind::List(items) => any(items),
            _ => false,
        }
    }
}

/// An assert's message as the help shows it: its arguments by their value when
/// it is a constant, else as placeholders the reader fills in (`<name>`, or
/// `<value>` for an expression), the constants it formats by name (not as the
/// raw `{name}` of the format string); a message held by a module `&str`
/// constant is that constant, which lives beside the function (`super::`).
fn message_text(info: &Info, msg: &crate::ast::FmtString) -> TokenStream {
    // Only a constant the checker accepted: naming any other would add rustc's
    // errors to the checker's one.
    if let [crate::ast::FmtPiece::Const(name)] = msg.pieces.as_slice()
        && info.message_consts.iter().any(|c| name == c)
    {
        return quote!(super::#name);
    }
    if let [crate::ast::FmtPiece::Shared(path)] = msg.pieces.as_slice() {
        return quote!(#path);
    }
    let text: String = msg
        .pieces
        .iter()
        .map(|p| match p {
            crate::ast::FmtPiece::Text(t) => t.clone(),
            crate::ast::FmtPiece::Const(name) => name.to_string(),
            crate::ast::FmtPiece::Shared(path) => path.segments.last().map_or_else(String::new, |s| s.ident.to_string()),
            crate::ast::FmtPiece::Arg(e) => match (info.ty(e), &e.kind) {
                (Ty::Int(v), _) if v.as_const().is_some() => v.as_const().map_or_else(String::new, |c| c.to_string()),
                (_, ExprKind::Var(v)) => format!("<{v}>"),
                _ => "<value>".to_string(),
            },
        })
        .collect();
    quote!(#text)
}

/// `value` (an `&ArgValue`) as the Rust value of a parameter of type `ty`.
fn extract(value: TokenStream, name: &str, ty: &TypeAnn) -> TokenStream {
    match ty {
        TypeAnn::Tensor(..) => quote!(#value.tensor(#name)?),
        TypeAnn::Int(_) => quote!(#value.int(#name)?),
        TypeAnn::Float(_) => quote!(#value.float(#name)?),
        TypeAnn::Bool(_) => quote!(#value.bool(#name)?),
        TypeAnn::Dtype(_) => quote!(#value.dtype(#name)?),
        TypeAnn::Str(_) => quote!(#value.str(#name)?),
        TypeAnn::Groups(_) => quote!(#value.groups(#name)?),
        TypeAnn::ReplicaGroup(_) => quote!(#value.replica_group(#name)?),
        TypeAnn::PyEnum(e, _) => quote!(#value.member::<#e>(#name)?),
        // An `Option<&str>` is held as an owned string.
        TypeAnn::Option(inner, _) if matches!(**inner, TypeAnn::Str(_)) => quote!(::std::string::ToString::to_string(#value.str(#name)?)),
        TypeAnn::Option(inner, _) => extract(value, name, inner),
        TypeAnn::Tuple(tys, _) => {
            let (items, arity) = (syn::Ident::new("__items", Span::mixed_site()), tys.len());
            let parts = tys.iter().enumerate().map(|(i, t)| extract(quote!(#items[#i]), name, t));
            quote!({
                let #items = #value.tuple(#name, #arity)?;
                (#(#parts,)*)
            })
        }
        _ => quote!(::core::unreachable!()),
    }
}

/// The value of a bundle of class `class` built from the entry's `args`
/// (its fields taking the slots from `slot` on): `None` when `optional` and
/// none of its fields is given.
fn optional_bundle(class: &syn::Ident, fields: &[BundleField<'_>], args: &syn::Ident, slot: &mut usize, optional: bool) -> TokenStream {
    let first = *slot;
    let inits: Vec<TokenStream> = fields.iter().map(|field| field_value(field, args, slot)).collect();
    let built = quote!(#class { #(#inits),* });
    if !optional {
        return built;
    }
    let last = *slot;
    quote!(if (#first..#last).any(|i| ::nki::emit::given(#args, i).is_some()) {
        ::core::option::Option::Some(#built)
    } else {
        ::core::option::Option::None
    })
}

/// The initializer `field: value` of a bundle field from the entry's `args`:
/// a nested bundle built from its own fields' slots, a value from its slot
/// (its default when not given).
fn field_value(field: &BundleField<'_>, args: &syn::Ident, slot: &mut usize) -> TokenStream {
    let (name, path) = (field.name, &field.path);
    if let Some((o, sub)) = &field.nested {
        let v = optional_bundle(&o.name, sub, args, slot, field.optional());
        return quote!(#name: #v);
    }
    let i = *slot;
    *slot += 1;
    // A field given is of its item type when the field is an `Option`; a
    // tensor field owns its tensor.
    let given = |value: TokenStream| {
        let v = extract(value, path, field.ty);
        let v = if field.ty.holds_tensor() { quote!(::core::clone::Clone::clone(#v)) } else { v };
        some_if_option(v, field.ty, true)
    };
    let v = match field.default {
        None => given(quote!(::nki::emit::required(#args, #i, #path)?)),
        Some(d) => {
            let (given, fallback) = (given(quote!(value)), typed_default(d, field.ty));
            quote!(match ::nki::emit::given(#args, #i) {
                ::core::option::Option::Some(value) => #given,
                ::core::option::Option::None => #fallback,
            })
        }
    };
    quote!(#name: #v)
}

/// The kernel's registry entry point (see `nki::emit::Entry`): its `Call` built
/// from values chosen at run time, its outputs as a list. `None` for helpers and
/// for kernels with a parameter or result a run-time value cannot stand for.
pub(super) fn entry(f: &Function) -> Option<TokenStream> {
    let runnable = |p: &crate::ast::Param| {
        param_kind(&p.ty).is_some() || bundle_in(&f.objects, &p.ty).is_some_and(|o| o.kernel_param_error(&f.objects).is_none())
    };
    if f.kind != FnKind::Kernel || !f.params.iter().all(runnable) {
        return None;
    }
    let outputs = match &f.ret {
        None => quote!({
            let () = out;
            ::std::vec::Vec::new()
        }),
        Some(TypeAnn::Tensor(..)) => quote!(::std::vec![out]),
        Some(TypeAnn::Outputs(_)) => quote!(out.0),
        Some(TypeAnn::Tuple(items, _)) if items.iter().all(|t| matches!(t, TypeAnn::Tensor(..))) => {
            let fields = (0..items.len()).map(syn::Index::from);
            quote!(::std::vec![#(out.#fields),*])
        }
        Some(_) => return None,
    };
    let args = syn::Ident::new("args", Span::mixed_site());
    // `args` follows the registry's `ParamInfo`s: a bundle takes one slot per
    // value field, a nested bundle's in its place.
    let (mut slot, mut bundles, mut required, mut optional) = (0usize, Vec::new(), Vec::new(), Vec::new());
    for p in &f.params {
        if let Some((o, fields)) = bundle_fields(f, p) {
            let (var, n) = (format_ident!("__bundle_{}", p.name, span = Span::mixed_site()), &p.name);
            let value = optional_bundle(&o.name, &fields, &args, &mut slot, matches!(p.ty, TypeAnn::Option(..)));
            bundles.push(quote!(let #var = #value;));
            if matches!(p.ty, TypeAnn::Option(..)) {
                optional.push(quote!(call = call.#n(#var);));
            } else {
                required.push(quote!(&#var));
            }
            continue;
        }
        let (i, n, name) = (slot, &p.name, p.name.to_string());
        slot += 1;
        if f.may_omit(p) {
            let v = extract(quote!(value), &name, &p.ty);
            optional.push(quote! {
                if let ::core::option::Option::Some(value) = ::nki::emit::given(#args, #i) {
                    call = call.#n(#v);
                }
            });
        } else {
            required.push(extract(quote!(::nki::emit::required(#args, #i, #name)?), &name, &p.ty));
        }
    }
    let ctx = ctx_ident();
    Some(quote! {
        /// Runs the kernel in the program `ctx` with run-time values (the registry's entry).
        fn __entry(#ctx: &::nki::Ctx, #args: &[::core::option::Option<::nki::emit::ArgValue>]) -> ::nki::Result<::std::vec::Vec<::nki::Tensor>> {
            #(#bundles)*
            #[allow(unused_mut)]
            let mut call = Call::new(#(#required),*);
            #(#optional)*
            let out = call.run(#ctx)?;
            ::core::result::Result::Ok(#outputs)
        }
    })
}
