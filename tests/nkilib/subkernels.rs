//! The library's `rmsnorm_tkg` and `layernorm_tkg` against float64 norms
//! written from their documented semantics (`x · gamma / sqrt(Σx² / N + eps)`, `N` the
//! `hidden_actual` of padded rows, laid out as `[128, B·S, H/128]` with the
//! hidden dim cut into one shard per LNC program, or `h = c·128 + p` with
//! `hidden_dim_tp`; LayerNorm `(x - μ)·gamma/sqrt(σ² + eps) + beta` in the same
//! layout), over the library's own test configurations, in both precision
//! modes; their emitted source under NumPy against the emulator; their rules.

use crate::common::attention::run_numpy_kwargs;
use crate::common::sweep::sweep;
use crate::common::{
    Arg, FP32_ATOL, FP32_RTOL, as_dtype, assert_close, assert_refused_by, assert_same_elements, emitted_package, seed_of, tensor, uniform,
};
use crate::support::token_case;
use nki::{Dtype, Launch, Precision};
use nkilib::subkernels::layernorm_tkg::layernorm_tkg;
use nkilib::subkernels::norm_tkg_utils::{NormTkgRule, NormTkgShape, norm_tkg_violation};
use nkilib::subkernels::rmsnorm_tkg::rmsnorm_tkg;

token_case! {
    /// One of the library's test configurations.
    struct Config {
        hidden_actual: Option<usize>,
        hidden_dim_tp: bool,
        shard_on_h: bool,
    }
}

const fn c(lnc: usize, b: usize, s: usize, h: usize, ha: Option<usize>, tp: bool, soh: bool) -> Config {
    Config { lnc, b, s, h, hidden_actual: ha, hidden_dim_tp: tp, shard_on_h: soh }
}

/// The configurations of the library's `test_rmsnorm_tkg.py` (all float16 there).
const LIBRARY_CONFIGS: &[Config] = &[
    c(1, 1, 1, 8192, None, false, false),
    c(1, 1, 8, 8192, None, false, false),
    c(1, 1, 1, 4096, Some(3072), false, false),
    c(1, 1, 4, 2048, Some(2048), false, false),
    c(1, 1, 4, 2048, Some(1920), false, false),
    c(2, 1, 1, 5120, None, false, false),
    c(2, 1, 1, 8192, None, false, false),
    c(2, 2, 8, 8192, None, false, false),
    c(2, 4, 8, 8192, None, false, false),
    c(2, 128, 1, 8192, None, false, false),
    c(2, 4, 1, 5120, None, false, false),
    c(2, 128, 5, 3072, None, false, false),
    c(2, 256, 5, 3072, None, false, false),
    c(2, 63, 32, 3072, None, false, false),
    c(2, 1, 1, 16384, None, false, false),
    c(2, 1, 1, 4096, Some(3072), false, false),
    c(2, 2, 8, 16384, None, false, false),
    c(2, 2, 8, 3072, Some(2880), false, false),
    c(1, 1, 1, 4096, Some(3072), true, false),
    c(2, 1, 1, 5120, None, true, false),
    c(2, 128, 1, 8192, None, true, false),
    c(2, 2, 8, 3072, Some(2880), true, false),
    c(2, 1, 1, 8192, None, false, true),
    c(2, 2, 8, 8192, None, false, true),
    c(2, 1, 1, 5120, None, false, true),
    c(2, 4, 1, 3072, None, false, true),
    c(2, 1, 1, 16384, None, false, true),
];

const EPS: f64 = 1e-6;
const P: usize = 128;

impl Config {
    fn bxs(&self) -> usize {
        self.b * self.s
    }

    fn name(&self) -> String {
        let Config { lnc, b, s, h, hidden_actual, hidden_dim_tp, shard_on_h } = *self;
        format!("lnc{lnc}_b{b}_s{s}_h{h}_ha{hidden_actual:?}_tp{hidden_dim_tp}_soh{shard_on_h}")
    }

