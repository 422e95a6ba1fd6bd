//! Example kernels written with the DSL; each is verified against a float64
//! reference, against its emitted NKI run under NumPy, and against a checked-in
//! snapshot of that source. [`matmul_steps`] holds the kernel-optimization
//! tutorial's steps, whose profiles `tests/profile_matmul.rs` also checks against
//! the bottlenecks the tutorial measured.

pub mod axpy;
pub mod cumsum;
pub mod embedding;
pub mod layernorm;
pub mod matmul;
pub mod matmul_steps;
pub mod softmax;
pub mod tensor_add;
pub mod tiles;
pub mod topk;
pub mod transpose;

use crate::emit::FunctionInfo;

/// The example kernels.
pub static KERNELS: &[&FunctionInfo] = &[
    &axpy::axpy::INFO,
    &cumsum::cumsum::INFO,
    &embedding::embedding::INFO,
    &layernorm::layernorm::INFO,
    &matmul::matmul::INFO,
    &matmul_steps::matmul_blocked::INFO,
    &matmul_steps::matmul_hoisted::INFO,
    &softmax::softmax::INFO,
    &tensor_add::tensor_add::INFO,
    &topk::topk::INFO,
    &transpose::transpose::INFO,
];
