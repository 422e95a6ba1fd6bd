//! `qkv_tkg` with MX quantization (trn3) against a float64 projection written
//! from the MX format's description: packed row `r` of the `[H/4, I]`
//! `float8_e4m3fn_x4` weights holds hidden rows `4r..4r+3` (byte `k` row
//! `4r + k`), each `float8_e4m3fn` code (sign, 4 exponent bits of bias 7, 3
//! mantissa bits) times `2^(s - 127)` for the `uint8` scale `s` of its 32
//! hidden rows; the input is pre-shuffled from `[H/512, 128, 4]` to `[4,
//! H/512, 128]` and quantized per 32 consecutive hidden values of a token
//! with the scale `2^(floor(log2 amax) - 7)` and elements rounded to nearest
//! even in e4m3. At the library's MX test sizes, in both precision modes; the
//! emitted source under NumPy against the emulator; the MX rules.

use crate::common::{
    Arg, CaseName, FP32_ATOL, as_dtype, assert_close, assert_numpy_equals_emulator, assert_refused_by, package_of, rms_norm, seed_of,
    tensor, uniform,
};
use crate::mx_format::{e4m3fn, pack_x4_rows, quantize_e4m3fn_groups, swizzle_4h};
use nki::{Dtype, Launch, Precision, Tensor};
use nkilib::qkv::qkv::{QKVWeightLayout, qkv as qkv_entry};
use nkilib::qkv::qkv_tkg::{NormType, QkvTkgRule, QkvTkgShape, QuantizationType, qkv_tkg, qkv_tkg_violation};

/// One MX configuration of the library's `test_qkv_tkg.py` (`S = 1`).
#[derive(Clone, Copy, Debug)]
struct Mx {
    lnc: usize,
    b: usize,
    h: usize,
    i: usize,
    rms: bool,
    bias: bool,
}

const fn mx(lnc: usize, b: usize, h: usize, i: usize, rms: bool, bias: bool) -> Mx {
    Mx { lnc, b, h, i, rms, bias }
}

/// The library's MX configurations: one packed tile (not split over the
/// programs), several, several I tiles, both norms, bias; and its H = 16384
/// one on one program, whose 4096 packed weight rows take several weight
/// loads (where the library's kernel reads the wrong rows).
const MX_CONFIGS: &[Mx] = &[
    mx(1, 8, 16384, 512, false, true),
    mx(2, 12, 512, 512, false, false),
    mx(2, 12, 1024, 512, true, false),
    mx(2, 8, 2048, 512, false, false),
    mx(2, 8, 4096, 512, true, false),
    mx(2, 4, 1024, 1536, false, true),
    mx(2, 4, 1024, 2304, true, true),
];

const EPS: f64 = 1e-6;

/// A case's data: the token rows in H's original order, gamma, the weight
/// codes `[H][I]`, the biased scale exponents `[H/32][I]`, the bias.
struct Data {
    x: Vec<f64>,
    gamma: Vec<f64>,
    codes: Vec<u32>,
    scales: Vec<f64>,
    bias: Vec<f64>,
}

impl Mx {
    /// bfloat16 inputs; codes without NaN; scales `2^-9 .. 2^-6`.
    fn data(&self) -> Data {
        let seed = seed_of(&self.name());
        let (n, h, i) = (self.b * self.h, self.h, self.i);
        let codes = uniform(h * i, seed + 3, 0.0, 254.0).iter().map(|v| *v as u32).map(|c| if c >= 0x7f { c + 1 } else { c }).collect();
        Data {
            x: as_dtype(&uniform(n, seed, -1.0, 1.0), Dtype::Bf16),
            gamma: as_dtype(&uniform(h, seed + 1, 0.5, 1.5), Dtype::Bf16),
            codes,
            scales: uniform(h / 32 * i, seed + 4, 118.0, 122.0).iter().map(|v| v.floor()).collect(),
            bias: as_dtype(&uniform(i, seed + 5, -1.0, 1.0), Dtype::Bf16),
        }
    }

    /// `v` `[rows][H]` in the pre-shuffled order.
    fn shuffled(&self, v: &[f64]) -> Vec<f64> {
        swizzle_4h(v, self.h)
    }

