//! The library's `blockwise_mm_shard_intermediate_mx` and its `_hybrid`
//! form (trn3, LNC2, `POST_SCALE`) against a float64 blockwise mixture of
//! MX experts written from the library's torch reference and the MX
//! format's description: every block position's token through its block's
//! expert, each expert the float64 MX expert of the `mlp_tkg` MX test (the
//! token row in the pre-shuffled order quantized per 32 values to e4m3,
//! each projection's weights `code value · 2^(scale - 127)`,
//! `act(clamp(gate + b_gate)) · clamp(up + b_up)` quantized again before
//! the down projection, plus the down bias), times the token's affinity for
//! the expert, summed over the token's positions in block order. The two
//! programs each sum the down projection over their half of the
//! intermediate columns (the down bias on the first) and the halves are
//! added, as the kernel exchanges them. CI-sized versions of the library
//! test's shard-on-I MX rows (`H = 3072, T = 1024, I = 2048, E = 8, B =
//! 256, K = 4`, skip mode 1, bias, clamps, Swish, MXFP4 / MXFP8 weights,
//! static and hybrid), with skewed routings (every token on one expert,
//! experts without tokens, padding blocks), padding rows named, SiLU,
//! without biases; in both precision modes (the reference rounds what the
//! kernel holds in bfloat16 in hardware precision); the emitted source
//! under NumPy against the emulator; the rules.

use crate::common::{Arg, CaseName, FP32_ATOL, as_dtype, assert_close, assert_refused_by, package_of, seed_of, tensor, uniform};
use crate::mlp::activation;
use crate::mlp_tkg_mx::{Clamps, Data, Mx, P, W, check_numpy_trn3, mx};
use crate::moe_cte::{Routing, picked_affinities, routed_blocks};
use crate::moe_tkg_mx::stack_experts;
use crate::support::mx_blockwise_case;
use nki::{Dtype, Launch, Precision, Tensor};
use nkilib::moe::moe_cte::bwmm_shard_on_i_mx::{
    ActFnType, BwmmShardOnIMxCall, ExpertAffinityScaleMode, ShardOnIMxRule, SkipMode, blockwise_mm_shard_intermediate_mx,
    blockwise_mm_shard_intermediate_mx_hybrid, bwmm_shard_on_i_mx_violation,
};

/// The library test's clamps: gate at most 7, up within `[-7, 7]`.
const CLAMPS: Clamps = [Some(7.0), Some(7.0), Some(-7.0)];

mx_blockwise_case! {
    /// One configuration: the blockwise sizes, then the MX weights and options.
    struct Case {
        /// The hybrid form with this `num_static_block`.
        hybrid: Option<usize>,
    }
}

const BASE: Case = Case {
    w: W::Fp4,
    t: 128,
    h: 512,
    i: 1024,
    e: 4,
    k: 2,
    b: 256,
    skip_token: true,
    bias: true,
    act: ActFnType::Swish,
    routing: Routing::Random,
    hybrid: None,
};

const CASES: &[Case] = &[
    // The library's rows: MXFP4, skip mode 1, bias, clamps, Swish.
    BASE,
    // Every token on expert 0 (top-1, not accumulating), the other experts
    // empty, padding rows named; MXFP8 e4m3, SiLU, no bias.
    Case { w: W::E4m3, k: 1, skip_token: false, bias: false, act: ActFnType::SiLU, routing: Routing::AllOnZero, ..BASE },
    // The hybrid form, experts without tokens (their blocks padding at the
    // end), two intermediate tiles a program, MXFP8 e5m2: one static block,
    // the rest on the device.
    Case { w: W::E5m2, i: 2048, routing: Routing::EvenOnly, hybrid: Some(1), ..BASE },
];

/// A case's data: the token rows (in `hidden.x`, the padding row zero),
/// each expert's weights, the routing and the affinities `[T'·E]`.
struct Inputs {
    hidden: Data,
    experts: Vec<Data>,
    positions: Vec<i64>,
    block_expert: Vec<i64>,
    aff: Vec<f64>,
}

impl Case {
    fn inputs(&self) -> Inputs {
        let seed = seed_of(&self.name());
        let (t, h, e) = (self.t, self.h, self.e);
        let (routes, positions, block_expert) = routed_blocks((t, e, self.k, self.b), self.skip_token, self.routing, seed);
        let mut hidden = self.expert(self.rows()).data_seeded(seed);
        hidden.x[t * h..].fill(0.0);
        let one = self.expert(1);
        let experts = (0..e as u64).map(|ex| one.data_seeded(seed + 100 + ex)).collect();
        let aff = picked_affinities(&routes, e, &as_dtype(&uniform(self.rows() * e, seed + 1, 0.0, 1.0), Dtype::Bf16));
        Inputs { hidden, experts, positions, block_expert, aff }
    }

