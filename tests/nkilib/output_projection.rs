//! The library's `output_projection_tkg` and `output_projection_cte` against
//! float64 projections written from their documented semantics: `out[t, h] =
//! Σ_{n,d} attention · weight[n·D + d, h] (+ bias[h])`, token `t = b·S + s`,
//! with `ROW` quantization multiplying column `h` by its scale and `STATIC`
//! quantizing the activations to `float8_e4m3` (`clip(a / input_scale, ±240)`)
//! and multiplying by both scales; the decode kernel's transposed
//! `[128, LNC, H2, B·S]` layout placed as documented. Over a CI-sized subset
//! of the library's test configurations, in both precision modes; the
//! emitted kernels under NumPy against the emulator; their rules.

use crate::common::attention::run_numpy_kwargs;
use crate::common::sweep::sweep;
use crate::common::{Arg, as_dtype, assert_refused_by, assert_same_elements, emitted_package, seed_of, tensor, uniform};
use crate::support::token_case;
use nki::{Dtype, Launch, Precision, Tensor};
use nkilib::output_projection::output_projection_cte::output_projection_cte::{
    OutputProjectionCteRule, OutputProjectionCteShape, QuantizationType as CteQuantizationType, output_projection_cte,
    output_projection_cte_violation,
};
use nkilib::output_projection::output_projection_tkg::{
    OutputProjectionTkgRule, OutputProjectionTkgShape, QuantizationType, output_projection_tkg, output_projection_tkg_violation,
};

const P: usize = 128;

/// The quantization of a case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Quant {
    None,
    Static,
    Row,
}

impl Quant {
    fn member(self) -> QuantizationType {
        match self {
            Quant::None => QuantizationType::NONE,
            Quant::Static => QuantizationType::STATIC,
            Quant::Row => QuantizationType::ROW,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Quant::None => "NONE",
            Quant::Static => "STATIC",
            Quant::Row => "ROW",
        }
    }
}

/// `STATIC`'s scales: powers of two, so that `a / input_scale` is exact in
/// every dtype and the float64 quantized activations are the kernel's.
const INPUT_SCALE: f64 = 1.0 / 64.0;
const WEIGHT_SCALE: f64 = 1.0 / 128.0;
/// The largest finite `float8_e4m3`.
const FP8_MAX: f64 = 240.0;

/// One decode configuration: `[B, N, S, D, H, quantization, bias,
/// TRANSPOSE_OUT]` as the library's test lists them, and the LNC size.
#[derive(Clone, Copy, Debug)]
struct Tkg {
    lnc: usize,
    b: usize,
    n: usize,
    s: usize,
    d: usize,
    h: usize,
    quant: Quant,
    bias: bool,
    tp: bool,
}

#[allow(clippy::too_many_arguments)]
const fn tkg(lnc: usize, b: usize, n: usize, s: usize, d: usize, h: usize, quant: Quant, bias: bool, tp: bool) -> Tkg {
    Tkg { lnc, b, n, s, d, h, quant, bias, tp }
}

/// A CI-sized subset of `test_output_proj_tkg.py`'s configurations (LNC 2
/// there), covering head packing (`D` 32 and 64), more than 128 and more
/// than 512 tokens, an odd column share (`H = 5378`, `602`), both layouts,
/// both quantizations and bias on and off; plus LNC 1.
const TKG_CONFIGS: &[Tkg] = &[
    tkg(2, 4, 8, 4, 32, 3072, Quant::None, true, true),
    tkg(2, 4, 8, 4, 64, 5378, Quant::None, false, false),
    tkg(2, 4, 2, 4, 64, 7168, Quant::None, false, true),
    tkg(2, 4, 8, 5, 128, 10240, Quant::None, true, true),
    tkg(2, 192, 8, 3, 128, 3072, Quant::None, true, false),
    tkg(2, 4, 10, 8, 128, 602, Quant::None, true, false),
    tkg(2, 16, 8, 1, 128, 8192, Quant::Static, true, true),
    tkg(2, 32, 6, 3, 128, 3072, Quant::Static, false, false),
    tkg(2, 128, 6, 1, 128, 3072, Quant::Static, true, true),
    tkg(2, 16, 8, 1, 128, 3072, Quant::Row, true, false),
    tkg(2, 16, 8, 1, 128, 3072, Quant::Row, false, true),
    tkg(2, 256, 8, 1, 128, 3072, Quant::Row, true, true),
    tkg(1, 4, 8, 4, 64, 3072, Quant::None, true, true),
    tkg(1, 8, 8, 1, 128, 2048, Quant::Static, false, false),
];

