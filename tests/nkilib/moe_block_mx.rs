//! The library's `moe_block_tkg` with MX expert weights (`float4_e2m1fn_x4`,
//! `float8_e4m3fn_x4`; trn3, LNC2, `POST_SCALE`) against a float64 MoE block
//! written from its documented computation: the RMSNorm of each token row
//! `x` (`x = inp + residual` when a residual is given, also returned as
//! `residual_out`), `y = x · gamma / sqrt(Σx² / N + eps)` (`N` =
//! `hidden_actual` or `H`); logits `y W_r + b_r`; softmax or sigmoid before
//! (then optionally renormalised over the top-k) or after the top-k; then
//! the MX experts of the `mlp_tkg` / `moe_tkg` MX tests — `y` in the
//! pre-shuffled order quantized per 32 values to e4m3, each projection's
//! weights `code value · 2^(scale - 127)`, `act(clamp(gate)) · clamp(up)`
//! quantized again before the down projection — each token's top-k experts
//! (selective, `T <= 128`; the weights hold every expert) or every local
//! expert of the rank (all-expert, `rank_id · E_L ..`, the fused
//! `rmsnorm_mx_quantize_tkg`), each expert's output weighted by the token's
//! affinity for it. The all-expert path adds each expert's down bias before
//! its affinity (zero for an unselected expert); the selective path adds
//! every expert's down bias weighted by the affinity the router stored for
//! it, as the library's kernel does — with sigmoid or softmax before the
//! top-k and no renormalisation the router leaves the unselected experts'
//! affinities unmasked, so their biases count too (the library's torch
//! reference counts only the selected ones). At CI-sized subsets of the library test's MX rows
//! (`test_moe_block_tkg.py`: `H = 3072` with and without `hidden_actual =
//! 2880`, `I = 192` / `384`, `K = 4`, 128 router experts on the all-expert
//! path; 16 on the selective path) and what it leaves out: the residual add
//! (which needs `T >= 256` and `H / 128` a multiple of 8; 64 router experts
//! there, so that the routing stays unambiguous at `H = 1024`), skewed
//! routings (every token on one expert, experts without tokens), sigmoid
//! and pre-norm routers, skipped logits.
//! Both precision modes; the emitted source under NumPy against the
//! emulator.
//!
//! The routing is unambiguous as in the non-MX `moe_block` test: token `t`
//! holds level `v[t, e]` (a permutation of `1..=E`, small noise) on the
//! hidden block the router reads for expert `e`; the reference checks the
//! margin it relies on.
//!
//! MXFP8 quantization is discontinuous: in fp32 precision a value the
//! float32 sums leave a few ulps from where float64 puts it may round to
//! the next e4m3 code (or its group to the next scale), which moves the
//! output by far more than the fp32 tolerance. So the fp32 inputs are
//! settled first: while the float64 reference finds a quantized value (the
//! normalised rows, or a gated product) within a few times the float32
//! error of a rounding boundary of its code or its group's scale, the
//! column's gamma (rows) or the expert column's gate and up biases (gated
//! products) move by a small step and the reference is recomputed. The
//! settled inputs are ordinary inputs: only the float64 reference chooses
//! them. In hardware precision the reference rounds what the kernel holds
//! in 16 bits (the normalised rows in the input's dtype, the projections'
//! running sums, activations and expert outputs in bfloat16, the gated
//! products in the output dtype on the selective path and bfloat16 on the
//! all-expert one, the sums of the experts).

use crate::common::{
    Arg, CaseName, FP32_ATOL, as_dtype, assert_close, assert_numpy_close_to_emulator, matmul, package_of, seed_of, spec_run, tensor,
    uniform, vec_mat,
};
use crate::mlp::activation;
use crate::mlp_tkg_mx::{Data, Mx, P, W, mx};
use crate::moe_block::{self as block, Routing, all, sel};
use crate::moe_tkg::CLAMPS;
use crate::moe_tkg_mx::stack_experts;
use crate::mx_format::{e2m1fn, e4m3fn, quantize_e4m3fn_groups};
use crate::router_topk::activate;
use nki::emit::PyEnum;
use nki::{Dtype, Launch, Precision, Tensor};
use nkilib::moe_block::moe_block_tkg::{ActFnType, ExpertAffinityScaleMode, RouterActFnType, moe_block_tkg};
use std::collections::HashMap;

const EPS: f64 = 1e-6;
/// The fp32 reference's margin around a quantization boundary: a few
/// times the float32 error of what is quantized, relative to the value for
/// the normalised rows, and for a gated product `act(g) · u` relative to
/// the magnitude of the sums `g` and `u` come from (their float32 error is
/// about a part in a million of the row's typical `g` and `u`, whatever
/// their own value).
const MARGIN: f64 = 4e-6;

/// One configuration: the non-MX block's sizes, router and routing (LNC2;
/// its `POST_SCALE`, expert biases and clamps always on: those of the
/// library's MX rows) with MX expert weights and the fused residual add.
#[derive(Clone, Copy)]
struct Config {
    base: block::Config,
    /// The expert weights' MX element type.
    w: W,
    /// The fused residual add (all-expert).
    residual: bool,
}

