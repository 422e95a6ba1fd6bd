//! `moe_tkg` with MX weights (trn3, both paths) against a
//! float64 mixture: each expert is the float64 MX expert of the `mlp_tkg`
//! MX test (weights and block scales as the MX format describes them, the
//! activations quantized per 32 values to e4m3), here with the clamps and
//! either activation and without its down bias; each token's output is the
//! sum over its top-k experts of the expert's output times the token's
//! affinity for it, plus `Σ_e affinity[t, e] · b_down[e]`. With two
//! programs the first half of the top-k slots is summed apart from the
//! second and the two sums added, as the kernel exchanges them. The
//! all-expert mixture sums every expert's output (its down bias included)
//! times the token's affinity for it, in expert order. At the
//! library's MX selective configurations (fewer experts but at `H = 512`, and
//! the `I = 1536` ones at `H = 1024`, `I = 512`, for the float64 reference's
//! cost; the library comparison takes them at full size), its all-expert
//! ones at `T = 32` with smaller `H` and `I` (and two token tiles at `T =
//! 262`), skewed routings
//! (every token on one expert, experts without tokens), in both precision
//! modes; the all-expert dynamic form (one local expert of several global
//! ones, blocks of 8 to 256 tokens) against the same mixture of its one
//! expert, with blocks partly empty, every token on the local expert, none
//! on it, and one routed token past a block boundary; the emitted source
//! under NumPy against the emulator; the rules.

use crate::common::{Arg, CaseName, FP32_ATOL, as_dtype, assert_close, assert_refused_by, package_of, seed_of, tensor};
use crate::mlp::activation;
use crate::mlp_tkg_mx::{Clamps, Data, Mx, P, W, check_numpy_trn3, mx};
use crate::moe_tkg::{Routing, route};
use nki::{Dtype, Launch, Precision, Tensor};
use nkilib::moe::moe_tkg::moe_tkg::{ActFnType, ExpertAffinityScaleMode, MoeTkgCall, MoeTkgRule, moe_tkg, moe_tkg_violation};

/// The library tests' clamps: gate at most 7, up within `[-6, 8]`.
const CLAMPS: Clamps = [Some(7.0), Some(8.0), Some(-6.0)];

/// One selective MX configuration.
#[derive(Clone, Copy, Debug)]
struct Case {
    /// The weights' MX element type.
    w: W,
    /// Experts `E` (all local) and the experts `K` each token takes.
    e: usize,
    k: usize,
    /// Tokens, hidden and intermediate sizes.
    t: usize,
    h: usize,
    i: usize,
    /// Programs of the launch.
    lnc: usize,
    act: ActFnType,
    /// Gate/up and down biases.
    bias: bool,
    /// Every token's first choice is expert 0 (the others random).
    skewed: bool,
    /// The all-expert path (rank 0 of `E` local experts).
    all: bool,
}

/// The library's first MX selective configuration (16 of its 128 experts).
const BASE: Case =
    Case { w: W::Fp4, e: 16, k: 4, t: 1, h: 3072, i: 192, lnc: 2, act: ActFnType::Swish, bias: true, skewed: false, all: false };

const CASES: &[Case] = &[
    BASE,
    Case { t: 4, i: 384, ..BASE },
    Case { h: 512, i: 64, e: 128, k: 2, ..BASE },
    Case { t: 2, h: 1024, i: 512, e: 8, k: 8, w: W::E4m3, act: ActFnType::SiLU, ..BASE },
    Case { t: 8, h: 1024, i: 384, e: 8, k: 2, skewed: true, ..BASE },
    Case { w: W::E4m3, e: 8, k: 2, t: 4, h: 1024, i: 256, lnc: 1, act: ActFnType::SiLU, bias: false, skewed: true, all: false },
    ALL,
    // Every token on expert 0 alone: the other experts have no tokens.
    Case { t: 32, h: 1024, i: 192, e: 4, k: 1, skewed: true, ..ALL },
    Case { w: W::E4m3, t: 8, h: 1024, i: 256, e: 4, k: 2, lnc: 1, act: ActFnType::SiLU, bias: false, ..ALL },
    // Two programs splitting I: three tiles (two and one), every token on
    // expert 0 alone; two tiles at H = 512 (one MX tile of H).
    Case { t: 16, h: 1024, i: 1536, e: 3, k: 1, skewed: true, ..ALL },
    Case { w: W::E4m3, t: 8, h: 512, i: 1024, e: 2, k: 2, act: ActFnType::SiLU, ..ALL },
    // Two 128-token tiles of affinities, every token on expert 0 alone.
    Case { t: 160, h: 512, i: 1024, e: 2, k: 1, skewed: true, ..ALL },
    // Two token tiles (256 tokens, then 6 padded to 8), every token on
    // expert 0 alone: expert 1 has none.
    Case { t: 262, h: 512, i: 512, e: 2, k: 1, skewed: true, ..ALL },
];

