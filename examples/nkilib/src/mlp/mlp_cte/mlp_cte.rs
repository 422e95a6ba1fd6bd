//! The context-encoding (prefill) path of `mlp`: the library's `mlp_cte`,
//! for calls of more than `TKG_BS_SEQLEN_THRESHOLD` tokens (or
//! `force_cte_mode`).
//!
//! With `T = B·S` token rows, `H` hidden and `I` intermediate columns, the
//! tiles are computed in the compute dtype `cdt` (hidden's; bfloat16 for
//! fp32 hidden), the statistics and sums in fp32. An LNC2 launch splits the
//! tokens (each program its half of the rows) or, for large `I`, the
//! intermediate columns (each program every row, half of `I`; see
//! [`shard_on_intermediate`](crate::mlp::mlp_cte::mlp_cte_sharding::shard_on_intermediate)).
//!
//! ```text
//! vectors: gamma, beta [128, H/128] fp32; biases broadcast [128, I or H] cdt
//! for each tile of up to 128 of the program's rows:
//!     x = hidden[rows] (+ fused_add[rows])      [128, H] cdt   (load_hidden_tensor_tile)
//!         (store_fused_add_result) stored[rows] = x
//!     x = norm(x)                              in place        (mlp_cte_norm)
//!     x_t = xᵀ · gamma + beta                  [128, H/128, 128] cdt (mlp_cte_transpose)
//!     gu = act(gate(x_t)) · up(x_t)            [128, I] cdt    (mlp_cte_projection)
//!     gu_t = guᵀ                               [128, I/128, 128]
//!     x = gu_t projected by W_down (+ bias)    [128, H] cdt
//!     (I sharded) x[:, my half] += other program's partial
//!     output[rows] = x                         cast to the output dtype
//! ```
//!
//! The fp8 forms (`QuantizationType.STATIC` and `ROW`, `float8_e4m3` gate,
//! up and down weights) take hidden rows already quantized to
//! `float8_e4m3`, as the library's quantized path does: `[B, S, H]` for
//! `STATIC` (dequantized by `gate_up_in_scale`), `[B, S, H + 4]` for `ROW`
//! (each row's fp32 dequantization scale `s_x` in its last four bytes). The
//! tiles are computed in bfloat16; the rows and the weights stay fp8 through
//! the projections, whose fp32 sums are dequantized on the way out of PSUM
//! (see [`mlp_cte_projection`](crate::mlp::mlp_cte::mlp_cte_projection)),
//! and the gated product is quantized back to fp8 before the down
//! projection ([`mlp_cte_quantization`](crate::mlp::mlp_cte::mlp_cte_quantization)):
//!
//! ```text
//! (STATIC, ROW) x = hidden[rows, :H]            [128, H] fp8   (s_x = the rows' packed scales, ROW)
//!               x_t = xᵀ;  gu = act(gate(x_t)) · up(x_t), dequantized
//!               q, dq = quantize(gu)            [128, I] fp8   (dq per row, ROW)
//!               x = qᵀ projected by W_down, dequantized
//! ```
//!
//! The library's quantized path takes no norm, residual add or projection
//! bias (a norm of fp8 codes would not be the norm of the rows). Its clamps
//! and its optimized down-projection layout belong to its decode path only.
//! `STATIC_MX` (trn3) runs the same fp8 form through `nc_matmul_mx` on
//! pre-shuffled weights: [`mlp_cte_mx`](crate::mlp::mlp_cte::mlp_cte_mx).

pub use kernel::*;

/// The context-encoding driver.
#[nki::nki_module]
pub mod kernel {
    use crate::mlp::mlp_cte::mlp_cte_constants::{MLPCTEConstants, MLPCTEQuantScales, MLPCTEVectors, P_MAX, PSUM_FMAX};
    use crate::mlp::mlp_cte::mlp_cte_mx::mlp_cte_static_mx;
    use crate::mlp::mlp_cte::mlp_cte_norm::apply_normalization_if_necessary;
    use crate::mlp::mlp_cte::mlp_cte_projection::{
        perform_down_projection, perform_gate_up_projection, sync_down_proj_results_across_int_dim,
    };
    use crate::mlp::mlp_cte::mlp_cte_quantization::perform_intermediate_quantization;
    use crate::mlp::mlp_cte::mlp_cte_sharding::calculate_sharding;
    use crate::mlp::mlp_cte::mlp_cte_tensor_io::{
        load_hidden_tensor_tile, load_mlp_cte_vectors, load_packed_hidden_scales, prepare_quantization_scales, store_hidden_tensor_tile,
    };
    use crate::mlp::mlp_cte::mlp_cte_transpose::{transpose_intermediate_tensor_tile, transpose_source_tensor_tile};
    use crate::mlp::mlp_parameters::{MLPActivationParameters, MLPParameters, MLPQuantizationParameters, MLPTensors};
    pub use crate::utils::common_types::{ActFnType, NormType, QuantizationType};
    use nki::prelude::*;

