//! The all-expert path with MX weights (trn3): the library's
//! `all_expert_mx_impl` in its static form, every local expert applied to
//! every token with MXFP4/MXFP8 weights, each projection an `nc_matmul_mx`
//! of `mlp_tkg_mx`.
//!
//! The hidden rows are quantized to MXFP8 once (padded to a multiple of the
//! four columns an MX matmul moves; the affinities are masked in 128-token
//! tiles), then each expert takes the tokens in tiles of at most 256 (the
//! library's gate/up token tile, a token's four packed values of a
//! 512-column tile of `I` in one bfloat16 PSUM bank): each token's sums are the
//! same whatever tile it is in. With two programs and at least
//! two 512-column tiles of `I`, each program takes its share of those tiles
//! (the first program the larger half) for both projections, as the
//! library's `shard_on_I`: it sums its partial expert outputs over the whole
//! of `H`, its half of the columns with the down bias, and at the end the
//! halves are exchanged and added. With a single `I` tile both programs
//! compute everything and each stores its half of the columns (the
//! library's sums are the same per token whether it then splits the tokens
//! or computes twice):
//!
//! ```text
//! xq, xs = quantize_mx(pre-shuffled hidden)         [128, H/512, T4]
//! aff = mask_expert_affinities                      [T, E_L]
//! for e in 0..E_L:
//!   for each tile of at most 256 tokens:
//!     gu = act(clamp(x @ W_gate[e][:, I_p]) + b_gate) · clamp(x @ W_up[e][:, I_p] + b_up)
//!     o = quantize_mx(gu) @ W_down[e][I_p, :]        [128, H/128, T4] bf16
//!     o[:, half_p, :] += b_down[e][half_p]          # bf16
//!     acc (+)= o · aff[:, e]                        # bf16, in expert order
//! (shard_on_I) acc[:, half_p] += the other program's acc[:, half_p]
//! output[:, half_p] = acc[:, half_p]ᵀ               # output dtype
//! ```
//!
//! As in the library the affinities always scale (`POST_SCALE` only), the
//! down bias is added per expert before its affinity, and the sums are
//! kept in bfloat16. The weights have the layouts of
//! [`selective_expert_mx_impl`](crate::moe::moe_tkg::selective_expert_mx_impl).
//! `hidden_input_scale` (the library takes it only with the input already
//! quantized in SBUF) is refused by name; the dynamic block strategy is
//! [`all_expert_mx_dynamic`](crate::moe::moe_tkg::all_expert_mx_dynamic).

pub use kernel::*;

/// The MX all-expert path.
#[nki::nki_module]
pub mod kernel {
    use crate::mlp::mlp_parameters::{H0, MLPActivationParameters, MLPQuantizationParameters, MLPTensors};
    use crate::mlp::mlp_tkg::down_projection_mx_shard_h::{down_projection_mx_tp_shard_h, load_down_bias_mx};
    use crate::mlp::mlp_tkg::mlp_tkg_constants::{PIPE_ID, PSUM_FMAX};
    use crate::mlp::mlp_tkg::mlp_tkg_mx::{gate_up_product_mx, layout_adapter_mx, quantize_hidden_mx, store_output_mx};
    use crate::mlp::mlp_tkg::projection_mx_constants::{MX_TILE, ProjConfig, proj_config};
    use crate::moe::moe_tkg::moe_tkg_affinity_masking::{T_TILE, mask_expert_affinities};
    use crate::moe::moe_tkg::moe_tkg_utils::{MoeTkgOptions, MoeTkgTensors, expert_id_tile, select_expert_row, weight_scales};
    use crate::moe::moe_tkg::selective_expert_mx_impl::{select_expert_scales_mx, select_expert_weights_mx};
    pub use crate::utils::common_types::{ExpertAffinityScaleMode, QuantizationType};
    use crate::utils::mx_layout::MX_PACK;
    use nki::prelude::*;

    /// The library's `AllExpertMXDimensions` as the static path uses them:
    /// this program's share of the 512-column tiles of `I`.
    #[nki_object]
    pub struct AllExpertMxDims {
        /// Whether the programs split the `I` tiles (two programs, at least
        /// two tiles); otherwise each program computes every tile.
        pub shard_on_i: bool,
        /// This program's first `I` tile.
        pub tile_start: i64,
        /// This program's `I` tiles.
        pub n_i512_tiles_local: i64,
        /// This program's first column of `I`.
        pub i_offset: i64,
        /// This program's columns of `I`.
        pub i_local: i64,
    }

