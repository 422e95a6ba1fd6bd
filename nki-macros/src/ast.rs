//! The macro's own syntax tree: the subset of Rust a kernel may use, every node
//! carrying the span of the user's tokens it came from.

use proc_macro2::Span;
use quote::ToTokens;

/// The source range of a node: its first and last token. Errors underline the
/// whole range; generated code is spanned at its start.
#[derive(Clone, Copy, Debug)]
pub struct Spn {
    pub start: Span,
    pub end: Span,
}

impl Spn {
    /// The range of a syntax node.
    pub fn of(node: &impl ToTokens) -> Spn {
        let tokens = node.to_token_stream();
        let mut it = tokens.into_iter();
        let first = it.next().map_or_else(Span::call_site, |t| t.span());
        let last = it.last().map_or(first, |t| t.span());
        Spn { start: first, end: last }
    }
}

impl From<Span> for Spn {
    fn from(s: Span) -> Spn {
        Spn { start: s, end: s }
    }
}

/// A kernel or helper function.
pub struct Function {
    pub kind: FnKind,
    pub vis: syn::Visibility,
    pub name: syn::Ident,
    pub docs: Vec<String>,
    pub params: Vec<Param>,
    pub ret: Option<TypeAnn>,
    pub body: Block,
    /// The constants of the enclosing `#[nki_module]`, visible in the body.
    pub consts: Vec<ModuleConst>,
    /// The parameter bundles (`#[nki_object]` structs) of the enclosing `#[nki_module]`.
    pub objects: Vec<ObjectDef>,
    /// The enums (`#[nki_enum]`) of the enclosing `#[nki_module]`.
    pub enums: Vec<EnumDef>,
    /// Which of `consts`, `objects` and `enums` another `#[nki_module]` declares
    /// (imported by `use crate::..::NAME`): name and that module's path.
    pub imports: Vec<(String, syn::Path)>,
}

/// An `#[nki_enum]` enum: a Python `Enum` class, its members the variants by
/// the same names with their integer discriminants as values.
pub struct EnumDef {
    pub name: syn::Ident,
    pub members: Vec<(syn::Ident, i64)>,
}

/// An `#[nki_object]` struct: a parameter bundle, emitted as an `nl.NKIObject` dataclass.
pub struct ObjectDef {
    pub name: syn::Ident,
    pub fields: Vec<(syn::Ident, TypeAnn)>,
    /// Each field's `#[default(value)]`, the dataclass's default (aligned with `fields`).
    pub defaults: Vec<Option<Expr>>,
    /// Each tensor field's `#[dtypes(...)]` (aligned with `fields`; empty: none
    /// declared, which a kernel's bundle parameter reads as `FLOAT_DATA`).
    pub dtypes: Vec<Vec<&'static str>>,
}

/// Why a bundle cannot be a kernel's parameter: the path of the first
/// offending field (`Spec.inner.field`), its type, and whether it is refused
/// for nesting past the bound (else for its type).
pub struct KernelParamError<'o> {
    pub path: String,
    pub ty: &'o TypeAnn,
    pub too_deep: bool,
}

/// A field of a kernel's bundle parameter as its caller gives it, named by
/// its path from the parameter (`spec.shard_on_block.n_static_blocks`): a
/// value, or a nested bundle and its own fields.
pub struct BundleField<'f> {
    pub path: String,
    pub name: &'f syn::Ident,
    pub ty: &'f TypeAnn,
    pub default: Option<&'f Expr>,
    /// The dtypes a tensor field takes (`FLOAT_DATA` unless declared).
    pub dtypes: &'f [&'static str],
    /// For a field holding a bundle (or an `Option` of one): its definition
    /// and its fields.
    pub nested: Option<(&'f ObjectDef, Vec<BundleField<'f>>)>,
}

impl BundleField<'_> {
    /// Whether the field is an `Option` (`None` unless the caller gives it,
    /// or for a nested bundle, one of its fields).
    pub fn optional(&self) -> bool {
        matches!(self.ty, TypeAnn::Option(..))
    }
}

/// A value field of a kernel's bundle parameter, nested bundles' in their
/// place (the order of the registry's entries and the entry's argument slots),
/// with the class of the bundle holding it and the paths of the `Option`
/// bundles holding it, outermost first (the parameter's own when it is an
/// `Option`).
pub struct BundleLeaf<'f> {
    pub field: BundleField<'f>,
    pub class: &'f syn::Ident,
    pub optional_bundles: Vec<String>,
}