/// A non-MX configuration with MX expert weights of type `w`.
const fn with_mx(w: W, base: block::Config) -> Config {
    Config { base: block::Config { post: true, bias: true, clamp: true, ..base }, w, residual: false }
}

impl Config {
    /// `s` tokens per batch row (the non-MX all-expert rows take one).
    const fn seq(mut self, s: usize) -> Self {
        self.base.s = s;
        self
    }
    const fn residual(mut self) -> Self {
        self.residual = true;
        self
    }
}

impl std::ops::Deref for Config {
    type Target = block::Config;
    fn deref(&self) -> &block::Config {
        &self.base
    }
}

/// The name the seeds derive from: the MX fields and those of the base the
/// MX forms vary.
impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let c = &self.base;
        f.debug_struct("Config")
            .field("w", &self.w)
            .field("all", &c.all_expert)
            .field("b", &c.b)
            .field("s", &c.s)
            .field("h", &c.h)
            .field("hidden_actual", &c.hidden_actual)
            .field("i", &c.i)
            .field("e", &c.e)
            .field("el", &c.el)
            .field("k", &c.k)
            .field("router", &c.router)
            .field("act", &c.act)
            .field("pre_norm", &c.pre_norm)
            .field("norm_topk", &c.norm_topk)
            .field("residual", &self.residual)
            .field("skip_logits", &c.skip_logits)
            .field("routing", &c.routing)
            .field("router_f32", &c.router_f32)
            .finish()
    }
}

use crate::common::sweep::sweep;
use Routing::{OneExpert, Same};
use W::{E4m3, Fp4};

/// CI-sized subsets of the library's MX rows, with the options and
/// routings it leaves out.
const CONFIGS: &[Config] = &[
    // Selective: the GPT-OSS rows at 16 experts, both weight types, T = 4
    // with hidden_actual.
    with_mx(Fp4, sel(1, 1, 3072, 384, 4)),
    with_mx(E4m3, sel(1, 4, 3072, 192, 4).ha(2880)),
    with_mx(Fp4, sel(2, 1, 2048, 384, 4).pre_norm_silu()),
    with_mx(Fp4, sel(8, 1, 1024, 128, 2).routed(OneExpert).router_f32()),
    with_mx(E4m3, sel(6, 1, 1024, 256, 2).sigmoid_pre().routed(Same).skip()),
    // All-expert: 128 router experts, this rank's few.
    with_mx(Fp4, all(32, 3072, 384, 2, 4)),
    with_mx(E4m3, all(4, 3072, 192, 4, 4).ha(2880)).seq(4),
    with_mx(Fp4, all(8, 1024, 128, 4, 2).experts(16).sigmoid_pre().routed(OneExpert)),
    with_mx(E4m3, all(4, 1024, 256, 4, 2).experts(16).sigmoid_pre().routed(Same).skip()),
    with_mx(E4m3, all(16, 2048, 384, 2, 8).pre_norm_silu()),
    // The fused residual add: 256 tokens, H / 128 a multiple of 8.
    with_mx(Fp4, all(256, 1024, 128, 1, 4).experts(64)).residual(),
    with_mx(E4m3, all(64, 2048, 128, 1, 4).experts(64).ha(1920).routed(OneExpert)).seq(4).residual(),
];

/// The inputs, row-major, in the dtypes the kernel takes them in.
struct Inputs {
    /// `[T, H]`.
    inp: Vec<f64>,
    /// `[T, H]` (zeros without a residual).
    res: Vec<f64>,
    /// `[H]`.
    gamma: Vec<f64>,
    /// `[H, E]`.
    router_w: Vec<f64>,
    /// `[E]`.
    router_b: Vec<f64>,
    /// The weights' experts (codes, scales, biases; `x` and `gamma` unused).
    experts: Vec<Data>,
}

/// What the float64 block returns.
struct Reference {
    /// `[T, H]`.
    out: Vec<f64>,
    /// `[T, E]`.
    logits: Vec<f64>,
    /// `inp + residual` `[T, H]`, as the kernel holds it.
    residual: Option<Vec<f64>>,
}

/// The quantized values the fp32 reference finds next to a boundary.
#[derive(Default)]
struct Ambiguity {
    /// Hidden columns of the normalised rows.
    hidden: Vec<usize>,
    /// (Weight expert, column of `I`) of the gated products.
    gated: Vec<(usize, usize)>,
}

impl Config {
    /// One expert's MX shapes (`t` rows).
    fn expert(&self, t: usize) -> Mx {
        mx(1, t, self.h, self.i, self.w, false, false)
    }

