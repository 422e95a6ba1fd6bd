//! Blockwise MoE matmul sharded on blocks with MX weights (trn3): the
//! library's `bwmm_shard_on_block_mx`, the context-encoding MoE layer of
//! [`bwmm_shard_on_block`](crate::moe::moe_cte::bwmm_shard_on_block) whose
//! gate/up and down weights are MXFP4 (`float4_e2m1fn_x4`) or MXFP8
//! (`float8_e4m3fn_x4`, `float8_e5m2_x4`) with `uint8` block scales, every
//! projection an `nc_matmul_mx` of the token rows quantized on chip to
//! MXFP8.
//!
//! The `N` blocks are split in two contiguous halves, one per program;
//! with an odd count the last block goes to program 1 (the library runs it
//! on program 0 too with its affinities zeroed, which adds nothing). Each
//! program walks its blocks in turn, every block through the whole hidden
//! dim:
//!
//! ```text
//! e = block_to_expert[blk]                            # read on the device
//! xq, xs = the block's rows in MXFP8                  # [128, H/512, B] (moe_cte_mx_utils)
//! W_gu, S_gu, b_gu = expert e's gate/up tiles, scales (gathered into their quadrants), bias
//! gate = clamp(Σ_H/512 nc_matmul_mx(W_g, xq) + b_g)   # [128, I/512, B, 4] bf16, 256 tokens a bank
//! up   = clamp(Σ_H/512 nc_matmul_mx(W_u, xq) + b_u)
//! inter = act(gate) · up                              # bf16, the layout quantize_mx reads
//! y = Σ_I/512 nc_matmul_mx(quantize_mx(inter), W_down[e]) + b_down[e]   # [128, B/128, H] bf16
//! y = y · aff[tok·E + e]                              # in every scaling mode (POST_SCALE)
//! out[s, tok] = y (+ out[s, tok] after this program's first block)
//! ```
//!
//! The output is `[2, T, H]`, one slot per program so the two never write
//! the same row; after a core barrier each program adds slot 1 into slot 0
//! for its half of the 128-row tiles and zeroes slot 1 (the library's
//! `reduce_outputs`).
//!
//! With `conditions` (`[N + 2]`, ones for the non-padded blocks, then
//! zeros) the blocks run in two loops: the first `n_static` blocks as
//! above, then a loop on the device over pairs of blocks, program `s` on
//! block `index + s`, while `conditions[index]` is nonzero:
//!
//! ```text
//! n_static_blocks > 0:  n_dyn = N - n_static_blocks rounded up to even; n_static = N - n_dyn
//! else:                 n_dyn = n_dynamic_blocks (T // B static blocks when outside 0..=N)
//! static loop over blocks 0 .. n_static; index = n_static
//! while conditions[index]: block index + s on program s; index += 2
//! ```
//!
//! (as in the library, `conditions[index]` must be zero by the time
//! `index + 1` would pass the last block).
//!
//! Tiling: hidden dim on the partitions in 512-row MX tiles for the
//! gate/up contraction, the product's columns on the partitions
//! (`[128, I/512, B, 4]`) for the down contraction, tokens on the
//! partitions (128 a tile) for the down output, bfloat16 PSUM banks. The
//! library prefetches the next block's rows while a block computes; here
//! each block loads its own rows, with the same arithmetic.
//!
//! With `skip_token` the library addresses program 1's padding positions
//! (`-1`) one row before its slot, the last token row of slot 0, which
//! program 0 writes at the same time; here they are moved past both slots
//! first, so they are skipped.
//!
//! Refused by name (see [`MoeCteMxRule`]): scaling modes other than
//! `POST_SCALE` (the library's kernel scales the output whatever the mode),
//! `is_tensor_update_accumulating=False` and the activation outputs (as the
//! library), one bias alone. Without biases the projections add none (the
//! library needs both).

// The library's parameter name `gate_up_activations_T`.
#![allow(non_snake_case)]

pub use kernel::*;

use crate::moe::moe_cte::bwmm_shard_on_block::{NUM_SHARDS, reduce_tiles};
use crate::moe::moe_cte::moe_cte_utils::{TILE_SIZE, first_broken, whole_blocks};

