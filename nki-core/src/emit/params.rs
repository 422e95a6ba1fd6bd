//! A kernel's parameters as data, and a way to call it with values chosen at run
//! time.
//!
//! `#[nki_kernel]` records each parameter's name, kind, whether it may be omitted
//! and its Python default ([`ParamInfo`]), plus an [`Entry`] that builds the
//! kernel's `Call` from [`ArgValue`]s and returns its outputs as a list. Anything
//! that runs kernels it was not compiled against (the `nki run KERNEL` command)
//! works from these alone.

use crate::{Ctx, Dtype, NkiError, Result, Tensor};
use nki_spec::contract::{Bound, either, in_range, range_rule};

/// What a parameter holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamKind {
    /// A tensor (`Hbm`, `Sbuf`, `Psum`, `Tensor`).
    Tensor,
    /// A Python int (`i64`).
    Int,
    /// A Python float (`f64`).
    Float,
    /// A Python bool.
    Bool,
    /// An `nl` dtype.
    Dtype,
    /// A string.
    Str,
    /// Replica groups: rings of ranks.
    Groups,
    /// An `ncc.ReplicaGroup`, given by its rings (an [`ArgValue::Groups`]).
    ReplicaGroup,
    /// A Python tuple of scalars or of such tuples (`(i64, i64)`,
    /// `((i64, i64), (i64, i64))`), given item by item (an [`ArgValue::Tuple`]).
    Tuple {
        /// What each item holds, in order.
        items: &'static [ParamKind],
    },
    /// A member of an `#[nki_enum]` (a Python `Enum` class), given by name.
    Enum {
        /// The class's name.
        class: &'static str,
        /// Its members' names, in declaration order.
        members: &'static [&'static str],
    },
}

impl ParamKind {
    /// What a value of the kind is, in messages and help ("an int").
    pub const fn describe(self) -> &'static str {
        match self {
            ParamKind::Tensor => "a tensor",
            ParamKind::Int => "an int",
            ParamKind::Float => "a float",
            ParamKind::Bool => "a bool",
            ParamKind::Dtype => "a dtype",
            ParamKind::Str => "a string",
            ParamKind::Groups => "replica groups",
            ParamKind::ReplicaGroup => "an ncc.ReplicaGroup",
            ParamKind::Tuple { .. } => "a tuple",
            ParamKind::Enum { .. } => "an enum member",
        }
    }
}

/// One parameter of a kernel, as declared, with its contract (see
/// [`nki_spec::contract`]): the dtypes a tensor takes, the range of a scalar.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ParamInfo {
    /// Its name (in Rust and Python).
    pub name: &'static str,
    /// What it holds (for `Option<T>`, what `T` holds).
    pub kind: ParamKind,
    /// Whether callers may omit it (it has a default, or is an `Option`).
    pub optional: bool,
    /// The Python default expression, if it has one (`None` for options without one).
    pub default: Option<&'static str>,
    /// For a tensor, the `nl` names of the dtypes it accepts (the kernel
    /// refuses others): its `#[dtypes(...)]`, or for a kernel's tensor that
    /// declares none [`FLOAT_DATA`](nki_spec::contract::FLOAT_DATA); empty: any
    /// (a helper's tensors).
    pub dtypes: &'static [&'static str],
    /// For an int or float, the bounds of its documented range
    /// (`#[range(>= 0.0, < 1.0)]`; empty: any value).
    pub range: &'static [Bound],
    /// For a field of a bundle parameter (registered as `cfg.field`, a nested
    /// bundle's as `cfg.inner.field`), the class of the bundle holding it, an
    /// `nl.NKIObject` the caller builds from the fields.
    pub bundle: Option<&'static str>,
    /// For a field of a bundle, the paths of the `Option` bundles holding it,
    /// outermost first (`cfg`, `cfg.inner`): each is `None` unless one of its
    /// fields is given, and a field without a default (`optional` false) is
    /// required only when every one of them is built.
    pub optional_bundles: &'static [&'static str],
    /// For a tensor, its shape as the kernel names its dims (`[n, d]`, from
    /// `let [n, d] = x.shape();`); empty when the kernel names none.
    pub shape: &'static str,
    /// The kernel's own checks of the parameter: the messages of the asserts
    /// at the top of its body that name the parameter or its dims, as its help
    /// shows them (the values they format as `<name>` placeholders).
    pub checks: &'static [&'static str],
}

impl ParamInfo {
    /// A required parameter `name` holding `kind`, with no default, dtype or
    /// range limits, bundle, named shape or checks: the base the other fields
    /// update.
    pub const fn required(name: &'static str, kind: ParamKind) -> Self {
        Self {
            name,
            kind,
            optional: false,
            default: None,
            dtypes: &[],
            range: &[],
            bundle: None,
            optional_bundles: &[],
            shape: "",
            checks: &[],
        }
    }

