//! Compile-time checks: each case must fail to compile with exactly the
//! diagnostics in its `.stderr`.
//!
//! - `tests/ui/macro/`: errors of the `#[nki_kernel]` DSL itself (syntax, types,
//!   shapes, per-op static rules), reported by the macro.
//! - `tests/ui/config/`: kernel-configuration rules (`cte_config!`,
//!   `ring_fwd_config!`, ...) refused by `const fn` evaluation; their `.stderr`
//!   carry rustc's const-evaluation notes.
//!
//! Both kinds are reported by `cargo check`, so trybuild runs in check mode and
//! one trybuild project builds every case.

#[test]
fn compile_errors() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/macro/*.rs");
    t.compile_fail("tests/ui/config/*.rs");
}
