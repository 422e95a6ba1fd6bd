//! Check: type inference over the DSL tree, argument resolution against the
//! vocabulary, and the static hardware rules. Errors are accumulated; what the
//! emitters need (types, resolved calls, dependencies) is recorded in [`Info`].

mod bundles;
mod call;
pub mod constant;
mod expr;
mod kinds;
mod limits;
mod lists;
mod methods;
mod operands;
mod regions;
pub mod rules;
mod same_dtype;
mod site;
pub mod split_views;
mod stmt;
mod types;
mod value;
mod views;

pub use limits::Generation;
pub use site::{ArgInfo, CallSite};
pub use types::{TensorTy, Ty};
pub use value::{EvalError, Val};

use crate::ast::{
    Arg, BinOp, Block, CastTo, Cond, EnumDef, Expr, ExprKind, FmtPiece, FnKind, Function, IndexItem, ModuleConst, ObjectDef, Pat,
    RangeKind, Region, RegionForm, Space, Spn, Stmt, TypeAnn, UnOp,
};
use crate::bounds::{MAX_ELEMENTS, MAX_NESTING};
use crate::diag::{Diagnostics, did_you_mean};
use crate::vocab::{self, Binding, Constant, FnSpec, Kind, OpClass, Param, Returns, Spaces};
use nki_spec::registers;
use std::collections::HashMap;

/// How a call was resolved.
pub enum Resolved {
    /// A vocabulary function; `slots[i]` is the argument index bound to parameter `i`.
    Vocab { spec: &'static FnSpec, bind: &'static Binding, slots: Vec<Option<usize>> },
    /// A tensor method.
    Method { spec: &'static FnSpec, bind: &'static Binding, slots: Vec<Option<usize>> },
    /// Another `#[nki_kernel]` / `#[nki_helper]` function.
    User,
}

/// What the checker learned, for the emitters.
#[derive(Default)]
pub struct Info {
    types: HashMap<usize, Ty>,
    calls: HashMap<usize, Resolved>,
    /// The parameter slots of each `nl::fori_loop` / `nl::while_loop` statement.
    regions: HashMap<usize, (&'static FnSpec, Vec<Option<usize>>)>,
    /// Other kernel/helper functions this one calls (their Rust paths), each
    /// with its first call's path, where rustc reports one it cannot find.
    pub deps: Vec<(Vec<String>, proc_macro2::Span)>,
    /// Whether the emitted Python needs `import math`.
    pub uses_math: bool,
    /// The module `&str` constants an assert names as its message, once checked.
    pub message_consts: Vec<String>,
    /// The `&str` constants of other `#[nki_module]`s an assert names as its
    /// message (`crate::..::NAME`, as segments): the Python imports them.
    pub message_imports: Vec<Vec<String>>,
}

fn key(e: &Expr) -> usize {
    e as *const Expr as usize
}

impl Info {
    /// The inferred type of an expression.
    pub fn ty(&self, e: &Expr) -> &Ty {
        self.types.get(&key(e)).unwrap_or(&Ty::Unknown)
    }

    /// The resolution of a call or method expression.
    pub fn call(&self, e: &Expr) -> Option<&Resolved> {
        self.calls.get(&key(e))
    }

    /// The argument of a region statement bound to its official parameter `name`.
    pub fn region_arg<'r>(&self, r: &'r Region, name: &str) -> Option<&'r Expr> {
        let (spec, slots) = self.regions.get(&(r as *const Region as usize))?;
        let i = spec.params.iter().position(|p| p.name == name)?;
        slots.get(i).copied().flatten().map(|a| &r.args[a].value)
    }
}

struct Var {
    name: String,
    ty: Ty,
    mutable: bool,
    /// The index of `nl::dynamic_range`: a register nothing may write.
    frozen: bool,
}

