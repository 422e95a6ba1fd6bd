//! The attention kernels `attention_cte`, `attention_bwd` and `attention_tkg`: float64 references,
//! the emitted NKI under NumPy, and bit-identical results with helper threads.
//!
//! One test binary (one link) for the subject; each module below holds one
//! topic's tests and keeps its public kernels public, as a crate root would.

/// The allocator `nki::main!()` binaries run on (see `tests/nkilib/main.rs`).
#[global_allocator]
static ALLOCATOR: nki::cli::Allocator = nki::cli::Allocator;

pub mod bwd;
pub mod bwd_numpy;
#[path = "../common/mod.rs"]
mod common;
pub mod cte;
pub mod cte_numpy;
pub mod gen_mask;
pub mod threads;
pub mod tkg;
pub mod tkg_numpy;
