//! `mlp` with MX quantization (trn3, the decode path) against a float64 MLP
//! written from the MX format's description. Packed weight element `(p, t,
//! c)` of the gate and up weights `[128, H/512, I]` holds, in value `k`
//! (byte or nibble `k`), the weight of hidden position `k·H/4 + t·128 + p`
//! (the pre-shuffled hidden order) for column `c`, times `2^(s - 127)` for
//! the `uint8` scale `s` at `(p / 8, t, c)`. The gated product's column
//! `it·512 + j·w/4 + p` (`w` the columns of its 512-column tile) meets value
//! `j` of the down weights' packed row `p` of tile `it`. Activations are
//! quantized per 32 values (8 packed rows x 4 values) with the scale
//! `2^(floor(log2 amax) - 7)` and elements rounded to nearest even in e4m3.
//! At the library's MX test sizes, in both precision modes; the emitted
//! source under NumPy against the emulator; the MX rules.

use crate::common::{
    Arg, CaseName, FP32_ATOL, RankArgs, as_dtype, assert_close, assert_refused_by, package_of, seed_of, spec_run, tensor, uniform,
};
use crate::mx_format::{e2m1fn, e4m3fn, e5m2, quantize_e4m3fn_groups};
use nki::{Dtype, Launch, Precision, Tensor};
use nkilib::mlp::mlp::{NormType, QuantizationType, mlp};
use nkilib::mlp::mlp_parameters::{MlpCall, MlpRule, mlp_violation};

/// The weights' MX element type.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum W {
    Fp4,
    E4m3,
    E5m2,
}

impl W {
    pub(crate) fn dtype(self) -> Dtype {
        match self {
            W::Fp4 => Dtype::Fp4E2m1Fnx4,
            W::E4m3 => Dtype::Fp8E4m3Fnx4,
            W::E5m2 => Dtype::Fp8E5m2x4,
        }
    }

    fn bits(self) -> u32 {
        if self == W::Fp4 { 4 } else { 8 }
    }

    fn value(self, code: u32) -> f64 {
        match self {
            W::Fp4 => e2m1fn(code),
            W::E4m3 => e4m3fn(code),
            W::E5m2 => e5m2(code),
        }
    }

    /// A finite code from a uniform draw in `[0, 1)`.
    fn code(self, u: f64) -> u32 {
        match self {
            W::Fp4 => (u * 16.0) as u32,
            W::E4m3 => {
                let c = (u * 254.0) as u32;
                if c >= 0x7f { c + 1 } else { c }
            }
            // Exponent 31 (infinities and NaNs) left out, either sign.
            W::E5m2 => {
                let c = (u * 248.0) as u32;
                if c >= 0x7c { c + 4 } else { c }
            }
        }
    }
}

/// One MX configuration of the library's `test_mlp_tkg.py` (`S = 1`, the
/// three projection biases together).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Mx {
    pub(crate) lnc: usize,
    pub(crate) t: usize,
    pub(crate) h: usize,
    pub(crate) i: usize,
    pub(crate) w: W,
    pub(crate) rms: bool,
    pub(crate) bias: bool,
}

pub(crate) const fn mx(lnc: usize, t: usize, h: usize, i: usize, w: W, rms: bool, bias: bool) -> Mx {
    Mx { lnc, t, h, i, w, rms, bias }
}

/// The library's MX configurations but its `I = 3584` ones at `T = 64`,
/// which run here at `T = 8` (the float64 reference's cost; the library
/// comparison takes them at full size).
const MX_CONFIGS: &[Mx] = &[
    mx(1, 2, 3072, 384, W::Fp4, false, true),
    mx(1, 2, 8192, 448, W::E4m3, false, true),
    mx(2, 4, 3072, 384, W::Fp4, true, false),
    mx(2, 4, 3072, 384, W::E4m3, true, false),
    mx(2, 64, 8192, 448, W::Fp4, false, true),
    mx(2, 64, 8192, 448, W::E5m2, true, true),
    mx(2, 8, 8192, 3584, W::Fp4, true, true),
    mx(2, 8, 8192, 3584, W::E4m3, false, true),
];

