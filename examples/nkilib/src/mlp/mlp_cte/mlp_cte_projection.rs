//! The context-encoding path's projections: the library's
//! `mlp_cte_projection` (with its `mlp_cte_utils` bias, activation and
//! product steps), on one tile of up to 128 token rows.
//!
//! ```text
//! for each 512-column chunk of this program's I columns:   (perform_gate_up_projection)
//!     gate = Σ_c x_t[:, c, :]ᵀ @ W_gate[c rows, chunk]        # PSUM, fp32, c ascending
//!     g = act(gate)  or  act(round(gate + gate_bias))          # compute dtype
//!     up = the same sum with W_up
//!     gu = g · up  or  g · round(up + up_bias)                 # compute dtype
//!     (skip_gate_proj: gu = act(up)  or  act(round(up + up_bias)))
//! for each 512-column chunk of H:                           (perform_down_projection)
//!     o = Σ_k gu_t[:, k, :]ᵀ @ W_down[k rows, chunk]          # PSUM, fp32, 128-row tiles
//!     o = round(o (+ down_bias))                               # compute dtype
//! (I sharded) o[:, my half] += the other program's partial  # sendrecv, compute dtype
//! ```
//!
//! Weights are loaded in the compute dtype (a cast for fp32 weights, as the
//! library's loads do); biases are held in it. fp8 weights stay fp8 and
//! multiply fp8 rows; the fp32 sums are dequantized on their way out of
//! PSUM, as the library's quantized branches do (`s` the scales of
//! [`MLPCTEQuantScales`], `s_x` a `ROW` tile's per-row hidden scale,
//! `dq` the gated product's per-row scale from its quantization):
//!
//! ```text
//! STATIC: g = act(gate · s_gate);  gu = round(g · up) · s_up;  o = o_sum · s_down
//! ROW:    g = act(round(gate · s_gate[:, cols]) · s_x)
//!         gu = round(round(g · up) · s_up[:, cols]) · s_x
//!         o = round(o_sum · s_down[:, cols]) · dq
//! (skip_gate_proj: gu = the gate formula with the up sums and scales)
//! ```

pub use kernel::*;

/// The projection phases.
#[nki::nki_module]
pub mod kernel {
    use crate::mlp::mlp_cte::mlp_cte_constants::{
        ACT_DTYPE, MLPCTEConstants, MLPCTEQuantScales, MLPCTEVectors, P_MAX, PIPE_ID_INT_SHARD, PSUM_FMAX, SRC_PROJ_H_TILE,
    };
    use crate::mlp::mlp_parameters::MLPActivationParameters;
    pub use crate::utils::common_types::{ActFnType, QuantizationType};
    use crate::utils::kernel_helpers::{apply_activation, apply_scaled_activation};
    use nki::prelude::*;

    /// `acc[:rows, :cols]` (fp32 PSUM) = `Σ_c x_t[:, c, :rows]ᵀ @ w[c rows,
    /// i0 .. i0 + cols]` over the hidden blocks in order, the weights loaded
    /// `SRC_PROJ_H_TILE` rows at a time.
    #[nki_helper]
    pub fn project_source_tensor_tile(x_t: Sbuf, w: Hbm, acc: Psum, cst: MLPCTEConstants, i0: i64, cols: i64, rows: i64) {
        let sub = SRC_PROJ_H_TILE / P_MAX;
        let it = cst.i_total;
        for ht in nl::sequential_range(cst.h.div_ceil(SRC_PROJ_H_TILE)) {
            let nsub = ((cst.h - ht * SRC_PROJ_H_TILE) / P_MAX).min(sub);
            let w_sb = nl::ndarray([P_MAX, sub, PSUM_FMAX], cst.src_proj_quant_dtype, buffer = nl::sbuf);
            nisa::dma_copy(
                w_sb[s![.., 0..nsub, 0..cols]],
                w.ap([[it, P_MAX], [P_MAX * it, nsub], [1, cols]], offset = ht * SRC_PROJ_H_TILE * it + cst.i_offset + i0),
            );
            for c in nl::sequential_range(nsub) {
                nisa::nc_matmul(acc[s![0..rows, 0..cols]], x_t[s![.., ht * sub + c, 0..rows]], w_sb[s![.., c, 0..cols]]);
            }
        }
    }

    /// `dst = act(acc)`, or `act(round(acc + bias))` with a bias (this
    /// program's columns `i0 ..`), in `dst`'s dtype.
    #[nki_helper]
    pub fn apply_source_projection_activation(dst: Sbuf, acc: Psum, bias: Option<Sbuf>, act_fn: ActFnType, i0: i64, cols: i64, rows: i64) {
        if let Some(b) = bias {
            nisa::tensor_tensor(dst, acc[s![0..rows, 0..cols]], b[s![0..rows, i0..i0 + cols]], nl::add);
            apply_activation(dst, dst, act_fn);
        } else {
            apply_activation(dst, acc[s![0..rows, 0..cols]], act_fn);
        }
    }

