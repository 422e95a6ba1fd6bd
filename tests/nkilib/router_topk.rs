//! The library's `router_topk` against a float64 MoE router written from its
//! documented math — logits `x @ w + b`, softmax or sigmoid before or after the
//! top-k, the L1 norm, the scatter to `[T, E]` — over its documented shapes
//! (tokens 1..=2048, experts 8..=512, k 1..=8) in both precision modes, every
//! pipeline, both `x` layouts, column tiling, the PE bias broadcast and token
//! sharding; ties; the library's rules; its emitted source under NumPy against
//! the emulator.

use crate::common;

use crate::common::{Arg, as_dtype, run_numpy, tensor, uniform};
use nki::emit::PyEnum;
use nki::{Dtype, Launch, Precision, Tensor};
use nkilib::router_topk::router_topk::{RouterActFnType, RouterRule, RouterShape, router_topk, router_topk_violation};

/// The flags of one call (the library's keyword arguments).
#[derive(Clone, Copy, Debug)]
struct Flags {
    act_fn: RouterActFnType,
    pre_norm: bool,
    norm: bool,
    indirect: bool,
    eager: bool,
    bias: bool,
    pe_bias: bool,
    column_tiling: bool,
    x_hbm_layout: i64,
    shard: bool,
}

impl Flags {
    /// Softmax after the top-k, one-hot scatter (the library's defaults but `router_pre_norm`).
    const POST_SOFTMAX: Flags = Flags {
        act_fn: RouterActFnType::SOFTMAX,
        pre_norm: false,
        norm: false,
        indirect: false,
        eager: false,
        bias: false,
        pe_bias: false,
        column_tiling: false,
        x_hbm_layout: 0,
        shard: false,
    };
    /// Softmax over all experts before the top-k, stored unscattered.
    const PRE_SOFTMAX: Flags = Flags { pre_norm: true, ..Flags::POST_SOFTMAX };
    /// Softmax before the top-k, the selected probabilities renormalised and scattered.
    const PRE_SOFTMAX_NORM: Flags = Flags { pre_norm: true, norm: true, ..Flags::POST_SOFTMAX };
    /// Sigmoid of the selected logits, scattered by indirect DMA.
    const POST_SIGMOID: Flags = Flags { act_fn: RouterActFnType::SIGMOID, indirect: true, ..Flags::POST_SOFTMAX };
    /// Sigmoid before the top-k, renormalised, scattered by indirect DMA.
    const PRE_SIGMOID_NORM: Flags =
        Flags { act_fn: RouterActFnType::SIGMOID, pre_norm: true, norm: true, indirect: true, ..Flags::POST_SOFTMAX };
}

/// A router problem: `x` `[T, H]`, `w` `[H, E]`, `bias` `[E]`, `k`.
struct Problem {
    t: usize,
    h: usize,
    e: usize,
    k: usize,
    x: Vec<f64>,
    w: Vec<f64>,
    bias: Vec<f64>,
}

/// What the kernel returned.
struct Got {
    logits: Vec<f32>,
    idx: Vec<i64>,
    aff: Vec<f32>,
    eager: Option<Vec<f32>>,
}

impl Problem {
    /// Logits of magnitude about 1: `x` in [-1, 1), `w` in ±2/√H, `bias` in ±0.5.
    fn new(t: usize, h: usize, e: usize, k: usize, seed: u64) -> Problem {
        let scale = 2.0 / (h as f64).sqrt();
        let w = uniform(h * e, seed + 1, -scale, scale);
        Problem { t, h, e, k, x: uniform(t * h, seed, -1.0, 1.0), w, bias: uniform(e, seed + 2, -0.5, 0.5) }
    }

    /// `x @ w (+ bias)` in float64 from the inputs rounded to `dtype`.
    fn logits(&self, dtype: Dtype, bias: bool) -> Vec<f64> {
        let (x, w, b) = (as_dtype(&self.x, dtype), as_dtype(&self.w, dtype), as_dtype(&self.bias, Dtype::F32));
        let mut out = vec![0.0; self.t * self.e];
        for ti in 0..self.t {
            for hi in 0..self.h {
                let xv = x[ti * self.h + hi];
                for (o, wv) in out[ti * self.e..(ti + 1) * self.e].iter_mut().zip(&w[hi * self.e..(hi + 1) * self.e]) {
                    *o += xv * wv;
                }
            }
            if bias {
                for (o, bv) in out[ti * self.e..(ti + 1) * self.e].iter_mut().zip(&b) {
                    *o += bv;
                }
            }
        }
        out
    }

