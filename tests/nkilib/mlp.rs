//! The library's `mlp` (its decode path) against a float64 MLP written from
//! its documented computation — residual add, RMSNorm or LayerNorm, gate and
//! up projections with biases and clamps, `act(gate) · up` (or `act(up)`
//! without the gate), down projection with bias — at a subset of the
//! library's `test_mlp_tkg.py` configurations (its fp8 `STATIC` and `ROW`
//! weight quantization among them), and its context-encoding path at a
//! subset of `test_mlp_cte.py`'s (its fp8 forms with quantized hidden rows
//! and a requantized gated product among them), in both precision modes; its
//! emitted source under NumPy against the emulator; its rules.

use crate::common::attention::run_numpy_kwargs;
use crate::common::{
    Arg, FP32_ATOL, FP32_RTOL, as_dtype, assert_close, assert_numpy_close_to_emulator, assert_refused_by, emitted_package, seed_of, tensor,
    uniform, vec_mat,
};
use crate::support::token_case;
use nki::{Dtype, Launch, Precision, Tensor};
use nkilib::mlp::mlp::{ActFnType, NormType, QuantizationType, mlp};
use nkilib::mlp::mlp_parameters::{MlpCall, MlpRule, mlp_violation};

token_case! {
    /// One configuration: launch, sizes and options.
    struct Config {
        i: usize,
        norm: NormType,
        fused_add: bool,
        store_add: bool,
        act: ActFnType,
        skip_gate: bool,
        bias: bool,
        norm_bias: bool,
        clamp: bool,
        /// `use_tkg_down_proj_optimized_layout` (with both column tilings off).
        optimized: bool,
        /// `force_cte_mode`.
        force_cte: bool,
        /// `quantization_type`: `STATIC` and `ROW` take `float8_e4m3` weights
        /// (and, in context encoding, `float8_e4m3` hidden rows).
        quant: QuantizationType,
        /// `quant_clipping_bound` (`ROW` in context encoding).
        clip: f64,
        /// `use_tkg_gate_up_proj_column_tiling`.
        gate_up_tiling: bool,
        /// `use_tkg_down_proj_column_tiling`.
        down_tiling: bool,
    }
}

const fn c(lnc: usize, b: usize, s: usize, h: usize, i: usize, norm: NormType) -> Config {
    Config {
        lnc,
        b,
        s,
        h,
        i,
        norm,
        fused_add: false,
        store_add: false,
        act: ActFnType::SiLU,
        skip_gate: false,
        bias: false,
        norm_bias: false,
        clamp: false,
        optimized: false,
        force_cte: false,
        quant: QuantizationType::NONE,
        clip: 0.0,
        gate_up_tiling: true,
        down_tiling: true,
    }
}

impl Config {
    const fn fused(mut self, store: bool) -> Self {
        self.fused_add = true;
        self.store_add = store;
        self
    }
    const fn biased(mut self) -> Self {
        self.bias = true;
        self
    }
    const fn clamped(mut self) -> Self {
        self.clamp = true;
        self
    }
    const fn skip(mut self) -> Self {
        self.skip_gate = true;
        self
    }
    const fn act(mut self, a: ActFnType) -> Self {
        self.act = a;
        self
    }
    const fn optimized(mut self) -> Self {
        self.optimized = true;
        self.tiling(false, false)
    }
    /// The two column-tiling flags (gate/up, down).
    const fn tiling(mut self, gate_up: bool, down: bool) -> Self {
        self.gate_up_tiling = gate_up;
        self.down_tiling = down;
        self
    }
    const fn with_norm_bias(mut self) -> Self {
        self.norm_bias = true;
        self
    }
    const fn forced_cte(mut self) -> Self {
        self.force_cte = true;
        self
    }
    const fn quant(mut self, q: QuantizationType) -> Self {
        self.quant = q;
        self
    }
    const fn clipped(mut self, bound: f64) -> Self {
        self.clip = bound;
        self
    }
}

use crate::common::sweep::sweep;
use NormType::{LAYER_NORM, NO_NORM, RMS_NORM, RMS_NORM_SKIP_GAMMA};

/// A CI-sized subset of the library's configurations (`[lnc, B, S, H, I]`,
/// norm and options as there), plus the options its list leaves out
/// (activations, LayerNorm bias, clamps).
const CONFIGS: &[Config] = &[
    c(1, 1, 1, 256, 448, NO_NORM),
    c(2, 4, 2, 4096, 1024, LAYER_NORM),
    c(2, 1, 1, 8192, 448, RMS_NORM),
    c(2, 4, 1, 5120, 128, NO_NORM),
    c(2, 64, 1, 3072, 135, RMS_NORM),
    c(2, 4, 1, 2048, 512, RMS_NORM).fused(false),
    c(2, 4, 1, 2048, 512, LAYER_NORM).fused(true),
    c(2, 8, 5, 2048, 512, RMS_NORM).biased(),
    c(2, 4, 1, 2048, 832, NO_NORM).skip(),
    c(1, 3, 8, 1024, 832, LAYER_NORM).with_norm_bias(),
    c(1, 2, 2, 1024, 300, RMS_NORM).act(ActFnType::GELU).clamped(),
    c(2, 2, 2, 1024, 300, NO_NORM).act(ActFnType::GELU_Tanh_Approx).clamped().biased(),
    c(1, 2, 2, 1024, 300, NO_NORM).act(ActFnType::Swish).skip().clamped(),
    c(1, 4, 1, 2048, 512, RMS_NORM).optimized(),
    c(2, 4, 1, 2048, 512, RMS_NORM).optimized().biased(),
    c(2, 3, 2, 1024, 256, RMS_NORM_SKIP_GAMMA),
];

/// The two column-tiling flags apart, at the library's decode test sizes
/// (`[lnc, B, S, H, I]`): gate/up tiling without down tiling (LNC1 with
/// RMSNorm; `skip_gate_proj` over `H = 16384`) and the reverse (`I = 1560`,
/// two weights-stationary `I` shards and a partial tile, with the biases).
/// [`CONFIGS`] has both on, and both off with the optimized layout.
const TILING_CONFIGS: &[Config] = &[
    c(1, 4, 1, 8192, 1024, RMS_NORM).tiling(true, false),
    c(2, 4, 1, 16384, 832, NO_NORM).skip().tiling(true, false),
    c(2, 4, 5, 8192, 1560, NO_NORM).biased().tiling(false, true),
];

/// Context-encoding configurations (more than 96 tokens, or
/// `force_cte_mode`), CI-sized after the library's `test_mlp_cte.py`: both
/// launches, a token count that leaves a partial row tile, the tokens split
/// over two programs and (`H >= 7168`, `I >= 1024`, at most 256 tokens, no
/// bias) `I` split over them, and every option the path takes.
const CTE_CONFIGS: &[Config] = &[
    c(1, 1, 200, 512, 384, RMS_NORM).fused(true),
    c(2, 2, 100, 1024, 448, LAYER_NORM).with_norm_bias().biased(),
    c(1, 1, 578, 1408, 352, NO_NORM).act(ActFnType::GELU).skip().biased(),
    c(2, 1, 160, 1024, 640, RMS_NORM_SKIP_GAMMA).fused(false),
    c(2, 1, 256, 2048, 512, LAYER_NORM).act(ActFnType::GELU_Tanh_Approx).biased(),
    c(1, 2, 4, 512, 256, RMS_NORM).act(ActFnType::Swish).forced_cte(),
    c(2, 1, 128, 7168, 1024, RMS_NORM).fused(true),
];