    /// Standard-normal-like inputs (uniform with unit variance) and gamma.
    fn inputs(&self) -> (Vec<f64>, Vec<f64>) {
        let seed = seed_of(&self.name());
        let r = 3f64.sqrt();
        (uniform(self.bxs() * self.h, seed, -r, r), uniform(self.h, seed + 1, -r, r))
    }

    /// The hidden shards of the documented layout: the LNC size, except one
    /// with `hidden_dim_tp`.
    fn shards(&self) -> usize {
        if self.hidden_dim_tp { 1 } else { self.lnc }
    }

    /// `[128, B·S, H/128]`: the float64 RMSNorm of each row, placed as documented.
    fn reference(&self, x: &[f64], g: &[f64]) -> Vec<f64> {
        let n = self.hidden_actual.unwrap_or(self.h) as f64;
        let y: Vec<f64> = x
            .chunks(self.h)
            .flat_map(|row| {
                let rms = (row.iter().map(|v| v * v).sum::<f64>() / n + EPS).sqrt();
                row.iter().zip(g).map(move |(v, w)| v * w / rms)
            })
            .collect();
        self.place(&y)
    }

    /// Row-major `[B·S, H]` values in the documented `[128, B·S, H/128]` layout.
    fn place(&self, y: &[f64]) -> Vec<f64> {
        let (bxs, h) = (self.bxs(), self.h);
        let h1 = h / P;
        let mut out = vec![0.0; P * bxs * h1];
        for t in 0..bxs {
            for col in 0..h {
                let (p, c) = if self.hidden_dim_tp {
                    (col % P, col / P)
                } else {
                    let (shard_len, h2) = (h / self.shards(), h1 / self.shards());
                    let (shard, within) = (col / shard_len, col % shard_len);
                    (within / h2, shard * h2 + within % h2)
                };
                out[(p * bxs + t) * h1 + c] = y[t * h + col];
            }
        }
        out
    }

    /// The emulator's output for inputs in `dtype`.
    fn run(&self, x: &[f64], g: &[f64], dtype: Dtype, precision: Precision) -> Vec<f32> {
        let xt = tensor(&[self.b, self.s, self.h], x, dtype);
        let gt = tensor(&[1, self.h], g, dtype);
        let out = tensor(&[P, self.bxs(), self.h / P], &vec![0.0; self.bxs() * self.h], dtype);
        let mut call = rmsnorm_tkg::Call::new(&xt, &gt, &out).hidden_dim_tp(self.hidden_dim_tp).shard_on_h(self.shard_on_h);
        if let Some(ha) = self.hidden_actual {
            call = call.hidden_actual(ha as i64);
        }
        let launch = Launch::new().lnc(self.lnc).precision(precision);
        call.launch(&launch).unwrap_or_else(|e| panic!("{}: {e}", self.name())).to_f32_vec()
    }

    /// The positional arguments both kernels share (`input, gamma, output`) for the NumPy executor.
    fn numpy_args(&self, x: &[f64], g: &[f64], dtype: Dtype) -> Vec<Arg> {
        vec![
            Arg::Tensor(vec![self.b, self.s, self.h], x.to_vec(), dtype),
            Arg::Tensor(vec![1, self.h], g.to_vec(), dtype),
            Arg::Tensor(vec![P, self.bxs(), self.h / P], vec![0.0; self.bxs() * self.h], dtype),
        ]
    }

    /// Runs `kernel` of the emitted package under NumPy and asserts its output
    /// equals the emulator's, `emu`, element for element.
    fn assert_numpy_equals(&self, kernel: &str, args: &[Arg], kwargs: &[(&str, Arg)], mode: &str, emu: &[f32]) {
        let np = &run_numpy_kwargs(emitted_package(), kernel, args, kwargs, self.lnc, mode)[0];
        assert_same_elements(&format!("{kernel} {} {mode}:", self.name()), np, emu);
    }
}

