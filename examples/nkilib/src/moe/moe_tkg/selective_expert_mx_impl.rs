//! The selective-expert path with MX weights (trn3): the library's
//! `selective_expert_mx_impl`, each token through its top-k experts with
//! MXFP4/MXFP8 weights, every projection an `nc_matmul_mx` of `mlp_tkg_mx`.
//!
//! The hidden rows are quantized to MXFP8 once; each token's column then
//! goes through each selected expert alone (padded to the four columns an
//! MX matmul moves). With two programs the top-k slots are split between
//! them (program `p` takes slots `p·K/2 ..`) and the partial sums are
//! exchanged:
//!
//! ```text
//! xq, xs = quantize_mx(pre-shuffled hidden)     [128, H/512, T4]
//! for each token t:
//!     for each of this program's slots k:
//!         e = expert_index[t, k]                 # scalar_offset of the expert's DMAs
//!         gu = act(clamp(x_t @ W_gate[e] + b_gate[e])) · clamp(x_t @ W_up[e] + b_up[e])
//!         o = quantize_mx(gu) @ W_down[e]        [128, H/128] bf16 (no bias)
//!         acc[:, t, :] (+)= o · expert_affinities[t, e]   # fp32, rounded to the output dtype
//! (n = 2) acc += the other program's acc
//! (down bias) acc[:, t, :] += Σ_e expert_affinities[t, e] · b_down[e]   # fp32 matmul
//! output = accᵀ                                  # each program stores half the tokens
//! ```
//!
//! As in the library the affinities always scale (the path takes
//! `POST_SCALE` only), and the down bias is added once per token weighted
//! by every expert's affinity (those of unselected experts are expected to
//! be zero). The weights keep `mlp_tkg_mx`'s layouts with a leading expert
//! dim and the gate and up halves fused: gate/up `[E, 128, 2, H/512, I]`
//! (scales `[E, 16, 2, H/512, I]`, bias `[E, I_p, 2, I/512, 4]`), down
//! `[E, I_p, I/512, H]` (scales `[E, I_p/8, I/512, H]`), down bias `[E, H]`.

pub use kernel::*;

/// The MX selective path.
#[nki::nki_module]
pub mod kernel {
    use crate::mlp::mlp_parameters::{H0, MLPActivationParameters, MLPQuantizationParameters, MLPTensors};
    use crate::mlp::mlp_tkg::down_projection_mx_shard_h::down_projection_mx_tp_shard_h;
    use crate::mlp::mlp_tkg::mlp_tkg_constants::PIPE_ID;
    use crate::mlp::mlp_tkg::mlp_tkg_mx::{gate_up_product_mx, layout_adapter_mx, quantize_hidden_mx};
    use crate::mlp::mlp_tkg::projection_mx_constants::proj_config;
    use crate::moe::moe_tkg::moe_tkg_utils::{GATE, MoeTkgOptions, MoeTkgTensors, UP, weight_scales};
    pub use crate::utils::common_types::{ExpertAffinityScaleMode, QuantizationType};
    use crate::utils::mx_layout::MX_PACK;
    use nki::prelude::*;

    /// Half `half` (`GATE` or `UP`) of expert `id` of a fused `[E, R, 2, A,
    /// B]` tensor (weights, scales or bias) into a private `[R, A, B]`.
    #[nki_helper]
    pub fn select_fused_half_mx(fused: Hbm, id: Sbuf, half: i64) -> Hbm {
        let [_, r, _, a, b] = fused.shape();
        let dst = nl::ndarray([r, a, b], fused.dtype(), buffer = nl::private_hbm);
        nisa::dma_copy(dst, fused.ap([[2 * a * b, r], [b, a], [1, b]], offset = half * a * b, scalar_offset = id, indirect_dim = 0));
        dst
    }

    /// Expert `id` of an `[E, R, A, B]` tensor into a private `[R, A, B]`.
    #[nki_helper]
    pub fn select_expert_mx(stacked: Hbm, id: Sbuf) -> Hbm {
        let [_, r, a, b] = stacked.shape();
        let dst = nl::ndarray([r, a, b], stacked.dtype(), buffer = nl::private_hbm);
        nisa::dma_copy(dst, stacked.ap([[a * b, r], [b, a], [1, b]], offset = 0, scalar_offset = id, indirect_dim = 0));
        dst
    }

