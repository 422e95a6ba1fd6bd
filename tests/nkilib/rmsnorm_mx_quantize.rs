//! The library's `rmsnorm_mx_quantize_tkg` through a wrapper kernel like the
//! library test's (SBUF outputs spilled to HBM, the quantized rows taken from
//! the program that did *not* compute them, so the exchange is checked):
//! the normalised rows against a float64 RMSNorm, the MX words and scales
//! against an independent quantization of those rows written from
//! `quantize_mx`'s documented semantics, the residual sum, the emitted source
//! under NumPy against the emulator, and the rules.

use crate::common::sweep::sweep;
use crate::common::{Arg, as_dtype, assert_refused_by, emitted_package, seed_of, tensor, try_run_numpy_on, uniform};
use crate::mx_format::{e4m3fn, round_e4m3fn};
use nki::prelude::*;
use nki::{Dtype, Launch, Precision};
use nkilib::subkernels::rmsnorm_mx_quantize_tkg::{RmsNormMxRule, RmsNormMxShape, rmsnorm_mx_quantize_tkg, rmsnorm_mx_quantize_violation};

const P: usize = 128;
const EPS: f64 = 1e-6;
/// Partitions of one scale group.
const GROUP_ROWS: usize = 8;

/// Copies this program's rows of `output` and the other program's rows of
/// the MX words and scales (the 16 scale partitions, compacted) to HBM.
#[nki_helper(target = "trn3")]
fn spill_outputs(output: Sbuf, quant: Sbuf, scale: Sbuf) -> (Hbm, Hbm, Hbm) {
    let [p, t, h1] = output.shape();
    let n = quant.shape()[1];
    let out = nl::ndarray([p, t, h1], output.dtype(), buffer = nl::shared_hbm);
    let q = nl::ndarray([p, n, t], quant.dtype(), buffer = nl::shared_hbm);
    let sc = nl::ndarray([16, n, t], nl::uint8, buffer = nl::shared_hbm);
    let half = t / 2;
    let me = nl::program_id(0);
    let other = 1 - me;
    nisa::dma_copy(out[s![.., me * half..(me + 1) * half, ..]], output[s![.., me * half..(me + 1) * half, ..]]);
    nisa::dma_copy(q[s![.., .., other * half..(other + 1) * half]], quant[s![.., .., other * half..(other + 1) * half]]);
    for quadrant in nl::affine_range(4) {
        nisa::dma_copy(
            sc[s![quadrant * 4..quadrant * 4 + 4, .., other * half..(other + 1) * half]],
            scale[s![quadrant * 32..quadrant * 32 + 4, .., other * half..(other + 1) * half]],
        );
    }
    (out, q, sc)
}

/// The SBUF outputs of one call: `[128, T, H/128]` rows, `[128, H/512, T]`
/// words and scales.
#[nki_helper(target = "trn3")]
fn output_tiles(inp: Hbm) -> (Sbuf, Sbuf, Sbuf) {
    let [b, sl, h] = inp.shape();
    let t = b * sl;
    let output = nl::ndarray([128, t, h / 128], inp.dtype(), buffer = nl::sbuf);
    let quant = nl::ndarray([128, h / 512, t], nl::float8_e4m3fn_x4, buffer = nl::sbuf);
    let scale = nl::ndarray([128, h / 512, t], nl::uint8, buffer = nl::sbuf);
    (output, quant, scale)
}

/// The call without a residual.
#[nki_kernel(target = "trn3")]
pub fn rmsnorm_mx_quantize_wrapper(
    #[dtypes(bfloat16, float16)] inp: Hbm,
    #[dtypes(bfloat16, float16)] gamma: Hbm,
    hidden_actual: Option<i64>,
) -> (Hbm, Hbm, Hbm) {
    let (output, quant, scale) = output_tiles(inp);
    rmsnorm_mx_quantize_tkg(inp, gamma, output, quant, scale, None, None, 1e-6, hidden_actual, true);
    spill_outputs(output, quant, scale)
}

