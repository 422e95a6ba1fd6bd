//! The NKI library's `qkv_cte`: the fused QKV projection of context-encoding
//! (prefill) hidden states, for long sequences (`B·S` of 128 and more).
//!
//! ```text
//! x   = input [B, S, H]                          # in the compute dtype (bf16 for fp32 input)
//! (fused_residual_add)  x = input + mlp_prev + attention_prev
//! (RMS_NORM)            x = x / sqrt(Σx²/hidden_actual + eps) · gamma   (SKIP_GAMMA: no gamma)
//! (LAYER_NORM)          x = (x - mean) / sqrt(var + eps) · gamma (+ beta)
//! out = x @ fused_qkv_weights (+ bias)           # [B·S, I], fp32 sums, rounded to the compute dtype
//! (fused_rope)  each Q and K head X = [X1, X2]:  X·cos + [-X2, X1]·sin
//! BSD: out as [B, S, I];  NBSd: out as [I / d_head, B, S, d_head]
//! (k_scale, v_scale)  Q = out[.., :q_dim] as [B, S, q_dim];  K, V = their columns
//!     k_cache[b, s] = clip(K / k_scale, fp8_min, fp8_max) in kv_dtype   (V likewise)
//!     (use_block_kv)  k_cache[slot // block_size, slot % block_size], slot = slot_mapping[b, s]
//! ```
//!
//! Loops and tiling. Short sequences (`S < 640` per program) are folded into
//! one batch of `B·S` rows. With two programs (LNC2) each program takes half
//! of the (folded) sequence, the second the odd row. Each program's rows go
//! in S tiles of 128, grouped in blocks of up to `MAX_S_MULTI_BUFFER_DEGREE`
//! tiles (as many as the PSUM banks hold: one bank per S tile and 512 output
//! columns):
//!
//! ```text
//! for each batch b, each S block:                            (qkv_cte_block)
//!     for each S tile of <= 128 rows:                         (load_and_transpose_input)
//!         input_sb = the rows [rows, H] (+ residuals: one DMA reduction)
//!         RMS: input_sb *= 1/rms (per row)  |  LAYER: mean, 1/sqrt(var + eps) per row
//!         for each 512 columns of H:
//!             LAYER: input_sb[:, cols] = (input_sb - mean) · rstd
//!             psum = the four 128-column pieces transposed on the PE array
//!             input_sb[:, cols] = psum (· gamma (+ beta) per partition)  # now [128 h, tile·128 + s]
//!     for each 1024 rows of H:                                (qkv_projection)
//!         w_sb = the weight rows [128, 8, I]                  # one DMA
//!         for each S tile, 128-row piece of the block, 512 columns of I:
//!             psum[tile, i tile] += input_sbᵀ piece @ w_sb piece
//!     for each S tile: out_sb = psum (+ bias) | RoPE on Q, K (+ bias)   (evict_psum_to_sbuf_apply_bias,
//!                                                         copy_psum_to_sbuf_apply_rope_and_bias)
//!         store out_sb in the output layout                  (store_output)
//!         | Q stored, K and V quantized into the caches      (store_q_and_quantize_kv)
//! ```
//!
//! The kernel takes the library's signature (the library's `sbm` SBUF
//! allocator has no counterpart: tiles are placed by the compiler, so
//! `use_auto_allocation` is taken and not read). Without MX the input is
//! always transposed on the PE array: the library's DMA transpose (chosen by
//! `load_input_with_DMA_transpose` for 16-bit input without norm or residual
//! add) moves the same values, and the library documents the option as one it
//! may ignore. (MX's `MX_INTERLEAVED` forms need it: their DMA transposes
//! define the weights' order.) The weights are loaded block by block (the
//! library prefetches them all when SBUF space allows: the same values).
//!
//! `STATIC` quantization takes float8_e4m3 weights, the Q/K/V weight scales
//! and an input scale. The fp8 KV-cache outputs (`k_scale` and `v_scale`
//! `[128, 1]`, BSD, the heads given) return `(Q, k_cache, v_cache)`, the
//! caches updated in place: `[B, max_seq_len, kv_dim]` row caches (whose
//! batches are not folded: row `s` of batch `b` is cache row `[b, s]`), or
//! with `use_block_kv` `[num_blocks, block_size, kv_dim]` slots. The clip
//! bounds default to `kv_dtype`'s largest finite value (240 for
//! float8_e4m3, 57344 for float8_e5m2; other dtypes need `fp8_max` and
//! `fp8_min`).
//!
//! `MX` quantization (trn3) takes `[H/4, I]` `float8_e4m3fn_x4` weights in
//! the `MX_CONTIGUOUS` layout with `uint8` block scales `qkv_w_scale` `[H/32,
//! I]` (or none: the neutral scale `2^0`), quantizes the normalised rows on
//! chip and multiplies with `nc_matmul_mx`; `is_input_swizzled` takes the
//! input pre-swizzled for it (see [`qkv_cte_mx`]). The `MX_INTERLEAVED`
//! weights (the rows reordered as the library's `QKVWeightLayout` documents)
//! go with the DMA-transpose path, for input without norm, residual add or
//! swizzle: a `float8_e4m3`/`float8_e4m3fn` input multiplied as given (unit
//! input scales; block scales `[H/32, I]` or none), and the static
//! dequantization of a bfloat16 or float8 input (`qkv_in_scale` `[1, 1]` or
//! `[128, 1]`, `qkv_w_scale` `[1, 3]` or `[128, 3]`, the heads given): the
//! bfloat16 rows divided by the input scale and clipped to ±fp8_max before
//! `quantize_mx`, Q, K and V times their weight scale and the input scale,
//! then the bias and RoPE. Float8 input returns bfloat16. MX with the fp8
//! KV-cache outputs is refused by name. `ROW` (the library's `qkv_cte` has
//! no path for it: a `ROW` call runs its float path without the scales),
//! `STATIC_MX`, `ROW_MX` and `store_output_in_sbuf` are refused by name. The
//! rules are [`qkv_cte_violation`].

