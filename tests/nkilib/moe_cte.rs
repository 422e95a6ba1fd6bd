//! The library's `moe_cte` (its `shard_on_block` implementation,
//! `bwmm_shard_on_block`) against a float64 blockwise mixture of experts
//! written from the documented computation: every block position's token
//! through its block's expert, `act(clamp(x W_gate + b_gate)) ·
//! clamp(x W_up + b_up)` through `W_down` plus `b_down`, times the token's
//! affinity for the expert (on the output under `POST_SCALE`, on the input
//! under `PRE_SCALE`), summed over the token's positions. The sizes are
//! CI-sized versions of the library's `test_moe_cte.py` shapes, with skewed
//! routings (every token on one expert, experts without tokens, tokens
//! dropped past an expert's capacity, padding blocks), in both precision
//! modes; then the emitted source under NumPy against the emulator, and the
//! rules.

use crate::common::attention::run_numpy_kwargs;
use crate::common::sweep::sweep;
use crate::common::{
    Arg, CaseName, assert_close, assert_numpy_close_to_emulator, assert_refused_by, emitted_package, matmul, seed_of, tensor, uniform,
};
use crate::mlp::activation;
use crate::support::{blockwise_case, round_to};
use nki::{Dtype, Launch, Precision, Tensor};
use nkilib::moe::moe_cte::bwmm_shard_on_block::{
    ActFnType, BlockShardStrategy, BwmmShardOnBlockCall, ExpertAffinityScaleMode, MoeCteRule, SkipMode, bwmm_shard_on_block,
    bwmm_shard_on_block_violation,
};
use nkilib::moe::moe_cte::bwmm_shard_on_i::{
    BwmmShardOnICall, ShardOnIRule, blockwise_mm_baseline_shard_intermediate, blockwise_mm_baseline_shard_intermediate_hybrid,
    bwmm_shard_on_i_violation,
};
use nkilib::moe::moe_cte::bwmm_shard_on_i_dropping::{
    DroppingRule, blockwise_mm_shard_intermediate_dropping, bwmm_shard_on_i_dropping_violation,
};
use nkilib::moe::moe_cte::moe_cte::{MoECTEImplementation, MoECTESpec, ShardOnIConfig, moe_cte};

/// How the tokens pick their experts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Routing {
    /// Distinct random experts per token.
    Random,
    /// Every token on expert 0 (`K = 1`); the other experts get no token.
    AllOnZero,
    /// Only the even experts receive tokens.
    EvenOnly,
    /// Each expert keeps at most one block of tokens; the rest are dropped.
    Capped,
}

/// Where the affinity multiplies.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Scale {
    No,
    Pre,
    Post,
}

blockwise_case! {
    /// One configuration: sizes and options.
    struct Config {
        skip_weight: bool,
        bias: bool,
        clamp: bool,
        act: ActFnType,
        scale: Scale,
        routing: Routing,
    }
}

const fn cfg(t: usize, h: usize, i: usize, e: usize, k: usize, b: usize) -> Config {
    Config {
        t,
        h,
        i,
        e,
        k,
        b,
        skip_token: true,
        skip_weight: false,
        bias: true,
        clamp: true,
        act: ActFnType::Swish,
        scale: Scale::Post,
        routing: Routing::Random,
    }
}

impl Config {
    const fn padded(mut self) -> Self {
        self.skip_token = false;
        self
    }
    const fn skip_weight(mut self) -> Self {
        self.skip_weight = true;
        self
    }
    const fn plain(mut self) -> Self {
        self.bias = false;
        self.clamp = false;
        self.act = ActFnType::SiLU;
        self
    }
    const fn scale(mut self, s: Scale) -> Self {
        self.scale = s;
        self
    }
    const fn routed(mut self, r: Routing) -> Self {
        self.routing = r;
        self
    }
}

/// CI-sized versions of the library's `SHARD_ON_BLOCK` cases (`H = 3072,
/// T = 1024, E = 8, B = 256 / 512, K = 4, I = 192 / 384`, skip modes 1 and
/// 3, bias, clamps, Swish), with the options and routings they leave out.
const CONFIGS: &[Config] = &[
    cfg(128, 512, 192, 4, 2, 128),
    cfg(128, 512, 384, 4, 2, 256).skip_weight(),
    cfg(256, 1024, 128, 4, 2, 512),
    cfg(128, 512, 192, 4, 1, 128).padded(),
    cfg(128, 512, 144, 4, 2, 128).padded().plain(),
    cfg(128, 512, 192, 4, 2, 128).scale(Scale::No),
    cfg(128, 512, 192, 4, 2, 128).padded().scale(Scale::Pre),
    cfg(128, 512, 192, 4, 1, 128).routed(Routing::AllOnZero),
    cfg(256, 512, 128, 8, 2, 128).routed(Routing::EvenOnly),
    cfg(256, 512, 128, 4, 2, 128).padded().routed(Routing::Capped),
    // Above 1024 intermediate rows: the down projection summed in 512-row chunks.
    cfg(128, 512, 1536, 4, 2, 128),
    cfg(128, 512, 1152, 4, 1, 128).padded().routed(Routing::AllOnZero),
    cfg(256, 512, 1552, 8, 2, 128).padded().plain().scale(Scale::Pre).routed(Routing::EvenOnly),
    cfg(128, 512, 1536, 4, 2, 128).scale(Scale::No).skip_weight(),
];

/// Where an expert's MLP multiplies the affinity (the reference's knobs).
#[derive(Clone, Copy, Debug)]
struct Scales {
    /// Both clamped projections.
    gate_up: f64,
    /// The intermediate `act(g)·u`.
    inter: f64,
    /// The down bias left out.
    no_down_bias: bool,
}

/// The clamps (gate upper, up upper, up lower), the library tests' values.
const CLAMPS: [f64; 3] = [7.0, 8.0, -9.0];

/// The inputs of one configuration, row-major.
#[derive(Clone)]
struct Inputs {
    /// `[T', H]`, `T' = T + 1` (a zero padding row) unless padding is skipped.
    hidden: Vec<f64>,
    /// `[T'·E]`, zero where a token did not pick the expert.
    aff: Vec<f64>,
    /// `[E, H, 2, I]`, `[E, I, H]`.
    gate_up: Vec<f64>,
    down: Vec<f64>,
    /// `[E, 2, I]`, `[E, H]`.
    gate_up_b: Vec<f64>,
    down_b: Vec<f64>,
    /// `[N·B]`: the token at each position, padding `T` or `-1`.
    positions: Vec<i64>,
    /// `[N]`.
    block_expert: Vec<i64>,
}

/// `$call` (a blockwise kernel's call builder) with configuration `$c`'s
/// options: skip modes, dtypes, accumulation, scaling, activation, and the
/// biases and clamps when it has them.
macro_rules! with_options {
    ($call:expr, $c:expr, $dtype:expr, $gub:expr, $db:expr, $skip_weight:expr) => {{
        let c = $c;
        let mut call = $call
            .skip_dma(Some(SkipMode { skip_token: c.skip_token, skip_weight: $skip_weight }))
            .compute_dtype($dtype)
            .is_tensor_update_accumulating(c.accumulating())
            .expert_affinities_scaling_mode(c.mode())
            .activation_function(c.act);
        if c.bias {
            call = call.gate_and_up_proj_bias($gub).down_proj_bias($db);
        }
        if c.clamp {
            call = call.gate_clamp_upper_limit(CLAMPS[0]).up_clamp_upper_limit(CLAMPS[1]).up_clamp_lower_limit(CLAMPS[2]);
        }
        call
    }};
}

impl Config {
    /// Whether the output holds one slot per program (top-k > 1).
    fn accumulating(&self) -> bool {
        self.k > 1
    }

    /// The experts of each token.
    fn routes(&self, seed: u64) -> Vec<Vec<usize>> {
        let (t, e, k) = (self.t, self.e, self.k);
        let keys = uniform(t * e, seed, 0.0, 1.0);
        (0..t)
            .map(|tok| {
                let mut order: Vec<usize> = (0..e).filter(|&x| self.routing != Routing::EvenOnly || x % 2 == 0).collect();
                order.sort_by(|a, b| keys[tok * e + a].total_cmp(&keys[tok * e + b]));
                if self.routing == Routing::AllOnZero { vec![0] } else { order[..k].to_vec() }
            })
            .collect()
    }

