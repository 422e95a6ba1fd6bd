//! Blockwise MoE matmul sharded on blocks: the library's
//! `bwmm_shard_on_block`, the context-encoding MoE layer whose tokens come
//! pre-sorted into blocks of `B` positions, each block owned by one expert.
//!
//! `token_position_to_id[N·B]` names the token at each position (padding
//! positions name the zero row `T`, or `-1` with `skip_token`, whose loads
//! and stores are then skipped), `block_to_expert[N, 1]` the expert of each
//! block. The blocks alternate between the two programs (`PING_PONG`):
//! program `s` takes blocks `s, s + 2, s + 4, ...`. For each of its blocks:
//!
//! ```text
//! e = block_to_expert[blk]                       # read on the device: scalar_offset
//! tok = token_position_to_id[blk·B ..][p + 128·j] # [128, B/128], int32
//! x = hidden_states[tok]                          # [128, B/128, H], indirect DMA
//! (PRE_SCALE)  x *= aff[tok·E + e]                # affinities gathered by row
//! xT = transpose(x)                               # [128, H/128, B], PE transposes
//! g, u = xT·W_gu[e, :, 0], xT·W_gu[e, :, 1]       # [I, B] float32 in PSUM, over H/128
//! g, u = clamp(g + b_gate[e]), clamp(u + b_up[e])
//! inter = act(g) · u                              # [I, B], compute dtype
//! y = inter·W_down[e] + b_down[e]                 # per 128 tokens, 512 columns, float32
//! (POST_SCALE) y *= aff[tok·E + e]
//! out[tok, s] = y (+ out[tok, s] when accumulating)
//! ```
//!
//! With `is_tensor_update_accumulating` (top-k > 1) the output is `[T, 2, H]`,
//! one slot per program so the two never write the same row; after a core
//! barrier each program adds slot 1 into slot 0 for its half of the 128-row
//! tiles (a `dma_compute`) and zeroes slot 1. Without it the output is
//! `[T, H]` and each token is in one block.
//!
//! Tiling: tokens on the 128 partitions for the gather and the down
//! projection, the hidden dim on the partitions (128-row chunks) for the
//! gate/up contraction, the intermediate dim on the partitions (128-row
//! tiles, the last partial) for the down contraction, 512 free columns per
//! PSUM bank. The library loads three blocks' tokens before computing them
//! and reuses weights between blocks of one expert under `skip_weight`, to
//! overlap DMAs; here every block loads its own weights and is computed as
//! soon as it is loaded, with the same arithmetic. The down bias is added in
//! every scaling mode (the library's output step adds it under `POST_SCALE`
//! only), and the accumulating output's padding row is zeroed with the rest.
//!
//! Above 1024 intermediate rows (`I_TP`) the weights do not fit SBUF at
//! once, so the block runs in 512-row chunks of the intermediate dim, each
//! with its own gate/up and down weights (the gate/up values are the same
//! as in one pass):
//!
//! ```text
//! sum = 0                                        # [128, B/128, H], output dtype
//! for chunk in 0..ceil(I/512):
//!     inter_c = act(g_c) · u_c                   # the chunk's rows
//!     sum = sum + inter_c·W_down[e, chunk rows]  # PSUM sum, rounded to the output dtype
//! y = sum + b_down[e]                            # in the output dtype
//! out = y · aff (POST_SCALE) + old rows (accumulating)
//! ```
//!
//! Options this port does not implement are refused by name (see
//! [`MoeCteRule`](crate::moe::moe_cte::moe_cte::MoeCteRule)): `HI_LO`,
//! `PRE_SCALE_DELAYED`, the quantization scales, `down_activations`, and the
//! GELU activations (the library's intermediate covers SiLU and Swish).

pub use kernel::*;

use crate::moe::moe_cte::moe_cte_utils::{PSUM_SIZE, TILE_SIZE, first_broken, silu_gate, whole_blocks};

/// The kernel and its phases.
#[nki::nki_module]
pub mod kernel {
    pub use crate::moe::moe_cte::moe_cte_utils::{BlockShardStrategy, SkipMode};
    use crate::moe::moe_cte::moe_cte_utils::{BwmmBiasScales, BwmmOptions, BwmmTensors};
    use crate::moe::moe_cte::moe_cte_utils::{
        Configs, GUP_PROJ_DIM, InputTensors, PSUM_SIZE, TILE_SIZE, calculate_expert_affinities, gather_token_rows, stream_shuffle_broadcast,
    };
    pub use crate::utils::common_types::{ActFnType, ExpertAffinityScaleMode};
    use crate::utils::kernel_helpers::{ClampLimits, apply_activation, check_2d, check_3d, clamp};
    use nki::prelude::*;

    /// The programs the blocks alternate between.
    pub const NUM_SHARDS: i64 = 2;
    /// Slots of an accumulating output row, one per program.
    pub const OUTPUT_SLOTS: i64 = 2;
    /// The intermediate size's alignment (the library's vector DMA of the
    /// down weights takes 1 or a multiple of 16 partitions).
    pub const MIN_I_ALIGN: i64 = 16;
    /// The largest intermediate size of the unchunked path.
    pub const MAX_UNCHUNKED_I: i64 = 1024;
    /// Intermediate rows of one chunk of the chunked path (`I > 1024`).
    pub const I_TP_CHUNK_SIZE: i64 = 512;

    /// The call's sizes (the library's `DimensionSizes`).
    #[nki_object]
    pub struct DimensionSizes {
        /// `B`, positions per block.
        pub b: i64,
        /// `H`, the hidden size.
        pub h: i64,
        /// `T`, rows of `hidden_states` (the padding row included).
        pub t: i64,
        /// `E`, the experts.
        pub e: i64,
        /// `N`, the blocks.
        pub n: i64,
        /// `I_TP`, the intermediate rows this program computes (all of
        /// them here; half under the intermediate-sharded kernel).
        pub i_tp: i64,
        /// The weights' whole intermediate size (the row stride of the
        /// gate/up weights and bias).
        pub i_full: i64,
        /// The first intermediate row this program computes.
        pub i_offset: i64,
        /// 128-token tiles per block.
        pub num_tiles: i64,
        /// 128-row chunks of `H`.
        pub h_chunks: i64,
        /// 128-row tiles of `I_TP`, the last partial.
        pub gup_tile_count: i64,
        /// Token columns of one gate/up PSUM tile, `min(B, 512)`.
        pub free_size: i64,
        /// Gate/up PSUM tiles across the block, `B / free_size`.
        pub n_psum_tile_count: i64,
        /// Chunks of `I_TP` whose down projections are summed one after
        /// the other in the output dtype: 1, or `I_TP / 512` (rounded up)
        /// above 1024 rows.
        pub i_chunk_count: i64,
    }