    /// The weights and gate/up biases of expert `id` in `mlp_tkg_mx`'s
    /// layouts (the down bias is added after the expert sum).
    #[nki_helper]
    pub fn select_expert_weights_mx(w: MoeTkgTensors, id: Sbuf) -> MLPTensors {
        let gu = w.expert_gate_up_weights;
        let gub = w.expert_gate_up_bias;
        let mut gate_b = gub;
        let mut up_b = gub;
        if let Some(b) = gub {
            gate_b = Some(select_fused_half_mx(b, id, GATE));
            up_b = Some(select_fused_half_mx(b, id, UP));
        }
        MLPTensors {
            gate_proj_weights_tensor: select_fused_half_mx(gu, id, GATE),
            up_proj_weights_tensor: select_fused_half_mx(gu, id, UP),
            down_proj_weights_tensor: select_expert_mx(w.expert_down_weights, id),
            normalization_weights_tensor: None,
            normalization_bias_tensor: None,
            gate_proj_bias_tensor: gate_b,
            up_proj_bias_tensor: up_b,
            down_proj_bias_tensor: None,
            fused_add_tensor: None,
        }
    }

    /// The MX block scales of expert `id` (both are checked given).
    #[nki_helper]
    pub fn select_expert_scales_mx(w: MoeTkgTensors, id: Sbuf) -> MLPQuantizationParameters {
        let mut q = weight_scales(QuantizationType::MX, None, None, None);
        let (gate_up_scale, down_scale) = (w.expert_gate_up_weights_scale, w.expert_down_weights_scale);
        if let Some(gus) = gate_up_scale {
            if let Some(dws) = down_scale {
                let (gate, up) = (select_fused_half_mx(gus, id, GATE), select_fused_half_mx(gus, id, UP));
                q = weight_scales(QuantizationType::MX, Some(gate), Some(up), Some(select_expert_mx(dws, id)));
            }
        }
        q
    }

    /// `acc[:, t, :] += Σ_e aff[t, e] · bias[e]` for every token: the
    /// affinities (`[T, E]`, `E <= 128`) rounded to the bias dtype, summed
    /// in fp32 by the Tensor Engine, one 128-column tile at a time.
    #[nki_helper]
    pub fn add_weighted_down_bias(acc: Sbuf, aff: Hbm, bias: Hbm) {
        let [t, e] = aff.shape();
        let h = bias.shape()[1];
        let bias_sb = nl::ndarray([e, h], bias.dtype(), buffer = nl::sbuf);
        nisa::dma_copy(bias_sb, bias);
        let aff_raw = nl::ndarray([e, t], aff.dtype(), buffer = nl::sbuf);
        nisa::dma_copy(aff_raw, aff.ap([[1, e], [e, t]], offset = 0));
        let aff_t = nl::ndarray([e, t], bias.dtype(), buffer = nl::sbuf);
        nisa::tensor_copy(aff_t, aff_raw);
        for h1 in 0..h / H0 {
            let ps = nl::ndarray([H0, t], nl::float32, buffer = nl::psum);
            nisa::nc_matmul(ps, bias_sb[s![.., h1 * H0..(h1 + 1) * H0]], aff_t);
            nisa::tensor_tensor(acc[s![.., .., h1]], acc[s![.., .., h1]], ps, nl::add);
        }
    }

