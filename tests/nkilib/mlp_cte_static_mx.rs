//! `mlp` with `QuantizationType.STATIC_MX` (trn3, the context-encoding path)
//! against a float64 MLP written from the documented computation: fp8 hidden
//! rows times `gate_up_in_scale`, `act(x·W_gate·s_gate) · (x·W_up·s_up)`
//! (or `act(x·W_up·s_up)`), the product divided by `down_in_scale`, clipped
//! to `±240` and rounded to `float8_e4m3`, projected by `W_down` and scaled
//! back by `s_down · down_in_scale`; the weights handed over in the
//! library's documented pre-shuffled layouts. Its `test_mlp_cte.py`
//! `STATIC_MX` list (`S = 10240`, `H` 8192 and 5120, `I` up to 7168 on
//! LNC2) shrunk to the smallest sizes that take the same paths: `I` split
//! over the programs, the tokens split with a partial tile, and one program
//! over several token tiles with a partial last one; then the emitted kernel
//! under NumPy against the emulator, and the rules.

use crate::common::{Arg, CaseName, as_dtype, assert_close_per_element, assert_refused_by, package_of, seed_of, tensor, uniform};
use crate::mlp::activation;
use crate::mlp_tkg_mx::check_numpy_trn3;
use crate::support::token_case;
use nki::{Dtype, Launch, Precision, Tensor};
use nkilib::mlp::mlp::{ActFnType, NormType, QuantizationType, mlp};
use nkilib::mlp::mlp_parameters::{MlpCall, MlpRule, mlp_violation};

token_case! {
    /// One configuration: `(B, S, H, I)`, the LNC size, `skip_gate_proj` and
    /// the activation.
    struct StaticMx {
        i: usize,
        skip_gate: bool,
        act: ActFnType,
    }
}

const fn smx(lnc: usize, b: usize, s: usize, h: usize, i: usize) -> StaticMx {
    StaticMx { lnc, b, s, h, i, skip_gate: false, act: ActFnType::SiLU }
}

/// The library's loops at the smallest sizes that reach each of its paths
/// (its `S = 10240`, `H` 8192/5120 and `I` up to 7168 run the same tiles
/// many more times): `I` split over two programs (above `I = 4096` the
/// library splits `I` at any `H`; `H = 512`, 32 tokens under
/// `force_cte_mode`), two programs splitting the
/// tokens (150 each, a partial tile), and one program over two gate/up
/// token tiles (the last of 4 rows) with `skip_gate_proj` and GELU.
const CONFIGS: &[StaticMx] =
    &[smx(2, 1, 32, 512, 5120), smx(2, 2, 150, 1024, 512), StaticMx { skip_gate: true, act: ActFnType::GELU, ..smx(1, 1, 260, 1024, 512) }];

/// The static scales: `(gate_w, up_w, down_w, gate_up_in, down_in)`.
const SCALES: [f64; 5] = [0.004, 0.003, 0.005, 0.0625, 0.5];

/// One configuration's data: the hidden rows `[T, H]`, the logical weights
/// (`[H, I]`, `[H, I]`, `[I, H]`), all `float8_e4m3` values.
struct Data {
    x: Vec<f64>,
    gate: Vec<f64>,
    up: Vec<f64>,
    down: Vec<f64>,
}

/// Logical gate/up `[H, I]` in the documented pre-shuffle: stored element
/// `(p, b, e, g, f, 2a + d)` of `[128, H/512, I/512, 4, 128, 4]` holds row
/// `a·H/2 + 256·b + 2p + d`, column `512e + 4f + g`.
fn shuffle_gate_up(w: &[f64], h: usize, i: usize) -> Vec<f64> {
    let (nb, ne) = (h / 512, i / 512);
    let mut out = vec![0.0; h * i];
    for (at, v) in out.iter_mut().enumerate() {
        let k = at % 4;
        let f = at / 4 % 128;
        let g = at / 512 % 4;
        let e = at / 2048 % ne;
        let b = at / (2048 * ne) % nb;
        let p = at / (2048 * ne * nb);
        let row = (k / 2) * (h / 2) + 256 * b + 2 * p + k % 2;
        *v = w[row * i + 512 * e + 4 * f + g];
    }
    out
}

