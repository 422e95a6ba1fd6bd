//! The example kernels against float64 references, their emitted NKI under NumPy,
//! and their profiles.
//!
//! One test binary (one link) for the subject; each module below holds one
//! topic's tests and keeps its public kernels public, as a crate root would.

pub mod axpy;
#[path = "../common/mod.rs"]
mod common;
pub mod dropout;
pub mod embedding;
pub mod gemm_bias_gelu;
pub mod layernorm;
pub mod masked_softmax;
pub mod rmsnorm;
pub mod temperature_softmax;
pub mod three_ways;
pub mod topk;
pub mod tp_matmul;