    /// `dst = act(dequantized acc)`: `STATIC` `act(acc · s)`, `ROW`
    /// `act(round(acc · s[:, i0 ..]) · s_x)` (`x_scale` given exactly for
    /// `ROW`).
    #[nki_helper]
    pub fn apply_dequantized_activation(
        dst: Sbuf,
        acc: Psum,
        w_scale: Sbuf,
        x_scale: Option<Sbuf>,
        act_fn: ActFnType,
        i0: i64,
        cols: i64,
        rows: i64,
    ) {
        if let Some(xs) = x_scale {
            nisa::tensor_tensor(dst, acc[s![0..rows, 0..cols]], w_scale[s![0..rows, i0..i0 + cols]], nl::multiply);
            apply_scaled_activation(dst, dst, act_fn, xs[s![0..rows, ..]]);
        } else {
            apply_scaled_activation(dst, acc[s![0..rows, 0..cols]], act_fn, w_scale[s![0..rows, ..]]);
        }
    }

    /// The gated product `dst` dequantized in place by the up projection's
    /// scales: `STATIC` `dst · s`, `ROW` `round(dst · s[:, i0 ..]) · s_x`.
    #[nki_helper]
    pub fn dequantize_gated_product(dst: Sbuf, w_scale: Sbuf, x_scale: Option<Sbuf>, i0: i64, cols: i64, rows: i64) {
        if let Some(xs) = x_scale {
            nisa::tensor_tensor(dst, dst, w_scale[s![0..rows, i0..i0 + cols]], nl::multiply);
            nisa::activation(dst, nl::copy, dst, scale = xs[s![0..rows, ..]]);
        } else {
            nisa::activation(dst, nl::copy, dst, scale = w_scale[s![0..rows, ..]]);
        }
    }

    /// `dst = act(sums)` of one projection: dequantized when `w_scale` is
    /// given, else with the bias when there is one.
    #[nki_helper]
    pub fn activate_projection(
        dst: Sbuf,
        acc: Psum,
        w_scale: Option<Sbuf>,
        x_scale: Option<Sbuf>,
        bias: Option<Sbuf>,
        act_fn: ActFnType,
        i0: i64,
        cols: i64,
        rows: i64,
    ) {
        if let Some(ws) = w_scale {
            apply_dequantized_activation(dst, acc, ws, x_scale, act_fn, i0, cols, rows);
        } else {
            apply_source_projection_activation(dst, acc, bias, act_fn, i0, cols, rows);
        }
    }

    /// The gated product of one chunk of `cols` intermediate columns from
    /// `i0` into `gu[:rows, i0 ..]` (the module docs' first loop body);
    /// `x_scale` is a `ROW` tile's per-row hidden scale.
    #[nki_helper]
    pub fn perform_gate_up_projection(
        x_t: Sbuf,
        gate_w: Hbm,
        up_w: Hbm,
        gu: Sbuf,
        act: MLPActivationParameters,
        vec: MLPCTEVectors,
        scales: MLPCTEQuantScales,
        x_scale: Option<Sbuf>,
        cst: MLPCTEConstants,
        i0: i64,
        rows: i64,
    ) {
        let cols = (cst.i - i0).min(PSUM_FMAX);
        let dst = gu[s![0..rows, i0..i0 + cols]];
        let up = nl::ndarray([P_MAX, PSUM_FMAX], ACT_DTYPE, buffer = nl::psum);
        let (gate_scale, up_scale) = (scales.gate, scales.up);
        if act.skip_gate_proj {
            project_source_tensor_tile(x_t, up_w, up, cst, i0, cols, rows);
            activate_projection(dst, up, up_scale, x_scale, vec.up_bias, act.activation_fn, i0, cols, rows);
        } else {
            let gate = nl::ndarray([P_MAX, PSUM_FMAX], ACT_DTYPE, buffer = nl::psum);
            project_source_tensor_tile(x_t, gate_w, gate, cst, i0, cols, rows);
            let g = nl::ndarray([P_MAX, PSUM_FMAX], cst.compute_dtype, buffer = nl::sbuf);
            activate_projection(g[s![0..rows, 0..cols]], gate, gate_scale, x_scale, vec.gate_bias, act.activation_fn, i0, cols, rows);
            project_source_tensor_tile(x_t, up_w, up, cst, i0, cols, rows);
            let up_bias = vec.up_bias;
            if let Some(b) = up_bias {
                let u = nl::ndarray([P_MAX, PSUM_FMAX], cst.compute_dtype, buffer = nl::sbuf);
                nisa::tensor_tensor(u[s![0..rows, 0..cols]], up[s![0..rows, 0..cols]], b[s![0..rows, i0..i0 + cols]], nl::add);
                nisa::tensor_tensor(dst, g[s![0..rows, 0..cols]], u[s![0..rows, 0..cols]], nl::multiply);
            } else {
                nisa::tensor_tensor(dst, g[s![0..rows, 0..cols]], up[s![0..rows, 0..cols]], nl::multiply);
            }
            if let Some(us) = up_scale {
                dequantize_gated_product(dst, us, x_scale, i0, cols, rows);
            }
        }
    }