    /// The inputs in `dtype` (the router's in its dtype): the rows (their
    /// sum with the residual) hold the levels, the padding columns zeros.
    fn inputs(&self, dtype: Dtype) -> Inputs {
        let seed = seed_of(&self.name());
        let (t, h, e, ew) = (self.t(), self.h, self.e, self.weight_experts());
        let (ha, block) = (self.hidden_actual.unwrap_or(h), self.block());
        let rdt = self.router_dtype(dtype);
        let keys = uniform(t * e, seed, 0.0, 1.0);
        // Relative noise of the rows and gamma small against the level step 1 / E.
        let amp = 0.2 / e as f64;
        let noise = uniform(t * h, seed + 1, -amp, amp);
        let split = uniform(t * h, seed + 9, -0.5, 0.5);
        let mut x = vec![0.0; t * h];
        let mut res = vec![0.0; t * h];
        for tok in 0..t {
            let v = self.levels(&keys, tok);
            for col in 0..ha {
                let at = tok * h + col;
                let level = if col / block < e { v[col / block] } else { 1.0 };
                x[at] = level * (1.0 + noise[at]);
                if self.residual {
                    res[at] = as_dtype(&[x[at] * split[at]], dtype)[0];
                    x[at] -= res[at];
                }
            }
        }
        // Logit steps of about 0.3 per level (4 / E for many experts).
        let rms = ((e + 1) as f64 * (2 * e + 1) as f64 / 6.0).sqrt();
        let c = (0.3f64).min(4.0 / e as f64) * rms / block as f64;
        let mut router_w = vec![0.0; h * e];
        for col in 0..(block * e) {
            router_w[col * e + col / block] = c;
        }
        let one = self.expert(1);
        let experts = (0..ew as u64)
            .map(|ex| {
                let mut d = one.data_seeded(seed + 100 + ex);
                for b in [&mut d.gate_b, &mut d.up_b, &mut d.down_b] {
                    *b = as_dtype(b, dtype);
                }
                d
            })
            .collect();
        Inputs {
            inp: as_dtype(&x, dtype),
            res,
            gamma: as_dtype(&uniform(h, seed + 2, 1.0 - amp, 1.0 + amp), dtype),
            router_w: as_dtype(&router_w, rdt),
            router_b: as_dtype(&uniform(e, seed + 3, -0.01, 0.01), rdt),
            experts,
        }
    }

    /// The affinities `[E]` the router stores for a token: the activation
    /// of every expert with `router_pre_norm` and without `norm_topk_prob`
    /// (the library leaves the unselected ones unmasked there), else the
    /// selected experts' weights and zero elsewhere. The MX selective
    /// experts weight every expert's down bias by them, as the library's
    /// kernel does (`expert_affinities @ down_bias`), so with unmasked
    /// affinities the unselected experts' biases are added too.
    fn stored_affinities(&self, logits: &[f64], chosen: &[(usize, f64)]) -> Vec<f64> {
        if self.pre_norm && !self.norm_topk {
            return activate(self.router, logits);
        }
        let mut a = vec![0.0; self.e];
        chosen.iter().for_each(|&(ex, w)| a[ex] = w);
        a
    }

    /// The normalised rows `[T][H]`: in fp32 precision unrounded; in
    /// hardware precision as the kernel stores them in `dtype` (the fused
    /// all-expert norm rounds `x · gamma` first, `rmsnorm_tkg` does not).
    fn norm(&self, sums: &[f64], gamma: &[f64], dtype: Dtype, hw: bool) -> Vec<Vec<f64>> {
        let h = self.h;
        let n = self.hidden_actual.unwrap_or(h) as f64;
        let r = |v: f64| if hw { as_dtype(&[v], dtype)[0] } else { v };
        sums.chunks(h)
            .map(|row| {
                let rr = 1.0 / (row.iter().map(|v| v * v).sum::<f64>() / n + EPS).sqrt();
                row.iter().zip(gamma).map(|(v, g)| if self.all_expert { r(r(v * g) * rr) } else { r(v * g * rr) }).collect()
            })
            .collect()
    }

    /// A normalised row in the quantization layout `[(t·128 + p)·4 + k]`
    /// (hidden position `k·H/4 + t·128 + p`), unquantized.
    fn hidden_layout(&self, y: &[f64]) -> Vec<f64> {
        let (h, n_h) = (self.h, self.h / 512);
        let mut l = vec![0.0; n_h * P * 4];
        for t in 0..n_h {
            for p in 0..P {
                for k in 0..4 {
                    l[(t * P + p) * 4 + k] = y[k * h / 4 + t * P + p];
                }
            }
        }
        l
    }

    /// The hidden position of layout index `at` (the inverse of [`Config::hidden_layout`]).
    fn hidden_position(&self, at: usize) -> usize {
        let (blk, k) = (at / 4, at % 4);
        k * self.h / 4 + blk
    }

