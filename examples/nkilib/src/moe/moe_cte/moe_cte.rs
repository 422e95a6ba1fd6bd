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
//! are ported, `shard_on_i_dropping`
//! ([`blockwise_mm_shard_intermediate_dropping`](crate::moe::moe_cte::bwmm_shard_on_i_dropping),
//! which returns its activations too) and `shard_on_block_mx` (trn3: the
//! kernel [`bwmm_shard_on_block_mx`](crate::moe::moe_cte::bwmm_shard_on_block_mx),
//! called with the scales of `quantization_config`). As in the library,
//! `shard_on_i_mx` and `shard_on_i_mx_hybrid` are not dispatched (its
//! `moe_cte` returns nothing for them); here they are refused by name.
//!
//! Each family reads its options from the spec's nested configuration, the
//! defaults when it holds none (the library fills them in
//! `MoECTESpec.__post_init__`): `shard_on_block` its
//! `block_sharding_strategy`, `shard_on_block_mx` `n_static_blocks` and
//! `n_dynamic_blocks` ([`ShardOnBlockConfig`]); `shard_on_i`
//! `checkpoint_activation` and `expert_affinity_multiply_on_I`,
//! `shard_on_i_hybrid` `num_static_block`, `shard_on_i_dropping`
//! `expert_affinity_multiply_on_I` ([`ShardOnIConfig`]). The weights take
//! the MX form's dtypes too; the other forms take float weights only.

// The library's parameter name `gate_up_activations_T`.
#![allow(non_snake_case)]

pub use crate::moe::moe_cte::bwmm_shard_on_block::{BwmmShardOnBlockCall, MoeCteRule, bwmm_shard_on_block_violation};
pub use crate::moe::moe_cte::bwmm_shard_on_i::{BwmmShardOnICall, ShardOnIRule, bwmm_shard_on_i_violation};
pub use crate::moe::moe_cte::bwmm_shard_on_i_dropping::{DroppingRule, bwmm_shard_on_i_dropping_violation};
pub use kernel::*;

impl MoECTESpec {
    /// The library's `MoECTESpec(implementation=...)`: each family's
    /// options left to their defaults.
    pub fn new(implementation: MoECTEImplementation) -> Self {
        MoECTESpec { implementation, shard_on_block: None, shard_on_I: None }
    }
}

/// The entry and its configuration classes.
#[nki::nki_module]
pub mod kernel {
    use crate::moe::moe_cte::bwmm_shard_on_block::{_bwmm_shard_on_block, configs, validate_bwmm_shard_on_block};
    use crate::moe::moe_cte::bwmm_shard_on_block_mx::bwmm_shard_on_block_mx;
    use crate::moe::moe_cte::bwmm_shard_on_i::{
        _bwmm_shard_on_i, ShardOnIFlags, shard_on_i_hybrid_checked, shard_on_i_scaling_mode, validate_bwmm_shard_on_i,
    };
    use crate::moe::moe_cte::bwmm_shard_on_i_dropping::{dropping_scaling_mode, shard_on_i_dropping_checked};
    pub use crate::moe::moe_cte::moe_cte_utils::{BlockShardStrategy, SkipMode};
    use crate::moe::moe_cte::moe_cte_utils::{BwmmActivations, BwmmOptions, InputTensors, checkpointed};
    pub use crate::utils::common_types::{ActFnType, ExpertAffinityScaleMode};
    use crate::utils::kernel_helpers::ClampLimits;
    use nki::prelude::*;

    /// Which blockwise implementation runs.
    #[nki_enum]
    pub enum MoECTEImplementation {
        /// Blocks split between the programs (ported).
        shard_on_block,
        /// The intermediate dim split between the programs (ported).
        shard_on_i,
        /// `shard_on_i` with a static then a dynamic block loop (ported).
        shard_on_i_hybrid,
        /// `shard_on_i` for a token-dropping layer (ported).
        shard_on_i_dropping,
        /// `shard_on_block` with MX weights (trn3).
        shard_on_block_mx,
        /// `shard_on_i` with MX weights (trn3).
        shard_on_i_mx,
        /// `shard_on_i_hybrid` with MX weights (trn3).
        shard_on_i_mx_hybrid,
    }

    /// Options of the block-sharded implementations.
    #[nki_object]
    pub struct ShardOnBlockConfig {
        /// Blocks per loop iteration (the library's `shard_on_block` takes
        /// it and reads it nowhere).
        #[default(1)]
        pub n_block_per_iter: i64,
        /// How `shard_on_block` splits the blocks between the programs.
        #[default(BlockShardStrategy::PING_PONG)]
        pub block_sharding_strategy: BlockShardStrategy,
        /// Blocks of `shard_on_block_mx`'s static loop (`-1`: derived).
        #[default(-1)]
        pub n_static_blocks: i64,
        /// Most blocks of `shard_on_block_mx`'s dynamic loop.
        #[default(55)]
        pub n_dynamic_blocks: i64,
    }

