//! `nki run ring-fwd`.

use super::{LaunchArgs, RingArgs, load_alike, required_path, save};
use clap::Args;
use nki::Tensor;
use nki::attention::ring_fwd::{Queries, RingFwdConfig, RingFwdInputs};
use nki::attention::shard::{shard, unshard, unshard_lse};
use std::path::PathBuf;

/// Arguments of `nki run ring-fwd`: whole-sequence inputs, sharded over the ring
/// and gathered back.
#[derive(Args)]
pub struct RingFwdArgs {
    /// Queries `[b, h, S_total, d]` (unscaled: with `--causal` the scale is applied before the ring).
    #[arg(long)]
    q: PathBuf,
    /// Keys `[b, h, S_total, d]`.
    #[arg(long)]
    k: PathBuf,
    /// Values `[b, h, S_total, d]`.
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
    #[arg(long)]
    lse: Option<PathBuf>,
}

/// Shards the inputs, runs the ring and writes the gathered outputs.
pub fn run(a: &RingFwdArgs) -> Result<(), String> {
    let lse_path = if a.training { Some(required_path(&a.lse, "--lse", "with --training")?) } else { None };
    let [q, k, v]: [Tensor; 3] = load_alike(&[("q", &a.q), ("k", &a.k), ("v", &a.v)])?.try_into().expect("three files");
    let layout = a.ring.layout();
    let err = |e: nki::NkiError| e.to_string();
    let w = a.ring.workers;
    let (qs, ks, vs) =
        (shard(&q, w, layout, true).map_err(err)?, shard(&k, w, layout, true).map_err(err)?, shard(&v, w, layout, false).map_err(err)?);
    let mut cfg = RingFwdConfig::new(w as i64).causal(a.ring.causal).striped(a.ring.striped).training(a.training);
    if let Some(s) = a.ring.scale {
        cfg = cfg.softmax_scale(s);
    }
    let inputs = RingFwdInputs { q: Queries::Raw(&qs), k: &ks, v: &vs };
    let outs = cfg.launch(&a.launch.launch().ranks(w), &inputs).map_err(err)?;
    save(&a.out, &unshard(&outs.out, layout, false).map_err(err)?)?;
    if let (Some(path), Some(lse)) = (lse_path, &outs.lse) {
        save(path, &unshard_lse(lse, layout).map_err(err)?)?;
    }
    Ok(())
}
