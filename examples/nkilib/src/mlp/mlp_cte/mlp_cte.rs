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
//! The library's clamps and its optimized down-projection layout belong to
//! its decode path only; its quantized forms are refused here (see
//! [`mlp_violation`](crate::mlp::mlp_parameters::mlp_violation)).

pub use kernel::*;

/// The context-encoding driver.
#[nki::nki_module]
pub mod kernel {
    use crate::mlp::mlp_cte::mlp_cte_constants::{MLPCTEConstants, MLPCTEVectors, P_MAX, PSUM_FMAX};
    use crate::mlp::mlp_cte::mlp_cte_norm::apply_normalization_if_necessary;
    use crate::mlp::mlp_cte::mlp_cte_projection::{
        perform_down_projection, perform_gate_up_projection, sync_down_proj_results_across_int_dim,
    };
    use crate::mlp::mlp_cte::mlp_cte_sharding::calculate_sharding;
    use crate::mlp::mlp_cte::mlp_cte_tensor_io::{load_hidden_tensor_tile, load_mlp_cte_vectors, store_hidden_tensor_tile};
    use crate::mlp::mlp_cte::mlp_cte_transpose::{transpose_intermediate_tensor_tile, transpose_source_tensor_tile};
    use crate::mlp::mlp_parameters::{MLPActivationParameters, MLPTensors};
    pub use crate::utils::common_types::{ActFnType, NormType};
    use nki::prelude::*;

    /// One tile of `rows` token rows from row `r0`: the loop body of the
    /// module docs.
    #[nki_helper]
    pub fn mlp_cte_tile(
        hidden: Hbm,
        w: MLPTensors,
        output: Hbm,
        stored: Option<Hbm>,
        normalization_type: NormType,
        act: MLPActivationParameters,
        vec: MLPCTEVectors,
        cst: MLPCTEConstants,
        r0: i64,
        rows: i64,
    ) {
        let cdt = cst.compute_dtype;
        let x = nl::ndarray([P_MAX, cst.h], cdt, buffer = nl::sbuf);
        load_hidden_tensor_tile(hidden, w.fused_add_tensor, stored, x, cst, r0, rows);
        apply_normalization_if_necessary(x, normalization_type, vec, cst, rows);
        let x_t = nl::ndarray([P_MAX, cst.h / P_MAX, P_MAX], cdt, buffer = nl::sbuf);
        transpose_source_tensor_tile(x, x_t, vec, cst, rows);
        let gu = nl::ndarray([P_MAX, cst.i], cdt, buffer = nl::sbuf);
        for ic in nl::affine_range(cst.i.div_ceil(PSUM_FMAX)) {
            perform_gate_up_projection(x_t, w.gate_proj_weights_tensor, w.up_proj_weights_tensor, gu, act, vec, cst, ic * PSUM_FMAX, rows);
        }
        let gu_t = nl::ndarray([P_MAX, cst.i.div_ceil(P_MAX), P_MAX], cdt, buffer = nl::sbuf);
        transpose_intermediate_tensor_tile(gu, gu_t, cst, rows);
        perform_down_projection(gu_t, w.down_proj_weights_tensor, x, vec, cst, rows);
        if cst.shard_on_intermediate {
            sync_down_proj_results_across_int_dim(x, cst, rows);
        }
        store_hidden_tensor_tile(x, output, cst, r0, rows);
    }

    /// The context-encoding MLP of `hidden` `[T, H]` into `output` `[T, H]`
    /// (and, when given, the residual sum into `stored`).
    #[nki_helper]
    pub fn mlp_cte(
        hidden: Hbm,
        w: MLPTensors,
        output: Hbm,
        stored: Option<Hbm>,
        normalization_type: NormType,
        eps: f64,
        act: MLPActivationParameters,
    ) {
        let [t, h] = hidden.shape();
        let i = w.down_proj_weights_tensor.shape()[0];
        let has_bias = w.gate_proj_bias_tensor.is_some() || w.up_proj_bias_tensor.is_some() || w.down_proj_bias_tensor.is_some();
        let cdt = if hidden.dtype() == nl::float32 { nl::bfloat16 } else { hidden.dtype() };
        let cst: MLPCTEConstants = calculate_sharding(t, h, i, has_bias, cdt);
        let vec = load_mlp_cte_vectors(w, eps, cst);
        for tile in nl::sequential_range(cst.t.div_ceil(P_MAX)) {
            let r0 = cst.t_offset + tile * P_MAX;
            let rows = (cst.t_offset + cst.t - r0).min(P_MAX);
            mlp_cte_tile(hidden, w, output, stored, normalization_type, act, vec, cst, r0, rows);
        }
    }
}
