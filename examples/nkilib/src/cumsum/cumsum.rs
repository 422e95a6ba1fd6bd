//! The NKI library's `cumsum`: the inclusive cumulative sum along the last
//! dimension with the Vector Engine's scan.
//!
//! The input is viewed as 2-D, `[outer, H]` (`outer` the product of the leading
//! dims: `B` for `[B, H]`, `B·S` for `[B, S, H]`), and tiled:
//!
//! ```text
//! for each block of up to 128 rows (partitions):
//!     carry = 0                                   # [rows, 1] fp32
//!     for each tile of up to 2048 columns, in order:
//!         r = tensor_tensor_scan(ones, x_tile, carry, multiply, add)
//!             # r[j] = 1 · r[j-1] + x[j], from r[-1] = carry
//!         store r
//!         carry = r[:, last]                      # the running sum so far
//! ```
//!
//! The running sum stays in fp32 inside each scan and in the carry; each output
//! element is rounded once to `x`'s dtype. Because the carry is read back from
//! the rounded tile, a sum spanning several column tiles is rounded once per
//! tile boundary as well — as the library does.
//!
//! The library documents the kernel for `B` up to 2048, `S` up to 10 and `H` up
//! to 8192; any shape runs (the row blocks and column tiles just repeat).

use nki::prelude::*;

/// The library's one rule: the sum runs along the last dimension only (`axis`
/// is -1 or `rank - 1`).
pub const fn axis_is_last(axis: i64, rank: i64) -> bool {
    axis == -1 || axis == rank - 1
}

/// The rules of a `cumsum` call, as a compile-time check when its arguments are
/// constants.
///
/// ```
/// assert_eq!(nkilib::cumsum_config!(axis = 1, rank = 2), (1, 2));
/// ```
///
/// ```compile_fail
/// // Only the last dimension is supported.
/// let cfg = nkilib::cumsum_config!(axis = 0, rank = 2);
/// ```
#[macro_export]
macro_rules! cumsum_config {
    (axis = $axis:expr, rank = $rank:expr) => {{
        const _: () = assert!(
            $crate::cumsum::cumsum::axis_is_last($axis, $rank),
            "cumsum: only the last dimension is supported (axis must be -1 or rank - 1)"
        );
        ($axis, $rank)
    }};
}

/// The inclusive cumulative sum of `x` (`[B, H]` or `[B, S, H]`, any dtype)
/// along its last dimension: `out[..., j] = x[..., 0] + ... + x[..., j]`, in
/// `x`'s shape and dtype. `axis` must name the last dimension (-1 or
/// `rank - 1`).
///
/// Row blocks of up to 128 partitions; per block, column tiles of up to 2048
/// scanned in order with `nisa.tensor_tensor_scan` (`data0 = 1`,
/// `op0 = multiply`, `op1 = add`), the last column of each tile carried into the
/// next as the scan's `initial`.
#[nki_kernel]
pub fn cumsum(x: Hbm, #[default(-1)] axis: i64) -> Hbm {
    let rank = x.ndim();
    // The rule of `axis_is_last`, checked when the kernel is traced.
    assert!(axis == -1 || axis == rank - 1, "cumsum: axis must be -1 or the last dim {}, got axis = {axis}", rank - 1);
    let shape = x.shape();
    let last = shape[rank - 1];
    let mut outer = 1;
    for d in 0..rank - 1 {
        outer = outer * shape[d];
    }
    let x2 = x.reshape([outer, last]);
    let y = nl::ndarray(shape, x.dtype(), buffer = nl::shared_hbm);
    let y2 = y.reshape([outer, last]);
    // Partitions per row block, and columns per scan (the library's F_TILE_SIZE).
    let p_max = nl::tile_size::pmax;
    let f_tile = 2048;
    let ones = nl::ndarray([p_max, f_tile], nl::float32, buffer = nl::sbuf);
    nisa::memset(ones, 1.0);
    let carry = nl::ndarray([p_max, 1], nl::float32, buffer = nl::sbuf);
    for p in 0..outer.div_ceil(p_max) {
        let r0 = p * p_max;
        let rows = (outer - r0).min(p_max);
        nisa::memset(carry, 0.0);
        let f_tiles = last.div_ceil(f_tile);
        for f in nl::sequential_range(f_tiles) {
            let c0 = f * f_tile;
            let cols = (last - c0).min(f_tile);
            let data = nl::ndarray([p_max, f_tile], x.dtype(), buffer = nl::sbuf);
            nisa::dma_copy(data[s![0..rows, 0..cols]], x2[s![r0..r0 + rows, c0..c0 + cols]]);
            let sums = nl::ndarray([p_max, f_tile], x.dtype(), buffer = nl::sbuf);
            nisa::tensor_tensor_scan(
                sums[s![0..rows, 0..cols]],
                ones[s![0..rows, 0..cols]],
                data[s![0..rows, 0..cols]],
                carry[s![0..rows, ..]],
                nl::multiply,
                nl::add,
            );
            nisa::dma_copy(y2[s![r0..r0 + rows, c0..c0 + cols]], sums[s![0..rows, 0..cols]]);
            if f + 1 < f_tiles {
                nisa::tensor_copy(carry[s![0..rows, ..]], sums[s![0..rows, cols - 1..cols]]);
            }
        }
    }
    y
}