/// The kernel and its phases.
#[nki::nki_module]
pub mod kernel {
    use crate::mlp::mlp_tkg::down_projection_mx_shard_h::down_projection_mx_shard_h;
    use crate::mlp::mlp_tkg::gate_up_projection_mx_shard_h::gate_up_projection_mx_sb;
    use crate::mlp::mlp_tkg::projection_mx_constants::{ProjConfig, proj_config};
    use crate::moe::moe_cte::bwmm_shard_on_block::{NUM_SHARDS, bwmm_output_initialization, reduce_outputs, reduce_tile_count};
    use crate::moe::moe_cte::moe_cte_mx_utils::{
        _generate_expert_index_vector, BWMMMXConfigs, BWMMMXDimensionSizes, H512, InputTensors, MAX_HIDDEN, MIN_HIDDEN, Q_HEIGHT, Q_WIDTH,
        SBUF_QUADRANT_SIZE, SharedBuffers, bwmm_mx_dimension_sizes, load_and_quantize_hidden_states, mx_inputs, mx_options, shared_buffers,
    };
    pub use crate::moe::moe_cte::moe_cte_utils::SkipMode;
    use crate::moe::moe_cte::moe_cte_utils::{BwmmActivations, BwmmMxBiasScales, BwmmMxTensors, BwmmOptions, ShardOnIClamps, checkpointed};
    use crate::moe::moe_cte::moe_cte_utils::{TILE_SIZE, calculate_expert_affinities, gather_token_rows, scatter_token_rows};
    pub use crate::utils::common_types::{ActFnType, ExpertAffinityScaleMode};
    use crate::utils::kernel_helpers::{ClampLimits, apply_activation, clamp};
    use nki::prelude::*;

    /// The intermediate size's alignment: a whole MX block of 8 packed rows.
    pub const MX_I_ALIGN: i64 = 32;

    /// The expert `[1, 1]` int32 of the block in `block_idx` (a `[1, 1]`
    /// view, static or read at a dynamic index).
    #[nki_helper]
    pub fn load_block_expert(block_idx: Tensor) -> Sbuf {
        let expert = nl::ndarray([1, 1], nl::int32, buffer = nl::sbuf);
        nisa::dma_copy(expert, block_idx);
        expert
    }

    /// The gate/up weights `[128, 2, H/512, I]`, their scales (gathered into
    /// `inps.gup_scales_sb`, each MX tile's 16 rows in the quadrants) and
    /// bias `[128, 2, I/512, 4]` (rows past `I_p` zero) of the expert in
    /// `block_expert`; the scales' index vector and its quadrants, which
    /// the down scales reuse.
    #[nki_helper]
    pub fn load_gup_weights_scales_mx(
        inps: InputTensors,
        block_expert: Sbuf,
        prj_cfg: ProjConfig,
        skip_dma: SkipMode,
    ) -> (Sbuf, Option<Sbuf>, Sbuf, i64) {
        let (n_h, i, n_i) = (prj_cfg.n_h512_tile, prj_cfg.i, prj_cfg.n_total_i512_tile);
        let gup = inps.gate_up_proj_weight;
        let w = nl::ndarray([TILE_SIZE, 2, n_h, i], gup.dtype(), buffer = nl::sbuf);
        let pattern = [[2 * n_h * i, TILE_SIZE], [n_h * i, 2], [i, n_h], [1, i]];
        let src = gup.ap(pattern, offset = 0, scalar_offset = block_expert, indirect_dim = 0);
        load_skipping(w, src, skip_dma.skip_weight);
        let scale = inps.gate_up_proj_scale;
        let rows = scale.shape()[1];
        let n_quadrants = TILE_SIZE / SBUF_QUADRANT_SIZE;
        let idx = _generate_expert_index_vector(block_expert, inps.p_gup_idx_vector, rows, n_quadrants, 0);
        let view = scale.reshape([scale.shape()[0] * rows, 2, n_h, i]);
        nisa::dma_copy(
            inps.gup_scales_sb,
            view.ap(pattern, offset = 0, vector_offset = idx, indirect_dim = 0),
            oob_mode = nisa::oob_mode::skip,
        );
        let mut bias: Option<Sbuf> = None;
        let gub = inps.gate_and_up_proj_bias;
        if let Some(b) = gub {
            let i_p = b.shape()[1];
            let b_sb = nl::ndarray([TILE_SIZE, 2, n_i, Q_WIDTH], b.dtype(), buffer = nl::sbuf);
            if i_p < TILE_SIZE {
                nisa::memset(b_sb, 0.0);
            }
            let bpat = [[2 * n_i * Q_WIDTH, i_p], [n_i * Q_WIDTH, 2], [Q_WIDTH, n_i], [1, Q_WIDTH]];
            load_skipping(
                b_sb[s![0..i_p, .., .., ..]],
                b.ap(bpat, offset = 0, scalar_offset = block_expert, indirect_dim = 0),
                skip_dma.skip_weight,
            );
            bias = Some(b_sb);
        }
        (w, bias, idx, n_quadrants)
    }

    /// `src` into `dst`, rows out of range skipped when `skip`.
    #[nki_helper]
    pub fn load_skipping(dst: Sbuf, src: Tensor, skip: bool) {
        if skip {
            nisa::dma_copy(dst, src, oob_mode = nisa::oob_mode::skip);
        } else {
            nisa::dma_copy(dst, src);
        }
    }

