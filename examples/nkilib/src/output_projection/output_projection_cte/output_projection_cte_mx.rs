//! The MX (OCP microscaling, trn3) form of the library's
//! `output_projection_cte`: `float4_e2m1fn_x4` weights quantized offline,
//! the attention quantized on chip by `quantize_mx` (or given quantized),
//! multiplied by `nc_matmul_mx`.
//!
//! Layouts. The contraction runs over `K = N·D` rows (row `n·D + d`), packed
//! four to an element: packed row `r` holds rows `4r .. 4r + 3`. The weights
//! are `[K/4, H]` with `uint8` scales `[K/32, H]` (one per 8 packed rows,
//! biased exponent: value `2^(s - 127)`). The attention is either `[B, N, D,
//! S]` in bfloat16 / float16, quantized per 32 consecutive rows of a token,
//! or already quantized: `[B, 1, K/4, S]` `float8_e4m3fn_x4` (the `D` given
//! is the packed one) with scales `input_scales` `[B, K/32, S]`.
//!
//! ```text
//! C = the packed contraction rows (K/4), in tiles of 128; when C % 128 == 96
//!     the last tile is padded to 128 with zero rows (nc_matmul_mx takes 32,
//!     64 or 128 partitions)
//! for each block of the program's H / LNC columns:           (load_mx_weights)
//!     w, ws = the block's packed rows [128, tiles, cols], scales in their quadrants
//!     bias = broadcast on 128 rows
//!     for each batch b, each S_TILE (512) of the sequence:   (process_mx_batch_tile)
//!         online:  a = attention[b] as [C, 4, s] -> [C, s, 4]; xq, xs = quantize_mx(a)
//!         given:   xq, xs = the packed rows and their quadrant-placed scales
//!         for each 128 rows of the tile, each 1024 columns:
//!             psum (bf16) = Σ_tiles nc_matmul_mx(xq, w, xs, ws)   # the tokens stationary
//!             res = psum (+ bias)  in the output dtype
//!         store res to out[b, rows, block]
//! ```
//!
//! An odd sequence tile is padded with a zero position (`nc_matmul_mx` takes
//! an even stationary width). The output dtype defaults to bfloat16.
//!
//! `STATIC_MX` runs the same loops on `float8_e4m3fn` weights `[K, H]`
//! stored pre-shuffled (row `4r + k` of the logical weight at `(r, h, k)` of
//! `[K/4, H, 4]`) with `[128, 1]` fp32 `input_scales` and `weight_scales`:
//! the attention rows, regrouped as above, are multiplied by the reciprocal
//! input scale in their dtype, clipped to `±448` and rounded to
//! `float8_e4m3fn`; the bytes of four neighbouring values (of the attention
//! and of the weights) are read as one `float8_e4m3fn_x4` element through an
//! `.ap(..., dtype=float8_e4m3fn_x4)` view, with every block scale the
//! constant 127 (`2^0`); the bfloat16 sums are multiplied by `weight_scale ·
//! input_scale` and the bias added, in bfloat16.
//! `float8_e4m3fn_x4` weights, which the library's checks let through but
//! its loader DMAs into a `float4_e2m1fn_x4` tile (a conversion no engine
//! performs on packed data), are refused by name.

use nki::prelude::*;

pub use kernel::*;

/// The MX phase helpers and their tile constants.
#[nki_module]
pub mod kernel {
    use crate::output_projection::output_projection_cte::output_projection_cte_parameters::{
        S_TILE_SIZE, calculate_h_block_size, dtype_size, h_block_bounds, load_static_quant_scales,
    };
    pub use crate::output_projection::output_projection_utils::{F_MAX, P_MAX};
    /// The largest finite `float8_e4m3fn`: `STATIC_MX` activations span `±448`.
    pub const FP8_E4M3FN_MAX: f64 = 448.0;
    /// The biased exponent of `2^0`: `STATIC_MX`'s constant block scale.
    pub const UNIT_MX_SCALE: f64 = 127.0;
    pub use crate::utils::mx_layout::{MX_GROUP_PARTITIONS, MX_PACK, QUADRANT, SCALE_GROUP_SIZE, load_mx_scales_strided};
    use nki::prelude::*;

