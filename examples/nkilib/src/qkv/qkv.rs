//! The NKI library's `qkv` entry: the fused QKV projection of `input` `[B, S,
//! H]` with `fused_qkv_weights` `[H, I]`, by the context-encoding kernel
//! [`qkv_cte`](crate::qkv::qkv_cte) or the decode-phase kernel
//! [`qkv_tkg`](crate::qkv::qkv_tkg).
//!
//! ```text
//! qkv_cte  when  fused_rope  or  S > SEQLEN_THRESHOLD_FOR_QKV_CTE (96)  or  B·S > 128
//! qkv_tkg  otherwise
//! ```
//!
//! Each kernel gets the parameters it reads under its own names (the
//! library's `is_h_dim_4h_transposed` is `qkv_cte`'s `is_input_swizzled`);
//! the parameters only one kernel reads are taken and, on the other path, not
//! used. `qkv_tkg` also returns the fused residual sum with
//! `fused_residual_add`; `qkv_cte` returns the projection alone, or with the
//! fp8 KV-cache outputs Q and the updated K and V caches. MX weights
//! (`float8_e4m3fn_x4` with `uint8` block scales) go to either kernel's MX
//! form; a float8 input (MX with `MX_INTERLEAVED` weights) only to `qkv_cte`.

// The library's parameter `load_input_with_DMA_transpose` keeps its spelling.
#![allow(non_snake_case)]

use nki::prelude::*;

pub use kernel::*;

/// The entry and its dispatch threshold.
#[nki_module]
pub mod kernel {
    use crate::qkv::qkv_cte::qkv_cte;
    use crate::qkv::qkv_cte::qkv_cte_utils::{QkvFusions, is_float8_input};
    use crate::qkv::qkv_tkg::qkv_tkg;
    pub use crate::utils::common_types::{NormType, QKVOutputLayout, QKVWeightLayout, QuantizationType};
    use nki::prelude::*;

    /// Tokens per sequence above which `qkv_cte` is used.
    pub const SEQLEN_THRESHOLD_FOR_QKV_CTE: i64 = 96;
    /// Token rows above which `qkv_cte` is used (`qkv_tkg` holds one matmul's 128 rows).
    pub const P_MAX: i64 = nl::tile_size::pmax;

    /// The library's `qkv`: `qkv_cte` for context encoding (fused RoPE, `S >
    /// SEQLEN_THRESHOLD_FOR_QKV_CTE` or `B·S > 128`), else `qkv_tkg` (see the
    /// module docs).
    #[nki_kernel]
    pub fn qkv(
        #[dtypes(float32, bfloat16, float16, float8_e4m3, float8_e4m3fn)] input: Hbm,
        #[dtypes(float32, bfloat16, float16, float8_e4m3, float8_e4m3fn_x4)] fused_qkv_weights: Hbm,
        #[default(QKVOutputLayout::BSD)] output_layout: QKVOutputLayout,
        #[dtypes(float32, bfloat16, float16)] bias: Option<Hbm>,
        #[default(QuantizationType::NONE)] quantization_type: QuantizationType,
        #[dtypes(float32, uint8)] qkv_w_scale: Option<Hbm>,
        #[dtypes(float32)] qkv_in_scale: Option<Hbm>,
        #[spread] _: QkvFusions,
        #[default(false)] is_h_dim_4h_transposed: bool,
        #[default(QKVWeightLayout::CONTIGUOUS)] weight_layout: QKVWeightLayout,
    ) -> Outputs {
        assert!(input.ndim() == 3, "qkv: input must be [B, S, H] in HBM, got {} dims", input.ndim());
        let [b, s, _] = input.shape();
        let cte = fused_rope || s > SEQLEN_THRESHOLD_FOR_QKV_CTE || b * s > P_MAX;
        if cte {
            let out: Outputs = qkv_cte(
                input,
                fused_qkv_weights,
                output_layout = output_layout,
                bias = bias,
                fused_residual_add = fused_residual_add,
                mlp_prev = mlp_prev,
                attention_prev = attention_prev,
                fused_norm_type = fused_norm_type,
                gamma_norm_weights = gamma_norm_weights,
                layer_norm_bias = layer_norm_bias,
                norm_eps = norm_eps,
                hidden_actual = hidden_actual,
                fused_rope = fused_rope,
                cos_cache = cos_cache,
                sin_cache = sin_cache,
                d_head = d_head,
                num_q_heads = num_q_heads,
                num_kv_heads = num_kv_heads,
                k_cache = k_cache,
                v_cache = v_cache,
                k_scale = k_scale,
                v_scale = v_scale,
                fp8_max = fp8_max,
                fp8_min = fp8_min,
                kv_dtype = kv_dtype,
                use_block_kv = use_block_kv,
                block_size = block_size,
                slot_mapping = slot_mapping,
                store_output_in_sbuf = store_output_in_sbuf,
                use_auto_allocation = use_auto_allocation,
                load_input_with_DMA_transpose = load_input_with_DMA_transpose,
                quantization_type = quantization_type,
                qkv_w_scale = qkv_w_scale,
                qkv_in_scale = qkv_in_scale,
                is_input_swizzled = is_h_dim_4h_transposed,
                weight_layout = weight_layout,
            );
            return out;
        }
        let _ = (cos_cache, sin_cache, k_cache, v_cache, k_scale, v_scale, fp8_max, fp8_min, kv_dtype, use_block_kv, block_size);
        let _ = (slot_mapping, use_auto_allocation, load_input_with_DMA_transpose, weight_layout);
        let dtype = input.dtype();
        assert!(
            !is_float8_input(dtype),
            "qkv: a float8 input takes the context-encoding path (qkv_cte's MX_INTERLEAVED forms), got {dtype} with B = {b}, S = {s}"
        );
        let out: Outputs = qkv_tkg(
            input,
            fused_qkv_weights,
            norm_w = gamma_norm_weights,
            fused_add = fused_residual_add,
            mlp_prev = mlp_prev,
            attn_prev = attention_prev,
            d_head = d_head,
            num_kv_heads = num_kv_heads,
            num_q_heads = num_q_heads,
            output_layout = output_layout,
            eps = norm_eps,
            norm_type = fused_norm_type,
            quantization_type = quantization_type,
            is_h_dim_4h_transposed = is_h_dim_4h_transposed,
            qkv_w_scale = qkv_w_scale,
            qkv_in_scale = qkv_in_scale,
            output_in_sbuf = store_output_in_sbuf,
            qkv_bias = bias,
            norm_bias = layer_norm_bias,
            hidden_actual = hidden_actual,
        );
        out
    }
}
