//! Blockwise MoE matmul sharded on the intermediate dimension: the library's
//! `blockwise_mm_baseline_shard_intermediate` (`bwmm_shard_on_I`), the
//! context-encoding MoE layer over blocks of `B` pre-sorted token positions
//! (as [`bwmm_shard_on_block`](crate::moe::moe_cte::bwmm_shard_on_block)),
//! where both programs walk every block and each computes half of the
//! expert's intermediate rows.
//!
//! For each block `blk` in turn, on program `s` of 2 with `I/2` intermediate
//! rows `s·I/2 ..` and the token tiles `s·B/256 ..` of the block:
//!
//! ```text
//! e = block_to_expert[blk]                          # read on the device: scalar_offset
//! x = hidden_states[token_position_to_id[blk·B ..]] # [B, H], indirect DMA
//! g, u = x·W_gu[e, :, 0, rows_s], x·W_gu[e, :, 1, rows_s]  # [I/2, B] float32, bias, clamps
//! (PRE_SCALE) g, u = g·a, u·a                        # a = aff[tok·E + e] along the tokens
//! inter = act(g) · u                                 # [I/2, B], compute dtype
//! (multiply_on_I) inter *= a
//! p = inter·W_down[e, rows_s]                        # [B, H] partial, output dtype
//! y = p[my tiles] + the other program's p[my tiles]  # one sendrecv per 128 tokens
//! y = (y + b_down[e]) · a (POST_SCALE)               # neither under multiply_on_I
//! out[tok] = y (+ out[tok] when accumulating)        # then a core barrier
//! ```
//!
//! The output is `[T, H]`, zeroed first when accumulating (top-k > 1); the
//! barrier after each block makes its rows visible before the next block
//! reads them. `PRE_SCALE` scales both projections before the activation
//! (the library's placement); `PRE_SCALE_DELAYED` is `PRE_SCALE` here.
//!
//! Tiling as in `bwmm_shard_on_block` with `I/2` in place of `I`: the hidden
//! dim on the partitions for the gate/up contraction, the intermediate rows
//! on the partitions for the down contraction, tokens on the partitions for
//! the down output, 512 free columns per PSUM bank; the phases are that
//! kernel's, reading the intermediate rows `s·I/2 ..` of the weights.
//!
//! Refused by name (see [`ShardOnIRule`]): `skip_weight` (as the library),
//! the quantization scales, `checkpoint_activation`, the GELU activations,
//! one bias alone and a down bias with `expert_affinity_multiply_on_I` (the
//! library leaves it out there).
//!
//! The hybrid form (`blockwise_mm_baseline_shard_intermediate_hybrid`) runs
//! the same block for the non-padded blocks only, in two loops:
//!
//! ```text
//! for blk in 0 .. n_static:                # unrolled when traced; n_static = num_static_block or N - E
//!     the block as above; core barrier
//! blk = n_static                            # an SBUF counter
//! for _ in dynamic_range(n_static, Σ conditions):   # on the device, the stop in a register
//!     e, tokens read at blk by scalar_offset; the block as above; core barrier; blk += 1
//! ```
//!
//! so it runs blocks `0 .. max(n_static, Σ conditions)` (`conditions[N + 1]`
//! marks the non-padded blocks with ones, the padding ones after them with
//! zeros). It takes neither `expert_affinity_multiply_on_I` nor
//! `checkpoint_activation`, scales `POST_SCALE` by default, and refuses
//! `gate_up_activations_T` / `down_activations` (the library takes them as
//! `None`). The dropping form is
//! [`bwmm_shard_on_i_dropping`](crate::moe::moe_cte::bwmm_shard_on_i_dropping).

// The library's names `calculate_expert_affinity_T`, `expert_affinity_multiply_on_I`.
#![allow(non_snake_case)]

pub use kernel::*;

use crate::moe::moe_cte::bwmm_shard_on_block::{MIN_I_ALIGN, NUM_SHARDS};
use crate::moe::moe_cte::moe_cte_utils::{PSUM_SIZE, first_broken, silu_gate, whole_blocks};

/// The kernel and its phases.
#[nki::nki_module]
pub mod kernel {
    use crate::moe::moe_cte::bwmm_shard_on_block::{
        BlockState, DimensionSizes, MIN_I_ALIGN, NUM_SHARDS, block_gate_up_projections, blockwise_sizes, bwmm_load_old_block,
        bwmm_output_initialization, check_blockwise_shapes, compute_block_output, compute_intermediate_states, configs, dimension_sizes,
        finish_output_rows, i_rows, input_tensors, intermediate_rows, load_and_broadcast_down_bias, load_down_proj_weight,
        load_hidden_states, load_token_indices, quantized, store_block_output, transpose_block_hidden_states,
    };
    pub use crate::moe::moe_cte::moe_cte_utils::SkipMode;
    use crate::moe::moe_cte::moe_cte_utils::{
        BwmmActivations, BwmmBiasScales, BwmmOptions, BwmmTensors, ShardOnIClamps, checkpointed, clamp_limits,
    };
    use crate::moe::moe_cte::moe_cte_utils::{
        Configs, GUP_PROJ_DIM, InputTensors, PSUM_SIZE, TILE_SIZE, calculate_expert_affinities, stream_shuffle_broadcast,
    };
    pub use crate::utils::common_types::{ActFnType, ExpertAffinityScaleMode};
    use nki::prelude::*;