    /// Runs the kernel with `x` and `w` in `dtype`, the outputs `router_logits`
    /// and `expert_affinities` passed in `dtype`, `expert_index` in uint32.
    fn run(&self, flags: Flags, dtype: Dtype, precision: Precision) -> nki::Result<Got> {
        let (t, h, e, k) = (self.t, self.h, self.e, self.k);
        let x = if flags.x_hbm_layout == 0 {
            let xt: Vec<f64> = (0..h * t).map(|i| self.x[(i % t) * h + i / t]).collect();
            tensor(&[h, t], &xt, dtype)
        } else {
            tensor(&[t, h], &self.x, dtype)
        };
        let w = tensor(&[h, e], &self.w, dtype);
        let bias = tensor(&[1, e], &self.bias, Dtype::F32);
        let logits = Tensor::zeros(&[t, e], dtype)?;
        let aff = Tensor::zeros(&[t, e], dtype)?;
        let idx = Tensor::zeros(&[t, k], Dtype::U32)?;
        let mut call = router_topk::Call::new(&x, &w, &logits, &aff, &idx, flags.act_fn, k as i64, flags.x_hbm_layout, 0)
            .router_pre_norm(flags.pre_norm)
            .norm_topk_prob(flags.norm)
            .use_indirect_dma_scatter(flags.indirect)
            .return_eager_affi(flags.eager)
            .use_PE_broadcast_w_bias(flags.pe_bias)
            .use_column_tiling(flags.column_tiling)
            .shard_on_tokens(flags.shard);
        if flags.bias {
            call = call.w_bias(&bias);
        }
        let launch = Launch::new().precision(precision).lnc(if flags.shard { 2 } else { 1 });
        let out = call.launch(&launch)?;
        assert_eq!(out.len(), if flags.eager { 4 } else { 3 });
        let (o_logits, o_idx, o_aff) = (&out.0[0], &out.0[1], &out.0[2]);
        assert_eq!((o_logits.shape(), o_logits.dtype()), (&[t, e][..], dtype));
        assert_eq!((o_idx.shape(), o_idx.dtype()), (&[t, k][..], Dtype::U32));
        assert_eq!((o_aff.shape(), o_aff.dtype()), (&[t, e][..], dtype));
        let eager = out.0.get(3).map(|o| {
            assert_eq!((o.shape(), o.dtype()), (&[t, k][..], Dtype::F32));
            o.to_f32_vec()
        });
        Ok(Got { logits: o_logits.to_f32_vec(), idx: o_idx.to_i64_vec(), aff: o_aff.to_f32_vec(), eager })
    }
}

/// The activation of one row of logits in float64.
pub(crate) fn activate(act_fn: RouterActFnType, row: &[f64]) -> Vec<f64> {
    if act_fn == RouterActFnType::SIGMOID {
        return row.iter().map(|v| 1.0 / (1.0 + (-v).exp())).collect();
    }
    let max = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let sum: f64 = row.iter().map(|v| (v - max).exp()).sum();
    row.iter().map(|v| (v - max).exp() / sum).collect()
}

/// The experts of `scores` best first, the lower index first among equals.
pub(crate) fn ranked(scores: &[f64]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    order
}

/// How close the kernel must be: `score` bounds the error of a score (logit or
/// activation) that decides the selection, and each output value `g` of a
/// reference `w` must satisfy `|g - w| <= abs + rel·|w|`.
#[derive(Clone, Copy)]
struct Tol {
    score: f64,
    abs: f64,
    rel: f64,
}

const FP32: Tol = Tol { score: 2e-5, abs: 2e-5, rel: 1e-5 };
/// bf16 outputs: one rounding (2^-9 relative) of fp32 values close to the reference.
const BF16: Tol = Tol { score: 2e-5, abs: 1e-5, rel: 1.0 / 256.0 };

fn close(what: &str, got: &[f32], want: &[f64], tol: Tol) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let bound = tol.abs + tol.rel * w.abs();
        assert!((f64::from(g) - w).abs() <= bound, "{what}: element {i}: {g} vs {w} (bound {bound:.2e})");
    }
}

