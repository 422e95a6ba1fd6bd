//! Method calls in the emulation: tensor views and properties, scalar methods.

use super::*;
use crate::check::split_views;

impl Rs<'_> {
    pub(super) fn method(&mut self, e: &Expr, recv: &Expr, name: &syn::Ident, args: &[Arg]) -> TokenStream {
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
                "is_contiguous" => quote_spanned!(span=> ::nki::Tensor::is_contiguous(#r)),
                "is_indirect" => quote_spanned!(span=> ::nki::Tensor::is_indirect(#r)),
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
                    let indirect = a(4).map_or(quote!(0i64), |x| self.expr(x));
                    let dtype = a(5).map_or(quote!(::core::option::Option::None), |x| {
                        let v = self.expr(x);
                        quote!(::core::option::Option::Some(#v))
                    });
                    // The checker makes `scalar_offset` and `vector_offset` exclusive.
                    match a(3) {
                        Some(v) => {
                            let v = self.by_ref(v);
                            fallible(span, quote!(::nki::__rt::ap_vector_offset(#r, #pattern, #offset, #v, #indirect, #dtype)))
                        }
                        None => fallible(span, quote!(::nki::__rt::ap(#r, #pattern, #offset, #dynamic, #indirect, #dtype))),
                    }
                }
                "reshape" => {
                    let shape = a(0).map_or(quote!(&[]), |x| self.arg(Kind::Ints, x));
                    fallible(span, quote!(::nki::__rt::reshape(#r, #shape)))
                }
                "indirect" => {
                    let ctx = ctx_ident();
                    let index = a(0).map_or(quote!(::core::unreachable!()), |x| self.by_ref(x));
                    let num = a(1).map_or(quote!(::core::option::Option::None), |x| {
                        let v = self.expr(x);
                        quote!(::core::option::Option::Some(#v))
                    });
                    fallible(span, quote!(::nki::__rt::indirect(#ctx, #r, #index, #num)))
                }
                "view" | "reinterpret_cast" => {
                    let dtype = a(0).map_or(quote!(::core::unreachable!()), |x| self.expr(x));
                    fallible(span, quote!(::nki::__rt::view(#r, #dtype)))
                }
                "get_pattern" => quote_spanned!(span=> ::nki::Tensor::get_pattern(#r)),
                "vector_select" => {
                    let dim = a(0).map_or(quote!(0i64), |x| self.expr(x));
                    let v = a(1).map_or(quote!(::core::unreachable!()), |x| self.by_ref(x));
                    fallible(span, quote!(::nki::__rt::vector_select(#r, #dim, #v)))
                }
                "reshape_dim" => {
                    let dim = a(0).map_or(quote!(0i64), |x| self.expr(x));
                    let shape = a(1).map_or(quote!(&[]), |x| self.arg(Kind::Ints, x));
                    fallible(span, quote!(::nki::__rt::reshape_dim(#r, #dim, #shape)))
                }
                "rearrange" => {
                    // The checker accepts only literal patterns and (name, size) pairs.
                    let pattern = |x: Option<&Expr>| {
                        let groups = x.and_then(split_views::literal_pattern).unwrap_or_default();
                        let gs = groups.iter().map(|g| quote!(&[#(#g),*]));
                        quote!(&[#(#gs),*])
                    };
                    let (src, dst) = (pattern(a(0)), pattern(a(1)));
                    let pairs: Vec<TokenStream> = match a(2) {
                        Some(x) => match &x.kind {
                            ExprKind::List(items) | ExprKind::Tuple(items) => items
                                .iter()
                                .filter_map(|kv| match &kv.kind {
                                    ExprKind::Tuple(kv) if kv.len() == 2 => {
                                        let ExprKind::Str(k) = &kv[0].kind else { return None };
                                        let v = self.expr(&kv[1]);
                                        Some(quote!((#k, #v)))
                                    }
                                    _ => None,
                                })
                                .collect(),
                            _ => Vec::new(),
                        },
                        None => Vec::new(),
                    };
                    fallible(span, quote!(::nki::__rt::rearrange(#r, #src, #dst, &[#(#pairs),*])))
                }
                "permute" => {
                    let dims = a(0).map_or(quote!(&[]), |x| self.arg(Kind::Ints, x));
                    fallible(span, quote!(::nki::__rt::permute(#r, #dims)))
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
            (Ty::Shape(_) | Ty::Groups | Ty::List(_) | Ty::Seq(_), "len") => quote!((#r.len() as i64)),
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
