//! `nki demo`: the attention kernels on random inputs, in both precision modes,
//! each checked against float64 attention; a decoder layer and a
//! mixture-of-experts decode step from library kernels, each checked against
//! float64; and the emitted NKI package.

use crate::layer::moe::{self, MoeRun};
use crate::layer::{self, Checked, LayerRun, Stage};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use nki::attention::cte::{CteConfig, CteInputs};
use nki::attention::reference::{self, Attention, Gradients};
use nki::attention::ring_bwd::{RingBwdConfig, RingBwdInputs};
use nki::attention::ring_fwd::{Queries, RingFwdConfig, RingFwdInputs};
use nki::attention::shard::{SeqLayout, shard, shard_lse, unshard, unshard_lse};
use nki::outln;
use nki::{Dtype, Launch, NkiError, Precision, Tensor};
use std::path::PathBuf;
use std::time::Instant;

/// Arguments of `nki demo` (all optional).
#[derive(Args)]
pub struct DemoArgs {
    /// Where to write the emitted NKI package.
    #[arg(long, default_value = "nki_out")]
    out: PathBuf,
    /// Only the decoder layer (prefill and decode steps, both precision modes)
    /// and a narrower MoE step.
    #[arg(long)]
    quick: bool,
}

/// Heads, whole-sequence tokens, head dim and ring workers of the demo.
const BH: usize = 4;
const S: usize = 8192;
const D: usize = 128;
const W: usize = 4;

/// One checked run.
struct Row {
    kernel: &'static str,
    precision: Precision,
    /// Largest `|got - want|` and the bound it must stay under.
    err: f64,
    bound: f64,
    secs: f64,
    flops: f64,
}

