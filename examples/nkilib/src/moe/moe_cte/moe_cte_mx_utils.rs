//! The MX (trn3) blockwise MoE kernels' shared pieces: the library's
//! `moe_cte_mx_utils`, their tile sizes, the MX weights' dtype conversion,
//! the call's tensors, sizes, options and reused buffers, and the phases
//! that bring a block's token rows into the MXFP8 layout `nc_matmul_mx`
//! reads.
//!
//! A block's rows reach the projections in four steps, 32 tokens a
//! 128-partition tile:
//!
//! ```text
//! tok = token_position_to_id[blk·B ..]                 # [1, B]
//! idx[4·u + k, bt] = 4·tok[32·bt + u] + k              # [128, B/32], iota + transposes
//! rows[q, bt, :] = hidden_states.reshape(T·4, H/4)[idx[q, bt]]  # indirect DMA
//! rows_T[p, ht, 128·bt + q] = rows[q, bt, 128·ht + p]  # PE transposes, 8 a PSUM bank
//! xq, xs = quantize_mx(rows_T)                         # [128, H/512, B] MXFP8 + scales
//! ```
//!
//! so `xq[p, ht, b]` packs the values `k·H/4 + 128·ht + p` (`k = 0..4`) of
//! token `b`'s row: the pre-shuffled hidden order of the MX kernels, one
//! token per moving column. Folding `H` four times onto the token rows lets
//! one DMA of 128 indices fetch 32 tokens. An expert's weight scales are
//! gathered the same way, by an index vector built on the device
//! ([`_generate_expert_index_vector`]) that puts its 16 scale rows of an MX
//! tile at partitions `32 (g / 4) + g % 4`, where `nc_matmul_mx` reads them.

// The library's names `block_hidden_states_T`, `token_4_H_indices_on_p`.
#![allow(non_snake_case)]

pub use kernel::*;

/// The constants, bundles and phases.
#[nki::nki_module]
pub mod kernel {
    use crate::mlp::mlp_tkg::projection_mx_constants::ProjConfig;
    use crate::moe::moe_cte::moe_cte_utils::{
        BwmmMxBiasScales, BwmmMxTensors, BwmmOptions, ShardOnIClamps, SkipMode, TILE_SIZE, clamp_limits, gather_token_rows,
    };
    pub use crate::utils::common_types::{ActFnType, ExpertAffinityScaleMode};
    use crate::utils::kernel_helpers::ClampLimits;
    use nki::prelude::*;

    /// Free values of one MX quantization block (`_q_width`, the packed
    /// values of one element).
    pub const Q_WIDTH: i64 = 4;
    /// Partitions of one MX quantization block (`_q_height`).
    pub const Q_HEIGHT: i64 = 8;
    /// Partitions of an SBUF quadrant; 32 tokens of a folded load tile.
    pub const SBUF_QUADRANT_SIZE: i64 = 32;
    /// Hidden values of one MX contraction tile, `128 · 4`.
    pub const H512: i64 = 512;
    /// The smallest hidden size the MX kernels take.
    pub const MIN_HIDDEN: i64 = 512;
    /// The largest hidden size the MX kernels take.
    pub const MAX_HIDDEN: i64 = 8192;
    /// PE transposes one PSUM bank holds (`_psum_bmax`).
    pub const PSUM_BMAX: i64 = 8;

    /// The MX dtype `tensor` holds: weights passed as `uint16`/`int16`
    /// (MXFP4) or `uint32`/`int32` (MXFP8, `float8_e4m3fn_x4` unless
    /// `weight_dtype` names `float8_e5m2_x4`) are viewed as it, as torch/xla
    /// passes them; the view and the dtype the other weights take.
    #[nki_helper]
    pub fn convert_to_mxfp_dtype(tensor: Hbm, weight_dtype: Option<Dtype>) -> (Hbm, Dtype) {
        let dt = tensor.dtype();
        let mut target = dt;
        if dt == nl::uint16 || dt == nl::int16 {
            target = nl::float4_e2m1fn_x4;
        } else if dt == nl::uint32 || dt == nl::int32 {
            target = nl::float8_e4m3fn_x4;
            if let Some(w) = weight_dtype {
                target = w;
            }
        }
        assert!(
            target == nl::float4_e2m1fn_x4 || target == nl::float8_e4m3fn_x4 || target == nl::float8_e5m2_x4,
            "convert_to_mxfp_dtype: the MX weights must be float4_e2m1fn_x4, float8_e4m3fn_x4 or float8_e5m2_x4 (or uint16/int16, uint32/int32 viewed so), got {dt} as {target}"
        );
        if target == dt { (tensor, target) } else { (tensor.view(target), target) }
    }