/// The library's MX all-expert configuration at `T = 32` (two experts), at
/// `H = 1024`, `I = 512` for the float64 reference's cost.
const ALL: Case = Case { all: true, t: 32, h: 1024, i: 512, e: 2, k: 2, ..BASE };

/// A case's data: the rows (`hidden.x`), each expert's weights (their down
/// biases copied to `down_b`, and kept only on the all-expert path), the
/// routing and the affinities.
struct Inputs {
    hidden: Data,
    experts: Vec<Data>,
    /// `[E, H]`.
    down_b: Vec<f64>,
    /// `[T, K]`, distinct per token.
    idx: Vec<i64>,
    /// `[T, E]`, float32 values.
    aff: Vec<f64>,
}

impl Case {
    /// The `mlp_tkg` MX expert over `t` tokens (gate/up biases as the case)
    /// on one program: the gate/up sums run over the whole of `H` on both
    /// paths.
    fn expert(&self, t: usize) -> Mx {
        mx(1, t, self.h, self.i, self.w, false, self.bias)
    }

    fn inputs(&self) -> Inputs {
        let seed = seed_of(&self.name());
        let (t, h, e, k) = (self.t, self.h, self.e, self.k);
        let one = self.expert(1);
        let mut down_b = Vec::with_capacity(e * h);
        let experts = (0..e as u64)
            .map(|ex| {
                let mut d = one.data_seeded(seed + 100 + ex);
                down_b.extend_from_slice(&d.down_b);
                // The selective path adds the down biases after the expert sum.
                if !self.all {
                    d.down_b = vec![0.0; h];
                }
                d
            })
            .collect();
        let (idx, aff) = route(t, e, k, seed, if self.skewed { Routing::FirstOnZero } else { Routing::Random });
        Inputs { hidden: self.expert(t).data_seeded(seed), experts, down_b, idx, aff: as_dtype(&aff, Dtype::F32) }
    }

    /// The float64 mixture `[T·H]`; with `hw` the values the kernel holds
    /// in bfloat16 rounded so (each expert's tiles, the running sums, the
    /// affinities as the down bias's matmul reads them).
    fn reference(&self, x: &Inputs, hw: bool) -> Vec<f64> {
        let (t, h, e, k) = (self.t, self.h, self.e, self.k);
        let r = |v: f64| if hw { as_dtype(&[v], Dtype::Bf16)[0] } else { v };
        let all = self.expert(t);
        let xl = all.quantized_rows(&x.hidden, hw);
        let act = |g: f64| activation(self.act, g);
        if self.all {
            return self.all_expert_reference(x, &xl, hw);
        }
        let mut outs: Vec<Option<Vec<f64>>> = vec![None; e];
        for &ex in &x.idx {
            let d = &x.experts[ex as usize];
            outs[ex as usize].get_or_insert_with(|| all.down_rows(d, &all.gated_rows(d, &xl, hw, &act, CLAMPS), hw));
        }
        let per = k / self.lnc;
        let mut out = vec![0.0; t * h];
        for tok in 0..t {
            for c in 0..h {
                let shares = (0..self.lnc).map(|p| {
                    (p * per..(p + 1) * per).fold(0.0, |acc, j| {
                        let ex = x.idx[tok * k + j] as usize;
                        let o = outs[ex].as_ref().expect("computed")[tok * h + c];
                        r(acc + o * x.aff[tok * e + ex])
                    })
                });
                let sum = shares.reduce(|a, b| r(a + b)).expect("one program");
                let bias: f64 = if self.bias { (0..e).map(|ex| r(x.aff[tok * e + ex]) * x.down_b[ex * h + c]).sum() } else { 0.0 };
                out[tok * h + c] = r(sum + bias);
            }
        }
        out
    }