/// Asserts `|got - want| <= atol + rtol·|want|` element by element (the library's test metric).
fn assert_elementwise(what: &str, got: &[f32], want: &[f64], atol: f64, rtol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: {} values, reference {}", got.len(), want.len());
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (f64::from(g) - w).abs();
        assert!(err <= atol + rtol * w.abs(), "{what}: element {i}: {g} vs {w} (error {err:.3e})");
    }
}

/// Every library configuration, fp32 inputs in `fp32` precision: the fp32 metric.
#[test]
fn library_configs_in_fp32_match_float64() {
    for cfg in LIBRARY_CONFIGS {
        let (x, g) = cfg.inputs();
        let got = cfg.run(&x, &g, Dtype::F32, Precision::Fp32);
        assert_close(&format!("{} fp32", cfg.name()), &got, &cfg.reference(&x, &g), FP32_ATOL, FP32_RTOL);
    }
}

/// Every library configuration, float16 inputs (the library's tests') in
/// hardware precision, within its tolerance (rtol 2e-2, atol 1e-5).
#[test]
fn library_configs_in_float16_match_float64() {
    for cfg in LIBRARY_CONFIGS {
        let (x, g) = cfg.inputs();
        let (x, g) = (as_dtype(&x, Dtype::F16), as_dtype(&g, Dtype::F16));
        let got = cfg.run(&x, &g, Dtype::F16, Precision::Hardware);
        assert_elementwise(&format!("{} float16", cfg.name()), &got, &cfg.reference(&x, &g), 1e-5, 2e-2);
    }
}

/// bfloat16 inputs (the hardware's usual dtype) in hardware precision: every
/// element within two bfloat16 steps.
#[test]
fn bfloat16_inputs_match_float64() {
    for cfg in [c(1, 2, 3, 1024, None, false, false), c(2, 4, 8, 2048, Some(1900), false, false), c(2, 2, 1, 1024, None, false, true)] {
        let (x, g) = cfg.inputs();
        let (x, g) = (as_dtype(&x, Dtype::Bf16), as_dtype(&g, Dtype::Bf16));
        let got = cfg.run(&x, &g, Dtype::Bf16, Precision::Hardware);
        assert_elementwise(&format!("{} bfloat16", cfg.name()), &got, &cfg.reference(&x, &g), 1e-5, 2.0 * 2f64.powi(-8));
    }
}

/// The emitted kernel under NumPy equals the emulator, one configuration per
/// path (one program; rows split in two with two row tiles each; the
/// `hidden_dim_tp` layout; `shard_on_h` with its exchange), in both modes.
#[test]
fn emitted_kernel_under_numpy_equals_emulator() {
    let paths = [
        c(1, 1, 4, 2048, Some(1920), false, false),
        c(2, 128, 5, 3072, None, false, false),
        c(2, 2, 8, 3072, Some(2880), true, false),
        c(2, 4, 1, 3072, None, false, true),
    ];
    for (cfg, m) in sweep(paths) {
        let (dtype, precision, mode) = m.run(Dtype::F32, Dtype::F16);
        let (x, g) = cfg.inputs();
        let (x, g) = (as_dtype(&x, dtype), as_dtype(&g, dtype));
        let emu = cfg.run(&x, &g, dtype, precision);
        let ha = cfg.hidden_actual.map_or(Arg::None, |v| Arg::Int(v as i64));
        let kwargs = [("hidden_actual", ha), ("hidden_dim_tp", Arg::Bool(cfg.hidden_dim_tp)), ("shard_on_h", Arg::Bool(cfg.shard_on_h))];
        cfg.assert_numpy_equals("rmsnorm_tkg", &cfg.numpy_args(&x, &g, dtype), &kwargs, mode, &emu);
    }
}

