//! The library's `bwmm_shard_on_block_mx` (trn3) against a float64 blockwise
//! mixture of experts with MX weights, written from the library's torch
//! reference semantics and the MX format: each block position's token row
//! quantized per 32 values to MXFP8, through its block's expert —
//! `act(clamp(x W_gate + b_gate)) · clamp(x W_up + b_up)`, quantized again,
//! through `W_down` plus `b_down` — times the token's affinity, summed over
//! the token's positions. The weights are MXFP4 or MXFP8 codes with `uint8`
//! block scales, decoded per code (the MX decode-path reference of
//! `mlp_tkg_mx`, one expert at a time). CI-sized versions of the library's
//! `test_moe_bwmm_mx_cte.py` cases with skewed routings (every token on one
//! expert, experts without tokens, padding blocks), the dynamic loop over
//! `conditions`, weights passed as integers, in both precision modes; then
//! the emitted source under NumPy against the emulator, and the rules.

use crate::common::{Arg, CaseName, FP32_ATOL, RankArgs, as_dtype, assert_close, assert_refused_by, package_of, seed_of, tensor, uniform};
use crate::mlp::activation;
use crate::mlp_tkg_mx::{Data, P, W, check_numpy_trn3};
use crate::moe_cte::{Routing, picked_affinities, routed_blocks};
use crate::support::mx_blockwise_case;
use nki::{Dtype, Launch, Precision, Tensor};
use nkilib::moe::moe_cte::bwmm_shard_on_block_mx::{
    ActFnType, BwmmShardOnBlockMxCall, ExpertAffinityScaleMode, MoeCteMxRule, SkipMode, bwmm_shard_on_block_mx,
    bwmm_shard_on_block_mx_violation,
};
use nkilib::moe::moe_cte::moe_cte::{MoECTEImplementation, MoECTESpec, QuantizationConfig, ShardOnBlockConfig, moe_cte};

mx_blockwise_case! {
    /// One configuration: sizes and options.
    struct Case {
        /// `n_dynamic_blocks` of a call with `conditions`.
        dynamic: Option<i64>,
        /// The weights passed as unsigned integers of their width.
        as_uint: bool,
    }
}

const fn case(t: usize, h: usize, i: usize, e: usize, k: usize, b: usize, w: W) -> Case {
    Case {
        t,
        h,
        i,
        e,
        k,
        b,
        skip_token: true,
        w,
        bias: true,
        act: ActFnType::Swish,
        routing: Routing::Random,
        dynamic: None,
        as_uint: false,
    }
}

impl Case {
    const fn padded(mut self) -> Self {
        self.skip_token = false;
        self
    }
    const fn routed(mut self, r: Routing) -> Self {
        self.routing = r;
        self
    }
    const fn dynamic(mut self, n_dynamic_blocks: i64) -> Self {
        self.dynamic = Some(n_dynamic_blocks);
        self
    }
    const fn silu_without_bias(mut self) -> Self {
        self.act = ActFnType::SiLU;
        self.bias = false;
        self
    }
    const fn as_uint(mut self) -> Self {
        self.as_uint = true;
        self
    }
}

/// The library's cases (`H = 3072, I = 384, E = 128, B = 256, K = 4`, skip
/// modes 0 and 1, the dynamic loop, the three weight dtypes, integer
/// weights), CI-sized, with the routings and options they leave out.
const CASES: &[Case] = &[
    case(256, 512, 128, 4, 2, 128, W::Fp4),
    case(128, 1024, 512, 4, 2, 256, W::E4m3).padded(),
    case(128, 512, 64, 4, 2, 128, W::E5m2).dynamic(3),
    case(256, 512, 128, 4, 1, 128, W::Fp4).routed(Routing::AllOnZero).padded().dynamic(-1),
    case(256, 512, 96, 8, 2, 128, W::E4m3).routed(Routing::EvenOnly).silu_without_bias().as_uint(),
];

/// The clamps (gate upper, up upper, up lower): the library tests' values.
const CLAMPS: [f64; 3] = [7.0, 7.0, -7.0];

/// One case's inputs: the rows and affinities (`T'` rows), each expert's MX
/// weights in `mlp_tkg_mx`'s layout, the blocks.
struct Inputs {
    hidden: Vec<f64>,
    aff: Vec<f64>,
    experts: Vec<Data>,
    positions: Vec<i64>,
    block_expert: Vec<i64>,
}

