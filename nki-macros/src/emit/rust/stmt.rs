//! Statements and blocks of the emulation: bindings, loops, conditionals, assertions.

use super::*;
use syn::ext::IdentExt;

impl Rs<'_> {
    pub(super) fn block(&mut self, b: &Block, is_fn: bool) -> TokenStream {
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

    pub(super) fn pat(&self, p: &Pat) -> TokenStream {
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

    /// A loop bound: an integer, or a register's value when the loop starts.
    fn bound(&mut self, e: &Expr) -> TokenStream {
        let v = self.expr(e);
        if matches!(self.info.ty(e), Ty::Register) { quote!((#v).value()) } else { v }
    }

    /// `nl::fori_loop` runs its body once per index with a fresh index register;
    /// `nl::while_loop` while the register its body returns is nonzero, bounded by
    /// `WHILE_LOOP_MAX_ITERATIONS`; `nl::no_reorder` is a plain block (the
    /// emulator runs every op in program order).
    fn region(&mut self, r: &Region) -> TokenStream {
        let ctx = self.ctx.clone();
        let span = r.span.start;
        let var = r.var.as_ref().map(|v| self.pat(v));
        let stmts: Vec<TokenStream> = r.body.stmts.iter().map(|s| self.stmt(s)).collect();
        let arg = |name: &str| self.info.region_arg(r, name);
        match r.form {
            RegionForm::NoReorder => quote_spanned!(span=> { #(#stmts)* }),
            RegionForm::Fori => {
                let (lower, upper) = (arg("lower"), arg("upper"));
                let step = arg("step");
                let lower = lower.map_or(quote!(0i64), |e| self.bound(e));
                let upper = upper.map_or(quote!(0i64), |e| self.bound(e));
                let step = step.map_or(quote!(1i64), |e| self.expr(e));
                let range = fallible(span, quote!(::nki::__rt::range(#lower, #upper, #step)));
                let check = fallible(span, quote!(::nki::__rt::iteration(#ctx)));
                let i = syn::Ident::new("index", Span::mixed_site());
                quote_spanned!(span=> for #i in #range {
                    #check;
                    let #var = ::nki::nisa::Register::new(#i);
                    #(#stmts)*
                })
            }
            RegionForm::While => {
                let init = arg("init").map_or(quote!(0i64), |e| self.bound(e));
                let next = r.body.tail.as_ref().map_or(quote!(0i64), |t| self.bound(t));
                let (cond, count) = (syn::Ident::new("condition", Span::mixed_site()), syn::Ident::new("count", Span::mixed_site()));
                let check = fallible(span, quote!(::nki::nl::loops::while_iteration(#ctx, &mut #count)));
                quote_spanned!(span=> {
                    let mut #cond: i64 = #init;
                    let mut #count: u64 = 0;
                    while #cond != 0 {
                        #check;
                        let #var = ::nki::nisa::Register::new(#cond);
                        #cond = { #(#stmts)* #next };
                    }
                })
            }
        }
    }

    /// The value of `call` for the variable `var` it is bound or assigned to: a
    /// tile the call makes is named by the variable (an `nl.ndarray` as it is
    /// allocated, a helper's tile by its `Call`, any other op's after the call).
    fn bound_call(&mut self, var: &syn::Ident, call: &Expr) -> TokenStream {
        let name = var.unraw().to_string();
        self.var = Some(name.clone());
        let v = self.owned(call);
        self.var = None;
        match self.info.call(call) {
            Some(Resolved::Vocab { bind, .. }) if !bind.var && matches!(self.info.ty(call), Ty::Tensor(_)) => {
                quote!(::nki::Tensor::bound(#v, #name))
            }
            _ => v,
        }
    }

    pub(super) fn stmt(&mut self, s: &Stmt) -> TokenStream {
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
                    // `Outputs` unpack into a tuple of tensors; a tile is named by
                    // the variable.
                    (_, _) if ty.is_some() && matches!(self.info.call(init), Some(Resolved::User)) => {
                        let v = self.expr(init);
                        let v = fallible(span.start, quote!(::nki::__rt::returned(#v)));
                        match (pat, ty) {
                            (Pat::Ident(i, _), Some(TypeAnn::Tensor(..))) => {
                                let name = i.unraw().to_string();
                                quote!(::nki::Tensor::bound(#v, #name))
                            }
                            _ => v,
                        }
                    }
                    (Pat::Ident(i, _), _) if matches!(init.kind, ExprKind::Call { .. }) => self.bound_call(i, init),
                    _ => self.owned(init),
                };
                let t = ty.as_ref().map(|t| {
                    let t = local_type(t);
                    quote!(: #t)
                });
                quote_spanned!(span.start=> let #p #t = #v;)
            }
            Stmt::Assign { name, op, value, span } => {
                let v = match (op, &value.kind) {
                    (None, ExprKind::Call { .. }) => self.bound_call(name, value),
                    _ => self.expr(value),
                };
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
                let (start, stop) = (self.bound(&iter.start), self.bound(&iter.stop));
                let step = iter.step.as_ref().map_or(quote!(1i64), |s| self.expr(s));
                let range = if iter.rev { quote!(range_rev) } else { quote!(range) };
                let range = fallible(iter.span.start, quote!(::nki::__rt::#range(#start, #stop, #step)));
                let p = self.pat(var);
                let b = self.block(body, false);
                // Every iteration checks whether the launch must stop (failure, deadline).
                let ctx = &self.ctx;
                let check = fallible(span.start, quote!(::nki::__rt::iteration(#ctx)));
                if iter.kind == RangeKind::Nl("dynamic_range") {
                    // The device holds the index in a register; the body reads it as one.
                    let i = syn::Ident::new("index", Span::mixed_site());
                    return quote_spanned!(span.start=> for #i in #range { #check; let #p = ::nki::nisa::Register::new(#i); #b });
                }
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
            Stmt::Region(r) => self.region(r),
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
                                FmtPiece::Const(name) => {
                                    fmt.push_str("{}");
                                    args.push(quote!(#name));
                                }
                                // rustc checks that the path names a `&str`.
                                FmtPiece::Shared(path) => {
                                    fmt.push_str("{}");
                                    args.push(quote!(::core::convert::identity::<&str>(#path)));
                                }
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
            Stmt::Jump(crate::ast::Jump::Break, span) => quote_spanned!(span.start=> break;),
            Stmt::Jump(crate::ast::Jump::Continue, span) => quote_spanned!(span.start=> continue;),
            Stmt::Return(e, span) => {
                let v = e.as_ref().map_or(quote!(()), |e| self.owned(e));
                quote_spanned!(span.start=> return ::core::result::Result::Ok(#v);)
            }
        }
    }
}
