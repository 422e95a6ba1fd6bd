//! The decode path's down projection: the library's
//! `mlp_tkg_down_projection`, in either of its matmul arrangements (see the
//! module docs of [`mlp_tkg`](crate::mlp::mlp_tkg::mlp_tkg)), fp8
//! dequantization, bias and the store of this program's hidden shard.

pub use kernel::*;

/// The down phase.
#[nki::nki_module]
pub mod kernel {
    use crate::mlp::mlp_parameters::H0;
    use crate::mlp::mlp_tkg::mlp_tkg_constants::{DOWN_H_TILE, INTER_DTYPE, MLPTKGConstants, PSUM_BMAX, PSUM_FMAX, ProjectionWeights};
    use crate::mlp::mlp_tkg::mlp_tkg_utils::{evict_dequantized, load_static_scale, transpose_store};
    use nki::prelude::*;

    /// Hidden columns per weight load with down column tiling: 4096 (8192
    /// for fp8 weights) or the shard, halved until the load's 512-column
    /// chunks, `factor` to a PSUM bank, take at most 8 banks.
    #[nki_helper]
    pub fn down_h_tile(op: ProjectionWeights, dims: MLPTKGConstants) -> i64 {
        let w_scale = op.w_scale;
        let base = if w_scale.is_some() { 2 * DOWN_H_TILE } else { DOWN_H_TILE };
        let mut h_tile: i64 = base.min(dims.h_per_shard);
        // At most 8192 columns in 512-column chunks: two halvings suffice.
        for _ in 0..2 {
            if h_tile.div_ceil(PSUM_FMAX).div_ceil(dims.column_tiling_factor) > PSUM_BMAX {
                h_tile = h_tile.div_ceil(2);
            }
        }
        h_tile
    }

    /// Column tiling: `out` `[T, H/n]` (hidden's dtype) = this program's
    /// hidden columns of `gu[:, j, :]ᵀ @ W_down[tile j, :]` summed over the
    /// `I` tiles in order, `gu`'s tile `[128, T]` stationary and the
    /// weights moving in 512-column chunks; chunk `k` of a load lands in
    /// PSUM bank `k / factor`, rows `dim · (k % factor)`. Each chunk is read
    /// out times the fp8 scales (row `t` for token `t`; a `STATIC` scale
    /// loaded once for all chunks) and rounded, then the bias is added in
    /// hidden's dtype.
    #[nki_helper]
    pub fn down_projection(gu: Sbuf, op: ProjectionWeights, out: Sbuf, dims: MLPTKGConstants) {
        let (t, i, hs) = (dims.t, dims.i, dims.h_per_shard);
        let (dim, factor) = (dims.column_tiling_dim, dims.column_tiling_factor);
        let (w, c_shard, bias) = (op.weights, dims.shard_id * hs, op.bias);
        let h = w.shape()[1];
        let h_tile: i64 = down_h_tile(op, dims);
        let banks = h_tile.div_ceil(PSUM_FMAX).div_ceil(factor);
        let static_scale = load_static_scale(op, t);
        for ht in 0..hs.div_ceil(h_tile) {
            let h0 = ht * h_tile;
            let hsz = (hs - h0).min(h_tile);
            let psum = nl::ndarray([H0, banks, PSUM_FMAX], INTER_DTYPE, buffer = nl::psum);
            for it in 0..dims.i_tiles {
                let (i0, isz) = (it * H0, (i - it * H0).min(H0));
                let w_sb = nl::ndarray([H0, h_tile], w.dtype(), buffer = nl::sbuf);
                nisa::dma_copy(w_sb[s![0..isz, 0..hsz]], w.ap([[h, isz], [1, hsz]], offset = i0 * h + c_shard + h0));
                for k in 0..hsz.div_ceil(PSUM_FMAX) {
                    let (k0, ksz, r0) = (k * PSUM_FMAX, (hsz - k * PSUM_FMAX).min(PSUM_FMAX), dim * (k % factor));
                    nisa::nc_matmul(
                        psum[s![r0..r0 + t, k / factor, 0..ksz]],
                        gu[s![0..isz, it, ..]],
                        w_sb[s![0..isz, k0..k0 + ksz]],
                        tile_position = (0, r0),
                        tile_size = (H0, dim),
                    );
                }
            }
            for k in 0..hsz.div_ceil(PSUM_FMAX) {
                let (k0, ksz, r0) = (k * PSUM_FMAX, (hsz - k * PSUM_FMAX).min(PSUM_FMAX), dim * (k % factor));
                let (o, acc) = (out[s![.., h0 + k0..h0 + k0 + ksz]], psum[s![r0..r0 + t, k / factor, 0..ksz]]);
                evict_dequantized(o, acc, op, static_scale, c_shard + h0 + k0, h, 1);
            }
        }
        if let Some(b) = bias {
            let b_sb = nl::ndarray([t, hs], b.dtype(), buffer = nl::sbuf);
            nisa::dma_copy(b_sb, b[s![.., c_shard..c_shard + hs]].broadcast(0, t));
            nisa::tensor_tensor(out, out, b_sb, nl::add);
        }
    }

