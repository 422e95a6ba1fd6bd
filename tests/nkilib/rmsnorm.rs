//! The library's `rmsnorm_quant_kernel` against a float64 RMSNorm and absmax
//! quantization written from the library's documented math, in both precision
//! modes, over the documented shapes, with row and static quantization, clipping
//! bounds and LNC sharding; its emitted source under NumPy against the emulator.
//!
//! In `hardware` mode the output's bytes are checked: each element's
//! `float8_e4m3` code equals the code of the float64 quantized value rounded to
//! nearest even, wherever that value is farther than the kernel's rounding error
//! (its bfloat16 intermediates) from a rounding boundary, and decodes within one
//! fp8 step of it elsewhere; the four bytes after each row are its fp32
//! dequantization scale.

use crate::common::attention::{run_numpy_kwargs, run_numpy_refused};
use crate::common::{Arg, as_dtype, emitted_package, tensor, uniform};
use nki::emit::PyEnum;
use nki::{Dtype, Launch, Precision, Tensor};
use nkilib::rmsnorm::rmsnorm_quant::{
    NormType, QuantizationType, RmsNormQuantKernelArgs, RmsNormQuantRule, rmsnorm_quant_kernel, rmsnorm_quant_violation,
};

/// The largest finite `float8_e4m3`.
const FP8_MAX: f64 = 240.0;

/// A test case's configuration: the kernel's `kargs` and static scale.
#[derive(Clone, Copy)]
struct Args {
    lower_bound: f64,
    norm: bool,
    row: bool,
    eps: f64,
    /// The static dequantization scale (static quantization only).
    static_scale: f64,
}

const ROW_RMS: Args = Args { lower_bound: 0.0, norm: true, row: true, eps: 1e-6, static_scale: 0.0 };

impl Args {
    /// The kernel's `RmsNormQuantKernelArgs`.
    fn kargs(&self) -> RmsNormQuantKernelArgs {
        RmsNormQuantKernelArgs {
            lower_bound: self.lower_bound,
            norm_type: if self.norm { NormType::RMS_NORM } else { NormType::NO_NORM },
            quantization_type: if self.row { QuantizationType::ROW } else { QuantizationType::STATIC },
            eps: self.eps,
        }
    }
}

/// A problem: `hidden` of `shape` (its last dim `H`) and `ln_w` `[H]`.
struct Problem {
    shape: Vec<usize>,
    x: Vec<f64>,
    w: Vec<f64>,
}

impl Problem {
    fn new(shape: &[usize], seed: u64) -> Problem {
        let h = shape[shape.len() - 1];
        let n: usize = shape.iter().product();
        // Rows of different magnitudes, so that the row scales differ.
        let mut x = uniform(n, seed, -1.0, 1.0);
        for (r, row) in x.chunks_mut(h).enumerate() {
            let mag = 2f64.powi((r % 7) as i32 - 3);
            row.iter_mut().for_each(|v| *v *= mag);
        }
        Problem { shape: shape.to_vec(), x, w: uniform(h, seed + 1, 0.5, 1.5) }
    }

    fn h(&self) -> usize {
        self.shape[self.shape.len() - 1]
    }

    /// Per row: the float64 values `y · Q` before rounding to fp8, and the
    /// dequantization scale `D` (row quantization) — from `x` and `w` as given
    /// (already rounded to their dtypes):
    ///
    /// `y = x / sqrt(mean(x²) + eps) · w` (or `x`), then for row quantization
    /// `M = max|y|`, with a lower bound `M = min(M, lb)` and `y` clipped to
    /// `±lb`, `D = max(M / 240, 1e-6)`, values `y / D`; for static quantization
    /// values `clip(y / s, ±240)`.
    fn reference(&self, x: &[f64], w: &[f64], a: Args) -> Vec<(Vec<f64>, f64)> {
        let h = self.h();
        x.chunks(h)
            .map(|row| {
                let mut y: Vec<f64> = if a.norm {
                    let rms = (row.iter().map(|v| v * v).sum::<f64>() / h as f64 + a.eps).sqrt();
                    row.iter().zip(w).map(|(v, g)| v / rms * g).collect()
                } else {
                    row.to_vec()
                };
                if a.row {
                    let mut m = y.iter().fold(0.0f64, |m, v| m.max(v.abs()));
                    if a.lower_bound > 1e-6 {
                        m = m.min(a.lower_bound);
                        y.iter_mut().for_each(|v| *v = v.clamp(-a.lower_bound, a.lower_bound));
                    }
                    let d = (m / FP8_MAX).max(1e-6);
                    (y.iter().map(|v| v / d).collect(), d)
                } else {
                    (y.iter().map(|v| (v / a.static_scale).clamp(-FP8_MAX, FP8_MAX)).collect(), a.static_scale)
                }
            })
            .collect()
    }

