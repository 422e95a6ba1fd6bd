//! The matrix-multiplication optimization steps of the NKI "kernel optimization"
//! tutorial, written to be profiled (`nki::profile`) and compared with the
//! bottlenecks the tutorial measured. The first step, the naive tiled kernel,
//! is [`matmul`](super::matmul::matmul) itself.
//!
//! * [`matmul_hoisted`]: the `K / 128` stationary tiles of an output row block
//!   are loaded once per `m`, the moving tiles once per `(m, n)`, before the
//!   accumulation loop — no tile is loaded twice for one output tile.
//! * [`matmul_blocked`]: the free dimensions are blocked, `BLOCK_M` = 2 stationary
//!   and `BLOCK_N` = 2 moving column tiles, so every loaded tile feeds two matmuls.
//!
//! Every matmul is one `[128, 128]` stationary by `[128, 512]` moving tile into one
//! PSUM bank. All take `a_t: [K, M]` (the left operand transposed) and `b: [K, N]`, with `K`,
//! `M` multiples of 128 (of 256 when blocked) and `N` of 512 (of 1024 when
//! blocked), and return `a_tᵀ · b` as `[M, N]` fp32.

use nki::prelude::*;

/// Loads `tiles` column tiles of `src`, each `cols` wide from column `c0` on,
/// as their 128-row pieces side by side, tile by tile: piece `k` of tile `t`
/// lands in columns `(t·K/128 + k)·cols..`. Each piece is one transfer, issued
/// in that order (as the tutorial's kernels do), so the first tile's
/// accumulation needs only the first tile's pieces.
#[nki_helper]
fn load_tiles(src: Hbm, c0: i64, tiles: i64, cols: i64) -> Sbuf {
    let [k, _n] = src.shape();
    let k_tiles = k / 128;
    let dst = nl::ndarray([128, tiles * k_tiles * cols], src.dtype(), buffer = nl::sbuf);
    for t in 0..tiles {
        for ki in 0..k_tiles {
            let (d0, s0) = ((t * k_tiles + ki) * cols, c0 + t * cols);
            nisa::dma_copy(dst[s![0..128, d0..d0 + cols]], src[s![ki * 128..(ki + 1) * 128, s0..s0 + cols]]);
        }
    }
    dst
}

/// Step 2: loads hoisted out of the accumulation loop.
#[nki_kernel]
pub fn matmul_hoisted(a_t: Hbm, b: Hbm) -> Hbm {
    let [k, m] = a_t.shape();
    let [kb, n] = b.shape();
    assert_eq!(k, kb, "a_t is [K, M] and b is [K, N]: K differs ({k} vs {kb})");
    assert!(k % 128 == 0 && m % 128 == 0 && n % 512 == 0, "K, M must be multiples of 128 and N of 512");
    let out = nl::ndarray([m, n], nl::float32, buffer = nl::shared_hbm);
    for mi in 0..m / 128 {
        let lhs = load_tiles(a_t, mi * 128, 1, 128);
        for ni in 0..n / 512 {
            let rhs = load_tiles(b, ni * 512, 1, 512);
            let acc = nl::ndarray([128, 512], nl::float32, buffer = nl::psum);
            for ki in 0..k / 128 {
                nisa::nc_matmul(acc, lhs[s![0..128, ki * 128..(ki + 1) * 128]], rhs[s![0..128, ki * 512..(ki + 1) * 512]]);
            }
            let res = nl::ndarray([128, 512], nl::float32, buffer = nl::sbuf);
            nisa::tensor_copy(res, acc);
            nisa::dma_copy(out[s![mi * 128..(mi + 1) * 128, ni * 512..(ni + 1) * 512]], res);
        }
    }
    out
}

/// Step 3: free dimensions blocked, `tiles_m` stationary by `tiles_n` moving tiles
/// (the tutorial uses 2 by 2): the blocks are loaded tile by tile, and each
/// stationary tile feeds `tiles_n` matmuls, each moving tile `tiles_m`.
#[nki_kernel]
pub fn matmul_blocked(a_t: Hbm, b: Hbm, #[range(>= 1)] tiles_m: i64, #[range(>= 1)] tiles_n: i64) -> Hbm {
    let [k, m] = a_t.shape();
    let [kb, n] = b.shape();
    assert_eq!(k, kb, "a_t is [K, M] and b is [K, N]: K differs ({k} vs {kb})");
    let (block_m, block_n) = (tiles_m * 128, tiles_n * 512);
    assert!(k % 128 == 0 && m % block_m == 0 && n % block_n == 0, "K must be a multiple of 128, M of {block_m} and N of {block_n}");
    let out = nl::ndarray([m, n], nl::float32, buffer = nl::shared_hbm);
    for mb in 0..m / block_m {
        let lhs = load_tiles(a_t, mb * block_m, tiles_m, 128);
        for nb in 0..n / block_n {
            let rhs = load_tiles(b, nb * block_n, tiles_n, 512);
            for bm in 0..tiles_m {
                for bn in 0..tiles_n {
                    let acc = nl::ndarray([128, 512], nl::float32, buffer = nl::psum);
                    for ki in 0..k / 128 {
                        let (c_lhs, c_rhs) = ((bm * (k / 128) + ki) * 128, (bn * (k / 128) + ki) * 512);
                        nisa::nc_matmul(acc, lhs[s![0..128, c_lhs..c_lhs + 128]], rhs[s![0..128, c_rhs..c_rhs + 512]]);
                    }
                    let res = nl::ndarray([128, 512], nl::float32, buffer = nl::sbuf);
                    nisa::tensor_copy(res, acc);
                    let (r0, c0) = (mb * block_m + bm * 128, nb * block_n + bn * 512);
                    nisa::dma_copy(out[s![r0..r0 + 128, c0..c0 + 512]], res);
                }
            }
        }
    }
    out
}