/// Logical down `[I, H]` in the documented pre-shuffle: stored element `(f,
/// e, c, g)` of `[128, I/512, H, 4]` holds row `512e + 4f + g`, column `c`.
fn shuffle_down(w: &[f64], i: usize, h: usize) -> Vec<f64> {
    let ne = i / 512;
    let mut out = vec![0.0; i * h];
    for (at, v) in out.iter_mut().enumerate() {
        let g = at % 4;
        let c = at / 4 % h;
        let e = at / (4 * h) % ne;
        let f = at / (4 * h * ne);
        *v = w[(512 * e + 4 * f + g) * h + c];
    }
    out
}

impl StaticMx {
    fn t(&self) -> usize {
        self.b * self.s
    }

    /// fp8 codes of order 16 everywhere (exact in `float8_e4m3`).
    fn data(&self) -> Data {
        let seed = seed_of(&self.name());
        let (t, h, i) = (self.t(), self.h, self.i);
        let fp8 = |n: usize, k: u64| as_dtype(&uniform(n, seed + k, -16.0, 16.0), Dtype::Fp8E4m3);
        Data { x: fp8(t * h, 0), gate: fp8(h * i, 1), up: fp8(h * i, 2), down: fp8(i * h, 3) }
    }

    /// The float64 output `[T, H]` and each element's magnitude (the sum of
    /// its terms' absolute values times the scales). With `hardware`, the
    /// activation, the product and its scaled copy are held in bfloat16 as
    /// the kernel's tiles hold them; the product's fp8 codes are rounded in
    /// both modes (`nc_matmul_mx` reads their bytes).
    fn reference(&self, d: &Data, hardware: bool) -> (Vec<f64>, Vec<f64>) {
        let (t, h, i) = (self.t(), self.h, self.i);
        let [sg, su, sd, sx, sdx] = SCALES;
        let bf = |v: f64| if hardware { as_dtype(&[v], Dtype::Bf16)[0] } else { v };
        let (mut out, mut mag) = (vec![0.0; t * h], vec![0.0; t * h]);
        // Row-major sums (each weight row read once per token).
        let project = |row: &[f64], w: &[f64], n: usize| {
            let mut acc = vec![0.0; n];
            for (k, x) in row.iter().enumerate() {
                for (a, wv) in acc.iter_mut().zip(&w[k * n..(k + 1) * n]) {
                    *a += x * wv;
                }
            }
            acc
        };
        let abs_down: Vec<f64> = d.down.iter().map(|v| v.abs()).collect();
        for tok in 0..t {
            let row = &d.x[tok * h..(tok + 1) * h];
            let up = project(row, &d.up, i);
            let gate = if self.skip_gate { vec![] } else { project(row, &d.gate, i) };
            let q: Vec<f64> = (0..i)
                .map(|col| {
                    let up = up[col] * sx;
                    let gu = if self.skip_gate {
                        bf(activation(self.act, up * su))
                    } else {
                        bf(bf(bf(activation(self.act, gate[col] * sx * sg)) * up / sx) * su * sx)
                    };
                    as_dtype(&[bf(gu / sdx).clamp(-240.0, 240.0)], Dtype::Fp8E4m3)[0]
                })
                .collect();
            let abs_q: Vec<f64> = q.iter().map(|v| v.abs()).collect();
            let (o, m) = (project(&q, &d.down, h), project(&abs_q, &abs_down, h));
            for col in 0..h {
                out[tok * h + col] = o[col] * sd * sdx;
                mag[tok * h + col] = m[col] * sd * sdx;
            }
        }
        (out, mag)
    }

    /// The kernel's tensors: hidden `[B, S, H]`, the stored weights, the scales.
    fn tensors(&self, d: &Data) -> [Tensor; 9] {
        let (b, s, h, i) = (self.b, self.s, self.h, self.i);
        let fp8 = |shape: &[usize], v: &[f64]| tensor(shape, v, Dtype::Fp8E4m3);
        let scale = |v: f64| tensor(&[128, 1], &[v; 128], Dtype::F32);
        [
            fp8(&[b, s, h], &d.x),
            fp8(&[h, i], &shuffle_gate_up(&d.gate, h, i)),
            fp8(&[h, i], &shuffle_gate_up(&d.up, h, i)),
            fp8(&[i, h], &shuffle_down(&d.down, i, h)),
            scale(SCALES[0]),
            scale(SCALES[1]),
            scale(SCALES[2]),
            scale(SCALES[3]),
            scale(SCALES[4]),
        ]
    }

