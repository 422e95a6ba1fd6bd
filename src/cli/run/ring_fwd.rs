//! `nki run ring-fwd`.

use super::{LaunchArgs, load_alike, required_path, save};
use clap::Args;
use nki::Tensor;
use nki::attention::ring_fwd::{Queries, RingFwdConfig, RingFwdInputs};
use nki::attention::shard::{SeqLayout, shard, unshard, unshard_lse};
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
    /// Ranks in the ring; each holds `S_total / workers` tokens (a multiple of 128).
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// Causal mask over global positions.
    #[arg(long)]
    causal: bool,
    /// Rank `r` holds the tokens `t` with `t mod workers == r` (needs `--causal`); else contiguous blocks.
    #[arg(long)]
    striped: bool,
    /// Also write the log-sum-exp of the scaled scores (`--lse`).
    #[arg(long)]
    training: bool,
    /// Softmax scale (default `1/sqrt(d)`).
    #[arg(long)]
    scale: Option<f64>,
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
    let layout = if a.striped { SeqLayout::Striped } else { SeqLayout::Contiguous };
    let err = |e: nki::NkiError| e.to_string();
    let w = a.workers;
    let (qs, ks, vs) =
        (shard(&q, w, layout, true).map_err(err)?, shard(&k, w, layout, true).map_err(err)?, shard(&v, w, layout, false).map_err(err)?);
    let mut cfg = RingFwdConfig::new(w as i64).causal(a.causal).striped(a.striped).training(a.training);
    if let Some(s) = a.scale {
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
