//! Calls: vocabulary functions bound to their parameters and rules, other kernels and helpers.

use super::*;

impl Checker<'_> {
    /// An error at `span` when the kernel's target generation lacks `spec`.
    pub(super) fn generation_check(&mut self, spec: &FnSpec, span: Spn) {
        if !spec.generations.contains(&self.target) {
            let gens: Vec<String> = spec.generations.iter().map(ToString::to_string).collect();
            self.diag.error(
                span,
                format!(
                    "`{}` exists on {} only, but the kernel targets {} (set `#[nki_kernel(target = \"...\")]`)",
                    spec.official_name(),
                    gens.join(", "),
                    self.target
                ),
            );
        }
    }

    pub(super) fn call(&mut self, e: &Expr, path: &[String], path_span: Spn, args: &[Arg]) -> Ty {
        if path == ["nisa", "dma_copy"] || path == ["nisa", "dma_compute"] {
            self.dma_operands.extend(args.iter().map(|a| key(&a.value)));
            // dma_compute's sources are the elements of its list.
            for a in args {
                if let ExprKind::List(items) | ExprKind::Tuple(items) = &a.value.kind {
                    self.dma_operands.extend(items.iter().map(key));
                }
            }
        }
        let arg_tys: Vec<Ty> = args.iter().map(|a| self.expr(&a.value)).collect();
        if path == ["Outputs"] {
            for (a, t) in args.iter().zip(&arg_tys) {
                if a.name.is_some() || !(t.is_tensor() || t.is_unknown()) {
                    self.diag.error(a.value.span, format!("Outputs(...) takes the returned tensors, this is {}", t.describe()));
                }
            }
            if args.is_empty() {
                self.diag.error(e.span, "Outputs(...) needs at least one tensor");
            }
            return Ty::Outputs;
        }
        if let Some(spec) = vocab::lookup_function(path) {
            let Some(bind) = spec.binding() else {
                self.diag.error(path_span, planned(&spec.official_name(), spec.summary));
                return Ty::Unknown;
            };
            self.generation_check(spec, path_span);
            let slots = self.resolve(spec.py, spec.params, args, e.span);
            let site = self.site(spec, &slots, args, &arg_tys);
            let ret = spec.rule.map(|r| rules::rule(r)(self.diag, &site));
            super::same_dtype::check(self.diag, &site);
            self.info.calls.insert(key(e), Resolved::Vocab { spec, bind, slots });
            return match bind.returns {
                Returns::Unit => Ty::Unit,
                Returns::Int => Ty::Int(Val::unknown()),
                Returns::Bool => Ty::Bool,
                Returns::Register => Ty::Register,
                Returns::ReplicaGroup => Ty::ReplicaGroup,
                Returns::Custom => ret.unwrap_or(Ty::Unknown),
            };
        }
        if matches!(path.first().map(String::as_str), Some("nl" | "nisa" | "ncc")) {
            let module = &path[0];
            let joined = path.join("::");
            let names = vocab::names_in(module);
            let hint = path
                .last()
                .and_then(|last| did_you_mean(last, names.iter().copied()))
                .map(|s| format!("; did you mean `{module}::{s}`?"))
                .unwrap_or_default();
            self.diag.error(path_span, format!("`{joined}` is not part of the NKI vocabulary nki-rs supports{hint}"));
            return Ty::Unknown;
        }
        self.info.calls.insert(key(e), Resolved::User);
        if !self.info.deps.iter().any(|(d, _)| d == path) {
            self.info.deps.push((path.to_vec(), path_span.start));
        }
        Ty::Opaque
    }

    /// Binds arguments to parameters (positional first, then keywords), reporting
    /// unknown, duplicate, extra and missing arguments.
    pub(super) fn resolve(&mut self, what: &str, params: &[Param], args: &[Arg], span: Spn) -> Vec<Option<usize>> {
        let mut slots: Vec<Option<usize>> = vec![None; params.len()];
        let mut positional = 0;
        for (i, a) in args.iter().enumerate() {
            match &a.name {
                None => {
                    if positional >= params.len() {
                        self.diag.error(a.value.span, format!("{what} takes at most {} arguments", params.len()));
                    } else {
                        slots[positional] = Some(i);
                    }
                    positional += 1;
                }
                Some(n) => {
                    let name = n.to_string();
                    match params.iter().position(|p| p.name == name) {
                        Some(pi) if slots[pi].is_some() => self.diag.error(n.span(), format!("`{name}` is given twice to {what}")),
                        Some(pi) => slots[pi] = Some(i),
                        None => {
                            let hint = did_you_mean(&name, params.iter().map(|p| p.name))
                                .map(|s| format!("; did you mean `{s}`?"))
                                .unwrap_or_default();
                            let all: Vec<&str> = params.iter().map(|p| p.name).collect();
                            self.diag
                                .error(n.span(), format!("{what} has no parameter `{name}`{hint} (its parameters are {})", all.join(", ")));
                        }
                    }
                }
            }
        }
        for (p, s) in params.iter().zip(&slots) {
            if p.required && s.is_none() {
                self.diag.error(span, format!("{what} is missing its argument `{}`", p.name));
            }
        }
        slots
    }

    pub(super) fn site<'a>(&mut self, spec: &'static FnSpec, slots: &[Option<usize>], args: &'a [Arg], tys: &[Ty]) -> CallSite<'a> {
        let mut out = Vec::with_capacity(slots.len());
        for (p, s) in spec.params.iter().zip(slots) {
            out.push(s.map(|i| {
                self.kind(spec.py, p, &tys[i], &args[i].value);
                ArgInfo { ty: tys[i].clone(), expr: &args[i].value }
            }));
        }
        CallSite { spec, args: out, hw: self.target.limits(), target: self.target }
    }
}

/// The message for a call of an official op nki-rs does not implement yet.
pub(super) fn planned(official: &str, summary: &str) -> String {
    format!(
        "`{official}` is part of NKI 2.32, but nki-rs does not implement it yet (its semantics: {summary}); `nki ops --implemented` lists what kernels can call"
    )
}
