//! The `nki` command: its subcommands, their outputs against float64 references,
//! refusals, and a user crate built against the library.
//!
//! One test binary (one link) for the subject; each module below holds one
//! topic's tests and keeps its public kernels public, as a crate root would.

pub mod commands;
#[path = "../common/mod.rs"]
mod common;
pub mod ops;
pub mod profile;
pub mod run;
pub mod tkg;
pub mod tune;
pub mod user_crate;

/// First in name order, which is the order libtest starts tests in: the fresh
/// crate's build (about a minute of cargo, its crates compiling mostly one
/// after another) starts at once beside the other tests, rather than alone
/// after them when the `user_crate` tests come up.
#[test]
fn a_fresh_crate_builds_before_the_other_tests() {
    assert!(user_crate::fresh_crate_binary().is_file());
}
