//! `nki run attention-cte`.

use super::{LaunchArgs, load, required_path, save};
use clap::Args;
use nki::attention::cte::{CteConfig, CteInputs, Prior};
use nki::{Dtype, Tensor};
use std::path::PathBuf;

/// Arguments of `nki run attention-cte`: inputs in the kernel's own layouts, flags
/// mirroring its parameters.
#[derive(Args)]
pub struct CteArgs {
    /// Queries: `(bs, seqlen_q, d)`, or `(bs, d, seqlen_q)` with `--tp-q false`.
    #[arg(long)]
    q: PathBuf,
    /// Keys: `(bs_kv, d, seqlen_kv)`, or `(bs_kv, seqlen_kv, d)` with `--tp-k true`.
    #[arg(long)]
    k: PathBuf,
    /// Values: `(bs_kv, seqlen_kv, d)`.
    #[arg(long)]
    v: PathBuf,
    /// Prefix-cache keys (in `--k`'s layout).
    #[arg(long, requires_all = ["v_prior", "prior_used_len"])]
    k_prior: Option<PathBuf>,
    /// Prefix-cache values `(bs_kv, seqlen_prior, d)`.
    #[arg(long, requires = "k_prior")]
    v_prior: Option<PathBuf>,
    /// How many prior keys are used.
    #[arg(long, requires = "k_prior")]
    prior_used_len: Option<i64>,
    /// Sink logits `(bs, 1)`.
    #[arg(long)]
    sink: Option<PathBuf>,
    /// Scale of `QKᵀ`.
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    /// Attend to every key (the default is causal).
    #[arg(long)]
    no_causal: bool,
    /// Sliding window in keys (0: off).
    #[arg(long, default_value_t = 0)]
    sliding_window: i64,
    /// Context-parallel offset (`rank * seqlen_q` contiguous, `rank` strided, 0 or -1 striped).
    #[arg(long, allow_hyphen_values = true)]
    cp_offset: Option<i64>,
    /// Context-parallel degree (turns CP on).
    #[arg(long)]
    global_cp_deg: Option<i64>,
    /// CP with row-strided queries.
    #[arg(long)]
    cp_strided_q_slicing: bool,
    /// CP with striped queries and keys.
    #[arg(long)]
    cp_striped_input: bool,
    /// `q` layout flag.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    tp_q: bool,
    /// `k` layout flag.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    tp_k: bool,
    /// Output layout flag.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    tp_out: bool,
    /// Also write the negated row max (`--neg-max`) and reciprocal row sum (`--sum`).
    #[arg(long)]
    cache_softmax: bool,
    /// Leave the output unnormalized; `--sum` gets the raw row sum.
    #[arg(long)]
    skip_output_normalization: bool,
    /// Sequence packing lower bounds `(bs, seqlen_q, 1)`.
    #[arg(long, requires = "bound_max")]
    bound_min: Option<PathBuf>,
    /// Sequence packing upper bounds `(bs, seqlen_q, 1)`.
    #[arg(long, requires = "bound_min")]
    bound_max: Option<PathBuf>,
    #[command(flatten)]
    launch: LaunchArgs,
    /// Output file.
    #[arg(long)]
    out: PathBuf,
    /// With `--cache-softmax`: where to write the negated row max.
    #[arg(long)]
    neg_max: Option<PathBuf>,
    /// With `--cache-softmax`: where to write the (reciprocal) row sum.
    #[arg(long)]
    sum: Option<PathBuf>,
}

/// Loads the inputs, runs `attention_cte` and writes its outputs.
pub fn run(a: &CteArgs) -> Result<(), String> {
    if a.cache_softmax {
        required_path(&a.neg_max, "--neg-max", "with --cache-softmax")?;
        required_path(&a.sum, "--sum", "with --cache-softmax")?;
    }
    let (q, k, v) = (load(&a.q, "q")?, load(&a.k, "k")?, load(&a.v, "v")?);
    let k_prior = a.k_prior.as_deref().map(|p| load(p, "k-prior")).transpose()?;
    let v_prior = a.v_prior.as_deref().map(|p| load(p, "v-prior")).transpose()?;
    let used = a.prior_used_len.map(|n| Tensor::from_i64(&[1], &[n], Dtype::I32).map_err(|e| e.to_string())).transpose()?;
    let sink = a.sink.as_deref().map(|p| load(p, "sink")).transpose()?;
    let cp_offset = a.cp_offset.map(|n| Tensor::from_i64(&[1, 1], &[n], Dtype::I32).map_err(|e| e.to_string())).transpose()?;
    let bound_min = a.bound_min.as_deref().map(|p| load(p, "bound-min")).transpose()?;
    let bound_max = a.bound_max.as_deref().map(|p| load(p, "bound-max")).transpose()?;
    let mut cfg = CteConfig::new()
        .scale(a.scale)
        .causal_mask(!a.no_causal)
        .sliding_window(a.sliding_window)
        .prefix_caching(k_prior.is_some())
        .sink(sink.is_some())
        .layouts(a.tp_q, a.tp_k, a.tp_out)
        .cache_softmax(a.cache_softmax)
        .cp_strided_q_slicing(a.cp_strided_q_slicing)
        .cp_striped_input(a.cp_striped_input)
        .packing(bound_min.is_some())
        .skip_output_normalization(a.skip_output_normalization);
    if let Some(deg) = a.global_cp_deg {
        cfg = cfg.context_parallel(deg);
    }
    let prior = match (&k_prior, &v_prior, &used) {
        (Some(k), Some(v), Some(used_len)) => Some(Prior { k, v, used_len }),
        _ => None,
    };
    let inputs = CteInputs {
        prior,
        sink: sink.as_ref(),
        cp_offset: cp_offset.as_ref(),
        bounds: bound_min.as_ref().zip(bound_max.as_ref()),
        ..CteInputs::new(&q, &k, &v)
    };
    let outs = cfg.launch(&a.launch.launch(), &inputs).map_err(|e| e.to_string())?;
    save(&a.out, &outs.out)?;
    if let (Some(nm), Some(path)) = (&outs.neg_max, &a.neg_max) {
        save(path, nm)?;
    }
    if let (Some(sm), Some(path)) = (&outs.sum, &a.sum) {
        save(path, sm)?;
    }
    Ok(())
}
