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