/// The call with the fused residual add; also returns `inp + residual`.
#[nki_kernel(target = "trn3")]
pub fn rmsnorm_mx_quantize_residual_wrapper(
    #[dtypes(bfloat16, float16)] inp: Hbm,
    #[dtypes(bfloat16, float16)] gamma: Hbm,
    #[dtypes(bfloat16, float16)] residual: Hbm,
    hidden_actual: Option<i64>,
) -> (Hbm, Hbm, Hbm, Hbm) {
    let [b, sl, h] = inp.shape();
    let (output, quant, scale) = output_tiles(inp);
    let out_res = nl::ndarray([b * sl, h], inp.dtype(), buffer = nl::shared_hbm);
    rmsnorm_mx_quantize_tkg(inp, gamma, output, quant, scale, Some(residual), Some(out_res), 1e-6, hidden_actual, true);
    let (out, q, sc) = spill_outputs(output, quant, scale);
    (out, q, sc, out_res)
}

/// One configuration of the library's test.
#[derive(Clone, Copy, Debug)]
struct Config {
    b: usize,
    s: usize,
    h: usize,
    hidden_actual: Option<usize>,
    residual: bool,
    dtype: Dtype,
}

const fn c(b: usize, s: usize, h: usize, hidden_actual: Option<usize>, residual: bool) -> Config {
    Config { b, s, h, hidden_actual, residual, dtype: Dtype::F16 }
}

/// The library test's configurations (float16 there): decode batches at
/// GPT-OSS's padded hidden size, the residual add at its smallest sizes.
const CONFIGS: &[Config] = &[
    c(32, 1, 512, None, false),
    c(64, 1, 512, None, false),
    c(128, 1, 3072, Some(2880), false),
    c(256, 1, 3072, Some(2880), false),
    c(384, 1, 3072, Some(2880), false),
    c(16, 3, 3072, Some(2880), false),
    c(32, 3, 3072, Some(2880), false),
    c(64, 3, 3072, Some(2880), false),
    c(16, 5, 3072, Some(2880), false),
    c(32, 5, 3072, Some(2880), false),
    c(64, 5, 3072, Some(2880), false),
    c(128, 4, 3072, Some(2880), false),
    c(128, 5, 3072, Some(2880), false),
    c(256, 1, 1024, None, true),
    c(256, 1, 3072, Some(2880), true),
    c(128, 3, 3072, Some(2880), true),
    c(64, 5, 3072, Some(2880), true),
];

/// The values of one run: rows `[128, T, H1]`, MX words as codes `[128,
/// H/512, T]`, the 16 scale partitions `[16, H/512, T]`, and the residual sum.
struct Run {
    out: Vec<f64>,
    quant: Vec<i64>,
    scale: Vec<i64>,
    residual: Option<Vec<f64>>,
}

impl Config {
    fn t(&self) -> usize {
        self.b * self.s
    }

    fn name(&self) -> String {
        format!("b{}_s{}_h{}_ha{:?}_res{}_{:?}", self.b, self.s, self.h, self.hidden_actual, self.residual, self.dtype)
    }