    /// The emulator's output.
    fn run(&self, d: &Data, precision: Precision) -> Vec<f32> {
        let t = self.tensors(d);
        let call = static_mx_call(&t)
            .skip_gate_proj(self.skip_gate)
            .activation_fn(self.act)
            .force_cte_mode(self.t() <= 96)
            .output_dtype(Dtype::Bf16);
        let launch = Launch::new().lnc(self.lnc).precision(precision).generation(nki::hw::Generation::Trn3);
        let out = call.launch(&launch).unwrap_or_else(|e| panic!("{}: {e}", self.name()));
        out.0[0].to_f32_vec()
    }

    /// The kernel's arguments for the NumPy executor, by keyword.
    fn numpy_call(&self, d: &Data) -> (Vec<Arg>, Vec<(&'static str, Arg)>) {
        let (b, s, h, i) = (self.b, self.s, self.h, self.i);
        let fp8 = |shape: Vec<usize>, v: Vec<f64>| Arg::Tensor(shape, v, Dtype::Fp8E4m3);
        let scale = |v: f64| Arg::Tensor(vec![128, 1], vec![v; 128], Dtype::F32);
        let act = match self.act {
            ActFnType::SiLU => "SiLU",
            ActFnType::GELU => "GELU",
            ActFnType::GELU_Tanh_Approx => "GELU_Tanh_Approx",
            ActFnType::Swish => "Swish",
        };
        let kw = vec![
            ("hidden_tensor", fp8(vec![b, s, h], d.x.clone())),
            ("gate_proj_weights_tensor", fp8(vec![h, i], shuffle_gate_up(&d.gate, h, i))),
            ("up_proj_weights_tensor", fp8(vec![h, i], shuffle_gate_up(&d.up, h, i))),
            ("down_proj_weights_tensor", fp8(vec![i, h], shuffle_down(&d.down, i, h))),
            ("quantization_type", Arg::Member("QuantizationType", "STATIC_MX")),
            ("gate_w_scale", scale(SCALES[0])),
            ("up_w_scale", scale(SCALES[1])),
            ("down_w_scale", scale(SCALES[2])),
            ("gate_up_in_scale", scale(SCALES[3])),
            ("down_in_scale", scale(SCALES[4])),
            ("skip_gate_proj", Arg::Bool(self.skip_gate)),
            ("activation_fn", Arg::Member("ActFnType", act)),
            ("force_cte_mode", Arg::Bool(self.t() <= 96)),
            ("output_dtype", Arg::Dtype(Dtype::Bf16)),
        ];
        (vec![], kw)
    }
}

/// A `STATIC_MX` call of the tensors from [`StaticMx::tensors`].
fn static_mx_call(t: &[Tensor; 9]) -> mlp::Call<'_> {
    mlp::Call::new(&t[0], &t[1], &t[2], &t[3])
        .quantization_type(QuantizationType::STATIC_MX)
        .gate_w_scale(&t[4])
        .up_w_scale(&t[5])
        .down_w_scale(&t[6])
        .gate_up_in_scale(&t[7])
        .down_in_scale(&t[8])
}

/// Checks every element of `cfg` in `precision` within `rel · magnitude` of
/// the float64 output (the hardware reference for hardware precision).
fn check(cfg: &StaticMx, precision: Precision, rel: f64) {
    let d = cfg.data();
    let (want, mag) = cfg.reference(&d, precision == Precision::Hardware);
    let scale = mag.iter().fold(0.0f64, |m, v| m.max(*v));
    let what = format!("{} {precision:?}", cfg.name());
    assert_close_per_element(&what, &cfg.run(&d, precision), (&want, &mag), rel * 1e-3 * scale, rel);
}