    /// `[N + 1]`: ones for the blocks holding a token, then zeros (the
    /// padding blocks come last).
    fn conditions(&self, x: &Inputs) -> Vec<i64> {
        let n = x.block_expert.len();
        let real = x.positions.chunks(self.b).filter(|blk| blk.iter().any(|&p| p >= 0 && (p as usize) < self.t)).count();
        (0..=n).map(|j| i64::from(j < real)).collect()
    }

    /// Program `s`'s half of an expert's down weights (and its down bias
    /// when `s == 0`): the Mx of `I/2` columns and its data.
    fn down_half(&self, d: &Data, n: usize, s: usize) -> (Mx, Data) {
        let m = mx(1, n, self.h, self.i / 2, self.w, false, self.bias && s == 0);
        let (h, n_i) = (self.h, self.i / 512);
        let half = |v: &[u32], per: usize| -> Vec<u32> {
            v.chunks(n_i * per).flat_map(|c| c[s * n_i / 2 * per..][..n_i / 2 * per].to_vec()).collect()
        };
        let down = half(&d.down, h * 4);
        let down_s: Vec<f64> = d.down_s.chunks(n_i * h).flat_map(|c| c[s * n_i / 2 * h..][..n_i / 2 * h].to_vec()).collect();
        let none = Vec::new;
        let data = Data {
            x: none(),
            gamma: none(),
            gate: Vec::new(),
            gate_s: none(),
            up: Vec::new(),
            up_s: none(),
            down,
            down_s,
            gate_b: none(),
            up_b: none(),
            down_b: d.down_b.clone(),
        };
        (m, data)
    }

    /// The float64 mixture `[T·H]`; with `hw` the values the kernel holds
    /// in bfloat16 rounded so (the experts' tiles and sums, the two halves'
    /// sum, the output rows).
    fn reference(&self, x: &Inputs, hw: bool) -> Vec<f64> {
        let (t, h, e, b) = (self.t, self.h, self.e, self.b);
        let r = |v: f64| if hw { as_dtype(&[v], Dtype::Bf16)[0] } else { v };
        let xl = self.expert(self.rows()).quantized_rows(&x.hidden, hw);
        let act = |g: f64| activation(self.act, g);
        let mut out = vec![0.0; t * h];
        for (blk, &ex) in x.block_expert.iter().enumerate() {
            let toks: Vec<usize> =
                x.positions[blk * b..(blk + 1) * b].iter().filter_map(|&p| usize::try_from(p).ok().filter(|&p| p < t)).collect();
            if toks.is_empty() {
                continue;
            }
            let (m, d) = (self.expert(toks.len()), &x.experts[ex as usize]);
            let rows: Vec<Vec<f64>> = toks.iter().map(|&tok| xl[tok].clone()).collect();
            let pl = m.gated_rows(d, &rows, hw, &act, CLAMPS);
            let halves: Vec<Vec<f64>> = (0..2)
                .map(|s| {
                    let (hm, hd) = self.down_half(d, toks.len(), s);
                    let part: Vec<Vec<f64>> = pl.iter().map(|row| row[s * row.len() / 2..(s + 1) * row.len() / 2].to_vec()).collect();
                    hm.down_rows(&hd, &part, hw)
                })
                .collect();
            for (j, &tok) in toks.iter().enumerate() {
                let a = x.aff[tok * e + ex as usize];
                for c in 0..h {
                    let y = r(halves[0][j * h + c] + halves[1][j * h + c]);
                    out[tok * h + c] = r(out[tok * h + c] + y * a);
                }
            }
        }
        out
    }

    /// The stacked expert tensors' shapes and dtypes: gate/up words,
    /// scales, biases, down words, scales.
    fn shapes(&self) -> [(Vec<usize>, Dtype); 5] {
        let m = self.expert(1);
        let (e, n_h, n_i, i, h, wd) = (self.e, m.n_h(), m.n_i(), self.i, self.h, self.w.dtype());
        [
            (vec![e, P, 2, n_h, i], wd),
            (vec![e, 16, 2, n_h, i], Dtype::U8),
            (vec![e, m.b_p(), 2, n_i, 4], Dtype::Bf16),
            (vec![e, m.p_i(), n_i, h], wd),
            (vec![e, m.p_i() / 8, n_i, h], Dtype::U8),
        ]
    }