    /// The tensors of an MX blockwise call (the library's `InputTensors`),
    /// each weight beside its scales.
    #[nki_object]
    pub struct InputTensors {
        /// Token rows `[T, H]`, pre-shuffled MX order.
        pub hidden_states: Tensor,
        /// Gate/up weights `[E, 128, 2, H/512, I]`, packed along `H`.
        pub gate_up_proj_weight: Tensor,
        /// Gate/up scales `[E, 16, 2, H/512, I]` `uint8`.
        pub gate_up_proj_scale: Tensor,
        /// Gate/up bias `[E, I_p, 2, I/512, 4]` in the product's layout.
        pub gate_and_up_proj_bias: Option<Tensor>,
        /// Down weights `[E, I_p, I/512, H]`, packed along `I`.
        pub down_proj_weight: Tensor,
        /// Down scales `[E, I_p/8, I/512, H]` `uint8`.
        pub down_proj_scale: Tensor,
        /// Down bias `[E, H]`.
        pub down_proj_bias: Option<Tensor>,
        /// Token of each block position `[N·B]` (padding: `T - 1` or `-1`).
        pub token_position_to_id: Tensor,
        /// Expert of each block `[N, 1]`.
        pub block_to_expert: Tensor,
        /// Affinities `[T·E, 1]`, zero where a token did not pick the expert.
        pub expert_affinities_masked: Tensor,
        /// Padded-block flags `[N + 2]` of the dynamic loop.
        pub conditions: Option<Tensor>,
        /// Index vector of the gate/up scales' gather `[128, 1]` float32.
        pub p_gup_idx_vector: Tensor,
        /// Index vector of the down scales' gather `[128, 1]` float32.
        pub p_down_idx_vector: Tensor,
        /// Gate/up scales in their quadrants `[128, 2, H/512, I]`.
        pub gup_scales_sb: Tensor,
    }

    /// Buffers reused by every block (the library's `SharedBuffers`).
    #[nki_object]
    pub struct SharedBuffers {
        /// Folded token rows `[128, B/32, H/4]`.
        pub block_hidden_states: Tensor,
        /// The rows transposed, `[128, H/512, 4·B]`.
        pub block_hidden_states_T: Tensor,
        /// Folded row indices `[128, B/32]` int32.
        pub token_4_H_indices_on_p: Tensor,
        /// Quantized rows `[128, H/512, B]` MXFP8.
        pub hidden_qtz_sb: Tensor,
        /// Their scales `[128, H/512, B]` `uint8`.
        pub hidden_scale_sb: Tensor,
        /// Down weights `[128, I/512, H]`, rows past `I_p` zero.
        pub down_weight_qtz: Tensor,
        /// Down scales `[128, I/512, H]` in their quadrants.
        pub down_scale_sb: Tensor,
    }

    /// The call's sizes (the library's `BWMMMXDimensionSizes`).
    #[nki_object]
    pub struct BWMMMXDimensionSizes {
        /// `B`, positions per block.
        pub b: i64,
        /// `H`.
        pub h: i64,
        /// `T`, rows of `hidden_states` (the padding row included).
        pub t: i64,
        /// `E`.
        pub e: i64,
        /// `N`, the blocks.
        pub n: i64,
        /// `I`.
        pub i: i64,
        /// Length of `conditions` (0 without).
        pub cond_vec_len: i64,
        /// Programs of the launch.
        pub num_shards: i64,
        /// This program.
        pub shard_id: i64,
        /// 128-token tiles of a block.
        pub n_b128_tiles: i64,
        /// Packed rows of the down weights: `I / 4` below 512 columns, else 128.
        pub p_i: i64,
    }