/// fp8 weight quantization at the library's `test_mlp_tkg.py` quantized
/// sizes (`ROW` and `STATIC`, its column-tiling minimal case `[2, 4, 5,
/// 1024, 512]`, its `I = 893` case with the three biases, its `[2, 14, 5,
/// 8192, 128]` case, and `ROW` with the optimized down layout).
const QUANT_CONFIGS: &[Config] = &[
    c(2, 4, 5, 1024, 512, RMS_NORM).quant(QuantizationType::ROW),
    c(2, 4, 5, 1024, 512, RMS_NORM).quant(QuantizationType::STATIC),
    c(2, 4, 1, 8192, 893, RMS_NORM).biased().quant(QuantizationType::ROW),
    c(2, 14, 5, 8192, 128, NO_NORM).quant(QuantizationType::STATIC),
    c(1, 4, 1, 8192, 1024, RMS_NORM).optimized().quant(QuantizationType::ROW),
    c(1, 2, 3, 1024, 300, LAYER_NORM).fused(true).skip().quant(QuantizationType::STATIC),
];

/// The fp8 forms of the context-encoding path, CI-sized after the library's
/// `test_mlp_cte.py` `ROW` (`[2, 1, 256, 16384, 896]`) and `STATIC` (`H =
/// 5120` or `8192`, `I` up to 7168, `I` split over the programs above 4096)
/// cases: both launches and shardings, partial row tiles, `skip_gate_proj`,
/// the other activations and a clipping bound.
const QUANT_CTE_CONFIGS: &[Config] = &[
    c(2, 1, 256, 2048, 896, NO_NORM).quant(QuantizationType::ROW),
    c(2, 1, 256, 1280, 1600, NO_NORM).quant(QuantizationType::STATIC),
    c(2, 1, 128, 1024, 4608, NO_NORM).quant(QuantizationType::STATIC),
    c(1, 1, 200, 1024, 640, NO_NORM).quant(QuantizationType::ROW).skip().act(ActFnType::GELU),
    c(2, 1, 320, 1024, 384, NO_NORM).quant(QuantizationType::ROW).clipped(1.0),
    c(1, 2, 100, 1024, 512, NO_NORM).quant(QuantizationType::STATIC).skip().act(ActFnType::Swish),
    c(2, 2, 4, 512, 256, NO_NORM).quant(QuantizationType::STATIC).act(ActFnType::GELU_Tanh_Approx).forced_cte(),
];

const EPS: f64 = 1e-6;
/// The clamps of the clamped configurations (gate upper, gate lower, up upper, up lower).
const CLAMPS: [f64; 4] = [0.5, -0.4, 0.3, -0.6];

/// The inputs of one configuration, row-major.
struct Inputs {
    hidden: Vec<f64>,
    residual: Vec<f64>,
    gamma: Vec<f64>,
    beta: Vec<f64>,
    gate_w: Vec<f64>,
    up_w: Vec<f64>,
    down_w: Vec<f64>,
    gate_b: Vec<f64>,
    up_b: Vec<f64>,
    down_b: Vec<f64>,
    /// The weights' dequantization scales, `[128, n]` each (`n` = 1, `I`,
    /// `I`, `H` with `ROW`), and `STATIC`'s input scales `[128, 1]`.
    gate_s: Vec<f64>,
    up_s: Vec<f64>,
    down_s: Vec<f64>,
    gate_up_in_s: Vec<f64>,
    down_in_s: Vec<f64>,
    /// A `ROW`-quantized hidden row's fp32 dequantization scale, per token
    /// (float32 values whose four bytes are finite `float8_e4m3` codes).
    hidden_s: Vec<f64>,
}

/// The value of a `float8_e4m3` code (1 sign, 4 exponent bits biased by 7,
/// 3 mantissa bits; subnormals below exponent 1), `None` for the infinity
/// and NaN codes (exponent all ones) and for `-0`.
fn fp8_e4m3_value(code: u8) -> Option<f64> {
    let (sign, exp, man) = (code >> 7, (code >> 3) & 0xF, code & 0x7);
    if exp == 0xF || code == 0x80 {
        return None;
    }
    let mag = if exp == 0 { f64::from(man) / 8.0 * 2f64.powi(-6) } else { (1.0 + f64::from(man) / 8.0) * 2f64.powi(i32::from(exp) - 7) };
    Some(if sign == 1 { -mag } else { mag })
}

/// The four `float8_e4m3` elements holding `v`'s little-endian float32 bytes.
fn packed_scale(v: f64) -> Option<[f64; 4]> {
    let b = (v as f32).to_le_bytes();
    Some([fp8_e4m3_value(b[0])?, fp8_e4m3_value(b[1])?, fp8_e4m3_value(b[2])?, fp8_e4m3_value(b[3])?])
}

/// `erf` by Abramowitz and Stegun 7.1.26 (absolute error below 1.5e-7).
fn erf(x: f64) -> f64 {
    let t = 1.0 / (1.0 + 0.327_591_1 * x.abs());
    let poly = t * (0.254_829_592 + t * (-0.284_496_736 + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    (1.0 - poly * (-x * x).exp()).copysign(x)
}

/// The activations as the NKI docs define them.
pub(crate) fn activation(a: ActFnType, x: f64) -> f64 {
    let sigmoid = |v: f64| 1.0 / (1.0 + (-v).exp());
    match a {
        ActFnType::SiLU => x * sigmoid(x),
        ActFnType::GELU => 0.5 * x * (1.0 + erf(x / 2f64.sqrt())),
        ActFnType::GELU_Tanh_Approx => 0.5 * x * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).tanh()),
        ActFnType::Swish => x * sigmoid(1.702 * x),
    }
}

impl Config {
    fn t(&self) -> usize {
        self.b * self.s
    }

    /// The configuration in words (also its inputs' seed; `force_cte` and
    /// the column tilings are named only when not implied, so the earlier
    /// configurations keep their inputs).
    fn name(&self) -> String {
        let implied =
            if self.optimized { ", gate_up_tiling: false, down_tiling: false" } else { ", gate_up_tiling: true, down_tiling: true" };
        format!("{self:?}").replace(implied, "").replace(", force_cte: false", "").replace(", quant: NONE", "").replace(", clip: 0.0", "")
    }

    fn quantized(&self) -> bool {
        self.quant != QuantizationType::NONE
    }

    /// Whether the call takes the context-encoding path.
    fn is_cte(&self) -> bool {
        self.t() > 96 || self.force_cte
    }

