//! Numeric kernels behind the emulated ISA: vectorised `exp` and the matmul microkernel.

pub mod exp;
pub(crate) mod gemm;
