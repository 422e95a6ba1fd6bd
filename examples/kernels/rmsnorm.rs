//! RMSNorm, tiled by module constants, its phases sharing a parameter bundle.
//!
//! The kernel and its helpers live in an `#[nki_module]`, so the tile height,
//! epsilon and statistics dtype are named once as module constants: Rust
//! `const`s the kernel, its helpers and ordinary Rust share, emitted as Python
//! module constants the emitted code refers to by name. What the phases of one
//! call share travels as one [`RmsConfig`] bundle (an `nl.NKIObject` dataclass
//! in the emitted Python), so each helper takes `(cfg, tiles)`.

use nki::prelude::*;

pub use tiled::*;

/// The kernel with its constants and phase helpers.
#[nki_module]
pub mod tiled {
    use super::super::tiles::load_block;
    use nki::prelude::*;

    /// Rows per tile: the partitions of one SBUF tile.
    pub const TILE: i64 = 128;
    /// Added to the mean square before the reciprocal square root.
    pub const EPS: f64 = 1e-6;
    /// The dtype statistics and the normalised rows are computed in.
    pub const STATS_DTYPE: Dtype = nl::float32;

    /// What the phases of one call share.
    #[nki_object]
    pub struct RmsConfig {
        /// Columns per row.
        pub d: i64,
        /// The weights, broadcast to `TILE` partitions.
        pub w: Tensor,
        /// The output's dtype (the input's).
        pub out_dtype: Dtype,
    }

    /// Phase 1: `(mean(t^2) + EPS) ** -0.5` per row of a `[TILE, d]` tile, as a `[TILE, 1]` column.
    #[nki_helper]
    pub fn inverse_rms(cfg: RmsConfig, t: Sbuf) -> Sbuf {
        let d = cfg.d;
        let sq = nl::ndarray([TILE, d], STATS_DTYPE);
        nisa::tensor_tensor(sq, t, t, nl::multiply);
        let ss = nl::ndarray([TILE, 1], STATS_DTYPE);
        nisa::tensor_reduce(ss, nl::add, sq, 1);
        let rstd = nl::ndarray([TILE, 1], STATS_DTYPE);
        nisa::tensor_scalar(rstd, ss, nl::multiply, 1.0 / d as f64, op1 = nl::add, operand1 = EPS);
        nisa::tensor_scalar(rstd, rstd, nl::power, -0.5);
        rstd
    }

    /// Phase 2: `t * rstd * w`, rounded to the output's dtype.
    #[nki_helper]
    pub fn scale_rows(cfg: RmsConfig, t: Sbuf, rstd: Sbuf) -> Sbuf {
        let y = nl::ndarray([TILE, cfg.d], STATS_DTYPE);
        nisa::tensor_scalar(y, t, nl::multiply, rstd);
        let z = nl::ndarray([TILE, cfg.d], cfg.out_dtype);
        nisa::tensor_tensor(z, y, cfg.w, nl::multiply);
        z
    }

    /// `x / sqrt(mean(x^2) + EPS) * w` along the rows of an `[N, D]` tensor (`N` a
    /// multiple of `TILE`), `w` of shape `[1, D]`.
    ///
    /// `w` is broadcast to `TILE` partitions once by DMA into the call's
    /// [`RmsConfig`]; then per `TILE`-row
    /// tile: load, [`inverse_rms`] (square, row sum, scale by `1 / D`, add `EPS`,
    /// power `-0.5`), [`scale_rows`], store. Statistics are computed in
    /// `STATS_DTYPE`; the output has `x`'s dtype.
    #[nki_kernel]
    pub fn rmsnorm(x: Hbm, w: Hbm) -> Hbm {
        let [n, d] = x.shape();
        assert!(n % TILE == 0, "rows must be a multiple of {TILE}, got {n}");
        let out = nl::ndarray([n, d], x.dtype(), buffer = nl::shared_hbm);
        let wb = nl::ndarray([TILE, d], STATS_DTYPE);
        nisa::dma_copy(wb, w.broadcast(0, TILE));
        let cfg = RmsConfig { d, w: wb, out_dtype: x.dtype() };
        for i in nl::affine_range(n / TILE) {
            let t = load_block(x, i * TILE, 0, TILE, d);
            let rstd = inverse_rms(cfg, t);
            let z = scale_rows(cfg, t, rstd);
            nisa::dma_copy(out[s![i * TILE..(i + 1) * TILE, ..]], z);
        }
        out
    }
}
