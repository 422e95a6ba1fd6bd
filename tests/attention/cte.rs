//! `attention_cte` numerics: the emulated DSL kernel (through the typed
//! `CteConfig` API) against an independent float64 reference
//! (`common::attention`), for every feature of the NKI library kernel's test
//! matrix; the finite values of fully masked rows; and the run-time errors.
//!
//! Tolerances: `Precision::Fp32` runs must hold `max|a-b| <= 1e-5 max|ref| + 1e-6`
//! for the output and both statistics; `Precision::Hardware` runs the library
//! test's `1e-5 + 2e-2 max|ref|` (inputs rounded to their dtype before the
//! reference). bf16 PSUM on trn3 is checked at `1e-5 + 5e-2 max|ref|`.

use crate::common;

use crate::common::attention::{
    PriorRef, Problem, QueryPositions, Reference, groups, k_layout, out_layout, q_layout, stats_layout, stats_rows, transpose_last2,
};
use crate::common::{FP32_ATOL, FP32_RTOL, as_dtype, seed_of, tensor, uniform};
use nki::attention::cte::attention_cte::attention_cte;
use nki::attention::cte::{CteConfig, CteDims, CteInputs, CteOutputs, Prior};
use nki::hw::Generation;
use nki::{Dtype, ErrorKind, Launch, NkiError, Precision, Tensor};
use std::ops::Range;

/// Hardware mode: the library test's tolerance.
const HW_RTOL: f64 = 2e-2;
const HW_ATOL: f64 = 1e-5;
/// Hardware mode with bf16 matmul results (trn3): scores rounded to bf16 before exp.
const BF16_PSUM_RTOL: f64 = 5e-2;

/// How the queries of a context-parallel rank sit in the global sequence.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Cp {
    /// `cp_offset = rank * sq`; query `i` at `rank * sq + i`.
    Contiguous { deg: i64, rank: i64 },
    /// `cp_offset = rank`; query `i` at `rank + i * deg`.
    Strided { deg: i64, rank: i64 },
    /// `cp_striped_input`, `cp_offset` 0 or -1, local positions.
    Striped { deg: i64, offset: i64 },
    /// Contiguous CP with an explicit (possibly negative) `cp_offset`.
    Offset { deg: i64, offset: i64 },
}

/// One `attention_cte` run: shapes, dtype, configuration, data and launch.
#[derive(Clone, Debug)]
pub(crate) struct Case {
    pub(crate) name: String,
    pub(crate) bs: usize,
    pub(crate) bs_kv: usize,
    pub(crate) sq: usize,
    pub(crate) sk: usize,
    pub(crate) d: usize,
    pub(crate) dtype: Dtype,
    pub(crate) cfg: CteConfig,
    /// `(seqlen_prior, prior_used_len)`.
    prior: Option<(usize, usize)>,
    cp: Option<Cp>,
    /// Packed sequences per batch row (0: no packing).
    packed: usize,
    pub(crate) lnc: usize,
    pub(crate) precision: Precision,
    generation: Generation,
    seed: u64,
    /// Range of the uniform q, k, v values.
    range: (f64, f64),
    /// Standard-normal q, k, v instead (Box-Muller on the uniform stream).
    normal: bool,
    /// Relative tolerance override.
    rtol: Option<f64>,
    /// Dtype of the `cp_offset` tensor (int32 in the library tests, fp32 from ring attention).
    cp_offset_dtype: Dtype,
}

/// A tensor parameter a case gives: its name, shape, values and dtype, in the
/// kernel's layout.
pub(crate) struct Given {
    pub(crate) name: &'static str,
    pub(crate) shape: Vec<usize>,
    pub(crate) values: Vec<f64>,
    pub(crate) dtype: Dtype,
}

/// One case's seeded inputs: the natural-layout values the reference takes
/// (`q [bs, sq, d]`, `k`, `v [bs_kv, sk, d]`, the prior's, the sinks, the packing
/// bounds) and the tensor parameters the case gives (q, k, v, then the optional ones).
pub(crate) struct CaseData {
    q: Vec<f64>,
    k: Vec<f64>,
    v: Vec<f64>,
    kp: Vec<f64>,
    vp: Vec<f64>,
    sink: Vec<f64>,
    bounds: Option<(Vec<f64>, Vec<f64>)>,
    pub(crate) tensors: Vec<Given>,
}

/// The emulator's tensors of `given`, by parameter name.
pub(crate) fn emulator_tensors(given: &[Given]) -> Vec<(&'static str, Tensor)> {
    given.iter().map(|g| (g.name, tensor(&g.shape, &g.values, g.dtype))).collect()
}