    /// Output columns per `nc_matmul_mx`: a bf16 PSUM bank holds 1024.
    pub const H_SUBTILE_SIZE: i64 = 1024;
    /// The packed-row count `nc_matmul_mx` cannot take (it takes 32, 64 or
    /// 128): a last tile of 96 is padded to 128.
    pub const UNSUPPORTED_TILE_ROWS: i64 = 96;

    /// The library's MX `TilingConfig`: the program's columns and their
    /// blocks, and the packed contraction in tiles.
    #[nki_object]
    pub struct MxTilingConfig {
        /// This program.
        pub prg_id: i64,
        /// `B`.
        pub b_size: i64,
        /// `S`.
        pub s_size: i64,
        /// `H`.
        pub h_size: i64,
        /// Columns per program, `H / LNC`.
        pub h_sharded_size: i64,
        /// Columns per weight block.
        pub h_block_size: i64,
        /// Weight blocks per program.
        pub num_h_blocks_per_prg: i64,
        /// Packed contraction rows `C` (`N·D / 4`, or `N·D` given quantized).
        pub contraction: i64,
        /// Zero rows padding the last tile (32 when `C % 128 == 96`, else 0).
        pub padding: i64,
        /// Tiles of `C + padding` rows, 128 each but the last.
        pub d_tile_count: i64,
        /// Whether the attention comes quantized (`float8_e4m3fn_x4`).
        pub input_quantized: bool,
        /// `STATIC_MX`: `float8_e4m3fn` weights, static input and weight scales.
        pub static_mx: bool,
    }

    /// The tensors the MX phases read and write.
    #[nki_object]
    pub struct MxProjectionTensors {
        /// `[B, C, 4, S]` online, `[B, C, S]` given quantized.
        pub attention: Tensor,
        /// Given quantized: `[B, C/8, S]`.
        pub input_scales: Option<Tensor>,
        /// `[C, H]`.
        pub weight: Tensor,
        /// `[C/8, H]`.
        pub weight_scales: Tensor,
        /// `[1, H]`.
        pub bias: Option<Tensor>,
        /// `[B, S, H]`.
        pub out: Tensor,
        /// `STATIC_MX`: `1 / input_scale` on each partition, `[128, 1]` fp32.
        pub inv_input_scale_sb: Option<Tensor>,
        /// `STATIC_MX`: `weight_scale · input_scale` on each partition, `[128, 1]` fp32.
        pub dequant_scale_sb: Option<Tensor>,
    }

    /// One weight block in SBUF: its packed rows, their scales and the bias.
    #[nki_object]
    pub struct MxWeightBlock {
        /// `[128, tiles, block]` packed rows (padded rows zero).
        pub w_sb: Tensor,
        /// `[128, tiles, block]` `uint8` scales, each tile's in its quadrants.
        pub ws_sb: Tensor,
        /// `[128, block]`: the bias on every partition (unused without one).
        pub bias_sb: Tensor,
        /// The block's first column.
        pub h0: i64,
        /// Its columns.
        pub cols: i64,
    }

    /// The library's MX `build_tiling_config`.
    #[nki_helper]
    pub fn build_mx_tiling_config(attention: Hbm, weight: Hbm, programs: i64, prg_id: i64, static_mx: bool) -> MxTilingConfig {
        let [b, n, d, sl] = attention.shape();
        let h = weight.shape()[1];
        let input_quantized = attention.dtype() == nl::float8_e4m3fn_x4;
        let contraction = if input_quantized { n * d } else { n * d / MX_PACK };
        let padding = if contraction % P_MAX == UNSUPPORTED_TILE_ROWS { P_MAX - UNSUPPORTED_TILE_ROWS } else { 0 };
        let h_sharded_size = h / programs;
        let h_block_size: i64 = calculate_h_block_size(n * d, h_sharded_size, dtype_size(weight.dtype()));
        MxTilingConfig {
            prg_id,
            b_size: b,
            s_size: sl,
            h_size: h,
            h_sharded_size,
            h_block_size,
            num_h_blocks_per_prg: h_sharded_size.div_ceil(h_block_size),
            contraction,
            padding,
            d_tile_count: (contraction + padding).div_ceil(P_MAX),
            input_quantized,
            static_mx,
        }
    }

