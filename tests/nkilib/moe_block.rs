//! The library's `moe_block_tkg` against a float64 MoE block written from its
//! documented computation — `x = x · gamma / sqrt(Σx² / N + eps)`, logits
//! `x W_r + b_r`, softmax or sigmoid before (then optionally renormalised
//! over the top-k) or after the top-k, then each token's selected experts
//! (selective) or every local expert (all-expert, the unselected ones
//! weighted 0 under `POST_SCALE`) — at CI-sized subsets of the library's
//! `test_moe_block_tkg.py` configurations (its `H`, `I`, `T`, `K`, the
//! all-expert `E = 128`; 16 experts on the selective path, whose weights hold
//! every expert) and skewed routings (every token on one expert, experts
//! without tokens), in both precision modes; its emitted source under NumPy
//! against the emulator; its rules.
//!
//! The inputs make the routing unambiguous: token `t` holds level `v[t, e]`
//! (a permutation of `1..=E` per token, small noise) on the hidden block the
//! router reads for expert `e`, so the top-k is the same in every precision;
//! the reference checks the margin it relies on.

use crate::common::attention::run_numpy_kwargs;
use crate::common::{Arg, CaseName, assert_close, assert_numpy_close_to_emulator, emitted_package, seed_of, tensor, uniform};
use crate::moe_tkg::{CLAMPS, ExpertWeights, expert_f64};
use crate::router_topk::{activate, ranked};
use crate::support::round_to;
use nki::emit::PyEnum;
use nki::{Dtype, Launch, Precision, Tensor};
use nkilib::moe::moe_tkg::moe_tkg::MoeTkgRule;
use nkilib::moe_block::moe_block_tkg::{
    ActFnType, ExpertAffinityScaleMode, MoeBlockCall, MoeBlockRule, RouterActFnType, moe_block_tkg, moe_block_violation,
};
use nkilib::router_topk::router_topk::RouterRule;
use nkilib::subkernels::rmsnorm_mx_quantize_tkg::RmsNormMxRule;

const EPS: f64 = 1e-6;

/// How the tokens rank the experts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Routing {
    /// A random order per token.
    Spread,
    /// Expert 0 first for every token (the rest random).
    OneExpert,
    /// The same order `0, 1, ..` for every token: the last experts get none.
    Same,
}

/// One configuration: sizes and options (`lnc` is always 2).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Config {
    pub(crate) b: usize,
    pub(crate) s: usize,
    pub(crate) h: usize,
    pub(crate) hidden_actual: Option<usize>,
    pub(crate) i: usize,
    /// The router's experts.
    pub(crate) e: usize,
    /// Local experts (all-expert; the selective weights hold all `e`).
    pub(crate) el: usize,
    pub(crate) k: usize,
    pub(crate) all_expert: bool,
    pub(crate) router: RouterActFnType,
    pub(crate) act: ActFnType,
    pub(crate) post: bool,
    pub(crate) bias: bool,
    pub(crate) clamp: bool,
    pub(crate) pre_norm: bool,
    pub(crate) norm_topk: bool,
    pub(crate) skip_logits: bool,
    pub(crate) routing: Routing,
    /// `router_mm_dtype = float32` (else the input's dtype).
    pub(crate) router_f32: bool,
}

/// The library's first selective row: softmax after the top-k, Swish,
/// `POST_SCALE`, biases, clamps.
pub(crate) const fn sel(b: usize, s: usize, h: usize, i: usize, k: usize) -> Config {
    Config {
        b,
        s,
        h,
        hidden_actual: None,
        i,
        e: 16,
        el: 16,
        k,
        all_expert: false,
        router: RouterActFnType::SOFTMAX,
        act: ActFnType::Swish,
        post: true,
        bias: true,
        clamp: true,
        pre_norm: false,
        norm_topk: false,
        skip_logits: false,
        routing: Routing::Spread,
        router_f32: false,
    }
}

