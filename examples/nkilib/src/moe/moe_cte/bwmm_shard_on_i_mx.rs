//! Blockwise MoE matmul sharded on the intermediate dimension with MX
//! weights (trn3): the library's `blockwise_mm_shard_intermediate_mx` and
//! its `_hybrid` form (`bwmm_shard_on_I_mx`), the context-encoding MoE layer
//! of [`bwmm_shard_on_i`](crate::moe::moe_cte::bwmm_shard_on_i) whose
//! gate/up and down weights are MXFP4 (`float4_e2m1fn_x4`) or MXFP8
//! (`float8_e4m3fn_x4`, `float8_e5m2_x4`) with `uint8` block scales, every
//! projection an `nc_matmul_mx` of the token rows quantized on chip to
//! MXFP8 (the loading and quantization of
//! [`moe_cte_mx_utils`](crate::moe::moe_cte::moe_cte_mx_utils)).
//!
//! Both programs walk every block; program `s` of 2 computes the
//! intermediate columns `s·I/2 ..` of the block's expert and owns the token
//! tiles `s·B/256 ..` of its output:
//!
//! ```text
//! e = block_to_expert[blk]                              # read on the device
//! xq, xs = the block's rows in MXFP8                    # [128, H/512, B]
//! W_gu, S_gu, b_gu = expert e's gate/up columns s·I/2 .. (scales gathered into their quadrants)
//! gate = clamp(Σ_H/512 nc_matmul_mx(W_g, xq) + b_g)     # [128, I/1024, B, 4] bf16, 256 tokens a bank
//! up   = clamp(Σ_H/512 nc_matmul_mx(W_u, xq) + b_u)
//! inter = act(gate) · up                                # bf16
//! p = Σ_I/1024 nc_matmul_mx(quantize_mx(inter), W_down[e, s·I/2 ..])   # [128, B/128, H] partial
//!     (+ b_down[e] on program 0)
//! y = p[my tiles] + the other program's p[my tiles]     # one sendrecv per 128 tokens
//! out[tok] = y · aff[tok·E + e] (+ out[tok] when accumulating)   # then a core barrier
//! ```
//!
//! The output is `[T, H]`, zeroed first when accumulating (top-k > 1); the
//! barrier after each block makes its rows visible before the next block
//! reads them. The affinity multiplies the output (`POST_SCALE`).
//!
//! Tiling: the hidden dim on the partitions in 512-row MX tiles (128
//! partitions of 4 packed values) for the gate/up contraction, this
//! program's `I/2` product columns on the partitions (`[128, I/1024, B, 4]`,
//! the layout `quantize_mx` reads) for the down contraction, tokens on the
//! partitions (128 a tile) for the down output, bfloat16 PSUM banks of
//! 1024 (or 512) hidden columns. The library prefetches the next block's
//! rows while a block computes; here each block loads its own rows, with
//! the same arithmetic.
//!
//! The hybrid form runs the non-padded blocks only, in two loops:
//!
//! ```text
//! for blk in 0 .. n_static:      # unrolled when traced; num_static_block, else N - E made even
//!     the block as above; core barrier
//! blk = n_static                 # an SBUF counter
//! for _ in dynamic_range(n_static, Σ conditions):   # on the device
//!     e, tokens read at blk by scalar_offset; the block as above; core barrier; blk += 1
//! ```
//!
//! so it runs blocks `0 .. max(n_static, Σ conditions)` (`conditions[N + 1]`
//! marks the non-padded blocks with ones, the padding ones after them with
//! zeros).
//!
//! The library adds the down bias on both programs, so the sum of the two
//! partials holds it twice; here program 0 adds it, once, as the library's
//! torch reference (and the down projection's own docs) have it.
//!
//! Refused by name (see [`ShardOnIMxRule`]): scaling modes other than
//! `POST_SCALE` (the library asserts `PRE_SCALE` out and has no affinity
//! without it), `skip_weight` (as the library's compatibility check), a
//! missing scale, one bias alone. Without biases the projections add none
//! (the library needs both).