    /// The packed weight words `[H/4][I]`.
    fn packed(&self, d: &Data) -> Vec<i64> {
        pack_x4_rows(&d.codes, self.h, self.i)
    }

    /// The float64 projection `[B, I]`; the normalised rows rounded to
    /// bfloat16 (as the kernel stores them) when `round_rows`.
    fn reference(&self, d: &Data, round_rows: bool) -> Vec<f64> {
        let (h, i) = (self.h, self.i);
        let w = |row: usize, col: usize| e4m3fn(d.codes[row * i + col]) * 2f64.powf(d.scales[row / 32 * i + col] - 127.0);
        let mut out = vec![0.0; self.b * i];
        for t in 0..self.b {
            let row = &d.x[t * h..(t + 1) * h];
            let mut y: Vec<f64> = if self.rms { rms_norm(row, Some(&d.gamma), h, EPS) } else { row.to_vec() };
            if round_rows {
                y = as_dtype(&y, Dtype::Bf16);
            }
            quantize_e4m3fn_groups(&mut y);
            for col in 0..i {
                let dot: f64 = (0..h).map(|k| y[k] * w(k, col)).sum();
                out[t * i + col] = dot + if self.bias { d.bias[col] } else { 0.0 };
            }
        }
        out
    }

    /// The emulator's inputs: the pre-shuffled token rows `[B, 1, H]`, the
    /// packed weights, their scales, the pre-shuffled gamma, the bias.
    fn tensors(&self, d: &Data) -> [Tensor; 5] {
        let (b, h, i) = (self.b, self.h, self.i);
        [
            tensor(&[b, 1, h], &self.shuffled(&d.x), Dtype::Bf16),
            Tensor::from_i64(&[h / 4, i], &self.packed(d), Dtype::Fp8E4m3Fnx4).unwrap(),
            tensor(&[h / 32, i], &d.scales, Dtype::U8),
            tensor(&[1, h], &self.shuffled(&d.gamma), Dtype::Bf16),
            tensor(&[1, i], &d.bias, Dtype::Bf16),
        ]
    }

    /// The emulator's projection.
    fn run(&self, d: &Data, precision: Precision) -> Vec<f32> {
        let (b, i) = (self.b, self.i);
        let [hidden, w, scales, gamma, bias] = self.tensors(d);
        let mut call = qkv_tkg::Call::new(&hidden, &w)
            .quantization_type(QuantizationType::MX)
            .is_h_dim_4h_transposed(true)
            .qkv_w_scale(&scales)
            .eps(EPS)
            .norm_type(if self.rms { NormType::RMS_NORM } else { NormType::NO_NORM });
        if self.rms {
            call = call.norm_w(&gamma);
        }
        if self.bias {
            call = call.qkv_bias(&bias);
        }
        let launch = Launch::new().lnc(self.lnc).precision(precision).generation(nki::hw::Generation::Trn3);
        let out = call.launch(&launch).unwrap_or_else(|e| panic!("{}: {e}", self.name()));
        assert_eq!(out.0[0].shape(), &[b, 1, i], "{}", self.name());
        out.0[0].to_f32_vec()
    }