/// The inputs of a decode case (values already in their dtypes).
struct TkgInputs {
    attention: Vec<f64>,
    weight: Vec<f64>,
    bias: Vec<f64>,
    /// `ROW`: one scale per column.
    col_scale: Vec<f64>,
}

impl Tkg {
    fn bxs(&self) -> usize {
        self.b * self.s
    }

    fn name(&self) -> String {
        let Tkg { lnc, b, n, s, d, h, quant, bias, tp } = *self;
        format!("lnc{lnc}_b{b}_n{n}_s{s}_d{d}_h{h}_{}_bias{bias}_tp{tp}", quant.name())
    }

    fn weight_dtype(&self, io: Dtype) -> Dtype {
        if self.quant == Quant::None { io } else { Dtype::Fp8E4m3 }
    }

    /// Activations in `[-1, 1]` (`[-5, 5]` for `STATIC`, so that some
    /// quantized values clip at ±240), weights in `[-1, 1]` (fp8 codes in
    /// `[-200, 200]` when quantized), bias in `[-1, 1]`.
    fn inputs(&self, io: Dtype) -> TkgInputs {
        let seed = seed_of(&self.name());
        let (nd, h) = (self.n * self.d, self.h);
        let a_range = if self.quant == Quant::Static { 5.0 } else { 1.0 };
        let w_range = if self.quant == Quant::None { 1.0 } else { 200.0 };
        TkgInputs {
            attention: as_dtype(&uniform(self.d * self.bxs() * self.n, seed, -a_range, a_range), io),
            weight: as_dtype(&uniform(nd * h, seed + 1, -w_range, w_range), self.weight_dtype(io)),
            bias: as_dtype(&uniform(h, seed + 2, -1.0, 1.0), io),
            col_scale: as_dtype(&uniform(h, seed + 3, 0.5 / 240.0, 1.5 / 240.0), Dtype::F32),
        }
    }