// The library's parameter `load_input_with_DMA_transpose` keeps its spelling.
#![allow(non_snake_case)]

use nki::prelude::*;

pub mod qkv_cte_constants;
pub mod qkv_cte_globals;
pub mod qkv_cte_input;
pub mod qkv_cte_kv_cache;
pub mod qkv_cte_mx;
pub mod qkv_cte_output;
pub mod qkv_cte_projection;
pub mod qkv_cte_utils;
pub mod qkv_cte_validation;

pub use kernel::*;

/// Why a `qkv_cte` call is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QkvCteRule {
    /// `B`, `S` or `I` is not positive.
    Positive,
    /// `H` is above 24576 or not a multiple of 128.
    Hidden,
    /// `I` is above 4096 (the 8 PSUM banks of 512 columns).
    FusedQkv,
    /// The NBSd layout without `d_head = 128`.
    HeadDim,
    /// `(num_q_heads + 2·num_kv_heads)·d_head` differs from `I`.
    Heads,
    /// `hidden_actual` is outside `1..=H`.
    HiddenActual,
    /// Fused RoPE without heads, or with a `d_head` that is odd or does not divide 512.
    RopeHeads,
    /// The fp8 KV-cache outputs with the NBSd layout.
    KvCacheLayout,
    /// The fp8 KV-cache outputs without `d_head` and the head counts.
    KvCacheHeads,
    /// MX quantization with `H` not a multiple of 512 (one packed tile of 128 partitions x 4).
    MxHidden,
    /// MX quantization with an odd count of rows per program (`nc_matmul_mx` takes an even count).
    MxSeqShard,
    /// The DMA-transpose MX path (float8 input or `qkv_in_scale`) with a norm,
    /// the residual add or the pre-swizzled input (it moves the rows as stored).
    MxDmaTransposeFusion,
    /// Float8 input or `qkv_in_scale` with MX and `load_input_with_DMA_transpose=False`.
    MxDmaTransposeOff,
    /// `qkv_in_scale` with MX and an input neither bfloat16 nor float8 (the
    /// DMA transpose moves 2-value words of 2 or 4 bytes).
    MxStaticDequantInput,
    /// `qkv_in_scale` with MX without `qkv_w_scale` `[1, 3]` or `[128, 3]` and
    /// `qkv_in_scale` `[1, 1]` or `[128, 1]`.
    MxStaticDequantScales,
    /// `qkv_in_scale` with MX without `d_head` and the head counts (the Q/K/V segments).
    MxStaticDequantHeads,
    /// The DMA-transpose MX path without `MX_INTERLEAVED` weights.
    MxInterleaved,
    /// MX without the DMA-transpose path and with `MX_INTERLEAVED` weights.
    MxContiguous,
    /// MX quantization with the fp8 KV-cache outputs (the library's MX path does not write them).
    MxKvCache,
    /// `is_input_swizzled` without MX quantization.
    SwizzledNeedsMx,
    /// `is_input_swizzled` with a norm or the residual add.
    SwizzledFusion,
}