    /// The kernel's arguments for the NumPy executor.
    fn numpy_call(&self, d: &Data) -> (Vec<Arg>, Vec<(&'static str, Arg)>) {
        let (b, h, i) = (self.b, self.h, self.i);
        let words = self.packed(d).iter().map(|&w| w as f64).collect();
        let mut kw = vec![
            ("quantization_type", Arg::Member("QuantizationType", "MX")),
            ("is_h_dim_4h_transposed", Arg::Bool(true)),
            ("qkv_w_scale", Arg::Tensor(vec![h / 32, i], d.scales.clone(), Dtype::U8)),
            ("eps", Arg::Float(EPS)),
            ("norm_type", Arg::Member("NormType", if self.rms { "RMS_NORM" } else { "NO_NORM" })),
        ];
        if self.rms {
            kw.push(("norm_w", Arg::Tensor(vec![1, h], self.shuffled(&d.gamma), Dtype::Bf16)));
        }
        if self.bias {
            kw.push(("qkv_bias", Arg::Tensor(vec![1, i], d.bias.clone(), Dtype::Bf16)));
        }
        let args =
            vec![Arg::Tensor(vec![b, 1, h], self.shuffled(&d.x), Dtype::Bf16), Arg::Tensor(vec![h / 4, i], words, Dtype::Fp8E4m3Fnx4)];
        (args, kw)
    }
}

/// Checks `cfg` in `precision` against the float64 reference: within `rel`
/// of the output's scale, plus a bfloat16 step of each output in hardware
/// precision (the output is stored in bfloat16).
fn check(cfg: &Mx, precision: Precision, rel: f64) {
    let d = cfg.data();
    let got = cfg.run(&d, precision);
    let hw = precision == Precision::Hardware;
    let want = cfg.reference(&d, hw);
    let scale = want.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let rtol = if hw { 1.0 / 128.0 } else { 0.0 };
    assert_close(&format!("{} {precision:?}", cfg.name()), &got, &want, FP32_ATOL + rel * scale, rtol);
}

/// fp32 precision: NO_NORM quantizes the same values as the reference (only
/// the fp32 summation differs); RMSNorm's fp32 rows may round to a
/// neighbouring e4m3 code where the float64 rows sit near a midpoint.
#[test]
fn qkv_tkg_mx_in_fp32_match_float64() {
    for cfg in MX_CONFIGS {
        check(cfg, Precision::Fp32, if cfg.rms { 1.0 / 64.0 } else { 1e-5 });
    }
}

/// Hardware precision: the normalised rows in bfloat16 (as the reference
/// rounds them), the output in bfloat16.
#[test]
fn qkv_tkg_mx_in_hardware_precision_match_float64() {
    for cfg in MX_CONFIGS {
        check(cfg, Precision::Hardware, if cfg.rms { 1.0 / 64.0 } else { 1.0 / 256.0 });
    }
}

/// The emitted `qkv_tkg` MX path under NumPy equals the emulator, element for
/// element, in both modes.
#[test]
fn qkv_tkg_mx_emitted_under_numpy_equals_emulator() {
    let pkg = package_of("qkv_tkg_mx_pkg", &[&qkv_tkg::INFO]);
    for cfg in [mx(2, 4, 1024, 1536, false, true), mx(1, 8, 2048, 512, true, false)] {
        let d = cfg.data();
        assert_numpy_equals_emulator(&pkg, ("qkv_tkg", &cfg.name()), cfg.numpy_call(&d), cfg.lnc, "trn3", |p| cfg.run(&d, p));
    }
}

/// The library's `qkv` entry (which its MX tests call) hands decode-phase
/// MX calls, with the packed weights and `uint8` scales, to `qkv_tkg`: the
/// same projection, and under NumPy the same as the emulator; a
/// context-encoding MX call goes to `qkv_cte` (refusing this one by its rule).
#[test]
fn qkv_entry_runs_mx_decode_calls_by_qkv_tkg() {
    let cfg = mx(2, 8, 2048, 512, true, true);
    let d = cfg.data();
    let [hidden, w, scales, gamma, bias] = cfg.tensors(&d);
    let entry = |hidden: &Tensor, p: Precision| {
        qkv_entry::Call::new(hidden, &w)
            .quantization_type(QuantizationType::MX)
            .is_h_dim_4h_transposed(true)
            .weight_layout(QKVWeightLayout::MX_CONTIGUOUS)
            .qkv_w_scale(&scales)
            .norm_eps(EPS)
            .fused_norm_type(NormType::RMS_NORM)
            .gamma_norm_weights(&gamma)
            .bias(&bias)
            .launch(&Launch::new().lnc(cfg.lnc).precision(p).generation(nki::hw::Generation::Trn3))
    };
    for p in [Precision::Fp32, Precision::Hardware] {
        assert_eq!(entry(&hidden, p).unwrap().0[0].to_f32_vec(), cfg.run(&d, p), "{p:?}");
    }

    let pkg = package_of("qkv_mx_entry_pkg", &[&qkv_entry::INFO]);
    let (args, kw) = cfg.numpy_call(&d);
    let renamed = [("eps", "norm_eps"), ("norm_type", "fused_norm_type"), ("norm_w", "gamma_norm_weights"), ("qkv_bias", "bias")];
    let mut kw: Vec<(&'static str, Arg)> = kw.into_iter().map(|(k, v)| (renamed.iter().find(|r| r.0 == k).map_or(k, |r| r.1), v)).collect();
    kw.push(("weight_layout", Arg::Member("QKVWeightLayout", "MX_CONTIGUOUS")));
    assert_numpy_equals_emulator(&pkg, ("qkv", &cfg.name()), (args, kw), cfg.lnc, "trn3", |p| entry(&hidden, p).unwrap().0[0].to_f32_vec());

    let prompt = tensor(&[1, 128, 2048], &vec![0.5; 128 * 2048], Dtype::Bf16);
    let e = entry(&prompt, Precision::Fp32).unwrap_err();
    // A context-encoding call goes to qkv_cte, whose MX form takes the pre-swizzled input without a norm.
    assert!(e.to_string().contains("qkv_cte: is_input_swizzled supports neither a norm nor fused_residual_add"), "{e}");
}

/// The MX rules, as `const fn` and when the kernel is traced.
#[test]
fn qkv_tkg_mx_rules_refuse_by_name() {
    let ok = QkvTkgShape {
        bxs: 4,
        hidden: 1024,
        fused_qkv: 512,
        d_head: 0,
        hidden_actual: 0,
        nbsd: false,
        mx_quant: true,
        other_mx_quant: false,
        stray_norm_bias: false,
        programs: 2,
    };
    assert_eq!(qkv_tkg_violation(ok), None);
    // One packed tile is not split over the programs.
    assert_eq!(qkv_tkg_violation(QkvTkgShape { hidden: 512, ..ok }), None);
    let cases = [
        (QkvTkgShape { hidden: 640, ..ok }, QkvTkgRule::MxHidden),
        (QkvTkgShape { bxs: 6, ..ok }, QkvTkgRule::MxTokens),
        (QkvTkgShape { nbsd: true, d_head: 128, ..ok }, QkvTkgRule::MxLayout),
        (QkvTkgShape { hidden: 1536, ..ok }, QkvTkgRule::MxShards),
        (QkvTkgShape { other_mx_quant: true, mx_quant: false, ..ok }, QkvTkgRule::Quantization),
    ];
    assert_refused_by(qkv_tkg_violation, cases);
    assert_eq!(nkilib::qkv_tkg_config!(bxs = 8, hidden = 2048, fused_qkv = 512, programs = 2, mx_quant = true).hidden, 2048);

    let cfg = mx(1, 4, 512, 512, false, false);
    let d = cfg.data();
    let hidden = tensor(&[4, 1, 512], &d.x, Dtype::Bf16);
    let w = Tensor::from_i64(&[128, 512], &cfg.packed(&d), Dtype::Fp8E4m3Fnx4).unwrap();
    let scales = tensor(&[16, 512], &d.scales, Dtype::U8);
    let call = || {
        qkv_tkg::Call::new(&hidden, &w)
            .quantization_type(QuantizationType::MX)
            .is_h_dim_4h_transposed(true)
            .qkv_w_scale(&scales)
            .norm_type(NormType::NO_NORM)
    };
    let trn3 = Launch::new().generation(nki::hw::Generation::Trn3);
    let e = call().launch(&Launch::new()).unwrap_err();
    assert!(e.to_string().contains("quantization_type MX needs trn3"), "{e}");
    let e = call().is_h_dim_4h_transposed(false).launch(&trn3).unwrap_err();
    assert!(e.to_string().contains("is_h_dim_4h_transposed must be true for MX quantization"), "{e}");
    let e = call().fused_add(true).attn_prev(&hidden).mlp_prev(&hidden).launch(&trn3).unwrap_err();
    assert!(e.to_string().contains("fused_add is not supported with MX quantization"), "{e}");
    let e = call().quantization_type(QuantizationType::ROW_MX).launch(&trn3).unwrap_err();
    assert!(e.to_string().contains("quantization_type must be NONE, STATIC, ROW or MX"), "{e}");
    let e = qkv_tkg::Call::new(&tensor(&[6, 1, 512], &vec![0.0; 6 * 512], Dtype::Bf16), &w)
        .quantization_type(QuantizationType::MX)
        .is_h_dim_4h_transposed(true)
        .qkv_w_scale(&scales)
        .norm_type(NormType::NO_NORM)
        .launch(&trn3)
        .unwrap_err();
    assert!(e.to_string().contains("B * S = 6 must be a multiple of 4 for MX quantization"), "{e}");
}