impl Case {
    fn inputs(&self) -> Inputs {
        let seed = seed_of(&self.name());
        let (t, h, e, rows) = (self.t, self.h, self.e, self.rows());
        let (routes, positions, block_expert) = routed_blocks((t, e, self.k, self.b), self.skip_token, self.routing, seed);
        let mut hidden = as_dtype(&uniform(rows * h, seed + 1, -1.0, 1.0), Dtype::Bf16);
        hidden[t * h..].fill(0.0);
        let aff = picked_affinities(&routes, e, &as_dtype(&uniform(rows * e, seed + 2, 0.0, 1.0), Dtype::Bf16));
        let experts = (0..e).map(|x| self.expert(1).data_seeded(seed + 16 * (x as u64 + 1))).collect();
        Inputs { hidden, aff, experts, positions, block_expert }
    }

    fn blocks(&self, w: &Inputs) -> usize {
        w.block_expert.len()
    }

    /// `conditions` `[N + 2]`: ones for the blocks holding a token.
    fn conditions(&self, w: &Inputs) -> Vec<i64> {
        let (n, b, t) = (self.blocks(w), self.b, self.t as i64);
        let real = |blk: usize| w.positions[blk * b..(blk + 1) * b].iter().any(|&p| (0..t).contains(&p));
        (0..n + 2).map(|blk| i64::from(blk < n && real(blk))).collect()
    }

    /// The program that computes each block, as the kernel splits them
    /// (module docs), or none for a dynamic block the loop does not reach.
    fn block_programs(&self, w: &Inputs) -> Vec<Option<usize>> {
        let n = self.blocks(w);
        let split = |n_static: usize| {
            let half = n_static / 2;
            (0..n_static).map(move |blk| Some(if blk < half { 0 } else { 1 }))
        };
        let Some(n_dyn) = self.dynamic else { return split(n).collect() };
        let n_static = if n_dyn < 0 || n_dyn > n as i64 { self.rows() / self.b } else { n - n_dyn as usize };
        let cond = self.conditions(w);
        let mut programs: Vec<Option<usize>> = split(n_static).collect();
        let mut index = n_static;
        while programs.len() < n {
            let run = cond[index] != 0;
            programs.push(run.then_some(0));
            programs.push(run.then_some(1));
            index += 2;
        }
        programs.truncate(n);
        programs
    }

    /// The float64 output `[T', H]`: each program's blocks summed into its
    /// slot (with `hw`, every value the kernel holds in bfloat16 rounded so),
    /// the slots added.
    fn reference(&self, w: &Inputs, hw: bool) -> Vec<f64> {
        let (h, e, b, rows) = (self.h, self.e, self.b, self.rows());
        let r = |v: f64| if hw { as_dtype(&[v], Dtype::Bf16)[0] } else { v };
        let act = |g: f64| activation(self.act, g);
        let mut slots = vec![vec![0.0; rows * h]; 2];
        for (blk, program) in self.block_programs(w).into_iter().enumerate() {
            let ex = w.block_expert[blk] as usize;
            let toks: Vec<usize> = w.positions[blk * b..(blk + 1) * b]
                .iter()
                .filter_map(|&tok| usize::try_from(tok).ok())
                .filter(|&tok| w.aff[tok * e + ex] != 0.0)
                .collect();
            let Some(program) = program.filter(|_| !toks.is_empty()) else { continue };
            let m = self.expert(toks.len());
            let d = Data { x: toks.iter().flat_map(|&tok| w.hidden[tok * h..(tok + 1) * h].to_vec()).collect(), ..clone(&w.experts[ex]) };
            let clamps = [Some(CLAMPS[0]), Some(CLAMPS[1]), Some(CLAMPS[2])];
            let y = m.down_rows(&d, &m.gated_rows(&d, &m.quantized_rows(&d, hw), hw, &act, clamps), hw);
            for (&tok, row) in toks.iter().zip(y.chunks(h)) {
                let a = w.aff[tok * e + ex];
                for (o, v) in slots[program][tok * h..(tok + 1) * h].iter_mut().zip(row) {
                    *o = r(r(v * a) + *o);
                }
            }
        }
        slots[0].iter().zip(&slots[1]).map(|(a, b)| r(a + b)).collect()
    }

