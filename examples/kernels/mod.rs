//! Example kernels written with the DSL; each kernel of [`KERNELS`] is verified
//! against a float64 reference, against its emitted NKI run under NumPy, and
//! against a checked-in snapshot of that source. [`matmul_steps`] holds the
//! kernel-optimization tutorial's steps for the profiler (checked against float64
//! and the tutorial's bottlenecks in `tests/profile_matmul.rs`).

pub mod matmul;
pub mod matmul_steps;
pub mod softmax;
pub mod tensor_add;
pub mod tiles;
pub mod transpose;

use crate::emit::FunctionInfo;

/// The example kernels.
pub static KERNELS: &[&FunctionInfo] =
    &[&matmul::matmul::INFO, &softmax::softmax::INFO, &tensor_add::tensor_add::INFO, &transpose::transpose::INFO];
