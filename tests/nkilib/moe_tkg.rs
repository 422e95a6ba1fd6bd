//! The library's `moe_tkg` against a float64 mixture of experts written from
//! its documented computation — per expert `act(clamp(x W_gate + b_gate)) ·
//! clamp(x W_up + b_up)` through `W_down` plus `b_down`, summed over every
//! local expert (all-expert) or each token's top-k (selective), weighted by
//! the affinities under `POST_SCALE` — at a CI-sized subset of the library's
//! `test_moe_tkg.py` configurations and skewed routings (every token on one
//! expert, experts without tokens, another rank's experts, masked
//! affinities), in both precision modes; its emitted source under NumPy
//! against the emulator; its rules.

use crate::common::attention::run_numpy_kwargs;
use crate::common::{
    Arg, CaseName, as_dtype, assert_close, assert_numpy_close_to_emulator, assert_refused_by, emitted_package, seed_of, tensor, uniform,
    vec_mat,
};
use crate::mlp::activation;
use nki::{Dtype, Launch, Precision, Tensor};
use nkilib::moe::moe_tkg::moe_tkg::{ActFnType, ExpertAffinityScaleMode, MoeTkgCall, MoeTkgRule, moe_tkg, moe_tkg_violation};

/// How the tokens pick their experts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Routing {
    /// Distinct random experts per token.
    Random,
    /// Every token's first choice is expert 0 (the others random).
    FirstOnZero,
    /// Every token picks the same experts `0..K` (the rest get no token).
    AllOnFirstK,
}

/// One configuration: launch, sizes and options.
#[derive(Clone, Copy, Debug)]
struct Config {
    lnc: usize,
    t: usize,
    h: usize,
    i: usize,
    /// Local experts `E_L`.
    e: usize,
    /// Experts per token.
    k: usize,
    all_expert: bool,
    act: ActFnType,
    post: bool,
    bias: bool,
    clamp: bool,
    /// `ROW` fp8 weights with their scales.
    row: bool,
    routing: Routing,
    /// `mask_unselected_experts` (all-expert).
    mask: bool,
    /// This rank (all-expert): the global experts are `2 · E_L` when 1.
    rank: usize,
}

const fn all(lnc: usize, t: usize, h: usize, i: usize, e: usize) -> Config {
    Config {
        lnc,
        t,
        h,
        i,
        e,
        k: e,
        all_expert: true,
        act: ActFnType::SiLU,
        post: true,
        bias: false,
        clamp: true,
        row: false,
        routing: Routing::Random,
        mask: false,
        rank: 0,
    }
}

const fn sel(lnc: usize, t: usize, h: usize, i: usize, e: usize, k: usize) -> Config {
    Config { k, all_expert: false, ..all(lnc, t, h, i, e) }
}

impl Config {
    const fn act(mut self, a: ActFnType) -> Self {
        self.act = a;
        self
    }
    const fn biased(mut self) -> Self {
        self.bias = true;
        self
    }
    const fn no_scale(mut self) -> Self {
        self.post = false;
        self
    }
    const fn unclamped(mut self) -> Self {
        self.clamp = false;
        self
    }
    const fn row(mut self) -> Self {
        self.row = true;
        self
    }
    const fn routed(mut self, r: Routing) -> Self {
        self.routing = r;
        self
    }
    /// All-expert with `k` experts per token, the others masked.
    const fn masked(mut self, k: usize) -> Self {
        self.k = k;
        self.mask = true;
        self
    }
    const fn rank(mut self, r: usize) -> Self {
        self.rank = r;
        self
    }
}

use crate::common::sweep::sweep;
use ActFnType::{GELU, GELU_Tanh_Approx, Swish};

/// A CI-sized subset of the library's `test_moe_tkg.py` configurations
/// (`[lnc, T, H, I, E]`, its options), with the routings it leaves out.
const CONFIGS: &[Config] = &[
    all(2, 4, 3072, 64, 4).act(Swish).biased(),
    all(2, 32, 3072, 512, 1).no_scale(),
    all(2, 2, 4096, 192, 8),
    all(2, 300, 256, 128, 2),
    all(1, 4, 512, 128, 4).act(GELU).unclamped().masked(2).rank(1),
    all(2, 8, 512, 128, 4).masked(1).routed(Routing::FirstOnZero),
    sel(2, 2, 512, 128, 2, 1),
    sel(2, 5, 512, 128, 4, 2).act(Swish).biased(),
    sel(2, 4, 384, 128, 4, 2).act(Swish),
    sel(2, 1, 3072, 384, 8, 4).act(Swish).biased(),
    sel(1, 6, 512, 192, 4, 2).act(GELU_Tanh_Approx).no_scale().unclamped(),
    sel(2, 7, 512, 128, 4, 2).routed(Routing::FirstOnZero),
    sel(2, 4, 512, 128, 8, 2).routed(Routing::AllOnFirstK).biased(),
];

