//! `nki run attention-cte`.

use super::{LaunchArgs, declare_checked, declare_output, launch_error, placeholder, read_inputs};
use crate::cli::CliError;
use crate::cli::deadline;
use crate::cli::output_plan::{Input, OutputPlan};
use clap::Args;
use nki::attention::cte::{CteConfig, CteDims, CteInputs, DTYPES, Prior};
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
    /// Output file (required by `nki run`; `nki profile` writes it only if given).
    #[arg(long)]
    out: Option<PathBuf>,
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
    fn declare_outputs(&self, plan: &mut OutputPlan, required: bool) -> Result<(), CliError> {
        declare_output(plan, "out", self.out.as_deref(), required, "(where the output is written)")?;
        if self.cache_softmax {
            declare_output(plan, "neg-max", self.neg_max.as_deref(), required, "with --cache-softmax")?;
            declare_output(plan, "sum", self.sum.as_deref(), required, "with --cache-softmax")?;
        }
        Ok(())
    }

    /// The dims the headers of `q`, `k` and `k_prior` describe in the layouts the flags set.
    fn dims(&self, plan: &OutputPlan, q: Input, k: Input, k_prior: Option<Input>) -> Result<CteDims, CliError> {
        let dims3 = |i: Input, layout: &str| -> Result<[i64; 3], CliError> {
            let s = plan.header(i).shape();
            <[usize; 3]>::try_from(s)
                .map(|d| d.map(|x| x as i64))
                .map_err(|_| CliError::usage(format!("{}: shape {s:?} must be 3-d {layout}", plan.describe(i))))
        };
        let (q_layout, k_layout) = (
            if self.tp_q { "(bs, seqlen_q, d)" } else { "(bs, d, seqlen_q)" },
            if self.tp_k { "(bs_kv, seqlen_kv, d)" } else { "(bs_kv, d, seqlen_kv)" },
        );
        let [b, q1, q2] = dims3(q, q_layout)?;
        let [bkv, k1, k2] = dims3(k, k_layout)?;
        let (seqlen_q, head_dim) = if self.tp_q { (q1, q2) } else { (q2, q1) };
        let seqlen_kv = if self.tp_k { k1 } else { k2 };
        let seqlen_prior = match k_prior {
            Some(i) => {
                let [_, p1, p2] = dims3(i, k_layout)?;
                if self.tp_k { p1 } else { p2 }
            }
            None => 0,
        };
        Ok(CteDims { batch: b, batch_kv: bkv, seqlen_q, seqlen_kv, head_dim, seqlen_prior })
    }
}

/// An int32 scalar tensor of `shape` holding `n`.
fn int32(shape: &[usize], n: i64) -> Result<Tensor, CliError> {
    Tensor::from_i64(shape, &[n], Dtype::I32).map_err(|e| CliError::usage(e.to_string()))
}

/// The call's inputs from `input(param)`, the tensor of each parameter given.
fn inputs<'a>(
    input: impl Fn(&str) -> Option<&'a Tensor>,
    used: Option<&'a Tensor>,
    cp_offset: Option<&'a Tensor>,
) -> Result<CteInputs<'a>, CliError> {
    let (Some(q), Some(k), Some(v)) = (input("q"), input("k"), input("v")) else {
        return Err(CliError::usage("--q, --k and --v are required"));
    };
    let prior = match (input("k_prior"), input("v_prior"), used) {
        (Some(k), Some(v), Some(used_len)) => Some(Prior { k, v, used_len }),
        _ => None,
    };
    let bounds = input("bound_min").zip(input("bound_max"));
    Ok(CteInputs { prior, sink: input("sink"), cp_offset, bounds, ..CteInputs::new(q, k, v) })
}

/// Checks the configuration, the headers of the files (dtypes, shapes against
/// the configuration) and the outputs, then loads the inputs, runs
/// `attention_cte` and writes its outputs all or nothing.
pub fn run(a: &CteArgs, outputs_required: bool) -> Result<(), CliError> {
    let cfg = a.config();
    cfg.validate().map_err(|e| CliError::from_nki(&e))?;
    a.launch.start_deadline();
    let launch = a.launch.launch();
    let mut plan = a.launch.plan(&launch);
    let files = a.input_files();
    let declared: Vec<(&str, Input)> = files.iter().map(|&(p, _)| p).zip(declare_checked(&mut plan, &files, &DTYPES)?).collect();
    let find = |param: &str| declared.iter().find(|(p, _)| *p == param).map(|&(_, i)| i);
    let (Some(q), Some(k)) = (find("q"), find("k")) else {
        return Err(CliError::usage("--q, --k and --v are required"));
    };
    let cfg = CteConfig { dims: Some(a.dims(&plan, q, k, find("k_prior"))?), ..cfg };
    let used = a.prior_used_len.map(|n| int32(&[1], n)).transpose()?;
    let cp_offset = a.cp_offset.map(|n| int32(&[1, 1], n)).transpose()?;
    // Shapes and dtypes against the configuration, from the headers alone.
    let stand_ins = declared.iter().map(|&(p, i)| placeholder(&plan, i).map(|t| (p, t))).collect::<Result<Vec<_>, _>>()?;
    let stand_in = |param: &str| stand_ins.iter().find(|(p, _)| *p == param).map(|(_, t)| t);
    cfg.check(&inputs(stand_in, used.as_ref(), cp_offset.as_ref())?).map_err(|e| CliError::from_nki(&e))?;
    a.declare_outputs(&mut plan, outputs_required)?;
    drop(stand_ins);
    let loaded = read_inputs(&plan, &declared)?;
    let input = |param: &str| declared.iter().position(|(p, _)| *p == param).map(|i| &loaded[i]);
    let outs = cfg.launch(&deadline::bound(launch), &inputs(input, used.as_ref(), cp_offset.as_ref())?).map_err(|e| launch_error(&e))?;
    // The outputs declared: all of them under `nki run`, those given under `nki profile`.
    let given = [(a.out.is_some(), Some(&outs.out)), (a.neg_max.is_some(), outs.neg_max.as_ref()), (a.sum.is_some(), outs.sum.as_ref())];
    let written: Vec<&Tensor> = given.into_iter().filter_map(|(given, t)| t.filter(|_| given)).collect();
    plan.commit(&written).map_err(CliError::failure)
}