    /// fp8 hidden rows: the quantized context-encoding path.
    fn quantized_input(&self) -> bool {
        self.quantized() && self.is_cte()
    }

    /// The hidden rows as the kernel takes them: `[B, S, H]`, or `[B, S, H +
    /// 4]` with each `ROW`-quantized row's packed scale.
    fn hidden_as_passed(&self, x: &Inputs) -> (Vec<usize>, Vec<f64>) {
        let (b, s, h) = (self.b, self.s, self.h);
        if !(self.quantized_input() && self.quant == QuantizationType::ROW) {
            return (vec![b, s, h], x.hidden.clone());
        }
        let mut rows = Vec::with_capacity(self.t() * (h + 4));
        for (row, &sc) in x.hidden.chunks(h).zip(&x.hidden_s) {
            rows.extend_from_slice(row);
            rows.extend_from_slice(&packed_scale(sc).expect("scales are chosen with finite bytes"));
        }
        (vec![b, s, h + 4], rows)
    }

    /// The hidden rows' dtype: `float8_e4m3` on the quantized
    /// context-encoding path, else the inputs'.
    fn hidden_dtype(&self, dtype: Dtype) -> Dtype {
        if self.quantized_input() { Dtype::Fp8E4m3 } else { dtype }
    }

    /// Columns of a scale of a projection with `cols` output columns.
    fn scale_cols(&self, cols: usize) -> usize {
        if self.quant == QuantizationType::ROW { cols } else { 1 }
    }

    /// The dequantization scale of token `tok`, output column `col`: row
    /// `tok` of the `[128, n]` scale (column 0 with `STATIC`); the
    /// context-encoding path's scales are one row broadcast (row 0).
    fn scale_of(&self, scale: &[f64], cols: usize, tok: usize, col: usize) -> f64 {
        if !self.quantized() {
            return 1.0;
        }
        let n = self.scale_cols(cols);
        let row = if self.is_cte() { 0 } else { tok };
        scale[row * n + if n == 1 { 0 } else { col }]
    }

    /// Unit-variance hidden rows; weights scaled by `1/sqrt(fan_in)` so the
    /// projections stay of order one.
    fn inputs(&self) -> Inputs {
        let seed = seed_of(&self.name());
        let (t, h, i) = (self.t(), self.h, self.i);
        let r = 3f64.sqrt();
        let (wh, wi) = (r / (h as f64).sqrt(), r / (i as f64).sqrt());
        // fp8 weights: codes of order 16 (exact in float8_e4m3), scales that
        // bring them back to the float weights' size, every row its own.
        let q = self.quantized();
        let weight = |n: usize, seed: u64, bound: f64| {
            if q { as_dtype(&uniform(n, seed, -16.0, 16.0), Dtype::Fp8E4m3) } else { uniform(n, seed, -bound, bound) }
        };
        // Context encoding: every scale one row broadcast on the partitions
        // (the library's layout), the hidden rows fp8 codes of order 16 with
        // scales that bring them back to unit size, and the gated product
        // quantized with a scale that keeps it inside the fp8 range.
        let cte = self.quantized_input();
        let broadcast = |row: Vec<f64>| if cte { row.repeat(128) } else { row };
        let rows = if cte { 1 } else { 128 };
        // A weight scale's rows are meant as copies: the decode path reads
        // row t for token t where the tokens are on the partitions (column
        // tiling) and other rows with the weights stationary, so only the
        // former get rows of their own.
        let scale = |cols: usize, seed: u64, bound: f64, own_rows: bool| {
            let n = self.scale_cols(cols);
            let (lo, hi) = (0.5 * bound / 16.0, 1.5 * bound / 16.0);
            if own_rows && !cte { uniform(128 * n, seed, lo, hi) } else { uniform(n, seed, lo, hi).repeat(128) }
        };
        let (in_lo, in_hi) = if cte { (0.5 * r / 16.0, 1.5 * r / 16.0) } else { (0.5, 2.0) };
        let hidden = if cte { as_dtype(&uniform(t * h, seed, -16.0, 16.0), Dtype::Fp8E4m3) } else { uniform(t * h, seed, -r, r) };
        // fp32 scales whose four bytes are finite fp8 codes, nudged until they are.
        let hidden_s = uniform(t, seed + 15, in_lo, in_hi)
            .into_iter()
            .map(|mut v| {
                while packed_scale(v).is_none() {
                    v *= 1.0 + 1.0 / 64.0;
                }
                f64::from(v as f32)
            })
            .collect();
        Inputs {
            gate_s: scale(i, seed + 10, wh, self.gate_up_tiling),
            up_s: scale(i, seed + 11, wh, self.gate_up_tiling),
            down_s: scale(h, seed + 12, wi, self.down_tiling),
            gate_up_in_s: broadcast(uniform(rows, seed + 13, in_lo, in_hi)),
            down_in_s: broadcast(if cte { uniform(rows, seed + 14, 1.0 / 128.0, 1.0 / 32.0) } else { uniform(rows, seed + 14, 0.5, 2.0) }),
            hidden_s,
            hidden,
            residual: uniform(t * h, seed + 1, -r, r),
            gamma: uniform(h, seed + 2, 0.5, 1.5),
            beta: uniform(h, seed + 3, -0.5, 0.5),
            gate_w: weight(h * i, seed + 4, wh),
            up_w: weight(h * i, seed + 5, wh),
            down_w: weight(i * h, seed + 6, wi),
            gate_b: uniform(i, seed + 7, -0.5, 0.5),
            up_b: uniform(i, seed + 8, -0.5, 0.5),
            down_b: uniform(h, seed + 9, -0.5, 0.5),
        }
    }

    /// The float64 MLP: `(output [T, H], residual sum [T, H])`.
    fn reference(&self, x: &Inputs) -> (Vec<f64>, Vec<f64>) {
        let (inter, sum) = self.gated_product(x);
        (self.down_projection(x, inter, false), sum)
    }

    /// The quantized context-encoding path's gated product `inter` `[T, I]`
    /// as the down projection reads it: `(q, the rows' dequantization
    /// scales)`, `q` the product quantized to fp8 codes. `STATIC`: `q =
    /// clamp(inter / down_in_scale, ±240)`; `ROW`: each row (clipped to the
    /// bound first) divided by `max(absmax / 240, 1e-6)`. With `round_fp8`
    /// the product is held in bfloat16 (the compute dtype) and `q` rounded to
    /// `float8_e4m3`, as in hardware.
    fn requantize(&self, x: &Inputs, inter: &[f64], round_fp8: bool) -> (Vec<f64>, Vec<f64>) {
        let (t, i) = (self.t(), self.i);
        let mut q = if round_fp8 { as_dtype(inter, Dtype::Bf16) } else { inter.to_vec() };
        let mut dq = vec![x.down_in_s[0]; t];
        for (row, d) in q.chunks_mut(i).zip(dq.iter_mut()) {
            if self.quant == QuantizationType::ROW {
                if self.clip > 0.0 {
                    row.iter_mut().for_each(|v| *v = v.clamp(-self.clip, self.clip));
                }
                *d = (row.iter().fold(0.0f64, |m, v| m.max(v.abs())) / 240.0).max(1e-6);
                row.iter_mut().for_each(|v| *v /= *d);
            } else {
                row.iter_mut().for_each(|v| *v = (*v / *d).clamp(-240.0, 240.0));
            }
        }
        if round_fp8 {
            q = as_dtype(&q, Dtype::Fp8E4m3);
        }
        (q, dq)
    }

