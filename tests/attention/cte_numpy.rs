//! The emitted `attention_cte` (NKI 2.x Python) run under the NumPy executor of
//! `tests/python/nki_harness` against the emulator, both in fp32 precision, on a
//! representative subset of its features at small sizes (one multi-section case).
//! Every output (and both statistics with `cache_softmax`) must agree within
//! `1e-5 max|emulator| + 1e-6`. Two extra cases run both in hardware precision,
//! where the f16 output may differ by up to two f16 roundings (`2^-9 max|emulator|`;
//! one ulp differences are observed).

use crate::common;

use crate::common::attention::{k_layout, q_layout, run_numpy_kwargs};
use crate::common::{Arg, as_dtype, assert_close, tensor, uniform};
use nki::attention::cte::{CteConfig, CteInputs, Prior};
use nki::{Dtype, Launch, Precision, Tensor};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

const RTOL: f64 = 1e-5;
const ATOL: f64 = 1e-6;

/// The package holding only `attention_cte`, emitted once per test binary.
fn package() -> &'static Path {
    static PKG: OnceLock<PathBuf> = OnceLock::new();
    PKG.get_or_init(|| common::package_of("cte_pkg", &[&nki::attention::cte::attention_cte::attention_cte::INFO]))
}

/// One call: shapes, configuration and the run-time scalars.
struct NpCase {
    name: &'static str,
    bs: usize,
    bs_kv: usize,
    sq: usize,
    sk: usize,
    d: usize,
    dtype: Dtype,
    cfg: CteConfig,
    /// `(seqlen_prior, prior_used_len)`.
    prior: Option<(usize, usize)>,
    cp_offset: Option<i64>,
    /// Packed sequences per batch row (0: none).
    packed: usize,
    lnc: usize,
    precision: Precision,
}

impl NpCase {
    fn new(name: &'static str, bs: usize, bs_kv: usize, sq: usize, sk: usize, d: usize, cfg: CteConfig) -> NpCase {
        NpCase {
            name,
            bs,
            bs_kv,
            sq,
            sk,
            d,
            dtype: Dtype::F32,
            cfg,
            prior: None,
            cp_offset: None,
            packed: 0,
            lnc: 1,
            precision: Precision::Fp32,
        }
    }

    fn prior(mut self, sp: usize, used: usize) -> NpCase {
        self.prior = Some((sp, used));
        self.cfg = self.cfg.prefix_caching(true);
        self
    }

    fn cp_offset(mut self, offset: i64) -> NpCase {
        self.cp_offset = Some(offset);
        self
    }

    fn packed(mut self, segments: usize) -> NpCase {
        self.packed = segments;
        self.cfg = self.cfg.packing(true);
        self
    }

    fn lnc(mut self, lnc: usize) -> NpCase {
        self.lnc = lnc;
        self
    }

    fn dtype(mut self, dtype: Dtype) -> NpCase {
        self.dtype = dtype;
        self
    }

    fn hardware(mut self) -> NpCase {
        self.precision = Precision::Hardware;
        self
    }

    /// fp32: 1e-5; hardware: up to two roundings of the output dtype.
    fn rtol(&self, output: usize) -> f64 {
        match (self.precision, output, self.dtype) {
            (Precision::Hardware, 0, Dtype::F16) => 2f64.powi(-9),
            (Precision::Hardware, 0, Dtype::Bf16) => 2f64.powi(-6),
            _ => RTOL,
        }
    }

