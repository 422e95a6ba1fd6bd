//! The all-expert path with MX weights (trn3): the library's
//! `all_expert_mx_impl` in its static form, every local expert applied to
//! every token with MXFP4/MXFP8 weights, each projection an `nc_matmul_mx`
//! of `mlp_tkg_mx`.
//!
//! The hidden rows are quantized to MXFP8 once and all the tokens go through
//! each expert together (one tile of at most 96 tokens, padded to a multiple
//! of the four columns an MX matmul moves). With two programs each holds half
//! of `H` and the gate/up partial sums are exchanged, as in `mlp_tkg_mx`
//! (the library splits `I` instead; the sums are the same up to rounding):
//!
//! ```text
//! xq, xs = quantize_mx(pre-shuffled hidden)       [128, H/512/n, T4]
//! aff = mask_expert_affinities                    [T, E_L]
//! for e in 0..E_L:
//!     gu = act(clamp(x @ W_gate[e] + b_gate[e])) · clamp(x @ W_up[e] + b_up[e])
//!     o = quantize_mx(gu) @ W_down[e] + b_down[e]  [128, H1s, T4] bf16
//!     o[:, :, t] *= aff[t, e]                      # rounded to bf16
//!     acc (+)= o                                   # bf16, in expert order
//! output[:, shard] = accᵀ                          # output dtype
//! ```
//!
//! As in the library the affinities always scale (`POST_SCALE` only), the
//! down bias is added per expert before its affinity, and the sums are
//! kept in bfloat16. The weights have the layouts of
//! [`selective_expert_mx_impl`](crate::moe::moe_tkg::selective_expert_mx_impl).
//! `hidden_input_scale` (an input quantized upstream) and the dynamic
//! block strategy are refused by name.

pub use kernel::*;

/// The MX all-expert path.
#[nki::nki_module]
pub mod kernel {
    use crate::mlp::mlp_parameters::{H0, MLPActivationParameters};
    use crate::mlp::mlp_tkg::down_projection_mx_shard_h::down_projection_mx_tp_shard_h;
    use crate::mlp::mlp_tkg::mlp_tkg_mx::{gate_up_product_mx, layout_adapter_mx, quantize_hidden_mx, store_output_mx};
    use crate::mlp::mlp_tkg::projection_mx_constants::{ProjConfig, proj_config};
    use crate::moe::moe_tkg::moe_tkg_affinity_masking::mask_expert_affinities;
    use crate::moe::moe_tkg::moe_tkg_utils::{MoeTkgOptions, MoeTkgTensors, expert_id_tile, select_expert_row};
    use crate::moe::moe_tkg::selective_expert_mx_impl::{select_expert_scales_mx, select_expert_weights_mx};
    pub use crate::utils::common_types::{ExpertAffinityScaleMode, QuantizationType};
    use crate::utils::mx_layout::MX_PACK;
    use nki::prelude::*;

    /// This rank's masked affinities into `aff_hbm` `[T, E_L]` (`T <= 128`,
    /// one tile of `mask_expert_affinities`), for the per-expert broadcasts.
    #[nki_helper]
    pub fn masked_affinities_hbm(w: MoeTkgTensors, opts: MoeTkgOptions, rank_id: Hbm, aff_hbm: Hbm) {
        let [t, e_l] = aff_hbm.shape();
        let aff = nl::ndarray([t, 1, e_l], aff_hbm.dtype(), buffer = nl::sbuf);
        mask_expert_affinities(aff, w.expert_affinities, w.expert_index, rank_id, opts.mask_unselected_experts);
        nisa::dma_copy(aff_hbm, aff[s![.., 0, ..]]);
    }

    /// `output[t] = Σ_e affinity[t, e] · expert_e(hidden[t])` over every
    /// local expert with MX weights (module docs).
    #[nki_helper(target = "trn3")]
    pub fn _all_expert_moe_tkg_mx(w: MoeTkgTensors, opts: MoeTkgOptions, rank_id: Hbm, output: Hbm) {
        let x = w.hidden_input;
        let [t, h] = x.shape();
        let [e_l, _, _, _, i] = w.expert_gate_up_weights.shape();
        let n = if nl::program_ndim() == 1 { nl::num_programs(0) } else { 1 };
        let pid = if n > 1 { nl::program_id(0) } else { 0 };
        let cfg: ProjConfig = proj_config(h, i, t.div_ceil(MX_PACK) * MX_PACK, n, pid);
        let sw = layout_adapter_mx(x, false, None, 0.0, t, cfg);
        let xq = nl::ndarray([H0, cfg.n_h512_tile_sharded, cfg.bxs], nl::float8_e4m3fn_x4, buffer = nl::sbuf);
        let xs = nl::ndarray([H0, cfg.n_h512_tile_sharded, cfg.bxs], nl::uint8, buffer = nl::sbuf);
        quantize_hidden_mx(sw, xq, xs);
        let aff = nl::ndarray([t, e_l], w.expert_affinities.dtype(), buffer = nl::private_hbm);
        masked_affinities_hbm(w, opts, rank_id, aff);
        let a_bc = nl::ndarray([H0, cfg.h1_sharded, t], aff.dtype(), buffer = nl::sbuf);
        let scaled = nl::ndarray([H0, cfg.h1_sharded, t], nl::bfloat16, buffer = nl::sbuf);
        let acc = nl::ndarray([H0, cfg.h1_sharded, t], nl::bfloat16, buffer = nl::sbuf);
        let down_bias = w.expert_down_bias;
        for e in 0..e_l {
            let id = expert_id_tile(e);
            let ew = select_expert_weights_mx(w, id);
            let q = select_expert_scales_mx(w, id);
            let mut bias = down_bias;
            if let Some(b) = down_bias {
                bias = Some(select_expert_row(b, id));
            }
            let gu = gate_up_product_mx(xq, xs, ew, q, opts.act, nl::bfloat16, cfg);
            // The scales are checked present before the path runs.
            let down_scale: Option<Hbm> = q.down_w_scale;
            let down_s: Hbm = down_scale.unwrap_or(x);
            let o = down_projection_mx_tp_shard_h(gu, ew.down_proj_weights_tensor, down_s, bias, cfg);
            // Token t's affinity along every partition and output tile.
            nisa::dma_copy(a_bc, aff.ap([[0, H0], [0, cfg.h1_sharded], [e_l, t]], offset = e));
            if e == 0 {
                nisa::tensor_tensor(acc, o[s![.., .., 0..t]], a_bc, nl::multiply);
            } else {
                nisa::tensor_tensor(scaled, o[s![.., .., 0..t]], a_bc, nl::multiply);
                nisa::tensor_tensor(acc, acc, scaled, nl::add);
            }
        }
        store_output_mx(acc, output, t, cfg);
    }
}