    /// Rows of packed tile `t`: `(with padding, holding data)`.
    #[nki_helper]
    pub fn d_tile_bounds(cfg: MxTilingConfig, t: i64) -> (i64, i64) {
        let padded = (cfg.contraction + cfg.padding - t * P_MAX).min(P_MAX);
        let actual = if t == cfg.d_tile_count - 1 { padded - cfg.padding } else { padded };
        (padded, actual)
    }

    /// The library's `load_mx_quantized_weights`, `load_mx_weight_scales` and
    /// `load_bias`: columns `h0..h0 + cols` of every packed tile (padded rows
    /// zeroed), their scales, each tile's in its quadrants, and the bias
    /// broadcast on the 128 partitions in its dtype.
    #[nki_helper]
    pub fn load_mx_weights(cfg: MxTilingConfig, io: MxProjectionTensors, h0: i64, cols: i64) -> MxWeightBlock {
        let w_sb = nl::ndarray([P_MAX, cfg.d_tile_count, cfg.h_block_size], io.weight.dtype(), buffer = nl::sbuf);
        let ws_sb = nl::ndarray([P_MAX, cfg.d_tile_count, cfg.h_block_size], nl::uint8, buffer = nl::sbuf);
        for t in 0..cfg.d_tile_count {
            let (padded, actual): (i64, i64) = d_tile_bounds(cfg, t);
            let r0 = t * P_MAX;
            if padded > actual {
                nisa::memset(w_sb[s![actual..padded, t, ..]], 0.0);
            }
            nisa::dma_copy(w_sb[s![0..actual, t, 0..cols]], io.weight[s![r0..r0 + actual, h0..h0 + cols]]);
            let g0 = r0 / MX_GROUP_PARTITIONS;
            let groups = actual / MX_GROUP_PARTITIONS;
            load_mx_scales_strided(ws_sb[s![0..padded, t, 0..cols]], io.weight_scales[s![g0..g0 + groups, h0..h0 + cols]], groups);
        }
        let bias_sb = load_block_bias(cfg, io, h0, cols);
        MxWeightBlock { w_sb, ws_sb, bias_sb, h0, cols }
    }

    /// The library's `load_bias`: columns `h0..h0 + cols` of the bias
    /// broadcast on the 128 partitions in its dtype (an unused tile without one).
    #[nki_helper]
    pub fn load_block_bias(cfg: MxTilingConfig, io: MxProjectionTensors, h0: i64, cols: i64) -> Sbuf {
        let bias = io.bias;
        let bias_sb = nl::ndarray([P_MAX, cfg.h_block_size], bias.unwrap_or(io.out).dtype(), buffer = nl::sbuf);
        if let Some(bv) = bias {
            nisa::dma_copy(bias_sb[s![.., 0..cols]], bv[s![.., h0..h0 + cols]].broadcast(0, P_MAX));
        }
        bias_sb
    }

