//! Training-mode (inverted) dropout on the Vector Engine's seeded generator.

use super::tiles::load_block;
use nki::prelude::*;

/// Inverted dropout of an `[N, D]` tensor (`N` a multiple of 128): each element
/// is zeroed with probability `rate` (in `[0, 1)`) and the survivors are scaled
/// by `1 / (1 - rate)`, so the output's expectation is `x`.
///
/// 1. seed: the `[1, 1]` int32 or uint32 `seed` is copied to SBUF and `nisa.set_rng_seed`
///    seeds every Vector lane from it, so the mask depends on the seed alone;
/// 2. per 128-row tile, in order: `nisa.dropout` zeroes the elements whose
///    uniform draw is below `rate` (row `p` draws from lane `p`, continuing where
///    the previous tile stopped);
/// 3. one `tensor_scalar` multiplies the survivors by `1 / (1 - rate)` into the
///    output, rounding once to `x`'s dtype.
#[nki_kernel]
pub fn dropout(x: Hbm, #[dtypes(int32, uint32)] seed: Hbm, #[range(>= 0.0, < 1.0)] rate: f64) -> Hbm {
    let [n, d] = x.shape();
    // Rows per tile: one SBUF partition per row.
    let rows = nl::tile_size::pmax;
    assert!(n % rows == 0, "rows must be a multiple of 128, got {n}");
    let s = nl::ndarray([1, 1], seed.dtype());
    nisa::dma_copy(s, seed);
    nisa::set_rng_seed(s);
    let keep_scale = 1.0 / (1.0 - rate);
    let out = nl::ndarray([n, d], x.dtype(), buffer = nl::shared_hbm);
    for i in 0..n / rows {
        let t = load_block(x, i * rows, 0, rows, d);
        let kept = nl::ndarray([rows, d], x.dtype());
        nisa::dropout(kept, t, rate);
        let y = nl::ndarray([rows, d], x.dtype());
        nisa::tensor_scalar(y, kept, nl::multiply, keep_scale);
        nisa::dma_copy(out[s![i * rows..(i + 1) * rows, ..]], y);
    }
    out
}