    /// Per output element `[B·S, H]`: the float64 value before the bias (the
    /// dequantized sum), the value with it, and `Σ|a·w|·scale` (the scale of
    /// the accumulation's rounding). `fp8_activations`: `STATIC`'s clipped
    /// activations rounded to `float8_e4m3` (hardware precision; in `fp32`
    /// precision every tile keeps fp32 values, as the library's torch
    /// reference does).
    fn reference(&self, x: &TkgInputs, fp8_activations: bool) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
        let (d, b, n, s, h) = (self.d, self.b, self.n, self.s, self.h);
        let bxs = self.bxs();
        // attention [D, B, N, S] as rows [b·S + s] of [N·D] (column n·D + d).
        let mut a = vec![0.0; bxs * n * d];
        for di in 0..d {
            for bi in 0..b {
                for ni in 0..n {
                    for si in 0..s {
                        let v = x.attention[((di * b + bi) * n + ni) * s + si];
                        a[(bi * s + si) * n * d + ni * d + di] = match self.quant {
                            Quant::Static => (v / INPUT_SCALE).clamp(-FP8_MAX, FP8_MAX),
                            _ => v,
                        };
                    }
                }
            }
        }
        if self.quant == Quant::Static && fp8_activations {
            a = as_dtype(&a, Dtype::Fp8E4m3);
        }
        let (mut pre, mut fin, mut mag) = (vec![0.0; bxs * h], vec![0.0; bxs * h], vec![0.0; bxs * h]);
        for t in 0..bxs {
            for k in 0..n * d {
                let av = a[t * n * d + k];
                for c in 0..h {
                    let w = x.weight[k * h + c];
                    pre[t * h + c] += av * w;
                    mag[t * h + c] += (av * w).abs();
                }
            }
            for c in 0..h {
                let scale = match self.quant {
                    Quant::None => 1.0,
                    Quant::Static => INPUT_SCALE * WEIGHT_SCALE,
                    Quant::Row => x.col_scale[c],
                };
                let i = t * h + c;
                pre[i] *= scale;
                mag[i] *= scale;
                fin[i] = pre[i] + if self.bias { x.bias[c] } else { 0.0 };
            }
        }
        (self.place(&pre), self.place(&fin), self.place(&mag))
    }

    /// `[B·S, H]` values in the output's layout: as they are, or with
    /// `TRANSPOSE_OUT` column `h = h0·128·H2 + h1·H2 + h2` of token `t` at
    /// `[h1, h0, h2, t]`.
    fn place(&self, y: &[f64]) -> Vec<f64> {
        if !self.tp {
            return y.to_vec();
        }
        let (bxs, h, lnc) = (self.bxs(), self.h, self.lnc);
        let h2n = h / lnc / P;
        let mut out = vec![0.0; y.len()];
        for t in 0..bxs {
            for c in 0..h {
                let (h0, r) = (c / (P * h2n), c % (P * h2n));
                let (h1, h2) = (r / h2n, r % h2n);
                out[((h1 * lnc + h0) * h2n + h2) * bxs + t] = y[t * h + c];
            }
        }
        out
    }

    fn tensors(&self, x: &TkgInputs, io: Dtype) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor) {
        let (nd, h) = (self.n * self.d, self.h);
        let col_scale: Vec<f64> = (0..P).flat_map(|_| x.col_scale.iter().copied()).collect();
        let weight_scale = if self.quant == Quant::Row {
            tensor(&[P, h], &col_scale, Dtype::F32)
        } else {
            tensor(&[P, 1], &[WEIGHT_SCALE; P], Dtype::F32)
        };
        (
            tensor(&[self.d, self.b, self.n, self.s], &x.attention, io),
            tensor(&[nd, h], &x.weight, self.weight_dtype(io)),
            tensor(&[1, h], &x.bias, io),
            weight_scale,
            tensor(&[P, 1], &[INPUT_SCALE; P], Dtype::F32),
            tensor(&[1], &[0.0], Dtype::F32),
        )
    }

    /// The emulator's output.
    fn run(&self, x: &TkgInputs, io: Dtype, precision: Precision) -> Vec<f32> {
        let (attn, w, bias, ws, is, _) = self.tensors(x, io);
        let mut call = output_projection_tkg::Call::new(&attn, &w).quantization_type(self.quant.member()).TRANSPOSE_OUT(self.tp);
        if self.bias {
            call = call.bias(&bias);
        }
        if self.quant != Quant::None {
            call = call.weight_scale(&ws);
        }
        if self.quant == Quant::Static {
            call = call.input_scale(&is);
        }
        let launch = Launch::new().lnc(self.lnc).precision(precision);
        call.launch(&launch).unwrap_or_else(|e| panic!("{}: {e}", self.name())).to_f32_vec()
    }

    /// The NumPy executor's arguments.
    fn numpy_args(&self, x: &TkgInputs, io: Dtype) -> (Vec<Arg>, Vec<(&'static str, Arg)>) {
        let (nd, h) = (self.n * self.d, self.h);
        let args = vec![
            Arg::Tensor(vec![self.d, self.b, self.n, self.s], x.attention.clone(), io),
            Arg::Tensor(vec![nd, h], x.weight.clone(), self.weight_dtype(io)),
        ];
        let col_scale: Vec<f64> = (0..P).flat_map(|_| x.col_scale.iter().copied()).collect();
        let mut kwargs =
            vec![("quantization_type", Arg::Member("QuantizationType", self.quant.name())), ("TRANSPOSE_OUT", Arg::Bool(self.tp))];
        if self.bias {
            kwargs.push(("bias", Arg::Tensor(vec![1, h], x.bias.clone(), io)));
        }
        match self.quant {
            Quant::None => {}
            Quant::Row => kwargs.push(("weight_scale", Arg::Tensor(vec![P, h], col_scale, Dtype::F32))),
            Quant::Static => {
                kwargs.push(("weight_scale", Arg::Tensor(vec![P, 1], vec![WEIGHT_SCALE; P], Dtype::F32)));
                kwargs.push(("input_scale", Arg::Tensor(vec![P, 1], vec![INPUT_SCALE; P], Dtype::F32)));
            }
        }
        (args, kwargs)
    }
}

