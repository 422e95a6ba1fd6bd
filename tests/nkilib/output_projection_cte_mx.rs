//! `output_projection_cte` with MX quantization (trn3) against a float64
//! projection written from the MX format's description. The contraction runs
//! over `K = N·D` rows, row `n·D + d`; packed row `r` of the `[K/4, H]`
//! `float4_e2m1fn_x4` weights holds rows `4r..4r+3` (nibble `k` row `4r +
//! k`), each code (sign, 2 exponent bits of bias 1, 1 mantissa bit: `0, 0.5,
//! 1, 1.5, 2, 3, 4, 6`) times `2^(s - 127)` for the `uint8` scale `s` of its
//! 32 rows. bfloat16 attention is quantized per 32 consecutive rows of a
//! token, with the scale `2^(floor(log2 amax) - 7)` and the elements rounded to
//! nearest even in `float8_e4m3fn`; pre-quantized attention `[B, 1, K/4, S]`
//! holds `float8_e4m3fn` codes (byte `k` row `4r + k`) with their scales
//! `[B, K/32, S]`. At the library's MX test sizes, in both precision modes;
//! the emitted source under NumPy against the emulator; the MX rules.

use crate::common::{
    Arg, CaseName, as_dtype, assert_close_per_element, assert_numpy_equals_emulator, assert_refused_by, matmul, package_of, seed_of,
    tensor, uniform,
};
use crate::mx_format::{e2m1fn, e4m3fn, quantize_e4m3fn_groups, round_e4m3fn};
use crate::support::{Programs, token_case};
use nki::hw::Generation;
use nki::{Dtype, Launch, Precision, Tensor};
use nkilib::output_projection::output_projection_cte::output_projection_cte::{
    OutputProjectionCteRule, OutputProjectionCteShape, QuantizationType, output_projection_cte, output_projection_cte_violation,
};
use std::path::Path;

/// A configuration of either MX quantization (`MX` or `STATIC_MX`): its
/// inputs, the float64 projection, the emulator's and the NumPy executor's call.
trait MxCase: std::fmt::Debug + Programs {
    /// The case's inputs.
    type Data;

    /// The inputs, drawn from the case's own seed.
    fn data(&self) -> Self::Data;

    /// The float64 projection `[B, S, H]` and each element's magnitude.
    fn reference(&self, d: &Self::Data) -> (Vec<f64>, Vec<f64>);

    /// The emulator's projection in `precision`.
    fn run(&self, d: &Self::Data, precision: Precision) -> Vec<f32>;

