//! The decode path's gate and up projections: the library's
//! `mlp_tkg_gate_up_projection`, in either of its matmul arrangements (see
//! the module docs of [`mlp_tkg`](crate::mlp::mlp_tkg::mlp_tkg)), the partial
//! sums of two programs exchanged, fp8 dequantization, bias, clamps and the
//! gated activation.

pub use kernel::*;

/// The gate/up phase.
#[nki::nki_module]
pub mod kernel {
    use crate::mlp::mlp_parameters::{H0, MLPActivationParameters};
    use crate::mlp::mlp_tkg::mlp_tkg_constants::{
        GATE_UP_H_TILE_COLS, INTER_DTYPE, MAX_I_SHARD_COLUMN_TILING, MAX_I_SHARD_LHS_RHS_SWAP, MLPTKGConstants, PIPE_ID, PSUM_FMAX,
        ProjectionWeights,
    };
    use crate::mlp::mlp_tkg::mlp_tkg_utils::{evict_dequantized, load_static_scale};
    pub use crate::utils::common_types::ActFnType;
    use crate::utils::kernel_helpers::{ClampLimits, apply_activation, clamp};
    use nki::prelude::*;

    /// Layout columns of one weight load: 2048 hidden rows, 4096 of fp8
    /// weights.
    #[nki_helper]
    pub fn gate_up_h_tile_cols(op: ProjectionWeights) -> i64 {
        let w_scale = op.w_scale;
        if w_scale.is_some() { 2 * GATE_UP_H_TILE_COLS } else { GATE_UP_H_TILE_COLS }
    }

    /// Load `ht` of the weight rows of this program's shard, `I` columns `i0
    /// .. i0 + isz`: its layout columns `c0 .. c0 + nc` (`cols` =
    /// [`gate_up_h_tile_cols`] a load, fewer in the last) into `w_sb`
    /// `[128, cols, isz]` (row `p` of the shard's layout at partition `p`).
    /// Returns `(w_sb, c0, nc)`.
    #[nki_helper]
    pub fn load_gate_up_weights(op: ProjectionWeights, ht: i64, i0: i64, isz: i64, dims: MLPTKGConstants) -> (Sbuf, i64, i64) {
        let (i, h1s, w) = (dims.i, dims.h1_shard, op.weights);
        let cols: i64 = gate_up_h_tile_cols(op);
        let c0 = ht * cols;
        let nc = (h1s - c0).min(cols);
        let row0 = dims.shard_id * dims.h_per_shard;
        let w_sb = nl::ndarray([H0, cols, isz], w.dtype(), buffer = nl::sbuf);
        nisa::dma_copy(w_sb[s![.., 0..nc, ..]], w.ap([[h1s * i, H0], [i, nc], [1, isz]], offset = (row0 + c0) * i + i0));
        (w_sb, c0, nc)
    }

    /// Column tiling: `dst[:, i0 .. i0 + isz]` `[T, I]` (fp32) = this
    /// program's partial projection, the hidden tile `[128, T]` stationary
    /// and the weights moving in 512-column chunks. Layout column `c` lands
    /// in array tile `c % factor` (PSUM rows `dim · (c % factor)`); each
    /// tile's sums are in column order, then tile 0 is copied out and the
    /// others added in order. Then the fp8 scales and (program 0 only: the
    /// exchange adds the other program's sums) the bias.
    #[nki_helper]
    pub fn gate_up_projection(x_sb: Sbuf, op: ProjectionWeights, dst: Sbuf, i0: i64, isz: i64, dims: MLPTKGConstants) {
        let (t, h1s) = (dims.t, dims.h1_shard);
        let (dim, factor) = (dims.column_tiling_dim, dims.column_tiling_factor);
        let chunks = isz.div_ceil(PSUM_FMAX);
        let psum = nl::ndarray([H0, chunks, PSUM_FMAX], INTER_DTYPE, buffer = nl::psum);
        for ht in 0..h1s.div_ceil(gate_up_h_tile_cols(op)) {
            let (w_sb, c0, nc): (Sbuf, i64, i64) = load_gate_up_weights(op, ht, i0, isz, dims);
            for g in 0..nc.div_ceil(factor) {
                for k in 0..(nc - g * factor).min(factor) {
                    let (c, r0) = (g * factor + k, dim * k);
                    for ch in 0..chunks {
                        let (j0, jsz) = (ch * PSUM_FMAX, (isz - ch * PSUM_FMAX).min(PSUM_FMAX));
                        nisa::nc_matmul(
                            psum[s![r0..r0 + t, ch, 0..jsz]],
                            x_sb[s![.., .., c0 + c]],
                            w_sb[s![.., c, j0..j0 + jsz]],
                            tile_position = (0, r0),
                            tile_size = (H0, dim),
                        );
                    }
                }
            }
        }
        let o = dst[s![.., i0..i0 + isz]];
        for ch in 0..chunks {
            let (j0, jsz) = (ch * PSUM_FMAX, (isz - ch * PSUM_FMAX).min(PSUM_FMAX));
            let oc = dst[s![.., i0 + j0..i0 + j0 + jsz]];
            nisa::tensor_copy(oc, psum[s![0..t, ch, 0..jsz]]);
            for k in 1..h1s.min(factor) {
                nisa::tensor_tensor(oc, psum[s![dim * k..dim * k + t, ch, 0..jsz]], oc, nl::add);
            }
        }
        // The sums are in `o` already: dequantized in place (token t reads
        // row t of the scales).
        if op.w_scale.is_some() {
            evict_dequantized(o, o, op, load_static_scale(op, t), i0, dims.i, 1);
        }
        let bias = op.bias;
        if let Some(b) = bias {
            if dims.shard_id == 0 {
                let b_sb = nl::ndarray([t, isz], b.dtype(), buffer = nl::sbuf);
                nisa::dma_copy(b_sb, b[s![.., i0..i0 + isz]].broadcast(0, t));
                nisa::tensor_tensor(o, o, b_sb, nl::add);
            }
        }
    }

