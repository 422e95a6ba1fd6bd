//! `gelu(x @ w + bias)` written with `nki.language` tile functions.

use nki::prelude::*;

/// `gelu_apprx_tanh(x @ w + bias)` for `x` `[M, K]`, `w` `[K, N]` and `bias`
/// `[1, N]`, with `M` and `K` multiples of 128 and `N` at most 512; the output
/// `[M, N]` has `x`'s dtype.
///
/// Per 128-row block of `x`: a float32 accumulator starts at `nl.zeros`; for each
/// 128-wide slice of the contraction, `nl.load` the `x` and `w` blocks and add
/// `nl.matmul(x_blk, w_blk)` (the Tensor engine transposes `x_blk` itself) into
/// the accumulator with `nl.add`. Then `nl.add` the bias row (broadcast down the
/// partitions), apply `nl.gelu_apprx_tanh` into the output dtype and `nl.store`.
#[nki_kernel]
pub fn gemm_bias_gelu(x: Hbm, w: Hbm, bias: Hbm) -> Hbm {
    // Rows of `x` per block (the output's partitions) and contraction elements per matmul.
    let rows = nl::tile_size::pmax;
    let k_tile = nl::tile_size::pmax;
    let [m, k] = x.shape();
    let [k2, n] = w.shape();
    assert!(m % rows == 0 && k % k_tile == 0, "x must be [M, K] with M and K multiples of 128, got [{m}, {k}]");
    assert!(k2 == k, "w must have K = {k} rows, got {k2}");
    assert!(n <= 512, "N must be at most 512 (one PSUM bank of float32), got {n}");
    let out = nl::ndarray([m, n], x.dtype(), buffer = nl::shared_hbm);
    let b = nl::load(bias, dtype = nl::float32);
    for i in 0..m / rows {
        let mut acc = nl::zeros([rows, n], nl::float32);
        for j in 0..k / k_tile {
            let xb = nl::load(x[s![i * rows..(i + 1) * rows, j * k_tile..(j + 1) * k_tile]]);
            let wb = nl::load(w[s![j * k_tile..(j + 1) * k_tile, ..]]);
            acc = nl::add(acc, nl::matmul(xb, wb));
        }
        let h = nl::add(acc, b);
        let g = nl::gelu_apprx_tanh(h, dtype = x.dtype());
        nl::store(out[s![i * rows..(i + 1) * rows, ..]], g);
    }
    out
}