    /// The down weights `[I_p, I/512, H]` of the expert in `block_expert`
    /// into `buffers.down_weight_qtz`, their scales into
    /// `buffers.down_scale_sb` (the gate/up index vector `gup_idx` reused
    /// when the quadrants match), and its bias `[1, H]` when given.
    #[nki_helper]
    pub fn load_down_proj_weights_mx(
        inps: InputTensors,
        block_expert: Sbuf,
        buffers: SharedBuffers,
        dims: BWMMMXDimensionSizes,
        skip_dma: SkipMode,
        gup_idx: Sbuf,
        gup_n_quadrants: i64,
    ) -> Option<Sbuf> {
        let (p_i, h) = (dims.p_i, dims.h);
        let n_i = buffers.down_weight_qtz.shape()[1];
        let dw = inps.down_proj_weight;
        let pattern = [[n_i * h, p_i], [h, n_i], [1, h]];
        let src = dw.ap(pattern, offset = 0, scalar_offset = block_expert, indirect_dim = 0);
        load_skipping(buffers.down_weight_qtz[s![0..p_i, .., ..]], src, skip_dma.skip_weight);
        let scale = inps.down_proj_scale;
        let rows = scale.shape()[1];
        let n_quadrants = p_i / SBUF_QUADRANT_SIZE;
        let n_remaining = p_i % SBUF_QUADRANT_SIZE / Q_HEIGHT;
        let mut idx = gup_idx;
        if n_quadrants != gup_n_quadrants {
            idx = _generate_expert_index_vector(block_expert, inps.p_down_idx_vector, rows, n_quadrants, n_remaining);
        }
        let view = scale.reshape([scale.shape()[0] * rows, n_i, h]);
        nisa::dma_copy(
            buffers.down_scale_sb[s![0..p_i, .., ..]],
            view.ap(pattern, offset = 0, vector_offset = idx[s![0..p_i, ..]], indirect_dim = 0),
            oob_mode = nisa::oob_mode::skip,
        );
        load_down_bias(inps, block_expert, h, skip_dma)
    }

    /// The down bias `[1, H]` of the expert in `block_expert`, when given.
    #[nki_helper]
    pub fn load_down_bias(inps: InputTensors, block_expert: Sbuf, h: i64, skip_dma: SkipMode) -> Option<Sbuf> {
        let mut bias: Option<Sbuf> = None;
        let db = inps.down_proj_bias;
        if let Some(b) = db {
            let b_sb = nl::ndarray([1, h], b.dtype(), buffer = nl::sbuf);
            load_skipping(b_sb, b.ap([[h, 1], [1, h]], offset = 0, scalar_offset = block_expert, indirect_dim = 0), skip_dma.skip_weight);
            bias = Some(b_sb);
        }
        bias
    }

    /// The block's gated product `act(clamp(gate)) · clamp(up)` `[128,
    /// I/512, B, 4]` bfloat16 of the quantized rows in `buffers`, through
    /// the gate/up weights `w` `[128, 2, H/512, I]` (scales in
    /// `inps.gup_scales_sb`) and bias `bias` `[128, 2, I/512, 4]`.
    #[nki_helper(target = "trn3")]
    pub fn compute_gate_up_mx(
        inps: InputTensors,
        buffers: SharedBuffers,
        w: Sbuf,
        bias: Option<Sbuf>,
        cfg: BWMMMXConfigs,
        prj_cfg: ProjConfig,
    ) -> Sbuf {
        let (xq, xs, ws) = (buffers.hidden_qtz_sb, buffers.hidden_scale_sb, inps.gup_scales_sb);
        let mut gate_bias: Option<Sbuf> = None;
        let mut up_bias: Option<Sbuf> = None;
        if let Some(b) = bias {
            gate_bias = Some(b[s![.., 0, .., ..]]);
            up_bias = Some(b[s![.., 1, .., ..]]);
        }
        let gate: Sbuf = gate_up_projection_mx_sb(xq, xs, w[s![.., 0, .., ..]], ws[s![.., 0, .., ..]], gate_bias, prj_cfg);
        clamp(gate, cfg.clamps.gate_clamp_upper_limit, cfg.clamps.gate_clamp_lower_limit);
        let up = gate_up_projection_mx_sb(xq, xs, w[s![.., 1, .., ..]], ws[s![.., 1, .., ..]], up_bias, prj_cfg);
        clamp(up, cfg.clamps.up_clamp_upper_limit, cfg.clamps.up_clamp_lower_limit);
        apply_activation(gate, gate, cfg.activation_function);
        let inter = nl::ndarray(gate.shape(), nl::bfloat16, buffer = nl::sbuf);
        nisa::tensor_tensor(inter, gate, up, nl::multiply);
        inter
    }

