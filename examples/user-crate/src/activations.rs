//! Elementwise activations, one 128-row tile at a time.

use nki::prelude::*;

/// Leaky ReLU of an `[N, D]` tensor (`N` a multiple of 128): `x` where `x >= 0`,
/// `alpha * x` elsewhere, for a slope `alpha` in `[0, 1]` (where the two agree
/// with `max(x, alpha * x)`).
///
/// Per 128-row tile: load it, scale a copy by `alpha` in fp32, take the
/// elementwise maximum with the tile (rounding once to `x`'s dtype) and store it.
#[nki_kernel]
pub fn leaky_relu(x: Hbm, #[range(>= 0.0, <= 1.0)] alpha: f64) -> Hbm {
    let [n, d] = x.shape();
    // Rows per tile: one SBUF partition per row.
    let rows = nl::tile_size::pmax;
    assert!(n % rows == 0, "rows must be a multiple of 128, got {n}");
    let out = nl::ndarray([n, d], x.dtype(), buffer = nl::shared_hbm);
    for i in 0..n / rows {
        let t = nl::ndarray([rows, d], x.dtype());
        nisa::dma_copy(t, x[s![i * rows..(i + 1) * rows, ..]]);
        let scaled = nl::ndarray([rows, d], nl::float32);
        nisa::tensor_scalar(scaled, t, nl::multiply, alpha);
        let y = nl::ndarray([rows, d], x.dtype());
        nisa::tensor_tensor(y, t, scaled, nl::maximum);
        nisa::dma_copy(out[s![i * rows..(i + 1) * rows, ..]], y);
    }
    out
}