    /// The sizes of a call with `b` positions per block.
    #[nki_helper]
    pub fn dimension_sizes(inps: InputTensors, b: i64) -> DimensionSizes {
        let [t, h] = inps.hidden_states.shape();
        let [e, i_tp, _] = inps.down_proj_weight.shape();
        let n = inps.token_position_to_id.shape()[0] / b;
        let free_size = b.min(PSUM_SIZE);
        let i_chunk_count = if i_tp > MAX_UNCHUNKED_I { i_tp.div_ceil(I_TP_CHUNK_SIZE) } else { 1 };
        DimensionSizes {
            b,
            h,
            t,
            e,
            n,
            i_tp,
            i_full: i_tp,
            i_offset: 0,
            num_tiles: b / TILE_SIZE,
            h_chunks: h / TILE_SIZE,
            gup_tile_count: i_tp.div_ceil(TILE_SIZE),
            free_size,
            n_psum_tile_count: b / free_size,
            i_chunk_count,
        }
    }

    /// `dims` narrowed to the `i_tp` intermediate rows from weight row
    /// `i_offset` on, computed in one pass.
    #[nki_helper]
    pub fn intermediate_rows(dims: DimensionSizes, i_offset: i64, i_tp: i64) -> DimensionSizes {
        DimensionSizes {
            b: dims.b,
            h: dims.h,
            t: dims.t,
            e: dims.e,
            n: dims.n,
            i_tp,
            i_full: dims.i_full,
            i_offset,
            num_tiles: dims.num_tiles,
            h_chunks: dims.h_chunks,
            gup_tile_count: i_tp.div_ceil(TILE_SIZE),
            free_size: dims.free_size,
            n_psum_tile_count: dims.n_psum_tile_count,
            i_chunk_count: 1,
        }
    }

    /// Chunk `c` of the chunked path: 512 intermediate rows (the last
    /// possibly fewer).
    #[nki_helper]
    pub fn intermediate_chunk(dims: DimensionSizes, c: i64) -> DimensionSizes {
        let start = c * I_TP_CHUNK_SIZE;
        intermediate_rows(dims, dims.i_offset + start, I_TP_CHUNK_SIZE.min(dims.i_tp - start))
    }

    /// Rows of I-tile `it` that hold the intermediate dim.
    #[nki_helper]
    pub fn i_rows(dims: DimensionSizes, it: i64) -> i64 {
        TILE_SIZE.min(dims.i_tp - it * TILE_SIZE)
    }

    /// Zeroes this program's slot of the accumulating output `[T, 2, H]`,
    /// or the whole of a `[T, H]` output.
    #[nki_helper]
    pub fn bwmm_output_initialization(output: Hbm, shard_id: i64) {
        let t = output.shape()[0];
        let slots = output.ndim() == 3;
        let h = output.shape()[output.ndim() - 1];
        let zeros = nl::ndarray([TILE_SIZE, h], output.dtype(), buffer = nl::sbuf);
        nisa::memset(zeros, 0.0);
        for r in 0..t.div_ceil(TILE_SIZE) {
            let r0 = r * TILE_SIZE;
            let rows = TILE_SIZE.min(t - r0);
            if slots {
                nisa::dma_copy(output[s![r0..r0 + rows, shard_id, ..]], zeros[s![0..rows, ..]]);
            } else {
                nisa::dma_copy(output[s![r0..r0 + rows, ..]], zeros[s![0..rows, ..]]);
            }
        }
    }

    /// Blocks of program `shard_id`: `shard_id, shard_id + 2, ...` below `N`.
    #[nki_helper]
    pub fn shard_block_count(dims: DimensionSizes, shard_id: i64) -> i64 {
        (dims.n - shard_id).div_ceil(NUM_SHARDS)
    }

    /// The experts of this program's blocks `shard_id, shard_id + 2, ...`
    /// as `[1, n_blocks]` int32 (the library's strided load).
    #[nki_helper]
    pub fn load_shard_block_experts(block_to_expert: Hbm, dims: DimensionSizes, shard_id: i64) -> Sbuf {
        let n_blocks: i64 = shard_block_count(dims, shard_id);
        let experts = nl::ndarray([1, n_blocks], nl::int32, buffer = nl::sbuf);
        nisa::dma_copy(experts, block_to_expert.ap([[1, 1], [NUM_SHARDS, n_blocks]], offset = shard_id));
        experts
    }

    /// The block's token ids `[128, B/128]` (position `128·j + p` at
    /// `[p, j]`) and its token rows `[128, B/128, H]` in the compute dtype
    /// (zero where skipped).
    #[nki_helper]
    pub fn load_block_token_rows(inps: InputTensors, cfg: Configs, dims: DimensionSizes, block_idx: i64) -> (Sbuf, Sbuf) {
        let positions = inps.token_position_to_id.ap([[1, TILE_SIZE], [TILE_SIZE, dims.num_tiles]], offset = block_idx * dims.b);
        let token_indices = load_token_indices(positions, dims);
        (token_indices, load_hidden_states(inps, cfg, dims, token_indices))
    }

    /// The token ids of one block, `[128, B/128]` int32 (position `128·j +
    /// p` at `[p, j]`), from `positions`, a view of the block's `B`
    /// positions in that order.
    #[nki_helper]
    pub fn load_token_indices(positions: Tensor, dims: DimensionSizes) -> Sbuf {
        let token_indices = nl::ndarray([TILE_SIZE, dims.num_tiles], nl::int32, buffer = nl::sbuf);
        nisa::dma_copy(token_indices, positions);
        token_indices
    }

    /// The token rows of `token_indices` `[128, B/128]`: `[128, B/128, H]`
    /// in the compute dtype (zero where skipped).
    #[nki_helper]
    pub fn load_hidden_states(inps: InputTensors, cfg: Configs, dims: DimensionSizes, token_indices: Sbuf) -> Sbuf {
        let nt = dims.num_tiles;
        let x = nl::ndarray([TILE_SIZE, nt, dims.h], cfg.compute_dtype, buffer = nl::sbuf);
        let (hs, skip) = (inps.hidden_states, cfg.skip_dma.skip_token);
        if skip {
            // Skipped padding rows read as zeros.
            nisa::memset(x, 0.0);
        }
        for j in 0..nt {
            gather_token_rows(x[s![.., j, ..]], hs, token_indices[s![.., j..j + 1]], 0, skip);
        }
        x
    }