/// Deterministic standard-normal values (xorshift and Box–Muller), rounded to f32.
pub fn normal(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut uniform = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        ((s >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    };
    (0..n).map(|_| f64::from(((-2.0 * uniform().ln()).sqrt() * (std::f64::consts::TAU * uniform()).cos()) as f32)).collect()
}

/// `x` as the device would hold it in `dtype`.
pub fn rounded(x: &[f64], dtype: Dtype) -> Vec<f64> {
    x.iter().map(|&v| f64::from(nki::dtype::round_f32(dtype, v as f32))).collect()
}

/// A `[1, BH, S, D]` tensor of `dtype` (or `[1, BH, S]` for per-row values).
fn global(x: &[f64], dtype: Dtype) -> Result<Tensor, NkiError> {
    let vals: Vec<f32> = x.iter().map(|&v| v as f32).collect();
    let shape: &[usize] = if x.len() == BH * S { &[1, BH, S] } else { &[1, BH, S, D] };
    Tensor::from_f32(shape, &vals, dtype)
}

/// `max |got - want|` and `max |want|`.
fn error(got: &[f32], want: &[f64]) -> (f64, f64) {
    let err = got.iter().zip(want).map(|(&g, &w)| if g.is_finite() { (f64::from(g) - w).abs() } else { f64::INFINITY }).fold(0.0, f64::max);
    (err, want.iter().fold(0.0f64, |m, w| m.max(w.abs())))
}

/// The inputs and float64 results of one input precision.
struct Case {
    q: Vec<f64>,
    k: Vec<f64>,
    v: Vec<f64>,
    dy: Vec<f64>,
    fwd: Attention,
}

impl Case {
    fn new(raw: &[Vec<f64>; 4], dtype: Dtype, scale: f64) -> Case {
        let [q, k, v, dy] = raw.clone().map(|x| rounded(&x, dtype));
        let fwd = reference::forward(&q, &k, &v, [BH, S, D], scale, true);
        Case { q, k, v, dy, fwd }
    }
}

/// `attention_cte` over the whole sequence on one worker (LNC2).
fn run_cte(c: &Case, dtype: Dtype, precision: Precision, scale: f64) -> Result<Row, NkiError> {
    let t = |x: &[f64], shape: &[usize]| Tensor::from_f32(shape, &x.iter().map(|&v| v as f32).collect::<Vec<_>>(), dtype);
    let kt: Vec<f64> = (0..BH * D * S).map(|i| c.k[(i / (D * S) * S + i % S) * D + i / S % D]).collect();
    let (q, k, v) = (t(&c.q, &[BH, S, D])?, t(&kt, &[BH, D, S])?, t(&c.v, &[BH, S, D])?);
    let start = Instant::now();
    let out = CteConfig::new().scale(scale).launch(&Launch::new().lnc(2).precision(precision), &CteInputs::new(&q, &k, &v))?.out;
    let secs = start.elapsed().as_secs_f64();
    let (err, max) = error(&out.to_f32_vec(), &c.fwd.out);
    let bound = if precision == Precision::Fp32 { 1e-6 + 1e-5 * max } else { 1e-5 + 2e-2 * max };
    Ok(Row { kernel: "attention_cte", precision, err, bound, secs, flops: 2.0 * (BH * S * S * D) as f64 })
}

/// The striped causal ring forward over `W` workers (LNC2); output and LSE checked.
fn run_ring_fwd(c: &Case, dtype: Dtype, precision: Precision) -> Result<Row, NkiError> {
    let layout = SeqLayout::Striped;
    let (q, k, v) = (global(&c.q, dtype)?, global(&c.k, dtype)?, global(&c.v, dtype)?);
    let (qs, ks, vs) = (shard(&q, W, layout, true)?, shard(&k, W, layout, true)?, shard(&v, W, layout, false)?);
    let cfg = RingFwdConfig::new(W as i64).causal(true).striped(true).training(true);
    let start = Instant::now();
    let outs = cfg.launch(
        &Launch::new().ranks(W).lnc(2).precision(precision),
        &RingFwdInputs { q: Queries::Raw(&qs), k: &ks, v: &vs, sinks: None, segment_ids: None, bias: None },
    )?;
    let secs = start.elapsed().as_secs_f64();
    let (err_o, max_o) = error(&unshard(&outs.out, layout, false)?.to_f32_vec(), &c.fwd.out);
    let lse = outs.lse.unwrap_or_default();
    let (err_l, max_l) = error(&unshard_lse(&lse, layout)?.to_f32_vec(), &c.fwd.lse);
    let (a, r) = if precision == Precision::Fp32 { (1e-6, 1e-5) } else { (1e-3, 1e-2) };
    // Report the output or the LSE, whichever is closer to its bound.
    let (err, bound) = if err_o / (a + r * max_o) >= err_l / (a + r * max_l) { (err_o, a + r * max_o) } else { (err_l, a + r * max_l) };
    Ok(Row { kernel: "ring_attention_spmd_fwd", precision, err, bound, secs, flops: 2.0 * (BH * S * S * D) as f64 })
}

/// The striped causal ring backward over `W` workers (LNC2) with the reference's
/// O and LSE; dQ, dK, dV checked.
fn run_ring_bwd(c: &Case, dtype: Dtype, precision: Precision, scale: f64) -> Result<Row, NkiError> {
    let layout = SeqLayout::Striped;
    let grads: Gradients = reference::backward(&c.q, &c.k, &c.v, &c.dy, &c.fwd, [BH, S, D], scale, true);
    let mut parts = Vec::new();
    for x in [&c.q, &c.k, &c.v, &c.fwd.out, &c.dy] {
        parts.push(shard(&global(x, dtype)?, W, layout, true)?);
    }
    let lse = shard_lse(&global(&c.fwd.lse, Dtype::F32)?, W, layout)?;
    let cfg = RingBwdConfig::new(W as i64).causal(true).striped(true).lnc(2);
    let inputs = RingBwdInputs {
        q: &parts[0],
        k: &parts[1],
        v: &parts[2],
        o: &parts[3],
        dy: &parts[4],
        lse: &lse,
        sinks: None,
        segment_ids: None,
        bias: None,
    };
    let start = Instant::now();
    let outs = cfg.launch(&Launch::new().ranks(W).lnc(2).precision(precision), &inputs)?;
    let secs = start.elapsed().as_secs_f64();
    let (a, r) = if precision == Precision::Fp32 { (1e-6, 1e-4) } else { (1e-2, 1e-2) };
    let mut worst = (0.0, 1.0);
    for (got, want) in [(&outs.dq, &grads.dq), (&outs.dk, &grads.dk), (&outs.dv, &grads.dv)] {
        let (err, max) = error(&unshard(got, layout, true)?.to_f32_vec(), want);
        if err / (a + r * max) >= worst.0 / worst.1 {
            worst = (err, a + r * max);
        }
    }
    // Five matmuls of S²·d per head, half of them masked.
    Ok(Row { kernel: "ring_attention_spmd_bwd", precision, err: worst.0, bound: worst.1, secs, flops: 5.0 * (BH * S * S * D) as f64 })
}

/// The features ring: query heads, KV heads, tokens, causal window and zigzag blocks.
const FEAT_H: usize = 8;
const FEAT_H_KV: usize = 2;
const FEAT_S: usize = 4096;
const FEAT_WINDOW: usize = 1024;

/// A zigzag causal ring forward over `W` workers (LNC2) with GQA 8:2, a sliding
/// window and sinks; output and LSE checked against float64 attention with the
/// same features on the inputs rounded to `dtype`.
fn run_ring_features(dtype: Dtype, precision: Precision) -> Result<Row, NkiError> {
    let (layout, scale) = (SeqLayout::Zigzag, 1.0 / (D as f64).sqrt());
    let dims = reference::Dims { batch: 1, heads: FEAT_H, kv_heads: FEAT_H_KV, seqlen: FEAT_S, head_dim: D };
    let (nq, nk) = (FEAT_H * FEAT_S * D, FEAT_H_KV * FEAT_S * D);
    let (q, k, v) = (rounded(&normal(nq, 11), dtype), rounded(&normal(nk, 12), dtype), rounded(&normal(nk, 13), dtype));
    let sinks: Vec<f64> = normal(FEAT_H, 14).iter().map(|x| x + 2.0).collect();
    let t = |x: &[f64], heads: usize| Tensor::from_f32(&[1, heads, FEAT_S, D], &x.iter().map(|&v| v as f32).collect::<Vec<_>>(), dtype);
    let (qs, ks, vs) = (
        shard(&t(&q, FEAT_H)?, W, layout, true)?,
        shard(&t(&k, FEAT_H_KV)?, W, layout, true)?,
        shard(&t(&v, FEAT_H_KV)?, W, layout, false)?,
    );
    let sink_t = Tensor::from_f32(&[FEAT_H], &sinks.iter().map(|&v| v as f32).collect::<Vec<_>>(), Dtype::F32)?;
    let cfg = RingFwdConfig::new(W as i64)
        .causal(true)
        .layout(layout)
        .sliding_window(FEAT_WINDOW as i64, 0)
        .kv_heads(FEAT_H_KV as i64)
        .training(true)
        .softmax_scale(scale);
    let start = Instant::now();
    let outs = cfg.launch(
        &Launch::new().ranks(W).lnc(2).precision(precision),
        &RingFwdInputs { q: Queries::Raw(&qs), k: &ks, v: &vs, sinks: Some(&sink_t), segment_ids: None, bias: None },
    )?;
    let secs = start.elapsed().as_secs_f64();
    let f = reference::Features { causal: true, window: Some((FEAT_WINDOW, 0)), sinks: Some(&sinks), ..reference::Features::default() };
    let want = reference::attend(&q, &k, &v, &dims, scale, &f);
    let (err_o, max_o) = error(&unshard(&outs.out, layout, false)?.to_f32_vec(), &want.out);
    let (err_l, max_l) = error(&unshard_lse(&outs.lse.unwrap_or_default(), layout)?.to_f32_vec(), &want.lse);
    let (a, r) = if precision == Precision::Fp32 { (1e-6, 1e-5) } else { (1e-3, 1e-2) };
    let (err, bound) = if err_o / (a + r * max_o) >= err_l / (a + r * max_l) { (err_o, a + r * max_o) } else { (err_l, a + r * max_l) };
    // Visible scores: each row sees min(i, L) + 1 keys.
    let visible: usize = (0..FEAT_S).map(|i| i.min(FEAT_WINDOW) + 1).sum();
    Ok(Row { kernel: "ring fwd GQA+SWA+sinks", precision, err, bound, secs, flops: 4.0 * (FEAT_H * visible * D) as f64 })
}

/// The attention kernels' rows: each kernel in both precision modes.
fn attention_rows(step: &dyn Fn(&str)) -> Result<Vec<Row>, NkiError> {
    let scale = 1.0 / (D as f64).sqrt();
    let raw = [normal(BH * S * D, 1), normal(BH * S * D, 2), normal(BH * S * D, 3), normal(BH * S * D, 4)];
    let (exact, bf16, f16) = (Case::new(&raw, Dtype::F32, scale), Case::new(&raw, Dtype::Bf16, scale), Case::new(&raw, Dtype::F16, scale));
    let mut rows = Vec::new();
    step("attention_cte, fp32");
    rows.push(run_cte(&exact, Dtype::F32, Precision::Fp32, scale)?);
    step("attention_cte, hardware (bf16 inputs)");
    rows.push(run_cte(&bf16, Dtype::Bf16, Precision::Hardware, scale)?);
    step("ring forward, fp32");
    rows.push(run_ring_fwd(&exact, Dtype::F32, Precision::Fp32)?);
    step("ring forward, hardware (bf16 inputs)");
    rows.push(run_ring_fwd(&bf16, Dtype::Bf16, Precision::Hardware)?);
    step("ring forward with GQA, a window and sinks, fp32");
    rows.push(run_ring_features(Dtype::F32, Precision::Fp32)?);
    step("ring forward with GQA, a window and sinks, hardware (bf16 inputs)");
    rows.push(run_ring_features(Dtype::Bf16, Precision::Hardware)?);
    step("ring backward, fp32");
    rows.push(run_ring_bwd(&exact, Dtype::F32, Precision::Fp32, scale)?);
    step("ring backward, hardware (fp16 inputs)");
    rows.push(run_ring_bwd(&f16, Dtype::F16, Precision::Hardware, scale)?);
    Ok(rows)
}

/// Runs the demo: exits with an error unless every check passed.
pub fn run(args: &DemoArgs) -> Result<(), String> {
    let bar = ProgressBar::new(if args.quick { 6 } else { 14 });
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{bar:30}] {pos}/{len} {msg} ({elapsed})")
            .map_err(|e| e.to_string())?
            .progress_chars("=> "),
    );
    let step = |msg: &str| {
        bar.set_message(msg.to_string());
        bar.inc(1);
    };
    let err = |e: NkiError| e.to_string();
    let rows = if args.quick { Vec::new() } else { attention_rows(&step).map_err(err)? };
    let mut layers = Vec::new();
    for (dtype, precision) in [(Dtype::F32, Precision::Fp32), (Dtype::Bf16, Precision::Hardware)] {
        step(&format!("decoder layer: prefill and {} decode steps, {precision}", layer::STEPS));
        layers.push((precision, layer::run(dtype, precision, precision == Precision::Hardware).map_err(err)?));
    }
    let moe_dims = if args.quick { moe::QUICK_DIMS } else { moe::DIMS };
    let mut moes = Vec::new();
    for (dtype, precision) in [(Dtype::F32, Precision::Fp32), (Dtype::Bf16, Precision::Hardware)] {
        step(&format!("MoE decode step: router_topk and moe_tkg, {precision}"));
        moes.push((precision, moe::run(&moe_dims, dtype, precision, precision == Precision::Hardware).map_err(err)?));
    }
    step("writing the NKI package");
    let pkg = nki::emit::Package::new(&nki::registry()).map_err(err)?;
    pkg.write_to(&args.out).map_err(err)?;
    step("done");
    bar.finish_and_clear();

    let mut failed = if rows.is_empty() { 0 } else { print_attention(&rows) };
    let checks =
        rows.len() + layers.iter().map(|(_, l)| l.checks.len()).sum::<usize>() + moes.iter().map(|(_, m)| m.checks.len()).sum::<usize>();
    failed += print_layer(&layers);
    failed += print_moe(&moes, &moe_dims);
    outln!("wrote the NKI package of {} kernels to {}", nki::registry().len(), args.out.display());
    if failed > 0 {
        return Err(format!("{failed} of {checks} checks failed"));
    }
    Ok(())
}

