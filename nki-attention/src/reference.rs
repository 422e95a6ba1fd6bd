//! Float64 attention over a whole sequence — output, log-sum-exp and gradients —
//! to check the kernels against (`nki demo` does).
//!
//! Tensors are `[bh, S, d]`, row-major, one head per leading index. Scores are
//! `scale·QKᵀ`, masked with −∞ above the diagonal when causal; rows are processed
//! in blocks of 64 queries with f64 GEMMs, and heads in parallel.
//!
//! ```
//! use nki_attention::reference::{backward, forward};
//! let (q, k, v, dy) = (vec![0.5; 8], vec![1.0; 8], vec![2.0; 8], vec![1.0; 8]); // bh 1, S 4, d 2
//! let f = forward(&q, &k, &v, [1, 4, 2], 1.0, true);
//! assert!(f.out.iter().all(|&o| (o - 2.0).abs() < 1e-12)); // every value row is 2
//! assert!((f.lse[3] - (1.0 + 4f64.ln())).abs() < 1e-12); // row 3 sees four scores of 1
//! let g = backward(&q, &k, &v, &dy, &f, [1, 4, 2], 1.0, true);
//! assert!(g.dq.iter().all(|&x| x.abs() < 1e-12)); // equal values: the output ignores the scores
//! ```

use std::ops::Range;

/// Query rows per block.
const BLOCK: usize = 64;

/// The forward results.
#[derive(Clone, Debug)]
pub struct Attention {
    /// `softmax(scale·QKᵀ)·V`, `[bh, S, d]`.
    pub out: Vec<f64>,
    /// `ln Σ_j exp(s_ij)` of the scaled scores, `[bh, S]`.
    pub lse: Vec<f64>,
}

/// The gradients of `Σ dY ∘ O`.
#[derive(Clone, Debug)]
pub struct Gradients {
    /// dL/dQ, `[bh, S, d]`.
    pub dq: Vec<f64>,
    /// dL/dK, `[bh, S, d]`.
    pub dk: Vec<f64>,
    /// dL/dV, `[bh, S, d]`.
    pub dv: Vec<f64>,
}

/// `c = alpha·a·b + beta·c` on row-major `m×k`, `k×n` and `m×n` matrices, each
/// transposed on request.
#[allow(clippy::too_many_arguments)]
fn gemm(m: usize, k: usize, n: usize, alpha: f64, a: &[f64], a_t: bool, b: &[f64], b_t: bool, beta: f64, c: &mut [f64]) {
    let (ars, acs) = if a_t { (1, m as isize) } else { (k as isize, 1) };
    let (brs, bcs) = if b_t { (1, k as isize) } else { (n as isize, 1) };
    assert!(a.len() >= m * k && b.len() >= k * n && c.len() >= m * n, "gemm operands too short");
    // SAFETY: the lengths were checked against the shapes and strides above.
    unsafe {
        matrixmultiply::dgemm(m, k, n, alpha, a.as_ptr(), ars, acs, b.as_ptr(), brs, bcs, beta, c.as_mut_ptr(), n as isize, 1);
    }
}

/// The probabilities `P = exp(s − lse)` of query rows `rows` of one head (`rows × S`).
#[allow(clippy::too_many_arguments)]
fn probabilities(q: &[f64], k: &[f64], lse: &[f64], rows: Range<usize>, s: usize, d: usize, scale: f64, causal: bool) -> Vec<f64> {
    let m = rows.len();
    let mut p = vec![0.0; m * s];
    gemm(m, d, s, scale, &q[rows.start * d..rows.end * d], false, k, true, 0.0, &mut p);
    for (r, row) in p.chunks_mut(s).enumerate() {
        let i = rows.start + r;
        for (j, x) in row.iter_mut().enumerate() {
            *x = if causal && j > i { 0.0 } else { (*x - lse[i]).exp() };
        }
    }
    p
}

