//! Step 4 of `qkv_cte`: an S block's transposed rows times the weights,
//! 1024 rows of H per weight load, each S tile and 512 columns of I
//! accumulating in its own PSUM bank (STATIC: fp8 `double_row` matmuls).

pub use kernel::*;

/// The projection.
#[nki::nki_module]
pub mod kernel {
    use crate::qkv::qkv_cte::qkv_cte_constants::{NUM_128_TILES_PER_WEIGHT_LOAD, P_MAX, PSUM_FMAX, WEIGHT_LOAD_BLOCK_SIZE_PER_H};
    use crate::qkv::qkv_cte::qkv_cte_utils::{QkvCteConfig, QkvCteDims, QkvCteTensors};
    use nki::prelude::*;

    /// Step 4: the block's transposed S tiles (`input_sb` `[128, tiles, H]`)
    /// times the weights, 1024 rows of H per weight load (`[128, 8, I]`:
    /// element `[p, j, c]` is row `j·128 + p` of the load), each S tile and
    /// 512 columns of I accumulating in its own PSUM bank, `psum[:, tile · I tiles + i tile, :]`.
    #[nki_helper]
    pub fn qkv_projection(cfg: QkvCteConfig, dims: QkvCteDims, io: QkvCteTensors, input_sb: Sbuf, psum: Psum, rows: i64) {
        let (h, i, ni) = (dims.h, dims.i, dims.num_512_tiles_per_i);
        for wl in 0..h.div_ceil(WEIGHT_LOAD_BLOCK_SIZE_PER_H) {
            let off = wl * WEIGHT_LOAD_BLOCK_SIZE_PER_H;
            let n = ((h - off) / P_MAX).min(NUM_128_TILES_PER_WEIGHT_LOAD);
            let w_sb = nl::ndarray([P_MAX, NUM_128_TILES_PER_WEIGHT_LOAD, i], cfg.compute_mm_dtype, buffer = nl::sbuf);
            nisa::dma_copy(w_sb[s![.., 0..n, ..]], io.weights.ap([[i, P_MAX], [P_MAX * i, n], [1, i]], offset = off * i));
            for t in 0..rows.div_ceil(P_MAX) {
                let r = (rows - t * P_MAX).min(P_MAX);
                if cfg.static_quant {
                    project_double_row(dims, input_sb, w_sb, psum, off, n, t, r);
                } else {
                    for j in 0..n {
                        let c0 = off + j * P_MAX;
                        for k in 0..ni {
                            let (i0, iw) = (k * PSUM_FMAX, (i - k * PSUM_FMAX).min(PSUM_FMAX));
                            nisa::nc_matmul(
                                psum[s![0..r, t * ni + k, 0..iw]],
                                input_sb[s![.., t, c0..c0 + r]],
                                w_sb[s![.., j, i0..i0 + iw]],
                            );
                        }
                    }
                }
            }
        }
    }

    /// STATIC's fp8 products of one weight load: pairs of 128-row pieces
    /// (`n` of them from row `off`) contracted in one `double_row` matmul,
    /// S tile `t`'s `r` quantized rows (`input_q` `[128, tiles, H]`) against
    /// `w_sb` `[128, 8, I]`.
    #[nki_helper]
    pub fn project_double_row(dims: QkvCteDims, input_q: Sbuf, w_sb: Sbuf, psum: Psum, off: i64, n: i64, t: i64, r: i64) {
        let (h, i, ni) = (dims.h, dims.i, dims.num_512_tiles_per_i);
        let tiles = input_q.shape()[1];
        let per_partition = NUM_128_TILES_PER_WEIGHT_LOAD * i;
        for j in 0..n / 2 {
            for k in 0..ni {
                let (i0, iw) = (k * PSUM_FMAX, (i - k * PSUM_FMAX).min(PSUM_FMAX));
                let stationary = input_q.ap([[tiles * h, P_MAX], [P_MAX, 2], [1, r]], offset = t * h + off + 2 * j * P_MAX);
                let moving = w_sb.ap([[per_partition, P_MAX], [i, 2], [1, iw]], offset = 2 * j * i + i0);
                nisa::nc_matmul(psum[s![0..r, t * ni + k, 0..iw]], stationary, moving, perf_mode = nisa::matmul_perf_mode::double_row);
            }
        }
    }
}
