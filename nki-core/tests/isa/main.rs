//! `nisa` instructions, one module per op family, against float64 references in
//! both precision modes.
//!
//! One test binary (one link) for the subject; each module below holds one
//! topic's tests and keeps its public kernels public, as a crate root would.

pub mod activate2;
pub mod activation_tokens;
pub mod bounds;
#[path = "../common/mod.rs"]
mod common;
pub mod cumulative;
pub mod dma;
pub mod dma_compute;
pub mod dma_indirect;
pub mod elementwise;
pub mod exponential;
pub mod gather;
pub mod matmul;
pub mod mx;
pub mod nonzero;
pub mod partition_reduce;
pub mod predicated;
pub mod random;
pub mod reduce_activation;
pub mod registers;
pub mod scan;
pub mod select;
pub mod select_reduce;
pub mod sendrecv;
pub mod stats;
pub mod top8;
pub mod topk;