pub use kernel::*;

use crate::moe::moe_cte::bwmm_shard_on_block::NUM_SHARDS;
use crate::moe::moe_cte::moe_cte_utils::{TILE_SIZE, first_broken, whole_blocks};

/// The kernels and their phases.
#[nki::nki_module]
pub mod kernel {
    use crate::mlp::mlp_tkg::down_projection_mx_shard_h::down_projection_mx_shard_h;
    use crate::mlp::mlp_tkg::projection_mx_constants::{ProjConfig, proj_config};
    use crate::moe::moe_cte::bwmm_shard_on_block::{NUM_SHARDS, bwmm_output_initialization, finish_output_rows};
    use crate::moe::moe_cte::bwmm_shard_on_block_mx::{compute_gate_up_mx, load_block_expert, load_down_bias, load_skipping};
    use crate::moe::moe_cte::bwmm_shard_on_i::{checked_static_blocks, count_active_blocks};
    use crate::moe::moe_cte::moe_cte_mx_utils::{
        _generate_expert_index_vector, BWMMMXConfigs, BWMMMXDimensionSizes, H512, InputTensors, MAX_HIDDEN, MIN_HIDDEN, Q_WIDTH,
        SBUF_QUADRANT_SIZE, SharedBuffers, bwmm_mx_dimension_sizes, load_and_quantize_hidden_states, mx_inputs, mx_options, shared_buffers,
    };
    pub use crate::moe::moe_cte::moe_cte_utils::SkipMode;
    use crate::moe::moe_cte::moe_cte_utils::{BwmmMxBiasScales, BwmmMxTensors, BwmmOptions, ShardOnIClamps};
    use crate::moe::moe_cte::moe_cte_utils::{TILE_SIZE, calculate_expert_affinities, gather_token_rows, scatter_token_rows};
    pub use crate::utils::common_types::{ActFnType, ExpertAffinityScaleMode};
    use crate::utils::kernel_helpers::ClampLimits;
    use nki::prelude::*;

    /// The pipe of the partial-output exchange.
    pub const PIPE_ID: i64 = 0;
    /// Block sizes are whole multiples of this (a 128-token tile per program).
    pub const BLOCK_ALIGN: i64 = 256;
    /// `I` is a whole number of 512-column tiles per program.
    pub const I_ALIGN: i64 = 1024;

    /// This program's gate/up weights `[128, 2, H/512, I/2]` (columns
    /// `s·I/2 ..` of expert `block_expert`'s), their scales (gathered into
    /// `inps.gup_scales_sb`, each MX tile's 16 rows in the quadrants) and
    /// bias `[128, 2, I/1024, 4]`; the scales' index vector, which the down
    /// scales reuse.
    #[nki_helper]
    pub fn load_gup_weights_scales_shard_on_intermediate_mx(
        inps: InputTensors,
        block_expert: Sbuf,
        dims: BWMMMXDimensionSizes,
        prj_cfg: ProjConfig,
        skip_dma: SkipMode,
    ) -> (Sbuf, Option<Sbuf>, Sbuf) {
        let (n_h, i, i_sh, n_i_sh) = (prj_cfg.n_h512_tile, dims.i, prj_cfg.i, prj_cfg.n_total_i512_tile);
        let gup = inps.gate_up_proj_weight;
        let w = nl::ndarray([TILE_SIZE, 2, n_h, i_sh], gup.dtype(), buffer = nl::sbuf);
        // Every column pattern reads the whole I row and keeps this program's half.
        let pattern = [[2 * n_h * i, TILE_SIZE], [n_h * i, 2], [i, n_h], [1, i_sh]];
        let col0 = dims.shard_id * i_sh;
        load_skipping(w, gup.ap(pattern, offset = col0, scalar_offset = block_expert, indirect_dim = 0), skip_dma.skip_weight);
        let scale = inps.gate_up_proj_scale;
        let rows = scale.shape()[1];
        let idx = _generate_expert_index_vector(block_expert, inps.p_gup_idx_vector, rows, TILE_SIZE / SBUF_QUADRANT_SIZE, 0);
        let view = scale.reshape([scale.shape()[0] * rows, 2, n_h, i]);
        nisa::dma_copy(
            inps.gup_scales_sb,
            view.ap(pattern, offset = col0, vector_offset = idx, indirect_dim = 0),
            oob_mode = nisa::oob_mode::skip,
        );
        let mut bias: Option<Sbuf> = None;
        let gub = inps.gate_and_up_proj_bias;
        if let Some(b) = gub {
            let n_i = dims.i / H512;
            let b_sb = nl::ndarray([TILE_SIZE, 2, n_i_sh, Q_WIDTH], b.dtype(), buffer = nl::sbuf);
            let bpat = [[2 * n_i * Q_WIDTH, TILE_SIZE], [n_i * Q_WIDTH, 2], [Q_WIDTH, n_i_sh], [1, Q_WIDTH]];
            let src = b.ap(bpat, offset = dims.shard_id * n_i_sh * Q_WIDTH, scalar_offset = block_expert, indirect_dim = 0);
            load_skipping(b_sb, src, skip_dma.skip_weight);
            bias = Some(b_sb);
        }
        (w, bias, idx)
    }