    /// The all-expert mixture of the quantized rows `xl`: every expert's
    /// output with its down bias, times the affinity (rounded to bfloat16
    /// with `hw`), summed in expert order. With two programs and at least
    /// two 512-column tiles of `I`, program `p` sums its share of the tiles
    /// (the first `⌈tiles / 2⌉`, then the rest) with the down bias on its
    /// half of the columns only, and the two sums are added at the end.
    fn all_expert_reference(&self, x: &Inputs, xl: &[Vec<f64>], hw: bool) -> Vec<f64> {
        let (t, h, e) = (self.t, self.h, self.e);
        let r = |v: f64| if hw { as_dtype(&[v], Dtype::Bf16)[0] } else { v };
        let all = self.expert(t);
        let unbiased = mx(1, t, h, self.i, self.w, false, false);
        let n_i = all.n_i();
        let progs = if self.lnc == 2 && n_i >= 2 { 2 } else { 1 };
        let per = n_i.div_ceil(progs);
        let act = |g: f64| activation(self.act, g);
        let mut sums = vec![vec![0.0; t * h]; progs];
        for ex in 0..e {
            let d = &x.experts[ex];
            let pl = all.gated_rows(d, xl, hw, &act, CLAMPS);
            for (p, acc) in sums.iter_mut().enumerate() {
                // This program's I tiles; the others' contribute exact zeros.
                let tiles = p * per..((p + 1) * per).min(n_i);
                let mine: Vec<Vec<f64>> = pl
                    .iter()
                    .map(|row| {
                        row.chunks(P * 4)
                            .enumerate()
                            .flat_map(|(it, c)| {
                                let keep = tiles.contains(&it);
                                c.iter().map(move |&v| if keep { v } else { 0.0 })
                            })
                            .collect()
                    })
                    .collect();
                let o = unbiased.down_rows(d, &mine, hw);
                let cols = p * h / progs..(p + 1) * h / progs;
                for tok in 0..t {
                    for c in 0..h {
                        let b = if self.bias && cols.contains(&c) { x.down_b[ex * h + c] } else { 0.0 };
                        let scaled = r(r(o[tok * h + c] + b) * x.aff[tok * e + ex]);
                        acc[tok * h + c] = if ex == 0 { scaled } else { r(acc[tok * h + c] + scaled) };
                    }
                }
            }
        }
        let mut out = sums.pop().expect("one program");
        if let Some(first) = sums.pop() {
            out.iter_mut().zip(first).for_each(|(o, f)| *o = r(f + *o));
        }
        out
    }

    /// The fused gate/up words `[E, 128, 2, H/512, I]`, scales `[E, 16, 2,
    /// H/512, I]` and biases `[E, I_p, 2, I/512, 4]`, the down words `[E,
    /// I_p, I/512, H]` and scales `[E, I_p/8, I/512, H]`.
    fn stacked(&self, x: &Inputs) -> [Vec<f64>; 5] {
        stack_experts(&self.expert(1), &x.experts)
    }

    /// The shapes of [`Case::stacked`]'s tensors.
    fn shapes(&self) -> [Vec<usize>; 5] {
        let m = self.expert(1);
        let (e, n_h, n_i, i, h) = (self.e, m.n_h(), m.n_i(), self.i, self.h);
        [vec![e, P, 2, n_h, i], vec![e, 16, 2, n_h, i], vec![e, m.b_p(), 2, n_i, 4], vec![e, m.p_i(), n_i, h], vec![e, m.p_i() / 8, n_i, h]]
    }

