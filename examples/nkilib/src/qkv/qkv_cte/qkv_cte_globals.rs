//! The SBUF tiles `qkv_cte` loads once: the activation constants, the
//! bias on every partition, the norm weights one 128-row piece per
//! column (MX: in its layout), STATIC's and the KV caches' scales.

pub use kernel::*;

/// The loads.
#[nki::nki_module]
pub mod kernel {
    use crate::qkv::qkv_cte::qkv_cte_constants::{NUM_QKV_SEGMENTS, P_MAX};
    use crate::qkv::qkv_cte::qkv_cte_utils::{QkvCteConfig, QkvCteDims, QkvCteGlobals, QkvCteUserInput, QkvKvCacheArgs, QkvQuantScales};
    use crate::utils::mx_layout::MX_PACK;
    use nki::prelude::*;

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

    /// The library's `_load_norm_weights_mx`: `[1, H]` into `w_sb` `[128,
    /// H/128]` (fp32), element `[p, 4t + k]` = `w[t·512 + 4p + k]` (the MX
    /// form's transposed layout).
    #[nki_helper]
    pub fn load_norm_weights_mx(norm_weights: Hbm, w_sb: Sbuf) {
        let tiles = w_sb.shape()[1] / MX_PACK;
        let src = norm_weights.reshape([tiles, P_MAX, MX_PACK]).permute([1, 0, 2]);
        nisa::dma_copy(w_sb.reshape([P_MAX, tiles, MX_PACK]), src);
    }

    /// The norm weights in the layout of the transposed rows.
    #[nki_helper]
    pub fn load_norm_weights_for(cfg: QkvCteConfig, norm_weights: Hbm, w_sb: Sbuf) {
        if cfg.mx_quant {
            load_norm_weights_mx(norm_weights, w_sb);
        } else {
            load_norm_weights(norm_weights, w_sb);
        }
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
            load_norm_weights_for(cfg, gamma, gamma_norm_weights_sb);
        }
        let layer_norm_bias_sb = nl::ndarray([P_MAX, dims.num_128_tiles_per_h], cfg.act_dtype, buffer = nl::sbuf);
        if let Some(beta) = layer_norm_bias {
            load_norm_weights_for(cfg, beta, layer_norm_bias_sb);
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
}
