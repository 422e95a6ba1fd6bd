//! Row cumulative sum with the Vector Engine's scan.

use super::tiles::load_block;
use crate::prelude::*;

/// The inclusive cumulative sum along the rows of an `[N, M]` tensor (`N` a
/// multiple of 128): `out[:, j] = x[:, 0] + ... + x[:, j]`.
///
/// Per 128-row tile, one `nisa.tensor_tensor_scan` with `data0 = 1` and
/// `op0 = multiply`, `op1 = add`: `r[j] = 1 * r[j-1] + x[j]` from `r[-1] = 0`.
/// The running sum stays in fp32; only the output takes `x`'s dtype.
#[nki_kernel]
pub fn cumsum(x: Hbm) -> Hbm {
    let [n, m] = x.shape();
    assert!(n % 128 == 0, "rows must be a multiple of 128, got {n}");
    let out = nl::ndarray([n, m], x.dtype(), buffer = nl::shared_hbm);
    let ones = nl::ndarray([128, m], nl::float32);
    nisa::memset(ones, 1.0);
    for i in 0..n / 128 {
        let t = load_block(x, i * 128, 0, 128, m);
        let sums = nl::ndarray([128, m], x.dtype());
        nisa::tensor_tensor_scan(sums, ones, t, 0.0, nl::multiply, nl::add);
        nisa::dma_copy(out[s![i * 128..(i + 1) * 128, ..]], sums);
    }
    out
}
