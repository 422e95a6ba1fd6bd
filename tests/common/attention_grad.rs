//! An independent float64 reference of attention's forward outputs and its
//! gradients over a whole (unsharded) sequence, written from the math:
//!
//! ```text
//! s = scale·Q·Kᵀ (−∞ above the diagonal when causal)   P = softmax(s)   O = P·V
//! LSE = m + ln Σ_j exp(s_j − m)
//! dV = Pᵀ·dY   dP = dY·Vᵀ   D = rowsum(dY ∘ O)   dS = P ∘ (dP − D)
//! dQ = scale·dS·K   dK = scale·dSᵀ·Q
//! ```
//!
//! Tensors are natural-layout `[bh, S, d]` (row `b·S + i`), per-row values
//! `[bh, S]`. Query rows are processed in blocks of [`BLOCK`] rows with f64 GEMMs
//! (`matrixmultiply`), the blocks of each `(b, h)` dealt to two threads; a causal
//! block only touches the keys up to its last row. The forward is cross-checked
//! against the row-by-row `Problem` reference (common/attention.rs) in
//! tests/ring/bwd.rs, and the gradients against finite differences of that forward.

use super::attention::stats_layout;
use super::ring::Ring;
use super::{as_dtype, gemm, uniform};
use nki::Dtype;

/// Query rows per block.
pub const BLOCK: usize = 128;

/// One attention problem over a whole sequence, natural layouts `[bh, s, d]`.
#[derive(Clone, Copy, Debug)]
pub struct GradProblem<'a> {
    pub bh: usize,
    pub s: usize,
    pub d: usize,
    pub q: &'a [f64],
    pub k: &'a [f64],
    pub v: &'a [f64],
    /// The upstream gradient dL/dO.
    pub dy: &'a [f64],
    /// Multiplies `q · k`.
    pub scale: f64,
    /// Query `i` sees keys `j <= i` only.
    pub causal: bool,
}

/// The forward outputs and the gradients.
#[derive(Clone, Debug)]
pub struct Grads {
    /// `[bh, s, d]`, normalised.
    pub o: Vec<f64>,
    /// `[bh, s]`: natural log of `Σ exp` of the scaled, masked scores.
    pub lse: Vec<f64>,
    pub dq: Vec<f64>,
    pub dk: Vec<f64>,
    pub dv: Vec<f64>,
}

/// What one query block contributes: its rows of O, LSE and dQ.
struct BlockOut {
    i0: usize,
    o: Vec<f64>,
    lse: Vec<f64>,
    dq: Option<Vec<f64>>,
}