/// The typed API's inputs over `tensors` (by parameter name).
pub(crate) fn cte_inputs<'t>(tensors: &'t [(&'static str, Tensor)]) -> CteInputs<'t> {
    let get = |name: &str| tensors.iter().find(|(n, _)| *n == name).map(|(_, t)| t);
    let given = |name: &str| get(name).unwrap_or_else(|| panic!("the case gives {name}"));
    CteInputs {
        prior: get("k_prior").map(|k| Prior { k, v: given("v_prior"), used_len: given("prior_used_len") }),
        sink: get("sink"),
        cp_offset: get("cp_offset"),
        bounds: get("bound_min").zip(get("bound_max")),
        ..CteInputs::new(given("q"), given("k"), given("v"))
    }
}

/// A kernel run with its reference.
struct Run {
    outs: CteOutputs,
    reference: Reference,
    /// The active values `[bs_kv, sk, d]` as the kernel saw them (for fully masked rows).
    v: Vec<f64>,
}

/// What §7.3 of the spec derives for a fully masked row without a sink: the row max
/// stays `FLOAT32_MIN`, every key of the computed 512-key tiles adds `exp(0) = 1` to
/// the sum, and the output adds up the V rows of the computed 128-key tiles.
struct Masked {
    /// Keys in the computed 512-key tiles.
    count: usize,
    /// Active V rows (HBM rows of the KV batch) in the computed 128-key tiles.
    v_rows: Range<usize>,
}

/// Relative errors (`max|a-b| / max|ref|`) of one run.
#[derive(Clone, Copy, Debug, Default)]
struct Errors {
    out: f64,
    neg_max: f64,
    sum: f64,
}

/// Standard-normal values (Box-Muller on the deterministic uniform stream).
fn normal(n: usize, seed: u64) -> Vec<f64> {
    let u = uniform(2 * n, seed, 0.0, 1.0);
    (0..n).map(|i| (-2.0 * (1.0 - u[2 * i]).ln()).sqrt() * (std::f64::consts::TAU * u[2 * i + 1]).cos()).collect()
}

/// A seeded rank in `[0, deg)`.
fn rank_of(deg: i64, seed: u64) -> i64 {
    (uniform(1, seed, 0.0, deg as f64)[0] as i64).min(deg - 1)
}

impl Case {
    pub(crate) fn new(name: impl Into<String>, bs: usize, bs_kv: usize, sq: usize, sk: usize, d: usize) -> Case {
        let name = name.into();
        Case {
            seed: seed_of(&name),
            name,
            bs,
            bs_kv,
            sq,
            sk,
            d,
            dtype: Dtype::F32,
            cfg: CteConfig::new(),
            prior: None,
            cp: None,
            packed: 0,
            lnc: 1,
            precision: Precision::Fp32,
            generation: Generation::Trn2,
            range: (0.0, 1.0),
            normal: false,
            rtol: None,
            cp_offset_dtype: Dtype::I32,
        }
    }

    pub(crate) fn with(mut self, f: impl FnOnce(CteConfig) -> CteConfig) -> Case {
        self.cfg = f(self.cfg);
        self
    }

    pub(crate) fn dtype(mut self, dtype: Dtype) -> Case {
        self.dtype = dtype;
        self
    }

    /// Hardware precision (rounding to every tile's dtype).
    pub(crate) fn hw(mut self) -> Case {
        self.precision = Precision::Hardware;
        self
    }

    pub(crate) fn lnc(mut self, lnc: usize) -> Case {
        self.lnc = lnc;
        self
    }

    fn range(mut self, lo: f64, hi: f64) -> Case {
        self.range = (lo, hi);
        self
    }

    fn normal(mut self) -> Case {
        self.normal = true;
        self
    }

    pub(crate) fn prior(mut self, sp: usize, used: usize) -> Case {
        self.prior = Some((sp, used));
        self.cfg = self.cfg.prefix_caching(true);
        self
    }

    pub(crate) fn cp(mut self, cp: Cp) -> Case {
        self.cp = Some(cp);
        self.cfg = match cp {
            Cp::Contiguous { deg, .. } | Cp::Offset { deg, .. } => self.cfg.context_parallel(deg),
            Cp::Strided { deg, .. } => self.cfg.context_parallel(deg).cp_strided_q_slicing(true),
            Cp::Striped { deg, .. } => self.cfg.context_parallel(deg).cp_striped_input(true),
        };
        self
    }

    fn cp_offset_dtype(mut self, dtype: Dtype) -> Case {
        self.cp_offset_dtype = dtype;
        self
    }

    pub(crate) fn packed(mut self, segments: usize) -> Case {
        self.packed = segments;
        self.cfg = self.cfg.packing(true);
        self
    }

    /// bf16 matmul results on trn3 (hardware mode, looser tolerance).
    fn bf16_psum_on_trn3(mut self) -> Case {
        self.generation = Generation::Trn3;
        self.cfg = self.cfg.target(Generation::Trn3).mm_out_dtype(Dtype::Bf16);
        self.precision = Precision::Hardware;
        self.rtol = Some(BF16_PSUM_RTOL);
        self
    }

    fn cp_offset(&self) -> Option<i64> {
        self.cp.map(|cp| match cp {
            Cp::Contiguous { rank, .. } => rank * self.sq as i64,
            Cp::Strided { rank, .. } => rank,
            Cp::Striped { offset, .. } | Cp::Offset { offset, .. } => offset,
        })
    }

    fn positions(&self) -> QueryPositions {
        match self.cp {
            None => QueryPositions::LOCAL,
            Some(Cp::Strided { deg, rank }) => QueryPositions { offset: rank, stride: deg },
            Some(_) => QueryPositions { offset: self.cp_offset().unwrap_or(0), stride: 1 },
        }
    }

    fn launch_of(&self) -> Launch {
        Launch::new().lnc(self.lnc).precision(self.precision).generation(self.generation)
    }

    /// Runs the emulated kernel through the typed API.
    pub(crate) fn launch(&self, inputs: &CteInputs<'_>) -> CteOutputs {
        self.cfg.launch(&self.launch_of(), inputs).unwrap_or_else(|e| panic!("{}: {e}", self.name))
    }

    fn draw(&self, n: usize, k: u64) -> Vec<f64> {
        let seed = self.seed.wrapping_mul(16).wrapping_add(k);
        let x = if self.normal { normal(n, seed) } else { uniform(n, seed, self.range.0, self.range.1) };
        as_dtype(&x, self.dtype)
    }

    /// The seeded inputs: the values the reference takes and the tensor
    /// parameters the case gives.
    pub(crate) fn data(&self) -> CaseData {
        let (bs, bs_kv, sq, sk, d) = (self.bs, self.bs_kv, self.sq, self.sk, self.d);
        let (q, k, v) = (self.draw(bs * sq * d, 1), self.draw(bs_kv * sk * d, 2), self.draw(bs_kv * sk * d, 3));
        let sp = self.prior.map_or(0, |p| p.0);
        let (kp, vp) = (self.draw(bs_kv * sp * d, 4), self.draw(bs_kv * sp * d, 5));
        // Sink logits compete with the row maxima (about scale x d / 4 for uniform [0, 1) inputs).
        let sd = self.cfg.scale * d as f64;
        let sink = as_dtype(&uniform(bs, self.seed.wrapping_mul(16).wrapping_add(6), 0.2 * sd, 0.35 * sd + 1.0), Dtype::F32);
        let bounds = (self.packed > 0).then(|| packing_bounds(bs, sq, self.packed, self.seed.wrapping_mul(16).wrapping_add(7)));

        let given = |name, (shape, values): (Vec<usize>, Vec<f64>), dtype| Given { name, shape, values, dtype };
        let mut tensors = vec![
            given("q", q_layout(&q, bs, sq, d, self.cfg.tp_q), self.dtype),
            given("k", k_layout(&k, bs_kv, sk, d, self.cfg.tp_k), self.dtype),
            given("v", (vec![bs_kv, sk, d], v.clone()), self.dtype),
        ];
        if let Some((_, used)) = self.prior {
            tensors.push(given("k_prior", k_layout(&kp, bs_kv, sp, d, self.cfg.tp_k), self.dtype));
            tensors.push(given("v_prior", (vec![bs_kv, sp, d], vp.clone()), self.dtype));
            tensors.push(given("prior_used_len", (vec![1], vec![used as f64]), Dtype::I32));
        }
        if self.cfg.sink {
            tensors.push(given("sink", (vec![bs, 1], sink.clone()), Dtype::F32));
        }
        if let Some(offset) = self.cp_offset() {
            tensors.push(given("cp_offset", (vec![1, 1], vec![offset as f64]), self.cp_offset_dtype));
        }
        if let Some((lo, hi)) = &bounds {
            tensors.push(given("bound_min", (vec![bs, sq, 1], lo.clone()), Dtype::F32));
            tensors.push(given("bound_max", (vec![bs, sq, 1], hi.clone()), Dtype::F32));
        }
        CaseData { q, k, v, kp, vp, sink, bounds, tensors }
    }

    /// Runs the kernel (typed API) and the reference on the same seeded inputs.
    fn run(&self) -> Run {
        let (bs, bs_kv, sq, sk, d) = (self.bs, self.bs_kv, self.sq, self.sk, self.d);
        let CaseData { q, k, v, kp, vp, sink, bounds, tensors } = self.data();
        let tensors = emulator_tensors(&tensors);
        let inputs = cte_inputs(&tensors);
        let outs = self.launch(&inputs);

        let mut p = Problem::new(bs, bs_kv, sq, sk, d, &q, &k, &v);
        p.scale = self.cfg.scale;
        p.causal = self.cfg.causal_mask;
        p.sliding_window = self.cfg.sliding_window as usize;
        p.prior = self.prior.map(|(len, used)| PriorRef { k: &kp, v: &vp, len, used });
        p.sink = self.cfg.sink.then_some(&sink[..]);
        p.positions = self.positions();
        p.bounds = bounds.as_ref().map(|(lo, hi)| (&lo[..], &hi[..]));
        let reference = p.solve(!self.cfg.skip_output_normalization);
        Run { outs, reference, v }
    }

    fn tolerance(&self) -> (f64, f64) {
        match self.precision {
            Precision::Fp32 => (FP32_ATOL, self.rtol.unwrap_or(FP32_RTOL)),
            Precision::Hardware => (HW_ATOL, self.rtol.unwrap_or(HW_RTOL)),
        }
    }

    /// Runs and compares the output and statistics, in the kernel's layouts, with the
    /// reference; no row may be fully masked.
    fn check(&self) -> Errors {
        let run = self.run();
        // With a sink a fully masked row is well defined (max = sink, sum = 1, out = 0).
        let masked = run.reference.fully_masked.iter().filter(|&&m| m).count();
        assert!(self.cfg.sink || masked == 0, "{}: the case has {masked} fully masked rows (use check_masked)", self.name);
        let (atol, rtol) = self.tolerance();
        let (bs, sq, d) = (self.bs, self.sq, self.d);
        let r = &run.reference;
        let tp_out = self.cfg.tp_out;
        let want_shape = if tp_out { [bs, d, sq] } else { [bs, sq, d] };
        assert_eq!(run.outs.out.shape(), &want_shape[..], "{}: output shape", self.name);
        assert_eq!(run.outs.out.dtype(), self.dtype, "{}: output dtype", self.name);
        let mut errs = Errors {
            out: close(&format!("{} out", self.name), &run.outs.out.to_f32_vec(), &out_layout(&r.out, bs, sq, d, tp_out), atol, rtol),
            ..Errors::default()
        };
        if let Some((nm, sm)) = self.stats(&run) {
            let neg: Vec<f64> = r.max.iter().map(|m| -m).collect();
            let sums: Vec<f64> = if self.cfg.skip_output_normalization { r.sum.clone() } else { r.sum.iter().map(|s| 1.0 / s).collect() };
            errs.neg_max = close(&format!("{} neg_max", self.name), &nm.to_f32_vec(), &stats_layout(&neg, bs, sq, 0.0), atol, rtol);
            errs.sum = close(&format!("{} sum", self.name), &sm.to_f32_vec(), &stats_layout(&sums, bs, sq, 0.0), atol, rtol);
        }
        errs
    }

    /// The statistics outputs, checked to be present exactly with `cache_softmax`.
    fn stats<'r>(&self, run: &'r Run) -> Option<(&'r Tensor, &'r Tensor)> {
        match (&run.outs.neg_max, &run.outs.sum) {
            (Some(nm), Some(sm)) => {
                assert!(self.cfg.cache_softmax, "{}: statistics without cache_softmax", self.name);
                let g = groups(self.sq);
                assert_eq!(nm.shape(), &[self.bs, 128, g], "{}: neg_max shape", self.name);
                assert_eq!(sm.shape(), &[self.bs, 128, g], "{}: sum shape", self.name);
                assert_eq!(nm.dtype(), self.cfg.softmax_dtype, "{}: neg_max dtype", self.name);
                Some((nm, sm))
            }
            (None, None) => {
                assert!(!self.cfg.cache_softmax, "{}: cache_softmax returned no statistics", self.name);
                None
            }
            _ => panic!("{}: only one statistics output", self.name),
        }
    }

    /// Runs a case with fully masked rows (no sink): rows the reference finds fully
    /// masked must hold the finite §7.3 values `expect(local row)` gives, the other
    /// rows the reference values. Returns the errors of the other rows.
    fn check_masked(&self, expect: impl Fn(usize) -> Masked) -> Errors {
        assert!(!self.cfg.sink, "{}: with a sink, masked rows are the reference's (max = sink, sum = 1, out = 0)", self.name);
        let run = self.run();
        let (bs, sq, d, sk) = (self.bs, self.sq, self.d, self.sk);
        let r = &run.reference;
        let (atol, rtol) = self.tolerance();
        let normalize = !self.cfg.skip_output_normalization;
        let out = run.outs.out.to_f32_vec();
        let out = if self.cfg.tp_out {
            transpose_last2(&out.iter().map(|&x| f64::from(x)).collect::<Vec<_>>(), bs, d, sq).iter().map(|&x| x as f32).collect()
        } else {
            out
        };
        let stats = self.stats(&run).map(|(nm, sm)| (stats_rows(&nm.to_f32_vec(), bs, sq), stats_rows(&sm.to_f32_vec(), bs, sq)));
        let rows: Vec<usize> = (0..bs * sq).filter(|&row| r.fully_masked[row]).collect();
        assert!(!rows.is_empty(), "{}: no fully masked row", self.name);
        let group = bs / self.bs_kv;
        for &row in &rows {
            let (b, i) = (row / sq, row % sq);
            let m = expect(i);
            let kvb = b / group;
            let mut want = vec![0.0; d];
            for j in m.v_rows.clone() {
                want.iter_mut().zip(&run.v[(kvb * sk + j) * d..(kvb * sk + j + 1) * d]).for_each(|(w, x)| *w += x);
            }
            if normalize {
                want.iter_mut().for_each(|w| *w /= m.count as f64);
            }
            close(&format!("{} masked row {row} out", self.name), &out[row * d..(row + 1) * d], &want, atol, rtol);
            if let Some((nm, sm)) = &stats {
                assert_eq!(nm[row], f32::MAX, "{}: masked row {row} neg_max is -FLOAT32_MIN", self.name);
                let s = if normalize { 1.0 / m.count as f64 } else { m.count as f64 };
                close(&format!("{} masked row {row} sum", self.name), &sm[row..=row], &[s], 0.0, 1e-6);
            }
        }
        let live: Vec<usize> = (0..bs * sq).filter(|&row| !r.fully_masked[row]).collect();
        let pick = |x: &[f32]| -> Vec<f32> { live.iter().flat_map(|&row| x[row * d..(row + 1) * d].to_vec()).collect() };
        let pick_ref = |x: &[f64]| -> Vec<f64> { live.iter().flat_map(|&row| x[row * d..(row + 1) * d].to_vec()).collect() };
        let mut errs = Errors::default();
        if !live.is_empty() {
            errs.out = close(&format!("{} out", self.name), &pick(&out), &pick_ref(&r.out), atol, rtol);
            if let Some((nm, sm)) = &stats {
                let got_nm: Vec<f32> = live.iter().map(|&row| nm[row]).collect();
                let got_sm: Vec<f32> = live.iter().map(|&row| sm[row]).collect();
                let neg: Vec<f64> = live.iter().map(|&row| -r.max[row]).collect();
                let sums: Vec<f64> = live.iter().map(|&row| if normalize { 1.0 / r.sum[row] } else { r.sum[row] }).collect();
                errs.neg_max = close(&format!("{} neg_max", self.name), &got_nm, &neg, atol, rtol);
                errs.sum = close(&format!("{} sum", self.name), &got_sm, &sums, atol, rtol);
            }
        }
        report(&self.name, self.precision, errs);
        errs
    }
}

/// Asserts the NKI metric and returns `max|a-b| / max|ref|`.
fn close(what: &str, got: &[f32], want: &[f64], atol: f64, rtol: f64) -> f64 {
    let (err, scale) = common::errors(got, want);
    let bound = atol + rtol * scale;
    assert!(err <= bound, "{what}: max abs error {err:.3e} > {bound:.3e} (atol {atol:e} + rtol {rtol:e} x max|ref| {scale:.3e})");
    if scale > 0.0 { err / scale } else { err }
}

fn report(name: &str, precision: Precision, e: Errors) {
    eprintln!("[{precision}] {name}: rel err out {:.2e} neg_max {:.2e} sum {:.2e}", e.out, e.neg_max, e.sum);
}

/// `(bound_min, bound_max)`, each `[bs, s]`: `segments` packed sequences per batch
/// row, with seeded boundaries.
fn packing_bounds(bs: usize, s: usize, segments: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let (mut lo, mut hi) = (Vec::with_capacity(bs * s), Vec::with_capacity(bs * s));
    for b in 0..bs {
        let mut cuts: Vec<usize> = vec![0, s];
        for x in uniform(8 * segments, seed + b as u64, 1.0, s as f64) {
            let c = x as usize;
            if cuts.len() < segments + 1 && !cuts.contains(&c) {
                cuts.push(c);
            }
        }
        cuts.sort_unstable();
        assert_eq!(cuts.len(), segments + 1, "{segments} segments of {s}");
        for w in cuts.windows(2) {
            for _ in w[0]..w[1] {
                lo.push(w[0] as f64);
                hi.push(w[1] as f64);
            }
        }
    }
    (lo, hi)
}

/// Checks every case and returns the largest relative errors.
fn check_all(cases: &[Case]) -> Errors {
    let mut worst = Errors::default();
    for c in cases {
        let e = c.check();
        report(&c.name, c.precision, e);
        worst.out = worst.out.max(e.out);
        worst.neg_max = worst.neg_max.max(e.neg_max);
        worst.sum = worst.sum.max(e.sum);
    }
    worst
}

// ---------------------------------------------------------------------------
// Plain attention: head dims, scales, lengths, dtypes, layouts
// ---------------------------------------------------------------------------

/// d in {8, 64, 88, 127, 128} with scales 0.5 / 0.134 / 0.125 / 1.0, causal and
/// not, unequal q / kv lengths, lengths that are not multiples of 128.
#[test]
fn head_dims_scales_and_lengths() {
    let mut cases = Vec::new();
    for (d, scale) in [(8, 1.0), (64, 0.5), (88, 0.134), (127, 0.125), (128, 1.0), (64, 0.125)] {
        for causal in [true, false] {
            cases.push(
                Case::new(format!("d{d}_scale{scale}_causal{causal}"), 1, 1, 640, 1152, d)
                    .with(|c| c.scale(scale).causal_mask(causal).cache_softmax(true)),
            );
        }
    }
    cases.extend([
        Case::new("sq577_sk2001_d88", 2, 1, 577, 2001, 88),
        Case::new("sq729_sk729_tp_q", 1, 1, 729, 729, 64).with(|c| c.causal_mask(false).scale(0.125)),
        Case::new("sq1024_sk512_causal_queries_past_keys", 1, 1, 1024, 512, 64).with(|c| c.cache_softmax(true)),
        Case::new("sq512_sk2048_causal", 1, 1, 512, 2048, 64).with(|c| c.cache_softmax(true)),
        Case::new("sq2048_sk512_noncausal", 1, 1, 2048, 512, 32).with(|c| c.causal_mask(false).scale(0.5)),
        Case::new("sq128_sk128", 1, 1, 128, 128, 128),
        Case::new("sq100_sk300", 1, 1, 100, 300, 64).with(|c| c.causal_mask(false)),
        Case::new("sq1_sk1", 1, 1, 1, 1, 8),
        Case::new("sq3_sk1000_d1", 2, 2, 3, 1000, 1).with(|c| c.causal_mask(false).scale(0.134)),
        Case::new("bs3_1024x512_noncausal", 3, 3, 1024, 512, 64).with(|c| c.causal_mask(false)),
        Case::new("sk_2049_odd_tail", 1, 1, 256, 2049, 16).with(|c| c.causal_mask(false)),
    ]);
    check_all(&cases);
}

/// f32, bf16 and f16 inputs in hardware mode (the library tolerance) and in fp32
/// mode; uniform [0, 1) and standard-normal inputs.
#[test]
fn input_dtypes() {
    let mut cases = Vec::new();
    for dtype in [Dtype::F32, Dtype::Bf16, Dtype::F16] {
        let t = format!("{dtype:?}");
        cases.extend([
            Case::new(format!("hw_{t}_causal_1024"), 1, 1, 1024, 1024, 64).dtype(dtype).hw().with(|c| c.cache_softmax(true)),
            Case::new(format!("hw_{t}_noncausal_scale0.134"), 1, 1, 512, 1536, 128)
                .dtype(dtype)
                .hw()
                .with(|c| c.causal_mask(false).scale(0.134)),
            Case::new(format!("hw_{t}_normal_scale0.125"), 2, 1, 384, 640, 64).dtype(dtype).hw().normal().with(|c| c.scale(0.125)),
            Case::new(format!("hw_{t}_d127_577"), 1, 1, 577, 577, 127).dtype(dtype).hw(),
            Case::new(format!("fp32mode_{t}_normal"), 1, 1, 384, 768, 64)
                .dtype(dtype)
                .normal()
                .with(|c| c.scale(0.125).cache_softmax(true)),
            Case::new(format!("fp32mode_{t}_signed"), 1, 1, 256, 512, 96).dtype(dtype).range(-1.0, 1.0).with(|c| c.causal_mask(false)),
        ]);
    }
    check_all(&cases);
}

/// Every combination of tp_q / tp_k / tp_out, with fp32 (staged DMA transposes)
/// and bf16 (direct) inputs, one query group (sq <= 128) and a partial last group.
#[test]
fn transposed_layouts() {
    let mut cases = Vec::new();
    for tp_q in [true, false] {
        for tp_k in [true, false] {
            for tp_out in [true, false] {
                for dtype in [Dtype::F32, Dtype::Bf16] {
                    let name = format!("tpq{tp_q}_tpk{tp_k}_tpout{tp_out}_{dtype:?}");
                    cases.push(Case::new(name, 2, 1, 300, 700, 72).dtype(dtype).with(|c| c.layouts(tp_q, tp_k, tp_out)));
                }
                cases.push(
                    Case::new(format!("tpq{tp_q}_tpk{tp_k}_tpout{tp_out}_one_group"), 1, 1, 100, 1100, 64)
                        .with(|c| c.layouts(tp_q, tp_k, tp_out).causal_mask(false).scale(0.125)),
                );
                cases.push(
                    Case::new(format!("tpq{tp_q}_tpk{tp_k}_tpout{tp_out}_cached"), 1, 1, 256, 512, 128)
                        .hw()
                        .dtype(Dtype::F16)
                        .with(|c| c.layouts(tp_q, tp_k, tp_out).cache_softmax(true).sink(true)),
                );
            }
        }
    }
    check_all(&cases);
}

// ---------------------------------------------------------------------------
// Sliding window, sink, prefix caching, GQA
// ---------------------------------------------------------------------------

/// Windows 1, 3, 121, 128 (dynamic `range_select`) and 129, 512, 1024 (static
/// double `affine_select`), square and with more keys than queries.
#[test]
fn sliding_windows() {
    let mut cases = Vec::new();
    for sw in [1, 3, 121, 128, 129, 512, 1024] {
        cases.push(Case::new(format!("swa{sw}_1536"), 1, 1, 1536, 1536, 64).with(|c| c.sliding_window(sw).cache_softmax(true)));
        cases.push(
            Case::new(format!("swa{sw}_700x1500_tpk"), 2, 1, 700, 1500, 32).with(|c| c.sliding_window(sw).layouts(true, true, false)),
        );
    }
    cases.extend([
        Case::new("swa128_bf16_hw", 1, 1, 1024, 1024, 128).dtype(Dtype::Bf16).hw().with(|c| c.sliding_window(128)),
        Case::new("swa1024_bf16_hw", 1, 1, 2048, 2048, 64).dtype(Dtype::Bf16).hw().with(|c| c.sliding_window(1024)),
        Case::new("swa128_tpout", 1, 1, 640, 640, 64).with(|c| c.sliding_window(128).layouts(false, false, true)),
        Case::new("swa_larger_than_seq", 1, 1, 300, 300, 64).with(|c| c.sliding_window(4096)),
    ]);
    check_all(&cases);
}

/// Sink logits (softmax denominator only) without and with a sliding window, with
/// cached statistics and skipped normalization, and with a scale.
#[test]
fn sinks() {
    let mut cases = Vec::new();
    for sw in [0, 3, 128, 1024] {
        cases.push(Case::new(format!("sink_swa{sw}"), 2, 1, 1280, 1280, 64).with(|c| c.sink(true).sliding_window(sw).cache_softmax(true)));
        cases.push(
            Case::new(format!("sink_swa{sw}_skip"), 1, 1, 640, 640, 64)
                .with(|c| c.sink(true).sliding_window(sw).cache_softmax(true).skip_output_normalization(true)),
        );
    }
    cases.extend([
        Case::new("sink_scale0.125_noncausal", 2, 2, 512, 1024, 64)
            .with(|c| c.sink(true).scale(0.125).causal_mask(false).cache_softmax(true)),
        Case::new("sink_10240_single_section", 2, 1, 128, 10240, 64).with(|c| c.sink(true).causal_mask(false)).lnc(2),
        Case::new("sink_bf16_hw", 1, 1, 1024, 1024, 64).dtype(Dtype::Bf16).hw().with(|c| c.sink(true).sliding_window(128)),
        Case::new("sink_d8_dominates", 1, 1, 256, 256, 8).range(0.0, 0.25).with(|c| c.sink(true).cache_softmax(true)),
    ]);
    check_all(&cases);
}

/// Prefix caching: prior_used_len in {0, 1, mid, S_p - 1, S_p} with S_p = 700 (not a
/// multiple of 512), without and with a sliding window (dynamic 128, static 1024),
/// causal and not, with a sink, with tp_k, in hardware mode.
#[test]
fn prefix_caching_sweep() {
    let sp = 700;
    let mut cases = Vec::new();
    for used in [0, 1, 350, 699, 700] {
        for sw in [0, 128, 1024] {
            cases.push(Case::new(format!("prefix_used{used}_swa{sw}"), 2, 1, 640, 640, 64).prior(sp, used).with(|c| c.sliding_window(sw)));
        }
        cases.push(Case::new(format!("prefix_used{used}_noncausal"), 1, 1, 384, 500, 64).prior(sp, used).with(|c| c.causal_mask(false)));
        cases.push(
            Case::new(format!("prefix_used{used}_sink_cached_tpk"), 1, 1, 256, 256, 32)
                .prior(sp, used)
                .with(|c| c.sink(true).cache_softmax(true).layouts(true, true, false)),
        );
    }
    cases.extend([
        Case::new("prefix_3555_used2048_swa128_odd_len", 1, 1, 1001, 1001, 64).prior(3555, 2048).with(|c| c.sliding_window(128)),
        Case::new("prefix_1233_used412_d127_swa1024", 1, 1, 1500, 1500, 127).prior(1233, 412).with(|c| c.sliding_window(1024)),
        Case::new("prefix_bf16_hw", 1, 1, 1024, 1024, 64).dtype(Dtype::Bf16).hw().prior(1100, 900).with(|c| c.cache_softmax(true)),
        Case::new("prefix_f16_hw_swa128", 1, 1, 512, 512, 128).dtype(Dtype::F16).hw().prior(600, 599).with(|c| c.sliding_window(128)),
        Case::new("prefix_512_exact", 1, 1, 256, 256, 64).prior(512, 300).with(|c| c.cache_softmax(true).skip_output_normalization(true)),
    ]);
    check_all(&cases);
}

/// GQA (query batch b reads KV batch b / (bs / bs_kv)) for 2/1, 9/3, 5/1, 8/1, 8/4,
/// without and with a prefix cache, and on LNC2 with an odd batch.
#[test]
fn grouped_query_attention() {
    let mut cases = Vec::new();
    for (bs, bs_kv) in [(2, 1), (9, 3), (5, 1), (8, 1), (8, 4), (4, 2)] {
        cases.push(Case::new(format!("gqa{bs}_{bs_kv}"), bs, bs_kv, 256, 384, 64).with(|c| c.cache_softmax(true)));
        cases.push(Case::new(format!("gqa{bs}_{bs_kv}_prefix"), bs, bs_kv, 128, 200, 32).prior(300, 150).with(|c| c.sink(true)));
    }
    cases.extend([
        Case::new("gqa9_3_lnc2_split", 9, 3, 1024, 1024, 32).lnc(2).with(|c| c.cache_softmax(true)),
        Case::new("gqa5_1_lnc2_small", 5, 1, 384, 640, 64).lnc(2).with(|c| c.causal_mask(false).cache_softmax(true)),
        Case::new("gqa2_1_bf16_hw", 2, 1, 512, 512, 128).dtype(Dtype::Bf16).hw(),
    ]);
    check_all(&cases);
}

// ---------------------------------------------------------------------------
// Context parallelism
// ---------------------------------------------------------------------------

/// Contiguous CP (`cp_offset = rank x sq`, keys 0..deg x sq) for degrees 1..32 with
/// a seeded random rank, plus the first and last ranks, GQA, sink, hardware mode,
/// and `global_cp_deg = 0` (still CP).
#[test]
fn context_parallel_contiguous() {
    let mut cases = Vec::new();
    for deg in [1, 2, 3, 4, 5, 8, 12, 16, 20, 32] {
        let sq = if deg <= 8 { 256 } else { 128 };
        let rank = rank_of(deg, 100 + deg as u64);
        cases.push(
            Case::new(format!("cp_contig_deg{deg}_rank{rank}"), 1, 1, sq, deg as usize * sq, 64)
                .cp(Cp::Contiguous { deg, rank })
                .with(|c| c.cache_softmax(true)),
        );
    }
    for rank in [0, 3] {
        cases.push(
            Case::new(format!("cp_contig_deg4_rank{rank}_gqa_sink"), 4, 2, 200, 800, 64)
                .cp(Cp::Contiguous { deg: 4, rank })
                .with(|c| c.sink(true)),
        );
    }
    cases.extend([
        Case::new("cp_contig_bf16_hw", 1, 1, 512, 2048, 128).dtype(Dtype::Bf16).hw().cp(Cp::Contiguous { deg: 4, rank: 2 }),
        Case::new("cp_contig_tp_all", 1, 1, 256, 1024, 64).cp(Cp::Contiguous { deg: 4, rank: 1 }).with(|c| c.layouts(false, true, true)),
        Case::new("cp_contig_skip_norm", 2, 1, 256, 768, 64)
            .cp(Cp::Contiguous { deg: 3, rank: 1 })
            .with(|c| c.cache_softmax(true).skip_output_normalization(true)),
        Case::new("cp_deg0_still_cp", 1, 1, 256, 1024, 64).cp(Cp::Offset { deg: 0, offset: 512 }).with(|c| c.cache_softmax(true)),
        Case::new("cp_contig_fp32_offset_tensor", 1, 1, 256, 2048, 64).cp(Cp::Contiguous { deg: 8, rank: 5 }).cp_offset_dtype(Dtype::F32),
        Case::new("cp_contig_fp32_offset_swa", 1, 1, 256, 2048, 64)
            .cp(Cp::Contiguous { deg: 8, rank: 6 })
            .cp_offset_dtype(Dtype::F32)
            .with(|c| c.sliding_window(128)),
    ]);
    check_all(&cases);
}

/// Strided CP (`cp_offset = rank`, query i at rank + i x deg) for degrees 1..32 with
/// a seeded random rank, the first and last ranks, GQA, sink, hardware mode.
#[test]
fn context_parallel_strided() {
    let mut cases = Vec::new();
    for deg in [1, 2, 3, 4, 5, 8, 12, 16, 20, 32] {
        let sq = if deg <= 8 { 256 } else { 128 };
        let rank = rank_of(deg, 200 + deg as u64);
        cases.push(
            Case::new(format!("cp_strided_deg{deg}_rank{rank}"), 1, 1, sq, deg as usize * sq, 64)
                .cp(Cp::Strided { deg, rank })
                .with(|c| c.cache_softmax(true)),
        );
    }
    for rank in [0, 3] {
        cases.push(
            Case::new(format!("cp_strided_deg4_rank{rank}_gqa_sink"), 4, 2, 200, 800, 64)
                .cp(Cp::Strided { deg: 4, rank })
                .with(|c| c.sink(true)),
        );
    }
    cases.extend([
        Case::new("cp_strided_bf16_hw", 1, 1, 512, 2048, 128).dtype(Dtype::Bf16).hw().cp(Cp::Strided { deg: 4, rank: 3 }),
        Case::new("cp_strided_729_d127", 1, 1, 729, 14580, 127).cp(Cp::Strided { deg: 20, rank: 7 }),
        Case::new("cp_strided_tp_out_skip", 1, 1, 256, 1024, 64)
            .cp(Cp::Strided { deg: 4, rank: 2 })
            .with(|c| c.layouts(true, true, true).cache_softmax(true).skip_output_normalization(true)),
    ]);
    check_all(&cases);
}

/// Striped CP (`cp_striped_input`, `cp_offset = 0`: the diagonal included) for several
/// degrees, with cached statistics and skipped normalization as ring attention uses it.
#[test]
fn context_parallel_striped() {
    let mut cases = Vec::new();
    for deg in [2, 4, 8, 16] {
        cases.push(
            Case::new(format!("cp_striped_deg{deg}"), 2, 1, 640, 640, 64)
                .cp(Cp::Striped { deg, offset: 0 })
                .with(|c| c.cache_softmax(true)),
        );
    }
    cases.extend([
        Case::new("cp_striped_skip_normal_bf16_hw", 1, 1, 512, 512, 128)
            .dtype(Dtype::Bf16)
            .hw()
            .normal()
            .cp(Cp::Striped { deg: 8, offset: 0 })
            .with(|c| c.cache_softmax(true).skip_output_normalization(true)),
        Case::new("cp_striped_sink_tpk", 1, 1, 300, 300, 64)
            .cp(Cp::Striped { deg: 2, offset: 0 })
            .with(|c| c.sink(true).layouts(true, true, false)),
        Case::new("cp_striped_minus1_sink", 1, 1, 256, 256, 64)
            .cp(Cp::Striped { deg: 2, offset: -1 })
            .with(|c| c.sink(true).cache_softmax(true).skip_output_normalization(true)),
        Case::new("cp_striped_sq_lt_sk", 1, 1, 256, 1024, 64).cp(Cp::Striped { deg: 4, offset: 0 }),
    ]);
    check_all(&cases);
}

/// Contiguous CP with a sliding window: only `S_ka = min(S_k, align512(sq + sw - 1))`
/// keys are loaded, from the run-time offset `max(cp_offset - (S_ka - sq), 0)`
/// (dynamic DMA; with tp_k the PE-transpose path). Strided CP with a window too.
#[test]
fn context_parallel_with_sliding_window() {
    let mut cases = Vec::new();
    for (deg, sw, sq) in [(2, 128, 256), (4, 121, 256), (8, 1024, 256), (3, 1, 384), (16, 3, 128), (6, 600, 200), (5, 128, 512)] {
        for tp_k in [false, true] {
            let rank = rank_of(deg, 300 + deg as u64 + sw as u64);
            let mut ranks = vec![0, rank, deg - 1];
            ranks.dedup();
            for r in ranks {
                cases.push(
                    Case::new(format!("cp_contig_swa{sw}_deg{deg}_rank{r}_tpk{tp_k}"), 1, 1, sq, deg as usize * sq, 64)
                        .cp(Cp::Contiguous { deg, rank: r })
                        .with(|c| c.sliding_window(sw).layouts(true, tp_k, false).cache_softmax(sq % 128 == 0)),
                );
            }
            cases.push(
                Case::new(format!("cp_strided_swa{sw}_deg{deg}_rank{rank}_tpk{tp_k}"), 1, 1, sq, deg as usize * sq, 64)
                    .cp(Cp::Strided { deg, rank })
                    .with(|c| c.sliding_window(sw * deg).layouts(true, tp_k, false)),
            );
        }
    }
    cases.extend([
        Case::new("cp_contig_swa128_sink_gqa", 4, 2, 256, 2048, 64)
            .cp(Cp::Contiguous { deg: 8, rank: 5 })
            .with(|c| c.sliding_window(128).sink(true)),
        Case::new("cp_contig_swa_bf16_hw", 1, 1, 512, 4096, 128)
            .dtype(Dtype::Bf16)
            .hw()
            .cp(Cp::Contiguous { deg: 8, rank: 6 })
            .with(|c| c.sliding_window(1024).layouts(true, true, false)),
        Case::new("cp_contig_swa_f16_hw_tpk", 1, 1, 256, 2048, 64)
            .dtype(Dtype::F16)
            .hw()
            .cp(Cp::Contiguous { deg: 8, rank: 3 })
            .with(|c| c.sliding_window(128).layouts(true, true, false)),
    ]);
    check_all(&cases);
}

/// CP with a prefix cache: prior keys sit before position 0 (never causally masked;
/// the window still applies with the global query position).
#[test]
fn context_parallel_with_prefix_caching() {
    let sp = 700;
    let mut cases = Vec::new();
    for used in [0, 1, 350, 699, 700] {
        let rank = rank_of(4, 400 + used as u64);
        for sw in [0, 128, 300] {
            for r in if rank == 0 { vec![0] } else { vec![0, rank] } {
                cases.push(
                    Case::new(format!("cp_contig_prefix_used{used}_swa{sw}_rank{r}"), 1, 1, 256, 1024, 64)
                        .prior(sp, used)
                        .cp(Cp::Contiguous { deg: 4, rank: r })
                        .with(|c| c.sliding_window(sw)),
                );
            }
            cases.push(
                Case::new(format!("cp_strided_prefix_used{used}_swa{sw}_rank{rank}"), 1, 1, 256, 1024, 64)
                    .prior(sp, used)
                    .cp(Cp::Strided { deg: 4, rank })
                    .with(|c| c.sliding_window(sw).cache_softmax(true)),
            );
        }
    }
    cases.push(
        Case::new("cp_contig_prefix_gqa_sink_tpk", 4, 2, 256, 1024, 64)
            .prior(sp, 500)
            .cp(Cp::Contiguous { deg: 4, rank: 2 })
            .with(|c| c.sliding_window(128).sink(true).layouts(true, true, false)),
    );
    check_all(&cases);
}

/// Fully masked rows stay finite with the values the library kernel gives (§7.3):
/// contiguous CP whose keys are all in the future (`ub < 0`) and striped CP with
/// `cp_offset = -1` (row 0), with and without cached statistics and normalization.
#[test]
fn fully_masked_rows_are_finite() {
    // Contiguous CP: every tile is computed (no skipping), so S counts every key and
    // the output adds up every V row.
    let sk = 1000;
    for (skip, tp_out) in [(false, false), (true, false), (false, true)] {
        let case = Case::new(format!("cp_contig_all_future_skip{skip}_tpout{tp_out}"), 2, 1, 256, sk, 64)
            .cp(Cp::Offset { deg: 4, offset: -256 })
            .with(|c| c.cache_softmax(true).skip_output_normalization(skip).layouts(true, false, tp_out));
        case.check_masked(|_| Masked { count: sk, v_rows: 0..sk });
    }
    // Hardware precision (bf16 V, P = bf16(exp(0)) = 1): the mean of V within the library tolerance.
    Case::new("cp_contig_all_future_bf16_hw", 1, 1, 128, 700, 64)
        .dtype(Dtype::Bf16)
        .hw()
        .cp(Cp::Offset { deg: 2, offset: -1000 })
        .with(|c| c.cache_softmax(true))
        .check_masked(|_| Masked { count: 700, v_rows: 0..700 });
    // With a sink the row max is the sink: exp(FLOAT32_MIN - sink) = 0, so S = 1 and
    // the output is 0 (the reference gives exactly that).
    for skip in [false, true] {
        let case = Case::new(format!("cp_contig_all_future_sink_skip{skip}"), 2, 1, 256, 1000, 64)
            .cp(Cp::Offset { deg: 4, offset: -256 })
            .with(|c| c.sink(true).cache_softmax(true).skip_output_normalization(skip));
        let run = case.run();
        assert!(run.reference.fully_masked.iter().all(|&m| m), "every row is fully masked");
        assert!(run.outs.out.to_f32_vec().iter().all(|&x| x == 0.0), "fully masked rows with a sink give 0");
        let sums = run.outs.sum.as_ref().expect("statistics").to_f32_vec();
        assert!(sums.iter().all(|&s| s == 1.0), "S = exp(sink - sink) = 1 (and 1/S = 1)");
        case.check();
    }
    // Some rows masked (q + cp_offset < 0), the rest see keys 0..=q + cp_offset.
    Case::new("cp_contig_partly_future", 1, 1, 384, 1500, 64)
        .cp(Cp::Offset { deg: 4, offset: -50 })
        .with(|c| c.cache_softmax(true))
        .check_masked(|_| Masked { count: 1500, v_rows: 0..1500 });
    // Multi-section, all keys in the future: every section counts all its keys.
    Case::new("cp_contig_all_future_multisection", 1, 1, 128, 10752, 32)
        .cp(Cp::Offset { deg: 4, offset: -128 })
        .with(|c| c.cache_softmax(true).skip_output_normalization(true))
        .check_masked(|_| Masked { count: 10752, v_rows: 0..10752 });
    // CP + SWA: only the loaded window of S_ka = align512(sq + sw - 1) keys counts.
    Case::new("cp_contig_swa_all_future", 1, 1, 256, 2048, 64)
        .cp(Cp::Offset { deg: 8, offset: -64 })
        .with(|c| c.sliding_window(128).cache_softmax(true).skip_output_normalization(true))
        .check_masked(|_| Masked { count: 512, v_rows: 0..512 });
    // Striped with cp_offset = -1: row 0 sees nothing; group 0 computes only the
    // first 512-key tile and the first 128-key V tile.
    for (sk, skip) in [(640, false), (640, true), (300, false), (1024, true)] {
        Case::new(format!("cp_striped_minus1_sk{sk}_skip{skip}"), 2, 2, 256, sk, 64)
            .cp(Cp::Striped { deg: 4, offset: -1 })
            .with(|c| c.cache_softmax(true).skip_output_normalization(skip))
            .check_masked(|_| Masked { count: sk.min(512), v_rows: 0..sk.min(128) });
    }
    Case::new("cp_striped_minus1_lnc2_tpk", 3, 1, 1024, 1024, 64)
        .lnc(2)
        .cp(Cp::Striped { deg: 2, offset: -1 })
        .with(|c| c.layouts(true, true, false))
        .check_masked(|_| Masked { count: 512, v_rows: 0..128 });
}

// ---------------------------------------------------------------------------
// LNC2, multi-section KV, packing, trn3
// ---------------------------------------------------------------------------

/// LNC2: whole batches per core, and an odd last batch split by query groups when
/// sq >= 1024 (0.65 causal, 0.5 otherwise, blended with a prefix cache) or done by
/// core 0 alone below 1024. Both cores' statistics columns are checked.
#[test]
fn lnc2_sharding() {
    let cases = vec![
        Case::new("lnc2_bs2", 2, 2, 512, 512, 64).lnc(2).with(|c| c.cache_softmax(true)),
        Case::new("lnc2_bs4_gqa", 4, 1, 256, 768, 64).lnc(2).with(|c| c.causal_mask(false).scale(0.125).cache_softmax(true)),
        Case::new("lnc2_bs1_1024_causal_split065", 1, 1, 1024, 1024, 64).lnc(2).with(|c| c.cache_softmax(true)),
        Case::new("lnc2_bs3_1280_causal_split065", 3, 3, 1280, 1280, 32).lnc(2).with(|c| c.cache_softmax(true)),
        Case::new("lnc2_bs3_1152_noncausal_split05", 3, 1, 1152, 1300, 64)
            .lnc(2)
            .with(|c| c.causal_mask(false).scale(0.125).cache_softmax(true)),
        Case::new("lnc2_bs1_1024_swa_split05", 1, 1, 1024, 1024, 64).lnc(2).with(|c| c.sliding_window(128).cache_softmax(true)),
        Case::new("lnc2_bs3_prefix_blended", 3, 1, 1024, 1024, 64).lnc(2).prior(700, 600).with(|c| c.cache_softmax(true)),
        Case::new("lnc2_bs1_contig_cp_split05", 1, 1, 1024, 4096, 64)
            .lnc(2)
            .cp(Cp::Contiguous { deg: 4, rank: 2 })
            .with(|c| c.cache_softmax(true)),
        Case::new("lnc2_bs3_strided_cp_split065", 3, 3, 1024, 2048, 32)
            .lnc(2)
            .cp(Cp::Strided { deg: 2, rank: 1 })
            .with(|c| c.cache_softmax(true)),
        Case::new("lnc2_bs1_striped_split05", 1, 1, 1152, 1152, 64)
            .lnc(2)
            .cp(Cp::Striped { deg: 2, offset: 0 })
            .with(|c| c.cache_softmax(true).skip_output_normalization(true)),
        Case::new("lnc2_bs3_577_core0_alone", 3, 1, 577, 577, 88).lnc(2),
        Case::new("lnc2_bs3_577_bf16_hw", 3, 1, 577, 577, 88).lnc(2).dtype(Dtype::Bf16).hw(),
        Case::new("lnc2_bs1_896_core0_alone", 1, 1, 896, 896, 64).lnc(2).with(|c| c.cache_softmax(true).sink(true)),
        Case::new("lnc2_729_tp_q_f16_hw", 1, 1, 729, 729, 64).lnc(2).dtype(Dtype::F16).hw().with(|c| c.layouts(true, false, false)),
        Case::new("lnc2_bs3_1024_tpout_sink_swa", 3, 1, 1024, 1024, 64)
            .lnc(2)
            .with(|c| c.layouts(false, true, true).sink(true).sliding_window(1024).cache_softmax(true)),
        Case::new("lnc2_fp32_scale0.125_unequal", 2, 2, 384, 1000, 128).lnc(2).with(|c| c.causal_mask(false).scale(0.125)),
        Case::new("lnc2_bs1_1100_partial_last_group", 1, 1, 1100, 1100, 64).lnc(2),
        Case::new("lnc2_bs3_noncausal_prefix_split05", 3, 1, 1024, 1024, 32)
            .lnc(2)
            .prior(700, 700)
            .with(|c| c.causal_mask(false).cache_softmax(true)),
    ];
    check_all(&cases);
}

/// KV above 10240 keys (sections of 8192, corrected through the output in HBM):
/// non-causal, causal via CP at the end of the sequence, a prefix whose padded total
/// exceeds 10240, static and dynamic windows, sink, tp_out, skipped normalization,
/// bf16 round trips in hardware mode, LNC2.
#[test]
fn multi_section_kv() {
    let cases = vec![
        Case::new("ms_10752_noncausal", 1, 1, 256, 10752, 64).with(|c| c.causal_mask(false).scale(0.125).cache_softmax(true)),
        Case::new("ms_12288_tpout_sink", 2, 1, 128, 12288, 64)
            .with(|c| c.causal_mask(false).layouts(false, false, true).sink(true).cache_softmax(true)),
        Case::new("ms_12288_skip_norm", 1, 1, 128, 12288, 32)
            .with(|c| c.causal_mask(false).cache_softmax(true).skip_output_normalization(true)),
        Case::new("ms_contig_cp_end", 1, 1, 384, 12288, 64).cp(Cp::Contiguous { deg: 32, rank: 31 }).with(|c| c.cache_softmax(true)),
        Case::new("ms_strided_cp", 1, 1, 384, 12288, 32)
            .cp(Cp::Strided { deg: 32, rank: rank_of(32, 500) })
            .with(|c| c.cache_softmax(true)),
        Case::new("ms_prefix_10240_p1_used0", 1, 1, 128, 10240, 64).prior(1, 0).with(|c| c.causal_mask(false)),
        Case::new("ms_prefix_10240_p1_used1", 1, 1, 128, 10240, 64).prior(1, 1).with(|c| c.causal_mask(false).cache_softmax(true)),
        Case::new("ms_prefix_cp_end", 1, 1, 320, 10240, 64)
            .prior(1000, 500)
            .cp(Cp::Contiguous { deg: 32, rank: 31 })
            .with(|c| c.cache_softmax(false)),
        Case::new("ms_prefix_4097_causal", 1, 1, 8448, 8448, 16).prior(4097, 4000).with(|c| c.sliding_window(1024)),
        Case::new("ms_swa1024_static", 1, 1, 10752, 10752, 16).with(|c| c.sliding_window(1024).cache_softmax(true)),
        Case::new("ms_swa128_dynamic_sink", 1, 1, 10752, 10752, 16).with(|c| c.sliding_window(128).sink(true)),
        Case::new("ms_causal_tail", 1, 1, 10368, 10368, 8),
        Case::new("ms_bf16_hw", 1, 1, 256, 12288, 64).dtype(Dtype::Bf16).hw().with(|c| c.causal_mask(false).cache_softmax(true)),
        Case::new("ms_f16_hw_tpout", 1, 1, 128, 10752, 128)
            .dtype(Dtype::F16)
            .hw()
            .with(|c| c.causal_mask(false).layouts(false, true, true)),
        Case::new("ms_lnc2_odd_batch", 3, 1, 1024, 10752, 32).lnc(2).with(|c| c.causal_mask(false).scale(0.125).cache_softmax(true)),
        // A prior of 10000 keys (padded 10240) and a CP + SWA key window: section 0 is
        // prior only, section 1 holds the prior's tail and the loaded window.
        Case::new("ms_prefix_cp_swa_window", 1, 1, 256, 2048, 64)
            .prior(10000, 9000)
            .cp(Cp::Contiguous { deg: 8, rank: 0 })
            .with(|c| c.sliding_window(1024).cache_softmax(true)),
        Case::new("ms_prefix_strided_lnc2", 3, 1, 1024, 2048, 32).lnc(2).prior(9500, 9400).cp(Cp::Strided { deg: 2, rank: 1 }),
    ];
    check_all(&cases);
}

/// Sequence packing: `bound_min <= kv < bound_max` per query row, causal or not,
/// with a window, LNC 1 and 2, GQA, fp32 and bf16.
#[test]
fn sequence_packing() {
    let mut cases = Vec::new();
    for (lnc, bs, bs_kv, s, d, dtype, causal, sw, segs) in [
        (1, 1, 1, 512, 128, Dtype::F32, true, 0, 4),
        (1, 2, 2, 1024, 96, Dtype::F32, false, 0, 8),
        (2, 4, 1, 768, 96, Dtype::F32, true, 256, 4),
        (2, 6, 2, 512, 128, Dtype::F32, true, 512, 8),
        (2, 1, 1, 1024, 64, Dtype::F32, true, 0, 8),
        (1, 2, 1, 2048, 64, Dtype::F32, true, 128, 4),
        (2, 3, 3, 1024, 64, Dtype::F32, false, 0, 4),
    ] {
        cases.push(
            Case::new(format!("pack_lnc{lnc}_{bs}_{bs_kv}_s{s}_d{d}_causal{causal}_swa{sw}_{segs}seq"), bs, bs_kv, s, s, d)
                .dtype(dtype)
                .lnc(lnc)
                .packed(segs)
                .with(|c| c.causal_mask(causal).sliding_window(sw).cache_softmax(true)),
        );
    }
    cases.extend([
        Case::new("pack_bf16_hw", 2, 2, 1024, 1024, 64).dtype(Dtype::Bf16).hw().packed(4).with(|c| c.causal_mask(true)),
        Case::new("pack_sink_tp", 2, 1, 512, 512, 64).packed(4).with(|c| c.sink(true).layouts(false, true, true)),
    ]);
    check_all(&cases);
}

/// Sequence packing when `seqlen_q` is not a multiple of 128 (400 = 3 x 128 + 16,
/// 200 = 128 + 72): the bounds of the partial last query group are read row by
/// row, batch `b`'s from element `b x seqlen_q`. Causal or not, GQA, a window, LNC2,
/// the transposed layouts (Q and K through the 4-d DMA transposes), bf16.
#[test]
fn sequence_packing_with_a_partial_query_group() {
    let cases = vec![
        Case::new("pack_s400_causal", 1, 1, 400, 400, 64).packed(3),
        Case::new("pack_s400_noncausal_gqa", 4, 2, 400, 400, 64).packed(4).with(|c| c.causal_mask(false)),
        Case::new("pack_s400_lnc2_swa", 3, 3, 400, 400, 96).lnc(2).packed(4).with(|c| c.sliding_window(100)),
        Case::new("pack_s200_tp_all", 2, 2, 200, 200, 32).packed(2).with(|c| c.layouts(true, true, true)),
        Case::new("pack_s400_bf16_hw", 2, 2, 400, 400, 64).dtype(Dtype::Bf16).hw().packed(4),
    ];
    check_all(&cases);
}

/// `mm_out_dtype = bf16` on trn3 (hardware mode): scores and PV partials rounded to
/// bf16 (masked fills become -inf). Checked at `1e-5 + 5e-2 max|ref|`.
#[test]
fn bf16_matmul_results_on_trn3() {
    let cases = vec![
        Case::new("trn3_bf16psum_causal", 1, 1, 1024, 1024, 64).dtype(Dtype::Bf16).bf16_psum_on_trn3().with(|c| c.cache_softmax(true)),
        Case::new("trn3_bf16psum_noncausal_scale", 2, 1, 512, 1536, 128).bf16_psum_on_trn3().with(|c| c.causal_mask(false).scale(0.125)),
        Case::new("trn3_bf16psum_swa_static_tpout", 1, 1, 1024, 1024, 64)
            .bf16_psum_on_trn3()
            .with(|c| c.sliding_window(300).layouts(false, true, true)),
        Case::new("trn3_bf16psum_multisection", 1, 1, 128, 10752, 64).dtype(Dtype::Bf16).bf16_psum_on_trn3().with(|c| c.causal_mask(false)),
        Case::new("trn3_bf16psum_cp_prefix_lnc2", 3, 1, 1024, 2048, 64)
            .lnc(2)
            .bf16_psum_on_trn3()
            .prior(700, 350)
            .cp(Cp::Contiguous { deg: 2, rank: 1 }),
    ];
    check_all(&cases);
}

/// The statistics in other dtypes (`softmax_dtype` bf16 and f16, hardware mode).
#[test]
fn statistics_dtypes() {
    let cases = vec![
        Case::new("stats_bf16", 2, 1, 512, 768, 64).hw().with(|c| c.cache_softmax(true).softmax_dtype(Dtype::Bf16)),
        Case::new("stats_f16_skip", 1, 1, 384, 384, 64)
            .hw()
            .dtype(Dtype::Bf16)
            .with(|c| c.cache_softmax(true).skip_output_normalization(true).softmax_dtype(Dtype::F16).sink(true)),
    ];
    check_all(&cases);
}

// ---------------------------------------------------------------------------
// Run-time errors
// ---------------------------------------------------------------------------

fn ones(shape: &[usize]) -> Tensor {
    tensor(shape, &vec![1.0; shape.iter().product()], Dtype::F32)
}

fn expect_err(e: NkiError, kind: ErrorKind, parts: &[&str]) {
    assert_eq!(e.kind, kind, "{e}");
    for p in parts {
        assert!(e.message.contains(p), "`{p}` not in: {e}");
    }
}

#[test]
fn mismatched_k_shape_is_rejected() {
    let (q, v) = (ones(&[1, 256, 64]), ones(&[1, 512, 64]));
    let k = ones(&[1, 32, 512]); // (bs_kv, d, sk) with d = 32 instead of 64
    let launch = Launch::new();
    // Raw kernel: its shape assert.
    let e = attention_cte::Call::new(&q, &k, &v).launch(&launch).unwrap_err();
    expect_err(e, ErrorKind::Assertion, &["Received unexpected shape for k", "Expected (1, 64, 512)", "received (1, 32, 512)"]);
    // Typed API without dims: the kernel's assert comes through.
    let e = CteConfig::new().launch(&launch, &CteInputs::new(&q, &k, &v)).unwrap_err();
    expect_err(e, ErrorKind::Assertion, &["Received unexpected shape for k"]);
    // Typed API with dims: an argument error naming k and its shape.
    let dims = CteDims { batch: 1, batch_kv: 1, seqlen_q: 256, seqlen_kv: 512, head_dim: 64, seqlen_prior: 0 };
    let e = CteConfig::new().dims(dims).launch(&launch, &CteInputs::new(&q, &k, &v)).unwrap_err();
    expect_err(e, ErrorKind::Argument, &["invalid k = shape [1, 32, 512]", "[1, 64, 512]"]);
    // A wrong v length, raw kernel.
    let e = attention_cte::Call::new(&q, &ones(&[1, 64, 512]), &ones(&[1, 500, 64])).launch(&launch).unwrap_err();
    expect_err(e, ErrorKind::Assertion, &["Received unexpected shape for v", "(1, 512, 64)"]);
}

/// Declared dims also fix the prior's shapes: a prefix cache of another length is an
/// argument error naming `k_prior` (or `v_prior`), not a silent run.
#[test]
fn prior_shapes_are_checked_against_the_dims() {
    let (q, k, v) = (ones(&[1, 128, 64]), ones(&[1, 64, 256]), ones(&[1, 256, 64]));
    let pul = Tensor::from_i64(&[1], &[50], Dtype::I32).unwrap();
    let dims = CteDims { batch: 1, batch_kv: 1, seqlen_q: 128, seqlen_kv: 256, head_dim: 64, seqlen_prior: 100 };
    let cfg = CteConfig::new().prefix_caching(true).dims(dims);
    let launch = Launch::new();
    let (kp, vp) = (ones(&[1, 64, 200]), ones(&[1, 200, 64]));
    let e = cfg.launch(&launch, &CteInputs { prior: Some(Prior { k: &kp, v: &vp, used_len: &pul }), ..CteInputs::new(&q, &k, &v) });
    expect_err(e.unwrap_err(), ErrorKind::Argument, &["invalid k_prior = shape [1, 64, 200]", "[1, 64, 100]"]);
    let (kp, vp) = (ones(&[1, 64, 100]), ones(&[1, 99, 64]));
    let e = cfg.launch(&launch, &CteInputs { prior: Some(Prior { k: &kp, v: &vp, used_len: &pul }), ..CteInputs::new(&q, &k, &v) });
    expect_err(e.unwrap_err(), ErrorKind::Argument, &["invalid v_prior = shape [1, 99, 64]", "[1, 100, 64]"]);
    // Matching shapes (tp_k lays k_prior out like k) run.
    let (kp, vp) = (ones(&[1, 100, 64]), ones(&[1, 100, 64]));
    let kt = ones(&[1, 256, 64]);
    let ok = cfg
        .layouts(true, true, false)
        .launch(&launch, &CteInputs { prior: Some(Prior { k: &kp, v: &vp, used_len: &pul }), ..CteInputs::new(&q, &kt, &v) });
    assert!(ok.is_ok(), "{:?}", ok.err());
}

#[test]
fn missing_cp_offset_is_rejected() {
    let (q, k, v) = (ones(&[1, 128, 64]), ones(&[1, 64, 512]), ones(&[1, 512, 64]));
    let launch = Launch::new();
    let e = CteConfig::new().context_parallel(4).launch(&launch, &CteInputs::new(&q, &k, &v)).unwrap_err();
    expect_err(e, ErrorKind::Argument, &["invalid cp_offset = None", "global_cp_deg"]);
    let e = attention_cte::Call::new(&q, &k, &v).global_cp_deg(4).launch(&launch).unwrap_err();
    expect_err(e, ErrorKind::Assertion, &["cp_offset missing but global_cp_deg is provided"]);
    // A cp_offset of the wrong shape.
    let bad = Tensor::from_i64(&[2], &[0, 0], Dtype::I32).unwrap();
    let e = attention_cte::Call::new(&q, &k, &v).global_cp_deg(4).cp_offset(&bad).launch(&launch).unwrap_err();
    expect_err(e, ErrorKind::Assertion, &["cp_offset shape must be (1, 1)"]);
}

#[test]
fn broken_rules_at_run_time_name_the_parameter() {
    let (q, k, v) = (ones(&[1, 128, 64]), ones(&[1, 64, 512]), ones(&[1, 512, 64]));
    let launch = Launch::new();
    // Built at run time (not in a const), so the rule is checked by `launch`.
    let scale: f64 = std::hint::black_box(0.5);
    let window: i64 = std::hint::black_box(128);
    let cfg = CteConfig::new().scale(scale).sliding_window(window);
    let e = cfg.launch(&launch, &CteInputs::new(&q, &k, &v)).unwrap_err();
    expect_err(e, ErrorKind::Argument, &["invalid scale = 0.5", "sliding window"]);
    // The raw kernel raises the library's message.
    let e = attention_cte::Call::new(&q, &k, &v).scale(0.5).sliding_window(128).launch(&launch).unwrap_err();
    expect_err(e, ErrorKind::Assertion, &["only support scale=1.0", "0.5"]);
    // More rules: CP without the causal mask, cache_softmax with sq % 128 != 0,
    // skip_output_normalization without cache_softmax.
    let e = CteConfig::new().causal_mask(std::hint::black_box(false)).context_parallel(2).launch(&launch, &CteInputs::new(&q, &k, &v));
    expect_err(e.unwrap_err(), ErrorKind::Argument, &["invalid causal_mask = false", "context parallelism"]);
    let q100 = ones(&[1, 100, 64]);
    let e = attention_cte::Call::new(&q100, &k, &v).cache_softmax(true).launch(&launch).unwrap_err();
    expect_err(e, ErrorKind::Assertion, &["seqlen_q multiple of 128, got seqlen_q=100"]);
    let e = CteConfig::new().skip_output_normalization(std::hint::black_box(true)).launch(&launch, &CteInputs::new(&q, &k, &v));
    expect_err(e.unwrap_err(), ErrorKind::Argument, &["invalid cache_softmax = false", "skip_output_normalization"]);
    let e = attention_cte::Call::new(&q, &k, &v).mm_out_dtype(Dtype::Bf16).launch(&launch).unwrap_err();
    expect_err(e, ErrorKind::Assertion, &["mm_out_dtype (psum) should be in [float32, bfloat16]"]);
    let e = CteConfig::new().mm_out_dtype(Dtype::Bf16).launch(&launch, &CteInputs::new(&q, &k, &v)).unwrap_err();
    expect_err(e, ErrorKind::Argument, &["invalid mm_out_dtype = bfloat16 on trn2", "trn3"]);
}

#[test]
fn presence_mismatches_are_rejected() {
    let (q, k, v) = (ones(&[1, 128, 64]), ones(&[1, 64, 512]), ones(&[1, 512, 64]));
    let (kp, vp) = (ones(&[1, 64, 100]), ones(&[1, 100, 64]));
    let pul = Tensor::from_i64(&[1], &[50], Dtype::I32).unwrap();
    let sink = ones(&[1, 1]);
    let bounds = (ones(&[1, 128, 1]), ones(&[1, 128, 1]));
    let launch = Launch::new();
    let base = CteInputs::new(&q, &k, &v);

    let with_sink = CteInputs { sink: Some(&sink), ..base };
    expect_err(
        CteConfig::new().launch(&launch, &with_sink).unwrap_err(),
        ErrorKind::Argument,
        &["invalid sink = a tensor", "sink is not set"],
    );
    expect_err(CteConfig::new().sink(true).launch(&launch, &base).unwrap_err(), ErrorKind::Argument, &["invalid sink = None"]);
    let with_prior = CteInputs { prior: Some(Prior { k: &kp, v: &vp, used_len: &pul }), ..base };
    expect_err(
        CteConfig::new().launch(&launch, &with_prior).unwrap_err(),
        ErrorKind::Argument,
        &["invalid k_prior = a tensor", "prefix_caching is not set"],
    );
    expect_err(CteConfig::new().prefix_caching(true).launch(&launch, &base).unwrap_err(), ErrorKind::Argument, &["invalid k_prior = None"]);
    let with_bounds = CteInputs { bounds: Some((&bounds.0, &bounds.1)), ..base };
    expect_err(CteConfig::new().launch(&launch, &with_bounds).unwrap_err(), ErrorKind::Argument, &["invalid bound_min = a tensor"]);
    expect_err(CteConfig::new().packing(true).launch(&launch, &base).unwrap_err(), ErrorKind::Argument, &["invalid bound_min = None"]);
    let cp = Tensor::from_i64(&[1, 1], &[0], Dtype::I32).unwrap();
    let with_cp = CteInputs { cp_offset: Some(&cp), ..base };
    expect_err(CteConfig::new().launch(&launch, &with_cp).unwrap_err(), ErrorKind::Argument, &["invalid cp_offset = a tensor"]);

    // The raw kernel's presence asserts.
    let raw = || attention_cte::Call::new(&q, &k, &v);
    let cases: [(attention_cte::Call<'_>, &str); 5] = [
        (raw().k_prior(&kp).prior_used_len(&pul), "k_prior is not None but v_prior is None for prefix caching"),
        (raw().k_prior(&kp).v_prior(&vp), "k_prior is not None but prior_used_len is None for prefix caching"),
        (raw().v_prior(&vp), "k_prior is None but v_prior is not None."),
        (raw().prior_used_len(&pul), "k_prior is None but prior_used_len is not None."),
        (raw().bound_min(&bounds.0), "bound_min and bound_max must both be set or both be None"),
    ];
    for (call, msg) in cases {
        expect_err(call.launch(&launch).unwrap_err(), ErrorKind::Assertion, &[msg]);
    }
    let bad_pul = Tensor::from_i64(&[1, 1], &[50], Dtype::I32).unwrap();
    let e = raw().k_prior(&kp).v_prior(&vp).prior_used_len(&bad_pul).launch(&launch).unwrap_err();
    expect_err(e, ErrorKind::Assertion, &["Received unexpected shape for prior_used_len. Expected (1,)"]);
}

/// Sequence packing masks through `range_select`, which applies no scale: the library
/// kernel stops with an internal assert there (A16 does not list packing), and so
/// must the DSL kernel rather than return unscaled attention.
#[test]
fn packing_with_a_scale_is_rejected() {
    let (q, k, v) = (ones(&[1, 256, 64]), ones(&[1, 64, 256]), ones(&[1, 256, 64]));
    let (lo, hi) = (tensor(&[1, 256, 1], &[0.0; 256], Dtype::F32), tensor(&[1, 256, 1], &[256.0; 256], Dtype::F32));
    let e = attention_cte::Call::new(&q, &k, &v).scale(0.5).bound_min(&lo).bound_max(&hi).launch(&Launch::new()).unwrap_err();
    expect_err(e, ErrorKind::Assertion, &["range_select path doesn't support scale != 1.0"]);
    let inputs = CteInputs { bounds: Some((&lo, &hi)), ..CteInputs::new(&q, &k, &v) };
    // The typed API names the rule before launching.
    let e = CteConfig::new().packing(true).scale(std::hint::black_box(0.5)).launch(&Launch::new().lnc(2), &inputs).unwrap_err();
    expect_err(e, ErrorKind::Argument, &["scale", "0.5", "range_select, which applies no scale"]);
    // Scale 1 runs.
    assert!(CteConfig::new().packing(true).launch(&Launch::new(), &inputs).is_ok());
}