    /// This program's down weights (the 512-row tiles `s·I/1024 ..` of
    /// expert `block_expert`'s `[128, I/512, H]`) into
    /// `buffers.down_weight_qtz`, their scales into `buffers.down_scale_sb`
    /// by the gate/up index vector `gup_idx` (both gather all 4 quadrants),
    /// and its bias `[1, H]` when given.
    #[nki_helper]
    pub fn load_down_proj_weights_shard_on_intermediate_mx(
        inps: InputTensors,
        block_expert: Sbuf,
        buffers: SharedBuffers,
        dims: BWMMMXDimensionSizes,
        skip_dma: SkipMode,
        gup_idx: Sbuf,
    ) -> Option<Sbuf> {
        let h = dims.h;
        let (n_i, n_i_sh) = (dims.i / H512, buffers.down_weight_qtz.shape()[1]);
        let pattern = [[n_i * h, TILE_SIZE], [h, n_i_sh], [1, h]];
        let offset = dims.shard_id * n_i_sh * h;
        let dw = inps.down_proj_weight;
        let src = dw.ap(pattern, offset = offset, scalar_offset = block_expert, indirect_dim = 0);
        load_skipping(buffers.down_weight_qtz, src, skip_dma.skip_weight);
        let scale = inps.down_proj_scale;
        let rows = scale.shape()[1];
        let view = scale.reshape([scale.shape()[0] * rows, n_i, h]);
        nisa::dma_copy(
            buffers.down_scale_sb,
            view.ap(pattern, offset = offset, vector_offset = gup_idx, indirect_dim = 0),
            oob_mode = nisa::oob_mode::skip,
        );
        load_down_bias(inps, block_expert, h, skip_dma)
    }

    /// This program's token tiles of the block's output, `[128, B/256, H]`
    /// in the output dtype: its partial `block_new` (`[128, B/128, H]`
    /// bfloat16) plus the other program's (which receives this program's
    /// partial of its tiles), times the affinities `affinity` `[128,
    /// B/128]`, plus the old rows of `output` when accumulating.
    #[nki_helper]
    pub fn accumulation_after_down_proj(
        block_new: Sbuf,
        affinity: Sbuf,
        token_indices: Sbuf,
        output: Hbm,
        dims: BWMMMXDimensionSizes,
        cfg: BWMMMXConfigs,
    ) -> Sbuf {
        let half = dims.n_b128_tiles / NUM_SHARDS;
        let peer = NUM_SHARDS - 1 - dims.shard_id;
        let rows = nl::ndarray([TILE_SIZE, half, dims.h], output.dtype(), buffer = nl::sbuf);
        let skip = cfg.skip_dma.skip_token;
        for k in 0..half {
            let own = dims.shard_id * half + k;
            let recv = nl::ndarray([TILE_SIZE, dims.h], block_new.dtype(), buffer = nl::sbuf);
            nisa::sendrecv(block_new[s![.., peer * half + k, ..]], recv, peer, peer, PIPE_ID);
            let y = rows[s![.., k, ..]];
            nisa::tensor_tensor(y, block_new[s![.., own, ..]], recv, nl::add);
            let mut old: Option<Sbuf> = None;
            if cfg.is_tensor_update_accumulating {
                let o = nl::ndarray([TILE_SIZE, dims.h], cfg.compute_dtype, buffer = nl::sbuf);
                if skip {
                    nisa::memset(o, 0.0);
                }
                gather_token_rows(o, output, token_indices[s![.., own..own + 1]], 0, skip);
                old = Some(o);
            }
            finish_output_rows(y, y, None, Some(affinity[s![.., own..own + 1]]), old);
        }
        rows
    }