    /// `[rows][I]`: the quantized rows `xl` through one gate or up
    /// projection (`codes` `[128, H/512, I, 4]`, `scales` `[16, H/512, I]`)
    /// plus the bias of each column's layout slot; with `hw` the running
    /// sums rounded to bfloat16 per 512-value tile, as the PSUM holds them.
    fn project(&self, xl: &[Vec<f64>], codes: &[u32], scales: &[f64], bias: &[f64], hw: bool) -> Vec<Vec<f64>> {
        let (n_h, i, n_i, rows) = (self.h / 512, self.i, self.i.div_ceil(512), xl.len());
        let r = |v: f64| if hw { as_dtype(&[v], Dtype::Bf16)[0] } else { v };
        let values = code_values(self.w);
        let pow: Vec<f64> = scales.iter().map(|s| 2f64.powf(s - 127.0)).collect();
        // The weights in the rows' layout, `[(t·128 + p)·4 + k][I]`.
        let mut w = vec![0.0; n_h * P * 4 * i];
        for t in 0..n_h {
            for p in 0..P {
                for c in 0..i {
                    let s = pow[((p / 8) * n_h + t) * i + c];
                    for k in 0..4 {
                        w[((t * P + p) * 4 + k) * i + c] = values[codes[((p * n_h + t) * i + c) * 4 + k] as usize] * s;
                    }
                }
            }
        }
        // The running sum over the 512-value tiles, each tile's sum added
        // and rounded (a PSUM accumulation; `tile_sums` of each column).
        let mut acc = vec![0.0; rows * i];
        for t in 0..n_h {
            let a: Vec<f64> = xl.iter().flat_map(|x| x[t * P * 4..(t + 1) * P * 4].iter().copied()).collect();
            let part = matmul(&a, &w[t * P * 4 * i..(t + 1) * P * 4 * i], rows, P * 4, i);
            acc.iter_mut().zip(part).for_each(|(s, v)| *s = r(*s + v));
        }
        (0..rows)
            .map(|row| {
                (0..i)
                    .map(|c| {
                        let (it, rem) = (c / 512, c % 512);
                        let n = (i - it * 512).min(512) / 4;
                        r(acc[row * i + c] + bias[((rem % n) * n_i + it) * 4 + rem / n])
                    })
                    .collect()
            })
            .collect()
    }

    /// The down projection `[rows·H]` of the quantized gated products `pl`
    /// (`[(it·128 + p)·4 + j]`, the down words' layout `[I_p, I/512, H, 4]`
    /// with their scales `[I_p/8, I/512, H]`), without the bias; with `hw`
    /// the running sum over the 512-value tiles rounded to bfloat16.
    fn down(&self, d: &Data, pl: &[Vec<f64>], hw: bool) -> Vec<f64> {
        let (h, n_i, rows) = (self.h, self.i.div_ceil(512), pl.len());
        let p_i = self.expert(1).p_i();
        let r = |v: f64| if hw { as_dtype(&[v], Dtype::Bf16)[0] } else { v };
        let values = code_values(self.w);
        // The weights in the products' layout, `[(it·128 + p)·4 + j][H]`
        // (rows past I_p zero).
        let mut w = vec![0.0; n_i * P * 4 * h];
        for p in 0..p_i {
            for it in 0..n_i {
                for c in 0..h {
                    let s = 2f64.powf(d.down_s[((p / 8) * n_i + it) * h + c] - 127.0);
                    for j in 0..4 {
                        w[((it * P + p) * 4 + j) * h + c] = values[d.down[((p * n_i + it) * h + c) * 4 + j] as usize] * s;
                    }
                }
            }
        }
        let mut acc = vec![0.0; rows * h];
        for it in 0..n_i {
            let a: Vec<f64> = pl.iter().flat_map(|x| x[it * P * 4..(it + 1) * P * 4].iter().copied()).collect();
            let part = matmul(&a, &w[it * P * 4 * h..(it + 1) * P * 4 * h], rows, P * 4, h);
            acc.iter_mut().zip(part).for_each(|(s, v)| *s = r(*s + v));
        }
        acc
    }

    /// Expert `d`'s output `[rows·H]` for the quantized rows `xl`, without
    /// its down bias (bfloat16 with `hw`; the gated products in `gu`, the
    /// output dtype on the selective path, bfloat16 on the all-expert one).
    /// Gated products within the margin of a boundary go to `amb` as
    /// columns of `I` (the fp32 reference).
    fn expert_rows(&self, d: &Data, xl: &[Vec<f64>], (hw, gu): (bool, Dtype), mut amb: Option<&mut Vec<usize>>) -> Vec<f64> {
        let (i, n_i) = (self.i, self.i.div_ceil(512));
        let r = |v: f64| if hw { as_dtype(&[v], Dtype::Bf16)[0] } else { v };
        let r_gu = |v: f64| if hw { as_dtype(&[v], gu)[0] } else { v };
        let gate = self.project(xl, &d.gate, &d.gate_s, &d.gate_b, hw);
        let up = self.project(xl, &d.up, &d.up_s, &d.up_b, hw);
        let [gate_hi, up_hi, up_lo] = CLAMPS;
        let act = |g: f64| activation(self.act, g);
        let rms = |v: &[f64]| (v.iter().map(|a| a * a).sum::<f64>() / v.len() as f64).sqrt();
        let pl: Vec<Vec<f64>> = (0..xl.len())
            .map(|tok| {
                let mut l = vec![0.0; n_i * P * 4];
                // Layout index -> column, and each product's margin.
                let mut cols = vec![usize::MAX; n_i * P * 4];
                let mut band = vec![0.0; n_i * P * 4];
                let (g_rms, u_rms) = (rms(&gate[tok]), rms(&up[tok]));
                for c in 0..i {
                    let (it, rem) = (c / 512, c % 512);
                    let rows = (i - it * 512).min(512) / 4;
                    let at = (it * P + rem % rows) * 4 + rem / rows;
                    let (g0, u0) = (gate[tok][c], up[tok][c]);
                    let g = g0.min(gate_hi);
                    let u = u0.min(up_hi).max(up_lo);
                    l[at] = r_gu(r(act(g)) * u);
                    cols[at] = c;
                    // How far the float32 sums may move the product.
                    let slope = if g0 < gate_hi { (act(g + 1e-4) - act(g - 1e-4)) / 2e-4 } else { 0.0 };
                    let u_free = up_lo < u0 && u0 < up_hi;
                    band[at] = MARGIN * ((slope * u).abs() * g_rms + if u_free { act(g).abs() * u_rms } else { 0.0 } + l[at].abs());
                }
                if let Some(amb) = amb.as_deref_mut() {
                    // A product of two clamped values moves with no bias: left as is.
                    amb.extend(ambiguous(&l, &band).into_iter().map(|at| cols[at]).filter(|&c| {
                        gate[tok][c] < gate_hi || {
                            let u0 = up[tok][c];
                            up_lo < u0 && u0 < up_hi
                        }
                    }));
                }
                quantize_e4m3fn_groups(&mut l);
                l
            })
            .collect();
        self.down(d, &pl, hw)
    }