    /// Input, gamma and residual values in the configuration's dtype.
    fn inputs(&self) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
        let seed = seed_of(&self.name());
        let n = self.t() * self.h;
        let r = 3f64.sqrt();
        let mut x = uniform(n, seed, -r, r);
        let mut res = uniform(n, seed + 2, -r, r);
        // Padded hidden columns are zeros, as the callers pad them.
        let ha = self.hidden_actual.unwrap_or(self.h);
        for row in 0..self.t() {
            for col in ha..self.h {
                x[row * self.h + col] = 0.0;
                res[row * self.h + col] = 0.0;
            }
        }
        (as_dtype(&x, self.dtype), as_dtype(&uniform(self.h, seed + 1, -r, r), self.dtype), as_dtype(&res, self.dtype))
    }

    fn run(&self, precision: Precision) -> Run {
        let (x, g, res) = self.inputs();
        let xt = tensor(&[self.b, self.s, self.h], &x, self.dtype);
        let gt = tensor(&[1, self.h], &g, self.dtype);
        let launch = Launch::new().lnc(2).precision(precision).generation(nki::hw::Generation::Trn3);
        let ha = self.hidden_actual.map(|v| v as i64);
        let f64s = |t: &Tensor| t.to_f32_vec().into_iter().map(f64::from).collect::<Vec<_>>();
        if self.residual {
            let rt = tensor(&[self.b, self.s, self.h], &res, self.dtype);
            let mut call = rmsnorm_mx_quantize_residual_wrapper::Call::new(&xt, &gt, &rt);
            if let Some(ha) = ha {
                call = call.hidden_actual(ha);
            }
            let (o, q, s, r) = call.launch(&launch).unwrap_or_else(|e| panic!("{}: {e}", self.name()));
            Run { out: f64s(&o), quant: q.to_i64_vec(), scale: s.to_i64_vec(), residual: Some(f64s(&r)) }
        } else {
            let mut call = rmsnorm_mx_quantize_wrapper::Call::new(&xt, &gt);
            if let Some(ha) = ha {
                call = call.hidden_actual(ha);
            }
            let (o, q, s) = call.launch(&launch).unwrap_or_else(|e| panic!("{}: {e}", self.name()));
            Run { out: f64s(&o), quant: q.to_i64_vec(), scale: s.to_i64_vec(), residual: None }
        }
    }

    /// The float64 RMSNorm of every (residual-added) row in the `[128, T, H1]`
    /// layout (`h = c·128 + p`), and the row-major sums.
    fn reference(&self, precision: Precision) -> (Vec<f64>, Vec<f64>) {
        let (x, g, res) = self.inputs();
        let (t, h, h1) = (self.t(), self.h, self.h / P);
        // The residual sum is stored in the residual's dtype (hardware precision)
        // before the norm reads it; float32 precision keeps it in float32.
        let held = if precision == Precision::Hardware { self.dtype } else { Dtype::F32 };
        let sums: Vec<f64> = if self.residual { as_dtype(&x.iter().zip(&res).map(|(a, b)| a + b).collect::<Vec<_>>(), held) } else { x };
        let n = self.hidden_actual.unwrap_or(h) as f64;
        let mut out = vec![0.0; P * t * h1];
        for row in 0..t {
            let xs = &sums[row * h..(row + 1) * h];
            let rms = (xs.iter().map(|v| v * v).sum::<f64>() / n + EPS).sqrt();
            for col in 0..h {
                out[((col % P) * t + row) * h1 + col / P] = xs[col] * g[col] / rms;
            }
        }
        (out, sums)
    }
}

/// Asserts the MX words and scales are `quantize_mx` of the rows `out`: per
/// group of 8 partitions × the 4 columns `q·H/512 + j` a word packs, scale
/// exponent `floor(log2 amax) - 7` (biased by 127), every value divided by
/// `2^e` and rounded to nearest even in `float8_e4m3fn`; group `g`'s scale on
/// partition `32·(g/4) + g%4`, here compacted to row `g`.
fn assert_quantized(what: &str, cfg: &Config, run: &Run) {
    let (t, h1) = (cfg.t(), cfg.h / P);
    let tiles = h1 / 4;
    for g in 0..P / GROUP_ROWS {
        for j in 0..tiles {
            for tok in 0..t {
                let value = |p: usize, k: usize| run.out[(p * t + tok) * h1 + k * tiles + j];
                let rows = g * GROUP_ROWS..(g + 1) * GROUP_ROWS;
                let amax = rows.clone().flat_map(|p| (0..4).map(move |k| (p, k))).fold(0.0f64, |m, (p, k)| m.max(value(p, k).abs()));
                let e = if amax > 0.0 { amax.log2().floor() as i64 - 7 } else { -127 };
                // Partition 32·(g/4) + g%4, compacted by the wrapper to row g.
                let got_scale = run.scale[(g * tiles + j) * t + tok];
                assert_eq!(got_scale, e + 127, "{what}: scale of group {g}, tile {j}, token {tok}");
                for p in rows {
                    let word = run.quant[(p * tiles + j) * t + tok] as u32;
                    for k in 0..4 {
                        let got = e4m3fn((word >> (8 * k)) & 0xff);
                        let want = round_e4m3fn(value(p, k) / 2f64.powi(e as i32));
                        assert_eq!(got, want, "{what}: element [{p}, {j}, {tok}] byte {k}");
                    }
                }
            }
        }
    }
}