    /// The gated product `act(gate) · up` (or `act(up)`) `[T, I]` of the
    /// (residual-added, normalised) rows, and the residual sum `[T, H]`.
    fn gated_product(&self, x: &Inputs) -> (Vec<f64>, Vec<f64>) {
        let (t, h, i) = (self.t(), self.h, self.i);
        let sum: Vec<f64> = if self.fused_add { x.hidden.iter().zip(&x.residual).map(|(a, b)| a + b).collect() } else { x.hidden.clone() };
        let mut normed = sum.clone();
        for row in normed.chunks_mut(h) {
            match self.norm {
                RMS_NORM | RMS_NORM_SKIP_GAMMA => {
                    let rms = (row.iter().map(|v| v * v).sum::<f64>() / h as f64 + EPS).sqrt();
                    let skip = self.norm == RMS_NORM_SKIP_GAMMA;
                    row.iter_mut().zip(&x.gamma).for_each(|(v, g)| *v = *v / rms * if skip { 1.0 } else { *g });
                }
                LAYER_NORM => {
                    let mean = row.iter().sum::<f64>() / h as f64;
                    let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / h as f64;
                    let sd = (var + EPS).sqrt();
                    for (k, v) in row.iter_mut().enumerate() {
                        *v = (*v - mean) / sd * x.gamma[k] + if self.norm_bias { x.beta[k] } else { 0.0 };
                    }
                }
                _ => {}
            }
        }
        // fp8 hidden rows are dequantized by their input scale.
        let qin = self.quantized_input();
        let in_scale = |tok: usize| match self.quant {
            _ if !qin => 1.0,
            QuantizationType::ROW => x.hidden_s[tok],
            _ => x.gate_up_in_s[0],
        };
        let proj = |w: &[f64], scale: &[f64], b: &[f64], tok: usize| {
            let dots = vec_mat(&normed[tok * h..(tok + 1) * h], w);
            let bias = |col: usize| if self.bias { b[col] } else { 0.0 };
            dots.iter().enumerate().map(|(col, d)| d * self.scale_of(scale, i, tok, col) * in_scale(tok) + bias(col)).collect::<Vec<_>>()
        };
        let clamp = |v: f64, hi: f64, lo: f64| if self.clamp { v.min(hi).max(lo) } else { v };
        let mut inter = vec![0.0; t * i];
        for tok in 0..t {
            let up = proj(&x.up_w, &x.up_s, &x.up_b, tok);
            let gate = if self.skip_gate { vec![] } else { proj(&x.gate_w, &x.gate_s, &x.gate_b, tok) };
            for col in 0..i {
                let u = clamp(up[col], CLAMPS[2], CLAMPS[3]);
                inter[tok * i + col] =
                    if self.skip_gate { activation(self.act, u) } else { activation(self.act, clamp(gate[col], CLAMPS[0], CLAMPS[1])) * u };
            }
        }
        (inter, sum)
    }

    /// The output `[T, H]` of the gated product `inter`: projected by the
    /// down weights (their scales and bias), after the quantized
    /// context-encoding path's requantization ([`Config::requantize`]).
    fn down_projection(&self, x: &Inputs, inter: Vec<f64>, round_fp8: bool) -> Vec<f64> {
        let (t, h, i) = (self.t(), self.h, self.i);
        let (inter, inter_scale) = if self.quantized_input() { self.requantize(x, &inter, round_fp8) } else { (inter, vec![1.0; t]) };
        let mut out = vec![0.0; t * h];
        for tok in 0..t {
            let dots = vec_mat(&inter[tok * i..(tok + 1) * i], &x.down_w);
            for (col, d) in dots.iter().enumerate() {
                let scale = self.scale_of(&x.down_s, h, tok, col) * inter_scale[tok];
                out[tok * h + col] = d * scale + if self.bias { x.down_b[col] } else { 0.0 };
            }
        }
        out
    }

    /// The down weights as the kernel takes them: with the optimized layout
    /// the `[I, H]` weight stored as `[I, lnc, H/128/lnc, 128]`, element `(s,
    /// c, p)` of a row holding logical column `s·H/lnc + p·(H/128/lnc) + c`.
    fn down_as_passed(&self, down: &[f64]) -> Vec<f64> {
        if !self.optimized {
            return down.to_vec();
        }
        let (h, lnc) = (self.h, self.lnc);
        let (shard, h2) = (h / lnc, h / 128 / lnc);
        let mut stored = vec![0.0; down.len()];
        for (row_in, row_out) in down.chunks(h).zip(stored.chunks_mut(h)) {
            for s in 0..lnc {
                for p in 0..128 {
                    for c in 0..h2 {
                        row_out[s * shard + c * 128 + p] = row_in[s * shard + p * h2 + c];
                    }
                }
            }
        }
        stored
    }

    /// The emulator's outputs (the MLP output, and the stored sum if any).
    fn run(&self, x: &Inputs, dtype: Dtype, precision: Precision) -> Vec<Vec<f32>> {
        self.run_into(x, dtype, precision, None).iter().map(|o| o.to_f32_vec()).collect()
    }