const EPS: f64 = 1e-6;
/// Packed rows of an MX tile.
pub(crate) const P: usize = 128;

/// A case's data: codes per packed element and value `[.., 4]`, biased
/// scale exponents, the token rows (pre-shuffled order), gamma and biases.
pub(crate) struct Data {
    pub(crate) x: Vec<f64>,
    pub(crate) gamma: Vec<f64>,
    pub(crate) gate: Vec<u32>,
    pub(crate) gate_s: Vec<f64>,
    pub(crate) up: Vec<u32>,
    pub(crate) up_s: Vec<f64>,
    pub(crate) down: Vec<u32>,
    pub(crate) down_s: Vec<f64>,
    pub(crate) gate_b: Vec<f64>,
    pub(crate) up_b: Vec<f64>,
    pub(crate) down_b: Vec<f64>,
}

/// The gate clamp's upper bound and the up clamp's bounds (upper, lower).
pub(crate) type Clamps = [Option<f64>; 3];

impl Mx {
    pub(crate) fn n_h(&self) -> usize {
        self.h / 512
    }

    pub(crate) fn n_i(&self) -> usize {
        self.i.div_ceil(512)
    }

    /// Packed rows of the down weights (`I / 4` below 512 columns).
    pub(crate) fn p_i(&self) -> usize {
        if self.i < 512 { self.i / 4 } else { P }
    }

    /// Rows of the gate/up biases (`I / 4` up to 512 columns).
    pub(crate) fn b_p(&self) -> usize {
        if self.i <= 512 { self.i / 4 } else { P }
    }

    fn codes(&self, n: usize, seed: u64) -> Vec<u32> {
        uniform(n, seed, 0.0, 1.0).iter().map(|&u| self.w.code(u)).collect()
    }

    fn scales(&self, n: usize, seed: u64) -> Vec<f64> {
        uniform(n, seed, 118.0, 123.0).iter().map(|v| v.floor()).collect()
    }

    fn data(&self) -> Data {
        self.data_seeded(seed_of(&self.name()))
    }

    /// Random rows, weights, scales and biases drawn from `seed`.
    pub(crate) fn data_seeded(&self, seed: u64) -> Data {
        let (h, i, n_h, n_i) = (self.h, self.i, self.n_h(), self.n_i());
        let bf = |n: usize, s: u64, lo: f64, hi: f64| as_dtype(&uniform(n, seed + s, lo, hi), Dtype::Bf16);
        Data {
            x: bf(self.t * h, 0, -1.0, 1.0),
            gamma: bf(h, 1, 0.5, 1.5),
            gate: self.codes(P * n_h * i * 4, seed + 2),
            gate_s: self.scales(16 * n_h * i, seed + 3),
            up: self.codes(P * n_h * i * 4, seed + 4),
            up_s: self.scales(16 * n_h * i, seed + 5),
            down: self.codes(self.p_i() * n_i * h * 4, seed + 6),
            down_s: self.scales(self.p_i() / 8 * n_i * h, seed + 7),
            gate_b: bf(self.b_p() * n_i * 4, 8, -1.0, 1.0),
            up_b: bf(self.b_p() * n_i * 4, 9, -1.0, 1.0),
            down_b: bf(h, 10, -1.0, 1.0),
        }
    }

    /// The packed words of `codes` (`[.., 4]`), value `k` in bits `k·bits..`.
    pub(crate) fn words(&self, codes: &[u32]) -> Vec<i64> {
        codes.chunks(4).map(|c| (0..4).map(|k| i64::from(c[k]) << (self.w.bits() * k as u32)).sum()).collect()
    }

    /// Every code's value, indexed by the code (decoded once per weight
    /// tensor rather than per element).
    fn values(&self) -> Vec<f64> {
        (0..1u32 << self.w.bits()).map(|code| self.w.value(code)).collect()
    }

