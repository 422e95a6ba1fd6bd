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
//! library's loads do); biases are held in it.

pub use kernel::*;

/// The projection phases.
#[nki::nki_module]
pub mod kernel {
    use crate::mlp::mlp_cte::mlp_cte_constants::{
        ACT_DTYPE, MLPCTEConstants, MLPCTEVectors, P_MAX, PIPE_ID_INT_SHARD, PSUM_FMAX, SRC_PROJ_H_TILE,
    };
    use crate::mlp::mlp_parameters::MLPActivationParameters;
    pub use crate::utils::common_types::ActFnType;
    use crate::utils::kernel_helpers::apply_activation;
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
            let w_sb = nl::ndarray([P_MAX, sub, PSUM_FMAX], cst.compute_dtype, buffer = nl::sbuf);
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

    /// The gated product of one chunk of `cols` intermediate columns from
    /// `i0` into `gu[:rows, i0 ..]` (the module docs' first loop body).
    #[nki_helper]
    pub fn perform_gate_up_projection(
        x_t: Sbuf,
        gate_w: Hbm,
        up_w: Hbm,
        gu: Sbuf,
        act: MLPActivationParameters,
        vec: MLPCTEVectors,
        cst: MLPCTEConstants,
        i0: i64,
        rows: i64,
    ) {
        let cols = (cst.i - i0).min(PSUM_FMAX);
        let dst = gu[s![0..rows, i0..i0 + cols]];
        let up = nl::ndarray([P_MAX, PSUM_FMAX], ACT_DTYPE, buffer = nl::psum);
        if act.skip_gate_proj {
            project_source_tensor_tile(x_t, up_w, up, cst, i0, cols, rows);
            apply_source_projection_activation(dst, up, vec.up_bias, act.activation_fn, i0, cols, rows);
        } else {
            let gate = nl::ndarray([P_MAX, PSUM_FMAX], ACT_DTYPE, buffer = nl::psum);
            project_source_tensor_tile(x_t, gate_w, gate, cst, i0, cols, rows);
            let g = nl::ndarray([P_MAX, PSUM_FMAX], cst.compute_dtype, buffer = nl::sbuf);
            apply_source_projection_activation(g[s![0..rows, 0..cols]], gate, vec.gate_bias, act.activation_fn, i0, cols, rows);
            project_source_tensor_tile(x_t, up_w, up, cst, i0, cols, rows);
            let up_bias = vec.up_bias;
            if let Some(b) = up_bias {
                let u = nl::ndarray([P_MAX, PSUM_FMAX], cst.compute_dtype, buffer = nl::sbuf);
                nisa::tensor_tensor(u[s![0..rows, 0..cols]], up[s![0..rows, 0..cols]], b[s![0..rows, i0..i0 + cols]], nl::add);
                nisa::tensor_tensor(dst, g[s![0..rows, 0..cols]], u[s![0..rows, 0..cols]], nl::multiply);
            } else {
                nisa::tensor_tensor(dst, g[s![0..rows, 0..cols]], up[s![0..rows, 0..cols]], nl::multiply);
            }
        }
    }

    /// `o[:rows, :]` = `gu_t`'s rows projected by this program's rows of
    /// `down_w` `[I, H]`, plus the down bias when this program adds it, in
    /// the compute dtype.
    #[nki_helper]
    pub fn perform_down_projection(gu_t: Sbuf, down_w: Hbm, o: Sbuf, vec: MLPCTEVectors, cst: MLPCTEConstants, rows: i64) {
        let (h, down_bias) = (cst.h, vec.down_bias);
        for hc in nl::affine_range(h.div_ceil(PSUM_FMAX)) {
            let c0 = hc * PSUM_FMAX;
            let cols = (h - c0).min(PSUM_FMAX);
            let acc = nl::ndarray([P_MAX, PSUM_FMAX], ACT_DTYPE, buffer = nl::psum);
            for k in nl::sequential_range(cst.i.div_ceil(P_MAX)) {
                let k0 = k * P_MAX;
                let isz = (cst.i - k0).min(P_MAX);
                let w_sb = nl::ndarray([P_MAX, PSUM_FMAX], cst.compute_dtype, buffer = nl::sbuf);
                let r0 = cst.i_offset + k0;
                nisa::dma_copy(w_sb[s![0..isz, 0..cols]], down_w[s![r0..r0 + isz, c0..c0 + cols]]);
                nisa::nc_matmul(acc[s![0..rows, 0..cols]], gu_t[s![0..isz, k, 0..rows]], w_sb[s![0..isz, 0..cols]]);
            }
            if let Some(b) = down_bias {
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