    /// The emulator's output with `hidden` and `ln_w` in `dtype`.
    fn run(&self, dtype: Dtype, launch: &Launch, a: Args) -> nki::Result<Tensor> {
        let x = tensor(&self.shape, &self.x, dtype);
        let w = tensor(&[self.h()], &self.w, dtype);
        let sc = tensor(&[128, 1], &[a.static_scale; 128], Dtype::F32);
        let kargs = a.kargs();
        let call = rmsnorm_quant_kernel::Call::new(&x, &w, &kargs);
        let call = if a.row { call } else { call.input_dequant_scale(&sc) };
        call.launch(launch)
    }
}

/// Rounds `v` to `float8_e4m3` (nearest, ties to even; 3 mantissa bits,
/// normal exponents from -6, subnormal steps of 2^-9, above 240 infinity) and
/// returns its code, the rounded value, and the distance of `v` from the
/// nearest rounding boundary (the midpoint between two neighbouring values).
fn fp8_e4m3(v: f64) -> (u8, f64, f64) {
    let sign = if v < 0.0 { 0x80u8 } else { 0 };
    let a = v.abs();
    let e = if a == 0.0 { -6 } else { (a.log2().floor() as i32).max(-6) };
    let step = 2f64.powi(e - 3);
    let units = a / step;
    let lower = units.floor();
    let boundary = ((units - lower - 0.5).abs()) * step;
    let mut k = units.round();
    if (units - lower - 0.5).abs() == 0.0 && lower % 2.0 == 0.0 {
        k = lower;
    }
    let q = k * step;
    assert!(q <= FP8_MAX, "{v} overflows float8_e4m3");
    let code = if q == 0.0 {
        0
    } else if q < 2f64.powi(-6) {
        (q / 2f64.powi(-9)) as u8
    } else {
        let qe = q.log2().floor() as i32;
        (((qe + 7) as u8) << 3) | ((q / 2f64.powi(qe) - 1.0) * 8.0) as u8
    };
    (sign | code, q.copysign(v), boundary)
}

/// The value of a `float8_e4m3` code.
fn fp8_value(code: u8) -> f64 {
    let (e, m) = (i32::from((code >> 3) & 0xf), f64::from(code & 7));
    let mag = if e == 0 { m / 8.0 * 2f64.powi(-6) } else { (1.0 + m / 8.0) * 2f64.powi(e - 7) };
    if code & 0x80 != 0 { -mag } else { mag }
}

/// The output's bytes per row (`H` codes, then 4 scale bytes with row quantization).
fn bytes_of(out: &Tensor) -> Vec<u8> {
    out.view(Dtype::U8).unwrap().to_f32_vec().into_iter().map(|b| b as u8).collect()
}

