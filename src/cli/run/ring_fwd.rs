//! `nki run ring-fwd`.

use super::{LaunchArgs, RingArgs, RingQkv, declare_checked, declare_output, launch_error, read_inputs, whole_sequence};
use crate::cli::CliError;
use crate::cli::deadline;
use clap::Args;
use nki::attention::ring_fwd::{DTYPES, Queries, RingFwdConfig, RingFwdInputs};
use nki::attention::shard::{per_rank, shard, unshard, unshard_lse};
use std::path::PathBuf;

/// Arguments of `nki run ring-fwd`: whole-sequence inputs, sharded over the ring
/// and gathered back.
#[derive(Args)]
pub struct RingFwdArgs {
    #[command(flatten)]
    qkv: RingQkv,
    #[command(flatten)]
    ring: RingArgs,
    /// Also write the log-sum-exp of the scaled scores (`--lse`).
    #[arg(long)]
    training: bool,
    #[command(flatten)]
    launch: LaunchArgs,
    /// Output `[b, h, S_total, d]` (required by `nki run`; `nki profile` writes it only if given).
    #[arg(long)]
    out: Option<PathBuf>,
    /// With `--training`: the log-sum-exp `[b, h, S_total]` (natural log).
    #[arg(long, requires = "training")]
    lse: Option<PathBuf>,
}

/// Checks the configuration, the headers of the files (dtypes, shapes, the
/// split over the ring) and the outputs, then shards the inputs, runs the ring
/// and writes the gathered outputs all or nothing.
pub fn run(a: &RingFwdArgs, outputs_required: bool) -> Result<(), CliError> {
    let ring = a.ring.features().map_err(CliError::usage)?;
    let layout = ring.layout;
    let cfg = RingFwdConfig::new(ring.num_workers).features(ring).training(a.training);
    cfg.validate().map_err(|e| CliError::from_nki(&e))?;
    a.launch.start_deadline();
    let w = a.ring.workers;
    let launch = a.launch.launch().ranks(w);
    let mut plan = a.launch.plan(&launch);
    let files = a.qkv.files();
    let ins = declare_checked(&mut plan, &files, &DTYPES)?;
    let [b, h, st, d] = whole_sequence(&plan, ("q", ins[0]), &[("k", ins[1]), ("v", ins[2])])?;
    let h_kv = plan.header(ins[1]).shape()[1];
    let extras = a.ring.declare_extras(&mut plan, &DTYPES, [b, h, st])?;
    // The typed API's checks on per-rank stand-ins of the headers' shapes, before any payload is read.
    let sl = per_rank(st, w, layout.unit()).map_err(|e| CliError::usage(format!("--q: {e}")))?;
    let dtype = |i: usize| plan.header(ins[i]).dtype();
    let stand = |shape: &[usize], dt| super::stand_ins(shape, dt, w);
    let (qs, ks, vs) = (stand(&[b, h, d, sl], dtype(0))?, stand(&[b, h_kv, d, sl], dtype(1))?, stand(&[b, h_kv, sl, d], dtype(2))?);
    let (sinks, ids, bias) = a.ring.extra_stand_ins(&plan, &extras, [b, h, st], sl)?;
    let segment_ids = ids.as_ref().map(|(q, kv)| (q.as_slice(), kv.as_slice()));
    let inputs = RingFwdInputs { q: Queries::Raw(&qs), k: &ks, v: &vs, sinks: sinks.as_ref(), segment_ids, bias: bias.as_deref() };
    cfg.check(&launch, &inputs).map_err(|e| CliError::from_nki(&e))?;
    declare_output(&mut plan, "out", a.out.as_deref(), outputs_required, "(where the output is written)")?;
    if a.training {
        declare_output(&mut plan, "lse", a.lse.as_deref(), outputs_required, "with --training")?;
    }
    // One whole input at a time is read and sharded, then dropped.
    let err = |e: nki::NkiError| CliError::from_nki(&e);
    let mut parts = Vec::with_capacity(3);
    for (i, (param, _)) in files.iter().enumerate() {
        let whole = read_inputs(&plan, &[(param, ins[i])])?.remove(0);
        parts.push(shard(&whole, w, layout, *param != "v").map_err(err)?);
    }
    let (sinks, ids, bias) = a.ring.read_extras(&plan, &extras)?;
    let segment_ids = ids.as_ref().map(|(q, kv)| (q.as_slice(), kv.as_slice()));
    let inputs =
        RingFwdInputs { q: Queries::Raw(&parts[0]), k: &parts[1], v: &parts[2], sinks: sinks.as_ref(), segment_ids, bias: bias.as_deref() };
    let outs = cfg.launch(&deadline::bound(launch), &inputs).map_err(|e| launch_error(&e))?;
    drop(parts);
    let mut written = Vec::new();
    if a.out.is_some() {
        written.push(unshard(&outs.out, layout, false).map_err(err)?);
    }
    if let (Some(lse), Some(_)) = (&outs.lse, &a.lse) {
        written.push(unshard_lse(lse, layout).map_err(err)?);
    }
    plan.commit(&written.iter().collect::<Vec<_>>()).map_err(CliError::failure)
}
