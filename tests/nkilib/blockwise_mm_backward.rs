//! The library's experimental `blockwise_mm_bwd` against float64 gradients
//! of the blockwise mixture of experts written from its math: for every
//! block position's token `x` through the block's expert `e` with affinity
//! `a`, the saved projections `g = clamp(x W_gate + b)`, `u = clamp(x W_up +
//! b)` and output `y = (act(g)·u) W_down + b_down`, the chain rule of
//! `out = a·y` — `∂a = dy·y`, `dz = a·dy`, `∂W_down += (act(g)·u) ⊗ dz`,
//! `di = W_down dz`, `dg = di·u·act'(g)` and `du = di·act(g)` (zero where the
//! forward clamped), `∂W_gu += x ⊗ [dg, du]`, `∂x += W_gate dg + W_up du`,
//! and the bias sums. The checkpoints come from a float64 forward of the
//! same routing. CI-sized versions of the library's `test_bwmm_bwd.py`
//! shapes with skewed routings (every token on one expert, experts without
//! tokens), in both precision modes; then the emitted source under NumPy
//! against the emulator, and the rules.

use crate::common::attention::run_numpy_kwargs;
use crate::common::sweep::sweep;
use crate::common::{Arg, CaseName, as_dtype, assert_close, assert_refused_by, emitted_package, seed_of, tensor, uniform};
use crate::mlp::activation;
use crate::support::blockwise_case;
use nki::{Dtype, Launch, Precision, Tensor};
use nkilib::experimental::moe::blockwise_mm_backward::{
    ActFnType, AffinityOption, BwmmBwdCall, BwmmBwdRule, ClampLimits, KernelTypeOption, ShardOption, SkipMode, blockwise_mm_bwd,
    bwmm_bwd_violation,
};

/// Which experts the tokens pick.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Pick {
    /// `k` distinct random experts per token.
    Random,
    /// Every token on expert 0 (`k = 1`).
    One,
    /// Only the even experts.
    Even,
}

blockwise_case! {
    /// One configuration.
    struct Case {
        bias: bool,
        clamp: bool,
        act: ActFnType,
        pick: Pick,
        programs: usize,
    }
}

const fn case(t: usize, h: usize, i: usize, e: usize, k: usize, b: usize) -> Case {
    Case { t, h, i, e, k, b, skip_token: false, bias: false, clamp: false, act: ActFnType::SiLU, pick: Pick::Random, programs: 2 }
}

impl Case {
    const fn swish_bias_clamp(mut self) -> Self {
        self.act = ActFnType::Swish;
        self.bias = true;
        self.clamp = true;
        self
    }
    const fn skip(mut self) -> Self {
        self.skip_token = true;
        self
    }
    const fn pick(mut self, p: Pick) -> Self {
        self.pick = p;
        self
    }
    const fn lnc1(mut self) -> Self {
        self.programs = 1;
        self
    }
}

/// CI-sized versions of the library's cases (`H` 2880..6144, `I` 128..2880,
/// `B` 256..1024, top-1..4, SiLU; Swish with bias, clamps and skip 1): a
/// partial last hidden tile (`H = 320`), a partial intermediate tile
/// (`I = 192`), one program, and the skewed routings.
const CASES: &[Case] = &[
    case(256, 256, 128, 4, 2, 128),
    case(256, 320, 192, 4, 2, 256).swish_bias_clamp().skip(),
    case(256, 256, 128, 4, 1, 128).pick(Pick::One).lnc1(),
    case(512, 256, 128, 2, 2, 512).swish_bias_clamp(),
    case(256, 256, 192, 6, 1, 256).pick(Pick::Even).skip(),
];

/// The clamps (gate upper, gate lower, up upper, up lower), exact in every
/// dtype so a clamped checkpoint equals its limit.
const CLAMPS: [f64; 4] = [0.5, -0.5, 0.75, -0.75];

