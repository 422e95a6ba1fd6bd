//! Numeric kernels behind the emulated ISA: vectorised `exp`, `erf` and the matmul microkernel.

pub(crate) mod erf;
pub mod exp;
pub(crate) mod gemm;
