//! The library's `qkv_cte` against a float64 projection written from its
//! documented semantics (`x = input (+ mlp_prev + attention_prev)`, RMSNorm
//! `x·gamma/sqrt(Σx²/N + eps)` (without gamma for `RMS_NORM_SKIP_GAMMA`) or
//! LayerNorm `(x-μ)·gamma/sqrt(σ²+eps) (+ beta)`, `out = x @ W (+ bias)`, RoPE
//! `[X1, X2]·cos + [-X2, X1]·sin` on each Q and K head, stored `[B, S, I]` or
//! `[I/d, B, S, d]`), at the library's test configurations (a fast subset),
//! in both precision modes; its emitted source under NumPy against the
//! emulator; its rules; and the `qkv` entry's dispatch to it.

use crate::common::attention::run_numpy_kwargs;
use crate::common::sweep::sweep;
use crate::common::{
    Arg, CaseName, FP32_ATOL, FP32_RTOL, as_dtype, assert_close, assert_refused_by, assert_same_elements, layer_norm, package_of, rms_norm,
    seed_of, tensor, uniform, vec_mat,
};
use crate::mx_format::{e4m3fn, interleave_4h, pack_x4_rows, quantize_e4m3fn_groups, swizzle_4h};
use crate::qkv::projection_inputs;
use nki::{Dtype, Launch, Precision};
use nkilib::qkv::qkv::qkv as qkv_entry;
use nkilib::qkv::qkv_cte::{
    NormType, QKVOutputLayout, QKVWeightLayout, QkvCteRule, QkvCteShape, QuantizationType, qkv_cte, qkv_cte_violation,
};

/// The RoPE caches `(cos, sin)`, `[B·S·d_head]` each.
pub(crate) type Caches = (Vec<f64>, Vec<f64>);

/// The norm of a case.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Norm {
    None,
    Rms,
    RmsSkipGamma,
    Layer,
}

/// One configuration of the library's `test_qkv_cte.py`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Config {
    pub(crate) lnc: usize,
    pub(crate) b: usize,
    pub(crate) s: usize,
    pub(crate) h: usize,
    pub(crate) hidden_actual: Option<usize>,
    pub(crate) i: usize,
    pub(crate) d_head: usize,
    pub(crate) nq: usize,
    pub(crate) nkv: usize,
    pub(crate) norm: Norm,
    pub(crate) fused_add: bool,
    pub(crate) norm_bias: bool,
    pub(crate) qkv_bias: bool,
    pub(crate) nbsd: bool,
    pub(crate) rope: bool,
    pub(crate) eps: f64,
    /// STATIC quantization: float8_e4m3 weights, Q/K/V weight scales and an
    /// input scale, given as this many rows (1 or 128); 0 for none.
    pub(crate) static_scale_rows: usize,
    /// The fp8 KV-cache outputs.
    pub(crate) kv: Option<KvCache>,
    /// MX quantization (trn3).
    pub(crate) mx: Option<MxForm>,
}

/// MX quantization of a configuration: `[H/4, I]` `float8_e4m3fn_x4` weights
/// (byte `k` of packed row `r` is position `4r + k`: hidden row `4r + k` in
/// `MX_CONTIGUOUS`, the `MX_INTERLEAVED` order's hidden row otherwise), each
/// `float8_e4m3fn` code times `2^(s - 127)` for the `uint8` scale `s` of its
/// 32 positions (all 127 when no scales are given); the normalised input
/// quantized per 32 consecutive positions on chip.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MxForm {
    /// `qkv_w_scale` given (else the neutral `2^0`).
    pub(crate) scales: bool,
    /// The input pre-swizzled: each row's `[H/512, 128, 4]` stored as `[4, H/512, 128]`.
    pub(crate) swizzled: bool,
    /// A float8 input (`MX_INTERLEAVED`): its values are multiplied as given.
    pub(crate) fp8_input: Option<Dtype>,
    /// Static dequantization (`MX_INTERLEAVED`): `qkv_w_scale` `[rows, 3]`
    /// and `qkv_in_scale` `[rows, 1]` given as this many rows (1 or 128); 0 for none.
    pub(crate) dequant_rows: usize,
}

impl MxForm {
    /// The `MX_INTERLEAVED` forms (the DMA-transpose path).
    pub(crate) fn interleaved(&self) -> bool {
        self.fp8_input.is_some() || self.dequant_rows > 0
    }
}

/// The fp8 KV-cache outputs of a configuration: K and V divided by their
/// scales, clipped and stored as float8_e4m3 into caches prefilled with other
/// values (the rows not written must keep them).
#[derive(Clone, Copy, Debug)]
pub(crate) struct KvCache {
    k_scale: f64,
    v_scale: f64,
    /// `fp8_max`, `fp8_min` given (else ±240, float8_e4m3's largest finite value).
    clip: Option<(f64, f64)>,
    /// `[B, max_seq_len, kv_dim]` caches: max_seq_len; or block caches
    /// `[num_blocks, block_size, kv_dim]`, the rows placed in slots `B·S - 1 - row`.
    layout: KvLayout,
}

/// The caches' layout.
#[derive(Clone, Copy, Debug)]
enum KvLayout {
    Rows { max_seq_len: usize },
    Blocks { num_blocks: usize, block_size: usize },
}

impl KvCache {
    /// The caches' shape for `b` batches of `kv_dim` columns.
    fn shape(&self, b: usize, kv_dim: usize) -> Vec<usize> {
        match self.layout {
            KvLayout::Rows { max_seq_len } => vec![b, max_seq_len, kv_dim],
            KvLayout::Blocks { num_blocks, block_size } => vec![num_blocks, block_size, kv_dim],
        }
    }

    /// The cache row (in `[rows, kv_dim]`) of token row `t` (`b·S + s`).
    fn row_of(&self, t: usize, s: usize, bxs: usize) -> usize {
        match self.layout {
            KvLayout::Rows { max_seq_len } => (t / s) * max_seq_len + t % s,
            KvLayout::Blocks { .. } => bxs - 1 - t,
        }
    }

    /// The slot mapping `[B·S]`: row `t` in slot `B·S - 1 - t`.
    fn slots(&self, bxs: usize) -> Vec<f64> {
        (0..bxs).map(|t| (bxs - 1 - t) as f64).collect()
    }
}