    /// What every block of a call reads and writes.
    #[nki_object]
    pub struct BlockContext {
        /// The call's tensors.
        pub inps: InputTensors,
        /// The buffers every block reuses.
        pub buffers: SharedBuffers,
        /// The call's sizes.
        pub dims: BWMMMXDimensionSizes,
        /// The call's options.
        pub cfg: BWMMMXConfigs,
        /// The projections' tiling (one program, the whole hidden dim).
        pub prj_cfg: ProjConfig,
        /// This program's slot `[T, H]` of the output.
        pub output_slot: Tensor,
    }

    /// The old rows `[128, B/128, H]` of the block's tokens (`token_indices`
    /// `[128, B/128]`) in this program's slot `output_slot` `[T, H]`, in
    /// the compute dtype (zero where skipped).
    #[nki_helper]
    pub fn load_prev_block(output_slot: Hbm, token_indices: Sbuf, dims: BWMMMXDimensionSizes, cfg: BWMMMXConfigs) -> Sbuf {
        let block_old = nl::ndarray([TILE_SIZE, dims.n_b128_tiles, dims.h], cfg.compute_dtype, buffer = nl::sbuf);
        let skip = cfg.skip_dma.skip_token;
        if skip {
            nisa::memset(block_old, 0.0);
        }
        for n in 0..dims.n_b128_tiles {
            gather_token_rows(block_old[s![.., n, ..]], output_slot, token_indices[s![.., n..n + 1]], 0, skip);
        }
        block_old
    }

    /// The block's rows in an output slot: `token_indices` with, under
    /// `skip_token`, each padding `-1` moved to `2·T`, past both slots, so
    /// its load and store are skipped (a `-1` on the slot-1 view would name
    /// the last row of slot 0, which program 0 writes).
    #[nki_helper]
    pub fn slot_token_indices(token_indices: Sbuf, dims: BWMMMXDimensionSizes, skip_token: bool) -> Sbuf {
        if !skip_token {
            return token_indices;
        }
        let past = nl::ndarray(token_indices.shape(), nl::int32, buffer = nl::sbuf);
        let shift = (NUM_SHARDS * dims.t + 1) as f64;
        nisa::tensor_scalar(past, token_indices, nl::less, 0.0, op1 = nl::multiply, operand1 = shift);
        let rows = nl::ndarray(token_indices.shape(), nl::int32, buffer = nl::sbuf);
        nisa::tensor_tensor(rows, token_indices, past, nl::add);
        rows
    }

    /// One block into this program's slot `ctx.output_slot` (module
    /// docs): its rows (`positions` the `[1, B]` view of its token ids,
    /// `token_tiles` the `[128, B/128]` view of the same ids a tile per
    /// column) and the expert in `block_expert`; `first` when nothing of
    /// this program's is in the slot yet.
    #[nki_helper(target = "trn3")]
    pub fn compute_one_block(ctx: BlockContext, positions: Tensor, token_tiles: Tensor, block_expert: Sbuf, first: bool) {
        let (inps, buffers, dims, cfg, prj_cfg, output_slot) = (ctx.inps, ctx.buffers, ctx.dims, ctx.cfg, ctx.prj_cfg, ctx.output_slot);
        let nt = dims.n_b128_tiles;
        let token_indices = nl::ndarray([TILE_SIZE, nt], nl::int32, buffer = nl::sbuf);
        nisa::dma_copy(token_indices, token_tiles);
        load_and_quantize_hidden_states(inps, positions, buffers, dims, cfg);
        let (w, gup_bias, idx, nq) = load_gup_weights_scales_mx(inps, block_expert, prj_cfg, cfg.skip_dma);
        let down_bias = load_down_proj_weights_mx(inps, block_expert, buffers, dims, cfg.skip_dma, idx, nq);
        let aff = inps.expert_affinities_masked;
        let affinity = calculate_expert_affinities(aff, token_indices, block_expert, dims.e, nl::float32, cfg.skip_dma);
        let inter = compute_gate_up_mx(inps, buffers, w, gup_bias, cfg, prj_cfg);
        let block_new = down_projection_mx_shard_h(inter, buffers.down_weight_qtz, buffers.down_scale_sb, down_bias, prj_cfg);
        let slot_rows = slot_token_indices(token_indices, dims, cfg.skip_dma.skip_token);
        let mut block_old: Option<Sbuf> = None;
        if !first {
            block_old = Some(load_prev_block(output_slot, slot_rows, dims, cfg));
        }
        for n in 0..nt {
            let rows = block_new[s![.., n, ..]];
            nisa::tensor_scalar(rows, rows, nl::multiply, affinity[s![.., n..n + 1]]);
            if let Some(old) = block_old {
                nisa::tensor_tensor(rows, rows, old[s![.., n, ..]], nl::add);
            }
            scatter_token_rows(output_slot, rows, slot_rows[s![.., n..n + 1]], 0, cfg.skip_dma.skip_token);
        }
    }