/// Prints the attention kernels' rows; returns how many checks failed.
fn print_attention(rows: &[Row]) -> usize {
    outln!("b·h = {BH}, S = {S}, d = {D}, causal; rings of {W} workers, striped; LNC2; checked against float64 attention");
    outln!(
        "GQA+window+sinks ring: h = {FEAT_H} on {FEAT_H_KV} KV heads, S = {FEAT_S}, causal window {FEAT_WINDOW}, zigzag, one sink per head"
    );
    outln!("{:<24} {:<9} {:>11} {:>11} {:>8} {:>8}  check", "kernel", "precision", "max |err|", "bound", "seconds", "GFLOP/s");
    let mut failed = 0;
    for r in rows {
        let ok = r.err <= r.bound;
        failed += usize::from(!ok);
        outln!(
            "{:<24} {:<9} {:>11.3e} {:>11.3e} {:>8.3} {:>8.1}  {}",
            r.kernel,
            r.precision.to_string(),
            r.err,
            r.bound,
            r.secs,
            r.flops / r.secs / 1e9,
            if ok { "ok" } else { "FAILED" }
        );
    }
    failed
}

/// Prints the decoder layer's checks and, from its hardware-mode run, each
/// kernel's trn2 estimate; returns how many checks failed.
fn print_layer(layers: &[(Precision, LayerRun)]) -> usize {
    outln!();
    outln!("decoder layer from library kernels: {}; checked against a float64 layer", layer::describe());
    let failed = print_checks(layers.iter().map(|(p, run)| (*p, &run.checks[..])));
    if let Some((_, run)) = layers.iter().find(|(p, _)| *p == Precision::Hardware) {
        print_estimates(&run.stages, &[("prefill", None), ("decode", Some(layer::STEPS))], "layer total");
    }
    failed
}