impl BundleLeaf<'_> {
    /// The Python expression of the field's value: its path, or `None` where
    /// an `Option` bundle holding it is (`None if cfg is None else cfg.how`).
    pub fn value(&self) -> String {
        let path = &self.field.path;
        match self.optional_bundles.as_slice() {
            [] => path.clone(),
            bundles => format!("None if {} else {path}", bundles.iter().map(|b| format!("{b} is None")).collect::<Vec<_>>().join(" or ")),
        }
    }

    /// Whether the field may be `None`: it is an `Option`, or an `Option`
    /// bundle holds it.
    pub fn optional(&self) -> bool {
        self.field.optional() || !self.optional_bundles.is_empty()
    }
}

/// The value fields of the kernel parameter `p` when it takes a bundle
/// (nothing otherwise), flattened as [`BundleLeaf`]s.
pub fn bundle_leaves<'f>(objects: &'f [ObjectDef], p: &Param) -> Vec<BundleLeaf<'f>> {
    fn flatten<'f>(class: &'f syn::Ident, fields: Vec<BundleField<'f>>, enclosing: &[String], out: &mut Vec<BundleLeaf<'f>>) {
        for mut field in fields {
            match field.nested.take() {
                Some((o, sub)) => {
                    let mut inner = enclosing.to_vec();
                    if field.optional() {
                        inner.push(field.path.clone());
                    }
                    flatten(&o.name, sub, &inner, out);
                }
                None => out.push(BundleLeaf { field, class, optional_bundles: enclosing.to_vec() }),
            }
        }
    }
    let mut out = Vec::new();
    if let Some(o) = bundle_in(objects, &p.ty) {
        let outer = if matches!(p.ty, TypeAnn::Option(..)) { vec![p.name.to_string()] } else { Vec::new() };
        flatten(&o.name, o.param_fields(objects, &p.name.to_string()), &outer, &mut out);
    }
    out
}

/// The bundle `ty` names, itself or as an `Option`'s item, among `objects`.
pub fn bundle_in<'o>(objects: &'o [ObjectDef], ty: &TypeAnn) -> Option<&'o ObjectDef> {
    match ty.item() {
        TypeAnn::Object(name, _) => objects.iter().find(|o| o.name == *name),
        _ => None,
    }
}

impl ObjectDef {
    /// Whether a kernel may take the bundle as a parameter: every field a value
    /// its caller can give (an int, float, bool or enum member, an HBM tensor,
    /// or another such bundle, nested at most
    /// [`MAX_BUNDLE_NESTING`](crate::bounds::MAX_BUNDLE_NESTING) deep; or an
    /// `Option` of one), the first offending field otherwise. `objects` are
    /// the bundles the fields may name.
    pub fn kernel_param_error<'o>(&'o self, objects: &'o [ObjectDef]) -> Option<KernelParamError<'o>> {
        self.param_error_at(objects, &self.name.to_string(), 1)
    }

    fn param_error_at<'o>(&'o self, objects: &'o [ObjectDef], path: &str, depth: usize) -> Option<KernelParamError<'o>> {
        let value = |t: &TypeAnn| {
            matches!(
                t,
                TypeAnn::Int(_) | TypeAnn::Float(_) | TypeAnn::Bool(_) | TypeAnn::PyEnum(..) | TypeAnn::Tensor(None | Some(Space::Hbm), _)
            )
        };
        for (field, ty) in &self.fields {
            let item = ty.item();
            let path = format!("{path}.{field}");
            if value(item) {
                continue;
            }
            let Some(nested) = bundle_in(objects, item) else {
                return Some(KernelParamError { path, ty, too_deep: false });
            };
            if depth >= crate::bounds::MAX_BUNDLE_NESTING {
                return Some(KernelParamError { path, ty, too_deep: true });
            }
            if let Some(e) = nested.param_error_at(objects, &path, depth + 1) {
                return Some(e);
            }
        }
        None
    }

    /// The fields of a kernel's bundle parameter `path` of this bundle, nested
    /// bundles' fields under theirs (down to the nesting bound, which
    /// [`kernel_param_error`](Self::kernel_param_error) reports past).
    pub fn param_fields<'f>(&'f self, objects: &'f [ObjectDef], path: &str) -> Vec<BundleField<'f>> {
        self.fields_at(objects, path, 1)
    }

