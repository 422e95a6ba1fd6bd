//! The DSL vocabulary, derived from the spec tables of `nki-spec`: every `nl` /
//! `nisa` / `ncc` function, constant and tensor method, with its Python name,
//! parameters (NKI's names and order) and the runtime function the emulation
//! calls. Rules are ids in the tables, resolved by `check::rules::rule`.

mod constants;
mod scalar_methods;

pub use constants::{Constant, constant_names, lookup_constant};
pub use nki_spec::{Binding, Kind, Op as FnSpec, OpClass, Param, Returns, Spaces};
pub use scalar_methods::{ArgKind, Receiver, lookup_scalar_method, scalar_method_list};

/// Looks up a function by its DSL path (`["nisa", "dma_copy"]`), implemented or planned.
pub fn lookup_function(path: &[String]) -> Option<&'static FnSpec> {
    match path {
        // Official names that are Rust keywords are written raw: `nl::r#where`.
        [module, name] => nki_spec::lookup(module, name.strip_prefix("r#").unwrap_or(name)),
        _ => None,
    }
}

/// The names of the implemented functions in the module `prefix` (for suggestions).
pub fn names_in(prefix: &str) -> Vec<&'static str> {
    nki_spec::ops().filter(|o| o.module.dsl() == prefix && o.binding().is_some()).map(|o| o.name).collect()
}

/// Looks up a tensor method or property, implemented or planned.
pub fn lookup_method(name: &str) -> Option<&'static FnSpec> {
    nki_spec::lookup_method(name)
}

/// Every implemented tensor method name (for suggestions).
pub fn method_names() -> impl Iterator<Item = &'static str> {
    nki_spec::ops().filter(|o| o.module == nki_spec::Module::Tensor && o.binding().is_some()).map(|o| o.name)
}
