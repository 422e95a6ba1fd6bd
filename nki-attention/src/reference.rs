//! Float64 attention over a whole sequence — output, log-sum-exp and gradients —
//! to check the kernels against (`nki demo` does), with every feature of the
//! ring kernels' peers: grouped-query heads, causal mask, sliding window
//! `(L, R)`, chunks, logit soft cap, bias, segment ids and sinks.
//!
//! Tensors are row-major: `q` is `[b, h, S, d]`, `k` and `v` are
//! `[b, h_kv, S, d]` (query head `i` reads KV head `i / (h / h_kv)`). The logit of
//! query `i` and key `j` is `t = scale·q·k`, soft-capped to `C·tanh(t / C)`, plus
//! `bias[b, h, i, j]`; key `j` is visible when every mask allows it (the logical
//! AND). A sink adds `exp(sink[h])` to every row's softmax denominator and
//! nothing to its numerator. A row that sees no key and has no sink outputs
//! zeros with LSE `-inf` and passes no gradient. Rows are processed in blocks of
//! 64 queries with f64 GEMMs over the keys some query of the block sees (about
//! half the work when causal), and heads in parallel.
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

/// The sizes of one problem.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dims {
    /// Batch.
    pub batch: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads (a divisor of `heads`).
    pub kv_heads: usize,
    /// Tokens.
    pub seqlen: usize,
    /// Head dim.
    pub head_dim: usize,
}

impl Dims {
    /// Multi-head dims from the `[bh, S, d]` of the plain functions.
    pub const fn mha(bh: usize, seqlen: usize, head_dim: usize) -> Dims {
        Dims { batch: bh, heads: 1, kv_heads: 1, seqlen, head_dim }
    }

    /// Query heads per KV head.
    const fn group(&self) -> usize {
        self.heads / self.kv_heads
    }
}

/// The masks and extra logits of a problem; [`Features::default`] is plain
/// non-causal attention.
#[derive(Clone, Copy, Debug, Default)]
pub struct Features<'a> {
    /// Key `j` visible to query `i` only if `j <= i`.
    pub causal: bool,
    /// `(L, R)`: key `j` visible to query `i` only if `i - L <= j <= i + R`.
    pub window: Option<(usize, usize)>,
    /// `C`: key `j` visible to query `i` only if `i / C == j / C`.
    pub chunk: Option<usize>,
    /// `C > 0`: logits `C·tanh(scale·q·k / C)`.
    pub soft_cap: Option<f64>,
    /// `[b, h, S, S]`, added to the logits after the soft cap.
    pub bias: Option<&'a [f64]>,
    /// `(q_seg, kv_seg)`, each `[b, S]`: key `j` visible to query `i` only if the ids match.
    pub segments: Option<(&'a [i32], &'a [i32])>,
    /// `[h]`: one logit per query head in every row's softmax denominator.
    pub sinks: Option<&'a [f64]>,
}

impl Features<'_> {
    /// Plain attention, causal or not.
    pub fn masked(causal: bool) -> Self {
        Features { causal, ..Features::default() }
    }

    /// Whether query `i` of batch `b` sees key `j` under every mask.
    pub fn visible(&self, s: usize, b: usize, i: usize, j: usize) -> bool {
        if self.causal && j > i {
            return false;
        }
        if let Some((l, r)) = self.window
            && (j + l < i || j > i + r)
        {
            return false;
        }
        if let Some(c) = self.chunk
            && i / c != j / c
        {
            return false;
        }
        if let Some((qs, ks)) = self.segments
            && qs[b * s + i] != ks[b * s + j]
        {
            return false;
        }
        true
    }
}

/// The forward results.
#[derive(Clone, Debug)]
pub struct Attention {
    /// `softmax(logits)·V`, `[b, h, S, d]`.
    pub out: Vec<f64>,
    /// `ln(Σ_j exp(logit_ij) + exp(sink))`, `[b, h, S]` (`-inf` for a row that sees nothing).
    pub lse: Vec<f64>,
}

