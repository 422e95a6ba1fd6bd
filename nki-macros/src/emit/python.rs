//! Emit (a): the NKI 2.x Python source of a kernel or helper.
//!
//! Every call into `nl` / `nisa` / `ncc` passes keyword arguments; integer
//! division becomes `//`; Rust control flow becomes the Python it stands for.

use crate::ast::{
    Arg, BinOp, Block, CastTo, Cond, Expr, ExprKind, FmtPiece, FnKind, Function, IndexItem, Pat, RangeIter, RangeKind, Region, RegionForm,
    Stmt, UnOp,
};
use crate::check::{Info, Resolved, Ty};
use crate::vocab::{Constant, Kind, lookup_constant};
use proc_macro2::Span;
use std::fmt::Write;

/// The Python definition of `f`, and for each of its lines the span of the Rust
/// it stands for: the statement's, the signature's for the `def`, its docstring
/// and the parameter checks (`nki traceback` maps a Python line back by it).
pub fn emit(f: &Function, info: &Info) -> (String, Vec<Span>) {
    let mut p = Py::new(info, f.name.span());
    if f.kind == FnKind::Kernel {
        p.line("@nki.jit");
    }
    let params: Vec<String> = f
        .params
        .iter()
        .zip(param_defaults(f, info))
        .map(|(prm, default)| match default {
            Some(d) => format!("{}={d}", prm.name),
            None => prm.name.to_string(),
        })
        .collect();
    p.line(&format!("def {}({}):", f.name, params.join(", ")));
    p.depth += 1;
    if !f.docs.is_empty() {
        let doc: Vec<&str> = f.docs.iter().map(|d| d.strip_prefix(' ').unwrap_or(d)).collect();
        let text = doc.join("\n").replace('\\', "\\\\").replace("\"\"\"", "\\\"\\\"\\\"");
        let mut lines = text.lines();
        let first = lines.next().unwrap_or("");
        let rest: Vec<&str> = lines.collect();
        if rest.is_empty() {
            p.line(&format!("\"\"\"{first}\"\"\""));
        } else {
            p.line(&format!("\"\"\"{first}"));
            for l in rest {
                if l.is_empty() { p.blank() } else { p.line(l) }
            }
            p.line("\"\"\"");
        }
    }
    if let Some(call) = contract_call(f) {
        p.line(&call);
    }
    for prm in f.params.iter().filter(|prm| !prm.range.is_empty()) {
        let n = &prm.name;
        let guard = none_guard(prm);
        let int = matches!(&prm.ty, crate::ast::TypeAnn::Int(_))
            || matches!(&prm.ty, crate::ast::TypeAnn::Option(inner, _) if matches!(**inner, crate::ast::TypeAnn::Int(_)));
        let number = |v: f64| if int { format!("{}", v as i64) } else { format!("{v:?}") };
        let tests: Vec<String> = prm.range.iter().map(|b| format!("{n} {} {}", b.operator(), number(b.value()))).collect();
        let rule = nki_spec::contract::range_rule(&prm.range);
        let cond = if guard.is_empty() || tests.len() == 1 { tests.join(" and ") } else { format!("({})", tests.join(" and ")) };
        p.line(&format!("assert {guard}{cond}, f\"{} takes {n} {rule}, not {{{n}!r}}\"", f.name));
    }
    p.block(&f.body, true);
    (p.out, p.spans)
}

/// `"{name} is None or "` for an `Option` parameter (the guard its value's
/// assert needs), else nothing.
fn none_guard(prm: &crate::ast::Param) -> String {
    if matches!(prm.ty, crate::ast::TypeAnn::Option(..)) { format!("{} is None or ", prm.name) } else { String::new() }
}