    /// The kernel's arguments for the NumPy executor.
    fn numpy_call(&self, d: &Self::Data) -> (Vec<Arg>, Vec<(&'static str, Arg)>);
}

token_case! {
    /// One MX configuration: `(B, S, H, N, D, bias)` as the library's test lists
    /// them, the LNC size and whether the attention comes quantized (then `D` is
    /// the unpacked head dim; the kernel sees `[B, 1, N·D/4, S]`).
    struct Mx {
        n: usize,
        d: usize,
        bias: bool,
        given: bool,
    }
}

const fn mx(lnc: usize, b: usize, s: usize, h: usize, n: usize, d: usize, bias: bool) -> Mx {
    Mx { lnc, b, s, h, n, d, bias, given: false }
}

impl Mx {
    /// The configuration with the attention given quantized.
    const fn given(self) -> Mx {
        Mx { given: true, ..self }
    }
}

/// The library's MX unit sizes that its MX rules accept (the larger ones
/// left to the library comparison): packed contractions of 32, 64, 256 and
/// 320 rows (two full tiles and a 64-row one), 96 (padded to 128), several
/// sequence tiles with a ragged last one; plus an odd sequence over two
/// batches (padded to an even stationary width), on one and two programs.
const MX_CONFIGS: &[Mx] = &[
    mx(2, 1, 16, 5120, 10, 128, true),
    mx(2, 1, 128, 3072, 16, 64, true),
    mx(2, 1, 128, 3072, 8, 32, true),
    mx(1, 1, 128, 8192, 1, 128, false),
    mx(2, 1, 192, 1024, 1, 128, false),
    mx(2, 1, 576, 3072, 3, 128, false),
    mx(1, 2, 129, 1024, 2, 64, true),
    mx(2, 1, 16, 5120, 10, 128, true).given(),
    mx(2, 1, 128, 3072, 8, 32, true).given(),
    mx(1, 1, 128, 8192, 1, 128, false).given(),
    mx(2, 1, 576, 3072, 3, 128, false).given(),
    mx(1, 2, 129, 1024, 2, 64, true).given(),
];

/// A case's data: the attention `[B][K][S]` (bfloat16 values, or the e4m3
/// codes given quantized), its scales `[B][K/32][S]` given quantized, the
/// weight codes `[K][H]`, their scales `[K/32][H]`, the bias.
struct Data {
    a: Vec<f64>,
    a_scales: Vec<f64>,
    codes: Vec<u32>,
    scales: Vec<f64>,
    bias: Vec<f64>,
}

impl Mx {
    fn k(&self) -> usize {
        self.n * self.d
    }

    /// Packs `[K][cols]` codes of `bits` bits into `[K/4][cols]` words: field
    /// `j` of word `(r, c)` the code of row `4r + j`.
    fn pack(codes: impl Fn(usize, usize) -> u32, k: usize, cols: usize, bits: u32) -> Vec<i64> {
        (0..k / 4 * cols).map(|at| (0..4).map(|j| i64::from(codes(4 * (at / cols) + j, at % cols)) << (bits * j as u32)).sum()).collect()
    }

    /// The attention tensor the kernel takes.
    fn attention(&self, d: &Data) -> Tensor {
        let (b, s, k) = (self.b, self.s, self.k());
        if self.given {
            let words: Vec<i64> = (0..b).flat_map(|bi| Self::pack(|row, col| d.a[(bi * k + row) * s + col] as u32, k, s, 8)).collect();
            Tensor::from_i64(&[b, 1, k / 4, s], &words, Dtype::Fp8E4m3Fnx4).unwrap()
        } else {
            tensor(&[b, self.n, self.d, s], &d.a, Dtype::Bf16)
        }
    }

    fn weight(&self, d: &Data) -> Tensor {
        let (h, k) = (self.h, self.k());
        Tensor::from_i64(&[k / 4, h], &Self::pack(|row, col| d.codes[row * h + col], k, h, 4), Dtype::Fp4E2m1Fnx4).unwrap()
    }

    fn call<'a>(&self, a: &'a Tensor, w: &'a Tensor, ws: &'a Tensor, xs: &'a Tensor, bias: &'a Tensor) -> output_projection_cte::Call<'a> {
        let mut call = output_projection_cte::Call::new(a, w).quantization_type(QuantizationType::MX).weight_scales(ws);
        if self.given {
            call = call.input_scales(xs);
        }
        if self.bias {
            call = call.bias(bias);
        }
        call
    }
}

impl MxCase for Mx {
    type Data = Data;

    /// Codes drawn without NaN; weight scales `2^-9 .. 2^-5`, input scales `2^-7 .. 2^-2`.
    fn data(&self) -> Data {
        let seed = seed_of(&self.name());
        let (b, s, h, k) = (self.b, self.s, self.h, self.k());
        let a = if self.given {
            uniform(b * k * s, seed, 0.0, 254.0).iter().map(|v| (*v as u32) as f64).map(|c| if c >= 127.0 { c + 1.0 } else { c }).collect()
        } else {
            as_dtype(&uniform(b * k * s, seed, -1.0, 1.0), Dtype::Bf16)
        };
        let a_scales =
            if self.given { uniform(b * k / 32 * s, seed + 1, 120.0, 126.0).iter().map(|v| v.floor()).collect() } else { Vec::new() };
        Data {
            a,
            a_scales,
            codes: uniform(k * h, seed + 2, 0.0, 16.0).iter().map(|v| (*v as u32).min(15)).collect(),
            scales: uniform(k / 32 * h, seed + 3, 118.0, 123.0).iter().map(|v| v.floor()).collect(),
            bias: as_dtype(&uniform(h, seed + 4, -1.0, 1.0), Dtype::Bf16),
        }
    }

