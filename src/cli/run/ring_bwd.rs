//! `nki run ring-bwd`.

use super::{LaunchArgs, RingArgs, declare_inputs, load, load_alike};
use crate::cli::output_plan::OutputPlan;
use clap::Args;
use nki::attention::ring_bwd::{DTYPES, RingBwdConfig, RingBwdInputs};
use nki::attention::shard::{shard, shard_lse, unshard};
use std::path::PathBuf;

/// Arguments of `nki run ring-bwd`: whole-sequence inputs, sharded over the ring
/// and gathered back.
#[derive(Args)]
pub struct RingBwdArgs {
    /// Queries `[b, h, S_total, d]` (unscaled).
    #[arg(long)]
    q: PathBuf,
    /// Keys `[b, h_kv, S_total, d]`, `h` a multiple of `h_kv` (grouped-query attention).
    #[arg(long)]
    k: PathBuf,
    /// Values `[b, h_kv, S_total, d]`.
    #[arg(long)]
    v: PathBuf,
    /// The forward's output `[b, h, S_total, d]`.
    #[arg(long)]
    o: PathBuf,
    /// The gradient of the loss with respect to the output `[b, h, S_total, d]`.
    #[arg(long)]
    dy: PathBuf,
    /// The forward's log-sum-exp of the scaled scores `[b, h, S_total]` (as `nki run ring-fwd --lse` writes it
    /// with the same flags).
    #[arg(long)]
    lse: PathBuf,
    #[command(flatten)]
    ring: RingArgs,
    #[command(flatten)]
    launch: LaunchArgs,
    /// dL/dQ `[b, h, S_total, d]`.
    #[arg(long)]
    dq: PathBuf,
    /// dL/dK `[b, h_kv, S_total, d]`.
    #[arg(long)]
    dk: PathBuf,
    /// dL/dV `[b, h_kv, S_total, d]`.
    #[arg(long)]
    dv: PathBuf,
    /// With `--sinks`: dL/dsinks `[h]`.
    #[arg(long, value_name = "FILE", requires = "sinks")]
    dsinks: Option<PathBuf>,
}

/// Checks the configuration and the files, shards the inputs head-dim major,
/// runs the ring and writes the gathered gradients all or nothing.
pub fn run(a: &RingBwdArgs) -> Result<(), String> {
    let launch = a.launch.launch().ranks(a.ring.workers);
    let layout = a.ring.layout();
    let mut cfg = RingBwdConfig::new(a.ring.num_workers()?).causal(a.ring.causal).layout(layout).lnc(launch.lnc_degree() as i64);
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
    let files = [("q", a.q.as_path()), ("k", a.k.as_path()), ("v", a.v.as_path()), ("o", a.o.as_path()), ("dy", a.dy.as_path())];
    let mut plan = OutputPlan::new().threads(launch.thread_budget());
    declare_inputs(&mut plan, &files)?;
    declare_inputs(&mut plan, &[("lse", a.lse.as_path())])?;
    let sinks = a.ring.load_sinks(&mut plan, &DTYPES)?;
    // Q, O and dY share [b, h, S_total, d]; K and V [b, h_kv, S_total, d].
    let mut inputs = load_alike(&plan, &[files[0], files[3], files[4]], &DTYPES)?;
    let (batch, s_total) = (inputs[0].shape().first().copied().unwrap_or(0), inputs[0].shape().get(2).copied().unwrap_or(0));
    let ids = a.ring.load_segment_ids(&mut plan, batch, s_total)?;
    let bias = a.ring.load_bias(&mut plan, batch, inputs[0].shape().get(1).copied().unwrap_or(0), s_total)?;
    for (flag, path) in [("dq", &a.dq), ("dk", &a.dk), ("dv", &a.dv)] {
        plan.output(flag, path)?;
    }
    if let Some(path) = &a.dsinks {
        plan.output("dsinks", path)?;
    }
    let kv = load_alike(&plan, &files[1..3], &DTYPES)?;
    inputs.splice(1..1, kv);
    let lse = load(&plan, &a.lse, "lse", &DTYPES)?;
    let err = |e: nki::NkiError| e.to_string();
    let w = a.ring.workers;
    let parts = inputs.iter().map(|t| shard(t, w, layout, true)).collect::<Result<Vec<_>, _>>().map_err(err)?;
    let lses = shard_lse(&lse, w, layout).map_err(err)?;
    let inputs = RingBwdInputs {
        q: &parts[0],
        k: &parts[1],
        v: &parts[2],
        o: &parts[3],
        dy: &parts[4],
        lse: &lses,
        sinks: sinks.as_ref(),
        segment_ids: ids.as_ref().map(|(q, kv)| (q.as_slice(), kv.as_slice())),
        bias: bias.as_deref(),
    };
    let grads = cfg.launch(&launch, &inputs).map_err(err)?;
    let mut written =
        [&grads.dq, &grads.dk, &grads.dv].map(|g| unshard(g, layout, true).map_err(err)).into_iter().collect::<Result<Vec<_>, _>>()?;
    if a.dsinks.is_some() {
        written.extend(grads.dsinks);
    }
    plan.commit(&written.iter().collect::<Vec<_>>())
}