    /// The `STATIC_MX` weights: columns `h0..h0 + cols` of every packed tile
    /// as `float8_e4m3fn` bytes `[128, tiles, block, 4]` (padded rows zeroed),
    /// seen as `float8_e4m3fn_x4` `[128, tiles, block]`, with the constant
    /// block scale, and the bias.
    #[nki_helper]
    pub fn load_static_mx_weights(cfg: MxTilingConfig, io: MxProjectionTensors, h0: i64, cols: i64) -> MxWeightBlock {
        let (tiles, block) = (cfg.d_tile_count, cfg.h_block_size);
        let w8 = nl::ndarray([P_MAX, tiles, block, MX_PACK], io.weight.dtype(), buffer = nl::sbuf);
        for t in 0..tiles {
            let (padded, actual): (i64, i64) = d_tile_bounds(cfg, t);
            let r0 = t * P_MAX;
            if padded > actual {
                nisa::memset(w8[s![actual..padded, t, .., ..]], 0.0);
            }
            nisa::dma_copy(w8[s![0..actual, t, 0..cols, ..]], io.weight[s![r0..r0 + actual, h0..h0 + cols, ..]]);
        }
        let w_sb = w8.ap([[tiles * block, P_MAX], [block, tiles], [1, block]], dtype = nl::float8_e4m3fn_x4);
        let ws_sb = nl::ndarray([P_MAX, tiles, block], nl::uint8, buffer = nl::sbuf);
        nisa::memset(ws_sb, UNIT_MX_SCALE);
        let bias_sb = load_block_bias(cfg, io, h0, cols);
        MxWeightBlock { w_sb, ws_sb, bias_sb, h0, cols }
    }

    /// The library's `load_mx_input_interleaved` and
    /// `_quantize_mx_attention_tensors`: positions `s0..s0 + s_len` of batch
    /// `b` as `[C, 4, s]`, regrouped to `[C, s, 4]` (the layout `quantize_mx`
    /// reads: a packed row's 4 values side by side), quantized per tile into
    /// `xq` and its scales `xs` (`[128, tiles, S_TILE_SIZE]`). Padded rows and
    /// the odd position are zeros.
    #[nki_helper(target = "trn3")]
    pub fn quantize_mx_input(cfg: MxTilingConfig, io: MxProjectionTensors, xq: Sbuf, xs: Sbuf, b: i64, s0: i64, s_len: i64) {
        let padded_s = s_len + s_len % 2;
        for t in 0..cfg.d_tile_count {
            let (padded, _): (i64, i64) = d_tile_bounds(cfg, t);
            let sw = load_mx_input_interleaved(cfg, io, b, s0, s_len, t);
            nisa::quantize_mx(xq[s![0..padded, t, 0..padded_s]], sw[s![0..padded, 0..padded_s, ..]], xs[s![0..padded, t, 0..padded_s]]);
        }
    }

    /// The library's `load_mx_input_interleaved` for packed tile `t`:
    /// positions `s0..s0 + s_len` of batch `b` as `[C, 4, s]`, regrouped to
    /// `[128, S_TILE_SIZE, 4]` in the attention's dtype. Padded rows and the
    /// odd position are zeros.
    #[nki_helper]
    pub fn load_mx_input_interleaved(cfg: MxTilingConfig, io: MxProjectionTensors, b: i64, s0: i64, s_len: i64, t: i64) -> Sbuf {
        let padded_s = s_len + s_len % 2;
        let (padded, actual): (i64, i64) = d_tile_bounds(cfg, t);
        let r0 = t * P_MAX;
        let tmp = nl::ndarray([P_MAX, MX_PACK, S_TILE_SIZE], io.attention.dtype(), buffer = nl::sbuf);
        if padded > actual {
            nisa::memset(tmp[s![actual..padded, .., ..]], 0.0);
        }
        if padded_s > s_len {
            nisa::memset(tmp[s![0..padded, .., s_len..padded_s]], 0.0);
        }
        nisa::dma_copy(tmp[s![0..actual, .., 0..s_len]], io.attention[s![b, r0..r0 + actual, .., s0..s0 + s_len]]);
        let sw = nl::ndarray([P_MAX, S_TILE_SIZE, MX_PACK], io.attention.dtype(), buffer = nl::sbuf);
        nisa::tensor_copy(sw[s![0..padded, 0..padded_s, ..]], tmp[s![0..padded, .., 0..padded_s]].permute([0, 2, 1]));
        sw
    }

