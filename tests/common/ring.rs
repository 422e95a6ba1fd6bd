//! Ring attention test support: how global sequences are split over the ranks of
//! a ring, and the float64 reference sliced the same way.
//!
//! Global tensors are natural-layout `[b·h, S_total, d]` with `S_total = W·S_local`.
//! Contiguous layout: ring position `r` owns global tokens `[r·S_local, (r+1)·S_local)`.
//! Striped layout: position `r` owns the tokens `t` with `t mod W = r` (local row
//! `i` is global token `i·W + r`). Per rank, the kernel takes `q` and `k` as
//! `[b, h, d, S_local]` (`[b, h, S_local, d]` with `tp_q` / `tp_k`) and `v` as
//! `[b, h, S_local, d]`; it returns `o` `[b, h, S_local, d]` and the LSE
//! `[b, h, 128, S_local/128]` (row `128 g + p` at `[.., p, g]`).
//!
//! The reference is [`Problem`] (common/attention.rs): the queries of one rank
//! attend to the whole global K/V with their global positions
//! (`QueryPositions { offset, stride }`), which is the full-sequence attention
//! restricted to that rank's rows (checked against the full solve in tests/ring/fwd.rs).

use super::attention::{Problem, QueryPositions, stats_layout, stats_rows, transpose_last2};
use std::ops::Range;

/// The geometry of one ring problem.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ring {
    /// Ranks in the ring (`num_workers`).
    pub w: usize,
    pub b: usize,
    pub h: usize,
    /// Tokens per rank (`S_local`).
    pub sl: usize,
    pub d: usize,
    pub striped: bool,
}

/// The global problem: `q`, `k`, `v` as `[b·h, S_total, d]` (q exactly as the
/// kernel receives it, pre-scaled when causal), the scale on `q·k` and the mask.
#[derive(Clone, Copy, Debug)]
pub struct Global<'a> {
    pub q: &'a [f64],
    pub k: &'a [f64],
    pub v: &'a [f64],
    pub scale: f64,
    pub causal: bool,
}

/// The reference for some local rows of one rank.
#[derive(Clone, Debug)]
pub struct Expected {
    /// The local rows covered, per batch.
    pub rows: Range<usize>,
    /// `[b·h, rows, d]`.
    pub out: Vec<f64>,
    /// `[b·h, rows]`: `max + ln(sum)` of the scaled, masked scores.
    pub lse: Vec<f64>,
}

/// `case(..)`'s layout flag: contiguous.
pub const C: bool = false;
/// `case(..)`'s layout flag: striped.
pub const S: bool = true;

/// What a numerics case of either pass holds: its name, ring, mask, LNC degree,
/// softmax scale (None: `1/sqrt(d)`), precision and seed.
#[derive(Clone, Debug)]
pub struct CaseBase {
    pub name: String,
    pub ring: Ring,
    pub causal: bool,
    pub lnc: usize,
    pub softmax_scale: Option<f64>,
    pub precision: nki::Precision,
    pub seed: u64,
}

/// Runs `check` on every case of a table.
pub fn check_all<T, R>(cases: &[T], check: impl Fn(&T) -> R) {
    for c in cases {
        check(c);
    }
}

impl CaseBase {
    /// `W`, layout (striped or contiguous), causal mask, `(b, h)`, `S_local`, `d`
    /// and LNC, in fp32 precision with the default scale; the seed follows the name.
    pub fn new(w: usize, striped: bool, causal: bool, (b, h): (usize, usize), sl: usize, d: usize, lnc: usize) -> CaseBase {
        assert!(!striped || causal, "striped cases are causal");
        let ring = Ring { w, b, h, sl, d, striped };
        let name = ring.label(causal, lnc);
        let seed = super::seed_of(&name);
        CaseBase { name, ring, causal, lnc, softmax_scale: None, precision: nki::Precision::Fp32, seed }
    }

    /// With an explicit softmax scale.
    pub fn scale(mut self, s: f64) -> CaseBase {
        self.softmax_scale = Some(s);
        self.name += &format!(" softmax_scale={s}");
        self
    }

    /// In hardware precision, `what` (the inputs' dtype, if named) in the name.
    pub fn hw(mut self, what: &str) -> CaseBase {
        self.precision = nki::Precision::Hardware;
        self.name += &format!(" hardware{what}");
        self
    }

    /// The softmax scale the case runs with: the explicit one, else `1/sqrt(d)`.
    pub fn scale_value(&self) -> f64 {
        self.softmax_scale.unwrap_or(1.0 / (self.ring.d as f64).sqrt())
    }
}

