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
//! (norm)        x = norm(x) in the layout, into a private HBM scratch: every row over the
//!               whole H on each program, as the library; with two programs and more
//!               rows than it splits between them, H split and the partial sums exchanged
//! x_sb = shard k of x                              [128, T, H1s]
//! gate, up = the program's partial projections    (process_gate_up_projection, below)   # fp32
//!            (STATIC, ROW) times their weights' scales; (program 0) plus their biases
//! (n = 2) gate, up += the other program's partial sums   # sendrecv
//! gate = act(clamp(gate)); up = clamp(up)
//! gu = gate · up   (skip_gate_proj: act(clamp(up)))  [128, I/128, T], hidden's dtype
//! out = gu @ W_down[:, shard k]                   (process_down_projection, below)      # fp32
//!       (STATIC, ROW) times the down weights' scales, rounded to hidden's dtype
//! out + down bias (hidden's dtype) -> output[:, shard k]   # then output_dtype
//! ```
//!
//! Each projection runs in the arrangement its flag names, as the library's
//! do; the arrangement decides the order of the fp32 sums and so the bits.
//! `dim` is the PE array width a stationary token tile takes (32, 64 or 128,
//! the least that holds `T`; 64 on NeuronCore-v2) and `f = 128 / dim` the
//! tiles side by side (column tiling).
//!
//! ```text
//! use_tkg_gate_up_proj_column_tiling = True   (gate_up_projection: hidden stationary)
//!   for each I shard of up to 4096 columns, gate then up:
//!     for each load of 16 layout columns (32 with fp8 weights): W[rows, 16, I shard] -> SBUF
//!       for each column c:  for each 512-column chunk j:
//!         psum_j[dim·(c % f) .. + T, :] += x_sb[:, :, c]ᵀ @ W[:, c, chunk j]    # [T, 512]
//!     p[T, chunk j] = psum_j[0 .. T] + psum_j[dim .. dim + T] + ...  (the f tiles, in order)
//!     p *= scales; (program 0) p += bias                                        # [T, I], fp32
//!   gate and up side by side [T, 2I]: one exchange carries both
//!   gu[:, i, :] = (act(gate) · up)[:, I tile i]ᵀ     # a PE transpose (exact), then rounded
//! use_tkg_gate_up_proj_column_tiling = False  (gate_up_projection_lhs_rhs_swap: weights stationary)
//!   for each I shard of up to 1024 columns, gate then up:
//!     for each load of 16 (32) layout columns:  for each column c:  for each I tile i:
//!       psum_i[:, 0 .. T] += W[:, c, I tile i]ᵀ @ x_sb[:, :, c]                 # [128, T]
//!     p[:, i, :] = psum_i * scales; (program 0) p += bias                       # [128, I/128, T], fp32
//!   the exchange carries gate, then up; gu = act(gate) · up, rounded
//! use_tkg_down_proj_column_tiling = True      (down_projection: gu stationary)
//!   for each load of up to 4096 of the shard's columns (8192 with fp8 weights; fewer
//!   when its chunks would take more than 8 PSUM banks):
//!     for each I tile i:  for each 512-column chunk j of the load:
//!       psum[bank j / f][dim·(j % f) .. + T, :] += gu[:, i, :]ᵀ @ W_down[I tile i, chunk j]
//!     out[T, chunk j] = psum chunk * scales, rounded                            # [T, H/n]
//!   out += bias; stored as it is
//! use_tkg_down_proj_column_tiling = False     (down_projection_lhs_rhs_swap: weights stationary)
//!   for each I tile i:  W_down[I tile i, shard k] -> SBUF
//!     for each layout column c:   (the 128 hidden columns p·H1s + c; optimized layout: contiguous)
//!       psum[bank c / (512/T)][:, (c % (512/T))·T .. + T] += W[:, those columns]ᵀ @ gu[:, i, :]
//!   out[128, H1s, T] = psum * scales, rounded, one run per bank; out += bias
//!   transpose_store: each out[:, c, :] transposed on the PE array into the rows [T, H/n]
//! ```
//!
//! The intermediates of the projections are fp32, as in the library; the
//! product `gu` and the output are rounded to the hidden dtype. Without down
//! column tiling the output's columns of one program must fit 8 PSUM banks,
//! `H1s <= 8 · (512 / T)`, as the library asserts. With
//! `use_tkg_down_proj_optimized_layout` (only without down column tiling)
//! the down weights are read in the library's optimized layout.
//!
//! Quantized weights (`STATIC`, `ROW`: `float8_e4m3`, the library's fp8
//! forms) multiply the 16-bit activations as they are, as in the library's
//! decode path (which quantizes no activation): each projection's fp32 sums
//! are multiplied by its weights' dequantization scale, one per tensor
//! (`STATIC`) or per output column (`ROW`), before its bias, read from the
//! rows each arrangement reads (row `t` for token `t` with the tokens on the
//! partitions; row 0, or row `p` for partition `p` of a `STATIC` scale,
//! with the weights stationary). The input scales `STATIC` takes belong to
//! the library's context-encoding path and are checked but not read here.