    /// The emulator's output `[T', H]`.
    fn run(&self, x: &Inputs, precision: Precision) -> Vec<f32> {
        let (h, e, rows) = (self.h, self.e, self.rows());
        let vals = stack_experts(&self.expert(1), &x.experts);
        let ts: Vec<Tensor> = vals
            .iter()
            .zip(self.shapes())
            .map(|(v, (shape, dt))| {
                if dt == self.w.dtype() {
                    Tensor::from_i64(&shape, &v.iter().map(|&w| w as i64).collect::<Vec<_>>(), dt).unwrap()
                } else {
                    tensor(&shape, v, dt)
                }
            })
            .collect();
        let hid = tensor(&[rows, h], &x.hidden.x, Dtype::Bf16);
        let aff = tensor(&[rows * e, 1], &x.aff, Dtype::Bf16);
        let n = x.block_expert.len();
        let pos = Tensor::from_i64(&[n * self.b], &x.positions, Dtype::I32).unwrap();
        let b2e = Tensor::from_i64(&[n, 1], &x.block_expert, Dtype::I32).unwrap();
        let db = tensor(&[e, h], &x.experts.iter().flat_map(|d| d.down_b.clone()).collect::<Vec<_>>(), Dtype::Bf16);
        let cond = Tensor::from_i64(&[n + 1], &self.conditions(x), Dtype::I32).unwrap();
        let skip = Some(SkipMode { skip_token: self.skip_token, skip_weight: false });
        let launch = Launch::new().lnc(2).precision(precision).generation(nki::hw::Generation::Trn3);
        macro_rules! options {
            ($call:expr) => {{
                let mut call = $call
                    .gate_up_proj_scale(&ts[1])
                    .down_proj_scale(&ts[4])
                    .block_size(self.b as i64)
                    .activation_function(self.act)
                    .skip_dma(skip.clone())
                    .is_tensor_update_accumulating(self.k > 1)
                    .expert_affinities_scaling_mode(ExpertAffinityScaleMode::POST_SCALE)
                    .gate_clamp_upper_limit(7.0)
                    .up_clamp_upper_limit(7.0)
                    .up_clamp_lower_limit(-7.0);
                if self.bias {
                    call = call.gate_and_up_proj_bias(&ts[2]).down_proj_bias(&db);
                }
                call.launch(&launch)
            }};
        }
        let out = match self.hybrid {
            None => options!(blockwise_mm_shard_intermediate_mx::Call::new(&hid, &aff, &ts[0], &ts[3], &pos, &b2e)),
            Some(k) => options!(
                blockwise_mm_shard_intermediate_mx_hybrid::Call::new(&cond, &hid, &aff, &ts[0], &ts[3], &pos, &b2e)
                    .num_static_block(k as i64)
            ),
        };
        let out = out.unwrap_or_else(|err| panic!("{}: {err}", self.name()));
        assert_eq!(out.shape(), &[rows, h], "{}", self.name());
        out.to_f32_vec()
    }