/// A configuration: `I = (nq + 2·nkv)·d_head`, BSD, no bias, no RoPE, eps 1e-6.
#[allow(clippy::too_many_arguments)]
pub(crate) const fn c(
    lnc: usize,
    b: usize,
    s: usize,
    h: usize,
    d_head: usize,
    nq: usize,
    nkv: usize,
    norm: Norm,
    fused_add: bool,
) -> Config {
    Config {
        lnc,
        b,
        s,
        h,
        hidden_actual: None,
        i: (nq + 2 * nkv) * d_head,
        d_head,
        nq,
        nkv,
        norm,
        fused_add,
        norm_bias: false,
        qkv_bias: false,
        nbsd: false,
        rope: false,
        eps: 1e-6,
        static_scale_rows: 0,
        kv: None,
        mx: None,
    }
}

/// `cfg` with the fp8 KV-cache outputs.
const fn kv(cfg: Config, k_scale: f64, v_scale: f64, clip: Option<(f64, f64)>, layout: KvLayout) -> Config {
    Config { kv: Some(KvCache { k_scale, v_scale, clip, layout }), ..cfg }
}

/// The library's fp8 KV-cache configurations (test_qkv_cte.py's one query
/// and one key/value head of 128, H = 2048, two programs; S 512 and 1024
/// here, the library's 2048 in the comparison with the library kernel):
/// scales 1.67, 1.0 and 2.5, tiny scales that clip to ±240, block caches of
/// 64 blocks of 128 and 128 of 64 (the rows in reverse slot order); and two
/// batches, a residual add, RMSNorm, RoPE and a bias.
const KV_CONFIGS: &[Config] = &[
    kv(c(2, 1, 512, 2048, 128, 1, 1, Norm::None, false), 1.67, 1.67, None, KvLayout::Rows { max_seq_len: 4096 }),
    kv(c(2, 1, 1024, 2048, 128, 1, 1, Norm::None, false), 2.5, 1.0, None, KvLayout::Rows { max_seq_len: 1100 }),
    kv(c(2, 1, 512, 2048, 128, 1, 1, Norm::None, false), 0.001, 0.002, Some((240.0, -240.0)), KvLayout::Rows { max_seq_len: 512 }),
    kv(
        c(2, 1, 512, 2048, 128, 1, 1, Norm::None, false),
        1.67,
        1.67,
        Some((240.0, -240.0)),
        KvLayout::Blocks { num_blocks: 64, block_size: 128 },
    ),
    kv(
        c(2, 1, 512, 2048, 128, 1, 1, Norm::None, false),
        1.0,
        1.0,
        Some((240.0, -240.0)),
        KvLayout::Blocks { num_blocks: 128, block_size: 64 },
    ),
    kv(
        with(c(1, 2, 200, 512, 64, 4, 2, Norm::Rms, true), false, true, false, true),
        0.5,
        0.25,
        Some((100.0, -50.0)),
        KvLayout::Rows { max_seq_len: 300 },
    ),
    kv(
        with(c(2, 2, 130, 512, 64, 2, 1, Norm::None, false), false, true, false, false),
        0.01,
        0.02,
        None,
        KvLayout::Blocks { num_blocks: 5, block_size: 64 },
    ),
];

/// `cfg` with STATIC quantization, its scales given as `rows` rows.
const fn quant(cfg: Config, rows: usize) -> Config {
    Config { static_scale_rows: rows, ..cfg }
}

/// STATIC configurations: test_qkv_cte.py's 8 query and 1 key/value heads of
/// 128 (at smaller H and S), with and without a norm, the residual add and
/// both layouts. Without a bias: STATIC rounds the bias to float8_e4m3.
const STATIC_CONFIGS: &[Config] = &[
    quant(c(2, 1, 256, 2048, 128, 8, 1, Norm::None, false), 128),
    quant(with(c(1, 1, 200, 1024, 128, 8, 1, Norm::Rms, true), false, false, true, false), 1),
    quant(with(c(2, 1, 130, 1024, 128, 8, 1, Norm::Layer, false), true, false, false, false), 128),
];

/// `cfg` with the biases, layout and RoPE set.
pub(crate) const fn with(cfg: Config, norm_bias: bool, qkv_bias: bool, nbsd: bool, rope: bool) -> Config {
    Config { norm_bias, qkv_bias, nbsd, rope, ..cfg }
}

/// The library's configurations scaled to a fast test (its sizes, H to 16384
/// and RoPE at H = 8192, are compared with the library kernel itself under
/// the NumPy executor): every norm, the residual add, both biases, both
/// layouts, RoPE with heads of 128 and 64, one and two programs (an odd row
/// split), folded and unfolded batches, S blocks of several tiles, every
/// PSUM bank (I = 4096), H with a partial weight load.
const LIBRARY_CONFIGS: &[Config] = &[
    c(1, 1, 128, 512, 128, 2, 1, Norm::Rms, true),
    c(1, 1, 1000, 512, 128, 2, 1, Norm::Rms, true),
    Config { hidden_actual: Some(768), ..c(1, 1, 512, 1024, 128, 0, 1, Norm::Rms, true) },
    with(c(2, 1, 320, 2048, 128, 3, 1, Norm::Layer, false), true, false, false, false),
    with(c(2, 1, 128, 2048, 128, 6, 1, Norm::None, false), false, false, false, true),
    with(c(2, 1, 128, 2304, 64, 8, 1, Norm::None, true), false, true, false, true),
    with(c(2, 2, 257, 1024, 128, 2, 2, Norm::Layer, true), true, true, true, false),
    with(c(1, 2, 640, 512, 128, 3, 1, Norm::RmsSkipGamma, false), false, true, false, false),
    c(2, 1, 1290, 512, 128, 1, 1, Norm::None, false),
    with(c(1, 1, 200, 512, 128, 28, 2, Norm::None, false), false, true, false, false),
    Config { eps: 77.0, ..with(c(1, 1, 384, 1024, 128, 2, 1, Norm::Rms, false), false, false, true, true) },
];

impl Config {
    fn bxs(&self) -> usize {
        self.b * self.s
    }

