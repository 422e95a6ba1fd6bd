//! The context-encoding path's transposes: the library's
//! `mlp_cte_transpose`. The projections contract over the partitions, so a
//! tile of token rows `[128, C]` becomes `[128, C/128, 128]` (column `c` at
//! partition `c % 128`, block `c / 128`) through PSUM by the PE array
//! (bit-exact, in the tile's dtype: the compute dtype, or fp8 for quantized
//! rows and the requantized product); the hidden rows take the norm's gamma
//! and beta on the way out of PSUM (fp32, rounded once to the compute dtype).

pub use kernel::*;

/// The transposes.
#[nki::nki_module]
pub mod kernel {
    use crate::mlp::mlp_cte::mlp_cte_constants::{MLPCTEConstants, MLPCTEVectors, P_MAX};
    use nki::prelude::*;

    /// `x` `[128, H]` (its first `rows` rows) into `x_t` `[128, H/128, 128]`,
    /// times gamma plus beta when the norm has them.
    #[nki_helper]
    pub fn transpose_source_tensor_tile(x: Sbuf, x_t: Sbuf, vec: MLPCTEVectors, cst: MLPCTEConstants, rows: i64) {
        let (gamma, beta) = (vec.gamma, vec.beta);
        for c in nl::affine_range(cst.h / P_MAX) {
            let c0 = c * P_MAX;
            let ps = nl::ndarray([P_MAX, P_MAX], x.dtype(), buffer = nl::psum);
            nisa::nc_transpose(ps[s![.., 0..rows]], x[s![0..rows, c0..c0 + P_MAX]]);
            let dst = x_t[s![.., c, 0..rows]];
            if let Some(g) = gamma {
                if let Some(b) = beta {
                    nisa::tensor_scalar(
                        dst,
                        ps[s![.., 0..rows]],
                        nl::multiply,
                        g[s![.., c..c + 1]],
                        op1 = nl::add,
                        operand1 = b[s![.., c..c + 1]],
                    );
                } else {
                    nisa::tensor_scalar(dst, ps[s![.., 0..rows]], nl::multiply, g[s![.., c..c + 1]]);
                }
            } else {
                nisa::tensor_copy(dst, ps[s![.., 0..rows]]);
            }
        }
    }

    /// `gu` `[128, I]` (this program's columns, first `rows` rows) into
    /// `gu_t` `[128, I/128, 128]` (the last block partial).
    #[nki_helper]
    pub fn transpose_intermediate_tensor_tile(gu: Sbuf, gu_t: Sbuf, cst: MLPCTEConstants, rows: i64) {
        for k in nl::affine_range(cst.i.div_ceil(P_MAX)) {
            let k0 = k * P_MAX;
            let isz = (cst.i - k0).min(P_MAX);
            let ps = nl::ndarray([P_MAX, P_MAX], gu.dtype(), buffer = nl::psum);
            nisa::nc_transpose(ps[s![0..isz, 0..rows]], gu[s![0..rows, k0..k0 + isz]]);
            nisa::tensor_copy(gu_t[s![0..isz, k, 0..rows]], ps[s![0..isz, 0..rows]]);
        }
    }
}
