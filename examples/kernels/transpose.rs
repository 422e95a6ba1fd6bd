//! Matrix transpose through the Tensor Engine.

use super::tiles::load_block;
use nki::prelude::*;

/// Transposes an `[N, M]` tensor (both multiples of 128) block by block: each
/// `128 x 128` block goes through a PE transpose into PSUM (bit-exact, same
/// dtype), back to SBUF, and out to its mirrored position.
#[nki_kernel]
pub fn transpose(x: Hbm) -> Hbm {
    let [n, m] = x.shape();
    assert!(n % 128 == 0 && m % 128 == 0, "both dims must be multiples of 128, got {n} x {m}");
    let out = nl::ndarray([m, n], x.dtype(), buffer = nl::shared_hbm);
    for i in 0..n / 128 {
        for j in 0..m / 128 {
            let block = load_block(x, i * 128, j * 128, 128, 128);
            let flipped = nl::ndarray([128, 128], x.dtype(), buffer = nl::psum);
            nisa::nc_transpose(flipped, block);
            let res = nl::ndarray([128, 128], x.dtype());
            nisa::tensor_copy(res, flipped);
            nisa::dma_copy(out[s![j * 128..(j + 1) * 128, i * 128..(i + 1) * 128]], res);
        }
    }
    out
}