    /// The float64 block of `x` in `dtype`; with `hw` the values the kernel
    /// stores in bfloat16 or `dtype` rounded so. Quantized values within the
    /// fp32 margin of a boundary go to `amb`.
    fn reference(&self, x: &Inputs, dtype: Dtype, hw: bool, mut amb: Option<&mut Ambiguity>) -> Reference {
        let (t, h, e, k) = (self.t(), self.h, self.e, self.k);
        let rb = |v: f64| if hw { as_dtype(&[v], Dtype::Bf16)[0] } else { v };
        let ro = |v: f64| if hw { as_dtype(&[v], dtype)[0] } else { v };
        // The residual sum as the kernel holds it (float32 in fp32 precision).
        let held = if hw { dtype } else { Dtype::F32 };
        let sums: Vec<f64> = x.inp.iter().zip(&x.res).map(|(a, b)| a + b).collect();
        let sums = if self.residual { as_dtype(&sums, held) } else { sums };
        let y = self.norm(&sums, &x.gamma, dtype, hw);

        // The router on the stored rows (cast to router_mm_dtype).
        let rdt = self.router_dtype(dtype);
        let mut logits = vec![0.0; t * e];
        let (mut chosen, mut stored) = (Vec::with_capacity(t), Vec::with_capacity(t));
        for tok in 0..t {
            let row = if hw { as_dtype(&y[tok], rdt) } else { y[tok].clone() };
            let lg = &mut logits[tok * e..(tok + 1) * e];
            for ((l, v), b) in lg.iter_mut().zip(vec_mat(&row, &x.router_w)).zip(&x.router_b) {
                *l = v + b;
            }
            chosen.push(self.route_named(lg, || self.name()));
            stored.push(self.stored_affinities(lg, &chosen[tok]));
        }

        // The experts on the quantized rows.
        let xl: Vec<Vec<f64>> = y
            .iter()
            .map(|row| {
                let mut l = self.hidden_layout(row);
                if let Some(amb) = amb.as_deref_mut() {
                    let band: Vec<f64> = l.iter().map(|v| MARGIN * v.abs()).collect();
                    amb.hidden.extend(ambiguous(&l, &band).into_iter().map(|at| self.hidden_position(at)));
                }
                quantize_e4m3fn_groups(&mut l);
                l
            })
            .collect();
        let mut out = vec![0.0; t * h];
        let mut gated = |ex: usize, rows: &[Vec<f64>]| {
            let mut cols = Vec::new();
            let gu = if self.all_expert { Dtype::Bf16 } else { dtype };
            let o = self.expert_rows(&x.experts[ex], rows, (hw, gu), amb.is_some().then_some(&mut cols));
            if let Some(amb) = amb.as_deref_mut() {
                amb.gated.extend(cols.into_iter().map(|c| (ex, c)));
            }
            o
        };
        if self.all_expert {
            // Every local expert in order, its down bias before its
            // affinity (zero when unselected); bfloat16 sums.
            let base = self.rank() * self.el;
            for ex in 0..self.el {
                let o = gated(ex, &xl);
                let db = &x.experts[ex].down_b;
                for tok in 0..t {
                    let a = chosen[tok].iter().find(|c| c.0 == base + ex).map_or(0.0, |c| c.1);
                    for c in 0..h {
                        let scaled = rb(rb(o[tok * h + c] + db[c]) * a);
                        let acc = &mut out[tok * h + c];
                        *acc = if ex == 0 { scaled } else { rb(*acc + scaled) };
                    }
                }
            }
            out.iter_mut().for_each(|v| *v = ro(*v));
        } else {
            // Each expert on the tokens that chose it.
            let mut outs: HashMap<(usize, usize), Vec<f64>> = HashMap::new();
            for ex in 0..e {
                let toks: Vec<usize> = (0..t).filter(|&tok| chosen[tok].iter().any(|c| c.0 == ex)).collect();
                if toks.is_empty() {
                    continue;
                }
                let rows: Vec<Vec<f64>> = toks.iter().map(|&tok| xl[tok].clone()).collect();
                let o = gated(ex, &rows);
                for (j, &tok) in toks.iter().enumerate() {
                    outs.insert((tok, ex), o[j * h..(j + 1) * h].to_vec());
                }
            }
            // Each program sums half of the top-k slots, the halves are
            // added, then every expert's down bias weighted by the router's
            // stored affinity for it (rounded to the biases' dtype for the
            // matmul; see `stored_affinities`).
            let per = k / 2;
            for tok in 0..t {
                for c in 0..h {
                    let share =
                        |p: usize| chosen[tok][p * per..(p + 1) * per].iter().fold(0.0, |acc, &(ex, a)| ro(acc + outs[&(tok, ex)][c] * a));
                    let sum = ro(share(0) + share(1));
                    let bias: f64 = stored[tok].iter().enumerate().map(|(ex, &a)| ro(a) * x.experts[ex].down_b[c]).sum();
                    out[tok * h + c] = ro(sum + bias);
                }
            }
        }
        Reference { out, logits, residual: self.residual.then(|| sums.clone()) }
    }