/// The library's all-expert row: 128 router experts, `el` local.
pub(crate) const fn all(b: usize, h: usize, i: usize, el: usize, k: usize) -> Config {
    Config { e: 128, el, all_expert: true, ..sel(b, 1, h, i, k) }
}

impl Config {
    /// The library's bfloat16 rows: softmax before the top-k renormalised, SiLU, no bias or clamp.
    pub(crate) const fn pre_norm_silu(mut self) -> Self {
        self.router = RouterActFnType::SOFTMAX;
        self.act = ActFnType::SiLU;
        self.pre_norm = true;
        self.norm_topk = true;
        self.bias = false;
        self.clamp = false;
        self
    }
    pub(crate) const fn ha(mut self, ha: usize) -> Self {
        self.hidden_actual = Some(ha);
        self
    }
    pub(crate) const fn experts(mut self, e: usize) -> Self {
        self.e = e;
        self
    }
    pub(crate) const fn sigmoid_pre(mut self) -> Self {
        self.router = RouterActFnType::SIGMOID;
        self.pre_norm = true;
        self.norm_topk = false;
        self
    }
    const fn no_scale(mut self) -> Self {
        self.post = false;
        self
    }
    pub(crate) const fn routed(mut self, r: Routing) -> Self {
        self.routing = r;
        self
    }
    pub(crate) const fn skip(mut self) -> Self {
        self.skip_logits = true;
        self
    }
    pub(crate) const fn router_f32(mut self) -> Self {
        self.router_f32 = true;
        self
    }
}

use crate::common::sweep::sweep;
use Routing::{OneExpert, Same};

/// CI-sized subsets of the library's configurations, with the routings and
/// options it leaves out.
const CONFIGS: &[Config] = &[
    sel(1, 1, 3072, 384, 4),
    sel(1, 4, 3072, 192, 4).ha(2880),
    sel(1, 5, 3072, 128, 4),
    sel(19, 1, 3072, 128, 4),
    sel(1, 1, 4096, 384, 8).pre_norm_silu(),
    sel(4, 1, 1024, 128, 2).sigmoid_pre().no_scale().skip(),
    sel(8, 1, 1024, 128, 1).routed(OneExpert).router_f32(),
    sel(6, 1, 1024, 128, 2).routed(Same).sigmoid_pre(),
    all(19, 3072, 128, 1, 4),
    all(32, 3072, 384, 4, 4),
    all(16, 4096, 384, 8, 8).pre_norm_silu(),
    all(8, 1024, 128, 4, 2).experts(16).sigmoid_pre().routed(OneExpert),
    all(4, 1024, 128, 4, 2).experts(16).sigmoid_pre().no_scale().routed(Same).skip(),
];

/// The inputs, row-major.
struct Inputs {
    /// `[T, H]`.
    x: Vec<f64>,
    /// `[H]`.
    gamma: Vec<f64>,
    /// `[H, E]`.
    router_w: Vec<f64>,
    /// `[E]`.
    router_b: Vec<f64>,
    gate_up: Vec<f64>,
    down: Vec<f64>,
    gate_up_b: Vec<f64>,
    down_b: Vec<f64>,
}

/// The float64 block: `out` `[T, H]` and the logits `[T, E]`.
struct Reference {
    out: Vec<f64>,
    logits: Vec<f64>,
}

impl Config {
    pub(crate) fn t(&self) -> usize {
        self.b * self.s
    }
    /// The weights' experts.
    pub(crate) fn weight_experts(&self) -> usize {
        if self.all_expert { self.el } else { self.e }
    }
    /// This rank (all-expert): the last one, or with a skewed routing the
    /// first (which holds the experts every token picks).
    pub(crate) fn rank(&self) -> usize {
        if self.routing == Routing::Spread { self.e / self.el - 1 } else { 0 }
    }
    /// The router's hidden block per expert.
    pub(crate) fn block(&self) -> usize {
        self.hidden_actual.unwrap_or(self.h) / self.e
    }

