//! Expressions: variables, constants, literals, arithmetic on trace-time values, indexing.

use super::*;

impl Checker<'_> {
    pub(super) fn record(&mut self, e: &Expr, t: Ty) -> Ty {
        self.info.types.insert(key(e), t.clone());
        t
    }

    pub(super) fn expr(&mut self, e: &Expr) -> Ty {
        let t = self.expr_inner(e);
        self.record(e, t)
    }

    pub(super) fn expr_inner(&mut self, e: &Expr) -> Ty {
        match &e.kind {
            ExprKind::Invalid => Ty::Unknown,
            ExprKind::Int(v) => Ty::Int(Val::konst(*v)),
            ExprKind::Float(_) => Ty::Float,
            ExprKind::Bool(_) => Ty::Bool,
            ExprKind::Str(_) => Ty::Str,
            ExprKind::None => Ty::None,
            ExprKind::Var(name) => match self.lookup(&name.to_string()) {
                Some(v) => v.ty.clone(),
                None => {
                    self.undefined(name);
                    Ty::Unknown
                }
            },
            ExprKind::Path(p) => self.constant(p, e.span),
            ExprKind::Unary(op, x) => {
                let t = self.expr(x);
                match (op, t) {
                    (UnOp::Neg, Ty::Int(v)) => {
                        let r = v.neg();
                        Ty::Int(self.evaluated(r, e.span, || format!("-({})", show(&v))))
                    }
                    (UnOp::Neg, Ty::Float) => Ty::Float,
                    (UnOp::Not, Ty::Bool) => Ty::Bool,
                    (op, Ty::Register) => {
                        let why = if *op == UnOp::Neg { registers::ARITHMETIC } else { registers::TESTED };
                        self.diag.error(e.span, why);
                        Ty::Unknown
                    }
                    (_, t @ (Ty::Unknown | Ty::Opaque)) => t,
                    (op, t) => {
                        let what = if *op == UnOp::Neg { "negate" } else { "apply `!` to" };
                        self.diag.error(e.span, format!("cannot {what} {}", t.describe()));
                        Ty::Unknown
                    }
                }
            }
            ExprKind::Binary(op, a, b) => {
                let (ta, tb) = (self.expr(a), self.expr(b));
                self.binary(*op, &ta, &tb, e.span)
            }
            ExprKind::Call { path, path_span, args } => self.call(e, path, *path_span, args),
            ExprKind::Method { recv, name, args } => self.method(e, recv, name, args),
            ExprKind::Index { base, items } => self.index(base, items, e.span),
            ExprKind::Tuple(items) => {
                let t = Ty::Tuple(items.iter().map(|x| self.expr(x)).collect());
                self.bounded(t, e.span)
            }
            ExprKind::List(items) => {
                let t = Ty::List(items.iter().map(|x| self.expr(x)).collect());
                self.bounded(t, e.span)
            }
            ExprKind::Repeat(x, n) => {
                let t = self.expr(x);
                let nt = self.expr(n);
                if t.is_tensor() {
                    self.diag.error(
                        e.span,
                        "`[t; n]` names one tile n times (Python's `[t] * n`): n tiles, each allocated afresh, are `(0..n).map(|_| nl::ndarray(..)).collect()`",
                    );
                    return Ty::Unknown;
                }
                match nt.const_int() {
                    Some(k) if k < 0 => {
                        self.diag.error(n.span, format!("the length of `[x; n]` cannot be negative, got {k}"));
                        Ty::Unknown
                    }
                    // The size is checked before the element types are repeated.
                    Some(k) => {
                        let elements = u128::from(k.unsigned_abs()) * (t.footprint().0 as u128 + 1);
                        if elements > MAX_ELEMENTS as u128 {
                            self.diag.error(
                                n.span,
                                format!("`[x; {k}]` holds {elements} elements; lists and tuples in kernels hold at most {MAX_ELEMENTS} (nested ones counted)"),
                            );
                            Ty::Unknown
                        } else {
                            self.bounded(Ty::List(vec![t; k as usize]), e.span)
                        }
                    }
                    // An invalid length was reported already.
                    None if nt.is_unknown() => Ty::Unknown,
                    None if matches!(nt, Ty::Register) => {
                        self.diag.error(n.span, registers::TRACE_TIME);
                        Ty::Unknown
                    }
                    None => {
                        self.diag.error(n.span, "the length of `[x; n]` must be a constant");
                        Ty::Unknown
                    }
                }
            }
            ExprKind::Comprehension { var, iter, body } => self.comprehension(var, iter, body, e.span),
            ExprKind::Cast(x, to) => {
                let t = self.expr(x);
                if matches!(t, Ty::Register) {
                    self.diag.error(x.span, registers::TRACE_TIME);
                } else if !matches!(t, Ty::Int(_) | Ty::Float | Ty::Bool | Ty::Unknown | Ty::Opaque) {
                    self.diag.error(x.span, format!("cannot cast {} to a number", t.describe()));
                }
                match (to, t) {
                    (CastTo::Int, Ty::Int(v)) => Ty::Int(v),
                    (CastTo::Int, _) => Ty::Int(Val::unknown()),
                    (CastTo::Float, _) => Ty::Float,
                }
            }
            ExprKind::If(c, a, b) => {
                let tc = self.expr(c);
                self.condition(&tc, c.span, "a condition");
                let (ta, tb) = (self.expr(a), self.expr(b));
                let joined = ta.join(&tb);
                // A bundle's branches must agree (other types are joined loosely and
                // left to Rust).
                let bundle = matches!(ta, Ty::Object(_)) || matches!(tb, Ty::Object(_));
                if bundle && matches!(joined, Ty::Unknown) && !ta.is_unknown() && !tb.is_unknown() {
                    self.diag.error(
                        e.span,
                        format!(
                            "the branches of this `if` give {} and {}; both branches of an `if` used as a value must give the same type",
                            ta.describe(),
                            tb.describe()
                        ),
                    );
                }
                joined
            }
            ExprKind::Some(x) => {
                let t = Ty::Option(Box::new(self.expr(x)));
                self.bounded(t, e.span)
            }
            ExprKind::Attr(x, name) => {
                let t = self.expr(x);
                self.bundle_field(&t, name)
            }
            ExprKind::Struct(name, fields, defaults) => self.bundle(name, fields, *defaults, e.span),
            ExprKind::Field(x, i) => match self.expr(x) {
                Ty::Tuple(items) | Ty::List(items) => match items.get(*i) {
                    Some(t) => t.clone(),
                    None => {
                        self.diag.error(e.span, format!("this tuple has {} elements, there is no `.{i}`", items.len()));
                        Ty::Unknown
                    }
                },
                t @ (Ty::Unknown | Ty::Opaque) => t,
                other => {
                    self.diag.error(e.span, format!("`.{i}` needs a tuple, this is {}", other.describe()));
                    Ty::Unknown
                }
            },
        }
    }

    pub(super) fn constant(&mut self, p: &[String], span: Spn) -> Ty {
        if let [class, member] = p
            && let Some((_, members)) = self.enums.iter().find(|(n, _)| n == class)
        {
            if members.contains(member) {
                return Ty::PyEnum(class.clone());
            }
            let hint =
                did_you_mean(member, members.iter().map(String::as_str)).map(|s| format!("; did you mean `{s}`?")).unwrap_or_default();
            self.diag.error(span, format!("`{class}` has no member `{member}`; its members are {}{hint}", members.join(", ")));
            return Ty::Unknown;
        }
        match vocab::lookup_constant(p) {
            Some(Constant::Dtype(d)) => Ty::Dtype(Some(d)),
            Some(Constant::Buffer(b)) => Ty::Buffer(Some(b)),
            Some(Constant::Op(c, n)) => Ty::Op(c, Some(n)),
            Some(Constant::Int(v)) => Ty::Int(Val::konst(v)),
            Some(Constant::Float(_)) => Ty::Float,
            Some(Constant::Enum(e, _)) => Ty::Enum(e),
            None => {
                let joined = p.join("::");
                if vocab::lookup_function(p).is_some() {
                    // `nl::max` reduces; the two-operand ALU op is `nl::maximum`.
                    let alu = [&p[..p.len() - 1], &[format!("{}imum", p[p.len() - 1])]].concat();
                    let hint = match vocab::lookup_constant(&alu) {
                        Some(Constant::Op(..)) => format!(", or for the ALU op write `{}`", alu.join("::")),
                        _ => String::new(),
                    };
                    self.diag.error(span, format!("`{joined}` is a function; call it with arguments{hint}"));
                } else {
                    let hint = self.unknown_hints.entry(joined.clone()).or_insert_with(|| {
                        let names = vocab::constant_names();
                        did_you_mean(&joined, names.iter().map(String::as_str))
                            .map(|s| format!("; did you mean `{s}`?"))
                            .unwrap_or_default()
                    });
                    self.diag.error(span, format!("`{joined}` is not part of the NKI vocabulary{hint}"));
                }
                Ty::Unknown
            }
        }
    }

    /// `t`, unless the value holds more than [`MAX_ELEMENTS`] elements or its type
    /// nests deeper than [`MAX_NESTING`] (through variables, `(a, a)` doubles
    /// with every statement), which is reported at `span`.
    pub(super) fn bounded(&mut self, t: Ty, span: Spn) -> Ty {
        let (elements, depth) = t.footprint();
        if elements > MAX_ELEMENTS {
            self.diag.error(
                span,
                format!(
                    "this value holds {elements} elements; lists and tuples in kernels hold at most {MAX_ELEMENTS} (nested ones counted)"
                ),
            );
            return Ty::Unknown;
        }
        if depth > MAX_NESTING {
            self.diag
                .error(span, format!("this value nests lists, tuples and Options {depth} deep; kernels nest at most {MAX_NESTING} levels"));
            return Ty::Unknown;
        }
        t
    }

    /// The result of checked arithmetic on trace-time integers; an overflow or a
    /// division by zero is reported at `span`, with the operation `what` performed.
    pub(super) fn evaluated(&mut self, result: Result<Val, EvalError>, span: Spn, what: impl FnOnce() -> String) -> Val {
        match result {
            Ok(v) => v,
            Err(EvalError::DivisionByZero) => {
                self.diag.error(span, "division by zero");
                Val::unknown()
            }
            Err(EvalError::NegativeShift) => {
                self.diag.error(span, format!("negative shift count in `{}`", what()));
                Val::unknown()
            }
            Err(EvalError::Overflow) => {
                self.diag.error(
                    span,
                    format!("integer overflow: `{}` does not fit in an i64 (trace-time integers are i64 in the emulation)", what()),
                );
                Val::unknown()
            }
        }
    }

    pub(super) fn arith(&mut self, op: BinOp, a: &Ty, b: &Ty, span: Spn) -> Ty {
        match (a, b) {
            (Ty::Unknown, _) | (_, Ty::Unknown) => Ty::Unknown,
            (Ty::Opaque, Ty::Float) | (Ty::Float, Ty::Opaque) => Ty::Float,
            (Ty::Opaque, _) | (_, Ty::Opaque) if matches!(op, BinOp::Div | BinOp::Rem) => {
                self.diag.error(
                    span,
                    "cannot tell whether this is integer division (Python `//`) or float division (`/`): give the other function's result a type, e.g. `let n: i64 = helper(...)`",
                );
                Ty::Unknown
            }
            (Ty::Opaque, _) | (_, Ty::Opaque) => Ty::Opaque,
            (Ty::Register, _) | (_, Ty::Register) => {
                self.diag.error(span, registers::ARITHMETIC);
                Ty::Unknown
            }
            (Ty::Int(x), Ty::Int(y)) => {
                let r = match op {
                    BinOp::Add => x.add(y),
                    BinOp::Sub => x.sub(y),
                    BinOp::Mul => x.mul(y),
                    BinOp::Div => x.floordiv(y),
                    BinOp::Rem => x.floormod(y),
                    _ => Ok(Val::unknown()),
                };
                Ty::Int(self.evaluated(r, span, || format!("{} {} {}", show(x), op.symbol(), show(y))))
            }
            (Ty::Int(_) | Ty::Float, Ty::Int(_) | Ty::Float) => Ty::Float,
            (Ty::Tensor(_), _) | (_, Ty::Tensor(_)) => {
                self.diag.error(
                    span,
                    "tensors are not combined with operators in kernels: use an ISA op, e.g. nisa::tensor_tensor(dst, a, b, nl::add)",
                );
                Ty::Unknown
            }
            _ => {
                self.diag.error(span, format!("cannot apply arithmetic to {} and {}", a.describe(), b.describe()));
                Ty::Unknown
            }
        }
    }

    /// `a << b` / `a >> b`: trace-time integers only; a known result is folded.
    fn shift(&mut self, op: BinOp, a: &Ty, b: &Ty, span: Spn) -> Ty {
        match (a, b) {
            (Ty::Int(x), Ty::Int(y)) => {
                let r = if op == BinOp::Shl { x.shl(y) } else { x.shr(y) };
                Ty::Int(self.evaluated(r, span, || format!("{} {} {}", show(x), op.symbol(), show(y))))
            }
            (Ty::Unknown | Ty::Opaque | Ty::Int(_), Ty::Unknown | Ty::Opaque | Ty::Int(_)) => Ty::Int(Val::unknown()),
            _ => {
                self.diag.error(span, format!("`{}` shifts trace-time integers, not {} and {}", op.symbol(), a.describe(), b.describe()));
                Ty::Unknown
            }
        }
    }

    pub(super) fn binary(&mut self, op: BinOp, a: &Ty, b: &Ty, span: Spn) -> Ty {
        if matches!(op, BinOp::Shl | BinOp::Shr) {
            return self.shift(op, a, b, span);
        }
        if op.is_arith() {
            return self.arith(op, a, b, span);
        }
        if matches!(op, BinOp::And | BinOp::Or) {
            for t in [a, b] {
                self.condition(t, span, "each side of `&&` and `||`");
            }
            return Ty::Bool;
        }
        if matches!(a, Ty::Register) || matches!(b, Ty::Register) {
            self.diag.error(span, registers::TESTED);
            return Ty::Bool;
        }
        let comparable = match (a, b) {
            (Ty::Unknown | Ty::Opaque, _) | (_, Ty::Unknown | Ty::Opaque) => true,
            (Ty::Int(_) | Ty::Float, Ty::Int(_) | Ty::Float) => true,
            (Ty::Tensor(_), _) | (_, Ty::Tensor(_)) => false,
            (Ty::PyEnum(x), Ty::PyEnum(y)) => matches!(op, BinOp::Eq | BinOp::Ne) && x == y,
            (x, y) => matches!(op, BinOp::Eq | BinOp::Ne) && std::mem::discriminant(x) == std::mem::discriminant(y),
        };
        if !comparable {
            self.diag.error(span, format!("cannot compare {} with {}", a.describe(), b.describe()));
        }
        Ty::Bool
    }

    pub(super) fn index(&mut self, base: &Expr, items: &[IndexItem], span: Spn) -> Ty {
        let bt = self.expr(base);
        let mut item_tys: Vec<views::IndexTy> = Vec::new();
        for it in items {
            let t = match it {
                IndexItem::At(x) => match self.expr(x) {
                    // A slice bound by `let r = nl::ds(start, size)`.
                    Ty::Slice(s, n) => {
                        let end = s.add(&n);
                        let end = self.evaluated(end, x.span, || format!("{} + {}", show(&s), show(&n)));
                        views::IndexTy::Range(Some(s), Some(end), None, x.span)
                    }
                    t => views::IndexTy::At(self.int_value(t, x.span), x.span),
                },
                IndexItem::Range { start, stop, step, span } => {
                    let s = start.as_ref().map(|x| self.int_of(x));
                    let e = stop.as_ref().map(|x| self.int_of(x));
                    let st = step.as_ref().map(|x| self.int_of(x));
                    views::IndexTy::Range(s, e, st, *span)
                }
                IndexItem::Ds { start, size, span } => {
                    let s = self.int_of(start);
                    let n = self.int_of(size);
                    let end = s.add(&n);
                    let end = self.evaluated(end, *span, || format!("{} + {}", show(&s), show(&n)));
                    views::IndexTy::Range(Some(s), Some(end), None, *span)
                }
            };
            item_tys.push(t);
        }
        match bt {
            Ty::Tensor(tt) => views::index_tensor(self.diag, &tt, &item_tys, span),
            // One ring of a replica group: a list of rank ids, typed like a shape.
            Ty::Groups if items.len() == 1 && matches!(items[0], IndexItem::At(_)) => Ty::Shape(None),
            Ty::Shape(_) | Ty::Tuple(_) | Ty::List(_) | Ty::Seq(_) if items.len() == 1 && matches!(items[0], IndexItem::At(_)) => {
                let views::IndexTy::At(v, s) = &item_tys[0] else {
                    return Ty::Unknown;
                };
                match (&bt, v.as_const()) {
                    (Ty::Shape(Some(d)), Some(i)) => {
                        let idx = if i < 0 { i + d.len() as i64 } else { i };
                        match d.get(idx as usize).filter(|_| idx >= 0) {
                            Some(v) => Ty::Int(v.clone()),
                            None => {
                                self.diag.error(*s, format!("index {i} is out of range for a shape of rank {}", d.len()));
                                Ty::Unknown
                            }
                        }
                    }
                    (Ty::Shape(_), _) => Ty::Int(Val::unknown()),
                    (Ty::Tuple(ts) | Ty::List(ts), Some(i)) => {
                        let at = if i < 0 { i.checked_add(ts.len() as i64) } else { Some(i) };
                        match at.and_then(|k| usize::try_from(k).ok()).and_then(|k| ts.get(k)) {
                            Some(t) => t.clone(),
                            None => {
                                self.diag.error(*s, format!("index {i} is out of range for {} of {} elements", bt.describe(), ts.len()));
                                Ty::Unknown
                            }
                        }
                    }
                    // Any element, when they all have one type (a list built from a range).
                    (Ty::List(ts), None) => ts.split_first().map_or(Ty::Unknown, |(t, rest)| rest.iter().fold(t.clone(), |a, b| a.join(b))),
                    (Ty::Seq(t), _) => (**t).clone(),
                    _ => Ty::Unknown,
                }
            }
            t @ (Ty::Unknown | Ty::Opaque) => t,
            Ty::Shape(_) => {
                self.diag.error(span, "a shape is indexed with one integer: `t.shape()[0]`");
                Ty::Unknown
            }
            other => {
                self.diag.error(base.span, format!("cannot index {}", other.describe()));
                Ty::Unknown
            }
        }
    }

    pub(super) fn int_of(&mut self, e: &Expr) -> Val {
        let t = self.expr(e);
        self.int_value(t, e.span)
    }

    /// Reports a `condition` (`what` names its place: "an `if` condition") that
    /// is not a bool, a register (read only on the device) in particular.
    pub(super) fn condition(&mut self, t: &Ty, span: Spn, what: &str) {
        match t {
            Ty::Bool | Ty::Unknown | Ty::Opaque => {}
            Ty::Register => self.diag.error(span, registers::TESTED),
            other => self.diag.error(span, format!("{what} must be a bool, this is {}", other.describe())),
        }
    }

    /// The integer an index of type `t` holds, reporting other types at `span`.
    fn int_value(&mut self, t: Ty, span: Spn) -> Val {
        match t {
            Ty::Int(v) => v,
            Ty::Unknown => Val::unknown(),
            Ty::Register => {
                self.diag.error(span, registers::TRACE_TIME);
                Val::unknown()
            }
            other => {
                self.diag.error(span, format!("indices are integers or nl::ds slices, this is {}", other.describe()));
                Val::unknown()
            }
        }
    }
}
