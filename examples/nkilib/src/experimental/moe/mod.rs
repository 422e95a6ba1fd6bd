//! The library's experimental mixture-of-experts kernels: the backward of
//! the blockwise expert matmul.

pub mod blockwise_mm_backward;