    fn fields_at<'f>(&'f self, objects: &'f [ObjectDef], path: &str, depth: usize) -> Vec<BundleField<'f>> {
        let fields = self.fields.iter().zip(&self.defaults).zip(&self.dtypes);
        fields
            .map(|(((name, ty), default), dtypes)| {
                let path = format!("{path}.{name}");
                let nested = bundle_in(objects, ty)
                    .filter(|_| depth < crate::bounds::MAX_BUNDLE_NESTING)
                    .map(|o| (o, o.fields_at(objects, &path, depth + 1)));
                let dtypes = if dtypes.is_empty() { nki_spec::contract::FLOAT_DATA } else { dtypes.as_slice() };
                BundleField { path, name, ty, default: default.as_ref(), dtypes, nested }
            })
            .collect()
    }
}

/// A `const` item of an `#[nki_module]`: a Python module constant.
pub struct ModuleConst {
    pub name: syn::Ident,
    pub ty: TypeAnn,
    /// A literal or an `nl` constant (what Python's module line holds).
    pub init: Expr,
}

/// `#[nki_kernel]` or `#[nki_helper]`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum FnKind {
    Kernel,
    Helper,
}

/// A parameter, with its Python default when it has one and its contract: for
/// a tensor, the dtypes it accepts (`#[dtypes(float32, bfloat16)]`; a kernel's
/// tensor without one takes `FLOAT_DATA`; empty: any), for an int or float,
/// the bounds of its range (`#[range(>= 0.0, < 1.0)]`; empty: any).
pub struct Param {
    pub name: syn::Ident,
    pub ty: TypeAnn,
    pub default: Option<Expr>,
    pub dtypes: Vec<&'static str>,
    pub range: Vec<nki_spec::contract::Bound>,
}

impl Function {
    /// Whether `p` has a Python default: a `#[default]`, or, for an `Option`
    /// parameter of a kernel in the trailing run of such parameters, `None`
    /// (kernels' optional inputs default to `None` in Python; helpers take every
    /// argument explicitly). An `Option` before a parameter without a default has
    /// none: Python callers pass it positionally, `None` included.
    pub fn is_optional(&self, p: &Param) -> bool {
        if p.default.is_some() {
            return true;
        }
        if self.kind != FnKind::Kernel || !matches!(p.ty, TypeAnn::Option(..)) {
            return false;
        }
        let mut later = self.params.iter().skip_while(|q| !std::ptr::eq(*q, p)).skip(1);
        later.all(|q| q.default.is_some() || matches!(q.ty, TypeAnn::Option(..)))
    }

    /// Whether `p` may be left out by Rust and command-line callers: it has a
    /// Python default, or it is a kernel's `Option` (left out: `None`).
    pub fn may_omit(&self, p: &Param) -> bool {
        self.is_optional(p) || (self.kind == FnKind::Kernel && matches!(p.ty, TypeAnn::Option(..)))
    }
}

/// A type the DSL understands.
#[derive(Clone, Debug)]
pub enum TypeAnn {
    /// A tensor in the given memory space (`None`: any).
    Tensor(Option<Space>, Spn),
    Int(Spn),
    Float(Spn),
    Bool(Spn),
    Dtype(Spn),
    Str(Spn),
    /// `Vec<T>`: a list of values of one type (tiles, say) whose length is a
    /// trace-time integer.
    List(Box<TypeAnn>, Spn),
    /// Rings of ranks for a replica group.
    Groups(Spn),
    /// An `ncc.ReplicaGroup` the caller builds (a kernel parameter, as the
    /// library's collectives take one).
    ReplicaGroup(Spn),
    Option(Box<TypeAnn>, Spn),
    Tuple(Vec<TypeAnn>, Spn),
    /// A kernel's outputs when their number depends on the arguments: one tensor
    /// is returned as itself in Python, several as a tuple.
    Outputs(Spn),
    /// A parameter bundle of the enclosing `#[nki_module]`.
    Object(syn::Ident, Spn),
    /// An `#[nki_enum]` of the enclosing `#[nki_module]`.
    PyEnum(syn::Ident, Spn),
    /// A register (`nisa.VirtualRegister`): a helper's parameter or result.
    Register(Spn),
}

impl TypeAnn {
    /// The type itself, or an `Option`'s item.
    pub fn item(&self) -> &TypeAnn {
        match self {
            TypeAnn::Option(inner, _) => inner,
            t => t,
        }
    }

