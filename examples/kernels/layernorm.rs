//! LayerNorm with the Vector Engine's batch-norm statistics.

use super::tiles::load_block;
use nki::prelude::*;

/// `(x - mean) / sqrt(var + eps) * gamma + beta` along the rows of an `[N, D]`
/// tensor (`N` a multiple of 128), with `gamma` and `beta` of shape `[1, D]`.
///
/// Per 128-row tile:
/// 1. statistics: `nisa.bn_stats` on each `nl.tile_size.bn_stats_fmax`-wide column
///    chunk, the six values of chunk `c` written at columns `6c..6c+6` of one
///    stats tile, then one `nisa.bn_aggr` into the rows' mean and variance;
/// 2. normalise: `rstd = (var + eps) ** -0.5`, then `(x - mean) * rstd` in one
///    `tensor_scalar` with per-partition operands;
/// 3. affine: multiply by `gamma` and add `beta`, both broadcast to 128
///    partitions once by DMA before the loop.
///
/// Statistics stay in fp32; the output has `x`'s dtype.
#[nki_kernel]
pub fn layernorm(
    x: Hbm,
    gamma: Hbm,
    beta: Hbm,
    #[default(1e-5)]
    #[range(>= 0.0)]
    eps: f64,
) -> Hbm {
    let [n, d] = x.shape();
    assert!(n % 128 == 0, "rows must be a multiple of 128, got {n}");
    let fmax = nl::tile_size::bn_stats_fmax;
    let chunks = d.div_ceil(fmax);
    let out = nl::ndarray([n, d], x.dtype(), buffer = nl::shared_hbm);
    let g = nl::ndarray([128, d], nl::float32);
    nisa::dma_copy(g, gamma.broadcast(0, 128));
    let b = nl::ndarray([128, d], nl::float32);
    nisa::dma_copy(b, beta.broadcast(0, 128));
    for i in 0..n / 128 {
        let t = load_block(x, i * 128, 0, 128, d);
        let stats = nl::ndarray([128, 6 * chunks], nl::float32);
        for c in 0..chunks {
            let cols = nl::ds(c * fmax, (d - c * fmax).min(fmax));
            nisa::bn_stats(stats[s![.., nl::ds(6 * c, 6)]], t[s![.., cols]]);
        }
        let mean_var = nl::ndarray([128, 2], nl::float32);
        nisa::bn_aggr(mean_var, stats);
        let rstd = nl::ndarray([128, 1], nl::float32);
        nisa::tensor_scalar(rstd, mean_var[s![.., 1..2]], nl::add, eps, op1 = nl::power, operand1 = -0.5);
        let y = nl::ndarray([128, d], nl::float32);
        nisa::tensor_scalar(y, t, nl::subtract, mean_var[s![.., 0..1]], op1 = nl::multiply, operand1 = rstd);
        nisa::tensor_tensor(y, y, g, nl::multiply);
        let z = nl::ndarray([128, d], x.dtype());
        nisa::tensor_tensor(z, y, b, nl::add);
        nisa::dma_copy(out[s![i * 128..(i + 1) * 128, ..]], z);
    }
    out
}