    /// The gate (or up) weight of hidden position `k·H/4 + t·128 + p`, column
    /// `c`, from the code values and the scales' powers `2^(s - 127)`.
    fn gate_up_weight(&self, (values, pow): (&[f64], &[f64]), codes: &[u32], p: usize, t: usize, c: usize, k: usize) -> f64 {
        let (n_h, i) = (self.n_h(), self.i);
        values[codes[((p * n_h + t) * i + c) * 4 + k] as usize] * pow[((p / 8) * n_h + t) * i + c]
    }

    /// `[T][I]`: each token's quantized rows `xl` (`[(t·128 + p)·4 + k]`)
    /// times the weights, plus the bias of each column's layout slot. Each
    /// program sums its share of the MX tiles (the bias on the first) and
    /// the shares are added; with `hw` every partial sum is rounded to
    /// bfloat16, as the kernel's bfloat16 PSUM and SBUF tiles hold them.
    fn project(&self, xl: &[Vec<f64>], codes: &[u32], scales: &[f64], bias: &[f64], hw: bool) -> Vec<Vec<f64>> {
        let (n_h, i, n_i) = (self.n_h(), self.i, self.n_i());
        let r = |v: f64| if hw { as_dtype(&[v], Dtype::Bf16)[0] } else { v };
        let share = n_h / self.lnc * P * 4;
        let mut out = vec![vec![0.0; i]; self.t];
        let mut col = vec![0.0; n_h * P * 4];
        let (values, pow) = (self.values(), scale_powers(scales));
        for c in 0..i {
            for t in 0..n_h {
                for p in 0..P {
                    for k in 0..4 {
                        col[(t * P + p) * 4 + k] = self.gate_up_weight((&values, &pow), codes, p, t, c, k);
                    }
                }
            }
            let (it, rem) = (c / 512, c % 512);
            let rows = (i - it * 512).min(512) / 4;
            let b = if self.bias { bias[((rem % rows) * n_i + it) * 4 + rem / rows] } else { 0.0 };
            for (x, row) in xl.iter().zip(out.iter_mut()) {
                let shares = x.chunks(share).zip(col.chunks(share)).map(|(a, w)| tile_sums(a, w, r));
                row[c] = r(shares.enumerate().map(|(k, v)| r(v + if k == 0 { b } else { 0.0 })).sum::<f64>());
            }
        }
        out
    }

    /// The float64 MLP `[T][H]`; with `hw` the values the kernel stores in
    /// bfloat16 (normalised rows, projections, activation, product, output)
    /// rounded so.
    fn reference(&self, d: &Data, hw: bool) -> Vec<f64> {
        let silu = |g: f64| g / (1.0 + (-g).exp());
        let pl = self.gated_rows(d, &self.quantized_rows(d, hw), hw, &silu, [None; 3]);
        self.down_rows(d, &pl, hw)
    }

    /// The (normalised) rows in the quantization layout, quantized:
    /// `[T][(t·128 + p)·4 + k]`.
    pub(crate) fn quantized_rows(&self, d: &Data, hw: bool) -> Vec<Vec<f64>> {
        let (h, n_h) = (self.h, self.n_h());
        let r = |v: f64| if hw { as_dtype(&[v], Dtype::Bf16)[0] } else { v };
        (0..self.t)
            .map(|tok| {
                let row = &d.x[tok * h..(tok + 1) * h];
                let y: Vec<f64> = if self.rms {
                    let s = 1.0 / (row.iter().map(|a| a * a).sum::<f64>() / h as f64 + EPS).sqrt();
                    row.iter().zip(&d.gamma).map(|(a, g)| r(a * g * s)).collect()
                } else {
                    row.to_vec()
                };
                let mut l = vec![0.0; n_h * P * 4];
                for t in 0..n_h {
                    for p in 0..P {
                        for k in 0..4 {
                            l[(t * P + p) * 4 + k] = y[k * h / 4 + t * P + p];
                        }
                    }
                }
                quantize_e4m3fn_groups(&mut l);
                l
            })
            .collect()
    }