/// Checks every output of `got` against the float64 router for `flags`.
fn check(what: &str, p: &Problem, flags: Flags, dtype: Dtype, got: &Got, tol: Tol) {
    let (e, k) = (p.e, p.k);
    let logits = p.logits(dtype, flags.bias);
    close(&format!("{what} router_logits"), &got.logits, &logits, tol);
    let mut want_aff = vec![0.0; p.t * e];
    let mut want_eager = vec![0.0; p.t * k];
    for ti in 0..p.t {
        let row = &logits[ti * e..(ti + 1) * e];
        let act = activate(flags.act_fn, row);
        let scores = if flags.pre_norm { &act } else { row };
        let order = ranked(scores);
        let idx: Vec<usize> = got.idx[ti * k..(ti + 1) * k].iter().map(|&i| i as usize).collect();
        // The selection: distinct experts whose scores are the k best, in order;
        // where the reference's ranks are separated by more than the score
        // error, exactly the reference's experts.
        for (r, &i) in idx.iter().enumerate() {
            assert!(i < e && !idx[..r].contains(&i), "{what} token {ti}: expert_index {idx:?}");
            let best = scores[order[r]];
            assert!(
                (scores[i] - best).abs() <= tol.score,
                "{what} token {ti} rank {r}: expert {i} scores {} but rank {r} is {best}",
                scores[i]
            );
            let apart = |j: usize| (scores[order[j]] - best).abs() > 2.0 * tol.score;
            if (r == 0 || apart(r - 1)) && (r + 1 == order.len() || apart(r + 1)) {
                assert_eq!(i, order[r], "{what} token {ti} rank {r}: {idx:?} vs {:?}", &order[..k]);
            }
        }
        // The affinities of those experts.
        let selected: Vec<f64> = if flags.pre_norm {
            let vals: Vec<f64> = idx.iter().map(|&i| act[i]).collect();
            let sum: f64 = vals.iter().sum();
            if flags.norm { vals.iter().map(|v| v / sum).collect() } else { vals }
        } else {
            activate(flags.act_fn, &idx.iter().map(|&i| row[i]).collect::<Vec<_>>())
        };
        want_eager[ti * k..(ti + 1) * k].copy_from_slice(&selected);
        if flags.pre_norm && !flags.norm {
            want_aff[ti * e..(ti + 1) * e].copy_from_slice(&act);
        } else {
            for (&i, v) in idx.iter().zip(&selected) {
                want_aff[ti * e + i] = *v;
            }
        }
    }
    close(&format!("{what} expert_affinities"), &got.aff, &want_aff, tol);
    if let Some(eager) = &got.eager {
        close(&format!("{what} eager affinities"), eager, &want_eager, Tol { rel: tol.rel.min(1e-5), ..tol });
    }
}

fn run_and_check(what: &str, p: &Problem, flags: Flags, dtype: Dtype, precision: Precision, tol: Tol) {
    let got = p.run(flags, dtype, precision).unwrap_or_else(|e| panic!("{what}: {e}"));
    check(what, p, flags, dtype, &got, tol);
}

/// `(T, H, E, k)`: the smallest call, a decode step, a prefill with a partial
/// token tile, and the largest documented token count and expert count.
const SHAPES: [(usize, usize, usize, usize); 4] = [(1, 128, 8, 1), (4, 2048, 64, 2), (300, 1024, 128, 8), (2048, 512, 512, 8)];

#[test]
fn fp32_every_pipeline_matches_the_float64_router_over_the_documented_shapes() {
    let pipelines =
        [("post-softmax", Flags::POST_SOFTMAX), ("pre-softmax", Flags::PRE_SOFTMAX), ("pre-softmax-norm", Flags::PRE_SOFTMAX_NORM)];
    for (si, (t, h, e, k)) in SHAPES.into_iter().enumerate() {
        let p = Problem::new(t, h, e, k, 100 + si as u64);
        for (pi, (name, flags)) in pipelines.into_iter().enumerate() {
            // Alternate the x layout and the bias over the cases.
            let flags = Flags { x_hbm_layout: ((si + pi) % 2) as i64, bias: (si + pi) % 3 != 0, ..flags };
            run_and_check(&format!("{name} {:?} {flags:?}", (t, h, e, k)), &p, flags, Dtype::F32, Precision::Fp32, FP32);
        }
    }
}

