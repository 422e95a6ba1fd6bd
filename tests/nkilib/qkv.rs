//! The library's `qkv_tkg` against a float64 projection written from its
//! documented semantics (`x = hidden (+ attn_prev + mlp_prev)`, RMSNorm
//! `x·gamma/sqrt(Σx²/N + eps)` or LayerNorm `(x-μ)·gamma/sqrt(σ²+eps) (+ beta)`,
//! `out = x @ W (+ bias)` stored `[B, S, I]` or `[I/d, B, S, d]`), at the
//! library's test configurations (a fast subset), in both precision modes;
//! its emitted source under NumPy against the emulator; its rules.

use crate::common::attention::run_numpy_kwargs;
use crate::common::sweep::sweep;
use crate::common::{
    Arg, CaseName, FP32_ATOL, FP32_RTOL, as_dtype, assert_close, assert_refused_by, assert_same_elements, layer_norm, package_of, rms_norm,
    seed_of, tensor, uniform, vec_mat,
};
use crate::support::token_case;
use nki::{Dtype, Launch, Outputs, Precision};
use nkilib::qkv::qkv::qkv as qkv_entry;
use nkilib::qkv::qkv_tkg::{NormType, QKVOutputLayout, QkvTkgRule, QkvTkgShape, QuantizationType, qkv_tkg, qkv_tkg_violation};

/// The norm of a case.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Norm {
    None,
    Rms,
    Layer,
}

/// The quantization of a case: float weights, or `float8_e4m3` weights with
/// per-tensor Q/K/V scales (and a quantized input) or per-column scales,
/// given as one row or pre-broadcast to 128.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Quant {
    None,
    Static { scale_rows: usize },
    Row { scale_rows: usize },
}

token_case! {
    /// One configuration of the library's `test_qkv_tkg.py`.
    struct Config {
        hidden_actual: Option<usize>,
        i: usize,
        d_head: usize,
        norm: Norm,
        fused_add: bool,
        norm_bias: bool,
        qkv_bias: bool,
        eps: f64,
        nbsd: bool,
        quant: Quant,
        /// Query heads (the key and value heads are the rest, evenly).
        nq: usize,
    }
}

/// A configuration of `lnc` programs, `B·S` tokens, `H` hidden and `I`
/// output columns, with heads of 128, no norm, fused add or bias, `eps` 1e-6
/// and the `[B, S, I]` layout; cases name what they change.
const fn c(lnc: usize, b: usize, s: usize, h: usize, i: usize) -> Config {
    Config {
        lnc,
        b,
        s,
        h,
        hidden_actual: None,
        i,
        d_head: 128,
        norm: Norm::None,
        fused_add: false,
        norm_bias: false,
        qkv_bias: false,
        eps: 1e-6,
        nbsd: false,
        quant: Quant::None,
        nq: 0,
    }
}

/// A quantized configuration with `nq` query heads.
const fn q(cfg: Config, quant: Quant, nq: usize) -> Config {
    Config { quant, nq, ..cfg }
}

/// The library's quantized configurations that fit a fast test (H = 16384
/// with I = 4352 is left to the library comparison).
const QUANT_CONFIGS: &[Config] = &[
    q(Config { norm: Norm::Rms, ..c(2, 1, 5, 8192, 1280) }, Quant::Static { scale_rows: 128 }, 8),
    q(Config { norm: Norm::Rms, nbsd: true, ..c(1, 1, 1, 8192, 5120) }, Quant::Static { scale_rows: 1 }, 32),
    q(Config { d_head: 64, qkv_bias: true, nbsd: true, ..c(1, 2, 1, 2048, 640) }, Quant::Static { scale_rows: 1 }, 6),
    q(Config { norm: Norm::Rms, ..c(2, 1, 5, 8192, 1280) }, Quant::Row { scale_rows: 128 }, 8),
    q(Config { norm: Norm::Rms, fused_add: true, ..c(2, 1, 3, 8192, 1280) }, Quant::Row { scale_rows: 1 }, 8),
    q(Config { qkv_bias: true, ..c(2, 2, 1, 16384, 512) }, Quant::Row { scale_rows: 128 }, 2),
];