    /// Inputs: [`projection_inputs`] (float8_e4m3 weights with STATIC, MX
    /// weights with MX), then the RoPE angles `[B·S·d/2]`, the STATIC scales,
    /// the prefilled KV caches, the MX codes and scales and the MX static
    /// dequantization scales.
    fn inputs(&self) -> Vec<Vec<f64>> {
        let seed = seed_of(&self.name());
        let (h, i) = (self.h, self.i);
        // STATIC: fp8 weights in [-1, 1], scales near 1/240 (the library's test's).
        let mut v = projection_inputs(seed, self.bxs(), h, i, self.static_scale_rows > 0);
        // MX: e4m3fn codes without NaN, scales 2^-9 .. 2^-6 (127 without scales).
        let codes: Vec<f64> =
            uniform(h * i, seed + 12, 0.0, 254.0).iter().map(|v| v.floor()).map(|c| if c >= 127.0 { c + 1.0 } else { c }).collect();
        let with_scales = self.mx.is_some_and(|m| m.scales);
        let exps: Vec<f64> = if with_scales {
            uniform(h / 32 * i, seed + 13, 118.0, 122.0).iter().map(|v| v.floor()).collect()
        } else {
            vec![127.0; h / 32 * i]
        };
        if self.mx.is_some() {
            v[3] = (0..h * i).map(|at| e4m3fn(codes[at] as u32) * 2f64.powf(exps[(at / i) / 32 * i + at % i] - 127.0)).collect();
        }
        v.extend([
            uniform(self.bxs() * self.d_head / 2, seed + 7, -std::f64::consts::PI, std::f64::consts::PI),
            uniform(3, seed + 8, 0.995 / 240.0, 1.005 / 240.0),
            uniform(1, seed + 9, 0.995 / 240.0, 1.005 / 240.0),
            as_dtype(&uniform(self.cache_len(), seed + 10, -8.0, 8.0), Dtype::Fp8E4m3),
            as_dtype(&uniform(self.cache_len(), seed + 11, -8.0, 8.0), Dtype::Fp8E4m3),
            codes,
            exps,
            // MX static dequantization: Q/K/V weight scales near 1, an input
            // scale that takes the rows to about 250 (within e4m3fn's 448).
            uniform(3, seed + 14, 0.8, 1.2),
            uniform(1, seed + 15, 0.004, 0.006),
        ]);
        v
    }

    /// Elements of one KV cache (0 without the KV-cache outputs).
    fn cache_len(&self) -> usize {
        self.kv.map_or(0, |kv| kv.shape(self.b, self.nkv * self.d_head).iter().product())
    }

    /// The KV-cache outputs' float64 values: Q `[B·S, q_dim]` of the
    /// projection, and the caches with each row's K (V) divided by its scale
    /// and clipped, the other rows as prefilled.
    fn kv_reference(&self, v: &[Vec<f64>], cache: &Caches, kv: &KvCache) -> Vec<Vec<f64>> {
        let (bxs, i, d) = (self.bxs(), self.i, self.d_head);
        let (q_dim, kv_dim) = (self.nq * d, self.nkv * d);
        let proj = self.reference(v, cache);
        let (hi, lo) = kv.clip.unwrap_or((240.0, -240.0));
        let q: Vec<f64> = (0..bxs).flat_map(|t| proj[t * i..t * i + q_dim].to_vec()).collect();
        let (mut k_cache, mut v_cache) = (v[10].clone(), v[11].clone());
        for t in 0..bxs {
            let row = kv.row_of(t, self.s, bxs);
            for e in 0..kv_dim {
                k_cache[row * kv_dim + e] = (proj[t * i + q_dim + e] / kv.k_scale).clamp(lo, hi);
                v_cache[row * kv_dim + e] = (proj[t * i + q_dim + kv_dim + e] / kv.v_scale).clamp(lo, hi);
            }
        }
        vec![q, k_cache, v_cache]
    }

    /// The RoPE caches `[B·S, d]`: cos and sin of each angle, both halves equal.
    fn caches(&self, v: &[Vec<f64>]) -> Caches {
        let half = self.d_head / 2;
        let at = |k: usize| v[7][(k / self.d_head) * half + k % self.d_head % half];
        let n = self.bxs() * self.d_head;
        ((0..n).map(|k| at(k).cos()).collect(), (0..n).map(|k| at(k).sin()).collect())
    }

    /// The normalised row `row` of `[H]`.
    fn norm_row(&self, row: &[f64], v: &[Vec<f64>]) -> Vec<f64> {
        let n = self.hidden_actual.unwrap_or(self.h);
        match self.norm {
            Norm::None => row.to_vec(),
            Norm::Rms => rms_norm(row, Some(&v[4]), n, self.eps),
            Norm::RmsSkipGamma => rms_norm(row, None, n, self.eps),
            Norm::Layer => layer_norm(row, &v[4], self.norm_bias.then_some(&v[5][..]), self.eps),
        }
    }

    /// The float64 projection in the output layout. `cache` is the rounded
    /// RoPE caches (cos, sin) the kernel is given.
    fn reference(&self, v: &[Vec<f64>], cache: &Caches) -> Vec<f64> {
        self.projection(v, cache, false)
    }

    /// [`Self::reference`]; with MX, the normalised rows rounded to bfloat16
    /// before their quantization when `round_rows` (as hardware precision
    /// stores them).
    pub(crate) fn projection(&self, v: &[Vec<f64>], cache: &Caches, round_rows: bool) -> Vec<f64> {
        let (bxs, h, i, d) = (self.bxs(), self.h, self.i, self.d_head);
        let mut out = vec![0.0; bxs * i];
        for t in 0..bxs {
            let mut x: Vec<f64> =
                (0..h).map(|k| v[0][t * h + k] + if self.fused_add { v[1][t * h + k] + v[2][t * h + k] } else { 0.0 }).collect();
            if round_rows && self.mx.is_some() {
                // The residual sum is stored in a bfloat16 tile before the norm.
                x = as_dtype(&x, Dtype::Bf16);
            }
            let mut y = self.norm_row(&x, v);
            if let Some(mx) = self.mx {
                y = self.mx_rows(&mx, y, v, round_rows);
            }
            // STATIC: the input divided by its scale and clipped, the sums times the weight and input scales.
            let quantized = self.static_scale_rows > 0;
            let y: Vec<f64> = if quantized { y.iter().map(|a| (a / v[9][0]).clamp(-240.0, 240.0)).collect() } else { y };
            let dequant = self.mx.is_some_and(|m| m.dequant_rows > 0);
            let factor = |col: usize| {
                let seg = usize::from(col >= self.nq * d) + usize::from(col >= (self.nq + self.nkv) * d);
                if quantized {
                    v[8][seg] * v[9][0]
                } else if dequant {
                    v[14][seg] * v[15][0]
                } else {
                    1.0
                }
            };
            let dots = vec_mat(&y, &v[3]);
            let mut row: Vec<f64> = (0..i).map(|col| dots[col] * factor(col) + if self.qkv_bias { v[6][col] } else { 0.0 }).collect();
            if self.rope {
                let (cos, sin) = (&cache.0[t * d..(t + 1) * d], &cache.1[t * d..(t + 1) * d]);
                for head in 0..self.nq + self.nkv {
                    let x: Vec<f64> = row[head * d..(head + 1) * d].to_vec();
                    for e in 0..d {
                        let rot = if e < d / 2 { -x[e + d / 2] } else { x[e - d / 2] };
                        row[head * d + e] = x[e] * cos[e] + rot * sin[e];
                    }
                }
            }
            for (col, val) in row.into_iter().enumerate() {
                let at = if self.nbsd { ((col / d) * bxs + t) * d + col % d } else { t * i + col };
                out[at] = val;
            }
        }
        out
    }