    /// Tokens sorted into blocks by expert, as the library's router lays
    /// them out: `ceil(count / B)` blocks per expert, padding blocks on the
    /// last expert up to `ceil((T·K - (E - 1)) / B) + E - 1` (even, one per
    /// program); `Capped` keeps one block per expert and drops the rest.
    fn blocks(&self, routes: &[Vec<usize>]) -> (Vec<i64>, Vec<i64>) {
        let (t, e, b) = (self.t, self.e, self.b);
        let mut tokens: Vec<Vec<i64>> = vec![Vec::new(); e];
        for (tok, r) in routes.iter().enumerate() {
            for &x in r {
                tokens[x].push(tok as i64);
            }
        }
        if self.routing == Routing::Capped {
            for list in &mut tokens {
                list.truncate(b);
            }
        }
        let mut per_expert: Vec<usize> = tokens.iter().map(|l| l.len().div_ceil(b)).collect();
        let n = ((t * self.k).saturating_sub(e - 1).div_ceil(b) + e - 1).max(per_expert.iter().sum());
        let n = n.div_ceil(2) * 2;
        per_expert[e - 1] += n - per_expert.iter().sum::<usize>();
        let pad = if self.skip_token { -1 } else { t as i64 };
        let (mut positions, mut block_expert) = (Vec::new(), Vec::new());
        for (x, list) in tokens.iter().enumerate() {
            for blk in 0..per_expert[x] {
                block_expert.push(x as i64);
                positions.extend((0..b).map(|p| list.get(blk * b + p).copied().unwrap_or(pad)));
            }
        }
        (positions, block_expert)
    }

    /// Rows in `[0, 1)` as the library's tests draw them, weights in
    /// `±0.1`, biases in `±1`; affinities in `[0, 1)` where picked.
    fn inputs(&self) -> Inputs {
        let seed = seed_of(&self.name());
        let (t, h, i, e, rows) = (self.t, self.h, self.i, self.e, self.rows());
        let routes = self.routes(seed);
        let (positions, block_expert) = self.blocks(&routes);
        let mut hidden = uniform(rows * h, seed + 1, 0.0, 1.0);
        let aff = picked_affinities(&routes, e, &uniform(rows * e, seed + 2, 0.0, 1.0));
        if !self.skip_token {
            hidden[t * h..].fill(0.0);
        }
        Inputs {
            hidden,
            aff,
            gate_up: uniform(e * h * 2 * i, seed + 3, -0.1, 0.1),
            down: uniform(e * i * h, seed + 4, -0.1, 0.1),
            gate_up_b: uniform(e * 2 * i, seed + 5, -1.0, 1.0),
            down_b: uniform(e * h, seed + 6, -1.6, 1.4),
            positions,
            block_expert,
        }
    }

    /// Expert `ex`'s MLP of the rows `xs` (`[n, H]`): `[n, H]`, row `r`'s
    /// clamped projections times `s[r].gate_up` and its intermediate times
    /// `s[r].inter`; the down bias unless `s[r].no_down_bias`.
    fn expert(&self, w: &Inputs, ex: usize, xs: &[f64], s: &[Scales]) -> Vec<f64> {
        let (h, i, n) = (self.h, self.i, s.len());
        let gu = self.projections(w, ex, xs);
        let inter: Vec<f64> = (0..n * i)
            .map(|at| {
                let (r, col, s) = (at / i, at % i, s[at / i]);
                let g = s.gate_up * gu[r * 2 * i + col];
                s.inter * activation(self.act, g) * s.gate_up * gu[r * 2 * i + i + col]
            })
            .collect();
        let mut out = matmul(&inter, &w.down[ex * i * h..(ex + 1) * i * h], n, i, h);
        for (at, v) in out.iter_mut().enumerate() {
            if self.bias && !s[at / h].no_down_bias {
                *v += w.down_b[ex * h + at % h];
            }
        }
        out
    }

    /// Expert `ex`'s gate then up projections of the rows `xs` (`[n, H]`),
    /// `[n, 2·I]`, with the bias and clamps when the configuration has them.
    fn projections(&self, w: &Inputs, ex: usize, xs: &[f64]) -> Vec<f64> {
        let (h, i) = (self.h, self.i);
        let clamp = |v: f64, hi: f64, lo: f64| if self.clamp { v.min(hi).max(lo) } else { v };
        let mut dots = matmul(xs, &w.gate_up[ex * h * 2 * i..(ex + 1) * h * 2 * i], xs.len() / h, h, 2 * i);
        let limits = [(CLAMPS[0], f64::NEG_INFINITY), (CLAMPS[1], CLAMPS[2])];
        for (at, v) in dots.iter_mut().enumerate() {
            let k = at % (2 * i);
            let (hi, lo) = limits[k / i];
            *v = clamp(*v + if self.bias { w.gate_up_b[ex * 2 * i + k] } else { 0.0 }, hi, lo);
        }
        dots
    }

    /// The float64 blockwise mixture of the `T` tokens, `[T, H]`, the
    /// affinity placed as `bwmm_shard_on_block` documents it.
    fn reference(&self, w: &Inputs) -> Vec<f64> {
        self.mixture(w, |a| {
            let pre = if self.scale == Scale::Pre { a } else { 1.0 };
            let post = if self.scale == Scale::Post { a } else { 1.0 };
            (pre, Scales { gate_up: 1.0, inter: 1.0, no_down_bias: false }, post)
        })
    }

    /// The float64 mixture with token affinity `a` placed by `place(a)`:
    /// `(input scale, expert scales, output scale)`.
    fn mixture(&self, w: &Inputs, place: impl Fn(f64) -> (f64, Scales, f64)) -> Vec<f64> {
        let (t, h, e, b) = (self.t, self.h, self.e, self.b);
        let mut out = vec![0.0; t * h];
        for (blk, &ex) in w.block_expert.iter().enumerate() {
            // The block's tokens (a position past `T` is padding), as one batch.
            let toks: Vec<usize> =
                w.positions[blk * b..(blk + 1) * b].iter().filter_map(|&tok| usize::try_from(tok).ok().filter(|&tok| tok < t)).collect();
            let placed: Vec<(f64, Scales, f64)> = toks.iter().map(|&tok| place(w.aff[tok * e + ex as usize])).collect();
            let xs: Vec<f64> = toks
                .iter()
                .zip(&placed)
                .flat_map(|(&tok, &(pre, _, _))| w.hidden[tok * h..(tok + 1) * h].iter().map(move |v| v * pre))
                .collect();
            let scales: Vec<Scales> = placed.iter().map(|p| p.1).collect();
            let rows = self.expert(w, ex as usize, &xs, &scales);
            for ((&tok, &(_, _, post)), row) in toks.iter().zip(&placed).zip(rows.chunks(h)) {
                for (o, v) in out[tok * h..(tok + 1) * h].iter_mut().zip(row) {
                    *o += post * v;
                }
            }
        }
        out
    }

    fn mode(&self) -> ExpertAffinityScaleMode {
        match self.scale {
            Scale::No => ExpertAffinityScaleMode::NO_SCALE,
            Scale::Pre => ExpertAffinityScaleMode::PRE_SCALE,
            Scale::Post => ExpertAffinityScaleMode::POST_SCALE,
        }
    }

    /// The tensors of a call: hidden, affinities, gate/up, down, positions,
    /// block experts, gate/up bias, down bias.
    fn tensors(&self, w: &Inputs, dtype: Dtype) -> [Tensor; 8] {
        let (h, i, e, rows) = (self.h, self.i, self.e, self.rows());
        let n = w.block_expert.len();
        [
            tensor(&[rows, h], &w.hidden, dtype),
            tensor(&[rows * e, 1], &w.aff, dtype),
            tensor(&[e, h, 2, i], &w.gate_up, dtype),
            tensor(&[e, i, h], &w.down, dtype),
            Tensor::from_i64(&[n * self.b], &w.positions, Dtype::I32).unwrap(),
            Tensor::from_i64(&[n, 1], &w.block_expert, Dtype::I32).unwrap(),
            tensor(&[e, 2, i], &w.gate_up_b, dtype),
            tensor(&[e, 1, h], &w.down_b, dtype),
        ]
    }

    /// The emulator's output on two programs: `[T', 2, H]` accumulating,
    /// else `[T', H]`.
    fn run(&self, w: &Inputs, dtype: Dtype, precision: Precision) -> Vec<f32> {
        let [hid, aff, gu, dw, pos, b2e, gub, db] = self.tensors(w, dtype);
        let call = bwmm_shard_on_block::Call::new(&hid, &aff, &gu, &dw, self.b as i64, &pos, &b2e);
        let call = with_options!(call, self, dtype, &gub, &db, self.skip_weight);
        let launch = Launch::new().lnc(2).precision(precision);
        call.launch(&launch).unwrap_or_else(|err| panic!("{}: {err}", self.name())).to_f32_vec()
    }