    /// [`Config::run`] with the outputs in `output_dtype` when given.
    fn run_into(&self, x: &Inputs, dtype: Dtype, precision: Precision, output_dtype: Option<Dtype>) -> Vec<Tensor> {
        let (b, s, h, i) = (self.b, self.s, self.h, self.i);
        let ts = |shape: &[usize], v: &[f64]| tensor(shape, v, dtype);
        let wdt = self.weight_dtype(dtype);
        let tw = |shape: &[usize], v: &[f64]| tensor(shape, v, wdt);
        let (hs, hv) = self.hidden_as_passed(x);
        let hid = tensor(&hs, &hv, self.hidden_dtype(dtype));
        let (gw, uw, dw) = (tw(&[h, i], &x.gate_w), tw(&[h, i], &x.up_w), tw(&[i, h], &self.down_as_passed(&x.down_w)));
        let f32s = |cols: usize, v: &[f64]| tensor(&[128, self.scale_cols(cols)], v, Dtype::F32);
        let (gs, us, ds) = (f32s(i, &x.gate_s), f32s(i, &x.up_s), f32s(h, &x.down_s));
        let (gis, dis) = (tensor(&[128, 1], &x.gate_up_in_s, Dtype::F32), tensor(&[128, 1], &x.down_in_s, Dtype::F32));
        let (res, gamma, beta) = (ts(&[b, s, h], &x.residual), ts(&[1, h], &x.gamma), ts(&[1, h], &x.beta));
        let (gb, ub, db) = (ts(&[1, i], &x.gate_b), ts(&[1, i], &x.up_b), ts(&[1, h], &x.down_b));
        let mut call = mlp::Call::new(&hid, &gw, &uw, &dw)
            .normalization_type(self.norm)
            .activation_fn(self.act)
            .skip_gate_proj(self.skip_gate)
            .eps(EPS)
            .store_fused_add_result(self.store_add)
            .use_tkg_gate_up_proj_column_tiling(self.gate_up_tiling)
            .use_tkg_down_proj_column_tiling(self.down_tiling)
            .use_tkg_down_proj_optimized_layout(self.optimized)
            .force_cte_mode(self.force_cte);
        if self.norm == RMS_NORM || self.norm == LAYER_NORM {
            call = call.normalization_weights_tensor(&gamma);
        }
        if self.norm_bias {
            call = call.normalization_bias_tensor(&beta);
        }
        if self.fused_add {
            call = call.fused_add_tensor(&res);
        }
        if self.bias {
            call = call.gate_proj_bias_tensor(&gb).up_proj_bias_tensor(&ub).down_proj_bias_tensor(&db);
        }
        if self.clamp {
            call = call
                .gate_clamp_upper_limit(CLAMPS[0])
                .gate_clamp_lower_limit(CLAMPS[1])
                .up_clamp_upper_limit(CLAMPS[2])
                .up_clamp_lower_limit(CLAMPS[3]);
        }
        if let Some(d) = output_dtype {
            call = call.output_dtype(d);
        }
        if self.quantized() {
            call = call.quantization_type(self.quant).gate_w_scale(&gs).up_w_scale(&us).down_w_scale(&ds).quant_clipping_bound(self.clip);
            if self.quant == QuantizationType::STATIC {
                call = call.gate_up_in_scale(&gis).down_in_scale(&dis);
            }
        }
        let launch = Launch::new().lnc(self.lnc).precision(precision);
        let out = call.launch(&launch).unwrap_or_else(|e| panic!("{}: {e}", self.name()));
        assert_eq!(out.len(), if self.store_add { 2 } else { 1 }, "{}", self.name());
        out.0
    }

    /// The weights' dtype: `float8_e4m3` when quantized, else the inputs'.
    fn weight_dtype(&self, dtype: Dtype) -> Dtype {
        if self.quantized() { Dtype::Fp8E4m3 } else { dtype }
    }

    /// The arguments for the NumPy executor, by keyword (the library's names).
    fn numpy_kwargs(&self, x: &Inputs, dtype: Dtype) -> Vec<(&'static str, Arg)> {
        let (b, s, h, i) = (self.b, self.s, self.h, self.i);
        let ts = |shape: Vec<usize>, v: &[f64]| Arg::Tensor(shape, v.to_vec(), dtype);
        let wdt = self.weight_dtype(dtype);
        let tw = |shape: Vec<usize>, v: &[f64]| Arg::Tensor(shape, v.to_vec(), wdt);
        let (q, stat) = (self.quantized(), self.quant == QuantizationType::STATIC);
        let scale = |on: bool, cols: usize, v: &[f64]| opt_arg(on, Arg::Tensor(vec![128, cols], v.to_vec(), Dtype::F32));
        let quant = match self.quant {
            QuantizationType::STATIC => "STATIC",
            QuantizationType::ROW => "ROW",
            _ => "NONE",
        };
        let opt = opt_arg;
        let norm = match self.norm {
            RMS_NORM => "RMS_NORM",
            RMS_NORM_SKIP_GAMMA => "RMS_NORM_SKIP_GAMMA",
            LAYER_NORM => "LAYER_NORM",
            _ => "NO_NORM",
        };
        let act = match self.act {
            ActFnType::SiLU => "SiLU",
            ActFnType::GELU => "GELU",
            ActFnType::GELU_Tanh_Approx => "GELU_Tanh_Approx",
            ActFnType::Swish => "Swish",
        };
        let clamp = |k: usize| if self.clamp { Arg::Float(CLAMPS[k]) } else { Arg::None };
        let (hs, hv) = self.hidden_as_passed(x);
        vec![
            ("hidden_tensor", Arg::Tensor(hs, hv, self.hidden_dtype(dtype))),
            ("quant_clipping_bound", Arg::Float(self.clip)),
            ("gate_proj_weights_tensor", tw(vec![h, i], &x.gate_w)),
            ("up_proj_weights_tensor", tw(vec![h, i], &x.up_w)),
            ("down_proj_weights_tensor", tw(vec![i, h], &self.down_as_passed(&x.down_w))),
            ("quantization_type", Arg::Member("QuantizationType", quant)),
            ("gate_w_scale", scale(q, self.scale_cols(i), &x.gate_s)),
            ("up_w_scale", scale(q, self.scale_cols(i), &x.up_s)),
            ("down_w_scale", scale(q, self.scale_cols(h), &x.down_s)),
            ("gate_up_in_scale", scale(stat, 1, &x.gate_up_in_s)),
            ("down_in_scale", scale(stat, 1, &x.down_in_s)),
            ("normalization_weights_tensor", opt(self.norm == RMS_NORM || self.norm == LAYER_NORM, ts(vec![1, h], &x.gamma))),
            ("gate_proj_bias_tensor", opt(self.bias, ts(vec![1, i], &x.gate_b))),
            ("up_proj_bias_tensor", opt(self.bias, ts(vec![1, i], &x.up_b))),
            ("down_proj_bias_tensor", opt(self.bias, ts(vec![1, h], &x.down_b))),
            ("normalization_bias_tensor", opt(self.norm_bias, ts(vec![1, h], &x.beta))),
            ("fused_add_tensor", opt(self.fused_add, ts(vec![b, s, h], &x.residual))),
            ("store_fused_add_result", Arg::Bool(self.store_add)),
            ("activation_fn", Arg::Member("ActFnType", act)),
            ("normalization_type", Arg::Member("NormType", norm)),
            ("eps", Arg::Float(EPS)),
            ("skip_gate_proj", Arg::Bool(self.skip_gate)),
            ("gate_clamp_upper_limit", clamp(0)),
            ("gate_clamp_lower_limit", clamp(1)),
            ("up_clamp_upper_limit", clamp(2)),
            ("up_clamp_lower_limit", clamp(3)),
            ("use_tkg_gate_up_proj_column_tiling", Arg::Bool(self.gate_up_tiling)),
            ("use_tkg_down_proj_column_tiling", Arg::Bool(self.down_tiling)),
            ("use_tkg_down_proj_optimized_layout", Arg::Bool(self.optimized)),
            ("force_cte_mode", Arg::Bool(self.force_cte)),
        ]
    }
}

/// `a` when `on`, else `None`.
fn opt_arg(on: bool, a: Arg) -> Arg {
    if on { a } else { Arg::None }
}

