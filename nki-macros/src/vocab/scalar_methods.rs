//! Methods of trace-time scalars (integers, floats, Options, shapes and replica
//! groups): which receiver each applies to and the arguments it takes.

/// The kind of value a scalar method is called on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Receiver {
    Int,
    Float,
    Option,
    /// A shape or replica group rings.
    Sequence,
}

impl Receiver {
    /// The receivers, as named in messages.
    pub fn plural(self) -> &'static str {
        match self {
            Receiver::Int => "integers",
            Receiver::Float => "floats",
            Receiver::Option => "Options",
            Receiver::Sequence => "shapes, lists and replica groups",
        }
    }
}

/// What an argument of a scalar method must be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgKind {
    Int,
    /// An integer or a float.
    Number,
    /// A value of the Option's inner type.
    Inner,
}

/// A method of a scalar value.
pub struct ScalarMethod {
    pub receiver: Receiver,
    pub name: &'static str,
    /// Its positional arguments.
    pub args: &'static [ArgKind],
}

const fn m(receiver: Receiver, name: &'static str, args: &'static [ArgKind]) -> ScalarMethod {
    ScalarMethod { receiver, name, args }
}

static SCALAR_METHODS: &[ScalarMethod] = &[
    m(Receiver::Int, "min", &[ArgKind::Int]),
    m(Receiver::Int, "max", &[ArgKind::Int]),
    m(Receiver::Int, "abs", &[]),
    m(Receiver::Int, "pow", &[ArgKind::Int]),
    m(Receiver::Int, "div_ceil", &[ArgKind::Int]),
    m(Receiver::Float, "min", &[ArgKind::Number]),
    m(Receiver::Float, "max", &[ArgKind::Number]),
    m(Receiver::Float, "abs", &[]),
    m(Receiver::Float, "sqrt", &[]),
    m(Receiver::Float, "exp", &[]),
    m(Receiver::Float, "ln", &[]),
    m(Receiver::Float, "powi", &[ArgKind::Int]),
    m(Receiver::Float, "powf", &[ArgKind::Number]),
    m(Receiver::Option, "is_some", &[]),
    m(Receiver::Option, "is_none", &[]),
    m(Receiver::Option, "unwrap_or", &[ArgKind::Inner]),
    m(Receiver::Sequence, "len", &[]),
];

/// Looks up a method of a scalar receiver.
pub fn lookup_scalar_method(receiver: Receiver, name: &str) -> Option<&'static ScalarMethod> {
    SCALAR_METHODS.iter().find(|s| s.receiver == receiver && s.name == name)
}

/// The methods of a scalar receiver, as `.name()` for messages.
pub fn scalar_method_list(receiver: Receiver) -> String {
    let names: Vec<String> = SCALAR_METHODS.iter().filter(|s| s.receiver == receiver).map(|s| format!(".{}()", s.name)).collect();
    names.join(", ")
}