/// A case's inputs, row-major, rounded to the input dtype.
struct Inputs {
    /// `[T', H]`, `T' = T + 1` (a zero padding row) unless padding is skipped.
    x: Vec<f64>,
    /// `[T'·E]`.
    aff: Vec<f64>,
    /// `[E, H, 2, I]`, `[E, I, H]`.
    w_gu: Vec<f64>,
    w_down: Vec<f64>,
    /// `[N, 2, I, B]`, `[N, B, H]`: the forward's saved projections.
    ck_gu: Vec<f64>,
    ck_down: Vec<f64>,
    /// `[T', H]`.
    dy: Vec<f64>,
    /// `[N·B]`, `[N]`.
    pos: Vec<i64>,
    experts: Vec<i64>,
}

/// The float64 gradients: `dx`, `daff`, `dW_gu`, `dW_down`, `db_gu`, `db_down`.
type Grads = [Vec<f64>; 6];

impl Case {
    /// Each expert's tokens, in token order.
    fn expert_tokens(&self, seed: u64) -> Vec<Vec<i64>> {
        let mut lists = vec![Vec::new(); self.e];
        let keys = uniform(self.t * self.e, seed, 0.0, 1.0);
        for tok in 0..self.t {
            let mut cand: Vec<usize> = (0..self.e).filter(|x| self.pick != Pick::Even || x % 2 == 0).collect();
            cand.sort_by(|p, q| keys[tok * self.e + p].total_cmp(&keys[tok * self.e + q]));
            let chosen = if self.pick == Pick::One { vec![0] } else { cand[..self.k].to_vec() };
            for x in chosen {
                lists[x].push(tok as i64);
            }
        }
        lists
    }

    /// Dropless blocks: `ceil(count / B)` per expert in expert order, then
    /// padding blocks on the last expert up to the library's
    /// `ceil((T·K - (E - 1)) / B) + E - 1`.
    fn layout(&self, lists: &[Vec<i64>]) -> (Vec<i64>, Vec<i64>) {
        let pad = if self.skip_token { -1 } else { self.t as i64 };
        let (mut pos, mut experts) = (Vec::new(), Vec::new());
        for (x, list) in lists.iter().enumerate() {
            for chunk in list.chunks(self.b) {
                experts.push(x as i64);
                pos.extend(chunk.iter().copied().chain(std::iter::repeat(pad)).take(self.b));
            }
        }
        let k = if self.pick == Pick::One { 1 } else { self.k };
        let want = (self.t * k - (self.e - 1)).div_ceil(self.b) + self.e - 1;
        while experts.len() < want {
            experts.push(self.e as i64 - 1);
            pos.extend(std::iter::repeat_n(pad, self.b));
        }
        (pos, experts)
    }

    /// The token row of position `p`, or `None` for a skipped padding position.
    fn token(&self, pos: &[i64], p: usize) -> Option<usize> {
        usize::try_from(pos[p]).ok()
    }

    /// The forward's gate and up projections `[I]` each, clamped, of row `x`.
    fn projections(&self, w: &[f64], bias: &[f64], ex: usize, x: &[f64]) -> [Vec<f64>; 2] {
        let (h, i) = (self.h, self.i);
        [0, 1].map(|half| {
            (0..i)
                .map(|c| {
                    let v = (0..h).map(|r| x[r] * w[((ex * h + r) * 2 + half) * i + c]).sum::<f64>()
                        + if self.bias { bias[(ex * 2 + half) * i + c] } else { 0.0 };
                    if self.clamp { v.min(CLAMPS[2 * half]).max(CLAMPS[2 * half + 1]) } else { v }
                })
                .collect()
        })
    }