    /// MX: the normalised row `y` in the weights' position order,
    /// quantized as the kernel multiplies it. `MX_INTERLEAVED` positions hold
    /// hidden rows in the documented order; a float8 input is multiplied as
    /// given; with static dequantization each value is divided by the input
    /// scale and clipped to ±448 (rounded to bfloat16 when `round_rows`, as
    /// hardware precision stores it) before the 32-value groups are quantized.
    fn mx_rows(&self, mx: &MxForm, y: Vec<f64>, v: &[Vec<f64>], round_rows: bool) -> Vec<f64> {
        let mut y = if mx.interleaved() { interleave_4h(&y, self.h) } else { y };
        if mx.fp8_input.is_some() {
            return y;
        }
        if mx.dequant_rows > 0 {
            y = y.iter().map(|a| (a / v[15][0]).clamp(-E4M3FN_MAX, E4M3FN_MAX)).collect();
        }
        if round_rows {
            y = as_dtype(&y, Dtype::Bf16);
        }
        quantize_e4m3fn_groups(&mut y);
        y
    }

    fn norm_type(&self) -> (NormType, &'static str) {
        match self.norm {
            Norm::None => (NormType::NO_NORM, "NO_NORM"),
            Norm::Rms => (NormType::RMS_NORM, "RMS_NORM"),
            Norm::RmsSkipGamma => (NormType::RMS_NORM_SKIP_GAMMA, "RMS_NORM_SKIP_GAMMA"),
            Norm::Layer => (NormType::LAYER_NORM, "LAYER_NORM"),
        }
    }

    /// The emulator's projection.
    pub(crate) fn run(&self, v: &[Vec<f64>], cache: &Caches, dtype: Dtype, precision: Precision) -> Vec<f32> {
        let mut outs = self.run_outputs(v, cache, dtype, precision);
        let (b, s, i, d) = (self.b, self.s, self.i, self.d_head);
        let want: Vec<usize> = if self.nbsd { vec![i / d, b, s, d] } else { vec![b, s, i] };
        assert_eq!(outs.len(), 1, "{}", self.name());
        assert_eq!(outs[0].shape(), &want[..], "{}", self.name());
        outs.swap_remove(0).to_f32_vec()
    }

    /// The emulator's outputs: the projection, or Q and the two caches.
    fn run_outputs(&self, v: &[Vec<f64>], cache: &Caches, dtype: Dtype, precision: Precision) -> Vec<nki::Tensor> {
        let (b, s, h, i, d) = (self.b, self.s, self.h, self.i, self.d_head);
        let t = |shape: &[usize], x: &[f64]| tensor(shape, x, dtype);
        let x = tensor(&[b, s, h], &self.input_rows(v), self.input_dtype(dtype));
        let (mlp, attn) = (t(&[b, s, h], &v[1]), t(&[b, s, h], &v[2]));
        let w = tensor_of(&self.weight_arg(v, dtype));
        let mx_scales = tensor(&[h / 32, i], &v[13], Dtype::U8);
        let (gamma, beta, bias) = (t(&[1, h], &v[4]), t(&[1, h], &v[5]), t(&[1, i], &v[6]));
        let (cos, sin) = (t(&[b, s, d], &cache.0), t(&[b, s, d], &cache.1));
        let scales: Vec<nki::Tensor> = self.scales(v).iter().map(|(shape, x)| tensor(shape, x, Dtype::F32)).collect();
        let layout = if self.nbsd { QKVOutputLayout::NBSd } else { QKVOutputLayout::BSD };
        let mut call = qkv_cte::Call::new(&x, &w)
            .fused_norm_type(self.norm_type().0)
            .norm_eps(self.eps)
            .output_layout(layout)
            .d_head(d as i64)
            .num_q_heads(self.nq as i64)
            .num_kv_heads(self.nkv as i64)
            .gamma_norm_weights(matches!(self.norm, Norm::Rms | Norm::Layer).then_some(&gamma))
            .fused_residual_add(self.fused_add)
            .mlp_prev(self.fused_add.then_some(&mlp))
            .attention_prev(self.fused_add.then_some(&attn))
            .layer_norm_bias(self.norm_bias.then_some(&beta))
            .bias(self.qkv_bias.then_some(&bias))
            .hidden_actual(self.hidden_actual.map(|ha| ha as i64))
            .fused_rope(self.rope)
            .cos_cache(self.rope.then_some(&cos))
            .sin_cache(self.rope.then_some(&sin));
        if self.static_scale_rows > 0 {
            call = call.quantization_type(QuantizationType::STATIC).qkv_w_scale(&scales[0]).qkv_in_scale(&scales[1]);
        }
        let dequant: Vec<nki::Tensor> = self.mx_dequant_scales(v).iter().map(|(shape, x)| tensor(shape, x, Dtype::F32)).collect();
        if let Some(mx) = self.mx {
            call = call.quantization_type(QuantizationType::MX).weight_layout(mx_layout(&mx).0).is_input_swizzled(mx.swizzled);
            if mx.scales {
                call = call.qkv_w_scale(&mx_scales);
            }
            if let [w_scale, in_scale] = &dequant[..] {
                call = call.qkv_w_scale(w_scale).qkv_in_scale(in_scale);
            }
        }
        let kv_tensors = self.kv_tensors(v);
        if let (Some(kv), Some([k_cache, v_cache, k_scale, v_scale, slots])) = (self.kv, kv_tensors.as_ref()) {
            call = call.k_cache(k_cache).v_cache(v_cache).k_scale(k_scale).v_scale(v_scale).kv_dtype(Dtype::Fp8E4m3);
            if let Some((hi, lo)) = kv.clip {
                call = call.fp8_max(hi).fp8_min(lo);
            }
            if let KvLayout::Blocks { block_size, .. } = kv.layout {
                call = call.use_block_kv(true).block_size(block_size as i64).slot_mapping(slots);
            }
        }
        let out = call.launch(&self.launch(precision)).unwrap_or_else(|e| panic!("{}: {e}", self.name()));
        out.0
    }

    /// The launch of `lnc` programs in `precision` (trn3 with MX).
    pub(crate) fn launch(&self, precision: Precision) -> Launch {
        let launch = Launch::new().lnc(self.lnc).precision(precision);
        if self.mx.is_some() { launch.generation(nki::hw::Generation::Trn3) } else { launch }
    }