    /// The token rows of an output (slot 0 when accumulating, whose slot 1
    /// must be zero), without the padding row.
    fn token_rows(&self, out: &[f32]) -> Vec<f32> {
        let (t, h) = (self.t, self.h);
        if !self.accumulating() {
            return out[..t * h].to_vec();
        }
        let slot1_zero = (0..t).all(|r| out[(2 * r + 1) * h..(2 * r + 2) * h].iter().all(|&v| v == 0.0));
        assert!(slot1_zero, "{}: slot 1 is not cleared by the reduction", self.name());
        (0..t).flat_map(|r| out[2 * r * h..(2 * r + 1) * h].to_vec()).collect()
    }

    /// The arguments for the NumPy executor, by keyword (the library's names).
    fn numpy_kwargs(&self, w: &Inputs, dtype: Dtype) -> Vec<(&'static str, Arg)> {
        let (h, i, e, rows, n) = (self.h, self.i, self.e, self.rows(), w.block_expert.len());
        let ints = |v: &[i64]| v.iter().map(|&x| x as f64).collect::<Vec<f64>>();
        let opt = |on: bool, a: Arg| if on { a } else { Arg::None };
        let clamp = |v: f64| if self.clamp { Arg::Float(v) } else { Arg::None };
        let act = if self.act == ActFnType::Swish { "Swish" } else { "SiLU" };
        let mode = match self.scale {
            Scale::No => "NO_SCALE",
            Scale::Pre => "PRE_SCALE",
            Scale::Post => "POST_SCALE",
        };
        vec![
            ("hidden_states", Arg::Tensor(vec![rows, h], w.hidden.clone(), dtype)),
            ("expert_affinities_masked", Arg::Tensor(vec![rows * e, 1], w.aff.clone(), dtype)),
            ("gate_up_proj_weight", Arg::Tensor(vec![e, h, 2, i], w.gate_up.clone(), dtype)),
            ("down_proj_weight", Arg::Tensor(vec![e, i, h], w.down.clone(), dtype)),
            ("block_size", Arg::Int(self.b as i64)),
            ("token_position_to_id", Arg::Tensor(vec![n * self.b], ints(&w.positions), Dtype::I32)),
            ("block_to_expert", Arg::Tensor(vec![n, 1], ints(&w.block_expert), Dtype::I32)),
            ("gate_and_up_proj_bias", opt(self.bias, Arg::Tensor(vec![e, 2, i], w.gate_up_b.clone(), dtype))),
            ("down_proj_bias", opt(self.bias, Arg::Tensor(vec![e, 1, h], w.down_b.clone(), dtype))),
            ("activation_function", Arg::Member("ActFnType", act)),
            (
                "skip_dma",
                Arg::Object("SkipMode", vec![("skip_token", Arg::Bool(self.skip_token)), ("skip_weight", Arg::Bool(self.skip_weight))]),
            ),
            ("compute_dtype", Arg::Dtype(dtype)),
            ("is_tensor_update_accumulating", Arg::Bool(self.accumulating())),
            ("expert_affinities_scaling_mode", Arg::Member("ExpertAffinityScaleMode", mode)),
            ("gate_clamp_upper_limit", clamp(CLAMPS[0])),
            ("up_clamp_upper_limit", clamp(CLAMPS[1])),
            ("up_clamp_lower_limit", clamp(CLAMPS[2])),
        ]
    }
}

/// The experts of each of `t` tokens (`k` each, as `routing` picks them,
/// drawn from `seed`) and their blocks of `b` positions among `e` experts
/// (`Config::blocks`): `(routes, positions, block experts)`, padding `T`
/// or `-1` with `skip_token`.
pub(crate) fn routed_blocks(
    (t, e, k, b): (usize, usize, usize, usize),
    skip_token: bool,
    routing: Routing,
    seed: u64,
) -> (Vec<Vec<usize>>, Vec<i64>, Vec<i64>) {
    let c = Config { skip_token, ..cfg(t, 512, 128, e, k, b).routed(routing) };
    let routes = c.routes(seed);
    let (positions, block_expert) = c.blocks(&routes);
    (routes, positions, block_expert)
}

/// The affinities `[T'·E]` of each token's picked experts (`routes`),
/// drawn from `draw` `[T'·E]`, zero elsewhere.
pub(crate) fn picked_affinities(routes: &[Vec<usize>], e: usize, draw: &[f64]) -> Vec<f64> {
    let mut aff = vec![0.0; draw.len()];
    for (tok, r) in routes.iter().enumerate() {
        for &x in r {
            aff[tok * e + x] = draw[tok * e + x];
        }
    }
    aff
}

/// Rounds the float inputs to `dtype`.
fn rounded(mut w: Inputs, dtype: Dtype) -> Inputs {
    round_to(dtype, [&mut w.hidden, &mut w.aff, &mut w.gate_up, &mut w.down, &mut w.gate_up_b, &mut w.down_b]);
    w
}

/// Every configuration with `dtype` inputs and compute in `precision`
/// within `tol` of the float64 mixture of the rounded inputs.
fn configs_match_float64(dtype: Dtype, precision: Precision, tol: f64) {
    for c in CONFIGS {
        let w = rounded(c.inputs(), dtype);
        let got = c.token_rows(&c.run(&w, dtype, precision));
        assert_close(&format!("{} {dtype:?}", c.name()), &got, &c.reference(&w), tol, tol);
    }
}

/// fp32 inputs and compute in fp32 precision.
#[test]
fn configs_in_fp32_match_float64() {
    configs_match_float64(Dtype::F32, Precision::Fp32, 1e-4);
}

/// bfloat16 inputs and compute in hardware precision within the library's
/// tolerance (2e-2).
#[test]
fn configs_in_hardware_precision_match_float64() {
    configs_match_float64(Dtype::Bf16, Precision::Hardware, 2e-2);
}

/// The emitted kernel under NumPy equals the emulator (the whole output,
/// padding row included): accumulating and not, padding skipped or named,
/// each scaling mode, the chunked intermediate, both precision modes.
#[test]
fn emitted_bwmm_shard_on_block_under_numpy_equals_emulator() {
    for (c, m) in sweep([CONFIGS[0], CONFIGS[3], CONFIGS[5], CONFIGS[6], CONFIGS[10], CONFIGS[12]]) {
        let (dtype, precision, mode) = m.run(Dtype::F32, Dtype::Bf16);
        let w = rounded(c.inputs(), dtype);
        let emu = c.run(&w, dtype, precision);
        let np = run_numpy_kwargs(emitted_package(), "bwmm_shard_on_block", &[], &c.numpy_kwargs(&w, dtype), 2, mode);
        assert_numpy_close_to_emulator(&c.name(), mode, &np, &[emu]);
    }
}

/// `moe_cte` with `MoECTESpec(implementation=shard_on_block)` is
/// `bwmm_shard_on_block`, in the emulator and emitted; an implementation
/// not ported is refused by name.
#[test]
fn moe_cte_dispatches_to_shard_on_block() {
    let c = CONFIGS[0];
    let w = rounded(c.inputs(), Dtype::Bf16);
    let [hid, aff, gu, dw, pos, b2e, gub, db] = c.tensors(&w, Dtype::Bf16);
    let skip = SkipMode { skip_token: true, skip_weight: false };
    let (block, mx) = (MoECTESpec::new(MoECTEImplementation::shard_on_block), MoECTESpec::new(MoECTEImplementation::shard_on_i_mx));
    let call = |s| {
        moe_cte::Call::new(&hid, &aff, &gu, &dw, &pos, &b2e, c.b as i64, s)
            .gate_and_up_proj_bias(&gub)
            .down_proj_bias(&db)
            .activation_function(ActFnType::Swish)
            .skip_dma(Some(skip.clone()))
            .gate_clamp_upper_limit(CLAMPS[0])
            .up_clamp_upper_limit(CLAMPS[1])
            .up_clamp_lower_limit(CLAMPS[2])
    };
    let launch = Launch::new().lnc(2).precision(Precision::Hardware);
    let got = call(&block).launch(&launch).unwrap().0[0].to_f32_vec();
    assert_eq!(got, c.run(&w, Dtype::Bf16, Precision::Hardware), "moe_cte differs from bwmm_shard_on_block");
    let mut kwargs = c.numpy_kwargs(&w, Dtype::Bf16);
    kwargs.push(("spec", Arg::Object("MoECTESpec", vec![("implementation", Arg::Member("MoECTEImplementation", "shard_on_block"))])));
    let np = run_numpy_kwargs(emitted_package(), "moe_cte", &[], &kwargs, 2, "hardware");
    assert_close("moe_cte emitted", &np[0], &got.iter().map(|&v| f64::from(v)).collect::<Vec<_>>(), 1e-6, 2f64.powi(-7));
    let err = call(&mx).launch(&launch).unwrap_err().to_string();
    assert!(err.contains(MoeCteRule::Implementation.message()), "{err}");
}

