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
//! `use_auto_allocation` is taken and not read). The input is always
//! transposed on the PE array: the library's DMA transpose (chosen by
//! `load_input_with_DMA_transpose` for 16-bit input without norm or residual
//! add) moves the same values, and the library documents the option as one it
//! may ignore. The weights are loaded block by block (the library prefetches
//! them all when SBUF space allows: the same values).
//!
//! `STATIC` quantization takes float8_e4m3 weights, the Q/K/V weight scales
//! and an input scale. The fp8 KV-cache outputs (`k_scale` and `v_scale`
//! `[128, 1]`, BSD, the heads given) return `(Q, k_cache, v_cache)`, the
//! caches updated in place: `[B, max_seq_len, kv_dim]` row caches (whose
//! batches are not folded: row `s` of batch `b` is cache row `[b, s]`), or
//! with `use_block_kv` `[num_blocks, block_size, kv_dim]` slots. The clip
//! bounds default to `kv_dtype`'s largest finite value (240 for
//! float8_e4m3, 57344 for float8_e5m2; other dtypes need `fp8_max` and
//! `fp8_min`). `ROW` (the library's `qkv_cte` has no path for it: a `ROW`
//! call runs its float path without the scales), the MX forms,
//! `store_output_in_sbuf`, `is_input_swizzled` and weight layouts other than
//! `CONTIGUOUS` are refused by name. The rules are [`qkv_cte_violation`].

// The library's parameter `load_input_with_DMA_transpose` keeps its spelling.
#![allow(non_snake_case)]

use nki::prelude::*;

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
            }
        };
        const _: () = if let Some(rule) = $crate::qkv::qkv_cte::qkv_cte_violation(CALL) {
            panic!("{}", rule.message());
        };
        CALL
    }};
}

/// The kernel, its tile constants, configuration bundles and phase helpers.
#[nki_module]
pub mod kernel {
    pub use crate::utils::common_types::{NormType, QKVOutputLayout, QKVWeightLayout, QuantizationType};
    use nki::prelude::*;

    /// Partitions: S tiles of rows, and the 128-row pieces of H after the transpose.
    pub const P_MAX: i64 = nl::tile_size::pmax;
    /// Columns of one fp32 PSUM bank: one matmul's moving free size.
    pub const PSUM_FMAX: i64 = nl::tile_size::psum_fmax;
    /// PSUM banks: one per S tile and 512 output columns of an S block.
    pub const NUM_HW_PSUM_BANKS: i64 = 8;
    /// The largest `H`.
    pub const MAX_H: i64 = 24576;
    /// The largest `I`: every PSUM bank of one S tile.
    pub const MAX_I: i64 = 4096;
    /// The head size of the NBSd layout.
    pub const NBSD_D_HEAD: i64 = 128;
    /// Hidden rows per weight load (one DMA of `[128, 8, I]`).
    pub const WEIGHT_LOAD_BLOCK_SIZE_PER_H: i64 = 1024;
    /// 128-row pieces of H per weight load.
    pub const NUM_128_TILES_PER_WEIGHT_LOAD: i64 = 8;
    /// S tiles per block at most.
    pub const MAX_S_MULTI_BUFFER_DEGREE: i64 = 5;
    /// Sequences shorter than this per program are folded into one `B·S` batch.
    pub const S_THRESHOLD_FOR_RESHAPE: i64 = 640;
    /// Columns per `bn_stats` instruction.
    pub const BN_STATS_TILE_SIZE: i64 = 512;
    /// Statistics per `bn_stats` instruction.
    pub const BN_STATS_DST_SIZE: i64 = 6;
    /// STATIC quantization's weight and input dtype.
    pub const QUANT_DTYPE: Dtype = nl::float8_e4m3;
    /// The largest finite `float8_e4m3` before NeuronCore-v4: STATIC clips the input to ±this.
    pub const FP8_E4M3_MAX: f64 = 240.0;
    /// The same on NeuronCore-v4.
    pub const FP8_E4M3_MAX_GEN4: f64 = 448.0;
    /// Q, K and V: STATIC's weight scales.
    pub const NUM_QKV_SEGMENTS: i64 = 3;
    /// The largest finite `float8_e5m2`: the KV caches' default clip bound in that dtype.
    pub const FP8_E5M2_MAX: f64 = 57344.0;

    /// The library's `QKV_CTE_UserInput`: the call's tensors and options the
    /// checks and the configuration read.
    #[nki_object]
    pub struct QkvCteUserInput {
        /// `[B, S, H]`.
        pub input: Tensor,
        /// `[H, I]`.
        pub fused_qkv_weights: Tensor,
        /// BSD or NBSd.
        pub output_layout: QKVOutputLayout,
        /// `[1, I]`.
        pub bias: Option<Tensor>,
        /// Whether `mlp_prev` and `attention_prev` are added to the input.
        pub fused_residual_add: bool,
        /// `[B, S, H]`.
        pub mlp_prev: Option<Tensor>,
        /// `[B, S, H]`.
        pub attention_prev: Option<Tensor>,
        /// The norm.
        pub fused_norm_type: NormType,
        /// `[1, H]`.
        pub gamma_norm_weights: Option<Tensor>,
        /// `[1, H]`.
        pub layer_norm_bias: Option<Tensor>,
        /// `hidden_actual`, 0 for none.
        pub hidden_actual: i64,
        /// Whether RoPE is fused.
        pub fused_rope: bool,
        /// `[B, S, d_head]`.
        pub cos_cache: Option<Tensor>,
        /// `[B, S, d_head]`.
        pub sin_cache: Option<Tensor>,
        /// `d_head`, 0 for none.
        pub d_head: i64,
        /// Query heads, 0 for none.
        pub num_q_heads: i64,
        /// Key (and value) heads, 0 for none.
        pub num_kv_heads: i64,
    }

    /// The library's `QKV_CTE_Config`: what the call asks for and the dtypes
    /// the kernel computes in.
    #[nki_object]
    pub struct QkvCteConfig {
        /// BSD or NBSd.
        pub output_layout: QKVOutputLayout,
        /// A bias is added to the projection.
        pub add_bias: bool,
        /// The residuals are added to the input.
        pub fused_residual_add: bool,
        /// The norm.
        pub fused_norm_type: NormType,
        /// The norm multiplies by gamma (RMS_NORM, LAYER_NORM).
        pub apply_gamma: bool,
        /// LayerNorm adds beta.
        pub add_layer_norm_bias: bool,
        /// RoPE on the Q and K heads.
        pub fused_rope: bool,
        /// STATIC quantization: fp8 weights and input, Q/K/V dequantized by their scales.
        pub static_quant: bool,
        /// The input's dtype.
        pub input_dtype: Dtype,
        /// The matmul operands' dtype: bfloat16 for fp32 input, else the input's
        /// (float8_e4m3 with STATIC).
        pub compute_mm_dtype: Dtype,
        /// The transposed rows' dtype: the compute dtype, the input's with STATIC.
        pub input_sb_dtype: Dtype,
        /// The projection's SBUF dtype: the compute dtype, bfloat16 with STATIC
        /// (stored in HBM as the input's dtype, bfloat16 with STATIC).
        pub output_sb_dtype: Dtype,
        /// STATIC's clip bound: the largest finite float8_e4m3 (448 on NeuronCore-v4, else 240).
        pub fp8_max: f64,
        /// The norms' statistics: fp32.
        pub act_dtype: Dtype,
        /// The PE transposes' PSUM dtype: the compute dtype from NeuronCore-v3 on, fp32 before.
        pub psum_transpose_dtype: Dtype,
        /// `[B, S]` folded into one batch of `B·S` rows.
        pub use_BxS_input_reshape: bool,
        /// The fp8 KV-cache outputs: Q stored alone, K and V quantized into the caches.
        pub use_kv_quantization: bool,
        /// The caches are blocks of slots `[num_blocks, block_size, kv_dim]`, rows placed by `slot_mapping`.
        pub use_block_kv: bool,
        /// The quantized K and V tiles' dtype (`kv_dtype`, by default the input's).
        pub kv_dtype: Dtype,
        /// The quantized K and V's upper clip bound (`fp8_max`, by default `kv_dtype`'s largest finite value).
        pub kv_max: f64,
        /// The lower clip bound (`fp8_min`, by default `-kv_max`).
        pub kv_min: f64,
    }