    /// The gated product `act(clamp(gate)) · clamp(up)` of the quantized
    /// rows `xl` in the down layout `[T][(it·128 + p)·4 + j]`, quantized.
    pub(crate) fn gated_rows(&self, d: &Data, xl: &[Vec<f64>], hw: bool, act: &dyn Fn(f64) -> f64, clamps: Clamps) -> Vec<Vec<f64>> {
        let (i, n_i) = (self.i, self.n_i());
        let r = |v: f64| if hw { as_dtype(&[v], Dtype::Bf16)[0] } else { v };
        let gate = self.project(xl, &d.gate, &d.gate_s, &d.gate_b, hw);
        let up = self.project(xl, &d.up, &d.up_s, &d.up_b, hw);
        let [gate_hi, up_hi, up_lo] = clamps;
        (0..self.t)
            .map(|tok| {
                let mut l = vec![0.0; n_i * P * 4];
                for c in 0..i {
                    let (it, rem) = (c / 512, c % 512);
                    let rows = (i - it * 512).min(512) / 4;
                    let g = gate_hi.map_or(gate[tok][c], |b| gate[tok][c].min(b));
                    let u = up_hi.map_or(up[tok][c], |b| up[tok][c].min(b));
                    let u = up_lo.map_or(u, |b| u.max(b));
                    l[(it * P + rem % rows) * 4 + rem / rows] = r(r(act(g)) * u);
                }
                quantize_e4m3fn_groups(&mut l);
                l
            })
            .collect()
    }

    /// The down projection of the quantized product `pl` plus the down
    /// bias, `[T·H]`.
    pub(crate) fn down_rows(&self, d: &Data, pl: &[Vec<f64>], hw: bool) -> Vec<f64> {
        let (h, n_i) = (self.h, self.n_i());
        let r = |v: f64| if hw { as_dtype(&[v], Dtype::Bf16)[0] } else { v };
        let p_i = self.p_i();
        let mut out = vec![0.0; self.t * h];
        let mut col = vec![0.0; n_i * P * 4];
        let (values, pow) = (self.values(), scale_powers(&d.down_s));
        for c in 0..h {
            for it in 0..n_i {
                for p in 0..p_i {
                    let s = pow[((p / 8) * n_i + it) * h + c];
                    for j in 0..4 {
                        col[(it * P + p) * 4 + j] = values[d.down[((p * n_i + it) * h + c) * 4 + j] as usize] * s;
                    }
                }
            }
            let b = if self.bias { d.down_b[c] } else { 0.0 };
            for tok in 0..self.t {
                out[tok * h + c] = r(tile_sums(&pl[tok], &col, r) + b);
            }
        }
        out
    }

    fn tensors(&self, d: &Data) -> [Tensor; 7] {
        let (h, i, n_h, n_i, dt) = (self.h, self.i, self.n_h(), self.n_i(), self.w.dtype());
        let packed = |codes: &[u32], shape: &[usize]| Tensor::from_i64(shape, &self.words(codes), dt).unwrap();
        [
            tensor(&[self.t, 1, h], &d.x, Dtype::Bf16),
            packed(&d.gate, &[P, n_h, i]),
            packed(&d.up, &[P, n_h, i]),
            packed(&d.down, &[self.p_i(), n_i, h]),
            tensor(&[16, n_h, i], &d.gate_s, Dtype::U8),
            tensor(&[16, n_h, i], &d.up_s, Dtype::U8),
            tensor(&[self.p_i() / 8, n_i, h], &d.down_s, Dtype::U8),
        ]
    }

