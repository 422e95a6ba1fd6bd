//! The context-encoding MoE kernels' shared pieces: the library's
//! `moe_cte_utils`, its tile sizes, the DMA skip options and block-sharding
//! strategies, the call's tensors and options, and the phases every
//! blockwise path reads — the block's expert, its affinities gathered by
//! token and expert, and the gated intermediate of a block.
//!
//! The affinities are stored flat, `expert_affinities_masked[(T + 1)·E, 1]`,
//! so token `t`'s affinity for expert `e` sits at row `t·E + e`; one indirect
//! DMA per 128 tokens gathers them by a row vector built on the device
//! (`vector_offset`). With `skip_token` the padding positions hold `-1`, so
//! their rows are negative, clamped to `-1` and skipped (`oob_mode=skip`),
//! leaving the zero the tile was set to.

// The library's field name `gate_up_activations_T`.
#![allow(non_snake_case)]

pub use kernel::*;

use crate::utils::common_types::ActFnType;

/// The first rule of `rules` whose condition holds, in table order: the
/// blockwise kernels' `*_violation` fns list their rules in the order their
/// kernels assert them (every condition is evaluated, so each must be
/// defined on any call).
pub const fn first_broken<R: Copy>(rules: &[(bool, R)]) -> Option<R> {
    let mut k = 0;
    while k < rules.len() {
        if rules[k].0 {
            return Some(rules[k].1);
        }
        k += 1;
    }
    None
}

/// Whether `positions` token positions are a positive whole number of
/// blocks of `block_size` among a positive number of `experts`.
pub const fn whole_blocks(experts: i64, positions: i64, block_size: i64) -> bool {
    experts > 0 && positions > 0 && block_size > 0 && positions % block_size == 0
}

/// Whether `act` is a gate activation the blockwise kernels implement
/// (SiLU, or Swish, which the library runs the same way).
pub const fn silu_gate(act: ActFnType) -> bool {
    matches!(act, ActFnType::SiLU | ActFnType::Swish)
}

/// The config macros of the blockwise kernels sized by `hidden`,
/// `intermediate`, `experts`, `block_size` and `positions` (on two programs
/// unless given): `[call struct]`, `[violation fn]`, the kernel's other
/// defaults, then the caller's arguments.
#[doc(hidden)]
#[macro_export]
macro_rules! __blockwise_config {
    ([$($shape:tt)+], [$($violation:tt)+], { $($default:ident: $default_value:expr),* $(,)? },
     hidden = $h:expr, intermediate = $i:expr, experts = $e:expr, block_size = $b:expr, positions = $n:expr $(, $field:ident = $value:expr)* $(,)?) => {
        $crate::__collective_config!(
            [$($shape)+],
            [$($violation)+],
            { hidden: $h, intermediate: $i, experts: $e, block_size: $b, positions: $n, programs: 2, $($default: $default_value,)* },
            { $($field = $value),* }
        )
    };
}

