//! Top-k per row with the Vector Engine's top-8 search.

use super::tiles::load_block;
use nki::prelude::*;

/// The `k` largest values of each row of an `[N, D]` tensor, in descending
/// order, and their column indices (`uint32`); `N` a multiple of 128, `k` a
/// multiple of 8, `8 <= D <= 16384`.
///
/// Per 128-row tile, `k / 8` rounds on a working copy of the rows:
/// 1. `nisa.max8`: the 8 largest values left in each row;
/// 2. `nisa.nc_find_index8`: their columns (a value found twice takes two
///    columns, in order);
/// 3. `nisa.nc_match_replace8`: knock them out with the lowest float, so the
///    next round finds the next 8.
///
/// Values keep `x`'s dtype; the search compares in fp32.
#[nki_kernel]
pub fn topk(x: Hbm, #[range(> 0)] k: i64) -> (Hbm, Hbm) {
    let [n, d] = x.shape();
    assert!(n % 128 == 0, "rows must be a multiple of 128, got {n}");
    assert!(k % 8 == 0 && k <= d, "k must be a positive multiple of 8 and at most the row length {d}, got {k}");
    let values = nl::ndarray([n, k], x.dtype(), buffer = nl::shared_hbm);
    let indices = nl::ndarray([n, k], nl::uint32, buffer = nl::shared_hbm);
    for i in 0..n / 128 {
        let work = load_block(x, i * 128, 0, 128, d);
        let top = nl::ndarray([128, k], x.dtype());
        let idx = nl::ndarray([128, k], nl::uint32);
        for r in 0..k / 8 {
            let cols = nl::ds(r * 8, 8);
            nisa::max8(top[s![.., cols]], work);
            nisa::nc_find_index8(idx[s![.., cols]], work, top[s![.., cols]]);
            nisa::nc_match_replace8(work, work, top[s![.., cols]], f32::MIN);
        }
        nisa::dma_copy(values[s![i * 128..(i + 1) * 128, ..]], top);
        nisa::dma_copy(indices[s![i * 128..(i + 1) * 128, ..]], idx);
    }
    (values, indices)
}