/// `single_core_forced` keeps the one-shard layout on a two-program launch, and
/// `eps` reaches the mean square.
#[test]
fn single_core_forced_and_eps() {
    let cfg = c(2, 4, 8, 1024, None, false, false);
    let (x, g) = cfg.inputs();
    let xt = tensor(&[4, 8, 1024], &x, Dtype::F32);
    let gt = tensor(&[1, 1024], &g, Dtype::F32);
    let out = tensor(&[P, 32, 8], &vec![0.0; 32 * 1024], Dtype::F32);
    let launch = Launch::new().lnc(2).precision(Precision::Fp32);
    let got = rmsnorm_tkg::Call::new(&xt, &gt, &out).single_core_forced(true).eps(0.5).launch(&launch).unwrap().to_f32_vec();
    let single = Config { lnc: 1, ..cfg };
    let want: Vec<f64> = {
        // The reference at eps 0.5: rescale the eps-1e-6 one row by row.
        let base = single.reference(&x, &g);
        let scale: Vec<f64> = x
            .chunks(1024)
            .map(|r| {
                let ms = r.iter().map(|v| v * v).sum::<f64>() / 1024.0;
                ((ms + EPS) / (ms + 0.5)).sqrt()
            })
            .collect();
        base.iter().enumerate().map(|(i, v)| v * scale[(i / 8) % 32]).collect()
    };
    assert_close("single_core_forced, eps 0.5", &got, &want, FP32_ATOL, FP32_RTOL);
}

/// The rules, as `const fn` and when the kernel is traced.
#[test]
fn rules_refuse_by_name() {
    let ok = nkilib::norm_tkg_config!(bxs = 16, hidden = 8192, programs = 2);
    assert_eq!(norm_tkg_violation(ok), None);
    let cases = [
        (NormTkgShape { hidden: 1000, ..ok }, NormTkgRule::HiddenTiles),
        (NormTkgShape { bxs: 0, ..ok }, NormTkgRule::Tokens),
        (NormTkgShape { hidden_actual: 9000, ..ok }, NormTkgRule::HiddenActual),
        (NormTkgShape { eps: -1.0, ..ok }, NormTkgRule::Eps),
        (NormTkgShape { eps: f64::NAN, ..ok }, NormTkgRule::Eps),
        (NormTkgShape { shard_on_h: true, programs: 1, ..ok }, NormTkgRule::ShardOnHNeedsLnc2),
        (NormTkgShape { shard_on_h: true, hidden_dim_tp: true, ..ok }, NormTkgRule::ShardOnHAlone),
        (NormTkgShape { hidden: 128 * 3, ..ok }, NormTkgRule::HiddenShards),
    ];
    assert_refused_by(norm_tkg_violation, cases);
    assert_eq!(norm_tkg_violation(NormTkgShape { hidden: 128 * 3, hidden_dim_tp: true, ..ok }), None);
    assert_eq!(nkilib::norm_tkg_config!(bxs = 4, hidden = 384, programs = 2, single_core_forced = true).hidden, 384);

    let x = tensor(&[1, 2, 384], &[1.0; 768], Dtype::F32);
    let g = tensor(&[1, 384], &[1.0; 384], Dtype::F32);
    let out = tensor(&[P, 2, 3], &[0.0; 768], Dtype::F32);
    let e = rmsnorm_tkg::Call::new(&x, &g, &out).launch(&Launch::new().lnc(2)).unwrap_err();
    assert!(e.to_string().contains("H / 128 = 3 must split evenly over the 2 hidden shards"), "{e}");
    let e = rmsnorm_tkg::Call::new(&x, &g, &out).shard_on_h(true).launch(&Launch::new()).unwrap_err();
    assert!(e.to_string().contains("shard_on_h needs a launch of 2 programs (LNC2), got 1"), "{e}");
    let e = rmsnorm_tkg::Call::new(&x, &g, &out).hidden_actual(400).launch(&Launch::new()).unwrap_err();
    assert!(e.to_string().contains("hidden_actual must be in 1..=H = 384, got hidden_actual = 400"), "{e}");
    let bad_out = tensor(&[P, 3, 3], &[0.0; 1152], Dtype::F32);
    let e = rmsnorm_tkg::Call::new(&x, &g, &bad_out).launch(&Launch::new()).unwrap_err();
    assert!(e.to_string().contains("output must be [128, B*S, H/128] = [128, 2, 3]"), "{e}");
}

