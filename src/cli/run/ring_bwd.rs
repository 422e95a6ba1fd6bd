//! `nki run ring-bwd`.

use super::{LaunchArgs, RingArgs, load, load_alike, save};
use clap::Args;
use nki::attention::ring_bwd::{RingBwdConfig, RingBwdInputs};
use nki::attention::shard::{shard, shard_lse, unshard};
use std::path::PathBuf;

/// Arguments of `nki run ring-bwd`: whole-sequence inputs, sharded over the ring
/// and gathered back.
#[derive(Args)]
pub struct RingBwdArgs {
    /// Queries `[b, h, S_total, d]` (unscaled).
    #[arg(long)]
    q: PathBuf,
    /// Keys `[b, h, S_total, d]`.
    #[arg(long)]
    k: PathBuf,
    /// Values `[b, h, S_total, d]`.
    #[arg(long)]
    v: PathBuf,
    /// The forward's output `[b, h, S_total, d]`.
    #[arg(long)]
    o: PathBuf,
    /// The gradient of the loss with respect to the output `[b, h, S_total, d]`.
    #[arg(long)]
    dy: PathBuf,
    /// The forward's log-sum-exp of the scaled scores `[b, h, S_total]` (as `nki run ring-fwd --lse` writes it).
    #[arg(long)]
    lse: PathBuf,
    #[command(flatten)]
    ring: RingArgs,
    #[command(flatten)]
    launch: LaunchArgs,
    /// dL/dQ `[b, h, S_total, d]`.
    #[arg(long)]
    dq: PathBuf,
    /// dL/dK `[b, h, S_total, d]`.
    #[arg(long)]
    dk: PathBuf,
    /// dL/dV `[b, h, S_total, d]`.
    #[arg(long)]
    dv: PathBuf,
}

/// Shards the inputs head-dim major, runs the ring and writes the gathered gradients.
pub fn run(a: &RingBwdArgs) -> Result<(), String> {
    let inputs = load_alike(&[("q", &a.q), ("k", &a.k), ("v", &a.v), ("o", &a.o), ("dy", &a.dy)])?;
    let lse = load(&a.lse, "lse")?;
    let layout = a.ring.layout();
    let err = |e: nki::NkiError| e.to_string();
    let w = a.ring.workers;
    let parts = inputs.iter().map(|t| shard(t, w, layout, true)).collect::<Result<Vec<_>, _>>().map_err(err)?;
    let lses = shard_lse(&lse, w, layout).map_err(err)?;
    let launch = a.launch.launch().ranks(w);
    let mut cfg = RingBwdConfig::new(w as i64).causal(a.ring.causal).striped(a.ring.striped).lnc(launch.lnc_degree() as i64);
    if let Some(s) = a.ring.scale {
        cfg = cfg.softmax_scale(s);
    }
    let inputs = RingBwdInputs { q: &parts[0], k: &parts[1], v: &parts[2], o: &parts[3], dy: &parts[4], lse: &lses };
    let grads = cfg.launch(&launch, &inputs).map_err(err)?;
    for (path, g) in [(&a.dq, &grads.dq), (&a.dk, &grads.dk), (&a.dv, &grads.dv)] {
        save(path, &unshard(g, layout, true).map_err(err)?)?;
    }
    Ok(())
}