    /// Static block `block_idx`; `first` when it is this program's first.
    #[nki_helper(target = "trn3")]
    pub fn compute_static_block(ctx: BlockContext, block_idx: i64, first: bool) {
        let (inps, dims) = (ctx.inps, ctx.dims);
        let expert = load_block_expert(inps.block_to_expert[s![block_idx..block_idx + 1, ..]]);
        let pos = inps.token_position_to_id;
        let positions = pos.reshape([dims.n, dims.b])[s![block_idx..block_idx + 1, ..]];
        let token_tiles = pos.ap([[1, TILE_SIZE], [TILE_SIZE, dims.n_b128_tiles]], offset = block_idx * dims.b);
        compute_one_block(ctx, positions, token_tiles, expert, first);
    }

    /// Blocks `0 .. num_static_blocks` split in two halves, this program's
    /// half into its slot; with an odd count the last block on program 1.
    #[nki_helper(target = "trn3")]
    pub fn process_static_blocks(ctx: BlockContext, num_static_blocks: i64) {
        let dims = ctx.dims;
        let n_blocks_per_shard = num_static_blocks / dims.num_shards;
        for k in 0..n_blocks_per_shard {
            let block_idx = n_blocks_per_shard * dims.shard_id + k;
            compute_static_block(ctx, block_idx, k == 0);
        }
        if num_static_blocks % dims.num_shards == 1 && dims.shard_id == 1 {
            let first = n_blocks_per_shard == 0;
            compute_static_block(ctx, num_static_blocks - 1, first);
        }
    }

    /// The dynamic loop from block `num_static_blocks` on, two blocks per
    /// iteration (program `s` on `index + s`) while `conditions[index]` is
    /// nonzero.
    #[nki_helper(target = "trn3")]
    pub fn process_dynamic_blocks(ctx: BlockContext, conditions: Hbm, num_static_blocks: i64) {
        let (inps, dims) = (ctx.inps, ctx.dims);
        let cond_col = conditions.reshape([dims.cond_vec_len, 1]);
        let cond = nl::ndarray([1, 1], nl::int32, buffer = nl::sbuf);
        nisa::dma_copy(cond, cond_col[s![num_static_blocks..num_static_blocks + 1, ..]]);
        let index = nl::ndarray([1, 1], nl::int32, buffer = nl::sbuf);
        nisa::memset(index, num_static_blocks as f64);
        let blocks = inps.token_position_to_id.reshape([dims.n, dims.b]);
        let reg = nisa::register_alloc();
        nisa::register_load(reg, cond);
        nl::while_loop(reg, |r| {
            let dyn_block_idx = nl::ndarray([1, 1], nl::int32, buffer = nl::sbuf);
            nisa::tensor_scalar(dyn_block_idx, index, nl::add, dims.shard_id as f64);
            let experts = inps.block_to_expert;
            let expert = load_block_expert(experts.ap([[1, 1], [1, 1]], offset = 0, scalar_offset = dyn_block_idx, indirect_dim = 0));
            let positions = blocks.ap([[dims.b, 1], [1, dims.b]], offset = 0, scalar_offset = dyn_block_idx, indirect_dim = 0);
            let nt = dims.n_b128_tiles;
            let token_tiles = blocks.ap([[1, TILE_SIZE], [TILE_SIZE, nt]], offset = 0, scalar_offset = dyn_block_idx, indirect_dim = 0);
            compute_one_block(ctx, positions, token_tiles, expert, false);
            nisa::tensor_scalar(index, index, nl::add, 2.0);
            nisa::dma_copy(cond, cond_col.ap([[1, 1], [1, 1]], offset = 0, scalar_offset = index, indirect_dim = 0));
            nisa::register_load(r, cond);
            r
        });
    }

    /// `(static blocks, dynamic blocks)` of the hybrid loop (module docs).
    #[nki_helper]
    pub fn static_dynamic_split(dims: BWMMMXDimensionSizes, n_static_blocks: i64, n_dynamic_blocks: i64) -> (i64, i64) {
        let n = dims.n;
        if n_static_blocks > 0 {
            let mut n_dyn = n - n_static_blocks;
            if n_dyn % 2 == 1 {
                n_dyn += 1;
            }
            return (n - n_dyn, n_dyn);
        }
        if n_dynamic_blocks < 0 || n_dynamic_blocks > n {
            let n_static = dims.t / dims.b;
            return (n_static, n - n_static);
        }
        (n - n_dynamic_blocks, n_dynamic_blocks)
    }

