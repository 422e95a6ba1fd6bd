//! `nki run ring-bwd`.

use super::{
    LaunchArgs, RingArgs, RingQkv, declare_checked, declare_output, expect_alike, expect_shape, launch_error, read_inputs, whole_sequence,
};
use crate::cli::CliError;
use crate::cli::deadline;
use clap::Args;
use nki::Tensor;
use nki::attention::ring_bwd::{DTYPES, RingBwdConfig, RingBwdInputs};
use nki::attention::shard::{per_rank, shard, shard_lse, unshard};
use std::path::PathBuf;

/// Arguments of `nki run ring-bwd`: whole-sequence inputs, sharded over the ring
/// and gathered back.
#[derive(Args)]
pub struct RingBwdArgs {
    #[command(flatten)]
    qkv: RingQkv,
    /// The forward's output `[b, h, S_total, d]`.
    #[arg(long)]
    o: PathBuf,
    /// The gradient of the loss with respect to the output `[b, h, S_total, d]`.
    #[arg(long)]
    dy: PathBuf,
    /// The forward's log-sum-exp of the scaled scores `[b, h, S_total]` (as `nki run ring-fwd --lse` writes it
    /// with the same flags).
    #[arg(long)]
    lse: PathBuf,
    #[command(flatten)]
    ring: RingArgs,
    #[command(flatten)]
    launch: LaunchArgs,
    /// dL/dQ `[b, h, S_total, d]` (the gradients are required by `nki run`; `nki profile`
    /// writes those given).
    #[arg(long)]
    dq: Option<PathBuf>,
    /// dL/dK `[b, h_kv, S_total, d]`.
    #[arg(long)]
    dk: Option<PathBuf>,
    /// dL/dV `[b, h_kv, S_total, d]`.
    #[arg(long)]
    dv: Option<PathBuf>,
    /// With `--sinks`: dL/dsinks `[h]`.
    #[arg(long, value_name = "FILE", requires = "sinks")]
    dsinks: Option<PathBuf>,
}

/// The per-rank tensors of the launch, without the optional ones.
fn ring_inputs<'a>(parts: &'a [Vec<Tensor>], lse: &'a [Tensor]) -> RingBwdInputs<'a> {
    RingBwdInputs { q: &parts[0], k: &parts[1], v: &parts[2], o: &parts[3], dy: &parts[4], lse, sinks: None, segment_ids: None, bias: None }
}

/// Checks the configuration, the headers of the files and the outputs, then
/// shards the inputs head-dim major, runs the ring and writes the gathered
/// gradients all or nothing.
pub fn run(a: &RingBwdArgs, outputs_required: bool) -> Result<(), CliError> {
    let w = a.ring.workers;
    let launch = a.launch.launch().ranks(w);
    let ring = a.ring.features().map_err(CliError::usage)?;
    let layout = ring.layout;
    let cfg = RingBwdConfig::new(ring.num_workers).features(ring).lnc(launch.lnc_degree() as i64);
    cfg.validate().map_err(|e| CliError::from_nki(&e))?;
    a.launch.start_deadline();
    let [q, k, v] = a.qkv.files();
    let files = [q, k, v, ("o", a.o.as_path()), ("dy", a.dy.as_path())];
    let mut plan = a.launch.plan(&launch);
    let mut ins = declare_checked(&mut plan, &files, &DTYPES)?;
    ins.extend(declare_checked(&mut plan, &[("lse", a.lse.as_path())], &DTYPES)?);
    // Q, O and dY share [b, h, S_total, d]; K and V [b, h_kv, S_total, d]; the LSE is [b, h, S_total].
    expect_alike(&plan, &[("q", ins[0]), ("o", ins[3]), ("dy", ins[4])])?;
    let [b, h, st, d] = whole_sequence(&plan, ("q", ins[0]), &[("k", ins[1]), ("v", ins[2])])?;
    expect_shape(&plan, ins[5], &[b, h, st], "[b, h, S_total], the forward's log-sum-exp")?;
    let h_kv = plan.header(ins[1]).shape()[1];
    let extras = a.ring.declare_extras(&mut plan, &DTYPES, [b, h, st])?;
    // The typed API's checks on per-rank stand-ins of the headers' shapes, before any payload is read.
    let sl = per_rank(st, w, layout.unit()).map_err(|e| CliError::usage(format!("--q: {e}")))?;
    let stand = |i: usize, heads: usize| super::stand_ins(&[b, heads, d, sl], plan.header(ins[i]).dtype(), w);
    let parts = [stand(0, h)?, stand(1, h_kv)?, stand(2, h_kv)?, stand(3, h)?, stand(4, h)?];
    let lses = super::stand_ins(&[b, h, 128, sl / 128], plan.header(ins[5]).dtype(), w)?;
    let (sinks, ids, bias) = a.ring.extra_stand_ins(&plan, &extras, [b, h, st], sl)?;
    let segment_ids = ids.as_ref().map(|(q, kv)| (q.as_slice(), kv.as_slice()));
    let check = RingBwdInputs { sinks: sinks.as_ref(), segment_ids, bias: bias.as_deref(), ..ring_inputs(&parts, &lses) };
    cfg.check(&launch, &check).map_err(|e| CliError::from_nki(&e))?;
    for (flag, path) in [("dq", &a.dq), ("dk", &a.dk), ("dv", &a.dv)] {
        declare_output(&mut plan, flag, path.as_deref(), outputs_required, "(where the gradient is written)")?;
    }
    if let Some(path) = &a.dsinks {
        plan.output("dsinks", path).map_err(CliError::usage)?;
    }
    // One whole input at a time is read and sharded, then dropped.
    let err = |e: nki::NkiError| CliError::from_nki(&e);
    let mut parts = Vec::with_capacity(5);
    for (i, (param, _)) in files.iter().enumerate() {
        let whole = read_inputs(&plan, &[(param, ins[i])])?.remove(0);
        parts.push(shard(&whole, w, layout, true).map_err(err)?);
    }
    let lse = read_inputs(&plan, &[("lse", ins[5])])?.remove(0);
    let lses = shard_lse(&lse, w, layout).map_err(err)?;
    drop(lse);
    let (sinks, ids, bias) = a.ring.read_extras(&plan, &extras)?;
    let segment_ids = ids.as_ref().map(|(q, kv)| (q.as_slice(), kv.as_slice()));
    let run = RingBwdInputs { sinks: sinks.as_ref(), segment_ids, bias: bias.as_deref(), ..ring_inputs(&parts, &lses) };
    let grads = cfg.launch(&deadline::bound(launch), &run).map_err(|e| launch_error(&e))?;
    drop(parts);
    let mut written = Vec::new();
    for (g, given) in [(&grads.dq, &a.dq), (&grads.dk, &a.dk), (&grads.dv, &a.dv)] {
        if given.is_some() {
            written.push(unshard(g, layout, true).map_err(err)?);
        }
    }
    if a.dsinks.is_some() {
        written.extend(grads.dsinks);
    }
    plan.commit(&written.iter().collect::<Vec<_>>()).map_err(CliError::failure)
}