    /// The float64 projection `[B, S, H]` and each element's magnitude
    /// `Σ|a·w| + |bias|`.
    fn reference(&self, d: &Data) -> (Vec<f64>, Vec<f64>) {
        let (b, s, h, k) = (self.b, self.s, self.h, self.k());
        let w: Vec<f64> = (0..k * h).map(|at| e2m1fn(d.codes[at]) * 2f64.powf(d.scales[at / h / 32 * h + at % h] - 127.0)).collect();
        let mut rows = Vec::with_capacity(b * s * k);
        for bi in 0..b {
            for si in 0..s {
                let mut col: Vec<f64> = (0..k).map(|r| d.a[(bi * k + r) * s + si]).collect();
                if self.given {
                    for (r, v) in col.iter_mut().enumerate() {
                        *v = e4m3fn(*v as u32) * 2f64.powf(d.a_scales[(bi * k / 32 + r / 32) * s + si] - 127.0);
                    }
                } else {
                    quantize_e4m3fn_groups(&mut col);
                }
                rows.extend(col);
            }
        }
        projection(&rows, &w, (b * s, k, h), 1.0, self.bias.then_some(&d.bias[..]))
    }

    /// The emulator's projection.
    fn run(&self, d: &Data, precision: Precision) -> Vec<f32> {
        let (b, s, h, k) = (self.b, self.s, self.h, self.k());
        let (a, w) = (self.attention(d), self.weight(d));
        let ws = tensor(&[k / 32, h], &d.scales, Dtype::U8);
        let xs = if self.given { tensor(&[b, k / 32, s], &d.a_scales, Dtype::U8) } else { tensor(&[1], &[0.0], Dtype::U8) };
        let bias = tensor(&[1, h], &d.bias, Dtype::Bf16);
        let launch = Launch::new().lnc(self.lnc).precision(precision).generation(Generation::Trn3);
        let out = self.call(&a, &w, &ws, &xs, &bias).launch(&launch).unwrap_or_else(|e| panic!("{}: {e}", self.name()));
        assert_eq!(out.shape(), &[b, s, h], "{}", self.name());
        assert_eq!(out.dtype(), Dtype::Bf16, "{}", self.name());
        out.to_f32_vec()
    }

