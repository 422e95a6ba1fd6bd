//! The MX (OCP microscaling, trn3) form of `qkv_cte` (the library's
//! `_qkv_cte_mx_impl`): the rows normalised as in the float form, moved into
//! the MX layout on the PE array (or as stored by DMA transposes, with
//! `MX_INTERLEAVED` weights), quantized on chip by `quantize_mx` (unless
//! already float8) and multiplied by `nc_matmul_mx` with the
//! offline-quantized weights.
//!
//! Layouts. The weights are `[H/4, I]` `float8_e4m3fn_x4` (`MX_CONTIGUOUS`):
//! packed row `t·128 + p` holds hidden rows `t·512 + 4p + k`, `k = 0..4`; their
//! scales `[H/32, I]` `uint8` hold one per 32 of those hidden rows, row `16t +
//! g` for group `g` of tile `t`, placed in SBUF at partition `32(g/4) + g%4`
//! (without scales, every scale is the neutral `2^0`). The rows of each S
//! tile are moved into `xt` `[128, H/512, 128, 4]`, element `[p, t, s, k]` =
//! row `s`'s hidden value `t·512 + 4p + k`, the layout `quantize_mx` packs
//! into the block's `xq` `[128, H/512, S tiles·128]` and its scales `xs`.
//!
//! ```text
//! for each S block:                                       (qkv_cte_mx_block)
//!     for each S tile of <= 128 rows:
//!         input_sb = the rows (+ residuals), RMS or LayerNorm as the float form
//!         for each 512 hidden values t, each k of 4:      (transpose_for_mx)
//!             xt[:, t, rows, k] = (input_sb[rows, t·512 + 4p + k])ᵀ (· gamma (+ beta))
//!       | is_input_swizzled: 32 rows at a time, [32·4, H/512, 128] as stored,
//!         each t transposed whole into xt[:, t, rows, :]  (load_swizzled_tile)
//!         xq, xs[tile] = quantize_mx(xt)                  # one uint8 scale per 32 values
//!       | MX_INTERLEAVED: for each 512 hidden values t:  (dma_transpose_input_mx)
//!             words = rows as [2·rows, 128] 2-value words (input_words)
//!             float8:   xq[:, t, rows] = wordsᵀ           # xs = 2^0
//!             bfloat16: staging[:, t, rows] = wordsᵀ
//!         bfloat16: xq, xs[tile] = quantize_mx(clip(staging / in_scale, ±fp8_max))
//!     for each 512 hidden values t:                       (load_mx_weight_block)
//!         w_sb, ws_sb = packed rows t·128.., their quadrant-placed scales
//!         for each S tile, 512 columns of I:
//!             psum[tile, i tile] += nc_matmul_mx(xq[t], w_sb, xs[t], ws_sb)
//!     evict (+ bias | RoPE), store: the float form's steps 5 and 6
//!       (qkv_in_scale: Q, K, V times w_scale · in_scale, straight from PSUM)
//! ```
//!
//! The pre-swizzled input is `[B, S, H]` holding each row's `[H/512, 128, 4]`
//! as `[4, H/512, 128]`: viewed as `[B, S·4, H/512, 128]`, row `4s + k` holds
//! `t·512 + 4p + k` at `[t, p]`, so one PE transpose of `[32 rows·4, 128]`
//! puts 32 rows' `[s, k]` on the free axis in `xt`'s order. The weights are
//! loaded one packed tile at a time (the library prefetches them all when its
//! SBUF budget allows: the same values).
//!
//! The DMA-transpose path (`MX_INTERLEAVED`: a float8 input, or the static
//! dequantization scales `qkv_in_scale`) reads each row as `H/2` words of two
//! values, `[2, H/4]` words: word `[j, t·128 + p]` holds hidden `j·H/2 +
//! t·256 + 2p + (0, 1)`. One DMA transpose per 512 hidden values puts a row's
//! four values `t·256 + 2p + (0, 1), H/2 + t·256 + 2p + (0, 1)` in packed
//! element `[p, t, s]`, the order the `MX_INTERLEAVED` weights are packed in
//! (position `4r + 2j + m` is hidden row `j·H/2 + 2r + m`). Float8 words land
//! in `xq` itself with neutral stationary scales; bfloat16 rows (4-byte words)
//! in a staging tile of `xt`'s layout that is statically quantized, then
//! quantized by `quantize_mx` as the other path's. With `qkv_in_scale` the
//! `[1, 3]`/`[128, 3]` `qkv_w_scale` is not MX block scales: the weights'
//! block scales are neutral and the scales dequantize the sums at eviction.
//! The library transposes one hidden tile just before its matmuls; here a
//! block's rows are moved first, as on the other path (the same values).