/// A blockwise call as its rules read it: a struct of the sizes every
/// blockwise kernel checks (the ones `__blockwise_config!` takes, and the
/// programs of the launch), then the kernel's own fields.
#[doc(hidden)]
#[macro_export]
macro_rules! __blockwise_call {
    ($(#[$meta:meta])* pub struct $name:ident { $($(#[$field_meta:meta])* pub $field:ident: $ty:ty),* $(,)? }) => {
        $(#[$meta])*
        pub struct $name {
            /// `H`.
            pub hidden: i64,
            /// `I`.
            pub intermediate: i64,
            /// `E`.
            pub experts: i64,
            /// `B`.
            pub block_size: i64,
            /// Length of `token_position_to_id` (`N·B`).
            pub positions: i64,
            /// Programs of the launch.
            pub programs: i64,
            $($(#[$field_meta])* pub $field: $ty,)*
        }
    };
}

/// The tiles, options and shared phases.
#[nki::nki_module]
pub mod kernel {
    use crate::utils::common_types::{ActFnType, ExpertAffinityScaleMode};
    use crate::utils::kernel_helpers::ClampLimits;
    use nki::prelude::*;

    /// Tokens (partitions) per tile.
    pub const TILE_SIZE: i64 = nl::tile_size::pmax;
    /// Columns of one PSUM bank of float32, the widest matmul output.
    pub const PSUM_SIZE: i64 = nl::tile_size::psum_fmax;
    /// Partitions of one stream-shuffle quadrant.
    pub const DVE_CHANNELS_PER_BANK: i64 = 32;
    /// The gate and the up projection of the fused `[E, H, 2, I]` weights.
    pub const GUP_PROJ_DIM: i64 = 2;

    /// Which DMAs may skip out-of-range rows (the library's `SkipMode`).
    #[nki_object]
    pub struct SkipMode {
        /// Padding positions of `token_position_to_id` hold `-1` and their
        /// loads and stores are skipped (else they name the zero row `T`).
        #[default(false)]
        pub skip_token: bool,
        /// Weight loads may be skipped when a block's expert repeats.
        #[default(false)]
        pub skip_weight: bool,
    }

    /// How the blocks are split between the two programs.
    #[nki_enum]
    pub enum BlockShardStrategy {
        /// The first half of the blocks to program 0, the rest to program 1.
        HI_LO,
        /// Blocks alternate between the programs: 0, 1, 0, 1, ...
        PING_PONG,
    }

    /// The parameters the blockwise kernels open with, in the library's
    /// order: a `#[spread]` group, so each kernel declares them once.
    #[nki_object]
    pub struct BwmmTensors {
        /// Token rows `[T + 1, H]`.
        #[dtypes(float32, bfloat16, float16)]
        pub hidden_states: Hbm,
        /// Affinities `[(T + 1)·E, 1]`.
        #[dtypes(float32, bfloat16, float16)]
        pub expert_affinities_masked: Hbm,
        /// Fused gate/up weights `[E, H, 2, I]`.
        #[dtypes(float32, bfloat16, float16)]
        pub gate_up_proj_weight: Hbm,
        /// Down weights `[E, I, H]`.
        #[dtypes(float32, bfloat16, float16)]
        pub down_proj_weight: Hbm,
        /// Token positions per block.
        pub block_size: i64,
        /// Token of each block position `[N·B]`.
        #[dtypes(int32)]
        pub token_position_to_id: Hbm,
        /// Expert of each block `[N, 1]`.
        #[dtypes(int32)]
        pub block_to_expert: Hbm,
    }

    /// The optional biases and quantization scales of the blockwise
    /// kernels (a `#[spread]` group).
    #[nki_object]
    pub struct BwmmBiasScales {
        /// Gate/up bias `[E, 2, I]`.
        #[dtypes(float32, bfloat16, float16)]
        pub gate_and_up_proj_bias: Option<Hbm>,
        /// Down bias `[E, 1, H]`.
        #[dtypes(float32, bfloat16, float16)]
        pub down_proj_bias: Option<Hbm>,
        /// Gate/up dequantization scales (refused: not ported).
        pub gate_up_proj_scale: Option<Hbm>,
        /// Down dequantization scales (refused: not ported).
        pub down_proj_scale: Option<Hbm>,
    }

    /// The MX kernels' leading tensors: the blockwise ones with packed
    /// weights and without `block_size` (a `#[spread]` group).
    #[nki_object]
    pub struct BwmmMxTensors {
        /// Token rows `[T + 1, H]`.
        #[dtypes(bfloat16, float32, float16)]
        pub hidden_states: Hbm,
        /// Affinities `[(T + 1)·E, 1]`.
        #[dtypes(bfloat16, float32, float16)]
        pub expert_affinities_masked: Hbm,
        /// Gate/up weights, four values packed per element.
        #[dtypes(float4_e2m1fn_x4, float8_e4m3fn_x4, float8_e5m2_x4, uint16, int16, uint32, int32)]
        pub gate_up_proj_weight: Hbm,
        /// Down weights, four values packed per element.
        #[dtypes(float4_e2m1fn_x4, float8_e4m3fn_x4, float8_e5m2_x4, uint16, int16, uint32, int32)]
        pub down_proj_weight: Hbm,
        /// Token of each block position `[N·B]`.
        #[dtypes(int32)]
        pub token_position_to_id: Hbm,
        /// Expert of each block `[N, 1]`.
        #[dtypes(int32)]
        pub block_to_expert: Hbm,
    }

    /// The MX kernels' biases and their weights' uint8 scales (a
    /// `#[spread]` group).
    #[nki_object]
    pub struct BwmmMxBiasScales {
        /// Gate/up bias.
        #[dtypes(bfloat16, float32, float16)]
        pub gate_and_up_proj_bias: Option<Hbm>,
        /// Down bias.
        #[dtypes(bfloat16, float32, float16)]
        pub down_proj_bias: Option<Hbm>,
        /// Gate/up MX scales.
        #[dtypes(uint8)]
        pub gate_up_proj_scale: Option<Hbm>,
        /// Down MX scales.
        #[dtypes(uint8)]
        pub down_proj_scale: Option<Hbm>,
    }

    /// The compute options every blockwise kernel takes after its tensors
    /// (a `#[spread]` group; the MX kernels add `weight_dtype` in between).
    #[nki_object]
    pub struct BwmmOptions {
        /// The gate's activation.
        #[default(ActFnType::SiLU)]
        pub activation_function: ActFnType,
        /// Which DMAs skip out-of-range rows.
        #[default(None)]
        pub skip_dma: Option<SkipMode>,
        /// Dtype of the token tiles, weights and intermediate.
        #[default(nl::bfloat16)]
        pub compute_dtype: Dtype,
    }

    /// The activation-checkpoint outputs some blockwise kernels take (a
    /// `#[spread]` group).
    #[nki_object]
    pub struct BwmmActivations {
        /// The gate/up activations, transposed.
        pub gate_up_activations_T: Option<Hbm>,
        /// The down projection's activations.
        pub down_activations: Option<Hbm>,
    }

    /// Whether a call passes any activation-checkpoint output.
    #[nki_helper]
    pub fn checkpointed(a: BwmmActivations) -> bool {
        a.gate_up_activations_T.is_some() || a.down_activations.is_some()
    }

    /// The clamp limits in the order the shard-on-I kernels take them,
    /// the up projection's lower limit first (a `#[spread]` group;
    /// `ClampLimits` holds the other order).
    #[nki_object]
    pub struct ShardOnIClamps {
        /// Upper clamp of the gate projection.
        pub gate_clamp_upper_limit: Option<f64>,
        /// Lower clamp of the gate projection.
        pub gate_clamp_lower_limit: Option<f64>,
        /// Lower clamp of the up projection.
        pub up_clamp_lower_limit: Option<f64>,
        /// Upper clamp of the up projection.
        pub up_clamp_upper_limit: Option<f64>,
    }

    /// The [`ClampLimits`] of the shard-on-I kernels' clamp parameters.
    #[nki_helper]
    pub fn clamp_limits(c: ShardOnIClamps) -> ClampLimits {
        ClampLimits {
            gate_clamp_upper_limit: c.gate_clamp_upper_limit,
            gate_clamp_lower_limit: c.gate_clamp_lower_limit,
            up_clamp_upper_limit: c.up_clamp_upper_limit,
            up_clamp_lower_limit: c.up_clamp_lower_limit,
        }
    }

    /// The tensors of a blockwise call (the library's `InputTensors`).
    #[nki_object]
    pub struct InputTensors {
        /// Token of each block position `[N·B]` (padding: `T` or `-1`).
        pub token_position_to_id: Tensor,
        /// Expert of each block `[N, 1]`.
        pub block_to_expert: Tensor,
        /// Token rows `[T, H]` (row `T` zero when padding names it).
        pub hidden_states: Tensor,
        /// Fused gate/up weights `[E, H, 2, I]`.
        pub gate_up_proj_weight: Tensor,
        /// Gate/up bias `[E, 2, I]`.
        pub gate_and_up_proj_bias: Option<Tensor>,
        /// Down bias `[E, 1, H]`.
        pub down_proj_bias: Option<Tensor>,
        /// Down weights `[E, I, H]`.
        pub down_proj_weight: Tensor,
        /// Affinities `[T·E, 1]`, zero where a token did not pick the expert.
        pub expert_affinities_masked: Tensor,
    }

    /// The options of a blockwise call (the library's `Configs`, the fields
    /// this path reads).
    #[nki_object]
    pub struct Configs {
        /// Where the affinity multiplies: the input rows, the output rows, or nowhere.
        pub scaling_mode: ExpertAffinityScaleMode,
        /// Which DMAs skip out-of-range rows.
        pub skip_dma: SkipMode,
        /// Dtype of the token tiles, weights and intermediate.
        pub compute_dtype: Dtype,
        /// Whether each token's experts are summed (top-k > 1).
        pub is_tensor_update_accumulating: bool,
        /// Whether both biases are given.
        pub linear_bias: bool,
        /// The gate's activation.
        pub activation_function: ActFnType,
        /// Clamp of the gate projection from above.
        pub gate_clamp_upper_limit: Option<f64>,
        /// Clamp of the gate projection from below.
        pub gate_clamp_lower_limit: Option<f64>,
        /// Clamp of the up projection from above.
        pub up_clamp_upper_limit: Option<f64>,
        /// Clamp of the up projection from below.
        pub up_clamp_lower_limit: Option<f64>,
    }

    /// Broadcasts partition 0 of `src` to every partition of `dst` (same
    /// free size), one stream shuffle per 32-partition quadrant.
    #[nki_helper]
    pub fn stream_shuffle_broadcast(src: Sbuf, dst: Sbuf) {
        let [rows, cols] = dst.shape();
        let mask: Vec<i64> = (0..DVE_CHANNELS_PER_BANK).map(|_| 0).collect();
        for q in 0..rows.div_ceil(DVE_CHANNELS_PER_BANK) {
            let p0 = q * DVE_CHANNELS_PER_BANK;
            let n = DVE_CHANNELS_PER_BANK.min(rows - p0);
            nisa::nc_stream_shuffle(dst[s![p0..p0 + n, 0..cols]], src[s![0..1, 0..cols]], mask);
        }
    }

    /// Rows of the block's tokens (`token_indices` `[128, n_tiles]`) in the
    /// flat affinities of `e` experts for the expert in `block_expert`
    /// `[1, 1]`: `token·E + expert`, `[128, n_tiles]` int32, clamped to `-1`
    /// (skipped) at `-1` padding under `skip_token` (module docs).
    #[nki_helper]
    pub fn expert_affinity_rows(token_indices: Sbuf, block_expert: Sbuf, e: i64, skip_dma: SkipMode) -> Sbuf {
        let n_tiles = token_indices.shape()[1];
        let v_expert = nl::ndarray([TILE_SIZE, 1], nl::int32, buffer = nl::sbuf);
        stream_shuffle_broadcast(block_expert, v_expert);
        let addr = nl::ndarray([TILE_SIZE, n_tiles], nl::int32, buffer = nl::sbuf);
        nisa::tensor_scalar(addr, token_indices, nl::multiply, e as f64);
        nisa::tensor_tensor(addr, addr, v_expert.ap([[1, TILE_SIZE], [0, n_tiles]]), nl::add);
        if skip_dma.skip_token {
            nisa::tensor_scalar(addr, addr, nl::maximum, -1.0);
        }
        addr
    }

    /// The affinities of the block's tokens (`token_indices` `[128, n_tiles]`,
    /// token of position `128·j + p` at `[p, j]`) for the expert in
    /// `block_expert` `[1, 1]` of `e` experts: `[128, n_tiles]` in `dtype`,
    /// zero at skipped padding positions (module docs).
    #[nki_helper]
    pub fn calculate_expert_affinities(
        aff: Hbm,
        token_indices: Sbuf,
        block_expert: Sbuf,
        e: i64,
        dtype: Dtype,
        skip_dma: SkipMode,
    ) -> Sbuf {
        let n_tiles = token_indices.shape()[1];
        let addr = expert_affinity_rows(token_indices, block_expert, e, skip_dma);
        let affinity = nl::ndarray([TILE_SIZE, n_tiles], dtype, buffer = nl::sbuf);
        if skip_dma.skip_token {
            nisa::memset(affinity, 0.0);
        }
        for j in 0..n_tiles {
            gather_token_rows(affinity[s![.., j..j + 1]], aff, addr[s![.., j..j + 1]], 0, skip_dma.skip_token);
        }
        affinity
    }

    /// Gathers rows of `src` `[R, C]` by token, columns `col0..col0 + w`,
    /// into `dst` `[128, w]`: row `idx[p]` to partition `p` (`idx`
    /// `[128, 1]` int32), skipped rows (`-1` under `skip`) left as they are.
    #[nki_helper]
    pub fn gather_token_rows(dst: Sbuf, src: Hbm, idx: Sbuf, col0: i64, skip: bool) {
        let (c, w) = (src.shape()[1], dst.shape()[1]);
        if skip {
            nisa::dma_copy(
                dst,
                src.ap([[c, TILE_SIZE], [1, w]], offset = col0, vector_offset = idx, indirect_dim = 0),
                oob_mode = nisa::oob_mode::skip,
            );
        } else {
            nisa::dma_copy(dst, src.ap([[c, TILE_SIZE], [1, w]], offset = col0, vector_offset = idx, indirect_dim = 0));
        }
    }

    /// Scatters `src` `[128, w]` by token into columns `col0..col0 + w` of
    /// `dst` `[R, C]`: partition `p` to row `idx[p]`, skipped rows (`-1`
    /// under `skip`) not written.
    #[nki_helper]
    pub fn scatter_token_rows(dst: Hbm, src: Sbuf, idx: Sbuf, col0: i64, skip: bool) {
        let (c, w) = (dst.shape()[1], src.shape()[1]);
        if skip {
            nisa::dma_copy(
                dst.ap([[c, TILE_SIZE], [1, w]], offset = col0, vector_offset = idx, indirect_dim = 0),
                src,
                oob_mode = nisa::oob_mode::skip,
            );
        } else {
            nisa::dma_copy(dst.ap([[c, TILE_SIZE], [1, w]], offset = col0, vector_offset = idx, indirect_dim = 0), src);
        }
    }
}
