//! The all-expert path: the library's `all_expert_impl`, every local expert
//! applied to every token, experts outer and 128-token tiles inner.
//!
//! With `n` programs each holding hidden shard `k` (`H/n` columns, the
//! gate/up partial sums exchanged as in `mlp_tkg`):
//!
//! ```text
//! x_sb = shard k of hidden                  [128, T, H1s]
//! (POST_SCALE) aff = mask_expert_affinities  [128, T/128, E_L]
//! acc = 0                                    [128, T/128, H/n], hidden's dtype
//! for e in 0..E_L:
//!     expert e's weights, biases, scales     # select_expert_*
//!     for each tile j of up to 128 tokens:
//!         o = expert_mlp(x_sb[:, tile j, :])   [rows, H/n], hidden's dtype
//!         (POST_SCALE) o *= aff[:, j, e]      # the affinity rounded to hidden's dtype first
//!         acc[:, j, :] += o                   # hidden's dtype
//! output[tile j, shard k] = acc[:, j, :]     # output_dtype
//! ```
//!
//! The sums round to the hidden dtype after each expert, in expert order, as
//! the library accumulates them.

pub use kernel::*;

/// The all-expert path.
#[nki::nki_module]
pub mod kernel {
    use crate::mlp::mlp_parameters::{H0, MLPActivationParameters};
    use crate::moe::moe_tkg::moe_tkg_affinity_masking::{T_TILE, mask_expert_affinities};
    use crate::moe::moe_tkg::moe_tkg_utils::{
        MoeTkgOptions, MoeTkgTensors, expert_dims, expert_id_tile, expert_mlp, select_expert_scales, select_expert_weights,
    };
    use crate::subkernels::norm_tkg_utils::load_input_to_sbuf;
    pub use crate::utils::common_types::ExpertAffinityScaleMode;
    pub use crate::utils::common_types::QuantizationType;
    use nki::prelude::*;

    /// The MoE of every token over every local expert into `output` `[T, H]`
    /// (module docs).
    #[nki_helper]
    pub fn _all_expert_moe_tkg(w: MoeTkgTensors, opts: MoeTkgOptions, output: Hbm) {
        let x = w.hidden_input;
        let [t, h] = x.shape();
        let [e_l, _, _, i] = w.expert_gate_up_weights.shape();
        let io = x.dtype();
        let n = if nl::program_ndim() == 1 { nl::num_programs(0) } else { 1 };
        let shard_id = if n > 1 { nl::program_id(0) } else { 0 };
        let (hs, c0) = (h / n, shard_id * (h / n));
        let tiles = t.div_ceil(T_TILE);
        let rows_max = t.min(T_TILE);
        let x_sb = nl::ndarray([H0, t, h / H0 / n], io, buffer = nl::sbuf);
        load_input_to_sbuf(x, x_sb, 0, t, n, shard_id, 1, false);
        let post = opts.expert_affinities_scaling_mode == ExpertAffinityScaleMode::POST_SCALE;
        // Filled (POST_SCALE, which needs rank_id) before the experts read it.
        let aff = nl::ndarray([rows_max, tiles, e_l], w.expert_affinities.dtype(), buffer = nl::sbuf);
        let rank = w.rank_id;
        if let Some(rank_id) = rank {
            if post {
                mask_expert_affinities(aff, w.expert_affinities, w.expert_index, rank_id, opts.mask_unselected_experts);
            }
        }
        let acc = nl::ndarray([rows_max, tiles, hs], io, buffer = nl::sbuf);
        nisa::memset(acc, 0.0);
        let a_io = nl::ndarray([T_TILE, 1], io, buffer = nl::sbuf);
        for e in 0..e_l {
            let id = expert_id_tile(e);
            let ew = select_expert_weights(w, id);
            let q = select_expert_scales(w, id, opts.quantization_type);
            for j in 0..tiles {
                let t0 = j * T_TILE;
                let rows = (t - t0).min(T_TILE);
                let dims = expert_dims(rows, h, i, n, shard_id);
                let o = expert_mlp(x_sb[s![.., t0..t0 + rows, ..]], ew, q, opts.act, dims, io);
                if post {
                    nisa::tensor_copy(a_io[s![0..rows, ..]], aff[s![0..rows, j, e..e + 1]]);
                    nisa::tensor_scalar(o, o, nl::multiply, a_io[s![0..rows, ..]]);
                }
                nisa::tensor_tensor(acc[s![0..rows, j, ..]], acc[s![0..rows, j, ..]], o, nl::add);
            }
        }
        let cast = nl::ndarray([T_TILE, hs], output.dtype(), buffer = nl::sbuf);
        for j in 0..tiles {
            let t0 = j * T_TILE;
            let rows = (t - t0).min(T_TILE);
            nisa::tensor_copy(cast[s![0..rows, ..]], acc[s![0..rows, j, ..]]);
            nisa::dma_copy(output[s![t0..t0 + rows, c0..c0 + hs]], cast[s![0..rows, ..]]);
        }
    }
}