    /// The library's `QKV_CTE_Dims`: the (folded) sizes, this program's share
    /// of the sequence and the tile counts.
    #[nki_object]
    pub struct QkvCteDims {
        /// The input's batch.
        pub b_orig: i64,
        /// The input's sequence length.
        pub s_orig: i64,
        /// The batches the kernel loops over (1 when folded).
        pub b: i64,
        /// The rows per batch (`B·S` when folded).
        pub s: i64,
        /// This program's rows.
        pub s_shard: i64,
        /// This program's first row.
        pub s_shard_offset: i64,
        /// Hidden size.
        pub h: i64,
        /// Fused QKV width.
        pub i: i64,
        /// The RMSNorm divisor.
        pub h_actual: i64,
        /// Head size (0 when not known).
        pub d_head: i64,
        /// Query heads (0 when not given).
        pub num_q_heads: i64,
        /// Key (and value) heads (0 when not given).
        pub num_kv_heads: i64,
        /// Heads of `I` (0 when `d_head` is not known).
        pub num_heads: i64,
        /// Q's columns, `num_q_heads · d_head`.
        pub q_dim: i64,
        /// K's (and V's) columns, `num_kv_heads · d_head`.
        pub kv_dim: i64,
        /// 128-column pieces of H.
        pub num_128_tiles_per_h: i64,
        /// 512-column tiles of H.
        pub num_512_tiles_per_h: i64,
        /// 512-column tiles of I: PSUM banks per S tile.
        pub num_512_tiles_per_i: i64,
    }

    /// The HBM tensors the phases read and write; input and output in the kernel's (folded) shapes.
    #[nki_object]
    pub struct QkvCteTensors {
        /// `[B, S, H]`.
        pub input: Tensor,
        /// `[H, I]`.
        pub weights: Tensor,
        /// `[B, S, I]` or `[N, B, S, d_head]`.
        pub output: Tensor,
        /// `[B, S, H]` as given (with the residual add).
        pub mlp_prev: Option<Tensor>,
        /// `[B, S, H]` as given (with the residual add).
        pub attention_prev: Option<Tensor>,
        /// `[B, S, d_head]` as given (with RoPE).
        pub cos_cache: Option<Tensor>,
        /// `[B, S, d_head]` as given (with RoPE).
        pub sin_cache: Option<Tensor>,
        /// The K cache, `[B, max_seq_len, kv_dim]` or `[num_blocks, block_size, kv_dim]`.
        pub k_cache: Option<Tensor>,
        /// The V cache, shaped as the K cache.
        pub v_cache: Option<Tensor>,
        /// `[B, S]` int32: each row's slot in the block caches.
        pub slot_mapping: Option<Tensor>,
    }

    /// The SBUF tiles loaded once: the activation constants, the bias broadcast
    /// on every partition and the norm weights one 128-row piece per column.
    #[nki_object]
    pub struct QkvCteGlobals {
        /// Zeros `[128, 1]`: the sum of squares' activation bias.
        pub zero_bias_sb: Tensor,
        /// `eps` `[128, 1]`, in the compute dtype.
        pub norm_eps_sb: Tensor,
        /// `[128, I]` in the compute dtype (read with `add_bias`).
        pub bias_sb: Tensor,
        /// `[128, H/128]` fp32: element `[p, t]` is gamma's `t·128 + p` (read with `apply_gamma`).
        pub gamma_norm_weights_sb: Tensor,
        /// `[128, H/128]` fp32, as gamma (read with `add_layer_norm_bias`).
        pub layer_norm_bias_sb: Tensor,
        /// STATIC: the Q, K and V weight scales times the input scale, `[128, 3]` fp32.
        pub w_scale_sb: Tensor,
        /// STATIC: the input scale's reciprocal, `[128, 1]` fp32.
        pub in_scale_sb: Tensor,
        /// The K cache's scale, `[128, 1]` fp32 (read with the KV-cache outputs).
        pub k_scale_sb: Tensor,
        /// The V cache's scale, `[128, 1]` fp32.
        pub v_scale_sb: Tensor,
    }

    /// The fp8 KV-cache outputs' tensors and options (the library's
    /// `QKV_CTE_UserInput` fields for them).
    #[nki_object]
    pub struct QkvKvCacheArgs {
        /// The K cache, updated in place.
        pub k_cache: Option<Tensor>,
        /// The V cache, updated in place.
        pub v_cache: Option<Tensor>,
        /// `[128, 1]` fp32: K is divided by it.
        pub k_scale: Option<Tensor>,
        /// `[128, 1]` fp32: V is divided by it.
        pub v_scale: Option<Tensor>,
        /// The block caches.
        pub use_block_kv: bool,
        /// Slots per block, 0 for none.
        pub block_size: i64,
        /// `[B, S]` int32 slots.
        pub slot_mapping: Option<Tensor>,
    }

    /// The library's `QKV_Quant_Config`: STATIC quantization's scale tensors.
    #[nki_object]
    pub struct QkvQuantScales {
        /// `[1, 3]` or `[128, 3]`: the Q, K and V weight scales.
        pub qkv_w_scale: Option<Tensor>,
        /// `[1, 1]` or `[128, 1]`: the input scale.
        pub qkv_in_scale: Option<Tensor>,
    }

    /// The library's `_validate_user_inputs`: its checks, by parameter name,
    /// when the kernel is traced.
    #[nki_helper]
    pub fn validate_user_inputs(args: QkvCteUserInput) {
        let x = args.input;
        assert!(x.ndim() == 3, "qkv_cte: input must be [B, S, H] in HBM, got {} dims", x.ndim());
        let [b, s, h] = x.shape();
        let w_shape = args.fused_qkv_weights.shape();
        assert!(
            args.fused_qkv_weights.ndim() == 2 && w_shape[0] == h,
            "qkv_cte: fused_qkv_weights must be [H, I] with H = input.shape[2] = {h}, got {w_shape}"
        );
        let i = w_shape[1];
        // The rules of `qkv_cte_violation`.
        assert!(b * s >= 1 && i >= 1, "qkv_cte: B, S and I must be positive, got input {} and I = {i}", x.shape());
        assert!(h % P_MAX == 0 && h <= MAX_H, "qkv_cte: H must be a multiple of 128 and at most 24576, got H = {h}");
        assert!(i <= MAX_I, "qkv_cte: I (fused_qkv_weights.shape[1]) must be at most 4096, got I = {i}");
        let layout = args.output_layout;
        assert!(layout != QKVOutputLayout::NBdS, "qkv_cte: output_layout must be BSD or NBSd, got NBdS");
        let nbsd = layout == QKVOutputLayout::NBSd;
        assert!(!nbsd || args.d_head == NBSD_D_HEAD, "qkv_cte: the NBSd output layout needs d_head = 128, got d_head = {}", args.d_head);
        let (d, nq, nkv) = (args.d_head, args.num_q_heads, args.num_kv_heads);
        assert!(
            d == 0 || nq == 0 || nkv == 0 || (nq + 2 * nkv) * d == i,
            "qkv_cte: (num_q_heads + 2 * num_kv_heads) * d_head must equal I = {i}, got ({nq} + 2 * {nkv}) * {d}"
        );
        let ha = args.hidden_actual;
        assert!(ha >= 1 && ha <= h, "qkv_cte: hidden_actual must be in 1..=H = {h}, got hidden_actual = {ha}");
        let bias = args.bias;
        if let Some(bias_row) = bias {
            let bs = bias_row.shape();
            assert!(bias_row.ndim() == 2 && bs[0] == 1 && bs[1] == i, "qkv_cte: bias must be [1, I] = [1, {i}], got {bs}");
        }
        validate_fused_inputs(args, h);
    }

