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

use super::output_plan::{Input, OutputPlan};
use super::run::BASE_LAUNCH;
use super::{CliError, deadline};
use args::{Given, Invocation, flag_of};
use nki::emit::ArgValue;
use nki::{Launch, NkiError, Precision, Tensor};
use std::path::PathBuf;

/// What a rank's placeholder looks like in a per-rank tensor path.
const RANK_PLACEHOLDER: &str = "{rank}";

/// Parses `raw` (the kernel's name, then its flags), checks every tensor
/// input's header against the parameter's dtype contract, every scalar against
/// its range and every output path, then loads the inputs, runs the kernel and
/// writes its outputs to `--out` (required by `nki run`, optional for `nki
/// profile`). Prints the kernel's help for `--help` instead, returning false
/// (nothing ran).
pub fn run(command: &str, raw: &[String], out_required: bool) -> Result<bool, CliError> {
    let (name, flags) =
        raw.split_first().ok_or_else(|| CliError::usage(format!("a kernel name is required (`{} list` shows them)", super::program())))?;
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
    deadline::start(inv.timeout);
    let base = BASE_LAUNCH.get().cloned().unwrap_or_default();
    let mut prepared = prepare(&inv, base)?;
    // Outputs the signature fixes are declared before the launch; a list of
    // outputs is declared once the run says how long it is (its directory checked now).
    let files = |n: usize| -> Vec<String> {
        (0..inv.ranks)
            .flat_map(|rank| (0..n).map(move |i| if inv.ranks == 1 { format!("out{i}.npy") } else { format!("out{i}.rank{rank}.npy") }))
            .collect()
    };
    if let Some(dir) = &inv.out {
        let plan = &mut prepared.plan;
        match kernel.outputs {
            Some(n) => files(n).iter().try_for_each(|f| plan.output("out", &dir.join(f))).map_err(CliError::usage)?,
            None => plan.check_dir("out", dir).map_err(CliError::usage)?,
        }
    }
    let outputs = prepared.launch(&inv)?;
    let plan = &mut prepared.plan;
    let Some(dir) = &inv.out else {
        return Ok(true);
    };
    if kernel.outputs.is_none() {
        let n = outputs.first().map_or(0, Vec::len);
        files(n).iter().try_for_each(|f| plan.output("out", &dir.join(f))).map_err(CliError::usage)?;
    }
    let written: Vec<&Tensor> = outputs.iter().flatten().collect();
    plan.commit(&written).map_err(CliError::failure)?;
    Ok(true)
}

/// A kernel's inputs read and checked against its parameters, ready to launch.
pub struct Prepared {
    /// The input files (and the outputs declared on it).
    pub plan: OutputPlan,
    declared: Vec<Option<Vec<Input>>>,
    per_rank: Vec<Vec<Option<ArgValue>>>,
    launch: Launch,
}

/// Checks and reads the inputs of `inv` for a launch on `base` (the flags'
/// target, LNC, ranks, precision and threads applied to it).
pub fn prepare(inv: &Invocation, base: Launch) -> Result<Prepared, CliError> {
    let launch = launch(inv, base);
    let mut plan = OutputPlan::new().threads(launch.thread_budget()).widen_floats(inv.precision == Precision::Fp32);
    let declared = declare_inputs(inv, &mut plan)?;
    let per_rank = load_inputs(inv, &plan, &declared)?;
    Ok(Prepared { plan, declared, per_rank, launch })
}

impl Prepared {
    /// Runs the kernel on every rank: each rank's outputs in return order. An
    /// error the inputs caused is a usage error naming them.
    pub fn launch(&self, inv: &Invocation) -> Result<Vec<Vec<Tensor>>, CliError> {
        let entry = inv.kernel.entry.ok_or_else(|| CliError::usage(format!("{} cannot be run from the command line", inv.kernel.name)))?;
        deadline::bound(self.launch.clone())
            .run_ranks(|ctx| entry(ctx, &self.per_rank[ctx.rank()]))
            .map_err(|e| refusal(inv, &self.plan, &self.declared, &e))
    }
}

/// The launch the flags describe on `base` (the profiled launch under `nki profile`).
fn launch(inv: &Invocation, base: Launch) -> Launch {
    let base = match inv.target {
        Some(g) => base.generation(g),
        None => base,
    };
    let lnc = inv.lnc.unwrap_or(base.hardware().limits().default_lnc);
    let launch = base.lnc(lnc).ranks(inv.ranks).precision(inv.precision);
    match inv.threads {
        Some(n) => launch.threads(n),
        None => launch,
    }
}

