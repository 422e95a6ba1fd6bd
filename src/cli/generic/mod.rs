//! `nki run KERNEL` and `nki profile KERNEL` for every registered kernel: its
//! inputs read by the flags its registry entry declares ([`args`]), the kernel
//! run through the entry on every rank, its outputs written as
//! `DIR/out0.npy`, `DIR/out1.npy`, ... in return order, all or nothing.
//!
//! A refused input — an unknown flag, a missing or unreadable file, a value of
//! the wrong kind, or a tensor the kernel refuses (its asserts, or a shape or
//! dtype its ops do not take) — is a usage error: one line naming the parameter,
//! exit code 2, nothing written.

pub mod args;

use super::CliError;
use super::output_plan::OutputPlan;
use super::run::BASE_LAUNCH;
use args::{Given, Invocation, flag_of};
use nki::emit::ArgValue;
use nki::{ErrorKind, Launch, NkiError, Tensor};
use std::path::{Path, PathBuf};

/// What a rank's placeholder looks like in a per-rank tensor path.
const RANK_PLACEHOLDER: &str = "{rank}";

/// Parses `raw` (the kernel's name, then its flags), loads the inputs, runs the
/// kernel and writes its outputs to `--out` (required by `nki run`, optional for
/// `nki profile`). Prints the kernel's help for `--help` instead, returning
/// false (nothing ran).
pub fn run(command: &str, raw: &[String], out_required: bool) -> Result<bool, CliError> {
    let (name, flags) = raw.split_first().ok_or_else(|| CliError::usage("a kernel name is required (`nki list` shows them)"))?;
    let kernel = args::find_kernel(name).map_err(CliError::usage)?;
    let Some(inv) = args::parse(kernel, flags).map_err(CliError::usage)? else {
        outln!("{}", args::help(kernel, command));
        return Ok(false);
    };
    if out_required && inv.out.is_none() {
        return Err(CliError::usage(format!("{} requires --out DIR (where out0.npy, ... are written)", kernel.name)));
    }
    if let Some(dir) = &inv.out
        && !dir.is_dir()
    {
        return Err(CliError::usage(format!("--out {}: not an existing directory", dir.display())));
    }
    let launch = launch(&inv);
    let mut plan = OutputPlan::new().threads(launch.thread_budget());
    let per_rank = load_inputs(&inv, &mut plan)?;
    let entry = kernel.entry.ok_or_else(|| CliError::usage(format!("{} cannot be run from the command line", kernel.name)))?;
    let outputs = launch.run_ranks(|ctx| entry(ctx, &per_rank[ctx.rank()])).map_err(|e| refusal(&inv, &per_rank[0], e))?;
    let Some(dir) = &inv.out else {
        return Ok(true);
    };
    let mut written = Vec::new();
    for (rank, outs) in outputs.iter().enumerate() {
        for (i, t) in outs.iter().enumerate() {
            let file = if inv.ranks == 1 { format!("out{i}.npy") } else { format!("out{i}.rank{rank}.npy") };
            plan.output("out", &dir.join(file))?;
            written.push(t);
        }
    }
    plan.commit(&written)?;
    Ok(true)
}

/// The launch the flags describe (on the profiled base launch under `nki profile`).
fn launch(inv: &Invocation) -> Launch {
    let base = BASE_LAUNCH.get().cloned().unwrap_or_default();
    let base = match inv.target {
        Some(g) => base.generation(g),
        None => base,
    };
    let lnc = inv.lnc.unwrap_or(base.hardware().limits().default_lnc);
    let launch = base.lnc(lnc).ranks(inv.ranks).precision(inv.precision);
    let launch = match inv.threads {
        Some(n) => launch.threads(n),
        None => launch,
    };
    match inv.timeout {
        Some(limit) => launch.timeout(limit),
        None => launch,
    }
}

/// Each rank's argument list: tensors read from their files (declared as inputs
/// of `plan`), the other values parsed from their text.
fn load_inputs(inv: &Invocation, plan: &mut OutputPlan) -> Result<Vec<Vec<Option<ArgValue>>>, CliError> {
    let mut per_rank: Vec<Vec<Option<ArgValue>>> = vec![Vec::with_capacity(inv.params.len()); inv.ranks];
    for (p, given) in &inv.params {
        let flag = flag_of(p.name);
        match given {
            None => per_rank.iter_mut().for_each(|a| a.push(None)),
            Some(Given::Text(text)) => {
                let v = args::parse_scalar(p, text).map_err(CliError::usage)?;
                per_rank.iter_mut().for_each(|a| a.push(Some(v.clone())));
            }
            Some(Given::Path(pattern)) if pattern.contains(RANK_PLACEHOLDER) => {
                for (rank, a) in per_rank.iter_mut().enumerate() {
                    let path = PathBuf::from(pattern.replace(RANK_PLACEHOLDER, &rank.to_string()));
                    a.push(Some(ArgValue::Tensor(load(plan, &flag, &path, p.name)?)));
                }
            }
            Some(Given::Path(path)) => {
                let t = load(plan, &flag, Path::new(path), p.name)?;
                per_rank.iter_mut().for_each(|a| a.push(Some(ArgValue::Tensor(t.clone()))));
            }
        }
    }
    Ok(per_rank)
}

/// Declares and reads one tensor input.
fn load(plan: &mut OutputPlan, flag: &str, path: &Path, param: &str) -> Result<Tensor, CliError> {
    plan.input(flag.trim_start_matches("--"), path).map_err(CliError::usage)?;
    let t = plan.read(path).map_err(|e| CliError::usage(format!("{flag} {e}")))?;
    Ok(t.named(param))
}

/// A failed run as the command reports it: an error the inputs caused (the
/// kernel's asserts, an argument, shape, dtype or bounds rule) is a usage error
/// that lists the inputs it was given; anything else is a failure.
fn refusal(inv: &Invocation, args: &[Option<ArgValue>], e: NkiError) -> CliError {
    let caused_by_inputs =
        matches!(e.kind, ErrorKind::Assertion | ErrorKind::Argument | ErrorKind::Shape | ErrorKind::Dtype | ErrorKind::Bounds);
    if !caused_by_inputs {
        return CliError::failure(e.to_string());
    }
    let inputs: Vec<String> = inv
        .params
        .iter()
        .zip(args)
        .filter_map(|((p, given), a)| match (given, a) {
            (Some(Given::Path(path)), Some(ArgValue::Tensor(t))) => {
                Some(format!("{} {path}: {} {:?}", flag_of(p.name), t.dtype(), t.shape()))
            }
            _ => None,
        })
        .collect();
    CliError::usage(format!("{} refused its inputs ({}): {e}", inv.kernel.name, inputs.join(", ")))
}