/// The library's fp8 `ROW` configurations (CI-sized).
const ROW_CONFIGS: &[Config] = &[all(2, 4, 512, 64, 2).biased().row(), sel(2, 4, 512, 64, 4, 2).act(Swish).biased().row()];

/// The clamps (gate upper, up upper, up lower), the library tests' values.
pub(crate) const CLAMPS: [f64; 3] = [7.0, 8.0, -6.0];

/// One local expert's tensors, row-major: `[E_L, H, 2, I]`, `[E_L, I, H]`,
/// the optional biases `[E_L, 2, I]`, `[E_L, H]` and `ROW` scales of the
/// same shapes.
#[derive(Clone, Copy)]
pub(crate) struct ExpertWeights<'a> {
    pub gate_up: &'a [f64],
    pub down: &'a [f64],
    pub gate_up_b: Option<&'a [f64]>,
    pub down_b: Option<&'a [f64]>,
    pub gate_up_s: Option<&'a [f64]>,
    pub down_s: Option<&'a [f64]>,
}

/// Expert `ex`'s gated MLP of `row` `[H]` in float64: `act(clamp(row W_gate
/// · s + b)) · clamp(row W_up · s + b)` through `W_down` (`· s + b`), the
/// clamps (when on) the library tests' [`CLAMPS`].
pub(crate) fn expert_f64(row: &[f64], ex: usize, i: usize, w: ExpertWeights<'_>, act: ActFnType, clamp: bool) -> Vec<f64> {
    let h = row.len();
    let clamp = |v: f64, hi: f64, lo: f64| if clamp { v.min(hi).max(lo) } else { v };
    let dots = vec_mat(row, &w.gate_up[ex * h * 2 * i..(ex + 1) * h * 2 * i]);
    let proj = |half: usize, col: usize| {
        let s = w.gate_up_s.map_or(1.0, |s| s[(ex * 2 + half) * i + col]);
        dots[half * i + col] * s + w.gate_up_b.map_or(0.0, |b| b[(ex * 2 + half) * i + col])
    };
    let inter: Vec<f64> = (0..i)
        .map(|col| activation(act, clamp(proj(0, col), CLAMPS[0], f64::NEG_INFINITY)) * clamp(proj(1, col), CLAMPS[1], CLAMPS[2]))
        .collect();
    let dots = vec_mat(&inter, &w.down[ex * i * h..(ex + 1) * i * h]);
    (0..h).map(|col| dots[col] * w.down_s.map_or(1.0, |s| s[ex * h + col]) + w.down_b.map_or(0.0, |b| b[ex * h + col])).collect()
}

/// The inputs of one configuration, row-major.
struct Inputs {
    hidden: Vec<f64>,
    /// `[E_L, H, 2, I]`.
    gate_up: Vec<f64>,
    /// `[E_L, I, H]`.
    down: Vec<f64>,
    /// `[T, E_G]`.
    aff: Vec<f64>,
    /// `[T, K]`, global expert ids.
    idx: Vec<i64>,
    gate_up_b: Vec<f64>,
    down_b: Vec<f64>,
    /// `[E_L, 2, I]`, `[E_L, H]`.
    gate_up_s: Vec<f64>,
    down_s: Vec<f64>,
}

impl Config {
    /// Global experts: `E_L` per rank, two ranks when this is rank 1.
    fn e_global(&self) -> usize {
        if self.all_expert { self.e * (self.rank + 1) } else { self.e }
    }