    /// This program's token tiles `rows` `[128, B/256, H]` to their tokens'
    /// rows of `output` (padding rows skipped under `skip_token`).
    #[nki_helper]
    pub fn store_block_output_shard_over_block_size(
        output: Hbm,
        rows: Sbuf,
        token_indices: Sbuf,
        dims: BWMMMXDimensionSizes,
        skip_dma: SkipMode,
    ) {
        let half = dims.n_b128_tiles / NUM_SHARDS;
        for k in 0..half {
            let own = dims.shard_id * half + k;
            scatter_token_rows(output, rows[s![.., k, ..]], token_indices[s![.., own..own + 1]], 0, skip_dma.skip_token);
        }
    }

    /// One block through this program's intermediate half into `output`
    /// (module docs): its token ids `positions` (`[1, B]`) and
    /// `token_tiles` (`[128, B/128]`, the same ids a tile per column),
    /// static views or read at a dynamic block index, and the expert in
    /// `block_expert`.
    #[nki_helper(target = "trn3")]
    pub fn compute_one_block_mx(
        inps: InputTensors,
        buffers: SharedBuffers,
        dims: BWMMMXDimensionSizes,
        cfg: BWMMMXConfigs,
        prj_cfg: ProjConfig,
        output: Hbm,
        positions: Tensor,
        token_tiles: Tensor,
        block_expert: Sbuf,
    ) {
        let token_indices = nl::ndarray([TILE_SIZE, dims.n_b128_tiles], nl::int32, buffer = nl::sbuf);
        nisa::dma_copy(token_indices, token_tiles);
        load_and_quantize_hidden_states(inps, positions, buffers, dims, cfg);
        let (w, gup_bias, idx) = load_gup_weights_scales_shard_on_intermediate_mx(inps, block_expert, dims, prj_cfg, cfg.skip_dma);
        let down_bias = load_down_proj_weights_shard_on_intermediate_mx(inps, block_expert, buffers, dims, cfg.skip_dma, idx);
        let inter = compute_gate_up_mx(inps, buffers, w, gup_bias, cfg, prj_cfg);
        // The bias once, on program 0's partial (module docs).
        let bias = if dims.shard_id == 0 { down_bias } else { None };
        let block_new = down_projection_mx_shard_h(inter, buffers.down_weight_qtz, buffers.down_scale_sb, bias, prj_cfg);
        let aff = inps.expert_affinities_masked;
        let affinity = calculate_expert_affinities(aff, token_indices, block_expert, dims.e, nl::float32, cfg.skip_dma);
        let rows = accumulation_after_down_proj(block_new, affinity, token_indices, output, dims, cfg);
        store_block_output_shard_over_block_size(output, rows, token_indices, dims, cfg.skip_dma);
    }