    /// The emulator's output.
    fn run(&self, d: &Data, precision: Precision) -> Vec<f32> {
        let tensors = self.tensors(d);
        let (h, n_i) = (self.h, self.n_i());
        let gamma = tensor(&[1, h], &d.gamma, Dtype::Bf16);
        let gb = tensor(&[self.b_p(), n_i, 4], &d.gate_b, Dtype::Bf16);
        let ub = tensor(&[self.b_p(), n_i, 4], &d.up_b, Dtype::Bf16);
        let db = tensor(&[1, h], &d.down_b, Dtype::Bf16);
        let mut call = mx_call(&tensors).eps(EPS);
        if self.rms {
            call = call.normalization_type(NormType::RMS_NORM).normalization_weights_tensor(&gamma);
        }
        if self.bias {
            call = call.gate_proj_bias_tensor(&gb).up_proj_bias_tensor(&ub).down_proj_bias_tensor(&db);
        }
        let launch = Launch::new().lnc(self.lnc).precision(precision).generation(nki::hw::Generation::Trn3);
        let out = call.launch(&launch).unwrap_or_else(|e| panic!("{}: {e}", self.name()));
        assert_eq!(out.0[0].shape(), &[self.t, 1, h], "{}", self.name());
        out.0[0].to_f32_vec()
    }

    /// The kernel's arguments for the NumPy executor.
    fn numpy_call(&self, d: &Data) -> (Vec<Arg>, Vec<(&'static str, Arg)>) {
        let (h, i, n_h, n_i, dt) = (self.h, self.i, self.n_h(), self.n_i(), self.w.dtype());
        let words = |codes: &[u32]| self.words(codes).iter().map(|&w| w as f64).collect::<Vec<f64>>();
        let mut kw = vec![
            ("quantization_type", Arg::Member("QuantizationType", "MX")),
            ("use_tkg_gate_up_proj_column_tiling", Arg::Bool(false)),
            ("use_tkg_down_proj_column_tiling", Arg::Bool(false)),
            ("gate_w_scale", Arg::Tensor(vec![16, n_h, i], d.gate_s.clone(), Dtype::U8)),
            ("up_w_scale", Arg::Tensor(vec![16, n_h, i], d.up_s.clone(), Dtype::U8)),
            ("down_w_scale", Arg::Tensor(vec![self.p_i() / 8, n_i, h], d.down_s.clone(), Dtype::U8)),
            ("eps", Arg::Float(EPS)),
        ];
        if self.rms {
            kw.push(("normalization_type", Arg::Member("NormType", "RMS_NORM")));
            kw.push(("normalization_weights_tensor", Arg::Tensor(vec![1, h], d.gamma.clone(), Dtype::Bf16)));
        }
        if self.bias {
            kw.push(("gate_proj_bias_tensor", Arg::Tensor(vec![self.b_p(), n_i, 4], d.gate_b.clone(), Dtype::Bf16)));
            kw.push(("up_proj_bias_tensor", Arg::Tensor(vec![self.b_p(), n_i, 4], d.up_b.clone(), Dtype::Bf16)));
            kw.push(("down_proj_bias_tensor", Arg::Tensor(vec![1, h], d.down_b.clone(), Dtype::Bf16)));
        }
        let args = vec![
            Arg::Tensor(vec![self.t, 1, h], d.x.clone(), Dtype::Bf16),
            Arg::Tensor(vec![P, n_h, i], words(&d.gate), dt),
            Arg::Tensor(vec![P, n_h, i], words(&d.up), dt),
            Arg::Tensor(vec![self.p_i(), n_i, h], words(&d.down), dt),
        ];
        (args, kw)
    }
}

/// The MX call of `[hidden, gate, up, down weights, their scales]` with
/// both column tilings off (as the library's MX path needs).
fn mx_call(t: &[Tensor; 7]) -> mlp::Call<'_> {
    mlp::Call::new(&t[0], &t[1], &t[2], &t[3])
        .quantization_type(QuantizationType::MX)
        .use_tkg_gate_up_proj_column_tiling(false)
        .use_tkg_down_proj_column_tiling(false)
        .gate_w_scale(&t[4])
        .up_w_scale(&t[5])
        .down_w_scale(&t[6])
}

/// The block scales' powers `2^(s - 127)` (`s` a biased exponent).
fn scale_powers(scales: &[f64]) -> Vec<f64> {
    scales.iter().map(|s| 2f64.powf(s - 127.0)).collect()
}