    /// The library's `_quantize_static_mx_attention`: each packed tile's
    /// regrouped rows multiplied by the reciprocal input scale (in the
    /// attention's dtype), clipped to `±448` and rounded into the
    /// `float8_e4m3fn` bytes `xq8` `[128, tiles, S_TILE_SIZE, 4]`.
    #[nki_helper]
    pub fn quantize_static_mx_input(cfg: MxTilingConfig, io: MxProjectionTensors, xq8: Sbuf, b: i64, s0: i64, s_len: i64) {
        let padded_s = s_len + s_len % 2;
        if let Some(inv) = io.inv_input_scale_sb {
            for t in 0..cfg.d_tile_count {
                let (padded, _): (i64, i64) = d_tile_bounds(cfg, t);
                let sw = load_mx_input_interleaved(cfg, io, b, s0, s_len, t);
                let a = sw[s![0..padded, 0..padded_s, ..]];
                nisa::tensor_scalar(a, a, nl::multiply, inv[s![0..padded, ..]]);
                let q = xq8[s![0..padded, t, 0..padded_s, ..]];
                nisa::tensor_scalar(q, a, nl::minimum, FP8_E4M3FN_MAX, op1 = nl::maximum, operand1 = -FP8_E4M3FN_MAX);
            }
        }
    }

    /// The library's `load_mx_prequantized_input`: positions `s0..s0 +
    /// s_len` of batch `b`'s quantized rows into `xq` and their scales, in
    /// their quadrants, into `xs`. Padded rows and the odd position are zeros.
    #[nki_helper]
    pub fn load_mx_prequantized_input(cfg: MxTilingConfig, io: MxProjectionTensors, xq: Sbuf, xs: Sbuf, b: i64, s0: i64, s_len: i64) {
        let padded_s = s_len + s_len % 2;
        if let Some(scales) = io.input_scales {
            for t in 0..cfg.d_tile_count {
                let (padded, actual): (i64, i64) = d_tile_bounds(cfg, t);
                let r0 = t * P_MAX;
                if padded > actual {
                    nisa::memset(xq[s![actual..padded, t, ..]], 0.0);
                }
                if padded_s > s_len {
                    nisa::memset(xq[s![0..padded, t, s_len..padded_s]], 0.0);
                }
                nisa::dma_copy(xq[s![0..actual, t, 0..s_len]], io.attention[s![b, r0..r0 + actual, s0..s0 + s_len]]);
                let g0 = r0 / MX_GROUP_PARTITIONS;
                let groups = actual / MX_GROUP_PARTITIONS;
                let scale_sb = xs[s![0..padded, t, 0..padded_s]];
                if padded_s > s_len {
                    nisa::memset(scale_sb, 0.0);
                }
                load_mx_scales_strided(scale_sb[s![.., 0..s_len]], scales[s![b, g0..g0 + groups, s0..s0 + s_len]], groups);
            }
        }
    }

