//! The MX gate/up projection with the hidden dim sharded over the programs:
//! the library's `gate_up_projection_mx_shard_H`. The weights are stationary,
//! the quantized hidden rows moving, so the product lands transposed (`I`
//! on the partitions) in the layout `quantize_mx` reads for the down
//! projection.

pub use kernel::*;

/// The gate/up projection.
#[nki::nki_module]
pub mod kernel {
    use crate::mlp::mlp_parameters::H0;
    use crate::mlp::mlp_tkg::mlp_tkg_constants::PIPE_ID;
    use crate::mlp::mlp_tkg::projection_mx_constants::{GROUPS_PER_MX_TILE, MX_TILE, ProjConfig};
    use crate::utils::mx_layout::{MX_PACK, load_mx_scales_strided};
    use nki::prelude::*;

    /// This program's MX tiles of `weight` `[128, H/512, I]` into `w_sb`
    /// and their scales (`scale` `[16, H/512, I]`) into `ws_sb`, each
    /// tile's in its quadrants.
    #[nki_helper]
    pub fn load_gate_up_weights_mx(weight: Hbm, scale: Hbm, w_sb: Sbuf, ws_sb: Sbuf, cfg: ProjConfig) {
        let (n, t0) = (cfg.n_h512_tile_sharded, cfg.prg_id * cfg.n_h512_tile_sharded);
        nisa::dma_copy(w_sb, weight[s![.., t0..t0 + n, ..]]);
        for t in 0..n {
            load_mx_scales_strided(ws_sb[s![.., t, ..]], scale[s![.., t0 + t, ..]], GROUPS_PER_MX_TILE);
        }
    }

    /// The bias `[I_p, I/512, 4]` (`I_p = I / 4` below 512 columns, else
    /// 128) into `b_sb` `[128, I/512, 4]`, the rows past `I_p` zero.
    #[nki_helper]
    pub fn load_gate_up_bias_mx(bias: Hbm, b_sb: Sbuf) {
        let rows = bias.shape()[0];
        if rows < H0 {
            nisa::memset(b_sb, 0.0);
        }
        nisa::dma_copy(b_sb[s![0..rows, .., ..]], bias);
    }

    /// Tokens of one gate/up PSUM tile: a bank of bfloat16 holds `4 · 256`.
    pub const BXS_TILE_SIZE: i64 = 256;

    /// The projection of the quantized hidden rows `xq`/`xs` `[128, H/512/n,
    /// T]` by `weight` (`[128, H/512, I]` packed along `H`, scales `[16,
    /// H/512, I]`): this program's MX tiles loaded, then
    /// [`gate_up_projection_mx_sb`] with the bias on program 0.
    #[nki_helper(target = "trn3")]
    pub fn gate_up_projection_mx_tp_shard_h(xq: Sbuf, xs: Sbuf, weight: Hbm, scale: Hbm, bias: Option<Hbm>, cfg: ProjConfig) -> Sbuf {
        let (i, n) = (cfg.i, cfg.n_h512_tile_sharded);
        let w_sb = nl::ndarray([H0, n, i], weight.dtype(), buffer = nl::sbuf);
        let ws_sb = nl::ndarray([H0, n, i], nl::uint8, buffer = nl::sbuf);
        load_gate_up_weights_mx(weight, scale, w_sb, ws_sb, cfg);
        let mut b_sb: Option<Sbuf> = None;
        if let Some(b) = bias {
            if cfg.prg_id == 0 {
                let loaded = nl::ndarray([H0, cfg.n_total_i512_tile, MX_PACK], nl::bfloat16, buffer = nl::sbuf);
                load_gate_up_bias_mx(b, loaded);
                b_sb = Some(loaded);
            }
        }
        gate_up_projection_mx_sb(xq, xs, w_sb, ws_sb, b_sb, cfg)
    }

    /// The projection of `xq`/`xs` `[128, H/512/n, T]` by this program's
    /// weights in SBUF (`w_sb`/`ws_sb` `[128, H/512/n, I]`, scales in their
    /// quadrants) into `[128, I/512, T, 4]` bfloat16: element `(p, it, t,
    /// j)` is column `it·512 + j·w/4 + p` of token `t` (`w` the tile's
    /// columns), summed in bfloat16 PSUM over this program's MX tiles (256
    /// tokens a bank), plus `b_sb` `[128, I/512, 4]` when given (program 0
    /// only), plus the other program's partial sums. Rows past `w/4` of a
    /// partial last tile are zero (the library leaves them unwritten; the
    /// down weights' zero rows cancel whatever they hold).
    #[nki_helper(target = "trn3")]
    pub fn gate_up_projection_mx_sb(xq: Sbuf, xs: Sbuf, w_sb: Sbuf, ws_sb: Sbuf, b_sb: Option<Sbuf>, cfg: ProjConfig) -> Sbuf {
        let (i, t, n) = (cfg.i, cfg.bxs, cfg.n_h512_tile_sharded);
        let out_sb = nl::ndarray([H0, cfg.n_total_i512_tile, t, MX_PACK], nl::bfloat16, buffer = nl::sbuf);
        nisa::memset(out_sb, 0.0);
        for bt in 0..t.div_ceil(BXS_TILE_SIZE) {
            let b0 = bt * BXS_TILE_SIZE;
            let bn = BXS_TILE_SIZE.min(t - b0);
            for it in 0..cfg.n_total_i512_tile {
                let rows = (i - it * MX_TILE).min(MX_TILE) / MX_PACK;
                let psum = nl::ndarray([H0, MX_PACK, bn], nl::bfloat16, buffer = nl::psum);
                for th in 0..n {
                    for j in 0..MX_PACK {
                        let c0 = it * MX_TILE + j * rows;
                        nisa::nc_matmul_mx(
                            psum[s![0..rows, j, ..]],
                            w_sb[s![.., th, c0..c0 + rows]],
                            xq[s![.., th, b0..b0 + bn]],
                            ws_sb[s![.., th, c0..c0 + rows]],
                            xs[s![.., th, b0..b0 + bn]],
                        );
                    }
                }
                let sums = psum[s![0..rows, .., ..]].permute([0, 2, 1]);
                let dst = out_sb[s![0..rows, it, b0..b0 + bn, ..]];
                if let Some(b) = b_sb {
                    nisa::tensor_tensor(dst, sums, b[s![0..rows, it..it + 1, ..]].broadcast(1, bn), nl::add);
                } else {
                    nisa::tensor_copy(dst, sums);
                }
            }
        }
        if cfg.n_prgs > 1 {
            let other = 1 - cfg.prg_id;
            let recv = nl::ndarray([H0, cfg.n_total_i512_tile, t, MX_PACK], nl::bfloat16, buffer = nl::sbuf);
            nisa::sendrecv(out_sb, recv, other, other, PIPE_ID);
            nisa::tensor_tensor(out_sb, out_sb, recv, nl::add);
        }
        out_sb
    }
}
