//! The configuration of `qkv_cte`: the library's `qkv_cte_utils` bundles
//! (the call's inputs, the configuration, the sizes, the tensors and SBUF
//! globals the phases share) and how they are built from a call.

pub use kernel::*;

/// The bundles and their builders.
#[nki::nki_module]
pub mod kernel {
    use crate::qkv::qkv_cte::qkv_cte_constants::{
        FP8_E4M3_MAX, FP8_E4M3_MAX_GEN4, FP8_E5M2_MAX, MAX_S_MULTI_BUFFER_DEGREE, NUM_HW_PSUM_BANKS, P_MAX, PSUM_FMAX, QUANT_DTYPE,
        S_THRESHOLD_FOR_RESHAPE,
    };
    use crate::utils::common_types::{NormType, QKVOutputLayout, QKVWeightLayout, QuantizationType};
    use nki::prelude::*;

    /// The fusion, cache and layout parameters `qkv` and `qkv_cte` both
    /// take, in the library's order (a `#[spread]` group).
    #[nki_params]
    pub struct QkvFusions {
        /// Whether `mlp_prev` and `attention_prev` are added to the input.
        #[default(false)]
        pub fused_residual_add: bool,
        /// The MLP residual `[B, S, H]`.
        #[dtypes(float32, bfloat16, float16)]
        #[default(None)]
        pub mlp_prev: Option<Hbm>,
        /// The attention residual `[B, S, H]`.
        #[dtypes(float32, bfloat16, float16)]
        #[default(None)]
        pub attention_prev: Option<Hbm>,
        /// The norm before the projection.
        #[default(NormType::NO_NORM)]
        pub fused_norm_type: NormType,
        /// Norm gamma `[1, H]`.
        #[dtypes(float32, bfloat16, float16)]
        #[default(None)]
        pub gamma_norm_weights: Option<Hbm>,
        /// LayerNorm beta `[1, H]`.
        #[dtypes(float32, bfloat16, float16)]
        #[default(None)]
        pub layer_norm_bias: Option<Hbm>,
        /// The norm's epsilon.
        #[default(1e-6)]
        pub norm_eps: f64,
        /// The hidden columns the norm averages over (`H` when not given).
        #[default(None)]
        pub hidden_actual: Option<i64>,
        /// Whether RoPE is fused.
        #[default(false)]
        pub fused_rope: bool,
        /// RoPE cosines `[B, S, d_head]`.
        #[dtypes(float32, bfloat16, float16)]
        #[default(None)]
        pub cos_cache: Option<Hbm>,
        /// RoPE sines `[B, S, d_head]`.
        #[dtypes(float32, bfloat16, float16)]
        #[default(None)]
        pub sin_cache: Option<Hbm>,
        /// The head size.
        #[default(None)]
        pub d_head: Option<i64>,
        /// Query heads.
        #[default(None)]
        pub num_q_heads: Option<i64>,
        /// Key (and value) heads.
        #[default(None)]
        pub num_kv_heads: Option<i64>,
        /// The key cache the fp8 outputs update.
        #[default(None)]
        pub k_cache: Option<Hbm>,
        /// The value cache the fp8 outputs update.
        #[default(None)]
        pub v_cache: Option<Hbm>,
        /// The keys' fp8 scale.
        #[dtypes(float32)]
        #[default(None)]
        pub k_scale: Option<Hbm>,
        /// The values' fp8 scale.
        #[dtypes(float32)]
        #[default(None)]
        pub v_scale: Option<Hbm>,
        /// The fp8 range's top.
        #[default(None)]
        pub fp8_max: Option<f64>,
        /// The fp8 range's bottom.
        #[default(None)]
        pub fp8_min: Option<f64>,
        /// The caches' dtype.
        #[default(None)]
        pub kv_dtype: Option<Dtype>,
        /// Whether the caches are blocks addressed by `slot_mapping`.
        #[default(false)]
        pub use_block_kv: bool,
        /// Tokens per cache block.
        #[default(None)]
        pub block_size: Option<i64>,
        /// Cache slot of each token.
        #[dtypes(int32)]
        #[default(None)]
        pub slot_mapping: Option<Hbm>,
        /// The library's SBUF-output option (refused).
        #[default(false)]
        pub store_output_in_sbuf: bool,
        /// The library's allocation option (ignored).
        #[default(false)]
        pub use_auto_allocation: bool,
        /// The library's DMA-transpose option.
        #[default(true)]
        pub load_input_with_DMA_transpose: bool,
    }