    /// The MoE tensors `[E, ..]` of the experts' weights, scales and biases:
    /// gate/up `[E, 128, 2, H/512, I]` (words), scales `[E, 16, 2, H/512,
    /// I]`, down `[E, I_p, I/512, H]`, scales `[E, I_p/8, I/512, H]`, gate/up
    /// bias `[E, I_p, 2, I/512, 4]`, down bias `[E, H]`.
    fn weights(&self, w: &Inputs) -> [(Vec<usize>, Vec<f64>); 6] {
        let m = self.expert(1);
        let (h, i, e, n_h, n_i) = (self.h, self.i, self.e, m.n_h(), m.n_i());
        let words = |codes: &[u32]| m.words(codes).iter().map(|&x| x as f64).collect::<Vec<f64>>();
        // Expert `x`'s gate then up rows, interleaved on the axis after `lead`.
        let pair = |gate: &dyn Fn(&Data) -> Vec<f64>, up: &dyn Fn(&Data) -> Vec<f64>, lead: usize| {
            w.experts.iter().flat_map(|d| interleave(&gate(d), &up(d), lead)).collect::<Vec<f64>>()
        };
        let cat = |f: &dyn Fn(&Data) -> Vec<f64>| w.experts.iter().flat_map(f).collect::<Vec<f64>>();
        let (p_i, b_p) = (m.p_i(), m.b_p());
        [
            (vec![e, P, 2, n_h, i], pair(&|d| words(&d.gate), &|d| words(&d.up), P)),
            (vec![e, 16, 2, n_h, i], pair(&|d| d.gate_s.clone(), &|d| d.up_s.clone(), 16)),
            (vec![e, p_i, n_i, h], cat(&|d| words(&d.down))),
            (vec![e, p_i / 8, n_i, h], cat(&|d| d.down_s.clone())),
            (vec![e, b_p, 2, n_i, 4], pair(&|d| d.gate_b.clone(), &|d| d.up_b.clone(), b_p)),
            (vec![e, h], cat(&|d| d.down_b.clone())),
        ]
    }

    /// The weights' dtype as passed: MX, or an unsigned integer of its width.
    fn weight_dtype(&self) -> Dtype {
        match (self.as_uint, self.w) {
            (false, w) => w.dtype(),
            (true, W::Fp4) => Dtype::U16,
            (true, _) => Dtype::U32,
        }
    }

    /// The emulator's inputs: rows, affinities, gate/up weights and scales,
    /// down weights and scales, biases, positions, blocks, `conditions`.
    fn tensors(&self, w: &Inputs) -> [Tensor; 11] {
        let (h, e, rows, n) = (self.h, self.e, self.rows(), self.blocks(w));
        let [(gus, gu), (gss, gs), (dws, dw), (dss, ds), (gbs, gb), (dbs, db)] = self.weights(w);
        let wt = |shape: &[usize], v: &[f64]| {
            Tensor::from_i64(shape, &v.iter().map(|&x| x as i64).collect::<Vec<i64>>(), self.weight_dtype()).unwrap()
        };
        [
            tensor(&[rows, h], &w.hidden, Dtype::Bf16),
            tensor(&[rows * e, 1], &w.aff, Dtype::Bf16),
            wt(&gus, &gu),
            tensor(&gss, &gs, Dtype::U8),
            wt(&dws, &dw),
            tensor(&dss, &ds, Dtype::U8),
            tensor(&gbs, &gb, Dtype::Bf16),
            tensor(&dbs, &db, Dtype::Bf16),
            Tensor::from_i64(&[n * self.b], &w.positions, Dtype::I32).unwrap(),
            Tensor::from_i64(&[n, 1], &w.block_expert, Dtype::I32).unwrap(),
            Tensor::from_i64(&[n + 2], &self.conditions(w), Dtype::I32).unwrap(),
        ]
    }