/// fp32 precision: the fp8 operands are the reference's; the gated product
/// rounds to its fp8 codes as in the reference, so only the fp32 sums and
/// the bfloat16 output differ (a product element a hair from an fp8
/// rounding boundary may round the other way: one fp8 step of one term).
#[test]
fn mlp_cte_static_mx_in_fp32_match_float64() {
    for cfg in CONFIGS {
        check(cfg, Precision::Fp32, 1.0 / 64.0);
    }
}

/// Hardware precision: the bfloat16 PSUM rounds after each 512-row
/// contraction tile (up to 16 of them), the activation, product and output
/// round to bfloat16, and a product element moved by them may land on the
/// other side of an fp8 rounding boundary.
#[test]
fn mlp_cte_static_mx_in_hardware_precision_match_float64() {
    for cfg in CONFIGS {
        check(cfg, Precision::Hardware, 1.0 / 16.0);
    }
}

/// The emitted `STATIC_MX` path under NumPy agrees with the emulator in
/// both modes (one program over several token tiles, and two programs
/// splitting the tokens).
#[test]
fn mlp_cte_static_mx_emitted_under_numpy_equals_emulator() {
    let pkg = package_of("mlp_cte_static_mx_pkg", &[&mlp::INFO]);
    for cfg in [StaticMx { h: 512, ..CONFIGS[2] }, StaticMx { s: 130, h: 512, ..CONFIGS[1] }] {
        let d = cfg.data();
        check_numpy_trn3(&pkg, "mlp", &cfg.name(), cfg.lnc, || cfg.numpy_call(&d), |p| cfg.run(&d, p));
    }
}

/// The `STATIC_MX` rules, as `const fn` and when the kernel is traced.
#[test]
fn mlp_cte_static_mx_rules_refuse_by_name() {
    let ok = MlpCall {
        tokens: 256,
        hidden: 8192,
        intermediate: 1024,
        programs: 2,
        normalization_type: NormType::NO_NORM,
        quantization_type: QuantizationType::STATIC_MX,
        quantized_input: true,
        ..MlpCall::DEFAULTS
    };
    assert_eq!(mlp_violation(ok), None);
    // The library's `I = 7168` splits into two 3584-column halves, whole blocks.
    assert_eq!(mlp_violation(MlpCall { intermediate: 7168, ..ok }), None);
    let cases = [
        (MlpCall { tokens: 96, ..ok }, MlpRule::StaticMxTokenGeneration),
        (MlpCall { hidden: 8064, ..ok }, MlpRule::StaticMxTiles),
        (MlpCall { intermediate: 1152, programs: 1, ..ok }, MlpRule::StaticMxTiles),
        // H = 8192 with I = 3584 on LNC2 splits I into 1792-column halves.
        (MlpCall { intermediate: 3584, ..ok }, MlpRule::StaticMxShards),
        // 255 rows on each program splitting I; 131 on each splitting 262 tokens.
        (MlpCall { tokens: 255, ..ok }, MlpRule::StaticMxRows),
        (MlpCall { tokens: 262, ..ok }, MlpRule::StaticMxRows),
        (MlpCall { quantized_input: false, ..ok }, MlpRule::CteQuantization),
        (MlpCall { quantization_type: QuantizationType::ROW_MX, ..ok }, MlpRule::Quantization),
    ];
    assert_refused_by(mlp_violation, cases);
    // At trace time, by name.
    let cfg = smx(2, 1, 128, 7168, 1536);
    let d = cfg.data();
    let t = cfg.tensors(&d);
    let call = static_mx_call(&t);
    let trn3 = Launch::new().lnc(2).generation(nki::hw::Generation::Trn3);
    let err = call.launch(&trn3).expect_err("I / 2 = 768 is not whole blocks").to_string();
    assert!(err.contains("STATIC_MX needs I / programs to be a multiple of 512"), "{err}");
    let err = call.launch(&Launch::new().lnc(2)).expect_err("STATIC_MX needs trn3").to_string();
    assert!(err.contains("STATIC_MX needs trn3"), "{err}");
    let odd = smx(1, 1, 131, 512, 512);
    let d = odd.data();
    let t = odd.tensors(&d);
    let err = static_mx_call(&t).launch(&Launch::new().generation(nki::hw::Generation::Trn3)).expect_err("131 rows").to_string();
    assert!(err.contains("STATIC_MX needs an even number of token rows"), "{err}");
}