    /// The `I` split of `i` columns on program `prg_id` of `n_prgs`: the
    /// first program takes `⌈tiles / 2⌉` tiles, the second the rest.
    #[nki_helper]
    pub fn all_expert_mx_dims(i: i64, n_prgs: i64, prg_id: i64) -> AllExpertMxDims {
        let total = i.div_ceil(MX_TILE);
        let shard_on_i = n_prgs > 1 && total >= n_prgs;
        let per = if shard_on_i { total.div_ceil(n_prgs) } else { total };
        let tile_start = if shard_on_i { prg_id * per } else { 0 };
        let n_local = per.min(total - tile_start);
        let i_offset = tile_start * MX_TILE;
        AllExpertMxDims { shard_on_i, tile_start, n_i512_tiles_local: n_local, i_offset, i_local: (i - i_offset).min(n_local * MX_TILE) }
    }

    /// This program's `I` tiles of one expert's weights and gate/up biases
    /// (the library's `load_gate_up_weight_scale_bias` and
    /// `load_broadcast_down_weight_scale_bias` slices).
    #[nki_helper]
    pub fn shard_expert_weights_i(ew: MLPTensors, d: AllExpertMxDims) -> MLPTensors {
        let (i0, i1) = (d.i_offset, d.i_offset + d.i_local);
        let (t0, t1) = (d.tile_start, d.tile_start + d.n_i512_tiles_local);
        let (gate_b, up_b) = (ew.gate_proj_bias_tensor, ew.up_proj_bias_tensor);
        let (mut gate_bias, mut up_bias) = (gate_b, up_b);
        if let Some(g) = gate_b {
            gate_bias = Some(g[s![.., t0..t1, ..]]);
        }
        if let Some(u) = up_b {
            up_bias = Some(u[s![.., t0..t1, ..]]);
        }
        MLPTensors {
            gate_proj_weights_tensor: ew.gate_proj_weights_tensor[s![.., .., i0..i1]],
            up_proj_weights_tensor: ew.up_proj_weights_tensor[s![.., .., i0..i1]],
            down_proj_weights_tensor: ew.down_proj_weights_tensor[s![.., t0..t1, ..]],
            normalization_weights_tensor: None,
            normalization_bias_tensor: None,
            gate_proj_bias_tensor: gate_bias,
            up_proj_bias_tensor: up_bias,
            down_proj_bias_tensor: None,
            fused_add_tensor: None,
        }
    }

    /// This program's `I` tiles of one expert's MX block scales (all three
    /// are checked given before the path runs).
    #[nki_helper]
    pub fn shard_expert_scales_i(q: MLPQuantizationParameters, d: AllExpertMxDims) -> MLPQuantizationParameters {
        let (i0, i1) = (d.i_offset, d.i_offset + d.i_local);
        let (t0, t1) = (d.tile_start, d.tile_start + d.n_i512_tiles_local);
        let mut out = q;
        let (gate, up, down) = (q.gate_w_scale, q.up_w_scale, q.down_w_scale);
        if let Some(g) = gate {
            if let Some(u) = up {
                if let Some(dn) = down {
                    let (gs, us) = (g[s![.., .., i0..i1]], u[s![.., .., i0..i1]]);
                    out = weight_scales(QuantizationType::MX, Some(gs), Some(us), Some(dn[s![.., t0..t1, ..]]));
                }
            }
        }
        out
    }

    /// This rank's masked affinities into `aff_hbm` `[T, E_L]` (the
    /// 128-token tiles of `mask_expert_affinities` stacked), for the
    /// per-expert broadcasts.
    #[nki_helper]
    pub fn masked_affinities_hbm(w: MoeTkgTensors, opts: MoeTkgOptions, rank_id: Hbm, aff_hbm: Hbm) {
        let [t, e_l] = aff_hbm.shape();
        let tiles = t.div_ceil(T_TILE);
        let aff = nl::ndarray([t.min(T_TILE), tiles, e_l], aff_hbm.dtype(), buffer = nl::sbuf);
        mask_expert_affinities(aff, w.expert_affinities, w.expert_index, rank_id, opts.mask_unselected_experts);
        for j in 0..tiles {
            let (t0, rows) = (j * T_TILE, (t - j * T_TILE).min(T_TILE));
            nisa::dma_copy(aff_hbm[s![t0..t0 + rows, ..]], aff[s![0..rows, j, ..]]);
        }
    }

    /// One expert's tensors as this program uses them (the library's
    /// `ExpertWeightsSBUF`): its `I` tiles of the weights, gate/up biases
    /// and block scales, and its down bias loaded in SBUF.
    #[nki_object]
    pub struct ExpertWeightsMx {
        /// This program's `I` tiles of the weights and gate/up biases.
        pub w: MLPTensors,
        /// Their MX block scales.
        pub q: MLPQuantizationParameters,
        /// The down weights' block scales (checked given).
        pub down_scale: Tensor,
        /// Whether the expert has a down bias (then in `down_bias_sb`).
        pub has_down_bias: bool,
        /// `[128, H/128/n, 1]`: this program's columns of the down bias.
        pub down_bias_sb: Tensor,
    }

