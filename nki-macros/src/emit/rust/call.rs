//! Calls in the emulation: vocabulary functions with their arguments converted per parameter kind and their options struct, other kernels through their launchers.

use super::*;

impl Rs<'_> {
    /// Converts an argument for a vocabulary parameter of `kind`.
    pub(super) fn arg(&mut self, kind: Kind, e: &Expr) -> TokenStream {
        let t = self.info.ty(e).clone();
        match kind {
            Kind::Tensor(_) | Kind::Register | Kind::ReplicaGroup => self.by_ref(e),
            // A helper's result may be a tile or a number: borrowed either way.
            Kind::Operand if matches!(t, Ty::Opaque) => {
                let v = self.by_ref(e);
                quote!(::nki::nisa::AsOperand::as_operand(#v))
            }
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
            Kind::Floats => match &e.kind {
                ExprKind::List(items) | ExprKind::Tuple(items) => {
                    let vs: Vec<TokenStream> = items.iter().map(|x| self.as_float(x)).collect();
                    quote!(&[#(#vs),*][..])
                }
                _ => self.by_ref(e),
            },
            Kind::Constant => {
                let (shape, values) = crate::check::constant::literal(e).unwrap_or_default();
                quote!(::nki::nl::Constant { shape: &[#(#shape),*], values: &[#(#values),*] })
            }
            Kind::Tensors => match &e.kind {
                // Each tensor cloned through a reference, so owned tensors and the
                // kernel's `&Tensor` parameters both work.
                ExprKind::List(ts) | ExprKind::Tuple(ts) => {
                    let ts: Vec<TokenStream> =
                        ts.iter().map(|t| self.by_ref(t)).map(|t| quote!(<::nki::Tensor as ::core::clone::Clone>::clone(#t))).collect();
                    quote!(&[#(#ts),*])
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
    pub(super) fn opt_arg(&mut self, kind: Kind, e: &Expr) -> TokenStream {
        match (self.info.ty(e).clone(), &e.kind) {
            (_, ExprKind::None) => quote!(::core::option::Option::None),
            (Ty::Option(inner), _) => {
                let v = self.expr(e);
                if inner.is_tensor() { quote!(#v.as_ref()) } else { quote!(#v.clone()) }
            }
            _ => {
                let v = match kind {
                    Kind::OptBool => self.expr(e),
                    // Optional integer lists are owned (`channel_ids`, `axes`): a literal
                    // or a comprehension's list, copied.
                    Kind::Ints => {
                        let v = self.arg(kind, e);
                        quote!(<[i64]>::to_vec(#v))
                    }
                    _ => self.arg(kind, e),
                };
                quote!(::core::option::Option::Some(#v))
            }
        }
    }

    pub(super) fn vocab_call(&mut self, spec: &FnSpec, bind: &Binding, slots: &[Option<usize>], args: &[Arg], span: Span) -> TokenStream {
        // Spanned at the call, so `#[track_caller]` runtime functions see the kernel line.
        let f: TokenStream = rt_path(bind.rt)
            .into_iter()
            .map(|mut t| {
                t.set_span(span);
                t
            })
            .collect();
        // Only the bound call itself takes the variable's name, not calls in its arguments.
        let var = self.var.take().filter(|_| bind.var);
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
        if let Some(v) = var {
            fields.push(quote!(var: ::core::option::Option::Some(#v)));
        }
        if !bind.opts.is_empty() {
            let o = rt_path(bind.opts);
            positional.push(quote!(#o { #(#fields,)* ..::core::default::Default::default() }));
        }
        let call = quote_spanned!(span=> #f(#(#positional),*));
        let call = if bind.fallible { fallible(span, call) } else { call };
        // The op's kernel line, for the memory model's hazard reports.
        let ctx = &self.ctx;
        if bind.ctx { quote_spanned!(span=> { #ctx.__at_line(::core::file!(), ::core::line!()); #call }) } else { call }
    }

    pub(super) fn call(&mut self, e: &Expr, path: &[String], args: &[Arg]) -> TokenStream {
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
                // Only the bound call itself takes the variable's name, not calls in its arguments.
                let ctx = self.ctx.clone();
                let run = match self.var.take() {
                    Some(v) => quote!(__run_bound(#ctx, #v)),
                    None => quote!(run(#ctx)),
                };
                let segs: Vec<_> = path.iter().map(|s| format_ident!("{}", s)).collect();
                let mut pos = Vec::new();
                let mut kws = Vec::new();
                for a in args {
                    let v = self.user_arg(&a.value);
                    match &a.name {
                        None => pos.push(v),
                        Some(n) => kws.push(quote!(.#n(#v))),
                    }
                }
                // Bound as the emitted Python binds them (see `Call::__positional`); a
                // call passing another number of positional arguments is refused at
                // the caller's tokens, saying how to call the function.
                let n = pos.len();
                self.call_checks.push(quote_spanned!(e.span.start=>
                    const _: () = if #n != #(#segs)::*::Call::__POSITIONAL { ::core::panic!("{}", #(#segs)::*::Call::__CALL_FORM) };
                ));
                fallible(e.span.start, quote_spanned!(e.span.start=> #(#segs)::*::Call::__positional(#(#pos),*) #(#kws)* .#run))
            }
        }
    }

    /// Arguments to other kernels/helpers: tensors by reference, options of tensors as `Option<&Tensor>`.
    pub(super) fn user_arg(&mut self, e: &Expr) -> TokenStream {
        match self.info.ty(e).clone() {
            Ty::Tensor(_) | Ty::Object(_) => self.by_ref(e),
            // Typed by the callee's parameter: a tensor by reference, a plain value by copy.
            Ty::Unknown | Ty::Opaque => {
                // A call needs no parentheses after `&` (its `?` binds first), which
                // keeps nested helper calls within the expansion's depth bound.
                let r = match &e.kind {
                    ExprKind::Call { .. } => {
                        let v = self.expr(e);
                        quote!(&#v)
                    }
                    _ => self.by_ref(e),
                };
                quote!(::nki::__rt::AsArg::as_arg(#r))
            }
            Ty::Option(inner) if inner.is_tensor() => {
                let v = self.expr(e);
                quote!(#v.as_ref())
            }
            // `Some(x)` with `x` typed by rustc alone (a helper's result, a part
            // of one): the callee's parameter picks a tensor by reference or a
            // plain value, as for an untyped argument above.
            Ty::Option(inner) if inner.is_unknown() => {
                let v = self.expr(e);
                quote!(::nki::__rt::AsArg::as_arg(&(#v)))
            }
            Ty::Register => {
                let v = self.expr(e);
                quote_spanned!(e.span.start=> ::nki::__rt::RegisterArg::register_arg(&(#v)))
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
}