/// Checks a `hardware` run: codes exact away from rounding boundaries (farther
/// than `rel · |v|`), within one fp8 step elsewhere; row scales within `rel`.
fn check_codes(what: &str, out: &Tensor, want: &[(Vec<f64>, f64)], row: bool, rel: f64) {
    let h = want[0].0.len();
    let width = if row { h + 4 } else { h };
    let bytes = bytes_of(out);
    assert_eq!(bytes.len(), want.len() * width, "{what}: output size");
    let (mut exact, mut near) = (0usize, 0usize);
    for (r, (vals, d)) in want.iter().enumerate() {
        let got = &bytes[r * width..(r + 1) * width];
        for (j, &v) in vals.iter().enumerate() {
            let (code, q, boundary) = fp8_e4m3(v);
            if boundary > rel * v.abs() + 1e-9 {
                assert_eq!(got[j], code, "{what}: row {r} col {j}: code {:#x} for {v} (want {code:#x} = {q})", got[j]);
                exact += 1;
            } else {
                let step = 2f64.powi((v.abs().max(1e-30).log2().floor() as i32).max(-6) - 3);
                let g = fp8_value(got[j]);
                assert!((g - v).abs() <= step, "{what}: row {r} col {j}: {g} is not within one fp8 step {step} of {v}");
                near += 1;
            }
        }
        if row {
            let scale = f64::from(f32::from_le_bytes(got[h..h + 4].try_into().unwrap()));
            assert!((scale - d).abs() <= rel * d, "{what}: row {r}: scale {scale} vs {d}");
        }
    }
    assert!(exact > 2 * near, "{what}: {exact} codes compared exactly, {near} near a boundary");
}

/// Checks an `fp32` run: the unrounded quantized values and the scales within `rel`.
fn check_values(what: &str, out: &Tensor, want: &[(Vec<f64>, f64)], row: bool, rel: f64) {
    let h = want[0].0.len();
    let width = if row { h + 4 } else { h };
    let vals = out.to_f32_vec();
    let bytes = bytes_of(out);
    for (r, (v, d)) in want.iter().enumerate() {
        for (j, &w) in v.iter().enumerate() {
            let g = f64::from(vals[r * width + j]);
            assert!((g - w).abs() <= rel * w.abs() + 1e-6, "{what}: row {r} col {j}: {g} vs {w}");
        }
        if row {
            let scale = f64::from(f32::from_le_bytes(bytes[r * width + h..r * width + h + 4].try_into().unwrap()));
            assert!((scale - d).abs() <= rel * d, "{what}: row {r}: scale {scale} vs {d}");
        }
    }
}

/// The output shape: `hidden`'s, its last dim 4 longer with row quantization.
fn out_shape(shape: &[usize], row: bool) -> Vec<usize> {
    let mut s = shape.to_vec();
    *s.last_mut().unwrap() += if row { 4 } else { 0 };
    s
}

/// The kernel's relative error on a quantized value in `hardware` mode: the
/// normalised row rounded to bfloat16 (half an ulp, at most 2^-8 of the value),
/// its absmax taken from those rounded values (2^-8), and fp32 steps.
const HW_REL: f64 = 2.5 / 256.0;

/// [`HW_REL`] for an input wider than bfloat16, rounded to it on load (2^-8 more).
const HW_REL_WIDE: f64 = 3.5 / 256.0;

/// Smallest, partial tiles in both dims, 2-D input, typical, and the largest
/// `B` (2) and `H` (16384) over two full 128-row tiles (the library's largest
/// `S`, 32768, is 256 times the work and beyond a test's time).
const SHAPES: [&[usize]; 5] = [&[1, 1, 1], &[2, 100, 700], &[300, 1000], &[1, 256, 2048], &[2, 128, 16384]];

#[test]
fn hardware_codes_and_scales_match_float64() {
    for (i, shape) in SHAPES.into_iter().enumerate() {
        let p = Problem::new(shape, 10 + i as u64);
        let out = p.run(Dtype::Bf16, &Launch::new(), ROW_RMS).unwrap();
        assert_eq!((out.shape(), out.dtype()), (&out_shape(shape, true)[..], Dtype::Fp8E4m3));
        let want = p.reference(&as_dtype(&p.x, Dtype::Bf16), &as_dtype(&p.w, Dtype::Bf16), ROW_RMS);
        check_codes(&format!("rmsnorm_quant bf16 {shape:?}"), &out, &want, true, HW_REL);
    }
}

#[test]
fn fp32_values_and_scales_match_float64() {
    for (i, shape) in SHAPES.into_iter().enumerate() {
        let p = Problem::new(shape, 20 + i as u64);
        let out = p.run(Dtype::F32, &Launch::new().precision(Precision::Fp32), ROW_RMS).unwrap();
        let want = p.reference(&as_dtype(&p.x, Dtype::F32), &as_dtype(&p.w, Dtype::F32), ROW_RMS);
        check_values(&format!("rmsnorm_quant fp32 {shape:?}"), &out, &want, true, 1e-5);
    }
}