    /// [`load_block_token_rows`], the rows scaled by their affinities
    /// under `PRE_SCALE`.
    #[nki_helper]
    pub fn load_block_tokens(inps: InputTensors, cfg: Configs, dims: DimensionSizes, block_idx: i64, expert: Sbuf) -> (Sbuf, Sbuf) {
        let (token_indices, x) = load_block_token_rows(inps, cfg, dims, block_idx);
        let nt = dims.num_tiles;
        if cfg.scaling_mode == ExpertAffinityScaleMode::PRE_SCALE {
            let aff =
                calculate_expert_affinities(inps.expert_affinities_masked, token_indices, expert, dims.e, cfg.compute_dtype, cfg.skip_dma);
            for j in 0..nt {
                nisa::tensor_scalar(x[s![.., j, ..]], x[s![.., j, ..]], nl::multiply, aff[s![.., j..j + 1]]);
            }
        }
        (token_indices, x)
    }

    /// `xT[p, c, b] = x[b, 128·c + p]`: the block's rows with the hidden dim
    /// on the partitions, by PE transposes through PSUM, 512 tokens a bank.
    #[nki_helper]
    pub fn transpose_block_hidden_states(x: Sbuf, dims: DimensionSizes) -> Sbuf {
        let fs = dims.free_size;
        let per_bank: i64 = fs / TILE_SIZE;
        let x_t = nl::ndarray([TILE_SIZE, dims.h_chunks, dims.b], x.dtype(), buffer = nl::sbuf);
        for c in 0..dims.h_chunks {
            let h0 = c * TILE_SIZE;
            for bt in 0..dims.n_psum_tile_count {
                let ps = nl::ndarray([TILE_SIZE, fs], x.dtype(), buffer = nl::psum);
                for k in 0..per_bank {
                    let j = bt * per_bank + k;
                    nisa::nc_transpose(ps[s![.., k * TILE_SIZE..(k + 1) * TILE_SIZE]], x[s![.., j, h0..h0 + TILE_SIZE]]);
                }
                nisa::tensor_copy(x_t[s![.., c, bt * fs..(bt + 1) * fs]], ps);
            }
        }
        x_t
    }

    /// `src` into `dst`, through a tile of `src`'s dtype when the two
    /// differ (the library loads, then casts on an engine).
    #[nki_helper]
    pub fn load_as(dst: Sbuf, src: Tensor, skip: bool) {
        let mut raw = dst;
        if src.dtype() != dst.dtype() {
            raw = nl::ndarray(dst.shape(), src.dtype(), buffer = nl::sbuf);
        }
        if skip {
            nisa::dma_copy(raw, src, oob_mode = nisa::oob_mode::skip);
        } else {
            nisa::dma_copy(raw, src);
        }
        if src.dtype() != dst.dtype() {
            nisa::tensor_copy(dst, raw);
        }
    }

    /// The gate/up weights of the expert in `expert`, this program's
    /// intermediate rows: `[128, H/128, 2, I]` with `w[p, c, g, i] =
    /// W_gu[e, 128·c + p, g, i_offset + i]`, in the compute dtype.
    #[nki_helper]
    pub fn load_gate_up_proj_weights(inps: InputTensors, cfg: Configs, dims: DimensionSizes, expert: Sbuf) -> Sbuf {
        let (gu, i, stride) = (inps.gate_up_proj_weight, dims.i_tp, dims.i_full);
        let w = nl::ndarray([TILE_SIZE, dims.h_chunks, GUP_PROJ_DIM, i], cfg.compute_dtype, buffer = nl::sbuf);
        let pattern =
            [[GUP_PROJ_DIM * stride, TILE_SIZE], [TILE_SIZE * GUP_PROJ_DIM * stride, dims.h_chunks], [stride, GUP_PROJ_DIM], [1, i]];
        let src = gu.ap(pattern, offset = dims.i_offset, scalar_offset = expert, indirect_dim = 0);
        load_as(w, src, cfg.skip_dma.skip_weight);
        w
    }

    /// The down weights of the expert in `expert`: `[128, I/128, H]` with
    /// `w[p, it, :] = W_down[e, i_offset + 128·it + p, :]`, rows past `I` zero.
    #[nki_helper]
    pub fn load_down_proj_weight(inps: InputTensors, cfg: Configs, dims: DimensionSizes, expert: Sbuf) -> Sbuf {
        let (dw, h) = (inps.down_proj_weight, dims.h);
        let w = nl::ndarray([TILE_SIZE, dims.gup_tile_count, h], cfg.compute_dtype, buffer = nl::sbuf);
        if dims.i_tp % TILE_SIZE != 0 {
            nisa::memset(w, 0.0);
        }
        for it in 0..dims.gup_tile_count {
            let k: i64 = i_rows(dims, it);
            let src = dw.ap([[h, k], [1, h]], offset = (dims.i_offset + it * TILE_SIZE) * h, scalar_offset = expert, indirect_dim = 0);
            load_as(w[s![0..k, it, ..]], src, cfg.skip_dma.skip_weight);
        }
        w
    }

    /// The gate/up bias of the expert with the intermediate dim on the
    /// partitions: `[128, I/128, 2]`, `b[p, it, g] = bias[e, g, i_offset +
    /// 128·it + p]`.
    #[nki_helper]
    pub fn load_and_transpose_gup_bias(bias: Hbm, cfg: Configs, dims: DimensionSizes, expert: Sbuf) -> Sbuf {
        let i = dims.i_full;
        let b = nl::ndarray([TILE_SIZE, dims.gup_tile_count, GUP_PROJ_DIM], cfg.compute_dtype, buffer = nl::sbuf);
        for it in 0..dims.gup_tile_count {
            let k: i64 = i_rows(dims, it);
            let src =
                bias.ap([[1, k], [i, GUP_PROJ_DIM]], offset = dims.i_offset + it * TILE_SIZE, scalar_offset = expert, indirect_dim = 0);
            load_as(b[s![0..k, it, ..]], src, cfg.skip_dma.skip_weight);
        }
        b
    }

    /// The down bias of the expert broadcast to `[128, H]`.
    #[nki_helper]
    pub fn load_and_broadcast_down_bias(bias: Hbm, cfg: Configs, dims: DimensionSizes, expert: Sbuf) -> Sbuf {
        let row = nl::ndarray([1, dims.h], cfg.compute_dtype, buffer = nl::sbuf);
        let src = bias.ap([[dims.h, 1], [1, dims.h]], offset = 0, scalar_offset = expert, indirect_dim = 0);
        load_as(row, src, cfg.skip_dma.skip_weight);
        let b = nl::ndarray([TILE_SIZE, dims.h], cfg.compute_dtype, buffer = nl::sbuf);
        stream_shuffle_broadcast(row, b);
        b
    }