/// Every configuration, fp32 inputs in fp32 precision: the fp32 metric on
/// the output and on the stored residual sum.
#[test]
fn configs_in_fp32_match_float64() {
    for cfg in CONFIGS.iter().chain(CTE_CONFIGS) {
        let x = cfg.inputs();
        let got = cfg.run(&x, Dtype::F32, Precision::Fp32);
        let (want, sum) = cfg.reference(&x);
        assert_close(&format!("{} fp32", cfg.name()), &got[0], &want, 1e-4, 1e-4);
        if cfg.store_add {
            assert_close(&format!("{} fp32 sum", cfg.name()), &got[1], &sum, FP32_ATOL, FP32_RTOL);
        }
    }
}

/// Rounds every input to `dtype`.
fn rounded(x: &Inputs, dtype: Dtype) -> Inputs {
    let r = |v: &[f64]| as_dtype(v, dtype);
    Inputs {
        hidden: r(&x.hidden),
        residual: r(&x.residual),
        gamma: r(&x.gamma),
        beta: r(&x.beta),
        gate_w: r(&x.gate_w),
        up_w: r(&x.up_w),
        down_w: r(&x.down_w),
        gate_b: r(&x.gate_b),
        up_b: r(&x.up_b),
        down_b: r(&x.down_b),
        gate_s: as_dtype(&x.gate_s, Dtype::F32),
        up_s: as_dtype(&x.up_s, Dtype::F32),
        down_s: as_dtype(&x.down_s, Dtype::F32),
        gate_up_in_s: as_dtype(&x.gate_up_in_s, Dtype::F32),
        down_in_s: as_dtype(&x.down_in_s, Dtype::F32),
        hidden_s: x.hidden_s.clone(),
    }
}

/// fp8 weights (the library's `STATIC` and `ROW` at its quantized sizes)
/// multiply bfloat16 activations: in fp32 precision the float64 MLP of the
/// rounded inputs (fp8 codes times their scales) to the fp32 metric; in
/// hardware precision within the library's bfloat16 tolerance.
#[test]
fn quantized_configs_match_float64() {
    for cfg in QUANT_CONFIGS {
        let x = rounded(&cfg.inputs(), Dtype::Bf16);
        let (want, sum) = cfg.reference(&x);
        let got = cfg.run(&x, Dtype::Bf16, Precision::Fp32);
        assert_close(&format!("{} fp32", cfg.name()), &got[0], &want, 1e-4, 1e-4);
        if cfg.store_add {
            assert_close(&format!("{} fp32 sum", cfg.name()), &got[1], &sum, FP32_ATOL, FP32_RTOL);
        }
        let got = cfg.run(&x, Dtype::Bf16, Precision::Hardware);
        assert_close(&format!("{} bfloat16", cfg.name()), &got[0], &want, 2e-2, 2e-2);
    }
}

/// The fp8 forms of the context-encoding path (fp8 hidden rows and weights,
/// the gated product requantized to fp8): in fp32 precision the float64 MLP
/// of the dequantized codes with the product's quantization unrounded, to
/// the fp32 metric; in hardware precision (bfloat16 tiles, the product
/// rounded to `float8_e4m3`) within the library's bfloat16 tolerance of the
/// float64 MLP whose product is held in bfloat16 and rounded to fp8 too. A
/// product element that lands on the other side of an fp8 rounding boundary
/// (the kernel rounds it to bfloat16 a few times on the way) moves by an fp8
/// step, 1/16 to 1/8 of it, so a few percent of the largest output is the
/// hardware bound (the library's own tests allow 3e-2 and 4e-2 of each
/// element); the fp32 run checks the algorithm to the fp32 metric.
#[test]
fn quantized_cte_configs_match_float64() {
    for cfg in QUANT_CTE_CONFIGS {
        let x = rounded(&cfg.inputs(), Dtype::Bf16);
        let (inter, _) = cfg.gated_product(&x);
        let got = cfg.run(&x, Dtype::Bf16, Precision::Fp32);
        assert_close(&format!("{} fp32", cfg.name()), &got[0], &cfg.down_projection(&x, inter.clone(), false), 1e-4, 1e-4);
        let got = cfg.run(&x, Dtype::Bf16, Precision::Hardware);
        assert_close(&format!("{} bfloat16", cfg.name()), &got[0], &cfg.down_projection(&x, inter, true), 6e-2, 6e-2);
    }
}

/// bfloat16 inputs (the library's tests') in hardware precision: the output
/// within the library's bfloat16 tolerance of the float64 MLP of the rounded
/// inputs (the activations pass through bfloat16 twice: the normed rows and
/// the gated product).
#[test]
fn configs_in_bfloat16_match_float64() {
    for cfg in CONFIGS.iter().chain(CTE_CONFIGS) {
        let x = rounded(&cfg.inputs(), Dtype::Bf16);
        let got = cfg.run(&x, Dtype::Bf16, Precision::Hardware);
        let (want, _) = cfg.reference(&x);
        assert_close(&format!("{} bfloat16", cfg.name()), &got[0], &want, 2e-2, 2e-2);
    }
}

/// Each column-tiling arrangement computes the MLP: fp32 inputs in fp32
/// precision to the fp32 metric, bfloat16 inputs in hardware precision
/// within the library's bfloat16 tolerance of the float64 MLP. The flag is
/// honoured, not just accepted: gate/up column tiling sums each row's hidden
/// columns in a different order (four interleaved partial sums at these
/// token counts), so flipping it changes fp32 bits.
#[test]
fn column_tiling_arrangements_match_float64() {
    for (k, cfg) in TILING_CONFIGS.iter().enumerate() {
        let x = cfg.inputs();
        let got = cfg.run(&x, Dtype::F32, Precision::Fp32);
        let (want, _) = cfg.reference(&x);
        assert_close(&format!("{} fp32", cfg.name()), &got[0], &want, 1e-4, 1e-4);
        if k == 0 {
            let flipped = cfg.tiling(!cfg.gate_up_tiling, cfg.down_tiling).run(&x, Dtype::F32, Precision::Fp32);
            assert_close(&format!("{} fp32, gate/up tiling flipped", cfg.name()), &flipped[0], &want, 1e-4, 1e-4);
            assert_ne!(got[0], flipped[0], "{}: the gate/up arrangements sum in the same order", cfg.name());
        }
        let x = rounded(&x, Dtype::Bf16);
        let got = cfg.run(&x, Dtype::Bf16, Precision::Hardware);
        let (want, _) = cfg.reference(&x);
        assert_close(&format!("{} bfloat16", cfg.name()), &got[0], &want, 2e-2, 2e-2);
    }
}