/// A call the rules accept, to vary one field at a time (the library's
/// `H = 3072, T = 1024, E = 8, B = 512, I = 384`, skip_token).
const OK: BwmmShardOnBlockCall = BwmmShardOnBlockCall {
    tokens: 1024,
    hidden: 3072,
    intermediate: 384,
    experts: 8,
    block_size: 512,
    positions: 16 * 512,
    programs: 2,
    skip_token: true,
    accumulating: true,
    strategy: BlockShardStrategy::PING_PONG,
    scaling_mode: ExpertAffinityScaleMode::POST_SCALE,
    activation: ActFnType::Swish,
    quantized: false,
    down_activations: false,
    one_bias: false,
};

/// Each rule refuses what it names, and the kernel refuses the same at trace time.
#[test]
fn rules_refuse_what_they_name() {
    assert_eq!(bwmm_shard_on_block_violation(OK), None);
    // The padding row: T + 1 rows reduce T.
    assert_eq!(bwmm_shard_on_block_violation(BwmmShardOnBlockCall { tokens: 1025, skip_token: false, ..OK }), None);
    assert_eq!(bwmm_shard_on_block_violation(BwmmShardOnBlockCall { tokens: 1000, accumulating: false, ..OK }), None);
    // Above 1024 intermediate rows: the chunked path.
    assert_eq!(bwmm_shard_on_block_violation(BwmmShardOnBlockCall { intermediate: 1552, ..OK }), None);
    let cases = [
        (BwmmShardOnBlockCall { programs: 1, ..OK }, MoeCteRule::Programs),
        (BwmmShardOnBlockCall { hidden: 384, ..OK }, MoeCteRule::HiddenTiles),
        (BwmmShardOnBlockCall { block_size: 200, ..OK }, MoeCteRule::BlockSize),
        (BwmmShardOnBlockCall { positions: 1000, ..OK }, MoeCteRule::Blocks),
        (BwmmShardOnBlockCall { intermediate: 200, ..OK }, MoeCteRule::IntermediateAlign),
        (BwmmShardOnBlockCall { tokens: 1000, ..OK }, MoeCteRule::ReduceRows),
        (BwmmShardOnBlockCall { tokens: 1100, skip_token: false, ..OK }, MoeCteRule::ReduceRows),
        (BwmmShardOnBlockCall { strategy: BlockShardStrategy::HI_LO, ..OK }, MoeCteRule::Strategy),
        (BwmmShardOnBlockCall { scaling_mode: ExpertAffinityScaleMode::PRE_SCALE_DELAYED, ..OK }, MoeCteRule::ScalingMode),
        (BwmmShardOnBlockCall { activation: ActFnType::GELU, ..OK }, MoeCteRule::Activation),
        (BwmmShardOnBlockCall { quantized: true, ..OK }, MoeCteRule::Quantization),
        (BwmmShardOnBlockCall { down_activations: true, ..OK }, MoeCteRule::DownActivations),
        (BwmmShardOnBlockCall { one_bias: true, ..OK }, MoeCteRule::Bias),
    ];
    assert_refused_by(bwmm_shard_on_block_violation, cases);
    // The kernel's own checks, at trace time.
    let c = CONFIGS[4];
    let w = c.inputs();
    let [hid, aff, gu, dw, pos, b2e, _, _] = c.tensors(&w, Dtype::Bf16);
    let call = || bwmm_shard_on_block::Call::new(&hid, &aff, &gu, &dw, c.b as i64, &pos, &b2e).is_tensor_update_accumulating(false);
    let err = call().launch(&Launch::new()).unwrap_err().to_string();
    assert!(err.contains(MoeCteRule::Programs.message()), "{err}");
    let err = call().activation_function(ActFnType::GELU).launch(&Launch::new().lnc(2)).unwrap_err().to_string();
    assert!(err.contains(MoeCteRule::Activation.message()), "{err}");
    let err = call().block_sharding_strategy(BlockShardStrategy::HI_LO).launch(&Launch::new().lnc(2)).unwrap_err().to_string();
    assert!(err.contains(MoeCteRule::Strategy.message()), "{err}");
}

/// A `blockwise_mm_baseline_shard_intermediate` case: a configuration and
/// whether the affinity multiplies the intermediate
/// (`expert_affinity_multiply_on_I`).
#[derive(Clone, Copy, Debug)]
struct ShardICase {
    c: Config,
    on_i: bool,
}

const fn shard_i(c: Config) -> ShardICase {
    ShardICase { c, on_i: false }
}

/// CI-sized versions of the library's `SHARD_ON_INTERMEDIATE` cases (`H =
/// 3072, T = 1024, E = 8 / 64, B = 512, K = 4 / 8, I = 2048 / 3072`, skip
/// modes 0 and 1, bias, SiLU and Swish, `POST_SCALE`), with the options and
/// routings they leave out: half an intermediate tile per program (`I =
/// 192`), 512-position blocks, each scaling mode, the affinity on the
/// intermediate, top-1, every token on one expert, experts without tokens,
/// tokens dropped past capacity.
const SHARD_I_CASES: &[ShardICase] = &[
    shard_i(cfg(256, 512, 256, 4, 2, 256).padded()),
    shard_i(cfg(256, 512, 192, 4, 2, 256)),
    shard_i(cfg(256, 1024, 256, 4, 2, 512).padded().plain().scale(Scale::Pre)),
    shard_i(cfg(256, 512, 256, 4, 2, 256).scale(Scale::No)),
    ShardICase { c: cfg(256, 512, 256, 4, 2, 256).plain(), on_i: true },
    shard_i(cfg(256, 512, 256, 4, 1, 256).routed(Routing::AllOnZero)),
    shard_i(cfg(256, 512, 256, 8, 2, 256).routed(Routing::EvenOnly)),
    shard_i(cfg(256, 512, 256, 4, 2, 256).padded().routed(Routing::Capped)),
];

impl ShardOnICase for ShardICase {
    const KERNEL: &'static str = "blockwise_mm_baseline_shard_intermediate";

    fn config(&self) -> Config {
        self.c
    }

    /// The float64 mixture with the affinity where this kernel documents
    /// it: on both projections under `PRE_SCALE`, on the output under
    /// `POST_SCALE`, on the intermediate alone (no down bias) with
    /// `expert_affinity_multiply_on_I`.
    fn reference(&self, w: &Inputs) -> Vec<f64> {
        let plain = Scales { gate_up: 1.0, inter: 1.0, no_down_bias: false };
        self.c.mixture(w, |a| match (self.on_i, self.c.scale) {
            (true, _) => (1.0, Scales { inter: a, no_down_bias: true, ..plain }, 1.0),
            (false, Scale::Pre) => (1.0, Scales { gate_up: a, ..plain }, 1.0),
            (false, Scale::Post) => (1.0, plain, a),
            (false, Scale::No) => (1.0, plain, 1.0),
        })
    }

    /// The emulator's `[T', H]` output on two programs.
    fn run(&self, w: &Inputs, dtype: Dtype, precision: Precision) -> Vec<f32> {
        let c = &self.c;
        let [hid, aff, gu, dw, pos, b2e, gub, db] = c.tensors(w, dtype);
        let call = blockwise_mm_baseline_shard_intermediate::Call::new(&hid, &aff, &gu, &dw, c.b as i64, &pos, &b2e);
        let call = with_options!(call, c, dtype, &gub, &db, false).expert_affinity_multiply_on_I(self.on_i);
        let launch = Launch::new().lnc(2).precision(precision);
        call.launch(&launch).unwrap_or_else(|err| panic!("{}: {err}", self.name())).to_f32_vec()
    }

    /// The NumPy executor's arguments, by keyword.
    fn numpy_kwargs(&self, w: &Inputs, dtype: Dtype) -> Vec<(&'static str, Arg)> {
        let mut kwargs = self.c.numpy_kwargs(w, dtype);
        kwargs.push(("expert_affinity_multiply_on_I", Arg::Bool(self.on_i)));
        kwargs
    }
}

