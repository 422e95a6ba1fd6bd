//! The context-encoding MoE entry: the library's `moe_cte`, which takes the
//! implementation and its options in a [`MoECTESpec`] and dispatches.
//!
//! The tokens arrive sorted into blocks of `block_size` positions, each
//! block owned by one expert (`token_position_to_id`, `block_to_expert`);
//! each expert is the gated MLP `act(clamp(x W_gate + b_gate)) ·
//! clamp(x W_up + b_up)` through `W_down` plus `b_down`, weighted by the
//! token's affinity for it, and a token's experts are summed.
//!
//! Of the implementations, `shard_on_block`
//! ([`bwmm_shard_on_block`](crate::moe::moe_cte::bwmm_shard_on_block)),
//! `shard_on_i`
//! ([`blockwise_mm_baseline_shard_intermediate`](crate::moe::moe_cte::bwmm_shard_on_i))
//! and `shard_on_i_hybrid` (its `_hybrid` form, which reads `conditions`)
//! are ported, and `shard_on_i_dropping`
//! ([`blockwise_mm_shard_intermediate_dropping`](crate::moe::moe_cte::bwmm_shard_on_i_dropping),
//! which returns its activations too); the MX forms are refused by name
//! here (`shard_on_block_mx` runs as the kernel
//! [`bwmm_shard_on_block_mx`](crate::moe::moe_cte::bwmm_shard_on_block_mx),
//! whose scales this entry's `quantization_config` cannot carry).

// The library's parameter name `gate_up_activations_T`.
#![allow(non_snake_case)]

pub use crate::moe::moe_cte::bwmm_shard_on_block::{BwmmShardOnBlockCall, MoeCteRule, bwmm_shard_on_block_violation};
pub use crate::moe::moe_cte::bwmm_shard_on_i::{BwmmShardOnICall, ShardOnIRule, bwmm_shard_on_i_violation};
pub use crate::moe::moe_cte::bwmm_shard_on_i_dropping::{DroppingRule, bwmm_shard_on_i_dropping_violation};
pub use kernel::*;

/// The entry and its configuration classes.
#[nki::nki_module]
pub mod kernel {
    use crate::moe::moe_cte::bwmm_shard_on_block::{_bwmm_shard_on_block, configs, input_tensors, validate_bwmm_shard_on_block};
    use crate::moe::moe_cte::bwmm_shard_on_i::{
        _bwmm_shard_on_i, ShardOnIFlags, shard_on_i_hybrid_checked, shard_on_i_scaling_mode, validate_bwmm_shard_on_i,
    };
    use crate::moe::moe_cte::bwmm_shard_on_i_dropping::{dropping_scaling_mode, shard_on_i_dropping_checked};
    pub use crate::moe::moe_cte::moe_cte_utils::{BlockShardStrategy, SkipMode};
    pub use crate::utils::common_types::{ActFnType, ExpertAffinityScaleMode};
    use crate::utils::kernel_helpers::ClampLimits;
    use nki::prelude::*;

    /// Which blockwise implementation runs.
    #[nki_enum]
    pub enum MoECTEImplementation {
        /// Blocks split between the programs (ported).
        shard_on_block = 0,
        /// The intermediate dim split between the programs (ported).
        shard_on_i = 1,
        /// `shard_on_i` with a static then a dynamic block loop (ported).
        shard_on_i_hybrid = 2,
        /// `shard_on_i` for a token-dropping layer (ported).
        shard_on_i_dropping = 3,
        /// `shard_on_block` with MX weights (trn3).
        shard_on_block_mx = 4,
        /// `shard_on_i` with MX weights (trn3).
        shard_on_i_mx = 5,
        /// `shard_on_i_hybrid` with MX weights (trn3).
        shard_on_i_mx_hybrid = 6,
    }

    /// Options of the block-sharded implementations.
    #[nki_object]
    pub struct ShardOnBlockConfig {
        /// Blocks per loop iteration (read by the other paths only).
        #[default(1)]
        pub n_block_per_iter: i64,
        /// How the blocks are split between the programs.
        #[default(BlockShardStrategy::PING_PONG)]
        pub block_sharding_strategy: BlockShardStrategy,
        /// Blocks of the MX form's static loop (`-1`: derived).
        #[default(-1)]
        pub n_static_blocks: i64,
        /// Most blocks of the MX form's dynamic loop.
        #[default(55)]
        pub n_dynamic_blocks: i64,
    }

    /// The implementation (the library's spec also nests each family's
    /// options, a bundle this entry cannot take; `shard_on_block` runs
    /// with [`ShardOnBlockConfig`]'s defaults, which the library's
    /// `shard_on_block` path reads as well, and `shard_on_i` with the
    /// library's `ShardOnIConfig` defaults: no activation checkpointing,
    /// the affinity on the output, and for `shard_on_i_hybrid` the static
    /// block count `N - E`; `shard_on_i_dropping` likewise scales the
    /// output).
    #[nki_object]
    pub struct MoECTESpec {
        /// Which implementation runs.
        pub implementation: MoECTEImplementation,
    }