/// Asserts every element within `rel · (|pre| + |fin|) + acc · mag`: `rel`
/// covers the roundings of the dequantized value and of the sum with the bias
/// to the output dtype, `acc` the fp32 accumulation.
fn assert_within(what: &str, got: &[f32], (pre, fin, mag): &(Vec<f64>, Vec<f64>, Vec<f64>), rel: f64, acc: f64) {
    assert_eq!(got.len(), fin.len(), "{what}: {} values, reference {}", got.len(), fin.len());
    for i in 0..got.len() {
        let err = (f64::from(got[i]) - fin[i]).abs();
        let bound = rel * (pre[i].abs() + fin[i].abs()) + acc * mag[i] + 1e-30;
        assert!(err <= bound, "{what}: element {i}: {} vs {} (error {err:.3e} > {bound:.3e})", got[i], fin[i]);
    }
}

/// Runs `kernel` of the emitted package under NumPy and asserts its output
/// equals the emulator's, `emu`, element for element.
fn assert_numpy_equals(kernel: &str, name: &str, (args, kwargs): (&[Arg], &[(&str, Arg)]), lnc: usize, mode: &str, emu: &[f32]) {
    let np = &run_numpy_kwargs(emitted_package(), kernel, args, kwargs, lnc, mode)[0];
    assert_same_elements(&format!("{kernel} {name} {mode}:"), np, emu);
}

/// The io dtype of a precision mode's run: fp32 in `fp32` mode (bf16 with
/// fp8 weights, as a matmul takes two fp32 operands or none), bf16 in hardware mode.
fn io_dtype(cfg: &Tkg, precision: Precision) -> Dtype {
    if precision == Precision::Fp32 && cfg.quant != Quant::Row { Dtype::F32 } else { Dtype::Bf16 }
}

/// Every configuration in `fp32` precision: within fp32 rounding of the
/// float64 projection.
#[test]
fn tkg_configs_in_fp32_match_float64() {
    for cfg in TKG_CONFIGS {
        let io = io_dtype(cfg, Precision::Fp32);
        let x = cfg.inputs(io);
        let got = cfg.run(&x, io, Precision::Fp32);
        let rel = if io == Dtype::F32 { 2f64.powi(-23) } else { 2f64.powi(-8) };
        assert_within(&format!("{} fp32", cfg.name()), &got, &cfg.reference(&x, false), rel, 1e-6);
    }
}

/// Every configuration with bfloat16 inputs in hardware precision: within the
/// bfloat16 roundings of the dequantized value and of the biased sum.
#[test]
fn tkg_configs_in_bfloat16_match_float64() {
    for cfg in TKG_CONFIGS {
        let x = cfg.inputs(Dtype::Bf16);
        let got = cfg.run(&x, Dtype::Bf16, Precision::Hardware);
        assert_within(&format!("{} bfloat16", cfg.name()), &got, &cfg.reference(&x, true), 2f64.powi(-8), 1e-6);
    }
}

/// The emitted kernel under NumPy equals the emulator: the packed transposed
/// layout, row tiles with an odd column share, `STATIC` and `ROW` in both
/// layouts, in both modes.
#[test]
fn tkg_emitted_under_numpy_equals_emulator() {
    let paths = [
        tkg(2, 4, 8, 4, 32, 1024, Quant::None, true, true),
        tkg(2, 144, 4, 1, 64, 1040, Quant::None, false, false),
        tkg(2, 16, 6, 1, 128, 1024, Quant::Static, true, true),
        tkg(1, 8, 4, 1, 128, 768, Quant::Static, false, false),
        tkg(2, 16, 4, 1, 128, 1024, Quant::Row, true, false),
        tkg(2, 600, 2, 1, 128, 512, Quant::Row, false, true),
    ];
    for (cfg, m) in sweep(paths) {
        let (precision, mode) = (m.precision(), m.name());
        let io = io_dtype(&cfg, precision);
        let x = cfg.inputs(io);
        let emu = cfg.run(&x, io, precision);
        let (args, kwargs) = cfg.numpy_args(&x, io);
        assert_numpy_equals("output_projection_tkg", &cfg.name(), (&args, &kwargs), cfg.lnc, mode, &emu);
    }
}