    /// Unit-variance rows, weights scaled by `1/sqrt(fan_in)`; affinities
    /// normalised over each token's experts, zero elsewhere.
    fn inputs(&self) -> Inputs {
        let seed = seed_of(&self.name());
        let (t, h, i, e, k, eg) = (self.t, self.h, self.i, self.e, self.k, self.e_global());
        let r = 3f64.sqrt();
        let (wh, wi) = (r / (h as f64).sqrt(), r / (i as f64).sqrt());
        let weight = |n: usize, seed: u64, bound: f64| {
            if self.row { as_dtype(&uniform(n, seed, -16.0, 16.0), Dtype::Fp8E4m3) } else { uniform(n, seed, -bound, bound) }
        };
        let (idx, aff) = route(t, eg, k, seed, self.routing);
        Inputs {
            hidden: uniform(t * h, seed + 3, -r, r),
            gate_up: weight(e * h * 2 * i, seed + 4, wh),
            down: weight(e * i * h, seed + 5, wi),
            aff,
            idx,
            gate_up_b: uniform(e * 2 * i, seed + 6, -0.5, 0.5),
            down_b: uniform(e * h, seed + 7, -0.5, 0.5),
            gate_up_s: uniform(e * 2 * i, seed + 8, 0.5 * wh / 16.0, 1.5 * wh / 16.0),
            down_s: uniform(e * h, seed + 9, 0.5 * wi / 16.0, 1.5 * wi / 16.0),
        }
    }

    /// Local expert `ex`'s MLP of token `tok`: `[H]`.
    fn expert(&self, x: &Inputs, ex: usize, tok: usize) -> Vec<f64> {
        let w = ExpertWeights {
            gate_up: &x.gate_up,
            down: &x.down,
            gate_up_b: self.bias.then_some(&x.gate_up_b[..]),
            down_b: self.bias.then_some(&x.down_b[..]),
            gate_up_s: self.row.then_some(&x.gate_up_s[..]),
            down_s: self.row.then_some(&x.down_s[..]),
        };
        expert_f64(&x.hidden[tok * self.h..(tok + 1) * self.h], ex, self.i, w, self.act, self.clamp)
    }

    /// The float64 mixture `[T, H]`.
    fn reference(&self, x: &Inputs) -> Vec<f64> {
        let (t, h, k, eg) = (self.t, self.h, self.k, self.e_global());
        let mut out = vec![0.0; t * h];
        for tok in 0..t {
            let ids = &x.idx[tok * k..(tok + 1) * k];
            let mut add = |ex: usize, weight: f64| {
                for (o, v) in out[tok * h..(tok + 1) * h].iter_mut().zip(self.expert(x, ex, tok)) {
                    *o += weight * v;
                }
            };
            if self.all_expert {
                for ex in 0..self.e {
                    let global = self.rank * self.e + ex;
                    let selected = ids.iter().filter(|&&g| g as usize == global).count() as f64;
                    let a = x.aff[tok * eg + global] * if self.mask { selected } else { 1.0 };
                    add(ex, if self.post { a } else { 1.0 });
                }
            } else {
                for &g in ids {
                    add(g as usize, if self.post { x.aff[tok * eg + g as usize] } else { 1.0 });
                }
            }
        }
        out
    }

    fn weight_dtype(&self, dtype: Dtype) -> Dtype {
        if self.row { Dtype::Fp8E4m3 } else { dtype }
    }

    /// The affinities' dtype: the library's tests give all-expert bfloat16
    /// affinities, selective float32.
    fn aff_dtype(&self) -> Dtype {
        if self.all_expert { Dtype::Bf16 } else { Dtype::F32 }
    }