    /// The sizes of `inps` with `b` positions per block.
    #[nki_helper]
    pub fn bwmm_mx_dimension_sizes(inps: InputTensors, b: i64) -> BWMMMXDimensionSizes {
        let [t, h] = inps.hidden_states.shape();
        let gs = inps.gate_up_proj_weight.shape();
        let (e, i) = (gs[0], gs[4]);
        let mut cond_vec_len = 0;
        let cond = inps.conditions;
        if let Some(c) = cond {
            cond_vec_len = c.shape()[0];
        }
        let num_shards = if nl::program_ndim() == 1 { nl::num_programs(0) } else { 1 };
        let shard_id = if num_shards > 1 { nl::program_id(0) } else { 0 };
        let p_i = if i > H512 { TILE_SIZE } else { i / Q_WIDTH };
        let n = inps.token_position_to_id.shape()[0] / b;
        BWMMMXDimensionSizes { b, h, t, e, n, i, cond_vec_len, num_shards, shard_id, n_b128_tiles: b.div_ceil(TILE_SIZE), p_i }
    }

    /// The options of an MX blockwise call (the library's `BWMMMXConfigs`,
    /// the fields these kernels read).
    #[nki_object]
    pub struct BWMMMXConfigs {
        /// Where the affinity multiplies.
        pub scaling_mode: ExpertAffinityScaleMode,
        /// Which DMAs skip out-of-range rows.
        pub skip_dma: SkipMode,
        /// Dtype of the token rows and the old output rows.
        pub compute_dtype: Dtype,
        /// The weights' MX dtype.
        pub weight_dtype: Dtype,
        /// Whether each token's experts are summed (top-k > 1).
        pub is_tensor_update_accumulating: bool,
        /// Whether a dynamic loop over `conditions` follows the static one.
        pub use_dynamic_while: bool,
        /// The gate's activation.
        pub activation_function: ActFnType,
        /// The gate and up clamps.
        pub clamps: ClampLimits,
    }

    /// The shared buffers of blocks of `dims.b` tokens through `prj_cfg`,
    /// the down weights' padding rows and their scales zeroed once.
    #[nki_helper]
    pub fn shared_buffers(inps: InputTensors, dims: BWMMMXDimensionSizes, cfg: BWMMMXConfigs, prj_cfg: ProjConfig) -> SharedBuffers {
        let (b, n_h, n_i, h) = (dims.b, prj_cfg.n_h512_tile, prj_cfg.n_total_i512_tile, dims.h);
        let block_hidden_states = nl::ndarray([TILE_SIZE, b / SBUF_QUADRANT_SIZE, h / Q_WIDTH], cfg.compute_dtype, buffer = nl::sbuf);
        if cfg.skip_dma.skip_token {
            // Skipped padding rows read as zeros.
            nisa::memset(block_hidden_states, 0.0);
        }
        let down_weight_qtz = nl::ndarray([TILE_SIZE, n_i, h], inps.down_proj_weight.dtype(), buffer = nl::sbuf);
        let down_scale_sb = nl::ndarray([TILE_SIZE, n_i, h], nl::uint8, buffer = nl::sbuf);
        if dims.p_i != TILE_SIZE {
            nisa::memset(down_weight_qtz[s![.., n_i - 1, ..]], 0.0);
            nisa::memset(down_scale_sb[s![.., n_i - 1, ..]], 0.0);
        }
        SharedBuffers {
            block_hidden_states,
            block_hidden_states_T: nl::ndarray([TILE_SIZE, n_h, b * Q_WIDTH], cfg.compute_dtype, buffer = nl::sbuf),
            token_4_H_indices_on_p: nl::ndarray([TILE_SIZE, b / SBUF_QUADRANT_SIZE], nl::int32, buffer = nl::sbuf),
            hidden_qtz_sb: nl::ndarray([TILE_SIZE, n_h, b], nl::float8_e4m3fn_x4, buffer = nl::sbuf),
            hidden_scale_sb: nl::ndarray([TILE_SIZE, n_h, b], nl::uint8, buffer = nl::sbuf),
            down_weight_qtz,
            down_scale_sb,
        }
    }