/// The call of the package's `check_contract` helper (see
/// `nki_core::emit::CHECK_CONTRACT`) that asserts what `f` is given, if it has
/// a contract to check: a row for each enum a kernel's caller gives (a
/// parameter, or a field of a bundle parameter: `kargs.norm_type`) and for each
/// tensor with dtypes (a parameter, or a kernel's bundle field).
pub fn contract_call(f: &Function) -> Option<String> {
    use crate::ast::TypeAnn;
    let enum_row = |path: &str, value: &str, class: &syn::Ident, optional: bool| {
        let members = f.enums.iter().find(|e| e.name == *class).map(|e| e.members.iter().map(|(m, _)| m.to_string()).collect::<Vec<_>>());
        contract_row(path, value, &class.to_string(), &format!("{class} member ({})", members.unwrap_or_default().join(", ")), optional)
    };
    let dtype_row = |path: &str, value: &str, dtypes: &[&str], optional: bool| {
        let allowed = tuple(dtypes.iter().map(|d| format!("nl.{d}")).collect());
        contract_row(path, value, &allowed, &nki_spec::contract::either(dtypes), optional)
    };
    let (mut enums, mut dtypes) = (Vec::new(), Vec::new());
    let kernel = f.kind == FnKind::Kernel;
    for prm in &f.params {
        let (n, optional) = (prm.name.to_string(), matches!(prm.ty, TypeAnn::Option(..)));
        if let (true, TypeAnn::PyEnum(class, _)) = (kernel, prm.ty.item()) {
            enums.push(enum_row(&n, &n, class, optional));
        }
        if !prm.dtypes.is_empty() {
            dtypes.push(dtype_row(&n, &n, &prm.dtypes, optional));
        }
    }
    // A bundle's fields, nested bundles' included.
    for leaf in f.params.iter().filter(|_| kernel).flat_map(|prm| crate::ast::bundle_leaves(&f.objects, prm)) {
        let (path, value, optional) = (&leaf.field.path, leaf.value(), leaf.optional());
        if let TypeAnn::PyEnum(class, _) = leaf.field.ty.item() {
            enums.push(enum_row(path, &value, class, optional));
        }
        if leaf.field.ty.holds_tensor() {
            dtypes.push(dtype_row(path, &value, leaf.field.dtypes, optional));
        }
    }
    let tables: Vec<String> = [("enums", enums), ("dtypes", dtypes)]
        .into_iter()
        .filter(|(_, rows)| !rows.is_empty())
        .map(|(table, rows)| format!("{table}={}", tuple(rows)))
        .collect();
    (!tables.is_empty()).then(|| format!("check_contract(\"{}\", {})", f.name, tables.join(", ")))
}

/// A row of a `check_contract` table: the parameter's name, its value, what
/// it must be (an enum class, a tuple of dtypes), that in words for the
/// message, and whether it may be `None`.
fn contract_row(path: &str, value: &str, allowed: &str, words: &str, optional: bool) -> String {
    format!("(\"{path}\", {value}, {allowed}, \"{words}\", {})", if optional { "True" } else { "False" })
}

/// The Python dataclass of a parameter bundle, after its doc comment lines; each
/// field with its default and, after it, its doc comment as a string (`field_docs`).
pub fn object_class(o: &crate::ast::ObjectDef, docs: &[String], field_docs: &[Vec<String>]) -> String {
    use crate::ast::TypeAnn;
    let mut out = format!("@dataclass\nclass {}(nl.NKIObject):\n", o.name);
    match docs {
        [] => {}
        [one] => out.push_str(&format!("    \"\"\"{}\"\"\"\n\n", one.trim())),
        [first, rest @ ..] => {
            out.push_str(&format!("    \"\"\"{}\n", first.trim()));
            for l in rest {
                let l = l.strip_prefix(' ').unwrap_or(l);
                if l.is_empty() { out.push('\n') } else { out.push_str(&format!("    {l}\n")) }
            }
            out.push_str("    \"\"\"\n\n");
        }
    }
    for (i, ((name, ty), default)) in o.fields.iter().zip(&o.defaults).enumerate() {
        // An `Option` of a scalar or bundle defaulting to `None` is typed by
        // its item, as the library's `float = None` fields are.
        let none = default.as_ref().is_some_and(|d| matches!(d.kind, ExprKind::None));
        let item = match ty {
            TypeAnn::Option(inner, _)
                if none
                    && matches!(
                        **inner,
                        TypeAnn::Int(_) | TypeAnn::Float(_) | TypeAnn::Bool(_) | TypeAnn::PyEnum(..) | TypeAnn::Object(..)
                    ) =>
            {
                inner
            }
            t => t,
        };
        let t = match item {
            TypeAnn::Int(_) => "int".to_string(),
            TypeAnn::Float(_) => "float".to_string(),
            TypeAnn::Bool(_) => "bool".to_string(),
            TypeAnn::PyEnum(e, _) | TypeAnn::Object(e, _) => e.to_string(),
            TypeAnn::List(..) => "list".to_string(),
            _ => "object".to_string(),
        };
        let value = default.as_ref().map(|d| format!(" = {}", field_default(d, ty))).unwrap_or_default();
        out.push_str(&format!("    {name}: {t}{value}\n"));
        let doc: Vec<&str> = field_docs.get(i).into_iter().flatten().map(|l| l.trim()).collect();
        if !doc.is_empty() {
            let text = doc.join(" ").replace('\\', "\\\\").replace('"', "\\\"");
            out.push_str(&format!("    \"{text}\"\n"));
        }
    }
    out
}

