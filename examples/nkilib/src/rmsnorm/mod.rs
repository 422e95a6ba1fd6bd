//! Normalisation fused with quantization: the library's `rmsnorm` folder.

pub mod rmsnorm_quant;