    fn dtypes(&self) -> [Dtype; 5] {
        let wd = self.w.dtype();
        [wd, Dtype::U8, Dtype::Bf16, wd, Dtype::U8]
    }

    /// The emulator's output.
    fn run(&self, x: &Inputs, precision: Precision) -> Vec<f32> {
        self.run_experts(x, (self, x), None, precision)
    }

    /// The emulator's output with the experts `wc`, `wx` (the case's own,
    /// or the dynamic form's one local expert with `dynamic`'s rank and
    /// block size).
    fn run_experts(&self, x: &Inputs, (wc, wx): (&Case, &Inputs), dynamic: Option<Dynamic>, precision: Precision) -> Vec<f32> {
        let (t, h, e, k) = (self.t, self.h, self.e, self.k);
        let (vals, shapes, dts) = (wc.stacked(wx), wc.shapes(), wc.dtypes());
        let ts: Vec<Tensor> = (0..5)
            .map(|j| {
                let packed = dts[j] == self.w.dtype();
                let v: Vec<i64> = vals[j].iter().map(|&w| w as i64).collect();
                if packed { Tensor::from_i64(&shapes[j], &v, dts[j]).unwrap() } else { tensor(&shapes[j], &vals[j], dts[j]) }
            })
            .collect();
        let hid = tensor(&[t, h], &x.hidden.x, Dtype::Bf16);
        let aff = tensor(&[t, e], &x.aff, Dtype::F32);
        let idx = Tensor::from_i64(&[t, k], &x.idx, Dtype::I32).unwrap();
        let db = tensor(&[wc.e, h], &wx.down_b, Dtype::Bf16);
        let rank = Tensor::from_i64(&[1, 1], &[dynamic.map_or(0, |d| d.rank as i64)], Dtype::I32).unwrap();
        let mut call = moe_tkg::Call::new(&hid, &ts[0], &ts[3], &aff, &idx, self.all)
            .expert_gate_up_weights_scale(&ts[1])
            .expert_down_weights_scale(&ts[4])
            .expert_affinities_scaling_mode(ExpertAffinityScaleMode::POST_SCALE)
            .activation_fn(self.act)
            .gate_clamp_upper_limit(7.0)
            .up_clamp_upper_limit(8.0)
            .up_clamp_lower_limit(-6.0);
        if self.bias {
            call = call.expert_gate_up_bias(&ts[2]).expert_down_bias(&db);
        }
        if self.all {
            call = call.rank_id(&rank);
        }
        if let Some(d) = dynamic {
            call = call.is_all_expert_dynamic(true).block_size(d.block as i64);
        }
        let launch = Launch::new().lnc(self.lnc).precision(precision).generation(nki::hw::Generation::Trn3);
        let out = call.launch(&launch).unwrap_or_else(|err| panic!("{}: {err}", self.name()));
        out.to_f32_vec()
    }

    /// The arguments for the NumPy executor, by keyword.
    fn numpy_kwargs(&self, x: &Inputs) -> Vec<(&'static str, Arg)> {
        self.numpy_kwargs_experts(x, (self, x), None)
    }