    /// The residual add's, the norms' and RoPE's checks.
    #[nki_helper]
    pub fn validate_fused_inputs(args: QkvCteUserInput, h: i64) {
        let x = args.input;
        let residuals = args.mlp_prev.is_some() && args.attention_prev.is_some();
        assert!(!args.fused_residual_add || residuals, "qkv_cte: fused_residual_add needs mlp_prev and attention_prev");
        let stray = args.mlp_prev.is_some() || args.attention_prev.is_some();
        assert!(args.fused_residual_add || !stray, "qkv_cte: mlp_prev or attention_prev given without fused_residual_add=True");
        let (mlp_prev, attention_prev) = (args.mlp_prev, args.attention_prev);
        if let Some(mlp) = mlp_prev {
            assert!(mlp.shape() == x.shape(), "qkv_cte: mlp_prev must be shaped as input {}, got {}", x.shape(), mlp.shape());
        }
        if let Some(attn) = attention_prev {
            assert!(attn.shape() == x.shape(), "qkv_cte: attention_prev must be shaped as input {}, got {}", x.shape(), attn.shape());
        }
        let norm = args.fused_norm_type;
        let with_gamma = norm == NormType::RMS_NORM || norm == NormType::LAYER_NORM;
        assert!(!with_gamma || args.gamma_norm_weights.is_some(), "qkv_cte: gamma_norm_weights must be given for RMS_NORM and LAYER_NORM");
        assert!(with_gamma || args.gamma_norm_weights.is_none(), "qkv_cte: gamma_norm_weights is only used with RMS_NORM and LAYER_NORM");
        assert!(
            norm == NormType::LAYER_NORM || args.layer_norm_bias.is_none(),
            "qkv_cte: layer_norm_bias is only used with fused_norm_type=LAYER_NORM"
        );
        let (gamma_norm_weights, layer_norm_bias) = (args.gamma_norm_weights, args.layer_norm_bias);
        if let Some(gamma) = gamma_norm_weights {
            let gs = gamma.shape();
            assert!(gamma.ndim() == 2 && gs[0] == 1 && gs[1] == h, "qkv_cte: gamma_norm_weights must be [1, H] = [1, {h}], got {gs}");
        }
        if let Some(beta) = layer_norm_bias {
            let bs = beta.shape();
            assert!(beta.ndim() == 2 && bs[0] == 1 && bs[1] == h, "qkv_cte: layer_norm_bias must be [1, H] = [1, {h}], got {bs}");
        }
        let caches = args.cos_cache.is_some() || args.sin_cache.is_some();
        assert!(args.fused_rope || !caches, "qkv_cte: cos_cache or sin_cache given without fused_rope=True");
        if args.fused_rope {
            let (nq, nkv) = (args.num_q_heads, args.num_kv_heads);
            assert!(
                args.cos_cache.is_some() && args.sin_cache.is_some() && nq > 0 && nkv > 0,
                "qkv_cte: fused_rope needs cos_cache, sin_cache, num_q_heads and num_kv_heads"
            );
            let i = args.fused_qkv_weights.shape()[1];
            let d = if args.d_head > 0 { args.d_head } else { i / (nq + 2 * nkv) };
            assert!(d % 2 == 0 && PSUM_FMAX % d == 0, "qkv_cte: fused_rope needs an even d_head dividing 512, got d_head = {d}");
            let [b, s, _] = x.shape();
            let (cos_cache, sin_cache) = (args.cos_cache, args.sin_cache);
            if let Some(cos) = cos_cache {
                let cs = cos.shape();
                assert!(
                    cos.ndim() == 3 && cs[0] == b && cs[1] == s && cs[2] == d,
                    "qkv_cte: cos_cache must be [B, S, d_head] = [{b}, {s}, {d}], got {cs}"
                );
            }
            if let Some(sin) = sin_cache {
                let ss = sin.shape();
                assert!(
                    sin.ndim() == 3 && ss[0] == b && ss[1] == s && ss[2] == d,
                    "qkv_cte: sin_cache must be [B, S, d_head] = [{b}, {s}, {d}], got {ss}"
                );
            }
        }
    }

    /// STATIC quantization's inputs, by parameter name; float weights without it.
    #[nki_helper]
    pub fn validate_static_quantization(args: QkvCteUserInput, quantization_type: QuantizationType, scales: QkvQuantScales) {
        let is_static = quantization_type == QuantizationType::STATIC;
        let w = args.fused_qkv_weights;
        assert!(
            is_static == (w.dtype() == QUANT_DTYPE),
            "qkv_cte: fused_qkv_weights must be float8_e4m3 exactly when quantization_type is STATIC, got {}",
            w.dtype()
        );
        if is_static {
            let (w_scale, in_scale) = (scales.qkv_w_scale, scales.qkv_in_scale);
            assert!(w_scale.is_some() && in_scale.is_some(), "qkv_cte: STATIC quantization needs qkv_w_scale and qkv_in_scale");
            assert!(args.num_q_heads > 0 && args.num_kv_heads > 0, "qkv_cte: STATIC quantization needs num_q_heads and num_kv_heads");
            assert!(args.input.dtype() != nl::float32, "qkv_cte: STATIC quantization takes a bfloat16 or float16 input, got float32");
            let h = args.input.shape()[2];
            assert!((h / P_MAX) % 2 == 0, "qkv_cte: STATIC quantization needs H / 128 even (pairs of 128-row pieces), got H = {h}");
            if let Some(ws) = w_scale {
                let r = ws.shape()[0];
                assert!(
                    ws.ndim() == 2 && (r == 1 || r == P_MAX) && ws.shape()[1] == NUM_QKV_SEGMENTS,
                    "qkv_cte: qkv_w_scale must be [1, 3] or [128, 3], got {}",
                    ws.shape()
                );
            }
            if let Some(ins) = in_scale {
                let r = ins.shape()[0];
                assert!(
                    ins.ndim() == 2 && (r == 1 || r == P_MAX) && ins.shape()[1] == 1,
                    "qkv_cte: qkv_in_scale must be [1, 1] or [128, 1], got {}",
                    ins.shape()
                );
            }
        }
    }

    /// The fp8 KV-cache outputs' checks, by parameter name.
    #[nki_helper]
    pub fn validate_kv_cache(args: QkvCteUserInput, kv: QkvKvCacheArgs) {
        let (k_scale, v_scale) = (kv.k_scale, kv.v_scale);
        let enabled = k_scale.is_some() && v_scale.is_some();
        assert!(k_scale.is_some() == v_scale.is_some(), "qkv_cte: k_scale and v_scale must be given together (the fp8 KV-cache outputs)");
        assert!(!kv.use_block_kv || enabled, "qkv_cte: use_block_kv needs k_scale and v_scale (the fp8 KV-cache outputs)");
        if enabled {
            // The rules of `qkv_cte_violation`.
            assert!(args.output_layout == QKVOutputLayout::BSD, "qkv_cte: the fp8 KV-cache outputs need the BSD output layout");
            let (d, nq, nkv) = (args.d_head, args.num_q_heads, args.num_kv_heads);
            assert!(d > 0 && nq > 0 && nkv > 0, "qkv_cte: the fp8 KV-cache outputs need d_head, num_q_heads and num_kv_heads");
            assert!(kv.k_cache.is_some() && kv.v_cache.is_some(), "qkv_cte: the fp8 KV-cache outputs need k_cache and v_cache");
            if let Some(ks) = k_scale {
                validate_kv_scale(ks);
            }
            if let Some(vs) = v_scale {
                validate_kv_scale(vs);
            }
            let [b, s, _] = args.input.shape();
            let slot_mapping = kv.slot_mapping;
            if kv.use_block_kv {
                assert!(slot_mapping.is_some() && kv.block_size > 0, "qkv_cte: use_block_kv needs slot_mapping and block_size");
                if let Some(slots) = slot_mapping {
                    let ss = slots.shape();
                    assert!(slots.ndim() == 2 && ss[0] == b && ss[1] == s, "qkv_cte: slot_mapping must be [B, S] = [{b}, {s}], got {ss}");
                }
            }
            let (k_cache, v_cache) = (kv.k_cache, kv.v_cache);
            if let Some(kc) = k_cache {
                validate_kv_cache_shape(kv, kc, b, s, nkv * d);
            }
            if let Some(vc) = v_cache {
                validate_kv_cache_shape(kv, vc, b, s, nkv * d);
            }
        }
    }

    /// `k_scale` or `v_scale`: `[128, 1]`.
    #[nki_helper]
    pub fn validate_kv_scale(scale: Hbm) {
        let ss = scale.shape();
        assert!(scale.ndim() == 2 && ss[0] == P_MAX && ss[1] == 1, "qkv_cte: k_scale and v_scale must be [128, 1], got {ss}");
    }