    /// The input's dtype for `dtype` inputs: the float8 input's with MX.
    fn input_dtype(&self, dtype: Dtype) -> Dtype {
        self.mx.and_then(|m| m.fp8_input).unwrap_or(dtype)
    }

    /// MX static dequantization's scale tensors' shapes and values:
    /// `qkv_w_scale` `[rows, 3]`, `qkv_in_scale` `[rows, 1]`.
    fn mx_dequant_scales(&self, v: &[Vec<f64>]) -> Vec<(Vec<usize>, Vec<f64>)> {
        let r = self.mx.map_or(0, |m| m.dequant_rows);
        let rows = |x: &[f64]| (vec![r, x.len()], x.iter().cycle().take(r * x.len()).copied().collect::<Vec<f64>>());
        if r == 0 { vec![] } else { vec![rows(&v[14]), rows(&v[15])] }
    }

    /// The input rows as the kernel takes them (MX: pre-swizzled when asked).
    fn input_rows(&self, v: &[Vec<f64>]) -> Vec<f64> {
        if self.mx.is_some_and(|m| m.swizzled) { swizzle_4h(&v[0], self.h) } else { v[0].clone() }
    }

    /// The weights argument: `[H, I]` in `dtype` (STATIC: float8_e4m3), or
    /// MX's packed `[H/4, I]` words.
    fn weight_arg(&self, v: &[Vec<f64>], dtype: Dtype) -> Arg {
        let (h, i) = (self.h, self.i);
        if self.mx.is_some() {
            let codes: Vec<u32> = v[12].iter().map(|&c| c as u32).collect();
            let words = pack_x4_rows(&codes, h, i).iter().map(|&w| w as f64).collect();
            return Arg::Tensor(vec![h / 4, i], words, Dtype::Fp8E4m3Fnx4);
        }
        Arg::Tensor(vec![h, i], v[3].clone(), if self.static_scale_rows > 0 { Dtype::Fp8E4m3 } else { dtype })
    }

    /// The KV-cache outputs' tensors: the caches (float8_e4m3), the scales
    /// `[128, 1]` and the slot mapping `[B, S]` int32.
    fn kv_tensors(&self, v: &[Vec<f64>]) -> Option<[nki::Tensor; 5]> {
        self.kv_args(v).map(|args| {
            args.map(|a| match a {
                Arg::Tensor(shape, x, dtype) => tensor(&shape, &x, dtype),
                _ => unreachable!("the KV-cache arguments are tensors"),
            })
        })
    }

    /// The KV-cache outputs' arguments: k_cache, v_cache, k_scale, v_scale, slot_mapping.
    fn kv_args(&self, v: &[Vec<f64>]) -> Option<[Arg; 5]> {
        let kv = self.kv?;
        let shape = kv.shape(self.b, self.nkv * self.d_head);
        let scale = |x: f64| Arg::Tensor(vec![128, 1], vec![x; 128], Dtype::F32);
        Some([
            Arg::Tensor(shape.clone(), v[10].clone(), Dtype::Fp8E4m3),
            Arg::Tensor(shape, v[11].clone(), Dtype::Fp8E4m3),
            scale(kv.k_scale),
            scale(kv.v_scale),
            Arg::Tensor(vec![self.b, self.s], kv.slots(self.bxs()), Dtype::I32),
        ])
    }

    /// STATIC's scale tensors' shapes and values: `qkv_w_scale`, `qkv_in_scale`.
    fn scales(&self, v: &[Vec<f64>]) -> Vec<(Vec<usize>, Vec<f64>)> {
        let r = self.static_scale_rows;
        let rows = |x: &[f64]| (vec![r, x.len()], x.iter().cycle().take(r * x.len()).copied().collect::<Vec<f64>>());
        if r == 0 { vec![] } else { vec![rows(&v[8]), rows(&v[9])] }
    }