    /// Options of the intermediate-sharded implementations.
    #[nki_object]
    pub struct ShardOnIConfig {
        /// `shard_on_i`: save the gate/up activations for a backward pass.
        #[default(false)]
        pub checkpoint_activation: bool,
        /// `shard_on_i`, `shard_on_i_dropping`: scale by the affinity on the
        /// intermediate rows (after the activation) rather than the output.
        #[default(false)]
        pub expert_affinity_multiply_on_I: bool,
        /// `shard_on_i_hybrid`: blocks of the static loop (`None`: `N - E`).
        #[default(None)]
        pub num_static_block: Option<i64>,
    }

    /// The weights' dequantization scales.
    #[nki_object]
    pub struct QuantizationConfig {
        /// Scales of `gate_up_proj_weight` (`shard_on_block_mx`: its `uint8`
        /// MX block scales).
        #[dtypes(uint8, float32)]
        #[default(None)]
        pub gate_up_proj_scale: Option<Hbm>,
        /// Scales of `down_proj_weight`.
        #[dtypes(uint8, float32)]
        #[default(None)]
        pub down_proj_scale: Option<Hbm>,
    }

    /// The implementation and each family's options (`None`: the family's
    /// defaults).
    #[nki_object]
    pub struct MoECTESpec {
        /// Which implementation runs.
        pub implementation: MoECTEImplementation,
        /// Options of `shard_on_block` and `shard_on_block_mx`.
        #[default(None)]
        pub shard_on_block: Option<ShardOnBlockConfig>,
        /// Options of `shard_on_i`, `shard_on_i_hybrid` and `shard_on_i_dropping`.
        #[default(None)]
        pub shard_on_I: Option<ShardOnIConfig>,
    }

    /// The tensors `moe_cte` opens with: the blockwise kernels' tensors,
    /// the weights in the float or the MX dtypes (a `#[spread]` group).
    #[nki_params]
    pub struct MoeCteTensors {
        /// Token rows `[T + 1, H]`.
        #[dtypes(float32, bfloat16, float16)]
        pub hidden_states: Hbm,
        /// Affinities `[(T + 1)·E, 1]`.
        #[dtypes(float32, bfloat16, float16)]
        pub expert_affinities_masked: Hbm,
        /// Fused gate/up weights, float or packed MX.
        #[dtypes(float32, bfloat16, float16, float4_e2m1fn_x4, float8_e4m3fn_x4, float8_e5m2_x4, uint16, int16, uint32, int32)]
        pub gate_up_proj_weight: Hbm,
        /// Down weights, float or packed MX.
        #[dtypes(float32, bfloat16, float16, float4_e2m1fn_x4, float8_e4m3fn_x4, float8_e5m2_x4, uint16, int16, uint32, int32)]
        pub down_proj_weight: Hbm,
        /// Token of each block position `[N·B]`.
        #[dtypes(int32)]
        pub token_position_to_id: Hbm,
        /// Expert of each block `[N, 1]`.
        #[dtypes(int32)]
        pub block_to_expert: Hbm,
    }

