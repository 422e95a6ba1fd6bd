//! Steps 1 to 3 of `qkv_cte` for one S tile: the rows loaded (with the
//! residual add), normalised (RMSNorm or LayerNorm statistics in fp32),
//! and transposed on the PE array in place (STATIC: quantized to fp8).

pub use kernel::*;

/// The input phases.
#[nki::nki_module]
pub mod kernel {
    use crate::qkv::qkv_cte::qkv_cte_constants::{BN_STATS_DST_SIZE, BN_STATS_TILE_SIZE, P_MAX, PSUM_FMAX};
    use crate::qkv::qkv_cte::qkv_cte_utils::{QkvCteConfig, QkvCteDims, QkvCteGlobals, QkvCteTensors};
    use crate::utils::common_types::NormType;
    use nki::prelude::*;

    /// Step 1: rows `s0..s0 + rows` of batch `b` into `input_sb` `[rows, H]`
    /// in the compute dtype, with the residuals added (one DMA reduction).
    #[nki_helper]
    pub fn load_input_tile(cfg: QkvCteConfig, dims: QkvCteDims, io: QkvCteTensors, input_sb: Sbuf, b: i64, s0: i64, rows: i64) {
        let dst = input_sb[s![0..rows, ..]];
        let x = io.input[s![b, s0..s0 + rows, ..]];
        let shape = [dims.b, dims.s, dims.h];
        if cfg.fused_residual_add {
            let (mlp_prev, attention_prev) = (io.mlp_prev, io.attention_prev);
            if let Some(mlp) = mlp_prev {
                if let Some(attn) = attention_prev {
                    let (mlp_rows, attn_rows) = (mlp.reshape(shape), attn.reshape(shape));
                    let srcs = [x, mlp_rows[s![b, s0..s0 + rows, ..]], attn_rows[s![b, s0..s0 + rows, ..]]];
                    nisa::dma_compute(dst, srcs, nl::add, scales = [1.0, 1.0, 1.0]);
                }
            }
        } else {
            nisa::dma_copy(dst, x);
        }
    }

    /// The library's `_apply_rms_normalization` (step 2): the rows of
    /// `input_sb` times `1 / sqrt(Σx²/hidden_actual + eps)`, in place (gamma
    /// is applied after the transpose).
    #[nki_helper]
    pub fn apply_rms_normalization(cfg: QkvCteConfig, dims: QkvCteDims, g: QkvCteGlobals, input_sb: Sbuf, rows: i64) {
        let h = dims.h;
        let square_sum = nl::ndarray([P_MAX, 1], cfg.act_dtype, buffer = nl::sbuf);
        // Only the row sums are kept: the squares go to one column, stride 0.
        let act = nl::ndarray([P_MAX, 1], cfg.act_dtype, buffer = nl::sbuf);
        let x = input_sb[s![0..rows, ..]];
        let ss = square_sum[s![0..rows, ..]];
        nisa::activation_reduce(
            act.ap([[1, rows], [0, h]], offset = 0),
            nl::square,
            x,
            nl::add,
            ss,
            bias = g.zero_bias_sb[s![0..rows, ..]],
        );
        let inv_h = 1.0 / dims.h_actual as f64;
        nisa::activation(ss, nl::rsqrt, ss, bias = g.norm_eps_sb[s![0..rows, ..]], scale = inv_h);
        nisa::tensor_scalar(x, x, nl::multiply, ss, engine = nisa::engine::vector);
    }

    /// The library's `_compute_layer_norm_stats` (step 2): each row's mean
    /// (column 0) and `1 / sqrt(var + eps)` (column 1) into `mean_rstd` `[128, 2]` fp32.
    #[nki_helper]
    pub fn compute_layer_norm_stats(cfg: QkvCteConfig, dims: QkvCteDims, g: QkvCteGlobals, input_sb: Sbuf, mean_rstd: Sbuf, rows: i64) {
        let n = dims.h.div_ceil(BN_STATS_TILE_SIZE);
        let stats = nl::ndarray([P_MAX, BN_STATS_DST_SIZE * n], cfg.act_dtype, buffer = nl::sbuf);
        for t in 0..n {
            let c0 = t * BN_STATS_TILE_SIZE;
            let c1 = (c0 + BN_STATS_TILE_SIZE).min(dims.h);
            let d0 = t * BN_STATS_DST_SIZE;
            nisa::bn_stats(stats[s![0..rows, d0..d0 + BN_STATS_DST_SIZE]], input_sb[s![0..rows, c0..c1]]);
        }
        nisa::bn_aggr(mean_rstd[s![0..rows, ..]], stats[s![0..rows, ..]]);
        let var = mean_rstd[s![0..rows, 1..2]];
        nisa::activation(var, nl::rsqrt, var, bias = g.norm_eps_sb[s![0..rows, ..]]);
    }

