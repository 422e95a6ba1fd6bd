//! The MX down projection with the hidden dim sharded over the programs: the
//! library's `down_projection_mx_shard_H` (its decode form,
//! `down_projection_mx_tp_shard_H`). The gated product is quantized on chip
//! to MXFP8; each 128-column tile of this program's hidden shard takes the
//! weights stationary and the product moving, landing as `[128, T]`. The
//! context-encoding form (`down_projection_mx_shard_H`) takes the product
//! stationary instead, 128 tokens a tile, landing with the tokens on the
//! partitions.

pub use kernel::*;

/// The down projection.
#[nki::nki_module]
pub mod kernel {
    use crate::mlp::mlp_parameters::H0;
    use crate::mlp::mlp_tkg::mlp_tkg_constants::PSUM_FMAX;
    use crate::mlp::mlp_tkg::projection_mx_constants::ProjConfig;
    use crate::utils::mx_layout::{MX_GROUP_PARTITIONS, load_mx_scales_strided};
    use crate::utils::stream_shuffle_broadcast::stream_shuffle_broadcast;
    use nki::prelude::*;

    /// This program's columns of `weight` `[I_p, I/512, H]` (`I_p = I / 4`
    /// below 512 columns, else 128; packed along `I`) into `w_sb` `[128,
    /// I/512, H/n]`, and their scales (`scale` `[I_p/8, I/512, H]`) into
    /// `ws_sb`, each tile's in its quadrants. Without 128 rows the last
    /// tile's missing rows and their scales are zero.
    #[nki_helper]
    pub fn load_down_weights_mx(weight: Hbm, scale: Hbm, w_sb: Sbuf, ws_sb: Sbuf, cfg: ProjConfig) {
        let (rows, n_i) = (weight.shape()[0], cfg.n_total_i512_tile);
        let (c0, hs) = (cfg.prg_id * cfg.h_sharded, cfg.h_sharded);
        if rows < H0 {
            nisa::memset(w_sb[s![.., n_i - 1, ..]], 0.0);
            nisa::memset(ws_sb[s![.., n_i - 1, ..]], 0.0);
        }
        nisa::dma_copy(w_sb[s![0..rows, .., ..]], weight[s![.., .., c0..c0 + hs]]);
        for it in 0..n_i {
            load_mx_scales_strided(ws_sb[s![.., it, ..]], scale[s![.., it, c0..c0 + hs]], rows / MX_GROUP_PARTITIONS);
        }
    }

    /// This program's columns of the bias `[1, H]` into `b_sb` `[128, H1s]`
    /// (column `c·128 + p` of the shard at `(p, c)`), one activation bias
    /// per partition of each output tile.
    #[nki_helper]
    pub fn load_down_bias_mx(bias: Hbm, b_sb: Sbuf, cfg: ProjConfig) {
        nisa::dma_copy(b_sb, bias.ap([[1, H0], [H0, cfg.h1_sharded]], offset = cfg.prg_id * cfg.h_sharded));
    }

    /// The down projection of `inter_sb` `[128, I/512, T, 4]` (the gate/up
    /// layout) by `weight` into this program's `[128, H1s, T]` bfloat16
    /// (column `c·128 + p` of the shard at `(p, c)`): the product quantized
    /// to MXFP8, each output tile summed in bfloat16 PSUM over the `I` tiles,
    /// copied out with the bias added.
    #[nki_helper(target = "trn3")]
    pub fn down_projection_mx_tp_shard_h(inter_sb: Sbuf, weight: Hbm, scale: Hbm, bias: Option<Hbm>, cfg: ProjConfig) -> Sbuf {
        let (n_i, t) = (cfg.n_total_i512_tile, cfg.bxs);
        let (iq, iscale) = quantize_inter_mx(inter_sb);
        let w_sb = nl::ndarray([H0, n_i, cfg.h_sharded], weight.dtype(), buffer = nl::sbuf);
        let ws_sb = nl::ndarray([H0, n_i, cfg.h_sharded], nl::uint8, buffer = nl::sbuf);
        load_down_weights_mx(weight, scale, w_sb, ws_sb, cfg);
        let b_sb = nl::ndarray([H0, cfg.h1_sharded], nl::bfloat16, buffer = nl::sbuf);
        if let Some(b) = bias {
            load_down_bias_mx(b, b_sb, cfg);
        }
        let out_sb = nl::ndarray([H0, cfg.h1_sharded, t], nl::bfloat16, buffer = nl::sbuf);
        for h1 in 0..cfg.h1_sharded {
            let psum = nl::ndarray([H0, t], nl::bfloat16, buffer = nl::psum);
            let (c0, c1) = (h1 * H0, (h1 + 1) * H0);
            for it in 0..n_i {
                nisa::nc_matmul_mx(psum, w_sb[s![.., it, c0..c1]], iq[s![.., it, ..]], ws_sb[s![.., it, c0..c1]], iscale[s![.., it, ..]]);
            }
            if bias.is_some() {
                nisa::activation(out_sb[s![.., h1, ..]], nl::copy, psum, bias = b_sb[s![.., h1..h1 + 1]]);
            } else {
                nisa::activation(out_sb[s![.., h1, ..]], nl::copy, psum);
            }
        }
        out_sb
    }