    /// The arguments for the NumPy executor, by keyword (the library's names).
    fn numpy_kwargs(&self, x: &Inputs) -> Vec<(&'static str, Arg)> {
        let (h, e, rows, n) = (self.h, self.e, self.rows(), x.block_expert.len());
        let [gu, gus, gub, dw, dws] = stack_experts(&self.expert(1), &x.experts);
        let [s_gu, s_gus, s_gub, s_dw, s_dws] = self.shapes();
        let ints = |v: &[i64]| v.iter().map(|&p| p as f64).collect::<Vec<f64>>();
        let opt = |a: Arg| if self.bias { a } else { Arg::None };
        let act = if self.act == ActFnType::SiLU { "SiLU" } else { "Swish" };
        let mut kw = vec![
            ("hidden_states", Arg::Tensor(vec![rows, h], x.hidden.x.clone(), Dtype::Bf16)),
            ("expert_affinities_masked", Arg::Tensor(vec![rows * e, 1], x.aff.clone(), Dtype::Bf16)),
            ("gate_up_proj_weight", Arg::Tensor(s_gu.0, gu, s_gu.1)),
            ("down_proj_weight", Arg::Tensor(s_dw.0, dw, s_dw.1)),
            ("token_position_to_id", Arg::Tensor(vec![n * self.b], ints(&x.positions), Dtype::I32)),
            ("block_to_expert", Arg::Tensor(vec![n, 1], ints(&x.block_expert), Dtype::I32)),
            ("gate_and_up_proj_bias", opt(Arg::Tensor(s_gub.0, gub, s_gub.1))),
            ("down_proj_bias", opt(Arg::Tensor(vec![e, h], x.experts.iter().flat_map(|d| d.down_b.clone()).collect(), Dtype::Bf16))),
            ("gate_up_proj_scale", Arg::Tensor(s_gus.0, gus, s_gus.1)),
            ("down_proj_scale", Arg::Tensor(s_dws.0, dws, s_dws.1)),
            ("block_size", Arg::Int(self.b as i64)),
            ("activation_function", Arg::Member("ActFnType", act)),
            ("skip_dma", Arg::Object("SkipMode", vec![("skip_token", Arg::Bool(self.skip_token)), ("skip_weight", Arg::Bool(false))])),
            ("is_tensor_update_accumulating", Arg::Bool(self.k > 1)),
            ("expert_affinities_scaling_mode", Arg::Member("ExpertAffinityScaleMode", "POST_SCALE")),
            ("gate_clamp_upper_limit", Arg::Float(7.0)),
            ("up_clamp_upper_limit", Arg::Float(7.0)),
            ("up_clamp_lower_limit", Arg::Float(-7.0)),
        ];
        if let Some(k) = self.hybrid {
            kw.push(("conditions", Arg::Tensor(vec![n + 1], ints(&self.conditions(x)), Dtype::I32)));
            kw.push(("num_static_block", Arg::Int(k as i64)));
        }
        kw
    }

    fn kernel(&self) -> &'static str {
        if self.hybrid.is_some() { "blockwise_mm_shard_intermediate_mx_hybrid" } else { "blockwise_mm_shard_intermediate_mx" }
    }
}

/// Every case in `precision` within `rel` of the float64 mixture's largest
/// magnitude (the padding row left out); with `flips`, the token rows
/// beyond `rel` are at most `flips` and within `flip_rel`.
fn check(precision: Precision, rel: f64, flips: usize, flip_rel: f64) {
    for c in CASES {
        let x = c.inputs();
        let got = c.run(&x, precision);
        let want = c.reference(&x, precision == Precision::Hardware);
        let name = format!("{} {precision:?}", c.name());
        let (got, h) = (&got[..c.t * c.h], c.h);
        let scale = want.iter().fold(0.0f64, |a, v| a.max(v.abs()));
        let off = |tok: usize| (0..h).any(|j| (f64::from(got[tok * h + j]) - want[tok * h + j]).abs() > FP32_ATOL + rel * scale);
        let flipped: Vec<usize> = (0..c.t).filter(|&tok| off(tok)).collect();
        assert!(flipped.len() <= flips, "{name}: token rows {flipped:?} beyond {rel} of the scale");
        assert_close(&name, got, &want, FP32_ATOL, flip_rel);
    }
}

/// fp32 precision: the activations take the reference's e4m3 codes and
/// only the fp32 summation differs, but for a gated product a float32
/// rounding from an e4m3 rounding boundary, which takes the neighbouring
/// code: one token row of a case may move so, by a few weight quanta.
#[test]
fn shard_on_i_mx_in_fp32_match_float64() {
    check(Precision::Fp32, 1e-5, 1, 1e-4);
}

/// Hardware precision: the reference rounds what the kernel holds in
/// bfloat16; an fp32 sum a bfloat16 step from the float64 one may round
/// the other way (and move an e4m3 code), a few thousandths of the output's
/// scale.
#[test]
fn shard_on_i_mx_in_hardware_precision_match_float64() {
    check(Precision::Hardware, 1.0 / 128.0, 0, 1.0 / 128.0);
}

/// The emitted kernels under NumPy agree with the emulator in both modes
/// (the whole output, padding row included): the static form with the
/// library's options, the hybrid with a device loop.
#[test]
fn shard_on_i_mx_emitted_under_numpy_equals_emulator() {
    let pkg =
        package_of("moe_cte_i_mx_pkg", &[&blockwise_mm_shard_intermediate_mx::INFO, &blockwise_mm_shard_intermediate_mx_hybrid::INFO]);
    for c in [CASES[0], CASES[2]] {
        let x = c.inputs();
        check_numpy_trn3(&pkg, c.kernel(), &c.name(), 2, || (Vec::new(), c.numpy_kwargs(&x)), |p| c.run(&x, p));
    }
}