    /// `o[:rows, c0 ..]` from the fp32 sums `acc` of fp8 operands: `STATIC`
    /// `acc · s`, `ROW` `round(acc · s_w[:, c0 ..]) · dq` (`dq` the gated
    /// product's row scales).
    #[nki_helper]
    pub fn dequantize_down_projection(o: Sbuf, acc: Psum, scales: MLPCTEQuantScales, dq: Option<Sbuf>, c0: i64, cols: i64, rows: i64) {
        let (down, row_w_scale) = (scales.down, scales.down_row_w_scale);
        let dst = o[s![0..rows, c0..c0 + cols]];
        if let Some(ds) = down {
            nisa::activation(dst, nl::copy, acc[s![0..rows, 0..cols]], scale = ds[s![0..rows, ..]]);
        }
        if let Some(ws) = row_w_scale {
            if let Some(rs) = dq {
                let ws_sb = nl::ndarray([P_MAX, PSUM_FMAX], ACT_DTYPE, buffer = nl::sbuf);
                nisa::dma_copy(ws_sb[s![0..rows, 0..cols]], ws[s![0..rows, c0..c0 + cols]]);
                nisa::tensor_tensor(dst, acc[s![0..rows, 0..cols]], ws_sb[s![0..rows, 0..cols]], nl::multiply);
                nisa::activation(dst, nl::copy, dst, scale = rs[s![0..rows, ..]]);
            }
        }
    }

    /// `o[:rows, :]` = `gu_t`'s rows projected by this program's rows of
    /// `down_w` `[I, H]`, plus the down bias when this program adds it (or
    /// dequantized, for fp8 operands, `dq` a `ROW` product's row scales),
    /// in the compute dtype.
    #[nki_helper]
    pub fn perform_down_projection(
        gu_t: Sbuf,
        down_w: Hbm,
        o: Sbuf,
        vec: MLPCTEVectors,
        scales: MLPCTEQuantScales,
        dq: Option<Sbuf>,
        cst: MLPCTEConstants,
        rows: i64,
    ) {
        let (h, down_bias) = (cst.h, vec.down_bias);
        let quantized = scales.quantization_type != QuantizationType::NONE;
        for hc in nl::affine_range(h.div_ceil(PSUM_FMAX)) {
            let c0 = hc * PSUM_FMAX;
            let cols = (h - c0).min(PSUM_FMAX);
            let acc = nl::ndarray([P_MAX, PSUM_FMAX], ACT_DTYPE, buffer = nl::psum);
            for k in nl::sequential_range(cst.i.div_ceil(P_MAX)) {
                let k0 = k * P_MAX;
                let isz = (cst.i - k0).min(P_MAX);
                let w_sb = nl::ndarray([P_MAX, PSUM_FMAX], cst.down_proj_quant_dtype, buffer = nl::sbuf);
                let r0 = cst.i_offset + k0;
                nisa::dma_copy(w_sb[s![0..isz, 0..cols]], down_w[s![r0..r0 + isz, c0..c0 + cols]]);
                nisa::nc_matmul(acc[s![0..rows, 0..cols]], gu_t[s![0..isz, k, 0..rows]], w_sb[s![0..isz, 0..cols]]);
            }
            if quantized {
                dequantize_down_projection(o, acc, scales, dq, c0, cols, rows);
            } else if let Some(b) = down_bias {
                nisa::tensor_tensor(o[s![0..rows, c0..c0 + cols]], acc[s![0..rows, 0..cols]], b[s![0..rows, c0..c0 + cols]], nl::add);
            } else {
                nisa::tensor_copy(o[s![0..rows, c0..c0 + cols]], acc[s![0..rows, 0..cols]]);
            }
        }
    }

    /// The two programs of an `I`-sharded call each hold a partial `o` of
    /// every column: each sends the other's half and adds the half it
    /// receives to its own (in the compute dtype).
    #[nki_helper]
    pub fn sync_down_proj_results_across_int_dim(o: Sbuf, cst: MLPCTEConstants, rows: i64) {
        let half = cst.h / cst.programs;
        let other = 1 - cst.program_id;
        let (mine, theirs) = (cst.program_id * half, other * half);
        let remote = nl::ndarray([P_MAX, half], cst.compute_dtype, buffer = nl::sbuf);
        nisa::sendrecv(o[s![0..rows, theirs..theirs + half]], remote[s![0..rows, ..]], other, other, PIPE_ID_INT_SHARD);
        nisa::tensor_tensor(o[s![0..rows, mine..mine + half]], o[s![0..rows, mine..mine + half]], remote[s![0..rows, ..]], nl::add);
    }
}