    /// Whether a value of the type is a tensor or an `Option` of one (what
    /// `#[dtypes(...)]` applies to).
    pub fn holds_tensor(&self) -> bool {
        matches!(self.item(), TypeAnn::Tensor(..))
    }

    pub fn span(&self) -> Spn {
        match self {
            TypeAnn::Tensor(_, s)
            | TypeAnn::Int(s)
            | TypeAnn::Float(s)
            | TypeAnn::Bool(s)
            | TypeAnn::Dtype(s)
            | TypeAnn::Str(s)
            | TypeAnn::List(_, s)
            | TypeAnn::Groups(s)
            | TypeAnn::ReplicaGroup(s)
            | TypeAnn::Option(_, s)
            | TypeAnn::Tuple(_, s)
            | TypeAnn::Outputs(s)
            | TypeAnn::Object(_, s)
            | TypeAnn::PyEnum(_, s)
            | TypeAnn::Register(s) => *s,
        }
    }
}

/// A memory space known statically.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Space {
    Hbm,
    Sbuf,
    Psum,
}

impl Space {
    /// The space with its indefinite article: "an SBUF", "a PSUM".
    pub fn with_article(self) -> &'static str {
        match self {
            Space::Hbm => "an HBM",
            Space::Sbuf => "an SBUF",
            Space::Psum => "a PSUM",
        }
    }
}

pub struct Block {
    pub stmts: Vec<Stmt>,
    /// A trailing expression (the function's or an `if` expression's value).
    pub tail: Option<Expr>,
}

pub enum Stmt {
    Let {
        pat: Pat,
        ty: Option<TypeAnn>,
        init: Expr,
        span: Spn,
    },
    Assign {
        name: syn::Ident,
        op: Option<BinOp>,
        value: Expr,
        span: Spn,
    },
    Expr(Expr),
    For {
        var: Pat,
        iter: Box<RangeIter>,
        body: Block,
        span: Spn,
    },
    /// `nl::fori_loop(..)`, `nl::while_loop(..)` or `nl::no_reorder(..)`: a body run by the device.
    Region(Box<Region>),
    If {
        branches: Vec<(Cond, Block)>,
        otherwise: Option<Block>,
        span: Spn,
    },
    Assert {
        cond: Expr,
        msg: Option<FmtString>,
        span: Spn,
    },
    Return(Option<Expr>, Spn),
    /// `break` or `continue` in a trace-time loop: Python's own.
    Jump(Jump, Spn),
}

/// A jump out of a loop body.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Jump {
    Break,
    Continue,
}

impl Jump {
    /// The keyword, the same in Rust and Python.
    pub fn keyword(self) -> &'static str {
        match self {
            Jump::Break => "break",
            Jump::Continue => "continue",
        }
    }
}

/// The condition of an `if`.
pub enum Cond {
    Expr(Expr),
    /// `if let Some(name) = expr`.
    LetSome(syn::Ident, Expr),
}