    /// The gate and up projections of the block, `[128, 2, I/128, B]`
    /// float32 (`[p, g, it, b]` = projection `g` at intermediate row
    /// `128·it + p` of token `b`), each a PSUM accumulation over the hidden
    /// chunks, plus the bias when given.
    #[nki_helper]
    pub fn compute_gate_up_projections(x_t: Sbuf, w: Sbuf, bias_t: Option<Sbuf>, dims: DimensionSizes) -> Sbuf {
        let fs = dims.free_size;
        let gup = nl::ndarray([TILE_SIZE, GUP_PROJ_DIM, dims.gup_tile_count, dims.b], nl::float32, buffer = nl::sbuf);
        for g in 0..GUP_PROJ_DIM {
            for it in 0..dims.gup_tile_count {
                let i0 = it * TILE_SIZE;
                let k: i64 = i_rows(dims, it);
                for bt in 0..dims.n_psum_tile_count {
                    let b0 = bt * fs;
                    let ps = nl::ndarray([TILE_SIZE, fs], nl::float32, buffer = nl::psum);
                    for c in 0..dims.h_chunks {
                        nisa::nc_matmul(ps[s![0..k, ..]], w[s![.., c, g, i0..i0 + k]], x_t[s![.., c, b0..b0 + fs]]);
                    }
                    let dst = gup[s![0..k, g, it, b0..b0 + fs]];
                    nisa::tensor_copy(dst, ps[s![0..k, ..]]);
                    if let Some(b) = bias_t {
                        nisa::tensor_scalar(dst, dst, nl::add, b[s![0..k, it, g..g + 1]]);
                    }
                }
            }
        }
        gup
    }

    /// The optional clamps of the gate and the up projections, in place.
    #[nki_helper]
    pub fn _clip_gate_up_projections(gup: Sbuf, cfg: Configs) {
        clamp(gup[s![.., 0, .., ..]], cfg.gate_clamp_upper_limit, cfg.gate_clamp_lower_limit);
        clamp(gup[s![.., 1, .., ..]], cfg.up_clamp_upper_limit, cfg.up_clamp_lower_limit);
    }

    /// `act(gate) · up` in the compute dtype, `[128, I/128, B]` (the
    /// activation rounded to the compute dtype first, as the library's
    /// scalar engine writes it).
    #[nki_helper]
    pub fn compute_intermediate_states(gup: Sbuf, cfg: Configs, dims: DimensionSizes) -> Sbuf {
        let dt = cfg.compute_dtype;
        let inter = nl::ndarray([TILE_SIZE, dims.gup_tile_count, dims.b], dt, buffer = nl::sbuf);
        let act = nl::ndarray([TILE_SIZE, dims.b], dt, buffer = nl::sbuf);
        for it in 0..dims.gup_tile_count {
            let k: i64 = i_rows(dims, it);
            apply_activation(act[s![0..k, ..]], gup[s![0..k, 0, it, ..]], cfg.activation_function);
            nisa::tensor_tensor(inter[s![0..k, it, ..]], act[s![0..k, ..]], gup[s![0..k, 1, it, ..]], nl::multiply);
        }
        inter
    }

    /// The output rows `[128, H]` of token tile `j` (of this program's slot
    /// of a `[T, 2, H]` output), gathered by token in the compute dtype
    /// (zero where skipped); zeros for this program's `first` block, which
    /// has nothing to add onto.
    #[nki_helper]
    pub fn bwmm_load_old_block(output: Hbm, token_indices: Sbuf, j: i64, cfg: Configs, shard_id: i64, first: bool) -> Sbuf {
        let h = output.shape()[output.ndim() - 1];
        let (step, offset): (i64, i64) = output_row_layout(output, shard_id);
        let old = nl::ndarray([TILE_SIZE, h], cfg.compute_dtype, buffer = nl::sbuf);
        if first || cfg.skip_dma.skip_token {
            nisa::memset(old, 0.0);
        }
        if first {
            return old;
        }
        let idx = token_indices[s![.., j..j + 1]];
        if cfg.skip_dma.skip_token {
            nisa::dma_copy(
                old,
                output.ap([[step, TILE_SIZE], [1, h]], offset = offset, vector_offset = idx, indirect_dim = 0),
                oob_mode = nisa::oob_mode::skip,
            );
        } else {
            nisa::dma_copy(old, output.ap([[step, TILE_SIZE], [1, h]], offset = offset, vector_offset = idx, indirect_dim = 0));
        }
        old
    }

    /// The block's per-token-tile state the down projection reads.
    #[nki_object]
    pub struct BlockState {
        /// `act(gate) · up`, `[128, I/128, B]`.
        pub inter: Tensor,
        /// Down weights `[128, I/128, H]`.
        pub dp_weights: Tensor,
        /// Affinities `[128, B/128]` under `POST_SCALE`.
        pub affinity: Option<Tensor>,
        /// Down bias `[128, H]` when given.
        pub down_bias: Option<Tensor>,
    }

    /// Token tile `j`'s new output rows `[128, H]` in the output dtype:
    /// the down projection 512 columns a PSUM bank, plus the bias, times the
    /// affinity under `POST_SCALE`, plus `old` when accumulating.
    #[nki_helper]
    pub fn compute_block_output(st: BlockState, old: Option<Sbuf>, j: i64, cfg: Configs, dims: DimensionSizes, out_dtype: Dtype) -> Sbuf {
        let h = dims.h;
        let rows = nl::ndarray([TILE_SIZE, h], out_dtype, buffer = nl::sbuf);
        let t0 = j * TILE_SIZE;
        for c in 0..h.div_ceil(PSUM_SIZE) {
            let c0 = c * PSUM_SIZE;
            let wc = PSUM_SIZE.min(h - c0);
            let ps = nl::ndarray([TILE_SIZE, PSUM_SIZE], nl::float32, buffer = nl::psum);
            let y = ps[s![.., 0..wc]];
            for it in 0..dims.gup_tile_count {
                let k: i64 = i_rows(dims, it);
                nisa::nc_matmul(y, st.inter[s![0..k, it, t0..t0 + TILE_SIZE]], st.dp_weights[s![0..k, it, c0..c0 + wc]]);
            }
            let (down_bias, st_affinity) = (st.down_bias, st.affinity);
            let mut bias: Option<Tensor> = None;
            if let Some(b) = down_bias {
                bias = Some(b[s![.., c0..c0 + wc]]);
            }
            let mut prev: Option<Tensor> = None;
            if let Some(o) = old {
                prev = Some(o[s![.., c0..c0 + wc]]);
            }
            let mut scale: Option<Tensor> = None;
            if let Some(a) = st_affinity {
                scale = Some(a[s![.., j..j + 1]]);
            }
            finish_output_rows(rows[s![.., c0..c0 + wc]], y, bias, scale, prev);
        }
        rows
    }