#[test]
fn quantize_only_static_scale_and_lower_bound() {
    let shape: &[usize] = &[1, 200, 640];
    let p = Problem::new(shape, 30);
    let cases = [
        ("no norm", Args { norm: false, ..ROW_RMS }),
        // Clips the larger rows (magnitudes up to 8 before normalisation).
        ("lower bound", Args { lower_bound: 0.75, norm: false, ..ROW_RMS }),
        ("lower bound after norm", Args { lower_bound: 1.5, ..ROW_RMS }),
        ("static", Args { row: false, static_scale: 1.0 / 64.0, ..ROW_RMS }),
        ("static no norm", Args { norm: false, row: false, static_scale: 1.0 / 32.0, ..ROW_RMS }),
        ("eps", Args { eps: 0.25, ..ROW_RMS }),
    ];
    for (name, a) in cases {
        let out = p.run(Dtype::Bf16, &Launch::new(), a).unwrap();
        assert_eq!(out.shape(), &out_shape(shape, a.row)[..], "{name}");
        let want = p.reference(&as_dtype(&p.x, Dtype::Bf16), &as_dtype(&p.w, Dtype::Bf16), a);
        check_codes(&format!("rmsnorm_quant {name}"), &out, &want, a.row, HW_REL);
        let out = p.run(Dtype::F32, &Launch::new().precision(Precision::Fp32), a).unwrap();
        let want = p.reference(&as_dtype(&p.x, Dtype::F32), &as_dtype(&p.w, Dtype::F32), a);
        check_values(&format!("rmsnorm_quant fp32 {name}"), &out, &want, a.row, 1e-5);
    }
}

/// Without normalisation the row's absmax `M` is an input value, so the stored
/// scale is exactly the fp32 product `M · fp32(1/240)` (the Scalar Engine's
/// `data · scale` in fp32): its four bytes are compared exactly, NaN codes
/// among them (the packed bytes are not float8 values).
#[test]
fn the_packed_scale_bytes_are_exact() {
    let shape: &[usize] = &[1, 256, 96];
    let p = Problem::new(shape, 70);
    let a = Args { norm: false, ..ROW_RMS };
    let mut nan_coded = 0;
    for (dtype, precision) in [(Dtype::Bf16, Precision::Hardware), (Dtype::F32, Precision::Fp32)] {
        let bytes = bytes_of(&p.run(dtype, &Launch::new().precision(precision), a).unwrap());
        for (r, row) in as_dtype(&p.x, dtype).chunks(96).enumerate() {
            let m = row.iter().fold(0.0f64, |m, v| m.max(v.abs())) as f32;
            let want = (m * (1.0f64 / FP8_MAX) as f32).max(1e-6).to_le_bytes();
            let got = &bytes[r * 100 + 96..r * 100 + 100];
            assert_eq!(got, want, "{dtype} row {r}: scale bytes");
            nan_coded += usize::from(want.iter().any(|&b| b & 0x7f > 0x78));
        }
    }
    assert!(nan_coded > 10, "only {nan_coded} scales hold a float8 NaN code");
}

/// `ln_w` as `[1, H]` gives the bytes of `[H]`; float16 rows quantize like the others.
#[test]
fn ln_w_as_a_row_and_float16_inputs() {
    let shape: &[usize] = &[2, 64, 300];
    let p = Problem::new(shape, 80);
    let x = tensor(shape, &p.x, Dtype::Bf16);
    let (w, w_row) = (tensor(&[300], &p.w, Dtype::Bf16), tensor(&[1, 300], &p.w, Dtype::Bf16));
    let (launch, kargs) = (Launch::new(), RmsNormQuantKernelArgs::default());
    let flat = rmsnorm_quant_kernel::Call::new(&x, &w, &kargs).launch(&launch).unwrap();
    let row = rmsnorm_quant_kernel::Call::new(&x, &w_row, &kargs).launch(&launch).unwrap();
    assert_eq!(bytes_of(&row), bytes_of(&flat));
    let out = p.run(Dtype::F16, &launch, ROW_RMS).unwrap();
    let want = p.reference(&as_dtype(&p.x, Dtype::F16), &as_dtype(&p.w, Dtype::F16), ROW_RMS);
    check_codes("rmsnorm_quant float16", &out, &want, true, HW_REL_WIDE);
}

