//! The checker's types: what is statically known about each value.

use super::value::{EvalError, Val};
use crate::ast::{Space, TypeAnn};
use crate::vocab::OpClass;

/// A tensor's static facts.
#[derive(Clone, Debug, Default)]
pub struct TensorTy {
    pub space: Option<Space>,
    /// The shape, when the rank is known.
    pub shape: Option<Vec<Val>>,
    /// The `nl` dtype name, when known.
    pub dtype: Option<&'static str>,
}

impl TensorTy {
    /// The partition count (dim 0), when known.
    pub fn partitions(&self) -> Option<i64> {
        self.shape.as_ref()?.first()?.as_const()
    }

    /// The product of the free dims, when all are known and it fits an i64.
    pub fn free_size(&self) -> Option<i64> {
        known_product(self.shape.as_ref()?.get(1..)?)?.ok()
    }

    /// The shape as text: `[128, 512]`, `?` for unknown dims.
    pub fn shape_text(&self) -> String {
        self.shape.as_deref().map_or("[?]".into(), dims_text)
    }
}

/// Dims as text: `[128, 512]`, `?` for unknown ones; past eight dims, the first
/// eight and the rank.
pub fn dims_text(dims: &[Val]) -> String {
    let shown: Vec<String> = dims.iter().take(8).map(|d| d.as_const().map_or("?".into(), |v| v.to_string())).collect();
    let more = if dims.len() > 8 { format!(", ... ({} dims)", dims.len()) } else { String::new() };
    format!("[{}{more}]", shown.join(", "))
}

/// The product of `dims` when all are known: `Err` when it does not fit an i64.
pub fn known_product(dims: &[Val]) -> Option<Result<i64, EvalError>> {
    let known: Vec<i64> = dims.iter().map(Val::as_const).collect::<Option<_>>()?;
    Some(known.into_iter().try_fold(1i64, i64::checked_mul).ok_or(EvalError::Overflow))
}