    /// The library's `_compute_mx_matmul` and `_write_results_to_output`:
    /// per 128 rows of the sequence tile and 1024 columns of the block, the
    /// `nc_matmul_mx` of every packed tile into bf16 PSUM, the bias added in
    /// the output dtype, the rows stored.
    #[nki_helper(target = "trn3")]
    pub fn compute_mx_matmul(cfg: MxTilingConfig, io: MxProjectionTensors, blk: MxWeightBlock, xq: Sbuf, xs: Sbuf, b: i64, s0: i64) {
        let s_len = (cfg.s_size - s0).min(S_TILE_SIZE);
        for st in 0..s_len.div_ceil(P_MAX) {
            let r0 = st * P_MAX;
            let rows = (s_len - r0).min(P_MAX);
            let prows = rows + rows % 2;
            let res_dtype = if cfg.static_mx { nl::bfloat16 } else { io.out.dtype() };
            let res_sb = nl::ndarray([P_MAX, cfg.h_block_size], res_dtype, buffer = nl::sbuf);
            for ht in 0..blk.cols.div_ceil(H_SUBTILE_SIZE) {
                let c0 = ht * H_SUBTILE_SIZE;
                let cs = (blk.cols - c0).min(H_SUBTILE_SIZE);
                let res_psum = nl::ndarray([P_MAX, H_SUBTILE_SIZE], nl::bfloat16, buffer = nl::psum);
                for t in 0..cfg.d_tile_count {
                    let (padded, _): (i64, i64) = d_tile_bounds(cfg, t);
                    nisa::nc_matmul_mx(
                        res_psum[s![0..prows, 0..cs]],
                        xq[s![0..padded, t, r0..r0 + prows]],
                        blk.w_sb[s![0..padded, t, c0..c0 + cs]],
                        xs[s![0..padded, t, r0..r0 + prows]],
                        blk.ws_sb[s![0..padded, t, c0..c0 + cs]],
                    );
                }
                let dst = res_sb[s![0..rows, c0..c0 + cs]];
                let (psum, bias) = (res_psum[s![0..rows, 0..cs]], blk.bias_sb[s![0..rows, c0..c0 + cs]]);
                if let Some(scale) = io.dequant_scale_sb {
                    nisa::tensor_scalar(dst, psum, nl::multiply, scale[s![0..rows, ..]]);
                    if io.bias.is_some() {
                        nisa::tensor_tensor(dst, dst, bias, nl::add);
                    }
                } else if io.bias.is_some() {
                    nisa::tensor_tensor(dst, psum, bias, nl::add);
                } else {
                    nisa::tensor_copy(dst, psum);
                }
            }
            let (o0, h0) = (s0 + r0, blk.h0);
            nisa::dma_copy(io.out[s![b, o0..o0 + rows, h0..h0 + blk.cols]], res_sb[s![0..rows, 0..blk.cols]]);
        }
    }

    /// The library's `perform_mx_quantized_projection` (and
    /// `perform_static_mx_quantized_projection`): the program's weight
    /// blocks in turn, each against every batch and sequence tile.
    #[nki_helper]
    pub fn perform_mx_quantized_projection(cfg: MxTilingConfig, io: MxProjectionTensors) {
        for hb in 0..cfg.num_h_blocks_per_prg {
            let (h0, cols): (i64, i64) = h_block_bounds(cfg.prg_id, cfg.h_sharded_size, cfg.h_block_size, hb);
            let blk = if cfg.static_mx { load_static_mx_weights(cfg, io, h0, cols) } else { load_mx_weights(cfg, io, h0, cols) };
            for b in 0..cfg.b_size {
                for st in 0..cfg.s_size.div_ceil(S_TILE_SIZE) {
                    let s0 = st * S_TILE_SIZE;
                    let s_len = (cfg.s_size - s0).min(S_TILE_SIZE);
                    if cfg.static_mx {
                        process_static_mx_batch_tile(cfg, io, blk, b, s0, s_len);
                    } else {
                        let xq = nl::ndarray([P_MAX, cfg.d_tile_count, S_TILE_SIZE], nl::float8_e4m3fn_x4, buffer = nl::sbuf);
                        let xs = nl::ndarray([P_MAX, cfg.d_tile_count, S_TILE_SIZE], nl::uint8, buffer = nl::sbuf);
                        if cfg.input_quantized {
                            load_mx_prequantized_input(cfg, io, xq, xs, b, s0, s_len);
                        } else {
                            quantize_mx_input(cfg, io, xq, xs, b, s0, s_len);
                        }
                        compute_mx_matmul(cfg, io, blk, xq, xs, b, s0);
                    }
                }
            }
        }
    }

