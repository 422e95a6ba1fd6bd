//! The decode path's gate and up projections: the library's
//! `mlp_tkg_gate_up_projection`, the weights stationary, the partial sums of
//! two programs exchanged, fp8 dequantization, bias, clamps and the gated
//! activation.

pub use kernel::*;

/// The gate/up phase.
#[nki::nki_module]
pub mod kernel {
    use crate::mlp::mlp_parameters::{H0, MLPActivationParameters, MLPQuantizationParameters};
    use crate::mlp::mlp_tkg::mlp_tkg_constants::{INTER_DTYPE, MLPTKGConstants, PIPE_ID};
    pub use crate::utils::common_types::{ActFnType, QuantizationType};
    use crate::utils::kernel_helpers::{apply_activation, clamp};
    use nki::prelude::*;

    /// `dst[:, i, :]` `[128, I/128, T]` (fp32) = the program's partial
    /// projection `W[shard rows, :]ᵀ @ x` of each 128-column tile `i` of `w`
    /// `[H, I]`: the weight tile `[128, H1s, 128]` stationary, `x_sb`'s
    /// columns moving, summed over the layout columns in PSUM.
    #[nki_helper]
    pub fn gate_up_projection_lhs_rhs_swap(x_sb: Sbuf, w: Hbm, dst: Sbuf, dims: MLPTKGConstants) {
        let (t, i, h1s) = (dims.t, dims.i, dims.h1_shard);
        let row0 = dims.shard_id * dims.h_per_shard;
        for it in nl::affine_range(dims.i_tiles) {
            let i0 = it * H0;
            let isz = (i - i0).min(H0);
            let w_sb = nl::ndarray([H0, h1s, H0], w.dtype(), buffer = nl::sbuf);
            nisa::dma_copy(w_sb[s![.., .., 0..isz]], w.ap([[h1s * i, H0], [i, h1s], [1, isz]], offset = row0 * i + i0));
            let acc = nl::ndarray([H0, t], INTER_DTYPE, buffer = nl::psum);
            for c in nl::sequential_range(h1s) {
                nisa::nc_matmul(acc[s![0..isz, ..]], w_sb[s![.., c, 0..isz]], x_sb[s![.., .., c]]);
            }
            nisa::tensor_copy(dst[s![0..isz, it, ..]], acc[s![0..isz, ..]]);
        }
    }

    /// `p` `[128, I/128, T]` times the dequantization scale of each element:
    /// `w_scale[t, i]` (`ROW`) or `w_scale[t, 0]` (`STATIC`) for token `t`
    /// of column `i`, gathered transposed (`I` on the partitions) by one
    /// access pattern per tile, in fp32.
    #[nki_helper]
    pub fn dequantize_projection(p: Sbuf, w_scale: Hbm, row: bool, dims: MLPTKGConstants) {
        let (t, i) = (dims.t, dims.i);
        for it in nl::affine_range(dims.i_tiles) {
            let i0 = it * H0;
            let isz = (i - i0).min(H0);
            let scale_sb = nl::ndarray([H0, t], w_scale.dtype(), buffer = nl::sbuf);
            if row {
                nisa::dma_copy(scale_sb[s![0..isz, ..]], w_scale.ap([[1, isz], [i, t]], offset = i0));
            } else {
                nisa::dma_copy(scale_sb[s![0..isz, ..]], w_scale.ap([[0, isz], [1, t]], offset = 0));
            }
            nisa::tensor_tensor(p[s![0..isz, it, ..]], p[s![0..isz, it, ..]], scale_sb[s![0..isz, ..]], nl::multiply);
        }
    }

    /// Adds the other program's partial sums of `p` (two programs), undoes
    /// the weights' fp8 quantization when given its scale, then adds the bias
    /// `[1, I]` (one value per partition of each tile), in fp32.
    #[nki_helper]
    pub fn finish_projection(p: Sbuf, w_scale: Option<Hbm>, row: bool, bias: Option<Hbm>, dims: MLPTKGConstants) {
        if dims.num_shards > 1 {
            let other = 1 - dims.shard_id;
            let remote = nl::ndarray([H0, dims.i_tiles, dims.t], INTER_DTYPE, buffer = nl::sbuf);
            nisa::sendrecv(p, remote, other, other, PIPE_ID);
            nisa::tensor_tensor(p, p, remote, nl::add);
        }
        if let Some(scale) = w_scale {
            dequantize_projection(p, scale, row, dims);
        }
        if let Some(b) = bias {
            for it in nl::affine_range(dims.i_tiles) {
                let i0 = it * H0;
                let isz = (dims.i - i0).min(H0);
                let b_sb = nl::ndarray([H0, 1], b.dtype(), buffer = nl::sbuf);
                nisa::dma_copy(b_sb[s![0..isz, ..]], b.ap([[1, isz], [1, 1]], offset = i0));
                nisa::tensor_scalar(p[s![0..isz, it, ..]], p[s![0..isz, it, ..]], nl::add, b_sb[s![0..isz, ..]]);
            }
        }
    }

    /// The gate and up projections of `x_sb`, their gated activation, into
    /// `gu` `[128, I/128, T]` (hidden's dtype): `act(clamp(gate)) · clamp(up)`,
    /// or `act(clamp(up))` with `skip_gate_proj`; fp8 weights dequantized by
    /// `quant`'s scales.
    #[nki_helper]
    pub fn process_gate_up_projection(
        x_sb: Sbuf,
        gate_w: Hbm,
        up_w: Hbm,
        gate_b: Option<Hbm>,
        up_b: Option<Hbm>,
        gu: Sbuf,
        act: MLPActivationParameters,
        quant: MLPQuantizationParameters,
        dims: MLPTKGConstants,
    ) {
        let row = quant.quantization_type == QuantizationType::ROW;
        let (gate_w_scale, up_w_scale) = (quant.gate_w_scale, quant.up_w_scale);
        let shape = [H0, dims.i_tiles, dims.t];
        // Zeroed so the rows past I in the last tile hold no stale values.
        let up = nl::ndarray(shape, INTER_DTYPE, buffer = nl::sbuf);
        nisa::memset(up, 0.0);
        gate_up_projection_lhs_rhs_swap(x_sb, up_w, up, dims);
        finish_projection(up, up_w_scale, row, up_b, dims);
        clamp(up, act.up_clamp_upper_limit, act.up_clamp_lower_limit);
        if act.skip_gate_proj {
            apply_activation(up, up, act.activation_fn);
            nisa::tensor_copy(gu, up);
        } else {
            let gate = nl::ndarray(shape, INTER_DTYPE, buffer = nl::sbuf);
            nisa::memset(gate, 0.0);
            gate_up_projection_lhs_rhs_swap(x_sb, gate_w, gate, dims);
            finish_projection(gate, gate_w_scale, row, gate_b, dims);
            clamp(gate, act.gate_clamp_upper_limit, act.gate_clamp_lower_limit);
            apply_activation(gate, gate, act.activation_fn);
            nisa::tensor_tensor(gu, gate, up, nl::multiply);
        }
    }
}