struct Checker<'d> {
    diag: &'d mut Diagnostics,
    info: Info,
    scopes: Vec<Vec<Var>>,
    next_sym: u32,
    ret: Option<Ty>,
    target: Generation,
    /// The argument expressions of `nisa::dma_copy` calls: the only places an
    /// `.ap(vector_offset=)` view may be written.
    dma_operands: Vec<usize>,
    /// Inside the body of a device loop: the loop's official name (`fori_loop`,
    /// `while_loop`, `dynamic_range`) and the number of scopes outside it (the
    /// enclosing kernel's variables, which the body cannot assign).
    device_body: Option<(&'static str, usize)>,
    /// Inside an `nl::no_reorder` region.
    no_reorder: bool,
    /// The innermost loop body around the statement: `None` outside any,
    /// `Some(None)` in a trace-time `for` loop, `Some(Some(name))` in the body
    /// of `nl::<name>` (a device loop or `no_reorder`), which `break` and
    /// `continue` cannot leave.
    loop_body: Option<Option<&'static str>>,
    /// The parameter bundles of the enclosing `#[nki_module]`: name, fields,
    /// whether every field declares a `#[default]`.
    objects: Vec<Bundle>,
    /// The enums of the enclosing `#[nki_module]`: name, members.
    enums: Vec<(String, Vec<String>)>,
    /// The suggestion for each path outside the vocabulary reported so far: a
    /// name repeated thousands of times is compared with the vocabulary once.
    unknown_hints: std::collections::HashMap<String, String>,
}

/// A parameter bundle as the checker reads it: its name, its fields and their
/// types, and whether every field declares a `#[default]`.
type Bundle = (String, Vec<(String, Ty)>, bool);

impl<'d> Checker<'d> {
    /// A checker at the top scope of a function returning `ret` (`None` for module
    /// items), for `target`, knowing the module's parameter bundles `objects` and
    /// enums `enums` (name, members).
    fn new(
        diag: &'d mut Diagnostics,
        ret: Option<Ty>,
        target: Generation,
        objects: Vec<Bundle>,
        enums: Vec<(String, Vec<String>)>,
    ) -> Self {
        Checker {
            diag,
            info: Info::default(),
            scopes: vec![Vec::new()],
            next_sym: 0,
            ret,
            target,
            dma_operands: Vec::new(),
            device_body: None,
            no_reorder: false,
            loop_body: None,
            objects,
            enums,
            unknown_hints: Default::default(),
        }
    }
}

/// Whether `e` is a literal Python can hold as a default or module constant:
/// a number, bool, string, None or an `nl` constant (`Invalid` was reported by
/// the parser, e.g. a float literal beyond f64).
fn is_literal(e: &Expr) -> bool {
    matches!(
        e.kind,
        ExprKind::Int(_)
            | ExprKind::Float(_)
            | ExprKind::Bool(_)
            | ExprKind::Str(_)
            | ExprKind::None
            | ExprKind::Path(_)
            | ExprKind::Invalid
    ) || matches!(&e.kind, ExprKind::Unary(UnOp::Neg, x) if matches!(x.kind, ExprKind::Int(_) | ExprKind::Float(_) | ExprKind::Invalid))
        // A tuple of literals (`padding=((0, 0), (0, 0))`).
        || matches!(&e.kind, ExprKind::Tuple(items) if items.iter().all(is_literal))
}

/// Checks the constants of an `#[nki_module]`: each a literal of its declared type.
pub fn check_consts(consts: &[&ModuleConst], diag: &mut Diagnostics) {
    let mut c = Checker::new(diag, None, Generation::Trn2, Vec::new(), Vec::new());
    c.declare_consts(consts.iter().copied());
}

/// What a bundle field of type `ty` holds, in messages: an `Option` with its item.
fn field_describe(ty: &TypeAnn) -> String {
    match ty {
        TypeAnn::Option(inner, _) => format!("an Option of {}", Ty::from_ann(inner).describe()),
        t => Ty::from_ann(t).describe(),
    }
}