/// The Python `Enum` class of an `#[nki_enum]`, after its doc comment lines;
/// each member with its value and, after it, its doc comment as a string.
pub fn enum_class(e: &crate::ast::EnumDef, docs: &[String], member_docs: &[Vec<String>]) -> String {
    let mut out = format!("class {}(Enum):\n", e.name);
    let doc: Vec<&str> = docs.iter().map(|l| l.trim()).collect();
    if !doc.is_empty() {
        out.push_str(&format!("    \"\"\"{}\"\"\"\n\n", doc.join(" ").replace('\\', "\\\\").replace('"', "\\\"")));
    }
    for (i, (name, value)) in e.members.iter().enumerate() {
        out.push_str(&format!("    {name} = {value}\n"));
        let doc: Vec<&str> = member_docs.get(i).into_iter().flatten().map(|l| l.trim()).collect();
        if !doc.is_empty() {
            out.push_str(&format!("    \"{}\"\n", doc.join(" ").replace('\\', "\\\\").replace('"', "\\\"")));
        }
    }
    out
}

/// A bundle field's Python default expression: a float field's integer
/// default is written as a Python float, like the Rust value.
pub fn field_default(d: &Expr, ty: &crate::ast::TypeAnn) -> String {
    let info = Info::default();
    let text = Py::new(&info, Span::call_site()).expr(d);
    let float = matches!(ty.item(), crate::ast::TypeAnn::Float(_));
    if float && matches!(d.kind, ExprKind::Int(_)) { format!("{text}.0") } else { text }
}

/// The Python line of a module constant: `TILE = 128`.
///
/// A constant set to an `nl.tile_size` member (`P_MAX = nl::tile_size::pmax`)
/// is written as its number: module constants are evaluated when the module is
/// imported, before tracing, and the library keeps its tile constants Python
/// ints because `nl.tile_size` members are not ints there (shapes need ints).
pub fn module_const(k: &crate::ast::ModuleConst) -> String {
    if let ExprKind::Path(path) = &k.init.kind
        && path.get(1).is_some_and(|m| m == "tile_size")
        && let Some(Constant::Int(v)) = lookup_constant(path)
    {
        return format!("{} = {v}\n", k.name);
    }
    let info = Info::default();
    let p = Py::new(&info, Span::call_site());
    format!("{} = {}\n", k.name, p.expr(&k.init))
}

/// Each parameter's Python default expression (`None` for an omitted `Option`),
/// or nothing for a required parameter.
pub fn param_defaults(f: &Function, info: &Info) -> Vec<Option<String>> {
    let p = Py::new(info, Span::call_site());
    f.params
        .iter()
        .map(|prm| match &prm.default {
            Some(d) => Some(p.expr(d)),
            None if f.is_optional(prm) => Some("None".to_string()),
            None => None,
        })
        .collect()
}

struct Py<'a> {
    info: &'a Info,
    out: String,
    depth: usize,
    /// Device loop bodies emitted so far (they become `_loop_body_<n>` functions).
    bodies: usize,
    /// The Rust the lines being emitted stand for.
    at: Span,
    /// The Rust span of each line of `out`.
    spans: Vec<Span>,
}

// Python operator precedence, low to high.
const P_TERNARY: u8 = 1;
const P_OR: u8 = 2;
const P_AND: u8 = 3;
const P_NOT: u8 = 4;
const P_CMP: u8 = 5;
const P_SHIFT: u8 = 6;
const P_ADD: u8 = 7;
const P_MUL: u8 = 8;
const P_UNARY: u8 = 9;
const P_POW: u8 = 10;
const P_ATOM: u8 = 11;

fn bin_prec(op: BinOp) -> u8 {
    match op {
        BinOp::Or => P_OR,
        BinOp::And => P_AND,
        BinOp::Shl | BinOp::Shr => P_SHIFT,
        BinOp::Add | BinOp::Sub => P_ADD,
        BinOp::Mul | BinOp::Div | BinOp::Rem => P_MUL,
        _ => P_CMP,
    }
}