    /// The emulator's output.
    fn run(&self, x: &Inputs, dtype: Dtype, precision: Precision) -> Vec<f32> {
        let (t, h, i, e, k) = (self.t, self.h, self.i, self.e, self.k);
        let wdt = self.weight_dtype(dtype);
        let hid = tensor(&[t, h], &x.hidden, dtype);
        let gu = tensor(&[e, h, 2, i], &x.gate_up, wdt);
        let dw = tensor(&[e, i, h], &x.down, wdt);
        let aff = tensor(&[t, self.e_global()], &x.aff, self.aff_dtype());
        let idx = Tensor::from_i64(&[t, k], &x.idx, Dtype::I32).unwrap();
        let rank = Tensor::from_i64(&[1, 1], &[self.rank as i64], Dtype::I32).unwrap();
        let (gub, db) = (tensor(&[e, 2, i], &x.gate_up_b, dtype), tensor(&[e, h], &x.down_b, dtype));
        let (gus, dws) = (tensor(&[e, 2, i], &x.gate_up_s, Dtype::F32), tensor(&[e, h], &x.down_s, Dtype::F32));
        let mode = if self.post { ExpertAffinityScaleMode::POST_SCALE } else { ExpertAffinityScaleMode::NO_SCALE };
        let mut call = moe_tkg::Call::new(&hid, &gu, &dw, &aff, &idx, self.all_expert)
            .expert_affinities_scaling_mode(mode)
            .activation_fn(self.act)
            .mask_unselected_experts(self.mask);
        if self.all_expert && self.post {
            call = call.rank_id(&rank);
        }
        if self.bias {
            call = call.expert_gate_up_bias(&gub).expert_down_bias(&db);
        }
        if self.row {
            call = call.expert_gate_up_weights_scale(&gus).expert_down_weights_scale(&dws);
        }
        if self.clamp {
            call = call.gate_clamp_upper_limit(CLAMPS[0]).up_clamp_upper_limit(CLAMPS[1]).up_clamp_lower_limit(CLAMPS[2]);
        }
        let launch = Launch::new().lnc(self.lnc).precision(precision);
        let out = call.launch(&launch).unwrap_or_else(|err| panic!("{}: {err}", self.name()));
        out.to_f32_vec()
    }

    /// The arguments for the NumPy executor, by keyword (the library's names).
    fn numpy_kwargs(&self, x: &Inputs, dtype: Dtype) -> Vec<(&'static str, Arg)> {
        let (t, h, i, e, k) = (self.t, self.h, self.i, self.e, self.k);
        let wdt = self.weight_dtype(dtype);
        let opt = |on: bool, a: Arg| if on { a } else { Arg::None };
        let act = match self.act {
            ActFnType::SiLU => "SiLU",
            GELU => "GELU",
            GELU_Tanh_Approx => "GELU_Tanh_Approx",
            Swish => "Swish",
        };
        let clamp = |v: f64| if self.clamp { Arg::Float(v) } else { Arg::None };
        vec![
            ("hidden_input", Arg::Tensor(vec![t, h], x.hidden.clone(), dtype)),
            ("expert_gate_up_weights", Arg::Tensor(vec![e, h, 2, i], x.gate_up.clone(), wdt)),
            ("expert_down_weights", Arg::Tensor(vec![e, i, h], x.down.clone(), wdt)),
            ("expert_affinities", Arg::Tensor(vec![t, self.e_global()], x.aff.clone(), self.aff_dtype())),
            ("expert_index", Arg::Tensor(vec![t, k], x.idx.iter().map(|&v| v as f64).collect(), Dtype::I32)),
            ("is_all_expert", Arg::Bool(self.all_expert)),
            ("rank_id", opt(self.all_expert && self.post, Arg::Tensor(vec![1, 1], vec![self.rank as f64], Dtype::I32))),
            ("expert_gate_up_bias", opt(self.bias, Arg::Tensor(vec![e, 2, i], x.gate_up_b.clone(), dtype))),
            ("expert_down_bias", opt(self.bias, Arg::Tensor(vec![e, h], x.down_b.clone(), dtype))),
            ("expert_gate_up_weights_scale", opt(self.row, Arg::Tensor(vec![e, 2, i], x.gate_up_s.clone(), Dtype::F32))),
            ("expert_down_weights_scale", opt(self.row, Arg::Tensor(vec![e, h], x.down_s.clone(), Dtype::F32))),
            ("mask_unselected_experts", Arg::Bool(self.mask)),
            ("expert_affinities_scaling_mode", Arg::Member("ExpertAffinityScaleMode", if self.post { "POST_SCALE" } else { "NO_SCALE" })),
            ("activation_fn", Arg::Member("ActFnType", act)),
            ("gate_clamp_upper_limit", clamp(CLAMPS[0])),
            ("up_clamp_upper_limit", clamp(CLAMPS[1])),
            ("up_clamp_lower_limit", clamp(CLAMPS[2])),
        ]
    }
}