    /// [`Case::numpy_kwargs`] with the experts and options of
    /// [`Case::run_experts`].
    fn numpy_kwargs_experts(&self, x: &Inputs, (wc, wx): (&Case, &Inputs), dynamic: Option<Dynamic>) -> Vec<(&'static str, Arg)> {
        let (t, h, e, k) = (self.t, self.h, self.e, self.k);
        let [gu, gus, gub, dw, dws] = wc.stacked(wx);
        let [s_gu, s_gus, s_gub, s_dw, s_dws] = wc.shapes();
        let wd = self.w.dtype();
        let opt = |a: Arg| if self.bias { a } else { Arg::None };
        let act = if self.act == ActFnType::SiLU { "SiLU" } else { "Swish" };
        vec![
            ("hidden_input", Arg::Tensor(vec![t, h], x.hidden.x.clone(), Dtype::Bf16)),
            ("expert_gate_up_weights", Arg::Tensor(s_gu, gu, wd)),
            ("expert_down_weights", Arg::Tensor(s_dw, dw, wd)),
            ("expert_affinities", Arg::Tensor(vec![t, e], x.aff.clone(), Dtype::F32)),
            ("expert_index", Arg::Tensor(vec![t, k], x.idx.iter().map(|&v| v as f64).collect(), Dtype::I32)),
            ("is_all_expert", Arg::Bool(self.all)),
            (
                "rank_id",
                if self.all { Arg::Tensor(vec![1, 1], vec![dynamic.map_or(0.0, |d| d.rank as f64)], Dtype::I32) } else { Arg::None },
            ),
            ("expert_gate_up_bias", opt(Arg::Tensor(s_gub, gub, Dtype::Bf16))),
            ("expert_down_bias", opt(Arg::Tensor(vec![wc.e, h], wx.down_b.clone(), Dtype::Bf16))),
            ("expert_gate_up_weights_scale", Arg::Tensor(s_gus, gus, Dtype::U8)),
            ("expert_down_weights_scale", Arg::Tensor(s_dws, dws, Dtype::U8)),
            ("expert_affinities_scaling_mode", Arg::Member("ExpertAffinityScaleMode", "POST_SCALE")),
            ("activation_fn", Arg::Member("ActFnType", act)),
            ("gate_clamp_upper_limit", Arg::Float(7.0)),
            ("up_clamp_upper_limit", Arg::Float(8.0)),
            ("up_clamp_lower_limit", Arg::Float(-6.0)),
            ("is_all_expert_dynamic", Arg::Bool(dynamic.is_some())),
            ("block_size", dynamic.map_or(Arg::None, |d| Arg::Int(d.block as i64))),
        ]
    }
}

/// The experts' fused gate/up words `[E, 128, 2, H/512, I]`, scales `[E,
/// 16, 2, H/512, I]` and biases `[E, I_p, 2, I/512, 4]`, the down words
/// `[E, I_p, I/512, H]` and scales `[E, I_p/8, I/512, H]`, each expert of
/// the shapes of `m`.
pub(crate) fn stack_experts(m: &Mx, experts: &[Data]) -> [Vec<f64>; 5] {
    let words = |c: &[u32]| m.words(c).iter().map(|&v| v as f64).collect::<Vec<f64>>();
    let mut out: [Vec<f64>; 5] = Default::default();
    for d in experts {
        out[0].extend(fuse(&words(&d.gate), &words(&d.up), P));
        out[1].extend(fuse(&d.gate_s, &d.up_s, 16));
        out[2].extend(fuse(&d.gate_b, &d.up_b, m.b_p()));
        out[3].extend(words(&d.down));
        out[4].extend_from_slice(&d.down_s);
    }
    out
}

/// `[rows, 2, ..]` from the gate and up halves, each `[rows, ..]`.
fn fuse<T: Copy>(gate: &[T], up: &[T], rows: usize) -> Vec<T> {
    let n = gate.len() / rows;
    gate.chunks(n).zip(up.chunks(n)).flat_map(|(g, u)| g.iter().chain(u).copied()).collect()
}

/// Every case in fp32 precision: only the fp32 sums differ from float64
/// (and may move an e4m3 code of the activations).
#[test]
fn moe_tkg_mx_in_fp32_match_float64() {
    for c in CASES {
        let x = c.inputs();
        assert_close(&format!("{} fp32", c.name()), &c.run(&x, Precision::Fp32), &c.reference(&x, false), FP32_ATOL, 1e-5);
    }
}

/// Hardware precision: the reference rounds what the kernel holds in
/// bfloat16; an fp32 sum a bfloat16 step from the float64 one may round
/// the other way (and move an e4m3 code), a few thousandths of the
/// output's scale.
#[test]
fn moe_tkg_mx_in_hardware_precision_match_float64() {
    for c in CASES {
        let x = c.inputs();
        assert_close(&format!("{} hardware", c.name()), &c.run(&x, Precision::Hardware), &c.reference(&x, true), FP32_ATOL, 1.0 / 128.0);
    }
}