impl QkvCteRule {
    /// The rule in words.
    pub const fn message(self) -> &'static str {
        match self {
            QkvCteRule::Positive => "qkv_cte: B, S and I must be positive",
            QkvCteRule::Hidden => "qkv_cte: H must be a multiple of 128 and at most 24576",
            QkvCteRule::FusedQkv => "qkv_cte: I (fused_qkv_weights.shape[1]) must be at most 4096",
            QkvCteRule::HeadDim => "qkv_cte: the NBSd output layout needs d_head = 128",
            QkvCteRule::Heads => "qkv_cte: (num_q_heads + 2 * num_kv_heads) * d_head must equal I",
            QkvCteRule::HiddenActual => "qkv_cte: hidden_actual must be in 1..=H",
            QkvCteRule::RopeHeads => "qkv_cte: fused_rope needs num_q_heads, num_kv_heads and an even d_head dividing 512",
            QkvCteRule::KvCacheLayout => "qkv_cte: the fp8 KV-cache outputs need the BSD output layout",
            QkvCteRule::KvCacheHeads => "qkv_cte: the fp8 KV-cache outputs need d_head, num_q_heads and num_kv_heads",
            QkvCteRule::MxHidden => "qkv_cte: H must be a multiple of 512 for MX quantization",
            QkvCteRule::MxSeqShard => "qkv_cte: S / programs must be even for MX quantization",
            QkvCteRule::MxDmaTransposeFusion => {
                "qkv_cte: float8 input and qkv_in_scale with MX quantization take neither a norm, fused_residual_add nor is_input_swizzled"
            }
            QkvCteRule::MxDmaTransposeOff => {
                "qkv_cte: float8 input and qkv_in_scale with MX quantization need load_input_with_DMA_transpose=True"
            }
            QkvCteRule::MxStaticDequantInput => "qkv_cte: qkv_in_scale with MX quantization takes a bfloat16 or float8 input",
            QkvCteRule::MxStaticDequantScales => {
                "qkv_cte: qkv_in_scale with MX quantization needs qkv_w_scale [1, 3] or [128, 3] and qkv_in_scale [1, 1] or [128, 1]"
            }
            QkvCteRule::MxStaticDequantHeads => "qkv_cte: qkv_in_scale with MX quantization needs d_head, num_q_heads and num_kv_heads",
            QkvCteRule::MxInterleaved => {
                "qkv_cte: float8 input and qkv_in_scale with MX quantization need weight_layout MX_INTERLEAVED (the DMA-transpose path)"
            }
            QkvCteRule::MxContiguous => "qkv_cte: MX quantization without float8 input or qkv_in_scale needs weight_layout MX_CONTIGUOUS",
            QkvCteRule::MxKvCache => "qkv_cte: the fp8 KV-cache outputs are not supported with MX quantization",
            QkvCteRule::SwizzledNeedsMx => "qkv_cte: is_input_swizzled is only supported with MX quantization",
            QkvCteRule::SwizzledFusion => "qkv_cte: is_input_swizzled supports neither a norm nor fused_residual_add",
        }
    }
}

/// A `qkv_cte` call as the rules see it (`d_head`, the head counts and
/// `hidden_actual` 0 for none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QkvCteShape {
    /// `B · S`.
    pub bxs: i64,
    /// `H`.
    pub hidden: i64,
    /// `I`, the fused QKV width.
    pub fused_qkv: i64,
    /// `d_head`, 0 for none.
    pub d_head: i64,
    /// Query heads, 0 for none.
    pub num_q_heads: i64,
    /// Key (and value) heads, 0 for none.
    pub num_kv_heads: i64,
    /// `hidden_actual`, 0 for none.
    pub hidden_actual: i64,
    /// Whether the output layout is NBSd.
    pub nbsd: bool,
    /// Whether RoPE is fused.
    pub fused_rope: bool,
    /// Whether the fp8 KV-cache outputs are asked for (`k_scale` and `v_scale`).
    pub kv_cache: bool,
    /// Whether the quantization is MX.
    pub mx_quant: bool,
    /// Rows per program, `S / programs` (MX takes an even count).
    pub s_shard: i64,
    /// Whether the weight layout is `MX_INTERLEAVED`.
    pub mx_interleaved: bool,
    /// Whether the input is pre-swizzled (`is_input_swizzled`).
    pub swizzled: bool,
    /// Whether a norm is fused.
    pub normalized: bool,
    /// Whether the residual add is fused.
    pub fused_residual_add: bool,
    /// Whether the input is float8 (`float8_e4m3` or `float8_e4m3fn`).
    pub fp8_input: bool,
    /// Whether the input is bfloat16.
    pub bf16_input: bool,
    /// Whether `load_input_with_DMA_transpose=False`.
    pub dma_transpose_off: bool,
    /// `qkv_w_scale`'s shape, `[0, 0]` for none.
    pub qkv_w_scale: [i64; 2],
    /// `qkv_in_scale`'s shape, `[0, 0]` for none.
    pub qkv_in_scale: [i64; 2],
}