/// A fast subset of the library's unquantized configurations: every norm,
/// fused add, both biases, both layouts, one and two programs, an H with a
/// remainder block (3840 = 30 tiles, 15 per program), several I blocks
/// (I = 10240), array tiles of 32 and 64 columns.
const LIBRARY_CONFIGS: &[Config] = &[
    Config { fused_add: true, ..c(1, 1, 4, 4096, 512) },
    Config { hidden_actual: Some(3072), norm: Norm::Rms, fused_add: true, ..c(1, 4, 1, 4096, 896) },
    c(2, 2, 1, 3840, 10240),
    c(1, 1, 1, 128, 512),
    Config { norm: Norm::Rms, eps: 1e-5, ..c(1, 1, 7, 8192, 384) },
    Config { norm: Norm::Layer, norm_bias: true, ..c(1, 1, 5, 8192, 384) },
    Config { norm: Norm::Layer, ..c(1, 1, 5, 8192, 384) },
    Config { d_head: 64, norm: Norm::Rms, qkv_bias: true, ..c(2, 8, 5, 3072, 640) },
    Config { nbsd: true, ..c(2, 1, 1, 8192, 768) },
    Config { norm: Norm::Rms, nbsd: true, ..c(1, 1, 1, 8192, 5120) },
    Config { norm: Norm::Rms, fused_add: true, eps: 77.0, ..c(2, 1, 1, 8192, 512) },
];

/// A QKV projection's inputs for `bxs` tokens of `h` hidden into `i`
/// columns, drawn from `seed`: the input and the two residuals `[B·S·H]`, the
/// weights `[H·I]` (scaled by `1/sqrt(H)` to keep the outputs near one, or
/// float8_e4m3 values in [-1, 1] when `fp8`), gamma, beta `[H]`, bias `[I]`.
pub(crate) fn projection_inputs(seed: u64, bxs: usize, h: usize, i: usize, fp8: bool) -> Vec<Vec<f64>> {
    let n = bxs * h;
    let w = 1.0 / (h as f64).sqrt();
    let weights = if fp8 { as_dtype(&uniform(h * i, seed + 3, -1.0, 1.0), Dtype::Fp8E4m3) } else { uniform(h * i, seed + 3, -w, w) };
    vec![
        uniform(n, seed, -1.0, 1.0),
        uniform(n, seed + 1, -1.0, 1.0),
        uniform(n, seed + 2, -1.0, 1.0),
        weights,
        uniform(h, seed + 4, 0.5, 1.5),
        uniform(h, seed + 5, -0.5, 0.5),
        uniform(i, seed + 6, -1.0, 1.0),
    ]
}

impl Config {
    fn bxs(&self) -> usize {
        self.b * self.s
    }

    /// Inputs: [`projection_inputs`] (float8_e4m3 weights when quantized),
    /// then the scales near 1/240 (the library's test's), one row of them:
    /// Q/K/V's and the input's for STATIC, each column's for ROW.
    fn inputs(&self) -> Vec<Vec<f64>> {
        let seed = seed_of(&self.name());
        let mut v = projection_inputs(seed, self.bxs(), self.h, self.i, self.quant != Quant::None);
        match self.quant {
            Quant::None => {}
            Quant::Static { .. } => {
                v.push(uniform(3, seed + 7, 0.995 / 240.0, 1.005 / 240.0));
                v.push(uniform(1, seed + 8, 0.995 / 240.0, 1.005 / 240.0));
            }
            Quant::Row { .. } => v.push(uniform(self.i, seed + 7, 0.5 / 240.0, 1.5 / 240.0)),
        }
        v
    }

