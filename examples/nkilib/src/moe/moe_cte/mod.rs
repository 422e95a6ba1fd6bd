//! The context-encoding (prefill) MoE kernels: the library's `moe_cte`
//! folder, the entry that dispatches on the implementation, the blockwise
//! matmul sharded on blocks, the one sharded on the intermediate dim and their shared pieces.

pub mod bwmm_shard_on_block;
pub mod bwmm_shard_on_block_mx;
pub mod bwmm_shard_on_i;
pub mod bwmm_shard_on_i_dropping;
pub mod bwmm_shard_on_i_mx;
pub mod moe_cte;
pub mod moe_cte_mx_utils;
pub mod moe_cte_utils;