    /// The library's `_load_expert`: expert `e`'s tensors on this
    /// program's `I` tiles `d`, its down bias into `b_sb` (the columns of
    /// `bias_cols`). `output` stands in for the down scales' view until
    /// they are read (they are checked present before the path runs).
    #[nki_helper]
    pub fn load_expert_mx(w: MoeTkgTensors, e: i64, d: AllExpertMxDims, bias_cols: ProjConfig, b_sb: Sbuf, output: Hbm) -> ExpertWeightsMx {
        let id = expert_id_tile(e);
        let ew = shard_expert_weights_i(select_expert_weights_mx(w, id), d);
        let q = shard_expert_scales_i(select_expert_scales_mx(w, id), d);
        let down_scale: Option<Hbm> = q.down_w_scale;
        let down_bias = w.expert_down_bias;
        if let Some(b) = down_bias {
            load_down_bias_mx(select_expert_row(b, id), b_sb[s![.., .., 0]], bias_cols);
        }
        ExpertWeightsMx { w: ew, q, down_scale: down_scale.unwrap_or(output), has_down_bias: down_bias.is_some(), down_bias_sb: b_sb }
    }

    /// The library's `_compute_expert_mlp` up to the affinity: the expert
    /// `ex` on the quantized tokens `xq`, `xs` `[128, H/512, T4]` (at most
    /// 256 of them) over its `i_local` columns of `I`, with its down bias on
    /// the columns of `bias_cols`: `[128, H/128, T4]` in bfloat16.
    #[nki_helper(target = "trn3")]
    pub fn compute_expert_mlp_mx(
        xq: Sbuf,
        xs: Sbuf,
        ex: ExpertWeightsMx,
        opts: MoeTkgOptions,
        i_local: i64,
        bias_cols: ProjConfig,
    ) -> Sbuf {
        let tile: ProjConfig = proj_config(bias_cols.h, i_local, xq.shape()[2], 1, 0);
        let gu = gate_up_product_mx(xq, xs, ex.w, ex.q, opts.act, nl::bfloat16, tile);
        let o = down_projection_mx_tp_shard_h(gu, ex.w.down_proj_weights_tensor, ex.down_scale, None, tile);
        if ex.has_down_bias {
            add_down_bias_shard(o, ex.down_bias_sb, bias_cols);
        }
        o
    }

    /// `o[:, cols, :] += b_sb` over the 128-column layout columns of
    /// `half` (`b_sb` `[128, H/128/n]` its shard of one expert's down bias,
    /// loaded once for all the expert's token tiles), in bfloat16 as the
    /// library adds its broadcast bias while evicting the PSUM.
    #[nki_helper]
    pub fn add_down_bias_shard(o: Sbuf, b_sb: Sbuf, half: ProjConfig) {
        let t = o.shape()[2];
        let c0 = half.prg_id * half.h1_sharded;
        let dst = o[s![.., c0..c0 + half.h1_sharded, ..]];
        nisa::tensor_tensor(dst, dst, b_sb.broadcast(2, t), nl::add);
    }

    /// `acc[:, :, t0..t0 + rows] (+)= o[:, :, ..rows] · a_bc[:, :, t0..t0 +
    /// rows]` in bfloat16 (the first expert writes, the others add).
    #[nki_helper]
    pub fn scale_and_accumulate(acc: Sbuf, o: Sbuf, a_bc: Sbuf, scaled: Sbuf, first: bool, t0: i64, rows: i64) {
        let dst = acc[s![.., .., t0..t0 + rows]];
        let (src, a) = (o[s![.., .., 0..rows]], a_bc[s![.., .., t0..t0 + rows]]);
        if first {
            nisa::tensor_tensor(dst, src, a, nl::multiply);
        } else {
            let sc = scaled[s![.., .., 0..rows]];
            nisa::tensor_tensor(sc, src, a, nl::multiply);
            nisa::tensor_tensor(dst, dst, sc, nl::add);
        }
    }

    /// The library's last-expert LNC reduction and spill: this program's
    /// half of the columns of `acc` `[128, H/128, T]`, plus (`shard_on_i`)
    /// the other program's sums of them, stored into `output`.
    #[nki_helper]
    pub fn reduce_and_store_output(acc: Sbuf, output: Hbm, t: i64, shard_on_i: bool, half: ProjConfig) {
        let hs = half.h1_sharded;
        let c0 = half.prg_id * hs;
        let mine = acc[s![.., c0..c0 + hs, ..]];
        if shard_on_i {
            let o0 = (1 - half.prg_id) * hs;
            let recv = nl::ndarray([H0, hs, t], nl::bfloat16, buffer = nl::sbuf);
            nisa::sendrecv(acc[s![.., o0..o0 + hs, ..]], recv, 1 - half.prg_id, 1 - half.prg_id, PIPE_ID);
            nisa::tensor_tensor(mine, mine, recv, nl::add);
        }
        store_output_mx(mine, output, t, half);
    }

