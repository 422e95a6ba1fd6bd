//! Helpers shared by the example kernels.

use nki::prelude::*;

/// Loads the `[rows, cols]` block of `src` starting at `(r0, c0)` into a new SBUF tile.
#[nki_helper]
pub fn load_block(src: Hbm, r0: i64, c0: i64, rows: i64, cols: i64) -> Sbuf {
    let tile = nl::ndarray([rows, cols], src.dtype(), buffer = nl::sbuf);
    nisa::dma_copy(tile, src[s![r0..r0 + rows, c0..c0 + cols]]);
    tile
}