/// Prints the MoE step's checks and, from its hardware-mode run, each
/// kernel's trn2 estimate; returns how many checks failed.
fn print_moe(moes: &[(Precision, MoeRun)], dims: &moe::MoeDims) -> usize {
    outln!();
    outln!("MoE decode step from library kernels: {}; checked against a float64 MoE block", moe::describe(dims));
    let failed = print_checks(moes.iter().map(|(p, run)| (*p, &run.checks[..])));
    if let Some((_, run)) = moes.iter().find(|(p, _)| *p == Precision::Hardware) {
        print_estimates(&run.stages, &[("moe", Some(moe::TOKENS))], "step total");
    }
    failed
}

/// Prints one row per check of each precision mode's run; returns how many failed.
fn print_checks<'a>(runs: impl Iterator<Item = (Precision, &'a [Checked])>) -> usize {
    outln!("{:<30} {:<9} {:>11} {:>11} {:>8}  check", "output", "precision", "max |err|", "bound", "seconds");
    let mut failed = 0;
    for (precision, checks) in runs {
        for c in checks {
            let ok = c.err <= c.bound;
            failed += usize::from(!ok);
            let verdict = if ok { "ok" } else { "FAILED" };
            outln!("{:<30} {:<9} {:>11.3e} {:>11.3e} {:>8.3}  {verdict}", c.what, precision.to_string(), c.err, c.bound, c.secs);
        }
    }
    failed
}