/// `Σ a·w` over 512-value MX tiles, each tile's sum added to the running
/// sum and rounded by `r` (a PSUM accumulation).
pub(crate) fn tile_sums(a: &[f64], w: &[f64], r: impl Fn(f64) -> f64) -> f64 {
    a.chunks(P * 4).zip(w.chunks(P * 4)).fold(0.0, |acc, (a, w)| r(acc + a.iter().zip(w).map(|(a, w)| a * w).sum::<f64>()))
}

/// Checks `cfg` in `precision` against the float64 reference within `rel`
/// of the output's largest magnitude.
fn check(cfg: &Mx, precision: Precision, rel: f64) {
    let d = cfg.data();
    let got = cfg.run(&d, precision);
    let want = cfg.reference(&d, precision == Precision::Hardware);
    assert_close(&format!("{} {precision:?}", cfg.name()), &got, &want, FP32_ATOL, rel);
}

/// fp32 precision: the activations take the reference's e4m3 codes, only
/// the fp32 summation differs.
#[test]
fn mlp_tkg_mx_in_fp32_match_float64() {
    for cfg in MX_CONFIGS {
        check(cfg, Precision::Fp32, 1e-5);
    }
}

/// Hardware precision: the reference rounds every partial sum, the
/// activation, the product and the output to bfloat16 as the kernel's
/// tiles hold them; an fp32 sum a bfloat16 step from the float64 one may
/// round the other way (and move an e4m3 code), a few thousandths of the
/// output's scale.
#[test]
fn mlp_tkg_mx_in_hardware_precision_match_float64() {
    for cfg in MX_CONFIGS {
        check(cfg, Precision::Hardware, 1.0 / 128.0);
    }
}

/// The emitted `mlp` MX path under NumPy agrees with the emulator in both
/// modes, up to the matmuls' float32 sums (NumPy's order against the
/// emulator's): fp32 within 1e-5 of the output's scale; in hardware
/// precision a sum on the other side of a bfloat16 rounding boundary moves
/// an element by a bfloat16 step.
#[test]
fn mlp_tkg_mx_emitted_under_numpy_equals_emulator() {
    let pkg = package_of("mlp_tkg_mx_pkg", &[&mlp::INFO]);
    for cfg in [mx(1, 2, 3072, 384, W::Fp4, false, true), mx(2, 4, 3072, 1024, W::E5m2, true, true)] {
        let d = cfg.data();
        check_numpy_trn3(&pkg, "mlp", &cfg.name(), cfg.lnc, || cfg.numpy_call(&d), |p| cfg.run(&d, p));
    }
}

/// The trn3 kernel `kernel` of `pkg` under NumPy on `args` against the
/// emulator (`emulate`) in both modes, up to the matmuls' float32 sums:
/// fp32 within 1e-5 of the output's scale; in hardware precision a sum on
/// the other side of a bfloat16 rounding boundary moves an element by a
/// bfloat16 step.
pub(crate) fn check_numpy_trn3(
    pkg: &std::path::Path,
    kernel: &str,
    name: &str,
    lnc: usize,
    args: impl Fn() -> RankArgs<'static>,
    emulate: impl Fn(Precision) -> Vec<f32>,
) {
    for (precision, mode, rtol) in [(Precision::Fp32, "fp32", 1e-5), (Precision::Hardware, "hardware", 2f64.powi(-7))] {
        let emu = emulate(precision);
        let run = spec_run(pkg, kernel, &[args()], lnc, mode, "trn3");
        assert!(run.ok, "{name} {mode}: NumPy run failed:\n{}\n{}", run.stdout, run.stderr);
        let np = run.outputs(kernel, 1).swap_remove(0);
        let np: Vec<f32> = np[0].iter().map(|&v| v as f32).collect();
        let want: Vec<f64> = emu.iter().map(|&v| f64::from(v)).collect();
        assert_close(&format!("{name} {mode}"), &np, &want, FP32_ATOL, rtol);
    }
}