    /// Inputs and the forward's checkpoints for `dtype`.
    fn inputs(&self, dtype: Dtype) -> Inputs {
        let seed = seed_of(&self.name());
        let (h, i, e, rows, b) = (self.h, self.i, self.e, self.rows(), self.b);
        let (pos, experts) = self.layout(&self.expert_tokens(seed));
        let mut x = as_dtype(&uniform(rows * h, seed + 1, 0.0, 1.0), dtype);
        let mut dy = as_dtype(&uniform(rows * h, seed + 2, -1.0, 1.0), dtype);
        let draw = as_dtype(&uniform(rows * e, seed + 3, 0.0, 1.0), dtype);
        let mut aff = vec![0.0; rows * e];
        for (n, &ex) in experts.iter().enumerate() {
            for p in n * b..(n + 1) * b {
                if let Some(tok) = self.token(&pos, p).filter(|&t| t < self.t) {
                    aff[tok * e + ex as usize] = draw[tok * e + ex as usize];
                }
            }
        }
        if !self.skip_token {
            x[self.t * h..].fill(0.0);
            dy[self.t * h..].fill(0.0);
        }
        let w_gu = as_dtype(&uniform(e * h * 2 * i, seed + 4, -0.1, 0.1), dtype);
        let w_down = as_dtype(&uniform(e * i * h, seed + 5, -0.1, 0.1), dtype);
        let (b_gu, b_down) = (uniform(e * 2 * i, seed + 6, -0.1, 0.1), uniform(e * h, seed + 7, -0.1, 0.1));
        let n = experts.len();
        let (mut ck_gu, mut ck_down) = (vec![0.0; n * 2 * i * b], vec![0.0; n * b * h]);
        for (blk, &ex) in experts.iter().enumerate() {
            let ex = ex as usize;
            for p in 0..b {
                let row: Vec<f64> = match self.token(&pos, blk * b + p) {
                    Some(tok) => x[tok * h..(tok + 1) * h].to_vec(),
                    None => vec![0.0; h],
                };
                let [g, u] = self.projections(&w_gu, &b_gu, ex, &row);
                for c in 0..i {
                    ck_gu[((blk * 2) * i + c) * b + p] = g[c];
                    ck_gu[((blk * 2 + 1) * i + c) * b + p] = u[c];
                }
                let inter: Vec<f64> = (0..i).map(|c| activation(self.act, g[c]) * u[c]).collect();
                for col in 0..h {
                    let v = (0..i).map(|c| inter[c] * w_down[(ex * i + c) * h + col]).sum::<f64>();
                    ck_down[(blk * b + p) * h + col] = v + if self.bias { b_down[ex * h + col] } else { 0.0 };
                }
            }
        }
        Inputs { x, aff, w_gu, w_down, ck_gu: as_dtype(&ck_gu, dtype), ck_down: as_dtype(&ck_down, dtype), dy, pos, experts }
    }

    /// The derivative of the activation at `v`.
    fn activation_grad(&self, v: f64) -> f64 {
        let slope = if self.act == ActFnType::Swish { 1.702 } else { 1.0 };
        let s = 1.0 / (1.0 + (-slope * v).exp());
        s * (1.0 + slope * v * (1.0 - s))
    }

    /// Whether the clamp pair `half` (0 gate, 1 up) passes `v`'s gradient.
    fn passes(&self, half: usize, v: f64) -> bool {
        !self.clamp || (v < CLAMPS[2 * half] && v > CLAMPS[2 * half + 1])
    }