/// Whether a scale of `shape` is one row or one per partition of `cols` columns.
const fn is_scale_of(shape: [i64; 2], cols: i64) -> bool {
    (shape[0] == 1 || shape[0] == P_MAX) && shape[1] == cols
}

/// The first rule `c` breaks.
pub const fn qkv_cte_violation(c: QkvCteShape) -> Option<QkvCteRule> {
    if c.bxs <= 0 || c.fused_qkv <= 0 {
        return Some(QkvCteRule::Positive);
    }
    if c.hidden <= 0 || c.hidden % P_MAX != 0 || c.hidden > MAX_H {
        return Some(QkvCteRule::Hidden);
    }
    if c.fused_qkv > MAX_I {
        return Some(QkvCteRule::FusedQkv);
    }
    if c.nbsd && c.d_head != NBSD_D_HEAD {
        return Some(QkvCteRule::HeadDim);
    }
    let heads_given = c.d_head > 0 && c.num_q_heads > 0 && c.num_kv_heads > 0;
    if heads_given && (c.num_q_heads + 2 * c.num_kv_heads) * c.d_head != c.fused_qkv {
        return Some(QkvCteRule::Heads);
    }
    if c.hidden_actual < 0 || c.hidden_actual > c.hidden {
        return Some(QkvCteRule::HiddenActual);
    }
    if c.fused_rope {
        if c.num_q_heads <= 0 || c.num_kv_heads <= 0 {
            return Some(QkvCteRule::RopeHeads);
        }
        let d = if c.d_head > 0 { c.d_head } else { c.fused_qkv / (c.num_q_heads + 2 * c.num_kv_heads) };
        if d <= 0 || d % 2 != 0 || PSUM_FMAX % d != 0 {
            return Some(QkvCteRule::RopeHeads);
        }
    }
    if c.kv_cache && c.nbsd {
        return Some(QkvCteRule::KvCacheLayout);
    }
    if c.kv_cache && (c.d_head <= 0 || c.num_q_heads <= 0 || c.num_kv_heads <= 0) {
        return Some(QkvCteRule::KvCacheHeads);
    }
    if c.swizzled && !c.mx_quant {
        return Some(QkvCteRule::SwizzledNeedsMx);
    }
    if c.swizzled && (c.normalized || c.fused_residual_add) {
        return Some(QkvCteRule::SwizzledFusion);
    }
    if c.mx_quant {
        if c.hidden % H_PER_MX_TILE != 0 {
            return Some(QkvCteRule::MxHidden);
        }
        if c.s_shard % 2 != 0 {
            return Some(QkvCteRule::MxSeqShard);
        }
        // The library's DMA-transpose path: rows moved as stored, 2 values a word.
        let in_scale = c.qkv_in_scale[0] > 0;
        let dma_path = c.fp8_input || in_scale;
        if dma_path && (c.normalized || c.fused_residual_add || c.swizzled) {
            return Some(QkvCteRule::MxDmaTransposeFusion);
        }
        if dma_path && c.dma_transpose_off {
            return Some(QkvCteRule::MxDmaTransposeOff);
        }
        if in_scale && !c.fp8_input && !c.bf16_input {
            return Some(QkvCteRule::MxStaticDequantInput);
        }
        if in_scale && !(is_scale_of(c.qkv_w_scale, NUM_QKV_SEGMENTS) && is_scale_of(c.qkv_in_scale, 1)) {
            return Some(QkvCteRule::MxStaticDequantScales);
        }
        if in_scale && (c.d_head <= 0 || c.num_q_heads <= 0 || c.num_kv_heads <= 0) {
            return Some(QkvCteRule::MxStaticDequantHeads);
        }
        if dma_path && !c.mx_interleaved {
            return Some(QkvCteRule::MxInterleaved);
        }
        if !dma_path && c.mx_interleaved {
            return Some(QkvCteRule::MxContiguous);
        }
        if c.kv_cache {
            return Some(QkvCteRule::MxKvCache);
        }
    }
    None
}