pub use kernel::*;

/// The MX phases and their tile constants.
#[nki::nki_module]
pub mod kernel {
    use crate::qkv::qkv_cte::qkv_cte_constants::{NUM_HW_PSUM_BANKS, P_MAX, PSUM_FMAX};
    use crate::qkv::qkv_cte::qkv_cte_input::{copy_transposed_apply_gamma, load_and_normalize_rows};
    use crate::qkv::qkv_cte::qkv_cte_output::evict_and_store_block;
    use crate::qkv::qkv_cte::qkv_cte_utils::{QkvCteConfig, QkvCteDims, QkvCteGlobals, QkvCteTensors};
    use crate::qkv::qkv_tkg_mx_impl::load_mx_weight_block;
    use crate::utils::common_types::NormType;
    pub use crate::utils::mx_layout::{MX_PACK, NUM_QUADRANTS, SCALES_PER_QUADRANT};
    use nki::prelude::*;

    /// Hidden values of one packed 128-partition tile: `P_MAX · MX_PACK`.
    pub const H_PER_MX_TILE: i64 = 512;
    /// The biased exponent of the neutral scale `2^0` (scales are `2^(s - 127)`).
    pub const MX_NEUTRAL_SCALE: f64 = 127.0;
    /// Rows per load of the pre-swizzled input: their 4 values per partition fill 128 partitions.
    pub const SWIZZLED_S_TILE_SIZE: i64 = 32;
    /// Two-value words per packed element (4 values) on the DMA-transpose
    /// path: a row is as many half-rows of `H/4` words.
    pub const WORDS_PER_MX_ELEMENT: i64 = 2;

    /// Step 2 for one loaded S tile (`input_sb` `[rows, H]`, normalised rows;
    /// LayerNorm's `(x - mean)·rstd` applied here): the transposes of every
    /// 4th hidden column into `xt_tile` `[128, H/512, rows, 4]`, times gamma
    /// (plus beta) per partition with a norm.
    #[nki_helper]
    pub fn transpose_for_mx(
        cfg: QkvCteConfig,
        dims: QkvCteDims,
        g: QkvCteGlobals,
        input_sb: Sbuf,
        mean_rstd: Sbuf,
        xt_tile: Sbuf,
        rows: i64,
    ) {
        if cfg.fused_norm_type == NormType::LAYER_NORM {
            let x = input_sb[s![0..rows, ..]];
            let (mean, rstd) = (mean_rstd[s![0..rows, 0..1]], mean_rstd[s![0..rows, 1..2]]);
            nisa::tensor_scalar(x, x, nl::subtract, mean, op1 = nl::multiply, operand1 = rstd);
        }
        let by_k = input_sb.reshape([P_MAX, dims.h / H_PER_MX_TILE, P_MAX, MX_PACK]);
        for t in 0..dims.h / H_PER_MX_TILE {
            for k in 0..MX_PACK {
                let tp = nl::ndarray([P_MAX, P_MAX], cfg.psum_transpose_dtype, buffer = nl::psum);
                nisa::nc_transpose(tp[s![.., 0..rows]], by_k[s![0..rows, t, .., k]]);
                copy_transposed_apply_gamma(cfg, g, xt_tile[s![.., t, 0..rows, k]], tp[s![.., 0..rows]], t * MX_PACK + k);
            }
        }
    }

