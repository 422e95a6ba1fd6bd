//! An independent float64 reference of `attention_cte`'s math (the NKI library's
//! torch reference, written from its semantics in natural layouts), layout
//! helpers for the kernel's `tp_q` / `tp_k` / `tp_out` and statistics layouts, and
//! NumPy-harness runners that pass keyword arguments.
//!
//! Natural layouts: `q` is `[bs, sq, d]`, `k` and `v` are `[bs_kv, sk, d]`, prior
//! keys and values `[bs_kv, sp, d]`. Query batch `b` reads KV batch
//! `b / (bs / bs_kv)` (repeat-interleave GQA).

use super::{Arg, RankArgs, spec_run};
use std::path::Path;

/// The prefix cache of a reference problem: `[bs_kv, len, d]` keys and values, of
/// which the first `used` are visible (at positions `j - used`).
#[derive(Clone, Copy, Debug)]
pub struct PriorRef<'a> {
    pub k: &'a [f64],
    pub v: &'a [f64],
    pub len: usize,
    pub used: usize,
}

/// Global position of local query row `i`: `offset + i * stride` (no CP: 0 and 1;
/// contiguous / striped CP: the offset and 1; strided CP: the rank and the degree).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueryPositions {
    pub offset: i64,
    pub stride: i64,
}

impl QueryPositions {
    /// Local positions (no context parallelism).
    pub const LOCAL: QueryPositions = QueryPositions { offset: 0, stride: 1 };

    /// The position of local row `i`.
    pub fn of(&self, i: usize) -> i64 {
        self.offset + i as i64 * self.stride
    }
}

/// One attention problem in natural layouts.
#[derive(Clone, Copy, Debug)]
pub struct Problem<'a> {
    pub bs: usize,
    pub bs_kv: usize,
    pub sq: usize,
    pub sk: usize,
    pub d: usize,
    pub q: &'a [f64],
    pub k: &'a [f64],
    pub v: &'a [f64],
    /// Multiplies `q · k`.
    pub scale: f64,
    /// Mask active keys after the query's position (prior keys are never causally masked).
    pub causal: bool,
    /// Keep keys at positions `qpos - sw + 1 ..= qpos` (0: off); applies to prior keys too.
    pub sliding_window: usize,
    pub prior: Option<PriorRef<'a>>,
    /// One logit per query batch, added to the softmax denominator only.
    pub sink: Option<&'a [f64]>,
    pub positions: QueryPositions,
    /// `(bound_min, bound_max)`, each `[bs, sq]`: keep `bound_min <= kv_index < bound_max`,
    /// where `kv_index` counts the used prior keys first.
    pub bounds: Option<(&'a [f64], &'a [f64])>,
}

/// What the reference computes, per query row `b * sq + i` (the output is `[bs, sq, d]`).
#[derive(Clone, Debug)]
pub struct Reference {
    /// `Σ_k p_k v_k`, divided by the row sum when normalized.
    pub out: Vec<f64>,
    /// The row max `M` over the scaled, masked scores and the sink.
    pub max: Vec<f64>,
    /// The row sum `S = Σ exp(s_k - M)` plus `exp(sink - M)`.
    pub sum: Vec<f64>,
    /// Rows that see no key at all (their output is 0 with a sink, NaN without).
    pub fully_masked: Vec<bool>,
}

impl<'a> Problem<'a> {
    /// A plain problem: scale 1, causal, no window, prior, sink, CP or packing.
    #[allow(clippy::too_many_arguments)]
    pub fn new(bs: usize, bs_kv: usize, sq: usize, sk: usize, d: usize, q: &'a [f64], k: &'a [f64], v: &'a [f64]) -> Self {
        assert_eq!(q.len(), bs * sq * d, "q is [bs, sq, d]");
        assert_eq!(k.len(), bs_kv * sk * d, "k is [bs_kv, sk, d]");
        assert_eq!(v.len(), bs_kv * sk * d, "v is [bs_kv, sk, d]");
        Problem {
            bs,
            bs_kv,
            sq,
            sk,
            d,
            q,
            k,
            v,
            scale: 1.0,
            causal: true,
            sliding_window: 0,
            prior: None,
            sink: None,
            positions: QueryPositions::LOCAL,
            bounds: None,
        }
    }