/// Checks the bundles of an `#[nki_module]`: each field default a literal of the
/// field's type (for an enum field, a member of the module's enum in `enums`;
/// for an `Option` field, also `None`).
pub fn check_objects(objects: &[ObjectDef], enums: &[EnumDef], diag: &mut Diagnostics) {
    let mut c = Checker::new(diag, None, Generation::Trn2, Vec::new(), crate::parse::enum_names(enums));
    for o in objects {
        let mut seen_default = false;
        for ((name, ty), default) in o.fields.iter().zip(&o.defaults) {
            let Some(d) = default else {
                if seen_default {
                    c.diag.error(name.span(), format!("`{}.{name}` has no default but follows a field with one; a Python dataclass requires fields with defaults to come last", o.name));
                }
                continue;
            };
            seen_default = true;
            // An `Option` field may default to `None` (the library's `x: float = None`).
            if matches!(d.kind, ExprKind::None) {
                if !matches!(ty, TypeAnn::Option(..)) {
                    c.diag.error(
                        d.span,
                        format!(
                            "`{}.{name}` holds {}, which is never None: a default of None needs an `Option` field",
                            o.name,
                            Ty::from_ann(ty).describe()
                        ),
                    );
                }
                continue;
            }
            if !is_literal(d) || matches!(d.kind, ExprKind::Str(_)) {
                c.diag.error(
                    d.span,
                    format!(
                        "the default of `{}.{name}` must be a number, bool, nl constant or None: it becomes the dataclass's default",
                        o.name
                    ),
                );
                continue;
            }
            let (t, declared) = (c.expr(d), Ty::from_ann(ty));
            if !t.fits(&declared) {
                c.diag.error(d.span, format!("`{}.{name}` holds {} but its default is {}", o.name, field_describe(ty), t.describe()));
            }
        }
    }
}

impl Checker<'_> {
    /// Binds the module constants, with their values, in the outermost scope.
    fn declare_consts<'k>(&mut self, consts: impl IntoIterator<Item = &'k ModuleConst>) {
        for k in consts {
            let declared = Ty::from_ann(&k.ty);
            let t = self.expr(&k.init);
            if !is_literal(&k.init) {
                self.diag.error(
                    k.init.span,
                    "a module constant is a literal (a number, bool or an nl constant such as nl::bfloat16): it becomes a Python module constant",
                );
            } else if !t.fits(&declared) {
                self.diag.error(k.init.span, format!("the constant is declared {} but holds {}", declared.describe(), t.describe()));
            }
            let t = if t.fits(&declared) && !t.is_unknown() { t } else { declared };
            self.declare(&k.name, t, false, k.name.span());
        }
    }
}