/// An intermediate-sharded kernel's case: its configuration, float64
/// mixture, emulator run and NumPy arguments.
trait ShardOnICase: std::fmt::Debug {
    /// The emitted kernel.
    const KERNEL: &'static str;
    fn config(&self) -> Config;
    fn reference(&self, w: &Inputs) -> Vec<f64>;
    fn run(&self, w: &Inputs, dtype: Dtype, precision: Precision) -> Vec<f32>;
    fn numpy_kwargs(&self, w: &Inputs, dtype: Dtype) -> Vec<(&'static str, Arg)>;
}

/// Every case of `cases` with `dtype` inputs and compute in `precision`
/// within `tol` of its float64 mixture of the rounded inputs.
fn cases_match_float64<C: ShardOnICase>(cases: &[C], dtype: Dtype, precision: Precision, tol: f64) {
    for case in cases {
        let c = case.config();
        let w = rounded(c.inputs(), dtype);
        let got = case.run(&w, dtype, precision);
        let rows = &got[..c.t * c.h];
        assert_close(&format!("{} {dtype:?}", case.name()), rows, &case.reference(&w), tol, tol);
    }
}

/// The emitted kernel of each of `cases` under NumPy equals the emulator
/// (the whole output), in both precision modes.
fn emitted_equals_emulator<C: ShardOnICase>(cases: &[C]) {
    for (case, m) in sweep(cases) {
        let (dtype, precision, mode) = m.run(Dtype::F32, Dtype::Bf16);
        let w = rounded(case.config().inputs(), dtype);
        let emu = case.run(&w, dtype, precision);
        let np = run_numpy_kwargs(emitted_package(), C::KERNEL, &[], &case.numpy_kwargs(&w, dtype), 2, mode);
        assert_numpy_close_to_emulator(&case.name(), mode, &np, &[emu]);
    }
}

/// fp32 inputs and compute in fp32 precision.
#[test]
fn shard_on_i_in_fp32_matches_float64() {
    cases_match_float64(SHARD_I_CASES, Dtype::F32, Precision::Fp32, 1e-4);
}

/// bfloat16 inputs and compute in hardware precision within the library's
/// tolerance (2e-2).
#[test]
fn shard_on_i_in_hardware_precision_matches_float64() {
    cases_match_float64(SHARD_I_CASES, Dtype::Bf16, Precision::Hardware, 2e-2);
}

/// The emitted intermediate-sharded kernel under NumPy equals the emulator
/// (the whole output): padding named and skipped, `PRE_SCALE` and the
/// affinity on the intermediate, both precision modes.
#[test]
fn emitted_shard_on_i_under_numpy_equals_emulator() {
    emitted_equals_emulator(&[SHARD_I_CASES[0], SHARD_I_CASES[2], SHARD_I_CASES[4]]);
}

/// `moe_cte` with `MoECTESpec(implementation=shard_on_i)` is
/// `blockwise_mm_baseline_shard_intermediate` with the library's
/// `ShardOnIConfig` defaults, in the emulator and emitted.
#[test]
fn moe_cte_dispatches_to_shard_on_i() {
    let case = SHARD_I_CASES[1];
    let c = case.c;
    let w = rounded(c.inputs(), Dtype::Bf16);
    let [hid, aff, gu, dw, pos, b2e, gub, db] = c.tensors(&w, Dtype::Bf16);
    let spec = MoECTESpec::new(MoECTEImplementation::shard_on_i);
    let launch = Launch::new().lnc(2).precision(Precision::Hardware);
    let got = moe_cte::Call::new(&hid, &aff, &gu, &dw, &pos, &b2e, c.b as i64, &spec)
        .gate_and_up_proj_bias(&gub)
        .down_proj_bias(&db)
        .activation_function(ActFnType::Swish)
        .skip_dma(Some(SkipMode { skip_token: true, skip_weight: false }))
        .gate_clamp_upper_limit(CLAMPS[0])
        .up_clamp_upper_limit(CLAMPS[1])
        .up_clamp_lower_limit(CLAMPS[2])
        .launch(&launch)
        .unwrap()
        .0[0]
        .to_f32_vec();
    assert_eq!(got, case.run(&w, Dtype::Bf16, Precision::Hardware), "moe_cte differs from the intermediate-sharded kernel");
    let mut kwargs = c.numpy_kwargs(&w, Dtype::Bf16);
    kwargs.push(("spec", Arg::Object("MoECTESpec", vec![("implementation", Arg::Member("MoECTEImplementation", "shard_on_i"))])));
    let np = run_numpy_kwargs(emitted_package(), "moe_cte", &[], &kwargs, 2, "hardware");
    assert_close("moe_cte shard_on_i emitted", &np[0], &got.iter().map(|&v| f64::from(v)).collect::<Vec<_>>(), 1e-6, 2f64.powi(-7));
    let mx = MoECTESpec::new(MoECTEImplementation::shard_on_i_mx_hybrid);
    let err = moe_cte::Call::new(&hid, &aff, &gu, &dw, &pos, &b2e, c.b as i64, &mx).launch(&launch).unwrap_err().to_string();
    assert!(err.contains(MoeCteRule::Implementation.message()), "{err}");
}

/// An intermediate-sharded call the rules accept (the library's `H = 3072,
/// E = 8, B = 512, I = 2048`, the kernel's defaults otherwise).
const OK_I: BwmmShardOnICall =
    nkilib::bwmm_shard_on_i_config!(hidden = 3072, intermediate = 2048, experts = 8, block_size = 512, positions = 16 * 512);

/// Each intermediate-sharded rule refuses what it names, and the kernel
/// refuses the same at trace time.
#[test]
fn shard_on_i_rules_refuse_what_they_name() {
    assert_eq!(bwmm_shard_on_i_violation(OK_I), None);
    assert_eq!(bwmm_shard_on_i_violation(BwmmShardOnICall { block_size: 1024, positions: 8 * 1024, ..OK_I }), None);
    // The hybrid form may run every block statically.
    assert_eq!(bwmm_shard_on_i_violation(BwmmShardOnICall { static_blocks: 16, ..OK_I }), None);
    let cases = [
        (BwmmShardOnICall { programs: 1, ..OK_I }, ShardOnIRule::Programs),
        (BwmmShardOnICall { block_size: 384, ..OK_I }, ShardOnIRule::BlockSize),
        (BwmmShardOnICall { block_size: 768, positions: 16 * 768, ..OK_I }, ShardOnIRule::BlockSize),
        (BwmmShardOnICall { hidden: 256, ..OK_I }, ShardOnIRule::Hidden),
        (BwmmShardOnICall { hidden: 8704, ..OK_I }, ShardOnIRule::Hidden),
        (BwmmShardOnICall { positions: 1000, ..OK_I }, ShardOnIRule::Blocks),
        (BwmmShardOnICall { intermediate: 200, ..OK_I }, ShardOnIRule::IntermediateAlign),
        (BwmmShardOnICall { skip_weight: true, ..OK_I }, ShardOnIRule::SkipWeight),
        (BwmmShardOnICall { activation: ActFnType::GELU, ..OK_I }, ShardOnIRule::Activation),
        (BwmmShardOnICall { quantized: true, ..OK_I }, ShardOnIRule::Quantization),
        (BwmmShardOnICall { checkpoint_activation: true, ..OK_I }, ShardOnIRule::CheckpointActivation),
        (BwmmShardOnICall { one_bias: true, ..OK_I }, ShardOnIRule::Bias),
        (BwmmShardOnICall { down_bias_on_i: true, ..OK_I }, ShardOnIRule::DownBiasOnI),
        (BwmmShardOnICall { activations: true, ..OK_I }, ShardOnIRule::Activations),
        (BwmmShardOnICall { static_blocks: -1, ..OK_I }, ShardOnIRule::StaticBlocks),
        (BwmmShardOnICall { static_blocks: 17, ..OK_I }, ShardOnIRule::StaticBlocks),
    ];
    assert_refused_by(bwmm_shard_on_i_violation, cases);
    let c = SHARD_I_CASES[0].c;
    let w = c.inputs();
    let [hid, aff, gu, dw, pos, b2e, gub, db] = c.tensors(&w, Dtype::Bf16);
    let call = || blockwise_mm_baseline_shard_intermediate::Call::new(&hid, &aff, &gu, &dw, c.b as i64, &pos, &b2e);
    let err = call().launch(&Launch::new()).unwrap_err().to_string();
    assert!(err.contains(ShardOnIRule::Programs.message()), "{err}");
    let lnc2 = Launch::new().lnc(2);
    let err = call().checkpoint_activation(true).launch(&lnc2).unwrap_err().to_string();
    assert!(err.contains(ShardOnIRule::CheckpointActivation.message()), "{err}");
    let skip = SkipMode { skip_token: false, skip_weight: true };
    let err = call().skip_dma(Some(skip)).launch(&lnc2).unwrap_err().to_string();
    assert!(err.contains(ShardOnIRule::SkipWeight.message()), "{err}");
    let on_i = call().gate_and_up_proj_bias(&gub).down_proj_bias(&db).expert_affinity_multiply_on_I(true);
    let err = on_i.launch(&lnc2).unwrap_err().to_string();
    assert!(err.contains(ShardOnIRule::DownBiasOnI.message()), "{err}");
}

/// How many blocks the hybrid form's `conditions` mark as non-padded.
#[derive(Clone, Copy, Debug)]
enum Active {
    /// The blocks holding a token (the library's tests).
    Real,
    /// The first `k` blocks, a cut the float64 mixture follows.
    First(usize),
}

/// A `blockwise_mm_baseline_shard_intermediate_hybrid` case: a
/// configuration, `num_static_block` (`None`: `N - E`) and the ones of
/// `conditions`.
#[derive(Clone, Copy, Debug)]
struct HybridCase {
    c: Config,
    num_static: Option<usize>,
    active: Active,
}

const fn hybrid(c: Config) -> HybridCase {
    HybridCase { c, num_static: None, active: Active::Real }
}

/// CI-sized versions of the library's `SHARD_ON_INTERMEDIATE_HW` cases
/// (the `SHARD_ON_INTERMEDIATE` sizes, `POST_SCALE`): the static count
/// defaulted, given, past the non-padded blocks and zero (the whole loop on
/// the device), `conditions` cutting real blocks, and the skewed routings.
const HYBRID_CASES: &[HybridCase] = &[
    hybrid(cfg(256, 512, 256, 4, 2, 256).padded()),
    HybridCase { num_static: Some(0), ..hybrid(cfg(256, 512, 192, 4, 2, 256)) },
    HybridCase { num_static: Some(1), active: Active::First(3), ..hybrid(cfg(256, 1024, 256, 4, 2, 512).padded().plain()) },
    HybridCase { num_static: Some(6), ..hybrid(cfg(256, 512, 256, 4, 2, 256).scale(Scale::Pre)) },
    hybrid(cfg(256, 512, 256, 4, 1, 256).routed(Routing::AllOnZero)),
    hybrid(cfg(256, 512, 256, 8, 2, 256).routed(Routing::EvenOnly)),
    hybrid(cfg(256, 512, 256, 4, 2, 256).padded().routed(Routing::Capped)),
];

impl HybridCase {
    /// `conditions` `[N + 1]`: ones for the active blocks, then zeros.
    fn conditions(&self, w: &Inputs) -> Vec<i64> {
        let (b, n) = (self.c.b, w.block_expert.len());
        let active = match self.active {
            Active::Real => {
                (0..n).filter(|&blk| w.positions[blk * b..(blk + 1) * b].iter().any(|&t| t >= 0 && (t as usize) < self.c.t)).count()
            }
            Active::First(k) => k,
        };
        (0..=n).map(|blk| i64::from(blk < active)).collect()
    }

