//! Tiled matrix multiplication with K-accumulation in PSUM.

use super::tiles::load_block;
use nki::prelude::*;

/// `a_tᵀ · b` for `a_t: [K, M]` (the left operand stored transposed, as the
/// Tensor Engine consumes it) and `b: [K, N]`, with `K`, `M` multiples of 128 and
/// `N` a multiple of 512. Returns `[M, N]` in fp32.
///
/// Each `[128, 512]` output tile is one PSUM bank: the `K / 128` partial products
/// accumulate in it (the first matmul into a fresh PSUM tile overwrites, the
/// following ones add), then the tile is copied to SBUF and stored.
#[nki_kernel]
pub fn matmul(a_t: Hbm, b: Hbm) -> Hbm {
    let [k, m] = a_t.shape();
    let [kb, n] = b.shape();
    assert_eq!(k, kb, "a_t is [K, M] and b is [K, N]: K differs ({k} vs {kb})");
    assert!(k % 128 == 0 && m % 128 == 0, "K and M must be multiples of 128, got {k} and {m}");
    assert!(n % 512 == 0, "N must be a multiple of 512, got {n}");
    let out = nl::ndarray([m, n], nl::float32, buffer = nl::shared_hbm);
    for mi in 0..m / 128 {
        for ni in 0..n / 512 {
            let acc = nl::ndarray([128, 512], nl::float32, buffer = nl::psum);
            for ki in 0..k / 128 {
                let lhs = load_block(a_t, ki * 128, mi * 128, 128, 128);
                let rhs = load_block(b, ki * 128, ni * 512, 128, 512);
                nisa::nc_matmul(acc, lhs, rhs);
            }
            let res = nl::ndarray([128, 512], nl::float32);
            nisa::tensor_copy(res, acc);
            nisa::dma_copy(out[s![mi * 128..(mi + 1) * 128, ni * 512..(ni + 1) * 512]], res);
        }
    }
    out
}
