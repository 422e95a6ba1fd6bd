//! Matrix multiplication with the contraction loop outermost, one PSUM
//! accumulator per output tile held in a list.
//!
//! Algorithm: `out = a_tᵀ · b`. Each `TILE_M`-row block of the output spans
//! `N / TILE_N` output tiles; each tile accumulates in its own PSUM bank, and
//! the banks are built as a list (`(0..n).map(|_| nl::ndarray(..)).collect()`,
//! emitted as the list comprehension NKI kernels write). The K loop runs
//! outside the column loop, so each `[TILE_K, TILE_M]` block of `a_t` is
//! loaded once per K step and multiplies every column tile of `b`, instead of
//! once per output tile as in [`super::matmul`].
//!
//! Loops: row blocks (trace-time) › K steps › column tiles, then one eviction
//! per column tile. Tiling: `TILE_M` output rows (partitions), `TILE_K`
//! contraction rows, `TILE_N` fp32 columns (one 2 KiB PSUM bank); a row block
//! holds at most `MAX_TILES_N` accumulators, the PSUM banks of a program.

use nki::prelude::*;

pub use tiled::*;

/// The kernel with its tile constants, accumulator bundle and phase helpers.
#[nki_module]
pub mod tiled {
    use super::super::tiles::load_block;
    use nki::prelude::*;

    /// Output rows per tile: the partitions of a PSUM tile.
    pub const TILE_M: i64 = 128;
    /// Contraction rows per matmul: the PE array's height.
    pub const TILE_K: i64 = 128;
    /// Output columns per tile: 512 fp32 values fill one PSUM bank.
    pub const TILE_N: i64 = 512;
    /// PSUM banks per partition, so the most accumulators one row block holds.
    pub const MAX_TILES_N: i64 = 8;

    /// The accumulators of one row block of the output.
    #[nki_object]
    pub struct RowBlock {
        /// The block's first output row.
        pub row: i64,
        /// One `[TILE_M, TILE_N]` fp32 PSUM tile per column tile.
        pub acc: Vec<Tensor>,
    }

    /// Phase 1, one K step: `lhs` (`[TILE_K, TILE_M]` of `a_t`) times each column
    /// tile of rows `k0..k0 + TILE_K` of `b`, accumulated into the block's tiles.
    #[nki_helper]
    pub fn accumulate(block: RowBlock, lhs: Sbuf, b: Hbm, k0: i64) {
        for j in 0..block.acc.len() {
            let rhs = load_block(b, k0, j * TILE_N, TILE_K, TILE_N);
            nisa::nc_matmul(block.acc[j], lhs, rhs);
        }
    }

    /// Phase 2: copies each accumulator to SBUF and stores it in its place in `out`.
    #[nki_helper]
    pub fn evict(block: RowBlock, out: Hbm) {
        for j in 0..block.acc.len() {
            let res = nl::ndarray([TILE_M, TILE_N], nl::float32);
            nisa::tensor_copy(res, block.acc[j]);
            nisa::dma_copy(out[s![block.row..block.row + TILE_M, j * TILE_N..(j + 1) * TILE_N]], res);
        }
    }

    /// `a_tᵀ · b` for `a_t: [K, M]` (the left operand stored transposed, as the
    /// Tensor Engine consumes it) and `b: [K, N]`, with `K` a multiple of
    /// `TILE_K`, `M` of `TILE_M` and `N` of `TILE_N`, at most
    /// `MAX_TILES_N * TILE_N`. Returns `[M, N]` in fp32.
    #[nki_kernel]
    pub fn matmul_k_outer(a_t: Hbm, b: Hbm) -> Hbm {
        let [k, m] = a_t.shape();
        let [kb, n] = b.shape();
        assert_eq!(k, kb, "a_t is [K, M] and b is [K, N]: K differs ({k} vs {kb})");
        assert!(k % TILE_K == 0 && m % TILE_M == 0, "K and M must be multiples of {TILE_K} and {TILE_M}, got {k} and {m}");
        assert!(n % TILE_N == 0 && n / TILE_N <= MAX_TILES_N, "N must be a multiple of {TILE_N} up to {MAX_TILES_N} tiles, got {n}");
        let out = nl::ndarray([m, n], nl::float32, buffer = nl::shared_hbm);
        for mi in 0..m / TILE_M {
            let acc: Vec<Psum> = (0..n / TILE_N).map(|_| nl::ndarray([TILE_M, TILE_N], nl::float32, buffer = nl::psum)).collect();
            let block = RowBlock { row: mi * TILE_M, acc };
            for ki in 0..k / TILE_K {
                let lhs = load_block(a_t, ki * TILE_K, mi * TILE_M, TILE_K, TILE_M);
                accumulate(block, lhs, b, ki * TILE_K);
            }
            evict(block, out);
        }
        out
    }
}