    /// Blocks `0 .. n_blocks`, both programs on each, into `output`.
    #[nki_helper(target = "trn3")]
    pub fn compute_static_blocks_mx(
        inps: InputTensors,
        buffers: SharedBuffers,
        dims: BWMMMXDimensionSizes,
        cfg: BWMMMXConfigs,
        prj_cfg: ProjConfig,
        output: Hbm,
        n_blocks: i64,
    ) {
        let blocks = inps.token_position_to_id.reshape([dims.n, dims.b]);
        for block_idx in 0..n_blocks {
            let expert = load_block_expert(inps.block_to_expert[s![block_idx..block_idx + 1, ..]]);
            let positions = blocks[s![block_idx..block_idx + 1, ..]];
            let token_tiles = blocks.ap([[1, TILE_SIZE], [TILE_SIZE, dims.n_b128_tiles]], offset = block_idx * dims.b);
            compute_one_block_mx(inps, buffers, dims, cfg, prj_cfg, output, positions, token_tiles, expert);
            // The block's rows are stored before the next block reads them.
            nisa::core_barrier(output, [0, 1]);
        }
    }

    /// Blocks `n_static ..` up to the count of non-padded blocks in
    /// `conditions`, both programs on each, into `output`: a loop on the
    /// device, the block index in an SBUF counter.
    #[nki_helper(target = "trn3")]
    pub fn compute_dynamic_blocks_mx(
        inps: InputTensors,
        buffers: SharedBuffers,
        dims: BWMMMXDimensionSizes,
        cfg: BWMMMXConfigs,
        prj_cfg: ProjConfig,
        output: Hbm,
        conditions: Hbm,
        n_static: i64,
    ) {
        let stop = nisa::register_alloc();
        nisa::register_load(stop, count_active_blocks(conditions));
        let block_idx = nl::ndarray([1, 1], nl::int32, buffer = nl::sbuf);
        nisa::memset(block_idx, n_static as f64);
        let blocks = inps.token_position_to_id.reshape([dims.n, dims.b]);
        let nt = dims.n_b128_tiles;
        for _ in nl::dynamic_range(n_static, stop) {
            let experts = inps.block_to_expert;
            let expert = load_block_expert(experts.ap([[1, 1], [1, 1]], offset = 0, scalar_offset = block_idx, indirect_dim = 0));
            let positions = blocks.ap([[dims.b, 1], [1, dims.b]], offset = 0, scalar_offset = block_idx, indirect_dim = 0);
            let token_tiles = blocks.ap([[1, TILE_SIZE], [TILE_SIZE, nt]], offset = 0, scalar_offset = block_idx, indirect_dim = 0);
            compute_one_block_mx(inps, buffers, dims, cfg, prj_cfg, output, positions, token_tiles, expert);
            nisa::core_barrier(output, [0, 1]);
            nisa::tensor_scalar(block_idx, block_idx, nl::add, 1.0);
        }
    }

    /// The blocks of the call, both programs on each, into a new `[T, H]`
    /// output (zeroed when accumulating): every block, or with
    /// `conditions` the first `n_static` then the rest up to the count of
    /// `conditions` on the device.
    #[nki_helper(target = "trn3")]
    pub fn _bwmm_shard_on_i_mx(inps: InputTensors, dims: BWMMMXDimensionSizes, cfg: BWMMMXConfigs, n_static: i64) -> Hbm {
        let prj_cfg = proj_config(dims.h, dims.i / NUM_SHARDS, dims.b, 1, 0);
        let buffers = shared_buffers(inps, dims, cfg, prj_cfg);
        let output = nl::ndarray([dims.t, dims.h], inps.hidden_states.dtype(), buffer = nl::shared_hbm);
        if cfg.is_tensor_update_accumulating {
            bwmm_output_initialization(output, dims.shard_id);
        }
        compute_static_blocks_mx(inps, buffers, dims, cfg, prj_cfg, output, n_static);
        let cond = inps.conditions;
        if let Some(c) = cond {
            compute_dynamic_blocks_mx(inps, buffers, dims, cfg, prj_cfg, output, c, n_static);
        }
        output
    }

    /// The hybrid form's static block count: `num_static_block`, else `N -
    /// E`, one less when that is odd; asserted within `[0, N]`.
    #[nki_helper]
    pub fn static_block_count_mx(dims: BWMMMXDimensionSizes, num_static_block: Option<i64>) -> i64 {
        let mut n_free = dims.n - dims.e;
        if n_free % NUM_SHARDS != 0 {
            n_free -= 1;
        }
        let rule = "blockwise_mm_shard_intermediate_mx_hybrid: num_static_block (N - E, made even, when not given) must be in [0, N]";
        checked_static_blocks(dims.n, n_free, num_static_block, rule)
    }