    /// `k_cache` or `v_cache`: `[num_blocks, block_size, kv_dim]` (block
    /// caches) or `[B, max_seq_len, kv_dim]` with room for the `S` rows.
    #[nki_helper]
    pub fn validate_kv_cache_shape(kv: QkvKvCacheArgs, cache: Hbm, b: i64, s: i64, kv_dim: i64) {
        let cs = cache.shape();
        if kv.use_block_kv {
            assert!(
                cache.ndim() == 3 && cs[1] == kv.block_size && cs[2] == kv_dim,
                "qkv_cte: k_cache and v_cache must be [num_blocks, block_size, kv_dim] = [_, {}, {kv_dim}], got {cs}",
                kv.block_size
            );
        } else {
            assert!(
                cache.ndim() == 3 && cs[0] == b && cs[1] >= s && cs[2] == kv_dim,
                "qkv_cte: k_cache and v_cache must be [B, max_seq_len >= S, kv_dim] = [{b}, >= {s}, {kv_dim}], got {cs}"
            );
        }
    }

    /// `dtype`'s largest finite value for the fp8 dtypes, 0 for the others.
    #[nki_helper]
    pub fn max_positive_value_for_dtype(dtype: Dtype) -> f64 {
        if dtype == nl::float8_e4m3 {
            return FP8_E4M3_MAX;
        }
        if dtype == nl::float8_e5m2 {
            return FP8_E5M2_MAX;
        }
        0.0
    }

    /// The options this port does not implement, refused by name.
    #[nki_helper]
    pub fn validate_unsupported_options(
        quantization_type: QuantizationType,
        store_output_in_sbuf: bool,
        is_input_swizzled: bool,
        weight_layout: QKVWeightLayout,
    ) {
        assert!(
            quantization_type == QuantizationType::NONE || quantization_type == QuantizationType::STATIC,
            "qkv_cte: quantization_type must be NONE or STATIC (the library's qkv_cte has no ROW path, and the MX forms are not implemented), got {quantization_type}"
        );
        assert!(!store_output_in_sbuf, "qkv_cte: store_output_in_sbuf is not supported (the output is stored to HBM)");
        assert!(!is_input_swizzled, "qkv_cte: is_input_swizzled is only used with MX quantization, which is not implemented");
        assert!(
            weight_layout == QKVWeightLayout::CONTIGUOUS,
            "qkv_cte: weight_layout must be CONTIGUOUS without MX quantization, got {weight_layout}"
        );
    }

    /// The library's `_build_config`. `kv_dtype`, `kv_max` and `kv_min` are
    /// the KV-cache outputs' tile dtype and clip bounds. Non-block caches are
    /// `[B, max_seq_len, kv_dim]`: their batches are not folded.
    #[nki_helper]
    pub fn build_config(
        args: QkvCteUserInput,
        kv: QkvKvCacheArgs,
        quantization_type: QuantizationType,
        num_shards: i64,
        kv_dtype: Dtype,
        kv_max: f64,
        kv_min: f64,
    ) -> QkvCteConfig {
        let dtype = args.input.dtype();
        let static_quant = quantization_type == QuantizationType::STATIC;
        let float_dtype = if dtype == nl::float32 { nl::bfloat16 } else { dtype };
        let compute_mm_dtype = if static_quant { QUANT_DTYPE } else { float_dtype };
        let gen2 = nisa::get_nc_version() == nisa::nc_version::gen2;
        let psum_transpose_dtype = if gen2 {
            nl::float32
        } else if static_quant {
            nl::bfloat16
        } else {
            compute_mm_dtype
        };
        let gen4 = nisa::get_nc_version() == nisa::nc_version::gen4;
        let norm = args.fused_norm_type;
        let use_kv_quantization = kv.k_scale.is_some() && kv.v_scale.is_some();
        let fold = args.input.shape()[1] < S_THRESHOLD_FOR_RESHAPE * num_shards;
        QkvCteConfig {
            output_layout: args.output_layout,
            add_bias: args.bias.is_some(),
            fused_residual_add: args.fused_residual_add,
            fused_norm_type: norm,
            apply_gamma: norm == NormType::RMS_NORM || norm == NormType::LAYER_NORM,
            add_layer_norm_bias: args.layer_norm_bias.is_some(),
            fused_rope: args.fused_rope,
            static_quant,
            input_dtype: dtype,
            compute_mm_dtype,
            input_sb_dtype: if static_quant { dtype } else { compute_mm_dtype },
            output_sb_dtype: if static_quant { nl::bfloat16 } else { compute_mm_dtype },
            fp8_max: if gen4 { FP8_E4M3_MAX_GEN4 } else { FP8_E4M3_MAX },
            act_dtype: nl::float32,
            psum_transpose_dtype,
            use_BxS_input_reshape: fold && (kv.use_block_kv || !use_kv_quantization),
            use_kv_quantization,
            use_block_kv: kv.use_block_kv,
            kv_dtype,
            kv_max,
            kv_min,
        }
    }

    /// The library's `_get_tensor_dimensions`: with LNC2 the first program
    /// takes `S / 2` rows and the second the rest.
    #[nki_helper]
    pub fn get_tensor_dimensions(args: QkvCteUserInput, cfg: QkvCteConfig, num_shards: i64, shard_id: i64) -> QkvCteDims {
        let [b_orig, s_orig, h] = args.input.shape();
        let i = args.fused_qkv_weights.shape()[1];
        let (nq, nkv) = (args.num_q_heads, args.num_kv_heads);
        let inferred = if nq > 0 && nkv > 0 { i / (nq + 2 * nkv) } else { 0 };
        let d_head = if args.d_head > 0 { args.d_head } else { inferred };
        let (b, s): (i64, i64) = if cfg.use_BxS_input_reshape { (1, b_orig * s_orig) } else { (b_orig, s_orig) };
        let base = s / num_shards;
        let last = shard_id == num_shards - 1;
        QkvCteDims {
            b_orig,
            s_orig,
            b,
            s,
            s_shard: if last { s - base * (num_shards - 1) } else { base },
            s_shard_offset: shard_id * base,
            h,
            i,
            h_actual: args.hidden_actual,
            d_head,
            num_q_heads: nq,
            num_kv_heads: nkv,
            num_heads: if d_head > 0 { i / d_head } else { 0 },
            q_dim: nq * d_head,
            kv_dim: nkv * d_head,
            num_128_tiles_per_h: h.div_ceil(P_MAX),
            num_512_tiles_per_h: h.div_ceil(PSUM_FMAX),
            num_512_tiles_per_i: i.div_ceil(PSUM_FMAX),
        }
    }

    /// The library's `_multi_buffering_degree_for_seqlen`: S tiles per block,
    /// as many as the program's rows need up to `MAX_S_MULTI_BUFFER_DEGREE`,
    /// and as the PSUM banks hold (the library also bounds it by its SBUF
    /// budget; here the compiler places the tiles).
    #[nki_helper]
    pub fn multi_buffering_degree_for_seqlen(dims: QkvCteDims) -> i64 {
        let tiles = dims.s_shard.div_ceil(P_MAX).min(MAX_S_MULTI_BUFFER_DEGREE);
        tiles.min(NUM_HW_PSUM_BANKS / dims.num_512_tiles_per_i)
    }

    /// The library's `_load_and_broadcast_bias`: `[1, I]` on every partition
    /// of `bias_sb`, in its dtype (the compute dtype).
    #[nki_helper]
    pub fn load_and_broadcast_bias(bias: Hbm, bias_sb: Sbuf) {
        nisa::dma_copy(bias_sb, bias.broadcast(0, P_MAX));
    }

    /// The library's `_load_norm_weights`: `[1, H]` into `w_sb` `[128, H/128]`
    /// (fp32), element `[p, t]` = `w[t·128 + p]` (the transposed input's layout).
    #[nki_helper]
    pub fn load_norm_weights(norm_weights: Hbm, w_sb: Sbuf) {
        let tiles = w_sb.shape()[1];
        nisa::dma_copy(w_sb, norm_weights.ap([[1, P_MAX], [P_MAX, tiles]], offset = 0));
    }

