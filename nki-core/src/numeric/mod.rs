//! Numeric kernels behind the emulated ISA: vectorised `exp`, `erf`, the matmul microkernel and the block transpose.

pub(crate) mod erf;
pub mod exp;
pub(crate) mod gemm;
pub(crate) mod transpose;
pub(crate) mod wide;

pub use gemm::matmul_kernel;