#[test]
fn fp32_sigmoid_and_the_indirect_scatter_match_the_float64_router() {
    // The indirect scatter takes T <= 128 or a multiple of 128.
    for (si, (t, h, e, k)) in [(1, 128, 8, 1), (4, 2048, 64, 2), (384, 1024, 128, 8), (2048, 512, 512, 8)].into_iter().enumerate() {
        let p = Problem::new(t, h, e, k, 200 + si as u64);
        let softmax_indirect = Flags { indirect: true, eager: t <= 128, ..Flags::POST_SOFTMAX };
        for (name, flags) in [
            ("post-sigmoid", Flags::POST_SIGMOID),
            ("pre-sigmoid-norm", Flags::PRE_SIGMOID_NORM),
            ("post-softmax-indirect", softmax_indirect),
            // Sigmoid before the top-k needs no indirect scatter (the library refuses only ACT2 sigmoid).
            ("pre-sigmoid-norm one-hot", Flags { indirect: false, ..Flags::PRE_SIGMOID_NORM }),
            ("pre-sigmoid", Flags { indirect: false, norm: false, ..Flags::PRE_SIGMOID_NORM }),
        ] {
            let flags = Flags { bias: true, x_hbm_layout: (si % 2) as i64, ..flags };
            run_and_check(&format!("{name} {:?}", (t, h, e, k)), &p, flags, Dtype::F32, Precision::Fp32, FP32);
        }
    }
}

#[test]
fn model_router_shapes_in_both_precision_modes() {
    // Mixtral-like (8 experts, top-2 softmax after the top-k), Qwen3-MoE-like
    // (128 experts, top-8 softmax renormalised), DeepSeek-V3-like (256 experts,
    // top-8 sigmoid renormalised, H = 7168).
    let models = [
        ("mixtral", (128, 4096, 8, 2), Flags { x_hbm_layout: 1, ..Flags::POST_SOFTMAX }),
        ("qwen3-moe", (96, 2048, 128, 8), Flags { x_hbm_layout: 1, ..Flags::PRE_SOFTMAX_NORM }),
        ("deepseek-v3", (32, 7168, 256, 8), Flags { bias: true, ..Flags::PRE_SIGMOID_NORM }),
    ];
    for (i, (name, (t, h, e, k), flags)) in models.into_iter().enumerate() {
        let p = Problem::new(t, h, e, k, 1000 + i as u64);
        run_and_check(&format!("{name} fp32"), &p, flags, Dtype::F32, Precision::Fp32, FP32);
        run_and_check(&format!("{name} bf16"), &p, flags, Dtype::Bf16, Precision::Hardware, BF16);
    }
}

#[test]
fn hardware_mode_bf16_rounds_the_outputs_once() {
    for (si, (t, h, e, k)) in [(1, 128, 8, 1), (4, 2048, 64, 2), (256, 1024, 128, 8)].into_iter().enumerate() {
        let p = Problem::new(t, h, e, k, 300 + si as u64);
        let pre_sigmoid_one_hot = Flags { indirect: false, ..Flags::PRE_SIGMOID_NORM };
        for flags in [
            Flags::POST_SOFTMAX,
            Flags::PRE_SOFTMAX,
            Flags::PRE_SOFTMAX_NORM,
            Flags::POST_SIGMOID,
            Flags::PRE_SIGMOID_NORM,
            pre_sigmoid_one_hot,
        ] {
            let flags = Flags { bias: true, x_hbm_layout: (si % 2) as i64, eager: flags.indirect && t <= 128, ..flags };
            run_and_check(&format!("bf16 {:?} {flags:?}", (t, h, e, k)), &p, flags, Dtype::Bf16, Precision::Hardware, BF16);
        }
    }
    // The library's T = 5 over two programs (2 and 3 tokens), both x layouts.
    let p = Problem::new(5, 512, 128, 4, 310);
    for x_hbm_layout in [0, 1] {
        let flags = Flags { shard: true, x_hbm_layout, ..Flags::POST_SOFTMAX };
        run_and_check(&format!("bf16 sharded T = 5 {flags:?}"), &p, flags, Dtype::Bf16, Precision::Hardware, BF16);
    }
}