    /// The pipe of the partial-output exchange.
    pub const PIPE_ID: i64 = 0;
    /// Block sizes are whole multiples of this (a 128-token tile per program).
    pub const BLOCK_ALIGN: i64 = 256;
    /// The largest hidden size.
    pub const MAX_HIDDEN: i64 = 8192;

    /// The sizes of program `shard_id`'s share: the intermediate rows
    /// `shard_id·I/2 ..` of the call's `dims`.
    #[nki_helper]
    pub fn shard_intermediate(dims: DimensionSizes, shard_id: i64) -> DimensionSizes {
        let i_tp = dims.i_full / NUM_SHARDS;
        intermediate_rows(dims, shard_id * i_tp, i_tp)
    }

    /// The affinities of the block's tokens for its expert along the free
    /// axis, broadcast to every partition: `[128, B]` float32 (`[p, b]` =
    /// token `b`'s), through PE transposes of the gathered `[128, B/128]`.
    #[nki_helper]
    pub fn calculate_expert_affinity_T(inps: InputTensors, cfg: Configs, dims: DimensionSizes, expert: Sbuf, token_indices: Sbuf) -> Sbuf {
        let aff =
            calculate_expert_affinities(inps.expert_affinities_masked, token_indices, expert, dims.e, cfg.compute_dtype, cfg.skip_dma);
        // A transpose keeps its dtype; the values are the gathered ones either way.
        let row_ps = nl::ndarray([1, dims.b], cfg.compute_dtype, buffer = nl::psum);
        for j in 0..dims.num_tiles {
            nisa::nc_transpose(row_ps[s![.., j * TILE_SIZE..(j + 1) * TILE_SIZE]], aff[s![.., j..j + 1]]);
        }
        let row = nl::ndarray([1, dims.b], nl::float32, buffer = nl::sbuf);
        nisa::tensor_copy(row, row_ps);
        let aff_t = nl::ndarray([TILE_SIZE, dims.b], nl::float32, buffer = nl::sbuf);
        stream_shuffle_broadcast(row, aff_t);
        aff_t
    }

    /// `t[0..k, g, it, :] *= aff_t` (or `t[0..k, it, :]` for a 3-D `t`) over
    /// the intermediate tiles of `dims`, in place.
    #[nki_helper]
    pub fn scale_by_affinity_t(t: Sbuf, aff_t: Sbuf, dims: DimensionSizes) {
        for it in 0..dims.gup_tile_count {
            let k: i64 = i_rows(dims, it);
            if t.ndim() == 4 {
                for g in 0..t.shape()[1] {
                    nisa::tensor_tensor(t[s![0..k, g, it, ..]], t[s![0..k, g, it, ..]], aff_t[s![0..k, ..]], nl::multiply);
                }
            } else {
                nisa::tensor_tensor(t[s![0..k, it, ..]], t[s![0..k, it, ..]], aff_t[s![0..k, ..]], nl::multiply);
            }
        }
    }

    /// This program's intermediate `act(g)·u` of the block, `[128,
    /// I/2/128, B]` in the compute dtype, the affinity applied where the
    /// options place it (module docs); the clamped projections saved to
    /// `checkpoint` when given.
    #[nki_helper]
    pub fn block_intermediate_states(
        inps: InputTensors,
        cfg: Configs,
        dims: DimensionSizes,
        x_t: Sbuf,
        expert: Sbuf,
        token_indices: Sbuf,
        multiply_on_i: bool,
        checkpoint: Option<ActivationCheckpoint>,
    ) -> Sbuf {
        let gup = block_gate_up_projections(inps, cfg, dims, x_t, expert);
        if let Some(ck) = checkpoint {
            store_gate_up_activations(ck, gup, dims);
        }
        let pre = cfg.scaling_mode == ExpertAffinityScaleMode::PRE_SCALE;
        let mut aff_t: Option<Sbuf> = None;
        if pre || multiply_on_i {
            aff_t = Some(calculate_expert_affinity_T(inps, cfg, dims, expert, token_indices));
        }
        if let Some(a) = aff_t {
            if !multiply_on_i {
                scale_by_affinity_t(gup, a, dims);
            }
        }
        let inter = compute_intermediate_states(gup, cfg, dims);
        if let Some(a) = aff_t {
            if multiply_on_i {
                scale_by_affinity_t(inter, a, dims);
            }
        }
        inter
    }

