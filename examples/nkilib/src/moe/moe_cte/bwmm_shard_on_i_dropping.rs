//! Blockwise MoE matmul sharded on the intermediate dimension for a
//! token-dropping layer: the library's
//! `blockwise_mm_shard_intermediate_dropping` (`bwmm_shard_on_I`), the
//! training form of
//! [`blockwise_mm_baseline_shard_intermediate`](crate::moe::moe_cte::bwmm_shard_on_i).
//!
//! A dropping router gives every expert a fixed capacity of `B` token
//! positions: block `e` of `token_position_to_id` (`N = E` blocks) holds the
//! tokens of expert `e`, padded with `T` (or `-1` under `skip_token`) when
//! fewer tokens chose it; the tokens past its capacity were dropped by the
//! router and are not in the block. `block_to_expert` is not read: the
//! block index is the expert.
//!
//! The blocks are large (`B` a multiple of 1024), so each is cut into block
//! tiles of 1024 positions, each run as one block of
//! `blockwise_mm_baseline_shard_intermediate` (both programs, half of the
//! intermediate rows each, the partial outputs exchanged):
//!
//! ```text
//! out = 0                                            # [T, H]
//! for e in 0 .. E:                                   # unrolled when traced
//!     for k in 0 .. B / 1024:                        # block tile
//!         tok = token_position_to_id[e·B + 1024·k ..][:1024]
//!         g, u = clamp(x[tok]·W_gu[e, :, :, rows_s] + b_gu)     # [I/2, 1024] float32
//!         gate_up_activations_T[e, :, rows_s, 1024·k ..] = g, u
//!         inter = act(g) · u  (· a along the tokens with multiply_on_I)
//!         d = inter·W_down[e, rows_s] + the other program's     # [1024, H], the output dtype
//!         down_activations[e, 1024·k + my tiles] = d            # unless multiply_on_I
//!         out[tok] = (d + b_down[e]) · a (+ out[tok] when accumulating)   # d alone with multiply_on_I
//!     core barrier on every output
//! ```
//!
//! with `a = aff[tok·E + e]`. The affinity always multiplies the output
//! rows unless `expert_affinity_multiply_on_I` (the library's dropping form
//! reads no scaling mode: `PRE_SCALE`, `PRE_SCALE_DELAYED` and `NO_SCALE`
//! scale the output as `POST_SCALE` does). Returns `(output,
//! gate_up_activations_T, down_activations)`, or `(output,
//! gate_up_activations_T)` with `expert_affinity_multiply_on_I`: the
//! output `[T, H]` in the hidden dtype, the activations `[E, 2, I, B]` in
//! the gate/up weights' dtype and `[E, B, H]` in the down weights'.
//!
//! Tiling as the intermediate-sharded kernel's on a block of 1024: the
//! hidden dim on the partitions for the gate/up contraction (512 tokens a
//! PSUM bank), the intermediate rows on the partitions for the down
//! contraction, 128 tokens on the partitions for the down output (512
//! columns a bank), each program finishing 4 of the 8 token tiles.
//!
//! Refused by name (see [`DroppingRule`]): the intermediate-sharded kernel's
//! rules, a block size that is not a multiple of 1024 (the library's block
//! tiles would leave the output unwritten) and a block count other than
//! `E`.

// The library's names `gate_up_activations_T`, `expert_affinity_multiply_on_I`.
#![allow(non_snake_case)]

pub use kernel::*;

use crate::moe::moe_cte::bwmm_shard_on_i::{BwmmShardOnICall, ShardOnIRule, bwmm_shard_on_i_violation};
use crate::moe::moe_cte::moe_cte_utils::first_broken;

/// The kernel and its phases.
#[nki::nki_module]
pub mod kernel {
    use crate::moe::moe_cte::bwmm_shard_on_block::{
        DimensionSizes, bwmm_output_initialization, dimension_sizes, load_token_indices, quantized,
    };
    use crate::moe::moe_cte::bwmm_shard_on_i::{
        ActivationCheckpoint, ShardOnIFlags, compute_one_block, shard_intermediate, shard_on_i_call, validate_bwmm_shard_on_i,
    };
    pub use crate::moe::moe_cte::moe_cte_utils::SkipMode;
    use crate::moe::moe_cte::moe_cte_utils::{BwmmBiasScales, BwmmOptions, BwmmTensors, ShardOnIClamps};
    use crate::moe::moe_cte::moe_cte_utils::{Configs, InputTensors, TILE_SIZE};
    pub use crate::utils::common_types::{ActFnType, ExpertAffinityScaleMode};
    use nki::prelude::*;

    /// Positions of one block tile, run as one block.
    pub const MAX_BLOCK_TILE_SIZE: i64 = 1024;

    /// The kernel's outputs (the library's `OutputTensors`).
    #[nki_object]
    pub struct OutputTensors {
        /// `[T, H]`.
        pub output: Tensor,
        /// The clamped gate and up projections `[E, 2, I, B]`.
        pub gate_up_activations_T: Tensor,
        /// The down projections before bias and affinity `[E, B, H]`,
        /// unless the affinity multiplies the intermediate.
        pub down_activations: Option<Tensor>,
    }