#[test]
fn column_tiling_pe_bias_broadcast_and_token_sharding_keep_the_results() {
    // Column tiles of 32 (T = 20) and 64 (T = 50) columns, with 1, 3 and 16 hidden tiles.
    for (t, h, e, k) in [(20, 128, 16, 4), (20, 384, 32, 8), (50, 2048, 64, 2), (128, 256, 128, 8)] {
        let p = Problem::new(t, h, e, k, 400 + t as u64 + h as u64);
        for flags in [Flags::POST_SOFTMAX, Flags::PRE_SOFTMAX_NORM] {
            let flags = Flags { column_tiling: true, bias: true, pe_bias: true, ..flags };
            run_and_check(&format!("column tiling {:?} {flags:?}", (t, h, e, k)), &p, flags, Dtype::F32, Precision::Fp32, FP32);
        }
    }
    // Token sharding over 2 programs, one-hot and indirect scatter, partial token
    // tiles; odd T splits unevenly (program 0 takes T / 2 rounded down, program 1 the rest).
    for (t, h, e, k) in [(2, 128, 8, 2), (5, 512, 128, 4), (300, 512, 64, 4), (301, 256, 32, 2), (512, 256, 128, 8)] {
        let p = Problem::new(t, h, e, k, 500 + t as u64);
        for flags in [Flags::POST_SOFTMAX, Flags::PRE_SOFTMAX, Flags::POST_SIGMOID, Flags::PRE_SIGMOID_NORM] {
            let (first, last) = (t / 2, t - t / 2);
            if flags.indirect && [first, last].iter().any(|&n| n > 128 && n % 128 != 0) {
                continue;
            }
            let flags = Flags { shard: true, bias: true, x_hbm_layout: (t % 2) as i64, ..flags };
            run_and_check(&format!("sharded {:?} {flags:?}", (t, h, e, k)), &p, flags, Dtype::F32, Precision::Fp32, FP32);
        }
    }
}

/// Experts 2, 5 and 9 of 16 score exactly alike (equal columns of `w`, equal
/// bias) and above the others.
fn tied_problem(t: usize, k: usize) -> Problem {
    let (h, e) = (256, 16);
    let mut p = Problem::new(t, h, e, k, 600);
    for hi in 0..h {
        let v = p.w[hi * e + 2];
        p.w[hi * e + 5] = v;
        p.w[hi * e + 9] = v;
    }
    for (i, b) in p.bias.iter_mut().enumerate() {
        *b = if [2, 5, 9].contains(&i) { 4.0 } else { 0.0 };
    }
    p
}

#[test]
fn tied_experts_are_selected_lowest_index_first() {
    for flags in [Flags::POST_SOFTMAX, Flags::PRE_SOFTMAX, Flags::PRE_SOFTMAX_NORM, Flags::POST_SIGMOID] {
        let flags = Flags { bias: true, ..flags };
        for (k, want) in [(2, &[2, 5][..]), (3, &[2, 5, 9]), (4, &[2, 5, 9])] {
            let p = tied_problem(8, k);
            let got = p.run(flags, Dtype::F32, Precision::Fp32).unwrap();
            for ti in 0..p.t {
                let row = &got.idx[ti * k..(ti + 1) * k];
                assert_eq!(&row[..want.len()], want.iter().map(|&i| i as i64).collect::<Vec<_>>(), "{flags:?} k {k} token {ti}");
                // Equal scores give equal affinities.
                let aff = &got.aff[ti * p.e..(ti + 1) * p.e];
                assert!(want.iter().all(|&i| aff[i] == aff[want[0]]), "{flags:?} k {k}: {aff:?}");
            }
            check(&format!("ties {flags:?} k {k}"), &p, flags, Dtype::F32, &got, FP32);
        }
    }
}

#[test]
fn skipped_stores_leave_the_callers_tensors_alone() {
    let p = Problem::new(16, 128, 32, 4, 700);
    let x = tensor(&[128, 16], &p.x, Dtype::F32);
    let w = tensor(&[128, 32], &p.w, Dtype::F32);
    let sentinel = |shape: &[usize], dtype| Tensor::from_i64(shape, &vec![7; shape.iter().product()], dtype).unwrap();
    let (logits, aff, idx) = (sentinel(&[16, 32], Dtype::F32), sentinel(&[16, 32], Dtype::F32), sentinel(&[16, 4], Dtype::U32));
    let out = router_topk::Call::new(&x, &w, &logits, &aff, &idx, RouterActFnType::SOFTMAX, 4, 0, 0)
        .router_pre_norm(false)
        .skip_store_router_logits(true)
        .skip_store_expert_index(true)
        .launch(&Launch::new())
        .unwrap();
    assert!(out.0[0].to_i64_vec().iter().all(|&v| v == 7) && out.0[1].to_i64_vec().iter().all(|&v| v == 7));
    // The affinities are still written: k of them per token, summing to 1.
    let a = out.0[2].to_f32_vec();
    for row in a.chunks(32) {
        assert_eq!(row.iter().filter(|&&v| v != 0.0).count(), 4, "{row:?}");
        assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-5, "{row:?}");
    }
}