    /// Blocks the kernel runs: the static ones, then the dynamic loop up to
    /// the count of ones.
    fn blocks_run(&self, w: &Inputs) -> usize {
        let n_static = self.num_static.unwrap_or(w.block_expert.len() - self.c.e);
        let active = self.conditions(w).iter().sum::<i64>() as usize;
        n_static.max(active)
    }
}

impl ShardOnICase for HybridCase {
    const KERNEL: &'static str = "blockwise_mm_baseline_shard_intermediate_hybrid";

    fn config(&self) -> Config {
        self.c
    }

    /// The float64 mixture of the blocks the kernel runs, the affinity as
    /// in the intermediate-sharded kernel.
    fn reference(&self, w: &Inputs) -> Vec<f64> {
        let (run, b) = (self.blocks_run(w), self.c.b);
        let first = Inputs { positions: w.positions[..run * b].to_vec(), block_expert: w.block_expert[..run].to_vec(), ..w.clone() };
        shard_i(self.c).reference(&first)
    }

    /// The emulator's `[T', H]` output on two programs.
    fn run(&self, w: &Inputs, dtype: Dtype, precision: Precision) -> Vec<f32> {
        let c = &self.c;
        let [hid, aff, gu, dw, pos, b2e, gub, db] = c.tensors(w, dtype);
        let cond = self.conditions(w);
        let cond = Tensor::from_i64(&[cond.len()], &cond, Dtype::I32).unwrap();
        let call = blockwise_mm_baseline_shard_intermediate_hybrid::Call::new(&cond, &hid, &aff, &gu, &dw, c.b as i64, &pos, &b2e);
        let mut call = with_options!(call, c, dtype, &gub, &db, false);
        if let Some(k) = self.num_static {
            call = call.num_static_block(k as i64);
        }
        let launch = Launch::new().lnc(2).precision(precision);
        call.launch(&launch).unwrap_or_else(|err| panic!("{}: {err}", self.name())).to_f32_vec()
    }