/// `t` tokens' distinct top-`k` of `e` experts `[T, K]` (drawn by ranking
/// uniform keys, then as `routing` says) and their affinities `[T, E]`,
/// random weights normalised over each token's experts, zero elsewhere.
pub(crate) fn route(t: usize, e: usize, k: usize, seed: u64, routing: Routing) -> (Vec<i64>, Vec<f64>) {
    let keys = uniform(t * e, seed + 1, 0.0, 1.0);
    let mut idx = Vec::with_capacity(t * k);
    for tok in 0..t {
        let mut order: Vec<usize> = (0..e).collect();
        order.sort_by(|a, b| keys[tok * e + a].total_cmp(&keys[tok * e + b]));
        match routing {
            Routing::Random => {}
            Routing::FirstOnZero => {
                order.retain(|&x| x != 0);
                order.insert(0, 0);
            }
            Routing::AllOnFirstK => order = (0..e).collect(),
        }
        idx.extend(order[..k].iter().map(|&x| x as i64));
    }
    let w = uniform(t * k, seed + 2, 0.1, 1.0);
    let mut aff = vec![0.0; t * e];
    for tok in 0..t {
        let sum: f64 = w[tok * k..(tok + 1) * k].iter().sum();
        for j in 0..k {
            aff[tok * e + idx[tok * k + j] as usize] = w[tok * k + j] / sum;
        }
    }
    (idx, aff)
}

/// Rounds the float inputs to `dtype` (the weights to `wdt`, the
/// affinities to `aff`).
fn rounded(x: &Inputs, dtype: Dtype, wdt: Dtype, aff: Dtype) -> Inputs {
    Inputs {
        hidden: as_dtype(&x.hidden, dtype),
        gate_up: as_dtype(&x.gate_up, wdt),
        down: as_dtype(&x.down, wdt),
        aff: as_dtype(&x.aff, aff),
        idx: x.idx.clone(),
        gate_up_b: as_dtype(&x.gate_up_b, dtype),
        down_b: as_dtype(&x.down_b, dtype),
        gate_up_s: as_dtype(&x.gate_up_s, Dtype::F32),
        down_s: as_dtype(&x.down_s, Dtype::F32),
    }
}

/// Every configuration, fp32 inputs in fp32 precision, against the float64
/// mixture of the same (affinity-rounded) inputs.
#[test]
fn configs_in_fp32_match_float64() {
    for cfg in CONFIGS {
        let x = rounded(&cfg.inputs(), Dtype::F32, Dtype::F32, cfg.aff_dtype());
        let got = cfg.run(&x, Dtype::F32, Precision::Fp32);
        assert_close(&format!("{} fp32", cfg.name()), &got, &cfg.reference(&x), 1e-4, 1e-4);
    }
}

/// bfloat16 inputs in hardware precision within the library's tolerance
/// (2e-2) of the float64 mixture of the rounded inputs; fp8 `ROW` weights
/// in both modes.
#[test]
fn configs_in_hardware_precision_match_float64() {
    for cfg in CONFIGS.iter().chain(ROW_CONFIGS) {
        let x = rounded(&cfg.inputs(), Dtype::Bf16, cfg.weight_dtype(Dtype::Bf16), cfg.aff_dtype());
        let want = cfg.reference(&x);
        if cfg.row {
            let got = cfg.run(&x, Dtype::Bf16, Precision::Fp32);
            assert_close(&format!("{} fp32", cfg.name()), &got, &want, 1e-4, 1e-4);
        }
        let got = cfg.run(&x, Dtype::Bf16, Precision::Hardware);
        assert_close(&format!("{} bfloat16", cfg.name()), &got, &want, 2e-2, 2e-2);
    }
}

/// The emitted kernel under NumPy equals the emulator up to the order of
/// the matmuls' float32 sums: both paths, masking on another rank, `ROW`,
/// one program and LNC2, both modes.
#[test]
fn emitted_moe_tkg_under_numpy_equals_emulator() {
    for (cfg, m) in sweep([CONFIGS[3], CONFIGS[4], CONFIGS[7], CONFIGS[8], CONFIGS[10], ROW_CONFIGS[0], ROW_CONFIGS[1]]) {
        let wide = if cfg.row { Dtype::Bf16 } else { Dtype::F32 };
        let (dtype, precision, mode) = m.run(wide, Dtype::Bf16);
        let x = rounded(&cfg.inputs(), dtype, cfg.weight_dtype(dtype), cfg.aff_dtype());
        let emu = cfg.run(&x, dtype, precision);
        let np = run_numpy_kwargs(emitted_package(), "moe_tkg", &[], &cfg.numpy_kwargs(&x, dtype), cfg.lnc, mode);
        assert_numpy_close_to_emulator(&cfg.name(), mode, &np, &[emu]);
    }
}

