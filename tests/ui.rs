//! Compile-time checks of `#[nki_kernel]`: each case in `tests/ui/` must fail to
//! compile with exactly the diagnostics in its `.stderr`. All checks are macro
//! errors, so `cargo check` reports them and trybuild runs in check mode.

#[test]
fn compile_errors() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