/// A value's static type.
#[derive(Clone, Debug)]
pub enum Ty {
    /// Not known because of an error already reported: accepted everywhere, silently.
    Unknown,
    /// A valid value of a type the checker cannot see (another kernel's or
    /// helper's result): accepted everywhere; annotate it with `let x: T = ...`
    /// where the type matters.
    Opaque,
    Unit,
    Int(Val),
    Float,
    Bool,
    Str,
    Dtype(Option<&'static str>),
    Buffer(Option<&'static str>),
    Tensor(TensorTy),
    Op(OpClass, Option<&'static str>),
    /// A member of the named `nisa` enum.
    Enum(&'static str),
    Register,
    ReplicaGroup,
    Groups,
    /// `t.shape()`, with its dims when the rank is known.
    Shape(Option<Vec<Val>>),
    /// `nl::ds(start, size)` bound to a variable: an index selecting `size` elements from `start`.
    Slice(Val, Val),
    Tuple(Vec<Ty>),
    List(Vec<Ty>),
    /// A list of unknown length whose elements all have this type (`Vec<T>`,
    /// or a list built from a range whose length the checker does not know).
    Seq(Box<Ty>),
    Option(Box<Ty>),
    None,
    /// `Outputs(a, b, ...)`: a variable number of returned tensors.
    Outputs,
    /// A parameter bundle, by its struct's name.
    Object(String),
    /// A member of the named `#[nki_enum]`.
    PyEnum(String),
}

impl Ty {
    /// The type a parameter or `let` annotation declares.
    pub fn from_ann(a: &TypeAnn) -> Ty {
        match a {
            TypeAnn::Tensor(space, _) => Ty::Tensor(TensorTy { space: *space, ..Default::default() }),
            TypeAnn::Int(_) => Ty::Int(Val::unknown()),
            TypeAnn::Float(_) => Ty::Float,
            TypeAnn::Bool(_) => Ty::Bool,
            TypeAnn::Dtype(_) => Ty::Dtype(None),
            TypeAnn::Str(_) => Ty::Str,
            TypeAnn::Groups(_) => Ty::Groups,
            TypeAnn::ReplicaGroup(_) => Ty::ReplicaGroup,
            TypeAnn::Option(inner, _) => Ty::Option(Box::new(Ty::from_ann(inner))),
            TypeAnn::Tuple(items, _) => Ty::Tuple(items.iter().map(Ty::from_ann).collect()),
            TypeAnn::List(item, _) => Ty::Seq(Box::new(Ty::from_ann(item))),
            TypeAnn::Outputs(_) => Ty::Outputs,
            TypeAnn::Object(name, _) => Ty::Object(name.to_string()),
            TypeAnn::PyEnum(name, _) => Ty::PyEnum(name.to_string()),
            TypeAnn::Register(_) => Ty::Register,
        }
    }

    /// A short description for messages.
    pub fn describe(&self) -> String {
        match self {
            Ty::Unknown | Ty::Opaque => "a value".into(),
            Ty::Unit => "nothing".into(),
            Ty::Int(v) => v.as_const().map_or("an integer".into(), |c| format!("the integer {c}")),
            Ty::Float => "a float".into(),
            Ty::Bool => "a bool".into(),
            Ty::Str => "a string".into(),
            Ty::Dtype(_) => "a dtype".into(),
            Ty::Buffer(_) => "a buffer".into(),
            Ty::Tensor(t) => match t.space {
                Some(s) => format!("{} tensor", s.with_article()),
                None => "a tensor".into(),
            },
            Ty::Op(OpClass::Act, Some(n)) => format!("the activation function nl.{n}"),
            Ty::Op(_, Some(n)) => format!("the ALU op nl.{n}"),
            Ty::Op(..) => "an operator token".into(),
            Ty::Enum(e) => format!("a nisa.{e} member"),
            Ty::Register => "a register".into(),
            Ty::ReplicaGroup => "a replica group".into(),
            Ty::Groups => "replica group rings".into(),
            Ty::Shape(_) => "a shape".into(),
            Ty::Slice(..) => "a dynamic slice (nl::ds)".into(),
            Ty::Tuple(_) => "a tuple".into(),
            Ty::List(_) | Ty::Seq(_) => "a list".into(),
            Ty::Option(_) => "an Option".into(),
            Ty::None => "None".into(),
            Ty::Outputs => "kernel outputs".into(),
            Ty::Object(name) => format!("a {name} bundle"),
            Ty::PyEnum(name) => format!("a member of {name}"),
        }
    }

    /// How many elements the type tracks (those of its lists, tuples and Options,
    /// and recursively theirs; none for a scalar) and how deeply those nest.
    pub fn footprint(&self) -> (usize, usize) {
        let parts = match self {
            Ty::Tuple(items) | Ty::List(items) => items.as_slice(),
            Ty::Option(inner) | Ty::Seq(inner) => std::slice::from_ref(&**inner),
            _ => return (0, 0),
        };
        parts
            .iter()
            .map(Ty::footprint)
            .fold((0, 1), |(n, d), (pn, pd)| (n.saturating_add(pn).saturating_add(1), d.max(pd.saturating_add(1))))
    }

    /// Whether the value is a register or holds one (in a list, tuple or Option).
    pub fn holds_register(&self) -> bool {
        match self {
            Ty::Register => true,
            Ty::Tuple(items) | Ty::List(items) => items.iter().any(Ty::holds_register),
            Ty::Option(inner) | Ty::Seq(inner) => inner.holds_register(),
            _ => false,
        }
    }

    pub fn is_int(&self) -> bool {
        matches!(self, Ty::Int(_))
    }

    pub fn is_float(&self) -> bool {
        matches!(self, Ty::Float)
    }

    pub fn is_tensor(&self) -> bool {
        matches!(self, Ty::Tensor(_))
    }

    /// Unknown or opaque: nothing can be checked about it.
    pub fn is_unknown(&self) -> bool {
        matches!(self, Ty::Unknown | Ty::Opaque)
    }

    /// The static integer value, when known.
    pub fn const_int(&self) -> Option<i64> {
        match self {
            Ty::Int(v) => v.as_const(),
            _ => None,
        }
    }

    /// The type two branches produce together.
    pub fn join(&self, other: &Ty) -> Ty {
        match (self, other) {
            (Ty::Int(a), Ty::Int(b)) => Ty::Int(if a == b { a.clone() } else { Val::unknown() }),
            (Ty::Float, Ty::Float) | (Ty::Int(_), Ty::Float) | (Ty::Float, Ty::Int(_)) => Ty::Float,
            (Ty::Bool, Ty::Bool) => Ty::Bool,
            (Ty::Str, Ty::Str) => Ty::Str,
            (Ty::Dtype(a), Ty::Dtype(b)) => Ty::Dtype(if a == b { *a } else { None }),
            (Ty::Buffer(a), Ty::Buffer(b)) => Ty::Buffer(if a == b { *a } else { None }),
            (Ty::Tensor(a), Ty::Tensor(b)) => Ty::Tensor(TensorTy {
                space: if a.space == b.space { a.space } else { None },
                shape: if a.shape == b.shape { a.shape.clone() } else { None },
                dtype: if a.dtype == b.dtype { a.dtype } else { None },
            }),
            (Ty::Op(c, a), Ty::Op(d, b)) if c == d => Ty::Op(*c, if a == b { *a } else { None }),
            (Ty::Option(a), Ty::Option(b)) => Ty::Option(Box::new(a.join(b))),
            (Ty::Option(a), Ty::None) | (Ty::None, Ty::Option(a)) => Ty::Option(a.clone()),
            (Ty::None, t) | (t, Ty::None) if !matches!(t, Ty::Option(_)) => Ty::Option(Box::new(t.clone())),
            (Ty::Tuple(a), Ty::Tuple(b)) if a.len() == b.len() => Ty::Tuple(a.iter().zip(b).map(|(x, y)| x.join(y)).collect()),
            (Ty::List(a), Ty::List(b)) if a.len() == b.len() => Ty::List(a.iter().zip(b).map(|(x, y)| x.join(y)).collect()),
            (Ty::Seq(a), Ty::Seq(b)) => Ty::Seq(Box::new(a.join(b))),
            (Ty::Seq(a), Ty::List(items)) | (Ty::List(items), Ty::Seq(a)) => {
                Ty::Seq(Box::new(items.iter().fold((**a).clone(), |t, i| t.join(i))))
            }
            (Ty::Shape(a), Ty::Shape(b)) => Ty::Shape(if a.as_ref().map(Vec::len) == b.as_ref().map(Vec::len) {
                a.clone().map(|d| d.into_iter().map(|_| Val::unknown()).collect())
            } else {
                None
            }),
            (Ty::Shape(_), Ty::List(items) | Ty::Tuple(items)) | (Ty::List(items) | Ty::Tuple(items), Ty::Shape(_))
                if items.iter().all(|i| i.is_int()) =>
            {
                Ty::Shape(Some(vec![Val::unknown(); items.len()]))
            }
            (Ty::Register, Ty::Register) => Ty::Register,
            (Ty::ReplicaGroup, Ty::ReplicaGroup) => Ty::ReplicaGroup,
            (Ty::Groups, Ty::Groups) => Ty::Groups,
            (Ty::Enum(a), Ty::Enum(b)) if a == b => Ty::Enum(a),
            (Ty::PyEnum(a), Ty::PyEnum(b)) if a == b => Ty::PyEnum(a.clone()),
            (Ty::Object(a), Ty::Object(b)) if a == b => Ty::Object(a.clone()),
            // A helper's result beside a bundle: Rust holds both branches to one type.
            (Ty::Object(a), Ty::Opaque) | (Ty::Opaque, Ty::Object(a)) => Ty::Object(a.clone()),
            _ => Ty::Unknown,
        }
    }

    /// Whether a value of this type may be stored where `want` is declared.
    pub fn fits(&self, want: &Ty) -> bool {
        match (self, want) {
            (Ty::Unknown | Ty::Opaque, _) | (_, Ty::Unknown | Ty::Opaque) => true,
            (Ty::Int(_), Ty::Int(_)) | (Ty::Int(_), Ty::Float) | (Ty::Float, Ty::Float) => true,
            (Ty::Tensor(a), Ty::Tensor(b)) => b.space.is_none() || a.space.is_none() || a.space == b.space,
            (Ty::None, Ty::Option(_)) => true,
            (Ty::Option(a), Ty::Option(b)) => a.fits(b),
            (t, Ty::Option(b)) => t.fits(b),
            (Ty::Tuple(a), Ty::Tuple(b)) => a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.fits(y)),
            (Ty::Seq(a), Ty::Seq(b)) => a.fits(b),
            (Ty::List(items), Ty::Seq(b)) => items.iter().all(|i| i.fits(b)),
            (Ty::List(items), Ty::Groups) => items.iter().all(|i| matches!(i, Ty::List(_) | Ty::Tuple(_) | Ty::Unknown)),
            (Ty::Tuple(items), Ty::Groups) => items.iter().all(|i| matches!(i, Ty::List(_) | Ty::Tuple(_) | Ty::Unknown)),
            // Rings built by a comprehension over a trace-time count (`(0..n).map(..).collect()`).
            (Ty::Seq(ring), Ty::Groups) => matches!(**ring, Ty::List(_) | Ty::Seq(_) | Ty::Unknown),
            (Ty::Object(a), Ty::Object(b)) | (Ty::PyEnum(a), Ty::PyEnum(b)) => a == b,
            (a, b) => std::mem::discriminant(a) == std::mem::discriminant(b),
        }
    }
}
