//! The context-encoding path's requantisation of the gated product: the
//! library's `mlp_cte_quantization`. With fp8 weights the down projection
//! multiplies fp8 operands, so the gated product `gu` `[128, I]` (compute
//! dtype) is quantized to `float8_e4m3` first, per tile of token rows:
//!
//! ```text
//! STATIC: gu = round(gu · (1 / down_in_scale));  q = clamp(gu, ±240)
//! ROW:    (clipping_bound > 0) gu = clamp(gu, ±clipping_bound)
//!         dq = max(max_j |gu[:, j]| / 240, 1e-6)        # fp32, per row
//!         q = gu · (1 / dq)                             # the row's dequantization scale is dq
//! ```
//!
//! `q` is rounded to `float8_e4m3` on its write; `STATIC`'s dequantization
//! scale is folded into the down weights' scale, `ROW`'s `dq` multiplies
//! the down projection's rows.

pub use kernel::*;

/// The quantization phases.
#[nki::nki_module]
pub mod kernel {
    use crate::mlp::mlp_cte::mlp_cte_constants::{ACT_DTYPE, FP8_E4M3_MAX, MLPCTEConstants, MLPCTEQuantScales, P_MAX, ROW_QUANT_MIN_SCALE};
    pub use crate::utils::common_types::QuantizationType;
    use nki::prelude::*;

    /// `STATIC` (and `STATIC_MX`, on its layout): `g` scaled in place by
    /// `quant_scale` (`1 / down_in_scale` on `g`'s partitions), clamped to
    /// the fp8 range into `d`.
    #[nki_helper]
    pub fn perform_intermediate_static_quantization(g: Sbuf, d: Sbuf, quant_scale: Sbuf) {
        nisa::activation(g, nl::copy, g, scale = quant_scale);
        nisa::tensor_scalar(d, g, nl::minimum, FP8_E4M3_MAX, op1 = nl::maximum, operand1 = -FP8_E4M3_MAX);
    }

    /// `ROW`: each of the first `rows` rows of `gu` (clipped in place when
    /// `clipping_bound > 0`) quantized into `q` by its absmax; returns the
    /// rows' dequantization scales `[128, 1]` fp32.
    #[nki_helper]
    pub fn perform_intermediate_row_quantization(gu: Sbuf, q: Sbuf, clipping_bound: f64, cst: MLPCTEConstants, rows: i64) -> Sbuf {
        let (g, d) = (gu[s![0..rows, ..]], q[s![0..rows, ..]]);
        if clipping_bound > 0.0 {
            nisa::tensor_scalar(g, g, nl::minimum, clipping_bound, op1 = nl::maximum, operand1 = -clipping_bound);
        }
        // |gu| as `abs_max(gu, 0)`; its row maximum is the absmax.
        let magnitudes = nl::ndarray([P_MAX, cst.i], cst.compute_dtype, buffer = nl::sbuf);
        let dq = nl::ndarray([P_MAX, 1], ACT_DTYPE, buffer = nl::sbuf);
        nisa::tensor_scalar_reduce(magnitudes[s![0..rows, ..]], g, nl::abs_max, 0.0, nl::maximum, dq[s![0..rows, ..]]);
        nisa::tensor_scalar(
            dq[s![0..rows, ..]],
            dq[s![0..rows, ..]],
            nl::multiply,
            1.0 / FP8_E4M3_MAX,
            op1 = nl::maximum,
            operand1 = ROW_QUANT_MIN_SCALE,
        );
        let quant_scale = nl::ndarray([P_MAX, 1], ACT_DTYPE, buffer = nl::sbuf);
        nisa::reciprocal(quant_scale[s![0..rows, ..]], dq[s![0..rows, ..]]);
        nisa::activation(d, nl::copy, g, scale = quant_scale[s![0..rows, ..]]);
        dq
    }

    /// The gated product `gu` quantized into `q` as `scales` says; returns
    /// `ROW`'s per-row dequantization scales.
    #[nki_helper]
    pub fn perform_intermediate_quantization(
        gu: Sbuf,
        q: Sbuf,
        scales: MLPCTEQuantScales,
        cst: MLPCTEConstants,
        rows: i64,
    ) -> Option<Sbuf> {
        let down_in_inv = scales.down_in_inv;
        if let Some(quant_scale) = down_in_inv {
            perform_intermediate_static_quantization(gu[s![0..rows, ..]], q[s![0..rows, ..]], quant_scale[s![0..rows, ..]]);
        }
        if scales.quantization_type == QuantizationType::ROW {
            return Some(perform_intermediate_row_quantization(gu, q, scales.clipping_bound, cst, rows));
        }
        None
    }
}
