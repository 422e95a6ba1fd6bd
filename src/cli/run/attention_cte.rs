//! `nki run attention-cte`.

use super::{LaunchArgs, declare_inputs, load_all, required_path};
use crate::cli::output_plan::OutputPlan;
use clap::Args;
use nki::attention::cte::{CteConfig, CteInputs, DTYPES, Prior};
use nki::{Dtype, Tensor};
use std::path::{Path, PathBuf};

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
    /// Scale of `QKᵀ`: a finite float32 value; at least 1e-30 with the causal mask.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
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
    #[arg(long, requires = "cache_softmax")]
    neg_max: Option<PathBuf>,
    /// With `--cache-softmax`: where to write the (reciprocal) row sum.
    #[arg(long, requires = "cache_softmax")]
    sum: Option<PathBuf>,
}

impl CteArgs {
    /// The configuration the flags describe (optional tensors by the files given).
    fn config(&self) -> CteConfig {
        let cfg = CteConfig::new()
            .scale(self.scale)
            .causal_mask(!self.no_causal)
            .sliding_window(self.sliding_window)
            .prefix_caching(self.k_prior.is_some())
            .sink(self.sink.is_some())
            .layouts(self.tp_q, self.tp_k, self.tp_out)
            .cache_softmax(self.cache_softmax)
            .cp_strided_q_slicing(self.cp_strided_q_slicing)
            .cp_striped_input(self.cp_striped_input)
            .packing(self.bound_min.is_some())
            .skip_output_normalization(self.skip_output_normalization);
        match self.global_cp_deg {
            Some(deg) => cfg.context_parallel(deg),
            None => cfg,
        }
    }

    /// Every input file given, by kernel parameter.
    fn input_files(&self) -> Vec<(&'static str, &Path)> {
        let optional = [
            ("k_prior", &self.k_prior),
            ("v_prior", &self.v_prior),
            ("sink", &self.sink),
            ("bound_min", &self.bound_min),
            ("bound_max", &self.bound_max),
        ];
        let mut files = vec![("q", self.q.as_path()), ("k", self.k.as_path()), ("v", self.v.as_path())];
        files.extend(optional.into_iter().filter_map(|(param, p)| p.as_deref().map(|p| (param, p))));
        files
    }

    /// The output files, declared in the order the kernel returns them.
    fn declare_outputs(&self, plan: &mut OutputPlan) -> Result<(), String> {
        plan.output("out", &self.out)?;
        if self.cache_softmax {
            plan.output("neg-max", required_path(&self.neg_max, "--neg-max", "with --cache-softmax")?)?;
            plan.output("sum", required_path(&self.sum, "--sum", "with --cache-softmax")?)?;
        }
        Ok(())
    }
}

/// An int32 scalar tensor of `shape` holding `n`.
fn int32(shape: &[usize], n: i64) -> Result<Tensor, String> {
    Tensor::from_i64(shape, &[n], Dtype::I32).map_err(|e| e.to_string())
}

/// Checks the configuration and the files, loads the inputs, runs `attention_cte`
/// and writes its outputs all or nothing.
pub fn run(a: &CteArgs) -> Result<(), String> {
    let cfg = a.config();
    cfg.validate().map_err(|e| e.to_string())?;
    let launch = a.launch.launch();
    let mut plan = OutputPlan::new().threads(launch.thread_budget());
    let files = a.input_files();
    declare_inputs(&mut plan, &files)?;
    a.declare_outputs(&mut plan)?;
    let loaded = load_all(&plan, &files, &DTYPES)?;
    let input = |param: &str| files.iter().position(|(p, _)| *p == param).map(|i| &loaded[i]);
    let (Some(q), Some(k), Some(v)) = (input("q"), input("k"), input("v")) else {
        return Err("--q, --k and --v are required".into());
    };
    let (k_prior, v_prior, sink) = (input("k_prior"), input("v_prior"), input("sink"));
    let (bound_min, bound_max) = (input("bound_min"), input("bound_max"));
    let used = a.prior_used_len.map(|n| int32(&[1], n)).transpose()?;
    let cp_offset = a.cp_offset.map(|n| int32(&[1, 1], n)).transpose()?;
    let prior = match (k_prior, v_prior, &used) {
        (Some(k), Some(v), Some(used_len)) => Some(Prior { k, v, used_len }),
        _ => None,
    };
    let inputs = CteInputs { prior, sink, cp_offset: cp_offset.as_ref(), bounds: bound_min.zip(bound_max), ..CteInputs::new(q, k, v) };
    let outs = cfg.launch(&launch, &inputs).map_err(|e| e.to_string())?;
    let written: Vec<&Tensor> = [Some(&outs.out), outs.neg_max.as_ref(), outs.sum.as_ref()].into_iter().flatten().collect();
    plan.commit(&written)
}