    /// The kernel's arguments for the NumPy executor.
    fn numpy_call(&self, d: &Data) -> (Vec<Arg>, Vec<(&'static str, Arg)>) {
        let (b, s, h, k) = (self.b, self.s, self.h, self.k());
        let words = |t: &Tensor| t.to_i64_vec().iter().map(|&x| x as f64).collect::<Vec<f64>>();
        let a = self.attention(d);
        let a = if self.given {
            Arg::Tensor(vec![b, 1, k / 4, s], words(&a), Dtype::Fp8E4m3Fnx4)
        } else {
            Arg::Tensor(vec![b, self.n, self.d, s], d.a.clone(), Dtype::Bf16)
        };
        let mut kw = vec![
            ("quantization_type", Arg::Member("QuantizationType", "MX")),
            ("weight_scales", Arg::Tensor(vec![k / 32, h], d.scales.clone(), Dtype::U8)),
        ];
        if self.given {
            kw.push(("input_scales", Arg::Tensor(vec![b, k / 32, s], d.a_scales.clone(), Dtype::U8)));
        }
        if self.bias {
            kw.push(("bias", Arg::Tensor(vec![1, h], d.bias.clone(), Dtype::Bf16)));
        }
        (vec![a, Arg::Tensor(vec![k / 4, h], words(&self.weight(d)), Dtype::Fp4E2m1Fnx4)], kw)
    }
}

/// `scale · rows · w + bias` (`rows` `[m, k]`, `w` `[k, h]`) and each
/// element's magnitude `scale · Σ|a·w| + |bias|`, in float64.
fn projection(rows: &[f64], w: &[f64], (m, k, h): (usize, usize, usize), scale: f64, bias: Option<&[f64]>) -> (Vec<f64>, Vec<f64>) {
    let abs = |x: &[f64]| x.iter().map(|v| v.abs()).collect::<Vec<f64>>();
    let (mut out, mut mag) = (matmul(rows, w, m, k, h), matmul(&abs(rows), &abs(w), m, k, h));
    for (at, (o, g)) in out.iter_mut().zip(&mut mag).enumerate() {
        let bias = bias.map_or(0.0, |b| b[at % h]);
        *o = *o * scale + bias;
        *g = *g * scale + bias.abs();
    }
    (out, mag)
}

/// Checks every element of every case in `precision` within `rel · magnitude`
/// of the float64 projection.
fn check<C: MxCase>(cases: &[C], precision: Precision, rel: f64) {
    for cfg in cases {
        let d = cfg.data();
        let (want, mag) = cfg.reference(&d);
        assert_close_per_element(&format!("{} {precision:?}", cfg.name()), &cfg.run(&d, precision), (&want, &mag), 1e-6, rel);
    }
}

/// Asserts that the emitted kernel (in the package `pkg`) under NumPy equals
/// the emulator on every case, element for element, in both modes.
fn check_numpy<C: MxCase>(pkg: &Path, cases: &[C]) {
    for cfg in cases {
        let d = cfg.data();
        let call = cfg.numpy_call(&d);
        assert_numpy_equals_emulator(pkg, ("output_projection_cte", &cfg.name()), call, cfg.lnc(), "trn3", |p| cfg.run(&d, p));
    }
}

/// The MX rules, as `const fn` and when the kernel is traced.
#[test]
fn output_projection_cte_mx_rules_refuse_by_name() {
    let ok = OutputProjectionCteShape {
        b: 1,
        n: 32,
        d: 256,
        s: 512,
        h: 3072,
        programs: 2,
        mx_quant: true,
        prequantized: false,
        generation: Generation::Trn3,
    };
    // MX lifts the head-dim and head-count limits.
    assert_eq!(output_projection_cte_violation(ok), None);
    assert_eq!(output_projection_cte_violation(OutputProjectionCteShape { n: 1, d: 32, prequantized: true, ..ok }), None);
    let cases = [
        (OutputProjectionCteShape { generation: Generation::Trn2, ..ok }, OutputProjectionCteRule::MxGeneration),
        (OutputProjectionCteShape { n: 1, d: 96, ..ok }, OutputProjectionCteRule::MxContraction),
        (OutputProjectionCteShape { n: 1, d: 48, prequantized: true, ..ok }, OutputProjectionCteRule::MxContraction),
    ];
    assert_refused_by(output_projection_cte_violation, cases);

    let cfg = mx(1, 1, 16, 512, 1, 128, false);
    let d = cfg.data();
    let (a, w) = (cfg.attention(&d), cfg.weight(&d));
    let ws = tensor(&[4, 512], &d.scales, Dtype::U8);
    let trn3 = Launch::new().generation(Generation::Trn3);
    let call = || output_projection_cte::Call::new(&a, &w).quantization_type(QuantizationType::MX).weight_scales(&ws);
    let e = call().launch(&Launch::new()).unwrap_err();
    assert!(e.to_string().contains("quantization_type MX needs trn3"), "{e}");
    let e = output_projection_cte::Call::new(&a, &w).quantization_type(QuantizationType::MX).launch(&trn3).unwrap_err();
    assert!(e.to_string().contains("weight_scales is required for MX quantization"), "{e}");
    let narrow = tensor(&[1, 1, 64, 16], &vec![0.0; 64 * 16], Dtype::Bf16);
    let e = output_projection_cte::Call::new(&narrow, &w).quantization_type(QuantizationType::MX).weight_scales(&ws).launch(&trn3);
    assert!(e.unwrap_err().to_string().contains("N * D = 64 must be a positive multiple of 128 for MX quantization"));
    let e = output_projection_cte::Call::new(&a, &w).launch(&trn3).unwrap_err();
    assert!(e.to_string().contains("packed MX attention or weights need MX quantization"), "{e}");
}

// ---- STATIC_MX: float8_e4m3fn weights and static scales through nc_matmul_mx ----

token_case! {
    /// One `STATIC_MX` configuration: `(B, S, H, N, D, bias)` and the LNC size.
    struct StaticMx {
        n: usize,
        d: usize,
        bias: bool,
    }
}

const fn static_mx(lnc: usize, b: usize, s: usize, h: usize, n: usize, d: usize, bias: bool) -> StaticMx {
    StaticMx { lnc, b, s, h, n, d, bias }
}

/// The library's `STATIC_MX` sizes (its model configurations with `N·D` a
/// multiple of 128) that run here in seconds: `H = 8192` with 1024 and 2048
/// contraction rows (two and four packed tiles); plus a packed contraction
/// of 96 rows (padded to 128), an odd sequence over two batches and several
/// sequence tiles, with the bias, on one and two programs.
const STATIC_MX_CONFIGS: &[StaticMx] = &[
    static_mx(2, 1, 128, 8192, 8, 128, false),
    static_mx(2, 1, 64, 8192, 16, 128, false),
    static_mx(1, 1, 128, 3072, 8, 32, true),
    static_mx(2, 2, 129, 1024, 3, 128, true),
    static_mx(2, 1, 576, 2048, 2, 128, true),
];

/// The static input scale: a power of two small enough that the largest
/// activations clip at `±448`.
const STATIC_INPUT_SCALE: f64 = 1.0 / 512.0;
/// The static weight scale.
const STATIC_WEIGHT_SCALE: f64 = 0.0123;

/// A `STATIC_MX` case's data: the attention `[B][K][S]` (bfloat16 values),
/// the logical weight codes `[K][H]` and the bias.
struct StaticData {
    a: Vec<f64>,
    codes: Vec<u32>,
    bias: Vec<f64>,
}

impl StaticMx {
    fn k(&self) -> usize {
        self.n * self.d
    }