    /// Runs the emulator (typed API) and the emitted kernel under NumPy on the same
    /// inputs and compares every output.
    fn check(&self) {
        let (bs, bs_kv, sq, sk, d) = (self.bs, self.bs_kv, self.sq, self.sk, self.d);
        let seed = self.name.bytes().fold(17u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
        let draw = |n: usize, k: u64| as_dtype(&uniform(n, seed * 8 + k, 0.0, 1.0), self.dtype);
        let (q, k, v) = (draw(bs * sq * d, 1), draw(bs_kv * sk * d, 2), draw(bs_kv * sk * d, 3));
        let sp = self.prior.map_or(0, |p| p.0);
        let (kp, vp) = (draw(bs_kv * sp * d, 4), draw(bs_kv * sp * d, 5));
        let sink = uniform(bs, seed * 8 + 6, 0.2 * d as f64, 0.35 * d as f64 + 1.0);
        let (qs, qv) = q_layout(&q, bs, sq, d, self.cfg.tp_q);
        let (ks, kv) = k_layout(&k, bs_kv, sk, d, self.cfg.tp_k);
        let (kps, kpv) = k_layout(&kp, bs_kv, sp, d, self.cfg.tp_k);
        let (lo, hi) = bounds(bs, sq, self.packed, seed * 8 + 7);
        let used = self.prior.map_or(0, |p| p.1 as i64);

        // The emulator.
        let t = |shape: &[usize], vals: &[f64], dt: Dtype| tensor(shape, vals, dt);
        let (tq, tk, tv) = (t(&qs, &qv, self.dtype), t(&ks, &kv, self.dtype), t(&[bs_kv, sk, d], &v, self.dtype));
        let (tkp, tvp) = (t(&kps, &kpv, self.dtype), t(&[bs_kv, sp, d], &vp, self.dtype));
        let tpul = Tensor::from_i64(&[1], &[used], Dtype::I32).unwrap();
        let tsink = t(&[bs, 1], &sink, Dtype::F32);
        let tcp = Tensor::from_i64(&[1, 1], &[self.cp_offset.unwrap_or(0)], Dtype::I32).unwrap();
        let (tlo, thi) = (t(&[bs, sq, 1], &lo, Dtype::F32), t(&[bs, sq, 1], &hi, Dtype::F32));
        let inputs = CteInputs {
            prior: self.prior.map(|_| Prior { k: &tkp, v: &tvp, used_len: &tpul }),
            sink: self.cfg.sink.then_some(&tsink),
            cp_offset: self.cp_offset.map(|_| &tcp),
            bounds: (self.packed > 0).then_some((&tlo, &thi)),
            ..CteInputs::new(&tq, &tk, &tv)
        };
        let launch = Launch::new().lnc(self.lnc).precision(self.precision);
        let emu = self.cfg.launch(&launch, &inputs).unwrap_or_else(|e| panic!("{}: {e}", self.name));
        let mut emu_outs = vec![emu.out];
        emu_outs.extend(emu.neg_max);
        emu_outs.extend(emu.sum);

        // The emitted kernel: q, k, v positional, every other parameter by keyword.
        let c = &self.cfg;
        let tensor_or_none = |on: bool, shape: &[usize], vals: &[f64], dt: Dtype| {
            if on { Arg::Tensor(shape.to_vec(), vals.to_vec(), dt) } else { Arg::None }
        };
        let args = [
            Arg::Tensor(qs.clone(), qv.clone(), self.dtype),
            Arg::Tensor(ks.clone(), kv.clone(), self.dtype),
            Arg::Tensor(vec![bs_kv, sk, d], v.clone(), self.dtype),
        ];
        let kwargs = [
            ("scale", Arg::Float(c.scale)),
            ("causal_mask", Arg::Bool(c.causal_mask)),
            ("k_prior", tensor_or_none(self.prior.is_some(), &kps, &kpv, self.dtype)),
            ("v_prior", tensor_or_none(self.prior.is_some(), &[bs_kv, sp, d], &vp, self.dtype)),
            ("prior_used_len", tensor_or_none(self.prior.is_some(), &[1], &[used as f64], Dtype::I32)),
            ("sink", tensor_or_none(c.sink, &[bs, 1], &sink, Dtype::F32)),
            ("sliding_window", if c.sliding_window > 0 { Arg::Int(c.sliding_window) } else { Arg::None }),
            ("tp_q", Arg::Bool(c.tp_q)),
            ("tp_k", Arg::Bool(c.tp_k)),
            ("tp_out", Arg::Bool(c.tp_out)),
            ("cache_softmax", Arg::Bool(c.cache_softmax)),
            ("softmax_dtype", Arg::Dtype(c.softmax_dtype)),
            ("mm_out_dtype", Arg::Dtype(c.mm_out_dtype)),
            ("cp_offset", tensor_or_none(self.cp_offset.is_some(), &[1, 1], &[self.cp_offset.unwrap_or(0) as f64], Dtype::I32)),
            ("global_cp_deg", c.global_cp_deg.map_or(Arg::None, Arg::Int)),
            ("cp_strided_q_slicing", Arg::Bool(c.cp_strided_q_slicing)),
            ("bound_min", tensor_or_none(self.packed > 0, &[bs, sq, 1], &lo, Dtype::F32)),
            ("bound_max", tensor_or_none(self.packed > 0, &[bs, sq, 1], &hi, Dtype::F32)),
            ("cp_striped_input", Arg::Bool(c.cp_striped_input)),
            ("skip_output_normalization", Arg::Bool(c.skip_output_normalization)),
        ];
        let np = run_numpy_kwargs(package(), "attention_cte", &args, &kwargs, self.lnc, &self.precision.to_string());

        assert_eq!(np.len(), emu_outs.len(), "{}: NumPy returned {} outputs, the emulator {}", self.name, np.len(), emu_outs.len());
        for (i, (got, want)) in np.iter().zip(&emu_outs).enumerate() {
            assert_eq!(got.len(), want.numel(), "{} output {i}: size", self.name);
            let want = want.to_f32_vec();
            // The negated max of a fully masked row is -FLOAT32_MIN on both sides,
            // exactly; the other values are compared with the tolerance.
            let sentinel: Vec<usize> = (0..want.len()).filter(|&j| want[j] == f32::MAX).collect();
            for &j in &sentinel {
                assert_eq!(got[j], f32::MAX, "{} output {i} element {j}: fully masked row's neg_max", self.name);
            }
            let rest: Vec<usize> = (0..want.len()).filter(|&j| want[j] != f32::MAX).collect();
            let got: Vec<f32> = rest.iter().map(|&j| got[j]).collect();
            let want: Vec<f64> = rest.iter().map(|&j| f64::from(want[j])).collect();
            if !want.is_empty() {
                assert_close(&format!("{} output {i} (numpy vs emulator)", self.name), &got, &want, ATOL, self.rtol(i));
                let (err, scale) = common::errors(&got, &want);
                eprintln!("{} output {i}: max abs err {err:.2e}, max|emu| {scale:.2e}, {} sentinels", self.name, sentinel.len());
            }
        }
    }
}

/// Packing bounds `[bs, s]` with `segments` seeded sequences per row (all keys when 0).
fn bounds(bs: usize, s: usize, segments: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let (mut lo, mut hi) = (Vec::new(), Vec::new());
    for b in 0..bs {
        let mut cuts = vec![0, s];
        for x in uniform(8 * segments, seed + b as u64, 1.0, s as f64) {
            if cuts.len() < segments + 1 && !cuts.contains(&(x as usize)) {
                cuts.push(x as usize);
            }
        }
        cuts.sort_unstable();
        for w in cuts.windows(2) {
            lo.extend(std::iter::repeat_n(w[0] as f64, w[1] - w[0]));
            hi.extend(std::iter::repeat_n(w[1] as f64, w[1] - w[0]));
        }
    }
    (lo, hi)
}

#[test]
fn the_package_passes_the_signature_check() {
    let (ok, out, err) = common::harness(&["check", &package().display().to_string()]);
    assert!(ok, "{out}{err}");
}

#[test]
fn causal_and_non_causal() {
    let base = CteConfig::new();
    NpCase::new("causal_640", 1, 1, 640, 640, 64, base.cache_softmax(true)).check();
    NpCase::new("noncausal_scale_tp_all", 2, 1, 300, 700, 72, base.causal_mask(false).scale(0.125).layouts(false, true, true)).check();
    NpCase::new("causal_bf16_inputs_tp_q", 1, 1, 257, 513, 32, base).dtype(Dtype::Bf16).check();
}

#[test]
fn sliding_window_static_and_dynamic() {
    NpCase::new("swa300_static", 1, 1, 768, 768, 64, CteConfig::new().sliding_window(300).cache_softmax(true)).check();
    NpCase::new("swa128_dynamic_tpk", 1, 1, 640, 900, 64, CteConfig::new().sliding_window(128).layouts(true, true, false)).check();
}

#[test]
fn context_parallel_modes() {
    let cp = CteConfig::new().context_parallel(4);
    NpCase::new("cp_contiguous", 1, 1, 256, 1024, 64, cp.cache_softmax(true)).cp_offset(512).check();
    NpCase::new("cp_strided", 1, 1, 256, 1024, 64, cp.cp_strided_q_slicing(true)).cp_offset(1).check();
    // Striped with cp_offset = -1: row 0 is fully masked (finite values on both sides).
    let striped = cp.cp_striped_input(true).cache_softmax(true).skip_output_normalization(true);
    NpCase::new("cp_striped_minus1", 2, 1, 256, 640, 64, striped).cp_offset(-1).check();
    // All keys in the future (ub < 0): every row fully masked.
    NpCase::new("cp_contiguous_all_future", 1, 1, 128, 600, 32, cp.cache_softmax(true)).cp_offset(-128).check();
}

#[test]
fn context_parallel_with_sliding_window_loads_a_key_window() {
    let cfg = CteConfig::new().context_parallel(8).sliding_window(128);
    NpCase::new("cp_swa_window", 1, 1, 256, 2048, 64, cfg.cache_softmax(true)).cp_offset(5 * 256).check();
    NpCase::new("cp_swa_window_tpk", 2, 1, 256, 2048, 64, cfg.layouts(true, true, false)).cp_offset(3 * 256).check();
    NpCase::new("cp_strided_swa", 1, 1, 256, 1024, 64, CteConfig::new().context_parallel(4).cp_strided_q_slicing(true).sliding_window(600))
        .cp_offset(2)
        .check();
}

#[test]
fn prefix_caching_sink_and_gqa() {
    NpCase::new("prefix_swa128", 1, 1, 512, 512, 64, CteConfig::new().sliding_window(128)).prior(700, 350).check();
    NpCase::new("prefix_noncausal_sink", 2, 1, 256, 300, 64, CteConfig::new().causal_mask(false).sink(true)).prior(600, 599).check();
    NpCase::new("prefix_cp", 1, 1, 256, 1024, 32, CteConfig::new().context_parallel(4).cache_softmax(true))
        .prior(300, 1)
        .cp_offset(0)
        .check();
    NpCase::new("sink_cached_skip", 1, 1, 384, 384, 64, CteConfig::new().sink(true).cache_softmax(true).skip_output_normalization(true))
        .check();
    NpCase::new("gqa_4_2", 4, 2, 256, 384, 32, CteConfig::new().cache_softmax(true)).check();
}

#[test]
fn packing_lnc2_and_multi_section() {
    NpCase::new("packing", 2, 2, 512, 512, 64, CteConfig::new().cache_softmax(true)).packed(4).check();
    NpCase::new("packing_partial_group_tp_all", 2, 1, 400, 400, 64, CteConfig::new().layouts(true, true, true)).packed(4).check();
    NpCase::new("lnc2_odd_batch_split", 3, 1, 1024, 1024, 32, CteConfig::new().cache_softmax(true)).lnc(2).check();
    NpCase::new("lnc2_odd_batch_small", 3, 3, 256, 512, 32, CteConfig::new().causal_mask(false)).lnc(2).check();
    let ms = CteConfig::new().causal_mask(false).sink(true).cache_softmax(true).layouts(true, false, true);
    NpCase::new("multi_section_10752", 1, 1, 128, 10752, 32, ms).check();
}

#[test]
fn hardware_precision_agrees_up_to_output_roundings() {
    let base = CteConfig::new().cache_softmax(true);
    NpCase::new("hw_f16_tp_all", 1, 1, 640, 640, 64, base.layouts(false, true, true)).dtype(Dtype::F16).hardware().check();
    NpCase::new("hw_f16_multi_section", 1, 1, 128, 10752, 64, base.causal_mask(false)).dtype(Dtype::F16).hardware().check();
}
