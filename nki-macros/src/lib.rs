//! The `#[nki_kernel]` and `#[nki_helper]` attribute macros of nki-rs.
//!
//! A kernel is an ordinary-looking Rust function built from `nl::`, `nisa::` and
//! `ncc::` calls, tensor views (`t[s![a..b, ..]]`, `.ap(...)`), integer
//! arithmetic, `for` loops over ranges, `if`/`else` and `assert!`. The macro
//! parses it into its own tree ([`ast`]), checks it ([`check`]: types, argument
//! names, memory spaces, shapes against the hardware limits), and emits two
//! artifacts from that one tree ([`emit`]):
//!
//! * the NKI 2.x Python source, as `name::NKI_SOURCE` (a `&'static str`);
//! * the CPU emulation, `fn name(ctx: &nki::Ctx, ...) -> nki::Result<_>`, plus a
//!   `name::Call` launcher that knows the Python defaults.
//!
//! All errors are collected and reported at the user's tokens; on error a
//! stand-in with the same signature is emitted so the rest of the crate still
//! type-checks.
//!
//! The macro never panics and does bounded work ([`bounds`]): brackets, blocks
//! and expressions nest at most 64 levels deep (every operator of an
//! `a + b + c` chain is a level), lists and tuples hold at most 4096 elements,
//! and trace-time integer arithmetic is checked, an overflow being an error at
//! the operation. A seeded fuzz test of the whole expansion keeps it so.

mod ast;
mod bounds;
mod check;
#[cfg(test)]
mod coverage;
mod diag;
mod emit;
mod expand;
#[cfg(test)]
mod fuzz;
#[cfg(test)]
mod json;
mod module;
mod parse;
mod spec_options;
#[cfg(test)]
mod tests;
mod vocab;

use proc_macro::TokenStream;

/// Turns a Rust function into an NKI kernel and its CPU emulation.
///
/// `#[nki_kernel(target = "trn3")]` checks against another generation's limits
/// (default `trn2`). Parameters take Python defaults with `#[default(value)]`.
#[proc_macro_attribute]
pub fn nki_kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand::expand(ast::FnKind::Kernel, attr.into(), item.into()).into()
}

/// A helper function that kernels call: emitted as a plain Python function.
#[proc_macro_attribute]
pub fn nki_helper(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand::expand(ast::FnKind::Helper, attr.into(), item.into()).into()
}

/// A module of kernels with module-level constants: each `const` of a kernel
/// type (`i64`, `f64`, `bool`, `Dtype`) holding a literal is emitted as a Python
/// module constant and usable by name in the module's kernels and helpers (and,
/// being a Rust `const`, in ordinary Rust). `use crate::a::b::{NAME, Cfg};`
/// imports the constants, bundles and enums of the `#[nki_module]` `crate::a::b`
/// for them; the emitted Python imports them from that module.
#[proc_macro_attribute]
pub fn nki_module(attr: TokenStream, item: TokenStream) -> TokenStream {
    module::expand(attr.into(), item.into()).into()
}

/// A step of `#[nki_module]`'s imports from other modules (each module's
/// `__nki_module_items!` answers through it); not for direct use.
#[doc(hidden)]
#[proc_macro]
pub fn __nki_import(input: TokenStream) -> TokenStream {
    module::import_step(input.into()).into()
}

/// A parameter bundle: a struct of an `#[nki_module]` whose named fields (kernel
/// types) its kernels and helpers build with a struct literal and read as
/// `cfg.field`; emitted as an `nl.NKIObject` dataclass. A literal of a bundle
/// whose every field has a `#[default(..)]` may end in `..Default::default()`,
/// the fields left out taking those defaults. `#[nki_module]` handles
/// the attribute, so outside one it is an error.
#[proc_macro_attribute]
pub fn nki_object(_attr: TokenStream, item: TokenStream) -> TokenStream {
    let item = proc_macro2::TokenStream::from(item);
    let err =
        syn::Error::new(syn::spanned::Spanned::span(&item), "#[nki_object] marks a struct inside an #[nki_module]").to_compile_error();
    quote::quote!(#err #item).into()
}

/// Marks a struct of an `#[nki_module]` as a parameter group: its fields,
/// with their `#[dtypes]` and `#[default]`s, are parameters that
/// `#[spread] _: Group` declares in its place (a run of a long drop-in
/// signature). Not a bundle: no Python class and no value, so a group is
/// spread as `_`. `#[nki_module]` handles the attribute, so outside one it is
/// an error.
#[proc_macro_attribute]
pub fn nki_params(_attr: TokenStream, item: TokenStream) -> TokenStream {
    let item = proc_macro2::TokenStream::from(item);
    let err =
        syn::Error::new(syn::spanned::Spanned::span(&item), "#[nki_params] marks a struct inside an #[nki_module]").to_compile_error();
    quote::quote!(#err #item).into()
}

/// Marks an enum of an `#[nki_module]` as a Python `Enum` class: its variants
/// are the class's members by the same names, valued by their discriminants
/// (`SOFTMAX = 1`, or counted on from the member before as in Rust). A kernel
/// may take it as a parameter and compare it with a member. `#[nki_module]`
/// handles the attribute, so outside one it is an error.
#[proc_macro_attribute]
pub fn nki_enum(_attr: TokenStream, item: TokenStream) -> TokenStream {
    let item = proc_macro2::TokenStream::from(item);
    let err = syn::Error::new(syn::spanned::Spanned::span(&item), "#[nki_enum] marks an enum inside an #[nki_module]").to_compile_error();
    quote::quote!(#err #item).into()
}

/// Checks an emulator options struct against the spec rows that name it: its
/// fields must be exactly the rows' supported optional parameters.
#[doc(hidden)]
#[proc_macro_attribute]
pub fn spec_options(attr: TokenStream, item: TokenStream) -> TokenStream {
    spec_options::check(attr.into(), item.into()).into()
}