    /// The outputs of a call: the `[T, H]` output zeroed, the activations
    /// as the module docs give them (no `down_activations` when
    /// `multiply_on_i`).
    #[nki_helper]
    pub fn dropping_outputs(inps: InputTensors, dims: DimensionSizes, block_size: i64, multiply_on_i: bool) -> OutputTensors {
        let shard_id: i64 = nl::program_id(0);
        let output = nl::ndarray([dims.t, dims.h], inps.hidden_states.dtype(), buffer = nl::shared_hbm);
        // Zeroed whether or not the blocks accumulate: a dropped token's row stays zero.
        bwmm_output_initialization(output, shard_id);
        let gate_up_shape = [dims.e, 2, dims.i_full, block_size];
        let gate_up_activations_T = nl::ndarray(gate_up_shape, inps.gate_up_proj_weight.dtype(), buffer = nl::shared_hbm);
        let mut down_activations: Option<Tensor> = None;
        if !multiply_on_i {
            let down_shape = [dims.e, block_size, dims.h];
            down_activations = Some(nl::ndarray(down_shape, inps.down_proj_weight.dtype(), buffer = nl::shared_hbm));
        }
        OutputTensors { output, gate_up_activations_T, down_activations }
    }

    /// Expert `block_idx`'s block of `block_size` positions, one block
    /// tile of 1024 after the other (`dims` sized for one tile), into
    /// `outs` by both programs.
    #[nki_helper]
    pub fn compute_one_block_dropping(
        inps: InputTensors,
        cfg: Configs,
        dims: DimensionSizes,
        outs: OutputTensors,
        block_idx: i64,
        block_size: i64,
        multiply_on_i: bool,
    ) {
        // The block index is the expert.
        let expert = nl::ndarray([1, 1], nl::int32, buffer = nl::sbuf);
        nisa::memset(expert, block_idx as f64);
        for block_tile_index in 0..block_size / MAX_BLOCK_TILE_SIZE {
            let position = block_tile_index * MAX_BLOCK_TILE_SIZE;
            let offset = block_idx * block_size + position;
            let positions = inps.token_position_to_id.ap([[1, TILE_SIZE], [TILE_SIZE, dims.num_tiles]], offset = offset);
            let token_indices = load_token_indices(positions, dims);
            let (gate_up_activations_T, down_activations) = (outs.gate_up_activations_T, outs.down_activations);
            let ck = ActivationCheckpoint { gate_up_activations_T, down_activations, block_idx, position };
            compute_one_block(inps, cfg, dims, outs.output, expert, token_indices, multiply_on_i, Some(ck));
        }
    }

    /// Every expert's block, both programs on each, a core barrier on the
    /// outputs after each (module docs).
    #[nki_helper]
    pub fn _bwmm_shard_on_i_dropping(inps: InputTensors, cfg: Configs, block_size: i64, multiply_on_i: bool) -> OutputTensors {
        let shard_id: i64 = nl::program_id(0);
        let dims = shard_intermediate(dimension_sizes(inps, MAX_BLOCK_TILE_SIZE), shard_id);
        let outs = dropping_outputs(inps, dims, block_size, multiply_on_i);
        for block_idx in 0..dims.e {
            compute_one_block_dropping(inps, cfg, dims, outs, block_idx, block_size, multiply_on_i);
            // The block's rows are stored before the next block reads them.
            nisa::core_barrier(outs.output, [0, 1]);
            nisa::core_barrier(outs.gate_up_activations_T, [0, 1]);
            let down = outs.down_activations;
            if let Some(d) = down {
                nisa::core_barrier(d, [0, 1]);
            }
        }
        outs
    }

    /// The dropping form's own rules (see
    /// [`DroppingRule`](super::DroppingRule)), checked when the kernel is
    /// traced after the intermediate-sharded kernel's.
    #[nki_helper]
    pub fn validate_dropping(inps: InputTensors, block_size: i64) {
        let name = "blockwise_mm_shard_intermediate_dropping";
        assert!(block_size % MAX_BLOCK_TILE_SIZE == 0, "{name}: block_size must be a multiple of 1024, the block tile, got {block_size}");
        let (e, n) = (inps.down_proj_weight.shape()[0], inps.token_position_to_id.shape()[0] / block_size);
        assert!(n == e, "{name}: token_position_to_id must hold one block per expert (N = E), got N = {n} with E = {e}");
    }