/// The emitted kernel under NumPy equals the emulator up to the order of the
/// matmuls' float32 sums (NumPy's `matmul` against the emulator's): one
/// program and LNC2, with every option on between them, both modes. In
/// hardware precision a sum that lands on the other side of a bfloat16
/// rounding boundary moves an element by one bfloat16 step.
#[test]
fn emitted_mlp_under_numpy_equals_emulator() {
    let decode = [CONFIGS[9], CONFIGS[6], CONFIGS[11], CONFIGS[14], CONFIGS[15]];
    let cte = [CTE_CONFIGS[0], CTE_CONFIGS[1], CTE_CONFIGS[3], CTE_CONFIGS[5], CTE_CONFIGS[6]];
    let quant = [QUANT_CONFIGS[0], QUANT_CONFIGS[1], QUANT_CONFIGS[5]];
    let quant_cte = [QUANT_CTE_CONFIGS[3], QUANT_CTE_CONFIGS[4], QUANT_CTE_CONFIGS[5], QUANT_CTE_CONFIGS[6]];
    for (cfg, m) in sweep(decode.into_iter().chain(cte).chain(quant).chain(quant_cte)) {
        // fp8 weights take 16-bit activations in both modes.
        let wide = if cfg.quantized() { Dtype::Bf16 } else { Dtype::F32 };
        let (dtype, precision, mode) = m.run(wide, Dtype::Bf16);
        let x = rounded(&cfg.inputs(), dtype);
        let emu = cfg.run(&x, dtype, precision);
        let np = run_numpy_kwargs(emitted_package(), "mlp", &[], &cfg.numpy_kwargs(&x, dtype), cfg.lnc, mode);
        assert_numpy_close_to_emulator(&cfg.name(), mode, &np, &emu);
    }
}

/// The context-encoding path rounds its results to the compute dtype and the
/// store casts them to `output_dtype`: an fp32 output of bfloat16 inputs
/// holds exactly the bfloat16 output's values (and the stored sum's).
#[test]
fn cte_output_dtype_casts_the_rounded_result() {
    for cfg in [CTE_CONFIGS[0], CTE_CONFIGS[1]] {
        let x = rounded(&cfg.inputs(), Dtype::Bf16);
        let narrow = cfg.run(&x, Dtype::Bf16, Precision::Hardware);
        let wide = cfg.run_into(&x, Dtype::Bf16, Precision::Hardware, Some(Dtype::F32));
        assert!(wide.iter().all(|o| o.dtype() == Dtype::F32), "{}: the outputs are fp32", cfg.name());
        assert_eq!(narrow, wide.iter().map(|o| o.to_f32_vec()).collect::<Vec<_>>(), "{}", cfg.name());
    }
}

/// A `ROW`-quantized call of `x` with gate/up weights `w` and down weights `d`.
fn row<'a>(x: &'a Tensor, w: &'a Tensor, d: &'a Tensor) -> mlp::Call<'a> {
    mlp::Call::new(x, w, w, d).quantization_type(QuantizationType::ROW)
}

/// A call the rules accept, to vary one field at a time.
const OK: MlpCall = MlpCall { tokens: 8, hidden: 4096, intermediate: 896, programs: 2, normalization_type: RMS_NORM, ..MlpCall::DEFAULTS };

