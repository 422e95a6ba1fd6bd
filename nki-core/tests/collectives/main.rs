//! `ncc` collectives across emulated ranks: ring permutes, dense and variable-size
//! collectives.
//!
//! One test binary (one link) for the subject; each module below holds one
//! topic's tests and keeps its public kernels public, as a crate root would.

#[path = "../common/mod.rs"]
mod common;
pub mod dense;
pub mod ring;
pub mod variable;