#[test]
fn lnc2_splits_the_rows_with_the_remainder_on_the_last_program() {
    for shape in [&[1usize, 129, 512][..], &[3, 1000]] {
        let p = Problem::new(shape, 40);
        let single = p.run(Dtype::Bf16, &Launch::new(), ROW_RMS).unwrap();
        let sharded = p.run(Dtype::Bf16, &Launch::new().lnc(2), ROW_RMS).unwrap();
        assert_eq!(bytes_of(&sharded), bytes_of(&single), "{shape:?}: LNC2 and one program give the same bytes");
        let want = p.reference(&as_dtype(&p.x, Dtype::Bf16), &as_dtype(&p.w, Dtype::Bf16), ROW_RMS);
        check_codes(&format!("rmsnorm_quant lnc2 {shape:?}"), &sharded, &want, true, HW_REL);
    }
}

/// The library's `RmsNormQuantKernelArgs` defaults: `lower_bound=0.0`,
/// `NormType.RMS_NORM`, `QuantizationType.ROW`, `eps=1e-6`.
const LIBRARY_DEFAULTS: RmsNormQuantKernelArgs =
    RmsNormQuantKernelArgs { lower_bound: 0.0, norm_type: NormType::RMS_NORM, quantization_type: QuantizationType::ROW, eps: 1e-6 };

/// The Rust defaults and the emitted dataclass are the library's, and the
/// emitted kernel takes the library's parameters.
#[test]
fn the_bundle_has_the_library_fields_and_defaults() {
    let d = RmsNormQuantKernelArgs::default();
    let l = LIBRARY_DEFAULTS;
    assert_eq!((d.lower_bound, d.norm_type, d.quantization_type, d.eps), (l.lower_bound, l.norm_type, l.quantization_type, l.eps));
    let pkg = emitted_package();
    let src = std::fs::read_to_string(pkg.join("rmsnorm_quant.py")).expect("the package holds rmsnorm_quant.py");
    let signature = "\n@nki.jit\ndef rmsnorm_quant_kernel(hidden, ln_w, kargs, input_dequant_scale=None):";
    assert!(src.contains(signature), "rmsnorm_quant.py keeps the library's signature:\n{src}");
    let class = src.split("class RmsNormQuantKernelArgs(nl.NKIObject):").nth(1).expect("the dataclass is emitted");
    let declared: Vec<&str> =
        class.lines().map(str::trim).take_while(|l| !l.starts_with("def ")).filter(|l| !l.starts_with('"') && l.contains(": ")).collect();
    assert_eq!(
        declared,
        [
            "lower_bound: float = 0.0",
            "norm_type: NormType = NormType.RMS_NORM",
            "quantization_type: QuantizationType = QuantizationType.ROW",
            "eps: float = 1e-6"
        ]
    );
    // The enums are the library's, declared once for every kernel (as in its
    // `common_types.py`): its members, by name and value.
    let types = std::fs::read_to_string(pkg.join("common_types.py")).expect("the package holds common_types.py");
    let values = |class: &str| -> Vec<String> {
        let body = types.split(&format!("class {class}(Enum):\n")).nth(1).unwrap_or_default();
        body.lines()
            .take_while(|l| l.starts_with("    ") || l.is_empty())
            .filter(|l| l.contains(" = "))
            .map(|l| l.trim().to_string())
            .collect()
    };
    assert_eq!(values("NormType"), ["NO_NORM = 0", "RMS_NORM = 1", "LAYER_NORM = 2", "RMS_NORM_SKIP_GAMMA = 3"]);
    assert_eq!(values("QuantizationType"), ["NONE = 0", "STATIC = 1", "ROW = 2", "MX = 3", "STATIC_MX = 4", "ROW_MX = 5"]);
    let init = std::fs::read_to_string(pkg.join("__init__.py")).expect("the package holds __init__.py");
    assert!(init.contains("from .rmsnorm_quant import RmsNormQuantKernelArgs\n"), "callers import the bundle:\n{init}");
    for class in ["NormType", "QuantizationType"] {
        assert!(src.contains(&format!("from .common_types import {class}\n")), "the kernel's module imports {class}:\n{src}");
        assert!(init.contains(&format!("from .common_types import {class}\n")), "callers import {class}:\n{init}");
        assert_eq!(init.matches(&format!("import {class}\n")).count(), 1, "one {class} in the package:\n{init}");
    }
}

