//! Expressions of the emulation: checked integer and float arithmetic, tensors by value and by reference, indexing.

use super::*;

impl Rs<'_> {
    /// An owned value of the expression (tensor variables are cloned).
    pub(super) fn owned(&mut self, e: &Expr) -> TokenStream {
        match &e.kind {
            ExprKind::Var(v) if !matches!(self.info.ty(e), Ty::Int(_) | Ty::Float | Ty::Bool) => {
                quote!(::core::clone::Clone::clone(&#v))
            }
            _ => self.expr(e),
        }
    }

    /// A `&Tensor` (or other borrowed value) for an argument.
    pub(super) fn by_ref(&mut self, e: &Expr) -> TokenStream {
        match &e.kind {
            ExprKind::Var(v) => quote!(&#v),
            _ => {
                let v = self.expr(e);
                quote!(&(#v))
            }
        }
    }

    pub(super) fn int_op(&self, op: BinOp, a: TokenStream, b: TokenStream, span: Span) -> TokenStream {
        let f = match op {
            BinOp::Add => "add",
            BinOp::Sub => "sub",
            BinOp::Mul => "mul",
            BinOp::Div => "floordiv",
            BinOp::Shl => "shl",
            BinOp::Shr => "shr",
            _ => "floormod",
        };
        let f = format_ident!("{}", f);
        fallible(span, quote!(::nki::__rt::#f(#a, #b)))
    }

    /// `+`, `-` or `*` with an operand of a type only the compiler sees
    /// (the checker refuses `/` and `%` there).
    fn opaque_op(&self, op: BinOp, a: TokenStream, b: TokenStream, span: Span) -> TokenStream {
        let f = match op {
            BinOp::Add => "py_add",
            BinOp::Sub => "py_sub",
            _ => "py_mul",
        };
        let f = format_ident!("{}", f);
        fallible(span, quote!(::nki::__rt::PyArith::#f(#a, #b)))
    }

    pub(super) fn float_op(&self, op: BinOp, a: TokenStream, b: TokenStream, span: Span) -> TokenStream {
        match op {
            BinOp::Add => quote!((#a + #b)),
            BinOp::Sub => quote!((#a - #b)),
            BinOp::Mul => quote!((#a * #b)),
            BinOp::Div => fallible(span, quote!(::nki::__rt::fdiv(#a, #b))),
            _ => fallible(span, quote!(::nki::__rt::fmod(#a, #b))),
        }
    }

    /// The expression as a float (ints are converted).
    pub(super) fn as_float(&mut self, e: &Expr) -> TokenStream {
        let v = self.expr(e);
        if self.info.ty(e).is_int() { quote!(((#v) as f64)) } else { v }
    }

    pub(super) fn expr(&mut self, e: &Expr) -> TokenStream {
        let span = e.span.start;
        match &e.kind {
            ExprKind::Invalid => quote!(::core::unreachable!()),
            ExprKind::Int(v) => quote_spanned!(span=> #v),
            ExprKind::Float(v) => float_tokens(*v),
            ExprKind::Bool(b) => quote_spanned!(span=> #b),
            ExprKind::Str(s) => quote_spanned!(span=> ::std::string::String::from(#s)),
            ExprKind::None => quote_spanned!(span=> ::core::option::Option::None),
            ExprKind::Var(v) => quote_spanned!(span=> #v),
            ExprKind::Path(p) if matches!(self.info.ty(e), Ty::PyEnum(_)) => member_tokens(p),
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
                if matches!(op, BinOp::Shl | BinOp::Shr) {
                    let (x, y) = (self.expr(a), self.expr(b));
                    self.int_op(*op, x, y, span)
                } else if op.is_arith() {
                    if matches!(ta, Ty::Opaque) || matches!(tb, Ty::Opaque) {
                        // Another function's result: the compiler picks int or float arithmetic.
                        let (x, y) = (self.expr(a), self.expr(b));
                        self.opaque_op(*op, x, y, span)
                    } else if ints {
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
            ExprKind::Comprehension { var, iter, body } => {
                let (start, stop) = (self.expr(&iter.start), self.expr(&iter.stop));
                let step = iter.step.as_ref().map_or(quote!(1i64), |s| self.expr(s));
                let rev = iter.rev;
                let range = fallible(span, quote!(::nki::__rt::list_range(#start, #stop, #step, #rev)));
                let (p, v) = (self.pat(var), self.owned(body));
                let (items, ctx) = (syn::Ident::new("items", Span::mixed_site()), &self.ctx);
                let check = fallible(span, quote!(::nki::__rt::iteration(#ctx)));
                quote_spanned!(span=> {
                    let mut #items = ::std::vec::Vec::new();
                    for #p in #range { #check; #items.push(#v); }
                    #items
                })
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
            ExprKind::Attr(x, name) => {
                let v = self.expr(x);
                quote_spanned!(name.span()=> ::core::clone::Clone::clone(&(#v).#name))
            }
            ExprKind::Struct(name, fields, defaults) => {
                let fs: Vec<TokenStream> = fields
                    .iter()
                    .map(|(f, v)| {
                        let v = self.owned(v);
                        quote!(#f: #v)
                    })
                    .collect();
                let rest = defaults.then(|| quote!(..::core::default::Default::default()));
                quote_spanned!(name.span()=> #name { #(#fs,)* #rest })
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
    pub(super) fn list_elem(&mut self, x: &Expr) -> TokenStream {
        match &x.kind {
            ExprKind::List(items) | ExprKind::Tuple(items) if items.len() == 2 && items.iter().all(|i| self.info.ty(i).is_int()) => {
                let vs: Vec<TokenStream> = items.iter().map(|i| self.expr(i)).collect();
                quote!([#(#vs),*])
            }
            _ => self.owned(x),
        }
    }

    pub(super) fn index(&mut self, base: &Expr, items: &[IndexItem], span: Span) -> TokenStream {
        match self.info.ty(base).clone() {
            Ty::Shape(_) | Ty::List(_) | Ty::Seq(_) | Ty::Groups => {
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
                            if matches!(self.info.ty(x), Ty::Slice(..)) { v } else { quote!(::nki::Idx::At(#v)) }
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
}
