//! Row-wise softmax.

use super::tiles::{divide_rows, load_block, neg_row_max, row_tiled_output};
use nki::prelude::*;

/// `softmax(x)` along the rows of an `[N, M]` tensor (`N` a multiple of 128).
///
/// Per 128-row tile: the negated row max (one Vector-engine reduction), then
/// `exp(x - max)` with its row sums in one Scalar-engine pass, then a multiply by
/// the reciprocal of the sums. Statistics stay in fp32.
#[nki_kernel]
pub fn softmax(x: Hbm) -> Hbm {
    let [n, m] = x.shape();
    let out = row_tiled_output(x);
    for i in 0..n / 128 {
        let t = load_block(x, i * 128, 0, 128, m);
        let neg_max = neg_row_max(t);
        let e = nl::ndarray([128, m], nl::float32);
        let sums = nl::ndarray([128, 1], nl::float32);
        nisa::activation_reduce(e, nl::exp, t, nl::add, sums, bias = neg_max);
        let y = divide_rows(e, sums, x.dtype());
        nisa::dma_copy(out[s![i * 128..(i + 1) * 128, ..]], y);
    }
    out
}