    /// The emulator's `[2, T', H]` output on two programs.
    fn run(&self, w: &Inputs, precision: Precision) -> Vec<f32> {
        let [hid, aff, gu, gs, dw, ds, gb, db, pos, b2e, cond] = self.tensors(w);
        let mut call = bwmm_shard_on_block_mx::Call::new(&hid, &aff, &gu, &dw, &pos, &b2e)
            .gate_up_proj_scale(Some(&gs))
            .down_proj_scale(Some(&ds))
            .block_size(Some(self.b as i64))
            .activation_function(self.act)
            .skip_dma(Some(SkipMode { skip_token: self.skip_token, skip_weight: false }))
            .gate_clamp_upper_limit(Some(CLAMPS[0]))
            .up_clamp_upper_limit(Some(CLAMPS[1]))
            .up_clamp_lower_limit(Some(CLAMPS[2]));
        if self.as_uint {
            call = call.weight_dtype(Some(self.w.dtype()));
        }
        if self.bias {
            call = call.gate_and_up_proj_bias(Some(&gb)).down_proj_bias(Some(&db));
        }
        if let Some(n_dyn) = self.dynamic {
            call = call.conditions(Some(&cond)).n_dynamic_blocks(n_dyn);
        }
        let out = call.launch(&trn3(precision)).unwrap_or_else(|err| panic!("{}: {err}", self.name()));
        assert_eq!(out.shape(), &[2, self.rows(), self.h], "{}", self.name());
        out.to_f32_vec()
    }

    /// The library's call of this case through `moe_cte`: the spec's
    /// `ShardOnBlockConfig` holding `n_dynamic_blocks` (the defaults without
    /// `conditions`), the scales in a `QuantizationConfig`.
    fn spec(&self) -> MoECTESpec {
        let options = self.dynamic.map(|n_dynamic_blocks| ShardOnBlockConfig { n_dynamic_blocks, ..ShardOnBlockConfig::default() });
        MoECTESpec { shard_on_block: options, ..MoECTESpec::new(MoECTEImplementation::shard_on_block_mx) }
    }

    /// The emulator's `[2, T', H]` output of `moe_cte` with `spec`.
    fn run_moe_cte(&self, w: &Inputs, spec: &MoECTESpec, precision: Precision) -> Vec<f32> {
        let [hid, aff, gu, gs, dw, ds, gb, db, pos, b2e, cond] = self.tensors(w);
        let scales = QuantizationConfig { gate_up_proj_scale: Some(gs), down_proj_scale: Some(ds) };
        let mut call = moe_cte::Call::new(&hid, &aff, &gu, &dw, &pos, &b2e, self.b as i64, spec)
            .quantization_config(scales)
            .activation_function(self.act)
            .skip_dma(Some(SkipMode { skip_token: self.skip_token, skip_weight: false }))
            .gate_clamp_upper_limit(CLAMPS[0])
            .up_clamp_upper_limit(CLAMPS[1])
            .up_clamp_lower_limit(CLAMPS[2]);
        if self.bias {
            call = call.gate_and_up_proj_bias(&gb).down_proj_bias(&db);
        }
        if self.dynamic.is_some() {
            call = call.conditions(&cond);
        }
        let out = call.launch(&trn3(precision)).unwrap_or_else(|err| panic!("{} through moe_cte: {err}", self.name()));
        out.0[0].to_f32_vec()
    }

    /// Slot 0 of an output, its slot 1 checked zero.
    fn slot0(&self, out: &[f32]) -> Vec<f32> {
        let n = self.rows() * self.h;
        assert!(out[n..].iter().all(|&v| v == 0.0), "{}: slot 1 is not cleared by the reduction", self.name());
        out[..n].to_vec()
    }