/// Asserts `got` equals `want` element for element, naming the first difference.
fn assert_same(what: &str, got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    if let Some(i) = (0..got.len()).find(|&i| got[i].to_bits() != want[i].to_bits()) {
        panic!("{what}: element {i}: {} vs {}", got[i], want[i]);
    }
}

/// 32-bit MX words as unsigned values (the `.npy` reader may see them signed).
fn words(v: &[f64]) -> Vec<f64> {
    v.iter().map(|&w| f64::from(w as i64 as u32)).collect()
}

/// Every configuration in both precision modes: the rows within two float16
/// steps of float64, the MX words and scales exactly the quantization of
/// those rows, and the residual sums exact.
#[test]
fn library_configs_match_float64_and_quantize_exactly() {
    for cfg in CONFIGS {
        for p in [Precision::Fp32, Precision::Hardware] {
            let (want, sums) = cfg.reference(p);
            let what = format!("{} {p:?}", cfg.name());
            let run = cfg.run(p);
            for (i, (&got, &w)) in run.out.iter().zip(&want).enumerate() {
                let err = (got - w).abs();
                assert!(err <= 1e-5 + 2.0 * 2f64.powi(-11) * w.abs(), "{what}: row element {i}: {got} vs {w}");
            }
            assert_quantized(&what, cfg, &run);
            if let Some(res) = &run.residual {
                assert_same(&format!("{what}: output_residual"), res, &sums);
            }
        }
    }
}

/// bfloat16 rows, with a share of rows no power of two from 8 to 64 divides
/// (6 / 2 = 3: one tile per program) and one cut into 8-row tiles (48 / 2 = 24).
#[test]
fn bfloat16_and_odd_token_tiles_match() {
    for cfg in [c(2, 6, 1024, None, false), c(1, 48, 2048, Some(2000), false)] {
        let cfg = Config { dtype: Dtype::Bf16, ..cfg };
        let (want, _) = cfg.reference(Precision::Hardware);
        let run = cfg.run(Precision::Hardware);
        for (i, (&got, &w)) in run.out.iter().zip(&want).enumerate() {
            assert!((got - w).abs() <= 1e-5 + 2.0 * 2f64.powi(-8) * w.abs(), "{}: row element {i}: {got} vs {w}", cfg.name());
        }
        assert_quantized(&cfg.name(), &cfg, &run);
    }
}