    /// `dst = (y + bias) · affinity + old`, each term when given (`y` may
    /// be overwritten; `affinity` one column per partition).
    #[nki_helper]
    pub fn finish_output_rows(dst: Tensor, y: Tensor, bias: Option<Tensor>, affinity: Option<Tensor>, old: Option<Tensor>) {
        if let Some(b) = bias {
            nisa::tensor_tensor(y, y, b, nl::add);
        }
        if let Some(a) = affinity {
            if let Some(o) = old {
                nisa::scalar_tensor_tensor(dst, y, nl::multiply, a, nl::add, o);
            } else {
                nisa::tensor_scalar(dst, y, nl::multiply, a);
            }
        } else if let Some(o) = old {
            nisa::tensor_tensor(dst, o, y, nl::add);
        } else {
            nisa::tensor_copy(dst, y);
        }
    }

    /// The row step and first element of a token's row of `output`: this
    /// program's slot of a `[T, 2, H]` output, else the `[T, H]` row.
    #[nki_helper]
    pub fn output_row_layout(output: Hbm, shard_id: i64) -> (i64, i64) {
        let h = output.shape()[output.ndim() - 1];
        let (mut step, mut offset) = (h, 0);
        if output.ndim() == 3 {
            step = OUTPUT_SLOTS * h;
            offset = shard_id * h;
        }
        (step, offset)
    }

    /// Stores token tile `j`'s rows to their tokens' rows of `output` (this
    /// program's slot of a `[T, 2, H]` output).
    #[nki_helper]
    pub fn store_block_output(output: Hbm, rows: Sbuf, token_indices: Sbuf, j: i64, cfg: Configs, shard_id: i64) {
        let h = rows.shape()[1];
        let (step, offset): (i64, i64) = output_row_layout(output, shard_id);
        let idx = token_indices[s![.., j..j + 1]];
        if cfg.skip_dma.skip_token {
            nisa::dma_copy(
                output.ap([[step, TILE_SIZE], [1, h]], offset = offset, vector_offset = idx, indirect_dim = 0),
                rows,
                oob_mode = nisa::oob_mode::skip,
            );
        } else {
            nisa::dma_copy(output.ap([[step, TILE_SIZE], [1, h]], offset = offset, vector_offset = idx, indirect_dim = 0), rows);
        }
    }

    /// The block's gate and up projections (`xT` the transposed token
    /// rows) through the expert in `expert`: its weights and bias loaded,
    /// [`compute_gate_up_projections`], then the clamps.
    #[nki_helper]
    pub fn block_gate_up_projections(inps: InputTensors, cfg: Configs, dims: DimensionSizes, x_t: Sbuf, expert: Sbuf) -> Sbuf {
        let w_gu = load_gate_up_proj_weights(inps, cfg, dims, expert);
        let mut bias_t: Option<Sbuf> = None;
        let gub = inps.gate_and_up_proj_bias;
        if let Some(b) = gub {
            bias_t = Some(load_and_transpose_gup_bias(b, cfg, dims, expert));
        }
        let gup = compute_gate_up_projections(x_t, w_gu, bias_t, dims);
        _clip_gate_up_projections(gup, cfg);
        gup
    }

    /// The chunked path's down projection of the block (`I_TP > 1024`):
    /// `[128, B/128, H]` in `out_dtype`, each 512-row chunk of the
    /// intermediate dim through its own gate/up and down weights, its PSUM
    /// sum rounded to `out_dtype` and added onto the chunks before it.
    #[nki_helper]
    pub fn chunked_down_projections(
        inps: InputTensors,
        cfg: Configs,
        dims: DimensionSizes,
        x_t: Sbuf,
        expert: Sbuf,
        out_dtype: Dtype,
    ) -> Sbuf {
        let sums = nl::ndarray([TILE_SIZE, dims.num_tiles, dims.h], out_dtype, buffer = nl::sbuf);
        nisa::memset(sums, 0.0);
        for c in 0..dims.i_chunk_count {
            let chunk: DimensionSizes = intermediate_chunk(dims, c);
            let gup = block_gate_up_projections(inps, cfg, chunk, x_t, expert);
            let inter = compute_intermediate_states(gup, cfg, chunk);
            let dp_weights = load_down_proj_weight(inps, cfg, chunk, expert);
            let st = BlockState { inter, dp_weights, affinity: None, down_bias: None };
            for j in 0..dims.num_tiles {
                let rows = compute_block_output(st, Some(sums[s![.., j, ..]]), j, cfg, chunk, out_dtype);
                nisa::tensor_copy(sums[s![.., j, ..]], rows);
            }
        }
        sums
    }

    /// One block through its expert into `output` (module docs); `first`
    /// when it is this program's first block (nothing to accumulate onto).
    /// Above 1024 intermediate rows the down projection is summed chunk by
    /// chunk ([`chunked_down_projections`]) and the bias, affinity and old
    /// rows applied to the sum.
    #[nki_helper]
    pub fn process_block(inps: InputTensors, cfg: Configs, dims: DimensionSizes, output: Hbm, block_idx: i64, expert: Sbuf, first: bool) {
        let shard_id = block_idx % NUM_SHARDS;
        let (token_indices, x) = load_block_tokens(inps, cfg, dims, block_idx, expert);
        let x_t = transpose_block_hidden_states(x, dims);
        let mut down_bias: Option<Sbuf> = None;
        let db = inps.down_proj_bias;
        if let Some(b) = db {
            down_bias = Some(load_and_broadcast_down_bias(b, cfg, dims, expert));
        }
        let affinity = if cfg.scaling_mode == ExpertAffinityScaleMode::POST_SCALE {
            Some(calculate_expert_affinities(inps.expert_affinities_masked, token_indices, expert, dims.e, cfg.compute_dtype, cfg.skip_dma))
        } else {
            None
        };
        let out_dtype = output.dtype();
        if dims.i_chunk_count > 1 {
            let sums = chunked_down_projections(inps, cfg, dims, x_t, expert, out_dtype);
            for j in 0..dims.num_tiles {
                let old = block_old_rows(output, token_indices, j, cfg, shard_id, first);
                let mut scale: Option<Tensor> = None;
                if let Some(a) = affinity {
                    scale = Some(a[s![.., j..j + 1]]);
                }
                let rows = nl::ndarray([TILE_SIZE, dims.h], out_dtype, buffer = nl::sbuf);
                finish_output_rows(rows, sums[s![.., j, ..]], down_bias, scale, old);
                store_block_output(output, rows, token_indices, j, cfg, shard_id);
            }
        } else {
            let gup = block_gate_up_projections(inps, cfg, dims, x_t, expert);
            let inter = compute_intermediate_states(gup, cfg, dims);
            let st = BlockState { inter, dp_weights: load_down_proj_weight(inps, cfg, dims, expert), affinity, down_bias };
            for j in 0..dims.num_tiles {
                let old = block_old_rows(output, token_indices, j, cfg, shard_id, first);
                let rows = compute_block_output(st, old, j, cfg, dims, out_dtype);
                store_block_output(output, rows, token_indices, j, cfg, shard_id);
            }
        }
    }