    /// Steps 1 and 2 for the pre-swizzled input: `rows` rows from `s0` of
    /// batch `b`, 32 at a time as `[rows·4, H/512, 128]`, each 512 hidden
    /// values transposed whole into `xt_tile` `[128, H/512, rows, 4]`.
    #[nki_helper]
    pub fn load_swizzled_tile(cfg: QkvCteConfig, dims: QkvCteDims, io: QkvCteTensors, xt_tile: Sbuf, b: i64, s0: i64, rows: i64) {
        let tiles = dims.h / H_PER_MX_TILE;
        let view = io.input.reshape([dims.b, dims.s * MX_PACK, tiles, P_MAX]);
        for j in 0..rows.div_ceil(SWIZZLED_S_TILE_SIZE) {
            let r0 = j * SWIZZLED_S_TILE_SIZE;
            let r = (rows - r0).min(SWIZZLED_S_TILE_SIZE);
            let n = r * MX_PACK;
            let in_sb = nl::ndarray([P_MAX, tiles, P_MAX], cfg.compute_mm_dtype, buffer = nl::sbuf);
            let first = (s0 + r0) * MX_PACK;
            nisa::dma_copy(in_sb[s![0..n, .., ..]], view[s![b, first..first + n, .., ..]]);
            for t in 0..tiles {
                // Free element 4s + k of the transpose is row s's value k.
                let tp = nl::ndarray([P_MAX, SWIZZLED_S_TILE_SIZE, MX_PACK], cfg.psum_transpose_dtype, buffer = nl::psum);
                nisa::nc_transpose(tp[s![.., 0..r, ..]], in_sb[s![0..n, t, ..]]);
                nisa::tensor_copy(xt_tile[s![.., t, r0..r0 + r, ..]], tp[s![.., 0..r, ..]]);
            }
        }
    }

    /// Steps 1 and 2 for one S tile: `rows` rows from `s0` of batch `b` into
    /// `xt_tile` `[128, H/512, rows, 4]` (loaded with the residuals,
    /// normalised, transposed; or the pre-swizzled rows).
    #[nki_helper]
    pub fn load_and_transpose_input_mx(
        cfg: QkvCteConfig,
        dims: QkvCteDims,
        io: QkvCteTensors,
        g: QkvCteGlobals,
        xt_tile: Sbuf,
        b: i64,
        s0: i64,
        rows: i64,
    ) {
        if cfg.is_input_swizzled {
            load_swizzled_tile(cfg, dims, io, xt_tile, b, s0, rows);
        } else {
            let input_sb = nl::ndarray([P_MAX, dims.h], cfg.compute_mm_dtype, buffer = nl::sbuf);
            let mean_rstd = load_and_normalize_rows(cfg, dims, io, g, input_sb, b, s0, rows);
            transpose_for_mx(cfg, dims, g, input_sb, mean_rstd, xt_tile, rows);
        }
    }

    /// The DMA-transpose path's source for hidden tile `t`: `rows` rows from
    /// `s0` of batch `b` as `[2·rows, 128]` two-value words (16-bit for
    /// float8 rows, 32-bit for bfloat16): half-row `2s + j`, word `p` holds
    /// hidden `j·H/2 + t·256 + 2p + (0, 1)`.
    #[nki_helper]
    pub fn input_words(cfg: QkvCteConfig, dims: QkvCteDims, io: QkvCteTensors, b: i64, s0: i64, rows: i64, t: i64) -> Hbm {
        let half_row = dims.h / MX_PACK;
        let word_dtype = if cfg.fp8_input { nl::float16 } else { nl::float32 };
        let first = (b * dims.s + s0) * WORDS_PER_MX_ELEMENT * half_row + t * P_MAX;
        io.input.ap([[half_row, rows * WORDS_PER_MX_ELEMENT], [1, P_MAX]], offset = first, dtype = word_dtype)
    }

