//! Row-wise log-sum-exp over column blocks, each block and its statistics kept
//! in a list.
//!
//! Algorithm: `out[r] = m[r] + ln Σ_j exp(x[r, j] - m[r])`, `m[r] = max_j x[r, j]`,
//! in two passes over the `M / BLOCK` column blocks of each `TILE`-row tile. The
//! first loads every block (a list of SBUF tiles) and reduces each one's row
//! maxima (a list of `[TILE, 1]` statistics, one per block, as a streaming
//! attention kernel keeps them); their maximum is `m`. The second
//! exponentiates each block against `m`, again keeping one row-sum column per
//! block, and the sums combine into the result. The lists are
//! `(0..n).map(..).collect()`, emitted as the list comprehensions NKI kernels
//! write.
//!
//! Loops: row tiles (trace-time) › column blocks, once per pass. Tiling: `TILE`
//! rows (partitions), `BLOCK` columns per block; statistics in fp32.

use nki::prelude::*;

pub use tiled::*;

/// The kernel with its tile constants and phase helpers.
#[nki_module]
pub mod tiled {
    use super::super::tiles::load_block;
    use nki::prelude::*;

    /// Rows per tile: the partitions of one SBUF tile.
    pub const TILE: i64 = 128;
    /// Columns per block.
    pub const BLOCK: i64 = 512;

    /// Phase 1: the row maxima of each `[TILE, BLOCK]` block, one `[TILE, 1]`
    /// column per block.
    #[nki_helper]
    pub fn block_maxima(blocks: Vec<Sbuf>) -> Vec<Sbuf> {
        let maxima: Vec<Sbuf> = (0..blocks.len()).map(|_| nl::ndarray([TILE, 1], nl::float32)).collect();
        for b in 0..blocks.len() {
            nisa::tensor_reduce(maxima[b], nl::maximum, blocks[b], 1);
        }
        maxima
    }

    /// Phase 2: the row sums of `exp(block + bias)` of each block, one `[TILE, 1]`
    /// column per block.
    #[nki_helper]
    pub fn block_sums(blocks: Vec<Sbuf>, bias: Sbuf) -> Vec<Sbuf> {
        let sums: Vec<Sbuf> = (0..blocks.len()).map(|_| nl::ndarray([TILE, 1], nl::float32)).collect();
        for b in 0..blocks.len() {
            let e = nl::ndarray([TILE, BLOCK], nl::float32);
            nisa::activation_reduce(e, nl::exp, blocks[b], nl::add, sums[b], bias = bias);
        }
        sums
    }

    /// Combines per-block `[TILE, 1]` statistics: their maximum when `take_max`,
    /// else their sum.
    #[nki_helper]
    pub fn combine(stats: Vec<Sbuf>, take_max: bool) -> Sbuf {
        let total = nl::ndarray([TILE, 1], nl::float32);
        nisa::tensor_copy(total, stats[0]);
        for b in 1..stats.len() {
            if take_max {
                nisa::tensor_tensor(total, total, stats[b], nl::maximum);
            } else {
                nisa::tensor_tensor(total, total, stats[b], nl::add);
            }
        }
        total
    }

    /// `ln Σ_j exp(x[r, j])` for each row `r` of an `[N, M]` tensor (`N` a multiple
    /// of `TILE`, `M` of `BLOCK`), as an `[N, 1]` fp32 tensor.
    #[nki_kernel]
    pub fn logsumexp(x: Hbm) -> Hbm {
        let [n, m] = x.shape();
        assert!(n % TILE == 0 && m % BLOCK == 0, "x must be [N, M] with N a multiple of {TILE} and M of {BLOCK}, got [{n}, {m}]");
        let out = nl::ndarray([n, 1], nl::float32, buffer = nl::shared_hbm);
        for i in 0..n / TILE {
            let blocks: Vec<Sbuf> = (0..m / BLOCK).map(|b| load_block(x, i * TILE, b * BLOCK, TILE, BLOCK)).collect();
            let row_max = combine(block_maxima(blocks), true);
            let neg_max = nl::ndarray([TILE, 1], nl::float32);
            nisa::tensor_scalar(neg_max, row_max, nl::multiply, -1.0);
            let total = combine(block_sums(blocks, neg_max), false);
            let lse = nl::ndarray([TILE, 1], nl::float32);
            nisa::activation(lse, nl::log, total);
            nisa::tensor_tensor(lse, lse, row_max, nl::add);
            nisa::dma_copy(out[s![i * TILE..(i + 1) * TILE, ..]], lse);
        }
        out
    }
}