    /// The float64 gradients of the case (module docs).
    fn reference(&self, w: &Inputs) -> Grads {
        let (h, i, e, b, rows) = (self.h, self.i, self.e, self.b, self.rows());
        let mut g: Grads = [
            vec![0.0; rows * h],
            vec![0.0; rows * e],
            vec![0.0; e * h * 2 * i],
            vec![0.0; e * i * h],
            vec![0.0; e * 2 * i],
            vec![0.0; e * h],
        ];
        for (blk, &ex) in w.experts.iter().enumerate() {
            let ex = ex as usize;
            for p in 0..b {
                let Some(tok) = self.token(&w.pos, blk * b + p) else { continue };
                let dy = &w.dy[tok * h..(tok + 1) * h];
                let y = &w.ck_down[(blk * b + p) * h..(blk * b + p + 1) * h];
                g[1][tok * e + ex] = dy.iter().zip(y).map(|(a, c)| a * c).sum();
                let a = w.aff[tok * e + ex];
                let dz: Vec<f64> = dy.iter().map(|v| a * v).collect();
                for c in 0..i {
                    let gate = w.ck_gu[((blk * 2) * i + c) * b + p];
                    let up = w.ck_gu[((blk * 2 + 1) * i + c) * b + p];
                    let act = activation(self.act, gate);
                    let di: f64 = (0..h).map(|col| w.w_down[(ex * i + c) * h + col] * dz[col]).sum();
                    let dg = if self.passes(0, gate) { di * up * self.activation_grad(gate) } else { 0.0 };
                    let du = if self.passes(1, up) { di * act } else { 0.0 };
                    for col in 0..h {
                        g[3][(ex * i + c) * h + col] += act * up * dz[col];
                        let xv = w.x[tok * h + col];
                        g[2][((ex * h + col) * 2) * i + c] += xv * dg;
                        g[2][((ex * h + col) * 2 + 1) * i + c] += xv * du;
                        g[0][tok * h + col] += w.w_gu[((ex * h + col) * 2) * i + c] * dg + w.w_gu[((ex * h + col) * 2 + 1) * i + c] * du;
                    }
                    g[4][(ex * 2) * i + c] += dg;
                    g[4][(ex * 2 + 1) * i + c] += du;
                }
                for col in 0..h {
                    g[5][ex * h + col] += dz[col];
                }
            }
        }
        g
    }

    fn clamp_limits(&self) -> Option<ClampLimits> {
        self.clamp.then_some(ClampLimits {
            non_linear_clamp_upper_limit: Some(CLAMPS[0]),
            non_linear_clamp_lower_limit: Some(CLAMPS[1]),
            linear_clamp_upper_limit: Some(CLAMPS[2]),
            linear_clamp_lower_limit: Some(CLAMPS[3]),
        })
    }

    /// The input tensors in the kernel's order.
    fn tensors(&self, w: &Inputs, dtype: Dtype) -> [Tensor; 9] {
        let (h, i, e, b, rows, n) = (self.h, self.i, self.e, self.b, self.rows(), w.experts.len());
        [
            tensor(&[rows, h], &w.x, dtype),
            tensor(&[rows * e, 1], &w.aff, dtype),
            tensor(&[e, h, 2, i], &w.w_gu, dtype),
            tensor(&[e, i, h], &w.w_down, dtype),
            tensor(&[n, 2, i, b], &w.ck_gu, dtype),
            tensor(&[n, b, h], &w.ck_down, dtype),
            Tensor::from_i64(&[n * b], &w.pos, Dtype::I32).unwrap(),
            Tensor::from_i64(&[n, 1], &w.experts, Dtype::I32).unwrap(),
            tensor(&[rows, h], &w.dy, dtype),
        ]
    }

    /// The emulator's gradients (4, or 6 with `bias`).
    fn run(&self, w: &Inputs, dtype: Dtype, precision: Precision) -> Vec<Vec<f64>> {
        let [x, aff, gu, dw, ckg, ckd, pos, b2e, dy] = self.tensors(w, dtype);
        let out = blockwise_mm_bwd::Call::new(&x, &aff, &gu, &dw, &ckg, &ckd, &pos, &b2e, &dy, self.b as i64)
            .skip_dma(Some(SkipMode { skip_token: self.skip_token, skip_weight: false }))
            .compute_dtype(dtype)
            .is_tensor_update_accumulating(self.k > 1)
            .clamp_limits(self.clamp_limits())
            .bias(self.bias)
            .activation_type(self.act)
            .launch(&Launch::new().lnc(self.programs).precision(precision))
            .unwrap_or_else(|err| panic!("{}: {err}", self.name()));
        assert_eq!(out.len(), if self.bias { 6 } else { 4 }, "{}: outputs", self.name());
        out.0.iter().map(|o| o.to_f32_vec().into_iter().map(f64::from).collect()).collect()
    }