/// A Python string literal.
pub fn py_str(s: &str) -> String {
    let mut o = String::from("\"");
    for c in s.chars() {
        match c {
            '\\' => o.push_str("\\\\"),
            '"' => o.push_str("\\\""),
            '\n' => o.push_str("\\n"),
            '\t' => o.push_str("\\t"),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// A Python tuple of the given items.
fn tuple(parts: Vec<String>) -> String {
    if parts.len() == 1 { format!("({},)", parts[0]) } else { format!("({})", parts.join(", ")) }
}

/// A Python float literal that round-trips.
fn py_float(v: f64) -> String {
    // Python has no literal for these; NKI kernels write `float('-inf')`.
    if v.is_infinite() {
        return if v > 0.0 { "float('inf')".into() } else { "float('-inf')".into() };
    }
    if v.is_nan() {
        return "float('nan')".into();
    }
    let s = format!("{v:?}");
    if s.contains(['.', 'e', 'E']) || s.contains("inf") || s.contains("NaN") { s } else { format!("{s}.0") }
}

impl<'a> Py<'a> {
    /// An emitter whose first lines stand for the Rust at `at`.
    fn new(info: &'a Info, at: Span) -> Py<'a> {
        Py { info, out: String::new(), depth: 0, bodies: 0, at, spans: Vec::new() }
    }

    fn line(&mut self, s: &str) {
        for _ in 0..self.depth {
            self.out.push_str("    ");
        }
        self.out.push_str(s);
        self.out.push('\n');
        self.spans.push(self.at);
    }

    /// An empty line (inside a docstring).
    fn blank(&mut self) {
        self.out.push('\n');
        self.spans.push(self.at);
    }

    fn block(&mut self, b: &Block, is_fn: bool) {
        let (before, outer) = (self.out.len(), self.at);
        for s in &b.stmts {
            self.stmt(s);
        }
        if let Some(t) = &b.tail {
            self.at = t.span.start;
            let v = self.expr(t);
            if is_fn { self.line(&format!("return {v}")) } else { self.line(&v) }
        }
        // The lines after a nested block (a loop's call, `else:`) stand for its statement.
        self.at = outer;
        if self.out.len() == before {
            self.line("pass");
        }
    }

    /// A device loop's body becomes a nested function passed as `body_fun`; a
    /// `no_reorder` region becomes a `with` block.
    fn region(&mut self, r: &Region) {
        let Some(spec) = crate::vocab::lookup_function(&["nl".into(), r.form.name().into()]) else { return };
        if r.form == RegionForm::NoReorder {
            self.line(&format!("with {}():", spec.py));
            self.indented(&r.body);
            return;
        }
        let body = format!("_loop_body_{}", self.bodies);
        self.bodies += 1;
        let var = r.var.as_ref().map_or("_".into(), |v| self.pat(v));
        self.line(&format!("def {body}({var}):"));
        self.depth += 1;
        self.block(&r.body, r.form == RegionForm::While);
        self.depth -= 1;
        let parts: Vec<String> = spec
            .params
            .iter()
            .filter_map(|p| match p.name {
                "body_fun" => Some(format!("body_fun={body}")),
                name => self.info.region_arg(r, name).map(|e| format!("{name}={}", self.expr(e))),
            })
            .collect();
        self.line(&format!("{}({})", spec.py, parts.join(", ")));
    }

    /// A loop's range: Python's `range(..)` or the `nl` range it names.
    fn range(&self, iter: &RangeIter) -> String {
        let (start, stop) = (self.expr(&iter.start), self.expr(&iter.stop));
        let step = iter.step.as_ref().map(|s| self.expr(s));
        if iter.rev {
            // Rust's `(a..b).rev().step_by(s)`: `b - 1` down to `a`.
            let below = |e: &Expr| match e.kind {
                ExprKind::Int(v) => v.checked_sub(1).map_or_else(|| format!("{} - 1", self.expr(e)), |v| v.to_string()),
                _ => format!("{} - 1", self.prec(e, P_ADD)),
            };
            let step = iter.step.as_ref().map_or_else(|| "-1".to_string(), |s| format!("-{}", self.prec(s, P_UNARY + 1)));
            return format!("range({}, {}, {step})", below(&iter.stop), below(&iter.start));
        }
        match iter.kind {
            RangeKind::Plain => match (start.as_str(), &step) {
                ("0", None) => format!("range({stop})"),
                (_, None) => format!("range({start}, {stop})"),
                (_, Some(st)) => format!("range({start}, {stop}, {st})"),
            },
            RangeKind::Nl(name) => match &step {
                None => format!("nl.{name}(start={start}, stop={stop})"),
                Some(st) => format!("nl.{name}(start={start}, stop={stop}, step={st})"),
            },
        }
    }

    fn indented(&mut self, b: &Block) {
        self.depth += 1;
        self.block(b, false);
        self.depth -= 1;
    }

    fn pat(&self, p: &Pat) -> String {
        match p {
            Pat::Ident(i, _) => i.to_string(),
            Pat::Wild => "_".into(),
            Pat::Tuple(items, _) | Pat::Slice(items, _) => {
                let parts: Vec<String> = items.iter().map(|x| self.pat(x)).collect();
                if parts.len() == 1 { format!("{},", parts[0]) } else { parts.join(", ") }
            }
        }
    }

    fn stmt(&mut self, s: &Stmt) {
        self.at = match s {
            Stmt::Let { span, .. }
            | Stmt::Assign { span, .. }
            | Stmt::For { span, .. }
            | Stmt::If { span, .. }
            | Stmt::Assert { span, .. }
            | Stmt::Return(_, span)
            | Stmt::Jump(_, span) => span.start,
            Stmt::Expr(e) => e.span.start,
            Stmt::Region(r) => r.span.start,
        };
        match s {
            // `let _ = param;` only silences Rust's unused warning for a parameter kept
            // for the library's signature; Python needs no statement for it.
            Stmt::Let { pat: Pat::Wild, init, .. } if matches!(init.kind, ExprKind::Var(_)) => {}
            Stmt::Let { pat: Pat::Wild, init, .. } | Stmt::Expr(init) => {
                let v = self.expr(init);
                self.line(&v);
            }
            Stmt::Let { pat, init, .. } => {
                let l = format!("{} = {}", self.pat(pat), self.expr(init));
                self.line(&l);
            }
            Stmt::Assign { name, op, value, .. } => {
                let sym = match op {
                    None => "=",
                    Some(BinOp::Add) => "+=",
                    Some(BinOp::Sub) => "-=",
                    Some(BinOp::Mul) => "*=",
                    Some(BinOp::Div) if self.info.ty(value).is_int() => "//=",
                    Some(BinOp::Div) => "/=",
                    Some(_) => "%=",
                };
                let l = format!("{name} {sym} {}", self.expr(value));
                self.line(&l);
            }
            Stmt::For { var, iter, body, .. } => {
                let l = format!("for {} in {}:", self.pat(var), self.range(iter));
                self.line(&l);
                self.indented(body);
            }
            Stmt::If { branches, otherwise, .. } => {
                for (i, (cond, body)) in branches.iter().enumerate() {
                    let kw = if i == 0 { "if" } else { "elif" };
                    match cond {
                        Cond::Expr(c) => {
                            let l = format!("{kw} {}:", self.prec(c, P_TERNARY + 1));
                            self.line(&l);
                            self.indented(body);
                        }
                        Cond::LetSome(name, e) => {
                            let v = self.expr(e);
                            self.line(&format!("{kw} {v} is not None:"));
                            self.depth += 1;
                            if *name != v {
                                self.line(&format!("{name} = {v}"));
                            }
                            self.block(body, false);
                            self.depth -= 1;
                        }
                    }
                }
                if let Some(b) = otherwise {
                    self.line("else:");
                    self.indented(b);
                }
            }
            Stmt::Region(r) => self.region(r),
            Stmt::Assert { cond, msg, .. } => {
                let c = self.prec(cond, P_TERNARY + 1);
                match msg {
                    None => self.line(&format!("assert {c}")),
                    // A module constant alone in its message: the constant itself.
                    Some(m) if matches!(m.pieces.as_slice(), [FmtPiece::Const(_)]) => {
                        let names: Vec<String> =
                            m.pieces.iter().filter_map(|p| if let FmtPiece::Const(n) = p { Some(n.to_string()) } else { None }).collect();
                        self.line(&format!("assert {c}, {}", names.join("")));
                    }
                    // Another module's constant: imported under its own name.
                    Some(m) if matches!(m.pieces.as_slice(), [FmtPiece::Shared(_)]) => {
                        let names: Vec<String> = m.pieces.iter().filter_map(shared_name).collect();
                        self.line(&format!("assert {c}, {}", names.join("")));
                    }
                    Some(m) => {
                        let has_args = m.pieces.iter().any(|p| !matches!(p, FmtPiece::Text(_)));
                        let mut f = String::from(if has_args { "f\"" } else { "\"" });
                        for piece in &m.pieces {
                            match piece {
                                FmtPiece::Text(t) => {
                                    let esc = py_str(t);
                                    let body = &esc[1..esc.len() - 1];
                                    if has_args {
                                        f.push_str(&body.replace('{', "{{").replace('}', "}}"));
                                    } else {
                                        f.push_str(body);
                                    }
                                }
                                FmtPiece::Arg(e) => {
                                    let _ = write!(f, "{{{}}}", self.expr(e));
                                }
                                FmtPiece::Const(name) => {
                                    let _ = write!(f, "{{{name}}}");
                                }
                                FmtPiece::Shared(_) => {
                                    let _ = write!(f, "{{{}}}", shared_name(piece).unwrap_or_default());
                                }
                            }
                        }
                        f.push('"');
                        self.line(&format!("assert {c}, {f}"));
                    }
                }
            }
            Stmt::Jump(jump, _) => self.line(jump.keyword()),
            Stmt::Return(e, _) => match e {
                Some(e) => {
                    let l = format!("return {}", self.expr(e));
                    self.line(&l);
                }
                None => self.line("return"),
            },
        }
    }

    fn expr(&self, e: &Expr) -> String {
        self.prec(e, 0)
    }

    /// `e`, parenthesised if its precedence is below `min`.
    fn prec(&self, e: &Expr, min: u8) -> String {
        let (s, p) = self.expr_p(e);
        if p < min { format!("({s})") } else { s }
    }

    fn expr_p(&self, e: &Expr) -> (String, u8) {
        match &e.kind {
            ExprKind::Invalid => ("None".into(), P_ATOM),
            ExprKind::Int(v) => (v.to_string(), if *v < 0 { P_UNARY } else { P_ATOM }),
            ExprKind::Float(v) => (py_float(*v), if *v < 0.0 && v.is_finite() { P_UNARY } else { P_ATOM }),
            ExprKind::Bool(b) => ((if *b { "True" } else { "False" }).into(), P_ATOM),
            ExprKind::Str(s) => (py_str(s), P_ATOM),
            ExprKind::None => ("None".into(), P_ATOM),
            ExprKind::Var(v) => (v.to_string(), P_ATOM),
            ExprKind::Path(p) => match lookup_constant(p) {
                Some(Constant::Float(v)) => (py_float(v), P_UNARY),
                _ => (p.iter().map(|s| s.strip_prefix("r#").unwrap_or(s)).collect::<Vec<_>>().join("."), P_ATOM),
            },
            ExprKind::Unary(UnOp::Neg, x) => (format!("-{}", self.prec(x, P_UNARY)), P_UNARY),
            ExprKind::Unary(UnOp::Not, x) => (format!("not {}", self.prec(x, P_NOT)), P_NOT),
            ExprKind::Binary(op, a, b) => {
                let int_div = matches!(op, BinOp::Div) && self.info.ty(a).is_int() && self.info.ty(b).is_int();
                let sym = match op {
                    BinOp::Div if int_div => "//",
                    BinOp::And => "and",
                    BinOp::Or => "or",
                    other => other.symbol(),
                };
                let p = bin_prec(*op);
                // Left-associative: the right operand binds tighter; comparisons never chain;
                // `and` inside `or` gets parentheses for the reader.
                let is_and = |x: &Expr| matches!(x.kind, ExprKind::Binary(BinOp::And, ..));
                let (lp, rp) = match op {
                    _ if p == P_CMP => (p + 1, p + 1),
                    BinOp::Or => (if is_and(a) { P_AND + 1 } else { p }, if is_and(b) { P_AND + 1 } else { p + 1 }),
                    _ => (p, p + 1),
                };
                (format!("{} {sym} {}", self.prec(a, lp), self.prec(b, rp)), p)
            }
            ExprKind::Call { path, args, .. } => (self.call(e, path, args), P_ATOM),
            ExprKind::Method { recv, name, args } => self.method(e, recv, name, args),
            ExprKind::Index { base, items } => {
                let parts: Vec<String> = items.iter().map(|i| self.index_item(i)).collect();
                (format!("{}[{}]", self.prec(base, P_ATOM), parts.join(", ")), P_ATOM)
            }
            ExprKind::Tuple(items) => (tuple(items.iter().map(|x| self.expr(x)).collect()), P_ATOM),
            ExprKind::List(items) => (format!("[{}]", items.iter().map(|x| self.expr(x)).collect::<Vec<_>>().join(", ")), P_ATOM),
            ExprKind::Repeat(x, n) => (format!("[{}] * {}", self.expr(x), self.prec(n, P_MUL + 1)), P_MUL),
            ExprKind::Comprehension { var, iter, body } => {
                (format!("[{} for {} in {}]", self.prec(body, P_TERNARY + 1), self.pat(var), self.range(iter)), P_ATOM)
            }
            ExprKind::Cast(x, to) => {
                let f = if *to == CastTo::Float { "float" } else { "int" };
                (format!("{f}({})", self.expr(x)), P_ATOM)
            }
            ExprKind::If(c, a, b) => {
                (format!("{} if {} else {}", self.prec(a, P_OR), self.prec(c, P_OR), self.prec(b, P_TERNARY)), P_TERNARY)
            }
            ExprKind::Some(x) => self.expr_p(x),
            ExprKind::Field(x, i) => (format!("{}[{i}]", self.prec(x, P_ATOM)), P_ATOM),
            ExprKind::Attr(x, name) => (format!("{}.{name}", self.prec(x, P_ATOM)), P_ATOM),
            // Under `..Default::default()` the dataclass's defaults fill the fields left out.
            ExprKind::Struct(name, fields, _) => {
                let parts: Vec<String> = fields.iter().map(|(f, v)| format!("{f}={}", self.expr(v))).collect();
                (format!("{name}({})", parts.join(", ")), P_ATOM)
            }
        }
    }

    fn index_item(&self, i: &IndexItem) -> String {
        match i {
            IndexItem::At(e) => self.expr(e),
            IndexItem::Range { start, stop, step, .. } => {
                let s = start.as_ref().map(|x| self.expr(x)).unwrap_or_default();
                let e = stop.as_ref().map(|x| self.expr(x)).unwrap_or_default();
                match step {
                    Some(st) => format!("{s}:{e}:{}", self.expr(st)),
                    None => format!("{s}:{e}"),
                }
            }
            IndexItem::Ds { start, size, .. } => format!("nl.ds(start={}, size={})", self.expr(start), self.expr(size)),
        }
    }

    fn call(&self, e: &Expr, path: &[String], args: &[Arg]) -> String {
        if path == ["Outputs"] {
            let parts: Vec<String> = args.iter().map(|a| self.expr(&a.value)).collect();
            return if parts.len() == 1 { parts[0].clone() } else { format!("({})", parts.join(", ")) };
        }
        match self.info.call(e) {
            Some(Resolved::Vocab { spec, bind, slots }) => {
                let parts: Vec<String> = spec
                    .params
                    .iter()
                    .zip(slots)
                    .filter_map(|(p, s)| s.and_then(|i| args.get(i)).map(|a| (p, &a.value)))
                    .map(|(p, v)| {
                        let val = self.arg_value(p.kind, v);
                        if bind.positional { val } else { format!("{}={val}", p.name) }
                    })
                    .collect();
                format!("{}({})", spec.py, parts.join(", "))
            }
            _ => {
                let parts: Vec<String> = args
                    .iter()
                    .map(|a| match &a.name {
                        Some(n) => format!("{n}={}", self.expr(&a.value)),
                        None => self.expr(&a.value),
                    })
                    .collect();
                format!("{}({})", path.last().map_or("", String::as_str), parts.join(", "))
            }
        }
    }

    /// Arguments are printed as written, except integer lists passed as shapes,
    /// which NKI conventionally takes as tuples.
    fn arg_value(&self, kind: Kind, v: &Expr) -> String {
        match (kind, &v.kind) {
            // Replica groups are tuples of tuples: NKI rejects lists as kernel constants.
            (Kind::Groups, ExprKind::List(rings) | ExprKind::Tuple(rings)) => {
                let parts: Vec<String> = rings
                    .iter()
                    .map(|r| match &r.kind {
                        ExprKind::List(ranks) | ExprKind::Tuple(ranks) => tuple(ranks.iter().map(|x| self.expr(x)).collect()),
                        _ => self.expr(r),
                    })
                    .collect();
                tuple(parts)
            }
            // Printed as float literals, so NumPy stores them as float32 (not int32).
            (Kind::Constant, _) => match crate::check::constant::literal(v) {
                Ok((_, values)) => constant_py(v, &mut values.into_iter()),
                Err(_) => self.expr(v),
            },
            (Kind::Ints | Kind::Axis, ExprKind::List(items)) if !items.is_empty() => tuple(items.iter().map(|x| self.expr(x)).collect()),
            // Rearrange patterns are tuples of names and of name tuples; their sizes a dict.
            (Kind::Names, ExprKind::List(items) | ExprKind::Tuple(items)) => tuple(
                items
                    .iter()
                    .map(|x| match &x.kind {
                        ExprKind::List(g) | ExprKind::Tuple(g) => tuple(g.iter().map(|n| self.expr(n)).collect()),
                        _ => self.expr(x),
                    })
                    .collect(),
            ),
            (Kind::Sizes, ExprKind::List(items) | ExprKind::Tuple(items)) => {
                let pairs: Vec<String> = items
                    .iter()
                    .map(|x| match &x.kind {
                        ExprKind::Tuple(kv) if kv.len() == 2 => format!("{}: {}", self.expr(&kv[0]), self.expr(&kv[1])),
                        _ => self.expr(x),
                    })
                    .collect();
                format!("{{{}}}", pairs.join(", "))
            }
            _ => self.expr(v),
        }
    }

    fn method(&self, e: &Expr, recv: &Expr, name: &syn::Ident, args: &[Arg]) -> (String, u8) {
        // The receiver is rendered once (chained methods would otherwise render it
        // once per use, exponentially often), then parenthesised as each form needs.
        let (recv_text, recv_prec) = self.expr_p(recv);
        let r = |min: u8| if recv_prec < min { format!("({recv_text})") } else { recv_text.clone() };
        let a = |i: usize, min: u8| args.get(i).map(|x| self.prec(&x.value, min)).unwrap_or_default();
        let n = name.to_string();
        if let Some(Resolved::Method { spec, bind, slots }) = self.info.call(e) {
            if bind.property {
                return (format!("{}.{n}", r(P_ATOM)), P_ATOM);
            }
            let parts: Vec<String> = spec
                .params
                .iter()
                .zip(slots)
                .filter_map(|(p, s)| s.and_then(|i| args.get(i)).map(|x| format!("{}={}", p.name, self.arg_value(p.kind, &x.value))))
                .collect();
            return (format!("{}.{n}({})", r(P_ATOM), parts.join(", ")), P_ATOM);
        }
        match (self.info.ty(recv), n.as_str()) {
            (_, "min" | "max") => (format!("{n}({}, {})", r(0), a(0, 0)), P_ATOM),
            (_, "abs") => (format!("abs({})", r(0)), P_ATOM),
            (Ty::Int(_), "pow") | (_, "powi" | "powf") => (format!("{} ** {}", r(P_POW + 1), a(0, P_UNARY)), P_POW),
            (_, "div_ceil") => (format!("-(-{} // {})", r(P_UNARY), a(0, P_MUL + 1)), P_UNARY),
            (_, "sqrt") => (format!("math.sqrt({})", r(0)), P_ATOM),
            (_, "exp") => (format!("math.exp({})", r(0)), P_ATOM),
            (_, "ln") => (format!("math.log({})", r(0)), P_ATOM),
            (_, "is_some") => (format!("{} is not None", r(P_CMP + 1)), P_CMP),
            (_, "is_none") => (format!("{} is None", r(P_CMP + 1)), P_CMP),
            (_, "unwrap_or") => {
                let v = r(P_ATOM);
                (format!("{v} if {v} is not None else {}", a(0, P_TERNARY)), P_TERNARY)
            }
            (_, "len") => (format!("len({})", r(0)), P_ATOM),
            _ => (format!("{}.{n}()", r(P_ATOM)), P_ATOM),
        }
    }
}

/// A constant literal with every number printed as a Python float.
fn constant_py(e: &Expr, values: &mut impl Iterator<Item = f64>) -> String {
    match &e.kind {
        ExprKind::List(items) | ExprKind::Tuple(items) => {
            format!("[{}]", items.iter().map(|x| constant_py(x, values)).collect::<Vec<_>>().join(", "))
        }
        _ => format!("{:?}", values.next().unwrap_or_default()),
    }
}

/// The Python name of a message constant of another module: its own name.
fn shared_name(piece: &FmtPiece) -> Option<String> {
    match piece {
        FmtPiece::Shared(path) => path.segments.last().map(|s| s.ident.to_string()),
        _ => None,
    }
}