    /// Step 3 on one 512-column tile of H at `h0`: LayerNorm's `(x - mean)·rstd`,
    /// the four 128-column pieces transposed on the PE array into one PSUM tile,
    /// then copied back over the same columns (`[128 h, piece·128 + s]`), times
    /// gamma (plus beta) per partition with a norm.
    #[nki_helper]
    pub fn transpose_h_tile(
        cfg: QkvCteConfig,
        g: QkvCteGlobals,
        input_sb: Sbuf,
        input_q: Sbuf,
        mean_rstd: Sbuf,
        h0: i64,
        width: i64,
        rows: i64,
    ) {
        if cfg.fused_norm_type == NormType::LAYER_NORM {
            let x = input_sb[s![0..rows, h0..h0 + width]];
            let (mean, rstd) = (mean_rstd[s![0..rows, 0..1]], mean_rstd[s![0..rows, 1..2]]);
            nisa::tensor_scalar(x, x, nl::subtract, mean, op1 = nl::multiply, operand1 = rstd);
        }
        let tp = nl::ndarray([P_MAX, PSUM_FMAX], cfg.psum_transpose_dtype, buffer = nl::psum);
        let pieces = width.div_ceil(P_MAX);
        for j in 0..pieces {
            let c0 = h0 + j * P_MAX;
            nisa::nc_transpose(tp[s![.., j * P_MAX..j * P_MAX + rows]], input_sb[s![0..rows, c0..c0 + P_MAX]]);
        }
        for j in 0..pieces {
            let c0 = h0 + j * P_MAX;
            let t = (h0 + j * P_MAX) / P_MAX;
            let dst = input_sb[s![.., c0..c0 + rows]];
            let src = tp[s![.., j * P_MAX..j * P_MAX + rows]];
            copy_transposed_apply_gamma(cfg, g, dst, src, t);
            if cfg.static_quant {
                // After a norm the quantized rows are the normalised ones, else the transposed input.
                let data = if cfg.apply_gamma { dst } else { src };
                quantize_input_static(cfg, g, input_q[s![.., c0..c0 + rows]], data);
            }
        }
    }

    /// `dst` = `src`, a transposed tile whose partitions are the hidden
    /// values of column `c` of the loaded gamma (and beta), times gamma plus
    /// beta per partition as the norm applies them, else copied (the float
    /// and the MX forms' step 3).
    #[nki_helper]
    pub fn copy_transposed_apply_gamma(cfg: QkvCteConfig, g: QkvCteGlobals, dst: Sbuf, src: Psum, c: i64) {
        if cfg.apply_gamma {
            let gamma = g.gamma_norm_weights_sb[s![.., c..c + 1]];
            if cfg.add_layer_norm_bias {
                nisa::tensor_scalar(dst, src, nl::multiply, gamma, op1 = nl::add, operand1 = g.layer_norm_bias_sb[s![.., c..c + 1]]);
            } else {
                nisa::tensor_scalar(dst, src, nl::multiply, gamma);
            }
        } else {
            nisa::tensor_copy(dst, src);
        }
    }

    /// STATIC: `data / in_scale` rounded into `dst` (float8_e4m3), then
    /// clipped there to ±`fp8_max`.
    #[nki_helper]
    pub fn quantize_input_static(cfg: QkvCteConfig, g: QkvCteGlobals, dst: Sbuf, data: Sbuf) {
        nisa::tensor_scalar(dst, data, nl::multiply, g.in_scale_sb);
        nisa::tensor_scalar(dst, dst, nl::minimum, cfg.fp8_max, op1 = nl::maximum, operand1 = -cfg.fp8_max);
    }

    /// Steps 1 and 2 for one S tile: the rows loaded into `input_sb` (with
    /// the residuals) and RMS-normalised in place; returns LayerNorm's
    /// per-row mean and `1 / sqrt(var + eps)` `[128, 2]` (written with LAYER_NORM).
    #[nki_helper]
    pub fn load_and_normalize_rows(
        cfg: QkvCteConfig,
        dims: QkvCteDims,
        io: QkvCteTensors,
        g: QkvCteGlobals,
        input_sb: Sbuf,
        b: i64,
        s0: i64,
        rows: i64,
    ) -> Sbuf {
        load_input_tile(cfg, dims, io, input_sb, b, s0, rows);
        let norm = cfg.fused_norm_type;
        if norm == NormType::RMS_NORM || norm == NormType::RMS_NORM_SKIP_GAMMA {
            apply_rms_normalization(cfg, dims, g, input_sb, rows);
        }
        let mean_rstd = nl::ndarray([P_MAX, 2], cfg.act_dtype, buffer = nl::sbuf);
        if norm == NormType::LAYER_NORM {
            compute_layer_norm_stats(cfg, dims, g, input_sb, mean_rstd, rows);
        }
        mean_rstd
    }

    /// Steps 1 to 3 for one S tile: the rows loaded (with the residuals),
    /// normalised, and transposed in place, `[128 h, piece·128 + s]`
    /// (STATIC: also quantized into `input_q`).
    #[nki_helper]
    pub fn load_and_transpose_input(
        cfg: QkvCteConfig,
        dims: QkvCteDims,
        io: QkvCteTensors,
        g: QkvCteGlobals,
        input_sb: Sbuf,
        input_q: Sbuf,
        b: i64,
        s0: i64,
        rows: i64,
    ) {
        let mean_rstd = load_and_normalize_rows(cfg, dims, io, g, input_sb, b, s0, rows);
        for t in 0..dims.num_512_tiles_per_h {
            let h0 = t * PSUM_FMAX;
            transpose_h_tile(cfg, g, input_sb, input_q, mean_rstd, h0, (dims.h - h0).min(PSUM_FMAX), rows);
        }
    }
}
