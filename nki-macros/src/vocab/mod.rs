//! The DSL vocabulary: every `nl` / `nisa` / `ncc` function, constant and tensor
//! method a kernel may use, with its Python name, parameters (NKI's names and
//! order), the runtime function it calls in the emulation, and its static checks.
//!
//! This table is the single description both emitters and the checker read; the
//! project's tests compare it with the official NKI signatures.

mod collectives;
mod constants;
mod isa;
mod language;
mod methods;
mod scalar_methods;

pub use constants::{Constant, constant_names, lookup_constant};
pub use methods::{MethodSpec, lookup_method, method_names};
pub use scalar_methods::{ArgKind, Receiver, lookup_scalar_method, scalar_method_list};

use crate::check::Check;

/// Which memory spaces a tensor parameter accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spaces {
    /// SBUF or PSUM (compute engines).
    OnChip,
    /// SBUF only.
    Sbuf,
    /// PSUM only.
    Psum,
    /// HBM or SBUF (DMA).
    Dma,
    /// Shared HBM.
    SharedHbm,
    /// Any.
    Any,
}

/// The class of operator token a parameter takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpClass {
    /// Two-operand ALU ops (`nl.add`, `nl.less`, ...).
    Alu,
    /// Activation functions (`nl.exp`, `nl.copy`, ...).
    Act,
    /// Either (e.g. `tensor_scalar`'s `op0` also takes unary ops).
    Any,
}

/// How a parameter is passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Tensor(Spaces),
    /// A scalar or a `(P, 1)` tensor.
    Operand,
    Op(OpClass),
    Int,
    Float,
    Bool,
    /// `Option<bool>` (`accumulate=`): `None`, a bool, or an `Option<bool>` value.
    OptBool,
    Dtype,
    Buffer,
    Str,
    /// `[[step, count], ...]`.
    Pattern,
    /// A list of integers (shape, mask, cores).
    Ints,
    /// An integer or a tuple of integers.
    Axis,
    /// A member of an `nisa` enum (`"engine"`, `"reduce_cmd"`, ...).
    Enum(&'static str),
    /// `(int, int)`.
    Pair,
    /// A register or an integer.
    RegisterSource,
    /// A register or a one-element SBUF tensor (`.ap(scalar_offset=)`).
    DynamicOffset,
    Register,
    ReplicaGroup,
    /// Replica group rings (`((0, 1), (2, 3))`).
    Groups,
    /// Per channel, a list of one tensor: `[[t]]`.
    TensorLists,
}

/// A parameter of a vocabulary function.
#[derive(Clone, Copy, Debug)]
pub struct Param {
    pub name: &'static str,
    pub kind: Kind,
    pub required: bool,
}

/// What a call returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Returns {
    Unit,
    Int,
    Register,
    ReplicaGroup,
    /// Computed by the function's check (e.g. `nl.ndarray`).
    Custom,
}

/// A vocabulary function.
pub struct FnSpec {
    /// DSL path, e.g. `["nisa", "nc_matmul"]`.
    pub path: &'static [&'static str],
    /// Python callee, e.g. `nisa.nc_matmul`.
    pub py: &'static str,
    /// Runtime function, relative to `::nki`.
    pub rt: &'static str,
    /// Runtime options struct for the optional parameters (`""`: none; optional
    /// parameters are then trailing `Option` arguments).
    pub opts: &'static str,
    pub params: &'static [Param],
    pub returns: Returns,
    /// Whether the runtime function takes the program context.
    pub ctx: bool,
    /// Whether the runtime function returns `Result`.
    pub fallible: bool,
    /// Whether Python must receive positional arguments (classes without named fields).
    pub positional: bool,
    /// Static checks run on each call.
    pub check: Option<Check>,
}

/// The defaults of a table entry: a fallible `nisa`-style op taking the program
/// context, returning nothing, with keyword arguments in Python.
pub(crate) const BASE: FnSpec = FnSpec {
    path: &[],
    py: "",
    rt: "",
    opts: "",
    params: &[],
    returns: Returns::Unit,
    ctx: true,
    fallible: true,
    positional: false,
    check: None,
};

/// A table entry: `spec!("nisa"::"nc_matmul"(params...), field: value, ...)`, the
/// other fields from [`BASE`].
macro_rules! spec {
    ($module:literal :: $name:literal ($($p:expr),* $(,)?) $(, $field:ident : $val:expr)* $(,)?) => {
        $crate::vocab::FnSpec {
            path: &[$module, $name],
            py: concat!($module, ".", $name),
            rt: concat!($module, "::", $name),
            params: &[$($p),*],
            $($field: $val,)*
            ..$crate::vocab::BASE
        }
    };
}
pub(crate) use spec;

/// Shorthand for table entries.
pub(crate) const fn req(name: &'static str, kind: Kind) -> Param {
    Param { name, kind, required: true }
}

/// Shorthand for table entries.
pub(crate) const fn opt(name: &'static str, kind: Kind) -> Param {
    Param { name, kind, required: false }
}

/// Every vocabulary function.
pub fn all_functions() -> impl Iterator<Item = &'static FnSpec> {
    isa::FUNCTIONS.iter().chain(language::FUNCTIONS).chain(collectives::FUNCTIONS)
}

/// Looks up a function by its DSL path.
pub fn lookup_function(path: &[String]) -> Option<&'static FnSpec> {
    all_functions().find(|f| f.path.len() == path.len() && f.path.iter().zip(path).all(|(a, b)| a == b))
}

/// The names of the functions in the module `prefix` (for suggestions).
pub fn names_in(prefix: &str) -> Vec<&'static str> {
    all_functions().filter(|f| f.path.first() == Some(&prefix)).filter_map(|f| f.path.last().copied()).collect()
}