    /// The rules of [`bwmm_shard_on_i_mx_violation`](super::bwmm_shard_on_i_mx_violation)
    /// and the tensors' shapes, checked when the kernel is traced (the
    /// library's `check_kernel_compatibility_mx`).
    #[nki_helper]
    pub fn check_kernel_compatibility_mx(inps: InputTensors, dims: BWMMMXDimensionSizes, cfg: BWMMMXConfigs, scales: bool, name: &str) {
        let (b, h, i) = (dims.b, dims.h, dims.i);
        let positions = inps.token_position_to_id.shape()[0];
        assert!(
            dims.num_shards == NUM_SHARDS,
            "{name}: runs on exactly 2 programs (LNC2), the intermediate columns split between them, got {}",
            dims.num_shards
        );
        assert!(h >= MIN_HIDDEN && h <= MAX_HIDDEN && h % H512 == 0, "{name}: H = {h} must be a multiple of 512 in 512..=8192");
        assert!(b > 0 && b % BLOCK_ALIGN == 0, "{name}: block_size = {b} must be a positive multiple of 256");
        assert!(
            dims.e > 0 && positions > 0 && positions % b == 0,
            "{name}: E = {} must be positive and token_position_to_id's length {positions} a positive multiple of block_size",
            dims.e
        );
        assert!(i > 0 && i % I_ALIGN == 0, "{name}: I = {i} must be a positive multiple of 1024 (512 columns a program)");
        assert!(!cfg.skip_dma.skip_weight, "{name}: skip_dma.skip_weight is not supported");
        let mode = cfg.scaling_mode;
        assert!(
            mode == ExpertAffinityScaleMode::POST_SCALE,
            "{name}: expert_affinities_scaling_mode must be POST_SCALE (the library refuses PRE_SCALE and scales nothing else), got {mode}"
        );
        assert!(scales, "{name}: gate_up_proj_scale and down_proj_scale must be given");
        let (gb, db) = (inps.gate_and_up_proj_bias, inps.down_proj_bias);
        assert!(gb.is_some() == db.is_some(), "{name}: gate_and_up_proj_bias and down_proj_bias are given together");
    }

    /// A call past bundling its arguments: its sizes, the rules, then the
    /// blocks (the first `num_static_block` with `inps.conditions`, else
    /// all of them).
    #[nki_helper(target = "trn3")]
    pub fn shard_on_i_mx_checked(
        inps: InputTensors,
        cfg: BWMMMXConfigs,
        scales: bool,
        block_size: Option<i64>,
        num_static_block: Option<i64>,
        name: &str,
    ) -> Hbm {
        assert!(block_size.is_some(), "{name}: block_size must be given");
        let dims = bwmm_mx_dimension_sizes(inps, block_size.unwrap_or(0));
        check_kernel_compatibility_mx(inps, dims, cfg, scales, name);
        let mut n_static = dims.n;
        if cfg.use_dynamic_while {
            n_static = static_block_count_mx(dims, num_static_block);
        }
        _bwmm_shard_on_i_mx(inps, dims, cfg, n_static)
    }

    /// Blockwise MoE matmul with MX weights over blocks of `block_size`
    /// token positions, the intermediate dim split between the two
    /// programs (module docs); returns `[T, H]`.
    #[nki_kernel(target = "trn3")]
    pub fn blockwise_mm_shard_intermediate_mx(
        #[spread] t: BwmmMxTensors,
        #[spread] extra: BwmmMxBiasScales,
        #[range(>= 1)] block_size: Option<i64>,
        #[spread] common: BwmmOptions,
        weight_dtype: Option<Dtype>,
        #[default(true)] is_tensor_update_accumulating: bool,
        #[default(ExpertAffinityScaleMode::PRE_SCALE)] expert_affinities_scaling_mode: ExpertAffinityScaleMode,
        #[spread] clamps: ShardOnIClamps,
    ) -> Hbm {
        let opts = mx_options(common, weight_dtype, is_tensor_update_accumulating, expert_affinities_scaling_mode, clamps);
        let (inps, cfg, scales) = mx_inputs(t, extra, None, opts, NUM_SHARDS);
        shard_on_i_mx_checked(inps, cfg, scales, block_size, None, "blockwise_mm_shard_intermediate_mx")
    }