    /// The library's `_process_static_mx_batch_tile`: one sequence tile of
    /// batch `b` quantized into `float8_e4m3fn` bytes, seen as
    /// `float8_e4m3fn_x4` `[128, tiles, S_TILE_SIZE]` with the constant block
    /// scale, against the weight block.
    #[nki_helper(target = "trn3")]
    pub fn process_static_mx_batch_tile(cfg: MxTilingConfig, io: MxProjectionTensors, blk: MxWeightBlock, b: i64, s0: i64, s_len: i64) {
        let tiles = cfg.d_tile_count;
        let xq8 = nl::ndarray([P_MAX, tiles, S_TILE_SIZE, MX_PACK], nl::float8_e4m3fn, buffer = nl::sbuf);
        quantize_static_mx_input(cfg, io, xq8, b, s0, s_len);
        let xq = xq8.ap([[tiles * S_TILE_SIZE, P_MAX], [S_TILE_SIZE, tiles], [1, S_TILE_SIZE]], dtype = nl::float8_e4m3fn_x4);
        let xs = nl::ndarray([P_MAX, tiles, S_TILE_SIZE], nl::uint8, buffer = nl::sbuf);
        nisa::memset(xs, UNIT_MX_SCALE);
        compute_mx_matmul(cfg, io, blk, xq, xs, b, s0);
    }

    /// The MX checks of the library's `validate_output_projection_inputs`,
    /// by parameter name, when the kernel is traced.
    #[nki_helper]
    pub fn validate_mx_inputs(attention: Hbm, weight: Hbm, input_scales: Option<Hbm>, weight_scales: Option<Hbm>) {
        let [b, n, d, sl] = attention.shape();
        let h = weight.shape()[1];
        let k = n * d;
        let given = attention.dtype() == nl::float8_e4m3fn_x4;
        assert!(nisa::get_nc_version() == nisa::nc_version::gen4, "output_projection_cte: quantization_type MX needs trn3 (nc_matmul_mx)");
        assert!(
            weight.dtype() == nl::float4_e2m1fn_x4,
            "output_projection_cte: weight must be float4_e2m1fn_x4 for MX quantization, got {}",
            weight.dtype()
        );
        assert!(
            given || attention.dtype() != nl::float32,
            "output_projection_cte: attention must be bfloat16, float16 or float8_e4m3fn_x4 for MX quantization (quantize_mx reads 16-bit data)"
        );
        let (rows, group): (i64, i64) = if given { (k, MX_GROUP_PARTITIONS) } else { (k / MX_PACK, SCALE_GROUP_SIZE) };
        let unit = if given { QUADRANT } else { P_MAX };
        assert!(k >= unit && k % unit == 0, "output_projection_cte: N * D = {k} must be a positive multiple of {unit} for MX quantization");
        let w_shape = weight.shape();
        assert!(
            weight.ndim() == 2 && w_shape[0] == rows,
            "output_projection_cte: weight must be [{rows}, H] (N * D packed by 4) for MX quantization, got {w_shape}"
        );
        assert!(weight_scales.is_some(), "output_projection_cte: weight_scales is required for MX quantization");
        if let Some(ws) = weight_scales {
            let ws_shape = ws.shape();
            assert!(ws.dtype() == nl::uint8, "output_projection_cte: weight_scales must be uint8 for MX quantization");
            assert!(
                ws.ndim() == 2 && ws_shape[0] == k / group && ws_shape[1] == h,
                "output_projection_cte: weight_scales must be [{}, {h}] for MX quantization, got {ws_shape}",
                k / group
            );
        }
        assert!(
            !given || input_scales.is_some(),
            "output_projection_cte: input_scales is required for MX quantization with pre-quantized input"
        );
        if let Some(xs) = input_scales {
            let xs_shape = xs.shape();
            assert!(given, "output_projection_cte: input_scales is only taken with pre-quantized (float8_e4m3fn_x4) MX input");
            assert!(xs.dtype() == nl::uint8, "output_projection_cte: input_scales must be uint8 for MX quantization");
            assert!(
                xs.ndim() == 3 && xs_shape[0] == b && xs_shape[1] == k / MX_GROUP_PARTITIONS && xs_shape[2] == sl,
                "output_projection_cte: input_scales must be [{b}, {}, {sl}] for MX quantization, got {xs_shape}",
                k / MX_GROUP_PARTITIONS
            );
        }
    }