    /// The float64 projection in the output layout, and the residual sum.
    fn reference(&self, v: &[Vec<f64>]) -> (Vec<f64>, Vec<f64>) {
        let (bxs, h, i, d) = (self.bxs(), self.h, self.i, self.d_head);
        let x: Vec<f64> = if self.fused_add { (0..bxs * h).map(|k| v[0][k] + v[1][k] + v[2][k]).collect() } else { v[0].clone() };
        let mut out = vec![0.0; bxs * i];
        for t in 0..bxs {
            let row = &x[t * h..(t + 1) * h];
            let y: Vec<f64> = match self.norm {
                Norm::None => row.to_vec(),
                Norm::Rms => rms_norm(row, Some(&v[4]), self.hidden_actual.unwrap_or(h), self.eps),
                Norm::Layer => layer_norm(row, &v[4], self.norm_bias.then_some(&v[5][..]), self.eps),
            };
            // STATIC: the input divided by the input scale and clipped to ±240.
            let y: Vec<f64> = match self.quant {
                Quant::Static { .. } => y.iter().map(|a| (a / v[8][0]).clamp(-240.0, 240.0)).collect(),
                _ => y,
            };
            let (q_end, k_end) = (self.nq * d, (self.nq + self.nkv()) * d);
            let dots = vec_mat(&y, &v[3]);
            for (col, &dot) in dots.iter().enumerate() {
                let dot = match self.quant {
                    Quant::None => dot,
                    Quant::Static { .. } => dot * v[7][usize::from(col >= q_end) + usize::from(col >= k_end)] * v[8][0],
                    Quant::Row { .. } => dot * v[7][col],
                };
                let val = dot + if self.qkv_bias { v[6][col] } else { 0.0 };
                let at = if self.nbsd { ((col / d) * bxs + t) * d + col % d } else { t * i + col };
                out[at] = val;
            }
        }
        (out, x)
    }

    /// Key (and value) heads: the heads of `I` after the query heads, halved.
    fn nkv(&self) -> usize {
        (self.i / self.d_head).saturating_sub(self.nq) / 2
    }

    /// The scale tensors' shapes and values: `qkv_w_scale`, and `qkv_in_scale` for STATIC.
    fn scales(&self, v: &[Vec<f64>]) -> Vec<(Vec<usize>, Vec<f64>)> {
        let rows = |r: usize, x: &[f64]| (vec![r, x.len()], x.iter().cycle().take(r * x.len()).copied().collect::<Vec<f64>>());
        match self.quant {
            Quant::None => vec![],
            Quant::Static { scale_rows } => vec![rows(scale_rows, &v[7]), rows(scale_rows, &v[8])],
            Quant::Row { scale_rows } => vec![rows(scale_rows, &v[7])],
        }
    }

    /// The emulator's outputs (projection, and the residual sum with fused add).
    fn run(&self, v: &[Vec<f64>], dtype: Dtype, precision: Precision) -> Vec<Vec<f32>> {
        let (b, s, h, i) = (self.b, self.s, self.h, self.i);
        let hidden = tensor(&[b, s, h], &v[0], dtype);
        let attn = tensor(&[b, s, h], &v[1], dtype);
        let mlp = tensor(&[b, s, h], &v[2], dtype);
        let w_dtype = if self.quant == Quant::None { dtype } else { Dtype::Fp8E4m3 };
        let w = tensor(&[h, i], &v[3], w_dtype);
        let scales: Vec<nki::Tensor> = self.scales(v).iter().map(|(shape, x)| tensor(shape, x, Dtype::F32)).collect();
        let gamma = tensor(&[1, h], &v[4], dtype);
        let beta = tensor(&[1, h], &v[5], dtype);
        let bias = tensor(&[1, i], &v[6], dtype);
        let norm_type = match self.norm {
            Norm::None => NormType::NO_NORM,
            Norm::Rms => NormType::RMS_NORM,
            Norm::Layer => NormType::LAYER_NORM,
        };
        let layout = if self.nbsd { QKVOutputLayout::NBSd } else { QKVOutputLayout::BSD };
        let call = qkv_tkg::Call::new(&hidden, &w)
            .norm_type(norm_type)
            .eps(self.eps)
            .output_layout(layout)
            .d_head(self.d_head as i64)
            .norm_w((self.norm != Norm::None).then_some(&gamma))
            .fused_add(self.fused_add)
            .attn_prev(self.fused_add.then_some(&attn))
            .mlp_prev(self.fused_add.then_some(&mlp))
            .norm_bias(self.norm_bias.then_some(&beta))
            .qkv_bias(self.qkv_bias.then_some(&bias))
            .hidden_actual(self.hidden_actual.map(|ha| ha as i64));
        let call = match self.quant {
            Quant::None => call,
            Quant::Static { .. } => call
                .quantization_type(QuantizationType::STATIC)
                .qkv_w_scale(&scales[0])
                .qkv_in_scale(&scales[1])
                .num_q_heads(self.nq as i64)
                .num_kv_heads(self.nkv() as i64),
            Quant::Row { .. } => call.quantization_type(QuantizationType::ROW).qkv_w_scale(&scales[0]),
        };
        let out: Outputs =
            call.launch(&Launch::new().lnc(self.lnc).precision(precision)).unwrap_or_else(|e| panic!("{}: {e}", self.name()));
        let want_shape: Vec<usize> = if self.nbsd { vec![i / self.d_head, b, s, self.d_head] } else { vec![b, s, i] };
        assert_eq!(out.0[0].shape(), &want_shape[..], "{}", self.name());
        assert_eq!(out.len(), if self.fused_add { 2 } else { 1 }, "{}", self.name());
        out.0.iter().map(|t| t.to_f32_vec()).collect()
    }