/// The emitted kernel under NumPy agrees with the emulator in both modes,
/// up to the matmuls' float32 sums (NumPy's order against the emulator's).
#[test]
fn moe_tkg_mx_emitted_under_numpy_equals_emulator() {
    let pkg = package_of("moe_tkg_mx_pkg", &[&moe_tkg::INFO]);
    for c in [CASES[1], CASES[5], CASES[8], CASES[10], CASES[12]] {
        let x = c.inputs();
        check_numpy_trn3(&pkg, "moe_tkg", &c.name(), c.lnc, || (vec![], c.numpy_kwargs(&x)), |p| c.run(&x, p));
    }
}

/// The MX all-expert path's dynamic form: the all-expert case `c` whose
/// `e` experts are the global ones and rank `rank`'s the one local expert
/// (the form takes one, as the library's), in blocks of `block` tokens;
/// with `cap` only the first `cap` tokens the routing gives the local
/// expert keep it.
#[derive(Clone, Copy, Debug)]
struct Dynamic {
    c: Case,
    rank: usize,
    block: usize,
    cap: Option<usize>,
}

/// The library's dynamic test shape: `T = 64` in blocks of 16.
const DYN: Case = Case { t: 64, h: 512, i: 512, e: 4, k: 2, ..ALL };

const DYNAMIC: &[Dynamic] = &[
    // Random top-2 of 4 experts, rank 1's: blocks partly empty.
    Dynamic { c: DYN, rank: 1, block: 16, cap: None },
    // Every token on the local expert (every block full); I in two tiles
    // split over the programs, which exchange each block's halves.
    Dynamic {
        c: Case { i: 1024, e: 2, k: 1, skewed: true, w: W::E4m3, act: ActFnType::SiLU, bias: false, ..DYN },
        rank: 0,
        block: 16,
        cap: None,
    },
    // The local expert has no token: only the static block runs, all skipped.
    Dynamic { c: Case { t: 32, e: 2, k: 1, skewed: true, lnc: 1, ..DYN }, rank: 1, block: 8, cap: None },
    // One token past the static block: the first dynamic block holds one
    // routed token, the second none.
    Dynamic { c: Case { e: 2, k: 1, skewed: true, ..DYN }, rank: 0, block: 16, cap: Some(17) },
    // Blocks of 256 in two gather tiles each: 300 routed tokens, the
    // dynamic block partly empty.
    Dynamic { c: Case { t: 512, e: 2, k: 1, skewed: true, lnc: 1, bias: false, ..DYN }, rank: 0, block: 256, cap: Some(300) },
];

impl Dynamic {
    /// The global inputs (the routing's affinities `[T, E]`, capped) and
    /// the local expert's view of them as an all-expert case of one expert:
    /// its weights and its column of the affinities.
    fn inputs(&self) -> (Inputs, Case, Inputs) {
        let c = self.c;
        let mut x = c.inputs();
        if let Some(cap) = self.cap {
            let mut kept = 0;
            for tok in 0..c.t {
                let a = &mut x.aff[tok * c.e + self.rank];
                if *a != 0.0 {
                    if kept == cap {
                        *a = 0.0;
                    } else {
                        kept += 1;
                    }
                }
            }
        }
        let seed = seed_of(&c.name());
        let d = c.expert(1).data_seeded(seed + 100 + self.rank as u64);
        let local = Inputs {
            hidden: c.expert(c.t).data_seeded(seed),
            down_b: d.down_b.clone(),
            experts: vec![d],
            idx: vec![0; c.t],
            aff: (0..c.t).map(|tok| x.aff[tok * c.e + self.rank]).collect(),
        };
        (x, Case { e: 1, k: 1, ..c }, local)
    }

    /// The tokens the local expert takes.
    fn routed(&self, x: &Inputs) -> usize {
        (0..self.c.t).filter(|&tok| x.aff[tok * self.c.e + self.rank] != 0.0).count()
    }
}