/// The MX rules, as `const fn` and when the kernel is traced.
#[test]
fn mlp_tkg_mx_rules_refuse_by_name() {
    let ok = MlpCall {
        tokens: 8,
        hidden: 4096,
        intermediate: 1024,
        programs: 2,
        normalization_type: NormType::RMS_NORM,
        has_norm_bias: false,
        quantization_type: QuantizationType::MX,
        store_output_in_sbuf: false,
        use_tkg_down_proj_column_tiling: false,
        use_tkg_gate_up_proj_column_tiling: false,
        skip_gate_proj: false,
        use_tkg_down_proj_optimized_layout: false,
        force_cte_mode: false,
        has_projection_bias: true,
        clamped: false,
        quantized_input: false,
        has_fused_add: false,
    };
    assert_eq!(mlp_violation(ok), None);
    assert_eq!(mlp_violation(MlpCall { intermediate: 448, ..ok }), None);
    let cases = [
        (MlpCall { tokens: 97, ..ok }, MlpRule::MxTokenGeneration),
        (MlpCall { force_cte_mode: true, ..ok }, MlpRule::MxTokenGeneration),
        (MlpCall { hidden: 3840, ..ok }, MlpRule::MxHidden),
        (MlpCall { intermediate: 1536 + 128, ..ok }, MlpRule::MxIntermediate),
        (MlpCall { intermediate: 400, ..ok }, MlpRule::MxIntermediate),
        (MlpCall { normalization_type: NormType::LAYER_NORM, ..ok }, MlpRule::MxNorm),
        (MlpCall { use_tkg_gate_up_proj_column_tiling: true, ..ok }, MlpRule::MxColumnTiling),
        (MlpCall { use_tkg_down_proj_column_tiling: true, ..ok }, MlpRule::MxColumnTiling),
        (MlpCall { has_fused_add: true, ..ok }, MlpRule::MxFusedAdd),
        (MlpCall { clamped: true, ..ok }, MlpRule::MxOptions),
        (MlpCall { skip_gate_proj: true, ..ok }, MlpRule::MxOptions),
        (MlpCall { programs: 4, ..ok }, MlpRule::MxShards),
        (MlpCall { quantization_type: QuantizationType::ROW_MX, ..ok }, MlpRule::Quantization),
    ];
    assert_refused_by(mlp_violation, cases);
    // H / 512 = 6 tiles split over two programs; 3 do not.
    assert_eq!(mlp_violation(MlpCall { hidden: 3072, ..ok }), None);
    assert_eq!(mlp_violation(MlpCall { hidden: 1536, ..ok }), Some(MlpRule::MxShards));

    let cfg = mx(1, 4, 512, 512, W::Fp4, false, false);
    let d = cfg.data();
    let tensors = cfg.tensors(&d);
    let x = &tensors[0];
    let call = || mx_call(&tensors);
    let trn3 = Launch::new().generation(nki::hw::Generation::Trn3);
    let ok = call().launch(&trn3);
    assert!(ok.is_ok(), "{:?}", ok.err());
    let refused = |c: mlp::Call, launch: &Launch, msg: &str| {
        let e = c.launch(launch).map(|_| ()).expect_err(msg).to_string();
        assert!(e.contains(msg), "{e}");
    };
    refused(call(), &Launch::new(), "quantization_type MX needs trn3");
    refused(call().use_tkg_down_proj_column_tiling(true), &trn3, "needs use_tkg_gate_up_proj_column_tiling=False");
    refused(call().skip_gate_proj(true), &trn3, "takes no gate/up clamp limits, skip_gate_proj");
    refused(call().fused_add_tensor(x), &trn3, "takes no fused_add_tensor");
    refused(call().normalization_type(NormType::LAYER_NORM), &trn3, "supports NormType.NO_NORM, RMS_NORM");
    let half = tensor(&[8, 1, 512], &[120.0; 8 * 512], Dtype::U8);
    refused(call().down_w_scale(&half), &trn3, "down_w_scale must be [16, 1, 512]");
    let b = tensor(&[1, 512], &[0.0; 512], Dtype::Bf16);
    refused(call().gate_proj_bias_tensor(&b), &trn3, "gate_proj_bias_tensor must be [128, 1, 4]");
}