impl Ring {
    /// A case's name: workers, layout, mask, shapes and LNC degree.
    pub fn label(&self, causal: bool, lnc: usize) -> String {
        let layout = if self.striped { "striped" } else { "contiguous" };
        let mask = if causal { "causal" } else { "full" };
        format!("W{} {layout} {mask} {}x{}x{}x{} lnc{lnc}", self.w, self.b, self.h, self.sl, self.d)
    }

    /// `b·h`, the batch the kernel folds.
    pub fn bh(&self) -> usize {
        self.b * self.h
    }

    /// `S_total = W·S_local`.
    pub fn st(&self) -> usize {
        self.w * self.sl
    }

    /// Groups of 128 rows per rank.
    pub fn groups(&self) -> usize {
        self.sl.div_ceil(128)
    }

    /// The global token of local row `i` on ring position `r`.
    pub fn global(&self, r: usize, i: usize) -> usize {
        assert!(r < self.w && i < self.sl, "row {i} of position {r} in a ring of {} x {}", self.w, self.sl);
        if self.striped { i * self.w + r } else { r * self.sl + i }
    }

    /// The global positions of position `r`'s local rows, as the reference takes them.
    pub fn positions(&self, r: usize) -> QueryPositions {
        if self.striped {
            QueryPositions { offset: r as i64, stride: self.w as i64 }
        } else {
            QueryPositions { offset: (r * self.sl) as i64, stride: 1 }
        }
    }

    /// Local rows `rows` of position `r`, natural layout `[b·h, rows, d]`, of the
    /// global `[b·h, S_total, d]` tensor `x`.
    pub fn local_rows(&self, x: &[f64], r: usize, rows: Range<usize>) -> Vec<f64> {
        let (bh, st, d) = (self.bh(), self.st(), self.d);
        assert_eq!(x.len(), bh * st * d, "a global [{bh}, {st}, {d}] tensor");
        let mut out = Vec::with_capacity(bh * rows.len() * d);
        for b in 0..bh {
            for i in rows.clone() {
                let g = self.global(r, i);
                out.extend_from_slice(&x[(b * st + g) * d..(b * st + g + 1) * d]);
            }
        }
        out
    }

    /// All local rows of position `r`: `[b·h, S_local, d]`.
    pub fn local(&self, x: &[f64], r: usize) -> Vec<f64> {
        self.local_rows(x, r, 0..self.sl)
    }

    /// Position `r`'s `q` or `k` in the kernel layout: `[b, h, d, S_local]`, or
    /// `[b, h, S_local, d]` when `tp`.
    pub fn shard_qk(&self, x: &[f64], r: usize, tp: bool) -> (Vec<usize>, Vec<f64>) {
        let (b, h, sl, d) = (self.b, self.h, self.sl, self.d);
        let l = self.local(x, r);
        if tp { (vec![b, h, sl, d], l) } else { (vec![b, h, d, sl], transpose_last2(&l, b * h, sl, d)) }
    }

    /// Position `r`'s `v` in the kernel layout `[b, h, S_local, d]`.
    pub fn shard_v(&self, x: &[f64], r: usize) -> (Vec<usize>, Vec<f64>) {
        (vec![self.b, self.h, self.sl, self.d], self.local(x, r))
    }

    /// The global `[b·h, S_total, d]` tensor from every position's `[b, h, S_local, d]` output.
    pub fn unshard_out(&self, per_rank: &[Vec<f32>]) -> Vec<f32> {
        let (bh, sl, st, d) = (self.bh(), self.sl, self.st(), self.d);
        assert_eq!(per_rank.len(), self.w, "one output per ring position");
        let mut g = vec![f32::NAN; bh * st * d];
        for (r, o) in per_rank.iter().enumerate() {
            assert_eq!(o.len(), bh * sl * d, "position {r}: a [{bh}, {sl}, {d}] output");
            for b in 0..bh {
                for i in 0..sl {
                    let t = self.global(r, i);
                    g[(b * st + t) * d..(b * st + t + 1) * d].copy_from_slice(&o[(b * sl + i) * d..(b * sl + i + 1) * d]);
                }
            }
        }
        g
    }

    /// The global per-row LSE `[b·h, S_total]` from every position's `[b, h, 128, G]` LSE.
    pub fn unshard_lse(&self, per_rank: &[Vec<f32>]) -> Vec<f32> {
        let (bh, sl, st) = (self.bh(), self.sl, self.st());
        assert_eq!(per_rank.len(), self.w, "one LSE per ring position");
        let mut g = vec![f32::NAN; bh * st];
        for (r, l) in per_rank.iter().enumerate() {
            let rows = stats_rows(l, bh, sl);
            for b in 0..bh {
                for i in 0..sl {
                    g[b * st + self.global(r, i)] = rows[b * sl + i];
                }
            }
        }
        g
    }