    /// Token `t`'s levels `[E]`, `1..=E` (module docs).
    pub(crate) fn levels(&self, keys: &[f64], t: usize) -> Vec<f64> {
        let e = self.e;
        let mut order: Vec<usize> = (0..e).collect();
        order.sort_by(|a, b| keys[t * e + a].total_cmp(&keys[t * e + b]));
        match self.routing {
            Routing::Spread => {}
            Routing::OneExpert => {
                order.retain(|&x| x != 0);
                order.insert(0, 0);
            }
            Routing::Same => order = (0..e).collect(),
        }
        let mut v = vec![0.0; e];
        for (rank, &ex) in order.iter().enumerate() {
            v[ex] = (e - rank) as f64;
        }
        v
    }

    fn inputs(&self) -> Inputs {
        let seed = seed_of(&self.name());
        let (t, h, i, e, ew) = (self.t(), self.h, self.i, self.e, self.weight_experts());
        let (ha, block) = (self.hidden_actual.unwrap_or(h), self.block());
        let keys = uniform(t * e, seed, 0.0, 1.0);
        // Relative noise of the rows and gamma small against the level step 1 / E.
        let amp = 0.2 / e as f64;
        let noise = uniform(t * h, seed + 1, -amp, amp);
        let mut x = vec![0.0; t * h];
        for tok in 0..t {
            let v = self.levels(&keys, tok);
            for col in 0..ha {
                let level = if col / block < e { v[col / block] } else { 1.0 };
                x[tok * h + col] = level * (1.0 + noise[tok * h + col]);
            }
        }
        // Logit steps of about 0.3 per level (4 / E for many experts, so the
        // logits stay within a few units): the rows' rms is that of 1..=E.
        let rms = ((e + 1) as f64 * (2 * e + 1) as f64 / 6.0).sqrt();
        let c = (0.3f64).min(4.0 / e as f64) * rms / block as f64;
        let mut router_w = vec![0.0; h * e];
        for col in 0..(block * e) {
            router_w[col * e + col / block] = c;
        }
        let r = 3f64.sqrt();
        Inputs {
            x,
            gamma: uniform(h, seed + 2, 1.0 - amp, 1.0 + amp),
            router_w,
            router_b: uniform(e, seed + 3, -0.01, 0.01),
            gate_up: uniform(ew * h * 2 * i, seed + 4, -r / (h as f64).sqrt(), r / (h as f64).sqrt()),
            down: uniform(ew * i * h, seed + 5, -r / (i as f64).sqrt(), r / (i as f64).sqrt()),
            gate_up_b: uniform(ew * 2 * i, seed + 6, -0.5, 0.5),
            down_b: uniform(ew * h, seed + 7, -0.5, 0.5),
        }
    }

    /// The selected experts of one row of logits and their weights (module docs).
    fn route(&self, logits: &[f64]) -> Vec<(usize, f64)> {
        self.route_named(logits, || self.name())
    }

    /// [`Config::route`], `name` naming the case if the top-k is ambiguous.
    pub(crate) fn route_named(&self, logits: &[f64], name: impl Fn() -> String) -> Vec<(usize, f64)> {
        let k = self.k;
        let scores = if self.pre_norm { activate(self.router, logits) } else { logits.to_vec() };
        let order = ranked(&scores);
        // The activations are monotone: the logits' gap decides the selection.
        let margin = logits[order[k - 1]] - order.get(k).map_or(f64::NEG_INFINITY, |&n| logits[n]);
        assert!(margin > 1e-3, "{}: the inputs leave the top-{k} ambiguous (margin {margin})", name());
        let sel = &order[..k];
        let mut w: Vec<f64> = if self.pre_norm {
            sel.iter().map(|&ex| scores[ex]).collect()
        } else {
            activate(self.router, &sel.iter().map(|&ex| logits[ex]).collect::<Vec<_>>())
        };
        if self.pre_norm && self.norm_topk {
            let sum: f64 = w.iter().sum();
            w.iter_mut().for_each(|v| *v /= sum);
        }
        sel.iter().copied().zip(w).collect()
    }