/// The rules, as `const fn` and when the kernel is traced.
#[test]
fn tkg_rules_refuse_by_name() {
    let ok = OutputProjectionTkgShape { d: 128, b: 4, n: 8, s: 4, h: 8192, programs: 2, transpose_out: true, fp32_weight: false };
    assert_eq!(output_projection_tkg_violation(ok), None);
    let cases = [
        (OutputProjectionTkgShape { s: 0, ..ok }, OutputProjectionTkgRule::Positive),
        (OutputProjectionTkgShape { d: 129, ..ok }, OutputProjectionTkgRule::HeadDim),
        (OutputProjectionTkgShape { h: 8191, transpose_out: false, ..ok }, OutputProjectionTkgRule::HiddenShards),
        (OutputProjectionTkgShape { h: 8192 + 128, ..ok }, OutputProjectionTkgRule::TransposedHidden),
        (OutputProjectionTkgShape { n: 21, ..ok }, OutputProjectionTkgRule::TransposedSize),
        (OutputProjectionTkgShape { n: 11, fp32_weight: true, ..ok }, OutputProjectionTkgRule::TransposedSize),
    ];
    assert_refused_by(output_projection_tkg_violation, cases);
    assert_eq!(output_projection_tkg_violation(OutputProjectionTkgShape { h: 8192 + 128, transpose_out: false, ..ok }), None);

    let cfg = tkg(2, 2, 2, 1, 64, 384, Quant::None, false, false);
    let x = cfg.inputs(Dtype::F32);
    let (attn, w, bias, ws, _, _) = cfg.tensors(&x, Dtype::F32);
    let launch = Launch::new().lnc(2);
    let refused = |call: output_projection_tkg::Call<'_>| call.launch(&launch).unwrap_err().to_string();
    let e = refused(output_projection_tkg::Call::new(&attn, &w).TRANSPOSE_OUT(true).bias(&bias));
    assert!(e.contains("with TRANSPOSE_OUT, H must be a multiple of 128 * LNC, got H = 384, LNC = 2"), "{e}");
    let e = refused(output_projection_tkg::Call::new(&attn, &w).OUT_IN_SB(true));
    assert!(e.contains("OUT_IN_SB=True"), "{e}");
    let e = refused(output_projection_tkg::Call::new(&attn, &w).quantization_type(QuantizationType::MX));
    assert!(e.contains("quantization_type must be QuantizationType.NONE, STATIC or ROW, got QuantizationType.MX"), "{e}");
    let e = refused(output_projection_tkg::Call::new(&attn, &w).quantization_type(QuantizationType::ROW).weight_scale(&ws));
    assert!(e.contains("STATIC and ROW quantization take float8_e4m3 weights"), "{e}");
    let short_bias = tensor(&[1, 128], &[0.0; 128], Dtype::F32);
    let e = refused(output_projection_tkg::Call::new(&attn, &w).bias(&short_bias));
    assert!(e.contains("bias must be [1, H] = [1, 384]"), "{e}");
}

token_case! {
    /// One prefill configuration: `(B, S, H, N, D, bias)` as the library's test
    /// lists them, the LNC size and the quantization.
    struct Cte {
        n: usize,
        d: usize,
        bias: bool,
        quant: Quant,
    }
}

#[allow(clippy::too_many_arguments)]
const fn cte(lnc: usize, b: usize, s: usize, h: usize, n: usize, d: usize, bias: bool, quant: Quant) -> Cte {
    Cte { lnc, b, s, h, n, d, bias, quant }
}