    /// The arguments for the NumPy executor, by keyword.
    fn numpy_kwargs(&self, w: &Inputs, dtype: Dtype) -> Vec<(&'static str, Arg)> {
        let (h, i, e, b, rows, n) = (self.h, self.i, self.e, self.b, self.rows(), w.experts.len());
        let ints = |v: &[i64]| v.iter().map(|&x| x as f64).collect::<Vec<f64>>();
        let limits =
            ["non_linear_clamp_upper_limit", "non_linear_clamp_lower_limit", "linear_clamp_upper_limit", "linear_clamp_lower_limit"];
        let clamp = if self.clamp {
            Arg::Object("ClampLimits", limits.iter().zip(CLAMPS).map(|(&k, v)| (k, Arg::Float(v))).collect())
        } else {
            Arg::None
        };
        vec![
            ("hidden_states", Arg::Tensor(vec![rows, h], w.x.clone(), dtype)),
            ("expert_affinities_masked", Arg::Tensor(vec![rows * e, 1], w.aff.clone(), dtype)),
            ("gate_up_proj_weight", Arg::Tensor(vec![e, h, 2, i], w.w_gu.clone(), dtype)),
            ("down_proj_weight", Arg::Tensor(vec![e, i, h], w.w_down.clone(), dtype)),
            ("gate_up_proj_act_checkpoint_T", Arg::Tensor(vec![n, 2, i, b], w.ck_gu.clone(), dtype)),
            ("down_proj_act_checkpoint", Arg::Tensor(vec![n, b, h], w.ck_down.clone(), dtype)),
            ("token_position_to_id", Arg::Tensor(vec![n * b], ints(&w.pos), Dtype::I32)),
            ("block_to_expert", Arg::Tensor(vec![n, 1], ints(&w.experts), Dtype::I32)),
            ("output_hidden_states_grad", Arg::Tensor(vec![rows, h], w.dy.clone(), dtype)),
            ("block_size", Arg::Int(b as i64)),
            ("skip_dma", Arg::Object("SkipMode", vec![("skip_token", Arg::Bool(self.skip_token)), ("skip_weight", Arg::Bool(false))])),
            ("compute_dtype", Arg::Dtype(dtype)),
            ("is_tensor_update_accumulating", Arg::Bool(self.k > 1)),
            ("clamp_limits", clamp),
            ("bias", Arg::Bool(self.bias)),
            ("activation_type", Arg::Member("ActFnType", if self.act == ActFnType::Swish { "Swish" } else { "SiLU" })),
        ]
    }
}

const NAMES: [&str; 6] = [
    "hidden_states_grad",
    "expert_affinities_masked_grad",
    "gate_up_proj_weight_grad",
    "down_proj_weight_grad",
    "gate_and_up_proj_bias_grad",
    "down_proj_bias_grad",
];

/// Every case's gradients within `rel` of the float64 ones (relative to each
/// gradient's largest magnitude, as the accumulations' rounding is), for
/// fp32 inputs and compute in fp32 precision (1e-4), and bfloat16 inputs in
/// hardware precision within the library's tolerance (2e-2).
#[test]
fn cases_match_float64_in_both_precisions() {
    for (dtype, precision, rel) in [(Dtype::F32, Precision::Fp32, 1e-4), (Dtype::Bf16, Precision::Hardware, 2e-2)] {
        for c in CASES {
            let w = c.inputs(dtype);
            let got = c.run(&w, dtype, precision);
            for (k, (g, want)) in got.iter().zip(c.reference(&w)).enumerate() {
                let got32: Vec<f32> = g.iter().map(|&v| v as f32).collect();
                assert_close(&format!("{} {dtype:?} {}", c.name(), NAMES[k]), &got32, &want, 1e-6, rel);
            }
        }
    }
}