    /// Moves the fp32 inputs off the quantization boundaries (module docs):
    /// gamma of an ambiguous hidden column by 2^-6, the up and gate biases
    /// of an ambiguous gated column by 2^-4 (opposite ways), until the
    /// float64 reference finds no quantized value within its margin.
    fn settle(&self, x: &mut Inputs, dtype: Dtype) {
        for _ in 0..64 {
            let mut amb = Ambiguity::default();
            let _ = self.reference(x, dtype, false, Some(&mut amb));
            if amb.hidden.is_empty() && amb.gated.is_empty() {
                return;
            }
            amb.hidden.sort_unstable();
            amb.hidden.dedup();
            for &col in &amb.hidden {
                let g = x.gamma[col];
                x.gamma[col] = as_dtype(&[g + g.signum() * 2f64.powi(-6)], dtype)[0];
            }
            // (Gated products found before a gamma moved move again: harmless.)
            amb.gated.sort_unstable();
            amb.gated.dedup();
            for &(ex, c) in &amb.gated {
                let (i, n_i) = (self.i, self.i.div_ceil(512));
                let (it, rem) = (c / 512, c % 512);
                let rows = (i - it * 512).min(512) / 4;
                let slot = ((rem % rows) * n_i + it) * 4 + rem / rows;
                let d = &mut x.experts[ex];
                // Whichever half is not clamped moves the product.
                let b = &mut d.up_b[slot];
                *b = as_dtype(&[*b + 2f64.powi(-4)], dtype)[0];
                let g = &mut d.gate_b[slot];
                *g = as_dtype(&[*g - 2f64.powi(-4)], dtype)[0];
            }
        }
        panic!("{}: the inputs do not settle off the quantization boundaries", self.name());
    }

    /// The fused gate/up words `[E, 128, 2, H/512, I]`, scales `[E, 16, 2,
    /// H/512, I]`, biases `[E, I_p, 2, I/512, 4]`, the down words `[E, I_p,
    /// I/512, H]`, scales `[E, I_p/8, I/512, H]`, biases `[E, H]`.
    fn stacked(&self, x: &Inputs) -> [Vec<f64>; 6] {
        let [gu, gus, gub, dw, dws] = stack_experts(&self.expert(1), &x.experts);
        [gu, gus, gub, dw, dws, x.experts.iter().flat_map(|d| d.down_b.iter().copied()).collect()]
    }

    /// The shapes and dtypes of [`Config::stacked`]'s tensors.
    fn stacked_shapes(&self, dtype: Dtype) -> [(Vec<usize>, Dtype); 6] {
        let m = self.expert(1);
        let (ew, n_h, n_i, i, h, wd) = (self.weight_experts(), m.n_h(), m.n_i(), self.i, self.h, self.w.dtype());
        [
            (vec![ew, P, 2, n_h, i], wd),
            (vec![ew, 16, 2, n_h, i], Dtype::U8),
            (vec![ew, m.b_p(), 2, n_i, 4], dtype),
            (vec![ew, m.p_i(), n_i, h], wd),
            (vec![ew, m.p_i() / 8, n_i, h], Dtype::U8),
            (vec![ew, h], dtype),
        ]
    }