    /// Whether query row `i` of batch `b` sees key `j` of the concatenated
    /// `[used prior ++ active]` sequence.
    pub fn visible(&self, b: usize, i: usize, j: usize) -> bool {
        let used = self.prior.map_or(0, |p| p.used);
        let qpos = self.positions.of(i);
        let (kpos, prior) = if j < used { (j as i64 - used as i64, true) } else { ((j - used) as i64, false) };
        if self.causal && !prior && kpos > qpos {
            return false;
        }
        if self.sliding_window > 0 && kpos <= qpos - self.sliding_window as i64 {
            return false;
        }
        if let Some((lo, hi)) = self.bounds {
            let (lo, hi) = (lo[b * self.sq + i], hi[b * self.sq + i]);
            if (j as f64) < lo || (j as f64) >= hi {
                return false;
            }
        }
        true
    }

    /// The reference: output (normalized when `normalize`), row max, row sum and
    /// the fully masked rows.
    pub fn solve(&self, normalize: bool) -> Reference {
        let (bs, sq, d) = (self.bs, self.sq, self.d);
        assert!(self.bs_kv > 0 && bs % self.bs_kv == 0, "bs must be a multiple of bs_kv");
        let group = bs / self.bs_kv;
        let used = self.prior.map_or(0, |p| p.used);
        if let Some(p) = self.prior {
            assert!(p.used <= p.len, "prior_used_len {} > prior length {}", p.used, p.len);
            assert_eq!(p.k.len(), self.bs_kv * p.len * d, "k_prior is [bs_kv, sp, d]");
            assert_eq!(p.v.len(), self.bs_kv * p.len * d, "v_prior is [bs_kv, sp, d]");
        }
        let total = used + self.sk;
        let mut r =
            Reference { out: vec![0.0; bs * sq * d], max: vec![0.0; bs * sq], sum: vec![0.0; bs * sq], fully_masked: vec![false; bs * sq] };
        let mut scores = vec![0.0f64; total];
        let mut keep = vec![false; total];
        for b in 0..bs {
            let kvb = b / group;
            let key = |j: usize| -> (&[f64], &[f64]) {
                if j < used {
                    let p = self.prior.expect("prior keys need a prior");
                    let o = (kvb * p.len + j) * d;
                    (&p.k[o..o + d], &p.v[o..o + d])
                } else {
                    let o = (kvb * self.sk + j - used) * d;
                    (&self.k[o..o + d], &self.v[o..o + d])
                }
            };
            for i in 0..sq {
                let row = b * sq + i;
                let qr = &self.q[row * d..(row + 1) * d];
                let mut m = f64::NEG_INFINITY;
                for j in 0..total {
                    keep[j] = self.visible(b, i, j);
                    if keep[j] {
                        let (kr, _) = key(j);
                        let s = self.scale * qr.iter().zip(kr).map(|(a, c)| a * c).sum::<f64>();
                        scores[j] = s;
                        m = m.max(s);
                    }
                }
                let sink = self.sink.map(|s| s[b]);
                r.fully_masked[row] = m == f64::NEG_INFINITY;
                if let Some(s) = sink {
                    m = m.max(s);
                }
                let o = &mut r.out[row * d..(row + 1) * d];
                if m == f64::NEG_INFINITY {
                    // No key and no sink: the softmax is 0/0, as in the torch reference.
                    r.max[row] = m;
                    r.sum[row] = 0.0;
                    o.iter_mut().for_each(|x| *x = f64::NAN);
                    continue;
                }
                let mut total_sum = sink.map_or(0.0, |s| (s - m).exp());
                for j in (0..total).filter(|&j| keep[j]) {
                    let p = (scores[j] - m).exp();
                    total_sum += p;
                    let (_, vr) = key(j);
                    o.iter_mut().zip(vr).for_each(|(x, y)| *x += p * y);
                }
                if normalize {
                    o.iter_mut().for_each(|x| *x /= total_sum);
                }
                r.max[row] = m;
                r.sum[row] = total_sum;
            }
        }
        r
    }
}

/// `x` as `[n, rows, cols]` transposed to `[n, cols, rows]`.
pub fn transpose_last2(x: &[f64], n: usize, rows: usize, cols: usize) -> Vec<f64> {
    assert_eq!(x.len(), n * rows * cols, "transpose_last2 of a [{n}, {rows}, {cols}] tensor");
    let mut t = vec![0.0; x.len()];
    for b in 0..n {
        for r in 0..rows {
            for c in 0..cols {
                t[(b * cols + c) * rows + r] = x[(b * rows + r) * cols + c];
            }
        }
    }
    t
}

/// `q` (`[bs, sq, d]`) in the kernel's layout: unchanged with `tp_q`, else `[bs, d, sq]`.
pub fn q_layout(q: &[f64], bs: usize, sq: usize, d: usize, tp_q: bool) -> (Vec<usize>, Vec<f64>) {
    if tp_q { (vec![bs, sq, d], q.to_vec()) } else { (vec![bs, d, sq], transpose_last2(q, bs, sq, d)) }
}