    /// The library's `QKV_CTE_UserInput`: the call's tensors and options the
    /// checks and the configuration read.
    #[nki_object]
    pub struct QkvCteUserInput {
        /// `[B, S, H]`.
        pub input: Tensor,
        /// `[H, I]` (MX: `[H/4, I]` packed).
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
        /// NONE, STATIC or MX.
        pub quantization_type: QuantizationType,
        /// MX: the input is pre-swizzled.
        pub is_input_swizzled: bool,
        /// The library's DMA-transpose option (MX: float8 input and `qkv_in_scale` need it).
        pub load_input_with_DMA_transpose: bool,
        /// The weights' layout (MX: `MX_INTERLEAVED` on the DMA-transpose path).
        pub weight_layout: QKVWeightLayout,
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
        /// MX quantization: packed `[H/4, I]` weights, the rows quantized by `quantize_mx`.
        pub mx_quant: bool,
        /// MX: the input is pre-swizzled (each row's `[H/512, 128, 4]` stored as `[4, H/512, 128]`).
        pub is_input_swizzled: bool,
        /// MX: the rows moved into the packed layout by DMA transposes of
        /// 2-value words (float8 input, or `qkv_in_scale`), `MX_INTERLEAVED` weights.
        pub mx_dma_transpose: bool,
        /// MX with `qkv_in_scale`: 16-bit rows divided by the input scale
        /// before `quantize_mx`, Q/K/V times their weight scale and the input scale.
        pub mx_static_dequant: bool,
        /// The input is float8 (MX: already quantized, its block scales neutral).
        pub fp8_input: bool,
        /// The input's dtype.
        pub input_dtype: Dtype,
        /// The matmul operands' dtype: bfloat16 for fp32 and float8 input, else
        /// the input's (float8_e4m3 with STATIC).
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

    /// Whether `dtype` is a float8 input dtype (`float8_e4m3` or `float8_e4m3fn`).
    #[nki_helper]
    pub fn is_float8_input(dtype: Dtype) -> bool {
        dtype == nl::float8_e4m3 || dtype == nl::float8_e4m3fn
    }

    /// `dtype`'s largest finite value for the fp8 dtypes, 0 for the others.
    #[nki_helper]
    pub fn max_positive_value_for_dtype(dtype: Dtype) -> f64 {
        let fp8_e4m3 = if dtype == nl::float8_e4m3 { FP8_E4M3_MAX } else { 0.0 };
        let fp8_e5m2 = if dtype == nl::float8_e5m2 { FP8_E5M2_MAX } else { 0.0 };
        fp8_e4m3 + fp8_e5m2
    }

    /// The library's `_build_config`. `kv_dtype`, `kv_max` and `kv_min` are
    /// the KV-cache outputs' tile dtype and clip bounds, `has_in_scale` whether
    /// `qkv_in_scale` is given. Non-block caches are `[B, max_seq_len,
    /// kv_dim]`: their batches are not folded. The checks have made
    /// `MX_INTERLEAVED` weights mean the DMA-transpose MX path.
    #[nki_helper]
    pub fn build_config(
        args: QkvCteUserInput,
        kv: QkvKvCacheArgs,
        quantization_type: QuantizationType,
        num_shards: i64,
        kv_dtype: Dtype,
        kv_max: f64,
        kv_min: f64,
        has_in_scale: bool,
    ) -> QkvCteConfig {
        let dtype = args.input.dtype();
        let static_quant = quantization_type == QuantizationType::STATIC;
        let mx_quant = quantization_type == QuantizationType::MX;
        let fp8_input = is_float8_input(dtype);
        let float_dtype = if dtype == nl::float32 || fp8_input { nl::bfloat16 } else { dtype };
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
            mx_quant,
            is_input_swizzled: args.is_input_swizzled,
            mx_dma_transpose: mx_quant && args.weight_layout == QKVWeightLayout::MX_INTERLEAVED,
            mx_static_dequant: mx_quant && has_in_scale,
            fp8_input,
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
}
