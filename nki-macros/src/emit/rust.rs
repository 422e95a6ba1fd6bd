//! Emit (b): the Rust emulation of a kernel or helper, plus its companion module
//! (`NKI_SOURCE`, `INFO`, and the `Call` launcher).
//!
//! Every fallible op is wrapped so its error carries the user's file and line;
//! tokens are spanned at the user's code so type errors point there.

use crate::ast::{Arg, BinOp, Block, CastTo, Cond, Expr, ExprKind, FmtPiece, FnKind, Function, IndexItem, Pat, Stmt, TypeAnn, UnOp};
use crate::check::{Info, Resolved, Ty};
use crate::vocab::{Binding, Constant, FnSpec, Kind, lookup_constant};
use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};

/// Names the generated code binds for itself; mixed-site hygiene keeps them apart
/// from the user's variables.
fn ctx_ident() -> syn::Ident {
    syn::Ident::new("ctx", Span::mixed_site())
}

fn rt_path(path: &str) -> TokenStream {
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
        TypeAnn::Option(inner, _) => {
            let i = local_type(inner);
            quote!(::core::option::Option<#i>)
        }
        TypeAnn::Tuple(items, _) => {
            let ts = items.iter().map(local_type);
            quote!((#(#ts,)*))
        }
        TypeAnn::Outputs(_) => quote!(::nki::Outputs),
    };
    quote_spanned!(t.span().start=> #ty)
}

/// The Rust type of a parameter (tensors by reference).
fn param_type(t: &TypeAnn) -> TokenStream {
    match t {
        TypeAnn::Tensor(..) => quote!(&'a ::nki::Tensor),
        TypeAnn::Str(_) => quote!(&'a str),
        TypeAnn::Option(inner, _) if matches!(**inner, TypeAnn::Tensor(..)) => {
            quote!(::core::option::Option<&'a ::nki::Tensor>)
        }
        other => local_type(other),
    }
}

/// Everything generated for one function. With `stub`, the body is replaced by an
/// unreachable stand-in (used next to compile errors, so callers still type-check).
pub fn emit(f: &Function, info: &Info, py_source: &str, stub: bool) -> TokenStream {
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
            _ => quote!(),
        }
    });
    let body = if stub {
        quote!(::core::unimplemented!("this kernel did not compile"))
    } else {
        Rs { info, ctx: ctx.clone() }.block(&f.body, true)
    };
    let call = builder(f, &ret);
    let info_item = info_static(f, info);
    let kind_doc = match f.kind {
        FnKind::Kernel => {
            format!("The NKI source of the kernel [`{name}`](fn@{name}), its registration, and a launcher with its Python defaults.")
        }
        FnKind::Helper => format!("The NKI source of the helper [`{name}`](fn@{name}) and a caller with its Python defaults."),
    };
    quote! {
        #(#docs)*
        #[allow(unused_mut, unused_variables, unused_parens, clippy::all, clippy::pedantic)]
        #vis fn #name<'a>(#ctx: &::nki::Ctx, #(#params),*) -> ::nki::Result<#ret> {
            #(#rebinds)*
            #body
        }

        #[doc = #kind_doc]
        #vis mod #name {
            /// The emitted NKI 2.x Python definition.
            pub const NKI_SOURCE: &str = #py_source;
            #info_item
            #call
        }
    }
}

/// The `Call` builder: required parameters in `new`, a setter per optional one.
fn builder(f: &Function, ret: &TokenStream) -> TokenStream {
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

fn constant_tokens(p: &[String]) -> TokenStream {
    match lookup_constant(p) {
        Some(Constant::Float(v)) => quote!(#v),
        Some(Constant::Int(v)) => quote!(#v),
        _ => {
            let segs = p.iter().map(|s| format_ident!("{}", s));
            quote!(::nki #(::#segs)*)
        }
    }
}

fn info_static(f: &Function, info: &Info) -> TokenStream {
    let name = f.name.to_string();
    let kind = match f.kind {
        FnKind::Kernel => quote!(::nki::emit::FunctionKind::Kernel),
        FnKind::Helper => quote!(::nki::emit::FunctionKind::Helper),
    };
    let deps = info.deps.iter().map(|path| {
        let mut segs: Vec<syn::Ident> = Vec::new();
        match path.first().map(String::as_str) {
            Some("crate") => {}
            Some("self") => segs.push(format_ident!("super")),
            _ => segs.push(format_ident!("super")),
        }
        for (i, s) in path.iter().enumerate() {
            if i == 0 && s == "self" {
                continue;
            }
            segs.push(format_ident!("{}", s));
        }
        quote!(&#(#segs)::*::INFO)
    });
    let math = info.uses_math;
    quote! {
        /// Registration of this function for `nki emit`.
        pub static INFO: ::nki::emit::FunctionInfo = ::nki::emit::FunctionInfo {
            name: #name,
            kind: #kind,
            source: NKI_SOURCE,
            module_path: ::core::module_path!(),
            file: ::core::file!(),
            deps: &[#(#deps),*],
            uses_math: #math,
        };
    }
}

struct Rs<'a> {
    info: &'a Info,
    ctx: syn::Ident,
}

/// Wraps a fallible call so its error records the user's file and line.
fn fallible(span: Span, call: TokenStream) -> TokenStream {
    quote_spanned!(span=> ::nki::__rt::at(#call, ::core::file!(), ::core::line!())?)
}

impl Rs<'_> {
    fn block(&mut self, b: &Block, is_fn: bool) -> TokenStream {
        let stmts: Vec<TokenStream> = b.stmts.iter().map(|s| self.stmt(s)).collect();
        let tail = match (&b.tail, is_fn) {
            (Some(t), true) => {
                let v = self.expr(t);
                quote!(::core::result::Result::Ok(#v))
            }
            (None, true) => quote!(::core::result::Result::Ok(())),
            (Some(t), false) => {
                let v = self.expr(t);
                quote!(#v;)
            }
            (None, false) => quote!(),
        };
        quote!(#(#stmts)* #tail)
    }

    fn pat(&self, p: &Pat) -> TokenStream {
        match p {
            Pat::Ident(i, m) => {
                if *m {
                    quote!(mut #i)
                } else {
                    quote!(#i)
                }
            }
            Pat::Wild => quote!(_),
            Pat::Tuple(items, _) | Pat::Slice(items, _) => {
                let ps = items.iter().map(|x| self.pat(x));
                match p {
                    Pat::Slice(..) => quote!([#(#ps),*]),
                    _ => quote!((#(#ps,)*)),
                }
            }
        }
    }

    fn stmt(&mut self, s: &Stmt) -> TokenStream {
        match s {
            Stmt::Let { pat, ty, init, span } => {
                let p = self.pat(pat);
                let v = match (pat, self.info.ty(init)) {
                    (Pat::Slice(items, _), _) => {
                        let n = items.len();
                        let shape = self.owned(init);
                        fallible(span.start, quote!(::nki::__rt::unpack::<#n>(#shape)))
                    }
                    // Another function's result takes the declared type: a kernel's
                    // `Outputs` unpack into a tuple of tensors.
                    (_, _) if ty.is_some() && matches!(self.info.call(init), Some(Resolved::User)) => {
                        let v = self.expr(init);
                        fallible(span.start, quote!(::nki::__rt::returned(#v)))
                    }
                    _ => self.owned(init),
                };
                let t = ty.as_ref().map(|t| {
                    let t = local_type(t);
                    quote!(: #t)
                });
                quote_spanned!(span.start=> let #p #t = #v;)
            }
            Stmt::Assign { name, op, value, span } => {
                let v = self.expr(value);
                match op {
                    None => quote_spanned!(span.start=> #name = #v;),
                    Some(o) => {
                        let f = format_ident!(
                            "{}",
                            match o {
                                BinOp::Add => "add",
                                BinOp::Sub => "sub",
                                BinOp::Mul => "mul",
                                BinOp::Div => "div",
                                _ => "rem",
                            }
                        );
                        let combined = fallible(span.start, quote!(::nki::__rt::Compound::#f(#name, #v)));
                        quote_spanned!(span.start=> #name = #combined;)
                    }
                }
            }
            Stmt::Expr(e) => {
                let v = self.expr(e);
                quote!(#v;)
            }
            Stmt::For { var, iter, body, span } => {
                let (start, stop) = (self.expr(&iter.start), self.expr(&iter.stop));
                let step = iter.step.as_ref().map_or(quote!(1i64), |s| self.expr(s));
                let range = fallible(iter.span.start, quote!(::nki::__rt::range(#start, #stop, #step)));
                let p = self.pat(var);
                let b = self.block(body, false);
                // Every iteration checks whether the launch must stop (failure, deadline).
                let ctx = &self.ctx;
                let check = fallible(span.start, quote!(::nki::__rt::iteration(#ctx)));
                quote_spanned!(span.start=> for #p in #range { #check; #b })
            }
            Stmt::If { branches, otherwise, span } => {
                let mut out = TokenStream::new();
                for (i, (cond, body)) in branches.iter().enumerate() {
                    let b = self.block(body, false);
                    let head = match cond {
                        Cond::Expr(c) => {
                            let c = self.expr(c);
                            quote!(if #c)
                        }
                        Cond::LetSome(name, e) => {
                            let v = self.owned(e);
                            quote!(if let ::core::option::Option::Some(#name) = #v)
                        }
                    };
                    if i > 0 {
                        out.extend(quote!(else));
                    }
                    out.extend(quote!(#head { #b }));
                }
                if let Some(b) = otherwise {
                    let b = self.block(b, false);
                    out.extend(quote!(else { #b }));
                }
                quote_spanned!(span.start=> #out)
            }
            Stmt::Assert { cond, msg, span } => {
                let c = self.expr(cond);
                let message = match msg {
                    None => quote!(::std::string::String::from("assertion failed")),
                    Some(m) => {
                        let mut fmt = String::new();
                        let mut args = Vec::new();
                        for p in &m.pieces {
                            match p {
                                FmtPiece::Text(t) => fmt.push_str(&t.replace('{', "{{").replace('}', "}}")),
                                FmtPiece::Arg(e) => {
                                    fmt.push_str("{}");
                                    let v = self.expr(e);
                                    args.push(quote!(::nki::__rt::Show(&#v)));
                                }
                            }
                        }
                        quote!(::std::format!(#fmt #(, #args)*))
                    }
                };
                quote_spanned!(span.start=> if !(#c) {
                    return ::core::result::Result::Err(::nki::__rt::assertion(#message, ::core::file!(), ::core::line!()));
                })
            }
            Stmt::Return(e, span) => {
                let v = e.as_ref().map_or(quote!(()), |e| self.owned(e));
                quote_spanned!(span.start=> return ::core::result::Result::Ok(#v);)
            }
        }
    }

    /// An owned value of the expression (tensor variables are cloned).
    fn owned(&mut self, e: &Expr) -> TokenStream {
        match &e.kind {
            ExprKind::Var(v) if !matches!(self.info.ty(e), Ty::Int(_) | Ty::Float | Ty::Bool) => {
                quote!(::core::clone::Clone::clone(&#v))
            }
            _ => self.expr(e),
        }
    }

    /// A `&Tensor` (or other borrowed value) for an argument.
    fn by_ref(&mut self, e: &Expr) -> TokenStream {
        match &e.kind {
            ExprKind::Var(v) => quote!(&#v),
            _ => {
                let v = self.expr(e);
                quote!(&(#v))
            }
        }
    }

    fn int_op(&self, op: BinOp, a: TokenStream, b: TokenStream, span: Span) -> TokenStream {
        let f = match op {
            BinOp::Add => "add",
            BinOp::Sub => "sub",
            BinOp::Mul => "mul",
            BinOp::Div => "floordiv",
            _ => "floormod",
        };
        let f = format_ident!("{}", f);
        fallible(span, quote!(::nki::__rt::#f(#a, #b)))
    }

    fn float_op(&self, op: BinOp, a: TokenStream, b: TokenStream, span: Span) -> TokenStream {
        match op {
            BinOp::Add => quote!((#a + #b)),
            BinOp::Sub => quote!((#a - #b)),
            BinOp::Mul => quote!((#a * #b)),
            BinOp::Div => fallible(span, quote!(::nki::__rt::fdiv(#a, #b))),
            _ => fallible(span, quote!(::nki::__rt::fmod(#a, #b))),
        }
    }

    /// The expression as a float (ints are converted).
    fn as_float(&mut self, e: &Expr) -> TokenStream {
        let v = self.expr(e);
        if self.info.ty(e).is_int() { quote!(((#v) as f64)) } else { v }
    }

    fn expr(&mut self, e: &Expr) -> TokenStream {
        let span = e.span.start;
        match &e.kind {
            ExprKind::Invalid => quote!(::core::unreachable!()),
            ExprKind::Int(v) => quote_spanned!(span=> #v),
            ExprKind::Float(v) => quote_spanned!(span=> #v),
            ExprKind::Bool(b) => quote_spanned!(span=> #b),
            ExprKind::Str(s) => quote_spanned!(span=> ::std::string::String::from(#s)),
            ExprKind::None => quote_spanned!(span=> ::core::option::Option::None),
            ExprKind::Var(v) => quote_spanned!(span=> #v),
            ExprKind::Path(p) => constant_tokens(p),
            ExprKind::Unary(UnOp::Neg, x) => {
                if self.info.ty(x).is_int() {
                    let v = self.expr(x);
                    fallible(span, quote!(::nki::__rt::sub(0i64, #v)))
                } else {
                    let v = self.expr(x);
                    quote!((-#v))
                }
            }
            ExprKind::Unary(UnOp::Not, x) => {
                let v = self.expr(x);
                quote!((!#v))
            }
            ExprKind::Binary(op, a, b) => {
                let (ta, tb) = (self.info.ty(a).clone(), self.info.ty(b).clone());
                let ints = ta.is_int() && tb.is_int();
                let numeric = matches!(ta, Ty::Int(_) | Ty::Float) && matches!(tb, Ty::Int(_) | Ty::Float);
                if op.is_arith() {
                    if ints {
                        let (x, y) = (self.expr(a), self.expr(b));
                        self.int_op(*op, x, y, span)
                    } else {
                        let (x, y) = (self.as_float(a), self.as_float(b));
                        self.float_op(*op, x, y, span)
                    }
                } else {
                    let (x, y) = if numeric && !ints { (self.as_float(a), self.as_float(b)) } else { (self.expr(a), self.expr(b)) };
                    let sym = match op {
                        BinOp::Eq => quote!(==),
                        BinOp::Ne => quote!(!=),
                        BinOp::Lt => quote!(<),
                        BinOp::Le => quote!(<=),
                        BinOp::Gt => quote!(>),
                        BinOp::Ge => quote!(>=),
                        BinOp::And => quote!(&&),
                        _ => quote!(||),
                    };
                    quote_spanned!(span=> (#x #sym #y))
                }
            }
            ExprKind::Call { path, args, .. } => self.call(e, path, args),
            ExprKind::Method { recv, name, args } => self.method(e, recv, name, args),
            ExprKind::Index { base, items } => self.index(base, items, span),
            ExprKind::Tuple(items) => {
                let vs: Vec<TokenStream> = items.iter().map(|x| self.owned(x)).collect();
                quote!((#(#vs,)*))
            }
            ExprKind::List(items) => {
                let vs: Vec<TokenStream> = items.iter().map(|x| self.list_elem(x)).collect();
                quote!(::std::vec![#(#vs),*])
            }
            ExprKind::Repeat(x, n) => {
                let (v, k) = (self.owned(x), self.expr(n));
                fallible(span, quote!(::nki::__rt::repeat(#v, #k)))
            }
            ExprKind::Cast(x, to) => {
                let v = self.expr(x);
                match (to, self.info.ty(x)) {
                    (CastTo::Float, Ty::Bool) => quote!(((#v) as i64 as f64)),
                    (CastTo::Float, _) => quote!(((#v) as f64)),
                    (CastTo::Int, _) => quote!(((#v) as i64)),
                }
            }
            ExprKind::If(c, a, b) => {
                let c = self.expr(c);
                let float = self.info.ty(e).is_float();
                let (x, y) = if float { (self.as_float(a), self.as_float(b)) } else { (self.owned(a), self.owned(b)) };
                quote!((if #c { #x } else { #y }))
            }
            ExprKind::Some(x) => {
                let v = self.owned(x);
                quote!(::core::option::Option::Some(#v))
            }
            ExprKind::Field(x, i) => {
                let v = self.expr(x);
                match self.info.ty(x) {
                    Ty::List(_) => {
                        let i = *i as i64;
                        fallible(span, quote!(::nki::__rt::get(&#v, #i)))
                    }
                    _ => {
                        let idx = syn::Index::from(*i);
                        quote!(::core::clone::Clone::clone(&(#v).#idx))
                    }
                }
            }
        }
    }

    /// Elements of a list literal: pairs of integers become arrays (access patterns).
    fn list_elem(&mut self, x: &Expr) -> TokenStream {
        match &x.kind {
            ExprKind::List(items) | ExprKind::Tuple(items) if items.len() == 2 && items.iter().all(|i| self.info.ty(i).is_int()) => {
                let vs: Vec<TokenStream> = items.iter().map(|i| self.expr(i)).collect();
                quote!([#(#vs),*])
            }
            _ => self.owned(x),
        }
    }

    fn index(&mut self, base: &Expr, items: &[IndexItem], span: Span) -> TokenStream {
        match self.info.ty(base).clone() {
            Ty::Shape(_) | Ty::List(_) | Ty::Groups => {
                let b = self.expr(base);
                let i = match items {
                    [IndexItem::At(x)] => self.expr(x),
                    _ => quote!(0i64),
                };
                fallible(span, quote!(::nki::__rt::get(&#b, #i)))
            }
            _ => {
                let b = self.by_ref(base);
                let parts: Vec<TokenStream> = items
                    .iter()
                    .map(|it| match it {
                        IndexItem::At(x) => {
                            let v = self.expr(x);
                            quote!(::nki::Idx::At(#v))
                        }
                        IndexItem::Range { start, stop, step, .. } => {
                            let opt = |s: &mut Self, x: &Option<Expr>| match x {
                                Some(x) => {
                                    let v = s.expr(x);
                                    quote!(::core::option::Option::Some(#v))
                                }
                                None => quote!(::core::option::Option::None),
                            };
                            let (a, z) = (opt(self, start), opt(self, stop));
                            let st = step.as_ref().map_or(quote!(1i64), |s| self.expr(s));
                            quote!(::nki::Idx::Range { start: #a, stop: #z, step: #st })
                        }
                        IndexItem::Ds { start, size, .. } => {
                            let (a, n) = (self.expr(start), self.expr(size));
                            quote!(::nki::Idx::ds(#a, #n))
                        }
                    })
                    .collect();
                fallible(span, quote!(::nki::Tensor::index(#b, &[#(#parts),*])))
            }
        }
    }

    /// Converts an argument for a vocabulary parameter of `kind`.
    fn arg(&mut self, kind: Kind, e: &Expr) -> TokenStream {
        let t = self.info.ty(e).clone();
        match kind {
            Kind::Tensor(_) | Kind::Register | Kind::ReplicaGroup => self.by_ref(e),
            Kind::Operand => {
                let v = if t.is_tensor() { self.by_ref(e) } else { self.expr(e) };
                quote!(::nki::nisa::Operand::from(#v))
            }
            Kind::Float => self.as_float(e),
            Kind::Str => match &e.kind {
                ExprKind::Str(s) => quote!(#s),
                _ => {
                    let v = self.expr(e);
                    quote!(&*#v)
                }
            },
            Kind::Pattern | Kind::Ints | Kind::TensorLists => match &e.kind {
                ExprKind::List(items) | ExprKind::Tuple(items) => {
                    let vs: Vec<TokenStream> = items
                        .iter()
                        .map(|x| match (kind, &x.kind) {
                            (Kind::TensorLists, ExprKind::List(ts) | ExprKind::Tuple(ts)) => {
                                let ts: Vec<TokenStream> = ts.iter().map(|t| self.owned(t)).collect();
                                quote!(::std::vec![#(#ts),*])
                            }
                            _ => self.list_elem(x),
                        })
                        .collect();
                    quote!(&[#(#vs),*])
                }
                _ => self.by_ref(e),
            },
            Kind::Axis => match &e.kind {
                ExprKind::List(items) | ExprKind::Tuple(items) => {
                    let vs: Vec<TokenStream> = items.iter().map(|x| self.expr(x)).collect();
                    quote!(&[#(#vs),*])
                }
                _ => {
                    let v = self.expr(e);
                    quote!(&[#v])
                }
            },
            Kind::Pair => match &e.kind {
                ExprKind::List(items) | ExprKind::Tuple(items) if items.len() == 2 => {
                    let (a, b) = (self.expr(&items[0]), self.expr(&items[1]));
                    quote!((#a, #b))
                }
                _ => self.expr(e),
            },
            Kind::RegisterSource => {
                let v = if matches!(t, Ty::Register) { self.by_ref(e) } else { self.expr(e) };
                quote!(::nki::nisa::RegisterSource::from(#v))
            }
            Kind::DynamicOffset => {
                let v = self.by_ref(e);
                quote!(::nki::nisa::DynamicOffset::offset_value(#v)?)
            }
            Kind::Groups => match &e.kind {
                ExprKind::List(rings) | ExprKind::Tuple(rings) => {
                    let rs: Vec<TokenStream> = rings
                        .iter()
                        .map(|r| match &r.kind {
                            ExprKind::List(ranks) | ExprKind::Tuple(ranks) => {
                                let vs: Vec<TokenStream> = ranks.iter().map(|x| self.expr(x)).collect();
                                quote!(::std::vec![#(#vs),*])
                            }
                            _ => self.owned(r),
                        })
                        .collect();
                    quote!(::std::vec![#(#rs),*])
                }
                _ => self.owned(e),
            },
            _ => self.owned(e),
        }
    }

    /// Converts an argument for an optional parameter (an `Option` field or trailing argument).
    fn opt_arg(&mut self, kind: Kind, e: &Expr) -> TokenStream {
        match (self.info.ty(e).clone(), &e.kind) {
            (_, ExprKind::None) => quote!(::core::option::Option::None),
            (Ty::Option(inner), _) => {
                let v = self.expr(e);
                if inner.is_tensor() { quote!(#v.as_ref()) } else { quote!(#v.clone()) }
            }
            _ => {
                let v = match kind {
                    Kind::OptBool => self.expr(e),
                    _ => self.arg(kind, e),
                };
                quote!(::core::option::Option::Some(#v))
            }
        }
    }

    fn vocab_call(&mut self, spec: &FnSpec, bind: &Binding, slots: &[Option<usize>], args: &[Arg], span: Span) -> TokenStream {
        let f = rt_path(bind.rt);
        let ctx = &self.ctx;
        let mut positional = Vec::new();
        if bind.ctx {
            positional.push(quote!(#ctx));
        }
        let mut fields = Vec::new();
        for (p, s) in spec.params.iter().zip(slots) {
            let value = s.and_then(|i| args.get(i)).map(|a| &a.value);
            if p.required {
                positional.push(match value {
                    Some(v) => self.arg(p.kind, v),
                    None => quote!(::core::unreachable!()),
                });
            } else if bind.opts.is_empty() {
                positional.push(value.map_or(quote!(::core::option::Option::None), |v| self.opt_arg(p.kind, v)));
            } else if let Some(v) = value {
                let n = format_ident!("{}", p.name);
                let val = self.opt_arg(p.kind, v);
                fields.push(quote!(#n: #val));
            }
        }
        if !bind.opts.is_empty() {
            let o = rt_path(bind.opts);
            positional.push(quote!(#o { #(#fields,)* ..::core::default::Default::default() }));
        }
        let call = quote_spanned!(span=> #f(#(#positional),*));
        if bind.fallible { fallible(span, call) } else { call }
    }

    fn call(&mut self, e: &Expr, path: &[String], args: &[Arg]) -> TokenStream {
        if path == ["Outputs"] {
            let vs: Vec<TokenStream> = args.iter().map(|a| self.owned(&a.value)).collect();
            return quote_spanned!(e.span.start=> ::nki::Outputs(::std::vec![#(#vs),*]));
        }
        match self.info.call(e) {
            Some(Resolved::Vocab { spec, bind, slots }) => {
                let (spec, bind, slots) = (*spec, *bind, slots.clone());
                self.vocab_call(spec, bind, &slots, args, e.span.start)
            }
            _ => {
                let segs = path.iter().map(|s| format_ident!("{}", s));
                let mut pos = Vec::new();
                let mut kws = Vec::new();
                for a in args {
                    let v = self.user_arg(&a.value);
                    match &a.name {
                        None => pos.push(v),
                        Some(n) => kws.push(quote!(.#n(#v))),
                    }
                }
                let ctx = &self.ctx;
                fallible(e.span.start, quote_spanned!(e.span.start=> #(#segs)::*::Call::new(#(#pos),*) #(#kws)* .run(#ctx)))
            }
        }
    }

    /// Arguments to other kernels/helpers: tensors by reference, options of tensors as `Option<&Tensor>`.
    fn user_arg(&mut self, e: &Expr) -> TokenStream {
        match self.info.ty(e).clone() {
            Ty::Tensor(_) => self.by_ref(e),
            Ty::Option(inner) if inner.is_tensor() => {
                let v = self.expr(e);
                quote!(#v.as_ref())
            }
            Ty::Str => match &e.kind {
                ExprKind::Str(s) => quote!(#s),
                _ => {
                    let v = self.expr(e);
                    quote!(&*#v)
                }
            },
            _ => self.owned(e),
        }
    }

    fn method(&mut self, e: &Expr, recv: &Expr, name: &syn::Ident, args: &[Arg]) -> TokenStream {
        let span = e.span.start;
        let n = name.to_string();
        if let Some(Resolved::Method { slots, .. }) = self.info.call(e) {
            let slots = slots.clone();
            let r = self.by_ref(recv);
            let mut a = |i: usize| -> Option<&Expr> { slots.get(i).copied().flatten().and_then(|k| args.get(k)).map(|a| &a.value) };
            return match n.as_str() {
                "shape" => quote_spanned!(span=> ::nki::__rt::shape(#r)),
                "dtype" => quote_spanned!(span=> ::nki::Tensor::dtype(#r)),
                "ndim" => quote_spanned!(span=> (::nki::Tensor::ndim(#r) as i64)),
                "ap" => {
                    let pattern = match a(0) {
                        Some(p) => self.arg(Kind::Pattern, p),
                        None => quote!(&[]),
                    };
                    let offset = a(1).map_or(quote!(::core::option::Option::None), |x| {
                        let v = self.expr(x);
                        quote!(::core::option::Option::Some(#v))
                    });
                    let dynamic = a(2).map_or(quote!(::core::option::Option::None), |x| {
                        let v = self.arg(Kind::DynamicOffset, x);
                        quote!(::core::option::Option::Some(#v))
                    });
                    // Slot 3 is `vector_offset`, which the checker rejects until it is supported.
                    let indirect = a(4).map_or(quote!(0i64), |x| self.expr(x));
                    fallible(span, quote!(::nki::__rt::ap(#r, #pattern, #offset, #dynamic, #indirect)))
                }
                "reshape" => {
                    let shape = a(0).map_or(quote!(&[]), |x| self.arg(Kind::Ints, x));
                    fallible(span, quote!(::nki::__rt::reshape(#r, #shape)))
                }
                other => {
                    let f = format_ident!("{}", other);
                    let given: Vec<&Expr> = (0..4).filter_map(&mut a).collect();
                    let vals: Vec<TokenStream> = given.into_iter().map(|x| self.expr(x)).collect();
                    let step = if other == "slice" && vals.len() == 3 { quote!(, 1i64) } else { quote!() };
                    fallible(span, quote!(::nki::__rt::#f(#r, #(#vals),* #step)))
                }
            };
        }
        let r = self.owned(recv);
        let arg0 = |s: &mut Self| args.first().map(|a| s.expr(&a.value)).unwrap_or_default();
        match (self.info.ty(recv).clone(), n.as_str()) {
            (Ty::Int(_), "pow") => {
                let b = arg0(self);
                fallible(span, quote!(::nki::__rt::pow(#r, #b)))
            }
            (Ty::Int(_), "div_ceil") => {
                let b = arg0(self);
                fallible(span, quote!(::nki::__rt::div_ceil(#r, #b)))
            }
            (Ty::Float, "powi") => {
                let b = arg0(self);
                quote!(#r.powi((#b) as i32))
            }
            (Ty::Float, "min" | "max" | "powf") => {
                let b = args.first().map(|a| self.as_float(&a.value)).unwrap_or_default();
                quote!(#r.#name(#b))
            }
            (Ty::Shape(_) | Ty::Groups, "len") => quote!((#r.len() as i64)),
            (Ty::Option(_) | Ty::None, "unwrap_or") => {
                let b = args.first().map(|a| self.owned(&a.value)).unwrap_or_default();
                quote!(#r.unwrap_or(#b))
            }
            _ => {
                let vs: Vec<TokenStream> = args.iter().map(|a| self.expr(&a.value)).collect();
                quote_spanned!(span=> #r.#name(#(#vs),*))
            }
        }
    }
}