    /// The blocks of this program into its slot of a new `[2, T, H]`
    /// output, the slots reduced into slot 0 at the end.
    #[nki_helper(target = "trn3")]
    pub fn _bwmm_shard_on_block_mx(
        inps: InputTensors,
        dims: BWMMMXDimensionSizes,
        cfg: BWMMMXConfigs,
        n_static_blocks: i64,
        n_dynamic_blocks: i64,
    ) -> Hbm {
        let prj_cfg = proj_config(dims.h, dims.i, dims.b, 1, 0);
        let buffers = shared_buffers(inps, dims, cfg, prj_cfg);
        let output = nl::ndarray([NUM_SHARDS, dims.t, dims.h], inps.hidden_states.dtype(), buffer = nl::shared_hbm);
        let slot = output[s![dims.shard_id, .., ..]];
        bwmm_output_initialization(slot, dims.shard_id);
        let ctx = BlockContext { inps, buffers, dims, cfg, prj_cfg, output_slot: slot };
        let cond = inps.conditions;
        if let Some(c) = cond {
            let (n_static, n_dyn): (i64, i64) = static_dynamic_split(dims, n_static_blocks, n_dynamic_blocks);
            if n_static > 0 {
                process_static_blocks(ctx, n_static);
            }
            if n_dyn > 0 {
                process_dynamic_blocks(ctx, c, n_static);
            }
        } else {
            process_static_blocks(ctx, dims.n);
        }
        // Both programs' slots are complete before either reads the other's.
        nisa::core_barrier(output, [0, 1]);
        let tiles: i64 = reduce_tile_count(dims.t, cfg.skip_dma.skip_token);
        let first_half = tiles / NUM_SHARDS;
        let by_row = output.permute([1, 0, 2]);
        if dims.shard_id == 0 {
            reduce_outputs(by_row, 0, first_half);
        } else {
            reduce_outputs(by_row, first_half, tiles - first_half);
        }
        output
    }

    /// The rules of [`bwmm_shard_on_block_mx_violation`](super::bwmm_shard_on_block_mx_violation)
    /// and the tensors' shapes, checked when the kernel is traced (the
    /// library's `check_kernel_compatibility`).
    #[nki_helper]
    pub fn check_kernel_compatibility(
        inps: InputTensors,
        dims: BWMMMXDimensionSizes,
        cfg: BWMMMXConfigs,
        scales: bool,
        activations: bool,
        n_static_blocks: i64,
    ) {
        let (b, h, i, n, t) = (dims.b, dims.h, dims.i, dims.n, dims.t);
        let positions = inps.token_position_to_id.shape()[0];
        let k = "bwmm_shard_on_block_mx";
        assert!(dims.num_shards == NUM_SHARDS, "{k}: runs on exactly 2 programs (LNC2), got {}", dims.num_shards);
        assert!(h >= MIN_HIDDEN && h <= MAX_HIDDEN && h % H512 == 0, "{k}: H must be a multiple of 512 in 512..=8192, got {h}");
        assert!(
            b > 0 && b % TILE_SIZE == 0 && (b <= 2 * TILE_SIZE || b % (2 * TILE_SIZE) == 0),
            "{k}: block_size must be 128, or a positive multiple of 256 (8 transposes a PSUM bank), got {b}"
        );
        assert!(
            dims.e > 0 && positions > 0 && positions % b == 0,
            "{k}: E must be positive and token_position_to_id's length a positive multiple of block_size, got E = {} and {positions} positions",
            dims.e
        );
        assert!(
            i > 0 && i % MX_I_ALIGN == 0 && (i <= H512 || i % H512 == 0),
            "{k}: I must be a positive multiple of 32, below 512 or a multiple of 512, got {i}"
        );
        assert!(cfg.is_tensor_update_accumulating, "{k}: is_tensor_update_accumulating must be True (top-k > 1), as the library's");
        let reduce_rows: i64 = reduce_tile_count(t, cfg.skip_dma.skip_token) * TILE_SIZE;
        assert!(
            reduce_rows <= t,
            "{k}: the final reduction reads whole 128-row tiles of the token rows (T - 1, or T with skip_token), so T = {t} does not fit"
        );
        assert!(
            !cfg.use_dynamic_while || dims.cond_vec_len == n + 2,
            "{k}: conditions must have N + 2 elements (N = {n}), got {}",
            dims.cond_vec_len
        );
        assert!(!cfg.use_dynamic_while || n_static_blocks < n, "{k}: n_static_blocks must be below N = {n}, got {n_static_blocks}");
        let mode = cfg.scaling_mode;
        assert!(
            mode == ExpertAffinityScaleMode::POST_SCALE,
            "{k}: expert_affinities_scaling_mode must be POST_SCALE (the library's kernel scales the output in every mode), got {mode}"
        );
        assert!(scales, "{k}: gate_up_proj_scale and down_proj_scale must be given");
        assert!(!activations, "{k}: gate_up_activations_T and down_activations are not supported (as the library's)");
        let (gb, db) = (inps.gate_and_up_proj_bias, inps.down_proj_bias);
        assert!(gb.is_some() == db.is_some(), "{k}: gate_and_up_proj_bias and down_proj_bias are given together");
    }

