//! Element-wise addition of two `[N, M]` HBM tensors, tile by tile.

use nki::prelude::*;

/// Returns `a + b` for `[N, M]` tensors with `N` a multiple of 128: each
/// 128-row tile is loaded into SBUF, added on the Vector engine and stored.
/// Under LNC2 the two programs take alternate tiles.
#[nki_kernel]
pub fn tensor_add(a: Hbm, b: Hbm) -> Hbm {
    let [n, m] = a.shape();
    assert!(n % 128 == 0, "rows must be a multiple of 128, got {n}");
    assert_eq!(b.shape(), a.shape(), "a and b must have the same shape");
    let grid = nl::program_ndim() == 1;
    let shard = if grid { nl::program_id(0) } else { 0 };
    let shards = if grid { nl::num_programs(0) } else { 1 };
    let out = nl::ndarray([n, m], a.dtype(), buffer = nl::shared_hbm);
    for i in (shard..n / 128).step_by(shards) {
        let ta = nl::ndarray([128, m], a.dtype(), buffer = nl::sbuf);
        let tb = nl::ndarray([128, m], b.dtype(), buffer = nl::sbuf);
        nisa::dma_copy(ta, a[s![i * 128..(i + 1) * 128, ..]]);
        nisa::dma_copy(tb, b[s![i * 128..(i + 1) * 128, ..]]);
        nisa::tensor_tensor(ta, ta, tb, nl::add);
        nisa::dma_copy(out[s![i * 128..(i + 1) * 128, ..]], ta);
    }
    out
}