    /// One tile of `rows` token rows from row `r0`: the loop body of the
    /// module docs.
    #[nki_helper]
    pub fn mlp_cte_tile(p: MLPParameters, vec: MLPCTEVectors, scales: MLPCTEQuantScales, cst: MLPCTEConstants, r0: i64, rows: i64) {
        let (hidden, w, act) = (p.hidden, p.w, p.act);
        let cdt = cst.compute_dtype;
        let quantized = scales.quantization_type != QuantizationType::NONE;
        let x = nl::ndarray([P_MAX, cst.h], cst.hidden_tile_dtype, buffer = nl::sbuf);
        load_hidden_tensor_tile(hidden, w.fused_add_tensor, p.stored, x, cst, r0, rows);
        let x_scale =
            if scales.quantization_type == QuantizationType::ROW { Some(load_packed_hidden_scales(hidden, cst, r0, rows)) } else { None };
        apply_normalization_if_necessary(x, p.normalization_type, vec, cst, rows);
        let x_t = nl::ndarray([P_MAX, cst.h / P_MAX, P_MAX], cst.hidden_tile_dtype, buffer = nl::sbuf);
        transpose_source_tensor_tile(x, x_t, vec, cst, rows);
        let gu = nl::ndarray([P_MAX, cst.i], cdt, buffer = nl::sbuf);
        for ic in nl::affine_range(cst.i.div_ceil(PSUM_FMAX)) {
            let (gate_w, up_w) = (w.gate_proj_weights_tensor, w.up_proj_weights_tensor);
            perform_gate_up_projection(x_t, gate_w, up_w, gu, act, vec, scales, x_scale, cst, ic * PSUM_FMAX, rows);
        }
        // fp8 weights: the product is requantized, and the output tile is
        // its own (the fp8 rows cannot hold it).
        let inter = if quantized { nl::ndarray([P_MAX, cst.i], cst.down_proj_quant_dtype, buffer = nl::sbuf) } else { gu };
        let dq = perform_intermediate_quantization(gu, inter, scales, cst, rows);
        let gu_t = nl::ndarray([P_MAX, cst.i.div_ceil(P_MAX), P_MAX], inter.dtype(), buffer = nl::sbuf);
        transpose_intermediate_tensor_tile(inter, gu_t, cst, rows);
        let o = if quantized { nl::ndarray([P_MAX, cst.h], cdt, buffer = nl::sbuf) } else { x };
        perform_down_projection(gu_t, w.down_proj_weights_tensor, o, vec, scales, dq, cst, rows);
        if cst.shard_on_intermediate {
            sync_down_proj_results_across_int_dim(o, cst, rows);
        }
        store_hidden_tensor_tile(o, p.output, cst, r0, rows);
    }

    /// The context-encoding MLP of `p.hidden` `[T, H]` (`[T, H + 4]` for
    /// `ROW`-quantized rows) into `p.output` `[T, H]` (and, when given, the
    /// residual sum into `p.stored`).
    #[nki_helper]
    pub fn mlp_cte(p: MLPParameters) {
        let (hidden, w, quant) = (p.hidden, p.w, p.quant);
        let t = hidden.shape()[0];
        let [i, h] = w.down_proj_weights_tensor.shape();
        let has_bias = w.gate_proj_bias_tensor.is_some() || w.up_proj_bias_tensor.is_some() || w.down_proj_bias_tensor.is_some();
        let quantized = quant.quantization_type != QuantizationType::NONE;
        let wide = hidden.dtype() == nl::float32 || quantized;
        let cdt = if wide { nl::bfloat16 } else { hidden.dtype() };
        let hidden_tile_dtype = if quantized { hidden.dtype() } else { cdt };
        let src_dtype = if quantized { w.up_proj_weights_tensor.dtype() } else { cdt };
        let down_dtype = if quantized { w.down_proj_weights_tensor.dtype() } else { cdt };
        let cst: MLPCTEConstants = calculate_sharding(t, h, i, has_bias, cdt, hidden_tile_dtype, src_dtype, down_dtype);
        let vec = load_mlp_cte_vectors(w, p.eps, cst);
        let scales = prepare_quantization_scales(quant, vec, cst);
        if quant.quantization_type == QuantizationType::STATIC_MX {
            mlp_cte_static_mx(p, scales, cst);
            return;
        }
        for tile in nl::sequential_range(cst.t.div_ceil(P_MAX)) {
            let r0 = cst.t_offset + tile * P_MAX;
            let rows = (cst.t_offset + cst.t - r0).min(P_MAX);
            mlp_cte_tile(p, vec, scales, cst, r0, rows);
        }
    }
}