    /// The weight as stored: `[K, H]` whose bytes, read as `[K/4, H, 4]`,
    /// hold logical row `4r + j` of column `c` at `(r, c, j)`.
    fn stored_weight(&self, d: &StaticData) -> Vec<f64> {
        let (h, k) = (self.h, self.k());
        (0..k * h).map(|at| (at / (4 * h), at % (4 * h) / 4, at % 4)).map(|(r, c, j)| e4m3fn(d.codes[(4 * r + j) * h + c])).collect()
    }
}

impl MxCase for StaticMx {
    type Data = StaticData;

    /// `float8_e4m3fn` codes without NaN.
    fn data(&self) -> StaticData {
        let seed = seed_of(&self.name());
        let (b, s, h, k) = (self.b, self.s, self.h, self.k());
        StaticData {
            a: as_dtype(&uniform(b * k * s, seed, -1.0, 1.0), Dtype::Bf16),
            codes: uniform(k * h, seed + 1, 0.0, 254.0).iter().map(|v| *v as u32).map(|c| if c >= 0x7f { c + 1 } else { c }).collect(),
            bias: as_dtype(&uniform(h, seed + 2, -1.0, 1.0), Dtype::Bf16),
        }
    }

    /// The float64 projection `[B, S, H]` and each element's magnitude: the
    /// attention times `1 / input_scale`, clipped to `±448` and rounded to
    /// `float8_e4m3fn`, against the weights, the sum times `weight_scale ·
    /// input_scale`, plus the bias.
    fn reference(&self, d: &StaticData) -> (Vec<f64>, Vec<f64>) {
        let (b, s, h, k) = (self.b, self.s, self.h, self.k());
        let w: Vec<f64> = d.codes.iter().map(|&c| e4m3fn(c)).collect();
        let rows: Vec<f64> = (0..b * s * k)
            .map(|at| (at / (s * k), at / k % s, at % k))
            .map(|(bi, si, r)| round_e4m3fn((d.a[(bi * k + r) * s + si] / STATIC_INPUT_SCALE).clamp(-448.0, 448.0)))
            .collect();
        projection(&rows, &w, (b * s, k, h), STATIC_WEIGHT_SCALE * STATIC_INPUT_SCALE, self.bias.then_some(&d.bias[..]))
    }