/// A call the rules accept, to vary one field at a time.
const OK: MoeTkgCall = MoeTkgCall {
    expert_affinities_scaling_mode: ExpertAffinityScaleMode::POST_SCALE,
    has_rank_id: true,
    ..MoeTkgCall::new(4, 3072, 384, 8, 8, 2, true)
};

/// Each rule refuses what it names, and the kernel refuses the same at trace time.
#[test]
fn rules_refuse_what_they_name() {
    assert_eq!(moe_tkg_violation(OK), None);
    // All-expert takes more than 128 tokens; selective splits the tokens, so
    // an odd H / 128 is fine there.
    assert_eq!(moe_tkg_violation(MoeTkgCall { tokens: 1024, ..OK }), None);
    assert_eq!(moe_tkg_violation(MoeTkgCall { hidden: 384, is_all_expert: false, top_k: 2, ..OK }), None);
    assert_eq!(moe_tkg_violation(MoeTkgCall { has_gate_up_scale: true, has_down_scale: true, ..OK }), None);
    assert_eq!(moe_tkg_violation(MoeTkgCall { is_all_expert_dynamic: true, has_block_size: true, ..OK }), None);
    let cases = [
        (MoeTkgCall { hidden: 378, ..OK }, MoeTkgRule::HiddenTiles),
        (MoeTkgCall { top_k: 0, ..OK }, MoeTkgRule::Sizes),
        (MoeTkgCall { tokens: 129, is_all_expert: false, ..OK }, MoeTkgRule::SelectiveTokens),
        (MoeTkgCall { programs: 4, ..OK }, MoeTkgRule::Programs),
        (MoeTkgCall { hidden: 384, ..OK }, MoeTkgRule::HiddenShards),
        (MoeTkgCall { hidden: 384, tokens: 1, is_all_expert: false, ..OK }, MoeTkgRule::HiddenShards),
        (MoeTkgCall { expert_affinities_scaling_mode: ExpertAffinityScaleMode::PRE_SCALE, ..OK }, MoeTkgRule::ScalingMode),
        (MoeTkgCall { has_rank_id: false, ..OK }, MoeTkgRule::RankId),
        (MoeTkgCall { has_input_scales: true, ..OK }, MoeTkgRule::StaticQuantization),
        (MoeTkgCall { has_gate_up_scale: true, ..OK }, MoeTkgRule::RowScales),
        (MoeTkgCall { mx: true, has_hidden_input_scale: true, ..OK }, MoeTkgRule::MxHiddenInputScale),
        (MoeTkgCall { is_all_expert_dynamic: true, ..OK }, MoeTkgRule::Dynamic),
        (MoeTkgCall { is_all_expert_dynamic: true, has_block_size: true, mask_unselected_experts: true, ..OK }, MoeTkgRule::DynamicMask),
        (MoeTkgCall { has_eager: true, ..OK }, MoeTkgRule::Eager),
        (MoeTkgCall { output_in_sbuf: true, ..OK }, MoeTkgRule::SbufOutput),
    ];
    assert_refused_by(moe_tkg_violation, cases);
    // The kernel's own checks, at trace time.
    let cfg = all(2, 4, 384, 64, 2);
    let x = cfg.inputs();
    let hid = tensor(&[4, 384], &x.hidden, Dtype::Bf16);
    let gu = tensor(&[2, 384, 2, 64], &x.gate_up, Dtype::Bf16);
    let dw = tensor(&[2, 64, 384], &x.down, Dtype::Bf16);
    let aff = tensor(&[4, 2], &x.aff, Dtype::Bf16);
    let idx = Tensor::from_i64(&[4, 2], &x.idx, Dtype::I32).unwrap();
    let err = moe_tkg::Call::new(&hid, &gu, &dw, &aff, &idx, true).launch(&Launch::new().lnc(2)).unwrap_err().to_string();
    assert!(err.contains("must split evenly over the 2 programs"), "{err}");
    let err = moe_tkg::Call::new(&hid, &gu, &dw, &aff, &idx, true)
        .expert_affinities_scaling_mode(ExpertAffinityScaleMode::POST_SCALE)
        .launch(&Launch::new())
        .unwrap_err()
        .to_string();
    assert!(err.contains(MoeTkgRule::RankId.message()), "{err}");
}