    /// Whether the tensor parameter accepts `dtype`.
    pub fn accepts(&self, dtype: Dtype) -> bool {
        self.dtypes.is_empty() || self.dtypes.contains(&dtype.nl_name())
    }

    /// Refuses a tensor of `dtype` the parameter does not accept: the error
    /// names `kernel`, the parameter, the dtype and the accepted ones.
    pub fn check_dtype(&self, kernel: &str, dtype: Dtype) -> Result<()> {
        check_dtype(kernel, self.name, dtype, self.dtypes)
    }

    /// Refuses a value outside the parameter's documented range.
    pub fn check_value(&self, kernel: &str, value: f64) -> Result<()> {
        check_range(kernel, self.name, value, self.range)
    }
}

/// The dtype check of a tensor parameter that accepts `accepted` (`nl` names;
/// empty: any).
pub fn check_dtype(kernel: &str, param: &str, dtype: Dtype, accepted: &[&str]) -> Result<()> {
    if accepted.is_empty() || accepted.contains(&dtype.nl_name()) {
        return Ok(());
    }
    Err(NkiError::argument(param, dtype, &format!("{kernel} takes {param} as {}", either(accepted))))
}

/// The range check of a scalar parameter bounded by `bounds`.
pub fn check_range(kernel: &str, param: &str, value: f64, bounds: &[Bound]) -> Result<()> {
    if in_range(bounds, value) {
        return Ok(());
    }
    Err(NkiError::argument(param, value, &format!("{kernel} takes {param} {}", range_rule(bounds))))
}

/// A value for one parameter.
#[derive(Clone, Debug)]
pub enum ArgValue {
    /// A tensor.
    Tensor(Tensor),
    /// An int.
    Int(i64),
    /// A float.
    Float(f64),
    /// A bool.
    Bool(bool),
    /// A dtype.
    Dtype(Dtype),
    /// A string.
    Str(String),
    /// Replica groups' rings (of a `Groups` or a `ReplicaGroup` parameter).
    Groups(Vec<Vec<i64>>),
    /// The name of an enum member (`"SOFTMAX"`).
    Member(String),
    /// A tuple's items, in order.
    Tuple(Vec<ArgValue>),
}

/// A Rust enum declared `#[nki_enum]`: a Python `Enum` class whose members are
/// its variants, by the same names, with the same integer values.
pub trait PyEnum: Copy + 'static {
    /// The class's name.
    const CLASS: &'static str;
    /// The members' names, in declaration order.
    const MEMBERS: &'static [&'static str];
    /// The members, in declaration order (aligned with [`PyEnum::MEMBERS`]).
    const ALL: &'static [Self];
    /// The member's name.
    fn member(self) -> &'static str;
}

/// An enum member shows as Python's `str()` of it: `RouterActFnType.SOFTMAX`.
impl<T: PyEnum> std::fmt::Display for crate::__rt::Show<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", T::CLASS, self.0.member())
    }
}

/// Runs a kernel in the program `ctx` with one value per parameter, in
/// declaration order (`None`: the parameter's default), and returns its outputs
/// in return order.
pub type Entry = fn(&Ctx, &[Option<ArgValue>]) -> Result<Vec<Tensor>>;

fn mismatch(name: &str, want: ParamKind, got: &ArgValue) -> NkiError {
    NkiError::argument(name, got.describe(), &format!("{name} takes {}", want.describe()))
}

impl ArgValue {
    fn describe(&self) -> String {
        match self {
            ArgValue::Tensor(t) => format!("a {} tensor {:?}", t.dtype(), t.shape()),
            ArgValue::Int(v) => v.to_string(),
            ArgValue::Float(v) => v.to_string(),
            ArgValue::Bool(v) => v.to_string(),
            ArgValue::Dtype(d) => d.nl_name().to_string(),
            ArgValue::Str(s) => format!("{s:?}"),
            ArgValue::Groups(g) => format!("{g:?}"),
            ArgValue::Member(m) => m.clone(),
            ArgValue::Tuple(items) => format!("({})", items.iter().map(ArgValue::describe).collect::<Vec<_>>().join(", ")),
        }
    }

    /// The tensor of parameter `name`.
    pub fn tensor(&self, name: &str) -> Result<&Tensor> {
        match self {
            ArgValue::Tensor(t) => Ok(t),
            other => Err(mismatch(name, ParamKind::Tensor, other)),
        }
    }