    /// STATIC's scales on every partition (one row given is broadcast): the
    /// weight scales times the input scale (the dequantization factors), and
    /// the input scale's reciprocal.
    #[nki_helper]
    pub fn load_static_quant_scales(qkv_w_scale: Hbm, qkv_in_scale: Hbm, w_scale_sb: Sbuf, in_scale_sb: Sbuf) {
        if qkv_w_scale.shape()[0] == 1 {
            nisa::dma_copy(w_scale_sb, qkv_w_scale.broadcast(0, P_MAX));
        } else {
            nisa::dma_copy(w_scale_sb, qkv_w_scale);
        }
        if qkv_in_scale.shape()[0] == 1 {
            nisa::dma_copy(in_scale_sb, qkv_in_scale.broadcast(0, P_MAX));
        } else {
            nisa::dma_copy(in_scale_sb, qkv_in_scale);
        }
        nisa::activation(w_scale_sb, nl::copy, w_scale_sb, scale = in_scale_sb);
        nisa::reciprocal(in_scale_sb, in_scale_sb);
    }

    /// The library's global SBUF allocations.
    #[nki_helper]
    pub fn load_globals(
        cfg: QkvCteConfig,
        dims: QkvCteDims,
        args: QkvCteUserInput,
        scales: QkvQuantScales,
        kv: QkvKvCacheArgs,
        norm_eps: f64,
    ) -> QkvCteGlobals {
        let zero_bias_sb = nl::ndarray([P_MAX, 1], cfg.compute_mm_dtype, buffer = nl::sbuf);
        nisa::memset(zero_bias_sb, 0.0);
        let norm_eps_sb = nl::ndarray([P_MAX, 1], cfg.compute_mm_dtype, buffer = nl::sbuf);
        nisa::memset(norm_eps_sb, norm_eps);
        // Tiles of the options not taken are allocated and not read (cfg says which are).
        let bias_sb = nl::ndarray([P_MAX, dims.i], cfg.compute_mm_dtype, buffer = nl::sbuf);
        let (bias, gamma_norm_weights, layer_norm_bias) = (args.bias, args.gamma_norm_weights, args.layer_norm_bias);
        if let Some(bias_row) = bias {
            load_and_broadcast_bias(bias_row, bias_sb);
        }
        let gamma_norm_weights_sb = nl::ndarray([P_MAX, dims.num_128_tiles_per_h], cfg.act_dtype, buffer = nl::sbuf);
        if let Some(gamma) = gamma_norm_weights {
            load_norm_weights(gamma, gamma_norm_weights_sb);
        }
        let layer_norm_bias_sb = nl::ndarray([P_MAX, dims.num_128_tiles_per_h], cfg.act_dtype, buffer = nl::sbuf);
        if let Some(beta) = layer_norm_bias {
            load_norm_weights(beta, layer_norm_bias_sb);
        }
        let w_scale_sb = nl::ndarray([P_MAX, NUM_QKV_SEGMENTS], nl::float32, buffer = nl::sbuf);
        let in_scale_sb = nl::ndarray([P_MAX, 1], nl::float32, buffer = nl::sbuf);
        let (qkv_w_scale, qkv_in_scale) = (scales.qkv_w_scale, scales.qkv_in_scale);
        if let Some(w_scale) = qkv_w_scale {
            if let Some(in_scale) = qkv_in_scale {
                load_static_quant_scales(w_scale, in_scale, w_scale_sb, in_scale_sb);
            }
        }
        let k_scale_sb = nl::ndarray([P_MAX, 1], nl::float32, buffer = nl::sbuf);
        let v_scale_sb = nl::ndarray([P_MAX, 1], nl::float32, buffer = nl::sbuf);
        let (k_scale, v_scale) = (kv.k_scale, kv.v_scale);
        if let Some(ks) = k_scale {
            nisa::dma_copy(k_scale_sb, ks);
        }
        if let Some(vs) = v_scale {
            nisa::dma_copy(v_scale_sb, vs);
        }
        QkvCteGlobals {
            zero_bias_sb,
            norm_eps_sb,
            bias_sb,
            gamma_norm_weights_sb,
            layer_norm_bias_sb,
            w_scale_sb,
            in_scale_sb,
            k_scale_sb,
            v_scale_sb,
        }
    }

    /// Step 1: rows `s0..s0 + rows` of batch `b` into `input_sb` `[rows, H]`
    /// in the compute dtype, with the residuals added (one DMA reduction).
    #[nki_helper]
    pub fn load_input_tile(cfg: QkvCteConfig, dims: QkvCteDims, io: QkvCteTensors, input_sb: Sbuf, b: i64, s0: i64, rows: i64) {
        let dst = input_sb[s![0..rows, ..]];
        let x = io.input[s![b, s0..s0 + rows, ..]];
        let shape = [dims.b, dims.s, dims.h];
        if cfg.fused_residual_add {
            let (mlp_prev, attention_prev) = (io.mlp_prev, io.attention_prev);
            if let Some(mlp) = mlp_prev {
                if let Some(attn) = attention_prev {
                    let (mlp_rows, attn_rows) = (mlp.reshape(shape), attn.reshape(shape));
                    let srcs = [x, mlp_rows[s![b, s0..s0 + rows, ..]], attn_rows[s![b, s0..s0 + rows, ..]]];
                    nisa::dma_compute(dst, srcs, nl::add, scales = [1.0, 1.0, 1.0]);
                }
            }
        } else {
            nisa::dma_copy(dst, x);
        }
    }

    /// The library's `_apply_rms_normalization` (step 2): the rows of
    /// `input_sb` times `1 / sqrt(Σx²/hidden_actual + eps)`, in place (gamma
    /// is applied after the transpose).
    #[nki_helper]
    pub fn apply_rms_normalization(cfg: QkvCteConfig, dims: QkvCteDims, g: QkvCteGlobals, input_sb: Sbuf, rows: i64) {
        let h = dims.h;
        let square_sum = nl::ndarray([P_MAX, 1], cfg.act_dtype, buffer = nl::sbuf);
        // Only the row sums are kept: the squares go to one column, stride 0.
        let act = nl::ndarray([P_MAX, 1], cfg.act_dtype, buffer = nl::sbuf);
        let x = input_sb[s![0..rows, ..]];
        let ss = square_sum[s![0..rows, ..]];
        nisa::activation_reduce(
            act.ap([[1, rows], [0, h]], offset = 0),
            nl::square,
            x,
            nl::add,
            ss,
            bias = g.zero_bias_sb[s![0..rows, ..]],
        );
        let inv_h = 1.0 / dims.h_actual as f64;
        nisa::activation(ss, nl::rsqrt, ss, bias = g.norm_eps_sb[s![0..rows, ..]], scale = inv_h);
        nisa::tensor_scalar(x, x, nl::multiply, ss, engine = nisa::engine::vector);
    }

    /// The library's `_compute_layer_norm_stats` (step 2): each row's mean
    /// (column 0) and `1 / sqrt(var + eps)` (column 1) into `mean_rstd` `[128, 2]` fp32.
    #[nki_helper]
    pub fn compute_layer_norm_stats(cfg: QkvCteConfig, dims: QkvCteDims, g: QkvCteGlobals, input_sb: Sbuf, mean_rstd: Sbuf, rows: i64) {
        let n = dims.h.div_ceil(BN_STATS_TILE_SIZE);
        let stats = nl::ndarray([P_MAX, BN_STATS_DST_SIZE * n], cfg.act_dtype, buffer = nl::sbuf);
        for t in 0..n {
            let c0 = t * BN_STATS_TILE_SIZE;
            let c1 = (c0 + BN_STATS_TILE_SIZE).min(dims.h);
            let d0 = t * BN_STATS_DST_SIZE;
            nisa::bn_stats(stats[s![0..rows, d0..d0 + BN_STATS_DST_SIZE]], input_sb[s![0..rows, c0..c1]]);
        }
        nisa::bn_aggr(mean_rstd[s![0..rows, ..]], stats[s![0..rows, ..]]);
        let var = mean_rstd[s![0..rows, 1..2]];
        nisa::activation(var, nl::rsqrt, var, bias = g.norm_eps_sb[s![0..rows, ..]]);
    }

