//! Helpers shared by the example kernels.

use nki::prelude::*;

/// The HBM output of a kernel that works on `x` 128 rows at a time: `x`'s
/// shape and dtype, once `x`'s rows are checked to fill whole 128-row tiles.
#[nki_helper]
pub fn row_tiled_output(x: Hbm) -> Hbm {
    let [n, m] = x.shape();
    assert!(n % 128 == 0, "rows must be a multiple of 128, got {n}");
    nl::ndarray([n, m], x.dtype(), buffer = nl::shared_hbm)
}

/// Loads the `[rows, cols]` block of `src` starting at `(r0, c0)` into a new SBUF tile.
#[nki_helper]
pub fn load_block(src: Hbm, r0: i64, c0: i64, rows: i64, cols: i64) -> Sbuf {
    let tile = nl::ndarray([rows, cols], src.dtype(), buffer = nl::sbuf);
    nisa::dma_copy(tile, src[s![r0..r0 + rows, c0..c0 + cols]]);
    tile
}

/// The negated maximum of each row of an SBUF tile, `[rows, 1]` in fp32: the
/// bias that shifts a row's exponentials below 1 before a softmax.
#[nki_helper]
pub fn neg_row_max(t: Sbuf) -> Sbuf {
    let neg_max = nl::ndarray([t.shape()[0], 1], nl::float32);
    nisa::tensor_reduce(neg_max, nl::maximum, t, 1, negate = true);
    neg_max
}

/// `e / sums` row by row in `dtype`: one reciprocal of the `[rows, 1]` sums, then
/// one multiply, as a softmax finishes.
#[nki_helper]
pub fn divide_rows(e: Sbuf, sums: Sbuf, dtype: Dtype) -> Sbuf {
    let inv = nl::ndarray([e.shape()[0], 1], nl::float32);
    nisa::reciprocal(inv, sums);
    let y = nl::ndarray(e.shape(), dtype);
    nisa::tensor_scalar(y, e, nl::multiply, inv);
    y
}