    /// Token tile `own` of the block's output `[128, H]` in the output
    /// dtype: this program's partial plus the other program's (which
    /// receives this program's partial of its tile `other`).
    #[nki_helper]
    pub fn exchange_partial_outputs(
        st: BlockState,
        own: i64,
        other: i64,
        cfg: Configs,
        dims: DimensionSizes,
        out_dtype: Dtype,
        shard_id: i64,
    ) -> Sbuf {
        let mine = compute_block_output(st, None, own, cfg, dims, out_dtype);
        let theirs = compute_block_output(st, None, other, cfg, dims, out_dtype);
        let recv = nl::ndarray([TILE_SIZE, dims.h], out_dtype, buffer = nl::sbuf);
        let peer = NUM_SHARDS - 1 - shard_id;
        nisa::sendrecv(theirs, recv, peer, peer, PIPE_ID);
        nisa::tensor_tensor(recv, mine, recv, nl::add);
        recv
    }

    /// Where a block's activations are saved for the backward pass (the
    /// library's `gate_up_activations_T` and `down_activations` outputs).
    #[nki_object]
    pub struct ActivationCheckpoint {
        /// The clamped gate and up projections `[N, 2, I, B]`.
        pub gate_up_activations_T: Tensor,
        /// The down projection before its bias and affinity `[N, B, H]`.
        pub down_activations: Option<Tensor>,
        /// The block saved.
        pub block_idx: i64,
        /// The block position of the first token of the tokens computed.
        pub position: i64,
    }

    /// This program's intermediate rows of the clamped projections `gup`
    /// (`[128, 2, I/2/128, b]` float32) to their block, rows and positions
    /// of `ck.gate_up_activations_T`.
    #[nki_helper]
    pub fn store_gate_up_activations(ck: ActivationCheckpoint, gup: Sbuf, dims: DimensionSizes) {
        let (acts, p0) = (ck.gate_up_activations_T, ck.position);
        for g in 0..GUP_PROJ_DIM {
            for it in 0..dims.gup_tile_count {
                let k: i64 = i_rows(dims, it);
                let r0 = dims.i_offset + it * TILE_SIZE;
                nisa::dma_copy(acts[s![ck.block_idx, g, r0..r0 + k, p0..p0 + dims.b]], gup[s![0..k, g, it, ..]]);
            }
        }
    }

    /// Token tile `j`'s summed down projection `rows` `[128, H]` (before
    /// its bias and affinity) to its block positions of
    /// `ck.down_activations`, when saved.
    #[nki_helper]
    pub fn store_down_activations(ck: ActivationCheckpoint, rows: Sbuf, j: i64) {
        let down = ck.down_activations;
        if let Some(d) = down {
            let p0 = ck.position + j * TILE_SIZE;
            nisa::dma_copy(d[s![ck.block_idx, p0..p0 + TILE_SIZE, ..]], rows);
        }
    }

    /// The expert `[1, 1]` int32 of block `block_idx`.
    #[nki_helper]
    pub fn load_block_expert(block_to_expert: Hbm, block_idx: i64) -> Sbuf {
        let expert = nl::ndarray([1, 1], nl::int32, buffer = nl::sbuf);
        nisa::dma_copy(expert, block_to_expert[s![block_idx..block_idx + 1, 0..1]]);
        expert
    }

    /// The expert `[1, 1]` int32 of the block whose index is in `block_idx`
    /// `[1, 1]` int32, read on the device.
    #[nki_helper]
    pub fn load_dynamic_block_expert(block_to_expert: Hbm, block_idx: Sbuf) -> Sbuf {
        let expert = nl::ndarray([1, 1], nl::int32, buffer = nl::sbuf);
        nisa::dma_copy(expert, block_to_expert.ap([[1, 1], [1, 1]], scalar_offset = block_idx, indirect_dim = 0));
        expert
    }

    /// The token ids `[128, B/128]` of the block whose index is in
    /// `block_idx` `[1, 1]` int32, read on the device.
    #[nki_helper]
    pub fn load_token_indices_dynamic_block(inps: InputTensors, dims: DimensionSizes, block_idx: Sbuf) -> Sbuf {
        let blocks = inps.token_position_to_id.reshape([dims.n, dims.b]);
        let positions = blocks.ap([[1, TILE_SIZE], [TILE_SIZE, dims.num_tiles]], scalar_offset = block_idx, indirect_dim = 0);
        load_token_indices(positions, dims)
    }