/// A `qkv_cte` call checked at compile time, or a compile error naming the
/// rule it breaks.
///
/// ```
/// let c = nkilib::qkv_cte_config!(bxs = 1024, hidden = 8192, fused_qkv = 1280, d_head = 128);
/// assert_eq!(c.fused_qkv, 1280);
/// ```
///
/// ```compile_fail
/// // I = 5120 columns do not fit the 8 PSUM banks of 512.
/// let c = nkilib::qkv_cte_config!(bxs = 1024, hidden = 8192, fused_qkv = 5120);
/// ```
#[macro_export]
macro_rules! qkv_cte_config {
    (bxs = $b:expr, hidden = $h:expr, fused_qkv = $i:expr $(, $field:ident = $v:expr)* $(,)?) => {{
        const CALL: $crate::qkv::qkv_cte::QkvCteShape = $crate::qkv::qkv_cte::QkvCteShape {
            bxs: $b,
            hidden: $h,
            fused_qkv: $i,
            $($field: $v,)*
            ..$crate::qkv::qkv_cte::QkvCteShape {
                bxs: 0,
                hidden: 0,
                fused_qkv: 0,
                d_head: 0,
                num_q_heads: 0,
                num_kv_heads: 0,
                hidden_actual: 0,
                nbsd: false,
                fused_rope: false,
                kv_cache: false,
                mx_quant: false,
                s_shard: 0,
                mx_interleaved: false,
                swizzled: false,
                normalized: false,
                fused_residual_add: false,
                fp8_input: false,
                bf16_input: false,
                dma_transpose_off: false,
                qkv_w_scale: [0, 0],
                qkv_in_scale: [0, 0],
            }
        };
        const _: () = if let Some(rule) = $crate::qkv::qkv_cte::qkv_cte_violation(CALL) {
            panic!("{}", rule.message());
        };
        CALL
    }};
}

/// The kernel and its top loops (the constants, configuration, checks and
/// phases are in `qkv_cte/`).
#[nki_module]
pub mod kernel {
    pub use crate::qkv::qkv_cte::qkv_cte_constants::{
        BN_STATS_DST_SIZE, BN_STATS_TILE_SIZE, FP8_E4M3_MAX, FP8_E4M3_MAX_GEN4, FP8_E5M2_MAX, MAX_H, MAX_I, MAX_S_MULTI_BUFFER_DEGREE,
        NBSD_D_HEAD, NUM_128_TILES_PER_WEIGHT_LOAD, NUM_HW_PSUM_BANKS, NUM_QKV_SEGMENTS, P_MAX, PSUM_FMAX, QUANT_DTYPE,
        S_THRESHOLD_FOR_RESHAPE, WEIGHT_LOAD_BLOCK_SIZE_PER_H,
    };
    use crate::qkv::qkv_cte::qkv_cte_globals::load_globals;
    use crate::qkv::qkv_cte::qkv_cte_input::load_and_transpose_input;
    use crate::qkv::qkv_cte::qkv_cte_mx::qkv_cte_mx_block;
    pub use crate::qkv::qkv_cte::qkv_cte_mx::{H_PER_MX_TILE, MX_NEUTRAL_SCALE, SWIZZLED_S_TILE_SIZE};
    use crate::qkv::qkv_cte::qkv_cte_output::evict_and_store_block;
    use crate::qkv::qkv_cte::qkv_cte_projection::qkv_projection;
    use crate::qkv::qkv_cte::qkv_cte_utils::{
        QkvCteConfig, QkvCteDims, QkvCteGlobals, QkvCteTensors, QkvCteUserInput, QkvFusions, QkvKvCacheArgs, QkvQuantScales, build_config,
        get_tensor_dimensions, max_positive_value_for_dtype, multi_buffering_degree_for_seqlen,
    };
    use crate::qkv::qkv_cte::qkv_cte_validation::{
        validate_kv_cache, validate_mx_quantization, validate_static_quantization, validate_unsupported_options, validate_user_inputs,
    };
    pub use crate::utils::common_types::{NormType, QKVOutputLayout, QKVWeightLayout, QuantizationType};
    use nki::prelude::*;