    /// The MX projection (see the module docs) into a new `[B, S, H]` HBM
    /// tensor of `output_dtype` (default bfloat16).
    #[nki_helper]
    pub fn output_projection_cte_mx(
        attention: Hbm,
        weight: Hbm,
        bias: Option<Hbm>,
        input_scales: Option<Hbm>,
        weight_scales: Hbm,
        output_dtype: Option<Dtype>,
        programs: i64,
        prg_id: i64,
    ) -> Hbm {
        let cfg = build_mx_tiling_config(attention, weight, programs, prg_id, false);
        let (b, sl, c) = (cfg.b_size, cfg.s_size, cfg.contraction);
        let out = nl::ndarray([b, sl, cfg.h_size], output_dtype.unwrap_or(nl::bfloat16), buffer = nl::shared_hbm);
        let rows = if cfg.input_quantized { attention.reshape([b, c, sl]) } else { attention.reshape([b, c, MX_PACK, sl]) };
        let io = MxProjectionTensors {
            attention: rows,
            input_scales,
            weight,
            weight_scales,
            bias,
            out,
            inv_input_scale_sb: None,
            dequant_scale_sb: None,
        };
        perform_mx_quantized_projection(cfg, io);
        out
    }

    /// The `STATIC_MX` checks of the library's `validate_output_projection_inputs`
    /// (the scales are checked as `STATIC`'s), by parameter name.
    #[nki_helper]
    pub fn validate_static_mx_inputs(attention: Hbm, weight: Hbm) {
        let [_, n, d, _] = attention.shape();
        let k = n * d;
        assert!(
            nisa::get_nc_version() == nisa::nc_version::gen4,
            "output_projection_cte: quantization_type STATIC_MX needs trn3 (nc_matmul_mx)"
        );
        assert!(
            weight.dtype() == nl::float8_e4m3fn,
            "output_projection_cte: weight must be float8_e4m3fn for STATIC_MX quantization, got {}",
            weight.dtype()
        );
        assert!(
            k >= P_MAX && k % P_MAX == 0,
            "output_projection_cte: N * D = {k} must be a positive multiple of 128 for STATIC_MX quantization"
        );
    }

    /// The `STATIC_MX` projection (see the module docs) into a new `[B, S, H]`
    /// HBM tensor of `output_dtype` (default `attention`'s).
    #[nki_helper]
    pub fn output_projection_cte_static_mx(
        attention: Hbm,
        weight: Hbm,
        bias: Option<Hbm>,
        input_scales: Hbm,
        weight_scales: Hbm,
        output_dtype: Option<Dtype>,
        programs: i64,
        prg_id: i64,
    ) -> Hbm {
        let cfg = build_mx_tiling_config(attention, weight, programs, prg_id, true);
        let (b, sl, c, h) = (cfg.b_size, cfg.s_size, cfg.contraction, cfg.h_size);
        let out = nl::ndarray([b, sl, h], output_dtype.unwrap_or(attention.dtype()), buffer = nl::shared_hbm);
        let inv_input_scale_sb = nl::ndarray([P_MAX, 1], nl::float32, buffer = nl::sbuf);
        let dequant_scale_sb = nl::ndarray([P_MAX, 1], nl::float32, buffer = nl::sbuf);
        load_static_quant_scales(inv_input_scale_sb, dequant_scale_sb, input_scales, weight_scales);
        let io = MxProjectionTensors {
            attention: attention.reshape([b, c, MX_PACK, sl]),
            input_scales: None,
            weight: weight.reshape([c, h, MX_PACK]),
            weight_scales,
            bias,
            out,
            inv_input_scale_sb: Some(inv_input_scale_sb),
            dequant_scale_sb: Some(dequant_scale_sb),
        };
        perform_mx_quantized_projection(cfg, io);
        out
    }
}
