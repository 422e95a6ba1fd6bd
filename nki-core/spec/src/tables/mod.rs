//! The op rows, one file per official module. A row names the op and its
//! parameters (official names and order); the other fields default to a
//! Planned op of every generation with no engine and no rule.

// A row that sets every field still takes the defaults form, so that all rows read alike.
#![allow(clippy::needless_update)]

pub mod collectives;
pub mod isa;
pub mod language;
pub mod tensor;

/// What the tables are written with.
mod prelude {
    pub(crate) use crate::constants::CORE_BARRIER_DATA;
    pub(crate) use crate::kinds::{Kind::*, OpClass, Param, Returns, Spaces};
    pub(crate) use crate::op::{ALL_GENERATIONS, Binding, Engine, Family, Module, Op, Rule, SameDtype, Status, TRN2_AND_NEWER, TRN3_ONLY};

    /// Shorthand for a required parameter.
    pub(crate) const fn req(name: &'static str, kind: crate::Kind) -> Param {
        Param::req(name, kind)
    }

    /// Shorthand for an optional parameter.
    pub(crate) const fn opt(name: &'static str, kind: crate::Kind) -> Param {
        Param::opt(name, kind)
    }

    /// The `name=` every instruction takes.
    pub(crate) const NAME: Param = Param::opt("name", Str).defaults_to("None");

    /// Implemented by `::nki::<rt>(ctx, required..., <opts> { optional... })`.
    pub(crate) const fn with_opts(rt: &'static str, opts: &'static str) -> Status {
        Status::Implemented(Binding { rt, opts, ..Binding::BASE })
    }

    /// Implemented by `::nki::<rt>(ctx, required..., optional as Options...)`.
    pub(crate) const fn call(rt: &'static str) -> Status {
        Status::Implemented(Binding { rt, ..Binding::BASE })
    }

    /// An implemented tensor method (emitted per name by the macro).
    pub(crate) const METHOD: Status = Status::Implemented(Binding { ctx: false, ..Binding::BASE });

    /// An implemented tensor property (`t.shape`).
    pub(crate) const PROPERTY: Status = Status::Implemented(Binding { ctx: false, property: true, ..Binding::BASE });

    /// The defaults of a row.
    pub(crate) const BASE: Op = Op {
        module: Module::Isa,
        name: "",
        py: "",
        params: &[],
        engines: &[],
        generations: ALL_GENERATIONS,
        summary: "",
        family: None,
        rule: None,
        same_dtype: None,
        status: Status::Planned,
        rules: &[],
        example: "",
    };

    macro_rules! row {
        ($module:ident, $py:expr, $name:literal, [$($p:expr),* $(,)?] $(, $field:ident : $val:expr)* $(,)?) => {
            Op { module: Module::$module, name: $name, py: $py, params: &[$($p),*], $($field: $val,)* ..BASE }
        };
    }
    macro_rules! isa {
        ($family:ident, $name:literal, $($rest:tt)*) => { row!(Isa, concat!("nisa.", $name), $name, $($rest)*, family: Some(Family::$family)) };
    }
    macro_rules! nl {
        ($name:literal, $($rest:tt)*) => { row!(Language, concat!("nl.", $name), $name, $($rest)*) };
    }
    macro_rules! ncc {
        ($name:literal, $($rest:tt)*) => { row!(Collectives, concat!("ncc.", $name), $name, $($rest)*) };
    }
    macro_rules! method {
        ($name:literal, $($rest:tt)*) => { row!(Tensor, $name, $name, $($rest)*) };
    }
    pub(crate) use {isa, method, ncc, nl, row};
}

#[cfg(test)]
mod tests {
    use crate::{Kind, ops};

    #[test]
    fn every_optional_parameter_has_its_official_default_and_no_required_one_has() {
        for op in ops() {
            for p in op.params {
                assert_eq!(p.required, p.default.is_empty(), "{}.{}: default {:?}", op.official_name(), p.name, p.default);
            }
        }
    }

    #[test]
    fn same_dtype_rules_name_tensor_parameters_of_their_row() {
        let mut seen = 0;
        for op in ops() {
            let Some(rule) = op.same_dtype else { continue };
            seen += 1;
            let kind = |name: &str| op.params.iter().find(|p| p.name == name).map(|p| p.kind);
            assert!(matches!(kind(rule.dst), Some(Kind::Tensor(_))), "{}", op.official_name());
            assert!(matches!(kind(rule.src), Some(Kind::Tensor(_))), "{}", op.official_name());
            if let Some(flag) = rule.when {
                assert_eq!(kind(flag), Some(Kind::Bool), "{}", op.official_name());
            }
        }
        assert_eq!(seen, 2, "nc_transpose and nc_matmul(is_transpose=True)");
    }
}