    /// Step 3 on one 512-column tile of H at `h0`: LayerNorm's `(x - mean)·rstd`,
    /// the four 128-column pieces transposed on the PE array into one PSUM tile,
    /// then copied back over the same columns (`[128 h, piece·128 + s]`), times
    /// gamma (plus beta) per partition with a norm.
    #[nki_helper]
    pub fn transpose_h_tile(
        cfg: QkvCteConfig,
        g: QkvCteGlobals,
        input_sb: Sbuf,
        input_q: Sbuf,
        mean_rstd: Sbuf,
        h0: i64,
        width: i64,
        rows: i64,
    ) {
        if cfg.fused_norm_type == NormType::LAYER_NORM {
            let x = input_sb[s![0..rows, h0..h0 + width]];
            let (mean, rstd) = (mean_rstd[s![0..rows, 0..1]], mean_rstd[s![0..rows, 1..2]]);
            nisa::tensor_scalar(x, x, nl::subtract, mean, op1 = nl::multiply, operand1 = rstd);
        }
        let tp = nl::ndarray([P_MAX, PSUM_FMAX], cfg.psum_transpose_dtype, buffer = nl::psum);
        let pieces = width.div_ceil(P_MAX);
        for j in 0..pieces {
            let c0 = h0 + j * P_MAX;
            nisa::nc_transpose(tp[s![.., j * P_MAX..j * P_MAX + rows]], input_sb[s![0..rows, c0..c0 + P_MAX]]);
        }
        for j in 0..pieces {
            let c0 = h0 + j * P_MAX;
            let t = (h0 + j * P_MAX) / P_MAX;
            let dst = input_sb[s![.., c0..c0 + rows]];
            let src = tp[s![.., j * P_MAX..j * P_MAX + rows]];
            if cfg.apply_gamma {
                let gamma = g.gamma_norm_weights_sb[s![.., t..t + 1]];
                if cfg.add_layer_norm_bias {
                    nisa::tensor_scalar(dst, src, nl::multiply, gamma, op1 = nl::add, operand1 = g.layer_norm_bias_sb[s![.., t..t + 1]]);
                } else {
                    nisa::tensor_scalar(dst, src, nl::multiply, gamma);
                }
            } else {
                nisa::tensor_copy(dst, src);
            }
            if cfg.static_quant {
                // After a norm the quantized rows are the normalised ones, else the transposed input.
                let data = if cfg.apply_gamma { dst } else { src };
                quantize_input_static(cfg, g, input_q[s![.., c0..c0 + rows]], data);
            }
        }
    }

    /// STATIC: `data / in_scale` rounded into `dst` (float8_e4m3), then
    /// clipped there to ±`fp8_max`.
    #[nki_helper]
    pub fn quantize_input_static(cfg: QkvCteConfig, g: QkvCteGlobals, dst: Sbuf, data: Sbuf) {
        nisa::tensor_scalar(dst, data, nl::multiply, g.in_scale_sb);
        nisa::tensor_scalar(dst, dst, nl::minimum, cfg.fp8_max, op1 = nl::maximum, operand1 = -cfg.fp8_max);
    }

    /// Steps 1 to 3 for one S tile: the rows loaded (with the residuals),
    /// normalised, and transposed in place, `[128 h, piece·128 + s]`
    /// (STATIC: also quantized into `input_q`).
    #[nki_helper]
    pub fn load_and_transpose_input(
        cfg: QkvCteConfig,
        dims: QkvCteDims,
        io: QkvCteTensors,
        g: QkvCteGlobals,
        input_sb: Sbuf,
        input_q: Sbuf,
        b: i64,
        s0: i64,
        rows: i64,
    ) {
        load_input_tile(cfg, dims, io, input_sb, b, s0, rows);
        let norm = cfg.fused_norm_type;
        if norm == NormType::RMS_NORM || norm == NormType::RMS_NORM_SKIP_GAMMA {
            apply_rms_normalization(cfg, dims, g, input_sb, rows);
        }
        let mean_rstd = nl::ndarray([P_MAX, 2], cfg.act_dtype, buffer = nl::sbuf);
        if norm == NormType::LAYER_NORM {
            compute_layer_norm_stats(cfg, dims, g, input_sb, mean_rstd, rows);
        }
        for t in 0..dims.num_512_tiles_per_h {
            let h0 = t * PSUM_FMAX;
            transpose_h_tile(cfg, g, input_sb, input_q, mean_rstd, h0, (dims.h - h0).min(PSUM_FMAX), rows);
        }
    }

    /// Step 4: the block's transposed S tiles (`input_sb` `[128, tiles, H]`)
    /// times the weights, 1024 rows of H per weight load (`[128, 8, I]`:
    /// element `[p, j, c]` is row `j·128 + p` of the load), each S tile and
    /// 512 columns of I accumulating in its own PSUM bank, `psum[:, tile · I tiles + i tile, :]`.
    #[nki_helper]
    pub fn qkv_projection(cfg: QkvCteConfig, dims: QkvCteDims, io: QkvCteTensors, input_sb: Sbuf, psum: Psum, rows: i64) {
        let (h, i, ni) = (dims.h, dims.i, dims.num_512_tiles_per_i);
        for wl in 0..h.div_ceil(WEIGHT_LOAD_BLOCK_SIZE_PER_H) {
            let off = wl * WEIGHT_LOAD_BLOCK_SIZE_PER_H;
            let n = ((h - off) / P_MAX).min(NUM_128_TILES_PER_WEIGHT_LOAD);
            let w_sb = nl::ndarray([P_MAX, NUM_128_TILES_PER_WEIGHT_LOAD, i], cfg.compute_mm_dtype, buffer = nl::sbuf);
            nisa::dma_copy(w_sb[s![.., 0..n, ..]], io.weights.ap([[i, P_MAX], [P_MAX * i, n], [1, i]], offset = off * i));
            for t in 0..rows.div_ceil(P_MAX) {
                let r = (rows - t * P_MAX).min(P_MAX);
                if cfg.static_quant {
                    project_double_row(dims, input_sb, w_sb, psum, off, n, t, r);
                } else {
                    for j in 0..n {
                        let c0 = off + j * P_MAX;
                        for k in 0..ni {
                            let (i0, iw) = (k * PSUM_FMAX, (i - k * PSUM_FMAX).min(PSUM_FMAX));
                            nisa::nc_matmul(
                                psum[s![0..r, t * ni + k, 0..iw]],
                                input_sb[s![.., t, c0..c0 + r]],
                                w_sb[s![.., j, i0..i0 + iw]],
                            );
                        }
                    }
                }
            }
        }
    }

    /// STATIC's fp8 products of one weight load: pairs of 128-row pieces
    /// (`n` of them from row `off`) contracted in one `double_row` matmul,
    /// S tile `t`'s `r` quantized rows (`input_q` `[128, tiles, H]`) against
    /// `w_sb` `[128, 8, I]`.
    #[nki_helper]
    pub fn project_double_row(dims: QkvCteDims, input_q: Sbuf, w_sb: Sbuf, psum: Psum, off: i64, n: i64, t: i64, r: i64) {
        let (h, i, ni) = (dims.h, dims.i, dims.num_512_tiles_per_i);
        let tiles = input_q.shape()[1];
        let per_partition = NUM_128_TILES_PER_WEIGHT_LOAD * i;
        for j in 0..n / 2 {
            for k in 0..ni {
                let (i0, iw) = (k * PSUM_FMAX, (i - k * PSUM_FMAX).min(PSUM_FMAX));
                let stationary = input_q.ap([[tiles * h, P_MAX], [P_MAX, 2], [1, r]], offset = t * h + off + 2 * j * P_MAX);
                let moving = w_sb.ap([[per_partition, P_MAX], [i, 2], [1, iw]], offset = 2 * j * i + i0);
                nisa::nc_matmul(psum[s![0..r, t * ni + k, 0..iw]], stationary, moving, perf_mode = nisa::matmul_perf_mode::double_row);
            }
        }
    }

