//! The decode path's down projection: the library's
//! `mlp_tkg_down_projection`, the gated product stationary, 512-column chunks
//! of this program's hidden shard, fp8 dequantization, bias and output cast.

pub use kernel::*;

/// The down phase.
#[nki::nki_module]
pub mod kernel {
    use crate::mlp::mlp_parameters::{H0, MLPQuantizationParameters};
    use crate::mlp::mlp_tkg::mlp_tkg_constants::{INTER_DTYPE, MLPTKGConstants, PSUM_FMAX};
    pub use crate::utils::common_types::QuantizationType;
    use nki::prelude::*;

    /// The dequantization scales of output columns `c0 .. c0 + cols` for the
    /// `t` token rows, `[T, 512]` fp32: `w_scale[t, c]` (`ROW`) or
    /// `w_scale[t, 0]` (`STATIC`, broadcast along the row).
    #[nki_helper]
    pub fn load_down_scales(w_scale: Hbm, row: bool, t: i64, c0: i64, cols: i64) -> Sbuf {
        let scale_sb = nl::ndarray([t, PSUM_FMAX], w_scale.dtype(), buffer = nl::sbuf);
        if row {
            nisa::dma_copy(scale_sb[s![.., 0..cols]], w_scale[s![0..t, c0..c0 + cols]]);
        } else {
            nisa::dma_copy(scale_sb[s![.., 0..cols]], w_scale.ap([[1, t], [0, cols]], offset = 0));
        }
        scale_sb
    }

    /// The down projection of `gu` onto this program's hidden shard of
    /// `output` `[T, H]`: per chunk of up to 512 columns, `Σ_i gu[:, i, :]ᵀ @
    /// W_down[I tile, chunk]` in PSUM, times the fp8 weights' dequantization
    /// scales when `quant` has them, rounded to hidden's dtype, plus the bias
    /// (in that dtype, as the library adds it), then cast to the output's
    /// dtype. With `optimized_layout` the weight is stored `[I, n, H1s, 128]`
    /// (logical column `k·H/n + p·H1s + c` at `k·H/n + c·128 + p`): a chunk
    /// is whole runs of `H1s` columns, gathered by a 3-level access pattern.
    #[nki_helper]
    pub fn process_down_projection(
        gu: Sbuf,
        down_w: Hbm,
        down_b: Option<Hbm>,
        output: Hbm,
        optimized_layout: bool,
        quant: MLPQuantizationParameters,
        dims: MLPTKGConstants,
    ) {
        let row = quant.quantization_type == QuantizationType::ROW;
        let down_w_scale = quant.down_w_scale;
        let (t, i, h, h2) = (dims.t, dims.i, dims.h, dims.h1_shard);
        let c_shard = dims.shard_id * dims.h_per_shard;
        let chunk = if optimized_layout { PSUM_FMAX / h2 * h2 } else { PSUM_FMAX };
        for ch in nl::affine_range(dims.h_per_shard.div_ceil(chunk)) {
            let c0 = c_shard + ch * chunk;
            let cols = (c_shard + dims.h_per_shard - c0).min(chunk);
            let acc = nl::ndarray([t, PSUM_FMAX], INTER_DTYPE, buffer = nl::psum);
            for it in nl::sequential_range(dims.i_tiles) {
                let i0 = it * H0;
                let isz = (i - i0).min(H0);
                let w_sb = nl::ndarray([H0, PSUM_FMAX], down_w.dtype(), buffer = nl::sbuf);
                if optimized_layout {
                    let (p0, runs) = (ch * chunk / h2, cols / h2);
                    nisa::dma_copy(
                        w_sb.ap([[PSUM_FMAX, isz], [h2, runs], [1, h2]]),
                        down_w.ap([[h, isz], [1, runs], [H0, h2]], offset = i0 * h + c_shard + p0),
                    );
                } else {
                    nisa::dma_copy(w_sb[s![0..isz, 0..cols]], down_w.ap([[h, isz], [1, cols]], offset = i0 * h + c0));
                }
                nisa::nc_matmul(acc[s![.., 0..cols]], gu[s![0..isz, it, ..]], w_sb[s![0..isz, 0..cols]]);
            }
            let o = nl::ndarray([t, PSUM_FMAX], gu.dtype(), buffer = nl::sbuf);
            if let Some(w_scale) = down_w_scale {
                let scale_sb = load_down_scales(w_scale, row, t, c0, cols);
                nisa::tensor_tensor(o[s![.., 0..cols]], acc[s![.., 0..cols]], scale_sb[s![.., 0..cols]], nl::multiply);
            } else {
                nisa::tensor_copy(o[s![.., 0..cols]], acc[s![.., 0..cols]]);
            }
            if let Some(b) = down_b {
                let b_sb = nl::ndarray([t, PSUM_FMAX], b.dtype(), buffer = nl::sbuf);
                nisa::dma_copy(b_sb[s![.., 0..cols]], b[s![.., c0..c0 + cols]].broadcast(0, t));
                nisa::tensor_tensor(o[s![.., 0..cols]], o[s![.., 0..cols]], b_sb[s![.., 0..cols]], nl::add);
            }
            let cast = nl::ndarray([t, PSUM_FMAX], output.dtype(), buffer = nl::sbuf);
            nisa::tensor_copy(cast[s![.., 0..cols]], o[s![.., 0..cols]]);
            nisa::dma_copy(output[s![.., c0..c0 + cols]], cast[s![.., 0..cols]]);
        }
    }
}
