//! The context-encoding path's HBM traffic: the library's
//! `mlp_cte_tensor_io`. A tile of token rows is loaded (with the residual
//! added on the way, summed in fp32 by the DMA) into the compute dtype, or
//! as they are when already fp8 (with `ROW`, each row's fp32 dequantization
//! scale read from its last four bytes), and stored back cast by the DMA;
//! the per-call vectors and quantization scales are loaded once.

pub use kernel::*;

/// The loads and stores.
#[nki::nki_module]
pub mod kernel {
    use crate::mlp::mlp_cte::mlp_cte_constants::{ACT_DTYPE, MLPCTEConstants, MLPCTEQuantScales, MLPCTEVectors, P_MAX};
    use crate::mlp::mlp_parameters::{MLPQuantizationParameters, MLPTensors, ROW_SCALE_BYTES};
    pub use crate::utils::common_types::QuantizationType;
    use nki::prelude::*;

    /// Rows `r0 .. r0 + rows` of `hidden` `[T, H]` (plus those of
    /// `fused_add`) into `x` `[128, H]`, in `x`'s dtype; with `stored`, the
    /// sum is also written there (the two programs of an `I`-sharded call,
    /// which both hold every row, write one half of the columns each).
    #[nki_helper]
    pub fn load_hidden_tensor_tile(
        hidden: Hbm,
        fused_add: Option<Hbm>,
        stored: Option<Hbm>,
        x: Sbuf,
        cst: MLPCTEConstants,
        r0: i64,
        rows: i64,
    ) {
        let h = cst.h;
        if let Some(residual_nd) = fused_add {
            // The residual keeps the caller's [B, S, H] shape; hidden is [T, H].
            let residual = residual_nd.reshape(hidden.shape());
            nisa::dma_compute(
                x[s![0..rows, ..]],
                [hidden[s![r0..r0 + rows, ..]], residual[s![r0..r0 + rows, ..]]],
                nl::add,
                scales = [1.0, 1.0],
            );
            if let Some(out) = stored {
                let (c0, cols) = if cst.shard_on_intermediate { (cst.program_id * h / cst.programs, h / cst.programs) } else { (0, h) };
                nisa::dma_copy(out[s![r0..r0 + rows, c0..c0 + cols]], x[s![0..rows, c0..c0 + cols]]);
            }
        } else {
            nisa::dma_copy(x[s![0..rows, ..]], hidden[s![r0..r0 + rows, 0..h]]);
        }
    }

    /// The fp32 dequantization scales of rows `r0 .. r0 + rows` of a
    /// `ROW`-quantized fp8 `hidden` `[T, H + 4]`: the last four bytes of each
    /// row seen as one float32, into `[128, 1]`.
    #[nki_helper]
    pub fn load_packed_hidden_scales(hidden: Hbm, cst: MLPCTEConstants, r0: i64, rows: i64) -> Sbuf {
        let scales = nl::ndarray([P_MAX, 1], ACT_DTYPE, buffer = nl::sbuf);
        let words = hidden.view(ACT_DTYPE);
        let c = cst.h / ROW_SCALE_BYTES;
        nisa::dma_copy(scales[s![0..rows, ..]], words[s![r0..r0 + rows, c..c + 1]]);
        scales
    }

    /// `o` `[128, H]`'s rows into `output` rows `r0 ..` (cast by the DMA):
    /// every column, or this program's half of an `I`-sharded call.
    #[nki_helper]
    pub fn store_hidden_tensor_tile(o: Sbuf, output: Hbm, cst: MLPCTEConstants, r0: i64, rows: i64) {
        let h = cst.h;
        let (c0, cols) = if cst.shard_on_intermediate { (cst.program_id * h / cst.programs, h / cst.programs) } else { (0, h) };
        nisa::dma_copy(output[s![r0..r0 + rows, c0..c0 + cols]], o[s![0..rows, c0..c0 + cols]]);
    }

    /// A `[1, n]` vector as `[128, n / 128]` fp32, element `k` at partition
    /// `k % 128`, column `k / 128` (the layout of the transposed hidden rows).
    #[nki_helper]
    pub fn load_vector_across_partitions(v: Hbm) -> Sbuf {
        let n = v.shape()[1];
        let out = nl::ndarray([P_MAX, n / P_MAX], ACT_DTYPE, buffer = nl::sbuf);
        nisa::dma_copy(out, v.ap([[1, P_MAX], [P_MAX, n / P_MAX]], offset = 0));
        out
    }

    /// Columns `c0 .. c0 + n` of a `[1, N]` bias broadcast on the 128
    /// partitions, in `dtype`.
    #[nki_helper]
    pub fn load_bias_vector(b: Hbm, c0: i64, n: i64, dtype: Dtype) -> Sbuf {
        let out = nl::ndarray([P_MAX, n], dtype, buffer = nl::sbuf);
        nisa::dma_copy(out, b[s![.., c0..c0 + n]].broadcast(0, P_MAX));
        out
    }

