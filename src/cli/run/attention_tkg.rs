//! `nki run attention-tkg`.

use super::{LaunchArgs, declare_checked, declare_output, launch_error, placeholder, read_inputs};
use crate::cli::CliError;
use crate::cli::deadline;
use crate::cli::output_plan::{Input, OutputPlan};
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
    /// Output file: `(bs, q_head, d, s_active)` in `q`'s dtype (required by `nki run`;
    /// `nki profile` writes it only if given).
    #[arg(long)]
    out: Option<PathBuf>,
}

/// Dimension `i` of the rank-4 header of `input`, or an error naming the flag.
fn dim(plan: &OutputPlan, input: Input, i: usize, layout: &str) -> Result<i64, CliError> {
    match plan.header(input).shape() {
        s if s.len() == 4 => Ok(s[i] as i64),
        s => Err(CliError::usage(format!("{}: shape {s:?}; attention_tkg takes it as {layout}", plan.describe(input)))),
    }
}

/// The call's inputs, the tensors in the order of the files.
fn inputs(t: &[Tensor]) -> TkgInputs<'_> {
    TkgInputs { q: &t[0], k_active: &t[1], v_active: &t[2], k_prior: &t[3], v_prior: &t[4], mask: &t[5], sink: t.get(6) }
}

/// Checks the headers of the files (dtypes, the shapes they imply) and the
/// output, then loads the inputs, runs `attention_tkg` and writes its output
/// (nothing on failure).
pub fn run(a: &TkgArgs, outputs_required: bool) -> Result<(), CliError> {
    a.launch.start_deadline();
    let launch = a.launch.launch();
    let mut plan = a.launch.plan(&launch);
    let mut files: Vec<(&str, &Path)> = vec![
        ("q", &a.q),
        ("k_active", &a.k_active),
        ("v_active", &a.v_active),
        ("k_prior", &a.k_prior),
        ("v_prior", &a.v_prior),
        ("mask", &a.mask),
    ];
    files.extend(a.sink.as_deref().map(|p| ("sink", p)));
    let ins = declare_checked(&mut plan, &files, &DTYPES)?;
    let (v_active, v_prior, mask) = (ins[2], ins[4], ins[5]);
    let dims = TkgDims {
        bs: dim(&plan, v_active, 0, "(bs, 1, s_active, d)")?,
        q_head: dim(&plan, mask, 2, "(curr_sprior, bs, q_head, s_active)")?,
        s_active: dim(&plan, v_active, 2, "(bs, 1, s_active, d)")?,
        curr_sprior: dim(&plan, mask, 0, "(curr_sprior, bs, q_head, s_active)")?,
        full_sprior: dim(&plan, v_prior, 2, "(B+, 1, full_sprior, d)")?,
        d_head: dim(&plan, v_active, 3, "(bs, 1, s_active, d)")?,
    };
    let cfg = TkgConfig::new(dims).tp_k_prior(a.tp_k_prior).sink(a.sink.is_some());
    let stand_ins = ins.iter().map(|&i| placeholder(&plan, i)).collect::<Result<Vec<_>, _>>()?;
    cfg.check(&inputs(&stand_ins)).map_err(|e| CliError::from_nki(&e))?;
    drop(stand_ins);
    declare_output(&mut plan, "out", a.out.as_deref(), outputs_required, "(where the output is written)")?;
    let declared: Vec<(&str, Input)> = files.iter().map(|&(p, _)| p).zip(ins).collect();
    let t = read_inputs(&plan, &declared)?;
    let out = cfg.launch(&deadline::bound(launch), &inputs(&t)).map_err(|e| launch_error(&e))?;
    let written: Vec<&Tensor> = a.out.as_ref().map(|_| &out).into_iter().collect();
    plan.commit(&written).map_err(CliError::failure)
}