    /// One block, its expert in `expert` and its token ids in
    /// `token_indices`, through the expert into `output` by both programs
    /// (module docs), its activations saved to `checkpoint` when given.
    #[nki_helper]
    pub fn compute_one_block(
        inps: InputTensors,
        cfg: Configs,
        dims: DimensionSizes,
        output: Hbm,
        expert: Sbuf,
        token_indices: Sbuf,
        multiply_on_i: bool,
        checkpoint: Option<ActivationCheckpoint>,
    ) {
        let shard_id: i64 = nl::program_id(0);
        let x_t = transpose_block_hidden_states(load_hidden_states(inps, cfg, dims, token_indices), dims);
        let inter = block_intermediate_states(inps, cfg, dims, x_t, expert, token_indices, multiply_on_i, checkpoint);
        let mut affinity: Option<Sbuf> = None;
        let mut down_bias: Option<Sbuf> = None;
        if !multiply_on_i {
            if cfg.scaling_mode == ExpertAffinityScaleMode::POST_SCALE {
                let aff = inps.expert_affinities_masked;
                affinity = Some(calculate_expert_affinities(aff, token_indices, expert, dims.e, cfg.compute_dtype, cfg.skip_dma));
            }
            let db = inps.down_proj_bias;
            if let Some(b) = db {
                down_bias = Some(load_and_broadcast_down_bias(b, cfg, dims, expert));
            }
        }
        let st = BlockState { inter, dp_weights: load_down_proj_weight(inps, cfg, dims, expert), affinity: None, down_bias: None };
        let half = dims.num_tiles / NUM_SHARDS;
        for k in 0..half {
            let own = shard_id * half + k;
            let rows = exchange_partial_outputs(st, own, (NUM_SHARDS - 1 - shard_id) * half + k, cfg, dims, output.dtype(), shard_id);
            if let Some(ck) = checkpoint {
                store_down_activations(ck, rows, own);
            }
            let mut old: Option<Sbuf> = None;
            if cfg.is_tensor_update_accumulating {
                old = Some(bwmm_load_old_block(output, token_indices, own, cfg, shard_id, false));
            }
            let mut scale: Option<Tensor> = None;
            if let Some(a) = affinity {
                scale = Some(a[s![.., own..own + 1]]);
            }
            finish_output_rows(rows, rows, down_bias, scale, old);
            store_block_output(output, rows, token_indices, own, cfg, shard_id);
        }
    }

    /// A new `[T, H]` output for program `shard_id`'s share `dims`, zeroed
    /// when accumulating.
    #[nki_helper]
    pub fn shard_on_i_output(inps: InputTensors, cfg: Configs, dims: DimensionSizes, shard_id: i64) -> Hbm {
        let output = nl::ndarray([dims.t, dims.h], inps.hidden_states.dtype(), buffer = nl::shared_hbm);
        if cfg.is_tensor_update_accumulating {
            bwmm_output_initialization(output, shard_id);
        }
        output
    }

    /// Blocks `0 .. n_blocks`, both programs on each, into `output`.
    #[nki_helper]
    pub fn compute_static_blocks(inps: InputTensors, cfg: Configs, dims: DimensionSizes, output: Hbm, n_blocks: i64, multiply_on_i: bool) {
        for block_idx in 0..n_blocks {
            let expert = load_block_expert(inps.block_to_expert, block_idx);
            let positions = inps.token_position_to_id.ap([[1, TILE_SIZE], [TILE_SIZE, dims.num_tiles]], offset = block_idx * dims.b);
            compute_one_block(inps, cfg, dims, output, expert, load_token_indices(positions, dims), multiply_on_i, None);
            // The block's rows are stored before the next block reads them.
            nisa::core_barrier(output, [0, 1]);
        }
    }

    /// The blockwise MoE of every block, both programs on each, into a new
    /// `[T, H]` output.
    #[nki_helper]
    pub fn _bwmm_shard_on_i(inps: InputTensors, cfg: Configs, block_size: i64, multiply_on_i: bool) -> Hbm {
        let shard_id: i64 = nl::program_id(0);
        let dims = shard_intermediate(dimension_sizes(inps, block_size), shard_id);
        let output = shard_on_i_output(inps, cfg, dims, shard_id);
        compute_static_blocks(inps, cfg, dims, output, dims.n, multiply_on_i);
        output
    }

    /// The count of non-padded blocks in `conditions` `[N + 1]` (the sum
    /// of its ones), `[1, 1]` int32, where the hybrid loops stop.
    #[nki_helper]
    pub fn count_active_blocks(conditions: Hbm) -> Sbuf {
        let n_cond = conditions.shape()[0];
        let cond = nl::ndarray([1, n_cond], nl::int32, buffer = nl::sbuf);
        nisa::dma_copy(cond, conditions.reshape([1, n_cond]));
        let n_active = nl::ndarray([1, 1], nl::int32, buffer = nl::sbuf);
        nisa::tensor_reduce(n_active, nl::add, cond, 1);
        n_active
    }