    /// The old rows of token tile `j` when accumulating
    /// ([`bwmm_load_old_block`]), else none.
    #[nki_helper]
    pub fn block_old_rows(output: Hbm, token_indices: Sbuf, j: i64, cfg: Configs, shard_id: i64, first: bool) -> Option<Sbuf> {
        if cfg.is_tensor_update_accumulating { Some(bwmm_load_old_block(output, token_indices, j, cfg, shard_id, first)) } else { None }
    }

    /// Adds slot 1 into slot 0 of `tiles` 128-row tiles of the accumulating
    /// output from tile `first_tile` on, and zeroes slot 1.
    #[nki_helper]
    pub fn reduce_outputs(output: Hbm, first_tile: i64, tiles: i64) {
        let h = output.shape()[2];
        let zeros = nl::ndarray([TILE_SIZE, 1, h], output.dtype(), buffer = nl::sbuf);
        nisa::memset(zeros, 0.0);
        let sum = nl::ndarray([TILE_SIZE, 1, h], output.dtype(), buffer = nl::sbuf);
        for r in first_tile..first_tile + tiles {
            let r0 = r * TILE_SIZE;
            nisa::dma_compute(
                sum,
                [output[s![r0..r0 + TILE_SIZE, 0..1, ..]], output[s![r0..r0 + TILE_SIZE, 1..2, ..]]],
                nl::add,
                scales = [1.0, 1.0],
            );
            nisa::dma_copy(output[s![r0..r0 + TILE_SIZE, 0..1, ..]], sum);
            nisa::dma_copy(output[s![r0..r0 + TILE_SIZE, 1..2, ..]], zeros);
        }
    }

    /// The blockwise MoE of this program's blocks into a new output
    /// (`[T, 2, H]` accumulating, else `[T, H]`), reduced across the two
    /// programs when accumulating.
    #[nki_helper]
    pub fn _bwmm_shard_on_block(inps: InputTensors, cfg: Configs, block_size: i64) -> Hbm {
        let dims = dimension_sizes(inps, block_size);
        let shard_id: i64 = nl::program_id(0);
        let dtype = inps.hidden_states.dtype();
        let acc = cfg.is_tensor_update_accumulating;
        let output = if acc {
            nl::ndarray([dims.t, OUTPUT_SLOTS, dims.h], dtype, buffer = nl::shared_hbm)
        } else {
            nl::ndarray([dims.t, dims.h], dtype, buffer = nl::shared_hbm)
        };
        if acc {
            bwmm_output_initialization(output, shard_id);
        }
        let experts = load_shard_block_experts(inps.block_to_expert, dims, shard_id);
        let n_blocks: i64 = shard_block_count(dims, shard_id);
        for k in 0..n_blocks {
            let block_idx = NUM_SHARDS * k + shard_id;
            process_block(inps, cfg, dims, output, block_idx, experts[s![0..1, k..k + 1]], k == 0);
        }
        if acc {
            // Both programs' slots are complete before either reads the other's.
            nisa::core_barrier(output, [0, 1]);
            let tiles: i64 = reduce_tile_count(dims.t, cfg.skip_dma.skip_token);
            let first_half: i64 = tiles / NUM_SHARDS;
            if shard_id == 0 {
                reduce_outputs(output, 0, first_half);
            } else {
                reduce_outputs(output, first_half, tiles - first_half);
            }
        }
        output
    }

    /// 128-row tiles the final reduction covers: the token rows, without
    /// the padding row `T` unless padding is skipped.
    #[nki_helper]
    pub fn reduce_tile_count(t: i64, skip_token: bool) -> i64 {
        let padding: i64 = if skip_token { 0 } else { 1 };
        (t - padding).div_ceil(TILE_SIZE)
    }

    /// The rules of [`bwmm_shard_on_block_violation`](super::bwmm_shard_on_block_violation)
    /// and the tensors' shapes, checked when the kernel is traced.
    #[nki_helper]
    pub fn validate_bwmm_shard_on_block(
        inps: InputTensors,
        cfg: Configs,
        block_size: i64,
        strategy: BlockShardStrategy,
        quantized: bool,
        down_activations: bool,
    ) {
        let (t, h, e, i): (i64, i64, i64, i64) = blockwise_sizes(inps, "bwmm_shard_on_block");
        let positions = inps.token_position_to_id.shape()[0];
        let programs = if nl::program_ndim() == 1 { nl::num_programs(0) } else { 1 };
        let skip = cfg.skip_dma.skip_token;
        let act = cfg.activation_function;
        assert!(
            programs == NUM_SHARDS,
            "bwmm_shard_on_block: runs on exactly 2 programs (LNC2), the blocks alternating between them, got {programs}"
        );
        assert!(h > 0 && h % PSUM_SIZE == 0, "bwmm_shard_on_block: H = {h} must be a positive multiple of 512");
        assert!(
            block_size > 0 && block_size % TILE_SIZE == 0,
            "bwmm_shard_on_block: block_size = {block_size} must be a positive multiple of 128"
        );
        assert!(
            e > 0 && positions > 0 && positions % block_size == 0,
            "bwmm_shard_on_block: E = {e} must be positive and token_position_to_id's length {positions} a positive multiple of block_size"
        );
        assert!(i > 0 && i % MIN_I_ALIGN == 0, "bwmm_shard_on_block: I = {i} must be a positive multiple of 16");
        let reduce_tiles: i64 = reduce_tile_count(t, skip);
        assert!(
            !cfg.is_tensor_update_accumulating || reduce_tiles * TILE_SIZE <= t,
            "bwmm_shard_on_block: with is_tensor_update_accumulating the final reduction reads whole 128-row tiles of the token rows (T - 1, or T with skip_token), so T = {t} does not fit"
        );
        assert!(
            strategy == BlockShardStrategy::PING_PONG,
            "bwmm_shard_on_block: block_sharding_strategy must be PING_PONG, got {strategy}"
        );
        let mode = cfg.scaling_mode;
        assert!(
            mode != ExpertAffinityScaleMode::PRE_SCALE_DELAYED,
            "bwmm_shard_on_block: expert_affinities_scaling_mode PRE_SCALE_DELAYED is not supported"
        );
        assert!(
            act == ActFnType::SiLU || act == ActFnType::Swish,
            "bwmm_shard_on_block: activation_function must be SiLU or Swish, got {act}"
        );
        assert!(!quantized, "bwmm_shard_on_block: the quantization scales (gate_up_proj_scale, down_proj_scale) are not implemented");
        assert!(!down_activations, "bwmm_shard_on_block: down_activations is not implemented");
        let (gb, db) = (inps.gate_and_up_proj_bias, inps.down_proj_bias);
        assert!(gb.is_some() == db.is_some(), "bwmm_shard_on_block: gate_and_up_proj_bias and down_proj_bias are given together");
        check_blockwise_shapes(inps, "bwmm_shard_on_block", block_size);
    }