    fn reference(&self, x: &Inputs) -> Reference {
        let (t, h, e) = (self.t(), self.h, self.e);
        let n = self.hidden_actual.unwrap_or(h) as f64;
        let w = ExpertWeights {
            gate_up: &x.gate_up,
            down: &x.down,
            gate_up_b: self.bias.then_some(&x.gate_up_b[..]),
            down_b: self.bias.then_some(&x.down_b[..]),
            gate_up_s: None,
            down_s: None,
        };
        let (mut out, mut logits) = (vec![0.0; t * h], vec![0.0; t * e]);
        for tok in 0..t {
            let row = &x.x[tok * h..(tok + 1) * h];
            let rms = (row.iter().map(|v| v * v).sum::<f64>() / n + EPS).sqrt();
            let xn: Vec<f64> = row.iter().zip(&x.gamma).map(|(v, g)| v * g / rms).collect();
            let lg = &mut logits[tok * e..(tok + 1) * e];
            for (ex, l) in lg.iter_mut().enumerate() {
                *l = (0..h).map(|r| xn[r] * x.router_w[r * e + ex]).sum::<f64>() + if self.bias { x.router_b[ex] } else { 0.0 };
            }
            let chosen = self.route(lg);
            // (weight-tensor expert, weight) pairs.
            let terms: Vec<(usize, f64)> = if !self.all_expert {
                chosen.iter().map(|&(ex, a)| (ex, if self.post { a } else { 1.0 })).collect()
            } else {
                let base = self.rank() * self.el;
                (0..self.el)
                    .map(|ex| {
                        let a = chosen.iter().find(|c| c.0 == base + ex).map_or(0.0, |c| c.1);
                        (ex, if self.post { a } else { 1.0 })
                    })
                    .collect()
            };
            for (ex, weight) in terms {
                for (o, v) in out[tok * h..(tok + 1) * h].iter_mut().zip(expert_f64(&xn, ex, self.i, w, self.act, self.clamp)) {
                    *o += weight * v;
                }
            }
        }
        Reference { out, logits }
    }

    fn mode(&self) -> ExpertAffinityScaleMode {
        if self.post { ExpertAffinityScaleMode::POST_SCALE } else { ExpertAffinityScaleMode::NO_SCALE }
    }

    pub(crate) fn router_dtype(&self, dtype: Dtype) -> Dtype {
        if self.router_f32 { Dtype::F32 } else { dtype }
    }