    /// The int of parameter `name`.
    pub fn int(&self, name: &str) -> Result<i64> {
        match self {
            ArgValue::Int(v) => Ok(*v),
            other => Err(mismatch(name, ParamKind::Int, other)),
        }
    }

    /// The float of parameter `name` (an int converts, as in Python).
    pub fn float(&self, name: &str) -> Result<f64> {
        match self {
            ArgValue::Float(v) => Ok(*v),
            ArgValue::Int(v) => Ok(*v as f64),
            other => Err(mismatch(name, ParamKind::Float, other)),
        }
    }

    /// The bool of parameter `name`.
    pub fn bool(&self, name: &str) -> Result<bool> {
        match self {
            ArgValue::Bool(v) => Ok(*v),
            other => Err(mismatch(name, ParamKind::Bool, other)),
        }
    }

    /// The dtype of parameter `name`.
    pub fn dtype(&self, name: &str) -> Result<Dtype> {
        match self {
            ArgValue::Dtype(d) => Ok(*d),
            other => Err(mismatch(name, ParamKind::Dtype, other)),
        }
    }

    /// The string of parameter `name`.
    pub fn str(&self, name: &str) -> Result<&str> {
        match self {
            ArgValue::Str(s) => Ok(s),
            other => Err(mismatch(name, ParamKind::Str, other)),
        }
    }

    /// The replica groups of parameter `name`.
    pub fn groups(&self, name: &str) -> Result<Vec<Vec<i64>>> {
        match self {
            ArgValue::Groups(g) => Ok(g.clone()),
            other => Err(mismatch(name, ParamKind::Groups, other)),
        }
    }

    /// The `ncc.ReplicaGroup` of parameter `name`, built from the rings given.
    pub fn replica_group(&self, name: &str) -> Result<crate::collectives::ReplicaGroup> {
        match self {
            ArgValue::Groups(g) => Ok(crate::collectives::ReplicaGroup::new(g.clone())),
            other => Err(mismatch(name, ParamKind::ReplicaGroup, other)),
        }
    }
}

impl ArgValue {
    /// The `arity` items of tuple parameter `name` (a tuple of another length is refused).
    pub fn tuple(&self, name: &str, arity: usize) -> Result<&[ArgValue]> {
        match self {
            ArgValue::Tuple(items) if items.len() == arity => Ok(items),
            other => Err(NkiError::argument(name, other.describe(), &format!("{name} takes a tuple of {arity} items"))),
        }
    }

    /// The member of enum `T` named by parameter `name`'s value.
    pub fn member<T: PyEnum>(&self, name: &str) -> Result<T> {
        let want = || format!("{name} takes a {} member: {}", T::CLASS, T::MEMBERS.join(", "));
        match self {
            ArgValue::Member(m) => match T::MEMBERS.iter().position(|n| n == m) {
                Some(i) => Ok(T::ALL[i]),
                None => Err(NkiError::argument(name, m, &want())),
            },
            other => Err(NkiError::argument(name, other.describe(), &want())),
        }
    }
}

/// The value of required parameter `index` (`name`), or an error naming it.
pub fn required<'a>(args: &'a [Option<ArgValue>], index: usize, name: &str) -> Result<&'a ArgValue> {
    args.get(index)
        .and_then(Option::as_ref)
        .ok_or_else(|| NkiError::argument(name, "missing", &format!("{name} is required (it has no default)")))
}

/// The value given for optional parameter `index`, if any.
pub fn given(args: &[Option<ArgValue>], index: usize) -> Option<&ArgValue> {
    args.get(index).and_then(Option::as_ref)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_convert_to_their_kind_and_refuse_others_naming_the_parameter() {
        assert_eq!(ArgValue::Int(3).float("eps").unwrap(), 3.0);
        assert_eq!(ArgValue::Dtype(Dtype::Bf16).dtype("dt").unwrap(), Dtype::Bf16);
        let e = ArgValue::Float(0.5).int("k").unwrap_err().to_string();
        assert_eq!(e, "invalid k = 0.5: k takes an int");
        let args = [None, Some(ArgValue::Bool(true))];
        assert!(required(&args, 0, "x").unwrap_err().to_string().contains("x is required"));
        assert!(given(&args, 1).unwrap().bool("b").unwrap());
        assert!(given(&args, 0).is_none() && given(&args, 5).is_none());
        let pair = ArgValue::Tuple(vec![ArgValue::Int(1), ArgValue::Int(2)]);
        assert_eq!(pair.tuple("padding", 2).unwrap()[1].int("padding").unwrap(), 2);
        let e = pair.tuple("stride", 3).unwrap_err().to_string();
        assert_eq!(e, "invalid stride = (1, 2): stride takes a tuple of 3 items");
    }
}