#[test]
fn the_library_rules_are_refused_naming_the_parameter() {
    let p = Problem::new(8, 256, 16, 2, 800);
    let refused = |flags: Flags, k: usize, says: &str| {
        let p = Problem { k, x: p.x.clone(), w: p.w.clone(), bias: p.bias.clone(), ..p };
        let e = p.run(flags, Dtype::F32, Precision::Fp32).err().unwrap_or_else(|| panic!("{flags:?} k {k} ran"));
        assert!(e.message.contains(says), "{e}");
    };
    refused(Flags::POST_SOFTMAX, 9, "k must be within 1..=8, got 9");
    refused(
        Flags { indirect: false, ..Flags::POST_SIGMOID },
        2,
        "act_fn SIGMOID without router_pre_norm requires use_indirect_dma_scatter=True",
    );
    refused(Flags { x_hbm_layout: 2, ..Flags::POST_SOFTMAX }, 2, "x_hbm_layout must be 0 ([H, T]) or 1 ([T, H]), got 2");
    let shard_one = Flags { shard: true, ..Flags::POST_SOFTMAX };
    let e = Problem::new(1, 128, 8, 1, 1).run(shard_one, Dtype::F32, Precision::Fp32).err().expect("T = 1 sharded refused");
    assert!(e.message.contains("at least one token per program, got T = 1 for 2 programs"), "{e}");
    // The uneven shards each meet the indirect-scatter rule: 257 tokens are 128 + 129.
    let e = Problem::new(257, 128, 8, 1, 3)
        .run(Flags { shard: true, ..Flags::POST_SIGMOID }, Dtype::F32, Precision::Fp32)
        .err()
        .expect("T = 257 sharded refused");
    assert!(e.message.contains("tokens (129) must be <= 128 or a multiple of 128"), "{e}");
    let big = Problem::new(200, 128, 8, 1, 2);
    let e = big.run(Flags::POST_SIGMOID, Dtype::F32, Precision::Fp32).err().expect("T = 200 refused");
    assert!(e.message.contains("tokens (200) must be <= 128 or a multiple of 128"), "{e}");
    let e = big.run(Flags { eager: true, ..Flags::POST_SOFTMAX }, Dtype::F32, Precision::Fp32).err().expect("eager T = 200 refused");
    assert!(e.message.contains("return_eager_affi without router_pre_norm needs T <= 128, got T = 200"), "{e}");
    // Shapes: H not a multiple of 128, too many experts, outputs of the wrong shape.
    let launch = Launch::new();
    let z = |shape: &[usize], dtype| Tensor::zeros(shape, dtype).unwrap();
    let e = router_topk::Call::new(
        &z(&[64, 4], Dtype::F32),
        &z(&[64, 8], Dtype::F32),
        &z(&[4, 8], Dtype::F32),
        &z(&[4, 8], Dtype::F32),
        &z(&[4, 1], Dtype::U32),
        RouterActFnType::SOFTMAX,
        1,
        0,
        0,
    )
    .launch(&launch)
    .unwrap_err();
    assert!(e.message.contains("H = 64 must be a multiple of 128"), "{e}");
    let e = router_topk::Call::new(
        &z(&[128, 4], Dtype::F32),
        &z(&[128, 520], Dtype::F32),
        &z(&[4, 520], Dtype::F32),
        &z(&[4, 520], Dtype::F32),
        &z(&[4, 1], Dtype::U32),
        RouterActFnType::SOFTMAX,
        1,
        0,
        0,
    )
    .launch(&launch)
    .unwrap_err();
    assert!(e.message.contains("E = 520 must be within 8..=512"), "{e}");
    let e = router_topk::Call::new(
        &z(&[128, 4], Dtype::F32),
        &z(&[128, 8], Dtype::F32),
        &z(&[4, 8], Dtype::F32),
        &z(&[4, 8], Dtype::F32),
        &z(&[4, 2], Dtype::U32),
        RouterActFnType::SOFTMAX,
        1,
        0,
        0,
    )
    .launch(&launch)
    .unwrap_err();
    assert!(e.message.contains("expert_index must be [T, k] = [4, 1]"), "{e}");
    // The same rules as a `const fn`, for compile-time checks.
    let ok = nkilib::router_topk_config!(
        t = 2048,
        h = 4096,
        e = 512,
        k = 8,
        act_fn = SOFTMAX,
        x_hbm_layout = 1,
        router_pre_norm = false,
        programs = 2
    );
    assert_eq!(router_topk_violation(ok), None);
    assert_eq!(router_topk_violation(RouterShape { e: 513, ..ok }), Some(RouterRule::Experts));
    assert_eq!(router_topk_violation(RouterShape { h: 4000, ..ok }), Some(RouterRule::Hidden));
    assert_eq!(
        router_topk_violation(RouterShape { act_fn: RouterActFnType::SIGMOID, ..ok }),
        Some(RouterRule::SigmoidNeedsIndirectScatter)
    );
    assert_eq!(router_topk_violation(RouterShape { act_fn: RouterActFnType::SIGMOID, router_pre_norm: true, ..ok }), None);
    assert_eq!(router_topk_violation(RouterShape { t: 5, ..ok }), None);
    assert_eq!(router_topk_violation(RouterShape { t: 1, ..ok }), Some(RouterRule::Sharding));
    assert_eq!(
        router_topk_violation(RouterShape { t: 257, act_fn: RouterActFnType::SIGMOID, use_indirect_dma_scatter: true, ..ok }),
        Some(RouterRule::IndirectScatterTokens)
    );
    assert_eq!(router_topk_violation(RouterShape { t: 255, act_fn: RouterActFnType::SIGMOID, use_indirect_dma_scatter: true, ..ok }), None);
    assert_eq!(router_topk_violation(RouterShape { return_eager_affi: true, ..ok }), Some(RouterRule::EagerTokens));
    assert_eq!(
        router_topk_violation(RouterShape { t: 400, use_indirect_dma_scatter: true, ..ok }),
        Some(RouterRule::IndirectScatterTokens)
    );
    let c = nkilib::router_topk_config!(t = 64, h = 1024, e = 32, k = 4, act_fn = SIGMOID, use_indirect_dma_scatter = true);
    assert_eq!(c.act_fn, RouterActFnType::SIGMOID);
    assert_eq!((c.t, c.h, c.e, c.k, c.programs), (64, 1024, 32, 4, 1));
}

