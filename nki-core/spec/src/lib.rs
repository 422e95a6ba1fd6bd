//! nki-spec: the NKI 2.32 vocabulary of nki-rs, as data.
//!
//! One row per official function or `NkiTensor` method ([`Op`]): its module path,
//! parameters in the official order with the kind of value each takes, the
//! engines and NeuronCore generations that have it, a one-line summary, the id
//! of its static rule and whether nki-rs implements it. Beside the ops: the
//! enums with their documented values, the dtypes, the operator tokens, the
//! `nl.tile_size` constants and the per-generation hardware limits ([`hw`]).
//!
//! The `#[nki_kernel]` macro derives its vocabulary from these tables, the
//! emulator checks its option structs and enums against them, and `nki ops`
//! prints them. The crate has no dependencies and holds no behaviour: rules are
//! ids resolved by the macro's checker, semantics live in `nki-core`.

pub mod constants;
pub mod contract;
pub mod hw;
mod kinds;
pub mod mx;
mod op;
pub mod registers;
mod suggest;
mod tables;

pub use kinds::{Kind, Memory, OpClass, Param, Returns, Spaces};
pub use op::{Binding, Engine, Family, Module, Op, Rule, SameDtype, Status};
pub use suggest::did_you_mean;

/// Every op row: `nki.isa`, `nki.language`, `nki.collectives`, then the `NkiTensor` methods.
pub fn ops() -> impl Iterator<Item = &'static Op> {
    tables::isa::OPS.iter().chain(tables::language::OPS).chain(tables::collectives::OPS).chain(tables::tensor::OPS)
}

/// The op a kernel calls as `module::name` (`nisa`, `nl`, `ncc`), if the spec has it.
pub fn lookup(module: &str, name: &str) -> Option<&'static Op> {
    ops().find(|o| o.module != Module::Tensor && o.module.dsl() == module && o.name == name)
}

/// The `NkiTensor` method or property `name`.
pub fn lookup_method(name: &str) -> Option<&'static Op> {
    tables::tensor::OPS.iter().find(|o| o.name == name)
}