#[test]
fn the_library_rules_are_refused_naming_the_field() {
    let launch = Launch::new();
    let p = Problem::new(&[1, 4, 64], 50);
    let x = tensor(&p.shape, &p.x, Dtype::F32);
    let w = tensor(&[64], &p.w, Dtype::F32);
    let kargs = RmsNormQuantKernelArgs::default();
    let err = |call: rmsnorm_quant_kernel::Call| call.launch(&launch).unwrap_err().message;
    let with = |k: RmsNormQuantKernelArgs| err(rmsnorm_quant_kernel::Call::new(&x, &w, &k));
    // The members the kernel does not implement, named with the field.
    for q in [QuantizationType::NONE, QuantizationType::MX, QuantizationType::STATIC_MX, QuantizationType::ROW_MX] {
        let e = with(RmsNormQuantKernelArgs { quantization_type: q, ..kargs.clone() });
        let want = format!(
            "kargs.quantization_type must be QuantizationType.ROW or QuantizationType.STATIC (the members implemented), got kargs.quantization_type = QuantizationType.{q:?}"
        );
        assert!(e.contains(&want), "{e}");
    }
    for n in [NormType::LAYER_NORM, NormType::RMS_NORM_SKIP_GAMMA] {
        let e = with(RmsNormQuantKernelArgs { norm_type: n, ..kargs.clone() });
        let want = format!(
            "kargs.norm_type must be NormType.NO_NORM or NormType.RMS_NORM (the members implemented), got kargs.norm_type = NormType.{n:?}"
        );
        assert!(e.contains(&want), "{e}");
    }
    let e = with(RmsNormQuantKernelArgs { lower_bound: -1.0, ..kargs.clone() });
    assert!(e.contains("kargs.lower_bound must be non-negative, got kargs.lower_bound = -1.0"), "{e}");
    let e = with(RmsNormQuantKernelArgs { eps: -1e-3, ..kargs.clone() });
    assert!(e.contains("kargs.eps must be non-negative"), "{e}");
    let static_kargs = RmsNormQuantKernelArgs { quantization_type: QuantizationType::STATIC, ..kargs.clone() };
    let e = with(static_kargs.clone());
    assert!(e.contains("input_dequant_scale must be given for static quantization"), "{e}");
    let bad_sc = tensor(&[64, 1], &[1.0; 64], Dtype::F32);
    let e = err(rmsnorm_quant_kernel::Call::new(&x, &w, &static_kargs).input_dequant_scale(&bad_sc));
    assert!(e.contains("input_dequant_scale must be broadcast to [128, 1], got"), "{e}");
    // With row quantization the static scale is not used (nor checked), as in the library.
    let ok = rmsnorm_quant_kernel::Call::new(&x, &w, &kargs).input_dequant_scale(&bad_sc).launch(&launch).unwrap();
    assert_eq!(bytes_of(&ok), bytes_of(&rmsnorm_quant_kernel::Call::new(&x, &w, &kargs).launch(&launch).unwrap()));
    let w_short = tensor(&[32], &p.w[..32], Dtype::F32);
    let e = err(rmsnorm_quant_kernel::Call::new(&x, &w_short, &kargs));
    assert!(e.contains("ln_w must have H = 64 elements, got 32"), "{e}");
    let w_2 = tensor(&[2, 64], &[1.0; 128], Dtype::F32);
    let e = err(rmsnorm_quant_kernel::Call::new(&x, &w_2, &kargs));
    assert!(e.contains("ln_w must be [H] or [1, H], got [2, 64]"), "{e}");
    let big_b = tensor(&[3, 1, 64], &[1.0; 192], Dtype::F32);
    let e = err(rmsnorm_quant_kernel::Call::new(&big_b, &w, &kargs));
    assert!(e.contains("hidden: B = 3 exceeds MAX_B = 2"), "{e}");
    let big_h = tensor(&[1, 16385], &vec![1.0; 16385], Dtype::F32);
    let e = err(rmsnorm_quant_kernel::Call::new(&big_h, &tensor(&[16385], &vec![1.0; 16385], Dtype::F32), &kargs));
    assert!(e.contains("hidden: H = 16385 exceeds MAX_H = 16384"), "{e}");
    let flat = tensor(&[64], &p.w, Dtype::F32);
    let e = err(rmsnorm_quant_kernel::Call::new(&flat, &w, &kargs));
    assert!(e.contains("hidden must have 2 or 3 dims, got 1"), "{e}");
    // One row cannot be split over two programs.
    let one = tensor(&[1, 64], &p.w, Dtype::F32);
    let e = rmsnorm_quant_kernel::Call::new(&one, &w, &kargs).launch(&Launch::new().lnc(2)).unwrap_err().message;
    assert!(e.contains("the outer dim 1 is too small to give each of the 2 programs a row"), "{e}");
    // Integer tensors are refused by the declared dtypes.
    let ints = Tensor::from_i64(&[1, 64], &[1; 64], Dtype::I32).unwrap();
    let e = rmsnorm_quant_kernel::Call::new(&ints, &w, &kargs).launch(&launch).unwrap_err();
    assert_eq!(e.message, "invalid hidden = int32: rmsnorm_quant_kernel takes hidden as float32, bfloat16 or float16");
    assert!(e.to_string().contains("rmsnorm_quant.rs:"), "the error points at the declaration: {e}");
    // The same rules as a `const fn`, for compile-time checks.
    let l = LIBRARY_DEFAULTS;
    assert_eq!(rmsnorm_quant_violation(&l, 3, [2, 32768, 16384]), None);
    assert_eq!(rmsnorm_quant_violation(&l, 3, [2, 32769, 16384]), Some(RmsNormQuantRule::Seq));
    assert_eq!(rmsnorm_quant_violation(&l, 2, [65537, 0, 64]), Some(RmsNormQuantRule::Outer));
    assert_eq!(rmsnorm_quant_violation(&l, 4, [1, 1, 1]), Some(RmsNormQuantRule::Rank));
    for (k, rule, field) in [
        (RmsNormQuantKernelArgs { norm_type: NormType::RMS_NORM_SKIP_GAMMA, ..l.clone() }, RmsNormQuantRule::NormType, "norm_type"),
        (RmsNormQuantKernelArgs { norm_type: NormType::LAYER_NORM, ..l.clone() }, RmsNormQuantRule::NormType, "norm_type"),
        (RmsNormQuantKernelArgs { lower_bound: -1.0, ..l.clone() }, RmsNormQuantRule::LowerBound, "lower_bound"),
        (RmsNormQuantKernelArgs { lower_bound: f64::NAN, ..l.clone() }, RmsNormQuantRule::LowerBound, "lower_bound"),
        (RmsNormQuantKernelArgs { eps: -1e-9, ..l.clone() }, RmsNormQuantRule::Eps, "eps"),
        (
            RmsNormQuantKernelArgs { quantization_type: QuantizationType::NONE, ..l.clone() },
            RmsNormQuantRule::QuantizationType,
            "quantization_type",
        ),
        (
            RmsNormQuantKernelArgs { quantization_type: QuantizationType::ROW_MX, ..l.clone() },
            RmsNormQuantRule::QuantizationType,
            "quantization_type",
        ),
    ] {
        assert_eq!(rmsnorm_quant_violation(&k, 3, [1, 1, 1]), Some(rule));
        assert!(rule.message().contains(&format!("kargs.{field} must be")), "{}", rule.message());
    }
    let (k, hidden) = nkilib::rmsnorm_quant_config!(
        kargs =
            RmsNormQuantKernelArgs { lower_bound: 0.5, norm_type: NormType::NO_NORM, quantization_type: QuantizationType::ROW, eps: 0.0 },
        hidden = [2, 160, 16384]
    );
    assert_eq!((k.lower_bound, k.norm_type, hidden), (0.5, NormType::NO_NORM, [2, 160, 16384]));
}

