//! `nki run ring-fwd`.

use super::{LaunchArgs, RingArgs, declare_inputs, load, load_alike, required_path};
use crate::cli::output_plan::OutputPlan;
use clap::Args;
use nki::Tensor;
use nki::attention::ring_fwd::{DTYPES, Queries, RingFwdConfig, RingFwdInputs};
use nki::attention::shard::{shard, unshard, unshard_lse};
use std::path::PathBuf;

/// Arguments of `nki run ring-fwd`: whole-sequence inputs, sharded over the ring
/// and gathered back.
#[derive(Args)]
pub struct RingFwdArgs {
    /// Queries `[b, h, S_total, d]` (unscaled: with `--causal` the scale is applied before the ring).
    #[arg(long)]
    q: PathBuf,
    /// Keys `[b, h_kv, S_total, d]`, `h` a multiple of `h_kv` (grouped-query attention).
    #[arg(long)]
    k: PathBuf,
    /// Values `[b, h_kv, S_total, d]`.
    #[arg(long)]
    v: PathBuf,
    #[command(flatten)]
    ring: RingArgs,
    /// Also write the log-sum-exp of the scaled scores (`--lse`).
    #[arg(long)]
    training: bool,
    #[command(flatten)]
    launch: LaunchArgs,
    /// Output `[b, h, S_total, d]`.
    #[arg(long)]
    out: PathBuf,
    /// With `--training`: the log-sum-exp `[b, h, S_total]` (natural log).
    #[arg(long, requires = "training")]
    lse: Option<PathBuf>,
}

/// Checks the configuration and the files, shards the inputs, runs the ring and
/// writes the gathered outputs all or nothing.
pub fn run(a: &RingFwdArgs) -> Result<(), String> {
    let layout = a.ring.layout();
    let mut cfg = RingFwdConfig::new(a.ring.num_workers()?).causal(a.ring.causal).layout(layout).training(a.training);
    if let Some(s) = a.ring.scale {
        cfg = cfg.softmax_scale(s);
    }
    let (window, chunk, cap) = a.ring.masks();
    if let Some((l, r)) = window {
        cfg = cfg.sliding_window(l, r);
    }
    if let Some(c) = chunk {
        cfg = cfg.chunk_size(c);
    }
    if let Some(c) = cap {
        cfg = cfg.soft_cap(c);
    }
    cfg.validate().map_err(|e| e.to_string())?;
    let files = [("q", a.q.as_path()), ("k", a.k.as_path()), ("v", a.v.as_path())];
    let launch = a.launch.launch();
    let mut plan = OutputPlan::new().threads(launch.thread_budget());
    declare_inputs(&mut plan, &files)?;
    let sinks = a.ring.load_sinks(&mut plan, &DTYPES)?;
    let q = load(&plan, &a.q, "q", &DTYPES)?;
    let (batch, s_total) = (q.shape().first().copied().unwrap_or(0), q.shape().get(2).copied().unwrap_or(0));
    let ids = a.ring.load_segment_ids(&mut plan, batch, s_total)?;
    let bias = a.ring.load_bias(&mut plan, batch, q.shape().get(1).copied().unwrap_or(0), s_total)?;
    plan.output("out", &a.out)?;
    if a.training {
        plan.output("lse", required_path(&a.lse, "--lse", "with --training")?)?;
    }
    let [k, v]: [Tensor; 2] = load_alike(&plan, &files[1..], &DTYPES)?.try_into().map_err(|_| "two inputs expected".to_string())?;
    let err = |e: nki::NkiError| e.to_string();
    let w = a.ring.workers;
    let (qs, ks, vs) =
        (shard(&q, w, layout, true).map_err(err)?, shard(&k, w, layout, true).map_err(err)?, shard(&v, w, layout, false).map_err(err)?);
    let segment_ids = ids.as_ref().map(|(q, kv)| (q.as_slice(), kv.as_slice()));
    let inputs = RingFwdInputs { q: Queries::Raw(&qs), k: &ks, v: &vs, sinks: sinks.as_ref(), segment_ids, bias: bias.as_deref() };
    let outs = cfg.launch(&launch.ranks(w), &inputs).map_err(err)?;
    let mut written = vec![unshard(&outs.out, layout, false).map_err(err)?];
    if let Some(lse) = &outs.lse {
        written.push(unshard_lse(lse, layout).map_err(err)?);
    }
    plan.commit(&written.iter().collect::<Vec<_>>())
}