/// The gradients of `Σ dY ∘ O`.
#[derive(Clone, Debug)]
pub struct Gradients {
    /// dL/dQ, `[b, h, S, d]`.
    pub dq: Vec<f64>,
    /// dL/dK, `[b, h_kv, S, d]` (summed over each KV head's query heads).
    pub dk: Vec<f64>,
    /// dL/dV, `[b, h_kv, S, d]`.
    pub dv: Vec<f64>,
    /// dL/dsinks, `[h]` (zeros without sinks).
    pub dsinks: Vec<f64>,
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

/// One query head's view of a problem: its tensors and the batch and head it is.
struct Head<'a> {
    q: &'a [f64],
    k: &'a [f64],
    v: &'a [f64],
    batch: usize,
    head: usize,
}

impl<'a> Head<'a> {
    /// Query head `n` (flattened over the batch) of `q`, `k`, `v`.
    fn of(n: usize, q: &'a [f64], k: &'a [f64], v: &'a [f64], dims: &Dims) -> Head<'a> {
        let (s, d) = (dims.seqlen, dims.head_dim);
        let (batch, head) = (n / dims.heads, n % dims.heads);
        let kv = batch * dims.kv_heads + head / dims.group();
        Head { q: &q[n * s * d..(n + 1) * s * d], k: &k[kv * s * d..(kv + 1) * s * d], v: &v[kv * s * d..(kv + 1) * s * d], batch, head }
    }

    /// The keys that some query of `rows` sees: a causal, windowed or chunked
    /// block of queries sees a band of the sequence, and the keys outside it
    /// need neither logits nor probabilities.
    fn span(&self, rows: Range<usize>, s: usize, f: &Features<'_>) -> Range<usize> {
        let (mut lo, mut hi) = (s, 0);
        for i in rows {
            if let Some(first) = (0..s).find(|&j| f.visible(s, self.batch, i, j)) {
                lo = lo.min(first);
                hi = hi.max((first..s).rev().find(|&j| f.visible(s, self.batch, i, j)).map_or(first, |j| j) + 1);
            }
        }
        if lo < hi { lo..hi } else { 0..0 }
    }

    /// The logits of query rows `rows` on the keys `keys` (`rows × keys`,
    /// `-inf` where masked) and, with a soft cap, `1 - tanh²` of each (the
    /// cap's derivative).
    fn logits(&self, rows: Range<usize>, keys: Range<usize>, dims: &Dims, scale: f64, f: &Features<'_>) -> (Vec<f64>, Vec<f64>) {
        let (s, d, w) = (dims.seqlen, dims.head_dim, keys.len());
        let mut sc = vec![0.0; rows.len() * w];
        if w == 0 {
            return (sc, Vec::new());
        }
        gemm(
            rows.len(),
            d,
            w,
            scale,
            &self.q[rows.start * d..rows.end * d],
            false,
            &self.k[keys.start * d..keys.end * d],
            true,
            0.0,
            &mut sc,
        );
        let mut slope = if f.soft_cap.is_some() { vec![0.0; sc.len()] } else { Vec::new() };
        for (r, row) in sc.chunks_mut(w).enumerate() {
            let i = rows.start + r;
            for (x, j) in row.iter_mut().zip(keys.clone()) {
                if !f.visible(s, self.batch, i, j) {
                    *x = f64::NEG_INFINITY;
                    continue;
                }
                if let Some(c) = f.soft_cap {
                    let t = (*x / c).tanh();
                    *x = c * t;
                    slope[r * w + j - keys.start] = 1.0 - t * t;
                }
                if let Some(bias) = f.bias {
                    *x += bias[((self.batch * dims.heads + self.head) * s + i) * s + j];
                }
            }
        }
        (sc, slope)
    }

    /// This head's sink logit, if any.
    fn sink(&self, f: &Features<'_>) -> Option<f64> {
        f.sinks.map(|s| s[self.head])
    }
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

/// Plain attention forward over whole sequences: `dims = [bh, S, d]`.
pub fn forward(q: &[f64], k: &[f64], v: &[f64], dims: [usize; 3], scale: f64, causal: bool) -> Attention {
    attend(q, k, v, &Dims::mha(dims[0], dims[1], dims[2]), scale, &Features::masked(causal))
}

/// Plain attention gradients (see [`attend_backward`]): `dims = [bh, S, d]`.
#[allow(clippy::too_many_arguments)]
pub fn backward(q: &[f64], k: &[f64], v: &[f64], dy: &[f64], fwd: &Attention, dims: [usize; 3], scale: f64, causal: bool) -> Gradients {
    attend_backward(q, k, v, dy, fwd, &Dims::mha(dims[0], dims[1], dims[2]), scale, &Features::masked(causal))
}

/// Attention forward with every feature.
pub fn attend(q: &[f64], k: &[f64], v: &[f64], dims: &Dims, scale: f64, f: &Features<'_>) -> Attention {
    let (s, d) = (dims.seqlen, dims.head_dim);
    let bh = dims.batch * dims.heads;
    let heads = per_head(bh, |n| {
        let head = Head::of(n, q, k, v, dims);
        let sink = head.sink(f);
        let (mut out, mut lse) = (vec![0.0; s * d], vec![f64::NEG_INFINITY; s]);
        for r0 in (0..s).step_by(BLOCK) {
            let rows = r0..(r0 + BLOCK).min(s);
            let keys = head.span(rows.clone(), s, f);
            let (mut sc, _) = head.logits(rows.clone(), keys.clone(), dims, scale, f);
            for (r, lse_r) in lse[rows.clone()].iter_mut().enumerate() {
                let row = &mut sc[r * keys.len()..(r + 1) * keys.len()];
                let mx = row.iter().cloned().chain(sink).fold(f64::NEG_INFINITY, f64::max);
                if mx == f64::NEG_INFINITY {
                    row.fill(0.0);
                    continue;
                }
                row.iter_mut().for_each(|x| *x = (*x - mx).exp());
                let total = row.iter().sum::<f64>() + sink.map_or(0.0, |t| (t - mx).exp());
                row.iter_mut().for_each(|x| *x /= total);
                *lse_r = mx + total.ln();
            }
            if !keys.is_empty() {
                let v = &head.v[keys.start * d..keys.end * d];
                gemm(rows.len(), keys.len(), d, 1.0, &sc, false, v, false, 0.0, &mut out[rows.start * d..rows.end * d]);
            }
        }
        (out, lse)
    });
    let mut a = Attention { out: Vec::with_capacity(bh * s * d), lse: Vec::with_capacity(bh * s) };
    for (o, l) in heads {
        a.out.extend(o);
        a.lse.extend(l);
    }
    a
}

/// Attention gradients of `L = Σ dY ∘ O` given the forward results `fwd`, with
/// `P = exp(logit − LSE)` and `D = rowsum(dY ∘ O)`: `dV = Pᵀ·dY`,
/// `dZ = P ∘ (dY·Vᵀ − D)` on the logits, through the soft cap `dT = dZ ∘ (1 − tanh²)`,
/// `dQ = scale·dT·K`, `dK = scale·dTᵀ·Q` (K and V gradients summed over each KV
/// head's query heads), `dsink = −Σ_i exp(sink − LSE_i)·D_i`.
#[allow(clippy::too_many_arguments)]
pub fn attend_backward(
    q: &[f64],
    k: &[f64],
    v: &[f64],
    dy: &[f64],
    fwd: &Attention,
    dims: &Dims,
    scale: f64,
    f: &Features<'_>,
) -> Gradients {
    let (s, d) = (dims.seqlen, dims.head_dim);
    let bh = dims.batch * dims.heads;
    let heads = per_head(bh, |n| {
        let head = Head::of(n, q, k, v, dims);
        let (dyh, oh, lse) = (&dy[n * s * d..(n + 1) * s * d], &fwd.out[n * s * d..(n + 1) * s * d], &fwd.lse[n * s..(n + 1) * s]);
        let (mut dq, mut dk, mut dv, mut dsink) = (vec![0.0; s * d], vec![0.0; s * d], vec![0.0; s * d], 0.0);
        for r0 in (0..s).step_by(BLOCK) {
            let rows = r0..(r0 + BLOCK).min(s);
            let m = rows.len();
            let keys = head.span(rows.clone(), s, f);
            let w = keys.len();
            let (mut p, slope) = head.logits(rows.clone(), keys.clone(), dims, scale, f);
            for r in 0..m {
                let l = lse[rows.start + r];
                p[r * w..(r + 1) * w].iter_mut().for_each(|x| *x = if l == f64::NEG_INFINITY { 0.0 } else { (*x - l).exp() });
            }
            let dy_blk = &dyh[rows.start * d..rows.end * d];
            let (k_keys, v_keys) = (&head.k[keys.start * d..keys.end * d], &head.v[keys.start * d..keys.end * d]);
            let mut ds = vec![0.0; m * w];
            if w > 0 {
                gemm(w, m, d, 1.0, &p, true, dy_blk, false, 1.0, &mut dv[keys.start * d..keys.end * d]);
                gemm(m, d, w, 1.0, dy_blk, false, v_keys, true, 0.0, &mut ds);
            }
            for r in 0..m {
                let i = rows.start + r;
                let dd: f64 = (0..d).map(|c| dyh[i * d + c] * oh[i * d + c]).sum();
                if let Some(t) = head.sink(f)
                    && lse[i] != f64::NEG_INFINITY
                {
                    dsink -= (t - lse[i]).exp() * dd;
                }
                for (c, x) in ds[r * w..(r + 1) * w].iter_mut().enumerate() {
                    *x = p[r * w + c] * (*x - dd) * if slope.is_empty() { 1.0 } else { slope[r * w + c] };
                }
            }
            if w > 0 {
                gemm(m, w, d, scale, &ds, false, k_keys, false, 0.0, &mut dq[rows.start * d..rows.end * d]);
                gemm(w, m, d, scale, &ds, true, &head.q[rows.start * d..rows.end * d], false, 1.0, &mut dk[keys.start * d..keys.end * d]);
            }
        }
        (dq, dk, dv, dsink)
    });
    let kv_len = dims.batch * dims.kv_heads * s * d;
    let mut g =
        Gradients { dq: Vec::with_capacity(bh * s * d), dk: vec![0.0; kv_len], dv: vec![0.0; kv_len], dsinks: vec![0.0; dims.heads] };
    for (n, (dq, dk, dv, dsink)) in heads.into_iter().enumerate() {
        g.dq.extend(dq);
        let kv = (n / dims.heads) * dims.kv_heads + (n % dims.heads) / dims.group();
        for (acc, x) in g.dk[kv * s * d..(kv + 1) * s * d].iter_mut().zip(dk) {
            *acc += x;
        }
        for (acc, x) in g.dv[kv * s * d..(kv + 1) * s * d].iter_mut().zip(dv) {
            *acc += x;
        }
        g.dsinks[n % dims.heads] += dsink;
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

    /// Deterministic values in `[-1, 1)`.
    fn input(n: usize, seed: u64) -> Vec<f64> {
        (0..n).map(|i| (((i as u64 + seed) * 2_654_435_761) % 1000) as f64 / 500.0 - 1.0).collect()
    }

    /// `Σ dY ∘ O`, the loss the gradients differentiate.
    fn loss(f: &Attention, dy: &[f64]) -> f64 {
        f.out.iter().zip(dy).map(|(o, g)| o * g).sum()
    }

    #[test]
    fn masks_combine_by_logical_and() {
        let (qs, ks) = ([0, 0, 0, 1, 1, 1], [0, 0, 1, 1, 1, 1]);
        let f = Features { causal: true, window: Some((2, 0)), chunk: Some(4), segments: Some((&qs, &ks)), ..Features::default() };
        let seen: Vec<Vec<usize>> = (0..6).map(|i| (0..6).filter(|&j| f.visible(6, 0, i, j)).collect()).collect();
        assert_eq!(seen, vec![vec![0], vec![0, 1], vec![0, 1], vec![2, 3], vec![4], vec![4, 5]]);
        let w = Features { window: Some((1, 2)), ..Features::default() };
        assert_eq!((0..6).filter(|&j| w.visible(6, 0, 2, j)).collect::<Vec<_>>(), vec![1, 2, 3, 4]);
    }

    #[test]
    fn every_feature_matches_finite_differences() {
        let dims = Dims { batch: 2, heads: 4, kv_heads: 2, seqlen: 12, head_dim: 3 };
        let (nq, nk) = (2 * 4 * 12 * 3, 2 * 2 * 12 * 3);
        let (q, k, v, dy) = (input(nq, 1), input(nk, 2), input(nk, 3), input(nq, 4));
        let bias: Vec<f64> = input(2 * 4 * 12 * 12, 5).iter().map(|x| 0.5 * x).collect();
        // Query 11 of batch 1 is alone in segment 9: only its sink is visible.
        let mut q_seg: Vec<i32> = (0..24).map(|t| t % 12 / 5).collect();
        q_seg[23] = 9;
        let kv_seg: Vec<i32> = (0..24).map(|t| t % 12 / 5).collect();
        let sinks = [0.3, -0.2, 1.1, 0.0];
        let f = Features {
            causal: false,
            window: Some((4, 2)),
            chunk: Some(8),
            soft_cap: Some(1.5),
            bias: Some(&bias),
            segments: Some((&q_seg, &kv_seg)),
            sinks: Some(&sinks),
        };
        let scale = 0.9;
        let fwd = attend(&q, &k, &v, &dims, scale, &f);
        let g = attend_backward(&q, &k, &v, &dy, &fwd, &dims, scale, &f);
        let row = (4 + 3) * 12 + 11; // batch 1, head 3, query 11
        assert!(fwd.out[row * 3..row * 3 + 3].iter().all(|&x| x == 0.0) && fwd.lse[row] == sinks[3]);
        let eps = 1e-6;
        let check = |name: &str, x: &[f64], got: &[f64], run: &dyn Fn(&[f64]) -> f64| {
            for i in 0..x.len() {
                let (mut hi, mut lo) = (x.to_vec(), x.to_vec());
                hi[i] += eps;
                lo[i] -= eps;
                let want = (run(&hi) - run(&lo)) / (2.0 * eps);
                assert!((got[i] - want).abs() < 1e-6 * (1.0 + want.abs()), "d{name}[{i}]: {} vs finite difference {want}", got[i]);
            }
        };
        check("q", &q, &g.dq, &|x| loss(&attend(x, &k, &v, &dims, scale, &f), &dy));
        check("k", &k, &g.dk, &|x| loss(&attend(&q, x, &v, &dims, scale, &f), &dy));
        check("v", &v, &g.dv, &|x| loss(&attend(&q, &k, x, &dims, scale, &f), &dy));
        check("sinks", &sinks, &g.dsinks, &|x| loss(&attend(&q, &k, &v, &dims, scale, &Features { sinks: Some(x), ..f }), &dy));
        assert!(g.dsinks.iter().all(|&x| x != 0.0));
    }

    #[test]
    fn a_row_that_sees_nothing_outputs_zeros_and_passes_no_gradient() {
        let dims = Dims { batch: 1, heads: 2, kv_heads: 1, seqlen: 4, head_dim: 2 };
        let (q, k, v, dy) = (input(16, 1), input(8, 2), input(8, 3), input(16, 4));
        let (q_seg, kv_seg) = ([0, 0, 5, 0], [0, 0, 0, 0]);
        let f = Features { segments: Some((&q_seg, &kv_seg)), ..Features::default() };
        let fwd = attend(&q, &k, &v, &dims, 1.0, &f);
        let g = attend_backward(&q, &k, &v, &dy, &fwd, &dims, 1.0, &f);
        for h in 0..2 {
            let row = h * 4 + 2;
            assert_eq!(fwd.lse[row], f64::NEG_INFINITY);
            assert_eq!((&fwd.out[row * 2..row * 2 + 2], &g.dq[row * 2..row * 2 + 2]), (&[0.0, 0.0][..], &[0.0, 0.0][..]));
            assert!(fwd.lse[h * 4 + 3].is_finite());
        }
        assert!(g.dk.iter().chain(&g.dv).all(|x| x.is_finite()));
    }

    #[test]
    fn grouped_heads_equal_repeated_kv_heads() {
        let gqa = Dims { batch: 2, heads: 4, kv_heads: 1, seqlen: 70, head_dim: 3 };
        let mha = Dims { kv_heads: 4, ..gqa };
        let (q, k, v, dy) = (input(2 * 4 * 70 * 3, 1), input(2 * 70 * 3, 2), input(2 * 70 * 3, 3), input(2 * 4 * 70 * 3, 4));
        let repeat = |x: &[f64]| -> Vec<f64> { x.chunks(70 * 3).flat_map(|h| h.repeat(4)).collect() };
        let f = Features { causal: true, window: Some((9, 0)), ..Features::default() };
        let (a, b) = (attend(&q, &k, &v, &gqa, 0.5, &f), attend(&q, &repeat(&k), &repeat(&v), &mha, 0.5, &f));
        assert_eq!((&a.out, &a.lse), (&b.out, &b.lse));
        let ga = attend_backward(&q, &k, &v, &dy, &a, &gqa, 0.5, &f);
        let gb = attend_backward(&q, &repeat(&k), &repeat(&v), &dy, &b, &mha, 0.5, &f);
        let summed = |x: &[f64]| -> Vec<f64> {
            x.chunks(4 * 70 * 3).flat_map(|b| (0..70 * 3).map(move |i| (0..4).map(|h| b[h * 210 + i]).sum::<f64>())).collect()
        };
        let close = |x: &[f64], y: &[f64]| x.iter().zip(y).all(|(a, b)| (a - b).abs() < 1e-12);
        assert!(close(&ga.dq, &gb.dq) && close(&ga.dk, &summed(&gb.dk)) && close(&ga.dv, &summed(&gb.dv)));
    }

    #[test]
    fn a_band_of_keys_equals_the_whole_row_with_the_rest_masked_by_bias() {
        // A window makes each block of queries see a band of keys that starts
        // past key 0 (from the second block on): computed on the band alone, it
        // must equal every key with the keys outside the window at -inf bias.
        let dims = Dims { batch: 1, heads: 2, kv_heads: 1, seqlen: 200, head_dim: 4 };
        let (l, r) = (70, 10);
        let (q, k, v, dy) = (input(2 * 200 * 4, 1), input(200 * 4, 2), input(200 * 4, 3), input(2 * 200 * 4, 4));
        let bias: Vec<f64> = (0..2 * 200 * 200)
            .map(|n| {
                let (i, j) = (n / 200 % 200, n % 200);
                if j + l < i || j > i + r { f64::NEG_INFINITY } else { 0.0 }
            })
            .collect();
        let band = Features { window: Some((l, r)), ..Features::default() };
        let whole = Features { bias: Some(&bias), ..Features::default() };
        let (fb, fw) = (attend(&q, &k, &v, &dims, 0.8, &band), attend(&q, &k, &v, &dims, 0.8, &whole));
        let (gb, gw) =
            (attend_backward(&q, &k, &v, &dy, &fb, &dims, 0.8, &band), attend_backward(&q, &k, &v, &dy, &fw, &dims, 0.8, &whole));
        let close = |a: &[f64], b: &[f64]| a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-12);
        assert!(close(&fb.out, &fw.out) && close(&fb.lse, &fw.lse), "forward");
        assert!(close(&gb.dq, &gw.dq) && close(&gb.dk, &gw.dk) && close(&gb.dv, &gw.dv), "gradients");
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