    /// Blockwise MoE matmul with MX weights over blocks of `block_size`
    /// token positions (module docs); returns `[2, T, H]`, slot 0 the
    /// result, slot 1 zero.
    #[nki_kernel]
    pub fn bwmm_shard_on_block_mx(
        #[spread] t: BwmmMxTensors,
        #[dtypes(int32)] conditions: Option<Hbm>,
        #[spread] extra: BwmmMxBiasScales,
        #[range(>= 1)] block_size: Option<i64>,
        #[default(-1)] n_static_blocks: i64,
        #[default(55)] n_dynamic_blocks: i64,
        #[spread] act: BwmmActivations,
        #[spread] common: BwmmOptions,
        weight_dtype: Option<Dtype>,
        #[default(true)] is_tensor_update_accumulating: bool,
        #[default(ExpertAffinityScaleMode::POST_SCALE)] expert_affinities_scaling_mode: ExpertAffinityScaleMode,
        #[spread] clamps: ShardOnIClamps,
    ) -> Hbm {
        let mut b = 0;
        if let Some(v) = block_size {
            b = v;
        }
        assert!(block_size.is_some(), "bwmm_shard_on_block_mx: block_size must be given");
        let opts = mx_options(common, weight_dtype, is_tensor_update_accumulating, expert_affinities_scaling_mode, clamps);
        // The whole gate/up scale tile: every program takes whole blocks.
        let (inps, cfg, scales) = mx_inputs(t, extra, conditions, opts, 1);
        let dims = bwmm_mx_dimension_sizes(inps, b);
        check_kernel_compatibility(inps, dims, cfg, scales, checkpointed(act), n_static_blocks);
        _bwmm_shard_on_block_mx(inps, dims, cfg, n_static_blocks, n_dynamic_blocks)
    }
}

/// Why a `bwmm_shard_on_block_mx` call is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MoeCteMxRule {
    /// Not exactly two programs.
    Programs,
    /// `H` is not a multiple of 512 in `512..=8192`.
    Hidden,
    /// `block_size` is not 128 or a positive multiple of 256.
    BlockSize,
    /// No experts, or `token_position_to_id` is not whole blocks.
    Blocks,
    /// `I` is not a positive multiple of 32, below 512 or a multiple of 512.
    Intermediate,
    /// `is_tensor_update_accumulating=False`.
    Accumulating,
    /// The output's reduction would read past the token rows.
    ReduceRows,
    /// `conditions` is not `N + 2` long.
    Conditions,
    /// `n_static_blocks` is not below `N` (with `conditions`).
    StaticBlocks,
    /// A scaling mode other than `POST_SCALE`.
    ScalingMode,
    /// A quantization scale missing.
    Scales,
    /// `gate_up_activations_T` or `down_activations` given.
    Activations,
    /// Only one of the two biases.
    Bias,
}

impl MoeCteMxRule {
    /// The rule in words (the start of the kernel's message).
    pub const fn message(self) -> &'static str {
        match self {
            MoeCteMxRule::Programs => "bwmm_shard_on_block_mx: runs on exactly 2 programs (LNC2)",
            MoeCteMxRule::Hidden => "bwmm_shard_on_block_mx: H must be a multiple of 512 in 512..=8192",
            MoeCteMxRule::BlockSize => "bwmm_shard_on_block_mx: block_size must be 128, or a positive multiple of 256",
            MoeCteMxRule::Blocks => {
                "bwmm_shard_on_block_mx: E must be positive and token_position_to_id's length a positive multiple of block_size"
            }
            MoeCteMxRule::Intermediate => "bwmm_shard_on_block_mx: I must be a positive multiple of 32, below 512 or a multiple of 512",
            MoeCteMxRule::Accumulating => "bwmm_shard_on_block_mx: is_tensor_update_accumulating must be True (top-k > 1)",
            MoeCteMxRule::ReduceRows => "bwmm_shard_on_block_mx: the final reduction reads whole 128-row tiles of the token rows",
            MoeCteMxRule::Conditions => "bwmm_shard_on_block_mx: conditions must have N + 2 elements",
            MoeCteMxRule::StaticBlocks => "bwmm_shard_on_block_mx: n_static_blocks must be below N",
            MoeCteMxRule::ScalingMode => "bwmm_shard_on_block_mx: expert_affinities_scaling_mode must be POST_SCALE",
            MoeCteMxRule::Scales => "bwmm_shard_on_block_mx: gate_up_proj_scale and down_proj_scale must be given",
            MoeCteMxRule::Activations => "bwmm_shard_on_block_mx: gate_up_activations_T and down_activations are not supported",
            MoeCteMxRule::Bias => "bwmm_shard_on_block_mx: gate_and_up_proj_bias and down_proj_bias are given together",
        }
    }
}