    /// The NumPy executor's arguments, by keyword.
    fn numpy_kwargs(&self, w: &Inputs, dtype: Dtype) -> Vec<(&'static str, Arg)> {
        let cond: Vec<f64> = self.conditions(w).iter().map(|&v| v as f64).collect();
        let mut kwargs = vec![("conditions", Arg::Tensor(vec![cond.len()], cond, Dtype::I32))];
        kwargs.extend(self.c.numpy_kwargs(w, dtype));
        if let Some(k) = self.num_static {
            kwargs.push(("num_static_block", Arg::Int(k as i64)));
        }
        kwargs
    }
}

/// fp32 inputs and compute in fp32 precision.
#[test]
fn shard_on_i_hybrid_in_fp32_matches_float64() {
    cases_match_float64(HYBRID_CASES, Dtype::F32, Precision::Fp32, 1e-4);
}

/// bfloat16 inputs and compute in hardware precision within the library's
/// tolerance (2e-2).
#[test]
fn shard_on_i_hybrid_in_hardware_precision_matches_float64() {
    cases_match_float64(HYBRID_CASES, Dtype::Bf16, Precision::Hardware, 2e-2);
}

/// The emitted hybrid kernel under NumPy equals the emulator (the whole
/// output): the static count defaulted, and cut by `conditions`, both
/// precision modes.
#[test]
fn emitted_shard_on_i_hybrid_under_numpy_equals_emulator() {
    emitted_equals_emulator(&[HYBRID_CASES[0], HYBRID_CASES[2]]);
}

/// `moe_cte` with `MoECTESpec(implementation=shard_on_i_hybrid)` and
/// `conditions` is the hybrid kernel with the static count `N - E`, in the
/// emulator and emitted; without `conditions` it is refused.
#[test]
fn moe_cte_dispatches_to_shard_on_i_hybrid() {
    let case = HYBRID_CASES[0];
    let c = case.c;
    let w = rounded(c.inputs(), Dtype::Bf16);
    let [hid, aff, gu, dw, pos, b2e, gub, db] = c.tensors(&w, Dtype::Bf16);
    let cond = case.conditions(&w);
    let cond = Tensor::from_i64(&[cond.len()], &cond, Dtype::I32).unwrap();
    let spec = MoECTESpec::new(MoECTEImplementation::shard_on_i_hybrid);
    let launch = Launch::new().lnc(2).precision(Precision::Hardware);
    let call = || {
        moe_cte::Call::new(&hid, &aff, &gu, &dw, &pos, &b2e, c.b as i64, &spec)
            .gate_and_up_proj_bias(&gub)
            .down_proj_bias(&db)
            .activation_function(ActFnType::Swish)
            .is_tensor_update_accumulating(c.accumulating())
            .gate_clamp_upper_limit(CLAMPS[0])
            .up_clamp_upper_limit(CLAMPS[1])
            .up_clamp_lower_limit(CLAMPS[2])
    };
    let got = call().conditions(&cond).launch(&launch).unwrap().0[0].to_f32_vec();
    assert_eq!(got, case.run(&w, Dtype::Bf16, Precision::Hardware), "moe_cte differs from the hybrid kernel");
    let mut kwargs = case.numpy_kwargs(&w, Dtype::Bf16);
    kwargs.push(("spec", Arg::Object("MoECTESpec", vec![("implementation", Arg::Member("MoECTEImplementation", "shard_on_i_hybrid"))])));
    let np = run_numpy_kwargs(emitted_package(), "moe_cte", &[], &kwargs, 2, "hardware");
    assert_close("moe_cte shard_on_i_hybrid emitted", &np[0], &got.iter().map(|&v| f64::from(v)).collect::<Vec<_>>(), 1e-6, 2f64.powi(-7));
    let err = call().launch(&launch).unwrap_err().to_string();
    assert!(err.contains("shard_on_i_hybrid needs conditions"), "{err}");
}

/// `MoECTESpec(shard_on_I=ShardOnIConfig(num_static_block=N))` reaches the
/// hybrid kernel: with `conditions` marking one block, the static loop
/// still runs all `N` blocks, where the default (`N - E`) runs one; each
/// equals the kernel given the same count and its float64 mixture, in the
/// emulator and (the nested spec) emitted.
#[test]
fn moe_cte_passes_the_nested_shard_on_i_config() {
    let default = HybridCase { active: Active::First(1), ..hybrid(cfg(256, 512, 256, 4, 2, 256)) };
    let c = default.c;
    let w = rounded(c.inputs(), Dtype::Bf16);
    let n = w.block_expert.len();
    let given = HybridCase { num_static: Some(n), ..default };
    assert_ne!(given.blocks_run(&w), default.blocks_run(&w), "the option must change the blocks run");
    cases_match_float64(&[given, default], Dtype::Bf16, Precision::Hardware, 2e-2);
    let [hid, aff, gu, dw, pos, b2e, gub, db] = c.tensors(&w, Dtype::Bf16);
    let cond = default.conditions(&w);
    let cond = Tensor::from_i64(&[cond.len()], &cond, Dtype::I32).unwrap();
    let options = ShardOnIConfig { num_static_block: Some(n as i64), ..ShardOnIConfig::default() };
    let nested = MoECTESpec { shard_on_I: Some(options), ..MoECTESpec::new(MoECTEImplementation::shard_on_i_hybrid) };
    let launch = Launch::new().lnc(2).precision(Precision::Hardware);
    let run = |spec: &MoECTESpec| {
        let call = with_options!(moe_cte::Call::new(&hid, &aff, &gu, &dw, &pos, &b2e, c.b as i64, spec), c, Dtype::Bf16, &gub, &db, false);
        call.conditions(&cond).launch(&launch).unwrap().0[0].to_f32_vec()
    };
    let got = run(&nested);
    assert_eq!(got, given.run(&w, Dtype::Bf16, Precision::Hardware), "moe_cte differs from the hybrid kernel given num_static_block");
    let by_default = run(&MoECTESpec::new(MoECTEImplementation::shard_on_i_hybrid));
    assert_eq!(by_default, default.run(&w, Dtype::Bf16, Precision::Hardware), "moe_cte differs from the hybrid kernel's default");
    assert_ne!(got, by_default, "num_static_block changed nothing");
    let mut kwargs = default.numpy_kwargs(&w, Dtype::Bf16);
    let shard_on_i = Arg::Object("ShardOnIConfig", vec![("num_static_block", Arg::Int(n as i64))]);
    let implementation = ("implementation", Arg::Member("MoECTEImplementation", "shard_on_i_hybrid"));
    kwargs.push(("spec", Arg::Object("MoECTESpec", vec![implementation, ("shard_on_I", shard_on_i)])));
    let np = run_numpy_kwargs(emitted_package(), "moe_cte", &[], &kwargs, 2, "hardware");
    assert_numpy_close_to_emulator("moe_cte nested ShardOnIConfig emitted", "hardware", &np, &[got]);
}

/// The hybrid form refuses a static count outside `[0, N]` and activation
/// buffers at trace time, with its rules' words.
#[test]
fn shard_on_i_hybrid_refuses_what_its_rules_name() {
    let case = HYBRID_CASES[0];
    let c = case.c;
    let w = c.inputs();
    let [hid, aff, gu, dw, pos, b2e, _, _] = c.tensors(&w, Dtype::Bf16);
    let cond = case.conditions(&w);
    let n = cond.len() as i64 - 1;
    let cond = Tensor::from_i64(&[cond.len()], &cond, Dtype::I32).unwrap();
    let call = || blockwise_mm_baseline_shard_intermediate_hybrid::Call::new(&cond, &hid, &aff, &gu, &dw, c.b as i64, &pos, &b2e);
    let lnc2 = Launch::new().lnc(2);
    let err = call().num_static_block(n + 1).launch(&lnc2).unwrap_err().to_string();
    assert!(err.contains(ShardOnIRule::StaticBlocks.message()), "{err}");
    let err = call().down_activations(&hid).launch(&lnc2).unwrap_err().to_string();
    assert!(err.contains(ShardOnIRule::Activations.message()), "{err}");
}

/// A `blockwise_mm_shard_intermediate_dropping` case: an
/// intermediate-sharded case (its routing gives each token its experts;
/// each expert keeps the first `B` of its tokens, the rest dropped) run
/// through the dropping kernel.
#[derive(Clone, Copy, Debug)]
struct DroppingCase(ShardICase);

const fn dropping(c: Config) -> DroppingCase {
    DroppingCase(shard_i(c))
}

/// CI-sized versions of the library's `SHARD_ON_INTERMEDIATE_DROPPING`
/// cases (`H = 1536 / 2048 / 4096, T = 8192 / 2048 / 4096, E = 2, B = 4096
/// / 1024 / 2048, K = 2 / 2 / 8, I = 6144 / 8192 / 1536`, padding named,
/// SiLU, `POST_SCALE`): full blocks of 1024 and of 2048 (two block tiles),
/// with the options and routings they leave out: padding skipped, bias,
/// clamps, Swish, half an intermediate tile per program, the affinity on
/// the intermediate, the other scaling modes (read as `POST_SCALE`),
/// top-1 with tokens dropped past an expert's capacity, every token on one
/// expert (half of them dropped, the other expert empty), experts without
/// tokens.
const DROPPING_CASES: &[DroppingCase] = &[
    dropping(cfg(1024, 512, 256, 2, 2, 1024).padded().plain()),
    dropping(cfg(2048, 512, 192, 2, 2, 2048).padded()),
    dropping(cfg(2048, 512, 256, 2, 1, 1024)),
    DroppingCase(ShardICase { c: cfg(1024, 512, 256, 2, 2, 1024).plain(), on_i: true }),
    dropping(cfg(1024, 512, 256, 2, 2, 1024).padded().scale(Scale::Pre)),
    dropping(cfg(1024, 512, 256, 2, 2, 1024).scale(Scale::No)),
    dropping(cfg(2048, 512, 256, 2, 1, 1024).padded().routed(Routing::AllOnZero)),
    dropping(cfg(1024, 512, 256, 4, 1, 1024).routed(Routing::EvenOnly)),
];

impl DroppingCase {
    /// The inputs: one block of `B` positions per expert, its first `B`
    /// tokens (in token order), then padding.
    fn inputs(&self) -> Inputs {
        let c = &self.0.c;
        let w = c.inputs();
        let routes = c.routes(seed_of(&c.name()));
        let pad = if c.skip_token { -1 } else { c.t as i64 };
        let mut positions = vec![pad; c.e * c.b];
        for (ex, block) in positions.chunks_mut(c.b).enumerate() {
            let tokens = (0..c.t).filter(|&tok| routes[tok].contains(&ex)).take(c.b);
            for (slot, tok) in block.iter_mut().zip(tokens) {
                *slot = tok as i64;
            }
        }
        Inputs { positions, block_expert: (0..c.e as i64).collect(), ..w }
    }

    /// The float64 reference: the mixture over the kept tokens (the
    /// affinity on the output, or on the intermediate without the down
    /// bias), the clamped projections `[E, 2, I, B]` and the down
    /// projections `[E, B, H]` of every position (a padding position's row
    /// is zero).
    fn reference(&self, w: &Inputs) -> [Vec<f64>; 3] {
        let c = Config { scale: Scale::Post, ..self.0.c };
        let out = ShardICase { c, ..self.0 }.reference(w);
        let (h, i, b) = (c.h, c.i, c.b);
        let (mut gate_up, mut down) = (vec![0.0; c.e * 2 * i * b], vec![0.0; c.e * b * h]);
        let plain = Scales { gate_up: 1.0, inter: 1.0, no_down_bias: true };
        for ex in 0..c.e {
            // Every position of the expert's block, a padding one as a zero row.
            let xs: Vec<f64> = (0..b)
                .flat_map(|p| {
                    let tok = usize::try_from(w.positions[ex * b + p]).ok().filter(|&tok| tok < c.t);
                    (0..h).map(move |col| tok.map_or(0.0, |tok| w.hidden[tok * h + col]))
                })
                .collect();
            for (p, row) in c.projections(w, ex, &xs).chunks(2 * i).enumerate() {
                for (k, &v) in row.iter().enumerate() {
                    gate_up[((ex * 2 + k / i) * i + k % i) * b + p] = v;
                }
            }
            down[ex * b * h..(ex + 1) * b * h].copy_from_slice(&c.expert(w, ex, &xs, &vec![plain; b]));
        }
        [out, gate_up, down]
    }