    /// The emulator's outputs: `out`, then `router_logits` unless skipped,
    /// then `residual_out` with a residual.
    fn run(&self, x: &Inputs, dtype: Dtype, precision: Precision) -> Vec<Vec<f32>> {
        let (t, h, e) = (self.t(), self.h, self.e);
        let rdt = self.router_dtype(dtype);
        let vals = self.stacked(x);
        let ts: Vec<Tensor> = self
            .stacked_shapes(dtype)
            .iter()
            .zip(&vals)
            .map(|((shape, dt), v)| {
                if dt.packs().is_some() {
                    Tensor::from_i64(shape, &v.iter().map(|&w| w as i64).collect::<Vec<_>>(), *dt).unwrap()
                } else {
                    tensor(shape, v, *dt)
                }
            })
            .collect();
        let inp = tensor(&[self.b, self.s, h], &x.inp, dtype);
        let res = tensor(&[self.b, self.s, h], &x.res, dtype);
        let gamma = tensor(&[1, h], &x.gamma, dtype);
        let rw = tensor(&[h, e], &x.router_w, rdt);
        let rb = tensor(&[1, e], &x.router_b, rdt);
        let rank = Tensor::from_i64(&[1, 1], &[self.rank() as i64], Dtype::U32).unwrap();
        let call = moe_block_tkg::Call::new(&inp, &gamma, &rw, &ts[0], &ts[3])
            .expert_gate_up_weights_scale(&ts[1])
            .expert_down_weights_scale(&ts[4]);
        // POST_SCALE, the biases and the clamps (`with_mx`).
        let mut call = self.options(call, rdt, [&rb, &ts[2], &ts[5]], &rank);
        if self.residual {
            call = call.residual(&res);
        }
        let launch = Launch::new().lnc(2).precision(precision).generation(nki::hw::Generation::Trn3);
        let out = call.launch(&launch).unwrap_or_else(|err| panic!("{} {dtype:?} {precision:?}: {err}", self.name()));
        let mut shapes = vec![vec![t, h]];
        if !self.skip_logits {
            shapes.push(vec![t, e]);
        }
        if self.residual {
            shapes.push(vec![t, h]);
        }
        assert_eq!(out.len(), shapes.len(), "{}: outputs", self.name());
        for (o, shape) in out.0.iter().zip(&shapes) {
            assert_eq!((o.shape(), o.dtype()), (&shape[..], dtype), "{}: output shape and dtype", self.name());
        }
        out.0.iter().map(|o| o.to_f32_vec()).collect()
    }

    /// The arguments for the NumPy executor, by keyword (the library's names).
    fn numpy_kwargs(&self, x: &Inputs, dtype: Dtype) -> Vec<(&'static str, Arg)> {
        let (h, e) = (self.h, self.e);
        let rdt = self.router_dtype(dtype);
        let [gu, gus, gub, dw, dws, db] = self.stacked(x);
        let [(s_gu, d_gu), (s_gus, _), (s_gub, _), (s_dw, d_dw), (s_dws, _), (s_db, _)] = self.stacked_shapes(dtype);
        let opt = |on: bool, a: Arg| if on { a } else { Arg::None };
        vec![
            ("inp", Arg::Tensor(vec![self.b, self.s, h], x.inp.clone(), dtype)),
            ("gamma", Arg::Tensor(vec![1, h], x.gamma.clone(), dtype)),
            ("router_weights", Arg::Tensor(vec![h, e], x.router_w.clone(), rdt)),
            ("expert_gate_up_weights", Arg::Tensor(s_gu, gu, d_gu)),
            ("expert_down_weights", Arg::Tensor(s_dw, dw, d_dw)),
            ("expert_gate_up_weights_scale", Arg::Tensor(s_gus, gus, Dtype::U8)),
            ("expert_down_weights_scale", Arg::Tensor(s_dws, dws, Dtype::U8)),
            ("router_bias", Arg::Tensor(vec![1, e], x.router_b.clone(), rdt)),
            ("expert_gate_up_bias", Arg::Tensor(s_gub, gub, dtype)),
            ("expert_down_bias", Arg::Tensor(s_db, db, dtype)),
            ("top_k", Arg::Int(self.k as i64)),
            ("router_act_fn", Arg::Member(RouterActFnType::CLASS, self.router.member())),
            ("router_pre_norm", Arg::Bool(self.pre_norm)),
            ("norm_topk_prob", Arg::Bool(self.norm_topk)),
            ("expert_affinities_scaling_mode", Arg::Member(ExpertAffinityScaleMode::CLASS, ExpertAffinityScaleMode::POST_SCALE.member())),
            ("hidden_act_fn", Arg::Member(ActFnType::CLASS, self.act.member())),
            ("gate_clamp_upper_limit", Arg::Float(CLAMPS[0])),
            ("up_clamp_upper_limit", Arg::Float(CLAMPS[1])),
            ("up_clamp_lower_limit", Arg::Float(CLAMPS[2])),
            ("router_mm_dtype", Arg::Dtype(rdt)),
            ("hidden_actual", self.hidden_actual.map_or(Arg::None, |v| Arg::Int(v as i64))),
            ("skip_router_logits", Arg::Bool(self.skip_logits)),
            ("is_all_expert", Arg::Bool(self.all_expert)),
            ("rank_id", opt(self.all_expert, Arg::Tensor(vec![1, 1], vec![self.rank() as f64], Dtype::U32))),
            ("residual", opt(self.residual, Arg::Tensor(vec![self.b, self.s, h], x.res.clone(), dtype))),
        ]
    }

    /// The inputs in `dtype` for `precision` (settled for fp32).
    fn inputs_for(&self, dtype: Dtype, precision: Precision) -> Inputs {
        let mut x = self.inputs(dtype);
        if precision == Precision::Fp32 {
            self.settle(&mut x, dtype);
        }
        x
    }