/// Each rule refuses what it names, and the kernel refuses the same at trace time.
#[test]
fn rules_refuse_what_they_name() {
    assert_eq!(mlp_violation(OK), None);
    let optimized = MlpCall { use_tkg_down_proj_optimized_layout: true, use_tkg_down_proj_column_tiling: false, ..OK };
    assert_eq!(mlp_violation(optimized), None);
    // Down column tiling off: 8 PSUM banks of 512 / T columns each, at the edge.
    let untiled = MlpCall { use_tkg_down_proj_column_tiling: false, ..OK };
    assert_eq!(mlp_violation(MlpCall { hidden: 128 * 2 * 512, ..untiled }), None);
    assert_eq!(mlp_violation(MlpCall { tokens: 96, hidden: 128 * 2 * 40, ..untiled }), None);
    assert_eq!(mlp_violation(MlpCall { normalization_type: RMS_NORM_SKIP_GAMMA, ..OK }), None);
    assert_eq!(mlp_violation(MlpCall { quantization_type: QuantizationType::STATIC, ..OK }), None);
    assert_eq!(mlp_violation(MlpCall { quantization_type: QuantizationType::ROW, ..OK }), None);
    // The context-encoding path: clamps belong to token generation only; an
    // odd token count is fine when the call shards I (or runs on one program).
    assert_eq!(mlp_violation(MlpCall { tokens: 98, ..OK }), None);
    assert_eq!(mlp_violation(MlpCall { clamped: true, ..OK }), None);
    assert_eq!(mlp_violation(MlpCall { tokens: 201, hidden: 8192, intermediate: 1024, ..OK }), None);
    assert_eq!(mlp_violation(MlpCall { tokens: 201, programs: 1, ..OK }), None);
    // fp8 hidden rows: the quantized context-encoding path, alone.
    let fp8_rows = MlpCall { tokens: 200, normalization_type: NO_NORM, quantized_input: true, ..OK };
    assert_eq!(mlp_violation(MlpCall { quantization_type: QuantizationType::ROW, ..fp8_rows }), None);
    assert_eq!(mlp_violation(MlpCall { quantization_type: QuantizationType::STATIC, ..fp8_rows }), None);
    let cases = [
        (MlpCall { hidden: 4000, ..OK }, MlpRule::HiddenTiles),
        (MlpCall { intermediate: 0, ..OK }, MlpRule::Sizes),
        (MlpCall { tokens: 97, clamped: true, ..OK }, MlpRule::CteClamp),
        (MlpCall { force_cte_mode: true, clamped: true, ..OK }, MlpRule::CteClamp),
        (
            MlpCall { force_cte_mode: true, use_tkg_down_proj_optimized_layout: true, use_tkg_down_proj_column_tiling: false, ..OK },
            MlpRule::CteOptimizedLayout,
        ),
        (MlpCall { tokens: 300, programs: 4, ..OK }, MlpRule::CtePrograms),
        (MlpCall { tokens: 301, ..OK }, MlpRule::CteShards),
        (MlpCall { tokens: 200, hidden: 8192, intermediate: 1025, ..OK }, MlpRule::CteShards),
        (MlpCall { quantization_type: QuantizationType::MX, ..OK }, MlpRule::MxIntermediate),
        (MlpCall { quantization_type: QuantizationType::STATIC_MX, ..OK }, MlpRule::StaticMxTokenGeneration),
        (MlpCall { quantization_type: QuantizationType::ROW_MX, ..OK }, MlpRule::Quantization),
        (MlpCall { tokens: 200, quantization_type: QuantizationType::ROW, ..OK }, MlpRule::CteQuantization),
        (MlpCall { force_cte_mode: true, quantization_type: QuantizationType::STATIC, ..OK }, MlpRule::CteQuantization),
        (MlpCall { tokens: 200, quantized_input: true, ..OK }, MlpRule::InputQuantization),
        (MlpCall { quantization_type: QuantizationType::ROW, quantized_input: true, ..OK }, MlpRule::TkgQuantizedInput),
        (MlpCall { tokens: 200, quantization_type: QuantizationType::ROW, quantized_input: true, ..OK }, MlpRule::CteQuantizedInputOptions),
        (
            MlpCall {
                tokens: 200,
                normalization_type: NO_NORM,
                quantization_type: QuantizationType::STATIC,
                quantized_input: true,
                has_fused_add: true,
                ..OK
            },
            MlpRule::CteQuantizedInputOptions,
        ),
        (
            MlpCall {
                tokens: 200,
                normalization_type: NO_NORM,
                quantization_type: QuantizationType::STATIC,
                quantized_input: true,
                has_projection_bias: true,
                ..OK
            },
            MlpRule::CteQuantizedInputOptions,
        ),
        (MlpCall { has_norm_bias: true, ..OK }, MlpRule::NormBias),
        (MlpCall { use_tkg_down_proj_optimized_layout: true, ..OK }, MlpRule::OptimizedLayout),
        (MlpCall { hidden: 128 * 2 * 513, use_tkg_down_proj_column_tiling: false, ..OK }, MlpRule::DownPsumBanks),
        (MlpCall { tokens: 96, hidden: 128 * 2 * 41, use_tkg_down_proj_column_tiling: false, ..OK }, MlpRule::DownPsumBanks),
        (MlpCall { store_output_in_sbuf: true, ..OK }, MlpRule::SbufOutput),
        (MlpCall { hidden: 128 * 3, ..OK }, MlpRule::HiddenShards),
    ];
    assert_refused_by(mlp_violation, cases);
    // The traced kernel: 97 tokens with a clamp, and a quantization type.
    let (h, i) = (256, 128);
    let w = tensor(&[h, i], &vec![0.0; h * i], Dtype::F32);
    let d = tensor(&[i, h], &vec![0.0; h * i], Dtype::F32);
    let x = tensor(&[97, h], &vec![0.0; 97 * h], Dtype::F32);
    let e = mlp::Call::new(&x, &w, &w, &d).gate_clamp_upper_limit(1.0).launch(&Launch::new()).unwrap_err().to_string();
    assert!(e.contains("clamp limits are only supported in token generation"), "{e}");
    // 96 tokens, 41 layout columns on one program: 9 banks of 5 columns.
    let (hw, x96) = (128 * 41, tensor(&[96, 128 * 41], &vec![0.0; 96 * 128 * 41], Dtype::F32));
    let (w41, d41) = (tensor(&[hw, i], &vec![0.0; hw * i], Dtype::F32), tensor(&[i, hw], &vec![0.0; hw * i], Dtype::F32));
    let e = mlp::Call::new(&x96, &w41, &w41, &d41).use_tkg_down_proj_column_tiling(false).launch(&Launch::new()).unwrap_err().to_string();
    assert!(e.contains("use_tkg_down_proj_column_tiling=False needs H / 128 / programs"), "{e}");
    let x = tensor(&[4, h], &vec![0.0; 4 * h], Dtype::Bf16);
    let e = mlp::Call::new(&x, &w, &w, &d).quantization_type(QuantizationType::MX).launch(&Launch::new()).unwrap_err().to_string();
    assert!(e.contains("quantization_type MX needs trn3"), "{e}");
    let e = mlp::Call::new(&x, &w, &w, &d).quantization_type(QuantizationType::STATIC_MX).launch(&Launch::new()).unwrap_err().to_string();
    assert!(e.contains("STATIC_MX is only supported in context encoding"), "{e}");
    // fp8 weights: float weights, a float32 hidden, a missing or misshapen
    // scale, and the context-encoding path are each refused by name.
    let (w8, d8) = (tensor(&[h, i], &vec![0.0; h * i], Dtype::Fp8E4m3), tensor(&[i, h], &vec![0.0; h * i], Dtype::Fp8E4m3));
    let (s_i, s_h) = (tensor(&[128, i], &vec![1.0; 128 * i], Dtype::F32), tensor(&[128, h], &vec![1.0; 128 * h], Dtype::F32));
    let ok = row(&x, &w8, &d8).gate_w_scale(&s_i).up_w_scale(&s_i).down_w_scale(&s_h).launch(&Launch::new());
    assert!(ok.is_ok(), "{:?}", ok.err());
    let e = row(&x, &w, &d).launch(&Launch::new()).unwrap_err().to_string();
    assert!(e.contains("must be float8_e4m3 exactly when"), "{e}");
    let x32 = tensor(&[4, h], &vec![0.0; 4 * h], Dtype::F32);
    let e = row(&x32, &w8, &d8).gate_w_scale(&s_i).up_w_scale(&s_i).down_w_scale(&s_h).launch(&Launch::new()).unwrap_err().to_string();
    assert!(e.contains("hidden_tensor must be bfloat16, float16 or float8_e4m3"), "{e}");
    let e = row(&x, &w8, &d8).gate_w_scale(&s_i).up_w_scale(&s_i).launch(&Launch::new()).unwrap_err().to_string();
    assert!(e.contains("down_w_scale must be given"), "{e}");
    let e = row(&x, &w8, &d8).gate_w_scale(&s_i).up_w_scale(&s_h).down_w_scale(&s_h).launch(&Launch::new()).unwrap_err().to_string();
    assert!(e.contains("up_w_scale must be [128, 128]"), "{e}");
    let s1 = tensor(&[128, 1], &[1.0; 128], Dtype::F32);
    let stat = mlp::Call::new(&x, &w8, &w8, &d8).quantization_type(QuantizationType::STATIC).gate_w_scale(&s1).up_w_scale(&s1);
    let e = stat.down_w_scale(&s1).gate_up_in_scale(&s1).launch(&Launch::new()).unwrap_err().to_string();
    assert!(e.contains("down_in_scale must be given"), "{e}");
    let x_cte = tensor(&[97, h], &vec![0.0; 97 * h], Dtype::Bf16);
    let e = row(&x_cte, &w8, &d8).gate_w_scale(&s_i).up_w_scale(&s_i).down_w_scale(&s_h).launch(&Launch::new()).unwrap_err().to_string();
    assert!(e.contains("need a float8_e4m3 hidden_tensor"), "{e}");
    // fp8 hidden rows: ROW's are H + 4 wide, and they take no norm.
    let x8 = tensor(&[97, h], &vec![0.0; 97 * h], Dtype::Fp8E4m3);
    let e = row(&x8, &w8, &d8).gate_w_scale(&s_i).up_w_scale(&s_i).down_w_scale(&s_h).launch(&Launch::new()).unwrap_err().to_string();
    assert!(e.contains("must be [B, S, H + 4]"), "{e}");
    let stat8 = mlp::Call::new(&x8, &w8, &w8, &d8).quantization_type(QuantizationType::STATIC).gate_w_scale(&s1).up_w_scale(&s1);
    let stat8 = stat8.down_w_scale(&s1).gate_up_in_scale(&s1).down_in_scale(&s1);
    let e = stat8.normalization_type(RMS_NORM_SKIP_GAMMA).launch(&Launch::new()).unwrap_err().to_string();
    assert!(e.contains("takes no normalization"), "{e}");
    let e = mlp::Call::new(&x8, &w, &w, &d).launch(&Launch::new()).unwrap_err().to_string();
    assert!(e.contains("needs quantization_type STATIC or ROW"), "{e}");
}