#[test]
fn the_emitted_signature_is_the_librarys() {
    assert!(
        router_topk::NKI_SOURCE.contains(
            "def router_topk(x, w, w_bias, router_logits, expert_affinities, expert_index, act_fn, k, x_hbm_layout, \
             x_sb_layout, router_pre_norm=True, norm_topk_prob=False, use_column_tiling=False, use_indirect_dma_scatter=False, \
             return_eager_affi=False, use_PE_broadcast_w_bias=False, shard_on_tokens=False, skip_store_expert_index=False, \
             skip_store_router_logits=False):"
        ),
        "{}",
        router_topk::NKI_SOURCE
    );
}

#[test]
fn emitted_kernel_under_numpy_matches_the_emulator() {
    let cases = [
        ("one-hot softmax", Problem::new(130, 256, 32, 4, 900), Flags { bias: true, x_hbm_layout: 1, ..Flags::POST_SOFTMAX }),
        (
            "pre-softmax norm, PE bias",
            Problem::new(20, 384, 16, 2, 901),
            Flags { bias: true, pe_bias: true, column_tiling: true, ..Flags::PRE_SOFTMAX_NORM },
        ),
        ("sigmoid indirect, eager", Problem::new(64, 128, 64, 8, 902), Flags { bias: true, eager: true, ..Flags::POST_SIGMOID }),
        ("sharded", Problem::new(256, 128, 32, 2, 903), Flags { bias: true, shard: true, ..Flags::PRE_SIGMOID_NORM }),
        // The library's uneven shard: 2 and 3 of 5 tokens.
        ("sharded T = 5", Problem::new(5, 512, 128, 4, 905), Flags { bias: true, shard: true, ..Flags::POST_SOFTMAX }),
        ("pre-sigmoid one-hot", Problem::new(20, 256, 32, 4, 906), Flags { bias: true, indirect: false, ..Flags::PRE_SIGMOID_NORM }),
        // Tied experts: the executor's max8 / nc_find_index8 pick the lowest index first too.
        ("ties", tied_problem(8, 3), Flags { bias: true, ..Flags::POST_SOFTMAX }),
    ];
    for (name, p, flags) in cases {
        let got = p.run(flags, Dtype::F32, Precision::Fp32).unwrap();
        check(name, &p, flags, Dtype::F32, &got, FP32);
        let (t, h, e, k) = (p.t, p.h, p.e, p.k);
        let x = if flags.x_hbm_layout == 0 {
            Arg::Tensor(vec![h, t], (0..h * t).map(|i| p.x[(i % t) * h + i / t]).collect(), Dtype::F32)
        } else {
            Arg::Tensor(vec![t, h], p.x.clone(), Dtype::F32)
        };
        let args = [
            x,
            Arg::Tensor(vec![h, e], p.w.clone(), Dtype::F32),
            Arg::Tensor(vec![1, e], p.bias.clone(), Dtype::F32),
            Arg::Tensor(vec![t, e], vec![0.0; t * e], Dtype::F32),
            Arg::Tensor(vec![t, e], vec![0.0; t * e], Dtype::F32),
            Arg::Tensor(vec![t, k], vec![0.0; t * k], Dtype::U32),
            Arg::Member(RouterActFnType::CLASS, flags.act_fn.member()),
            Arg::Int(k as i64),
            Arg::Int(flags.x_hbm_layout),
            Arg::Int(0),
            Arg::Bool(flags.pre_norm),
            Arg::Bool(flags.norm),
            Arg::Bool(flags.column_tiling),
            Arg::Bool(flags.indirect),
            Arg::Bool(flags.eager),
            Arg::Bool(flags.pe_bias),
            Arg::Bool(flags.shard),
        ];
        let np = run_numpy("router_topk", &args, if flags.shard { 2 } else { 1 }, "fp32");
        assert_eq!(np.len(), if flags.eager { 4 } else { 3 }, "{name}");
        let as_f64 = |v: &[f32]| v.iter().map(|&x| f64::from(x)).collect::<Vec<_>>();
        let idx: Vec<f64> = got.idx.iter().map(|&i| i as f64).collect();
        assert_eq!(np[1].iter().map(|&v| f64::from(v)).collect::<Vec<_>>(), idx, "{name}: expert_index");
        close(&format!("{name} numpy logits"), &np[0], &as_f64(&got.logits), Tol { score: 0.0, abs: 1e-6, rel: 1e-6 });
        close(&format!("{name} numpy affinities"), &np[2], &as_f64(&got.aff), Tol { score: 0.0, abs: 1e-6, rel: 1e-6 });
        if let Some(eager) = &got.eager {
            close(&format!("{name} numpy eager"), &np[3], &as_f64(eager), Tol { score: 0.0, abs: 1e-6, rel: 1e-6 });
        }
    }
}