/// The configurations of the library's `test_layernorm_tkg.py` (all float16
/// there; `hidden_actual` and `hidden_dim_tp` are not layernorm options).
const LAYERNORM_CONFIGS: &[Config] = &[
    c(1, 1, 1, 8192, None, false, false),
    c(1, 1, 8, 8192, None, false, false),
    c(2, 1, 1, 5120, None, false, false),
    c(2, 1, 1, 8192, None, false, false),
    c(2, 2, 8, 8192, None, false, false),
    c(2, 4, 8, 8192, None, false, false),
    c(2, 128, 1, 8192, None, false, false),
    c(2, 128, 1, 8192, None, false, true),
    c(2, 4, 1, 5120, None, false, false),
    c(2, 128, 5, 3072, None, false, false),
    c(2, 256, 5, 3072, None, false, false),
    c(2, 63, 32, 3072, None, false, false),
    c(2, 1, 1, 16384, None, false, false),
    c(2, 2, 5, 16384, None, false, false),
    c(2, 1, 1, 8192, None, false, true),
    c(2, 2, 8, 8192, None, false, true),
    c(2, 1, 1, 5120, None, false, true),
    c(2, 4, 1, 3072, None, false, true),
    c(2, 1, 1, 16384, None, false, true),
];

/// A layernorm case: a [`Config`] and its beta (gamma's seed + 1).
impl Config {
    fn beta(&self) -> Vec<f64> {
        let r = 3f64.sqrt();
        uniform(self.h, seed_of(&self.name()) + 2, -r, r)
    }

    /// `[128, B·S, H/128]`: the float64 LayerNorm of each row (biased variance), placed as documented.
    fn layernorm_reference(&self, x: &[f64], g: &[f64], beta: Option<&[f64]>) -> Vec<f64> {
        let h = self.h as f64;
        let y: Vec<f64> = x
            .chunks(self.h)
            .flat_map(|row| {
                let mean = row.iter().sum::<f64>() / h;
                let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / h;
                let rstd = 1.0 / (var + EPS).sqrt();
                row.iter().enumerate().map(move |(i, v)| (v - mean) * g[i] * rstd + beta.map_or(0.0, |b| b[i]))
            })
            .collect();
        self.place(&y)
    }

    /// The emulator's layernorm output for inputs in `dtype`.
    fn run_layernorm(&self, x: &[f64], g: &[f64], beta: Option<&[f64]>, dtype: Dtype, precision: Precision) -> Vec<f32> {
        let xt = tensor(&[self.b, self.s, self.h], x, dtype);
        let gt = tensor(&[1, self.h], g, dtype);
        let out = tensor(&[P, self.bxs(), self.h / P], &vec![0.0; self.bxs() * self.h], dtype);
        let bt = beta.map(|b| tensor(&[1, self.h], b, dtype));
        let mut call = layernorm_tkg::Call::new(&xt, &gt, &out).shard_on_h(self.shard_on_h);
        if let Some(bt) = &bt {
            call = call.beta(bt);
        }
        let launch = Launch::new().lnc(self.lnc).precision(precision);
        call.launch(&launch).unwrap_or_else(|e| panic!("layernorm {}: {e}", self.name())).to_f32_vec()
    }
}

/// Every library configuration of `layernorm_tkg`, fp32 inputs in `fp32`
/// precision: the fp32 metric (with beta, and without on every third).
#[test]
fn layernorm_library_configs_in_fp32_match_float64() {
    for (i, cfg) in LAYERNORM_CONFIGS.iter().enumerate() {
        let (x, g) = cfg.inputs();
        let beta = cfg.beta();
        let beta = (i % 3 != 2).then_some(beta.as_slice());
        let got = cfg.run_layernorm(&x, &g, beta, Dtype::F32, Precision::Fp32);
        let want = cfg.layernorm_reference(&x, &g, beta);
        assert_close(&format!("layernorm {} fp32 beta={}", cfg.name(), beta.is_some()), &got, &want, FP32_ATOL, FP32_RTOL);
    }
}

