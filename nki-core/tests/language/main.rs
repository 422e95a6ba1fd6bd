//! `nl`: memory and the SPMD grid, compute ops, random numbers and tiles.
//!
//! One test binary (one link) for the subject; each module below holds one
//! topic's tests and keeps its public kernels public, as a crate root would.

#[path = "../common/mod.rs"]
mod common;
pub mod compute;
pub mod memory_and_grid;
pub mod random;
pub mod tiles;