/// A `for` loop's range.
pub struct RangeIter {
    pub kind: RangeKind,
    pub start: Expr,
    pub stop: Expr,
    pub step: Option<Expr>,
    /// `(a..b).rev()` (then maybe `.step_by(s)`): from `b - 1` down to `a`,
    /// Python's `range(b - 1, a - 1, -s)`.
    pub rev: bool,
    pub span: Spn,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum RangeKind {
    /// `a..b` or `(a..b).step_by(s)`: Python `range`.
    Plain,
    /// `nl::affine_range`, `nl::sequential_range`, `nl::static_range`, `nl::dynamic_range`.
    Nl(&'static str),
}

/// A statement whose body is a closure, as NKI's structured device loops and
/// scoped regions take one.
pub struct Region {
    pub form: RegionForm,
    /// The call's arguments; the closure's slot holds an [`ExprKind::Invalid`] placeholder.
    pub args: Vec<Arg>,
    /// The closure's parameter (`|i|`), if it has one.
    pub var: Option<Pat>,
    pub body: Block,
    /// The path `nl::fori_loop`.
    pub path_span: Spn,
    pub span: Spn,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum RegionForm {
    /// `nl::fori_loop(lower, upper, |i| { .. }, step)`.
    Fori,
    /// `nl::while_loop(init, |r| { ..; r })`.
    While,
    /// `nl::no_reorder(|| { .. })`.
    NoReorder,
}

impl RegionForm {
    /// The form of `nl::<name>`.
    pub fn of(path: &[String]) -> Option<RegionForm> {
        match path {
            [m, n] if m == "nl" => match n.as_str() {
                "fori_loop" => Some(RegionForm::Fori),
                "while_loop" => Some(RegionForm::While),
                "no_reorder" => Some(RegionForm::NoReorder),
                _ => None,
            },
            _ => None,
        }
    }

    /// The official name (`fori_loop`).
    pub fn name(self) -> &'static str {
        match self {
            RegionForm::Fori => "fori_loop",
            RegionForm::While => "while_loop",
            RegionForm::NoReorder => "no_reorder",
        }
    }
}

pub enum Pat {
    Ident(syn::Ident, bool),
    Tuple(Vec<Pat>, Spn),
    /// `[a, b, c]`: destructures a shape.
    Slice(Vec<Pat>, Spn),
    Wild,
}

/// `"text {x} more {}"` with its arguments resolved to expressions.
pub struct FmtString {
    pub pieces: Vec<FmtPiece>,
}

pub enum FmtPiece {
    Text(String),
    Arg(Expr),
    /// A module `&str` constant holding the whole message (`assert!(c, RULE)`),
    /// so a rule's one message serves the kernel and the Rust that checks it.
    Const(syn::Ident),
    /// A `&str` constant of another `#[nki_module]` of the crate holding the whole
    /// message (`assert!(c, crate::rules::RULE)`): a rule two kernels' modules
    /// share. The Python imports it from the module that declares it.
    Shared(syn::Path),
}

pub struct Expr {
    pub kind: ExprKind,
    pub span: Spn,
}

pub enum ExprKind {
    /// A construct that failed to parse (already reported); type-checks as anything.
    Invalid,
    Int(i64),
    /// Always finite: the parser rejects literals beyond the range of f64.
    Float(f64),
    Bool(bool),
    Str(String),
    None,
    Var(syn::Ident),
    /// A path into the DSL vocabulary (`nl::float32`, `nisa::reduce_cmd::reset`).
    Path(Vec<String>),
    Unary(UnOp, Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    Call {
        path: Vec<String>,
        path_span: Spn,
        args: Vec<Arg>,
    },
    Method {
        recv: Box<Expr>,
        name: syn::Ident,
        args: Vec<Arg>,
    },
    Index {
        base: Box<Expr>,
        items: Vec<IndexItem>,
    },
    Tuple(Vec<Expr>),
    List(Vec<Expr>),
    /// `[x; n]`.
    Repeat(Box<Expr>, Box<Expr>),
    /// `(a..b).map(|i| x).collect()`: one `x` per index of a trace-time range,
    /// Python's `[x for i in range(a, b)]` (n tiles, each allocated afresh).
    Comprehension {
        var: Pat,
        iter: Box<RangeIter>,
        body: Box<Expr>,
    },
    Cast(Box<Expr>, CastTo),
    If(Box<Expr>, Box<Expr>, Box<Expr>),
    Some(Box<Expr>),
    /// `t.0`.
    Field(Box<Expr>, usize),
    /// `cfg.tile`: a field of a parameter bundle.
    Attr(Box<Expr>, syn::Ident),
    /// `Tiling { d, eps: EPS }`: a new parameter bundle; `true` when it ends
    /// in `..Default::default()`, the fields not given taking their declared
    /// `#[default]`s.
    Struct(syn::Ident, Vec<(syn::Ident, Expr)>, bool),
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum CastTo {
    Int,
    Float,
}

/// A call argument, positional or `name = value`.
pub struct Arg {
    pub name: Option<syn::Ident>,
    pub value: Expr,
}

/// One item of `t[s![...]]`.
pub enum IndexItem {
    At(Expr),
    Range {
        start: Option<Expr>,
        stop: Option<Expr>,
        step: Option<Expr>,
        span: Spn,
    },
    /// `nl::ds(start, size)`.
    Ds {
        start: Expr,
        size: Expr,
        span: Spn,
    },
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum UnOp {
    Neg,
    Not,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    /// `<<` and `>>` on trace-time integers (Python's, unbounded there; checked here).
    Shl,
    Shr,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
}

impl BinOp {
    /// The operator as written in Rust.
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
            BinOp::Shl => "<<",
            BinOp::Shr => ">>",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::And => "&&",
            BinOp::Or => "||",
        }
    }

    pub fn is_arith(self) -> bool {
        matches!(self, BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Rem)
    }
}