/// Every library configuration of `layernorm_tkg`, float16 inputs (the
/// library's tests') in hardware precision: the library's rtol 2e-2, and an
/// absolute allowance of 8 float16 roundings of the output's scale, since the
/// kernel rounds the centred, scaled and shifted rows to float16 in turn (a
/// sum whose terms cancel keeps their rounding error).
#[test]
fn layernorm_library_configs_in_float16_match_float64() {
    for cfg in LAYERNORM_CONFIGS {
        let (x, g) = cfg.inputs();
        let (x, g, beta) = (as_dtype(&x, Dtype::F16), as_dtype(&g, Dtype::F16), as_dtype(&cfg.beta(), Dtype::F16));
        let got = cfg.run_layernorm(&x, &g, Some(&beta), Dtype::F16, Precision::Hardware);
        let want = cfg.layernorm_reference(&x, &g, Some(&beta));
        let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        assert_elementwise(&format!("layernorm {} float16", cfg.name()), &got, &want, 8.0 * 2f64.powi(-11) * scale, 2e-2);
    }
}

/// The emitted `layernorm_tkg` under NumPy equals the emulator: one program;
/// rows split over two with two row tiles each; `shard_on_h`; without beta.
#[test]
fn layernorm_emitted_under_numpy_equals_emulator() {
    let paths = [
        (c(1, 1, 8, 1024, None, false, false), true),
        (c(2, 128, 5, 3072, None, false, false), true),
        (c(2, 4, 1, 3072, None, false, true), true),
        (c(2, 2, 8, 1024, None, false, false), false),
    ];
    for ((cfg, with_beta), m) in sweep(paths) {
        let (dtype, precision, mode) = m.run(Dtype::F32, Dtype::F16);
        let (x, g) = cfg.inputs();
        let (x, g, beta) = (as_dtype(&x, dtype), as_dtype(&g, dtype), as_dtype(&cfg.beta(), dtype));
        let beta = with_beta.then_some(beta.as_slice());
        let emu = cfg.run_layernorm(&x, &g, beta, dtype, precision);
        let beta_arg = beta.map_or(Arg::None, |b| Arg::Tensor(vec![1, cfg.h], b.to_vec(), dtype));
        let kwargs = [("beta", beta_arg), ("shard_on_h", Arg::Bool(cfg.shard_on_h))];
        cfg.assert_numpy_equals("layernorm_tkg", &cfg.numpy_args(&x, &g, dtype), &kwargs, mode, &emu);
    }
}

/// `layernorm_tkg` refuses what the rules refuse, naming the parameter.
#[test]
fn layernorm_refuses_by_name() {
    let x = tensor(&[1, 2, 384], &[1.0; 768], Dtype::F32);
    let g = tensor(&[1, 384], &[1.0; 384], Dtype::F32);
    let out = tensor(&[P, 2, 3], &[0.0; 768], Dtype::F32);
    let e = layernorm_tkg::Call::new(&x, &g, &out).launch(&Launch::new().lnc(2)).unwrap_err();
    assert!(e.to_string().contains("H / 128 = 3 must split evenly over the 2 hidden shards"), "{e}");
    let e = layernorm_tkg::Call::new(&x, &g, &out).shard_on_h(true).launch(&Launch::new()).unwrap_err();
    assert!(e.to_string().contains("shard_on_h needs a launch of 2 programs (LNC2), got 1"), "{e}");
    let short = tensor(&[1, 256], &[1.0; 256], Dtype::F32);
    let e = layernorm_tkg::Call::new(&x, &g, &out).beta(&short).launch(&Launch::new()).unwrap_err();
    assert!(e.to_string().contains("beta must be [1, H] = [1, 384], got"), "{e}");
}