    /// `call` with this configuration's options: the router's dtype `rdt`,
    /// the router, gate/up and down biases when it takes them, `rank` on the
    /// all-expert path.
    pub(crate) fn options<'a>(
        &self,
        call: moe_block_tkg::Call<'a>,
        rdt: Dtype,
        [rb, gub, db]: [&'a Tensor; 3],
        rank: &'a Tensor,
    ) -> moe_block_tkg::Call<'a> {
        let mut call = call
            .top_k(self.k as i64)
            .router_act_fn(self.router)
            .router_pre_norm(self.pre_norm)
            .norm_topk_prob(self.norm_topk)
            .expert_affinities_scaling_mode(self.mode())
            .hidden_act_fn(self.act)
            .router_mm_dtype(rdt)
            .skip_router_logits(self.skip_logits)
            .is_all_expert(self.all_expert);
        if let Some(ha) = self.hidden_actual {
            call = call.hidden_actual(ha as i64);
        }
        if self.all_expert {
            call = call.rank_id(rank);
        }
        if self.bias {
            call = call.router_bias(rb).expert_gate_up_bias(gub).expert_down_bias(db);
        }
        if self.clamp {
            call = call.gate_clamp_upper_limit(CLAMPS[0]).up_clamp_upper_limit(CLAMPS[1]).up_clamp_lower_limit(CLAMPS[2]);
        }
        call
    }

    /// The emulator's `out` and (unless skipped) `router_logits`.
    fn run(&self, x: &Inputs, dtype: Dtype, precision: Precision) -> Vec<Vec<f32>> {
        let (t, h, i, e, ew) = (self.t(), self.h, self.i, self.e, self.weight_experts());
        let rdt = self.router_dtype(dtype);
        let inp = tensor(&[self.b, self.s, h], &x.x, dtype);
        let gamma = tensor(&[1, h], &x.gamma, dtype);
        let rw = tensor(&[h, e], &x.router_w, rdt);
        let rb = tensor(&[1, e], &x.router_b, rdt);
        let gu = tensor(&[ew, h, 2, i], &x.gate_up, dtype);
        let dw = tensor(&[ew, i, h], &x.down, dtype);
        let (gub, db) = (tensor(&[ew, 2, i], &x.gate_up_b, dtype), tensor(&[ew, h], &x.down_b, dtype));
        let rank = Tensor::from_i64(&[1, 1], &[self.rank() as i64], Dtype::U32).unwrap();
        let call = self.options(moe_block_tkg::Call::new(&inp, &gamma, &rw, &gu, &dw), rdt, [&rb, &gub, &db], &rank);
        let out = call.launch(&Launch::new().lnc(2).precision(precision)).unwrap_or_else(|err| panic!("{}: {err}", self.name()));
        assert_eq!(out.len(), if self.skip_logits { 1 } else { 2 }, "{}: outputs", self.name());
        assert_eq!((out.0[0].shape(), out.0[0].dtype()), (&[t, h][..], dtype));
        out.0.iter().map(|o| o.to_f32_vec()).collect()
    }

    /// The arguments for the NumPy executor, by keyword (the library's names).
    fn numpy_kwargs(&self, x: &Inputs, dtype: Dtype) -> Vec<(&'static str, Arg)> {
        let (h, i, e, ew) = (self.h, self.i, self.e, self.weight_experts());
        let rdt = self.router_dtype(dtype);
        let opt = |on: bool, a: Arg| if on { a } else { Arg::None };
        let clamp = |v: f64| if self.clamp { Arg::Float(v) } else { Arg::None };
        vec![
            ("inp", Arg::Tensor(vec![self.b, self.s, h], x.x.clone(), dtype)),
            ("gamma", Arg::Tensor(vec![1, h], x.gamma.clone(), dtype)),
            ("router_weights", Arg::Tensor(vec![h, e], x.router_w.clone(), rdt)),
            ("expert_gate_up_weights", Arg::Tensor(vec![ew, h, 2, i], x.gate_up.clone(), dtype)),
            ("expert_down_weights", Arg::Tensor(vec![ew, i, h], x.down.clone(), dtype)),
            ("router_bias", opt(self.bias, Arg::Tensor(vec![1, e], x.router_b.clone(), rdt))),
            ("expert_gate_up_bias", opt(self.bias, Arg::Tensor(vec![ew, 2, i], x.gate_up_b.clone(), dtype))),
            ("expert_down_bias", opt(self.bias, Arg::Tensor(vec![ew, h], x.down_b.clone(), dtype))),
            ("top_k", Arg::Int(self.k as i64)),
            ("router_act_fn", Arg::Member(RouterActFnType::CLASS, self.router.member())),
            ("router_pre_norm", Arg::Bool(self.pre_norm)),
            ("norm_topk_prob", Arg::Bool(self.norm_topk)),
            ("expert_affinities_scaling_mode", Arg::Member(ExpertAffinityScaleMode::CLASS, self.mode().member())),
            ("hidden_act_fn", Arg::Member(ActFnType::CLASS, self.act.member())),
            ("gate_clamp_upper_limit", clamp(CLAMPS[0])),
            ("up_clamp_upper_limit", clamp(CLAMPS[1])),
            ("up_clamp_lower_limit", clamp(CLAMPS[2])),
            ("router_mm_dtype", Arg::Dtype(rdt)),
            ("hidden_actual", self.hidden_actual.map_or(Arg::None, |v| Arg::Int(v as i64))),
            ("skip_router_logits", Arg::Bool(self.skip_logits)),
            ("is_all_expert", Arg::Bool(self.all_expert)),
            ("rank_id", opt(self.all_expert, Arg::Tensor(vec![1, 1], vec![self.rank() as f64], Dtype::U32))),
        ]
    }

    /// Runs and compares `out` (and the logits) with the float64 block.
    fn check(&self, dtype: Dtype, precision: Precision, tol: f64) {
        let x = rounded(self.inputs(), dtype, self.router_dtype(dtype));
        let want = self.reference(&x);
        let got = self.run(&x, dtype, precision);
        let what = format!("{} {dtype:?} {precision:?}", self.name());
        assert_close(&format!("{what} out"), &got[0], &want.out, tol, tol);
        if let Some(logits) = got.get(1) {
            assert_close(&format!("{what} router_logits"), logits, &want.logits, tol, tol);
        }
    }
}