    /// The library's `_evict_psum_to_sbuf_apply_bias` (step 5): S tile `t`'s
    /// PSUM banks into `out_sb` `[rows, I]` (the compute dtype), plus the bias.
    #[nki_helper]
    pub fn evict_psum_to_sbuf_apply_bias(
        cfg: QkvCteConfig,
        dims: QkvCteDims,
        g: QkvCteGlobals,
        out_sb: Sbuf,
        psum: Psum,
        t: i64,
        rows: i64,
    ) {
        let (i, ni) = (dims.i, dims.num_512_tiles_per_i);
        for k in 0..ni {
            let (i0, iw) = (k * PSUM_FMAX, (i - k * PSUM_FMAX).min(PSUM_FMAX));
            let dst = out_sb[s![0..rows, i0..i0 + iw]];
            let src = psum[s![0..rows, t * ni + k, 0..iw]];
            if cfg.add_bias && !cfg.static_quant {
                nisa::tensor_tensor(dst, src, g.bias_sb[s![0..rows, i0..i0 + iw]], nl::add);
            } else {
                nisa::tensor_copy(dst, src);
            }
        }
        if cfg.static_quant {
            let (q, kv) = (dims.num_q_heads * dims.d_head, dims.num_kv_heads * dims.d_head);
            for seg in 0..NUM_QKV_SEGMENTS {
                let c0 = if seg == 0 { 0 } else { q + (seg - 1) * kv };
                let c1 = q + seg * kv;
                let cols = out_sb[s![0..rows, c0..c1]];
                dequantize_apply_bias(cfg, g, cols, cols, seg, c0, rows);
            }
        }
    }

    /// STATIC's dequantization (the library's
    /// `_evict_psum_to_sbuf_static_dequant_apply_bias`): `data` (columns
    /// `c0..` of Q, K or V, `seg` 0, 1 or 2) times that segment's factor, plus
    /// the bias, into `dst`.
    #[nki_helper]
    pub fn dequantize_apply_bias(cfg: QkvCteConfig, g: QkvCteGlobals, dst: Sbuf, data: Sbuf, seg: i64, c0: i64, rows: i64) {
        let scale = g.w_scale_sb[s![0..rows, seg..seg + 1]];
        let width = dst.shape()[1];
        if cfg.add_bias {
            nisa::scalar_tensor_tensor(dst, data, nl::multiply, scale, nl::add, g.bias_sb[s![0..rows, c0..c0 + width]]);
        } else {
            nisa::tensor_scalar(dst, data, nl::multiply, scale);
        }
    }

    /// One head of S tile `t` from PSUM into `dst` `[rows, d_head]`, plus its bias columns.
    #[nki_helper]
    pub fn copy_head_from_psum(cfg: QkvCteConfig, dims: QkvCteDims, g: QkvCteGlobals, dst: Sbuf, psum: Psum, t: i64, head: i64, rows: i64) {
        let d = dims.d_head;
        let heads_per_bank = PSUM_FMAX / d;
        let bank = t * dims.num_512_tiles_per_i + head / heads_per_bank;
        let c0 = (head % heads_per_bank) * d;
        let src = psum[s![0..rows, bank, c0..c0 + d]];
        if cfg.static_quant {
            let seg: i64 = if head < dims.num_q_heads {
                0
            } else if head < dims.num_q_heads + dims.num_kv_heads {
                1
            } else {
                2
            };
            dequantize_apply_bias(cfg, g, dst, src, seg, head * d, rows);
        } else if cfg.add_bias {
            nisa::tensor_tensor(dst, src, g.bias_sb[s![0..rows, head * d..(head + 1) * d]], nl::add);
        } else {
            nisa::tensor_copy(dst, src);
        }
    }

    /// The library's `_copy_psum_to_sbuf_apply_rope_and_bias` (step 5 with
    /// RoPE): rows `s0..s0 + rows` of the caches loaded (cos whole, sin's
    /// first half, both halves being equal), then each Q and K head `X =
    /// [X1, X2]` (plus bias) becomes `X·cos + [-X2·sin, X1·sin]`, each
    /// product rounded to the compute dtype; the V heads are copied (plus bias).
    #[nki_helper]
    pub fn copy_psum_to_sbuf_apply_rope_and_bias(
        cfg: QkvCteConfig,
        dims: QkvCteDims,
        io: QkvCteTensors,
        g: QkvCteGlobals,
        out_sb: Sbuf,
        psum: Psum,
        t: i64,
        b: i64,
        s0: i64,
        rows: i64,
    ) {
        let (d, half) = (dims.d_head, dims.d_head / 2);
        let dt = cfg.compute_mm_dtype;
        let cos_sb = nl::ndarray([P_MAX, d], dt, buffer = nl::sbuf);
        let sin_sb = nl::ndarray([P_MAX, half], dt, buffer = nl::sbuf);
        let shape = [dims.b, dims.s, d];
        let (cos_cache, sin_cache) = (io.cos_cache, io.sin_cache);
        if let Some(cos) = cos_cache {
            nisa::dma_copy(cos_sb[s![0..rows, ..]], cos.reshape(shape)[s![b, s0..s0 + rows, ..]]);
        }
        if let Some(sin) = sin_cache {
            nisa::dma_copy(sin_sb[s![0..rows, ..]], sin.reshape(shape)[s![b, s0..s0 + rows, 0..half]]);
        }
        let (cos, sin) = (cos_sb[s![0..rows, ..]], sin_sb[s![0..rows, ..]]);
        // [X (then X·cos) | -X2·sin, X1·sin]
        let rope_sb = nl::ndarray([P_MAX, 2 * d], dt, buffer = nl::sbuf);
        let x = rope_sb[s![0..rows, 0..d]];
        let (x1, x2) = (rope_sb[s![0..rows, 0..half]], rope_sb[s![0..rows, half..d]]);
        let (rot1, rot2) = (rope_sb[s![0..rows, d..d + half]], rope_sb[s![0..rows, d + half..2 * d]]);
        for head in 0..dims.num_q_heads + dims.num_kv_heads {
            copy_head_from_psum(cfg, dims, g, x, psum, t, head, rows);
            nisa::tensor_tensor(rot1, x2, sin, nl::multiply);
            nisa::tensor_scalar(rot1, rot1, nl::multiply, -1.0);
            nisa::tensor_tensor(rot2, x1, sin, nl::multiply);
            nisa::tensor_tensor(x, x, cos, nl::multiply);
            nisa::tensor_tensor(out_sb[s![0..rows, head * d..(head + 1) * d]], x, rope_sb[s![0..rows, d..2 * d]], nl::add);
        }
        for head in dims.num_q_heads + dims.num_kv_heads..dims.num_heads {
            copy_head_from_psum(cfg, dims, g, out_sb[s![0..rows, head * d..(head + 1) * d]], psum, t, head, rows);
        }
    }

    /// Step 6: `out_sb` (rows `s0..s0 + rows` of batch `b`) into the output,
    /// `[B, S, I]` (BSD) or head by head into `[N, B, S, d_head]` (NBSd).
    #[nki_helper]
    pub fn store_output(cfg: QkvCteConfig, dims: QkvCteDims, io: QkvCteTensors, out_sb: Sbuf, b: i64, s0: i64, rows: i64) {
        if cfg.output_layout == QKVOutputLayout::NBSd {
            let d = dims.d_head;
            for head in 0..dims.num_heads {
                nisa::dma_copy(io.output[s![head, b, s0..s0 + rows, ..]], out_sb[s![0..rows, head * d..(head + 1) * d]]);
            }
        } else {
            nisa::dma_copy(io.output[s![b, s0..s0 + rows, ..]], out_sb[s![0..rows, ..]]);
        }
    }