    /// The emulator's projection.
    fn run(&self, d: &StaticData, precision: Precision) -> Vec<f32> {
        let (b, s, h, k) = (self.b, self.s, self.h, self.k());
        let a = tensor(&[b, self.n, self.d, s], &d.a, Dtype::Bf16);
        let w = tensor(&[k, h], &self.stored_weight(d), Dtype::Fp8E4m3Fn);
        let is = tensor(&[128, 1], &[STATIC_INPUT_SCALE; 128], Dtype::F32);
        let ws = tensor(&[128, 1], &[STATIC_WEIGHT_SCALE; 128], Dtype::F32);
        let bias = tensor(&[1, h], &d.bias, Dtype::Bf16);
        let mut call =
            output_projection_cte::Call::new(&a, &w).quantization_type(QuantizationType::STATIC_MX).input_scales(&is).weight_scales(&ws);
        if self.bias {
            call = call.bias(&bias);
        }
        let launch = Launch::new().lnc(self.lnc).precision(precision).generation(Generation::Trn3);
        let out = call.launch(&launch).unwrap_or_else(|e| panic!("{}: {e}", self.name()));
        assert_eq!((out.shape(), out.dtype()), (&[b, s, h][..], Dtype::Bf16), "{}", self.name());
        out.to_f32_vec()
    }