    /// The folded row indices of the block whose `B` token ids `positions`
    /// views (`[1, B]`, static or read at a dynamic block index) into
    /// `buffers.token_4_H_indices_on_p`: `4·tok[32·bt + u] + k` at `(4·u +
    /// k, bt)`, by an iota, a broadcast multiply-add and one PE transpose
    /// per 128 indices.
    #[nki_helper]
    pub fn compute_hidden_index_vector(positions: Tensor, buffers: SharedBuffers, dims: BWMMMXDimensionSizes) {
        let b = dims.b;
        let token_indices = nl::ndarray([1, b], nl::int32, buffer = nl::sbuf);
        nisa::dma_copy(token_indices, positions);
        let arange_4h = nl::ndarray([1, Q_WIDTH], nl::float32, buffer = nl::sbuf);
        nisa::iota(arange_4h, [[1, Q_WIDTH]]);
        let all_token_4_h_indices = nl::ndarray([1, b, Q_WIDTH], nl::float32, buffer = nl::sbuf);
        nisa::scalar_tensor_tensor(
            all_token_4_h_indices,
            token_indices.ap([[b, 1], [1, b], [0, Q_WIDTH]]),
            nl::multiply,
            Q_WIDTH as f64,
            nl::add,
            arange_4h.ap([[Q_WIDTH, 1], [0, b], [1, Q_WIDTH]]),
        );
        let flat = all_token_4_h_indices.reshape([1, b * Q_WIDTH]);
        for bt in 0..b / SBUF_QUADRANT_SIZE {
            let ps = nl::ndarray([TILE_SIZE, 1], nl::float32, buffer = nl::psum);
            nisa::nc_transpose(ps, flat[s![.., bt * TILE_SIZE..(bt + 1) * TILE_SIZE]]);
            nisa::tensor_copy(buffers.token_4_H_indices_on_p[s![.., bt..bt + 1]], ps);
        }
    }

    /// The folded token rows of `buffers.token_4_H_indices_on_p` into
    /// `buffers.block_hidden_states`: row `idx[q, bt]` of `hidden_states`
    /// viewed as `[4·T, H/4]` to `(q, bt)`, one indirect DMA per 32 tokens
    /// (the library's PE-transpose path; padding rows skipped under
    /// `skip_token`).
    #[nki_helper]
    pub fn load_hidden_states_mx(inps: InputTensors, dims: BWMMMXDimensionSizes, skip_dma: SkipMode, buffers: SharedBuffers) {
        let folded = inps.hidden_states.reshape([dims.t * Q_WIDTH, dims.h / Q_WIDTH]);
        let idx = buffers.token_4_H_indices_on_p;
        for bt in 0..dims.b / SBUF_QUADRANT_SIZE {
            gather_token_rows(buffers.block_hidden_states[s![.., bt, ..]], folded, idx[s![.., bt..bt + 1]], 0, skip_dma.skip_token);
        }
    }

    /// `dst[p, ht, 128·bt + q] = src[q, bt, 128·ht + p]`: the folded rows
    /// with the hidden dim on the partitions, by PE transposes, up to 8 per
    /// PSUM bank, each bank evicted at once.
    #[nki_helper]
    pub fn sbuf_layout_adapter(src: Sbuf, dst: Sbuf, dims: BWMMMXDimensionSizes) {
        let (b_div_32, h_div_512) = (dims.b / SBUF_QUADRANT_SIZE, dims.h / H512);
        let transposes_per_bank = PSUM_BMAX.min(b_div_32);
        let width = transposes_per_bank * TILE_SIZE;
        for ht in 0..h_div_512 {
            for bank in 0..b_div_32 / transposes_per_bank {
                let ps = nl::ndarray([TILE_SIZE, width], src.dtype(), buffer = nl::psum);
                for tp in 0..transposes_per_bank {
                    let bt = bank * transposes_per_bank + tp;
                    let c0 = ht * TILE_SIZE;
                    nisa::nc_transpose(ps[s![.., tp * TILE_SIZE..(tp + 1) * TILE_SIZE]], src[s![.., bt, c0..c0 + TILE_SIZE]]);
                }
                nisa::tensor_copy(dst[s![.., ht, bank * width..(bank + 1) * width]], ps);
            }
        }
    }