    /// The KV-cache outputs' step 6: Q's columns of `out_sb` (rows `s0..s0 +
    /// rows` of batch `b`) into the output `[B, S, q_dim]`, K's and V's
    /// quantized into their caches (the block caches' slots loaded first).
    #[nki_helper]
    pub fn store_q_and_quantize_kv(
        cfg: QkvCteConfig,
        dims: QkvCteDims,
        io: QkvCteTensors,
        g: QkvCteGlobals,
        out_sb: Sbuf,
        b: i64,
        s0: i64,
        rows: i64,
    ) {
        nisa::dma_copy(io.output[s![b, s0..s0 + rows, ..]], out_sb[s![0..rows, 0..dims.q_dim]]);
        // The block caches' slots of these rows (else not written).
        let slots_sb = nl::ndarray([P_MAX, 1], nl::int32, buffer = nl::sbuf);
        let (slot_mapping, k_cache, v_cache) = (io.slot_mapping, io.k_cache, io.v_cache);
        if let Some(slots) = slot_mapping {
            nisa::dma_copy(slots_sb[s![0..rows, ..]], slots.reshape([dims.b, dims.s, 1])[s![b, s0..s0 + rows, ..]]);
        }
        if let Some(kc) = k_cache {
            quantize_and_store_kv(cfg, dims, kc, g.k_scale_sb, out_sb, slots_sb, dims.q_dim, b, s0, rows);
        }
        if let Some(vc) = v_cache {
            quantize_and_store_kv(cfg, dims, vc, g.v_scale_sb, out_sb, slots_sb, dims.q_dim + dims.kv_dim, b, s0, rows);
        }
    }

    /// The library's `_quantize_and_store_kv`: columns `off..off + kv_dim` of
    /// `out_sb` (K or V) times the reciprocal of `scale_sb`, rounded to
    /// `kv_dtype`, clipped to `[kv_min, kv_max]`, into `cache`: rows `s0..s0 +
    /// rows` of batch `b` (`[B, max_seq_len, kv_dim]`), or the slots
    /// `slots_sb` names (`[num_blocks, block_size, kv_dim]` seen as one row per slot).
    #[nki_helper]
    pub fn quantize_and_store_kv(
        cfg: QkvCteConfig,
        dims: QkvCteDims,
        cache: Hbm,
        scale_sb: Sbuf,
        out_sb: Sbuf,
        slots_sb: Sbuf,
        off: i64,
        b: i64,
        s0: i64,
        rows: i64,
    ) {
        let kv = dims.kv_dim;
        let inv_scale_sb = nl::ndarray([P_MAX, 1], nl::float32, buffer = nl::sbuf);
        nisa::reciprocal(inv_scale_sb[s![0..rows, ..]], scale_sb[s![0..rows, ..]]);
        let clamped_sb = nl::ndarray([P_MAX, kv], cfg.kv_dtype, buffer = nl::sbuf);
        let c = clamped_sb[s![0..rows, ..]];
        nisa::tensor_scalar(c, out_sb[s![0..rows, off..off + kv]], nl::multiply, inv_scale_sb[s![0..rows, ..]]);
        nisa::tensor_scalar(c, c, nl::maximum, cfg.kv_min, op1 = nl::minimum, operand1 = cfg.kv_max);
        if cfg.use_block_kv {
            let [num_blocks, block_size, _] = cache.shape();
            let slots = cache.reshape([num_blocks * block_size, kv]);
            nisa::dma_copy(slots.ap([[kv, rows], [1, kv]], offset = 0, vector_offset = slots_sb[s![0..rows, ..]], indirect_dim = 0), c);
        } else {
            nisa::dma_copy(cache[s![b, s0..s0 + rows, ..]], c);
        }
    }

    /// One S block of batch `b`: `rows` rows from this program's row `r0`
    /// (steps 1 to 6 for each of its S tiles).
    #[nki_helper]
    pub fn qkv_cte_block(cfg: QkvCteConfig, dims: QkvCteDims, io: QkvCteTensors, g: QkvCteGlobals, b: i64, r0: i64, rows: i64) {
        let (h, i) = (dims.h, dims.i);
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
        let out_sb = nl::ndarray([P_MAX, tiles, i], cfg.output_sb_dtype, buffer = nl::sbuf);
        for t in 0..tiles {
            let r = (rows - t * P_MAX).min(P_MAX);
            let o = out_sb[s![.., t, ..]];
            if cfg.fused_rope {
                copy_psum_to_sbuf_apply_rope_and_bias(cfg, dims, io, g, o, psum, t, b, s0 + t * P_MAX, r);
            } else {
                evict_psum_to_sbuf_apply_bias(cfg, dims, g, o, psum, t, r);
            }
            if cfg.use_kv_quantization {
                store_q_and_quantize_kv(cfg, dims, io, g, o, b, s0 + t * P_MAX, r);
            } else {
                store_output(cfg, dims, io, o, b, s0 + t * P_MAX, r);
            }
        }
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
                qkv_cte_block(cfg, dims, io, g, b, r0, rows);
            }
        }
    }

    /// The fused QKV projection of `input` `[B, S, H]` with
    /// `fused_qkv_weights` `[H, I]` for prefill (see the module docs).
    /// Returns `[B, S, I]` (BSD) or `[I/d_head, B, S, d_head]` (NBSd) in the
    /// input's dtype (bfloat16 with STATIC); with the fp8 KV-cache outputs,
    /// Q `[B, S, q_dim]` in the input's dtype and the updated caches.
    #[nki_kernel]
    pub fn qkv_cte(
        #[dtypes(float32, bfloat16, float16)] input: Hbm,
        #[dtypes(float32, bfloat16, float16, float8_e4m3)] fused_qkv_weights: Hbm,
        #[default(QKVOutputLayout::BSD)] output_layout: QKVOutputLayout,
        #[dtypes(float32, bfloat16, float16)] bias: Option<Hbm>,
        #[default(false)] fused_residual_add: bool,
        #[dtypes(float32, bfloat16, float16)] mlp_prev: Option<Hbm>,
        #[dtypes(float32, bfloat16, float16)] attention_prev: Option<Hbm>,
        #[default(NormType::NO_NORM)] fused_norm_type: NormType,
        #[dtypes(float32, bfloat16, float16)] gamma_norm_weights: Option<Hbm>,
        #[dtypes(float32, bfloat16, float16)] layer_norm_bias: Option<Hbm>,
        #[default(1e-6)] norm_eps: f64,
        hidden_actual: Option<i64>,
        #[default(false)] fused_rope: bool,
        #[dtypes(float32, bfloat16, float16)] cos_cache: Option<Hbm>,
        #[dtypes(float32, bfloat16, float16)] sin_cache: Option<Hbm>,
        d_head: Option<i64>,
        num_q_heads: Option<i64>,
        num_kv_heads: Option<i64>,
        k_cache: Option<Hbm>,
        v_cache: Option<Hbm>,
        #[dtypes(float32)] k_scale: Option<Hbm>,
        #[dtypes(float32)] v_scale: Option<Hbm>,
        fp8_max: Option<f64>,
        fp8_min: Option<f64>,
        kv_dtype: Option<Dtype>,
        #[default(false)] use_block_kv: bool,
        block_size: Option<i64>,
        #[dtypes(int32)] slot_mapping: Option<Hbm>,
        #[default(false)] store_output_in_sbuf: bool,
        #[default(false)] use_auto_allocation: bool,
        #[default(true)] load_input_with_DMA_transpose: bool,
        #[default(QuantizationType::NONE)] quantization_type: QuantizationType,
        #[dtypes(float32)] qkv_w_scale: Option<Hbm>,
        #[dtypes(float32)] qkv_in_scale: Option<Hbm>,
        #[default(false)] is_input_swizzled: bool,
        #[default(QKVWeightLayout::CONTIGUOUS)] weight_layout: QKVWeightLayout,
    ) -> Outputs {
        let _ = (use_auto_allocation, load_input_with_DMA_transpose);
        validate_unsupported_options(quantization_type, store_output_in_sbuf, is_input_swizzled, weight_layout);
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
        };
        validate_user_inputs(args);
        let scales = QkvQuantScales { qkv_w_scale, qkv_in_scale };
        validate_static_quantization(args, quantization_type, scales);
        let kv = QkvKvCacheArgs { k_cache, v_cache, k_scale, v_scale, use_block_kv, block_size: block_size.unwrap_or(0), slot_mapping };
        validate_kv_cache(args, kv);
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
        let cfg = build_config(args, kv, quantization_type, num_shards, kv_tile_dtype, kv_max, kv_min);
        let dims = get_tensor_dimensions(args, cfg, num_shards, shard_id);
        let (b, s, h, i, d) = (dims.b, dims.s, dims.h, dims.i, dims.d_head);
        let nbsd = output_layout == QKVOutputLayout::NBSd;
        let out_dtype = if cfg.static_quant { nl::bfloat16 } else { input.dtype() };
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