    /// The kernel's arguments for the NumPy executor.
    pub(crate) fn numpy_call(&self, v: &[Vec<f64>], cache: &Caches, dtype: Dtype) -> (Vec<Arg>, Vec<(&'static str, Arg)>) {
        let (b, s, h, i, d) = (self.b, self.s, self.h, self.i, self.d_head);
        let t = |shape: Vec<usize>, x: &[f64]| Arg::Tensor(shape, x.to_vec(), dtype);
        let mut kw = vec![
            ("fused_norm_type", Arg::Member("NormType", self.norm_type().1)),
            ("norm_eps", Arg::Float(self.eps)),
            ("d_head", Arg::Int(d as i64)),
            ("num_q_heads", Arg::Int(self.nq as i64)),
            ("num_kv_heads", Arg::Int(self.nkv as i64)),
            ("output_layout", Arg::Member("QKVOutputLayout", if self.nbsd { "NBSd" } else { "BSD" })),
        ];
        if matches!(self.norm, Norm::Rms | Norm::Layer) {
            kw.push(("gamma_norm_weights", t(vec![1, h], &v[4])));
        }
        if self.fused_add {
            kw.push(("fused_residual_add", Arg::Bool(true)));
            kw.push(("mlp_prev", t(vec![b, s, h], &v[1])));
            kw.push(("attention_prev", t(vec![b, s, h], &v[2])));
        }
        if self.norm_bias {
            kw.push(("layer_norm_bias", t(vec![1, h], &v[5])));
        }
        if self.qkv_bias {
            kw.push(("bias", t(vec![1, i], &v[6])));
        }
        if let Some(ha) = self.hidden_actual {
            kw.push(("hidden_actual", Arg::Int(ha as i64)));
        }
        if self.rope {
            kw.push(("fused_rope", Arg::Bool(true)));
            kw.push(("cos_cache", t(vec![b, s, d], &cache.0)));
            kw.push(("sin_cache", t(vec![b, s, d], &cache.1)));
        }
        for ((shape, x), name) in self.scales(v).into_iter().zip(["qkv_w_scale", "qkv_in_scale"]) {
            kw.push((name, Arg::Tensor(shape, x, Dtype::F32)));
        }
        if self.static_scale_rows > 0 {
            kw.push(("quantization_type", Arg::Member("QuantizationType", "STATIC")));
        }
        if let Some(mx) = self.mx {
            kw.push(("quantization_type", Arg::Member("QuantizationType", "MX")));
            kw.push(("weight_layout", Arg::Member("QKVWeightLayout", mx_layout(&mx).1)));
            kw.push(("is_input_swizzled", Arg::Bool(mx.swizzled)));
            if mx.scales {
                kw.push(("qkv_w_scale", Arg::Tensor(vec![h / 32, i], v[13].clone(), Dtype::U8)));
            }
            for ((shape, x), name) in self.mx_dequant_scales(v).into_iter().zip(["qkv_w_scale", "qkv_in_scale"]) {
                kw.push((name, Arg::Tensor(shape, x, Dtype::F32)));
            }
        }
        if let (Some(kv), Some([k_cache, v_cache, k_scale, v_scale, slots])) = (self.kv, self.kv_args(v)) {
            kw.extend([("k_cache", k_cache), ("v_cache", v_cache), ("k_scale", k_scale), ("v_scale", v_scale)]);
            kw.push(("kv_dtype", Arg::Dtype(Dtype::Fp8E4m3)));
            if let Some((hi, lo)) = kv.clip {
                kw.extend([("fp8_max", Arg::Float(hi)), ("fp8_min", Arg::Float(lo))]);
            }
            if let KvLayout::Blocks { block_size, .. } = kv.layout {
                kw.extend([("use_block_kv", Arg::Bool(true)), ("block_size", Arg::Int(block_size as i64)), ("slot_mapping", slots)]);
            }
        }
        let x = Arg::Tensor(vec![b, s, h], self.input_rows(v), self.input_dtype(dtype));
        (vec![x, self.weight_arg(v, dtype)], kw)
    }

    /// Inputs and caches rounded to `dtype` (not the fp8 weights nor the fp32
    /// scales; the input to the float8 input's dtype).
    pub(crate) fn inputs_in(&self, dtype: Dtype) -> (Vec<Vec<f64>>, Caches) {
        let keep = |k: usize| (k == 3 && (self.static_scale_rows > 0 || self.mx.is_some())) || k > 7;
        let round = |k: usize| if k == 0 { self.input_dtype(dtype) } else { dtype };
        let v: Vec<Vec<f64>> =
            self.inputs().iter().enumerate().map(|(k, x)| if keep(k) { x.clone() } else { as_dtype(x, round(k)) }).collect();
        let (cos, sin) = self.caches(&self.inputs());
        (v, (as_dtype(&cos, dtype), as_dtype(&sin, dtype)))
    }
}

/// The largest finite `float8_e4m3fn` (the static dequantization's clip bound on trn3).
const E4M3FN_MAX: f64 = 448.0;

/// MX's weight layout: `MX_INTERLEAVED` for the DMA-transpose forms, else
/// `MX_CONTIGUOUS` (the member and its name).
pub(crate) fn mx_layout(mx: &MxForm) -> (QKVWeightLayout, &'static str) {
    if mx.interleaved() { (QKVWeightLayout::MX_INTERLEAVED, "MX_INTERLEAVED") } else { (QKVWeightLayout::MX_CONTIGUOUS, "MX_CONTIGUOUS") }
}

/// The tensor of a tensor argument (packed x4 values as their words).
pub(crate) fn tensor_of(arg: &Arg) -> nki::Tensor {
    match arg {
        Arg::Tensor(shape, x, Dtype::Fp8E4m3Fnx4) => {
            nki::Tensor::from_i64(shape, &x.iter().map(|&w| w as i64).collect::<Vec<_>>(), Dtype::Fp8E4m3Fnx4).unwrap()
        }
        Arg::Tensor(shape, x, dtype) => tensor(shape, x, *dtype),
        _ => unreachable!("a tensor argument"),
    }
}

/// Runs `cfg` in `dtype` and `precision` and checks the projection against
/// the float64 reference: `|got - want| <= atol + scaled · max|want|`.
fn check(cfg: &Config, dtype: Dtype, precision: Precision, atol: f64, scaled: f64) {
    let (v, cache) = cfg.inputs_in(dtype);
    let got = cfg.run(&v, &cache, dtype, precision);
    let want = cfg.reference(&v, &cache);
    assert_close(&format!("{} {dtype:?} {precision:?}", cfg.name()), &got, &want, atol, scaled);
}

/// Every configuration, fp32 inputs in fp32 precision (every value kept in
/// fp32, the kernel's bfloat16 compute tiles included): the fp32 metric.
#[test]
fn qkv_cte_library_configs_in_fp32_match_float64() {
    for cfg in LIBRARY_CONFIGS {
        check(cfg, Dtype::F32, Precision::Fp32, FP32_ATOL, FP32_RTOL);
    }
}

/// Every configuration, bfloat16 inputs (the library's tests') in hardware
/// precision, against float64 on the rounded inputs: the normalised rows,
/// the outputs and RoPE's products are rounded to bfloat16 (sums in fp32),
/// a few bfloat16 steps of the output's scale.
#[test]
fn qkv_cte_library_configs_in_bfloat16_match_float64() {
    for cfg in LIBRARY_CONFIGS {
        check(cfg, Dtype::Bf16, Precision::Hardware, 0.0, 4.0 / 256.0);
    }
}

/// STATIC configurations in fp32 precision (the quantized input not rounded
/// to fp8): the fp32 metric; bfloat16 inputs in hardware precision, the
/// input rounded to fp8 (a relative error up to 2^-4 per element, of random
/// sign): 2^-4 of the output's scale.
#[test]
fn qkv_cte_static_quantization_matches_float64() {
    for cfg in STATIC_CONFIGS {
        check(cfg, Dtype::Bf16, Precision::Fp32, FP32_ATOL, FP32_RTOL);
        check(cfg, Dtype::Bf16, Precision::Hardware, 0.0, 1.0 / 16.0);
    }
}

/// Runs `cfg`'s KV-cache outputs in `dtype` and `precision` against the
/// float64 reference: Q within `atol + q_scaled · max|Q|`, each cache within
/// `atol + kv_scaled · max|cache|`, and the cache rows not written exactly
/// as prefilled.
fn check_kv(cfg: &Config, dtype: Dtype, precision: Precision, atol: f64, q_scaled: f64, kv_scaled: f64) {
    let kv = cfg.kv.expect("a KV-cache configuration");
    let (v, cache) = cfg.inputs_in(dtype);
    let got: Vec<Vec<f32>> = cfg.run_outputs(&v, &cache, dtype, precision).iter().map(|t| t.to_f32_vec()).collect();
    let want = cfg.kv_reference(&v, &cache, &kv);
    let name = format!("{} {dtype:?} {precision:?}", cfg.name());
    assert_eq!(got.len(), 3, "{name}: Q, k_cache and v_cache");
    assert_close(&format!("{name} Q"), &got[0], &want[0], atol, q_scaled);
    let kv_dim = cfg.nkv * cfg.d_head;
    let written: std::collections::HashSet<usize> = (0..cfg.bxs()).map(|t| kv.row_of(t, cfg.s, cfg.bxs())).collect();
    for (k, what) in [(1, "k_cache"), (2, "v_cache")] {
        assert_close(&format!("{name} {what}"), &got[k], &want[k], atol, kv_scaled);
        for (e, (&g, &p)) in got[k].iter().zip(&v[9 + k]).enumerate() {
            assert!(written.contains(&(e / kv_dim)) || f64::from(g) == p, "{name} {what} element {e} not written: {g} vs {p}");
        }
    }
}

/// The fp8 KV-cache outputs: fp32 inputs in fp32 precision (the quantized
/// values not rounded to fp8) to the fp32 metric; bfloat16 inputs in hardware
/// precision, Q to the bfloat16 metric and the caches, rounded to
/// float8_e4m3 (2^-4 relative) from bfloat16 K and V, to 2^-4 + 2^-7 of
/// their scale.
#[test]
fn qkv_cte_fp8_kv_cache_matches_float64() {
    for cfg in KV_CONFIGS {
        check_kv(cfg, Dtype::F32, Precision::Fp32, FP32_ATOL, FP32_RTOL, FP32_RTOL);
        check_kv(cfg, Dtype::Bf16, Precision::Hardware, 0.0, 4.0 / 256.0, 1.0 / 16.0 + 1.0 / 128.0);
    }
}

/// A float32 input is computed in bfloat16 (the library's compute dtype for
/// it) in hardware precision: the bfloat16 metric, not the fp32 one.
#[test]
fn qkv_cte_float32_input_computes_in_bfloat16() {
    let cfg = LIBRARY_CONFIGS[0];
    check(&cfg, Dtype::F32, Precision::Hardware, 0.0, 4.0 / 256.0);
    let (v, cache) = cfg.inputs_in(Dtype::F32);
    let got = cfg.run(&v, &cache, Dtype::F32, Precision::Hardware);
    // Stored from a bfloat16 tile: every value is a bfloat16.
    assert!(got.iter().all(|&x| f64::from(x) == as_dtype(&[f64::from(x)], Dtype::Bf16)[0]), "outputs are not bfloat16 values");
}

/// The emitted `qkv_cte` under NumPy equals the emulator, element for
/// element, on one configuration per path, in both modes. (No S tile of one
/// row: a one-column matmul sums its products in another order under NumPy.)
#[test]
fn qkv_cte_emitted_under_numpy_equals_emulator() {
    let pkg = package_of("qkv_cte_pkg", &[&qkv_cte::INFO]);
    let paths = [
        with(Config { hidden_actual: Some(300), ..c(2, 1, 200, 512, 64, 4, 2, Norm::Rms, true) }, false, true, false, true),
        with(c(2, 2, 130, 1024, 128, 2, 1, Norm::Layer, true), true, true, true, false),
        with(c(1, 2, 700, 256, 128, 1, 1, Norm::RmsSkipGamma, false), false, false, false, false),
        c(1, 1, 300, 1152, 128, 5, 1, Norm::None, false),
        quant(with(c(2, 1, 260, 512, 128, 2, 1, Norm::Rms, true), false, true, false, true), 1),
        KV_CONFIGS[2],
        KV_CONFIGS[5],
        KV_CONFIGS[6],
    ];
    for (cfg, m) in sweep(paths) {
        let (dtype, precision, mode) = m.run(Dtype::F32, Dtype::Bf16);
        // STATIC takes a 16-bit input.
        let dtype = if cfg.static_scale_rows > 0 { Dtype::Bf16 } else { dtype };
        let (v, cache) = cfg.inputs_in(dtype);
        let emu = cfg.run_outputs(&v, &cache, dtype, precision);
        let (args, kwargs) = cfg.numpy_call(&v, &cache, dtype);
        let np = run_numpy_kwargs(&pkg, "qkv_cte", &args, &kwargs, cfg.lnc, mode);
        assert_eq!(np.len(), emu.len(), "{} {mode}", cfg.name());
        for (out, (np_out, emu_out)) in np.iter().zip(&emu).enumerate() {
            assert_same_elements(&format!("{} {mode} output {out}", cfg.name()), np_out, &emu_out.to_f32_vec());
        }
    }
}

/// A prefill call every rule accepts: 1024 tokens, RMSNorm and RoPE fused,
/// the NBSd layout; the rules' cases change what they break.
pub(crate) const ACCEPTED: QkvCteShape = QkvCteShape {
    bxs: 1024,
    hidden: 8192,
    fused_qkv: 1280,
    d_head: 128,
    num_q_heads: 8,
    num_kv_heads: 1,
    hidden_actual: 0,
    nbsd: true,
    fused_rope: true,
    kv_cache: false,
    mx_quant: false,
    s_shard: 512,
    mx_interleaved: false,
    swizzled: false,
    normalized: true,
    fused_residual_add: false,
    fp8_input: false,
    bf16_input: true,
    dma_transpose_off: false,
    qkv_w_scale: [0, 0],
    qkv_in_scale: [0, 0],
};

/// The rules, as `const fn` and when the kernel is traced; the options not
/// implemented are refused by name.
#[test]
fn qkv_cte_rules_refuse_by_name() {
    let ok = ACCEPTED;
    assert_eq!(qkv_cte_violation(ok), None);
    let cases = [
        (QkvCteShape { bxs: 0, ..ok }, QkvCteRule::Positive),
        (QkvCteShape { hidden: 1000, ..ok }, QkvCteRule::Hidden),
        (QkvCteShape { hidden: 24576 + 128, ..ok }, QkvCteRule::Hidden),
        (QkvCteShape { fused_qkv: 5120, ..ok }, QkvCteRule::FusedQkv),
        (QkvCteShape { d_head: 64, num_q_heads: 18, ..ok }, QkvCteRule::HeadDim),
        (QkvCteShape { num_q_heads: 7, ..ok }, QkvCteRule::Heads),
        (QkvCteShape { hidden_actual: 9000, ..ok }, QkvCteRule::HiddenActual),
        (QkvCteShape { num_kv_heads: 0, d_head: 0, nbsd: false, ..ok }, QkvCteRule::RopeHeads),
        (QkvCteShape { fused_qkv: 1920, d_head: 192, nbsd: false, ..ok }, QkvCteRule::RopeHeads),
        (QkvCteShape { kv_cache: true, ..ok }, QkvCteRule::KvCacheLayout),
        (QkvCteShape { kv_cache: true, nbsd: false, fused_rope: false, num_q_heads: 0, ..ok }, QkvCteRule::KvCacheHeads),
    ];
    assert_refused_by(qkv_cte_violation, cases);
    assert_eq!(nkilib::qkv_cte_config!(bxs = 128, hidden = 256, fused_qkv = 384, d_head = 128).bxs, 128);

    let z = |shape: &[usize]| tensor(shape, &vec![0.0; shape.iter().product()], Dtype::F32);
    let (x, w) = (z(&[1, 130, 384]), z(&[384, 256]));
    let err = |call: qkv_cte::Call| call.launch(&Launch::new()).unwrap_err().to_string();
    let e = err(qkv_cte::Call::new(&z(&[1, 130, 300]), &z(&[300, 256])));
    assert!(e.contains("H must be a multiple of 128 and at most 24576, got H = 300"), "{e}");
    let e = err(qkv_cte::Call::new(&x, &z(&[384, 4608])));
    assert!(e.contains("I (fused_qkv_weights.shape[1]) must be at most 4096"), "{e}");
    let e = err(qkv_cte::Call::new(&x, &w).output_layout(QKVOutputLayout::NBSd).d_head(64));
    assert!(e.contains("the NBSd output layout needs d_head = 128"), "{e}");
    let e = err(qkv_cte::Call::new(&x, &w).fused_norm_type(NormType::RMS_NORM));
    assert!(e.contains("gamma_norm_weights must be given for RMS_NORM and LAYER_NORM"), "{e}");
    let e = err(qkv_cte::Call::new(&x, &w).fused_residual_add(true));
    assert!(e.contains("fused_residual_add needs mlp_prev and attention_prev"), "{e}");
    let e = err(qkv_cte::Call::new(&x, &w).fused_rope(true));
    assert!(e.contains("fused_rope needs cos_cache, sin_cache, num_q_heads and num_kv_heads"), "{e}");
    let e = err(qkv_cte::Call::new(&x, &w).quantization_type(QuantizationType::ROW));
    assert!(
        e.contains("quantization_type must be NONE, STATIC or MX (the library's qkv_cte has no ROW path), got QuantizationType.ROW"),
        "{e}"
    );
    let e = err(qkv_cte::Call::new(&x, &w).quantization_type(QuantizationType::STATIC));
    assert!(e.contains("fused_qkv_weights must be float8_e4m3 exactly when quantization_type is STATIC"), "{e}");
    let e = err(qkv_cte::Call::new(&x, &w).k_scale(&z(&[128, 1])));
    assert!(e.contains("k_scale and v_scale must be given together"), "{e}");
    let e = err(qkv_cte::Call::new(&x, &w).use_block_kv(true));
    assert!(e.contains("use_block_kv needs k_scale and v_scale"), "{e}");
    let scale = z(&[128, 1]);
    fn scaled<'a>(call: qkv_cte::Call<'a>, scale: &'a nki::Tensor) -> qkv_cte::Call<'a> {
        call.d_head(128).k_scale(scale).v_scale(scale)
    }
    let e = err(scaled(qkv_cte::Call::new(&x, &w), &scale));
    assert!(e.contains("the fp8 KV-cache outputs need d_head, num_q_heads and num_kv_heads"), "{e}");
    let (x3, w3) = (z(&[1, 130, 384]), z(&[384, 384]));
    let e = err(scaled(qkv_cte::Call::new(&x3, &w3), &scale).num_q_heads(1).num_kv_heads(1));
    assert!(e.contains("the fp8 KV-cache outputs need k_cache and v_cache"), "{e}");
    let (short, cache) = (z(&[1, 100, 128]), z(&[1, 200, 128]));
    let full = scaled(qkv_cte::Call::new(&x3, &w3), &scale).num_q_heads(1).num_kv_heads(1).k_cache(&cache).v_cache(&cache);
    let e = err(full.clone().k_cache(&short));
    assert!(e.contains("k_cache and v_cache must be [B, max_seq_len >= S, kv_dim] = [1, >= 130, 128], got (1, 100, 128)"), "{e}");
    let e = err(full.clone().use_block_kv(true));
    assert!(e.contains("use_block_kv needs slot_mapping and block_size"), "{e}");
    let e = err(full.kv_dtype(Dtype::Bf16));
    assert!(e.contains("fp8_max and fp8_min must be given when kv_dtype is not float8_e4m3 or float8_e5m2"), "{e}");
    let e = err(qkv_cte::Call::new(&x, &w).store_output_in_sbuf(true));
    assert!(e.contains("store_output_in_sbuf is not supported"), "{e}");
}

/// The library's `qkv` entry sends context-encoding calls (S > 96, B·S >
/// 128, or fused RoPE) to `qkv_cte`, with the same results.
#[test]
fn qkv_entry_dispatches_context_calls_to_qkv_cte() {
    let fp32 = Launch::new().precision(Precision::Fp32);
    for (b, s, rope) in [(1, 97, false), (3, 64, false), (1, 4, true)] {
        let cfg = with(c(1, b, s, 256, 64, 2, 1, Norm::Rms, true), false, true, false, rope);
        let (v, cache) = cfg.inputs_in(Dtype::F32);
        let want = cfg.run(&v, &cache, Dtype::F32, Precision::Fp32);
        let t = |shape: &[usize], x: &[f64]| tensor(shape, x, Dtype::F32);
        let (h, i, d) = (cfg.h, cfg.i, cfg.d_head);
        let (x, mlp, attn, w) = (t(&[b, s, h], &v[0]), t(&[b, s, h], &v[1]), t(&[b, s, h], &v[2]), t(&[h, i], &v[3]));
        let (gamma, bias, cos, sin) = (t(&[1, h], &v[4]), t(&[1, i], &v[6]), t(&[b, s, d], &cache.0), t(&[b, s, d], &cache.1));
        let mut call = qkv_entry::Call::new(&x, &w)
            .bias(&bias)
            .fused_residual_add(true)
            .mlp_prev(&mlp)
            .attention_prev(&attn)
            .fused_norm_type(NormType::RMS_NORM)
            .gamma_norm_weights(&gamma)
            .d_head(d as i64)
            .num_q_heads(2)
            .num_kv_heads(1);
        if rope {
            call = call.fused_rope(true).cos_cache(&cos).sin_cache(&sin);
        }
        let got = call.launch(&fp32).unwrap_or_else(|e| panic!("qkv {b}x{s}: {e}"));
        assert_eq!(got.len(), 1, "qkv_cte returns the projection alone");
        assert!(got.0[0].to_f32_vec() == want, "qkv {b}x{s} rope={rope} differs from qkv_cte's");
    }
}
