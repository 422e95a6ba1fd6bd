//! The decode (token generation) path of `mlp`: the library's `mlp_tkg`,
//! the phases in order.
//!
//! With `T = B·S` tokens (at most 96: they fit on the partitions), `H` hidden
//! and `I` intermediate columns, and `n` programs in the launch (LNC), program
//! `k` holds hidden shard `k` (`H/n` columns) of the normalised rows in the
//! `[128, T, H1s]` layout of `rmsnorm_tkg` (`H1s = H/128/n`; element `h` of
//! the shard at partition `h / H1s`, column `h % H1s`):
//!
//! ```text
//! (fused add)   x = hidden + fused_add            [T, H], in hidden's dtype
//!               (store_fused_add_result) stored[:, shard k] = x
//! (norm)        x = norm(x) in the layout, into a private HBM scratch
//! x_sb = shard k of x                              [128, T, H1s]
//! for each I tile of up to 128 columns:           (process_gate_up_projection)
//!     gate[:, i, :] = Σ_c W_gate[shard rows at column c, I tile]ᵀ @ x_sb[:, :, c]   # PSUM, fp32
//!     up[:, i, :]   = the same with W_up
//! (n = 2) gate, up += the other program's partial sums   # sendrecv
//! (STATIC, ROW) gate, up *= their weights' scales  # fp32
//! gate += gate bias; up += up bias                 # fp32, per partition
//! gate = act(clamp(gate)); up = clamp(up)
//! gu = gate · up   (skip_gate_proj: act(clamp(up)))  [128, I/128, T], hidden's dtype
//! for each 512-column chunk of the shard's H/n output columns:   (process_down_projection)
//!     out[T, chunk] = Σ_i gu[:, i, :]ᵀ @ W_down[I tile, chunk]   # PSUM, fp32
//!     (STATIC, ROW) out *= the down weights' scales
//! out (+ down bias) -> output[:, shard k]          # hidden's dtype, then output_dtype
//! ```
//!
//! The intermediates of the projections are fp32, as in the library; the
//! product `gu` and the output are rounded to the hidden dtype. The library's
//! two matmul arrangements (`use_tkg_gate_up_proj_column_tiling`,
//! `use_tkg_down_proj_column_tiling`: the hidden rows or the weights as the
//! stationary operand) compute the same sums in the same precision; this port
//! implements one, the weights stationary for gate/up (the product lands with
//! `I` on the partitions, as the down projection contracts it) and `gu`
//! stationary for the down projection (the output lands as `[T, H]` rows),
//! and takes both flags without changing the result. With
//! `use_tkg_down_proj_optimized_layout` the down weights are read in the
//! library's optimized layout.
//!
//! Quantized weights (`STATIC`, `ROW`: `float8_e4m3`, the library's fp8
//! forms) multiply the 16-bit activations as they are, as in the library's
//! decode path (which quantizes no activation): each projection's fp32 sums
//! are multiplied by its weights' dequantization scale, one per tensor
//! (`STATIC`) or per output column (`ROW`), before its bias. The input
//! scales `STATIC` takes belong to the library's context-encoding path and
//! are checked but not read here.

pub use kernel::*;

/// The decode path.
#[nki::nki_module]
pub mod kernel {
    use crate::mlp::mlp_parameters::{H0, MLPActivationParameters, MLPQuantizationParameters, MLPTensors};
    use crate::mlp::mlp_tkg::mlp_tkg_constants::MLPTKGConstants;
    use crate::mlp::mlp_tkg::mlp_tkg_down_projection::process_down_projection;
    use crate::mlp::mlp_tkg::mlp_tkg_gate_up_projection::process_gate_up_projection;
    use crate::mlp::mlp_tkg::mlp_tkg_utils::{input_fused_add, input_norm_load};
    pub use crate::utils::common_types::NormType;
    use nki::prelude::*;

    /// The decode-phase MLP of `hidden` `[T, H]` into `output` `[T, H]` (and,
    /// when given, the residual sum into `stored`): the phases of the module
    /// docs in order.
    #[nki_helper]
    pub fn mlp_tkg(
        hidden: Hbm,
        w: MLPTensors,
        output: Hbm,
        stored: Option<Hbm>,
        normalization_type: NormType,
        eps: f64,
        act: MLPActivationParameters,
        quant: MLPQuantizationParameters,
        optimized_layout: bool,
    ) {
        let [t, h] = hidden.shape();
        let i = w.down_proj_weights_tensor.shape()[0];
        let n = if nl::program_ndim() == 1 { nl::num_programs(0) } else { 1 };
        let shard_id = if n > 1 { nl::program_id(0) } else { 0 };
        let dims = MLPTKGConstants {
            t,
            h,
            i,
            h1: h / H0,
            num_shards: n,
            shard_id,
            h_per_shard: h / n,
            h1_shard: h / H0 / n,
            i_tiles: i.div_ceil(H0),
        };
        let mut x = hidden;
        let fused = w.fused_add_tensor;
        if let Some(residual) = fused {
            let sum = nl::ndarray([t, h], hidden.dtype(), buffer = nl::private_hbm);
            input_fused_add(hidden, residual, sum, stored, dims);
            x = sum;
        }
        let x_sb = nl::ndarray([H0, t, dims.h1_shard], hidden.dtype(), buffer = nl::sbuf);
        input_norm_load(x, x_sb, normalization_type, w.normalization_weights_tensor, w.normalization_bias_tensor, eps, dims);
        let gu = nl::ndarray([H0, dims.i_tiles, t], hidden.dtype(), buffer = nl::sbuf);
        process_gate_up_projection(
            x_sb,
            w.gate_proj_weights_tensor,
            w.up_proj_weights_tensor,
            w.gate_proj_bias_tensor,
            w.up_proj_bias_tensor,
            gu,
            act,
            quant,
            dims,
        );
        process_down_projection(gu, w.down_proj_weights_tensor, w.down_proj_bias_tensor, output, optimized_layout, quant, dims);
    }
}