    /// Blocks `n_static ..` up to the count of non-padded blocks in
    /// `conditions` (the sum of its ones), both programs on each, into
    /// `output`: a loop on the device, the block index in an SBUF counter.
    #[nki_helper]
    pub fn compute_dynamic_blocks(inps: InputTensors, cfg: Configs, dims: DimensionSizes, output: Hbm, conditions: Hbm, n_static: i64) {
        let stop = nisa::register_alloc();
        nisa::register_load(stop, count_active_blocks(conditions));
        let block_idx = nl::ndarray([1, 1], nl::int32, buffer = nl::sbuf);
        nisa::memset(block_idx, n_static as f64);
        for _ in nl::dynamic_range(n_static, stop) {
            let expert = load_dynamic_block_expert(inps.block_to_expert, block_idx);
            let token_indices = load_token_indices_dynamic_block(inps, dims, block_idx);
            compute_one_block(inps, cfg, dims, output, expert, token_indices, false, None);
            nisa::core_barrier(output, [0, 1]);
            nisa::tensor_scalar(block_idx, block_idx, nl::add, 1.0);
        }
    }

    /// The hybrid loop: the first `n_static` blocks in a loop unrolled when
    /// traced, the rest up to the count of `conditions` on the device, into
    /// a new `[T, H]` output.
    #[nki_helper]
    pub fn _bwmm_shard_on_i_hybrid(inps: InputTensors, cfg: Configs, block_size: i64, conditions: Hbm, n_static: i64) -> Hbm {
        let shard_id: i64 = nl::program_id(0);
        let dims = shard_intermediate(dimension_sizes(inps, block_size), shard_id);
        let output = shard_on_i_output(inps, cfg, dims, shard_id);
        compute_static_blocks(inps, cfg, dims, output, n_static, false);
        compute_dynamic_blocks(inps, cfg, dims, output, conditions, n_static);
        output
    }

    /// The scaling these kernels run for `mode`: `PRE_SCALE_DELAYED` is
    /// `PRE_SCALE` (as the library reads it).
    #[nki_helper]
    pub fn shard_on_i_scaling_mode(mode: ExpertAffinityScaleMode) -> ExpertAffinityScaleMode {
        if mode == ExpertAffinityScaleMode::PRE_SCALE_DELAYED { ExpertAffinityScaleMode::PRE_SCALE } else { mode }
    }

    /// The options of a call the rules read, besides [`Configs`].
    #[nki_object]
    pub struct ShardOnIFlags {
        /// A quantization scale is given.
        pub quantized: bool,
        /// `checkpoint_activation`.
        pub checkpoint_activation: bool,
        /// `expert_affinity_multiply_on_I`.
        pub multiply_on_i: bool,
    }

    /// The rules of [`bwmm_shard_on_i_violation`](super::bwmm_shard_on_i_violation)
    /// and the tensors' shapes, checked when the kernel is traced.
    #[nki_helper]
    pub fn validate_bwmm_shard_on_i(inps: InputTensors, cfg: Configs, block_size: i64, flags: ShardOnIFlags, name: &str) {
        let (_, h, e, i): (i64, i64, i64, i64) = blockwise_sizes(inps, name);
        let positions = inps.token_position_to_id.shape()[0];
        let programs = if nl::program_ndim() == 1 { nl::num_programs(0) } else { 1 };
        assert!(
            programs == NUM_SHARDS,
            "{name}: runs on exactly 2 programs (LNC2), the intermediate rows split between them, got {programs}"
        );
        assert!(
            block_size > 0 && block_size % BLOCK_ALIGN == 0 && (block_size <= PSUM_SIZE || block_size % PSUM_SIZE == 0),
            "{name}: block_size = {block_size} must be a positive multiple of 256, and of 512 above 512"
        );
        assert!(h >= PSUM_SIZE && h <= MAX_HIDDEN && h % PSUM_SIZE == 0, "{name}: H = {h} must be a multiple of 512 in [512, 8192]");
        assert!(
            e > 0 && positions > 0 && positions % block_size == 0,
            "{name}: E = {e} must be positive and token_position_to_id's length {positions} a positive multiple of block_size"
        );
        assert!(i > 0 && i % MIN_I_ALIGN == 0, "{name}: I = {i} must be a positive multiple of 16");
        assert!(!cfg.skip_dma.skip_weight, "{name}: skip_dma.skip_weight is not supported");
        let act = cfg.activation_function;
        assert!(act == ActFnType::SiLU || act == ActFnType::Swish, "{name}: activation_function must be SiLU or Swish, got {act}");
        assert!(!flags.quantized, "{name}: the quantization scales (gate_up_proj_scale, down_proj_scale) are not implemented");
        assert!(!flags.checkpoint_activation, "{name}: checkpoint_activation is not implemented");
        let (gb, db) = (inps.gate_and_up_proj_bias, inps.down_proj_bias);
        assert!(gb.is_some() == db.is_some(), "{name}: gate_and_up_proj_bias and down_proj_bias are given together");
        assert!(
            !(flags.multiply_on_i && db.is_some()),
            "{name}: down_proj_bias with expert_affinity_multiply_on_I is not supported (the library leaves the bias out)"
        );
        check_blockwise_shapes(inps, name, block_size);
    }

