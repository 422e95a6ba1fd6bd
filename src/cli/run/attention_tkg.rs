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
/// and `d_head` from `--v-active`, `q_head` from `--mask`, `curr_sprior` from
/// `--mask` (from `--curr-sprior` with `--use-pos-id`), `full_sprior` from `--v-prior`.
#[derive(Args)]
pub struct TkgArgs {
    /// Queries `(d, bs·q_head·s_active)` (column `(b·q_head + h)·s_active + t`), or
    /// `(bs, q_head, s_active, d)` with `--qk-in-hbm-layout`; pre-scaled unless `--fuse-rope`.
    #[arg(long)]
    q: PathBuf,
    /// Active keys `(d, bs·s_active)`, or `(bs, 1, s_active, d)` with `--qk-in-hbm-layout`.
    #[arg(long)]
    k_active: PathBuf,
    /// Active values `(bs, 1, s_active, d)`.
    #[arg(long)]
    v_active: PathBuf,
    /// Cached keys `(B+, 1, d, full_sprior)`, or `(B+, 1, full_sprior, d)` with `--tp-k-prior`,
    /// or `(blocks, block_len, d)` with `--active-blocks-table`.
    #[arg(long)]
    k_prior: PathBuf,
    /// Cached values `(B+, 1, full_sprior, d)`, or `(blocks, block_len, d)` with `--active-blocks-table`.
    #[arg(long)]
    v_prior: PathBuf,
    /// uint8 visibility `(curr_sprior, bs, q_head, s_active)`, nonzero: visible; with
    /// `--use-pos-id` only the active keys' block `(s_active, bs, q_head, s_active)`.
    #[arg(long)]
    mask: PathBuf,
    /// Sink logits `(q_head, 1)`.
    #[arg(long)]
    sink: Option<PathBuf>,
    /// RoPE inverse frequencies `(d/2, 1)` float32: fuses RoPE (`fuse_rope`), `q` then comes unscaled.
    #[arg(long)]
    inv_freqs: Option<PathBuf>,
    /// Positions of the active tokens `(bs, s_active)` (RoPE angles, and the mask with `--use-pos-id`).
    #[arg(long)]
    rope_pos_ids: Option<PathBuf>,
    /// Sliding-window starts `(bs, s_active)` (with `--use-pos-id`).
    #[arg(long)]
    start_pos_ids: Option<PathBuf>,
    /// A block KV cache: each batch's blocks `(bs, curr_sprior / block_len)` int32 or
    /// uint32, `--k-prior` / `--v-prior` `(blocks, block_len, d)` (with `--tp-k-prior`);
    /// the mask, if given in full, in the library's fold order.
    #[arg(long, requires = "tp_k_prior")]
    active_blocks_table: Option<PathBuf>,
    /// The cached keys' mask is generated from `--rope-pos-ids` (`use_pos_id`).
    #[arg(long, requires = "curr_sprior")]
    use_pos_id: bool,
    /// Cache positions in use, with `--use-pos-id` (else the mask's first dimension).
    #[arg(long)]
    curr_sprior: Option<i64>,
    /// `--k-prior` is `(B+, 1, full_sprior, d)`.
    #[arg(long)]
    tp_k_prior: bool,
    /// `--q` and `--k-active` in the HBM layouts (`qk_in_sb=False`; with `--inv-freqs` only).
    #[arg(long)]
    qk_in_hbm_layout: bool,
    /// `--out` is `(d, bs·q_head·s_active)` (`out_in_sb`).
    #[arg(long)]
    out_in_sb: bool,
    /// `--k-out` is `(d, bs·s_active)` (`k_out_in_sb`).
    #[arg(long)]
    k_out_in_sb: bool,
    /// The library's `strided_mm1=False` (a DMA pattern; the result does not depend on it).
    #[arg(long)]
    no_strided_mm1: bool,
    /// One pass over every cached key (`enable_fa_s_prior_tiling=False`).
    #[arg(long)]
    no_fa_tiling: bool,
    #[command(flatten)]
    launch: LaunchArgs,
    /// Output file: `(bs, q_head, d, s_active)` in `q`'s dtype (required by `nki run`;
    /// `nki profile` writes it only if given).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Output file for the active keys attended to (after RoPE when fused),
    /// `(bs, 1, d, s_active)` in `k_active`'s dtype; written only if given.
    #[arg(long)]
    k_out: Option<PathBuf>,
}

