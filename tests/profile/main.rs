//! The profiler on whole kernels: matmul throughput against the modelled peak,
//! mamba, and per-op costs.
//!
//! One test binary (one link) for the subject; each module below holds one
//! topic's tests and keeps its public kernels public, as a crate root would.

#[path = "../common/mod.rs"]
mod common;
pub mod costs;
pub mod mamba;
pub mod matmul;
pub mod ops;
pub mod published;