    /// The reference for local rows `rows` of position `r`: those queries attend to
    /// the global keys and values at their global positions.
    pub fn expected_rows(&self, g: &Global<'_>, r: usize, rows: Range<usize>) -> Expected {
        let (bh, st, d) = (self.bh(), self.st(), self.d);
        let ql = self.local_rows(g.q, r, rows.clone());
        let first = self.positions(r).of(rows.start);
        let positions = QueryPositions { offset: first, stride: self.positions(r).stride };
        let p = Problem { scale: g.scale, causal: g.causal, positions, ..Problem::new(bh, bh, rows.len(), st, d, &ql, g.k, g.v) };
        let sol = p.solve(true);
        let lse = sol.max.iter().zip(&sol.sum).map(|(m, s)| m + s.ln()).collect();
        Expected { rows, out: sol.out, lse }
    }

    /// The reference for every local row of every position (one thread per
    /// position): per position, the output `[b·h, S_local, d]` and the LSE in the
    /// kernel's `[b·h, 128, G]` layout.
    pub fn expected(&self, g: &Global<'_>) -> Vec<(Vec<f64>, Vec<f64>)> {
        self.expected_sampled(g, std::slice::from_ref(&(0..self.sl)))
            .into_iter()
            .map(|mut e| {
                let e = e.swap_remove(0);
                (e.out, stats_layout(&e.lse, self.bh(), self.sl, 0.0))
            })
            .collect()
    }

    /// The reference for the local row ranges `rows` of every position (one thread per position).
    pub fn expected_sampled(&self, g: &Global<'_>, rows: &[Range<usize>]) -> Vec<Vec<Expected>> {
        std::thread::scope(|s| {
            let handles: Vec<_> =
                (0..self.w).map(|r| s.spawn(move || rows.iter().map(|rg| self.expected_rows(g, r, rg.clone())).collect())).collect();
            handles.into_iter().map(|h| h.join().expect("reference thread")).collect()
        })
    }
}

/// Rows `rows` (per batch) of a `[bh, sl, d]` output.
pub fn pick_out(o: &[f32], bh: usize, sl: usize, d: usize, rows: &Range<usize>) -> Vec<f32> {
    assert_eq!(o.len(), bh * sl * d, "a [{bh}, {sl}, {d}] output");
    (0..bh).flat_map(|b| o[(b * sl + rows.start) * d..(b * sl + rows.end) * d].iter().copied()).collect()
}

/// Rows `rows` (per batch) of a `[bh, 128, G]` statistics tensor, as `[bh, rows]`.
pub fn pick_lse(l: &[f32], bh: usize, sl: usize, rows: &Range<usize>) -> Vec<f32> {
    let all = stats_rows(l, bh, sl);
    (0..bh).flat_map(|b| all[b * sl + rows.start..b * sl + rows.end].iter().copied()).collect()
}

/// Runs `f` on a thread and fails if it takes longer than `secs` (a hang).
pub fn within<R: Send + 'static>(secs: u64, what: &str, f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(secs)).unwrap_or_else(|_| panic!("{what}: no result within {secs} s (hang?)"))
}

/// The source file whose assert states a rule: the shared ring module for the
/// shared rules it checks on the keyword arguments, else the pass's `kernel` file
/// (also for the shared rules on shapes, which each kernel checks with its own).
pub fn rule_source(shared: Option<nki::attention::ring_fwd::RingRule>, kernel: &'static str) -> &'static str {
    use nki::attention::ring_fwd::RingRule;
    match shared {
        Some(RingRule::StripedNeedsCausal | RingRule::ZigzagNeedsCausal | RingRule::GroupSize | RingRule::ScaleNotFinite) => {
            "ring_features.rs"
        }
        _ => kernel,
    }
}

/// A rule of a ring pass's typed API is one message on both paths: `validated`
/// (the configuration's `validate`) ends with `message`, and so does the error of
/// the emulated kernel's assert (`kernel_err`), which names the `source` file of
/// the assert ([`rule_source`]).
pub fn assert_one_message(validated: nki::Result<()>, message: &str, kernel_err: &str, source: &str) {
    let api = validated.expect_err("the typed API refuses the configuration").to_string();
    assert!(api.ends_with(&format!(": {message}")), "validate names the rule by its message `{message}`: {api}");
    assert!(kernel_err.contains(message), "expected the kernel's error to be `{message}`, got: {kernel_err}");
    assert!(kernel_err.contains(source), "the error names the kernel source: {kernel_err}");
}