    /// The context-encoding MoE of the blocks in `token_position_to_id`
    /// through the experts of `block_to_expert`, by `spec.implementation`
    /// (module docs); `shard_on_block` returns `[T, 2, H]` (slot 0 the
    /// result) when accumulating, else `[T, H]`; `shard_on_i` and
    /// `shard_on_i_hybrid` (which needs `conditions`) `[T, H]`;
    /// `shard_on_i_dropping` `(output, gate_up_activations_T,
    /// down_activations)`.
    #[nki_kernel]
    pub fn moe_cte(
        #[dtypes(float32, bfloat16, float16)] hidden_states: Hbm,
        #[dtypes(float32, bfloat16, float16)] expert_affinities_masked: Hbm,
        #[dtypes(float32, bfloat16, float16)] gate_up_proj_weight: Hbm,
        #[dtypes(float32, bfloat16, float16)] down_proj_weight: Hbm,
        #[dtypes(int32)] token_position_to_id: Hbm,
        #[dtypes(int32)] block_to_expert: Hbm,
        block_size: i64,
        spec: MoECTESpec,
        #[dtypes(int32)] conditions: Option<Hbm>,
        #[dtypes(float32, bfloat16, float16)] gate_and_up_proj_bias: Option<Hbm>,
        #[dtypes(float32, bfloat16, float16)] down_proj_bias: Option<Hbm>,
        quantization_config: Option<Hbm>,
        gate_up_activations_T: Option<Hbm>,
        down_activations: Option<Hbm>,
        #[default(ActFnType::SiLU)] activation_function: ActFnType,
        skip_dma: Option<SkipMode>,
        #[default(nl::bfloat16)] compute_dtype: Dtype,
        #[default(true)] is_tensor_update_accumulating: bool,
        #[default(ExpertAffinityScaleMode::POST_SCALE)] expert_affinities_scaling_mode: ExpertAffinityScaleMode,
        gate_clamp_upper_limit: Option<f64>,
        gate_clamp_lower_limit: Option<f64>,
        up_clamp_upper_limit: Option<f64>,
        up_clamp_lower_limit: Option<f64>,
    ) -> Outputs {
        let implementation = spec.implementation;
        let block = implementation == MoECTEImplementation::shard_on_block;
        let hybrid = implementation == MoECTEImplementation::shard_on_i_hybrid;
        let dropping = implementation == MoECTEImplementation::shard_on_i_dropping;
        assert!(
            block || implementation == MoECTEImplementation::shard_on_i || hybrid || dropping,
            "moe_cte: spec.implementation must be MoECTEImplementation.shard_on_block, shard_on_i, shard_on_i_hybrid or shard_on_i_dropping (the implementations ported), got {implementation}"
        );
        assert!(quantization_config.is_none(), "moe_cte: quantization_config is not implemented (the quantization scales)");
        assert!(!hybrid || conditions.is_some(), "moe_cte: shard_on_i_hybrid needs conditions, the [N + 1] padded-block flags");
        // One bundle of the call for every implementation; each runs its
        // kernel's own checks on it, as when called by itself.
        let (x, aff, pos, experts) = (hidden_states, expert_affinities_masked, token_position_to_id, block_to_expert);
        let inps = input_tensors(x, aff, gate_up_proj_weight, down_proj_weight, pos, experts, gate_and_up_proj_bias, down_proj_bias);
        let clamps = ClampLimits { gate_clamp_upper_limit, gate_clamp_lower_limit, up_clamp_upper_limit, up_clamp_lower_limit };
        let m = expert_affinities_scaling_mode;
        let mode = if block {
            m
        } else if dropping {
            dropping_scaling_mode(m)
        } else {
            shard_on_i_scaling_mode(m)
        };
        let cfg = configs(inps, skip_dma, compute_dtype, is_tensor_update_accumulating, mode, activation_function, clamps);
        // The conditions only the hybrid form reads (given, as asserted above).
        let hybrid_conditions = if hybrid { conditions } else { None };
        // The intermediate-sharded forms' options: the library's
        // `ShardOnIConfig` defaults (`MoECTESpec` holds none).
        let flags = ShardOnIFlags { quantized: false, checkpoint_activation: false, multiply_on_i: false };
        if block {
            let block_cfg = ShardOnBlockConfig {
                n_block_per_iter: 1,
                block_sharding_strategy: BlockShardStrategy::PING_PONG,
                n_static_blocks: -1,
                n_dynamic_blocks: 55,
            };
            let strategy = block_cfg.block_sharding_strategy;
            validate_bwmm_shard_on_block(inps, cfg, block_size, strategy, false, down_activations.is_some());
            return Outputs(_bwmm_shard_on_block(inps, cfg, block_size));
        } else if let Some(cond) = hybrid_conditions {
            let activations = gate_up_activations_T.is_some() || down_activations.is_some();
            return Outputs(shard_on_i_hybrid_checked(inps, cfg, block_size, cond, None, false, activations));
        } else if dropping {
            return shard_on_i_dropping_checked(inps, cfg, block_size, flags);
        }
        validate_bwmm_shard_on_i(inps, cfg, block_size, flags, "blockwise_mm_baseline_shard_intermediate");
        Outputs(_bwmm_shard_on_i(inps, cfg, block_size, false))
    }
}