/// Each tensor parameter's declared input files (one per rank when its path
/// holds `{rank}`, else one shared by every rank), by parameter index; each
/// file's header checked against the parameter's dtype contract before any
/// payload is read. A path ending in `:DTYPE` names a file of DTYPE's raw
/// codes ([`nki::io::npy::NpyType::codes_of`]: the float8 and packed MX dtypes, which `.npy`
/// has no element type for).
fn declare_inputs(inv: &Invocation, plan: &mut OutputPlan) -> Result<Vec<Option<Vec<Input>>>, CliError> {
    let mut declared = Vec::with_capacity(inv.params.len());
    for (p, given) in &inv.params {
        let Some(Given::Path(given)) = given else {
            declared.push(None);
            continue;
        };
        let (pattern, codes) = args::split_codes(given);
        let paths: Vec<PathBuf> = if pattern.contains(RANK_PLACEHOLDER) {
            (0..inv.ranks).map(|rank| PathBuf::from(pattern.replace(RANK_PLACEHOLDER, &rank.to_string()))).collect()
        } else {
            vec![PathBuf::from(pattern)]
        };
        let mut inputs = Vec::with_capacity(paths.len());
        for path in &paths {
            let i = plan.input(flag_of(p.name).trim_start_matches("--"), path).map_err(CliError::usage)?;
            if let Some(dtype) = codes {
                plan.read_as_codes_of(i, dtype).map_err(CliError::usage)?;
            }
            let dtype = plan.header(i).dtype();
            p.check_dtype(inv.kernel.name, dtype)
                .map_err(|e| CliError::usage(format!("{}: {e}{}", plan.describe(i), args::codes_hint(p, dtype))))?;
            inputs.push(i);
        }
        declared.push(Some(inputs));
    }
    Ok(declared)
}

/// Each rank's argument list: the other values parsed from their text (each
/// checked against its parameter's range), then the tensors read from their
/// declared files.
fn load_inputs(inv: &Invocation, plan: &OutputPlan, declared: &[Option<Vec<Input>>]) -> Result<Vec<Vec<Option<ArgValue>>>, CliError> {
    let mut per_rank: Vec<Vec<Option<ArgValue>>> = vec![Vec::with_capacity(inv.params.len()); inv.ranks];
    let mut values = Vec::with_capacity(inv.params.len());
    for (p, given) in &inv.params {
        values.push(match given {
            Some(Given::Text(text)) => Some(args::parse_scalar(inv.kernel.name, p, text).map_err(CliError::usage)?),
            _ => None,
        });
    }
    for ((v, (p, _)), inputs) in values.into_iter().zip(&inv.params).zip(declared) {
        match (v, inputs) {
            (Some(v), _) => per_rank.iter_mut().for_each(|a| a.push(Some(v.clone()))),
            (None, Some(inputs)) => {
                let tensors = plan.read_all(inputs).into_iter().map(|r| r.map(|t| t.named(p.name))).collect::<Result<Vec<_>, _>>();
                let tensors = tensors.map_err(CliError::usage)?;
                for (rank, a) in per_rank.iter_mut().enumerate() {
                    a.push(Some(ArgValue::Tensor(tensors[if tensors.len() == 1 { 0 } else { rank }].clone())));
                }
            }
            (None, None) => per_rank.iter_mut().for_each(|a| a.push(None)),
        }
    }
    Ok(per_rank)
}

/// A failed run as the command reports it: an error the inputs caused (the
/// kernel's asserts, an argument, shape, dtype or bounds rule) is a usage error
/// that lists the inputs it was given; anything else is a failure.
fn refusal(inv: &Invocation, plan: &OutputPlan, declared: &[Option<Vec<Input>>], e: &NkiError) -> CliError {
    if !super::error::caused_by_inputs(e) {
        return super::run::launch_error(e);
    }
    let inputs: Vec<String> = declared
        .iter()
        .flatten()
        .flatten()
        .map(|&i| {
            let h = plan.header(i);
            format!("{}: {} {:?}", plan.describe(i), h.dtype(), h.shape())
        })
        .collect();
    CliError::usage(format!("{} refused its inputs ({}): {e}", inv.kernel.name, inputs.join(", ")))
}
