//! The checks of a `qkv_cte` call, by parameter name, when the kernel is
//! traced: the library's `_validate_user_inputs`, and the options this
//! port refuses.

pub use kernel::*;

/// The checks.
#[nki::nki_module]
pub mod kernel {
    use crate::qkv::qkv_cte::qkv_cte_constants::{MAX_H, MAX_I, NBSD_D_HEAD, NUM_QKV_SEGMENTS, P_MAX, PSUM_FMAX, QUANT_DTYPE};
    use crate::qkv::qkv_cte::qkv_cte_mx::H_PER_MX_TILE;
    use crate::qkv::qkv_cte::qkv_cte_utils::{QkvCteUserInput, QkvKvCacheArgs, QkvQuantScales, is_float8_input};
    use crate::utils::common_types::{NormType, QKVOutputLayout, QKVWeightLayout, QuantizationType};
    use crate::utils::kernel_helpers::check_hidden_row;
    use crate::utils::mx_layout::{MX_PACK, SCALE_GROUP_SIZE};
    use nki::prelude::*;

    /// The library's `_validate_user_inputs`: its checks, by parameter name,
    /// when the kernel is traced.
    #[nki_helper]
    pub fn validate_user_inputs(args: QkvCteUserInput) {
        let x = args.input;
        assert!(x.ndim() == 3, "qkv_cte: input must be [B, S, H] in HBM, got {} dims", x.ndim());
        let [b, s, h] = x.shape();
        let w_shape = args.fused_qkv_weights.shape();
        let mx = args.quantization_type == QuantizationType::MX;
        assert!(
            args.fused_qkv_weights.ndim() == 2 && (mx || w_shape[0] == h),
            "qkv_cte: fused_qkv_weights must be [H, I] with H = input.shape[2] = {h}, got {w_shape}"
        );
        assert!(
            !mx || w_shape[0] * MX_PACK == h,
            "qkv_cte: fused_qkv_weights must be [H / 4, I] with H = input.shape[2] = {h} for MX quantization, got {w_shape}"
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
        check_hidden_row(args.gamma_norm_weights, "qkv_cte", "gamma_norm_weights", h);
        check_hidden_row(args.layer_norm_bias, "qkv_cte", "layer_norm_bias", h);
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

    /// MX quantization's inputs (the library's MX checks, and the MX forms
    /// this port refuses), by parameter name; `is_input_swizzled` is MX's.
    #[nki_helper]
    pub fn validate_mx_quantization(args: QkvCteUserInput, scales: QkvQuantScales, kv: QkvKvCacheArgs) {
        let mx = args.quantization_type == QuantizationType::MX;
        let norm = args.fused_norm_type != NormType::NO_NORM;
        // The rules of `qkv_cte_violation`.
        assert!(!args.is_input_swizzled || mx, "qkv_cte: is_input_swizzled is only supported with MX quantization");
        assert!(
            !args.is_input_swizzled || (!norm && !args.fused_residual_add),
            "qkv_cte: is_input_swizzled supports neither a norm nor fused_residual_add"
        );
        let dtype = args.input.dtype();
        let fp8_input = is_float8_input(dtype);
        assert!(!fp8_input || mx, "qkv_cte: a float8 input needs quantization_type MX, got {dtype}");
        let w = args.fused_qkv_weights;
        assert!(
            mx == (w.dtype() == nl::float8_e4m3fn_x4),
            "qkv_cte: fused_qkv_weights must be float8_e4m3fn_x4 exactly when quantization_type is MX, got {}",
            w.dtype()
        );
        if mx {
            assert!(nisa::get_nc_version() == nisa::nc_version::gen4, "qkv_cte: quantization_type MX needs trn3 (nc_matmul_mx)");
            let [_, s, h] = args.input.shape();
            let programs = if nl::program_ndim() == 1 { nl::num_programs(0) } else { 1 };
            assert!(h % H_PER_MX_TILE == 0, "qkv_cte: H = {h} must be a multiple of 512 for MX quantization");
            assert!((s / programs) % 2 == 0, "qkv_cte: S / programs = {} must be even for MX quantization", s / programs);
            validate_mx_dma_transpose(args, scales);
            assert!(
                kv.k_scale.is_none() && kv.v_scale.is_none(),
                "qkv_cte: the fp8 KV-cache outputs are not supported with MX quantization"
            );
            if let Some(ws) = scales.qkv_w_scale {
                let i = w.shape()[1];
                assert!(
                    scales.qkv_in_scale.is_some()
                        || (ws.dtype() == nl::uint8 && ws.ndim() == 2 && ws.shape()[0] == h / SCALE_GROUP_SIZE && ws.shape()[1] == i),
                    "qkv_cte: qkv_w_scale must be uint8 [H / 32, I] = [{}, {i}] for MX quantization, got {} {}",
                    h / SCALE_GROUP_SIZE,
                    ws.dtype(),
                    ws.shape()
                );
            }
        }
    }

    /// MX's two paths: the DMA-transpose one (float8 input, or the static
    /// dequantization scales `qkv_in_scale`) with `MX_INTERLEAVED` weights,
    /// the on-chip transposes with `MX_CONTIGUOUS` weights.
    #[nki_helper]
    pub fn validate_mx_dma_transpose(args: QkvCteUserInput, scales: QkvQuantScales) {
        let dtype = args.input.dtype();
        let fp8_input = is_float8_input(dtype);
        let in_scale = scales.qkv_in_scale.is_some();
        let dma_path = fp8_input || in_scale;
        // The rules of `qkv_cte_violation`.
        let fused = args.fused_norm_type != NormType::NO_NORM || args.fused_residual_add || args.is_input_swizzled;
        assert!(
            !dma_path || !fused,
            "qkv_cte: float8 input and qkv_in_scale with MX quantization take neither a norm, fused_residual_add nor is_input_swizzled"
        );
        assert!(
            !dma_path || args.load_input_with_DMA_transpose,
            "qkv_cte: float8 input and qkv_in_scale with MX quantization need load_input_with_DMA_transpose=True"
        );
        assert!(
            !in_scale || fp8_input || dtype == nl::bfloat16,
            "qkv_cte: qkv_in_scale with MX quantization takes a bfloat16 or float8 input, got {dtype}"
        );
        let (w_scale, in_scale_t) = (scales.qkv_w_scale, scales.qkv_in_scale);
        if let Some(ins) = in_scale_t {
            assert!(w_scale.is_some(), "qkv_cte: qkv_in_scale with MX quantization needs qkv_w_scale [1, 3] or [128, 3]");
            if let Some(ws) = w_scale {
                let wr = ws.shape()[0];
                assert!(
                    ws.dtype() == nl::float32 && ws.ndim() == 2 && (wr == 1 || wr == P_MAX) && ws.shape()[1] == NUM_QKV_SEGMENTS,
                    "qkv_cte: qkv_in_scale with MX quantization needs qkv_w_scale float32 [1, 3] or [128, 3], got {} {}",
                    ws.dtype(),
                    ws.shape()
                );
            }
            let r = ins.shape()[0];
            assert!(
                ins.ndim() == 2 && (r == 1 || r == P_MAX) && ins.shape()[1] == 1,
                "qkv_cte: qkv_in_scale with MX quantization must be [1, 1] or [128, 1], got {}",
                ins.shape()
            );
            assert!(
                args.d_head > 0 && args.num_q_heads > 0 && args.num_kv_heads > 0,
                "qkv_cte: qkv_in_scale with MX quantization needs d_head, num_q_heads and num_kv_heads"
            );
        }
        let layout = args.weight_layout;
        assert!(
            !dma_path || layout == QKVWeightLayout::MX_INTERLEAVED,
            "qkv_cte: float8 input and qkv_in_scale with MX quantization need weight_layout MX_INTERLEAVED (the DMA-transpose path), got {layout}"
        );
        assert!(
            dma_path || layout == QKVWeightLayout::MX_CONTIGUOUS,
            "qkv_cte: MX quantization without float8 input or qkv_in_scale needs weight_layout MX_CONTIGUOUS, got {layout}"
        );
    }

    /// The options this port does not implement, refused by name.
    #[nki_helper]
    pub fn validate_unsupported_options(quantization_type: QuantizationType, store_output_in_sbuf: bool, weight_layout: QKVWeightLayout) {
        assert!(
            quantization_type == QuantizationType::NONE
                || quantization_type == QuantizationType::STATIC
                || quantization_type == QuantizationType::MX,
            "qkv_cte: quantization_type must be NONE, STATIC or MX (the library's qkv_cte has no ROW path), got {quantization_type}"
        );
        assert!(!store_output_in_sbuf, "qkv_cte: store_output_in_sbuf is not supported (the output is stored to HBM)");
        assert!(
            quantization_type == QuantizationType::MX || weight_layout == QKVWeightLayout::CONTIGUOUS,
            "qkv_cte: weight_layout must be CONTIGUOUS without MX quantization, got {weight_layout}"
        );
    }
}