crate::__blockwise_call! {
    /// An MX blockwise call as the rules read it: the sizes and the options.
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub struct BwmmShardOnBlockMxCall {
        /// Rows of `hidden_states` (`T`, the padding row included unless skipped).
        pub tokens: i64,
        /// `skip_dma.skip_token`.
        pub skip_token: bool,
        /// `is_tensor_update_accumulating`.
        pub accumulating: bool,
        /// Length of `conditions` (0 without).
        pub conditions: i64,
        /// `n_static_blocks`.
        pub n_static_blocks: i64,
        /// `expert_affinities_scaling_mode`.
        pub scaling_mode: ExpertAffinityScaleMode,
        /// Whether both quantization scales are given.
        pub scales: bool,
        /// Whether an activation output is given.
        pub activations: bool,
        /// Whether exactly one of the two biases is given.
        pub one_bias: bool,
    }
}

/// The first rule `c` breaks, in the kernel's order.
pub const fn bwmm_shard_on_block_mx_violation(c: BwmmShardOnBlockMxCall) -> Option<MoeCteMxRule> {
    let b = c.block_size;
    let i = c.intermediate;
    let n = if b > 0 { c.positions / b } else { 0 };
    first_broken(&[
        (c.programs != NUM_SHARDS, MoeCteMxRule::Programs),
        (c.hidden < 512 || c.hidden > 8192 || c.hidden % 512 != 0, MoeCteMxRule::Hidden),
        (b <= 0 || b % TILE_SIZE != 0 || (b > 2 * TILE_SIZE && b % (2 * TILE_SIZE) != 0), MoeCteMxRule::BlockSize),
        (!whole_blocks(c.experts, c.positions, b), MoeCteMxRule::Blocks),
        (i <= 0 || i % 32 != 0 || (i > 512 && i % 512 != 0), MoeCteMxRule::Intermediate),
        (!c.accumulating, MoeCteMxRule::Accumulating),
        (reduce_tiles(c.tokens, c.skip_token) * TILE_SIZE > c.tokens, MoeCteMxRule::ReduceRows),
        (c.conditions != 0 && c.conditions != n + 2, MoeCteMxRule::Conditions),
        (c.conditions != 0 && c.n_static_blocks >= n, MoeCteMxRule::StaticBlocks),
        (!matches!(c.scaling_mode, ExpertAffinityScaleMode::POST_SCALE), MoeCteMxRule::ScalingMode),
        (!c.scales, MoeCteMxRule::Scales),
        (c.activations, MoeCteMxRule::Activations),
        (c.one_bias, MoeCteMxRule::Bias),
    ])
}

/// A `bwmm_shard_on_block_mx` call checked at compile time, or a compile
/// error naming the rule it breaks. Options not given take the kernel's
/// defaults (two programs, accumulating, `POST_SCALE`, no `conditions`,
/// both scales, padding rows named).
///
/// ```
/// let c = nkilib::bwmm_shard_on_block_mx_config!(tokens = 1025, hidden = 3072, intermediate = 384, experts = 128, block_size = 256, positions = 146 * 256);
/// assert_eq!((c.block_size, c.programs), (256, 2));
/// ```
///
/// ```compile_fail
/// // The kernel scales the output: PRE_SCALE is refused.
/// use nkilib::moe::moe_cte::bwmm_shard_on_block_mx::ExpertAffinityScaleMode;
/// let c = nkilib::bwmm_shard_on_block_mx_config!(tokens = 1025, hidden = 3072, intermediate = 384, experts = 128, block_size = 256, positions = 146 * 256, scaling_mode = ExpertAffinityScaleMode::PRE_SCALE);
/// ```
#[macro_export]
macro_rules! bwmm_shard_on_block_mx_config {
    (tokens = $t:expr, $($rest:tt)*) => {
        $crate::__blockwise_config!(
            [$crate::moe::moe_cte::bwmm_shard_on_block_mx::BwmmShardOnBlockMxCall],
            [$crate::moe::moe_cte::bwmm_shard_on_block_mx::bwmm_shard_on_block_mx_violation],
            {
                tokens: $t,
                skip_token: false,
                accumulating: true,
                conditions: 0,
                n_static_blocks: -1,
                scaling_mode: $crate::moe::moe_cte::bwmm_shard_on_block_mx::ExpertAffinityScaleMode::POST_SCALE,
                scales: true,
                activations: false,
                one_bias: false,
            },
            $($rest)*
        )
    };
}