    /// The kernel's arguments for the NumPy executor.
    fn numpy_call(&self, v: &[Vec<f64>], dtype: Dtype) -> (Vec<Arg>, Vec<(&'static str, Arg)>) {
        let (b, s, h, i) = (self.b, self.s, self.h, self.i);
        let t = |shape: Vec<usize>, k: usize| Arg::Tensor(shape, v[k].clone(), dtype);
        let norm = match self.norm {
            Norm::None => "NO_NORM",
            Norm::Rms => "RMS_NORM",
            Norm::Layer => "LAYER_NORM",
        };
        let mut kw = vec![
            ("norm_type", Arg::Member("NormType", norm)),
            ("eps", Arg::Float(self.eps)),
            ("d_head", Arg::Int(self.d_head as i64)),
            ("output_layout", Arg::Member("QKVOutputLayout", if self.nbsd { "NBSd" } else { "BSD" })),
            ("fused_add", Arg::Bool(self.fused_add)),
        ];
        if self.norm != Norm::None {
            kw.push(("norm_w", t(vec![1, h], 4)));
        }
        if self.fused_add {
            kw.push(("attn_prev", t(vec![b, s, h], 1)));
            kw.push(("mlp_prev", t(vec![b, s, h], 2)));
        }
        if self.norm_bias {
            kw.push(("norm_bias", t(vec![1, h], 5)));
        }
        if self.qkv_bias {
            kw.push(("qkv_bias", t(vec![1, i], 6)));
        }
        if let Some(ha) = self.hidden_actual {
            kw.push(("hidden_actual", Arg::Int(ha as i64)));
        }
        let scales = self.scales(v);
        let w_arg = match self.quant {
            Quant::None => t(vec![h, i], 3),
            Quant::Static { .. } | Quant::Row { .. } => Arg::Tensor(vec![h, i], v[3].clone(), Dtype::Fp8E4m3),
        };
        if let Quant::Static { .. } | Quant::Row { .. } = self.quant {
            let kind = if matches!(self.quant, Quant::Static { .. }) { "STATIC" } else { "ROW" };
            kw.push(("quantization_type", Arg::Member("QuantizationType", kind)));
            kw.push(("qkv_w_scale", Arg::Tensor(scales[0].0.clone(), scales[0].1.clone(), Dtype::F32)));
            kw.push(("num_q_heads", Arg::Int(self.nq as i64)));
            kw.push(("num_kv_heads", Arg::Int(self.nkv() as i64)));
        }
        if let Some((shape, x)) = scales.get(1) {
            kw.push(("qkv_in_scale", Arg::Tensor(shape.clone(), x.clone(), Dtype::F32)));
        }
        (vec![t(vec![b, s, h], 0), w_arg], kw)
    }
}

/// A tolerance: `|got - want| <= atol + scaled · max|want| + rtol · |want|`.
#[derive(Clone, Copy)]
struct Tol {
    atol: f64,
    scaled: f64,
    rtol: f64,
}

const FP32: Tol = Tol { atol: FP32_ATOL, scaled: 0.0, rtol: FP32_RTOL };
/// A few bfloat16 steps of the output's scale: the normalised rows and the
/// output are rounded to bfloat16, the products summed in fp32.
const BF16: Tol = Tol { atol: 0.0, scaled: 4.0 * 1.0 / 256.0, rtol: 1.0 / 128.0 };
/// STATIC rounds the input to fp8 (a relative error up to 2^-4 per element,
/// of random sign): 2^-4 of the output's scale.
const BF16_STATIC: Tol = Tol { atol: 0.0, scaled: 1.0 / 16.0, rtol: 1.0 / 128.0 };

/// Runs `cfg` on `v` in `dtype` and `precision` and checks the projection
/// against the float64 reference within `tol`, and the residual sum (one
/// rounding to `dtype` at most).
fn check(cfg: &Config, v: &[Vec<f64>], dtype: Dtype, precision: Precision, tol: Tol) {
    let what = format!("{} {dtype:?} {precision:?}", cfg.name());
    let got = cfg.run(v, dtype, precision);
    let (want, fused) = cfg.reference(v);
    let scale = want.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    assert_close(&what, &got[0], &want, tol.atol + tol.scaled * scale, tol.rtol);
    if cfg.fused_add {
        let rtol = if precision == Precision::Fp32 { FP32_RTOL } else { 1.0 / 256.0 };
        assert_close(&format!("{what} fused hidden"), &got[1], &fused, FP32_ATOL, rtol);
    }
}

/// `cfg`'s inputs with the float ones (not the fp8 weights, index 3, nor the
/// fp32 scales after index 6) rounded to `dtype`.
fn inputs_in(cfg: &Config, dtype: Dtype) -> Vec<Vec<f64>> {
    let quantized = cfg.quant != Quant::None;
    cfg.inputs().iter().enumerate().map(|(k, x)| if (quantized && k == 3) || k > 6 { x.clone() } else { as_dtype(x, dtype) }).collect()
}

/// Every configuration, fp32 inputs in fp32 precision: the fp32 metric on the
/// projection and the residual sum.
#[test]
fn qkv_tkg_library_configs_in_fp32_match_float64() {
    for cfg in LIBRARY_CONFIGS {
        check(cfg, &inputs_in(cfg, Dtype::F32), Dtype::F32, Precision::Fp32, FP32);
    }
}

/// Every configuration, bfloat16 inputs (the library's tests') in hardware
/// precision, against float64 on the rounded inputs.
#[test]
fn qkv_tkg_library_configs_in_bfloat16_match_float64() {
    for cfg in LIBRARY_CONFIGS {
        check(cfg, &inputs_in(cfg, Dtype::Bf16), Dtype::Bf16, Precision::Hardware, BF16);
    }
}

/// The quantized configurations in fp32 precision (where the quantized input
/// is not rounded to fp8): the fp32 metric. ROW multiplies the input itself
/// with the fp8 weights, which takes a 16-bit input: bfloat16 values there.
#[test]
fn qkv_tkg_quantized_in_fp32_match_float64() {
    for cfg in QUANT_CONFIGS {
        let dtype = if matches!(cfg.quant, Quant::Row { .. }) { Dtype::Bf16 } else { Dtype::F32 };
        check(cfg, &inputs_in(cfg, dtype), dtype, Precision::Fp32, FP32);
    }
}

/// The quantized configurations, bfloat16 inputs in hardware precision: ROW
/// keeps the input in bfloat16 (the bfloat16 metric), STATIC rounds it to fp8.
#[test]
fn qkv_tkg_quantized_in_bfloat16_match_float64() {
    for cfg in QUANT_CONFIGS {
        let tol = if matches!(cfg.quant, Quant::Static { .. }) { BF16_STATIC } else { BF16 };
        check(cfg, &inputs_in(cfg, Dtype::Bf16), Dtype::Bf16, Precision::Hardware, tol);
    }
}

/// The emitted `qkv_tkg` under NumPy equals the emulator, element for
/// element, on one configuration per path, in both modes. (A package of
/// `qkv_tkg` and its callees: the crate's package also exports
/// `rmsnorm_quant`'s `NormType` under the same name.)
#[test]
fn qkv_tkg_emitted_under_numpy_equals_emulator() {
    let pkg = package_of("qkv_tkg_pkg", &[&qkv_tkg::INFO]);
    let paths = [
        Config { hidden_actual: Some(2000), norm: Norm::Rms, fused_add: true, qkv_bias: true, ..c(1, 4, 1, 2304, 640) },
        c(2, 2, 1, 3840, 4608),
        Config { d_head: 64, norm: Norm::Layer, fused_add: true, norm_bias: true, qkv_bias: true, nbsd: true, ..c(2, 8, 5, 1024, 640) },
        q(Config { norm: Norm::Rms, qkv_bias: true, ..c(2, 1, 5, 2048, 1280) }, Quant::Static { scale_rows: 128 }, 6),
        q(Config { d_head: 64, qkv_bias: true, nbsd: true, ..c(1, 2, 1, 2048, 640) }, Quant::Static { scale_rows: 1 }, 6),
        q(Config { norm: Norm::Rms, fused_add: true, qkv_bias: true, ..c(2, 1, 3, 2048, 640) }, Quant::Row { scale_rows: 1 }, 3),
    ];
    for (cfg, m) in sweep(paths) {
        let (dtype, precision, mode) = m.run(Dtype::F32, Dtype::Bf16);
        let dtype = if matches!(cfg.quant, Quant::Row { .. }) { Dtype::Bf16 } else { dtype };
        let v = inputs_in(&cfg, dtype);
        let emu = cfg.run(&v, dtype, precision);
        let (args, kwargs) = cfg.numpy_call(&v, dtype);
        let np = run_numpy_kwargs(&pkg, "qkv_tkg", &args, &kwargs, cfg.lnc, mode);
        assert_eq!(np.len(), emu.len(), "{} {mode}", cfg.name());
        for (o, (n, e)) in np.iter().zip(&emu).enumerate() {
            assert_same_elements(&format!("{} {mode} output {o}", cfg.name()), n, e);
        }
    }
}

/// The rules, as `const fn` and when the kernel is traced.
#[test]
fn qkv_tkg_rules_refuse_by_name() {
    let ok = nkilib::qkv_tkg_config!(bxs = 4, hidden = 4096, fused_qkv = 896, programs = 2, d_head = 128, nbsd = true);
    assert_eq!(qkv_tkg_violation(ok), None);
    let cases = [
        (QkvTkgShape { hidden: 1000, ..ok }, QkvTkgRule::HiddenTiles),
        (QkvTkgShape { bxs: 129, ..ok }, QkvTkgRule::Tokens),
        (QkvTkgShape { bxs: 0, ..ok }, QkvTkgRule::Tokens),
        (QkvTkgShape { hidden: 128 * 3, ..ok }, QkvTkgRule::HiddenShards),
        (QkvTkgShape { d_head: 0, ..ok }, QkvTkgRule::HeadDim),
        (QkvTkgShape { d_head: 100, ..ok }, QkvTkgRule::HeadDim),
        (QkvTkgShape { hidden_actual: 5000, ..ok }, QkvTkgRule::HiddenActual),
        (QkvTkgShape { other_mx_quant: true, ..ok }, QkvTkgRule::Quantization),
        (QkvTkgShape { stray_norm_bias: true, ..ok }, QkvTkgRule::NormBias),
    ];
    assert_refused_by(qkv_tkg_violation, cases);
    assert_eq!(nkilib::qkv_tkg_config!(bxs = 128, hidden = 256, fused_qkv = 384, programs = 2).bxs, 128);

    let z = |shape: &[usize]| tensor(shape, &vec![0.0; shape.iter().product()], Dtype::F32);
    let (x, w) = (z(&[1, 2, 384]), z(&[384, 256]));
    let e = qkv_tkg::Call::new(&x, &w).norm_type(NormType::NO_NORM).launch(&Launch::new().lnc(2)).unwrap_err();
    assert!(e.to_string().contains("H / 128 = 3 must split evenly over the 2 LNC programs"), "{e}");
    let e = qkv_tkg::Call::new(&x, &w).launch(&Launch::new()).unwrap_err();
    assert!(e.to_string().contains("norm_w must be given for RMS_NORM and LAYER_NORM"), "{e}");
    let e =
        qkv_tkg::Call::new(&x, &w).norm_type(NormType::NO_NORM).output_layout(QKVOutputLayout::NBSd).launch(&Launch::new()).unwrap_err();
    assert!(e.to_string().contains("d_head must be given and divide I = 256"), "{e}");
    let e = qkv_tkg::Call::new(&z(&[2, 65, 384]), &w).norm_type(NormType::NO_NORM).launch(&Launch::new()).unwrap_err();
    assert!(e.to_string().contains("B * S = 130 must be in 1..=128"), "{e}");
    let e = qkv_tkg::Call::new(&x, &w).norm_type(NormType::NO_NORM).fused_add(true).launch(&Launch::new()).unwrap_err();
    assert!(e.to_string().contains("fused_add needs mlp_prev and attn_prev"), "{e}");
    let e = qkv_tkg::Call::new(&x, &w).norm_type(NormType::NO_NORM).norm_bias(&z(&[1, 384])).launch(&Launch::new()).unwrap_err();
    assert!(e.to_string().contains("norm_bias is only used with norm_type=LAYER_NORM"), "{e}");
}

/// The library's `qkv` entry runs `qkv_tkg` on decode-phase calls (its own
/// defaults: no norm) with the same results (`qkv_cte`'s calls are in `qkv_cte.rs`).
#[test]
fn qkv_entry_dispatches_decode_calls_to_qkv_tkg() {
    let cfg = Config { norm: Norm::Layer, fused_add: true, norm_bias: true, qkv_bias: true, nbsd: true, ..c(2, 2, 3, 1024, 768) };
    let v = cfg.inputs();
    let want = cfg.run(&v, Dtype::F32, Precision::Fp32);
    let (b, s, h, i) = (cfg.b, cfg.s, cfg.h, cfg.i);
    let t = |shape: &[usize], k: usize| tensor(shape, &v[k], Dtype::F32);
    let (x, attn, mlp, w, gamma, beta, bias) =
        (t(&[b, s, h], 0), t(&[b, s, h], 1), t(&[b, s, h], 2), t(&[h, i], 3), t(&[1, h], 4), t(&[1, h], 5), t(&[1, i], 6));
    let launch = Launch::new().lnc(2).precision(Precision::Fp32);
    let got = qkv_entry::Call::new(&x, &w)
        .output_layout(QKVOutputLayout::NBSd)
        .d_head(128)
        .bias(&bias)
        .fused_residual_add(true)
        .mlp_prev(&mlp)
        .attention_prev(&attn)
        .fused_norm_type(NormType::LAYER_NORM)
        .gamma_norm_weights(&gamma)
        .layer_norm_bias(&beta)
        .launch(&launch)
        .unwrap();
    assert_eq!(got.len(), 2);
    for (o, (g, w)) in got.0.iter().zip(&want).enumerate() {
        assert!(&g.to_f32_vec() == w, "qkv output {o} differs from qkv_tkg's");
    }
    // The entry's default is no norm (qkv_tkg's is RMSNorm).
    let plain = qkv_entry::Call::new(&x, &w).launch(&Launch::new().precision(Precision::Fp32)).unwrap();
    let direct = qkv_tkg::Call::new(&x, &w).norm_type(NormType::NO_NORM).launch(&Launch::new().precision(Precision::Fp32)).unwrap();
    assert_eq!(plain.0[0].to_f32_vec(), direct.0[0].to_f32_vec());
}
