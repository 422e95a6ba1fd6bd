//! The context-encoding (prefill) path of `mlp`: the library's `mlp_cte`
//! folder, one file per phase.

pub mod mlp_cte;
pub mod mlp_cte_constants;
pub mod mlp_cte_mx;
pub mod mlp_cte_norm;
pub mod mlp_cte_projection;
pub mod mlp_cte_quantization;
pub mod mlp_cte_sharding;
pub mod mlp_cte_tensor_io;
pub mod mlp_cte_transpose;