pub use kernel::*;

/// The decode path.
#[nki::nki_module]
pub mod kernel {
    use crate::mlp::mlp_parameters::{H0, MLPActivationParameters, MLPParameters, MLPQuantizationParameters, MLPTensors, MlpTkgOptions};
    use crate::mlp::mlp_tkg::mlp_tkg_constants::{projection_weights, tkg_dims};
    use crate::mlp::mlp_tkg::mlp_tkg_down_projection::process_down_projection;
    use crate::mlp::mlp_tkg::mlp_tkg_gate_up_projection::process_gate_up_projection;
    use crate::mlp::mlp_tkg::mlp_tkg_utils::{input_fused_add, input_norm_load};
    pub use crate::utils::common_types::NormType;
    use nki::prelude::*;

    /// The decode-phase MLP of `p.hidden` `[T, H]` into `p.output` `[T, H]`
    /// (and, when given, the residual sum into `p.stored`): the phases of
    /// the module docs in order, each projection in the arrangement its
    /// column-tiling flag names.
    #[nki_helper]
    pub fn mlp_tkg(p: MLPParameters, tkg: MlpTkgOptions) {
        let (gate_up_column_tiling, down_column_tiling) = (tkg.use_tkg_gate_up_proj_column_tiling, tkg.use_tkg_down_proj_column_tiling);
        let optimized_layout = tkg.use_tkg_down_proj_optimized_layout;
        let (hidden, w, quant) = (p.hidden, p.w, p.quant);
        let [t, h] = hidden.shape();
        let i = w.down_proj_weights_tensor.shape()[0];
        let n = if nl::program_ndim() == 1 { nl::num_programs(0) } else { 1 };
        let shard_id = if n > 1 { nl::program_id(0) } else { 0 };
        let dims = tkg_dims(t, h, i, n, shard_id, gate_up_column_tiling, down_column_tiling);
        let mut x = hidden;
        let fused = w.fused_add_tensor;
        if let Some(residual) = fused {
            let sum = nl::ndarray([t, h], hidden.dtype(), buffer = nl::private_hbm);
            input_fused_add(hidden, residual, sum, p.stored, dims);
            x = sum;
        }
        let x_sb = nl::ndarray([H0, t, dims.h1_shard], hidden.dtype(), buffer = nl::sbuf);
        input_norm_load(x, x_sb, p.normalization_type, w.normalization_weights_tensor, w.normalization_bias_tensor, p.eps, dims);
        let gu = nl::ndarray([H0, dims.i_tiles, t], hidden.dtype(), buffer = nl::sbuf);
        let gate = projection_weights(w.gate_proj_weights_tensor, w.gate_proj_bias_tensor, quant.gate_w_scale, quant);
        let up = projection_weights(w.up_proj_weights_tensor, w.up_proj_bias_tensor, quant.up_w_scale, quant);
        process_gate_up_projection(x_sb, gate, up, gu, p.act, dims);
        let down = projection_weights(w.down_proj_weights_tensor, w.down_proj_bias_tensor, quant.down_w_scale, quant);
        process_down_projection(gu, down, p.output, optimized_layout, dims);
    }
}