    /// `STATIC`: a `[128, 1]` weight scale times its `[128, 1]` input scale
    /// (fp32), the library's `load_and_multiply_static_weight_scales`.
    #[nki_helper]
    pub fn load_and_multiply_static_weight_scales(w_scale: Option<Hbm>, in_scale: Option<Hbm>, zero: Sbuf) -> Option<Sbuf> {
        if let Some(w) = w_scale {
            if let Some(s_in) = in_scale {
                let in_sb = nl::ndarray([P_MAX, 1], ACT_DTYPE, buffer = nl::sbuf);
                nisa::dma_copy(in_sb, s_in);
                let out = nl::ndarray([P_MAX, 1], ACT_DTYPE, buffer = nl::sbuf);
                nisa::dma_copy(out, w);
                nisa::activation(out, nl::copy, out, bias = zero, scale = in_sb);
                return Some(out);
            }
        }
        None
    }

    /// `STATIC`: `1 / down_in_scale` `[128, 1]`, the gated product's quantization scale.
    #[nki_helper]
    pub fn load_static_quantization_scale(in_scale: Option<Hbm>) -> Option<Sbuf> {
        if let Some(s_in) = in_scale {
            let out = nl::ndarray([P_MAX, 1], ACT_DTYPE, buffer = nl::sbuf);
            nisa::dma_copy(out, s_in);
            nisa::reciprocal(out, out);
            return Some(out);
        }
        None
    }

    /// `ROW`: this program's `I` columns of a gate or up weight scale `[128, I]`.
    #[nki_helper]
    pub fn load_source_projection_row_scales(w_scale: Option<Hbm>, cst: MLPCTEConstants) -> Option<Sbuf> {
        if let Some(w) = w_scale {
            let out = nl::ndarray([P_MAX, cst.i], ACT_DTYPE, buffer = nl::sbuf);
            nisa::dma_copy(out, w[s![.., cst.i_offset..cst.i_offset + cst.i]]);
            return Some(out);
        }
        None
    }

    /// The dequantization scales of a quantized call ([`MLPCTEQuantScales`];
    /// none for `NONE`), the library's `prepare_static_scales` and its row
    /// scale loads.
    #[nki_helper]
    pub fn prepare_quantization_scales(q: MLPQuantizationParameters, vec: MLPCTEVectors, cst: MLPCTEConstants) -> MLPCTEQuantScales {
        let stat = q.quantization_type == QuantizationType::STATIC || q.quantization_type == QuantizationType::STATIC_MX;
        let row = q.quantization_type == QuantizationType::ROW;
        let (gate, up, down, down_in_inv) = if stat {
            (
                load_and_multiply_static_weight_scales(q.gate_w_scale, q.gate_up_in_scale, vec.zero),
                load_and_multiply_static_weight_scales(q.up_w_scale, q.gate_up_in_scale, vec.zero),
                load_and_multiply_static_weight_scales(q.down_w_scale, q.down_in_scale, vec.zero),
                load_static_quantization_scale(q.down_in_scale),
            )
        } else if row {
            (load_source_projection_row_scales(q.gate_w_scale, cst), load_source_projection_row_scales(q.up_w_scale, cst), None, None)
        } else {
            (None, None, None, None)
        };
        MLPCTEQuantScales {
            quantization_type: q.quantization_type,
            gate,
            up,
            down,
            down_in_inv,
            down_row_w_scale: if row { q.down_w_scale } else { None },
            clipping_bound: q.clipping_bound,
        }
    }

    /// [`load_vector_across_partitions`] of a vector that may be absent.
    #[nki_helper]
    pub fn load_optional_vector_across_partitions(v: Option<Hbm>) -> Option<Sbuf> {
        if let Some(t) = v {
            return Some(load_vector_across_partitions(t));
        }
        None
    }

    /// [`load_bias_vector`] of a bias that may be absent.
    #[nki_helper]
    pub fn load_optional_bias_vector(b: Option<Hbm>, c0: i64, n: i64, dtype: Dtype) -> Option<Sbuf> {
        if let Some(t) = b {
            return Some(load_bias_vector(t, c0, n, dtype));
        }
        None
    }

    /// The call's vectors ([`MLPCTEVectors`]): gamma and beta of the norm,
    /// this program's columns of the biases (the down bias on one program of
    /// an `I`-sharded call: the halves are summed), epsilon and zeros.
    #[nki_helper]
    pub fn load_mlp_cte_vectors(w: MLPTensors, eps: f64, cst: MLPCTEConstants) -> MLPCTEVectors {
        let cdt = cst.compute_dtype;
        let eps_sb = nl::ndarray([P_MAX, 1], cdt, buffer = nl::sbuf);
        nisa::memset(eps_sb, eps);
        let zero = nl::ndarray([P_MAX, 1], ACT_DTYPE, buffer = nl::sbuf);
        nisa::memset(zero, 0.0);
        let gamma = load_optional_vector_across_partitions(w.normalization_weights_tensor);
        let beta = load_optional_vector_across_partitions(w.normalization_bias_tensor);
        let gate_bias = load_optional_bias_vector(w.gate_proj_bias_tensor, cst.i_offset, cst.i, cdt);
        let up_bias = load_optional_bias_vector(w.up_proj_bias_tensor, cst.i_offset, cst.i, cdt);
        let adds_down_bias = cst.program_id == 0 || !cst.shard_on_intermediate;
        let down_bias = load_optional_bias_vector(if adds_down_bias { w.down_proj_bias_tensor } else { None }, 0, cst.h, cdt);
        MLPCTEVectors { gamma, beta, gate_bias, up_bias, down_bias, eps: eps_sb, zero }
    }
}