/// The emitted kernel under NumPy equals the emulator, every gradient, in
/// both precision modes.
#[test]
fn emitted_blockwise_mm_bwd_under_numpy_equals_emulator() {
    for (c, m) in sweep([CASES[1], CASES[2]]) {
        let (dtype, precision, mode) = m.run(Dtype::F32, Dtype::Bf16);
        let w = c.inputs(dtype);
        let emu = c.run(&w, dtype, precision);
        let np = run_numpy_kwargs(emitted_package(), "blockwise_mm_bwd", &[], &c.numpy_kwargs(&w, dtype), c.programs, mode);
        assert_eq!(np.len(), emu.len(), "{} {mode}: outputs", c.name());
        let rtol = if mode == "fp32" { 1e-5 } else { 2f64.powi(-7) };
        for (k, (n, e)) in np.iter().zip(&emu).enumerate() {
            assert_close(&format!("{} {mode} {}", c.name(), NAMES[k]), n, e, 1e-6, rtol);
        }
    }
}

/// A call the rules accept (the library's `H = 2880, I = 2880, E = 2,
/// B = 512`), to vary one field at a time.
const OK: BwmmBwdCall = nkilib::bwmm_bwd_config!(
    hidden = 2880,
    intermediate = 2880,
    experts = 2,
    block_size = 512,
    positions = 17 * 512,
    activation = ActFnType::Swish
);

/// Each rule refuses what it names, and the kernel refuses the same at trace time.
#[test]
fn rules_refuse_what_they_name() {
    assert_eq!(bwmm_bwd_violation(OK), None);
    assert_eq!(bwmm_bwd_violation(BwmmBwdCall { shard_option: ShardOption::AUTO, programs: 1, ..OK }), None);
    let cases = [
        (BwmmBwdCall { block_size: 384, ..OK }, BwmmBwdRule::BlockSize),
        (BwmmBwdCall { positions: 1000, ..OK }, BwmmBwdRule::Blocks),
        (BwmmBwdCall { intermediate: 129, ..OK }, BwmmBwdRule::IntermediateEven),
        (BwmmBwdCall { hidden: 2881, ..OK }, BwmmBwdRule::HiddenEven),
        (BwmmBwdCall { programs: 4, ..OK }, BwmmBwdRule::Programs),
        (BwmmBwdCall { hidden: 160, ..OK }, BwmmBwdRule::HiddenShard),
        (BwmmBwdCall { intermediate: 160, ..OK }, BwmmBwdRule::IntermediateShard),
        (BwmmBwdCall { shard_option: ShardOption::SHARD_ON_INTERMEDIATE, ..OK }, BwmmBwdRule::ShardOption),
        (BwmmBwdCall { affinity_option: AffinityOption::AFFINITY_ON_I, ..OK }, BwmmBwdRule::AffinityOption),
        (BwmmBwdCall { kernel_type_option: KernelTypeOption::DROPPING, ..OK }, BwmmBwdRule::KernelType),
        (BwmmBwdCall { block_tile_size: true, ..OK }, BwmmBwdRule::BlockTileSize),
        (BwmmBwdCall { activation: ActFnType::GELU, ..OK }, BwmmBwdRule::Activation),
    ];
    assert_refused_by(bwmm_bwd_violation, cases);
    let c = CASES[0];
    let w = c.inputs(Dtype::Bf16);
    let [x, aff, gu, dw, ckg, ckd, pos, b2e, dy] = c.tensors(&w, Dtype::Bf16);
    let call = || blockwise_mm_bwd::Call::new(&x, &aff, &gu, &dw, &ckg, &ckd, &pos, &b2e, &dy, c.b as i64);
    let lnc2 = Launch::new().lnc(2);
    let refused = [
        (call().activation_type(ActFnType::GELU), BwmmBwdRule::Activation),
        (call().shard_option(ShardOption::BASELINE_LNC1), BwmmBwdRule::ShardOption),
        (call().affinity_option(AffinityOption::AFFINITY_ON_I), BwmmBwdRule::AffinityOption),
        (call().kernel_type_option(KernelTypeOption::DROPPING), BwmmBwdRule::KernelType),
        (call().block_tile_size(128), BwmmBwdRule::BlockTileSize),
    ];
    for (call, rule) in refused {
        let err = call.launch(&lnc2).unwrap_err().to_string();
        let head = rule.message().split(" (").next().unwrap();
        assert!(err.contains(head), "{rule:?}: {err}");
    }
}