    /// `(T, H, E, I)` of a blockwise call, asserting `hidden_states` is
    /// `[T, H]` and `gate_up_proj_weight` `[E, H, 2, I]`.
    #[nki_helper]
    pub fn blockwise_sizes(inps: InputTensors, kernel: &str) -> (i64, i64, i64, i64) {
        let hs = inps.hidden_states.shape();
        assert!(inps.hidden_states.ndim() == 2, "{kernel}: hidden_states must be [T, H], got {hs}");
        let [t, h] = inps.hidden_states.shape();
        let gs = inps.gate_up_proj_weight.shape();
        assert!(
            inps.gate_up_proj_weight.ndim() == 4 && gs[1] == h && gs[2] == 2,
            "{kernel}: gate_up_proj_weight must be [E, H = {h}, 2, I], got {gs}"
        );
        (t, h, gs[0], gs[3])
    }

    /// The other tensors' shapes against [`blockwise_sizes`] (the block
    /// size already checked to divide the positions).
    #[nki_helper]
    pub fn check_blockwise_shapes(inps: InputTensors, kernel: &str, block_size: i64) {
        let (t, h, e, i): (i64, i64, i64, i64) = blockwise_sizes(inps, kernel);
        let positions = inps.token_position_to_id.shape()[0];
        check_3d(Some(inps.down_proj_weight), kernel, "down_proj_weight", e, i, h);
        check_2d(Some(inps.expert_affinities_masked), kernel, "expert_affinities_masked", t * e, 1);
        check_2d(Some(inps.block_to_expert), kernel, "block_to_expert", positions / block_size, 1);
        check_3d(inps.gate_and_up_proj_bias, kernel, "gate_and_up_proj_bias", e, 2, i);
        check_3d(inps.down_proj_bias, kernel, "down_proj_bias", e, 1, h);
    }

    /// The [`InputTensors`] of a call's leading tensors and its biases.
    #[nki_helper]
    pub fn input_tensors(t: BwmmTensors, extra: BwmmBiasScales) -> InputTensors {
        InputTensors {
            token_position_to_id: t.token_position_to_id,
            block_to_expert: t.block_to_expert,
            hidden_states: t.hidden_states,
            gate_up_proj_weight: t.gate_up_proj_weight,
            gate_and_up_proj_bias: extra.gate_and_up_proj_bias,
            down_proj_bias: extra.down_proj_bias,
            down_proj_weight: t.down_proj_weight,
            expert_affinities_masked: t.expert_affinities_masked,
        }
    }

    /// Whether a call passes quantization scales (which the ported paths refuse).
    #[nki_helper]
    pub fn quantized(extra: BwmmBiasScales) -> bool {
        extra.gate_up_proj_scale.is_some() || extra.down_proj_scale.is_some()
    }

    /// The [`Configs`] of a call's options (`skip_dma` absent: nothing skipped).
    #[nki_helper]
    pub fn configs(
        inps: InputTensors,
        opts: BwmmOptions,
        is_tensor_update_accumulating: bool,
        scaling_mode: ExpertAffinityScaleMode,
        clamps: ClampLimits,
    ) -> Configs {
        let mut skip = SkipMode { skip_token: false, skip_weight: false };
        if let Some(m) = opts.skip_dma {
            skip = m;
        }
        Configs {
            scaling_mode,
            skip_dma: skip,
            compute_dtype: opts.compute_dtype,
            is_tensor_update_accumulating,
            linear_bias: inps.gate_and_up_proj_bias.is_some() && inps.down_proj_bias.is_some(),
            activation_function: opts.activation_function,
            gate_clamp_upper_limit: clamps.gate_clamp_upper_limit,
            gate_clamp_lower_limit: clamps.gate_clamp_lower_limit,
            up_clamp_upper_limit: clamps.up_clamp_upper_limit,
            up_clamp_lower_limit: clamps.up_clamp_lower_limit,
        }
    }

    /// Blockwise MoE matmul over blocks of `block_size` token positions,
    /// each through its expert's gated MLP (module docs); returns `[T, 2, H]`
    /// (slot 0 the result) when accumulating, else `[T, H]`.
    #[nki_kernel]
    pub fn bwmm_shard_on_block(
        #[spread] t: BwmmTensors,
        #[spread] extra: BwmmBiasScales,
        down_activations: Option<Hbm>,
        #[spread] opts: BwmmOptions,
        #[default(true)] is_tensor_update_accumulating: bool,
        #[default(ExpertAffinityScaleMode::POST_SCALE)] expert_affinities_scaling_mode: ExpertAffinityScaleMode,
        #[default(1)] n_block_per_iter: i64,
        #[spread] clamps: ClampLimits,
        #[default(BlockShardStrategy::PING_PONG)] block_sharding_strategy: BlockShardStrategy,
    ) -> Hbm {
        // The library reads n_block_per_iter only on its other paths.
        assert!(n_block_per_iter > 0, "bwmm_shard_on_block: n_block_per_iter = {n_block_per_iter} must be positive");
        let inps = input_tensors(t, extra);
        let cfg = configs(inps, opts, is_tensor_update_accumulating, expert_affinities_scaling_mode, clamps);
        let strategy = block_sharding_strategy;
        validate_bwmm_shard_on_block(inps, cfg, block_size, strategy, quantized(extra), down_activations.is_some());
        _bwmm_shard_on_block(inps, cfg, block_size)
    }
}

/// Why a `bwmm_shard_on_block` (or `moe_cte`) call is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MoeCteRule {
    /// `spec.implementation` is a form the library's `moe_cte` does not
    /// dispatch (`shard_on_i_mx`, `shard_on_i_mx_hybrid`).
    Implementation,
    /// Not exactly two programs.
    Programs,
    /// `H` is not a positive multiple of 512.
    HiddenTiles,
    /// `block_size` is not a positive multiple of 128.
    BlockSize,
    /// No experts, or `token_position_to_id` is not whole blocks.
    Blocks,
    /// `I` is not a positive multiple of 16.
    IntermediateAlign,
    /// The accumulating output's reduction would read past the token rows.
    ReduceRows,
    /// `HI_LO` block sharding.
    Strategy,
    /// `PRE_SCALE_DELAYED` affinity scaling.
    ScalingMode,
    /// A GELU activation.
    Activation,
    /// Quantization scales.
    Quantization,
    /// `down_activations`.
    DownActivations,
    /// Only one of the two biases.
    Bias,
}