/// Runs `f(head)` for every head on up to two threads and collects the results in order.
fn per_head<T: Send>(bh: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, bh.max(1));
    let f = &f;
    std::thread::scope(|sc| {
        let handles: Vec<_> =
            (0..threads).map(|t| sc.spawn(move || (t..bh).step_by(threads).map(|h| (h, f(h))).collect::<Vec<_>>())).collect();
        let mut all: Vec<(usize, T)> = handles.into_iter().flat_map(|h| h.join().expect("reference thread")).collect();
        all.sort_by_key(|(h, _)| *h);
        all.into_iter().map(|(_, x)| x).collect()
    })
}

/// Attention forward over whole sequences: `dims = [bh, S, d]`.
pub fn forward(q: &[f64], k: &[f64], v: &[f64], dims: [usize; 3], scale: f64, causal: bool) -> Attention {
    let [bh, s, d] = dims;
    let heads = per_head(bh, |h| {
        let (qh, kh, vh) = (&q[h * s * d..(h + 1) * s * d], &k[h * s * d..(h + 1) * s * d], &v[h * s * d..(h + 1) * s * d]);
        let (mut out, mut lse) = (vec![0.0; s * d], vec![0.0; s]);
        for r0 in (0..s).step_by(BLOCK) {
            let rows = r0..(r0 + BLOCK).min(s);
            let m = rows.len();
            let mut sc = vec![0.0; m * s];
            gemm(m, d, s, scale, &qh[rows.start * d..rows.end * d], false, kh, true, 0.0, &mut sc);
            for (r, row) in sc.chunks_mut(s).enumerate() {
                let i = rows.start + r;
                let seen = if causal { i + 1 } else { s };
                let mx = row[..seen].iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let mut sum = 0.0;
                for (j, x) in row.iter_mut().enumerate() {
                    *x = if j < seen { (*x - mx).exp() } else { 0.0 };
                    sum += *x;
                }
                row.iter_mut().for_each(|x| *x /= sum);
                lse[i] = mx + sum.ln();
            }
            gemm(m, s, d, 1.0, &sc, false, vh, false, 0.0, &mut out[rows.start * d..rows.end * d]);
        }
        (out, lse)
    });
    let (out, lse) = heads.into_iter().fold((Vec::with_capacity(bh * s * d), Vec::with_capacity(bh * s)), |(mut o, mut l), (ho, hl)| {
        o.extend(ho);
        l.extend(hl);
        (o, l)
    });
    Attention { out, lse }
}

