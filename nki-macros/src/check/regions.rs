//! The loop forms: `for` ranges (trace-time and `nl::dynamic_range`), the
//! structured device loops `nl::fori_loop` / `nl::while_loop`, and
//! `nl::no_reorder` regions.

use super::*;

/// Why the body of the device loop `nl::<name>` cannot change the kernel's
/// trace-time state.
pub(super) fn device_body_why(name: &str) -> &'static str {
    if name == "dynamic_range" { "is traced once (the device repeats it)" } else { "runs as a function of its own" }
}

/// The refusal of the device loop `op` inside an `nl::no_reorder` region.
fn device_loop_in_no_reorder(op: &str) -> String {
    format!(
        "{op} cannot run inside nl::no_reorder (register-based loops are not allowed there; static ranges are): put the nl::no_reorder region inside the loop's body"
    )
}

impl Checker<'_> {
    /// A `for` loop. A trace-time range's index is an integer; the index of
    /// `nl::dynamic_range` is a frozen register (the loop runs on the device), and
    /// its body, traced once, cannot assign the kernel's variables.
    pub(super) fn for_loop(&mut self, var: &Pat, iter: &crate::ast::RangeIter, body: &Block) {
        self.range_bounds(iter);
        let dynamic = iter.kind == RangeKind::Nl("dynamic_range");
        if dynamic && self.no_reorder {
            self.diag.error(iter.span, device_loop_in_no_reorder("nl.dynamic_range"));
        }
        let (outer, outer_loop) = (self.device_body, self.loop_body);
        self.loop_body = Some(dynamic.then_some("dynamic_range"));
        if dynamic {
            self.device_body = Some(("dynamic_range", self.scopes.len()));
        }
        self.scoped(|c| {
            if dynamic {
                c.bind(var, Ty::Register);
                if let (Pat::Ident(name, _), Some(v)) = (var, c.scopes.last_mut().and_then(|s| s.last_mut())) {
                    v.frozen = *name == v.name;
                }
            } else {
                let t = c.fresh(Ty::Int(Val::unknown()));
                c.bind(var, t);
            }
            if let Some((_, span)) = c.block(body) {
                c.diag.error(span, "a loop body cannot end in a value");
            }
        });
        (self.device_body, self.loop_body) = (outer, outer_loop);
    }

    /// Refuses a write (`register_move`, `register_load`) into the frozen index of
    /// `nl::dynamic_range`.
    pub(super) fn frozen_write(&mut self, e: &Expr) {
        if let ExprKind::Var(name) = &e.kind
            && self.lookup(&name.to_string()).is_some_and(|v| v.frozen)
        {
            self.diag.error(e.span, nki_spec::registers::FROZEN);
        }
    }

    /// The bounds of a `for` loop's range. Trace-time ranges take integers; a
    /// `nl::dynamic_range` bound may also be a register, read when the loop starts.
    /// Every step is a positive integer, and a device loop's must be known here.
    pub(super) fn range_bounds(&mut self, iter: &crate::ast::RangeIter) {
        let dynamic = iter.kind == RangeKind::Nl("dynamic_range");
        for e in [&iter.start, &iter.stop] {
            match self.expr(e) {
                t if t.is_int() || t.is_unknown() => {}
                Ty::Register if dynamic => {}
                Ty::Register => {
                    let name = match iter.kind {
                        RangeKind::Nl(n) => format!("nl::{n}"),
                        RangeKind::Plain => "a Rust range".into(),
                    };
                    self.diag.error(
                        e.span,
                        format!("{name} is unrolled at trace time, so its bounds are integers, not a register; a run-time trip count needs nl::dynamic_range"),
                    );
                }
                t => self.diag.error(e.span, format!("loop bounds are integers, this is {}", t.describe())),
            }
        }
        if let Some(step) = &iter.step {
            let t = self.expr(step);
            self.step(step, &t, dynamic.then_some("nl.dynamic_range"));
        }
    }

    /// A loop step: a positive integer; `device` names a device loop, whose step must be known here.
    fn step(&mut self, step: &Expr, t: &Ty, device: Option<&str>) {
        match (t, t.const_int(), device) {
            (_, Some(v), _) if v <= 0 => self.diag.error(step.span, format!("the step of a kernel loop must be positive, got {v}")),
            (_, Some(_), _) => {}
            (Ty::Int(_), None, Some(op)) | (Ty::Register, None, Some(op)) => self.diag.error(
                step.span,
                format!("the step of {op} must be a positive integer known when the kernel is traced (not a register or run-time value)"),
            ),
            (t, None, _) if !t.is_int() && !t.is_unknown() => {
                self.diag.error(step.span, format!("loop steps are integers, this is {}", t.describe()))
            }
            _ => {}
        }
    }

    /// `nl::fori_loop`, `nl::while_loop` or `nl::no_reorder`.
    pub(super) fn region(&mut self, r: &Region) {
        let path = ["nl".to_string(), r.form.name().to_string()];
        let Some(spec) = vocab::lookup_function(&path) else { return };
        let slots = self.resolve(spec.py, spec.params, &r.args, r.span);
        let arg = |name: &str| {
            let i = spec.params.iter().position(|p| p.name == name)?;
            slots.get(i).copied().flatten().map(|a| &r.args[a].value)
        };
        let op = spec.py;
        match r.form {
            RegionForm::Fori => {
                for name in ["lower", "upper"] {
                    if let Some(e) = arg(name) {
                        let t = self.expr(e);
                        if !(t.is_int() || t.is_unknown() || matches!(t, Ty::Register)) {
                            self.diag.error(e.span, format!("`{name}` of {op} is an integer or a register, this is {}", t.describe()));
                        }
                    }
                }
                if let Some(e) = arg("step") {
                    let t = self.expr(e);
                    self.step(e, &t, Some(op));
                }
            }
            RegionForm::While => {
                if let Some(e) = arg("init") {
                    let t = self.expr(e);
                    if !(matches!(t, Ty::Register) || t.is_unknown()) {
                        self.diag.error(
                            e.span,
                            format!("`init` of {op} is the condition register (nisa::register_alloc), this is {}", t.describe()),
                        );
                    }
                }
            }
            RegionForm::NoReorder => {}
        }
        if r.form != RegionForm::NoReorder && self.no_reorder {
            self.diag.error(r.path_span, device_loop_in_no_reorder(op));
        }
        self.info.regions.insert(r as *const Region as usize, (spec, slots));
        let (device_body, no_reorder, loop_body) = (self.device_body, self.no_reorder, self.loop_body);
        self.loop_body = Some(Some(r.form.name()));
        match r.form {
            RegionForm::NoReorder => self.no_reorder = true,
            form => self.device_body = Some((form.name(), self.scopes.len())),
        }
        let tail = self.scoped(|c| {
            if let Some(var) = &r.var {
                c.bind(var, Ty::Register);
            }
            c.block(&r.body)
        });
        (self.device_body, self.no_reorder, self.loop_body) = (device_body, no_reorder, loop_body);
        match (r.form, tail) {
            (RegionForm::While, Some((t, _))) if matches!(t, Ty::Register) || t.is_unknown() => {}
            (RegionForm::While, Some((t, span))) => self
                .diag
                .error(span, format!("the body of {op} returns the next condition register (`|r| {{ ..; r }}`), this is {}", t.describe())),
            (RegionForm::While, None) => self.diag.error(
                r.span,
                format!(
                    "the body of {op} must end with the next condition register (`|r| {{ ..; r }}`): the loop runs while it is nonzero"
                ),
            ),
            (_, Some((_, span))) => self.diag.error(span, format!("the body of {op} returns nothing; add `;`")),
            (_, None) => {}
        }
    }

    /// Refuses assigning a variable of the enclosing kernel inside a device loop's body.
    pub(super) fn outer_assignment(&mut self, name: &syn::Ident) {
        let Some((loop_name, outer)) = self.device_body else { return };
        let n = name.to_string();
        let depth = self.scopes.iter().rposition(|s| s.iter().any(|v| v.name == n));
        if depth.is_some_and(|d| d < outer) {
            self.diag.error(
                name.span(),
                format!(
                    "`{n}` belongs to the enclosing kernel: the body of nl::{loop_name} {} and cannot assign it; carry loop state through SBUF or HBM",
                    device_body_why(loop_name)
                ),
            );
        }
    }
}