    /// `inter_sb` `[128, I/512, T, 4]` quantized to MXFP8 on chip: the
    /// packed values and their scales, `[128, I/512, T]` each.
    #[nki_helper(target = "trn3")]
    pub fn quantize_inter_mx(inter_sb: Sbuf) -> (Sbuf, Sbuf) {
        let [_, n_i, t, _] = inter_sb.shape();
        let iq = nl::ndarray([H0, n_i, t], nl::float8_e4m3fn_x4, buffer = nl::sbuf);
        let iscale = nl::ndarray([H0, n_i, t], nl::uint8, buffer = nl::sbuf);
        nisa::quantize_mx(iq, inter_sb, iscale);
        (iq, iscale)
    }

    /// The context-encoding down projection (the library's
    /// `down_projection_mx_shard_H`, on one program) of `inter_sb` `[128,
    /// I/512, T, 4]` by the weights in SBUF (`w_sb`/`ws_sb` `[128, I/512,
    /// H]`, rows past `I_p` and their scales zero) into `[128, T/128, H]`
    /// bfloat16, token `128·b + p` at `(p, b)`: the product quantized to
    /// MXFP8 and taken stationary, 128 tokens by 1024 columns (512 when `H`
    /// is not a multiple of 1024) a bfloat16 PSUM bank summed over the `I`
    /// tiles, plus `bias_sb` `[1, H]` broadcast to the partitions when given.
    #[nki_helper(target = "trn3")]
    pub fn down_projection_mx_shard_h(inter_sb: Sbuf, w_sb: Sbuf, ws_sb: Sbuf, bias_sb: Option<Sbuf>, cfg: ProjConfig) -> Sbuf {
        assert!(cfg.n_prgs == 1, "down_projection_mx_shard_H: runs on one program here, got {}", cfg.n_prgs);
        let (n_i, t, h) = (cfg.n_total_i512_tile, cfg.bxs, cfg.h);
        let (iq, iscale) = quantize_inter_mx(inter_sb);
        let mut bias_b: Option<Sbuf> = None;
        if let Some(b) = bias_sb {
            let rows = nl::ndarray([H0, h], b.dtype(), buffer = nl::sbuf);
            stream_shuffle_broadcast(b, rows);
            bias_b = Some(rows);
        }
        let h_tile = if h % (2 * PSUM_FMAX) == 0 { 2 * PSUM_FMAX } else { PSUM_FMAX };
        let n_bt = t.div_ceil(H0);
        let out_sb = nl::ndarray([H0, n_bt, h], nl::bfloat16, buffer = nl::sbuf);
        for ht in 0..h / h_tile {
            let c0 = ht * h_tile;
            for bt in 0..n_bt {
                let b0 = bt * H0;
                let rows = H0.min(t - b0);
                let psum = nl::ndarray([rows, h_tile], nl::bfloat16, buffer = nl::psum);
                for it in 0..n_i {
                    let (st, st_s) = (iq[s![.., it, b0..b0 + rows]], iscale[s![.., it, b0..b0 + rows]]);
                    nisa::nc_matmul_mx(psum, st, w_sb[s![.., it, c0..c0 + h_tile]], st_s, ws_sb[s![.., it, c0..c0 + h_tile]]);
                }
                let dst = out_sb[s![0..rows, bt, c0..c0 + h_tile]];
                if let Some(b) = bias_b {
                    nisa::tensor_tensor(dst, psum, b[s![0..rows, c0..c0 + h_tile]], nl::add);
                } else {
                    nisa::tensor_copy(dst, psum);
                }
            }
        }
        out_sb
    }
}