    /// The kernel's arguments for the NumPy executor, by keyword.
    fn numpy_call(&self, w: &Inputs) -> RankArgs<'static> {
        let (h, e, rows, n) = (self.h, self.e, self.rows(), self.blocks(w));
        let [(gus, gu), (gss, gs), (dws, dw), (dss, ds), (gbs, gb), (dbs, db)] = self.weights(w);
        let ints = |v: &[i64]| v.iter().map(|&x| x as f64).collect::<Vec<f64>>();
        let act = if self.act == ActFnType::Swish { "Swish" } else { "SiLU" };
        let mut kw = vec![
            ("hidden_states", Arg::Tensor(vec![rows, h], w.hidden.clone(), Dtype::Bf16)),
            ("expert_affinities_masked", Arg::Tensor(vec![rows * e, 1], w.aff.clone(), Dtype::Bf16)),
            ("gate_up_proj_weight", Arg::Tensor(gus, gu, self.weight_dtype())),
            ("down_proj_weight", Arg::Tensor(dws, dw, self.weight_dtype())),
            ("token_position_to_id", Arg::Tensor(vec![n * self.b], ints(&w.positions), Dtype::I32)),
            ("block_to_expert", Arg::Tensor(vec![n, 1], ints(&w.block_expert), Dtype::I32)),
            ("gate_up_proj_scale", Arg::Tensor(gss, gs, Dtype::U8)),
            ("down_proj_scale", Arg::Tensor(dss, ds, Dtype::U8)),
            ("block_size", Arg::Int(self.b as i64)),
            ("activation_function", Arg::Member("ActFnType", act)),
            ("skip_dma", Arg::Object("SkipMode", vec![("skip_token", Arg::Bool(self.skip_token)), ("skip_weight", Arg::Bool(false))])),
            ("gate_clamp_upper_limit", Arg::Float(CLAMPS[0])),
            ("up_clamp_upper_limit", Arg::Float(CLAMPS[1])),
            ("up_clamp_lower_limit", Arg::Float(CLAMPS[2])),
        ];
        if self.as_uint {
            kw.push(("weight_dtype", Arg::Dtype(self.w.dtype())));
        }
        if self.bias {
            kw.push(("gate_and_up_proj_bias", Arg::Tensor(gbs, gb, Dtype::Bf16)));
            kw.push(("down_proj_bias", Arg::Tensor(dbs, db, Dtype::Bf16)));
        }
        if let Some(n_dyn) = self.dynamic {
            kw.push(("conditions", Arg::Tensor(vec![n + 2], ints(&self.conditions(w)), Dtype::I32)));
            kw.push(("n_dynamic_blocks", Arg::Int(n_dyn)));
        }
        (vec![], kw)
    }
}

/// Two LNC programs on trn3 in `precision`.
fn trn3(precision: Precision) -> Launch {
    Launch::new().lnc(2).precision(precision).generation(nki::hw::Generation::Trn3)
}

/// `a` and `b` (each `[lead, rest]`, per expert) interleaved as `[lead, 2, rest]`.
fn interleave(a: &[f64], b: &[f64], lead: usize) -> Vec<f64> {
    let rest = a.len() / lead;
    (0..lead).flat_map(|p| a[p * rest..(p + 1) * rest].iter().chain(&b[p * rest..(p + 1) * rest]).copied()).collect()
}

/// A copy of an expert's weights (the rows replaced by the caller).
fn clone(d: &Data) -> Data {
    Data {
        x: Vec::new(),
        gamma: Vec::new(),
        gate: d.gate.clone(),
        gate_s: d.gate_s.clone(),
        up: d.up.clone(),
        up_s: d.up_s.clone(),
        down: d.down.clone(),
        down_s: d.down_s.clone(),
        gate_b: d.gate_b.clone(),
        up_b: d.up_b.clone(),
        down_b: d.down_b.clone(),
    }
}

/// Every case in `precision` within `rel` of the output's largest
/// magnitude of the float64 mixture.
fn cases_match_float64(precision: Precision, rel: f64) {
    for c in CASES {
        let w = c.inputs();
        let got = c.slot0(&c.run(&w, precision));
        let want = c.reference(&w, precision == Precision::Hardware);
        assert!(want.iter().any(|&v| v != 0.0), "{}: the reference is all zeros", c.name());
        assert_close(&format!("{} {precision:?}", c.name()), &got, &want, FP32_ATOL, rel);
    }
}

/// fp32 precision: the rows and the product take the reference's e4m3
/// codes, only the fp32 summation differs.
#[test]
fn bwmm_shard_on_block_mx_in_fp32_matches_float64() {
    cases_match_float64(Precision::Fp32, 1e-5);
}

/// Hardware precision: the reference rounds every partial sum, projection,
/// product and accumulation to bfloat16 as the kernel's tiles hold them; a
/// sum a bfloat16 step from the float64 one may round the other way.
#[test]
fn bwmm_shard_on_block_mx_in_hardware_precision_matches_float64() {
    cases_match_float64(Precision::Hardware, 1.0 / 64.0);
}

/// The emitted kernel under NumPy agrees with the emulator in both modes.
#[test]
fn bwmm_shard_on_block_mx_emitted_under_numpy_equals_emulator() {
    let pkg = package_of("bwmm_shard_on_block_mx_pkg", &[&bwmm_shard_on_block_mx::INFO]);
    for c in [CASES[1], CASES[2]] {
        let w = c.inputs();
        check_numpy_trn3(&pkg, "bwmm_shard_on_block_mx", &c.name(), 2, || c.numpy_call(&w), |p| c.run(&w, p));
    }
}

