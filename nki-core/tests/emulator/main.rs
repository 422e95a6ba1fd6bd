//! The emulator: multi-program launches, memory, precision modes, PSUM accumulation
//! and the profiler.
//!
//! One test binary (one link) for the subject; each module below holds one
//! topic's tests and keeps its public kernels public, as a crate root would.

#[path = "../common/mod.rs"]
mod common;
pub mod memory;
pub mod precision;
pub mod profile;
pub mod programs;
pub mod psum_accumulation;
pub mod races;