    /// Steps 1 and 2 on the DMA-transpose path: `rows` rows from `s0` of
    /// batch `b` into columns `c0..` of the block's `xq` (and `xs`). A DMA
    /// transpose of each hidden tile's words ([`input_words`]) puts row `s`'s
    /// values `t·256 + 2p + (0, 1)` and `H/2 + t·256 + 2p + (0, 1)` in the two
    /// words of packed element `[p, t, s]`: the `MX_INTERLEAVED` order.
    /// Float8 rows are the packed codes (their neutral scales set by the
    /// block); bfloat16 rows land in a staging tile of the packed layout, are
    /// divided by the input scale and clipped to the fp8 range, then quantized.
    #[nki_helper(target = "trn3")]
    pub fn dma_transpose_input_mx(
        cfg: QkvCteConfig,
        dims: QkvCteDims,
        io: QkvCteTensors,
        g: QkvCteGlobals,
        xq: Sbuf,
        xs: Sbuf,
        b: i64,
        s0: i64,
        c0: i64,
        rows: i64,
    ) {
        let tiles = dims.h / H_PER_MX_TILE;
        let n = rows * WORDS_PER_MX_ELEMENT;
        if cfg.fp8_input {
            let cols = xq.shape()[2] * WORDS_PER_MX_ELEMENT;
            for t in 0..tiles {
                let dst = xq.ap([[tiles * cols, P_MAX], [1, n]], offset = t * cols + c0 * WORDS_PER_MX_ELEMENT, dtype = nl::float16);
                nisa::dma_transpose(dst, input_words(cfg, dims, io, b, s0, rows, t));
            }
        } else {
            let staging = nl::ndarray([P_MAX, tiles, P_MAX, MX_PACK], nl::bfloat16, buffer = nl::sbuf);
            let cols = P_MAX * WORDS_PER_MX_ELEMENT;
            for t in 0..tiles {
                let dst = staging.ap([[tiles * cols, P_MAX], [1, n]], offset = t * cols, dtype = nl::float32);
                nisa::dma_transpose(dst, input_words(cfg, dims, io, b, s0, rows, t));
            }
            let x = staging[s![.., .., 0..rows, ..]];
            let fp8_max = cfg.fp8_max;
            nisa::tensor_scalar(x, x, nl::multiply, g.in_scale_sb, op1 = nl::minimum, operand1 = fp8_max);
            nisa::tensor_scalar(x, x, nl::maximum, -fp8_max);
            nisa::quantize_mx(xq[s![.., .., c0..c0 + rows]], x, xs[s![.., .., c0..c0 + rows]]);
        }
    }

