//! `nki profile <kernel>`: runs a kernel like `nki run` (the same flags: any
//! registered kernel with its parameters' flags, `--out DIR` optional; the
//! attention commands with theirs) with profiling on, then prints its estimated
//! Trainium timeline: time, per-engine busy fractions, the critical path,
//! achieved vs peak rates and on-chip peaks; `--json` prints the report as one
//! JSON object, `--trace` writes a Chrome/Perfetto trace.

use super::output_plan::STATUS_TO_STDERR;
use super::run::{BASE_LAUNCH, Kernel, run_kernel};
use super::{CliError, generic};
use clap::{Args, Subcommand};
use nki::profile::Target;
use nki::{Allocator, Launch};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

/// Arguments of `nki profile`.
#[derive(Args)]
pub struct ProfileArgs {
    #[command(subcommand)]
    kernel: Profiled,
    /// The Trainium generation to model: trn1, trn2 or trn3.
    #[arg(long, global = true, default_value = "trn2", value_parser = parse_target)]
    target: Target,
    /// Also write the timeline as Chrome/Perfetto trace-event JSON (opens in ui.perfetto.dev).
    #[arg(long, global = true, value_name = "FILE", value_parser = parse_output)]
    trace: Option<PathBuf>,
    /// Print the report as one JSON object instead of text.
    #[arg(long, global = true)]
    json: bool,
    /// How SBUF tiles without `address=` are placed: `default` (each its own
    /// buffer) or `stack` (the stack allocator: a loop's next iteration reuses
    /// the bytes the previous one freed and waits for it).
    #[arg(long, global = true, default_value = "default", value_parser = parse_allocator)]
    allocator: Allocator,
}

impl ProfileArgs {
    /// The report options parsed before the kernel's name.
    fn report(&self) -> Report {
        Report { target: self.target, trace: self.trace.clone(), json: self.json, allocator: self.allocator }
    }
}

/// What `nki profile` runs: what `nki run` runs.
#[derive(Subcommand)]
enum Profiled {
    #[command(flatten)]
    Attention(Box<Kernel>),
    /// Any kernel `nki list` shows: `KERNEL --PARAM FILE.npy|VALUE ... [--out DIR]`
    #[command(external_subcommand)]
    Registered(Vec<String>),
}

/// `--target`: a generation name.
pub(super) fn parse_target(s: &str) -> Result<Target, String> {
    Target::parse(s).ok_or_else(|| format!("unknown target '{s}'; expected trn1, trn2 or trn3"))
}

/// `--allocator`: `default` or `stack`.
pub(super) fn parse_allocator(s: &str) -> Result<Allocator, String> {
    match s {
        "default" => Ok(Allocator::Default),
        "stack" => Ok(Allocator::Stack),
        _ => Err(format!("unknown allocator '{s}'; expected default or stack")),
    }
}

/// How every trace this command writes begins.
const TRACE_START: &[u8] = b"{\"traceEvents\"";

/// `--trace`: a file path whose directory exists, naming a new file or an earlier
/// trace (never an input or any other file).
pub(super) fn parse_output(s: &str) -> Result<PathBuf, String> {
    let p = PathBuf::from(s);
    if s.is_empty() || p.is_dir() {
        return Err("expected a file path".to_string());
    }
    if p.exists() {
        let mut start = vec![0u8; TRACE_START.len()];
        let is_trace = fs::File::open(&p).and_then(|mut f| std::io::Read::read_exact(&mut f, &mut start)).is_ok() && start == TRACE_START;
        if !is_trace {
            return Err("the file exists and is not a trace; refusing to overwrite it".to_string());
        }
    }
    let dir = p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !dir.is_dir() {
        return Err(format!("the directory {} does not exist", dir.display()));
    }
    Ok(p)
}

/// Writes `text` to `path` all or nothing: a sibling temporary file renamed over it.
pub(super) fn write_atomically(path: &Path, text: &str) -> Result<(), String> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.nki-{}.tmp", std::process::id()));
    let written = fs::File::create(&tmp).and_then(|mut f| {
        f.write_all(text.as_bytes())?;
        f.sync_all()
    });
    let renamed = written.and_then(|()| fs::rename(&tmp, path));
    renamed.map_err(|e| {
        let _ = fs::remove_file(&tmp);
        format!("--trace {}: {e}", path.display())
    })
}

/// The report options: the parsed ones, or for a registered kernel also the
/// ones given among its flags (which clap hands over unparsed).
pub(super) struct Report {
    /// `--target`.
    pub target: Target,
    /// `--trace FILE`.
    pub trace: Option<PathBuf>,
    /// `--json`.
    pub json: bool,
    /// `--allocator`.
    pub allocator: Allocator,
}

/// Takes `--target`, `--trace`, `--json` and `--allocator` out of a registered kernel's flags,
/// over the parsed ones in `report`.
pub(super) fn take_report_flags(mut report: Report, raw: &[String]) -> Result<(Report, Vec<String>), CliError> {
    let mut rest = Vec::with_capacity(raw.len());
    let mut it = raw.iter();
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) => (f, Some(v.to_string())),
            None => (arg.as_str(), None),
        };
        let mut value = || inline.clone().or_else(|| it.next().cloned()).ok_or_else(|| CliError::usage(format!("{flag} needs a value")));
        match flag {
            "--json" if inline.is_none() => report.json = true,
            "--target" => {
                let v = value()?;
                report.target = parse_target(&v).map_err(|e| CliError::usage(format!("invalid value '{v}' for '--target': {e}")))?;
            }
            "--allocator" => {
                let v = value()?;
                report.allocator =
                    parse_allocator(&v).map_err(|e| CliError::usage(format!("invalid value '{v}' for '--allocator': {e}")))?;
            }
            "--trace" => {
                let v = value()?;
                report.trace = Some(parse_output(&v).map_err(|e| CliError::usage(format!("invalid value '{v}' for '--trace': {e}")))?);
            }
            _ => rest.push(arg.clone()),
        }
    }
    Ok((report, rest))
}

/// Runs the kernel profiled, then reports.
pub fn run(args: &ProfileArgs) -> Result<(), CliError> {
    let (report, raw) = match &args.kernel {
        Profiled::Registered(raw) => take_report_flags(args.report(), raw)?,
        Profiled::Attention(_) => (args.report(), Vec::new()),
    };
    let base = Launch::new().allocator(report.allocator).profile(report.target);
    STATUS_TO_STDERR.store(report.json, Ordering::Relaxed);
    BASE_LAUNCH.set(base.clone()).map_err(|_| "a launch was already configured in this process".to_string())?;
    let ran = match &args.kernel {
        Profiled::Attention(k) => run_kernel(k, false).map(|()| true)?,
        Profiled::Registered(_) => generic::run("profile", &raw, false)?,
    };
    if !ran {
        return Ok(());
    }
    let profile = base.profiled().map_err(|e| e.to_string())?;
    if let Some(path) = &report.trace {
        write_atomically(path, &profile.trace_json())?;
    }
    if report.json {
        outln!("{}", profile.report.to_json());
    } else {
        outln!("{}", profile.report);
    }
    Ok(())
}