    /// `output[t] = Σ_k affinity · expert_k(hidden[t])` (+ the weighted
    /// down bias) with MX weights (module docs).
    #[nki_helper(target = "trn3")]
    pub fn _selective_expert_moe_tkg_mxfp4(w: MoeTkgTensors, opts: MoeTkgOptions, output: Hbm) {
        let x = w.hidden_input;
        let [t, h] = x.shape();
        let i = w.expert_gate_up_weights.shape()[4];
        let k = w.expert_index.shape()[1];
        let n = if nl::program_ndim() == 1 { nl::num_programs(0) } else { 1 };
        let pid = if n > 1 { nl::program_id(0) } else { 0 };
        let (k_n, k0) = (k / n, pid * (k / n));
        let io = output.dtype();
        // Every program quantizes all the rows (the slots, not H, are split).
        let cfg = proj_config(h, i, t.div_ceil(MX_PACK) * MX_PACK, 1, 0);
        let sw = layout_adapter_mx(x, false, None, 0.0, t, cfg);
        let xq = nl::ndarray([H0, cfg.n_h512_tile, cfg.bxs], nl::float8_e4m3fn_x4, buffer = nl::sbuf);
        let xs = nl::ndarray([H0, cfg.n_h512_tile, cfg.bxs], nl::uint8, buffer = nl::sbuf);
        quantize_hidden_mx(sw, xq, xs);
        let idx = nl::ndarray([t, k], w.expert_index.dtype(), buffer = nl::sbuf);
        nisa::dma_copy(idx, w.expert_index);
        // One token's column, the three padding columns zero.
        let tok_cfg = proj_config(h, i, MX_PACK, 1, 0);
        let xq_t = nl::ndarray([H0, cfg.n_h512_tile, MX_PACK], nl::float8_e4m3fn_x4, buffer = nl::sbuf);
        let xs_t = nl::ndarray([H0, cfg.n_h512_tile, MX_PACK], nl::uint8, buffer = nl::sbuf);
        nisa::memset(xq_t, 0.0);
        nisa::memset(xs_t, 0.0);
        let aff = w.expert_affinities;
        let e = aff.shape()[1];
        let a = nl::ndarray([H0, 1], aff.dtype(), buffer = nl::sbuf);
        let acc = nl::ndarray([H0, t, h / H0], io, buffer = nl::sbuf);
        for tok in 0..t {
            nisa::dma_copy(xq_t[s![.., .., 0..1]], xq[s![.., .., tok..tok + 1]]);
            nisa::dma_copy(xs_t[s![.., .., 0..1]], xs[s![.., .., tok..tok + 1]]);
            for kk in 0..k_n {
                let id = idx[s![tok..tok + 1, k0 + kk..k0 + kk + 1]];
                let ew = select_expert_weights_mx(w, id);
                let q = select_expert_scales_mx(w, id);
                let gu = gate_up_product_mx(xq_t, xs_t, ew, q, opts.act, io, tok_cfg);
                let down_scale: Option<Hbm> = q.down_w_scale;
                let down_s: Hbm = down_scale.unwrap_or(x);
                let o = down_projection_mx_tp_shard_h(gu, ew.down_proj_weights_tensor, down_s, None, tok_cfg);
                nisa::dma_copy(a, aff.ap([[0, H0], [1, 1]], offset = tok * e, scalar_offset = id, indirect_dim = 1));
                let dst = acc[s![.., tok, ..]];
                if kk == 0 {
                    nisa::tensor_scalar(dst, o[s![.., .., 0]], nl::multiply, a);
                } else {
                    nisa::scalar_tensor_tensor(dst, o[s![.., .., 0]], nl::multiply, a, nl::add, dst);
                }
            }
        }
        if n > 1 {
            let other = 1 - pid;
            let recv = nl::ndarray([H0, t, h / H0], io, buffer = nl::sbuf);
            nisa::sendrecv(acc, recv, other, other, PIPE_ID);
            nisa::tensor_tensor(acc, acc, recv, nl::add);
        }
        let down_bias = w.expert_down_bias;
        if let Some(b) = down_bias {
            add_weighted_down_bias(acc, aff, b);
        }
        // Both programs hold every token; the first stores the first half
        // (rounded up), the second the rest.
        let first = if n > 1 { t - t / 2 } else { t };
        let (lo, hi) = if pid == 0 { (0, first) } else { (first, t) };
        if hi > lo {
            nisa::dma_copy(output.ap([[1, H0], [h, hi - lo], [H0, h / H0]], offset = lo * h), acc[s![.., lo..hi, ..]]);
        }
    }
}