/// The dynamic form in both precision modes against the float64 mixture
/// of its one local expert (the static form's reference: a token the
/// expert does not take has a zero affinity, so a zero output).
#[test]
fn moe_tkg_mx_dynamic_matches_float64() {
    for d in DYNAMIC {
        let (x, wc, wx) = d.inputs();
        let routed = d.routed(&x);
        assert!(routed < d.c.t || d.rank == 0, "{}: the routing takes every token", d.name());
        for (precision, hw, rtol) in [(Precision::Fp32, false, 1e-5), (Precision::Hardware, true, 1.0 / 128.0)] {
            let got = d.c.run_experts(&x, (&wc, &wx), Some(*d), precision);
            let want = wc.reference(&wx, hw);
            assert_close(&format!("{} {precision:?} ({routed} routed)", d.name()), &got, &want, FP32_ATOL, rtol);
        }
    }
}

/// The emitted dynamic form under NumPy agrees with the emulator.
#[test]
fn moe_tkg_mx_dynamic_emitted_under_numpy_equals_emulator() {
    let pkg = package_of("moe_tkg_mx_dynamic_pkg", &[&moe_tkg::INFO]);
    for d in [DYNAMIC[1], DYNAMIC[3]] {
        let (x, wc, wx) = d.inputs();
        let c = d.c;
        check_numpy_trn3(
            &pkg,
            "moe_tkg",
            &d.name(),
            c.lnc,
            || (vec![], c.numpy_kwargs_experts(&x, (&wc, &wx), Some(d))),
            |p| c.run_experts(&x, (&wc, &wx), Some(d), p),
        );
    }
}

