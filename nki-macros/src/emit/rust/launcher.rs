//! The `Call` launcher of a kernel: its Python defaults as builder methods.

use super::*;

/// The `Call` builder: required parameters in `new`, a setter per optional one.
pub(super) fn builder(f: &Function, ret: &TokenStream) -> TokenStream {
    let name = &f.name;
    let is_required = |p: &crate::ast::Param| !f.is_optional(p);
    let fields = f.params.iter().map(|p| {
        let (n, t) = (&p.name, param_type(&p.ty));
        quote!(#n: #t)
    });
    let req: Vec<&crate::ast::Param> = f.params.iter().filter(|p| is_required(p)).collect();
    let new_args = req.iter().map(|p| {
        let (n, t) = (&p.name, param_type(&p.ty));
        quote!(#n: #t)
    });
    let inits = f.params.iter().map(|p| {
        let n = &p.name;
        if is_required(p) {
            return quote!(#n);
        }
        let v = match &p.default {
            None => quote!(::core::option::Option::None),
            Some(d) => {
                let lit = default_value(d, &p.ty);
                if matches!(p.ty, TypeAnn::Option(..)) && !matches!(d.kind, ExprKind::None) {
                    quote!(::core::option::Option::Some(#lit))
                } else {
                    lit
                }
            }
        };
        quote!(#n: #v)
    });
    let setters = f.params.iter().filter(|p| !is_required(p)).map(|p| {
        let n = &p.name;
        let doc = format!("Sets `{n}` (Python default applies otherwise).");
        match &p.ty {
            TypeAnn::Option(inner, _) => {
                let it = match &**inner {
                    TypeAnn::Tensor(..) => quote!(&'a ::nki::Tensor),
                    other => local_type(other),
                };
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
            TypeAnn::Groups(_) => quote!(::core::clone::Clone::clone(&self.#n)),
            TypeAnn::Option(inner, _) if matches!(**inner, TypeAnn::Groups(_)) => quote!(::core::clone::Clone::clone(&self.#n)),
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
    quote! {
        /// Arguments of one call, with the Python defaults of the optional ones.
        #[derive(Clone)]
        pub struct Call<'a> {
            #(#fields,)*
            _lifetime: ::core::marker::PhantomData<&'a ()>,
        }

        impl<'a> Call<'a> {
            /// The required arguments; the optional ones take their defaults.
            #[allow(clippy::too_many_arguments)]
            pub fn new(#(#new_args),*) -> Self {
                Call { #(#inits,)* _lifetime: ::core::marker::PhantomData }
            }

            #(#setters)*

            /// Runs the function in the program `ctx`.
            pub fn run(&self, #ctx: &::nki::Ctx) -> ::nki::Result<#ret> {
                super::#name(#ctx, #(#args),*)
            }

            #launch
        }
    }
}

/// The Rust value of a parameter default.
fn default_value(d: &Expr, ty: &TypeAnn) -> TokenStream {
    let float = matches!(ty, TypeAnn::Float(_)) || matches!(ty, TypeAnn::Option(i, _) if matches!(**i, TypeAnn::Float(_)));
    match &d.kind {
        ExprKind::Int(v) if float => {
            let f = *v as f64;
            quote!(#f)
        }
        ExprKind::Int(v) => quote!(#v),
        ExprKind::Float(v) => quote!(#v),
        ExprKind::Bool(b) => quote!(#b),
        ExprKind::Str(s) => quote!(#s),
        ExprKind::None => quote!(::core::option::Option::None),
        ExprKind::Unary(UnOp::Neg, x) => {
            let inner = default_value(x, ty);
            quote!(-#inner)
        }
        ExprKind::Path(p) => constant_tokens(p),
        _ => quote!(::core::default::Default::default()),
    }
}