    /// Runs and compares every output with the float64 block: `out` and the
    /// logits within `rtol` of their largest magnitude, `residual_out`
    /// exactly.
    fn check(&self, dtype: Dtype, precision: Precision, rtol: f64) {
        let hw = precision == Precision::Hardware;
        let x = self.inputs_for(dtype, precision);
        let want = self.reference(&x, dtype, hw, None);
        let got = self.run(&x, dtype, precision);
        let what = format!("{} {dtype:?} {precision:?}", self.name());
        assert_close(&format!("{what} out"), &got[0], &want.out, FP32_ATOL, rtol);
        let mut rest = got[1..].iter();
        if !self.skip_logits {
            let logits = rest.next().expect("router_logits");
            assert_close(&format!("{what} router_logits"), logits, &want.logits, FP32_ATOL, rtol);
        }
        if let Some(sums) = &want.residual {
            let res = rest.next().expect("residual_out");
            if let Some(at) = (0..sums.len()).find(|&at| f64::from(res[at]) != sums[at]) {
                panic!("{what} residual_out: element {at} (token {}, column {}): {} vs {}", at / self.h, at % self.h, res[at], sums[at]);
            }
        }
    }
}

/// Every code's value of the weights' element type.
fn code_values(w: W) -> Vec<f64> {
    match w {
        W::Fp4 => (0..16).map(e2m1fn).collect(),
        W::E4m3 => (0..256).map(e4m3fn).collect(),
        W::E5m2 => (0..256).map(crate::mx_format::e5m2).collect(),
    }
}

/// The indices of the values of `l` whose MXFP8 quantization (per 32
/// values: scale `2^(floor(log2 amax) - 7)`, e4m3 round to nearest even) an
/// error of `band` (per value) could change: a value that close to the
/// midpoint between two codes, or the group's largest value that close to
/// a power of two.
fn ambiguous(l: &[f64], band: &[f64]) -> Vec<usize> {
    let mut out = Vec::new();
    for (gi, g) in l.chunks(32).enumerate() {
        let (top, amax) = g.iter().enumerate().fold((0, 0.0f64), |m, (j, v)| if v.abs() > m.1 { (j, v.abs()) } else { m });
        if amax == 0.0 {
            continue;
        }
        let lg = amax.log2();
        if (amax - 2f64.powf(lg.round())).abs() <= band[gi * 32 + top] {
            out.push(gi * 32 + top);
        }
        let scale = 2f64.powf(lg.floor() - 7.0);
        for (j, v) in g.iter().enumerate() {
            let u = (v / scale).abs();
            if u == 0.0 {
                continue;
            }
            // The code step at |u|, in the value's units.
            let q = 2f64.powf(u.log2().floor().max(-6.0) - 3.0);
            let f = u / q;
            if (f - f.floor() - 0.5).abs() * q * scale <= band[gi * 32 + j] {
                out.push(gi * 32 + j);
            }
        }
    }
    out
}

/// The dtype of configuration `n` in the first precision test (the other
/// test takes the other one).
fn dtype_of(n: usize, flip: bool) -> Dtype {
    if n.is_multiple_of(2) != flip { Dtype::Bf16 } else { Dtype::F16 }
}

/// Every configuration in fp32 precision (bfloat16 and float16 inputs, the
/// norm's 16-bit tiles kept in float32): with the inputs settled off the
/// quantization boundaries only the float32 sums differ from float64.
#[test]
fn moe_block_mx_in_fp32_match_float64() {
    for (n, cfg) in CONFIGS.iter().enumerate() {
        cfg.check(dtype_of(n, false), Precision::Fp32, 1e-5);
    }
}

/// Hardware precision: the reference rounds what the kernel stores in
/// bfloat16 or the input's dtype (the normalised rows, the projections'
/// running sums, the gated products, the expert outputs and their sums); a
/// float32 sum a rounding step from the float64 one may round the other
/// way and move an e4m3 code, a few thousandths of the output's scale.
#[test]
fn moe_block_mx_in_hardware_precision_match_float64() {
    for (n, cfg) in CONFIGS.iter().enumerate() {
        cfg.check(dtype_of(n, true), Precision::Hardware, 1.0 / 128.0);
    }
}

/// The emitted kernel under NumPy agrees with the emulator in both modes,
/// every output, up to the matmuls' float32 sums: both paths, skewed
/// routings, skipped logits, the residual add.
#[test]
fn moe_block_mx_emitted_under_numpy_equals_emulator() {
    let pkg = package_of("moe_block_mx_pkg", &[&moe_block_tkg::INFO]);
    for ((n, cfg), m) in sweep([(3, CONFIGS[3]), (8, CONFIGS[8]), (10, CONFIGS[10])]) {
        let dtype = dtype_of(n, false);
        let (precision, mode) = (m.precision(), m.name());
        let x = cfg.inputs_for(dtype, precision);
        let emu = cfg.run(&x, dtype, precision);
        let run = spec_run(&pkg, "moe_block_tkg", &[(vec![], cfg.numpy_kwargs(&x, dtype))], 2, mode, "trn3");
        assert!(run.ok, "{} {mode}: NumPy run failed:\n{}\n{}", cfg.name(), run.stdout, run.stderr);
        let np: Vec<Vec<f32>> =
            run.outputs("moe_block_tkg", 1).swap_remove(0).into_iter().map(|o| o.into_iter().map(|v| v as f32).collect()).collect();
        let _ = std::fs::remove_dir_all(&run.dir);
        assert_numpy_close_to_emulator(&cfg.name(), mode, &np, &emu);
    }
}