/// A CI-sized subset of `test_output_proj_cte.py`'s configurations (LNC 2
/// there), covering head packing (`D` 10, 32, 64; 17 heads that cannot
/// pack), several sequence tiles, a ragged last tile over two batches, the
/// weights split into blocks (`H = 20480` with 16 heads of 128 on one
/// program) and `STATIC` quantization.
const CTE_CONFIGS: &[Cte] = &[
    cte(2, 1, 16, 5120, 10, 128, true, Quant::None),
    cte(2, 1, 128, 3072, 16, 10, true, Quant::None),
    cte(2, 1, 128, 3072, 17, 10, true, Quant::None),
    cte(2, 1, 128, 3072, 8, 32, true, Quant::None),
    cte(2, 1, 512, 8192, 2, 128, false, Quant::None),
    cte(2, 2, 600, 1024, 4, 64, true, Quant::None),
    cte(1, 1, 16, 20480, 16, 128, true, Quant::None),
    cte(2, 1, 256, 2048, 4, 128, true, Quant::Static),
    cte(1, 2, 640, 1024, 3, 64, false, Quant::Static),
];

impl Cte {
    fn name(&self) -> String {
        let Cte { lnc, b, s, h, n, d, bias, quant } = *self;
        format!("lnc{lnc}_b{b}_s{s}_h{h}_n{n}_d{d}_bias{bias}_{}", quant.name())
    }

    fn weight_dtype(&self, io: Dtype) -> Dtype {
        if self.quant == Quant::Static { Dtype::Fp8E4m3 } else { io }
    }

    /// Activations in `[-1, 1]` (`[-5, 5]` for `STATIC`), weights in `[-1,
    /// 1]` (fp8 codes in `[-200, 200]`), bias in `[-1, 1]`.
    fn inputs(&self, io: Dtype) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
        let seed = seed_of(&self.name());
        let (a_range, w_range) = if self.quant == Quant::Static { (5.0, 200.0) } else { (1.0, 1.0) };
        (
            as_dtype(&uniform(self.b * self.n * self.d * self.s, seed, -a_range, a_range), io),
            as_dtype(&uniform(self.n * self.d * self.h, seed + 1, -w_range, w_range), self.weight_dtype(io)),
            as_dtype(&uniform(self.h, seed + 2, -1.0, 1.0), io),
        )
    }

    /// `[B, S, H]`: the dequantized sum before the bias, with it, and
    /// `Σ|a·w|·scale`; `fp8_activations` as for the decode kernel.
    fn reference(&self, a: &[f64], w: &[f64], bias: &[f64], fp8_activations: bool) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
        let (b, s, h, nd) = (self.b, self.s, self.h, self.n * self.d);
        let len = b * s * h;
        let (mut pre, mut fin, mut mag) = (vec![0.0; len], vec![0.0; len], vec![0.0; len]);
        let scale = if self.quant == Quant::Static { INPUT_SCALE * WEIGHT_SCALE } else { 1.0 };
        for bi in 0..b {
            for si in 0..s {
                // attention [B, N, D, S]: row n·D + d of batch bi at position si.
                let mut row: Vec<f64> = (0..nd).map(|k| a[(bi * nd + k) * s + si]).collect();
                if self.quant == Quant::Static {
                    row.iter_mut().for_each(|v| *v = (*v / INPUT_SCALE).clamp(-FP8_MAX, FP8_MAX));
                    if fp8_activations {
                        row = as_dtype(&row, Dtype::Fp8E4m3);
                    }
                }
                let o = (bi * s + si) * h;
                for (k, av) in row.iter().enumerate() {
                    for c in 0..h {
                        pre[o + c] += av * w[k * h + c];
                        mag[o + c] += (av * w[k * h + c]).abs();
                    }
                }
                for c in 0..h {
                    pre[o + c] *= scale;
                    mag[o + c] *= scale;
                    fin[o + c] = pre[o + c] + if self.bias { bias[c] } else { 0.0 };
                }
            }
        }
        (pre, fin, mag)
    }

    fn run(&self, (a, w, bias): &(Vec<f64>, Vec<f64>, Vec<f64>), io: Dtype, precision: Precision, output_dtype: Option<Dtype>) -> Tensor {
        let at = tensor(&[self.b, self.n, self.d, self.s], a, io);
        let wt = tensor(&[self.n * self.d, self.h], w, self.weight_dtype(io));
        let bt = tensor(&[1, self.h], bias, io);
        let (ist, wst) = (tensor(&[P, 1], &[INPUT_SCALE; P], Dtype::F32), tensor(&[P, 1], &[WEIGHT_SCALE; P], Dtype::F32));
        let mut call = output_projection_cte::Call::new(&at, &wt).quantization_type(self.quant.member_cte());
        if self.bias {
            call = call.bias(&bt);
        }
        if self.quant == Quant::Static {
            call = call.input_scales(&ist).weight_scales(&wst);
        }
        if let Some(dt) = output_dtype {
            call = call.output_dtype(dt);
        }
        call.launch(&Launch::new().lnc(self.lnc).precision(precision)).unwrap_or_else(|e| panic!("{}: {e}", self.name()))
    }

    fn numpy_args(&self, (a, w, bias): &(Vec<f64>, Vec<f64>, Vec<f64>), io: Dtype) -> (Vec<Arg>, Vec<(&'static str, Arg)>) {
        let args = vec![
            Arg::Tensor(vec![self.b, self.n, self.d, self.s], a.clone(), io),
            Arg::Tensor(vec![self.n * self.d, self.h], w.clone(), self.weight_dtype(io)),
        ];
        let mut kwargs = vec![("quantization_type", Arg::Member("QuantizationType", self.quant.name()))];
        if self.bias {
            kwargs.push(("bias", Arg::Tensor(vec![1, self.h], bias.clone(), io)));
        }
        if self.quant == Quant::Static {
            kwargs.push(("input_scales", Arg::Tensor(vec![P, 1], vec![INPUT_SCALE; P], Dtype::F32)));
            kwargs.push(("weight_scales", Arg::Tensor(vec![P, 1], vec![WEIGHT_SCALE; P], Dtype::F32)));
        }
        (args, kwargs)
    }
}