    /// The transposed rows quantized to MXFP8 (`quantize_mx`, one scale per
    /// 8 partitions x 4 values, the 4 values of one token).
    #[nki_helper(target = "trn3")]
    pub fn quantize_block_hidden_state_T(buffers: SharedBuffers) {
        nisa::quantize_mx(buffers.hidden_qtz_sb, buffers.block_hidden_states_T, buffers.hidden_scale_sb);
    }

    /// The block whose token ids `positions` views through the four steps
    /// of the module docs into `buffers.hidden_qtz_sb` / `hidden_scale_sb`.
    #[nki_helper(target = "trn3")]
    pub fn load_and_quantize_hidden_states(
        inps: InputTensors,
        positions: Tensor,
        buffers: SharedBuffers,
        dims: BWMMMXDimensionSizes,
        cfg: BWMMMXConfigs,
    ) {
        compute_hidden_index_vector(positions, buffers, dims);
        load_hidden_states_mx(inps, dims, cfg.skip_dma, buffers);
        sbuf_layout_adapter(buffers.block_hidden_states, buffers.block_hidden_states_T, dims);
        quantize_block_hidden_state_T(buffers);
    }

    /// The index vector `[128, 1]` int32 gathering expert `expert_index`'s
    /// (`[1, 1]`) scale rows of a tensor viewed as `[E·scale_factor, ..]`:
    /// partition `32·q + r` (`r < 4`) names row `scale_factor·e + 4·q + r`
    /// for the `n_quadrants_needed` quadrants and the first
    /// `n_remaining_partition` rows of the next, every other partition `-1`
    /// (skipped). Built in `dst_idx_vector` (`[128, 1]` float32) by an iota,
    /// a multiply-add and a PE transpose.
    #[nki_helper]
    pub fn _generate_expert_index_vector(
        expert_index: Sbuf,
        dst_idx_vector: Sbuf,
        scale_factor: i64,
        n_quadrants_needed: i64,
        n_remaining_partition: i64,
    ) -> Sbuf {
        let n_quadrants = n_quadrants_needed + if n_remaining_partition > 0 { 1 } else { 0 };
        assert!(n_quadrants <= 4, "_generate_expert_index_vector: n_quadrants must be <= 4, got {n_quadrants}");
        let rows = Q_WIDTH;
        let arange_f = nl::ndarray([1, n_quadrants, rows], nl::int32, buffer = nl::sbuf);
        nisa::iota(arange_f, [[rows, n_quadrants], [1, rows]]);
        let padded_index = nl::ndarray([1, TILE_SIZE], nl::float32, buffer = nl::sbuf);
        nisa::memset(padded_index, -1.0);
        nisa::scalar_tensor_tensor(
            padded_index.ap([[TILE_SIZE, 1], [SBUF_QUADRANT_SIZE, n_quadrants], [1, rows]]),
            expert_index.ap([[1, 1], [0, n_quadrants], [0, rows]]),
            nl::multiply,
            scale_factor as f64,
            nl::add,
            arange_f,
        );
        if n_remaining_partition > 0 {
            let p0 = (n_quadrants - 1) * SBUF_QUADRANT_SIZE + n_remaining_partition;
            nisa::memset(padded_index[s![.., p0..p0 + rows - n_remaining_partition]], -1.0);
        }
        let ps = nl::ndarray([TILE_SIZE, 1], nl::float32, buffer = nl::psum);
        nisa::nc_transpose(ps, padded_index);
        nisa::tensor_copy(dst_idx_vector, ps);
        let token_indices_on_p = nl::ndarray([TILE_SIZE, 1], nl::int32, buffer = nl::sbuf);
        nisa::tensor_copy(token_indices_on_p, dst_idx_vector);
        token_indices_on_p
    }