    /// The emulator's outputs on two programs: `[T', H]`, `[E, 2, I, B]`
    /// and, unless the affinity is on the intermediate, `[E, B, H]`.
    fn run(&self, w: &Inputs, dtype: Dtype, precision: Precision) -> Vec<Vec<f32>> {
        let c = &self.0.c;
        let [hid, aff, gu, dw, pos, b2e, gub, db] = c.tensors(w, dtype);
        let call = blockwise_mm_shard_intermediate_dropping::Call::new(&hid, &aff, &gu, &dw, c.b as i64, &pos, &b2e);
        let call = with_options!(call, c, dtype, &gub, &db, false).expert_affinity_multiply_on_I(self.0.on_i);
        let launch = Launch::new().lnc(2).precision(precision);
        let outs = call.launch(&launch).unwrap_or_else(|err| panic!("{}: {err}", self.name()));
        outs.0.iter().map(Tensor::to_f32_vec).collect()
    }
}

/// Every dropping case with `dtype` inputs and compute in `precision`
/// within `tol` of its float64 reference of the rounded inputs: the token
/// rows of the output and both activations.
fn dropping_cases_match_float64(dtype: Dtype, precision: Precision, tol: f64) {
    for case in DROPPING_CASES {
        let c = case.0.c;
        let w = rounded(case.inputs(), dtype);
        let got = case.run(&w, dtype, precision);
        let want = case.reference(&w);
        assert_eq!(got.len(), if case.0.on_i { 2 } else { 3 }, "{}: outputs", case.name());
        assert_close(&format!("{} {dtype:?} output", case.name()), &got[0][..c.t * c.h], &want[0], tol, tol);
        for (k, (g, r)) in got.iter().zip(&want).enumerate().skip(1) {
            assert_close(&format!("{} {dtype:?} activations {k}", case.name()), g, r, tol, tol);
        }
    }
}

/// fp32 inputs and compute in fp32 precision, then bfloat16 inputs and
/// compute in hardware precision within the library's tolerance (2e-2).
#[test]
fn shard_on_i_dropping_matches_float64_in_both_precisions() {
    for (dtype, precision, tol) in [(Dtype::F32, Precision::Fp32, 1e-4), (Dtype::Bf16, Precision::Hardware, 2e-2)] {
        dropping_cases_match_float64(dtype, precision, tol);
    }
}

/// The emitted dropping kernel under NumPy equals the emulator (every
/// output, the padding row included): padding named with two block tiles,
/// and the affinity on the intermediate, both precision modes.
#[test]
fn emitted_shard_on_i_dropping_under_numpy_equals_emulator() {
    for (case, m) in sweep([DROPPING_CASES[1], DROPPING_CASES[3]]) {
        let (dtype, precision, mode) = m.run(Dtype::F32, Dtype::Bf16);
        let w = rounded(case.inputs(), dtype);
        let emu = case.run(&w, dtype, precision);
        let np =
            run_numpy_kwargs(emitted_package(), "blockwise_mm_shard_intermediate_dropping", &[], &case.0.numpy_kwargs(&w, dtype), 2, mode);
        assert_numpy_close_to_emulator(&case.name(), mode, &np, &emu);
    }
}

/// `moe_cte` with `MoECTESpec(implementation=shard_on_i_dropping)` is the
/// dropping kernel with the library's `ShardOnIConfig` defaults (the
/// affinity on the output), its three outputs, in the emulator and emitted.
#[test]
fn moe_cte_dispatches_to_shard_on_i_dropping() {
    let case = DROPPING_CASES[2];
    let c = case.0.c;
    let w = rounded(case.inputs(), Dtype::Bf16);
    let [hid, aff, gu, dw, pos, b2e, gub, db] = c.tensors(&w, Dtype::Bf16);
    let spec = MoECTESpec::new(MoECTEImplementation::shard_on_i_dropping);
    let launch = Launch::new().lnc(2).precision(Precision::Hardware);
    // The options the dropping kernel's run gives it.
    let call = with_options!(moe_cte::Call::new(&hid, &aff, &gu, &dw, &pos, &b2e, c.b as i64, &spec), c, Dtype::Bf16, &gub, &db, false);
    let got: Vec<Vec<f32>> = call.launch(&launch).unwrap().0.iter().map(Tensor::to_f32_vec).collect();
    assert_eq!(got, case.run(&w, Dtype::Bf16, Precision::Hardware), "moe_cte differs from the dropping kernel");
    let mut kwargs = c.numpy_kwargs(&w, Dtype::Bf16);
    let implementation = ("implementation", Arg::Member("MoECTEImplementation", "shard_on_i_dropping"));
    kwargs.push(("spec", Arg::Object("MoECTESpec", vec![implementation])));
    let np = run_numpy_kwargs(emitted_package(), "moe_cte", &[], &kwargs, 2, "hardware");
    assert_numpy_close_to_emulator("moe_cte shard_on_i_dropping emitted", "hardware", &np, &got);
}

/// A dropping call the rules accept (the library's `H = 2048, E = 2, B =
/// 1024, I = 8192`).
const OK_DROP: BwmmShardOnICall =
    nkilib::bwmm_shard_on_i_dropping_config!(hidden = 2048, intermediate = 8192, experts = 2, block_size = 1024, positions = 2 * 1024);

/// Each dropping rule refuses what it names (the intermediate-sharded
/// kernel's through it), and the kernel refuses the same at trace time.
#[test]
fn shard_on_i_dropping_rules_refuse_what_they_name() {
    assert_eq!(bwmm_shard_on_i_dropping_violation(OK_DROP), None);
    assert_eq!(bwmm_shard_on_i_dropping_violation(BwmmShardOnICall { block_size: 4096, positions: 2 * 4096, ..OK_DROP }), None);
    let cases = [
        (BwmmShardOnICall { programs: 1, ..OK_DROP }, DroppingRule::ShardOnI(ShardOnIRule::Programs)),
        (BwmmShardOnICall { hidden: 256, ..OK_DROP }, DroppingRule::ShardOnI(ShardOnIRule::Hidden)),
        (BwmmShardOnICall { skip_weight: true, ..OK_DROP }, DroppingRule::ShardOnI(ShardOnIRule::SkipWeight)),
        (BwmmShardOnICall { activation: ActFnType::GELU, ..OK_DROP }, DroppingRule::ShardOnI(ShardOnIRule::Activation)),
        (BwmmShardOnICall { quantized: true, ..OK_DROP }, DroppingRule::ShardOnI(ShardOnIRule::Quantization)),
        (BwmmShardOnICall { one_bias: true, ..OK_DROP }, DroppingRule::ShardOnI(ShardOnIRule::Bias)),
        (BwmmShardOnICall { down_bias_on_i: true, ..OK_DROP }, DroppingRule::ShardOnI(ShardOnIRule::DownBiasOnI)),
        (BwmmShardOnICall { block_size: 512, positions: 2 * 512, ..OK_DROP }, DroppingRule::BlockTile),
        (BwmmShardOnICall { block_size: 1536, positions: 2 * 1536, ..OK_DROP }, DroppingRule::BlockTile),
        (BwmmShardOnICall { positions: 4 * 1024, ..OK_DROP }, DroppingRule::ExpertBlocks),
    ];
    assert_refused_by(bwmm_shard_on_i_dropping_violation, cases);
    let case = DROPPING_CASES[0];
    let c = case.0.c;
    let w = case.inputs();
    let [hid, aff, gu, dw, pos, b2e, _, _] = c.tensors(&w, Dtype::Bf16);
    let lnc2 = Launch::new().lnc(2);
    let call = blockwise_mm_shard_intermediate_dropping::Call::new(&hid, &aff, &gu, &dw, 1024, &pos, &b2e);
    let err = call.launch(&Launch::new()).unwrap_err().to_string();
    assert!(err.contains("blockwise_mm_shard_intermediate_dropping: runs on exactly 2 programs"), "{err}");
    // Blocks of 512: four blocks of the two experts' positions.
    let b2e4 = Tensor::from_i64(&[4, 1], &[0, 1, 2, 3], Dtype::I32).unwrap();
    let err =
        blockwise_mm_shard_intermediate_dropping::Call::new(&hid, &aff, &gu, &dw, 512, &pos, &b2e4).launch(&lnc2).unwrap_err().to_string();
    assert!(err.contains(DroppingRule::BlockTile.message()), "{err}");
    // Two experts' positions cut into blocks of 1024 and read as four experts' blocks.
    let gu4 = tensor(&[4, c.h, 2, c.i], &[w.gate_up.clone(), w.gate_up.clone()].concat(), Dtype::Bf16);
    let dw4 = tensor(&[4, c.i, c.h], &[w.down.clone(), w.down.clone()].concat(), Dtype::Bf16);
    let aff4 = tensor(&[c.rows() * 4, 1], &vec![0.0; c.rows() * 4], Dtype::Bf16);
    let call = blockwise_mm_shard_intermediate_dropping::Call::new(&hid, &aff4, &gu4, &dw4, 1024, &pos, &b2e);
    let err = call.launch(&lnc2).unwrap_err().to_string();
    assert!(err.contains(DroppingRule::ExpertBlocks.message()), "{err}");
}