impl GradProblem<'_> {
    fn check(&self) {
        let n = self.bh * self.s * self.d;
        assert_eq!(self.q.len(), n, "q is [bh, s, d]");
        assert_eq!(self.k.len(), n, "k is [bh, s, d]");
        assert_eq!(self.v.len(), n, "v is [bh, s, d]");
        assert_eq!(self.dy.len(), n, "dy is [bh, s, d]");
    }

    /// The forward outputs O and LSE only (the gradients are left empty).
    pub fn forward(&self) -> Grads {
        self.run(false)
    }

    /// O, LSE, dQ, dK and dV.
    pub fn solve(&self) -> Grads {
        self.run(true)
    }

    fn run(&self, grads: bool) -> Grads {
        self.check();
        let (bh, s, d) = (self.bh, self.s, self.d);
        let mut g = Grads {
            o: vec![0.0; bh * s * d],
            lse: vec![0.0; bh * s],
            dq: if grads { vec![0.0; bh * s * d] } else { Vec::new() },
            dk: if grads { vec![0.0; bh * s * d] } else { Vec::new() },
            dv: if grads { vec![0.0; bh * s * d] } else { Vec::new() },
        };
        let blocks = s.div_ceil(BLOCK);
        for b in 0..bh {
            let at = |x: &'_ [f64]| -> Vec<f64> { x[b * s * d..(b + 1) * s * d].to_vec() };
            let (q, k, v, dy) = (at(self.q), at(self.k), at(self.v), at(self.dy));
            // Two threads, blocks dealt alternately (balanced under the causal mask).
            let parts: Vec<(Vec<BlockOut>, Vec<f64>, Vec<f64>)> = std::thread::scope(|sc| {
                let handles: Vec<_> = (0..2)
                    .map(|t| {
                        let (q, k, v, dy) = (&q, &k, &v, &dy);
                        sc.spawn(move || {
                            let mut dk = if grads { vec![0.0; s * d] } else { Vec::new() };
                            let mut dv = if grads { vec![0.0; s * d] } else { Vec::new() };
                            let outs = (t..blocks)
                                .step_by(2)
                                .map(|blk| self.block(q, k, v, dy, blk * BLOCK, ((blk + 1) * BLOCK).min(s), grads, &mut dk, &mut dv))
                                .collect();
                            (outs, dk, dv)
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().expect("reference thread")).collect()
            });
            for (outs, dk, dv) in parts {
                for bo in outs {
                    let rows = bo.lse.len();
                    let r0 = b * s + bo.i0;
                    g.o[r0 * d..(r0 + rows) * d].copy_from_slice(&bo.o);
                    g.lse[r0..r0 + rows].copy_from_slice(&bo.lse);
                    if let Some(dq) = bo.dq {
                        g.dq[r0 * d..(r0 + rows) * d].copy_from_slice(&dq);
                    }
                }
                if grads {
                    let base = b * s * d;
                    g.dk[base..base + s * d].iter_mut().zip(&dk).for_each(|(a, x)| *a += x);
                    g.dv[base..base + s * d].iter_mut().zip(&dv).for_each(|(a, x)| *a += x);
                }
            }
        }
        g
    }

    /// Query rows `i0..i1` of one `(b, h)` (`q`, `k`, `v`, `dy` are its `[s, d]`
    /// slices): returns their O, LSE and dQ and adds their dK, dV contributions.
    #[allow(clippy::too_many_arguments)]
    fn block(
        &self,
        q: &[f64],
        k: &[f64],
        v: &[f64],
        dy: &[f64],
        i0: usize,
        i1: usize,
        grads: bool,
        dk: &mut [f64],
        dv: &mut [f64],
    ) -> BlockOut {
        let d = self.d;
        let nr = i1 - i0;
        // Keys any row of the block may see.
        let nk = if self.causal { i1 } else { self.s };
        let qb = &q[i0 * d..i1 * d];
        // p = scale·Q·Kᵀ, then masked softmax in place.
        let mut p = vec![0.0; nr * nk];
        gemm((nr, d, nk), self.scale, qb, (d, 1), k, (1, d), 0.0, &mut p, nk);
        let mut lse = vec![0.0; nr];
        for (r, row) in p.chunks_exact_mut(nk).enumerate() {
            let visible = if self.causal { i0 + r + 1 } else { nk };
            let (live, masked) = row.split_at_mut(visible);
            masked.iter_mut().for_each(|x| *x = 0.0); // exp(−∞ − m)
            let m = live.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            assert!(m.is_finite(), "row {} sees no key", i0 + r);
            let mut z = 0.0;
            for x in live.iter_mut() {
                *x = (*x - m).exp();
                z += *x;
            }
            live.iter_mut().for_each(|x| *x /= z);
            lse[r] = m + z.ln();
        }
        // O = P·V.
        let mut o = vec![0.0; nr * d];
        gemm((nr, nk, d), 1.0, &p, (nk, 1), v, (d, 1), 0.0, &mut o, d);
        if !grads {
            return BlockOut { i0, o, lse, dq: None };
        }
        let dyb = &dy[i0 * d..i1 * d];
        // dV += Pᵀ·dY.
        gemm((nk, nr, d), 1.0, &p, (1, nk), dyb, (d, 1), 1.0, &mut dv[..nk * d], d);
        // dP = dY·Vᵀ, then dS = P ∘ (dP − D) in place, D = rowsum(dY ∘ O).
        let mut ds = vec![0.0; nr * nk];
        gemm((nr, d, nk), 1.0, dyb, (d, 1), v, (1, d), 0.0, &mut ds, nk);
        for r in 0..nr {
            let dd: f64 = dyb[r * d..(r + 1) * d].iter().zip(&o[r * d..(r + 1) * d]).map(|(a, b)| a * b).sum();
            ds[r * nk..(r + 1) * nk].iter_mut().zip(&p[r * nk..(r + 1) * nk]).for_each(|(x, &pp)| *x = pp * (*x - dd));
        }
        // dQ = scale·dS·K and dK += scale·dSᵀ·Q.
        let mut dq = vec![0.0; nr * d];
        gemm((nr, nk, d), self.scale, &ds, (nk, 1), k, (d, 1), 0.0, &mut dq, d);
        gemm((nk, nr, d), self.scale, &ds, (1, nk), qb, (d, 1), 1.0, &mut dk[..nk * d], d);
        BlockOut { i0, o, lse, dq: Some(dq) }
    }
}

/// `L = Σ dY ∘ O(q, k, v)` from `forward` outputs: the scalar whose gradients
/// the kernel computes.
pub fn loss(o: &[f64], dy: &[f64]) -> f64 {
    assert_eq!(o.len(), dy.len(), "O and dY have one shape");
    o.iter().zip(dy).map(|(a, b)| a * b).sum()
}

/// Global `[b·h, S_total, d]` inputs of a ring backward, as the kernel receives
/// them (rounded to its input dtype), and the reference on them.
#[derive(Clone, Debug)]
pub struct GradData {
    pub q: Vec<f64>,
    pub k: Vec<f64>,
    pub v: Vec<f64>,
    pub dy: Vec<f64>,
    pub g: Grads,
}

/// Deterministic global data for `ring` rounded to `dtype` (q and k uniform in
/// [-2, 2) so the softmax has real peaks, v and dY in [-1, 1)) and the reference.
pub fn grad_data(ring: &Ring, seed: u64, dtype: Dtype, causal: bool, scale: f64) -> GradData {
    let n = ring.bh() * ring.st() * ring.d;
    let q = as_dtype(&uniform(n, seed * 4 + 1, -2.0, 2.0), dtype);
    let k = as_dtype(&uniform(n, seed * 4 + 2, -2.0, 2.0), dtype);
    let v = as_dtype(&uniform(n, seed * 4 + 3, -1.0, 1.0), dtype);
    let dy = as_dtype(&uniform(n, seed * 4 + 4, -1.0, 1.0), dtype);
    let g = GradProblem { bh: ring.bh(), s: ring.st(), d: ring.d, q: &q, k: &k, v: &v, dy: &dy, scale, causal }.solve();
    GradData { q, k, v, dy, g }
}

/// Position `r`'s `[b, h, d, S_local]` (head-dim major) slice of a global `[b·h, S_total, d]` tensor.
pub fn dmajor(ring: &Ring, x: &[f64], r: usize) -> Vec<f64> {
    ring.shard_qk(x, r, false).1
}

/// Position `r`'s kernel inputs as `(shape, values)`: q, k, v, O, dY
/// `[b, h, d, S_local]` and the LSE `[b, h, 128, S_local / 128]` (row `128 g + p`
/// at `[.., p, g]`), O and the LSE from the reference forward.
pub fn bwd_shard(ring: &Ring, x: &GradData, r: usize) -> [(Vec<usize>, Vec<f64>); 6] {
    let (b, h, sl, d) = (ring.b, ring.h, ring.sl, ring.d);
    let t = |v: &[f64]| (vec![b, h, d, sl], dmajor(ring, v, r));
    let lse_rows = Ring { d: 1, ..*ring }.local(&x.g.lse, r);
    let lse = (vec![b, h, 128, sl.div_ceil(128)], stats_layout(&lse_rows, ring.bh(), sl, 0.0));
    [t(&x.q), t(&x.k), t(&x.v), t(&x.g.o), t(&x.dy), lse]
}
