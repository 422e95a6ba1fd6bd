//! The context-encoding path's norms: the library's `mlp_cte_norm`, on a
//! tile of token rows `[128, H]` in place (tokens on the partitions). The
//! statistics are fp32; the normalised rows are rounded to the compute
//! dtype before gamma and beta, which the transpose applies.
//!
//! ```text
//! RMS:    ss = Σ_h x²  (activation_reduce);  r = rsqrt(ss / H + eps);  x = x · r
//! LAYER:  mean, var from bn_stats per 512 columns and bn_aggr;
//!         x = (x - mean) · rsqrt(var + eps)
//! ```
//!
//! `eps` is held in the compute dtype, as the library holds it.

pub use kernel::*;

/// The norm helpers.
#[nki::nki_module]
pub mod kernel {
    use crate::mlp::mlp_cte::mlp_cte_constants::{ACT_DTYPE, BN_STATS_ELEMENTS, BN_STATS_FMAX, MLPCTEConstants, MLPCTEVectors, P_MAX};
    pub use crate::utils::common_types::NormType;
    use nki::prelude::*;

    /// RMSNorm (without gamma) of the first `rows` rows of `x` in place.
    #[nki_helper]
    pub fn apply_rms_norm_to_source_tensor_tile(x: Sbuf, vec: MLPCTEVectors, cst: MLPCTEConstants, rows: i64) {
        let squares = nl::ndarray([P_MAX, cst.h], ACT_DTYPE, buffer = nl::sbuf);
        let rrms = nl::ndarray([P_MAX, 1], ACT_DTYPE, buffer = nl::sbuf);
        let zero = vec.zero[s![0..rows, ..]];
        nisa::activation_reduce(squares[s![0..rows, ..]], nl::square, x[s![0..rows, ..]], nl::add, rrms[s![0..rows, ..]], bias = zero);
        nisa::activation(
            rrms[s![0..rows, ..]],
            nl::rsqrt,
            rrms[s![0..rows, ..]],
            bias = vec.eps[s![0..rows, ..]],
            scale = 1.0 / cst.h as f64,
        );
        nisa::activation(x[s![0..rows, ..]], nl::copy, x[s![0..rows, ..]], scale = rrms[s![0..rows, ..]], bias = zero);
    }

    /// LayerNorm (without gamma and beta) of the first `rows` rows of `x` in place.
    #[nki_helper]
    pub fn apply_layer_norm_to_source_tensor_tile(x: Sbuf, vec: MLPCTEVectors, cst: MLPCTEConstants, rows: i64) {
        let chunks = cst.h.div_ceil(BN_STATS_FMAX);
        let stats = nl::ndarray([P_MAX, chunks * BN_STATS_ELEMENTS], ACT_DTYPE, buffer = nl::sbuf);
        for c in nl::affine_range(chunks) {
            let c0 = c * BN_STATS_FMAX;
            let cols = (cst.h - c0).min(BN_STATS_FMAX);
            let e0 = c * BN_STATS_ELEMENTS;
            nisa::bn_stats(stats[s![0..rows, e0..e0 + BN_STATS_ELEMENTS]], x[s![0..rows, c0..c0 + cols]]);
        }
        let mean_var = nl::ndarray([P_MAX, 2], ACT_DTYPE, buffer = nl::sbuf);
        nisa::bn_aggr(mean_var[s![0..rows, ..]], stats[s![0..rows, ..]]);
        nisa::activation(mean_var[s![0..rows, 1..2]], nl::rsqrt, mean_var[s![0..rows, 1..2]], bias = vec.eps[s![0..rows, ..]]);
        nisa::tensor_scalar(
            x[s![0..rows, ..]],
            x[s![0..rows, ..]],
            nl::subtract,
            mean_var[s![0..rows, 0..1]],
            op1 = nl::multiply,
            operand1 = mean_var[s![0..rows, 1..2]],
        );
    }

    /// The norm `normalization_type` names (none for `NO_NORM`).
    #[nki_helper]
    pub fn apply_normalization_if_necessary(x: Sbuf, normalization_type: NormType, vec: MLPCTEVectors, cst: MLPCTEConstants, rows: i64) {
        match normalization_type {
            NormType::RMS_NORM | NormType::RMS_NORM_SKIP_GAMMA => apply_rms_norm_to_source_tensor_tile(x, vec, cst, rows),
            NormType::LAYER_NORM => apply_layer_norm_to_source_tensor_tile(x, vec, cst, rows),
            _ => {}
        }
    }
}