impl Quant {
    fn member_cte(self) -> CteQuantizationType {
        match self {
            Quant::None => CteQuantizationType::NONE,
            Quant::Static => CteQuantizationType::STATIC,
            Quant::Row => CteQuantizationType::ROW,
        }
    }
}

/// Every prefill configuration in `fp32` precision (fp32 inputs, fp32 values
/// on chip): within fp32 rounding of the float64 projection.
#[test]
fn cte_configs_in_fp32_match_float64() {
    for cfg in CTE_CONFIGS {
        let x = cfg.inputs(Dtype::F32);
        let got = cfg.run(&x, Dtype::F32, Precision::Fp32, None).to_f32_vec();
        assert_within(&format!("{} fp32", cfg.name()), &got, &cfg.reference(&x.0, &x.1, &x.2, false), 2f64.powi(-23), 1e-6);
    }
}

/// Every prefill configuration with bfloat16 inputs in hardware precision.
#[test]
fn cte_configs_in_bfloat16_match_float64() {
    for cfg in CTE_CONFIGS {
        let x = cfg.inputs(Dtype::Bf16);
        let got = cfg.run(&x, Dtype::Bf16, Precision::Hardware, None).to_f32_vec();
        assert_within(&format!("{} bfloat16", cfg.name()), &got, &cfg.reference(&x.0, &x.1, &x.2, true), 2f64.powi(-8), 1e-6);
    }
}

/// `output_dtype` sets the output's dtype; the values are the results
/// rounded to `attention`'s dtype (bfloat16 here), then widened.
#[test]
fn cte_output_dtype() {
    let cfg = cte(2, 1, 130, 1024, 4, 64, true, Quant::None);
    let x = cfg.inputs(Dtype::Bf16);
    let out = cfg.run(&x, Dtype::Bf16, Precision::Hardware, Some(Dtype::F32));
    assert_eq!((out.shape(), out.dtype()), (&[1, 130, 1024][..], Dtype::F32));
    let got = out.to_f32_vec();
    assert!(got.iter().all(|v| f64::from(*v) == as_dtype(&[f64::from(*v)], Dtype::Bf16)[0]), "values are bfloat16 results");
    assert_within("output_dtype float32", &got, &cfg.reference(&x.0, &x.1, &x.2, true), 2f64.powi(-8), 1e-6);
}