    /// Weights stationary: `dst[:, i0/128 + j, :]` `[128, I/128, T]` (fp32)
    /// = this program's partial projection of 128-column tile `j` of `I`
    /// columns `i0 .. i0 + isz`, the weight tile `[128, 128]` stationary and
    /// the hidden tile `[128, T]` moving, summed over the layout columns in
    /// order in one PSUM bank per tile, read out times the fp8 scales (row 0
    /// of the `ROW` scales, `I` on the partitions; partition `p` of the
    /// `STATIC` ones); then (program 0 only) the bias.
    #[nki_helper]
    pub fn gate_up_projection_lhs_rhs_swap(x_sb: Sbuf, op: ProjectionWeights, dst: Sbuf, i0: i64, isz: i64, dims: MLPTKGConstants) {
        let (t, h1s, bias) = (dims.t, dims.h1_shard, op.bias);
        let (tiles, tile0) = (isz.div_ceil(H0), i0 / H0);
        let psum = nl::ndarray([H0, tiles, PSUM_FMAX], INTER_DTYPE, buffer = nl::psum);
        for ht in 0..h1s.div_ceil(gate_up_h_tile_cols(op)) {
            let (w_sb, c0, nc): (Sbuf, i64, i64) = load_gate_up_weights(op, ht, i0, isz, dims);
            for c in 0..nc {
                for j in 0..tiles {
                    let (j0, jsz) = (j * H0, (isz - j * H0).min(H0));
                    nisa::nc_matmul(psum[s![0..jsz, j, 0..t]], w_sb[s![.., c, j0..j0 + jsz]], x_sb[s![.., .., c0 + c]]);
                }
            }
        }
        let static_scale = load_static_scale(op, H0);
        for j in 0..tiles {
            let (j0, jsz) = (j * H0, (isz - j * H0).min(H0));
            let (o, acc) = (dst[s![0..jsz, tile0 + j, ..]], psum[s![0..jsz, j, 0..t]]);
            evict_dequantized(o, acc, op, static_scale, i0 + j0, 1, t);
            if let Some(b) = bias {
                if dims.shard_id == 0 {
                    let b_sb = nl::ndarray([H0, 1], b.dtype(), buffer = nl::sbuf);
                    nisa::dma_copy(b_sb[s![0..jsz, ..]], b.ap([[1, jsz], [1, 1]], offset = i0 + j0));
                    nisa::tensor_scalar(o, o, nl::add, b_sb[s![0..jsz, ..]]);
                }
            }
        }
    }

    /// With two programs, adds the other program's partial sums to `p`
    /// (fp32), as it adds this one's.
    #[nki_helper]
    pub fn exchange_partial_sums(p: Sbuf, dims: MLPTKGConstants) {
        if dims.num_shards > 1 {
            let other = 1 - dims.shard_id;
            let remote = nl::ndarray(p.shape(), INTER_DTYPE, buffer = nl::sbuf);
            nisa::sendrecv(p, remote, other, other, PIPE_ID);
            nisa::tensor_tensor(p, p, remote, nl::add);
        }
    }

