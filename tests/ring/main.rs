//! Ring attention, forward and backward: float64 references, features (masks, bias,
//! sinks, segment ids), the public API, and the emitted NKI under NumPy.
//!
//! One test binary (one link) for the subject; each module below holds one
//! topic's tests and keeps its public kernels public, as a crate root would.

/// The allocator `nki::main!()` binaries run on (see `tests/nkilib/main.rs`).
#[global_allocator]
static ALLOCATOR: nki::cli::Allocator = nki::cli::Allocator;

pub mod bwd;
pub mod bwd_features;
pub mod bwd_numpy;
#[path = "../common/mod.rs"]
mod common;
pub mod fwd;
pub mod fwd_api;
pub mod fwd_features;
pub mod fwd_numpy;