/// NumPy's run of the emitted kernel against the emulator's, value for value
/// (NaN where the packed scale bytes are NaN codes, in both).
#[test]
fn emitted_kernel_under_numpy_matches_the_emulator() {
    let shape = [1usize, 130, 600];
    let p = Problem::new(&shape, 60);
    for (a, precision, mode) in [(ROW_RMS, Precision::Hardware, "hardware"), (ROW_RMS, Precision::Fp32, "fp32")].into_iter().chain([(
        Args { row: false, static_scale: 1.0 / 64.0, lower_bound: 0.0, ..ROW_RMS },
        Precision::Hardware,
        "hardware",
    )]) {
        let emu: Vec<f32> = p.run(Dtype::Bf16, &Launch::new().precision(precision), a).unwrap().to_f32_vec();
        let mut args = vec![
            Arg::Tensor(shape.to_vec(), p.x.clone(), Dtype::Bf16),
            Arg::Tensor(vec![shape[2]], p.w.clone(), Dtype::Bf16),
            kargs_arg(a.kargs()),
        ];
        if !a.row {
            args.push(Arg::Tensor(vec![128, 1], vec![a.static_scale; 128], Dtype::F32));
        }
        let np = &run_numpy_kwargs(emitted_package(), "rmsnorm_quant_kernel", &args, &[], 1, mode)[0];
        assert_eq!(np.len(), emu.len());
        for (i, (g, e)) in np.iter().zip(&emu).enumerate() {
            assert!(g == e || (g.is_nan() && e.is_nan()), "{mode} row={}: element {i}: numpy {g} vs emulator {e}", a.row);
        }
    }
    // A field value the library refuses is refused by the emitted kernel too, naming the field.
    let x = Arg::Tensor(shape.to_vec(), p.x.clone(), Dtype::Bf16);
    let w = Arg::Tensor(vec![shape[2]], p.w.clone(), Dtype::Bf16);
    let bad = kargs_arg(RmsNormQuantKernelArgs { norm_type: NormType::LAYER_NORM, ..LIBRARY_DEFAULTS });
    let e = run_numpy_refused(emitted_package(), "rmsnorm_quant_kernel", &[x.clone(), w.clone()], &[("kargs", bad)]);
    let want = "kargs.norm_type must be NormType.NO_NORM or NormType.RMS_NORM (the members implemented), got kargs.norm_type = NormType.LAYER_NORM";
    assert!(e.contains(want), "{e}");
    // The member's integer value is not the member: the emitted kernel checks the field's class.
    let int = Arg::Object("RmsNormQuantKernelArgs", vec![("norm_type", Arg::Int(1))]);
    let e = run_numpy_refused(emitted_package(), "rmsnorm_quant_kernel", &[x, w], &[("kargs", int)]);
    assert!(e.contains("kargs.norm_type=1 is not a NormType member (NO_NORM, RMS_NORM, LAYER_NORM, RMS_NORM_SKIP_GAMMA)"), "{e}");
}

/// `kargs` as the NumPy executor's `RmsNormQuantKernelArgs` object.
fn kargs_arg(k: RmsNormQuantKernelArgs) -> Arg {
    Arg::Object(
        "RmsNormQuantKernelArgs",
        vec![
            ("lower_bound", Arg::Float(k.lower_bound)),
            ("norm_type", Arg::Member(NormType::CLASS, k.norm_type.member())),
            ("quantization_type", Arg::Member(QuantizationType::CLASS, k.quantization_type.member())),
            ("eps", Arg::Float(k.eps)),
        ],
    )
}
