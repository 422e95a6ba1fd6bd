//! `nki run attention-tkg`.

use super::{LaunchArgs, declare_inputs, load_all};
use crate::cli::output_plan::OutputPlan;
use clap::Args;
use nki::Tensor;
use nki::attention::tkg::{DTYPES, TkgConfig, TkgDims, TkgInputs};
use std::path::{Path, PathBuf};

/// Arguments of `nki run attention-tkg`: one decode step, inputs in the kernel's
/// own layouts. The `AttnTKGConfig` shapes come from the files: `bs`, `s_active`
/// and `d_head` from `--v-active`, `curr_sprior` and `q_head` from `--mask`,
/// `full_sprior` from `--v-prior`.
#[derive(Args)]
pub struct TkgArgs {
    /// Queries `(d, bs·q_head·s_active)`, pre-scaled (column `(b·q_head + h)·s_active + t`).
    #[arg(long)]
    q: PathBuf,
    /// Active keys `(d, bs·s_active)`.
    #[arg(long)]
    k_active: PathBuf,
    /// Active values `(bs, 1, s_active, d)`.
    #[arg(long)]
    v_active: PathBuf,
    /// Cached keys `(B+, 1, d, full_sprior)`, or `(B+, 1, full_sprior, d)` with `--tp-k-prior`.
    #[arg(long)]
    k_prior: PathBuf,
    /// Cached values `(B+, 1, full_sprior, d)`.
    #[arg(long)]
    v_prior: PathBuf,
    /// uint8 visibility `(curr_sprior, bs, q_head, s_active)`, nonzero: visible.
    #[arg(long)]
    mask: PathBuf,
    /// Sink logits `(q_head, 1)`.
    #[arg(long)]
    sink: Option<PathBuf>,
    /// `--k-prior` is `(B+, 1, full_sprior, d)`.
    #[arg(long)]
    tp_k_prior: bool,
    #[command(flatten)]
    launch: LaunchArgs,
    /// Output file: `(bs, q_head, d, s_active)` in `q`'s dtype.
    #[arg(long)]
    out: PathBuf,
}

/// Dimension `i` of the rank-4 tensor of `param`, or an error naming the flag.
fn dim(t: &Tensor, param: &str, i: usize, layout: &str) -> Result<i64, String> {
    match t.shape() {
        s if s.len() == 4 => Ok(s[i] as i64),
        s => Err(format!("--{} has shape {s:?}; attention_tkg takes it as {layout}", param.replace('_', "-"))),
    }
}

/// Checks the files, infers the shapes, runs `attention_tkg` and writes its
/// output (nothing on failure).
pub fn run(a: &TkgArgs) -> Result<(), String> {
    let launch = a.launch.launch();
    let mut plan = OutputPlan::new().threads(launch.thread_budget());
    let mut files: Vec<(&str, &Path)> = vec![
        ("q", &a.q),
        ("k_active", &a.k_active),
        ("v_active", &a.v_active),
        ("k_prior", &a.k_prior),
        ("v_prior", &a.v_prior),
        ("mask", &a.mask),
    ];
    files.extend(a.sink.as_deref().map(|p| ("sink", p)));
    declare_inputs(&mut plan, &files)?;
    plan.output("out", &a.out)?;
    let t = load_all(&plan, &files, &DTYPES)?;
    let (v_active, v_prior, mask) = (&t[2], &t[4], &t[5]);
    let dims = TkgDims {
        bs: dim(v_active, "v_active", 0, "(bs, 1, s_active, d)")?,
        q_head: dim(mask, "mask", 2, "(curr_sprior, bs, q_head, s_active)")?,
        s_active: dim(v_active, "v_active", 2, "(bs, 1, s_active, d)")?,
        curr_sprior: dim(mask, "mask", 0, "(curr_sprior, bs, q_head, s_active)")?,
        full_sprior: dim(v_prior, "v_prior", 2, "(B+, 1, full_sprior, d)")?,
        d_head: dim(v_active, "v_active", 3, "(bs, 1, s_active, d)")?,
    };
    let cfg = TkgConfig::new(dims).tp_k_prior(a.tp_k_prior).sink(a.sink.is_some());
    let inputs = TkgInputs { q: &t[0], k_active: &t[1], v_active, k_prior: &t[3], v_prior, mask, sink: t.get(6) };
    let out = cfg.launch(&launch, &inputs).map_err(|e| e.to_string())?;
    plan.commit(&[&out])
}