/// The emitted wrappers under NumPy (trn3) equal the emulator exactly, with
/// and without the residual, in both precision modes.
#[test]
fn emitted_source_under_numpy_equals_emulator() {
    for (cfg, m) in sweep([c(16, 3, 3072, Some(2880), false), c(256, 1, 1024, None, true)]) {
        let (x, g, res) = cfg.inputs();
        let mut args = vec![Arg::Tensor(vec![cfg.b, cfg.s, cfg.h], x, cfg.dtype), Arg::Tensor(vec![1, cfg.h], g, cfg.dtype)];
        let kernel = if cfg.residual {
            args.push(Arg::Tensor(vec![cfg.b, cfg.s, cfg.h], res, cfg.dtype));
            "rmsnorm_mx_quantize_residual_wrapper"
        } else {
            "rmsnorm_mx_quantize_wrapper"
        };
        args.push(cfg.hidden_actual.map_or(Arg::None, |v| Arg::Int(v as i64)));
        let (p, mode) = (m.precision(), m.name());
        let np = try_run_numpy_on(emitted_package(), kernel, &[args.clone()], 2, mode, "trn3").unwrap_or_else(|e| panic!("{e}"));
        let emu = cfg.run(p);
        let what = format!("{} {mode}", cfg.name());
        let np = &np[0];
        assert_same(&format!("{what}: output"), &np[0], &emu.out);
        assert_same(&format!("{what}: output_quant"), &words(&np[1]), &words(&emu.quant.iter().map(|&v| v as f64).collect::<Vec<_>>()));
        assert_same(&format!("{what}: output_scale"), &np[2], &emu.scale.iter().map(|&v| v as f64).collect::<Vec<_>>());
        if let Some(r) = &emu.residual {
            assert_same(&format!("{what}: output_residual"), &np[3], r);
        }
    }
}

/// Each rule refuses what it names, in the typed rules and when traced.
#[test]
fn rules_refuse_what_they_name() {
    let ok = RmsNormMxShape {
        bxs: 8,
        hidden: 1024,
        hidden_actual: 1024,
        eps: EPS,
        hidden_dim_tp: true,
        output_16bit: true,
        residual: false,
        output_residual: false,
        programs: 2,
    };
    assert_eq!(rmsnorm_mx_quantize_violation(ok), None);
    let cases = [
        (RmsNormMxShape { hidden: 896, ..ok }, RmsNormMxRule::HiddenTiles),
        (RmsNormMxShape { programs: 1, ..ok }, RmsNormMxRule::NeedsLnc2),
        (RmsNormMxShape { bxs: 6, ..ok }, RmsNormMxRule::Tokens),
        (RmsNormMxShape { hidden_dim_tp: false, ..ok }, RmsNormMxRule::HiddenDimTp),
        (RmsNormMxShape { output_16bit: false, ..ok }, RmsNormMxRule::OutputDtype),
        (RmsNormMxShape { hidden_actual: 1025, ..ok }, RmsNormMxRule::HiddenActual),
        (RmsNormMxShape { eps: f64::NAN, ..ok }, RmsNormMxRule::Eps),
        (RmsNormMxShape { residual: true, ..ok }, RmsNormMxRule::ResidualPair),
        (RmsNormMxShape { residual: true, output_residual: true, ..ok }, RmsNormMxRule::ResidualSizes),
    ];
    assert_refused_by(rmsnorm_mx_quantize_violation, cases);

    // Traced: the same messages from the call's asserts.
    let trn3 = |lnc: usize| Launch::new().lnc(lnc).generation(nki::hw::Generation::Trn3);
    let x = |b: usize, h: usize| tensor(&[b, 1, h], &vec![0.5; b * h], Dtype::Bf16);
    let g = |h: usize| tensor(&[1, h], &vec![1.0; h], Dtype::Bf16);
    let refusals: [(Tensor, Tensor, usize, RmsNormMxRule); 3] = [
        (x(8, 896), g(896), 2, RmsNormMxRule::HiddenTiles),
        (x(8, 1024), g(1024), 1, RmsNormMxRule::NeedsLnc2),
        (x(6, 1024), g(1024), 2, RmsNormMxRule::Tokens),
    ];
    for (xt, gt, lnc, rule) in refusals {
        let e = rmsnorm_mx_quantize_wrapper::Call::new(&xt, &gt).launch(&trn3(lnc)).unwrap_err();
        assert!(e.message.contains(rule.message()), "{rule:?}: {e}");
    }
    let e = rmsnorm_mx_quantize_residual_wrapper::Call::new(&x(8, 1024), &g(1024), &x(8, 1024)).launch(&trn3(2)).unwrap_err();
    assert!(e.message.contains(RmsNormMxRule::ResidualSizes.message()), "{e}");
}