/// The inputs rounded to `dtype` (the router's to `rdt`).
fn rounded(mut x: Inputs, dtype: Dtype, rdt: Dtype) -> Inputs {
    round_to(dtype, [&mut x.x, &mut x.gamma, &mut x.gate_up, &mut x.down, &mut x.gate_up_b, &mut x.down_b]);
    round_to(rdt, [&mut x.router_w, &mut x.router_b]);
    x
}

/// Every configuration, fp32 inputs in fp32 precision.
#[test]
fn configs_in_fp32_match_float64() {
    for cfg in CONFIGS {
        cfg.check(Dtype::F32, Precision::Fp32, 1e-4);
    }
}

/// bfloat16 and float16 inputs in hardware precision within the library's
/// tolerance (2e-2) of the float64 block of the rounded inputs.
#[test]
fn configs_in_hardware_precision_match_float64() {
    for (n, cfg) in CONFIGS.iter().enumerate() {
        let dtype = if n % 2 == 0 { Dtype::Bf16 } else { Dtype::F16 };
        cfg.check(dtype, Precision::Hardware, 2e-2);
    }
}

/// The emitted kernel under NumPy equals the emulator up to the order of the
/// matmuls' float32 sums: both paths, the token-sharded router, the cast for
/// the router, masking, skipped logits, both modes.
#[test]
fn emitted_moe_block_under_numpy_equals_emulator() {
    for (cfg, m) in sweep([CONFIGS[2], CONFIGS[6], CONFIGS[7], CONFIGS[11], CONFIGS[12]]) {
        let (dtype, precision, mode) = m.run(Dtype::F32, Dtype::Bf16);
        let x = rounded(cfg.inputs(), dtype, cfg.router_dtype(dtype));
        let emu = cfg.run(&x, dtype, precision);
        let np = run_numpy_kwargs(emitted_package(), "moe_block_tkg", &[], &cfg.numpy_kwargs(&x, dtype), 2, mode);
        assert_numpy_close_to_emulator(&cfg.name(), mode, &np, &emu);
    }
}

/// A call the rules accept, to vary one field at a time.
const OK: MoeBlockCall = MoeBlockCall {
    router_act_fn: RouterActFnType::SOFTMAX,
    router_pre_norm: false,
    expert_affinities_scaling_mode: ExpertAffinityScaleMode::POST_SCALE,
    ..MoeBlockCall::new(4, 3072, 384, 128, 128, 4)
};

/// An MX all-expert call with `T` not a multiple of 4.
const MX_ALL: MoeBlockCall =
    MoeBlockCall { tokens: 6, is_all_expert: true, has_rank_id: true, mx: true, has_gate_up_scale: true, has_down_scale: true, ..OK };