    /// Weights stationary: `out` `[128, H1s, T]` (hidden's dtype), element
    /// `(p, c, t)` the shard's hidden column `p · H1s + c`, = `Σ_j` over the
    /// `I` tiles in order of the weight tile `[128, 128]` (those columns;
    /// with `optimized_layout` stored contiguously, at `c · 128 + p`)
    /// stationary times `gu`'s tile `[128, T]` moving. Column `c` sums in
    /// PSUM bank `c / (512 / T)` at column `(c % (512 / T)) · T`; each bank
    /// is read out times the fp8 scales (row 0 of the `ROW` scales, hidden
    /// on the partitions; partition `p` of the `STATIC` ones, loaded once)
    /// and rounded, then the bias is added in hidden's dtype.
    #[nki_helper]
    pub fn down_projection_lhs_rhs_swap(gu: Sbuf, op: ProjectionWeights, out: Sbuf, optimized_layout: bool, dims: MLPTKGConstants) {
        let (t, i, hs, h1s) = (dims.t, dims.i, dims.h_per_shard, dims.h1_shard);
        let (w, c_shard, bias) = (op.weights, dims.shard_id * hs, op.bias);
        let h = w.shape()[1];
        let per_bank = PSUM_FMAX / t;
        let banks = h1s.div_ceil(per_bank);
        let psum = nl::ndarray([H0, banks, PSUM_FMAX], INTER_DTYPE, buffer = nl::psum);
        for it in 0..dims.i_tiles {
            let (i0, isz) = (it * H0, (i - it * H0).min(H0));
            let w_sb = nl::ndarray([H0, hs], w.dtype(), buffer = nl::sbuf);
            nisa::dma_copy(w_sb[s![0..isz, ..]], w.ap([[h, isz], [1, hs]], offset = i0 * h + c_shard));
            for c in 0..h1s {
                let (bank, col) = (c / per_bank, (c % per_bank) * t);
                let (dst, moving) = (psum[s![.., bank, col..col + t]], gu[s![0..isz, it, ..]]);
                if optimized_layout {
                    nisa::nc_matmul(dst, w_sb[s![0..isz, c * H0..(c + 1) * H0]], moving);
                } else {
                    nisa::nc_matmul(dst, w_sb.ap([[hs, isz], [h1s, H0]], offset = c), moving);
                }
            }
        }
        // Column c of the shard's layout sits at free offset c · T of out's
        // partitions, as in the banks: each bank is read out as one run.
        let static_scale = load_static_scale(op, H0);
        for bank in 0..banks {
            let (c0, n) = (bank * per_bank, (h1s - bank * per_bank).min(per_bank));
            let (o, acc) = (out.ap([[h1s * t, H0], [1, n * t]], offset = c0 * t), psum[s![.., bank, 0..n * t]]);
            evict_dequantized(o, acc, op, static_scale, c_shard + c0, h1s, t);
        }
        if let Some(b) = bias {
            let b_sb = nl::ndarray([H0, h1s, t], b.dtype(), buffer = nl::sbuf);
            nisa::dma_copy(b_sb, b.ap([[h1s, H0], [1, h1s], [0, t]], offset = c_shard));
            nisa::tensor_tensor(out, out, b_sb, nl::add);
        }
    }

    /// The down projection of `gu` `[128, I/128, T]` onto this program's
    /// hidden shard of `output` `[T, H]` (in its dtype, from hidden's). With
    /// down column tiling the sums land as `[T, H/n]` rows and are stored as
    /// they are; without it they land as `[128, H1s, T]` and are transposed
    /// on the way out ([`transpose_store`]). With `optimized_layout` (only
    /// without column tiling) the weights are stored `[I, n, H1s, 128]`.
    #[nki_helper]
    pub fn process_down_projection(gu: Sbuf, down: ProjectionWeights, output: Hbm, optimized_layout: bool, dims: MLPTKGConstants) {
        let (t, hs) = (dims.t, dims.h_per_shard);
        let c_shard = dims.shard_id * hs;
        if dims.down_column_tiling {
            let out = nl::ndarray([t, hs], gu.dtype(), buffer = nl::sbuf);
            down_projection(gu, down, out, dims);
            let cast = nl::ndarray([t, hs], output.dtype(), buffer = nl::sbuf);
            nisa::tensor_copy(cast, out);
            nisa::dma_copy(output[s![.., c_shard..c_shard + hs]], cast);
        } else {
            let out = nl::ndarray([H0, dims.h1_shard, t], gu.dtype(), buffer = nl::sbuf);
            down_projection_lhs_rhs_swap(gu, down, out, optimized_layout, dims);
            transpose_store(out, output, dims);
        }
    }
}