/// The rules, as `const fn` and when the kernel is traced.
#[test]
fn shard_on_i_mx_rules_refuse_by_name() {
    let ok = BwmmShardOnIMxCall {
        hidden: 3072,
        intermediate: 2048,
        experts: 8,
        block_size: 256,
        positions: 20 * 256,
        programs: 2,
        skip_weight: false,
        scaling_mode: ExpertAffinityScaleMode::POST_SCALE,
        scales: true,
        one_bias: false,
        static_blocks: 0,
    };
    assert_eq!(bwmm_shard_on_i_mx_violation(ok), None);
    assert_refused_by(
        bwmm_shard_on_i_mx_violation,
        [
            (BwmmShardOnIMxCall { programs: 1, ..ok }, ShardOnIMxRule::Programs),
            (BwmmShardOnIMxCall { hidden: 640, ..ok }, ShardOnIMxRule::Hidden),
            (BwmmShardOnIMxCall { block_size: 128, positions: 40 * 128, ..ok }, ShardOnIMxRule::BlockSize),
            (BwmmShardOnIMxCall { positions: 20 * 256 + 1, ..ok }, ShardOnIMxRule::Blocks),
            (BwmmShardOnIMxCall { intermediate: 1536, ..ok }, ShardOnIMxRule::Intermediate),
            (BwmmShardOnIMxCall { skip_weight: true, ..ok }, ShardOnIMxRule::SkipWeight),
            (BwmmShardOnIMxCall { scaling_mode: ExpertAffinityScaleMode::PRE_SCALE, ..ok }, ShardOnIMxRule::ScalingMode),
            (BwmmShardOnIMxCall { scales: false, ..ok }, ShardOnIMxRule::Scales),
            (BwmmShardOnIMxCall { one_bias: true, ..ok }, ShardOnIMxRule::Bias),
            (BwmmShardOnIMxCall { static_blocks: 21, ..ok }, ShardOnIMxRule::StaticBlocks),
        ],
    );
    // When traced: the library's default PRE_SCALE, a missing scale, a
    // static count past N.
    let c = CASES[2];
    let x = c.inputs();
    let vals = stack_experts(&c.expert(1), &x.experts);
    let [s_gu, s_gus, _, s_dw, s_dws] = c.shapes();
    let packed =
        |v: &[f64], s: &(Vec<usize>, Dtype)| Tensor::from_i64(&s.0, &v.iter().map(|&w| w as i64).collect::<Vec<_>>(), s.1).unwrap();
    let (gu, dw) = (packed(&vals[0], &s_gu), packed(&vals[3], &s_dw));
    let (gus, dws) = (tensor(&s_gus.0, &vals[1], Dtype::U8), tensor(&s_dws.0, &vals[4], Dtype::U8));
    let n = x.block_expert.len();
    let hid = tensor(&[c.rows(), c.h], &x.hidden.x, Dtype::Bf16);
    let aff = tensor(&[c.rows() * c.e, 1], &x.aff, Dtype::Bf16);
    let pos = Tensor::from_i64(&[n * c.b], &x.positions, Dtype::I32).unwrap();
    let b2e = Tensor::from_i64(&[n, 1], &x.block_expert, Dtype::I32).unwrap();
    let cond = Tensor::from_i64(&[n + 1], &c.conditions(&x), Dtype::I32).unwrap();
    let launch = Launch::new().lnc(2).generation(nki::hw::Generation::Trn3);
    let call = || blockwise_mm_shard_intermediate_mx::Call::new(&hid, &aff, &gu, &dw, &pos, &b2e).block_size(c.b as i64);
    let err = call().gate_up_proj_scale(&gus).down_proj_scale(&dws).launch(&launch).unwrap_err().to_string();
    assert!(err.contains(ShardOnIMxRule::ScalingMode.message()), "{err}");
    let post = ExpertAffinityScaleMode::POST_SCALE;
    let err = call().gate_up_proj_scale(&gus).expert_affinities_scaling_mode(post).launch(&launch).unwrap_err().to_string();
    assert!(err.contains(ShardOnIMxRule::Scales.message()), "{err}");
    let hybrid = blockwise_mm_shard_intermediate_mx_hybrid::Call::new(&cond, &hid, &aff, &gu, &dw, &pos, &b2e)
        .block_size(c.b as i64)
        .gate_up_proj_scale(&gus)
        .down_proj_scale(&dws)
        .num_static_block(n as i64 + 1);
    let err = hybrid.launch(&launch).unwrap_err().to_string();
    assert!(err.contains(ShardOnIMxRule::StaticBlocks.message()), "{err}");
}