/// Dimension `i` of the rank-4 header of `input`, or an error naming the flag.
fn dim(plan: &OutputPlan, input: Input, i: usize, layout: &str) -> Result<i64, CliError> {
    match plan.header(input).shape() {
        s if s.len() == 4 => Ok(s[i] as i64),
        s => Err(CliError::usage(format!("{}: shape {s:?}; attention_tkg takes it as {layout}", plan.describe(input)))),
    }
}

/// The call's inputs: the tensors in the order of the files named by `names`.
fn inputs<'a>(t: &'a [Tensor], names: &[&str]) -> TkgInputs<'a> {
    let find = |name: &str| names.iter().position(|n| *n == name).map(|i| &t[i]);
    TkgInputs {
        sink: find("sink"),
        inv_freqs: find("inv_freqs"),
        rope_pos_ids: find("rope_pos_ids"),
        start_pos_ids: find("start_pos_ids"),
        active_blocks_table: find("active_blocks_table"),
        ..TkgInputs::new(&t[0], &t[1], &t[2], &t[3], &t[4], &t[5])
    }
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
    let optional = [
        ("sink", &a.sink),
        ("inv_freqs", &a.inv_freqs),
        ("rope_pos_ids", &a.rope_pos_ids),
        ("start_pos_ids", &a.start_pos_ids),
        ("active_blocks_table", &a.active_blocks_table),
    ];
    files.extend(optional.into_iter().filter_map(|(name, p)| p.as_deref().map(|p| (name, p))));
    let names: Vec<&str> = files.iter().map(|&(n, _)| n).collect();
    let ins = declare_checked(&mut plan, &files, &DTYPES)?;
    let (v_active, v_prior, mask) = (ins[2], ins[4], ins[5]);
    let curr_sprior = match a.curr_sprior {
        Some(n) if a.use_pos_id => n,
        _ => dim(&plan, mask, 0, "(curr_sprior, bs, q_head, s_active)")?,
    };
    let block_len = match a.active_blocks_table {
        Some(_) => Some(match plan.header(v_prior).shape() {
            s if s.len() == 3 => s[1] as i64,
            s => return Err(CliError::usage(format!("{}: shape {s:?}; a block cache is (blocks, block_len, d)", plan.describe(v_prior)))),
        }),
        None => None,
    };
    let dims = TkgDims {
        bs: dim(&plan, v_active, 0, "(bs, 1, s_active, d)")?,
        q_head: dim(&plan, mask, 2, "(curr_sprior, bs, q_head, s_active)")?,
        s_active: dim(&plan, v_active, 2, "(bs, 1, s_active, d)")?,
        curr_sprior,
        full_sprior: match block_len {
            // A block cache holds the whole sequence: the positions in use are its capacity.
            Some(_) => curr_sprior,
            None => dim(&plan, v_prior, 2, "(B+, 1, full_sprior, d)")?,
        },
        d_head: dim(&plan, v_active, 3, "(bs, 1, s_active, d)")?,
    };
    let cfg = TkgConfig::new(dims)
        .tp_k_prior(a.tp_k_prior)
        .sink(a.sink.is_some())
        .fuse_rope(a.inv_freqs.is_some())
        .use_pos_id(a.use_pos_id)
        .window(a.start_pos_ids.is_some())
        .qk_in_sb(!a.qk_in_hbm_layout)
        .out_in_sb(a.out_in_sb)
        .k_out_in_sb(a.k_out_in_sb)
        .strided_mm1(!a.no_strided_mm1)
        .fa_tiling(!a.no_fa_tiling)
        .block_len(block_len.unwrap_or(0));
    let stand_ins = ins.iter().map(|&i| placeholder(&plan, i)).collect::<Result<Vec<_>, _>>()?;
    cfg.check(&inputs(&stand_ins, &names)).map_err(|e| CliError::from_nki(&e))?;
    drop(stand_ins);
    declare_output(&mut plan, "out", a.out.as_deref(), outputs_required, "(where the output is written)")?;
    declare_output(&mut plan, "k-out", a.k_out.as_deref(), false, "")?;
    let declared: Vec<(&str, Input)> = names.iter().copied().zip(ins).collect();
    let t = read_inputs(&plan, &declared)?;
    let (out, k_out) = cfg.launch(&deadline::bound(launch), &inputs(&t, &names)).map_err(|e| launch_error(&e))?;
    let written: Vec<&Tensor> = [(&a.out, &out), (&a.k_out, &k_out)].into_iter().filter(|(p, _)| p.is_some()).map(|(_, t)| t).collect();
    plan.commit(&written).map_err(CliError::failure)
}