/// `moe_cte` with `MoECTESpec(implementation=shard_on_block_mx,
/// shard_on_block=ShardOnBlockConfig(n_dynamic_blocks=...))` and the scales
/// in a `QuantizationConfig` is `bwmm_shard_on_block_mx` given the same
/// (bit for bit) and so the float64 mixture, in both precision modes: the
/// dynamic loop with `n_dynamic_blocks` from the nested config, and every
/// token on one expert through the default config; the emitted `moe_cte`
/// under NumPy equals the emulator with the nested spec and the scales.
#[test]
fn moe_cte_dispatches_to_shard_on_block_mx() {
    for (c, precision, rel) in [(CASES[2], Precision::Fp32, 1e-5), (CASES[3], Precision::Hardware, 1.0 / 64.0)] {
        let w = c.inputs();
        let got = c.run_moe_cte(&w, &c.spec(), precision);
        assert_eq!(got, c.run(&w, precision), "{}: moe_cte differs from bwmm_shard_on_block_mx", c.name());
        let want = c.reference(&w, precision == Precision::Hardware);
        assert_close(&format!("{} through moe_cte {precision:?}", c.name()), &c.slot0(&got), &want, FP32_ATOL, rel);
    }
    let pkg = package_of("moe_cte_mx_pkg", &[&moe_cte::INFO]);
    let c = CASES[2];
    let w = c.inputs();
    let numpy_call = || {
        // The scales move into the quantization config, `n_dynamic_blocks`
        // into the spec's nested config.
        let kw = c.numpy_call(&w).1.into_iter().filter(|(k, _)| *k != "n_dynamic_blocks");
        let (scales, mut kw): (Vec<(&'static str, Arg)>, Vec<_>) = kw.partition(|(k, _)| k.ends_with("_proj_scale"));
        kw.push(("quantization_config", Arg::Object("QuantizationConfig", scales)));
        let shard_on_block = Arg::Object("ShardOnBlockConfig", vec![("n_dynamic_blocks", Arg::Int(c.dynamic.unwrap()))]);
        let implementation = ("implementation", Arg::Member("MoECTEImplementation", "shard_on_block_mx"));
        kw.push(("spec", Arg::Object("MoECTESpec", vec![implementation, ("shard_on_block", shard_on_block)])));
        (vec![], kw)
    };
    check_numpy_trn3(&pkg, "moe_cte", &c.name(), 2, numpy_call, |p| c.run_moe_cte(&w, &c.spec(), p));
}

/// The rules, as `const fn` and when the kernel is traced.
#[test]
fn bwmm_shard_on_block_mx_rules_refuse_by_name() {
    let ok = BwmmShardOnBlockMxCall {
        hidden: 3072,
        intermediate: 384,
        experts: 128,
        block_size: 256,
        positions: 146 * 256,
        programs: 2,
        tokens: 1025,
        skip_token: false,
        accumulating: true,
        conditions: 0,
        n_static_blocks: -1,
        scaling_mode: ExpertAffinityScaleMode::POST_SCALE,
        scales: true,
        activations: false,
        one_bias: false,
    };
    assert_eq!(bwmm_shard_on_block_mx_violation(ok), None);
    assert_eq!(
        bwmm_shard_on_block_mx_violation(BwmmShardOnBlockMxCall { intermediate: 1536, block_size: 512, positions: 73 * 512, ..ok }),
        None
    );
    assert_eq!(bwmm_shard_on_block_mx_violation(BwmmShardOnBlockMxCall { conditions: 148, n_static_blocks: 2, ..ok }), None);
    let cases = [
        (BwmmShardOnBlockMxCall { programs: 1, ..ok }, MoeCteMxRule::Programs),
        (BwmmShardOnBlockMxCall { hidden: 8704, ..ok }, MoeCteMxRule::Hidden),
        (BwmmShardOnBlockMxCall { hidden: 3200, ..ok }, MoeCteMxRule::Hidden),
        (BwmmShardOnBlockMxCall { block_size: 384, positions: 384 * 10, ..ok }, MoeCteMxRule::BlockSize),
        (BwmmShardOnBlockMxCall { positions: 146 * 256 + 128, ..ok }, MoeCteMxRule::Blocks),
        (BwmmShardOnBlockMxCall { intermediate: 400, ..ok }, MoeCteMxRule::Intermediate),
        (BwmmShardOnBlockMxCall { intermediate: 768, ..ok }, MoeCteMxRule::Intermediate),
        (BwmmShardOnBlockMxCall { accumulating: false, ..ok }, MoeCteMxRule::Accumulating),
        (BwmmShardOnBlockMxCall { tokens: 1000, ..ok }, MoeCteMxRule::ReduceRows),
        (BwmmShardOnBlockMxCall { conditions: 147, ..ok }, MoeCteMxRule::Conditions),
        (BwmmShardOnBlockMxCall { conditions: 148, n_static_blocks: 146, ..ok }, MoeCteMxRule::StaticBlocks),
        (BwmmShardOnBlockMxCall { scaling_mode: ExpertAffinityScaleMode::PRE_SCALE, ..ok }, MoeCteMxRule::ScalingMode),
        (BwmmShardOnBlockMxCall { scales: false, ..ok }, MoeCteMxRule::Scales),
        (BwmmShardOnBlockMxCall { activations: true, ..ok }, MoeCteMxRule::Activations),
        (BwmmShardOnBlockMxCall { one_bias: true, ..ok }, MoeCteMxRule::Bias),
    ];
    assert_refused_by(bwmm_shard_on_block_mx_violation, cases);

    // The same rules when the kernel is traced, each message starting with the rule's.
    let c = case(128, 512, 128, 4, 2, 128, W::Fp4);
    let w = c.inputs();
    let (h, e, rows, n) = (c.h, c.e, c.rows(), c.blocks(&w));
    let [(gus, gu), (gss, gs), (dws, dw), (dss, ds), (gbs, gb), _] = c.weights(&w);
    let wt =
        |shape: &[usize], v: &[f64]| Tensor::from_i64(shape, &v.iter().map(|&x| x as i64).collect::<Vec<i64>>(), W::Fp4.dtype()).unwrap();
    let (hid, aff) = (tensor(&[rows, h], &w.hidden, Dtype::Bf16), tensor(&[rows * e, 1], &w.aff, Dtype::Bf16));
    let (gu, dw, gs, ds) = (wt(&gus, &gu), wt(&dws, &dw), tensor(&gss, &gs, Dtype::U8), tensor(&dss, &ds, Dtype::U8));
    let gb = tensor(&gbs, &gb, Dtype::Bf16);
    let pos = Tensor::from_i64(&[n * c.b], &w.positions, Dtype::I32).unwrap();
    let b2e = Tensor::from_i64(&[n, 1], &w.block_expert, Dtype::I32).unwrap();
    let short = Tensor::from_i64(&[n + 1], &vec![1; n + 1], Dtype::I32).unwrap();
    let call = || {
        bwmm_shard_on_block_mx::Call::new(&hid, &aff, &gu, &dw, &pos, &b2e)
            .gate_up_proj_scale(Some(&gs))
            .down_proj_scale(Some(&ds))
            .block_size(Some(c.b as i64))
            .skip_dma(Some(SkipMode { skip_token: true, skip_weight: false }))
    };
    let trn3 = Launch::new().lnc(2).generation(nki::hw::Generation::Trn3);
    let refused = |call: bwmm_shard_on_block_mx::Call, launch: &Launch, rule: MoeCteMxRule| {
        let err = call.launch(launch).map(|_| ()).expect_err(rule.message()).to_string();
        assert!(err.contains(rule.message()), "{rule:?}: {err}");
    };
    refused(call(), &Launch::new().lnc(1).generation(nki::hw::Generation::Trn3), MoeCteMxRule::Programs);
    refused(call().is_tensor_update_accumulating(false), &trn3, MoeCteMxRule::Accumulating);
    refused(call().conditions(Some(&short)), &trn3, MoeCteMxRule::Conditions);
    refused(call().expert_affinities_scaling_mode(ExpertAffinityScaleMode::PRE_SCALE_DELAYED), &trn3, MoeCteMxRule::ScalingMode);
    refused(call().down_proj_scale(None), &trn3, MoeCteMxRule::Scales);
    refused(call().down_activations(Some(&hid)), &trn3, MoeCteMxRule::Activations);
    refused(call().gate_and_up_proj_bias(Some(&gb)), &trn3, MoeCteMxRule::Bias);
}