/// Checks a function; returns what the emitters need.
pub fn check(f: &Function, target: Generation, diag: &mut Diagnostics) -> Info {
    let objects = f
        .objects
        .iter()
        .map(|o| {
            let fields = o.fields.iter().map(|(n, t)| (n.to_string(), Ty::from_ann(t))).collect();
            (o.name.to_string(), fields, o.defaults.iter().all(Option::is_some))
        })
        .collect();
    let mut c = Checker::new(diag, f.ret.as_ref().map(Ty::from_ann), target, objects, crate::parse::enum_names(&f.enums));
    // The module's constants were checked, and reported, by `#[nki_module]`.
    let mut quiet = Diagnostics::default();
    std::mem::swap(c.diag, &mut quiet);
    c.declare_consts(&f.consts);
    std::mem::swap(c.diag, &mut quiet);
    let mut seen_default = false;
    for p in &f.params {
        let declared = Ty::from_ann(&p.ty);
        let has_default = f.is_optional(p);
        if seen_default && !has_default {
            c.diag.error(
                p.name.span(),
                format!(
                    "`{}` has no default but follows a parameter with one; Python requires parameters with defaults to come last",
                    p.name
                ),
            );
        }
        seen_default |= has_default;
        if BUILDER_RESERVED.contains(&p.name.to_string().as_str()) {
            c.diag.error(p.name.span(), format!("`{}` is reserved for the generated launcher; choose another parameter name", p.name));
        }
        if let Some(d) = &p.default {
            let t = c.expr(d);
            // `Invalid` was reported by the parser (e.g. a float literal beyond f64).
            if !is_literal(d) {
                c.diag.error(
                    d.span,
                    "a parameter default must be a literal (a number, bool, string, None, an nl constant or a tuple of these): it becomes the Python default",
                );
            } else if !t.fits(&declared) {
                c.diag.error(d.span, format!("default {} does not fit the parameter type", t.describe()));
            }
        }
        if f.kind == FnKind::Kernel && holds_list(&p.ty) {
            c.diag.error(
                p.ty.span(),
                "a kernel takes its tensors one by one (its caller gives each); build a list of tiles inside the kernel, or take it in a #[nki_helper]",
            );
        }
        if f.kind == FnKind::Kernel && Ty::from_ann(&p.ty).holds_register() {
            c.diag.error(
                p.ty.span(),
                "a kernel cannot take a register: its caller has none (registers live on the device); take the value in a tensor and nisa::register_load it",
            );
        }
        if let (FnKind::Kernel, TypeAnn::Object(name, _)) = (f.kind, p.ty.item()) {
            let bad = f.objects.iter().find(|o| o.name == *name).and_then(|o| o.kernel_param_error(&f.objects));
            if let Some(e) = bad {
                let (path, deepest) = (e.path, crate::bounds::MAX_BUNDLE_NESTING);
                let msg = if e.too_deep {
                    format!(
                        "a kernel's bundle parameter nests bundles at most {deepest} deep (its caller gives each field by its path); `{path}` holds {}, one level more: flatten it into its parent",
                        field_describe(e.ty)
                    )
                } else {
                    format!(
                        "a kernel's bundle parameter holds ints, floats, bools, enum members, HBM tensors and such bundles, or `Option`s of them (its caller gives each field, as Python or as a command-line flag); `{path}` is {}: build such a bundle in the kernel and pass it to helpers",
                        field_describe(e.ty)
                    )
                };
                c.diag.error(p.ty.span(), msg);
            }
        }
        let ty = c.fresh(declared);
        c.declare(&p.name, ty, false, p.name.span());
    }
    if let (FnKind::Kernel, Some(ret)) = (f.kind, &f.ret)
        && holds_list(ret)
    {
        c.diag.error(ret.span(), "a kernel returns its tensors one by one: return a tuple, or `Outputs(..)` when their number varies");
    }
    if let (FnKind::Kernel, Some(ret)) = (f.kind, &f.ret)
        && Ty::from_ann(ret).holds_register()
    {
        c.diag.error(
            ret.span(),
            "a kernel cannot return a register: its caller has none; nisa::register_store it into a tensor and return that",
        );
    }
    let want = c.ret.clone();
    let tail = c.block(&f.body);
    match (&want, tail) {
        (Some(w), Some((t, span))) if !t.fits(w) => {
            c.diag.error(span, format!("this returns {} but the function declares {}", t.describe(), w.describe()))
        }
        (None, Some((t, span))) if !matches!(t, Ty::Unit | Ty::Unknown) => c
            .diag
            .error(span, format!("this function declares no return type but its body ends in {}; add `;` or a return type", t.describe())),
        _ => {}
    }
    c.info
}