/// `k` (`[bs_kv, sk, d]`) in the kernel's layout: unchanged with `tp_k`, else `[bs_kv, d, sk]`.
pub fn k_layout(k: &[f64], bs_kv: usize, sk: usize, d: usize, tp_k: bool) -> (Vec<usize>, Vec<f64>) {
    if tp_k { (vec![bs_kv, sk, d], k.to_vec()) } else { (vec![bs_kv, d, sk], transpose_last2(k, bs_kv, sk, d)) }
}

/// The output (`[bs, sq, d]`) in the kernel's layout: unchanged, or `[bs, d, sq]` with `tp_out`.
pub fn out_layout(out: &[f64], bs: usize, sq: usize, d: usize, tp_out: bool) -> Vec<f64> {
    if tp_out { transpose_last2(out, bs, sq, d) } else { out.to_vec() }
}

/// Number of 128-row query groups.
pub fn groups(sq: usize) -> usize {
    sq.div_ceil(128)
}

/// Per-row values (`[bs, sq]`) in the statistics layout `[bs, 128, G]`: row
/// `128 g + p` of batch `b` at `[b, p, g]`; rows past `sq` hold `pad`.
pub fn stats_layout(rows: &[f64], bs: usize, sq: usize, pad: f64) -> Vec<f64> {
    assert_eq!(rows.len(), bs * sq, "stats_layout of {bs} x {sq} rows");
    let g_n = groups(sq);
    let mut t = vec![pad; bs * 128 * g_n];
    for b in 0..bs {
        for (i, &x) in rows[b * sq..(b + 1) * sq].iter().enumerate() {
            let (g, p) = (i / 128, i % 128);
            t[(b * 128 + p) * g_n + g] = x;
        }
    }
    t
}

/// The inverse of [`stats_layout`]: `[bs, 128, G]` back to per-row values `[bs, sq]`.
pub fn stats_rows(t: &[f32], bs: usize, sq: usize) -> Vec<f32> {
    let g_n = groups(sq);
    assert_eq!(t.len(), bs * 128 * g_n, "a [{bs}, 128, {g_n}] statistics tensor");
    (0..bs * sq).map(|r| t[((r / sq) * 128 + (r % sq) % 128) * g_n + (r % sq) / 128]).collect()
}

/// Runs `kernel` of the emitted package `pkg` under the NumPy executor (one rank,
/// `lnc` programs, `precision` "fp32" or "hardware") with positional `args` and
/// keyword `kwargs`; returns its outputs' values.
pub fn run_numpy_kwargs(pkg: &Path, kernel: &str, args: &[Arg], kwargs: &[(&str, Arg)], lnc: usize, precision: &str) -> Vec<Vec<f32>> {
    run_numpy_kwargs_ranks(pkg, kernel, &[(args.to_vec(), kwargs.to_vec())], lnc, precision).swap_remove(0)
}

/// Runs `kernel` of `pkg` under the NumPy executor with arguments it must refuse;
/// returns the one-line error it printed.
pub fn run_numpy_refused(pkg: &Path, kernel: &str, args: &[Arg], kwargs: &[(&str, Arg)]) -> String {
    let run = spec_run(pkg, kernel, &[(args.to_vec(), kwargs.to_vec())], 1, "fp32", "trn2");
    assert!(!run.ok, "the NumPy run of {kernel} should have been refused:\n{}", run.stdout);
    let _ = std::fs::remove_dir_all(&run.dir);
    run.stderr
}

/// Runs `kernel` of the emitted package `pkg` under the NumPy executor with one
/// rank per entry of `ranks` (its positional arguments and keyword arguments),
/// `lnc` programs each and `precision`; returns every rank's outputs' values.
pub fn run_numpy_kwargs_ranks(pkg: &Path, kernel: &str, ranks: &[RankArgs<'_>], lnc: usize, precision: &str) -> Vec<Vec<Vec<f32>>> {
    let run = spec_run(pkg, kernel, ranks, lnc, precision, "trn2");
    assert!(run.ok, "NumPy run of {kernel} failed:\n{}\n{}", run.stdout, run.stderr);
    let outs = run.outputs(kernel, ranks.len());
    let _ = std::fs::remove_dir_all(&run.dir);
    outs.into_iter().map(|rank| rank.into_iter().map(|o| o.iter().map(|&v| v as f32).collect()).collect()).collect()
}
