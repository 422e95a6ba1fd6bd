//! The `nkilib` kernels against float64 references written from the library's
//! documented semantics, their emitted NKI under NumPy, and their rules.
//!
//! One test binary (one link) for the crate; each module holds the tests of
//! one folder of the library (`cumsum`, `embeddings`, ...), as `nkilib` does.

/// The allocator `nki::main!()` binaries run on: the emulator's launches
/// allocate and free large tiles from one thread per program and rank, and
/// under glibc the unmapping of those buffers interrupts every other thread
/// (a fifth of the collectives tests' time).
#[global_allocator]
static ALLOCATOR: nki::cli::Allocator = nki::cli::Allocator;

pub mod attention_block_tkg;
pub mod blockwise_mm_backward;
pub mod collectives;
#[path = "../common/mod.rs"]
mod common;
pub mod conv1d;
pub mod cross_entropy;
pub mod cumsum;
pub mod depthwise_conv1d;
pub mod embeddings;
pub mod find_nonzero_indices;
pub mod function_size;
pub mod indexed_flatten;
pub mod max;
pub mod mlp;
pub mod mlp_cte_static_mx;
pub mod mlp_tkg_mx;
pub mod moe_block;
pub mod moe_block_mx;
pub mod moe_cte;
pub mod moe_cte_i_mx;
pub mod moe_cte_mx;
pub mod moe_tkg;
pub mod moe_tkg_mx;
pub mod mx_format;
pub mod output_projection;
pub mod output_projection_cte_mx;
pub mod qkv;
pub mod qkv_cte;
pub mod qkv_cte_mx;
pub mod qkv_tkg_mx;
pub mod rmsnorm;
pub mod rmsnorm_mx_quantize;
pub mod router_topk;
pub mod subkernels;
mod support;
pub mod topk;