    /// One S block of batch `b`: `rows` rows from this program's row `r0`
    /// (steps 1 to 6 for each of its S tiles).
    #[nki_helper]
    pub fn qkv_cte_block(cfg: QkvCteConfig, dims: QkvCteDims, io: QkvCteTensors, g: QkvCteGlobals, b: i64, r0: i64, rows: i64) {
        let h = dims.h;
        let tiles = rows.div_ceil(P_MAX);
        let s0 = dims.s_shard_offset + r0;
        let input_sb = nl::ndarray([P_MAX, tiles, h], cfg.input_sb_dtype, buffer = nl::sbuf);
        // STATIC's quantized rows (else not written).
        let input_q = nl::ndarray([P_MAX, tiles, h], QUANT_DTYPE, buffer = nl::sbuf);
        for t in 0..tiles {
            let r = (rows - t * P_MAX).min(P_MAX);
            load_and_transpose_input(cfg, dims, io, g, input_sb[s![.., t, ..]], input_q[s![.., t, ..]], b, s0 + t * P_MAX, r);
        }
        let psum = nl::ndarray([P_MAX, NUM_HW_PSUM_BANKS, PSUM_FMAX], nl::float32, buffer = nl::psum);
        let mm_input = if cfg.static_quant { input_q } else { input_sb };
        qkv_projection(cfg, dims, io, mm_input, psum, rows);
        evict_and_store_block(cfg, dims, io, g, psum, b, s0, rows);
    }

    /// The library's `_qkv_cte_impl`: the globals loaded, then this
    /// program's rows, batch by batch, in S blocks.
    #[nki_helper]
    pub fn qkv_cte_impl(
        cfg: QkvCteConfig,
        dims: QkvCteDims,
        io: QkvCteTensors,
        args: QkvCteUserInput,
        scales: QkvQuantScales,
        kv: QkvKvCacheArgs,
        norm_eps: f64,
    ) {
        if dims.s_shard == 0 {
            return;
        }
        let g = load_globals(cfg, dims, args, scales, kv, norm_eps);
        let degree: i64 = multi_buffering_degree_for_seqlen(dims);
        let block = degree * P_MAX;
        for b in 0..dims.b {
            for blk in 0..dims.s_shard.div_ceil(block) {
                let r0 = blk * block;
                let rows = (dims.s_shard - r0).min(block);
                if cfg.mx_quant {
                    qkv_cte_mx_block(cfg, dims, io, g, scales.qkv_w_scale, b, r0, rows);
                } else {
                    qkv_cte_block(cfg, dims, io, g, b, r0, rows);
                }
            }
        }
    }