    /// The [`InputTensors`] and [`Configs`] of a shard-on-I call from its
    /// parameter groups, the affinity scaling as this form applies it.
    #[nki_helper]
    pub fn shard_on_i_call(
        t: BwmmTensors,
        extra: BwmmBiasScales,
        opts: BwmmOptions,
        accumulating: bool,
        scaling_mode: ExpertAffinityScaleMode,
        clamps: ShardOnIClamps,
    ) -> (InputTensors, Configs) {
        let inps = input_tensors(t, extra);
        let cfg = configs(inps, opts, accumulating, shard_on_i_scaling_mode(scaling_mode), clamp_limits(clamps));
        (inps, cfg)
    }

    /// Blockwise MoE matmul over blocks of `block_size` token positions with
    /// the intermediate dim split between the two programs (module docs);
    /// returns `[T, H]`.
    #[nki_kernel]
    pub fn blockwise_mm_baseline_shard_intermediate(
        #[spread] t: BwmmTensors,
        #[spread] extra: BwmmBiasScales,
        #[spread] opts: BwmmOptions,
        #[default(true)] is_tensor_update_accumulating: bool,
        #[default(ExpertAffinityScaleMode::PRE_SCALE)] expert_affinities_scaling_mode: ExpertAffinityScaleMode,
        #[spread] clamps: ShardOnIClamps,
        #[default(false)] checkpoint_activation: bool,
        #[default(false)] expert_affinity_multiply_on_I: bool,
    ) -> Hbm {
        let (inps, cfg) = shard_on_i_call(t, extra, opts, is_tensor_update_accumulating, expert_affinities_scaling_mode, clamps);
        let multiply_on_i = expert_affinity_multiply_on_I;
        let flags = ShardOnIFlags { quantized: quantized(extra), checkpoint_activation, multiply_on_i };
        validate_bwmm_shard_on_i(inps, cfg, block_size, flags, "blockwise_mm_baseline_shard_intermediate");
        _bwmm_shard_on_i(inps, cfg, block_size, expert_affinity_multiply_on_I)
    }

    /// The hybrid form's static block count: `num_static_block`, else `N -
    /// E` (the blocks before the last `E`, which may be padding), asserted
    /// within `[0, N]` (see [`ShardOnIRule::StaticBlocks`](super::ShardOnIRule::StaticBlocks)).
    #[nki_helper]
    pub fn static_block_count(dims: DimensionSizes, num_static_block: Option<i64>) -> i64 {
        let rule = "blockwise_mm_baseline_shard_intermediate_hybrid: num_static_block (N - E when not given) must be in [0, N]";
        checked_static_blocks(dims.n, dims.n - dims.e, num_static_block, rule)
    }

    /// `num_static_block`, else `default`, asserted within `[0, n]` with
    /// the words of `rule`.
    #[nki_helper]
    pub fn checked_static_blocks(n: i64, default: i64, num_static_block: Option<i64>, rule: &str) -> i64 {
        let mut n_static = default;
        if let Some(k) = num_static_block {
            n_static = k;
        }
        assert!(n_static >= 0 && n_static <= n, "{rule}, got {n_static} with N = {n}");
        n_static
    }

    /// [`blockwise_mm_baseline_shard_intermediate`] over the non-padded
    /// blocks only: the first `num_static_block` (default `N - E`) in a
    /// loop unrolled when traced, then blocks up to the count of ones in
    /// `conditions` `[N + 1]` in a loop on the device (module docs); the
    /// affinity on the output by default. Returns `[T, H]`.
    #[nki_kernel]
    pub fn blockwise_mm_baseline_shard_intermediate_hybrid(
        #[dtypes(int32)] conditions: Hbm,
        #[spread] t: BwmmTensors,
        num_static_block: Option<i64>,
        #[spread] extra: BwmmBiasScales,
        #[spread] act: BwmmActivations,
        #[spread] opts: BwmmOptions,
        #[default(true)] is_tensor_update_accumulating: bool,
        #[default(ExpertAffinityScaleMode::POST_SCALE)] expert_affinities_scaling_mode: ExpertAffinityScaleMode,
        #[spread] clamps: ShardOnIClamps,
    ) -> Hbm {
        let (inps, cfg) = shard_on_i_call(t, extra, opts, is_tensor_update_accumulating, expert_affinities_scaling_mode, clamps);
        shard_on_i_hybrid_checked(inps, cfg, block_size, conditions, num_static_block, quantized(extra), checkpointed(act))
    }