/// Each rule refuses what it names, and the kernel refuses the same when traced.
#[test]
fn rules_refuse_what_they_name() {
    assert_eq!(moe_block_violation(OK), None);
    assert_eq!(moe_block_violation(MoeBlockCall { tokens: 512, is_all_expert: true, has_rank_id: true, local_experts: 1, ..OK }), None);
    assert_eq!(moe_block_violation(MoeBlockCall { tokens: 256, hidden: 1024, has_residual: true, ..MX_ALL }), None);
    let cases = [
        (MoeBlockCall { hidden: 3000, ..OK }, MoeBlockRule::Hidden),
        (MoeBlockCall { programs: 1, ..OK }, MoeBlockRule::Programs),
        (MoeBlockCall { hidden: 3200, ..OK }, MoeBlockRule::HiddenShards),
        (MoeBlockCall { tokens: 129, ..OK }, MoeBlockRule::SelectiveTokens),
        (MoeBlockCall { has_shared_expert: true, ..OK }, MoeBlockRule::SharedExpert),
        (MoeBlockCall { is_all_expert: true, ..OK }, MoeBlockRule::RankId),
        (MoeBlockCall { has_residual: true, ..OK }, MoeBlockRule::Residual),
        (MoeBlockCall { has_act_placeholders: true, ..OK }, MoeBlockRule::ActPlaceholders),
        (MoeBlockCall { router_mm_dtype_supported: false, ..OK }, MoeBlockRule::RouterDtype),
        (MoeBlockCall { mx: true, ..OK }, MoeBlockRule::Experts(MoeTkgRule::MxScales)),
        (MX_ALL, MoeBlockRule::MxTokens),
        (MoeBlockCall { tokens: 8, inp_16bit: false, ..MX_ALL }, MoeBlockRule::MxNorm(RmsNormMxRule::OutputDtype)),
        (MoeBlockCall { tokens: 8, has_residual: true, ..MX_ALL }, MoeBlockRule::MxNorm(RmsNormMxRule::ResidualSizes)),
        (MoeBlockCall { experts: 4, ..OK }, MoeBlockRule::Router(RouterRule::Experts)),
        (MoeBlockCall { top_k: 9, ..OK }, MoeBlockRule::Router(RouterRule::TopK)),
        (MoeBlockCall { router_act_fn: RouterActFnType::SIGMOID, ..OK }, MoeBlockRule::Router(RouterRule::SigmoidNeedsIndirectScatter)),
        (MoeBlockCall { has_gate_up_scale: true, ..OK }, MoeBlockRule::Experts(MoeTkgRule::RowScales)),
    ];
    for (call, rule) in cases {
        assert_eq!(moe_block_violation(call), Some(rule), "{call:?}");
        assert!(!rule.message().is_empty());
    }
    // The kernel's own checks, when traced.
    let cfg = sel(1, 4, 1024, 128, 2);
    let x = cfg.inputs();
    let inp = tensor(&[1, 4, 1024], &x.x, Dtype::Bf16);
    let gamma = tensor(&[1, 1024], &x.gamma, Dtype::Bf16);
    let rw = tensor(&[1024, 16], &x.router_w, Dtype::Bf16);
    let gu = tensor(&[16, 1024, 2, 128], &x.gate_up, Dtype::Bf16);
    let dw = tensor(&[16, 128, 1024], &x.down, Dtype::Bf16);
    let call = || moe_block_tkg::Call::new(&inp, &gamma, &rw, &gu, &dw).top_k(2).router_act_fn(RouterActFnType::SOFTMAX);
    let err = call().launch(&Launch::new()).unwrap_err().to_string();
    assert!(err.contains("runs on the 2 programs of an LNC2 launch"), "{err}");
    let err = call().is_all_expert(true).launch(&Launch::new().lnc(2)).unwrap_err().to_string();
    assert!(err.contains("rank_id is required"), "{err}");
    let err = call().hidden_act_bias(0.5).launch(&Launch::new().lnc(2)).unwrap_err().to_string();
    assert!(err.contains("placeholders"), "{err}");
    let err = call().router_mm_dtype(Dtype::F16).launch(&Launch::new().lnc(2)).unwrap_err().to_string();
    assert!(err.contains("x dtype float16 must match w dtype bfloat16"), "{err}");
}