    /// The kernel's arguments for the NumPy executor.
    fn numpy_call(&self, d: &StaticData) -> (Vec<Arg>, Vec<(&'static str, Arg)>) {
        let (b, s, h, k) = (self.b, self.s, self.h, self.k());
        let mut kw = vec![
            ("quantization_type", Arg::Member("QuantizationType", "STATIC_MX")),
            ("input_scales", Arg::Tensor(vec![128, 1], vec![STATIC_INPUT_SCALE; 128], Dtype::F32)),
            ("weight_scales", Arg::Tensor(vec![128, 1], vec![STATIC_WEIGHT_SCALE; 128], Dtype::F32)),
        ];
        if self.bias {
            kw.push(("bias", Arg::Tensor(vec![1, h], d.bias.clone(), Dtype::Bf16)));
        }
        let args = vec![
            Arg::Tensor(vec![b, self.n, self.d, s], d.a.clone(), Dtype::Bf16),
            Arg::Tensor(vec![k, h], self.stored_weight(d), Dtype::Fp8E4m3Fn),
        ];
        (args, kw)
    }
}

/// The `STATIC_MX` checks, by name, when the kernel is traced.
#[test]
fn output_projection_cte_static_mx_checks_refuse_by_name() {
    let cfg = static_mx(1, 1, 16, 1024, 1, 128, false);
    let d = cfg.data();
    let (a, w) = (tensor(&[1, 1, 128, 16], &d.a, Dtype::Bf16), tensor(&[128, 1024], &cfg.stored_weight(&d), Dtype::Fp8E4m3Fn));
    let scale = tensor(&[128, 1], &[1.0; 128], Dtype::F32);
    let trn3 = Launch::new().generation(Generation::Trn3);
    let call = || output_projection_cte::Call::new(&a, &w).quantization_type(QuantizationType::STATIC_MX);
    let refused = |call: output_projection_cte::Call<'_>, launch: &Launch, want: &str| {
        let e = call.launch(launch).unwrap_err().to_string();
        assert!(e.contains(want), "{e}");
    };
    refused(call().input_scales(&scale).weight_scales(&scale), &Launch::new(), "quantization_type STATIC_MX needs trn3");
    refused(call().weight_scales(&scale), &trn3, "input_scales is required for QuantizationType.STATIC_MX quantization");
    let narrow = tensor(&[1, 1, 64, 16], &d.a[..64 * 16], Dtype::Bf16);
    let w64 = tensor(&[64, 1024], &cfg.stored_weight(&d)[..64 * 1024], Dtype::Fp8E4m3Fn);
    let small = output_projection_cte::Call::new(&narrow, &w64).quantization_type(QuantizationType::STATIC_MX);
    refused(small.input_scales(&scale).weight_scales(&scale), &trn3, "N * D = 64 must be a positive multiple of 128 for STATIC_MX");
    let e4m3 = tensor(&[128, 1024], &vec![0.5; 128 * 1024], Dtype::Fp8E4m3);
    let wrong = output_projection_cte::Call::new(&a, &e4m3).quantization_type(QuantizationType::STATIC_MX);
    refused(wrong.input_scales(&scale).weight_scales(&scale), &trn3, "float8_e4m3 weights need STATIC quantization");
    let fn_weights = output_projection_cte::Call::new(&a, &w).quantization_type(QuantizationType::STATIC);
    refused(fn_weights.input_scales(&scale).weight_scales(&scale), &trn3, "STATIC quantization takes float8_e4m3 weights");
}

// ---- Both MX quantizations against float64 and under NumPy ----

/// fp32 precision: the quantized operands are the reference's (`STATIC_MX`'s
/// input scale is a power of two); only the fp32 summation differs.
#[test]
fn output_projection_cte_mx_in_fp32_match_float64() {
    check(MX_CONFIGS, Precision::Fp32, 1e-6);
    check(STATIC_MX_CONFIGS, Precision::Fp32, 1e-6);
}

/// Hardware precision: the PSUM tile is bfloat16, so each packed tile's
/// partial sum and the biased output round to bfloat16. `MX`: one step,
/// 2^-8, per tile of at most 3, and the output. `STATIC_MX`: the scaled
/// activations round to bfloat16 before float8 (at most one float8 step
/// apart), the bfloat16 PSUM rounds after each of at most 4 packed tiles,
/// then the dequantized sum and the biased output round to bfloat16.
#[test]
fn output_projection_cte_mx_in_hardware_precision_match_float64() {
    check(MX_CONFIGS, Precision::Hardware, 5.0 / 256.0);
    check(STATIC_MX_CONFIGS, Precision::Hardware, 8.0 / 256.0);
}

/// The emitted MX paths under NumPy equal the emulator, element for
/// element, in both modes: `MX` online and given quantized, a padded tile,
/// an odd sequence; `STATIC_MX` with a padded tile, an odd sequence over two
/// batches.
#[test]
fn output_projection_cte_mx_emitted_under_numpy_equals_emulator() {
    let pkg = package_of("output_projection_cte_mx_pkg", &[&output_projection_cte::INFO]);
    check_numpy(
        &pkg,
        &[mx(2, 1, 576, 3072, 3, 128, true), mx(1, 2, 129, 1024, 2, 64, true).given(), mx(2, 1, 16, 5120, 10, 128, false).given()],
    );
    check_numpy(&pkg, &[static_mx(2, 2, 129, 1024, 3, 128, true), static_mx(1, 1, 128, 3072, 8, 32, false)]);
}