    /// The context-encoding MoE of the blocks in `token_position_to_id`
    /// through the experts of `block_to_expert`, by `spec.implementation`
    /// (module docs); `shard_on_block` returns `[T, 2, H]` (slot 0 the
    /// result) when accumulating, else `[T, H]`; `shard_on_i` and
    /// `shard_on_i_hybrid` (which needs `conditions`) `[T, H]`;
    /// `shard_on_i_dropping` `(output, gate_up_activations_T,
    /// down_activations)`; `shard_on_block_mx` `[2, T, H]`.
    #[nki_kernel]
    pub fn moe_cte(
        #[spread] _: MoeCteTensors,
        block_size: i64,
        spec: MoECTESpec,
        #[dtypes(int32)] conditions: Option<Hbm>,
        #[dtypes(float32, bfloat16, float16)] gate_and_up_proj_bias: Option<Hbm>,
        #[dtypes(float32, bfloat16, float16)] down_proj_bias: Option<Hbm>,
        quantization_config: Option<QuantizationConfig>,
        #[spread] act: BwmmActivations,
        #[spread] opts: BwmmOptions,
        #[default(true)] is_tensor_update_accumulating: bool,
        #[default(ExpertAffinityScaleMode::POST_SCALE)] expert_affinities_scaling_mode: ExpertAffinityScaleMode,
        #[spread] clamps: ClampLimits,
    ) -> Outputs {
        let implementation = spec.implementation;
        let block = implementation == MoECTEImplementation::shard_on_block;
        let hybrid = implementation == MoECTEImplementation::shard_on_i_hybrid;
        let dropping = implementation == MoECTEImplementation::shard_on_i_dropping;
        let mx = implementation == MoECTEImplementation::shard_on_block_mx;
        assert!(
            block || mx || implementation == MoECTEImplementation::shard_on_i || hybrid || dropping,
            "moe_cte: spec.implementation must be MoECTEImplementation.shard_on_block, shard_on_i, shard_on_i_hybrid, shard_on_i_dropping or shard_on_block_mx (the library's moe_cte dispatches no other), got {implementation}"
        );
        let mut gate_up_proj_scale: Option<Hbm> = None;
        let mut down_proj_scale: Option<Hbm> = None;
        if let Some(q) = quantization_config {
            gate_up_proj_scale = q.gate_up_proj_scale;
            down_proj_scale = q.down_proj_scale;
        }
        // The library's `spec.shard_on_block or ShardOnBlockConfig()`.
        let mut block_cfg = ShardOnBlockConfig { ..Default::default() };
        let given_block_cfg = spec.shard_on_block;
        if let Some(c) = given_block_cfg {
            block_cfg = c;
        }
        if mx {
            let out = bwmm_shard_on_block_mx(
                hidden_states,
                expert_affinities_masked,
                gate_up_proj_weight,
                down_proj_weight,
                token_position_to_id,
                block_to_expert,
                conditions = conditions,
                gate_and_up_proj_bias = gate_and_up_proj_bias,
                down_proj_bias = down_proj_bias,
                gate_up_proj_scale = gate_up_proj_scale,
                down_proj_scale = down_proj_scale,
                block_size = block_size,
                n_static_blocks = block_cfg.n_static_blocks,
                n_dynamic_blocks = block_cfg.n_dynamic_blocks,
                gate_up_activations_T = gate_up_activations_T,
                down_activations = down_activations,
                activation_function = activation_function,
                skip_dma = skip_dma,
                compute_dtype = compute_dtype,
                is_tensor_update_accumulating = is_tensor_update_accumulating,
                expert_affinities_scaling_mode = expert_affinities_scaling_mode,
                gate_clamp_upper_limit = gate_clamp_upper_limit,
                gate_clamp_lower_limit = gate_clamp_lower_limit,
                up_clamp_lower_limit = up_clamp_lower_limit,
                up_clamp_upper_limit = up_clamp_upper_limit,
            );
            return Outputs(out);
        }
        let (gw, dw) = (gate_up_proj_weight.dtype(), down_proj_weight.dtype());
        let gate_up_float = gw == nl::float32 || gw == nl::bfloat16 || gw == nl::float16;
        let down_float = dw == nl::float32 || dw == nl::bfloat16 || dw == nl::float16;
        assert!(
            gate_up_float && down_float,
            "moe_cte: {implementation} takes float32, bfloat16 or float16 weights (the MX dtypes are shard_on_block_mx's)"
        );
        assert!(!hybrid || conditions.is_some(), "moe_cte: shard_on_i_hybrid needs conditions, the [N + 1] padded-block flags");
        // One bundle of the call for every other implementation; each runs its
        // kernel's own checks on it, as when called by itself.
        let inps = InputTensors {
            token_position_to_id,
            block_to_expert,
            hidden_states,
            gate_up_proj_weight,
            gate_and_up_proj_bias,
            down_proj_bias,
            down_proj_weight,
            expert_affinities_masked,
        };
        let m = expert_affinities_scaling_mode;
        let mode = if block {
            m
        } else if dropping {
            dropping_scaling_mode(m)
        } else {
            shard_on_i_scaling_mode(m)
        };
        let cfg = configs(inps, opts, is_tensor_update_accumulating, mode, clamps);
        let quantized = gate_up_proj_scale.is_some() || down_proj_scale.is_some();
        if block {
            let strategy = block_cfg.block_sharding_strategy;
            validate_bwmm_shard_on_block(inps, cfg, block_size, strategy, quantized, down_activations.is_some());
            return Outputs(_bwmm_shard_on_block(inps, cfg, block_size));
        }
        // The library's `spec.shard_on_I or ShardOnIConfig()`.
        let mut i_cfg = ShardOnIConfig { ..Default::default() };
        let given_i_cfg = spec.shard_on_I;
        if let Some(c) = given_i_cfg {
            i_cfg = c;
        }
        // The conditions only the hybrid form reads (given, as asserted above).
        let hybrid_conditions = if hybrid { conditions } else { None };
        let multiply_on_i = i_cfg.expert_affinity_multiply_on_I;
        if let Some(cond) = hybrid_conditions {
            let n_static = i_cfg.num_static_block;
            return Outputs(shard_on_i_hybrid_checked(inps, cfg, block_size, cond, n_static, quantized, checkpointed(act)));
        } else if dropping {
            // The library's dropping form takes no `checkpoint_activation`.
            let flags = ShardOnIFlags { quantized, checkpoint_activation: false, multiply_on_i };
            return shard_on_i_dropping_checked(inps, cfg, block_size, flags);
        }
        let flags = ShardOnIFlags { quantized, checkpoint_activation: i_cfg.checkpoint_activation, multiply_on_i };
        validate_bwmm_shard_on_i(inps, cfg, block_size, flags, "blockwise_mm_baseline_shard_intermediate");
        Outputs(_bwmm_shard_on_i(inps, cfg, block_size, multiply_on_i))
    }
}