#[test]
fn the_emitted_kernel_takes_the_enum_and_refuses_its_values() {
    let p = Problem::new(8, 128, 16, 2, 904);
    let (t, h, e, k) = (p.t, p.h, p.e, p.k);
    let args = |act_fn: Arg| {
        vec![
            Arg::Tensor(vec![h, t], (0..h * t).map(|i| p.x[(i % t) * h + i / t]).collect(), Dtype::F32),
            Arg::Tensor(vec![h, e], p.w.clone(), Dtype::F32),
            Arg::Tensor(vec![1, e], p.bias.clone(), Dtype::F32),
            Arg::Tensor(vec![t, e], vec![0.0; t * e], Dtype::F32),
            Arg::Tensor(vec![t, e], vec![0.0; t * e], Dtype::F32),
            Arg::Tensor(vec![t, k], vec![0.0; t * k], Dtype::U32),
            act_fn,
            Arg::Int(k as i64),
            Arg::Int(0),
            Arg::Int(0),
        ]
    };
    // The library's enum, with the library's values.
    assert_eq!(RouterActFnType::MEMBERS, ["SIGMOID", "SOFTMAX"]);
    let pkg = common::emitted_package();
    let module = std::fs::read_to_string(pkg.join("router_topk.py")).unwrap();
    assert!(module.contains("from .common_types import RouterActFnType\n"), "{module}");
    let types = std::fs::read_to_string(pkg.join("common_types.py")).unwrap();
    let class = types.split("class RouterActFnType(Enum):\n").nth(1).unwrap_or_default();
    assert!(class.contains("    SIGMOID = 0\n") && class.contains("    SOFTMAX = 1\n"), "{types}");
    let ok = common::try_run_numpy_ranks(pkg, "router_topk", &[args(Arg::Member("RouterActFnType", "SOFTMAX"))], 1, "fp32");
    assert_eq!(ok.map(|o| o[0].len()).ok(), Some(3));
    // The member's value is not the member: the kernel names the parameter and what it got.
    let e = common::try_run_numpy_ranks(pkg, "router_topk", &[args(Arg::Int(1))], 1, "fp32").unwrap_err();
    assert!(e.contains("router_topk: act_fn=1 is not a RouterActFnType member (SIGMOID, SOFTMAX)"), "{e}");
}