    /// [`blockwise_mm_baseline_shard_intermediate_hybrid`] past bundling its
    /// arguments (`moe_cte` dispatches here too): its rules, then the hybrid
    /// loop. `quantized` says whether a quantization scale is given,
    /// `activations` whether `gate_up_activations_T` or `down_activations` is.
    #[nki_helper]
    pub fn shard_on_i_hybrid_checked(
        inps: InputTensors,
        cfg: Configs,
        block_size: i64,
        conditions: Hbm,
        num_static_block: Option<i64>,
        quantized: bool,
        activations: bool,
    ) -> Hbm {
        let name = "blockwise_mm_baseline_shard_intermediate_hybrid";
        let flags = ShardOnIFlags { quantized, checkpoint_activation: false, multiply_on_i: false };
        validate_bwmm_shard_on_i(inps, cfg, block_size, flags, name);
        assert!(!activations, "{name}: gate_up_activations_T and down_activations are not supported (the library takes them as None)");
        assert!(conditions.ndim() == 1, "{name}: conditions must be [N + 1], got {}", conditions.shape());
        let n_static: i64 = static_block_count(dimension_sizes(inps, block_size), num_static_block);
        _bwmm_shard_on_i_hybrid(inps, cfg, block_size, conditions, n_static)
    }
}

/// Why a `blockwise_mm_baseline_shard_intermediate` (or `moe_cte`
/// `shard_on_i`) call is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShardOnIRule {
    /// Not exactly two programs.
    Programs,
    /// `block_size` is not a positive multiple of 256 (and of 512 above 512).
    BlockSize,
    /// `H` is not a multiple of 512 in `[512, 8192]`.
    Hidden,
    /// No experts, or `token_position_to_id` is not whole blocks.
    Blocks,
    /// `I` is not a positive multiple of 16.
    IntermediateAlign,
    /// `skip_dma.skip_weight`.
    SkipWeight,
    /// A GELU activation.
    Activation,
    /// Quantization scales.
    Quantization,
    /// `checkpoint_activation`.
    CheckpointActivation,
    /// Only one of the two biases.
    Bias,
    /// A down bias with `expert_affinity_multiply_on_I`.
    DownBiasOnI,
    /// The hybrid form given activation buffers.
    Activations,
    /// The hybrid form's static block count outside `[0, N]`.
    StaticBlocks,
}

impl ShardOnIRule {
    /// The rule in words.
    pub const fn message(self) -> &'static str {
        match self {
            ShardOnIRule::Programs => {
                "blockwise_mm_baseline_shard_intermediate: runs on exactly 2 programs (LNC2), the intermediate rows split between them"
            }
            ShardOnIRule::BlockSize => {
                "blockwise_mm_baseline_shard_intermediate: block_size must be a positive multiple of 256, and of 512 above 512"
            }
            ShardOnIRule::Hidden => "blockwise_mm_baseline_shard_intermediate: H must be a multiple of 512 in [512, 8192]",
            ShardOnIRule::Blocks => {
                "blockwise_mm_baseline_shard_intermediate: E must be positive and token_position_to_id's length a positive multiple of block_size"
            }
            ShardOnIRule::IntermediateAlign => "blockwise_mm_baseline_shard_intermediate: I must be a positive multiple of 16",
            ShardOnIRule::SkipWeight => "blockwise_mm_baseline_shard_intermediate: skip_dma.skip_weight is not supported",
            ShardOnIRule::Activation => "blockwise_mm_baseline_shard_intermediate: activation_function must be SiLU or Swish",
            ShardOnIRule::Quantization => {
                "blockwise_mm_baseline_shard_intermediate: the quantization scales (gate_up_proj_scale, down_proj_scale) are not implemented"
            }
            ShardOnIRule::CheckpointActivation => "blockwise_mm_baseline_shard_intermediate: checkpoint_activation is not implemented",
            ShardOnIRule::Bias => "blockwise_mm_baseline_shard_intermediate: gate_and_up_proj_bias and down_proj_bias are given together",
            ShardOnIRule::DownBiasOnI => {
                "blockwise_mm_baseline_shard_intermediate: down_proj_bias with expert_affinity_multiply_on_I is not supported (the library leaves the bias out)"
            }
            ShardOnIRule::StaticBlocks => {
                "blockwise_mm_baseline_shard_intermediate_hybrid: num_static_block (N - E when not given) must be in [0, N]"
            }
            ShardOnIRule::Activations => {
                "blockwise_mm_baseline_shard_intermediate_hybrid: gate_up_activations_T and down_activations are not supported (the library takes them as None)"
            }
        }
    }
}