/// The emitted kernel under NumPy equals the emulator: packed heads with a
/// ragged sequence tile over two batches, 17 unpacked heads, weight blocks,
/// `STATIC`, in both modes.
#[test]
fn cte_emitted_under_numpy_equals_emulator() {
    let paths = [
        cte(2, 2, 600, 1024, 4, 64, true, Quant::None),
        cte(2, 1, 64, 1024, 17, 10, false, Quant::None),
        cte(1, 1, 8, 20480, 16, 128, true, Quant::None),
        cte(2, 1, 200, 1024, 3, 64, true, Quant::Static),
    ];
    for (cfg, m) in sweep(paths) {
        let (precision, mode) = (m.precision(), m.name());
        let io = if precision == Precision::Fp32 { Dtype::F32 } else { Dtype::Bf16 };
        let x = cfg.inputs(io);
        let emu = cfg.run(&x, io, precision, None).to_f32_vec();
        let (args, kwargs) = cfg.numpy_args(&x, io);
        assert_numpy_equals("output_projection_cte", &cfg.name(), (&args, &kwargs), cfg.lnc, mode, &emu);
    }
}

/// The rules, as `const fn` and when the kernel is traced.
#[test]
fn cte_rules_refuse_by_name() {
    let ok = OutputProjectionCteShape {
        b: 1,
        n: 16,
        d: 64,
        s: 2048,
        h: 3072,
        programs: 2,
        mx_quant: false,
        prequantized: false,
        generation: nki::hw::Generation::Trn2,
    };
    assert_eq!(output_projection_cte_violation(ok), None);
    let cases = [
        (OutputProjectionCteShape { b: 0, ..ok }, OutputProjectionCteRule::Positive),
        (OutputProjectionCteShape { b: 2, s: 65537, ..ok }, OutputProjectionCteRule::Tokens),
        (OutputProjectionCteShape { d: 256, ..ok }, OutputProjectionCteRule::HeadDim),
        (OutputProjectionCteShape { h: 20706, programs: 1, ..ok }, OutputProjectionCteRule::Hidden),
        (OutputProjectionCteShape { n: 18, ..ok }, OutputProjectionCteRule::Heads),
        (OutputProjectionCteShape { h: 3071, ..ok }, OutputProjectionCteRule::HiddenShards),
    ];
    assert_refused_by(output_projection_cte_violation, cases);
    let cfg = cte(2, 1, 8, 256, 2, 64, false, Quant::None);
    let (a, w, _) = cfg.inputs(Dtype::F32);
    let (at, wt) = (tensor(&[1, 2, 64, 8], &a, Dtype::F32), tensor(&[128, 256], &w, Dtype::F32));
    let launch = Launch::new().lnc(2);
    let e = output_projection_cte::Call::new(&at, &wt).quantization_type(CteQuantizationType::ROW).launch(&launch).unwrap_err().to_string();
    assert!(
        e.contains(
            "quantization_type must be QuantizationType.NONE, STATIC, MX or STATIC_MX (the members implemented), got QuantizationType.ROW"
        ),
        "{e}"
    );
    let e =
        output_projection_cte::Call::new(&at, &wt).quantization_type(CteQuantizationType::STATIC).launch(&launch).unwrap_err().to_string();
    assert!(e.contains("STATIC quantization takes float8_e4m3 weights"), "{e}");
    let odd = tensor(&[128, 255], &w[..128 * 255], Dtype::F32);
    let e = output_projection_cte::Call::new(&at, &odd).launch(&launch).unwrap_err().to_string();
    assert!(e.contains("H must be a multiple of the LNC size, got H = 255, LNC = 2"), "{e}");
}