/// The MX rules, as `const fn` and when the kernel is traced.
#[test]
fn moe_tkg_mx_rules_refuse_by_name() {
    const OK: MoeTkgCall = MoeTkgCall {
        mx: true,
        has_gate_up_scale: true,
        has_down_scale: true,
        has_down_bias: true,
        expert_affinities_scaling_mode: ExpertAffinityScaleMode::POST_SCALE,
        ..MoeTkgCall::new(4, 3072, 384, 128, 4, 2, false)
    };
    assert_eq!(moe_tkg_violation(OK), None);
    assert_eq!(moe_tkg_violation(MoeTkgCall { intermediate: 1536, hidden: 3584, ..OK }), None);
    let cases = [
        (MoeTkgCall { is_all_expert: true, has_rank_id: true, has_hidden_input_scale: true, ..OK }, MoeTkgRule::MxHiddenInputScale),
        (
            MoeTkgCall { is_all_expert: true, has_rank_id: true, is_all_expert_dynamic: true, has_block_size: true, block_size: 2, ..OK },
            MoeTkgRule::MxDynamicExperts,
        ),
        (MoeTkgCall { is_all_expert: true, has_rank_id: true, is_all_expert_dynamic: true, experts: 1, ..OK }, MoeTkgRule::Dynamic),
        (MoeTkgCall { has_hidden_input_scale: true, ..OK }, MoeTkgRule::HiddenInputScale),
        (MoeTkgCall { has_down_scale: false, ..OK }, MoeTkgRule::MxScales),
        (MoeTkgCall { hidden: 3200, ..OK }, MoeTkgRule::MxHidden),
        (MoeTkgCall { intermediate: 400, ..OK }, MoeTkgRule::MxIntermediate),
        (MoeTkgCall { intermediate: 640, ..OK }, MoeTkgRule::MxIntermediate),
        (MoeTkgCall { top_k: 3, ..OK }, MoeTkgRule::MxTopK),
        (MoeTkgCall { expert_affinities_scaling_mode: ExpertAffinityScaleMode::NO_SCALE, ..OK }, MoeTkgRule::MxScalingMode),
        (MoeTkgCall { experts: 256, ..OK }, MoeTkgRule::MxBiasExperts),
    ];
    assert_refused_by(moe_tkg_violation, cases);
    assert_eq!(moe_tkg_violation(MoeTkgCall { experts: 256, has_down_bias: false, ..OK }), None);
    assert_eq!(moe_tkg_violation(MoeTkgCall { top_k: 3, programs: 1, ..OK }), None);
    // The all-expert path splits neither the slots nor the bias matmul.
    assert_eq!(moe_tkg_violation(MoeTkgCall { is_all_expert: true, has_rank_id: true, top_k: 3, experts: 256, tokens: 256, ..OK }), None);
    // It takes the tokens in tiles of 256, as many as given.
    assert_eq!(moe_tkg_violation(MoeTkgCall { is_all_expert: true, has_rank_id: true, tokens: 2048, ..OK }), None);
    // The dynamic form: one local expert, blocks the library takes.
    let dynamic =
        MoeTkgCall { is_all_expert: true, has_rank_id: true, is_all_expert_dynamic: true, has_block_size: true, experts: 1, ..OK };
    for (t, bs) in [(64, 16), (32, 8), (96, 32), (512, 256), (16, 8)] {
        assert_eq!(moe_tkg_violation(MoeTkgCall { tokens: t, block_size: bs, ..dynamic }), None, "T = {t}, block {bs}");
    }
    for (t, bs) in [(64, 0), (64, 12), (64, 64), (96, 48), (384, 192), (80, 32), (8, 4)] {
        assert_eq!(
            moe_tkg_violation(MoeTkgCall { tokens: t, block_size: bs, ..dynamic }),
            Some(MoeTkgRule::MxDynamicBlockSize),
            "T = {t}, block {bs}"
        );
    }
    // It splits I, not H: three MX tiles of H run on two programs.
    assert_eq!(moe_tkg_violation(MoeTkgCall { is_all_expert: true, has_rank_id: true, hidden: 1536, ..OK }), None);

    let c = Case { h: 512, i: 64, e: 4, k: 2, bias: false, ..BASE };
    let x = c.inputs();
    let (vals, shapes) = (c.stacked(&x), c.shapes());
    let packed = |j: usize| Tensor::from_i64(&shapes[j], &vals[j].iter().map(|&w| w as i64).collect::<Vec<_>>(), c.w.dtype()).unwrap();
    let (gu, dw) = (packed(0), packed(3));
    let (gus, dws) = (tensor(&shapes[1], &vals[1], Dtype::U8), tensor(&shapes[4], &vals[4], Dtype::U8));
    let hid = tensor(&[1, 512], &x.hidden.x, Dtype::Bf16);
    let aff = tensor(&[1, 4], &x.aff, Dtype::F32);
    let idx = Tensor::from_i64(&[1, 2], &x.idx, Dtype::I32).unwrap();
    let rank = Tensor::from_i64(&[1, 1], &[0], Dtype::I32).unwrap();
    let call = |all: bool| {
        let c = moe_tkg::Call::new(&hid, &gu, &dw, &aff, &idx, all)
            .expert_gate_up_weights_scale(&gus)
            .expert_down_weights_scale(&dws)
            .expert_affinities_scaling_mode(ExpertAffinityScaleMode::POST_SCALE);
        if all { c.rank_id(&rank) } else { c }
    };
    let trn3 = Launch::new().lnc(2).generation(nki::hw::Generation::Trn3);
    let ok = call(false).launch(&trn3);
    assert!(ok.is_ok(), "{:?}", ok.err());
    let refused = |c: moe_tkg::Call, launch: &Launch, msg: &str| {
        let e = c.launch(launch).map(|_| ()).expect_err(msg).to_string();
        assert!(e.contains(msg), "{e}");
    };
    refused(call(false), &Launch::new().lnc(2), "MX weights need trn3");
    // H = 512 is one packed tile and I one 512-column tile: both programs
    // compute every tile and each stores half of the columns.
    let ok = call(true).launch(&trn3);
    assert!(ok.is_ok(), "{:?}", ok.err());
    refused(call(true).hidden_input_scale(&aff), &trn3, "hidden_input_scale goes with a hidden_input quantized upstream");
    refused(
        call(true).is_all_expert_dynamic(true).block_size(16),
        &trn3,
        "dynamic strategy (is_all_expert_dynamic) takes one local expert",
    );
    refused(call(false).expert_down_weights_scale(&gus), &trn3, "expert_down_weights_scale must be [4, 2, 1, 512]");
    refused(
        call(false).expert_affinities_scaling_mode(ExpertAffinityScaleMode::NO_SCALE),
        &trn3,
        "expert_affinities_scaling_mode must be POST_SCALE",
    );
}