/// Prints, per phase, each kernel's calls, emulator seconds and trn2 estimate,
/// and the phase's total (per token too for a phase of that many tokens).
fn print_estimates(stages: &[Stage], phases: &[(&str, Option<usize>)], total_label: &str) {
    outln!("{:<8} {:<22} {:>6} {:>12} {:>14}", "phase", "kernel", "calls", "emulator s", "trn2 estimate");
    for &(phase, tokens) in phases {
        let mut kernels: Vec<&str> = Vec::new();
        for s in stages.iter().filter(|s| s.phase == phase) {
            if !kernels.contains(&s.kernel) {
                kernels.push(s.kernel);
            }
        }
        for kernel in kernels {
            let calls: Vec<_> = stages.iter().filter(|s| s.phase == phase && s.kernel == kernel).collect();
            let (secs, trn2): (f64, f64) = (calls.iter().map(|s| s.secs).sum(), calls.iter().filter_map(|s| s.trn2_secs).sum());
            outln!("{phase:<8} {kernel:<22} {:>6} {secs:>12.3} {:>11.1} µs", calls.len(), trn2 * 1e6);
        }
        let total: f64 = stages.iter().filter(|s| s.phase == phase).filter_map(|s| s.trn2_secs).sum();
        let per = tokens.map_or(String::new(), |n| format!(" ({:.1} µs per token)", total * 1e6 / n as f64));
        outln!("{phase:<8} {total_label:<22} {:>6} {:>12} {:>11.1} µs{per}", "", "", total * 1e6);
    }
}