    /// [`blockwise_mm_shard_intermediate_mx`] over the non-padded blocks
    /// only: the first `num_static_block` (default `N - E`, made even) in a
    /// loop unrolled when traced, then blocks up to the count of ones in
    /// `conditions` `[N + 1]` in a loop on the device (module docs). Returns
    /// `[T, H]`.
    #[nki_kernel(target = "trn3")]
    pub fn blockwise_mm_shard_intermediate_mx_hybrid(
        #[dtypes(int32)] conditions: Hbm,
        #[spread] t: BwmmMxTensors,
        #[spread] extra: BwmmMxBiasScales,
        #[range(>= 1)] block_size: Option<i64>,
        num_static_block: Option<i64>,
        #[spread] common: BwmmOptions,
        weight_dtype: Option<Dtype>,
        #[default(true)] is_tensor_update_accumulating: bool,
        #[default(ExpertAffinityScaleMode::POST_SCALE)] expert_affinities_scaling_mode: ExpertAffinityScaleMode,
        #[spread] clamps: ShardOnIClamps,
    ) -> Hbm {
        let opts = mx_options(common, weight_dtype, is_tensor_update_accumulating, expert_affinities_scaling_mode, clamps);
        assert!(
            conditions.ndim() == 1,
            "blockwise_mm_shard_intermediate_mx_hybrid: conditions must be [N + 1], got {}",
            conditions.shape()
        );
        let (inps, cfg, scales) = mx_inputs(t, extra, Some(conditions), opts, NUM_SHARDS);
        shard_on_i_mx_checked(inps, cfg, scales, block_size, num_static_block, "blockwise_mm_shard_intermediate_mx_hybrid")
    }
}

/// Why a `blockwise_mm_shard_intermediate_mx` (or its `_hybrid` form) call
/// is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShardOnIMxRule {
    /// Not exactly two programs.
    Programs,
    /// `H` is not a multiple of 512 in `512..=8192`.
    Hidden,
    /// `block_size` is not a positive multiple of 256.
    BlockSize,
    /// No experts, or `token_position_to_id` is not whole blocks.
    Blocks,
    /// `I` is not a positive multiple of 1024.
    Intermediate,
    /// `skip_dma.skip_weight`.
    SkipWeight,
    /// A scaling mode other than `POST_SCALE`.
    ScalingMode,
    /// A quantization scale missing.
    Scales,
    /// Only one of the two biases.
    Bias,
    /// The hybrid form's static block count outside `[0, N]`.
    StaticBlocks,
}

impl ShardOnIMxRule {
    /// The rule in words (the start of the kernel's message).
    pub const fn message(self) -> &'static str {
        match self {
            ShardOnIMxRule::Programs => "blockwise_mm_shard_intermediate_mx: runs on exactly 2 programs (LNC2)",
            ShardOnIMxRule::Hidden => "blockwise_mm_shard_intermediate_mx: H must be a multiple of 512 in 512..=8192",
            ShardOnIMxRule::BlockSize => "blockwise_mm_shard_intermediate_mx: block_size must be a positive multiple of 256",
            ShardOnIMxRule::Blocks => {
                "blockwise_mm_shard_intermediate_mx: E must be positive and token_position_to_id's length a positive multiple of block_size"
            }
            ShardOnIMxRule::Intermediate => "blockwise_mm_shard_intermediate_mx: I must be a positive multiple of 1024",
            ShardOnIMxRule::SkipWeight => "blockwise_mm_shard_intermediate_mx: skip_dma.skip_weight is not supported",
            ShardOnIMxRule::ScalingMode => "blockwise_mm_shard_intermediate_mx: expert_affinities_scaling_mode must be POST_SCALE",
            ShardOnIMxRule::Scales => "blockwise_mm_shard_intermediate_mx: gate_up_proj_scale and down_proj_scale must be given",
            ShardOnIMxRule::Bias => "blockwise_mm_shard_intermediate_mx: gate_and_up_proj_bias and down_proj_bias are given together",
            ShardOnIMxRule::StaticBlocks => {
                "blockwise_mm_shard_intermediate_mx_hybrid: num_static_block (N - E, made even, when not given) must be in [0, N]"
            }
        }
    }
}