crate::__blockwise_call! {
    /// An intermediate-sharded call as the rules read it.
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub struct BwmmShardOnICall {
        /// `skip_dma.skip_weight`.
        pub skip_weight: bool,
        /// `activation_function`.
        pub activation: ActFnType,
        /// Whether a quantization scale is given.
        pub quantized: bool,
        /// `checkpoint_activation`.
        pub checkpoint_activation: bool,
        /// Whether exactly one of the two biases is given.
        pub one_bias: bool,
        /// Whether a down bias is given with `expert_affinity_multiply_on_I`.
        pub down_bias_on_i: bool,
        /// The hybrid form's static block count (`num_static_block`, else `N -
        /// E`); 0 for the other forms.
        pub static_blocks: i64,
        /// Whether the hybrid form is given `gate_up_activations_T` or `down_activations`.
        pub activations: bool,
    }
}

/// The first rule `c` breaks.
pub const fn bwmm_shard_on_i_violation(c: BwmmShardOnICall) -> Option<ShardOnIRule> {
    let b = c.block_size;
    first_broken(&[
        (c.programs != NUM_SHARDS, ShardOnIRule::Programs),
        (b <= 0 || b % BLOCK_ALIGN != 0 || (b > PSUM_SIZE && b % PSUM_SIZE != 0), ShardOnIRule::BlockSize),
        (c.hidden < PSUM_SIZE || c.hidden > MAX_HIDDEN || c.hidden % PSUM_SIZE != 0, ShardOnIRule::Hidden),
        (!whole_blocks(c.experts, c.positions, b), ShardOnIRule::Blocks),
        (c.intermediate <= 0 || c.intermediate % MIN_I_ALIGN != 0, ShardOnIRule::IntermediateAlign),
        (c.skip_weight, ShardOnIRule::SkipWeight),
        (!silu_gate(c.activation), ShardOnIRule::Activation),
        (c.quantized, ShardOnIRule::Quantization),
        (c.checkpoint_activation, ShardOnIRule::CheckpointActivation),
        (c.one_bias, ShardOnIRule::Bias),
        (c.down_bias_on_i, ShardOnIRule::DownBiasOnI),
        (c.activations, ShardOnIRule::Activations),
        (c.static_blocks < 0 || (b > 0 && c.static_blocks > c.positions / b), ShardOnIRule::StaticBlocks),
    ])
}

/// A `blockwise_mm_baseline_shard_intermediate` (or `moe_cte` `shard_on_i`)
/// call checked at compile time, or a compile error naming the rule it
/// breaks. Options not given take the kernel's defaults (two programs,
/// SiLU, no scales, no checkpointing).
///
/// ```
/// let c = nkilib::bwmm_shard_on_i_config!(hidden = 3072, intermediate = 2048, experts = 8, block_size = 512, positions = 16 * 512);
/// assert_eq!((c.block_size, c.programs), (512, 2));
/// ```
///
/// ```compile_fail
/// // Blocks of 384 positions do not split into one 128-token tile per program.
/// let c = nkilib::bwmm_shard_on_i_config!(hidden = 3072, intermediate = 2048, experts = 8, block_size = 384, positions = 16 * 384);
/// ```
#[macro_export]
macro_rules! bwmm_shard_on_i_config {
    ($($args:tt)*) => {
        $crate::__shard_on_i_config!([$crate::moe::moe_cte::bwmm_shard_on_i::bwmm_shard_on_i_violation], $($args)*)
    };
}

/// A [`BwmmShardOnICall`] with the intermediate-sharded kernels' defaults
/// (two programs, SiLU, no scales, no checkpointing, no bias) but the
/// options given, checked at compile time by `$violation`.
#[doc(hidden)]
#[macro_export]
macro_rules! __shard_on_i_config {
    ([$($violation:tt)+], $($args:tt)*) => {
        $crate::__blockwise_config!(
            [$crate::moe::moe_cte::bwmm_shard_on_i::BwmmShardOnICall],
            [$($violation)+],
            {
                skip_weight: false,
                activation: $crate::moe::moe_cte::bwmm_shard_on_i::ActFnType::SiLU,
                quantized: false,
                checkpoint_activation: false,
                one_bias: false,
                down_bias_on_i: false,
                static_blocks: 0,
                activations: false,
            },
            $($args)*
        )
    };
}