    /// Step 4: the block's quantized rows (`xq`, `xs` `[128, H/512, tiles·128]`)
    /// times the packed weights, one packed tile per load, each S tile and
    /// 512 columns of I accumulating in its own PSUM bank (with neutral
    /// weight scales when `qkv_w_scale` is not given, or is the static
    /// dequantization's per-Q/K/V scales).
    #[nki_helper(target = "trn3")]
    pub fn qkv_projection_mx(
        cfg: QkvCteConfig,
        dims: QkvCteDims,
        io: QkvCteTensors,
        qkv_w_scale: Option<Hbm>,
        xq: Sbuf,
        xs: Sbuf,
        psum: Psum,
        rows: i64,
    ) {
        let block_scales = qkv_w_scale.is_some() && !cfg.mx_static_dequant;
        let (i, ni, tiles) = (dims.i, dims.num_512_tiles_per_i, dims.h / H_PER_MX_TILE);
        // The packed rows as [128, tiles, I]: row t·128 + p at (p, t).
        let w = io.weights.reshape([tiles, P_MAX, i]).permute([1, 0, 2]);
        let neutral_sb = nl::ndarray([P_MAX, PSUM_FMAX], nl::uint8, buffer = nl::sbuf);
        nisa::memset(neutral_sb, MX_NEUTRAL_SCALE);
        for t in 0..tiles {
            let w_sb = nl::ndarray([P_MAX, 1, i], nl::float8_e4m3fn_x4, buffer = nl::sbuf);
            let ws_sb = nl::ndarray([P_MAX, 1, i], nl::uint8, buffer = nl::sbuf);
            if let Some(scales) = qkv_w_scale {
                if block_scales {
                    let ws = scales.reshape([tiles, NUM_QUADRANTS, SCALES_PER_QUADRANT, i]);
                    load_mx_weight_block(w, ws, w_sb, ws_sb, t, 1);
                }
            }
            if !block_scales {
                nisa::dma_copy(w_sb, w[s![.., t..t + 1, ..]]);
            }
            for st in 0..rows.div_ceil(P_MAX) {
                let (r0, r) = (st * P_MAX, (rows - st * P_MAX).min(P_MAX));
                for k in 0..ni {
                    let (i0, iw) = (k * PSUM_FMAX, (i - k * PSUM_FMAX).min(PSUM_FMAX));
                    let moving_scale = if block_scales { ws_sb[s![.., 0, i0..i0 + iw]] } else { neutral_sb[s![.., 0..iw]] };
                    nisa::nc_matmul_mx(
                        psum[s![0..r, st * ni + k, 0..iw]],
                        xq[s![.., t, r0..r0 + r]],
                        w_sb[s![.., 0, i0..i0 + iw]],
                        xs[s![.., t, r0..r0 + r]],
                        moving_scale,
                    );
                }
            }
        }
    }

    /// One S block of batch `b` in the MX form: `rows` rows from this
    /// program's row `r0` (steps 1 to 6).
    #[nki_helper(target = "trn3")]
    pub fn qkv_cte_mx_block(
        cfg: QkvCteConfig,
        dims: QkvCteDims,
        io: QkvCteTensors,
        g: QkvCteGlobals,
        qkv_w_scale: Option<Hbm>,
        b: i64,
        r0: i64,
        rows: i64,
    ) {
        let h_tiles = dims.h / H_PER_MX_TILE;
        let tiles = rows.div_ceil(P_MAX);
        let s0 = dims.s_shard_offset + r0;
        let xq = nl::ndarray([P_MAX, h_tiles, tiles * P_MAX], nl::float8_e4m3fn_x4, buffer = nl::sbuf);
        let xs = nl::ndarray([P_MAX, h_tiles, tiles * P_MAX], nl::uint8, buffer = nl::sbuf);
        if cfg.fp8_input {
            // The float8 rows are the packed codes as given: scale 2^0.
            nisa::memset(xs, MX_NEUTRAL_SCALE);
        }
        for t in 0..tiles {
            let (c0, r) = (t * P_MAX, (rows - t * P_MAX).min(P_MAX));
            if cfg.mx_dma_transpose {
                dma_transpose_input_mx(cfg, dims, io, g, xq, xs, b, s0 + c0, c0, r);
            } else {
                // Quantized one S tile at a time: a whole block's 16-bit rows
                // and their quantized copy would not fit a partition at large H.
                let xt = nl::ndarray([P_MAX, h_tiles, P_MAX, MX_PACK], cfg.compute_mm_dtype, buffer = nl::sbuf);
                let xt_tile = xt[s![.., .., 0..r, ..]];
                load_and_transpose_input_mx(cfg, dims, io, g, xt_tile, b, s0 + c0, r);
                nisa::quantize_mx(xq[s![.., .., c0..c0 + r]], xt_tile, xs[s![.., .., c0..c0 + r]]);
            }
        }
        let psum = nl::ndarray([P_MAX, NUM_HW_PSUM_BANKS, PSUM_FMAX], nl::float32, buffer = nl::psum);
        qkv_projection_mx(cfg, dims, io, qkv_w_scale, xq, xs, psum, rows);
        evict_and_store_block(cfg, dims, io, g, psum, b, s0, rows);
    }
}