crate::__blockwise_call! {
    /// An MX intermediate-sharded call as the rules read it.
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub struct BwmmShardOnIMxCall {
        /// `skip_dma.skip_weight`.
        pub skip_weight: bool,
        /// `expert_affinities_scaling_mode`.
        pub scaling_mode: ExpertAffinityScaleMode,
        /// Whether both quantization scales are given.
        pub scales: bool,
        /// The hybrid form's static block count; 0 for the other form.
        pub static_blocks: i64,
        /// Whether exactly one of the two biases is given.
        pub one_bias: bool,
    }
}

/// The first rule of the MX intermediate-sharded kernels that `c` breaks.
pub const fn bwmm_shard_on_i_mx_violation(c: BwmmShardOnIMxCall) -> Option<ShardOnIMxRule> {
    let (b, i) = (c.block_size, c.intermediate);
    first_broken(&[
        (c.programs != NUM_SHARDS, ShardOnIMxRule::Programs),
        (c.hidden < 512 || c.hidden > 8192 || c.hidden % 512 != 0, ShardOnIMxRule::Hidden),
        (b <= 0 || b % (2 * TILE_SIZE) != 0, ShardOnIMxRule::BlockSize),
        (!whole_blocks(c.experts, c.positions, b), ShardOnIMxRule::Blocks),
        (i <= 0 || i % 1024 != 0, ShardOnIMxRule::Intermediate),
        (c.skip_weight, ShardOnIMxRule::SkipWeight),
        (!matches!(c.scaling_mode, ExpertAffinityScaleMode::POST_SCALE), ShardOnIMxRule::ScalingMode),
        (!c.scales, ShardOnIMxRule::Scales),
        (c.one_bias, ShardOnIMxRule::Bias),
        (c.static_blocks < 0 || (b > 0 && c.static_blocks > c.positions / b), ShardOnIMxRule::StaticBlocks),
    ])
}

/// A `blockwise_mm_shard_intermediate_mx` (or `_hybrid`) call checked at
/// compile time, or a compile error naming the rule it breaks. Options not
/// given take the defaults the library's tests run (two programs,
/// `POST_SCALE`, both scales, no `skip_weight`).
///
/// ```
/// let c = nkilib::bwmm_shard_on_i_mx_config!(hidden = 3072, intermediate = 2048, experts = 8, block_size = 256, positions = 20 * 256);
/// assert_eq!((c.block_size, c.programs), (256, 2));
/// ```
///
/// ```compile_fail
/// // 768 intermediate columns do not split into whole 512-column tiles per program.
/// let c = nkilib::bwmm_shard_on_i_mx_config!(hidden = 3072, intermediate = 768, experts = 8, block_size = 256, positions = 20 * 256);
/// ```
#[macro_export]
macro_rules! bwmm_shard_on_i_mx_config {
    ($($args:tt)*) => {
        $crate::__blockwise_config!(
            [$crate::moe::moe_cte::bwmm_shard_on_i_mx::BwmmShardOnIMxCall],
            [$crate::moe::moe_cte::bwmm_shard_on_i_mx::bwmm_shard_on_i_mx_violation],
            {
                skip_weight: false,
                scaling_mode: $crate::moe::moe_cte::bwmm_shard_on_i_mx::ExpertAffinityScaleMode::POST_SCALE,
                scales: true,
                one_bias: false,
                static_blocks: 0,
            },
            $($args)*
        )
    };
}