    /// The fused QKV projection of `input` `[B, S, H]` with
    /// `fused_qkv_weights` `[H, I]` for prefill (see the module docs).
    /// Returns `[B, S, I]` (BSD) or `[I/d_head, B, S, d_head]` (NBSd) in the
    /// input's dtype (bfloat16 with STATIC or float8 input); with the fp8 KV-cache outputs,
    /// Q `[B, S, q_dim]` in the input's dtype and the updated caches.
    #[nki_kernel]
    pub fn qkv_cte(
        #[dtypes(float32, bfloat16, float16, float8_e4m3, float8_e4m3fn)] input: Hbm,
        #[dtypes(float32, bfloat16, float16, float8_e4m3, float8_e4m3fn_x4)] fused_qkv_weights: Hbm,
        #[default(QKVOutputLayout::BSD)] output_layout: QKVOutputLayout,
        #[dtypes(float32, bfloat16, float16)] bias: Option<Hbm>,
        #[spread] _: QkvFusions,
        #[default(QuantizationType::NONE)] quantization_type: QuantizationType,
        #[dtypes(float32, uint8)] qkv_w_scale: Option<Hbm>,
        #[dtypes(float32)] qkv_in_scale: Option<Hbm>,
        #[default(false)] is_input_swizzled: bool,
        #[default(QKVWeightLayout::CONTIGUOUS)] weight_layout: QKVWeightLayout,
    ) -> Outputs {
        let _ = use_auto_allocation;
        validate_unsupported_options(quantization_type, store_output_in_sbuf, weight_layout);
        assert!(input.ndim() == 3, "qkv_cte: input must be [B, S, H] in HBM, got {} dims", input.ndim());
        let args = QkvCteUserInput {
            input,
            fused_qkv_weights,
            output_layout,
            bias,
            fused_residual_add,
            mlp_prev,
            attention_prev,
            fused_norm_type,
            gamma_norm_weights,
            layer_norm_bias,
            hidden_actual: hidden_actual.unwrap_or(input.shape()[2]),
            fused_rope,
            cos_cache,
            sin_cache,
            d_head: d_head.unwrap_or(0),
            num_q_heads: num_q_heads.unwrap_or(0),
            num_kv_heads: num_kv_heads.unwrap_or(0),
            quantization_type,
            is_input_swizzled,
            load_input_with_DMA_transpose,
            weight_layout,
        };
        validate_user_inputs(args);
        let scales = QkvQuantScales { qkv_w_scale, qkv_in_scale };
        validate_static_quantization(args, quantization_type, scales);
        let kv = QkvKvCacheArgs { k_cache, v_cache, k_scale, v_scale, use_block_kv, block_size: block_size.unwrap_or(0), slot_mapping };
        validate_kv_cache(args, kv);
        validate_mx_quantization(args, scales, kv);
        // The KV caches' tile dtype and clip bounds (by default the dtype's largest finite value).
        let kv_tile_dtype = kv_dtype.unwrap_or(input.dtype());
        let kv_dtype_max = max_positive_value_for_dtype(kv_tile_dtype);
        assert!(
            kv_dtype_max > 0.0 || k_scale.is_none() || (fp8_max.is_some() && fp8_min.is_some()),
            "qkv_cte: fp8_max and fp8_min must be given when kv_dtype is not float8_e4m3 or float8_e5m2, got kv_dtype {kv_tile_dtype}"
        );
        let (kv_max, kv_min) = (fp8_max.unwrap_or(kv_dtype_max), fp8_min.unwrap_or(-kv_dtype_max));
        let grid = nl::program_ndim() == 1;
        let num_shards = if grid { nl::num_programs(0) } else { 1 };
        let shard_id = if grid { nl::program_id(0) } else { 0 };
        let cfg = build_config(args, kv, quantization_type, num_shards, kv_tile_dtype, kv_max, kv_min, qkv_in_scale.is_some());
        let dims = get_tensor_dimensions(args, cfg, num_shards, shard_id);
        let (b, s, h, i, d) = (dims.b, dims.s, dims.h, dims.i, dims.d_head);
        let nbsd = output_layout == QKVOutputLayout::NBSd;
        // The fp8 forms' products are stored in bfloat16.
        let out_dtype = if cfg.static_quant || cfg.fp8_input { nl::bfloat16 } else { input.dtype() };
        // With the KV-cache outputs the output is Q alone, in the input's dtype.
        let output = if cfg.use_kv_quantization {
            nl::ndarray([dims.b_orig, dims.s_orig, dims.q_dim], input.dtype(), buffer = nl::shared_hbm)
        } else if nbsd {
            nl::ndarray([dims.num_heads, dims.b_orig, dims.s_orig, d], out_dtype, buffer = nl::shared_hbm)
        } else {
            nl::ndarray([dims.b_orig, dims.s_orig, i], out_dtype, buffer = nl::shared_hbm)
        };
        let out_cols = if cfg.use_kv_quantization { dims.q_dim } else { i };
        // The kernel's view: [B, S] folded into [1, B·S] when the config says so
        // (the optional tensors are folded where they are read).
        let io = QkvCteTensors {
            input: input.reshape([b, s, h]),
            weights: fused_qkv_weights,
            output: if nbsd { output.reshape([dims.num_heads, b, s, d]) } else { output.reshape([b, s, out_cols]) },
            mlp_prev,
            attention_prev,
            cos_cache,
            sin_cache,
            k_cache,
            v_cache,
            slot_mapping,
        };
        qkv_cte_impl(cfg, dims, io, args, scales, kv, norm_eps);
        if num_shards == 2 {
            // Both programs' rows are stored before the output is read.
            nisa::core_barrier(output, [0, 1]);
        }
        if let Some(kc) = k_cache {
            if let Some(vc) = v_cache {
                if cfg.use_kv_quantization {
                    return Outputs(output, kc, vc);
                }
            }
        }
        Outputs(output)
    }
}