impl MoeCteRule {
    /// The rule in words.
    pub const fn message(self) -> &'static str {
        match self {
            MoeCteRule::Implementation => {
                "moe_cte: spec.implementation must be MoECTEImplementation.shard_on_block, shard_on_i, shard_on_i_hybrid, shard_on_i_dropping or shard_on_block_mx (the library's moe_cte dispatches no other)"
            }
            MoeCteRule::Programs => "bwmm_shard_on_block: runs on exactly 2 programs (LNC2), the blocks alternating between them",
            MoeCteRule::HiddenTiles => "bwmm_shard_on_block: H must be a positive multiple of 512",
            MoeCteRule::BlockSize => "bwmm_shard_on_block: block_size must be a positive multiple of 128",
            MoeCteRule::Blocks => {
                "bwmm_shard_on_block: E must be positive and token_position_to_id's length a positive multiple of block_size"
            }
            MoeCteRule::IntermediateAlign => "bwmm_shard_on_block: I must be a positive multiple of 16",
            MoeCteRule::ReduceRows => {
                "bwmm_shard_on_block: with is_tensor_update_accumulating the final reduction reads whole 128-row tiles of the token rows (T - 1, or T with skip_token)"
            }
            MoeCteRule::Strategy => "bwmm_shard_on_block: block_sharding_strategy must be PING_PONG",
            MoeCteRule::ScalingMode => "bwmm_shard_on_block: expert_affinities_scaling_mode PRE_SCALE_DELAYED is not supported",
            MoeCteRule::Activation => "bwmm_shard_on_block: activation_function must be SiLU or Swish",
            MoeCteRule::Quantization => {
                "bwmm_shard_on_block: the quantization scales (gate_up_proj_scale, down_proj_scale) are not implemented"
            }
            MoeCteRule::DownActivations => "bwmm_shard_on_block: down_activations is not implemented",
            MoeCteRule::Bias => "bwmm_shard_on_block: gate_and_up_proj_bias and down_proj_bias are given together",
        }
    }
}

crate::__blockwise_call! {
    /// A blockwise call as the rules read it: the sizes and the options.
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub struct BwmmShardOnBlockCall {
        /// Rows of `hidden_states` (`T`, the padding row included unless skipped).
        pub tokens: i64,
        /// `skip_dma.skip_token`.
        pub skip_token: bool,
        /// `is_tensor_update_accumulating`.
        pub accumulating: bool,
        /// `block_sharding_strategy`.
        pub strategy: BlockShardStrategy,
        /// `expert_affinities_scaling_mode`.
        pub scaling_mode: ExpertAffinityScaleMode,
        /// `activation_function`.
        pub activation: ActFnType,
        /// Whether a quantization scale is given.
        pub quantized: bool,
        /// Whether `down_activations` is given.
        pub down_activations: bool,
        /// Whether exactly one of the two biases is given.
        pub one_bias: bool,
    }
}

/// 128-row tiles the accumulating output's reduction covers (as
/// [`reduce_tile_count`] in the kernel).
pub const fn reduce_tiles(tokens: i64, skip_token: bool) -> i64 {
    let rows = if skip_token { tokens } else { tokens - 1 };
    (rows + TILE_SIZE - 1) / TILE_SIZE
}

/// The first rule `c` breaks.
pub const fn bwmm_shard_on_block_violation(c: BwmmShardOnBlockCall) -> Option<MoeCteRule> {
    first_broken(&[
        (c.programs != NUM_SHARDS, MoeCteRule::Programs),
        (c.hidden <= 0 || c.hidden % PSUM_SIZE != 0, MoeCteRule::HiddenTiles),
        (c.block_size <= 0 || c.block_size % TILE_SIZE != 0, MoeCteRule::BlockSize),
        (!whole_blocks(c.experts, c.positions, c.block_size), MoeCteRule::Blocks),
        (c.intermediate <= 0 || c.intermediate % MIN_I_ALIGN != 0, MoeCteRule::IntermediateAlign),
        (c.accumulating && reduce_tiles(c.tokens, c.skip_token) * TILE_SIZE > c.tokens, MoeCteRule::ReduceRows),
        (!matches!(c.strategy, BlockShardStrategy::PING_PONG), MoeCteRule::Strategy),
        (matches!(c.scaling_mode, ExpertAffinityScaleMode::PRE_SCALE_DELAYED), MoeCteRule::ScalingMode),
        (!silu_gate(c.activation), MoeCteRule::Activation),
        (c.quantized, MoeCteRule::Quantization),
        (c.down_activations, MoeCteRule::DownActivations),
        (c.one_bias, MoeCteRule::Bias),
    ])
}

/// A `bwmm_shard_on_block` (or `moe_cte` `shard_on_block`) call checked at
/// compile time, or a compile error naming the rule it breaks. Options not
/// given take the kernel's defaults (two programs, `PING_PONG`,
/// `POST_SCALE`, SiLU, accumulating, padding rows named, no scales).
///
/// ```
/// let c = nkilib::bwmm_shard_on_block_config!(tokens = 1024, hidden = 3072, intermediate = 384, experts = 8, block_size = 512, positions = 16 * 512, skip_token = true);
/// assert_eq!((c.block_size, c.programs), (512, 2));
/// ```
///
/// ```
/// // Above 1024 intermediate rows the down projection is summed in chunks.
/// let c = nkilib::bwmm_shard_on_block_config!(tokens = 1024, hidden = 3072, intermediate = 1536, experts = 8, block_size = 512, positions = 16 * 512, skip_token = true);
/// assert_eq!(c.intermediate, 1536);
/// ```
///
/// ```compile_fail
/// // The intermediate size must be a multiple of 16.
/// let c = nkilib::bwmm_shard_on_block_config!(tokens = 1024, hidden = 3072, intermediate = 1000, experts = 8, block_size = 512, positions = 16 * 512, skip_token = true);
/// ```
#[macro_export]
macro_rules! bwmm_shard_on_block_config {
    (tokens = $t:expr, hidden = $h:expr, intermediate = $i:expr, experts = $e:expr, block_size = $b:expr, positions = $n:expr $(, $field:ident = $value:expr)* $(,)?) => {
        $crate::__collective_config!(
            [$crate::moe::moe_cte::bwmm_shard_on_block::BwmmShardOnBlockCall],
            [$crate::moe::moe_cte::bwmm_shard_on_block::bwmm_shard_on_block_violation],
            {
                tokens: $t,
                hidden: $h,
                intermediate: $i,
                experts: $e,
                block_size: $b,
                positions: $n,
                programs: 2,
                skip_token: false,
                accumulating: true,
                strategy: $crate::moe::moe_cte::bwmm_shard_on_block::BlockShardStrategy::PING_PONG,
                scaling_mode: $crate::moe::moe_cte::bwmm_shard_on_block::ExpertAffinityScaleMode::POST_SCALE,
                activation: $crate::moe::moe_cte::bwmm_shard_on_block::ActFnType::SiLU,
                quantized: false,
                down_activations: false,
                one_bias: false,
            },
            { $($field = $value),* }
        )
    };
}
