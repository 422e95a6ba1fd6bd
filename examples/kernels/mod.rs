//! Example kernels written with the DSL; each is verified against a float64
//! reference, against its emitted NKI run under NumPy, and against a checked-in
//! snapshot of that source. [`matmul_steps`] holds the kernel-optimization
//! tutorial's steps, whose profiles `tests/profile/matmul.rs` also checks against
//! the bottlenecks the tutorial measured; [`mamba`] holds the fused Mamba
//! tutorial's versions, checked against its latency table by `tests/profile/mamba.rs`.

extern crate nki_core as nki;

pub mod axpy;
pub mod dropout;
pub mod embedding;
pub mod gemm_bias_gelu;
pub mod layernorm;
pub mod logsumexp;
pub mod mamba;
pub mod masked_softmax;
pub mod matmul;
pub mod matmul_k_outer;
pub mod matmul_steps;
pub mod rmsnorm;
pub mod softmax;
pub mod temperature_softmax;
pub mod tensor_add;
pub mod tiles;
pub mod topk;
pub mod tp_matmul;
pub mod transpose;
