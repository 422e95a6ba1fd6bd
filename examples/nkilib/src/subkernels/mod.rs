//! Building blocks that larger kernels call on SBUF-resident data and that also
//! run on their own from HBM: the library's `subkernels` folder.

pub mod find_nonzero_indices;
pub mod indexed_flatten;
pub mod layernorm_tkg;
pub mod norm_tkg_utils;
pub mod rmsnorm_mx_quantize_tkg;
pub mod rmsnorm_tkg;