    /// The call's options (the rest of the library's `BWMMMXConfigs`).
    #[nki_object]
    pub struct MxOptions {
        /// The activation, DMA skips and the dtype of the token rows and
        /// the old output rows.
        pub common: BwmmOptions,
        /// The MX dtype of `uint32`/`int32` weights.
        pub weight_dtype: Option<Dtype>,
        /// The gate and up clamps.
        pub clamps: ClampLimits,
        /// Whether each token's experts are summed (top-k > 1).
        pub is_tensor_update_accumulating: bool,
        /// Where the affinity multiplies.
        pub expert_affinities_scaling_mode: ExpertAffinityScaleMode,
    }

    /// The [`MxOptions`] of an MX kernel's option parameters.
    #[nki_helper]
    pub fn mx_options(
        common: BwmmOptions,
        weight_dtype: Option<Dtype>,
        is_tensor_update_accumulating: bool,
        expert_affinities_scaling_mode: ExpertAffinityScaleMode,
        clamps: ShardOnIClamps,
    ) -> MxOptions {
        let clamps = clamp_limits(clamps);
        MxOptions { common, weight_dtype, clamps, is_tensor_update_accumulating, expert_affinities_scaling_mode }
    }

    /// The MX tensors of a call (weights viewed as their MX dtype, scales
    /// given) and its `BWMMMXConfigs`, the index vectors and this program's
    /// gate/up scale tile allocated (its columns split `i_shards` ways);
    /// whether both scales are given.
    #[nki_helper]
    pub fn mx_inputs(
        t: BwmmMxTensors,
        extra: BwmmMxBiasScales,
        conditions: Option<Hbm>,
        opts: MxOptions,
        i_shards: i64,
    ) -> (InputTensors, BWMMMXConfigs, bool) {
        let (gup_w, target): (Hbm, Dtype) = convert_to_mxfp_dtype(t.gate_up_proj_weight, opts.weight_dtype);
        let (down_w, _) = convert_to_mxfp_dtype(t.down_proj_weight, Some(target));
        let (gs, ds, x) = (extra.gate_up_proj_scale, extra.down_proj_scale, t.hidden_states);
        let scales = gs.is_some() && ds.is_some();
        // Checked given before any use.
        let (gup_scale, down_scale) = (gs.unwrap_or(x), ds.unwrap_or(x));
        let p_gup_idx_vector = nl::ndarray([TILE_SIZE, 1], nl::float32, buffer = nl::sbuf);
        nisa::memset(p_gup_idx_vector, -1.0);
        let p_down_idx_vector = nl::ndarray([TILE_SIZE, 1], nl::float32, buffer = nl::sbuf);
        nisa::memset(p_down_idx_vector, -1.0);
        let gw = gup_w.shape();
        let gup_scales_sb = nl::ndarray([TILE_SIZE, 2, gw[3], gw[4] / i_shards], nl::uint8, buffer = nl::sbuf);
        nisa::memset(gup_scales_sb, 0.0);
        let inps = InputTensors {
            token_position_to_id: t.token_position_to_id,
            block_to_expert: t.block_to_expert,
            hidden_states: x,
            gate_up_proj_weight: gup_w,
            gate_and_up_proj_bias: extra.gate_and_up_proj_bias,
            down_proj_bias: extra.down_proj_bias,
            down_proj_weight: down_w,
            expert_affinities_masked: t.expert_affinities_masked,
            gate_up_proj_scale: gup_scale,
            down_proj_scale: down_scale,
            p_gup_idx_vector,
            p_down_idx_vector,
            gup_scales_sb,
            conditions,
        };
        let mut skip = SkipMode { skip_token: false, skip_weight: false };
        let given = opts.common.skip_dma;
        if let Some(m) = given {
            skip = m;
        }
        let mut mode = opts.expert_affinities_scaling_mode;
        if mode == ExpertAffinityScaleMode::PRE_SCALE_DELAYED {
            mode = ExpertAffinityScaleMode::PRE_SCALE;
        }
        let cfg = BWMMMXConfigs {
            scaling_mode: mode,
            skip_dma: skip,
            compute_dtype: opts.common.compute_dtype,
            weight_dtype: target,
            is_tensor_update_accumulating: opts.is_tensor_update_accumulating,
            use_dynamic_while: conditions.is_some(),
            activation_function: opts.common.activation_function,
            clamps: opts.clamps,
        };
        (inps, cfg, scales)
    }
}