    /// `output[t] = Σ_e affinity[t, e] · expert_e(hidden[t])` over every
    /// local expert with MX weights (module docs): the hidden rows `[T, H]`
    /// quantized here, then [`all_expert_mx_static`].
    #[nki_helper(target = "trn3")]
    pub fn _all_expert_moe_tkg_mx(w: MoeTkgTensors, opts: MoeTkgOptions, rank_id: Hbm, output: Hbm) {
        let x = w.hidden_input;
        let [t, h] = x.shape();
        let i = w.expert_gate_up_weights.shape()[4];
        let t4 = t.div_ceil(MX_PACK) * MX_PACK;
        let cfg: ProjConfig = proj_config(h, i, t4, 1, 0);
        let sw = layout_adapter_mx(x, false, None, 0.0, t, cfg);
        let xq = nl::ndarray([H0, cfg.n_h512_tile, t4], nl::float8_e4m3fn_x4, buffer = nl::sbuf);
        let xs = nl::ndarray([H0, cfg.n_h512_tile, t4], nl::uint8, buffer = nl::sbuf);
        quantize_hidden_mx(sw, xq, xs);
        all_expert_mx_static(w, opts, rank_id, xq, xs, output);
    }

    /// The library's `_all_expert_mx_static` on hidden rows already swizzled
    /// and quantized to MXFP8 (`xq`, `xs` `[128, H/512, T4]`, `T4` the
    /// tokens of `output` `[T, H]` padded to a multiple of 4, as
    /// `rmsnorm_mx_quantize_tkg` writes them for `moe_block_tkg`): every
    /// local expert on every token tile (module docs).
    #[nki_helper(target = "trn3")]
    pub fn all_expert_mx_static(w: MoeTkgTensors, opts: MoeTkgOptions, rank_id: Hbm, xq: Sbuf, xs: Sbuf, output: Hbm) {
        let [t, h] = output.shape();
        let t4 = xq.shape()[2];
        let [e_l, _, _, _, i] = w.expert_gate_up_weights.shape();
        let n = if nl::program_ndim() == 1 { nl::num_programs(0) } else { 1 };
        let pid = if n > 1 { nl::program_id(0) } else { 0 };
        // The library's gate/up token tile: a token's four packed values of
        // a 512-column tile of I, in one bfloat16 PSUM bank.
        let t_tile = 2 * PSUM_FMAX / MX_PACK;
        let d = all_expert_mx_dims(i, n, pid);
        // This program's half of the output columns (all of them on one).
        let half: ProjConfig = proj_config(h, i, t4, n, pid);
        let bias_cols = if d.shard_on_i { half } else { proj_config(h, i, t4, 1, 0) };
        let aff = nl::ndarray([t, e_l], w.expert_affinities.dtype(), buffer = nl::private_hbm);
        masked_affinities_hbm(w, opts, rank_id, aff);
        let h1 = h / H0;
        let a_bc = nl::ndarray([H0, h1, t], aff.dtype(), buffer = nl::sbuf);
        let scaled = nl::ndarray([H0, h1, t4.min(t_tile)], nl::bfloat16, buffer = nl::sbuf);
        let acc = nl::ndarray([H0, h1, t], nl::bfloat16, buffer = nl::sbuf);
        let b_sb = nl::ndarray([H0, bias_cols.h1_sharded, 1], nl::bfloat16, buffer = nl::sbuf);
        for e in 0..e_l {
            let ex = load_expert_mx(w, e, d, bias_cols, b_sb, output);
            // Token t's affinity along every partition and output tile.
            nisa::dma_copy(a_bc, aff.ap([[0, H0], [0, h1], [e_l, t]], offset = e));
            // `mlp_tkg_mx`'s projections load their weights on each call, so
            // each token tile loads the expert's again (the library loads
            // them once per expert); the sums are the same.
            for j in 0..t4.div_ceil(t_tile) {
                let t0 = j * t_tile;
                let tt = (t4 - t0).min(t_tile);
                let (xq_j, xs_j) = (xq[s![.., .., t0..t0 + tt]], xs[s![.., .., t0..t0 + tt]]);
                let o = compute_expert_mlp_mx(xq_j, xs_j, ex, opts, d.i_local, bias_cols);
                scale_and_accumulate(acc, o, a_bc, scaled, e == 0, t0, (t - t0).min(tt));
            }
        }
        reduce_and_store_output(acc, output, t, d.shard_on_i, half);
    }
}
