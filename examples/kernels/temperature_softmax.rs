//! Row-wise softmax at a temperature, with the trn3 Scalar Engine's `activate2`.

use super::tiles::{divide_rows, load_block, neg_row_max, row_tiled_output};
use nki::prelude::*;

/// `softmax(x / temperature)` along the rows of an `[N, M]` tensor (`N` a
/// multiple of 128) on trn3, given `inv_temp = 1 / temperature > 0`.
///
/// Per 128-row tile:
/// 1. the negated row max (one Vector Engine reduction), scaled by `inv_temp`
///    into the bias column `-max / T`;
/// 2. one `nisa.activate2` pass: `exp(x * inv_temp + (-max / T))` through its
///    `(multiply, add)` stage, summing each row into the Scalar Engine
///    accumulators (`reduce_cmd = reset_reduce`) and out to `sums`;
/// 3. a multiply by the reciprocal of the sums.
///
/// Statistics stay in fp32; only the probabilities take `x`'s dtype.
#[nki_kernel(target = "trn3")]
pub fn temperature_softmax(x: Hbm, #[range(> 0.0)] inv_temp: f64) -> Hbm {
    let [n, m] = x.shape();
    let out = row_tiled_output(x);
    for i in 0..n / 128 {
        let t = load_block(x, i * 128, 0, 128, m);
        let neg_max = neg_row_max(t);
        let bias = nl::ndarray([128, 1], nl::float32);
        nisa::tensor_scalar(bias, neg_max, nl::multiply, inv_temp);
        let e = nl::ndarray([128, m], nl::float32);
        let sums = nl::ndarray([128, 1], nl::float32);
        nisa::activate2(
            e,
            nl::exp,
            t,
            inv_temp,
            bias,
            nl::multiply,
            nl::add,
            reduce_op = nl::add,
            reduce_res = sums,
            reduce_cmd = nisa::reduce_cmd::reset_reduce,
        );
        let y = divide_rows(e, sums, x.dtype());
        nisa::dma_copy(out[s![i * 128..(i + 1) * 128, ..]], y);
    }
    out
}