/// Attention gradients of `L = Σ dY ∘ O` given the forward results `fwd`:
/// `dV = Pᵀ·dY`, `dS = P ∘ (dY·Vᵀ − rowsum(dY ∘ O))`, `dQ = scale·dS·K`, `dK = scale·dSᵀ·Q`.
#[allow(clippy::too_many_arguments)]
pub fn backward(q: &[f64], k: &[f64], v: &[f64], dy: &[f64], fwd: &Attention, dims: [usize; 3], scale: f64, causal: bool) -> Gradients {
    let [bh, s, d] = dims;
    let heads = per_head(bh, |h| {
        let at = |x: &'_ [f64]| -> Vec<f64> { x[h * s * d..(h + 1) * s * d].to_vec() };
        let (qh, kh, vh, dyh, oh) = (at(q), at(k), at(v), at(dy), at(&fwd.out));
        let lse = &fwd.lse[h * s..(h + 1) * s];
        let (mut dq, mut dk, mut dv) = (vec![0.0; s * d], vec![0.0; s * d], vec![0.0; s * d]);
        for r0 in (0..s).step_by(BLOCK) {
            let rows = r0..(r0 + BLOCK).min(s);
            let m = rows.len();
            let p = probabilities(&qh, &kh, lse, rows.clone(), s, d, scale, causal);
            let dy_blk = &dyh[rows.start * d..rows.end * d];
            gemm(s, m, d, 1.0, &p, true, dy_blk, false, 1.0, &mut dv);
            let mut ds = vec![0.0; m * s];
            gemm(m, d, s, 1.0, dy_blk, false, &vh, true, 0.0, &mut ds);
            for (r, row) in ds.chunks_mut(s).enumerate() {
                let i = rows.start + r;
                let dd: f64 = (0..d).map(|c| dyh[i * d + c] * oh[i * d + c]).sum();
                for (x, &pj) in row.iter_mut().zip(&p[r * s..(r + 1) * s]) {
                    *x = pj * (*x - dd);
                }
            }
            gemm(m, s, d, scale, &ds, false, &kh, false, 0.0, &mut dq[rows.start * d..rows.end * d]);
            gemm(s, m, d, scale, &ds, true, &qh[rows.start * d..rows.end * d], false, 1.0, &mut dk);
        }
        (dq, dk, dv)
    });
    let mut g = Gradients { dq: Vec::with_capacity(bh * s * d), dk: Vec::with_capacity(bh * s * d), dv: Vec::with_capacity(bh * s * d) };
    for (dq, dk, dv) in heads {
        g.dq.extend(dq);
        g.dk.extend(dk);
        g.dv.extend(dv);
    }
    g
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Scores, softmax and gradients for one head, written out element by element.
    fn naive(q: &[f64], k: &[f64], v: &[f64], dy: &[f64], s: usize, d: usize, scale: f64) -> (Vec<f64>, Vec<f64>, [Vec<f64>; 3]) {
        let (mut out, mut lse) = (vec![0.0; s * d], vec![0.0; s]);
        let (mut dq, mut dk, mut dv) = (vec![0.0; s * d], vec![0.0; s * d], vec![0.0; s * d]);
        for i in 0..s {
            let sc: Vec<f64> = (0..=i).map(|j| scale * (0..d).map(|c| q[i * d + c] * k[j * d + c]).sum::<f64>()).collect();
            let mx = sc.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let z: f64 = sc.iter().map(|x| (x - mx).exp()).sum();
            lse[i] = mx + z.ln();
            let p: Vec<f64> = sc.iter().map(|x| (x - lse[i]).exp()).collect();
            for c in 0..d {
                out[i * d + c] = (0..=i).map(|j| p[j] * v[j * d + c]).sum();
            }
            let dp: Vec<f64> = (0..=i).map(|j| (0..d).map(|c| dy[i * d + c] * v[j * d + c]).sum()).collect();
            let dd: f64 = (0..=i).map(|j| p[j] * dp[j]).sum();
            for j in 0..=i {
                let ds = p[j] * (dp[j] - dd);
                for c in 0..d {
                    dq[i * d + c] += scale * ds * k[j * d + c];
                    dk[j * d + c] += scale * ds * q[i * d + c];
                    dv[j * d + c] += p[j] * dy[i * d + c];
                }
            }
        }
        (out, lse, [dq, dk, dv])
    }

    #[test]
    fn blocked_gemm_version_matches_the_elementwise_formulas() {
        let (bh, s, d) = (2, 150, 5);
        let input = |seed: u64| -> Vec<f64> {
            (0..bh * s * d).map(|i| (((i as u64 + seed) * 2_654_435_761) % 1000) as f64 / 500.0 - 1.0).collect()
        };
        let (q, k, v, dy) = (input(1), input(2), input(3), input(4));
        let f = forward(&q, &k, &v, [bh, s, d], 0.7, true);
        let g = backward(&q, &k, &v, &dy, &f, [bh, s, d], 0.7, true);
        for h in 0..bh {
            let sl = |x: &[f64]| x[h * s * d..(h + 1) * s * d].to_vec();
            let (out, lse, [dq, dk, dv]) = naive(&sl(&q), &sl(&k), &sl(&v), &sl(&dy), s, d, 0.7);
            let close = |a: &[f64], b: &[f64]| a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-10);
            assert!(close(&sl(&f.out), &out) && close(&f.lse[h * s..(h + 1) * s], &lse), "forward, head {h}");
            assert!(close(&sl(&g.dq), &dq) && close(&sl(&g.dk), &dk) && close(&sl(&g.dv), &dv), "gradients, head {h}");
        }
    }
}