impl Checker<'_> {
    /// Gives unknown integers a fresh symbol so affine facts about them survive.
    fn fresh(&mut self, t: Ty) -> Ty {
        match t {
            Ty::Int(v) if v.as_const().is_none() => {
                self.next_sym += 1;
                Ty::Int(Val::symbol(self.next_sym))
            }
            other => other,
        }
    }

    /// The message of `assert!(cond, NAME)`: `NAME` must hold a string, a module
    /// `&str` constant (a rule's one message, shared with the Rust that checks it).
    fn const_message(&mut self, name: &syn::Ident) {
        match self.lookup(&name.to_string()).map(|v| v.ty.clone()) {
            Some(Ty::Str) => self.info.message_consts.push(name.to_string()),
            Some(t) => self.diag.error(
                name.span(),
                format!("the assert message `{name}` holds {}: name a module `&str` constant or write a string literal", t.describe()),
            ),
            None => self.diag.error(
                name.span(),
                format!("the assert message `{name}` is not a module `&str` constant: declare `const {name}: &str = \"..\";` in the #[nki_module]"),
            ),
        }
    }

    /// The message of `assert!(cond, crate::path::NAME)`: a `&str` constant of
    /// another `#[nki_module]` (rustc checks that it is one), imported into the
    /// kernel's Python as `NAME`, so no name of this module may be `NAME`.
    fn shared_message(&mut self, path: &syn::Path) {
        let segs: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        let Some(name) = path.segments.last().map(|s| &s.ident) else { return };
        if self.lookup(&name.to_string()).is_some() {
            self.diag.error(
                name.span(),
                format!(
                    "the assert message `{}` is imported into the emitted module as `{name}`, a name this module already uses: rename one",
                    segs.join("::")
                ),
            );
        } else if !self.info.message_imports.contains(&segs) {
            self.info.message_imports.push(segs);
        }
    }

    fn lookup(&self, name: &str) -> Option<&Var> {
        self.scopes.iter().rev().flat_map(|s| s.iter().rev()).find(|v| v.name == name)
    }

    fn declare(&mut self, name: &syn::Ident, ty: Ty, mutable: bool, span: proc_macro2::Span) {
        let n = name.to_string();
        if PYTHON_RESERVED.contains(&n.as_str()) {
            self.diag.error(
                span,
                format!("`{n}` is a Python keyword or a name the emitted kernel uses (range, min, nl, nisa, ...); choose another name"),
            );
        }
        let depth = self.scopes.len();
        let outer = self.scopes[..depth - 1].iter().any(|s| s.iter().any(|v| v.name == n));
        if outer {
            self.diag.error(
                span,
                format!("`{n}` shadows a variable of an enclosing block; Python has function scope, so the emitted kernel would overwrite the outer `{n}`: use a new name"),
            );
        }
        if let Some(scope) = self.scopes.last_mut() {
            scope.push(Var { name: n, ty, mutable, frozen: false });
        }
    }

    fn scoped<R>(&mut self, f: impl FnOnce(&mut Self) -> R) -> R {
        self.scopes.push(Vec::new());
        let r = f(self);
        self.scopes.pop();
        r
    }
}

/// Whether the annotated type is or holds a `Vec<T>`.
fn holds_list(t: &TypeAnn) -> bool {
    match t {
        TypeAnn::List(..) => true,
        TypeAnn::Option(inner, _) => holds_list(inner),
        TypeAnn::Tuple(items, _) => items.iter().any(holds_list),
        _ => false,
    }
}

/// A trace-time integer for messages: its value, or `?`.
fn show(v: &Val) -> String {
    v.as_const().map_or("?".into(), |c| c.to_string())
}

/// Names that would break or shadow something in the emitted Python.
const PYTHON_RESERVED: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del", "elif", "else", "except",
    "finally", "for", "from", "global", "if", "import", "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try",
    "while", "with", "yield", "range", "min", "max", "len", "abs", "int", "float", "math", "nki", "nl", "nisa", "ncc",
];

/// Parameter names the generated `Call` builder uses for itself.
const BUILDER_RESERVED: &[&str] = &["new", "run", "launch"];

/// Mutable variables change, so their value is not known statically.
fn forget_value(t: Ty) -> Ty {
    match t {
        Ty::Int(_) => Ty::Int(Val::unknown()),
        Ty::Tensor(tt) => Ty::Tensor(TensorTy { shape: None, ..tt }),
        other => other,
    }
}