    /// The gated activation in fp32: `up = act(clamp(up))` with
    /// `skip_gate_proj`, else `dst = act(clamp(gate)) · clamp(up)`.
    #[nki_helper]
    pub fn gated_activation(gate: Sbuf, up: Sbuf, dst: Sbuf, act: MLPActivationParameters) {
        let c = act.clamps;
        if act.skip_gate_proj {
            clamp(up, c.up_clamp_upper_limit, c.up_clamp_lower_limit);
            apply_activation(up, up, act.activation_fn);
        } else {
            clamp(gate, c.gate_clamp_upper_limit, c.gate_clamp_lower_limit);
            apply_activation(gate, gate, act.activation_fn);
            clamp(up, c.up_clamp_upper_limit, c.up_clamp_lower_limit);
            nisa::tensor_tensor(dst, gate, up, nl::multiply);
        }
    }

    /// `gu[:, j, :]` `[128, I/128, T]` (its dtype) = the `[T, 128]` column
    /// tiles of `src` `[T, I]` (fp32) transposed on the PE array (exactly),
    /// then rounded.
    #[nki_helper]
    pub fn transpose_gated_product(src: Sbuf, gu: Sbuf, dims: MLPTKGConstants) {
        for j in 0..dims.i_tiles {
            let (j0, jsz) = (j * H0, (dims.i - j * H0).min(H0));
            let tp = nl::ndarray([H0, dims.t], INTER_DTYPE, buffer = nl::psum);
            nisa::nc_transpose(tp[s![0..jsz, ..]], src[s![.., j0..j0 + jsz]]);
            nisa::tensor_copy(gu[s![0..jsz, j, ..]], tp[s![0..jsz, ..]]);
        }
    }

    /// The gate and up projections of `x_sb` `[128, T, H1s]` and their gated
    /// activation into `gu` `[128, I/128, T]` (its dtype): `act(clamp(gate))
    /// · clamp(up)`, or `act(clamp(up))` with `skip_gate_proj`, the sums in
    /// fp32. With gate/up column tiling the projections land as `[T, I]`
    /// rows side by side in one buffer (one exchange carries both) and the
    /// product is transposed into `gu`; without it they land as `gu`'s
    /// layout, exchanged one after the other. `I` is covered in shards of
    /// at most 4096 (column tiling) or 1024 columns, the PSUM banks of one
    /// call.
    #[nki_helper]
    pub fn process_gate_up_projection(
        x_sb: Sbuf,
        gate: ProjectionWeights,
        up: ProjectionWeights,
        gu: Sbuf,
        act: MLPActivationParameters,
        dims: MLPTKGConstants,
    ) {
        let (t, i) = (dims.t, dims.i);
        let skip = act.skip_gate_proj;
        let tiling = dims.gate_up_column_tiling;
        let max_shard = if tiling { MAX_I_SHARD_COLUMN_TILING } else { MAX_I_SHARD_LHS_RHS_SWAP };
        let n = if skip { 1 } else { 2 };
        if tiling {
            let sums = nl::ndarray([t, n * i], INTER_DTYPE, buffer = nl::sbuf);
            let (gate_sb, up_sb) = (sums[s![.., 0..i]], sums[s![.., (n - 1) * i..n * i]]);
            for sh in 0..i.div_ceil(max_shard) {
                let (i0, isz) = (sh * max_shard, (i - sh * max_shard).min(max_shard));
                if !skip {
                    gate_up_projection(x_sb, gate, gate_sb, i0, isz, dims);
                }
                gate_up_projection(x_sb, up, up_sb, i0, isz, dims);
            }
            exchange_partial_sums(sums, dims);
            gated_activation(gate_sb, up_sb, up_sb, act);
            transpose_gated_product(up_sb, gu, dims);
        } else {
            // Zeroed so the rows past I in the last tile (exchanged whole)
            // hold no stale values.
            let sums = nl::ndarray([H0, n * dims.i_tiles, t], INTER_DTYPE, buffer = nl::sbuf);
            nisa::memset(sums, 0.0);
            let (gate_sb, up_sb) = (sums[s![.., 0..dims.i_tiles, ..]], sums[s![.., (n - 1) * dims.i_tiles..n * dims.i_tiles, ..]]);
            for sh in 0..i.div_ceil(max_shard) {
                let (i0, isz) = (sh * max_shard, (i - sh * max_shard).min(max_shard));
                if !skip {
                    gate_up_projection_lhs_rhs_swap(x_sb, gate, gate_sb, i0, isz, dims);
                }
                gate_up_projection_lhs_rhs_swap(x_sb, up, up_sb, i0, isz, dims);
            }
            if !skip {
                exchange_partial_sums(gate_sb, dims);
            }
            exchange_partial_sums(up_sb, dims);
            gated_activation(gate_sb, up_sb, gu, act);
            if skip {
                nisa::tensor_copy(gu, up_sb);
            }
        }
    }
}