    /// Blockwise MoE matmul of a token-dropping layer, one block of
    /// `block_size` positions per expert, the intermediate dim split
    /// between the two programs (module docs). Returns `(output,
    /// gate_up_activations_T, down_activations)`, without
    /// `down_activations` under `expert_affinity_multiply_on_I`.
    #[nki_kernel]
    pub fn blockwise_mm_shard_intermediate_dropping(
        #[spread] t: BwmmTensors,
        #[spread] extra: BwmmBiasScales,
        #[spread] opts: BwmmOptions,
        #[default(true)] is_tensor_update_accumulating: bool,
        #[default(ExpertAffinityScaleMode::PRE_SCALE)] expert_affinities_scaling_mode: ExpertAffinityScaleMode,
        #[default(false)] expert_affinity_multiply_on_I: bool,
        #[spread] clamps: ShardOnIClamps,
    ) -> Outputs {
        // POST_SCALE, which the shard-on-I reading of the mode keeps.
        let mode = dropping_scaling_mode(expert_affinities_scaling_mode);
        let (inps, cfg) = shard_on_i_call(t, extra, opts, is_tensor_update_accumulating, mode, clamps);
        let multiply_on_i = expert_affinity_multiply_on_I;
        let flags = ShardOnIFlags { quantized: quantized(extra), checkpoint_activation: false, multiply_on_i };
        shard_on_i_dropping_checked(inps, cfg, block_size, flags)
    }

    /// The scaling the dropping kernel runs for `mode`: `POST_SCALE`
    /// whatever the mode, the affinity on the output rows (module docs).
    #[nki_helper]
    pub fn dropping_scaling_mode(mode: ExpertAffinityScaleMode) -> ExpertAffinityScaleMode {
        let _ = mode;
        ExpertAffinityScaleMode::POST_SCALE
    }

    /// [`blockwise_mm_shard_intermediate_dropping`] past bundling its
    /// arguments (`moe_cte` dispatches here too): the intermediate-sharded
    /// kernel's rules and its own, then every expert's block; `cfg` scales
    /// as [`dropping_scaling_mode`] gives. Returns the kernel's outputs.
    #[nki_helper]
    pub fn shard_on_i_dropping_checked(inps: InputTensors, cfg: Configs, block_size: i64, flags: ShardOnIFlags) -> Outputs {
        validate_bwmm_shard_on_i(inps, cfg, block_size, flags, "blockwise_mm_shard_intermediate_dropping");
        validate_dropping(inps, block_size);
        let outs = _bwmm_shard_on_i_dropping(inps, cfg, block_size, flags.multiply_on_i);
        let down = outs.down_activations;
        if let Some(d) = down {
            return Outputs(outs.output, outs.gate_up_activations_T, d);
        }
        Outputs(outs.output, outs.gate_up_activations_T)
    }
}

/// Why a `blockwise_mm_shard_intermediate_dropping` (or `moe_cte`
/// `shard_on_i_dropping`) call is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DroppingRule {
    /// A rule of the intermediate-sharded kernel.
    ShardOnI(ShardOnIRule),
    /// `block_size` is not a multiple of 1024.
    BlockTile,
    /// `token_position_to_id` does not hold exactly one block per expert.
    ExpertBlocks,
}

impl DroppingRule {
    /// The rule in words.
    pub const fn message(self) -> &'static str {
        match self {
            DroppingRule::ShardOnI(rule) => rule.message(),
            DroppingRule::BlockTile => "blockwise_mm_shard_intermediate_dropping: block_size must be a multiple of 1024, the block tile",
            DroppingRule::ExpertBlocks => {
                "blockwise_mm_shard_intermediate_dropping: token_position_to_id must hold one block per expert (N = E)"
            }
        }
    }
}

/// The first rule `c` (a call as the intermediate-sharded kernel's rules
/// read it, without its hybrid and checkpoint options) breaks, in the
/// kernel's order.
pub const fn bwmm_shard_on_i_dropping_violation(c: BwmmShardOnICall) -> Option<DroppingRule> {
    if let Some(rule) = bwmm_shard_on_i_violation(c) {
        return Some(DroppingRule::ShardOnI(rule));
    }
    let b = c.block_size;
    first_broken(&[(b % MAX_BLOCK_TILE_SIZE != 0, DroppingRule::BlockTile), (c.positions / b != c.experts, DroppingRule::ExpertBlocks)])
}

/// A `blockwise_mm_shard_intermediate_dropping` (or `moe_cte`
/// `shard_on_i_dropping`) call checked at compile time, or a compile error
/// naming the rule it breaks. Options not given take the kernel's defaults
/// (two programs, SiLU, no scales, no bias).
///
/// ```
/// let c = nkilib::bwmm_shard_on_i_dropping_config!(hidden = 2048, intermediate = 8192, experts = 2, block_size = 1024, positions = 2 * 1024);
/// assert_eq!((c.block_size, c.programs), (1024, 2));
/// ```
///
/// ```compile_fail
/// // Blocks of 512 positions are not whole block tiles.
/// let c = nkilib::bwmm_shard_on_i_dropping_config!(hidden = 2048, intermediate = 8192, experts = 2, block_size = 512, positions = 2 * 512);
/// ```
#[macro_export]
macro_rules! bwmm_shard_on_i_dropping_config {
    ($($args:tt)*) => {
        $crate::__shard_on_i_config!([$crate::moe::moe_cte::bwmm_shard_on_i_dropping::bwmm_shard_on_i_dropping_violation], $($args)*)
    };
}
